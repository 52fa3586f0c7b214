"""Shared fixtures: paths, upstream data, and a valid cell spec to derive test cases from."""

from __future__ import annotations

import copy
import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from gpucell.cluster import Cluster, ContainerRuntime
from gpucell.components.cilium import CiliumArgs
from gpucell.components.gpu_operator import GpuOperatorArgs, gpu_operator_values
from gpucell.engine.mock_engine import PlanResult, Registration
from gpucell.errors import ConfigError
from gpucell.spec import CellSpec, StackSpec
from gpucell.stacks.conformance.objects import Violation, checker_for
from gpucell.stacks.conformance.problems import MissingToolError
from gpucell.stacks.conformance.schemas import SchemaStore
from gpucell.stacks.plan import Plan, make_plan

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


LONGEST_FILES = (
    "test_maintenance.py",
    "test_conformance.py",
    "test_day2.py",
    "test_review.py",
    "test_config_fuzz.py",
    "test_package.py",
    "test_structure.py",
    "test_tenant_cluster_maintenance.py",
    "test_k3s.py",
    "test_gpu_serving.py",
    "test_component_package.py",
    "test_typing.py",
)
"""The test files that take longest, longest first (CPU seconds of each alone, docs/performance.md: 'Test suite').
``dev.py test`` gives its two workers a file at a time in collection order (``--no-loadscope-reorder``): these
first, then the others with the most tests first (pytest-xdist's own order), so that no long file starts last while
the other worker has nothing left to do."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order the test files as :data:`LONGEST_FILES` says; the tests of a file keep their order."""
    tests = Counter(item.nodeid.split("::")[0] for item in items)
    rank = {f"tests/{name}": index for index, name in enumerate(LONGEST_FILES)}
    order = sorted(tests, key=lambda path: (rank.get(path, len(rank)), -tests[path]))
    position = {path: index for index, path in enumerate(order)}
    items.sort(key=lambda item: position[item.nodeid.split("::")[0]])


def pytest_sessionstart(session: pytest.Session) -> None:
    """Stop at once, with the way out, when the upstream files are not there (instead of 60 FileNotFoundErrors)."""
    if not (UPSTREAM / "kubevirt" / "swagger.json").is_file():
        raise pytest.UsageError(
            f"upstream schemas not found in {UPSTREAM}: put the shared/ folder beside the clone, or point "
            "GPUCELL_UPSTREAM at a directory filled by `gpucell schemas fetch dev --dest DIR`"
        )


_SHARED_PLANS: dict[str, tuple[Plan, str]] = {}
_TAKEN: set[str] = set()


def shared_plan(stack: str) -> Plan:
    """``make_plan(REPO, stack)`` (a stack of the repository: ``dev``, ``prod-fra1`` or ``prod-iad1``), made once per
    test process and shared by every test that reads it: a prod plan takes about 1 s of CPU and 17 modules read one.
    Callers must not change it (copy what they change): each module that took it checks at its end that it is as
    made (:func:`shared_plans_unchanged`)."""
    if stack not in _SHARED_PLANS:
        plan = make_plan(REPO, stack)
        _SHARED_PLANS[stack] = (plan, plan_digest(plan))
    _TAKEN.add(stack)
    return _SHARED_PLANS[stack][0]


PROD_STACKS: dict[str, str] = {"fra1": "prod-fra1", "iad1": "prod-iad1"}
"""Production region -> its stack: one stack per region (docs/decisions/0034)."""


def prod_stack_file(region: str) -> Path:
    """``Pulumi.prod-<region>.yaml``."""
    return REPO / f"Pulumi.{PROD_STACKS[region]}.yaml"


def prod_regions() -> dict[str, Any]:
    """``gpucell:regions`` of every production stack, fra1 then iad1, as one mapping (a fresh copy): the regions as a
    lab stack holding them all lists them (the rules across regions judge them together)."""
    regions: dict[str, Any] = {}
    for region in PROD_STACKS:
        regions.update(yaml.safe_load(prod_stack_file(region).read_text())["config"]["gpucell:regions"])
    return regions


def prod_lab_config() -> dict[str, Any]:
    """The config of one lab stack holding every production region (fra1 then iad1) with their secrets: what
    ``Pulumi.prod.yaml`` was before production became a stack per region (docs/decisions/0034). Not production
    (``production: true`` holds one region); its regions plan as in their own stacks (tests/test_fleet.py)."""
    config: dict[str, Any] = {}
    regions: dict[str, Any] = {}
    for region in PROD_STACKS:
        stack = yaml.safe_load(prod_stack_file(region).read_text())["config"]
        regions.update(stack.pop("gpucell:regions"))
        stack.pop("gpucell:production")
        config.update(stack)
    return {"gpucell:regions": regions, **config}


def write_prod_lab(folder: Path, stack: str = "prod") -> Path:
    """``folder`` (created) as a project whose stack ``stack`` is :func:`prod_lab_config`, beside the repository's
    ``Pulumi.yaml``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text())
    (folder / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": prod_lab_config()}, sort_keys=False))
    return folder


def shared_prod_plans() -> list[Plan]:
    """:func:`shared_plan` of every production stack, fra1's first."""
    return [shared_plan(stack) for stack in PROD_STACKS.values()]


def prod_plan_of(region: str) -> Plan:
    """:func:`shared_plan` of the production stack of ``region``."""
    return shared_plan(PROD_STACKS[region])


class ProdPlans:
    """The production plans read by region: each region's resources and cell from its own stack's shared plan."""

    def __init__(self) -> None:
        self.plans = {region: prod_plan_of(region) for region in PROD_STACKS}

    @property
    def cells(self) -> dict[str, Any]:
        """Region -> its RegionalCell."""
        return {region: plan.cells[region] for region, plan in self.plans.items()}

    def region_resources(self, region: str) -> list[Registration]:
        """The region's RegionalCell and everything below it, from its stack's plan."""
        return self.plans[region].region_resources(region)

    def resources(self) -> list[Registration]:
        """Every registration of every production plan, fra1's first."""
        return [r for plan in self.plans.values() for r in plan.result.resources]

    def named(self, name: str) -> Registration:
        """The registration ``name`` (``<region>-...``) of its region's plan."""
        return self.plans[name.split("-", 1)[0]].result.named(name)


def plan_digest(plan: Plan) -> str:
    """A digest of what a test reads of ``plan``: every registration's fields (inputs with and without secrets,
    options, dependencies), the outputs, warnings and acknowledgements, each cell's spec and node files."""
    document = {
        "resources": [vars(r) for r in plan.result.resources],
        "outputs": plan.result.outputs,
        "warnings": plan.result.warnings,
        "acknowledge": plan.acknowledge,
        "cells": {
            region: [cell.spec.model_dump(mode="json"), cell.k3s.node_files] for region, cell in plan.cells.items()
        },
    }
    return hashlib.sha256(json.dumps(document, sort_keys=True, default=repr).encode()).hexdigest()


@pytest.fixture(scope="module", autouse=True)
def shared_plans_unchanged(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each module: the shared plans it took (:func:`shared_plan`) are as made, else the module fails,
    naming them (a test changed what later modules read)."""
    yield
    changed = sorted(stack for stack in _TAKEN if plan_digest(_SHARED_PLANS[stack][0]) != _SHARED_PLANS[stack][1])
    _TAKEN.clear()
    for stack in changed:
        del _SHARED_PLANS[stack]  # the next module gets a new one
    if changed:
        pytest.fail(f"{request.module.__name__} changed the shared plan of {', '.join(changed)}: copy what you change")


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
    """The problem lines of a stack holding ``region`` as ``fra1`` (docs/workloads.md shows prod-fra1's); ``[]``
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
