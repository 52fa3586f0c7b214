"""A ``gpucell plan --json`` file as ``gpucell diff`` reads it: its shape checked, and what it holds.

A file of another shape is one line naming the file and the first thing wrong with it, rather than a Python error
from deep inside the comparison. The shape is the one :func:`gpucell.stacks.plan.to_json` writes (README,
"The offline plan")::

    {"stack": str, "regions": [str], "regionFilter": str | null,
     "resources": [{"urn": str, "type": str, "name": str, "inputs": {...},
                    "parent": str | null, "provider": str | null, "dependencies": [str], "options": {...}}],
     "outputs": {...}, "acknowledge": [...]}

``regions`` and ``regionFilter`` are optional (files written before they existed hold every region of their stack).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpucell.errors import ConfigError

__all__ = ["MAX_PLAN_BYTES", "MAX_PLAN_DEPTH", "held_regions", "load_plan", "plan_problem", "region_filter", "restack"]

MAX_PLAN_BYTES = 256 * 2**20
"""The largest plan file ``gpucell diff`` reads: 256 MiB, about 60 times prod's (437 resources, 4.4 MB). A file past
it is refused before it is read: in CI the base plan may come from another branch."""
MAX_PLAN_DEPTH = 100
"""The deepest nesting of objects and lists a plan file may hold: prod's is 20 (a Helm release's values inside its
inputs). Past it the comparison, which recurses, would end in a ``RecursionError``."""

REGION_TYPE = "gpucell:index:RegionalCell"
_NOT_A_PLAN = "not a `gpucell plan --json` file"
_TOO_DEEP = object()
_REQUIRED: tuple[tuple[str, type | tuple[type, ...], str], ...] = (
    ("urn", str, "a string"),
    ("type", str, "a string"),
    ("name", str, "a string"),
    ("inputs", dict, "an object"),
)
_OPTIONAL: tuple[tuple[str, type | tuple[type, ...], str], ...] = (
    ("parent", (str, type(None)), "a string"),
    ("provider", (str, type(None)), "a string"),
    ("dependencies", list, "a list"),
    ("options", dict, "an object"),
)
_TOP: tuple[tuple[str, type | tuple[type, ...], str], ...] = (
    ("stack", str, "a string"),
    ("outputs", dict, "an object"),
    ("acknowledge", list, "a list"),
    ("regions", list, "a list"),
    ("regionFilter", (str, type(None)), "a string or null"),
)


def _json_kind(value: object) -> str:
    kinds: tuple[tuple[type | tuple[type, ...], str], ...] = (
        (bool, "boolean"),
        (dict, "object"),
        (list, "list"),
        (str, "string"),
        ((int, float), "number"),
    )
    return "null" if value is None else next((name for kind, name in kinds if isinstance(value, kind)), "value")


def plan_problem(document: Any) -> str | None:
    """The first thing that keeps ``document`` (parsed JSON) from being a plan, as a phrase, or ``None``.

    E.g. ``resources[3] has no urn``, ``resources is a JSON number, not a list``.
    """
    if not isinstance(document, dict):
        return f"is a JSON {_json_kind(document)}, not an object"
    if "resources" not in document:
        return "has no resources"
    for key, kind, shape in _TOP:
        if key in document and not isinstance(document[key], kind):
            return f"{key} is a JSON {_json_kind(document[key])}, not {shape}"
    if any(not isinstance(region, str) for region in document.get("regions", [])):
        return "regions holds something other than region names"
    resources = document["resources"]
    if not isinstance(resources, list):
        return f"resources is a JSON {_json_kind(resources)}, not a list"
    problem = next(
        (
            problem
            for index, resource in enumerate(resources)
            if (problem := _resource_problem(f"resources[{index}]", resource)) is not None
        ),
        None,
    )
    return problem if problem is not None else _duplicate_urn(resources)


def _duplicate_urn(resources: list[dict[str, Any]]) -> str | None:
    """The second resource with a URN an earlier one has: a diff by URN would compare only one of them."""
    first: dict[str, int] = {}
    for index, resource in enumerate(resources):
        seen = first.setdefault(resource["urn"], index)
        if seen != index:
            return (
                f"resources[{index}] has the urn of resources[{seen}] ({resource['urn']}); a plan registers each "
                "URN once"
            )
    return None


def _resource_problem(where: str, resource: Any) -> str | None:
    if not isinstance(resource, dict):
        return f"{where} is a JSON {_json_kind(resource)}, not an object"
    for key, kind, shape in _REQUIRED:
        if key not in resource:
            return f"{where} has no {key}"
        if not isinstance(resource[key], kind):
            return f"{where}.{key} is a JSON {_json_kind(resource[key])}, not {shape}"
    for key, kind, shape in _OPTIONAL:
        if key in resource and not isinstance(resource[key], kind):
            return f"{where}.{key} is a JSON {_json_kind(resource[key])}, not {shape}"
    return None


def load_plan(path: Path) -> dict[str, Any]:
    """The plan JSON document in ``path``.

    Raises :class:`ConfigError` with one line ``<path>: <what is wrong>; not a `gpucell plan --json` file`` when
    the file cannot be read, is not JSON or not of a plan's shape (:func:`plan_problem`), and one line naming the
    bound when it is past :data:`MAX_PLAN_BYTES` (before it is read) or :data:`MAX_PLAN_DEPTH`.
    """
    try:
        size = path.stat().st_size
        if size > MAX_PLAN_BYTES:
            raise ConfigError(
                [f"{path}: is {size} bytes; gpucell diff reads plan files of at most {MAX_PLAN_BYTES} bytes (256 MiB)"]
            )
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError([f"{path}: cannot be read as JSON ({exc}); {_NOT_A_PLAN}"]) from None
    except RecursionError:
        data = _TOO_DEEP  # nested past Python's own bound, so past ours
    if data is _TOO_DEEP or _depth_past(data, MAX_PLAN_DEPTH):
        raise ConfigError(
            [
                f"{path}: nests objects and lists more than {MAX_PLAN_DEPTH} levels deep; gpucell diff reads at most "
                f"{MAX_PLAN_DEPTH} ({_NOT_A_PLAN})"
            ]
        )
    problem = plan_problem(data)
    if problem is not None:
        raise ConfigError([f"{path}: {problem}; {_NOT_A_PLAN} (each resource has urn, type, name and inputs)"])
    result: dict[str, Any] = data
    return result


def _depth_past(value: Any, bound: int) -> bool:
    """Whether ``value`` nests objects and lists more than ``bound`` levels deep (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, dict | list):
            continue
        if depth > bound:
            return True
        stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def held_regions(plan: Mapping[str, Any]) -> list[str]:
    """The regions ``plan`` holds: its ``regions``, else its ``RegionalCell`` resources (older files)."""
    if isinstance(plan.get("regions"), list):
        return [str(region) for region in plan["regions"]]
    return [str(r.get("name")) for r in plan.get("resources", []) if r.get("type") == REGION_TYPE]


def region_filter(plan: Mapping[str, Any]) -> str | None:
    """The ``--region`` the plan was made with, ``None`` when it holds every region of its stack."""
    value = plan.get("regionFilter")
    return value if isinstance(value, str) else None


def restack(plan: Mapping[str, Any], stack: str) -> dict[str, Any]:
    """``plan`` with the stack part of every URN (``urn:pulumi:<stack>::``) set to ``stack``, so that the resources
    of two stacks' plans match by URN (``gpucell diff --cross-stack``)."""
    old = f"urn:pulumi:{plan.get('stack', '')}::"
    new = f"urn:pulumi:{stack}::"

    def swap(value: Any) -> Any:
        return new + value[len(old) :] if isinstance(value, str) and value.startswith(old) else value

    resources = []
    for resource in plan.get("resources", []):
        moved = dict(resource, urn=swap(resource["urn"]), parent=swap(resource.get("parent")))
        moved["dependencies"] = [swap(d) for d in resource.get("dependencies", [])]
        resources.append(moved)
    return {**plan, "stack": stack, "resources": resources}
