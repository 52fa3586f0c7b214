"""``gpucell``: the command line. ``gpucell plan STACK`` prints (and optionally writes) the offline plan."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from components.errors import ConfigError
from stacks.plan import make_plan, render_tree, write_json, write_out

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_CONFIG = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpucell", description="Plan gpucell regional cells offline.")
    commands = parser.add_subparsers(dest="command", required=True)
    plan = commands.add_parser(
        "plan",
        help="run the stack's program under Pulumi's mock engine and print the resource tree",
        description="Offline plan: the same program `pulumi up` runs, evaluated in-process with no cluster, "
        "no Pulumi CLI and no decryption (secure: values become secret placeholders).",
    )
    plan.add_argument("stack", help="stack name; reads Pulumi.STACK.yaml")
    plan.add_argument("--region", help="only this region (default: all regions of the stack)")
    plan.add_argument("--out", type=Path, metavar="DIR",
                      help="write manifests, Helm values and node files under DIR/<region>/")
    plan.add_argument("--json", type=Path, metavar="FILE", help="write the plan as JSON to FILE")
    plan.add_argument("--preview", action="store_true",
                      help="leave provider-computed values unknown, as a region's first `pulumi preview` sees them")
    plan.add_argument("--project-dir", type=Path, default=Path.cwd(), metavar="DIR",
                      help="directory holding Pulumi.yaml (default: the current directory)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the CLI. Exit codes: 0 success, 2 configuration error (one line per problem), 1 anything else."""
    args = _parser().parse_args(argv)
    try:
        plan = make_plan(args.project_dir, args.stack, preview=args.preview, region=args.region)
        regions = [args.region] if args.region else list(plan.cells)
        print(render_tree(plan, regions))
        if args.out:
            files = write_out(plan, regions, args.out)
            print(f"wrote {len(files)} files under {args.out}")
        if args.json:
            write_json(plan, regions, args.json)
            print(f"wrote {args.json}")
    except ConfigError as exc:
        for line in exc.lines:
            print(line, file=sys.stderr)
        return EXIT_CONFIG
    except Exception as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
