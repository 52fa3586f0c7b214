"""What the prod stack declares works on real hosts (issue 10's "done when"): no mdev vGPU on SR-IOV boards, the
8-GPU SXM VM carries its NVSwitches, the multi-GPU endpoint has a memory-backed /dev/shm, a tainted GPU pool keeps
the GPU Operator and Longhorn, custom egress without the image source and an oversized hugepage VM are refused."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from gpucell.components.storage import longhorn_values
from gpucell.engine.mock_engine import Registration
from gpucell.errors import ConfigError
from gpucell.k3s.vgpu_sriov import RECONCILER_PATH
from gpucell.spec import CellSpec, StackSpec
from tests.conftest import UPSTREAM, ProdPlans, cell_cilium_values, operator_values, prod_regions

PROD: dict[str, Any] = prod_regions()


@pytest.fixture(scope="module")
def prod() -> ProdPlans:
    return ProdPlans()


def one(plan: ProdPlans, region: str, type_token: str, name: str | None = None) -> Registration:
    (found,) = [
        r
        for r in plan.region_resources(region)
        if r.type == type_token and (name is None or (r.inputs.get("metadata") or {}).get("name") == name)
    ]
    return found


@pytest.mark.parametrize("region", ["fra1", "iad1"])
def test_no_mdev_vgpu_for_sriov_boards(prod: ProdPlans, region: str) -> None:
    spec = one(prod, region, "kubernetes:kubevirt.io/v1:KubeVirt").inputs["spec"]["configuration"]
    assert "mediatedDevices" not in spec["permittedHostDevices"]
    assert "mediatedDevicesConfiguration" not in spec
    assert {"pciVendorSelector": "10DE:26B9", "resourceName": "nvidia.com/NVIDIA_L40S-12Q"} in (
        spec["permittedHostDevices"]["pciHostDevices"]
    )
    values = next(
        r.inputs["values"]
        for r in prod.region_resources(region)
        if r.type == "kubernetes:helm.sh/v3:Release" and r.inputs["name"] == "gpu-operator"
    )
    assert values["vgpuDeviceManager"] == {"enabled": False}
    assert values["vgpuManager"]["enabled"] is True
    files = prod.cells[region].k3s.node_files[f"{region}-l40s-1"]
    assert "nvidia.com/vgpu.config" not in files.config_yaml
    assert "- nvidia.com/gpu.deploy.vgpu-device-manager=false\n" in files.config_yaml
    assert RECONCILER_PATH in files.install_script


def test_the_8_gpu_sxm_vm_carries_its_nvswitches(prod: ProdPlans) -> None:
    vm = one(prod, "fra1", "kubernetes:kubevirt.io/v1:VirtualMachine", "train-01").inputs
    devices = vm["spec"]["template"]["spec"]["domain"]["devices"]
    assert len(devices["gpus"]) == 8
    assert devices["hostDevices"] == [
        {"name": f"nvswitch{i}", "deviceName": "nvidia.com/GH100_H100_NVSWITCH"} for i in range(4)
    ]
    permitted = one(prod, "fra1", "kubernetes:kubevirt.io/v1:KubeVirt").inputs["spec"]["configuration"][
        "permittedHostDevices"
    ]["pciHostDevices"]
    assert {
        "pciVendorSelector": "10DE:22A3",
        "resourceName": "nvidia.com/GH100_H100_NVSWITCH",
        "externalResourceProvider": True,
    } in permitted
    sim = one(prod, "fra1", "kubernetes:kubevirt.io/v1:VirtualMachine", "sim-01").inputs
    assert "hostDevices" not in sim["spec"]["template"]["spec"]["domain"]["devices"]  # 4 GPUs: NVLink off


def test_the_multi_gpu_endpoint_has_a_memory_backed_dev_shm(prod: ProdPlans) -> None:
    isvc = one(prod, "fra1", "kubernetes:serving.kserve.io/v1beta1:InferenceService", "llama-70b").inputs
    predictor = isvc["spec"]["predictor"]
    assert predictor["volumes"] == [{"name": "devshm", "emptyDir": {"medium": "Memory", "sizeLimit": "4Gi"}}]
    assert predictor["model"]["volumeMounts"] == [{"name": "devshm", "mountPath": "/dev/shm"}]
    assert predictor["model"]["resources"]["limits"] == {"cpu": "32000m", "memory": "260Gi", "nvidia.com/gpu": 4}
    assert predictor["model"]["args"] == ["--tensor-parallel-size=4", "--max-model-len=32768"]


def test_tainting_a_gpu_pool_keeps_the_gpu_operator_and_longhorn_on_it() -> None:
    config = copy.deepcopy(PROD["fra1"])
    config["nodePools"]["h200"]["taints"] = ["gpucell.io/gpu=h200:NoSchedule"]
    spec = CellSpec.model_validate(config)
    toleration = {"key": "gpucell.io/gpu", "operator": "Equal", "value": "h200", "effect": "NoSchedule"}
    operator = operator_values(spec)
    assert toleration in operator["daemonsets"]["tolerations"]
    assert toleration in operator["node-feature-discovery"]["worker"]["tolerations"]
    longhorn = longhorn_values(spec.storage, spec.node_pools)
    assert longhorn["longhornManager"]["tolerations"] == [toleration]
    assert longhorn["longhornDriver"]["tolerations"] == [toleration]
    assert longhorn["defaultSettings"]["taintToleration"] == "gpucell.io/gpu=h200:NoSchedule"


def test_custom_egress_without_the_image_source_and_an_oversized_hugepage_vm_are_refused() -> None:
    config = copy.deepcopy(PROD["fra1"])
    acme = config["tenants"]["acme"]
    acme["egressFqdns"] = [f for f in acme["egressFqdns"] if "quay.io" not in f]
    # imported in acme's namespace (prod clones it from the cell's image catalog, which imports outside the tenant)
    acme["virtualMachines"]["train-01"]["rootDisk"]["source"] = {
        "registry": "docker://quay.io/containerdisks/ubuntu:24.04"
    }
    acme["virtualMachines"]["train-01"]["memoryGib"] = 2560
    with pytest.raises(ConfigError) as refused:
        StackSpec.model_validate({"regions": {"fra1": config}})
    assert refused.value.lines == [  # both in one run
        "regions.fra1.tenants.acme.virtualMachines.train-01.memoryGib: 2560 GiB of 1Gi hugepages do not fit one "
        "node of pool h100-vm, which reserves 1920 GiB of them (960 per NUMA node x 2)",
        "regions.fra1.tenants.acme.virtualMachines.train-01.rootDisk.source: CDI imports "
        "docker://quay.io/containerdisks/ubuntu:24.04 from quay.io, which the tenant's custom egress does not "
        "allow; add it to tenants.acme.egressFqdns",
    ]
    acme["virtualMachines"]["train-01"]["memoryGib"] = 1536
    with pytest.raises(ConfigError) as refused:
        StackSpec.model_validate({"regions": {"fra1": config}})
    assert refused.value.lines == [
        "regions.fra1.tenants.acme.virtualMachines.train-01.rootDisk.source: CDI imports "
        "docker://quay.io/containerdisks/ubuntu:24.04 from quay.io, which the tenant's custom egress does not "
        "allow; add it to tenants.acme.egressFqdns"
    ]


def test_cilium_agent_and_envoy_already_tolerate_every_taint() -> None:
    """Cilium 1.20.0's chart: agent and envoy ``tolerations: [{operator: Exists}]``; gpucell leaves them so."""
    chart = yaml.safe_load((UPSTREAM / "cilium" / "values.yaml").read_text())
    assert chart["tolerations"] == [{"operator": "Exists"}]
    assert chart["envoy"]["tolerations"] == [{"operator": "Exists"}]
    values = cell_cilium_values(CellSpec.model_validate(PROD["fra1"]))
    assert "tolerations" not in values
    assert "tolerations" not in values.get("envoy", {})
