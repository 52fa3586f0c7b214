"""The fleet: every stack of the project, each region's pinned versions and the skew between them.

Production is one stack per region (docs/decisions/0034): ``Pulumi.prod-fra1.yaml``, ``Pulumi.prod-iad1.yaml``, each
with ``gpucell:production: true``. A stack that still holds several regions (a lab may) is planned with a warning
naming the failure domain its regions share (:func:`gpucell.stacks.program.shared_failure_domain`). ``gpucell
fleet`` reads every ``Pulumi.<stack>.yaml`` offline (:func:`read_fleet`), shows each stack's regions and component
versions, marks the versions a stack takes from the package's defaults, and the skew between regions
(:func:`render_fleet`). It also checks across the production stacks what one stack's rules checked across its
regions when they shared a stack (a machine, an address block, a backup prefix, a gateway domain of two cells; a
region in two stacks): :func:`fleet_problems`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from gpucell.errors import ConfigError
from gpucell.spec import StackSpec
from gpucell.spec.versions import Versions, unpinned
from gpucell.stacks.base_ref import stacks_in
from gpucell.stacks.config import stack_spec_input
from gpucell.stacks.plan import read_stack_files

__all__ = ["FleetCell", "fleet_problems", "read_fleet", "render_fleet", "skew"]


@dataclass(frozen=True)
class FleetCell:
    """One region of one stack, as ``gpucell fleet`` shows it."""

    stack: str
    region: str
    production: bool
    """The stack's ``gpucell:production``."""
    versions: dict[str, str]
    """Component (config name, ``gpuOperator``) -> the version the region installs."""
    defaults: frozenset[str]
    """The components whose version comes from the package's defaults, not the stack file."""


def _stack_spec(project_dir: Path, stack: str) -> StackSpec:
    """``stack``'s validated spec (project-level config applied, as ``pulumi up`` reads it); each problem line
    prefixed by the stack file."""
    try:
        files = read_stack_files(project_dir, stack)
        return StackSpec.model_validate(stack_spec_input(files.config, files.project))
    except ConfigError as exc:
        file = f"Pulumi.{stack}.yaml"
        raise ConfigError([line if line.startswith(file) else f"{file}: {line}" for line in exc.lines]) from None


def read_fleet(project_dir: Path, stacks: list[str] | None = None) -> tuple[list[FleetCell], dict[str, StackSpec]]:
    """The regions of ``stacks`` (default: every ``Pulumi.<stack>.yaml`` of ``project_dir``) and each stack's
    spec. Raises :class:`ConfigError` (every stack's problems, each line naming its file) when one does not
    validate, or when there is no stack."""
    names = stacks if stacks is not None else stacks_in(project_dir)
    if not names:
        raise ConfigError.at(("Pulumi.<stack>.yaml",), f"none found in {project_dir}; run gpucell fleet there")
    specs: dict[str, StackSpec] = {}
    problems: list[str] = []
    for stack in names:
        try:
            specs[stack] = _stack_spec(project_dir, stack)
        except ConfigError as exc:
            problems += exc.lines
    if problems:
        raise ConfigError(problems)
    cells = []
    for stack, spec in specs.items():
        for region, cell in spec.regions.items():
            fields = Versions.model_fields.items()
            versions = {info.alias or name: getattr(cell.versions, name) for name, info in fields}
            cells.append(FleetCell(stack, region, spec.production, versions, frozenset(unpinned(cell.versions))))
    return cells, specs


def fleet_problems(specs: dict[str, StackSpec]) -> list[str]:
    """What the production stacks get wrong together: a region in two of them, and what a stack's rules across its
    regions (one machine, address block, backup prefix or gateway domain for two cells) find across all of them.
    One line each, naming the stacks."""
    production = {stack: spec for stack, spec in specs.items() if spec.production}
    owner: dict[str, str] = {}
    problems: list[str] = []
    for stack, spec in production.items():
        for region in spec.regions:
            first = owner.setdefault(region, stack)
            if first != stack:
                problems.append(
                    f"Pulumi.{stack}.yaml: regions.{region}: is also a region of stack {first}; two stacks would "
                    "deploy one cell over each other; keep it in one"
                )
    if problems:
        return problems
    problems += _unlisted_networks(specs, production)
    union = {region: cell for spec in production.values() for region, cell in spec.regions.items()}
    if len(union) < 2:
        return problems
    try:
        regions = {region: cell.model_dump(by_alias=True, exclude_unset=True) for region, cell in union.items()}
        StackSpec.model_validate({"regions": regions})
    except ConfigError as exc:
        problems += [f"Pulumi.{owner[_region_of(line)]}.yaml: {line} (across the fleet)" for line in exc.lines]
    return problems


def _unlisted_networks(specs: dict[str, StackSpec], production: dict[str, StackSpec]) -> list[str]:
    """A production cell's network that a stack's ``otherCells`` does not cover: that stack's tenants would reach
    it (a stack without ``otherCells`` at all, a scratch one, is not judged)."""
    from gpucell.components.cluster_deny import cell_networks  # noqa: PLC0415 (components import the stacks' specs)

    problems = []
    for stack, spec in specs.items():
        if not spec.other_cells:
            continue
        for other, other_spec in production.items():
            for region, cell in other_spec.regions.items():
                if region in spec.regions:
                    continue
                listed = spec.other_cells.get(region, [])
                for net in cell_networks(cell):
                    if not any(net.subnet_of(outer) for outer in listed):
                        problems.append(
                            f"Pulumi.{stack}.yaml: otherCells.{region}: does not cover {net} of region {region} "
                            f"(stack {other}); the tenants of {stack} would reach it: list it in Pulumi.yaml"
                        )
    return problems


def _region_of(line: str) -> str:
    """The region a ``regions.<region>...`` problem line names."""
    return line.removeprefix("regions.").split(".", 1)[0].split(":", 1)[0]


def skew(cells: list[FleetCell]) -> dict[str, dict[str, list[str]]]:
    """Component -> version -> the ``stack/region`` cells installing it, for the components installed at more than
    one version across ``cells``; versions oldest first."""
    out: dict[str, dict[str, list[str]]] = {}
    for component in Versions.model_fields:
        name = Versions.model_fields[component].alias or component
        seen: dict[str, list[str]] = {}
        for cell in cells:
            seen.setdefault(cell.versions[name], []).append(f"{cell.stack}/{cell.region}")
        if len(seen) > 1:
            out[name] = dict(sorted(seen.items(), key=lambda item: _order(item[0])))
    return out


def _order(version: str) -> tuple[int, ...]:
    """A version's numbers in order (``v1.34.2+k3s1`` -> ``(1, 34, 2, 3, 1)``): pinned versions sort as released."""
    return tuple(int(number) for number in re.findall(r"\d+", version))


def render_fleet(cells: list[FleetCell]) -> str:
    """The fleet as a table: a column per ``stack/region``, a row per component (``*``: the package's default, not
    pinned in the stack file), then the skew (one line per component installed at several versions)."""
    header = ["", *(f"{c.stack}/{c.region}" for c in cells)]
    rows = [header, ["production", *("yes" if c.production else "no" for c in cells)]]
    rows.append(["pinned", *(f"{len(c.versions) - len(c.defaults)}/{len(c.versions)}" for c in cells)])
    for name in cells[0].versions:
        rows.append([name, *(c.versions[name] + ("*" if name in c.defaults else "") for c in cells)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.append("* the gpucell package's default: not pinned in the stack file (gpucell pin-versions STACK pins it)")
    found = skew(cells)
    if not found:
        lines.append("skew: none (every region installs the same versions)")
    for name, versions in found.items():
        lines.append(f"skew: {name}: " + "; ".join(f"{v} ({', '.join(where)})" for v, where in versions.items()))
    return "\n".join(lines) + "\n"
