"""How long the offline plan and its checks take, as ratios to a baseline measured in the same run.

    python3 dev.py test   # once, to set up .venv and .venv-checkov
    GPUCELL_CHECKOV=.venv-checkov/bin/checkov .venv/bin/python bench/plan_speed.py [--upstream DIR]

The baseline is the plan of the one-region ``dev`` stack, measured in the same run: ratios are comparable across
machines and runs; seconds are printed for context only.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from gpucell.stacks.plan import check, make_plan

REPO = Path(__file__).resolve().parent.parent


def _median_seconds(work: Callable[[], object], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    """Print one line per measurement: name, median seconds, ratio to the baseline."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", type=Path, default=REPO.parent / "shared" / "upstream")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    baseline = _median_seconds(lambda: make_plan(REPO, "dev"), args.repeats)
    prod = make_plan(REPO, "prod-fra1")
    measurements = {
        "plan prod-fra1": lambda: make_plan(REPO, "prod-fra1"),
        "plan prod-iad1": lambda: make_plan(REPO, "prod-iad1"),
        "check prod-fra1 (schemas warm)": lambda: check(prod, list(prod.cells), args.upstream),
    }
    print(f"{'baseline: plan dev':32s} {baseline:8.3f}s     1.0x")
    for name, work in measurements.items():
        seconds = _median_seconds(work, args.repeats)
        print(f"{name:32s} {seconds:8.3f}s  {seconds / baseline:6.1f}x")


if __name__ == "__main__":
    main()
