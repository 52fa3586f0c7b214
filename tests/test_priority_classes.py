"""PriorityClasses: the cell's classes, the quota that fences each tenant off the others (system-critical ones
included), workloads naming a class, and day 2."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpucell.components.priority_classes import priority_class_manifest
from gpucell.engine.mock_engine import PlanResult, run_program
from gpucell.spec import CellSpec
from gpucell.spec.scheduling import PriorityClassSpec
from gpucell.stacks.plan_diff import diff_plans
from gpucell.stacks.program import build_cells
from gpucell.tenancy.tenant import priority_quota_manifest
from gpucell.testing import provider_outputs
from tests.conftest import minimal_cell_config, plan_document, region_refusals, violations

QUOTA = {"cpuMillicores": 64000, "memoryGib": 512, "storageGib": 1000}
VM = {
    "memoryGib": 8,
    "rootDisk": {"source": {"registry": "docker://quay.io/containerdisks/ubuntu:24.04"}, "sizeGib": 20},
    "noLogin": True,
    "priorityClassName": "batch",
}


def lab_region() -> dict[str, Any]:
    region = minimal_cell_config()
    region["priorityClasses"] = {
        "inference-high": {"value": 100000, "description": "latency-critical endpoints", "tenants": ["acme"]},
        "batch": {"value": -1000, "preemptionPolicy": "Never"},
    }
    region["tenants"] = {
        "acme": {
            "egress": "internet",
            "quota": QUOTA,
            "modelEndpoints": {
                "e": {"modelFormat": "sklearn", "storageUri": "pvc://m/x", "priorityClassName": "inference-high"}
            },
            "notebooks": {"nb": {"cpuMillicores": 1000, "memoryGib": 2, "homeGib": 5, "priorityClassName": "batch"}},
        },
        "globex": {"egress": "internet", "quota": QUOTA, "virtualMachines": {"vm": copy.deepcopy(VM)}},
    }
    return region


def deploy(region: dict[str, Any] | None = None) -> PlanResult:
    config = {"gpucell:regions": {"lab": region or lab_region()}, "gpucell:sshPrivateKey": "key"}
    return run_program(build_cells, config=config, secret_keys=["gpucell:sshPrivateKey"], computed=provider_outputs())


@pytest.fixture(scope="module")
def plan() -> PlanResult:
    return deploy()


def test_each_class_is_a_priority_class_replaced_when_kubernetes_forbids_an_update(plan: PlanResult) -> None:
    high = plan.named("lab-priority-classes-inference-high")
    assert high.type == "kubernetes:scheduling.k8s.io/v1:PriorityClass"
    assert {k: high.inputs[k] for k in ("value", "preemptionPolicy", "globalDefault", "description")} == {
        "value": 100000,
        "preemptionPolicy": "PreemptLowerPriority",
        "globalDefault": False,
        "description": "latency-critical endpoints (tenants acme)",
    }
    assert (sorted(high.options["replaceOnChanges"]), high.options["deleteBeforeReplace"]) == (
        ["preemptionPolicy", "value"],
        True,
    )
    batch = plan.named("lab-priority-classes-batch")
    assert (batch.inputs["value"], batch.inputs["preemptionPolicy"], batch.inputs["description"]) == (
        -1000,
        "Never",
        "for every tenant",
    )
    for registration in (high, batch):
        assert violations(registration.masked_inputs()) == []


def test_each_tenant_quota_refuses_the_classes_it_may_not_name(plan: PlanResult) -> None:
    acme = plan.named("lab-acme-priority-quota").inputs["spec"]
    assert acme == {
        "hard": {"pods": "0"},
        "scopeSelector": {
            "matchExpressions": [
                {"scopeName": "PriorityClass", "operator": "Exists"},
                {"scopeName": "PriorityClass", "operator": "NotIn", "values": ["inference-high", "batch"]},
            ]
        },
    }
    globex = plan.named("lab-globex-priority-quota").inputs["spec"]["scopeSelector"]["matchExpressions"]
    assert globex[1]["values"] == ["batch"]
    assert plan.named("lab-priority-classes-batch").urn in plan.named("lab-globex-priority-quota").dependencies
    assert violations(plan.named("lab-acme-priority-quota").masked_inputs()) == []


def test_without_classes_a_tenant_may_name_none_system_critical_included() -> None:
    fence = priority_quota_manifest("acme", [])
    assert fence["spec"]["scopeSelector"] == {
        "matchExpressions": [{"scopeName": "PriorityClass", "operator": "Exists"}]
    }
    assert fence["metadata"]["name"] == "tenant-priority-classes"
    assert violations(fence) == []


def test_workloads_name_their_class_where_kubernetes_reads_it(plan: PlanResult) -> None:
    vm = plan.named("lab-globex-vm-vm").inputs["spec"]["template"]["spec"]
    assert vm["priorityClassName"] == "batch"
    notebook = plan.named("lab-acme-nb-statefulset").inputs["spec"]["template"]["spec"]
    assert notebook["priorityClassName"] == "batch"
    endpoint = plan.named("lab-acme-e-isvc").inputs["spec"]["predictor"]
    assert endpoint["priorityClassName"] == "inference-high"
    # after the class: through the tenant's priority quota, which every workload of the tenant waits for
    assert plan.named("lab-acme-priority-quota").urn in plan.named("lab-acme-e-isvc").dependencies
    assert plan.named("lab-priority-classes-inference-high").urn in plan.named("lab-acme-priority-quota").dependencies


def test_manifest_without_description_names_who_may_use_it() -> None:
    spec = PriorityClassSpec(value=5, tenants=["acme", "globex"])
    assert priority_class_manifest("x", spec)["description"] == "for tenants acme, globex"


def test_changing_a_value_replaces_the_class() -> None:
    before, region = deploy(), lab_region()
    region["priorityClasses"]["batch"]["value"] = -2000
    (found,) = diff_plans(plan_document(before), plan_document(deploy(region))).regions["lab"]
    assert (found.action, found.label) == ("replace", "PriorityClass batch")
    assert found.replaced_by == ["`value` changed (value cannot change in place)"]


def test_a_class_in_a_cell_spec_is_admitted_only_for_its_tenants() -> None:
    spec = CellSpec.model_validate(lab_region())
    assert list(spec.priority_classes) == ["inference-high", "batch"]


R = "regions.fra1"
"""The key path of the region the refusals are for (docs/workloads.md shows them for prod's fra1)."""


def vm(region: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = region["tenants"]["globex"]["virtualMachines"]["vm"]
    return found


@pytest.mark.parametrize(
    ("change", "line"),
    [
        (
            lambda r: vm(r).update(priorityClassName="urgent"),
            f"{R}.tenants.globex.virtualMachines.vm.priorityClassName: 'urgent' is not a PriorityClass of the cell "
            "(priorityClasses: inference-high, batch)",
        ),
        (
            lambda r: vm(r).update(priorityClassName="system-node-critical"),
            f"{R}.tenants.globex.virtualMachines.vm.priorityClassName: 'system-node-critical' is a class of "
            "Kubernetes or the platform components, which tenants' workloads never name; name one of the cell's: "
            "batch",
        ),
        (
            lambda r: vm(r).update(priorityClassName="inference-high"),
            f"{R}.tenants.globex.virtualMachines.vm.priorityClassName: 'inference-high' is not open to tenant globex "
            "(priorityClasses.inference-high.tenants: acme); name one it may use: batch",
        ),
        (
            lambda r: r["priorityClasses"].update({"system-fast": {"value": 5}}),
            f"{R}.priorityClasses.system-fast: 'system-fast': the system- prefix is reserved for Kubernetes' own "
            "classes",
        ),
        (
            lambda r: r["priorityClasses"].update({"longhorn-critical": {"value": 5}}),
            f"{R}.priorityClasses.longhorn-critical: 'longhorn-critical' is a class the platform installs itself; "
            "choose another name",
        ),
        (
            lambda r: r["priorityClasses"]["batch"].update(value=1000000000),
            f"{R}.priorityClasses.batch.value: 1000000000 is invalid: Input should be less than or equal to 999999999",
        ),
        (
            lambda r: r["priorityClasses"].update({"spare": {"value": 1, "tenants": ["Initech Corp"]}}),
            f"{R}.priorityClasses.spare.tenants[0]: 'Initech Corp' is not a tenant name (a DNS-1123 label)",
        ),
        (
            lambda r: r["priorityClasses"]["batch"].update(preemptionPolicy="Sometimes"),
            f"{R}.priorityClasses.batch.preemptionPolicy: 'Sometimes' is not one of PreemptLowerPriority, Never",
        ),
    ],
)
def test_bad_priority_class_config_is_one_line(change: Any, line: str) -> None:
    region = lab_region()
    change(region)
    assert region_refusals(region) == [line]
