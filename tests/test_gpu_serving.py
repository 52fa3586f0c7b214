"""Cell-wide GPU pieces around a pool's rollout (decision 0018, "add before, remove after"), planned on prod: the run
that changes a pool renders what serves both its old and new configuration and orders each changing host's
``-prepare`` after it; the first run after every node settled narrows it."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from gpucell.day2.gpu_serving import gpu_serving, node_records, records_from_fingerprint
from gpucell.engine.mock_engine import PlanResult
from gpucell.spec import StackSpec
from tests.test_day2 import _dra_to_container, _sriov_type_24q, fra1, plan, prod_config

GPU_OPERATOR = "fra1-gpu-operator-gpu-operator"
KUBEVIRT = "fra1-kubevirt-kubevirt"
DRA_DRIVER = "fra1-dra-driver-dra-driver"


def up(change: Callable[[dict[str, Any]], None] | None, last: PlanResult | None, *acknowledged: str) -> PlanResult:
    """The prod program as ``pulumi up`` runs it after ``last`` (its stack outputs are the last deployment), with
    ``change`` made to the config and the disruptive changes ``acknowledged`` (``kind``, in fra1, or
    ``kind@region``)."""

    def changed(config: dict[str, Any]) -> None:
        if change is not None:
            change(config)
        config["gpucell:acknowledge"] = [
            {"change": kind, "region": region or "fra1", "reason": "maintenance window CHG-18"}
            for kind, _, region in (entry.partition("@") for entry in acknowledged)
        ]

    # Only prod's regions: the mock engine can keep outputs of earlier programs run in the same process (xdist).
    outputs = {k: v for k, v in (last.outputs if last is not None else {}).items() if k.startswith(("fra1", "iad1"))}
    return plan(changed, last_deployment=outputs)


@pytest.fixture(scope="module")
def deployed() -> PlanResult:
    """The prod stack as deployed: planned once as a first deploy."""
    return up(None, None)


def depends(result: PlanResult, name: str) -> set[str]:
    urns = {r.urn: r.name for r in result.resources}
    return {urns[u] for u in result.named(name).dependencies if u in urns}


def hosts(pool: str) -> list[str]:
    config, _ = prod_config()
    return [h["name"] for h in fra1(config)["nodePools"][pool]["hosts"]]


def values(result: PlanResult, name: str = GPU_OPERATOR) -> dict[str, Any]:
    release: dict[str, Any] = result.named(name).inputs["values"]
    return release


def permitted(result: PlanResult) -> dict[str, str]:
    """resourceName -> selector of the KubeVirt CR's pciHostDevices and mediatedDevices."""
    devices = result.named(KUBEVIRT).inputs["spec"]["configuration"].get("permittedHostDevices", {})
    return {
        entry["resourceName"]: entry.get("pciVendorSelector") or entry.get("mdevNameSelector")
        for kind in ("pciHostDevices", "mediatedDevices")
        for entry in devices.get(kind, [])
    }


def gates(result: PlanResult) -> list[str]:
    configuration = result.named(KUBEVIRT).inputs["spec"]["configuration"]
    found: list[str] = configuration.get("developerConfiguration", {}).get("featureGates", [])
    return found


def test_nothing_waits_when_no_configuration_changes(deployed: PlanResult) -> None:
    again = up(None, deployed)
    assert not [
        r.name for r in again.resources if r.name.endswith("-prepare") and GPU_OPERATOR in depends(again, r.name)
    ]
    assert values(again) == values(deployed)
    assert again.outputs["fra1GpuNodes"] == deployed.outputs["fra1GpuNodes"]


def _passthrough_to_container(config: dict[str, Any]) -> None:
    """h100-vm from vm-passthrough to container (its topology profile goes; the H100 VMs and their quotas too)."""
    region = fra1(config)
    pool = region["nodePools"]["h100-vm"]
    pool["gpuMode"] = "container"
    del pool["topology"]
    for tenant, vm in (("acme", "train-01"), ("globex", "sim-01")):
        del region["tenants"][tenant]["virtualMachines"][vm]
        region["tenants"][tenant]["quota"]["gpus"].pop("nvidia.com/GH100_H100_SXM5_80GB")


def test_passthrough_to_container_serves_both_before_the_first_node_and_narrows_after(deployed: PlanResult) -> None:
    changing = up(_passthrough_to_container, deployed, "gpuMode", "dataDeleted")
    # Add before: the H100 pool's passthrough operands, its permitted devices and the HostDevices gate stay while
    # its nodes still run them; every H100 host's -prepare waits for the GPU Operator and the KubeVirt CR.
    assert values(changing)["vfioManager"] == {"enabled": True, "env": [{"name": "BIND_NVSWITCHES", "value": "true"}]}
    assert values(changing)["sandboxDevicePlugin"] == {"enabled": True}
    assert permitted(changing)["nvidia.com/GH100_H100_SXM5_80GB"] == "10DE:2330"
    assert permitted(changing)["nvidia.com/GH100_H100_NVSWITCH"] == "10DE:22A3"
    assert "HostDevices" in gates(changing)
    for host in hosts("h100-vm"):
        assert {GPU_OPERATOR, KUBEVIRT} <= depends(changing, f"fra1-k3s-{host}-prepare"), host
    for host in hosts("h200-mig") + hosts("l40s-vgpu") + ["fra1-srv-1", "fra1-cpu-1"]:
        assert GPU_OPERATOR not in depends(changing, f"fra1-k3s-{host}-prepare"), host
    assert "fra1-gpu-operator-gpu-operator" not in depends(changing, "iad1-k3s-iad1-h100-1-prepare")
    # The run records the new configuration once every node settled; the next run narrows.
    assert changing.outputs["fra1GpuNodes"]["fra1-h100-1"]["gpuMode"] == "container"
    narrowed = up(_passthrough_to_container, changing)
    assert values(narrowed)["vfioManager"] == {"enabled": False}
    assert values(narrowed)["sandboxDevicePlugin"] == {"enabled": False}
    assert "nvidia.com/GH100_H100_SXM5_80GB" not in permitted(narrowed)
    assert "nvidia.com/GH100_H100_NVSWITCH" not in permitted(narrowed)
    for host in hosts("h100-vm"):
        assert GPU_OPERATOR not in depends(narrowed, f"fra1-k3s-{host}-prepare"), host


def test_dra_to_container_keeps_the_dra_driver_until_the_pool_settled(deployed: PlanResult) -> None:
    changing = up(_dra_to_container, deployed, "gpuMode", "dataDeleted")
    assert changing.named(DRA_DRIVER).type == "kubernetes:helm.sh/v3:Release"
    assert values(changing)["driver"]["manager"]["env"][-1] == {
        "name": "NODE_LABEL_FOR_GPU_POD_EVICTION",
        "value": "gpucell.io/dra-kubelet-plugin",
    }
    assert "GPUsWithDRA" in gates(changing)
    for host in hosts("l4-dra"):
        assert {GPU_OPERATOR, KUBEVIRT, DRA_DRIVER} <= depends(changing, f"fra1-k3s-{host}-prepare"), host
    narrowed = up(_dra_to_container, changing)
    assert not [r for r in narrowed.resources if r.name.startswith("fra1-dra-driver")]
    assert "NODE_LABEL_FOR_GPU_POD_EVICTION" not in str(values(narrowed)["driver"])
    assert "GPUsWithDRA" not in gates(narrowed)


def test_an_sriov_vgpu_type_is_renamed_after_the_pools_first_node_held_the_others(deployed: PlanResult) -> None:
    """KubeVirt keys its PCI device plugins by the VF's PCI id: one resource name serves every L40S VF of the
    region, so 12Q and 24Q cannot both be served; the CR renames after the first -prepare held the pool."""
    changing = up(_sriov_type_24q, deployed, "vgpuProfile", "vgpuProfile@iad1")
    assert permitted(changing)["nvidia.com/NVIDIA_L40S-24Q"] == "10DE:26B9"
    assert "nvidia.com/NVIDIA_L40S-12Q" not in permitted(changing)
    first, second = hosts("l40s-vgpu")
    assert f"fra1-k3s-{first}-prepare" in depends(changing, KUBEVIRT)
    assert f"fra1-k3s-{second}-prepare" not in depends(changing, KUBEVIRT)  # it comes after first's settle
    for host in (first, second):
        waits = depends(changing, f"fra1-k3s-{host}-prepare")
        assert GPU_OPERATOR in waits, host
        assert KUBEVIRT not in waits, host
    prepare = changing.named(f"fra1-k3s-{first}-prepare").raw_inputs["create"]
    assert "hold_peers\n" in prepare
    assert "readonly POOL=l40s-vgpu" in prepare
    # every node still typed the old way is held, not only the next window (decision 0035)
    assert "readonly HOLD_RETYPED=true" in prepare
    assert f"readonly NEXT_IN_LINE=({second})" in prepare


def test_the_gpu_record_waits_for_every_settle(deployed: PlanResult) -> None:
    """The record is an Output of every -settle: a run where one fails registers no stack outputs, and the engine
    keeps the last ones (pulumi/pulumi#15754)."""
    record = deployed.outputs["fra1GpuNodes"]
    assert set(record) == {
        h for pool in ("h100-vm", "h200-mig", "h200", "l40s-vgpu", "l4-dra", "cpu") for h in hosts(pool)
    }
    assert record["fra1-l40s-2"] == {
        "pool": "l40s-vgpu",
        "address": "10.110.0.62",
        "role": "gpu",
        "gpuModel": "L40S",
        "gpusPerNode": 8,
        "gpuMode": "vm-vgpu",
        "vgpuProfile": "L40S-12Q",
    }


def _spec(change: Callable[[dict[str, Any]], None] | None = None) -> Any:
    config, _ = prod_config()
    if change is not None:
        change(config)
    return StackSpec.model_validate({"regions": config["gpucell:regions"]}).regions["fra1"]


def test_a_deployment_without_the_record_is_read_from_its_fingerprint() -> None:
    from gpucell.day2.disruption import fingerprint

    before = _spec()
    records = records_from_fingerprint(fingerprint(before), before)
    assert records == node_records(before)  # taints, model and GPUs per node from the pool of the same name
    serving = gpu_serving(_spec(_dra_to_container), records)
    assert serving.reconfigured == frozenset({"fra1-l4-1", "fra1-l4-2"})
    assert serving.held == {"l4-dra@deployed": ["fra1-l4-1", "fra1-l4-2"]}


def test_records_read_back_as_doubles_still_validate() -> None:
    """Stack outputs come back through protobuf Struct: every number is a double."""
    before = _spec()
    doubled = copy.deepcopy(node_records(before))
    for record in doubled.values():
        if "gpusPerNode" in record:
            record["gpusPerNode"] = float(record["gpusPerNode"])
    assert gpu_serving(before, doubled).reconfigured == frozenset()
    changed = gpu_serving(_spec(_passthrough_to_container), doubled)
    assert changed.cell.node_pools["h100-vm@deployed"].gpus_per_node == 8
