"""A host quarantined from the config: the spec's lines, the NodePatch taint, admission and the capacity view."""

from __future__ import annotations

import copy
from typing import Any

from gpucell._node_state import QUARANTINE_TAINT, node_state
from gpucell.inventory import capacity, gpu_offers
from gpucell.spec import CellSpec
from tests.test_admission import DISK, PROD_FRA1, A, errors, region

GPU3 = {"reason": "GPU 3 Xid 79 (fell off the bus)"}


def quarantined(config: dict[str, Any], pool: str, *indexes: int, quarantine: Any = GPU3) -> dict[str, Any]:
    config = copy.deepcopy(config)
    for index in indexes:
        config["nodePools"][pool]["hosts"][index]["quarantine"] = quarantine
    return config


def test_a_reason_is_required() -> None:
    assert errors(quarantined(PROD_FRA1, "l40s-vgpu", 0, quarantine={})) == [
        "regions.fra1.nodePools.l40s-vgpu.hosts[0].quarantine.reason: required key is missing"
    ]


def test_a_reason_is_one_safe_line() -> None:
    assert errors(quarantined(PROD_FRA1, "l40s-vgpu", 0, quarantine={"reason": "bad\n$(reboot)"})) == [
        "regions.fra1.nodePools.l40s-vgpu.hosts[0].quarantine.reason: 'bad\\n$(reboot)' is not a quarantine reason; "
        "give one line of at most 120 characters: letters, digits, spaces and ._:,/#()+-, starting with a letter "
        "or digit"
    ]


def test_the_node_patch_carries_the_quarantine_taint() -> None:
    spec = CellSpec.model_validate(quarantined(PROD_FRA1, "l40s-vgpu", 1))
    pool = spec.node_pools["l40s-vgpu"]
    assert node_state(spec, "l40s-vgpu", pool, "fra1-l40s-2").taints[-1] == {
        "key": QUARANTINE_TAINT,
        "value": "gpu-3-xid-79-fell-off-the-bus",
        "effect": "NoSchedule",
    }
    assert QUARANTINE_TAINT not in {t["key"] for t in node_state(spec, "l40s-vgpu", pool, "fra1-l40s-1").taints}


def test_the_capacity_view_counts_a_quarantined_host_out() -> None:
    spec = CellSpec.model_validate(quarantined(PROD_FRA1, "l40s-vgpu", 1))
    totals = capacity(gpu_offers(spec.node_pools, spec.effective_mig_strategy.value))
    assert totals["nvidia.com/NVIDIA_L40S-12Q"] == 32  # 1 host in service x 8 GPUs x 4, was 64


def test_admission_refuses_a_workload_that_fits_only_on_quarantined_hosts() -> None:
    desk = {
        "gpuModel": "L40S",
        "vgpuProfile": "L40S-12Q",
        "gpus": 2,
        "memoryGib": 32,
        "rootDisk": DISK,
        "noLogin": True,
    }
    config = region(acme={"virtualMachines": {"desk": desk}})
    assert errors(quarantined(config, "l40s-vgpu", 1)) == []
    assert errors(quarantined(config, "l40s-vgpu", 0, 1)) == [
        f"{A}.quota.gpus.nvidia.com/NVIDIA_L40S-12Q: tenants reserve 4 nvidia.com/NVIDIA_L40S-12Q in all, the "
        "region has 0; lower the quotas or set allowGpuOvercommit: true",
        f"{A}.virtualMachines.desk.gpus: 2 vGPUs fit only on quarantined hosts (pool l40s-vgpu); "
        "lift a host's quarantine or add hosts",
    ]
