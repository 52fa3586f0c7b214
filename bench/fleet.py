"""Fleet-scale benchmark: gpucell's plan against the raw Pulumi SDK registering the same resources.

    python3 dev.py bench [--quick] [--repeats N] [--write-doc]
    python3 dev.py bench --simulate [--write-doc]     # only the simulated pulumi up times (bench/simulate.py,
                                                      # bench/waves.py)

For each synthetic size (:mod:`bench.synthetic`: regions x nodes x workloads) and in the same run, interleaved, each
in a fresh process:

- ``plan --json``: ``gpucell plan STACK --json FILE`` (stdout to /dev/null), from reading the stack file to the
  written JSON;
- ``plan``: ``gpucell plan STACK`` without output flags;
- ``replay``: the raw SDK registering exactly the plan's resources (type, name, inputs with their secrets, parent,
  provider, dependencies, options) under the same mock engine: what Pulumi itself costs for this plan;
- ``floor``: the raw SDK registering as many small ConfigMaps, no parents, no dependencies.

Each process times only its work (imports and reading the replay's input excluded) and reports wall and CPU
seconds; the peak of traced Python memory comes from a separate tracemalloc pass, so the timed passes run untraced.
The table prints medians, gpucell's time as a ratio of the replay and of the floor, and growth from size to size.
Import times compare ``import gpucell.stacks.cli`` and ``import gpucell`` with importing only the SDK modules the
CLI's modules import (found by reading their module-level imports): each as measured, and minus a bare
interpreter's start, never below 0 and marked when within the noise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.synthetic import Size, write_stack  # noqa: E402

KINDS = ("plan --json", "plan", "replay", "floor")
FULL: tuple[tuple[str, Size], ...] = (
    ("S", Size(1, 10, 10)),
    ("M", Size(1, 50, 100)),
    ("L-100w", Size(1, 200, 100)),
    ("L", Size(1, 200, 1000)),
    ("3 regions", Size(3, 50, 100)),
    ("10 regions", Size(10, 20, 10)),
)
QUICK: tuple[tuple[str, Size], ...] = (("S", Size(1, 10, 10)), ("M", Size(1, 50, 100)))
GROWTH = (
    ("S", "M", "nodes 5x, workloads 10x"),
    ("M", "L-100w", "nodes 4x"),
    ("L-100w", "L", "workloads 10x"),
    ("M", "3 regions", "regions 3x"),
)
"""(from, to, what grows) size pairs; the first is the one ``--quick`` measures."""
_LIBRARIES = ("pulumi", "pulumi_kubernetes", "pulumi_command", "pulumi_random", "pydantic", "pydantic_core", "yaml")
_SDK_MODULES_CODE = """
import ast, sys, gpucell.stacks.cli

def executed(body):  # the statements importing a module runs: not function bodies, not TYPE_CHECKING blocks
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            yield from executed(node.orelse)
            continue
        yield node
        for field in ("body", "orelse", "finalbody", "handlers"):
            yield from executed(getattr(node, field, []))

found = set()
for name, module in list(sys.modules.items()):
    if name.startswith("gpucell") and getattr(module, "__file__", None):
        for node in executed(ast.parse(open(module.__file__).read()).body):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
print(" ".join(sorted(m for m in found if m.split(".")[0] in LIBRARIES)))
"""


_loaded: list[list[dict[str, Any]]] = []
"""The replay's input, read before the clock starts."""


@dataclass(frozen=True)
class Sample:
    """One measured run."""

    wall: float
    cpu: float
    peak_mib: float
    resources: int


# -- the work, run in a child process ----------------------------------------------------------------------------
def _work(kind: str, project: Path, stack: str, data: Path) -> int:
    """Do one kind of work; returns how many resources were registered."""
    if kind.startswith("plan"):
        from gpucell.stacks import cli  # noqa: PLC0415

        argv = ["plan", stack, "--project-dir", str(project)]
        if kind == "plan --json":
            argv += ["--json", str(project / "plan.json")]
        with open(os.devnull, "w") as sink:
            stdout, sys.stdout = sys.stdout, sink
            try:
                code = cli.main(argv)
            finally:
                sys.stdout = stdout
        if code != 0:
            raise SystemExit(f"gpucell plan failed with exit {code}")
        return len(json.loads(data.read_text()))  # the same program and config registered these
    from bench.replay import floor, replay  # noqa: PLC0415

    registrations = _loaded[0]
    return replay(registrations) if kind == "replay" else floor(len(registrations))


def _child(kind: str, project: Path, stack: str, data: Path, traced: bool) -> None:
    import tracemalloc  # noqa: PLC0415

    if kind.startswith("plan"):
        from gpucell.stacks import cli  # noqa: F401, PLC0415  (imported before the clock starts)
    else:
        import bench.replay  # noqa: F401, PLC0415

        _loaded.append(json.loads(data.read_text()))
    if traced:
        tracemalloc.start()
    wall, cpu = time.perf_counter(), time.process_time()
    count = _work(kind, project, stack, data)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak = tracemalloc.get_traced_memory()[1] / 2**20 if traced else 0.0
    print(json.dumps(asdict(Sample(wall, cpu, peak, count))))


def _measure(kind: str, project: Path, stack: str, data: Path, traced: bool = False) -> Sample:
    done = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(project), stack, str(data), "1" if traced else "0"],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )
    if done.returncode != 0:
        raise SystemExit(f"{kind} failed:\n{done.stderr[-2000:]}")
    return Sample(**json.loads(done.stdout.strip().splitlines()[-1]))


# -- preparing a size ----------------------------------------------------------------------------------------------
def _prepare(size: Size, root: Path) -> tuple[Path, Path]:
    """Write the size's stack and record the plan's registrations (for the replay)."""
    from bench.replay import record_registrations  # noqa: PLC0415

    project = root / str(size).replace("/", "-")
    write_stack(project, "bench", size)
    data = project / "registrations.json"
    record_registrations(project, "bench", data)
    return project, data


NOISE_FLOOR = 0.01
"""Seconds below which the difference of two process starts is taken as noise, however alike the bare runs."""
BARE = "python -c pass"
"""The row of :func:`_imports` timing the interpreter alone (what every import row includes)."""


def _imports(repeats: int) -> dict[str, list[float]]:
    """Seconds of each run of a fresh interpreter doing nothing (:data:`BARE`) and importing each module set."""

    def seconds(code: str) -> list[float]:
        samples = []
        for _ in range(repeats):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
            samples.append(time.perf_counter() - started)
        return samples

    bare = seconds("pass")
    listed = subprocess.run(
        [sys.executable, "-c", f"LIBRARIES = {_LIBRARIES!r}\n{_SDK_MODULES_CODE}"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout.split()
    return {
        BARE: bare,
        "SDK modules the CLI uses": seconds("; ".join(f"import {m}" for m in listed)),
        "gpucell.stacks.cli": seconds("import gpucell.stacks.cli"),
        "gpucell": seconds("import gpucell"),
    }


def import_table(samples: dict[str, list[float]]) -> list[str]:
    """The import rows: each row's median wall seconds as measured, and the import's own share, the median minus
    :data:`BARE`'s median, never below 0.

    A share within the noise (not above :data:`NOISE_FLOOR` nor the spread, max - min, of the bare interpreter's
    samples) is marked ``*`` and a note says so; ``x SDK modules`` is then left empty rather than divided by noise.
    """
    bare = samples[BARE]
    base = statistics.median(bare)
    noise = max(max(bare) - min(bare), NOISE_FLOOR)
    lines = [
        "| import | wall s (median) | minus bare interpreter s | x SDK modules |",
        "|---|---:|---:|---:|",
        f"| `{BARE}` (bare interpreter) | {base:.3f} | | |",
    ]
    share = {name: statistics.median(runs) - base for name, runs in samples.items() if name != BARE}
    sdk = share.get("SDK modules the CLI uses", 0.0)
    noisy = False
    for name, own in share.items():
        below = own <= noise
        noisy |= below
        ratio = "" if below or sdk <= noise else f"{own / sdk:.2f}"
        mark = " *" if below else ""
        lines.append(f"| `{name}` | {statistics.median(samples[name]):.3f} | {max(own, 0.0):.3f}{mark} | {ratio} |")
    if noisy:
        lines += [
            "",
            f"\\* within the noise ({noise:.3f} s: the spread of the bare interpreter's {len(bare)} "
            f"run(s), at least {NOISE_FLOOR} s); more `--repeats` separate them.",
        ]
    return lines


# -- the report ----------------------------------------------------------------------------------------------------
def _median(samples: list[Sample], field: str) -> float:
    return statistics.median(getattr(s, field) for s in samples)


def run(sizes: tuple[tuple[str, Size], ...], repeats: int) -> str:
    """Measure every size and kind; return the report as Markdown."""
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="gpucell-bench-") as tmp:
        for label, size in sizes:
            project, data = _prepare(size, Path(tmp))
            samples: dict[str, list[Sample]] = {kind: [] for kind in KINDS}
            for _ in range(repeats):
                for kind in KINDS:  # interleaved, so that load on the machine hits every kind alike
                    samples[kind].append(_measure(kind, project, "bench", data))
            peaks = {kind: _measure(kind, project, "bench", data, traced=True).peak_mib for kind in KINDS}
            rows[label] = {"size": size, "samples": samples, "peaks": peaks}
            print(f"measured {label} ({size})", file=sys.stderr)
    imports = _imports(repeats)
    return _markdown(rows, imports, repeats)


def growth_table(rows: dict[str, dict[str, Any]]) -> list[str]:
    """The growth rows of the :data:`GROWTH` pairs both measured, or a sentence when the run measured none."""
    pairs = [(before, after, what) for before, after, what in GROWTH if before in rows and after in rows]
    if not pairs:
        return [
            "No growth rows: this run measured no size pair of "
            + ", ".join(f"{before} → {after}" for before, after, _ in GROWTH)
            + "."
        ]
    lines = [
        "| growth | from | to | resources | plan --json time | plan --json peak memory | replay time |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for before, after, what in pairs:
        a, b = rows[before], rows[after]
        ratio = {k: _median(b["samples"][k], "wall") / _median(a["samples"][k], "wall") for k in KINDS}
        count = b["samples"]["plan --json"][0].resources / a["samples"]["plan --json"][0].resources
        memory = b["peaks"]["plan --json"] / a["peaks"]["plan --json"]
        lines.append(
            f"| {what} | {before} | {after} | {count:.2f}x | {ratio['plan --json']:.2f}x | "
            f"{memory:.2f}x | {ratio['replay']:.2f}x |"
        )
    return lines


def _markdown(rows: dict[str, dict[str, Any]], imports: dict[str, list[float]], repeats: int) -> str:
    lines = [
        "| size | regions/nodes/workloads | resources | kind | wall s | CPU s | peak MiB | x replay | x floor |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for label, row in rows.items():
        samples = row["samples"]
        replay, floor = _median(samples["replay"], "wall"), _median(samples["floor"], "wall")
        for kind in KINDS:
            wall = _median(samples[kind], "wall")
            lines.append(
                f"| {label} | {row['size']} | {samples[kind][0].resources} | {kind} | {wall:.2f} | "
                f"{_median(samples[kind], 'cpu'):.2f} | {row['peaks'][kind]:.1f} | {wall / replay:.2f} | "
                f"{wall / floor:.2f} |"
            )
    lines += ["", *growth_table(rows), "", *import_table(imports)]
    lines += [
        "",
        f"Medians of {repeats} interleaved runs per kind; peak memory from one tracemalloc pass per kind.",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}.",
    ]
    return "\n".join(lines) + "\n"


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1 (each kind and size runs that many times)")
    return value


def parser() -> argparse.ArgumentParser:
    """The benchmark's command line."""
    parsed = argparse.ArgumentParser(prog="dev.py bench", description=(__doc__ or "").splitlines()[0])
    parsed.add_argument("--quick", action="store_true", help="only the two smallest sizes (a smoke run)")
    parsed.add_argument(
        "--repeats", type=_positive, default=3, help="interleaved runs per kind and size, at least 1 (default 3)"
    )
    parsed.add_argument(
        "--write-doc",
        action="store_true",
        help="also write the table into docs/performance.md (between its markers); not with --quick",
    )
    parsed.add_argument(
        "--simulate",
        action="store_true",
        help="only the simulated `pulumi up` wall times of new regions and k3s upgrades, and a fleet's upgrade "
        "all at once against waves (bench/simulate.py, bench/waves.py, a few minutes)",
    )
    return parsed


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and run the benchmark (or, with ``--child``, one measurement)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        kind, project, stack, data, traced = argv[1:6]
        _child(kind, Path(project), stack, Path(data), traced == "1")
        return
    command = parser()
    args = command.parse_args(argv)
    if args.quick and args.write_doc:  # the doc records a full run, never a smoke run
        command.error("--write-doc records a full run: leave out --quick")
    from bench.simulate import simulated_table  # noqa: PLC0415
    from bench.waves import waves_table  # noqa: PLC0415

    report = None if args.simulate else run(QUICK if args.quick else FULL, args.repeats)
    simulated = simulated_table(lambda line: print(line, file=sys.stderr))
    waves = waves_table(lambda line: print(line, file=sys.stderr))
    print(f"{report}\n{simulated}\n{waves}" if report else f"{simulated}\n{waves}")
    if args.write_doc:
        if report is not None:
            _write_between("bench", report)
        _write_between("simulate", simulated)
        _write_between("waves", waves)


def _write_between(marker: str, table: str) -> None:
    """Replace what docs/performance.md holds between ``<!-- MARKER:start -->`` and ``<!-- MARKER:end -->``."""
    doc = REPO / "docs" / "performance.md"
    text = doc.read_text()
    start, end = f"<!-- {marker}:start -->\n", f"<!-- {marker}:end -->"
    head, _, rest = text.partition(start)
    _, _, tail = rest.partition(end)
    doc.write_text(f"{head}{start}{table}{end}{tail}")
    print(f"wrote {doc}", file=sys.stderr)


if __name__ == "__main__":
    main()
