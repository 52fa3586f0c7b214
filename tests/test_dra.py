"""DRA pools rendered: the claims, the device classes they name, the DRA driver's chart values and release, the
KubeVirt gate, the GPU Operator and node settings around it, the ordering of DRA VMs, and the conformance of all of
it against the pinned upstream files."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pulumi
import pytest
from pulumi.runtime.mocks import MockResourceArgs
from pulumi_kubernetes.apiextensions import CustomResource

from gpucell.admission.dra import (
    DEVICE_CLASSES,
    claim_template_name,
    container_claim_template,
    device_class_manifest,
    quota_key,
    vm_claim_template,
)
from gpucell.catalog.gpu_catalog import CATALOG
from gpucell.cell import RegionalCell, RegionalCellArgs
from gpucell.cluster import ContainerRuntime
from gpucell.components.dra_driver import (
    NAMESPACE,
    TOOLKIT_ANNOTATION,
    dra_driver_values,
    driver_root,
    toolkit_fingerprint,
)
from gpucell.components.kubevirt import feature_gates, kubevirt_spec
from gpucell.day2.disruption import compare, fingerprint
from gpucell.engine.mock_engine import PlanResult, Registration, run_program
from gpucell.errors import ConfigError
from gpucell.k3s._host_setup import host_setup, iommu_check
from gpucell.k3s._scripts import node_config
from gpucell.spec import CellSpec
from gpucell.spec.tenancy import TenantSpec
from gpucell.stacks.conformance.admission import admission_violations, claim_template_violations
from gpucell.stacks.conformance.helm_values import values_problems
from gpucell.stacks.conformance.node_files import shellcheck
from gpucell.stacks.conformance.run import check_region
from gpucell.tenancy._common import container_placement, vm_placement
from gpucell.tenancy.tenant import Tenant, TenantArgs, quota_hard
from gpucell.testing import read_outputs
from gpucell.workloads import (
    GpuVirtualMachine,
    GpuVirtualMachineArgs,
    ModelEndpoint,
    ModelEndpointArgs,
    Notebook,
    NotebookArgs,
)
from gpucell.workloads.model_endpoint import inference_service_manifest
from gpucell.workloads.notebook import statefulset_manifest
from gpucell.workloads.virtual_machine import claim_template_manifest, virtual_machine_manifest
from tests.conftest import STORE, cell, minimal_cell_config, operator_values, shared_plan, violations

RELEASE = "kubernetes:helm.sh/v3:Release"
RCT = "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate"
KUBECONFIG = "apiVersion: v1\nclusters:\n- cluster:\n    server: https://127.0.0.1:6443\n  name: d\n"
DISK = {"source": {"registry": "docker://quay.io/containerdisks/ubuntu:24.04"}, "sizeGib": 50}
L4_VFIO = (
    "device.attributes['gpu.nvidia.com'].vendorID == '0x10de' && "
    "device.attributes['gpu.nvidia.com'].deviceID == '0x27b8'"
)
ADA = "device.attributes['gpu.nvidia.com'].architecture == 'Ada Lovelace'"
LABELS = {"app.kubernetes.io/name": "cad", "app.kubernetes.io/managed-by": "gpucell", "gpucell.io/tenant": "acme"}


def dra_config(*, container_pool: bool = True) -> dict[str, Any]:
    """The minimal region (its L40S container pool optional) plus a tainted L4 dra pool of 4 GPUs per node."""
    config = minimal_cell_config()
    if not container_pool:
        del config["nodePools"]["l40s"]
    config["nodePools"]["l4-dra"] = {
        "role": "gpu",
        "gpuModel": "L4",
        "gpusPerNode": 4,
        "gpuMode": "dra",
        "hosts": [{"name": "lab-l4-1", "address": "10.20.0.41"}],
        "taints": ["gpucell.io/dra=l4:NoSchedule"],
    }
    return config


ACME = TenantSpec.model_validate(
    {
        "quota": {
            "cpuMillicores": 64000,
            "memoryGib": 512,
            "storageGib": 1000,
            "deviceClasses": {"gpu.nvidia.com": 2, "vfio.gpu.nvidia.com": 2},
        },
        "egress": "internet",
        "virtualMachines": {
            "cad": {
                "gpuModel": "L4",
                "gpus": 2,
                "gpuAllocation": "dra",
                "memoryGib": 32,
                "rootDisk": DISK,
                "noLogin": True,
            }
        },
        "notebooks": {"nb": {"gpu": {"count": 1, "model": "L4", "allocation": "dra"}}},
        "modelEndpoints": {
            "llm": {"modelFormat": "huggingface", "storageUri": "hf://o/m", "gpu": {"count": 1, "allocation": "dra"}}
        },
    }
)


def region() -> CellSpec:
    return cell({**dra_config(), "tenants": {"acme": ACME.model_dump(by_alias=True, exclude_unset=True)}})


def computed(args: MockResourceArgs) -> dict[str, Any]:
    if args.typ == "command:remote:Command" and args.name.endswith("-kubeconfig"):
        return {"stdout": KUBECONFIG}
    return read_outputs(args)


def deploy() -> PlanResult:
    """The region, tenant acme and its three DRA workloads as components."""

    def program() -> None:
        spec = region()
        lab = RegionalCell("lab", RegionalCellArgs(cell=spec, ssh_private_key=pulumi.Output.secret("k")))
        tenant = Tenant("lab-acme", TenantArgs.from_cell("acme", ACME, lab))
        GpuVirtualMachine("lab-acme-cad", GpuVirtualMachineArgs("cad", ACME.virtual_machines["cad"], tenant))
        Notebook("lab-acme-nb", NotebookArgs("nb", ACME.notebooks["nb"], tenant))
        ModelEndpoint("lab-acme-llm", ModelEndpointArgs("llm", ACME.model_endpoints["llm"], tenant))

    return run_program(program, computed=computed)


# -- the claims, by value --------------------------------------------------------------------------------------
def test_a_vm_claim_has_one_vfio_request_per_gpu_with_the_vfio_config_kubevirt_needs() -> None:
    meta = {"namespace": "tenant-acme", "labels": dict(LABELS)}
    template = vm_claim_template(meta, "cad", CATALOG["L4"], 2)
    exactly = {
        "deviceClassName": "vfio.gpu.nvidia.com",
        "allocationMode": "ExactCount",
        "count": 1,
        "selectors": [{"cel": {"expression": L4_VFIO}}],
    }
    assert template == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"namespace": "tenant-acme", "labels": LABELS, "name": template["metadata"]["name"]},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu0", "exactly": exactly}, {"name": "gpu1", "exactly": exactly}],
                    "config": [
                        {
                            "requests": ["gpu0", "gpu1"],
                            "opaque": {
                                "driver": "gpu.nvidia.com",
                                "parameters": {
                                    "apiVersion": "resource.nvidia.com/v1beta1",
                                    "kind": "VfioDeviceConfig",
                                    "iommu": {"backendPolicy": "LegacyOnly", "enableAPIDevice": True},
                                },
                            },
                        }
                    ],
                }
            }
        },
    }
    assert template["metadata"]["name"] == claim_template_name("cad", template["spec"])
    assert template["metadata"]["name"].startswith("cad-gpus-")


def test_a_container_claim_asks_for_count_gpus_of_the_models_architecture() -> None:
    with_model = container_claim_template({"namespace": "tenant-acme"}, "nb", CATALOG["L4"], 2)
    assert with_model["spec"] == {
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpus",
                        "exactly": {
                            "deviceClassName": "gpu.nvidia.com",
                            "allocationMode": "ExactCount",
                            "count": 2,
                            "selectors": [{"cel": {"expression": ADA}}],
                        },
                    }
                ]
            }
        }
    }
    without = container_claim_template({"namespace": "tenant-acme"}, "nb", None, 2)
    assert "selectors" not in without["spec"]["spec"]["devices"]["requests"][0]["exactly"]


def test_a_changed_claim_is_a_new_template() -> None:
    one = vm_claim_template({}, "cad", CATALOG["L4"], 1)["metadata"]["name"]
    two = vm_claim_template({}, "cad", CATALOG["L4"], 2)["metadata"]["name"]
    other_model = vm_claim_template({}, "cad", CATALOG["T4"], 1)["metadata"]["name"]
    assert len({one, two, other_model}) == 3
    assert vm_claim_template({}, "cad", CATALOG["L4"], 1)["metadata"]["name"] == one


def test_claims_name_the_device_classes_the_chart_renders() -> None:
    assert DEVICE_CLASSES == {
        "gpu.nvidia.com": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
        "mig.nvidia.com": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
        "vfio.gpu.nvidia.com": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type "
        "== 'vfio'",
    }
    assert device_class_manifest("gpu.nvidia.com")["spec"]["extendedResourceName"] == "nvidia.com/gpu"
    assert "extendedResourceName" not in device_class_manifest("vfio.gpu.nvidia.com")["spec"]


# -- the workloads, by value ---------------------------------------------------------------------------------------
def test_dra_vm_takes_its_gpus_from_its_claim() -> None:
    spec, vm = region(), ACME.virtual_machines["cad"]
    placement = vm_placement("cad", vm, spec)
    manifest = virtual_machine_manifest("acme", "cad", vm, spec, placement)
    template = claim_template_manifest("acme", "cad", vm, placement)
    assert template is not None
    pod = manifest["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": template["metadata"]["name"]}]
    assert pod["domain"]["devices"]["gpus"] == [
        {"name": "gpu0", "claimName": "gpus", "requestName": "gpu0"},
        {"name": "gpu1", "claimName": "gpus", "requestName": "gpu1"},
    ]
    assert "hostDevices" not in pod["domain"]["devices"]
    assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {
            "matchExpressions": [
                {"key": "gpucell.io/pool", "operator": "In", "values": ["l4-dra"]},
                {"key": "nvidia.com/gpu.workload.config", "operator": "In", "values": ["container"]},
            ]
        }
    ]
    assert pod["tolerations"] == [{"key": "gpucell.io/dra", "operator": "Equal", "value": "l4", "effect": "NoSchedule"}]
    assert template["metadata"]["labels"] == LABELS
    assert [r["name"] for r in template["spec"]["spec"]["devices"]["requests"]] == ["gpu0", "gpu1"]
    assert list(admission_violations(manifest)) == []


def test_dra_notebook_lists_its_claim_and_runs_without_the_nvidia_runtime() -> None:
    spec, notebook = region(), ACME.notebooks["nb"]
    placement = container_placement(notebook.gpu, spec, "a GPU notebook")
    pod = statefulset_manifest("acme", "nb", notebook, spec, placement)["spec"]["template"]["spec"]
    assert "runtimeClassName" not in pod
    (claim,) = pod["resourceClaims"]
    assert claim["name"] == "gpus"
    assert claim["resourceClaimTemplateName"].startswith("nb-gpus-")
    resources = pod["containers"][0]["resources"]
    assert resources == {
        "requests": {"cpu": "2000m", "memory": "8Gi"},
        "limits": {"cpu": "2000m", "memory": "8Gi"},
        "claims": [{"name": "gpus"}],
    }
    assert pod["tolerations"] == [{"key": "gpucell.io/dra", "operator": "Equal", "value": "l4", "effect": "NoSchedule"}]


def test_dra_endpoint_gives_every_replica_a_claim() -> None:
    spec, endpoint = region(), ACME.model_endpoints["llm"]
    placement = container_placement(endpoint.gpu, spec, "a GPU model endpoint")
    predictor = inference_service_manifest("acme", "llm", endpoint, spec, placement)["spec"]["predictor"]
    (claim,) = predictor["resourceClaims"]
    assert claim["resourceClaimTemplateName"].startswith("llm-gpus-")
    assert predictor["model"]["resources"]["claims"] == [{"name": "gpus"}]
    assert "nvidia.com/gpu" not in predictor["model"]["resources"]["limits"]
    assert "runtimeClassName" not in predictor
    assert predictor["deploymentStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
    }
    assert violations(inference_service_manifest("acme", "llm", endpoint, spec, placement)) == []


def test_tenant_quota_caps_every_device_class_and_the_claims() -> None:
    hard = quota_hard(ACME, region())
    assert {k: v for k, v in hard.items() if "resource.k8s.io" in k} == {
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "2",
        "mig.nvidia.com.deviceclass.resource.k8s.io/devices": "0",
        "vfio.gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "2",
        "count/resourceclaims.resource.k8s.io": "4",
    }
    assert quota_key("vfio.gpu.nvidia.com") == "vfio.gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
    assert not any("resource.k8s.io" in k for k in quota_hard(ACME, cell(minimal_cell_config())))


# -- the platform around it ----------------------------------------------------------------------------------------
def test_driver_values_by_value() -> None:
    assert dra_driver_values(region().node_pools) == {
        "nvidiaDriverRoot": "/run/nvidia/driver",
        "resourceApiVersion": "resource.k8s.io/v1",
        "gpuResourcesEnabledOverride": True,
        "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": False}},
        "featureGates": {"PassthroughSupport": True, "DeviceMetadata": True},
        "kubeletPlugin": {
            "nodeSelector": {"gpucell.io/dra-kubelet-plugin": "true"},
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                {"key": "gpucell.io/dra", "operator": "Equal", "value": "l4", "effect": "NoSchedule"},
            ],
        },
    }


def test_driver_root_follows_the_gpu_operators_driver() -> None:
    config = dra_config()
    config["gpuOperator"] = {"values": {"driver": {"enabled": False}}}
    assert driver_root(cell(config).gpu_operator) == "/"
    config["gpuOperator"] = {"values": {"hostPaths": {"driverInstallDir": "/opt/nvidia/driver"}}}
    assert driver_root(cell(config).gpu_operator) == "/opt/nvidia/driver"


def test_driver_values_are_values_of_the_pinned_chart() -> None:
    values = dra_driver_values(region().node_pools)
    assert values_problems(STORE, "dra-driver-nvidia-gpu", "0.4.1", values) == []
    values["kubeletPlugin"]["nodeSelectors"] = {"x": "y"}
    assert values_problems(STORE, "dra-driver-nvidia-gpu", "0.4.1", values) == [
        (
            "kubeletPlugin.nodeSelectors.x",
            "is not a value of chart dra-driver-nvidia-gpu 0.4.1 (renamed or removed upstream?)",
        )
    ]


def test_the_kubelet_plugin_restarts_when_the_operator_replaces_the_container_toolkit() -> None:
    """kubernetes-sigs/dra-driver-nvidia-gpu#1144: a kubelet plugin left running across a toolkit replacement fails
    every claim ("empty device edits"); v0.4.1 still caches device specs (cmd/gpu-kubelet-plugin/cdi.go). Its pods
    carry what the toolkit is, so a GPU Operator upgrade or a toolkit change rolls them, and only that."""
    spec = region()
    runtime = ContainerRuntime.k3s(spec.versions.kubernetes_minor)
    pinned = toolkit_fingerprint("v26.7.0", spec.gpu_operator, runtime)
    assert re.fullmatch(r"v26\.7\.0-[0-9a-f]{10}", pinned)
    values = dra_driver_values(spec.node_pools, toolkit=pinned)
    assert values["kubeletPlugin"]["podAnnotations"] == {"gpucell.io/container-toolkit": pinned}
    assert TOOLKIT_ANNOTATION == "gpucell.io/container-toolkit"
    assert values_problems(STORE, "dra-driver-nvidia-gpu", "0.4.1", values) == []
    assert toolkit_fingerprint("v26.7.0", spec.gpu_operator, runtime) == pinned  # stable: no restart on a rerun
    assert toolkit_fingerprint("v26.10.0", spec.gpu_operator, runtime) != pinned
    custom = cell({**dra_config(), "gpuOperator": {"values": {"toolkit": {"version": "v1.20.1"}}}}).gpu_operator
    assert toolkit_fingerprint("v26.7.0", custom, runtime) != pinned
    containerd_1 = ContainerRuntime.k3s("1.30")  # k3s's containerd 1.x template: the toolkit's env changes
    assert containerd_1.toolkit_env() != runtime.toolkit_env()
    assert toolkit_fingerprint("v26.7.0", spec.gpu_operator, containerd_1) != pinned
    unrelated = cell({**dra_config(), "gpuOperator": {"dcgmExporter": False}}).gpu_operator
    assert toolkit_fingerprint("v26.7.0", unrelated, runtime) == pinned
    assert "podAnnotations" not in dra_driver_values(spec.node_pools)["kubeletPlugin"]


def test_the_cell_installs_the_driver_after_the_gpu_operator_only_with_dra_pools() -> None:
    plan = deploy()
    release = plan.named("lab-dra-driver-dra-driver")
    assert release.type == RELEASE
    assert plan.named("lab-dra-driver").type == "gpucell:index:DraDriver"
    assert release.inputs["chart"] == "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"
    assert "repositoryOpts" not in release.inputs
    assert (release.inputs["version"], release.inputs["name"], release.inputs["namespace"]) == (
        "0.4.1",
        "dra-driver-nvidia-gpu",
        NAMESPACE,
    )
    toolkit = toolkit_fingerprint(
        "v26.7.0", region().gpu_operator, ContainerRuntime.k3s(region().versions.kubernetes_minor)
    )
    assert release.inputs["values"] == dra_driver_values(region().node_pools, toolkit=toolkit)
    assert plan.named("lab-gpu-operator-gpu-operator").urn in release.dependencies

    def plain() -> None:
        RegionalCell("lab", RegionalCellArgs(cell=cell(minimal_cell_config()), ssh_private_key="k"))

    assert not [r for r in run_program(plain, computed=computed).of_type(RELEASE) if "dra" in r.name]


def test_dra_workloads_wait_for_their_claim_template_and_the_dra_driver() -> None:
    plan = deploy()
    driver = plan.named("lab-dra-driver-dra-driver").urn
    operator = plan.named("lab-gpu-operator-gpu-operator").urn
    templates = {r.name: r for r in plan.of_type(RCT)}
    assert sorted(templates) == ["lab-acme-cad-gpu-claim", "lab-acme-llm-gpu-claim", "lab-acme-nb-gpu-claim"]
    for workload, child in (
        ("cad", "lab-acme-cad-vm"),
        ("nb", "lab-acme-nb-statefulset"),
        ("llm", "lab-acme-llm-isvc"),
    ):
        depends = plan.named(child).dependencies
        assert templates[f"lab-acme-{workload}-gpu-claim"].urn in depends
        assert driver in depends
        assert operator not in depends
        assert driver in templates[f"lab-acme-{workload}-gpu-claim"].dependencies
    vm_template = templates["lab-acme-cad-gpu-claim"].inputs
    assert vm_template["apiVersion"] == "resource.k8s.io/v1"
    assert vm_template["metadata"]["namespace"] == "tenant-acme"
    assert (
        violations(
            {
                "apiVersion": vm_template["apiVersion"],
                "kind": vm_template["kind"],
                "metadata": vm_template["metadata"],
                "spec": vm_template["spec"],
            }
        )
        == []
    )


def test_kubevirt_enables_gpus_with_dra_and_tolerates_the_dra_pools() -> None:
    assert feature_gates(region().node_pools) == ["GPUsWithDRA"]
    assert "GPUsWithDRA" not in feature_gates(cell(minimal_cell_config()).node_pools)
    assert kubevirt_spec(region().node_pools)["workloads"]["nodePlacement"]["tolerations"] == [
        {"key": "gpucell.io/dra", "operator": "Equal", "value": "l4", "effect": "NoSchedule"}
    ]


def test_gpu_operator_pauses_the_kubelet_plugin_on_driver_reloads() -> None:
    values = operator_values(region())
    assert values["driver"]["manager"]["env"][-1] == {
        "name": "NODE_LABEL_FOR_GPU_POD_EVICTION",
        "value": "gpucell.io/dra-kubelet-plugin",
    }
    assert values["devicePlugin"] == {"enabled": True}  # the L40S container pool needs it
    assert operator_values(cell(dra_config(container_pool=False)))["devicePlugin"] == {"enabled": False}
    assert "devicePlugin" not in operator_values(cell(minimal_cell_config()))
    assert values_problems(STORE, "gpu-operator", "v26.7.0", values) == []


def test_gpu_operator_driver_manager_env_merges_by_name() -> None:
    from gpucell.components.gpu_operator import _overrides

    config = dra_config()
    config["gpuOperator"] = {"values": {"driver": {"manager": {"env": [{"name": "DRAIN_USE_FORCE", "value": True}]}}}}
    spec = cell(config)
    assert _overrides(spec.gpu_operator, operator_values(spec))["driver"]["manager"]["env"] == [
        {"name": "ENABLE_GPU_POD_EVICTION", "value": "false"},
        {"name": "ENABLE_AUTO_DRAIN", "value": "false"},
        {"name": "NODE_LABEL_FOR_GPU_POD_EVICTION", "value": "gpucell.io/dra-kubelet-plugin"},
        {"name": "DRAIN_USE_FORCE", "value": "true"},
    ]


def test_dra_nodes_run_the_container_workload_without_the_device_plugin_and_dcgm() -> None:
    spec = region()
    pool = spec.node_pools["l4-dra"]
    labels = node_config(spec, "l4-dra", pool, pool.hosts[0])["node-label"]
    assert labels == [
        "gpucell.io/pool=l4-dra",
        "gpucell.io/role=gpu",
        "nvidia.com/gpu.workload.config=container",
        "nvidia.com/gpu.deploy.device-plugin=false",
        "nvidia.com/gpu.deploy.dcgm=false",
        "nvidia.com/gpu.deploy.dcgm-exporter=false",
        "gpucell.io/dra-kubelet-plugin=true",
    ]


def test_pool_labels_may_not_set_the_dra_labels() -> None:
    config = dra_config()
    config["nodePools"]["l4-dra"]["labels"] = {"gpucell.io/dra-kubelet-plugin": "false"}
    with pytest.raises(ConfigError) as raised:
        cell(config)
    assert raised.value.lines == [
        "nodePools.l4-dra.labels.gpucell.io/dra-kubelet-plugin: is set by gpucell from the "
        "pool spec; remove it from the pool's labels"
    ]


def run(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + script],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
    )


def test_dra_nodes_need_the_iommu(tmp_path: Path) -> None:
    (tmp_path / "kernel" / "iommu_groups").mkdir(parents=True)
    done = run(iommu_check("l4-dra"), GPUCELL_SYSFS_ROOT=str(tmp_path))
    assert done.returncode == 1
    assert done.stderr == (
        f"gpucell: pool l4-dra (gpuMode dra) needs the IOMMU, and {tmp_path}/kernel/iommu_groups is empty: turn on "
        "VT-d or AMD-Vi in firmware and boot with intel_iommu=on iommu=pt (or amd_iommu=on iommu=pt)\n"
    )
    (tmp_path / "kernel" / "iommu_groups" / "0").mkdir()
    assert run(iommu_check("l4-dra"), GPUCELL_SYSFS_ROOT=str(tmp_path)).returncode == 0
    spec = region()
    assert iommu_check("l4-dra") in host_setup(spec, "l4-dra", spec.node_pools["l4-dra"])
    assert "iommu" not in host_setup(spec, "l40s", spec.node_pools["l40s"])
    assert shellcheck({"iommu": "#!/usr/bin/env bash\n" + iommu_check("l4-dra")}) == {"iommu": []}


# -- conformance of the new kinds ----------------------------------------------------------------------------------
def test_device_classes_and_claims_validate_strictly_at_1_34() -> None:
    for name in DEVICE_CLASSES:
        assert violations(device_class_manifest(name)) == []
    meta = {"name": "x", "namespace": "tenant-acme"}
    assert violations(vm_claim_template(meta, "x", CATALOG["L4"], 2)) == []
    assert violations(container_claim_template(meta, "x", CATALOG["L4"], 2)) == []
    # The v1beta1 shape (deviceClassName on the request) is what a loose check would let through.
    beta = vm_claim_template(meta, "x", CATALOG["L4"], 1)
    request = beta["spec"]["spec"]["devices"]["requests"][0]
    request["deviceClassName"] = request.pop("exactly")["deviceClassName"]
    assert [v.message for v in violations(beta)] == [
        "Additional properties are not allowed ('deviceClassName' was unexpected)"
    ]


def test_kubevirt_dra_admission_rules() -> None:
    vm = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": "v"},
        "spec": {
            "template": {
                "spec": {
                    "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "t", "resourceClaimName": "c"}],
                    "domain": {
                        "devices": {
                            "gpus": [
                                {"name": "gpu0", "claimName": "other", "requestName": "gpu0"},
                                {"name": "gpu1", "claimName": "gpus"},
                                {"name": "gpu2", "deviceName": "nvidia.com/GA102GL_A10"},
                            ]
                        }
                    },
                }
            }
        },
    }
    assert [(v.path, v.message) for v in admission_violations(vm)] == [
        ("spec.template.spec.resourceClaims[0]", "must specify one of: resourceClaimName, resourceClaimTemplateName"),
        (
            "spec.template.spec.domain.devices.gpus",
            "mixes DRA GPUs (claimName) with device-plugin GPUs (deviceName), which KubeVirt refuses",
        ),
        (
            "spec.template.spec.domain.devices.gpus[0].claimName",
            "'other' is not a resourceClaims[].name of the VM "
            "(vmi.spec.resourceClaims must specify all claims used in gpus)",
        ),
        ("spec.template.spec.domain.devices.gpus[1]", "requestName is required for DRA GPU"),
    ]


# -- the prod stack: done when -------------------------------------------------------------------------------------
def _input(r: Registration, *path: str) -> Any:
    node: Any = r.inputs
    for key in path:
        node = node[key]
    return node


def test_prod_dra_pool_serves_a_vm_and_a_notebook_from_the_same_gpus() -> None:
    plan = shared_plan("prod-fra1")
    spec = plan.cells["fra1"].spec
    assert [name for name, pool in spec.node_pools.items() if pool.gpu_mode is not None and pool.gpu_mode == "dra"] == [
        "l4-dra"
    ]
    resources = plan.region_resources("fra1")
    vm = next(r for r in resources if r.name == "fra1-acme-cad-01-vm")
    notebook = next(r for r in resources if r.name == "fra1-acme-nb-carol-statefulset")
    vm_pod = _input(vm, "spec", "template", "spec")
    nb_pod = _input(notebook, "spec", "template", "spec")
    pool_of = [
        e["values"]
        for e in vm_pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ][0]["matchExpressions"]
        if e["key"] == "gpucell.io/pool"
    ]
    assert pool_of == [["l4-dra"]]
    assert nb_pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchExpressions"
    ][0]["values"] == ["l4-dra"]
    templates = {r.inputs["metadata"]["name"]: r for r in resources if r.type == RCT}
    # the names docs/workloads.md shows
    assert sorted(templates) == ["cad-01-gpus-d8c6e9f8", "nb-carol-gpus-40e46bc1"]
    vm_claim = templates[vm_pod["resourceClaims"][0]["resourceClaimTemplateName"]]
    nb_claim = templates[nb_pod["resourceClaims"][0]["resourceClaimTemplateName"]]
    assert (
        vm_claim.inputs["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == "vfio.gpu.nvidia.com"
    )
    assert nb_claim.inputs["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == "gpu.nvidia.com"
    assert vm_pod["domain"]["devices"]["gpus"] == [{"name": "gpu0", "claimName": "gpus", "requestName": "gpu0"}]
    # the VM's claim is allocated only after the notebook's is prepared (docs/decisions/0017)
    assert notebook.urn in vm.dependencies
    assert any(r.name == "fra1-dra-driver-dra-driver" for r in resources)
    iad1 = shared_plan("prod-iad1")  # no dra pool: no DRA driver
    assert not any(r.name.endswith("dra-driver-dra-driver") for r in iad1.region_resources("iad1"))


def test_a_dra_driver_minor_bump_and_a_move_to_dra_are_disruptive() -> None:
    old = fingerprint(region())
    assert old["versions"]["charts"]["draDriver"] == "0.4.1"
    assert "draDriver" not in fingerprint(cell(minimal_cell_config()))["versions"]["charts"]
    bumped = cell({**dra_config(), "versions": {"draDriver": "0.5.0"}})
    # The same cell before (region() has a tenant too, whose removal would be dataDeleted).
    before = fingerprint(cell(dra_config()))
    assert [(c.change.value, c.key, c.old, c.new) for c in compare(before, fingerprint(bumped), "lab")] == [
        ("chartMajor", "regions.lab.versions.draDriver", "0.4.1", "0.5.0")
    ]
    moved = dra_config()
    moved["nodePools"]["l40s"]["gpuMode"] = "dra"
    changes = compare(fingerprint(cell(dra_config())), fingerprint(cell(moved)), "lab")
    assert [(c.change.value, c.subject, c.old, c.new) for c in changes] == [
        ("gpuMode", "lab-gpu-1", "container", "dra")
    ]


def test_a_vms_dra_gpus_must_be_single_device_requests_of_its_rendered_template() -> None:
    spec, vm = region(), ACME.virtual_machines["cad"]
    placement = vm_placement("cad", vm, spec)
    manifest = virtual_machine_manifest("acme", "cad", vm, spec, placement)
    template = claim_template_manifest("acme", "cad", vm, placement)
    assert template is not None
    assert list(claim_template_violations([manifest, template])) == []
    assert [v.message for _, v in claim_template_violations([manifest])] == [
        f"ResourceClaimTemplate {template['metadata']['name']!r} is not rendered in tenant-acme"
    ] * 2
    template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2
    template["spec"]["spec"]["devices"]["requests"].pop()
    assert [(v.path, v.message) for _, v in claim_template_violations([manifest, template])] == [
        (
            "spec.template.spec.domain.devices.gpus[0].requestName",
            f"request 'gpu0' of ResourceClaimTemplate "
            f"{template['metadata']['name']!r} asks for more than one device; KubeVirt attaches exactly one device per "
            "request",
        ),
        (
            "spec.template.spec.domain.devices.gpus[1].requestName",
            f"'gpu1' is not a request of ResourceClaimTemplate {template['metadata']['name']!r}",
        ),
    ]


def test_plan_check_reports_a_vm_whose_claim_template_is_missing() -> None:
    spec, vm = region(), ACME.virtual_machines["cad"]
    manifest = virtual_machine_manifest("acme", "cad", vm, spec, vm_placement("cad", vm, spec))

    def program() -> None:
        CustomResource(
            "vm",
            api_version=manifest["apiVersion"],
            kind=manifest["kind"],
            metadata=manifest["metadata"],
            spec=manifest["spec"],
        )

    report = check_region("lab", run_program(program).resources, spec, STORE, checkers=("custom-resource",))
    assert [str(p) for p in report.problems] == [
        f"lab/VirtualMachine/tenant-acme/cad: spec.template.spec.domain.devices.gpus[{i}]: ResourceClaimTemplate "
        f"{manifest['spec']['template']['spec']['resourceClaims'][0]['resourceClaimTemplateName']!r} is not rendered "
        "in tenant-acme"
        for i in (0, 1)
    ]
