"""Shared fixtures: paths, upstream data, and a valid cell spec to derive test cases from."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any, cast

import pytest

from gpucell.cluster import Cluster, ContainerRuntime
from gpucell.components.cilium import CiliumArgs
from gpucell.components.gpu_operator import GpuOperatorArgs, gpu_operator_values
from gpucell.engine.mock_engine import PlanResult, Registration
from gpucell.errors import ConfigError
from gpucell.spec import CellSpec, StackSpec
from gpucell.stacks.conformance.objects import Violation, checker_for
from gpucell.stacks.conformance.problems import MissingToolError
from gpucell.stacks.conformance.schemas import SchemaStore

REPO = Path(__file__).resolve().parent.parent
UPSTREAM = Path(os.environ.get("GPUCELL_UPSTREAM") or REPO.parent / "shared" / "upstream")
"""Upstream schemas and chart values the tests check against: ``$GPUCELL_UPSTREAM``, else ``../shared/upstream``
beside the clone (where CI puts it). Never copied into the repository."""
STORE = SchemaStore(UPSTREAM)
"""The upstream files as ``gpucell plan --check`` reads them (for ``values_problems`` and default values)."""
KUBERNETES_MINOR = "1.34"
"""The Kubernetes minor the rendered objects are checked at (the default k3s pin's)."""
SCHEMA_CHECKERS = ("kubernetes", "custom-resource", "helm-values", "script", "node-config")
"""Every checker but checkov's ``security``: their verdicts are asserted apart from checkov's, so that a machine
without checkov still sees them."""
SECURITY = ("security",)
"""checkov alone; tests asking for it take the :func:`checkov` fixture."""
CHART = ("chart",)
"""The chart checker alone (it runs helm); tests asking for it take the :func:`helm` fixture."""


@pytest.fixture
def checkov() -> str:
    """The checkov program. Skips the test when it is missing, unless ``GPUCELL_REQUIRE_CHECKOV`` is set (``python3
    dev.py test`` sets it, so in CI a missing checkov fails)."""
    from gpucell.stacks.conformance.security import checkov_binary

    try:
        return checkov_binary()
    except MissingToolError as exc:
        if os.environ.get("GPUCELL_REQUIRE_CHECKOV"):
            pytest.fail(str(exc))
        pytest.skip(str(exc))


@pytest.fixture
def helm() -> str:
    """The helm program. Skips the test when it is missing, unless ``GPUCELL_REQUIRE_HELM`` is set (``python3
    dev.py test`` sets it, so in CI a missing helm fails)."""
    from gpucell.stacks.conformance.charts import helm_binary

    try:
        return helm_binary()
    except MissingToolError as exc:
        if os.environ.get("GPUCELL_REQUIRE_HELM"):
            pytest.fail(str(exc))
        pytest.skip(str(exc))


def pytest_sessionstart(session: pytest.Session) -> None:
    """Stop at once, with the way out, when the upstream files are not there (instead of 60 FileNotFoundErrors)."""
    if not (UPSTREAM / "kubevirt" / "swagger.json").is_file():
        raise pytest.UsageError(
            f"upstream schemas not found in {UPSTREAM}: put the shared/ folder beside the clone, or point "
            "GPUCELL_UPSTREAM at a directory filled by `gpucell schemas fetch dev --dest DIR`"
        )


def minimal_cell_config() -> dict[str, Any]:
    """A small valid region in stack-config form (camelCase): 1 server, 1 GPU worker, 1 CPU worker."""
    return copy.deepcopy(
        {
            "network": {"nodeCidr": "10.20.0.0/24"},
            "nodePools": {
                "servers": {"role": "server", "hosts": [{"name": "lab-srv-1", "address": "10.20.0.11"}]},
                "l40s": {
                    "role": "gpu",
                    "gpuModel": "L40S",
                    "gpusPerNode": 2,
                    "gpuMode": "container",
                    "hosts": [{"name": "lab-gpu-1", "address": "10.20.0.21"}],
                },
                "cpu": {"role": "cpu", "hosts": [{"name": "lab-cpu-1", "address": "10.20.0.31"}]},
            },
        }
    )


@pytest.fixture
def cell_config() -> dict[str, Any]:
    """A fresh copy of :func:`minimal_cell_config` per test."""
    return minimal_cell_config()


def cell(config: dict[str, Any]) -> CellSpec:
    """Validate a region config into a :class:`CellSpec`."""
    return CellSpec.model_validate(config)


def offline_cluster(spec: CellSpec) -> Cluster:
    """A handle on ``spec``'s cluster for rendering values outside a Pulumi program: no provider (nothing is
    registered with it), the cell's Kubernetes minor and k3s's containerd."""
    minor = spec.versions.kubernetes_minor
    return Cluster(cast("Any", None), minor, ContainerRuntime.k3s(minor))


def program_cluster(spec: CellSpec, name: str = "lab") -> Cluster:
    """Inside a program under mocks: a handle on ``spec``'s cluster with a provider ``<name>-k8s`` (registered by
    :meth:`Cluster.from_kubeconfig`), the cell's Kubernetes minor and k3s's containerd."""
    minor = spec.versions.kubernetes_minor
    return Cluster.from_kubeconfig(name, "apiVersion: v1\nkind: Config\n", minor, ContainerRuntime.k3s(minor))


def operator_values(spec: CellSpec) -> dict[str, Any]:
    """The GPU Operator values gpucell renders for cell ``spec``."""
    args = GpuOperatorArgs.from_cell(spec, offline_cluster(spec))
    return gpu_operator_values(args.spec, args.node_pools, args.cluster.runtime, metrics=args.metrics)


def cell_cilium_values(spec: CellSpec) -> dict[str, Any]:
    """The Cilium values gpucell renders for cell ``spec``."""
    return CiliumArgs.from_cell(spec, offline_cluster(spec)).values()


def violations(obj: dict[str, Any], *, partial: bool = False) -> list[Violation]:
    """Schema violations of a rendered object (``partial`` for patches), as ``gpucell plan --check`` finds them."""
    return list(checker_for(UPSTREAM, KUBERNETES_MINOR).check(obj, partial=partial))


def at(values: dict[str, Any], path: str) -> Any:
    """The value at dotted ``path`` of nested (Helm) values."""
    node: Any = values
    for key in path.split("."):
        node = node[key]
    return node


def workload(plan: PlanResult, name: str) -> Registration:
    """The component of workload ``name`` of tenant ``acme`` in region ``lab`` (the workload tests' layout)."""
    return plan.named(f"lab-acme-{name}")


def workload_children(plan: PlanResult, name: str, type_token: str) -> list[Registration]:
    """The children of type ``type_token`` of workload ``name`` (see :func:`workload`)."""
    return [r for r in plan.children(workload(plan, name)) if r.type == type_token]


def region_refusals(region: dict[str, Any]) -> list[str]:
    """The problem lines of a stack holding ``region`` as ``fra1`` (docs/workloads.md shows prod's fra1); ``[]``
    when it validates."""
    try:
        StackSpec.model_validate({"regions": {"fra1": region}})
    except ConfigError as exc:
        return exc.lines
    return []


def plan_document(plan: PlanResult) -> dict[str, Any]:
    """A mocked program's registrations as a plan JSON document, for ``gpucell.stacks.plan_diff.diff_plans``."""
    keys = ("urn", "type", "name", "parent", "provider", "dependencies", "options", "inputs")
    resources = [{key: getattr(r, key) for key in keys} | {"secrets": r.secret_digests} for r in plan.resources]
    return {"stack": "test", "resources": resources, "outputs": {}, "acknowledge": []}


def tainted_mig_pool() -> dict[str, Any]:
    """A container-mode H200 pool in MIG ``all-balanced`` with a ``nvidia.com/gpu`` taint (host 10.20.0.51)."""
    return {
        "role": "gpu",
        "gpuModel": "H200-SXM-141GB",
        "gpusPerNode": 8,
        "gpuMode": "container",
        "migConfig": "all-balanced",
        "hosts": [{"name": "h200-1", "address": "10.20.0.51"}],
        "taints": ["nvidia.com/gpu=present:NoSchedule"],
    }
