"""``gpucell pin-versions STACK``: write the versions a stack takes from the package's defaults into its file.

A region's ``versions`` key names what the cell installs; a component it leaves out gets the gpucell package's
default (:class:`gpucell.spec.versions.Versions`), which moves with the package. Pinned, a region installs what its
stack file says whatever gpucell release plans it: upgrading the package plans no version change, and an upgrade is a
reviewed edit of one stack file (docs/decisions/0034). ``production: true`` stacks must pin every component
(:class:`gpucell.spec.StackSpec` refuses one that does not, naming this command).

The file is edited as text, so its comments, anchors and layout stay: the missing keys are added at the end of each
region's ``versions:`` block (a one-line ``versions: {...}`` becomes a block, or a new block goes at the top of the
region), nothing else changes. The result is read back and must give every region the versions it had, all pinned.
"""

from __future__ import annotations

from typing import Any

import yaml

from gpucell.errors import ConfigError
from gpucell.spec import StackSpec
from gpucell.spec.versions import Versions, unpinned
from gpucell.stacks.config import stack_spec_input

__all__ = ["pin_versions"]


def _child(node: yaml.MappingNode, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    """The ``(key node, value node)`` of ``key`` in mapping ``node``, or ``None``."""
    return next(((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None)


def _regions_node(root: yaml.Node | None, project: str) -> yaml.MappingNode:
    config = _child(root, "config") if isinstance(root, yaml.MappingNode) else None
    regions = None
    if config is not None and isinstance(config[1], yaml.MappingNode):
        regions = _child(config[1], f"{project}:regions") or _child(config[1], "regions")
    if regions is None or not isinstance(regions[1], yaml.MappingNode):
        raise ConfigError.at(("config", f"{project}:regions"), "is missing or not a mapping; nothing to pin")
    return regions[1]


def _edit(text: str, region: str, node: yaml.MappingNode, missing: dict[str, str]) -> tuple[int, int, list[str]]:
    """The lines ``[start, end)`` of ``text`` to replace, and by what, to pin ``missing`` in the region mapping
    ``node``: the missing keys after the last of a block ``versions``; a one-line flow ``versions: {...}`` rewritten
    as a block (its values as written); a new block at the top of a region without ``versions``."""
    if node.flow_style or not node.value:
        raise ConfigError.at(
            ("regions", region), "is written as a flow mapping ({...}); write it as a block mapping to pin versions"
        )
    indent = node.value[0][0].start_mark.column
    pins = [f"{' ' * (indent + 2)}{k}: {v}" for k, v in missing.items()]
    versions = _child(node, "versions")
    if versions is None:
        first = node.value[0][0].start_mark.line
        return first, first, [" " * indent + "versions:", *pins]
    key, block = versions
    if not isinstance(block, yaml.MappingNode) or not block.value:
        raise ConfigError.at(("regions", region, "versions"), "is not a mapping of component versions")
    if block.flow_style:
        if key.start_mark.line != block.end_mark.line:
            raise ConfigError.at(
                ("regions", region, "versions"),
                "is a flow mapping ({...}) over several lines; write it one key a line to pin versions",
            )
        written = [
            f"{' ' * (indent + 2)}{k.value}: {text[v.start_mark.index : v.end_mark.index]}" for k, v in block.value
        ]
        return key.start_mark.line, key.start_mark.line + 1, [" " * indent + "versions:", *written, *pins]
    child_indent = block.value[0][0].start_mark.column
    after = block.value[-1][1].end_mark.line + 1
    return after, after, [f"{' ' * child_indent}{k}: {v}" for k, v in missing.items()]


def pin_versions(text: str, project: str, project_config: dict[str, Any], spec: StackSpec) -> tuple[str, list[str]]:
    """``text`` (a ``Pulumi.<stack>.yaml`` whose validated spec is ``spec``) with every region's unpinned versions
    written into its ``versions`` block, and one note per region pinned (``[]``: nothing to do).

    ``project_config`` is the stack's config as the program reads it (:class:`gpucell.stacks.plan.StackFiles`), for
    the check that the new text plans the same versions. Raises :class:`ConfigError` when a region is written in
    flow style (``{...}``) or its ``versions`` as a flow mapping over several lines, or when the result would not
    read back as the same versions (a layout this text edit cannot follow)."""
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    regions = _regions_node(root, project)
    edits: list[tuple[int, int, list[str]]] = []
    notes: list[str] = []
    for key, node in regions.value:
        region = key.value
        cell = spec.regions[region]
        names = unpinned(cell.versions)
        if not names:
            continue
        fields = {info.alias or name: name for name, info in Versions.model_fields.items()}
        missing = {name: getattr(cell.versions, fields[name]) for name in names}
        edits.append(_edit(text, region, node, missing))
        notes.append(f"regions.{region}.versions: pinned {', '.join(f'{k} {v}' for k, v in missing.items())}")
    lines = text.splitlines(keepends=True)
    for first, end, new in sorted(edits, reverse=True):
        lines[first:end] = [line + "\n" for line in new]
    result = "".join(lines)
    _check_same(result, project, project_config, spec)
    return result, notes


def _check_same(text: str, project: str, config: dict[str, Any], spec: StackSpec) -> None:
    """The pinned ``text`` gives every region of ``spec`` the versions it had, all pinned."""
    raw = (yaml.safe_load(text) or {}).get("config") or {}
    merged = dict(config)
    merged[f"{project}:regions"] = raw.get(f"{project}:regions", raw.get("regions"))
    after = StackSpec.model_validate(stack_spec_input(merged, project))
    for region, cell in spec.regions.items():
        pinned = after.regions[region].versions
        if pinned != cell.versions or unpinned(pinned):
            raise ConfigError.at(
                ("regions", region, "versions"),
                "could not be pinned by a text edit of this layout; write the versions gpucell fleet shows by hand",
            )
