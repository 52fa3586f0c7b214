"""Installing a Helm chart the one way every component does it, and merging user values over ours."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi_kubernetes.helm.v3 import Release, ReleaseArgs, RepositoryOptsArgs

__all__ = ["ChartSource", "deep_merge", "helm_release"]

HELM_TIMEOUT_SECONDS = 900
"""How long Helm waits for a release's workloads to become ready (seconds)."""


@dataclass(frozen=True)
class ChartSource:
    """Where a chart comes from: a classic repository URL plus chart name, or an ``oci://`` reference."""

    chart: str
    """Chart name in ``repo``, or a full ``oci://registry/path/chart`` reference (then ``repo`` is ``None``)."""
    repo: str | None = None
    """Repository URL, e.g. ``https://helm.cilium.io``."""


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``base`` with ``override`` merged in: maps merge key by key, any other value replaces.

    Neither argument is modified. ``deep_merge({"a": {"b": 1, "c": 2}}, {"a": {"c": 3}}) == {"a": {"b": 1, "c": 3}}``.
    """
    merged = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def helm_release(
    resource_name: str,
    *,
    source: ChartSource,
    version: str,
    namespace: str,
    values: Mapping[str, Any],
    overrides: Mapping[str, Any],
    opts: pulumi.ResourceOptions,
    release_name: str | None = None,
    disable_openapi_validation: bool = False,
) -> Release:
    """Register a Helm release (``kubernetes:helm.sh/v3:Release``) that waits until its workloads are ready.

    ``values`` are the ones the component renders; ``overrides`` (the user's ``values`` key) are deep-merged
    last. ``release_name`` is the Helm release name in the cluster (defaults to the chart name); each cell is its
    own cluster, so fixed release names never collide across regions. Helm Release rather than ``helm.v4.Chart``:
    see ``docs/decisions/0002-helm-release-for-charts.md``. ``disable_openapi_validation`` is Helm's
    ``--disable-openapi-validation`` (for charts whose pre-upgrade hook updates their CRDs, so the new manifests
    must not be validated against the old CRDs).
    """
    return Release(
        resource_name,
        ReleaseArgs(
            name=release_name or source.chart.rsplit("/", 1)[-1],
            chart=source.chart,
            version=version,
            repository_opts=RepositoryOptsArgs(repo=source.repo) if source.repo else None,
            namespace=namespace,
            create_namespace=True,
            values=deep_merge(values, overrides),
            atomic=True,
            cleanup_on_fail=True,
            skip_await=False,
            timeout=HELM_TIMEOUT_SECONDS,
            disable_openapi_validation=disable_openapi_validation or None,
        ),
        opts=opts,
    )
