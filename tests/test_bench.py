"""The fleet benchmark's report (bench/fleet.py): import rows never negative, growth rows for --quick, its options."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import fleet
from bench.fleet import BARE, QUICK, Sample, growth_table, import_table, parser


def test_an_import_faster_than_the_bare_interpreter_is_0_and_marked_as_noise() -> None:
    lines = import_table(
        {BARE: [0.30], "SDK modules the CLI uses": [0.90], "gpucell.stacks.cli": [1.50], "gpucell": [0.25]}
    )
    assert lines == [
        "| import | wall s (median) | minus bare interpreter s | x SDK modules |",
        "|---|---:|---:|---:|",
        "| `python -c pass` (bare interpreter) | 0.300 | | |",
        "| `SDK modules the CLI uses` | 0.900 | 0.600 | 1.00 |",
        "| `gpucell.stacks.cli` | 1.500 | 1.200 | 2.00 |",
        "| `gpucell` | 0.250 | 0.000 * |  |",
        "",
        "\\* within the noise (0.010 s: the spread of the bare interpreter's 1 run(s), at least 0.01 s); more "
        "`--repeats` separate them.",
    ]


def test_a_difference_of_a_few_milliseconds_is_noise_even_with_one_run() -> None:
    lines = import_table(
        {BARE: [0.088], "SDK modules the CLI uses": [2.747], "gpucell.stacks.cli": [3.752], "gpucell": [0.092]}
    )
    assert lines[5] == "| `gpucell` | 0.092 | 0.004 * |  |"


def test_import_differences_within_the_spread_of_bare_runs_are_marked() -> None:
    lines = import_table(
        {
            BARE: [0.20, 0.30, 0.40],
            "SDK modules the CLI uses": [1.0, 1.1, 1.2],
            "gpucell.stacks.cli": [0.45, 0.50, 0.55],
            "gpucell": [0.35, 0.40, 0.45],
        }
    )
    assert lines[3:6] == [
        "| `SDK modules the CLI uses` | 1.100 | 0.800 | 1.00 |",
        "| `gpucell.stacks.cli` | 0.500 | 0.200 * |  |",
        "| `gpucell` | 0.400 | 0.100 * |  |",
    ]
    assert not any("-" in line.split("|")[3] for line in lines[3:6])


def rows(*labels: str) -> dict[str, dict[str, Any]]:
    sizes = dict(fleet.FULL)
    out: dict[str, dict[str, Any]] = {}
    for scale, label in enumerate(labels, 1):
        sample = Sample(wall=float(scale), cpu=float(scale), peak_mib=10.0 * scale, resources=100 * scale)
        out[label] = {
            "size": sizes[label],
            "samples": {k: [sample] for k in fleet.KINDS},
            "peaks": dict.fromkeys(fleet.KINDS, 10.0 * scale),
        }
    return out


def test_quick_sizes_have_a_growth_row() -> None:
    assert [label for label, _ in QUICK] == ["S", "M"]
    assert growth_table(rows("S", "M"))[2:] == ["| nodes 5x, workloads 10x | S | M | 2.00x | 2.00x | 2.00x | 2.00x |"]


def test_a_run_with_no_growth_pair_says_so_instead_of_an_empty_table() -> None:
    assert growth_table(rows("S")) == [
        "No growth rows: this run measured no size pair of S → M, M → L-100w, L-100w → L, M → 3 regions."
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--repeats", "0"], "argument --repeats: 0 is not at least 1 (each kind and size runs that many times)"),
        (["--repeats", "-2"], "argument --repeats: -2 is not at least 1 (each kind and size runs that many times)"),
        (["--repeats", "x"], "argument --repeats: 'x' is not a whole number"),
    ],
)
def test_repeats_below_1_are_a_usage_error(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        parser().parse_args(argv)
    assert info.value.code == 2
    assert capsys.readouterr().err.endswith(f"dev.py bench: error: {message}\n")


def test_a_quick_run_never_writes_the_doc(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        fleet.main(["--quick", "--write-doc"])
    assert info.value.code == 2
    assert capsys.readouterr().err.endswith("dev.py bench: error: --write-doc records a full run: leave out --quick\n")


def test_simulated_first_joins_come_close_to_the_limit_and_far_below_the_old_chain(tmp_path: Any) -> None:
    from bench.simulate import without_join_window
    from bench.synthetic import Size, write_stack
    from gpucell.stacks.estimate import estimate
    from gpucell.stacks.plan import make_plan

    write_stack(tmp_path, "s", Size(1, 60, 10))  # 57 agents, the largest pool (cpu) 19 of them
    plan = make_plan(tmp_path, "s")
    registrations = plan.region_resources("r0")
    windowed, limit = estimate(registrations), estimate(without_join_window(registrations))
    deployed = {k: v for k, v in plan.result.outputs.items() if k.startswith("r0")}  # the process may hold others
    chained = estimate(make_plan(tmp_path, "s", last_deployment=deployed).region_resources("r0"))
    assert limit.seconds <= windowed.seconds < chained.seconds
    assert limit.chain[:4] == (
        "r0-k3s-r0-srv-0-prepare",
        "r0-k3s-r0-srv-0",
        "r0-k3s-kubeconfig",
        "r0-k3s-r0-srv-0-labels",
    )
    # the old order walks a pool node by node: with acceptance (decision 0037) a GPU node's settle is the longest, so
    # the chain is the H200 pool's, every one of its settles
    h200 = sorted(r.name for r in registrations if r.name.startswith("r0-k3s-r0-h200-") and r.name.endswith("-settle"))
    assert len(h200) == 11
    assert sorted(n for n in chained.chain if n.startswith("r0-k3s-r0-h200-") and n.endswith("-settle")) == h200
    # the limit keeps every server's chain but no agent waits for another agent
    kept = {r.name: r for r in without_join_window(registrations)}
    by_urn = {r.urn: r.name for r in registrations}
    assert {by_urn[u] for u in kept["r0-k3s-r0-cpu-17-settle"].dependencies} == {"r0-k3s-r0-cpu-17-labels"}
    assert {by_urn[u] for u in kept["r0-k3s-r0-srv-1-prepare"].dependencies} == {"r0-k3s-r0-srv-0-settle"}


def test_simulate_is_an_option_of_its_own() -> None:
    args = parser().parse_args(["--simulate", "--write-doc"])
    assert (args.simulate, args.write_doc, args.quick) == (True, True, False)


# -- bench/waves.py: a fleet's k3s upgrade all at once against waves (issue 29) ------------------------------------
def _pool_steps(hosts: list[str], window: int) -> dict[str, tuple[float, float]]:
    """A pool's rollout chain as the cluster builds it: node i's prepare (10 s) after node i - window's settle; the
    settle ends 100 s after the prepare began."""
    steps: dict[str, tuple[float, float]] = {}
    for i, host in enumerate(hosts):
        start = steps[f"{hosts[i - window]}-settle"][1] if i >= window else 0.0
        steps[f"{host}-prepare"] = (start, start + 10)
        steps[f"{host}-settle"] = (start + 90, start + 100)
    return steps


def test_the_whole_pool_was_held_the_next_window_is() -> None:
    from bench.waves import held_out

    hosts = ["g-0", "g-1", "g-2", "g-3"]
    steps = _pool_steps(hosts, 1)
    maintenance, pool = held_out([(hosts, 8)], steps, 1, whole_pool=True)
    assert maintenance == [(0.0, 100.0, 8), (100.0, 200.0, 8), (200.0, 300.0, 8), (300.0, 400.0, 8)]
    assert pool == [(0.0, 100.0, 8), (0.0, 200.0, 8), (0.0, 300.0, 8)]
    _, window = held_out([(hosts, 8)], steps, 1, whole_pool=False)
    assert window == [(0.0, 100.0, 8), (100.0, 200.0, 8), (200.0, 300.0, 8)]
    # two at a time: g-1 starts with g-0 (never held), g-2 from g-0's start, g-3 from g-1's
    _, window = held_out([(hosts, 8)], _pool_steps(hosts, 2), 2, whole_pool=False)
    assert window == [(0.0, 100.0, 8), (0.0, 100.0, 8)]
    # a node whose prepare takes no time needs nothing: neither in maintenance nor held
    steps["g-3-prepare"] = (300.0, 300.0)
    maintenance, pool = held_out([(hosts, 8)], steps, 1, whole_pool=True)
    assert (len(maintenance), len(pool)) == (3, 2)


def test_waves_take_longer_and_hold_less_than_all_at_once() -> None:
    from bench.waves import FLEET_BAKE_MINUTES, SCENARIOS, fleet_runs

    hosts = ["g-0", "g-1", "g-2", "g-3"]

    def region(window: int, bake_minutes: int) -> tuple[dict[str, tuple[float, float]], float]:
        assert bake_minutes in (0, 5)
        return _pool_steps(hosts, window), 400.0

    runs = list(fleet_runs(region, [(hosts, 8)], 1).values())
    before, window, waves = runs[0], runs[1], runs[2]
    assert [s.name for s in SCENARIOS][:3] == [
        "all at once, whole pool held (before)",
        "all at once, next window held",
        f"waves: canary, {FLEET_BAKE_MINUTES} min bake, the rest",
    ]
    assert (before.seconds, window.seconds, waves.seconds) == (400.0, 400.0, 400.0 + FLEET_BAKE_MINUTES * 60 + 400.0)
    assert (before.held_gpu_hours, window.held_gpu_hours) == (2 * 600 * 8 / 3600, 2 * 300 * 8 / 3600)
    # at the start: g-0 in maintenance and the pool's 3 others held, in both regions at once
    assert (before.peak_gpus, window.peak_gpus, waves.peak_gpus) == (64, 32, 16)


def test_the_fleet_simulation_reads_a_real_upgrade_plan(tmp_path: Path) -> None:
    """bench/waves.py on a 10-node region: the plan's step names are found, and the figures hold together."""
    from bench.waves import FLEET_BAKE_MINUTES, fleet_runs, region_factory

    region, pools = region_factory(tmp_path, nodes=10)
    assert [len(hosts) for hosts, _ in pools] == [1, 1, 1, 1]  # h100-vm, h200, h200-mig, l40s-vgpu: 8 GPUs each
    before, window, waves, baked = fleet_runs(region, pools, 1).values()
    # one node a pool: nothing to hold, 8 x 4 GPUs x 2 regions out at once, and each in maintenance for as long
    assert (before.held_gpu_hours, window.held_gpu_hours, before.peak_gpus, waves.peak_gpus) == (0, 0, 64, 32)
    assert before.gpu_hours == window.gpu_hours == waves.gpu_hours > 0
    assert waves.seconds == 2 * before.seconds + FLEET_BAKE_MINUTES * 60
    assert baked.seconds > waves.seconds
