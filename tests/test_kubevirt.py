"""KubeVirt: operator manifest, the KubeVirt CR's gates and permitted GPUs, its swagger shape and ordering."""

from __future__ import annotations

import copy
import inspect
from typing import Any

import pulumi
import pytest
from pulumi_kubernetes.core.v1 import ConfigMap

from gpucell.components import kubevirt
from gpucell.components.kubevirt import KubeVirt, KubeVirtArgs, release_tag
from gpucell.engine.mock_engine import PlanResult, Registration, run_program
from gpucell.spec import CellSpec
from gpucell.stacks.conformance.objects import Violation
from tests.conftest import UPSTREAM, cell, minimal_cell_config, program_cluster, violations

CR = "kubernetes:kubevirt.io/v1:KubeVirt"
CONFIG_FILE = "kubernetes:yaml/v2:ConfigFile"


def gpu_pool(model: str, mode: str, hosts: list[tuple[str, str]], **fields: Any) -> dict[str, Any]:
    return {
        "role": "gpu",
        "gpuModel": model,
        "gpusPerNode": 8,
        "gpuMode": mode,
        "hosts": [{"name": n, "address": a} for n, a in hosts],
        **fields,
    }


def vm_cell_config() -> dict[str, Any]:
    """Two H100 passthrough pools (one with a topology profile), an A100 passthrough, an L40S vGPU pool (SR-IOV
    with the branch-580 driver) and a T4 vGPU pool (mdev: Turing has no SR-IOV)."""
    config = minimal_cell_config()
    pools = config["nodePools"]
    pools["h100-vm"] = gpu_pool(
        "H100-SXM5-80GB",
        "vm-passthrough",
        [("h100-1", "10.20.0.41")],
        topology={"reservedCpus": "0-3", "cpusPerNuma": 64, "memoryPerNumaGib": 1024},
    )
    pools["h100-vm-b"] = gpu_pool("H100-SXM5-80GB", "vm-passthrough", [("h100-2", "10.20.0.42")])
    pools["a100-vm"] = gpu_pool("A100-SXM4-80GB", "vm-passthrough", [("a100-1", "10.20.0.51")])
    pools["l40s-vgpu"] = gpu_pool("L40S", "vm-vgpu", [("l40s-v-1", "10.20.0.61")], vgpuProfile="L40S-24Q")
    pools["t4-vgpu"] = gpu_pool("T4", "vm-vgpu", [("t4-v-1", "10.20.0.71")], gpusPerNode=4, vgpuProfile="T4-8Q")
    image = {"repository": "registry.example.com/nvidia", "version": "580.95.02"}
    config["gpuOperator"] = {"vgpuDriverImage": image}
    return config


def install(spec: CellSpec, *, after: bool = False) -> tuple[PlanResult, Registration]:
    def program() -> None:
        deps = [ConfigMap("cilium-ready")] if after else []
        kubevirt = KubeVirt(
            "fra1", KubeVirtArgs.from_cell(spec, program_cluster(spec)), opts=pulumi.ResourceOptions(depends_on=deps)
        )
        pulumi.export("namespace", kubevirt.namespace)

    plan = run_program(program)
    (cr,) = plan.of_type(CR)
    return plan, cr


def test_operator_comes_from_the_pinned_release_manifest() -> None:
    plan, _ = install(cell(minimal_cell_config()))
    (operator,) = plan.of_type(CONFIG_FILE)
    assert operator.name == "fra1-operator"
    assert operator.inputs["file"] == (
        "https://github.com/kubevirt/kubevirt/releases/download/v1.9.0/kubevirt-operator.yaml"
    )


def test_a_version_without_v_still_names_the_release_tag() -> None:
    config = minimal_cell_config()
    config["versions"] = {"kubevirt": "1.8.2"}
    plan, _ = install(cell(config))
    assert plan.of_type(CONFIG_FILE)[0].inputs["file"].endswith("/download/v1.8.2/kubevirt-operator.yaml")
    assert release_tag("v1.9.0") == "v1.9.0"


def test_cr_is_the_one_kubevirt_in_its_namespace_and_waits_for_available() -> None:
    plan, cr = install(cell(minimal_cell_config()))
    assert cr.name == "fra1-kubevirt"
    assert cr.inputs["apiVersion"] == "kubevirt.io/v1"
    assert cr.inputs["metadata"] == {
        "name": "kubevirt",
        "namespace": "kubevirt",
        "annotations": {"pulumi.com/waitFor": "condition=Available"},
    }
    assert plan.outputs["namespace"] == "kubevirt"
    (component,) = plan.of_type("gpucell:index:KubeVirt")
    assert cr.parent == component.urn


def test_cr_depends_on_the_operator() -> None:
    plan, cr = install(cell(minimal_cell_config()))
    assert plan.named("fra1-operator").urn in cr.dependencies


def test_children_wait_for_the_components_dependencies() -> None:
    plan, _ = install(cell(minimal_cell_config()), after=True)
    (component,) = plan.of_type("gpucell:index:KubeVirt")
    children = plan.children(component)
    assert sorted(c.name for c in children) == ["fra1-kubevirt", "fra1-operator"]
    for child in children:
        assert plan.named("cilium-ready").urn in child.dependencies


def test_container_only_cell_configures_only_the_launchers_seccomp_profile_and_the_vm_platform() -> None:
    """Every cell, with VMs or not: launcher pods get RuntimeDefault, so tenant namespaces can enforce restricted;
    the common instancetypes, the VM state class and the CPU a vCPU requests are always said out loud (a VM sized by an
    instancetype would request a tenth of a CPU per vCPU at KubeVirt's default ratio, 10)."""
    _, cr = install(cell(minimal_cell_config()))
    assert cr.inputs["spec"] == {
        "configuration": {
            "seccompConfiguration": {
                "virtualMachineInstanceProfile": {"customProfile": {"runtimeDefaultProfile": True}}
            },
            "developerConfiguration": {"cpuAllocationRatio": 1},
            "commonInstancetypesDeployment": {"enabled": True},
            "vmStateStorageClass": "local-path",
        }
    }


def test_passthrough_pools_permit_each_model_and_its_nvswitch_once_from_the_sandbox_device_plugin() -> None:
    _, cr = install(cell(vm_cell_config()))
    devices = cr.inputs["spec"]["configuration"]["permittedHostDevices"]
    assert devices["pciHostDevices"] == [
        {
            "pciVendorSelector": "10DE:2330",
            "resourceName": "nvidia.com/GH100_H100_SXM5_80GB",
            "externalResourceProvider": True,
        },
        {
            "pciVendorSelector": "10DE:22A3",
            "resourceName": "nvidia.com/GH100_H100_NVSWITCH",
            "externalResourceProvider": True,
        },
        {
            "pciVendorSelector": "10DE:20B2",
            "resourceName": "nvidia.com/GA100_A100_SXM4_80GB",
            "externalResourceProvider": True,
        },
        {
            "pciVendorSelector": "10DE:1AF1",
            "resourceName": "nvidia.com/GA100_A100_NVSWITCH",
            "externalResourceProvider": True,
        },
        # SR-IOV vGPU VFs: advertised by virt-handler itself (kubevirt/kubevirt#16890), so no external provider.
        {"pciVendorSelector": "10DE:26B9", "resourceName": "nvidia.com/NVIDIA_L40S-24Q"},
    ]


def test_b200_passthrough_permits_no_nvswitch() -> None:
    config = minimal_cell_config()
    config["nodePools"]["b200-vm"] = gpu_pool("B200", "vm-passthrough", [("b200-1", "10.20.0.41")])
    _, cr = install(cell(config))
    assert cr.inputs["spec"]["configuration"]["permittedHostDevices"]["pciHostDevices"] == [
        {"pciVendorSelector": "10DE:2901", "resourceName": "nvidia.com/GB100_B200", "externalResourceProvider": True},
    ]


def test_mdev_vgpu_pool_permits_its_mdev_type_and_stops_kubevirt_managing_mdevs() -> None:
    _, cr = install(cell(vm_cell_config()))
    configuration = cr.inputs["spec"]["configuration"]
    assert configuration["permittedHostDevices"]["mediatedDevices"] == [
        {
            "mdevNameSelector": "NVIDIA T4-8Q",
            "resourceName": "nvidia.com/NVIDIA_T4-8Q",
            "externalResourceProvider": True,
        },
    ]
    assert configuration["mediatedDevicesConfiguration"] == {"enabled": False}
    assert "DisableMDEVConfiguration" not in configuration["developerConfiguration"]["featureGates"]


def test_sriov_vgpu_only_renders_no_mdev_at_all() -> None:
    config = vm_cell_config()
    del config["nodePools"]["t4-vgpu"]
    _, cr = install(cell(config))
    configuration = cr.inputs["spec"]["configuration"]
    assert "mediatedDevices" not in configuration["permittedHostDevices"]
    assert "mediatedDevicesConfiguration" not in configuration


def test_tainted_vm_pools_keep_virt_handler() -> None:
    config = vm_cell_config()
    config["nodePools"]["h100-vm"]["taints"] = ["gpucell.io/gpu=h100:NoSchedule"]
    config["nodePools"]["cpu"]["taints"] = ["dedicated:NoExecute"]
    config["nodePools"]["l40s"]["taints"] = ["container-only:NoSchedule"]  # container mode: no VMs there
    _, cr = install(cell(config))
    assert cr.inputs["spec"]["workloads"] == {
        "nodePlacement": {
            "tolerations": [
                {"key": "dedicated", "operator": "Exists", "effect": "NoExecute"},
                {"key": "gpucell.io/gpu", "operator": "Equal", "value": "h100", "effect": "NoSchedule"},
                {"key": "gpucell.io/acceptance", "operator": "Exists", "effect": "NoSchedule"},
            ]
        }
    }
    assert violations(cr.inputs) == []


def test_gates_are_host_devices_and_cpu_manager_never_deprecated_ones() -> None:
    _, cr = install(cell(vm_cell_config()))
    gates = cr.inputs["spec"]["configuration"]["developerConfiguration"]["featureGates"]
    assert gates == ["HostDevices", "CPUManager"]


def test_the_gates_are_alpha_at_v1_9_0_where_the_module_says() -> None:
    """KubeVirt v1.9.0 (79d34c17) declares and registers every gate in ``pkg/virt-config/featuregate/active.go`` and
    ``inactive.go``; ``legacy/host_devices.go`` and ``legacy/cpu_manager.go`` come from a later refactor
    (``shared/upstream/kubevirt/feature-gates-v1.9.0.md`` lists the gates, their states and lines)."""
    summary = (UPSTREAM / "kubevirt" / "feature-gates-v1.9.0.md").read_text()
    rows = {line.split("|")[1].strip(): line for line in summary.splitlines() if line.startswith("| `")}
    assert "| Alpha | `HostDevicesGate`: active.go:27 | active.go:299 |" in rows["`HostDevices`"]
    assert "| Alpha | `CPUManager`: active.go:23 | active.go:295 |" in rows["`CPUManager`"]
    source = inspect.getsource(kubevirt)
    assert "legacy/host_devices.go" not in source
    assert "legacy/cpu_manager.go" not in source
    assert "``HostDevicesGate`` line 27, registered Alpha line 299" in source
    assert "``CPUManager`` line 23, registered Alpha line 295" in source


def test_passthrough_only_cell_has_no_mdev_settings_and_no_cpu_manager() -> None:
    config = minimal_cell_config()
    config["nodePools"]["h100-vm"] = gpu_pool("H100-SXM5-80GB", "vm-passthrough", [("h100-1", "10.20.0.41")])
    _, cr = install(cell(config))
    assert set(cr.inputs["spec"]) == {"configuration", "workloads"}  # workloads: virt-handler tolerates acceptance
    configuration = cr.inputs["spec"]["configuration"]
    assert set(configuration) == {
        "seccompConfiguration",
        "developerConfiguration",
        "permittedHostDevices",
        "commonInstancetypesDeployment",
        "vmStateStorageClass",
    }
    assert set(configuration["permittedHostDevices"]) == {"pciHostDevices"}
    assert configuration["developerConfiguration"] == {"featureGates": ["HostDevices"], "cpuAllocationRatio": 1}


@pytest.mark.parametrize("config", [minimal_cell_config(), vm_cell_config()], ids=["container", "vm"])
def test_cr_matches_the_kubevirt_v1_9_swagger(config: dict[str, Any]) -> None:
    _, cr = install(cell(config))
    assert violations(cr.inputs) == []


def test_swagger_check_rejects_unknown_and_misplaced_fields() -> None:
    _, cr = install(cell(vm_cell_config()))
    misplaced = copy.deepcopy(cr.inputs)
    misplaced["spec"]["configuration"]["featureGates"] = ["HostDevices"]
    assert violations(misplaced) == [
        Violation("spec.configuration", "Additional properties are not allowed ('featureGates' was unexpected)")
    ]
    # A misspelt key is caught where it stands. (Leaving resourceName out alone passes: the swagger defaults it
    # to "", and the check fills defaults before `required`, as the API server does.)
    misspelt = copy.deepcopy(cr.inputs)
    device = misspelt["spec"]["configuration"]["permittedHostDevices"]["pciHostDevices"][0]
    device["resource_name"] = device.pop("resourceName")
    assert violations(misspelt) == [
        Violation(
            "spec.configuration.permittedHostDevices.pciHostDevices[0]",
            "Additional properties are not allowed ('resource_name' was unexpected)",
        )
    ]
