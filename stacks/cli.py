"""``gpucell``: the command line.

- ``gpucell plan STACK`` prints (and optionally writes, and checks) the offline plan;
- ``gpucell schemas fetch STACK`` downloads the upstream schemas for the versions the stack pins.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpucell.errors import ConfigError
from gpucell.stacks.conformance.problems import MissingToolError
from gpucell.stacks.conformance.schemas import DEFAULT_BASE_URL, default_cache_dir, fetch
from gpucell.stacks.plan import check, check_schema_dir, make_plan, render_tree, write_json, write_out

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_CONFIG = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpucell", description="Plan and check gpucell regional cells offline.")
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
    plan.add_argument("--check", action="store_true",
                      help="check every object, chart value, script and node config against upstream; exit 1 on "
                      "any problem")
    plan.add_argument("--schemas", type=Path, default=None, metavar="DIR",
                      help=f"upstream schemas for --check (default: {default_cache_dir()})")
    _project_dir(plan)

    schemas = commands.add_parser("schemas", help="manage the upstream schemas --check reads")
    schemas_commands = schemas.add_subparsers(dest="schemas_command", required=True)
    fetch_cmd = schemas_commands.add_parser(
        "fetch", help="download the schemas and chart values for the versions STACK pins",
    )
    fetch_cmd.add_argument("stack", help="stack name; reads Pulumi.STACK.yaml for the pinned versions")
    fetch_cmd.add_argument("--dest", type=Path, default=None, metavar="DIR",
                           help=f"where to write them (default: {default_cache_dir()})")
    fetch_cmd.add_argument("--base-url", default=DEFAULT_BASE_URL,
                           help="where upstream files are served as BASE/<repo>/<tag>/<path> "
                           f"(default: {DEFAULT_BASE_URL})")
    _project_dir(fetch_cmd)
    return parser


def _project_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--project-dir", type=Path, default=Path.cwd(), metavar="DIR",
                        help="directory holding Pulumi.yaml (default: the current directory)")


def _plan(args: argparse.Namespace) -> int:
    schemas = args.schemas or default_cache_dir()
    if args.check:
        check_schema_dir(schemas, args.stack)  # before the plan: a wrong --schemas fails at once
    plan = make_plan(args.project_dir, args.stack, preview=args.preview, region=args.region)
    regions = [args.region] if args.region else list(plan.cells)
    print(render_tree(plan, regions))
    for warning in plan.result.warnings:
        print(f"warning: {warning}")
    if args.out:
        files = write_out(plan, regions, args.out)
        print(f"wrote {len(files)} files under {args.out}")
    if args.json:
        write_json(plan, regions, args.json)
        print(f"wrote {args.json}")
    if not args.check:
        return EXIT_OK
    report = check(plan, regions, schemas)
    print()
    for notice in report.notices:
        print(notice)
    for problem in report.problems:
        print(problem)
    print(f"check: {report.summary()}")
    for why in report.not_run.values():
        print(f"error: {why}", file=sys.stderr)
    return EXIT_FAILED if report.failed else EXIT_OK


def _fetch(args: argparse.Namespace) -> int:
    plan = make_plan(args.project_dir, args.stack)
    dest = args.dest or default_cache_dir()
    notes = fetch({region: cell.spec for region, cell in plan.cells.items()}, dest, args.base_url)
    for note in notes:
        print(f"note: {note}")
    print(f"fetched upstream schemas for stack {args.stack} into {dest}")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """Run the CLI. Exit codes: 0 success, 2 configuration error (one line per problem), 1 anything else
    (including ``plan --check`` finding problems)."""
    args = _parser().parse_args(argv)
    try:
        return _plan(args) if args.command == "plan" else _fetch(args)
    except ConfigError as exc:
        for line in exc.lines:
            print(line, file=sys.stderr)
        return EXIT_CONFIG
    except MissingToolError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
