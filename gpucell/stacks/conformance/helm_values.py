"""Helm values we set against the pinned chart: every key path must exist, every value must fit the schema.

A renamed or removed chart value is the classic silent misconfiguration after an upgrade: Helm ignores keys
its templates do not read. So every leaf path we render must be a key of the chart's default ``values.yaml``
(or a key documented there as a commented-out default, or be under a map whose default is empty, such as
``nodeSelector: {}``), or be declared by the chart's ``values.schema.json``; and where the chart ships a schema,
the merged values must validate against it, as ``helm install`` does.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import jsonschema

from gpucell.components._chart import deep_merge
from gpucell.stacks.conformance.schemas import SchemaStore

__all__ = ["CHART_FILES", "ChartFiles", "commented_keys", "leaf_paths", "values_problems"]


@dataclass(frozen=True)
class ChartFiles:
    """Where a chart's defaults (and schema) live in the schema directory, and which pinned version is its."""

    values: str
    component: str
    """Field of :class:`gpucell.spec.Versions` that pins the chart."""
    schema: str | None = None
    subcharts: tuple[tuple[str, str], ...] = ()
    """``(values key, values file)`` of subcharts whose values are set under that key of the parent's values; a
    file path may name the pinned version as ``{version}``. A subchart file missing from the directory is skipped
    (the key is then checked against the parent's defaults alone)."""


CHART_FILES: dict[str, ChartFiles] = {
    "cilium": ChartFiles("cilium/values.yaml", "cilium", "cilium/values.schema.json"),
    "gpu-operator": ChartFiles("gpu-operator/values.yaml", "gpu_operator"),
    "cert-manager": ChartFiles("cert-manager/values.yaml", "cert_manager"),
    "longhorn": ChartFiles("longhorn/values.yaml", "longhorn"),
    "kserve-resources": ChartFiles("kserve/kserve-resources/values.yaml", "kserve"),
    "kserve-runtime-configs": ChartFiles("kserve/kserve-runtime-configs/values.yaml", "kserve"),
    "dra-driver-nvidia-gpu": ChartFiles("dra-driver-nvidia-gpu/values.yaml", "dra_driver"),
    "kube-prometheus-stack": ChartFiles(
        "kube-prometheus-stack/values.yaml",
        "kube_prometheus_stack",
        subcharts=tuple(
            (key, f"charts/kube-prometheus-stack-{{version}}/charts/{key}/values.yaml")
            for key in ("kube-state-metrics", "grafana", "prometheus-node-exporter")
        ),
    ),
    "keda": ChartFiles("charts/keda-{version}/values.yaml", "keda"),
    "cluster-api-operator": ChartFiles(
        "cluster-api-operator/values.yaml", "capi_operator", "cluster-api-operator/values.schema.json"
    ),
    "velero": ChartFiles("velero/values.yaml", "velero", "velero/values.schema.json"),
    "network-operator": ChartFiles(
        "charts/network-operator-{version}/values.yaml",
        "network_operator",
        subcharts=(
            ("sriov-network-operator", "charts/network-operator-{version}/charts/sriov-network-operator/values.yaml"),
        ),
    ),
}
"""Chart name (last segment of the chart reference) -> its files."""

_KEY_LINE = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z0-9_.\-/]+):(\s|$)")
_COMMENTED_KEY = re.compile(r"^(?P<indent>\s*)#\s?(?P<key>[A-Za-z0-9_\-]+):(\s|$)")


def leaf_paths(values: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Key paths of every non-map value; lists and empty maps are leaves (Helm replaces them whole)."""
    if isinstance(values, dict) and values:
        for key, value in values.items():
            yield from leaf_paths(value, (*prefix, str(key)))
    elif prefix:
        yield prefix


def commented_keys(text: str) -> set[tuple[str, ...]]:
    """Paths of keys a values.yaml documents as commented-out defaults (``  # hostNamespaceOnly: false``).

    The parent of a commented key is the nearest preceding real key with smaller indentation.
    """
    stack: list[tuple[int, str]] = []
    found: set[tuple[str, ...]] = set()
    for line in text.splitlines():
        match = _KEY_LINE.match(line)
        commented = _COMMENTED_KEY.match(line)
        if match and not line.lstrip().startswith(("#", "-")):
            indent = len(match["indent"])
            while stack and stack[-1][0] >= indent:
                stack.pop()
            stack.append((indent, match["key"]))
        elif commented:
            indent = len(commented["indent"])
            parents = [key for level, key in stack if level < indent]
            found.add((*parents, commented["key"]))
    return found


def _schema_declares(schema: dict[str, Any], path: tuple[str, ...]) -> bool:
    node: Any = schema
    for key in path:
        if not isinstance(node, dict):
            return False
        properties = node.get("properties") or {}
        if key in properties:
            node = properties[key]
        elif isinstance(node.get("additionalProperties"), dict) or node.get("additionalProperties") is True:
            node = node.get("additionalProperties") if isinstance(node.get("additionalProperties"), dict) else {}
        else:
            return False
    return True


def _default_at(defaults: Any, path: tuple[str, ...]) -> tuple[bool, Any]:
    """(found, value) walking ``path``; a default ``{}`` on the way accepts anything below it."""
    node = defaults
    for index, key in enumerate(path):
        if isinstance(node, dict) and not node and index > 0:
            return True, None
        if not isinstance(node, dict) or key not in node:
            return False, None
        node = node[key]
    return True, node


def values_problems(store: SchemaStore, chart: str, version: str, values: dict[str, Any]) -> list[tuple[str, str]]:
    """``(dotted path, message)`` for every key path the pinned chart does not have and every schema error."""
    files = CHART_FILES[chart]
    problems: list[tuple[str, str]] = []
    values = dict(values)
    for key, rel in files.subcharts:
        sub = rel.format(version=version.lstrip("v"))
        if key in values and isinstance(values[key], dict) and store.has(sub):
            found = _problems(store, f"{chart}/{key}", version, values.pop(key), values_file=sub, schema_file=None)
            problems += [(f"{key}.{path}", message) for path, message in found]
    return problems + _problems(
        store,
        chart,
        version,
        values,
        values_file=files.values.format(version=version.lstrip("v")),
        schema_file=files.schema,
    )


def _problems(
    store: SchemaStore, chart: str, version: str, values: dict[str, Any], *, values_file: str, schema_file: str | None
) -> list[tuple[str, str]]:
    defaults = store.load(values_file) or {}
    schema = store.load(schema_file) if schema_file and store.has(schema_file) else None
    commented = commented_keys(store.text(values_file))
    problems: list[tuple[str, str]] = []
    for path in leaf_paths(values):
        found, default = _default_at(defaults, path)
        if found:
            ours = _value_at(values, path)
            if isinstance(default, dict) and default and not isinstance(ours, dict):
                kind = type(ours).__name__
                problems.append((".".join(path), f"is a map in {chart} {version} values.yaml, not a {kind}"))
            continue
        # A commented-out default documents its block too (gpu-operator's ``# config:`` with ``# name:`` below it).
        if any(path[:n] in commented for n in range(1, len(path) + 1)) or (
            schema is not None and _schema_declares(schema, path)
        ):
            continue
        problems.append((".".join(path), f"is not a value of chart {chart} {version} (renamed or removed upstream?)"))
    if schema is not None:
        merged = deep_merge(defaults, values)
        for error in sorted(jsonschema.Draft7Validator(schema).iter_errors(merged), key=lambda e: e.json_path):
            where = ".".join(str(p) for p in error.absolute_path) or "-"
            problems.append((where, f"{error.message} (chart {chart} {version} values.schema.json)"))
    return problems


def _value_at(values: dict[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = values
    for key in path:
        node = node[key]
    return node
