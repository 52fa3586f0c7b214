"""Plan many mutated stack configs and count what became of them (tests/test_config_fuzz.py's mutants, at scale).

    .venv/bin/python bench/config_fuzz.py [--total 10000] [--show 5]

The total is split evenly over the four bases (dev, prod-fra1, prod-iad1, dev with the keys added since): each
mutant is drawn by the test's hypothesis strategy (derandomized, no shrinking: every example is a census entry, none
stops the run) and planned in-process by ``gpucell plan``, bounded to ``CASE_SECONDS``. Prints, per base and in
total: planned, refused with one line, refused with several lines (one per problem), and every other outcome (exit
1, an exception, a malformed line, a hang) with its first examples. Exit 0 when there is no other outcome, else 1.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from anywhere

from tests.test_config_fuzz import BASES, Path_, mutations, outcome

GOOD = ("planned", "refused, one line", "refused, several lines")


def census(stack: str, examples: int, found: dict[str, list[str]]) -> Counter[str]:
    """Plan ``examples`` mutants of base ``stack``; their outcomes counted, the others' details in ``found``."""
    counts: Counter[str] = Counter()

    @settings(
        max_examples=examples,
        derandomize=True,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(mutations(stack))
    def run(edits: list[tuple[str, Path_, Any]]) -> None:
        try:
            kind, detail = outcome(stack, edits)
        except Exception as exc:  # the harness's own mistake: counted, and the run goes on
            kind, detail = "harness error", f"{type(exc).__name__}: {exc}"
        if kind == "refused":
            kind = "refused, one line" if len(detail.splitlines()) == 1 else "refused, several lines"
        counts[kind] += 1
        if kind not in GOOD:
            found.setdefault(kind, []).append(f"{stack} {edits!r}\n{detail}")

    run()
    return counts


def main() -> int:
    """Run the census and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total", type=int, default=10_000, help="mutants over all bases (default 10000)")
    parser.add_argument("--show", type=int, default=5, help="examples shown of each bad outcome (default 5)")
    args = parser.parse_args()
    found: dict[str, list[str]] = {}
    total: Counter[str] = Counter()
    started = time.monotonic()
    for position, stack in enumerate(BASES):
        share = args.total // len(BASES) + (1 if position < args.total % len(BASES) else 0)
        counts = census(stack, share, found)
        total.update(counts)
        print(f"{stack:14s} {sum(counts.values()):6d} mutants: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    print(f"{'total':14s} {sum(total.values()):6d} mutants in {time.monotonic() - started:.0f} s:")
    for kind in (*GOOD, *sorted(set(total) - set(GOOD))):
        print(f"  {kind:24s} {total[kind]:6d}")
    for kind, examples in found.items():
        print(f"\n{kind} ({len(examples)}):")
        for example in examples[: args.show]:
            print(example.rstrip()[:2000])
    return 0 if not found else 1


if __name__ == "__main__":
    sys.exit(main())
