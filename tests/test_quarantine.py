"""A host quarantined from the config: the spec's lines, the NodePatch taint, admission and the capacity view."""

from __future__ import annotations

import copy
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpucell.admission.inventory import capacity, gpu_offers
from gpucell.k3s._node_state import QUARANTINE_TAINT, node_state
from gpucell.spec import CellSpec
from gpucell.stacks.plan import make_plan, to_json
from gpucell.stacks.review import render, review
from tests.conftest import REPO
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


# -- the plan and the review (issue 18) --------------------------------------------------------------------------
def prod_project(tmp_path: Path, edit: Callable[[str], str] | None = None) -> Path:
    folder = tmp_path / ("head" if edit else "base")
    folder.mkdir()
    shutil.copy(REPO / "Pulumi.yaml", folder)
    text = (REPO / "Pulumi.prod-fra1.yaml").read_text()
    (folder / "Pulumi.prod-fra1.yaml").write_text(edit(text) if edit else text)
    return folder


def quarantine_l40s_2(text: str) -> str:
    host = "- {name: fra1-l40s-2, address: 10.110.0.62}"
    assert text.count(host) == 1
    return text.replace(host, "- {name: fra1-l40s-2, address: 10.110.0.62, quarantine: {reason: 'GPU 3 Xid 79'}}")


def test_a_quarantine_drains_the_host_and_the_review_says_what_no_longer_fits(tmp_path: Path) -> None:
    base_plan = make_plan(prod_project(tmp_path), "prod-fra1")
    head_plan = make_plan(prod_project(tmp_path, quarantine_l40s_2), "prod-fra1")
    base, head = to_json(base_plan, ["fra1"]), to_json(head_plan, ["fra1"])
    prepare = next(r for r in head["resources"] if r["name"] == "fra1-k3s-fra1-l40s-2-prepare")
    assert "readonly QUARANTINE=gpu-3-xid-79\n" in prepare["inputs"]["create"]
    assert head["capacity"]["fra1"]["nvidia.com/NVIDIA_L40S-12Q"] == [32, 24, 1]
    text = render([review(base, head)])
    lines = text.splitlines()
    assert (
        "- `fra1`: `fra1-l40s-2` quarantined (`gpu-3-xid-79`): cordoned and drained (pods evicted through the "
        "Eviction API, GPU VMs stopped and started again on other nodes); it stays out of service until its "
        "`quarantine` is removed"
    ) in lines
    # Only the VMs that can run there: those asking for the L40S vGPU type (not the H100 or DRA ones).
    assert [line for line in lines if line.startswith("  - GPU VMs")] == [
        "  - GPU VMs of `tenant-acme` stopped while their node is in maintenance, then started again: `desk-01`"
    ]
    assert (
        "- `fra1`, no longer in service: `nvidia.com/NVIDIA_L40S-12Q` 64 → 32 units; tenants' quotas reserve 24, "
        "declared workloads use 1"
    ) in lines
    # Lifting it is reviewed the other way round.
    lifted = render([review(head, base)]).splitlines()
    assert (
        "- `fra1`: quarantine lifted on `fra1-l40s-2`: each is uncordoned once the GPU Operator reports its GPU state"
        in lifted
    )
