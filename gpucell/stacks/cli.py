"""``gpucell``: the command line.

- ``gpucell plan STACK`` prints (and optionally writes, and checks) the offline plan;
- ``gpucell schemas fetch STACK`` downloads the upstream schemas for the versions the stack pins;
- ``gpucell diff`` reviews the change between two plans (see :mod:`gpucell.stacks.review`);
- ``gpucell usage`` prints GPU-hours per tenant and resource from a cell's Prometheus (see :mod:`gpucell.stacks.usage`);
- ``gpucell health`` reads a cell's health from its Prometheus and proposes the quarantines it calls for as a patch
  of the stack file (see :mod:`gpucell.stacks.health`);
- ``gpucell schema`` writes the editor JSON Schema of ``Pulumi.<stack>.yaml`` (see :mod:`gpucell.stacks.schema`);
- ``gpucell restore`` prints the Velero Restore of a tenant's backup (see :mod:`gpucell.stacks.restore`);
- ``gpucell fleet`` shows every stack's regions, their component versions and the skew between them (see
  :mod:`gpucell.stacks.fleet`);
- ``gpucell pin-versions STACK`` writes the versions the stack takes from the package's defaults into its file (see
  :mod:`gpucell.stacks.pins`);
- ``gpucell reach STACK`` checks, in seconds, that this machine reaches each region of the stack over SSH and at its
  API endpoint, before ``pulumi up`` (see :mod:`gpucell.stacks.reach`).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from gpucell.errors import ConfigError
from gpucell.spec import StackSpec
from gpucell.stacks import fleet, health, pins, reach, usage
from gpucell.stacks.base_ref import BaseTree, plan_head, stacks_in
from gpucell.stacks.config import stack_spec_input
from gpucell.stacks.conformance.problems import MissingToolError
from gpucell.stacks.conformance.schemas import DEFAULT_BASE_URL, default_cache_dir, fetch
from gpucell.stacks.plan import (
    check,
    check_libraries,
    check_schema_dir,
    make_plan,
    read_stack_files,
    render_tree,
    write_json,
    write_out,
)
from gpucell.stacks.plan_file import load_plan, restack
from gpucell.stacks.prometheus_api import PrometheusError
from gpucell.stacks.restore import restore_document
from gpucell.stacks.review import Review, exit_code, render, review
from gpucell.stacks.schema import SCHEMA_FILE, render_schema

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
    plan.add_argument(
        "--out", type=Path, metavar="DIR", help="write manifests, Helm values and node files under DIR/<region>/"
    )
    plan.add_argument("--json", type=Path, metavar="FILE", help="write the plan as JSON to FILE")
    plan.add_argument(
        "--preview",
        action="store_true",
        help="leave provider-computed values unknown, as a region's first `pulumi preview` sees them",
    )
    plan.add_argument(
        "--check",
        action="store_true",
        help="check every object, chart value, script and node config against upstream; exit 1 on any problem",
    )
    plan.add_argument(
        "--base-plan",
        type=Path,
        metavar="FILE",
        help="a `gpucell plan --json` file taken as the last deployment: the estimate is of the change "
        "against it, and its nodes count as registered",
    )
    plan.add_argument(
        "--schemas",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"upstream schemas for --check (default: {default_cache_dir()})",
    )
    _project_dir(plan)

    schemas = commands.add_parser("schemas", help="manage the upstream schemas --check reads")
    schemas_commands = schemas.add_subparsers(dest="schemas_command", required=True)
    fetch_cmd = schemas_commands.add_parser(
        "fetch",
        help="download the schemas and chart values for the versions STACK pins",
    )
    fetch_cmd.add_argument("stack", help="stack name; reads Pulumi.STACK.yaml for the pinned versions")
    fetch_cmd.add_argument(
        "--dest", type=Path, default=None, metavar="DIR", help=f"where to write them (default: {default_cache_dir()})"
    )
    fetch_cmd.add_argument(
        "--base-url",
        default=DEFAULT_BASE_URL,
        help=f"where upstream files are served as BASE/<repo>/<tag>/<path> (default: {DEFAULT_BASE_URL})",
    )
    _project_dir(fetch_cmd)
    _diff_parser(commands)
    _usage_parser(commands)
    _health_parser(commands)
    _reach_parser(commands)
    _restore_parser(commands)
    _fleet_parsers(commands)
    return parser


EXIT_SKEW = 3
"""``gpucell fleet``: the production stacks install different versions of a component."""


def _fleet_parsers(commands: Any) -> None:
    parser = commands.add_parser(
        "fleet",
        help="every stack's regions, component versions and the skew between them",
        description="Reads every Pulumi.STACK.yaml of the project (or the STACKs given) offline and prints a column "
        "per stack/region and a row per component version (* marks the package's default, not pinned in the stack "
        "file), then the skew: each component installed at several versions, with where. Checks across the "
        "production stacks what one stack checks across its regions (a region in two stacks, one machine, address "
        "block, backup prefix or gateway domain for two cells). Exit codes: 0 no skew between production stacks, 3 "
        "skew, 2 a stack that does not validate or a problem across the fleet (one line each), 1 anything else.",
    )
    parser.add_argument("stacks", nargs="*", metavar="STACK", help="the stacks to show (default: every stack file)")
    _project_dir(parser)
    pin = commands.add_parser(
        "pin-versions",
        help="write the versions STACK takes from the package's defaults into Pulumi.STACK.yaml",
        description="Adds to each region's versions block every component version the region takes from the "
        "gpucell package's defaults, so that a new gpucell release never moves it (production: true stacks must "
        "pin every version). Comments and layout stay; the file is read back and must plan the same versions. Exit "
        "codes: 0 written (or nothing to pin), 2 wrong command line or stack config.",
    )
    pin.add_argument("stack", help="stack name; edits Pulumi.STACK.yaml")
    _project_dir(pin)


def _fleet(args: argparse.Namespace) -> int:
    """``gpucell fleet``: the table, then the skew; exit 3 on skew between production stacks."""
    cells, specs = fleet.read_fleet(args.project_dir, args.stacks or None)
    problems = fleet.fleet_problems(specs)
    if problems:
        raise ConfigError(problems)
    print(fleet.render_fleet(cells), end="")
    production = [cell for cell in cells if cell.production]
    return EXIT_SKEW if fleet.skew(production) else EXIT_OK


def _pin_versions(args: argparse.Namespace) -> int:
    """``gpucell pin-versions``: pin, write, and name what was pinned."""
    files = read_stack_files(args.project_dir, args.stack)
    path = args.project_dir / f"Pulumi.{args.stack}.yaml"
    # Read as a lab: a production stack that pins nothing yet is what this command is for.
    loose = {key: value for key, value in files.config.items() if key != f"{files.project}:production"}
    spec = StackSpec.model_validate(stack_spec_input(loose, files.project))
    text, notes = pins.pin_versions(path.read_text(), files.project, files.config, spec)
    if not notes:
        print(f"Pulumi.{args.stack}.yaml: every version is pinned already")
        return EXIT_OK
    path.write_text(text)
    for note in notes:
        print(note)
    print(f"wrote {path}; review it with: gpucell diff --base HEAD {args.stack}")
    return EXIT_OK


def _restore_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "restore",
        help="print the Velero Restore bringing a tenant's namespace (or one workload) back from a backup",
        description="Reads Pulumi.STACK.yaml only and prints a velero.io/v1 Restore into the tenant's own namespace "
        "for a cluster admin to apply (kubectl apply -f -); objects that still exist are left as they are. Exit "
        "codes: 0 printed, 2 wrong command line or stack config.",
    )
    parser.add_argument("stack", help="stack name; reads Pulumi.STACK.yaml")
    parser.add_argument("--region", required=True, help="the tenant's region")
    parser.add_argument("--tenant", required=True, help="the tenant whose namespace is restored")
    parser.add_argument("--backup", required=True, help="the backup (velero backup get: tenant-<t>-<timestamp>)")
    parser.add_argument("--workload", help="only this VM, notebook or endpoint (its labelled objects and volumes)")
    parser.add_argument("--run-strategy", help="run strategy of the restored VMs (Halted: restored stopped)")
    parser.add_argument("--name", help="the Restore's name (default <backup>-restore)")
    _project_dir(parser)


def _restore(args: argparse.Namespace) -> int:
    """``gpucell restore``: print the Restore's YAML (notes on stderr)."""
    text, notes = restore_document(
        args.project_dir,
        args.stack,
        region=args.region,
        tenant=args.tenant,
        backup=args.backup,
        workload=args.workload,
        run_strategy=args.run_strategy,
        name=args.name,
    )
    for note in notes:
        print(note, file=sys.stderr)
    print(text, end="")
    return EXIT_OK


def _usage_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "usage",
        help="GPU-hours per tenant and resource for a period, from a cell's Prometheus",
        description="Sums gpucell:tenant_gpu_allocated:sum over [--start, --end) (at most 366 days) from a "
        "Prometheus HTTP API, one day per request (progress on stderr), per tenant, resource, GPU model and kind. "
        "Exit codes: 0 success, 1 Prometheus unreachable, failing, too slow for --deadline or answering what cannot "
        "be billed (a label with a control character, a NaN or infinite sample, another shape), 2 wrong command "
        "line.",
    )
    parser.add_argument("--prometheus", required=True, metavar="URL", help="Prometheus base URL (http://host:9090)")
    parser.add_argument("--start", required=True, help="start of the period, ISO 8601 (2026-11-01), UTC by default")
    parser.add_argument("--end", required=True, help="end of the period, excluded (2026-12-01)")
    parser.add_argument("--tenant", help="only this tenant")
    parser.add_argument("--format", choices=("table", "csv", "json"), default="table", help="output (default: table)")
    parser.add_argument("--step", type=int, default=60, help="sample spacing in seconds (default: 60)")
    parser.add_argument("--timeout", type=float, default=30, help="seconds per request (default: 30)")
    parser.add_argument(
        "--deadline",
        type=float,
        default=usage.DEFAULT_DEADLINE,
        help=f"seconds for the whole run (default: {usage.DEFAULT_DEADLINE:g})",
    )


def _usage(args: argparse.Namespace) -> int:
    """``gpucell usage``: read, then print the table, CSV or JSON."""
    start, end = usage.parse_time(args.start, "--start"), usage.parse_time(args.end, "--end")
    usage.check_arguments(
        args.prometheus,
        start,
        end,
        step=args.step,
        timeout=args.timeout,
        tenant=args.tenant,
        deadline=args.deadline,
    )
    try:
        rows = usage.read_usage(
            args.prometheus,
            start,
            end,
            tenant=args.tenant,
            step_seconds=args.step,
            timeout=args.timeout,
            deadline=args.deadline,
            progress=usage.progress_line(sys.stderr),
        )
    except usage.UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(usage.render(rows, args.format, start, end), end="")
    return EXIT_OK


EXIT_UNHEALTHY = 3
"""``gpucell health``: the cell is unhealthy (with ``--propose-quarantine``/``--write``: hosts to quarantine)."""


def _health_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "health",
        help="a cell's health from its Prometheus; proposes quarantines as a patch of the stack file",
        description="Reads critical alerts firing, nodes NotReady, GPU capacity below what the stack declares and "
        "tenant workloads not ready from the cell's Prometheus (one line each, naming the host, alert or workload). "
        "With --propose-quarantine, prints the patch of Pulumi.STACK.yaml quarantining each host with a critical "
        "alert (planned offline first); --write also writes it. Exit codes: 0 healthy (with --propose-quarantine or "
        "--write: nothing to quarantine), 3 unhealthy (hosts to quarantine), 2 wrong command line or stack config, "
        "1 Prometheus unreachable, failing, too slow for --deadline or answering another shape.",
    )
    parser.add_argument("stack", help="stack name; reads Pulumi.STACK.yaml")
    parser.add_argument("--prometheus", required=True, metavar="URL", help="the cell's Prometheus (http://host:9090)")
    parser.add_argument("--region", help="the cell (default: the stack's only region)")
    parser.add_argument(
        "--deadline",
        type=float,
        default=health.DEFAULT_DEADLINE,
        help=f"seconds for all requests (default: {health.DEFAULT_DEADLINE:g})",
    )
    parser.add_argument(
        "--propose-quarantine",
        action="store_true",
        help="print the stack-file patch quarantining each host with a critical alert firing",
    )
    parser.add_argument(
        "--write", action="store_true", help="write that patch into Pulumi.STACK.yaml (implies --propose-quarantine)"
    )
    _project_dir(parser)


def _reach_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "reach",
        help="whether this machine reaches the stack's regions (SSH to the servers, the API endpoint), in seconds",
        description="Probes, all at once, each server of each region of the stack for an SSH banner and the region's "
        "API endpoint for a TCP connection, each within --timeout seconds; run it before pulumi up, which otherwise "
        "waits out SSH's dial retries. Exit codes: 0 every region reachable (a note when only its API endpoint does "
        "not answer: a new cell has none yet), 1 a region where no server answers over SSH (one line naming it, "
        "each probe's answer and what to check), 2 wrong command line or stack config.",
    )
    parser.add_argument("stack", help="stack name; reads Pulumi.STACK.yaml")
    parser.add_argument("--region", help="only this region (default: every region of the stack)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=reach.PROBE_SECONDS,
        help=f"seconds each probe may take; they run at once (default: {reach.PROBE_SECONDS:g})",
    )
    _project_dir(parser)


def _reach(args: argparse.Namespace) -> int:
    """``gpucell reach``: one report per region; exit 1 when one cannot be reached."""
    if not 0 < args.timeout <= 60:
        raise CommandLineError([f"gpucell reach: --timeout {args.timeout:g} is not a number of seconds from 0 to 60"])
    spec = reach.stack_spec(args.project_dir, args.stack)
    found = reach.stack_reach(spec.regions, args.region, args.stack, timeout=args.timeout)
    for region in found:
        for line in region.lines(args.stack):
            print(line, file=sys.stdout if region.reachable else sys.stderr)
    return EXIT_OK if all(region.reachable for region in found) else reach.EXIT_UNREACHABLE


def _health(args: argparse.Namespace) -> int:
    """``gpucell health``: the findings, the summary, and with ``--propose-quarantine``/``--write`` the patch."""
    health.check_arguments(args.prometheus, args.deadline)
    region, spec = health.cell_of(args.project_dir, args.stack, args.region)
    try:
        found = health.read_health(args.prometheus, args.stack, region, spec, deadline=args.deadline)
    except PrometheusError as exc:
        print(f"error: region {region}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    for finding in found.findings:
        print(f"{region}: {finding.line}")
    for note in found.notes:
        print(f"{region}: note: {note}")
    print(found.summary())
    if not (args.propose_quarantine or args.write):
        return EXIT_OK if found.healthy else EXIT_UNHEALTHY
    reasons = found.to_quarantine()
    if not reasons:
        print("quarantine: nothing to do")
        return EXIT_OK
    return _propose(args, region, reasons)


def _propose(args: argparse.Namespace, region: str, reasons: dict[str, str]) -> int:
    """Print (and with ``--write`` write) the quarantine patch once the patched stack file plans; exit 3."""
    file_name = f"Pulumi.{args.stack}.yaml"
    path = args.project_dir / file_name
    before = path.read_text()
    after = health.quarantine_patch(before, file_name, region, reasons)
    for host, reason in reasons.items():
        print(f"quarantine: {host}: {reason}")
    problems = health.plan_problems(args.project_dir, args.stack, region, after)
    if problems:
        print(f"error: {file_name} with these quarantines does not plan; quarantine by hand:", file=sys.stderr)
        for line in problems:
            print(f"error: {line}", file=sys.stderr)
        return EXIT_UNHEALTHY
    print(health.unified_diff(before, after, file_name), end="")
    if args.write:
        path.write_text(after)
        print(f"wrote {path}; review it with: gpucell diff --base HEAD {args.stack}")
    return EXIT_UNHEALTHY


def _diff_parser(commands: Any) -> None:
    diff = commands.add_parser(
        "diff",
        help="review the change between two plans as Markdown (PR comment, job summary)",
        description="gpucell diff BASE.json HEAD.json compares two `gpucell plan --json` files; gpucell diff --base "
        "REF [STACK ...] plans each stack at the git ref REF and in the working tree and compares them. Disruptive "
        "changes come first, with the gpucell:acknowledge entry each needs. Exit codes: 0 no changes, 3 changes "
        "(an acknowledgement that matches nothing counts), 4 disruptive changes, 1 error, 2 wrong command line.",
    )
    diff.add_argument(
        "args",
        nargs="*",
        metavar="BASE.json HEAD.json | STACK",
        help="two plan files, or with --base the stacks to compare (default: every stack file at REF "
        "and in the working tree)",
    )
    diff.add_argument("--base", metavar="REF", help="the git ref to compare the working tree against")
    diff.add_argument(
        "--base-code",
        choices=("ref", "worktree"),
        default="ref",
        help="plan REF's stack files with REF's code (default) or with the working tree's code",
    )
    diff.add_argument("--out", type=Path, metavar="FILE", help="also write the Markdown to FILE")
    diff.add_argument(
        "--cross-stack",
        action="store_true",
        help="compare BASE.json and HEAD.json although they are plans of different stacks (URNs are "
        "matched with the stack name set aside)",
    )
    _project_dir(diff)

    schema = commands.add_parser(
        "schema",
        help="write the editor JSON Schema of Pulumi.<stack>.yaml (generated from the spec models)",
    )
    schema.add_argument(
        "--out",
        type=Path,
        metavar="FILE",
        help=f"write it to FILE (the repository ships it as {SCHEMA_FILE}); default: stdout",
    )


def _schema(args: argparse.Namespace) -> int:
    """``gpucell schema``: print or write the stack file's JSON Schema; an ``--out`` that cannot be written (a
    directory, under a file, unwritable) is one line, exit 2, before the schema is rendered."""
    if args.out is not None and (problems := _writable("--out", args.out, directory=False)):
        raise CommandLineError(problems)
    text = render_schema()
    if args.out is None:
        print(text, end="")
        return EXIT_OK
    try:
        args.out.write_text(text)
    except OSError as exc:  # what the probe could not foresee (a full disk, a file made read-only meanwhile)
        raise CommandLineError(
            [f"--out: {str(args.out)!r} cannot be written ({exc.strerror or type(exc).__name__}); give a writable path"]
        ) from None
    print(f"wrote {args.out}")
    return EXIT_OK


def _project_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--project-dir",
        type=Path,
        default=Path.cwd(),
        metavar="DIR",
        help="directory holding Pulumi.yaml (default: the current directory)",
    )


class CommandLineError(ConfigError):
    """The command line asks for something that cannot be done (a wrong argument count, an option's path that
    cannot be written): one line each, exit 2 in every subcommand, before anything runs."""


def _writable(option: str, path: Path, *, directory: bool) -> list[str]:
    """Why ``path`` cannot be written as the directory (``directory``) or file ``option`` names, else ``[]``.

    Tried for real (the directory is created and a temporary file written in it): permissions alone do not tell
    root whether ``/proc`` or a read-only mount takes a file.
    """
    what = "a directory (it writes DIR/<region>/...)" if directory else "the path of a file to write"
    if path.exists() and path.is_dir() != directory:
        return [f"{option}: {str(path)!r} is {'a file' if directory else 'a directory'}; {option} takes {what}"]
    blocker = next((p for p in path.parents if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        return [f"{option}: {str(path)!r} cannot be created: {str(blocker)!r} is a file"]
    folder = path if directory else path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        return [
            f"{option}: {str(path)!r} cannot be written ({exc.strerror or type(exc).__name__}); give a writable path"
        ]
    return []


def _plan(args: argparse.Namespace) -> int:
    problems = [
        *(_writable("--out", args.out, directory=True) if args.out else []),
        *(_writable("--json", args.json, directory=False) if args.json else []),
    ]
    if problems:  # before the plan: nothing is printed for a run that cannot write what it was asked to
        raise CommandLineError(problems)
    schemas = args.schemas or default_cache_dir()
    if args.check:  # before the plan, in this order: the libraries, then a wrong --schemas fail at once
        check_libraries()
        check_schema_dir(schemas, args.stack)
    base = load_plan(args.base_plan) if args.base_plan else None
    plan = make_plan(
        args.project_dir,
        args.stack,
        preview=args.preview,
        region=args.region,
        last_deployment=base["outputs"] if base else None,
    )
    regions = [args.region] if args.region else list(plan.cells)
    print(render_tree(plan, regions, {r["urn"]: r["inputs"] for r in base["resources"]} if base else None))
    for warning in plan.result.warnings:
        print(f"warning: {warning}")
    if args.out:
        files = write_out(plan, regions, args.out)
        print(f"wrote {len(files)} files under {args.out}")
    if args.json:
        write_json(plan, regions, args.json, region_filter=args.region)
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
    notes += _fetch_charts(plan, dest)
    for note in notes:
        print(f"note: {note}")
    print(f"fetched upstream schemas for stack {args.stack} into {dest}")
    return EXIT_OK


def _fetch_charts(plan: Any, dest: Path) -> list[str]:
    """Pull the charts of the plan's Helm releases for the ``chart`` checker; a note when helm is missing."""
    from gpucell.stacks.conformance.helm import fetch_charts  # noqa: PLC0415

    releases = [r.inputs for r in plan.result.resources if r.type == "kubernetes:helm.sh/v3:Release"]
    try:
        pulled = fetch_charts(releases, dest)
    except MissingToolError as exc:
        return [f"charts not fetched (`plan --check` will name each release's missing chart): {exc}"]
    return [f"fetched {len(pulled)} chart(s) into {dest / 'charts'}"]


def _looks_like_a_file(argument: str) -> bool:
    return argument.endswith(".json") or "/" in argument or os.sep in argument


def _file_reviews(args: argparse.Namespace) -> list[Review]:
    """``gpucell diff BASE.json HEAD.json``."""
    if len(args.args) != 2:
        raise CommandLineError(
            [
                f"gpucell diff: takes BASE.json HEAD.json, or --base REF [STACK ...]; got "
                f"{len(args.args)} argument{'' if len(args.args) == 1 else 's'}"
            ]
        )
    base_path, head_path = (Path(p) for p in args.args)
    base, head = load_plan(base_path), load_plan(head_path)
    notes = []
    base_stack, head_stack = base.get("stack"), head.get("stack")
    if base_stack and head_stack and base_stack != head_stack:
        if not args.cross_stack:
            raise ConfigError(
                [
                    f"gpucell diff: {base_path} is a plan of stack {base_stack} and {head_path} of stack "
                    f"{head_stack}; pass --cross-stack to compare plans of two stacks"
                ]
            )
        base = restack(base, head_stack)
        notes.append(
            f"stack `{base_stack}` (BASE) compared with stack `{head_stack}` (HEAD): resources matched by "
            "URN with the stack name set aside"
        )
    return [review(base, head, notes=notes)]


def _reviews(args: argparse.Namespace) -> list[Review]:
    if args.base is None:
        return _file_reviews(args)
    with tempfile.TemporaryDirectory(prefix="gpucell-diff-") as work:
        tree = BaseTree(args.project_dir, args.base, Path(work), own_code=args.base_code == "ref")
        known = sorted(set(tree.stacks()) | set(stacks_in(args.project_dir)))
        unknown = [stack for stack in args.args if stack not in known]
        files = [argument for argument in unknown if _looks_like_a_file(argument)]
        if files:
            raise ConfigError(
                [
                    f"gpucell diff: {', '.join(files)}: with --base REF the arguments are stack names "
                    f"(stacks: {', '.join(known) or 'none'}); to compare two plan files, leave out "
                    "--base: gpucell diff BASE.json HEAD.json"
                ]
            )
        if unknown:
            raise ConfigError(
                [
                    f"gpucell diff: no stack {', '.join(unknown)}: neither {args.base!r} nor the working "
                    f"tree ({args.project_dir}) has {', '.join(f'Pulumi.{s}.yaml' for s in unknown)}; "
                    f"stacks: {', '.join(known) or 'none'}"
                ]
            )
        reviews = []
        for stack in args.args or known:
            base, fingerprints, notes = tree.plan(stack)
            reviews.append(
                review(
                    base,
                    plan_head(args.project_dir, stack, base),
                    stack=stack,
                    base_fingerprints=fingerprints,
                    notes=notes,
                )
            )
        return reviews


def _diff(args: argparse.Namespace) -> int:
    """``gpucell diff``: print (and write) the review; exit 0/3/4 by what it found."""
    if args.out is not None and (problems := _writable("--out", args.out, directory=False)):
        raise CommandLineError(problems)
    reviews = _reviews(args)
    markdown = render(reviews)
    print(markdown, end="")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(markdown)
    return exit_code(reviews)


def _quiet_stdout() -> None:
    """Send what is left of stdout to /dev/null: its reader is gone, and the final flush must not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real file descriptor (stdout replaced, e.g. in tests)
        pass


def main(argv: list[str] | None = None) -> int:
    """Run the CLI. Exit codes: 0 success, 2 configuration error or wrong command line (one line per problem; for
    the command line, argparse's usage), 1 anything else (including ``plan --check`` finding problems).
    ``gpucell diff``: 0 no changes, 3 changes, 4 disruptive changes, 1 any error (configuration errors included),
    2 wrong command line (argparse's, or :class:`CommandLineError`: one plan file, an ``--out`` that cannot be
    written). ``gpucell health``: 0 healthy (nothing to quarantine), 3 unhealthy (hosts to quarantine), 2 wrong
    command line or stack config, 1 Prometheus unreachable or answering what cannot be read. ``gpucell fleet``: 0 no
    skew between the production stacks, 3 skew, 2 a stack that does not validate. ``gpucell reach``: 0 every region
    reachable, 1 one is not (no server answers over SSH), 2 wrong command line or stack config. A reader that closes
    the pipe early (``gpucell plan prod-fra1 | head``) ends the run quietly with exit 1, as other command-line tools
    stop when their output is no longer read."""
    args = _parser().parse_args(argv)
    commands = {
        "plan": _plan,
        "schemas": _fetch,
        "diff": _diff,
        "schema": _schema,
        "usage": _usage,
        "health": _health,
        "reach": _reach,
        "restore": _restore,
        "fleet": _fleet,
        "pin-versions": _pin_versions,
    }
    try:
        return commands[args.command](args)
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_FAILED
    except CommandLineError as exc:
        for line in exc.lines:
            print(line, file=sys.stderr)
        return EXIT_CONFIG
    except ConfigError as exc:
        for line in exc.lines:
            print(line, file=sys.stderr)
        return EXIT_FAILED if args.command == "diff" else EXIT_CONFIG
    except MissingToolError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
