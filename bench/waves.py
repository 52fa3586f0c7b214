"""A k3s patch upgrade of a fleet of two 200-node regions: all at once against waves, and the GPUs it takes out.

    python3 dev.py bench --simulate [--write-doc]     # with the new-region table (bench/simulate.py)

One synthetic 200-node region (:mod:`bench.synthetic`) is planned, then planned again with the next k3s patch
release against it; :func:`gpucell.stacks.estimate.timeline` walks that upgrade's graph with the per-step estimates
(a ``-prepare`` drain 240 s, an agent's upgrade 90 s, a ``-settle`` 90 s), which gives each node's steps a start and
a finish. Both regions are that region: they share no edge, so a fleet run is the two timelines placed side by side.

- **all at once**: both regions from the start, as one stack (or two runs) would;
- **waves**: the canary region, then a bake of :data:`FLEET_BAKE_MINUTES` (deploy.yml's default), then the other;
- the holds inside a region: **whole pool** (before issue 29: a GPU pool's first ``-prepare`` holds every other node
  of the pool needing the version until its own turn) or **next window** (node *j* is held from the start of node
  *j - maxUnavailable*'s ``-prepare``, the first that holds it, to the start of its own);
- with ``rollout.bakeMinutes`` every agent's ``-settle`` is that much longer (the node is back in service meanwhile;
  the next node of its window waits).

A GPU node is out of service while in maintenance (from its ``-prepare``'s start to its ``-settle``'s end, bake not
counted) and while held. Each table is at one ``rollout.maxUnavailable`` on every agent pool; every figure is also
given as a ratio of the table's first row (all at once, whole pool held), the same simulated run: no figure is a
measured time.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bench.synthetic import Size, write_stack
from gpucell.stacks.estimate import timeline
from gpucell.stacks.plan import make_plan, to_json

__all__ = [
    "FLEET_BAKE_MINUTES",
    "FLEET_WINDOWS",
    "Run",
    "Scenario",
    "fleet_runs",
    "held_out",
    "region_factory",
    "waves_table",
]

FLEET_NODES = 200
"""Nodes per region (servers included)."""
FLEET_WINDOWS = (1, 10)
"""The ``rollout.maxUnavailable`` of every agent pool, one table each."""
FLEET_BAKE_MINUTES = 30
"""The bake between the canary region and the rest (``bake-minutes`` of .github/workflows/deploy.yml)."""
POOL_BAKE_MINUTES = 5
"""``rollout.bakeMinutes`` of the scenario with a bake between windows."""
_UPGRADE = {"versions": {"k3s": "v1.34.3+k3s1"}, "k3s": {"installerSha256": "0" * 64}}


@dataclass(frozen=True)
class Scenario:
    """One way to roll the fleet."""

    name: str
    """As the table prints it."""
    waves: bool
    """Canary region, the fleet bake, then the other (else both at once)."""
    whole_pool: bool
    """The holds before issue 29: a GPU pool's first ``-prepare`` holds the pool (else the next window)."""
    pool_bake_minutes: int = 0
    """``rollout.bakeMinutes`` on every agent pool."""


SCENARIOS = (
    Scenario("all at once, whole pool held (before)", waves=False, whole_pool=True),
    Scenario("all at once, next window held", waves=False, whole_pool=False),
    Scenario(f"waves: canary, {FLEET_BAKE_MINUTES} min bake, the rest", waves=True, whole_pool=False),
    Scenario(
        f"waves, and bakeMinutes {POOL_BAKE_MINUTES} between windows",
        waves=True,
        whole_pool=False,
        pool_bake_minutes=POOL_BAKE_MINUTES,
    ),
)


@dataclass(frozen=True)
class Run:
    """One scenario's figures for the fleet."""

    seconds: float
    """Wall time, from the first region's start to the last region's end."""
    gpu_hours: float
    """GPU-hours out of service (maintenance and held)."""
    held_gpu_hours: float
    """Of which held (cordoned while waiting for their own turn)."""
    peak_gpus: int
    """The most GPUs out of service at one time."""


Interval = tuple[float, float, int]
"""(start, end, GPUs) out of service."""


def held_out(
    pools: Iterable[tuple[list[str], int]],
    steps: dict[str, tuple[float, float]],
    window: int,
    *,
    whole_pool: bool,
    bake: float = 0.0,
) -> tuple[list[Interval], list[Interval]]:
    """(in maintenance, held) intervals of one region's GPU nodes: ``pools`` lists each GPU pool's host names in the
    rollout's order and its GPUs per node, ``steps`` maps ``<host>-prepare``/``<host>-settle`` to (start, finish)
    (:func:`gpucell.stacks.estimate.timeline`, names ending so), ``bake`` the seconds of each settle that are a
    bake (the node back in service). A node whose ``-prepare`` takes no time needs no maintenance and is skipped."""
    maintenance: list[Interval] = []
    held: list[Interval] = []
    for hosts, gpus in pools:
        prepares = [steps[f"{h}-prepare"] for h in hosts]
        settles = [steps[f"{h}-settle"] for h in hosts]
        rolling = [i for i, (start, end) in enumerate(prepares) if end > start]
        if not rolling:
            continue
        first = min(prepares[i][0] for i in rolling)
        for i in rolling:
            maintenance.append((prepares[i][0], settles[i][1] - bake, gpus))
            holder = first if whole_pool else prepares[max(0, i - window)][0]
            if prepares[i][0] > holder:
                held.append((holder, prepares[i][0], gpus))
    return maintenance, held


def _gpu_hours(intervals: Iterable[Interval]) -> float:
    return sum((end - start) * gpus for start, end, gpus in intervals) / 3600


def _peak(intervals: Iterable[Interval]) -> int:
    events = sorted(e for start, end, gpus in intervals for e in ((start, gpus), (end, -gpus)))  # ends first on ties
    peak = current = 0
    for _, change in events:
        current += change
        peak = max(peak, current)
    return peak


def _suffixed(steps: dict[str, tuple[float, float]], hosts: Iterable[str]) -> dict[str, tuple[float, float]]:
    """``<host>-prepare``/``-settle`` -> (start, finish), from resource names that end so (``r0-k3s-<host>-...``)."""
    wanted = {f"-{h}-{step}": f"{h}-{step}" for h in hosts for step in ("prepare", "settle")}
    return {wanted[key]: value for name, value in steps.items() for key in wanted if name.endswith(key)}


def fleet_runs(
    region: Callable[[int, int], tuple[dict[str, tuple[float, float]], float]],
    pools: list[tuple[list[str], int]],
    window: int,
) -> dict[Scenario, Run]:
    """Each scenario's :class:`Run` of two regions alike: ``region(window, bake_minutes)`` gives one region's upgrade
    timeline (``<host>-prepare``/``-settle`` -> (start, finish)) and its wall seconds."""
    found: dict[Scenario, Run] = {}
    for scenario in SCENARIOS:
        steps, seconds = region(window, scenario.pool_bake_minutes)
        maintenance, held = held_out(
            pools, steps, window, whole_pool=scenario.whole_pool, bake=scenario.pool_bake_minutes * 60.0
        )
        offset = seconds + FLEET_BAKE_MINUTES * 60 if scenario.waves else 0.0
        second = [(start + offset, end + offset, gpus) for start, end, gpus in (*maintenance, *held)]
        every = [*maintenance, *held, *second]
        found[scenario] = Run(
            seconds=offset + seconds,
            gpu_hours=_gpu_hours(every),
            held_gpu_hours=2 * _gpu_hours(held),
            peak_gpus=_peak(every),
        )
    return found


def region_factory(
    project: Path, nodes: int = FLEET_NODES
) -> tuple[Callable[[int, int], tuple[dict[str, Any], float]], list[Any]]:
    """A synthetic region of ``nodes`` written into ``project``: its upgrade's timeline by (window, bakeMinutes), as
    :func:`fleet_runs` takes it, and its GPU pools (hosts in order, GPUs per node)."""
    write_stack(project, "bench", Size(1, nodes, 10))
    base = to_json(make_plan(project, "bench"), ["r0"])
    inputs = {r["urn"].replace("urn:pulumi:bench::", "urn:pulumi:up::", 1): r["inputs"] for r in base["resources"]}
    config = yaml.safe_load((project / "Pulumi.bench.yaml").read_text())
    node_pools = config["config"]["gpucell:regions"]["r0"]["nodePools"]
    pools = [([h["name"] for h in p["hosts"]], p["gpusPerNode"]) for p in node_pools.values() if p["role"] == "gpu"]
    agents = [h["name"] for p in node_pools.values() if p["role"] != "server" for h in p["hosts"]]

    def region(window: int, bake_minutes: int) -> tuple[dict[str, Any], float]:
        region_config = config["config"]["gpucell:regions"]["r0"]
        region_config.update(_UPGRADE)
        for pool in region_config["nodePools"].values():
            if pool["role"] != "server":
                pool["rollout"] = {"maxUnavailable": window}
        (project / "Pulumi.up.yaml").write_text(yaml.safe_dump(config, sort_keys=False, width=200))
        registrations = make_plan(project, "up", last_deployment=base["outputs"]).region_resources("r0")
        settles = {
            r.name: bake_minutes * 60.0 for r in registrations if r.name.endswith(tuple(f"-{a}-settle" for a in agents))
        }
        steps = timeline(registrations, inputs, settles)
        return _suffixed(steps, agents), max(end for _, end in steps.values())

    return region, pools


def waves_table(progress: Callable[[str], None] = lambda _: None) -> str:
    """The fleet tables as Markdown, one per :data:`FLEET_WINDOWS`."""
    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="gpucell-waves-") as tmp:
        region, pools = region_factory(Path(tmp))
        cache: dict[tuple[int, int], tuple[dict[str, Any], float]] = {}

        def cached(window: int, bake_minutes: int) -> tuple[dict[str, Any], float]:
            if (window, bake_minutes) not in cache:
                cache[window, bake_minutes] = region(window, bake_minutes)
                progress(f"simulated a k3s upgrade at maxUnavailable {window}, bakeMinutes {bake_minutes}")
            return cache[window, bake_minutes]

        gpus = sum(len(hosts) * per_node for hosts, per_node in pools)
        for window in FLEET_WINDOWS:
            runs = fleet_runs(cached, pools, window)
            lines += _table(runs, window, 2 * gpus)
    return "\n".join(lines) + "\n"


def _table(runs: dict[Scenario, Run], window: int, gpus: int) -> list[str]:
    baseline = runs[SCENARIOS[0]]
    lines = [
        f"maxUnavailable {window} on every agent pool ({gpus} GPUs in the fleet):",
        "",
        "| run | wall time | x | GPU-hours out of service | x | of which held | peak GPUs out | x |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for scenario, run in runs.items():
        lines.append(
            f"| {scenario.name} | {run.seconds / 3600:.1f} h | {run.seconds / baseline.seconds:.2f} | "
            f"{run.gpu_hours:,.0f} | {run.gpu_hours / baseline.gpu_hours:.2f} | {run.held_gpu_hours:,.0f} | "
            f"{run.peak_gpus} | {run.peak_gpus / baseline.peak_gpus:.2f} |"
        )
    return [*lines, ""]
