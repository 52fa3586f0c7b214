"""DRA pools in the spec and at admission: the pool rules, the releases they need, the workload fields, the tenants'
device-class quotas, the shared GPU count, and the capacity view, each message asserted exactly."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpucell.admission.dra import GPU_CLASS, VFIO_CLASS
from gpucell.admission.inventory import DRA_SHARED, OfferKind, capacity, dra_offers, gpu_offers
from gpucell.admission.placement import Placement
from gpucell.admission.tenants import placements
from gpucell.catalog.gpu_catalog import CATALOG
from gpucell.errors import ConfigError
from gpucell.spec import CellSpec, GpuMode, StackSpec
from gpucell.stacks.plan import render_capacity
from tests.conftest import prod_regions

PROD_FRA1: dict[str, Any] = prod_regions()["fra1"]
DISK = {"source": {"registry": "docker://quay.io/containerdisks/ubuntu:24.04"}, "sizeGib": 50}
A = "regions.fra1.tenants.acme"
QUOTA = {"cpuMillicores": 100000, "memoryGib": 1024, "storageGib": 4096, "deviceClasses": {GPU_CLASS: 4, VFIO_CLASS: 4}}


def region(**tenants: dict[str, Any]) -> dict[str, Any]:
    """Prod's fra1 (with its L4 dra pool: 2 nodes x 4 GPUs) and only the given tenants."""
    config = copy.deepcopy(PROD_FRA1)
    config["tenants"] = {
        name: {"quota": copy.deepcopy(QUOTA), "egress": "internet", **body} for name, body in tenants.items()
    }
    return config


def errors(config: dict[str, Any]) -> list[str]:
    try:
        StackSpec.model_validate({"regions": {"fra1": config}})
    except ConfigError as exc:
        return exc.lines
    return []


def dra_vm(gpus: int = 1, **fields: Any) -> dict[str, Any]:
    return {
        "gpuModel": "L4",
        "gpus": gpus,
        "gpuAllocation": "dra",
        "memoryGib": 16,
        "rootDisk": DISK,
        "noLogin": True,
        **fields,
    }


def dra_notebook(count: int = 1, **gpu: Any) -> dict[str, Any]:
    return {"gpu": {"count": count, "allocation": "dra", **gpu}}


def dra_endpoint(count: int = 1, replicas: int = 1) -> dict[str, Any]:
    return {
        "modelFormat": "huggingface",
        "storageUri": "hf://o/m",
        "maxReplicas": replicas,
        "gpu": {"count": count, "model": "L4", "allocation": "dra"},
    }


# -- the pool --------------------------------------------------------------------------------------------------
def test_dra_is_a_gpu_mode_whose_nodes_run_the_operators_container_workload() -> None:
    assert GpuMode("dra") is GpuMode.DRA
    assert GpuMode.DRA.runs_vms
    assert GpuMode.DRA.runs_containers
    assert GpuMode.DRA.workload_config == "container"
    assert [m.workload_config for m in GpuMode] == ["container", "vm-passthrough", "vm-vgpu", "container"]
    assert not GpuMode.CONTAINER.runs_vms
    assert not GpuMode.VM_VGPU.runs_containers


def test_a_dra_pool_of_hgx_gpus_is_refused() -> None:
    config = region()
    config["nodePools"]["l4-dra"].update(gpuModel="H100-SXM5-80GB", gpusPerNode=8)
    assert errors(config) == [
        "regions.fra1.nodePools.l4-dra.gpuModel: 'H100-SXM5-80GB' is an SXM GPU on an HGX board: its NVLinks run "
        "through NVSwitches the DRA driver does not hand to VMs, and a board shared by VMs and containers has no "
        "fabric mode; use a PCIe model (L40S, L4, T4) for dra pools, or vm-passthrough / container mode"
    ]


def test_a_dra_pool_runs_no_mig_and_no_vgpu_type() -> None:
    config = region()
    config["nodePools"]["l4-dra"]["migConfig"] = "all-1g.10gb"
    assert errors(config) == [
        "regions.fra1.nodePools.l4-dra.migConfig: 'all-1g.10gb' needs a container-mode pool; this pool is dra"
    ]
    config = region()
    config["nodePools"]["l4-dra"]["vgpuProfile"] = "L4-24Q"
    assert errors(config) == [
        "regions.fra1.nodePools.l4-dra.vgpuProfile: is only valid on vm-vgpu pools (this pool is dra)"
    ]


def test_a_dra_pool_may_have_a_topology_profile_for_its_vms() -> None:
    config = region(acme={"virtualMachines": {"x": dra_vm(dedicatedCpus=True, cpu={"cores": 4})}})
    config["nodePools"]["l4-dra"]["topology"] = {"reservedCpus": "0-1", "cpusPerNuma": 32, "memoryPerNumaGib": 256}
    assert errors(config) == []
    del config["nodePools"]["l4-dra"]["topology"]
    assert errors(config) == [
        f"{A}.virtualMachines.x.dedicatedCpus: dedicated CPUs, hugepages or NUMA passthrough need a pool with a "
        "topology profile; no dra pool with L4 has one"
    ]


@pytest.mark.parametrize(
    ("key", "version", "message"),
    [
        (
            "k3s",
            "v1.33.5+k3s1",
            "'v1.33.5+k3s1' is too old for pool l4-dra (gpuMode dra): Kubernetes serves "
            "resource.k8s.io/v1 from 1.34; pin a newer release or use another gpuMode",
        ),
        (
            "kubevirt",
            "v1.8.2",
            "'v1.8.2' is too old for pool l4-dra (gpuMode dra): gpucell's DRA VMs need KubeVirt v1.9 "
            "(GPUsWithDRA, device metadata files); pin a newer release or use another gpuMode",
        ),
        (
            "draDriver",
            "0.3.0",
            "'0.3.0' is too old for pool l4-dra (gpuMode dra): PassthroughSupport and DeviceMetadata "
            "come together from DRA driver 0.4; pin a newer release or use another gpuMode",
        ),
    ],
)
def test_dra_pools_need_recent_releases(key: str, version: str, message: str) -> None:
    config = region()
    config["versions"] = {key: version}
    if key == "k3s":  # any release but the default needs its reviewed installer checksum
        config["k3s"] = {**config.get("k3s", {}), "installerSha256": "0" * 64}
    assert errors(config) == [f"regions.fra1.versions.{key}: {message}"]


def test_dra_driver_version_is_pinned_like_the_others() -> None:
    config = region()
    config["versions"] = {"draDriver": "latest"}
    assert errors(config) == [
        "regions.fra1.versions.draDriver: 'latest' is not a pinned release; use an exact version "
        "such as v1.2.3 (no latest, stable or ranges)"
    ]


def test_a_model_in_an_sriov_vgpu_pool_cannot_also_be_in_a_dra_pool() -> None:
    config = region()
    config["nodePools"]["l4-dra"]["gpuModel"] = "L40S"
    assert errors(config) == [
        "regions.fra1.nodePools.l4-dra.gpuModel: 'L40S': pool l40s-vgpu runs L40S SR-IOV vGPUs, and KubeVirt "
        "advertises every 10DE:26B9 function on vfio-pci as its vGPU, including a GPU the DRA driver binds for a VM "
        "here; give L40S one of the two modes per region"
    ]


def test_dra_driver_values_need_a_dra_pool_and_keep_what_gpucell_sets() -> None:
    config = region()
    del config["nodePools"]["l4-dra"]
    config["draDriver"] = {"values": {"logVerbosity": "6"}}
    assert errors(config) == [
        "regions.fra1.draDriver.values: no pool has gpuMode dra, so the DRA driver is not "
        "installed; remove draDriver.values or add a dra pool"
    ]
    config = region()
    config["draDriver"] = {"values": {"featureGates": {"PassthroughSupport": False}}}
    assert errors(config) == [
        "regions.fra1.draDriver.values.featureGates.PassthroughSupport: is fixed by gpucell: dra "
        "pools hand GPUs to VMs; remove it"
    ]
    config["draDriver"] = {"values": {"kubeletPlugin": {"nodeSelector": {"x": "y"}}}}
    assert errors(config) == [
        "regions.fra1.draDriver.values.kubeletPlugin.nodeSelector: is set by gpucell from "
        "nodePools.<pool>.gpuMode (dra); set nodePools.<pool>.gpuMode (dra) instead"
    ]
    config["draDriver"] = {"values": {"featureGates": {"NVMLDeviceHealthCheck": True}}}
    assert errors(config) == [
        "regions.fra1.draDriver.values.featureGates.NVMLDeviceHealthCheck: cannot be on with "
        "PassthroughSupport, which dra pools need: the driver refuses to start "
        "(ValidateFeatureGates); remove it"
    ]
    config["draDriver"] = {"values": {"logVerbosity": "6", "featureGates": {"TimeSlicingSettings": True}}}
    assert errors(config) == []


# -- the workload fields ---------------------------------------------------------------------------------------
def test_dra_vm_fields() -> None:
    assert errors(region(acme={"virtualMachines": {"x": dra_vm(gpus=0, gpuModel=None)}})) == [
        f"{A}.virtualMachines.x.gpus: must be at least 1 with gpuAllocation 'dra'"
    ]
    assert errors(region(acme={"virtualMachines": {"x": dra_vm(vgpuProfile="L4-24Q")}})) == [
        f"{A}.virtualMachines.x.vgpuProfile: 'L4-24Q': vGPU types come from the GPU Operator's vGPU manager, the DRA "
        "driver hands VMs whole GPUs; use gpuAllocation device-plugin on a vm-vgpu pool, or drop vgpuProfile"
    ]
    assert errors(region(acme={"virtualMachines": {"x": dra_vm(gpuAllocation="claims")}})) == [
        f"{A}.virtualMachines.x.gpuAllocation: 'claims' is not one of device-plugin, dra"
    ]


def test_dra_container_gpus_are_whole() -> None:
    assert errors(region(acme={"notebooks": {"nb": dra_notebook(migProfile="1g.10gb")}})) == [
        f"{A}.notebooks.nb.gpu.migProfile: '1g.10gb': dra pools hand out whole GPUs (a MIG-partitioned GPU gets no "
        "VFIO device from the DRA driver, so gpucell runs no MIG there); use allocation device-plugin on a MIG "
        "pool, or drop migProfile"
    ]


# -- placement -------------------------------------------------------------------------------------------------
def test_dra_workloads_land_on_the_dra_pool_with_their_device_class() -> None:
    config = region(
        acme={
            "virtualMachines": {"vm": dra_vm(2)},
            "notebooks": {"nb": dra_notebook(2)},
            "modelEndpoints": {"llm": dra_endpoint(1, replicas=2)},
        }
    )
    spec = CellSpec.model_validate(config)
    found = {key: (placement, units) for key, placement, units in placements(spec, spec.tenants["acme"])}
    l4 = CATALOG["L4"]
    assert found == {
        ("virtualMachines", "vm"): (Placement(("l4-dra",), None, 2, device_class=VFIO_CLASS, model=l4), 2),
        ("notebooks", "nb"): (Placement(("l4-dra",), None, 2, device_class=GPU_CLASS), 2),
        ("modelEndpoints", "llm"): (Placement(("l4-dra",), None, 1, device_class=GPU_CLASS, model=l4), 2),
    }
    assert all(p.has_gpus and p.resource is None for p, _ in found.values())


def test_dra_vm_without_a_dra_pool_of_its_model() -> None:
    assert errors(region(acme={"virtualMachines": {"x": dra_vm(gpuModel="T4")}})) == [
        f"{A}.virtualMachines.x.gpuAllocation: 'dra': the region has no dra pool with T4"
    ]
    assert errors(region(acme={"virtualMachines": {"x": dra_vm(pool="h200")}})) == [
        f"{A}.virtualMachines.x.gpuAllocation: 'dra': the region has no dra pool with L4 in pool h200; L4 dra pools: "
        "l4-dra"
    ]


def test_device_plugin_workloads_on_a_dra_pool_are_told_to_ask_for_dra() -> None:
    plain_vm = {k: v for k, v in dra_vm().items() if k != "gpuAllocation"}
    assert errors(region(acme={"virtualMachines": {"x": plain_vm}})) == [
        f"{A}.virtualMachines.x.gpuModel: the region has no vm-passthrough pool with L4; pool l4-dra runs gpuMode "
        "dra: set gpuAllocation: dra"
    ]
    assert errors(region(acme={"notebooks": {"nb": {"gpu": {"model": "L4"}}}})) == [
        f"{A}.notebooks.nb.gpu: the region has no container-mode GPU pool with L4; pool l4-dra runs gpuMode dra: set "
        "gpu.allocation: dra"
    ]


def test_dra_container_without_a_dra_pool_and_more_gpus_than_a_node_holds() -> None:
    config = region(acme={"notebooks": {"nb": dra_notebook(model="H200-SXM-141GB")}})
    assert errors(config) == [f"{A}.notebooks.nb.gpu.allocation: 'dra': the region has no dra pool with H200-SXM-141GB"]
    assert errors(region(acme={"notebooks": {"nb": dra_notebook(5)}})) == [
        f"{A}.notebooks.nb.gpu.count: 5 GPUs do not fit one node: pool l4-dra has 4 per node"
    ]
    assert errors(region(acme={"virtualMachines": {"x": dra_vm(5)}})) == [
        f"{A}.virtualMachines.x.gpus: 5 L4 GPUs do not fit one node: pool l4-dra has 4 per node"
    ]


# -- quota and the shared GPU count ------------------------------------------------------------------------------
def test_device_class_quota_names_a_class_the_region_offers() -> None:
    config = region(acme={})
    config["tenants"]["acme"]["quota"]["deviceClasses"] = {"mig.nvidia.com": 1}
    assert errors(config) == [
        f"{A}.quota.deviceClasses.mig.nvidia.com: is offered by no pool of the region; "
        "offered: gpu.nvidia.com, vfio.gpu.nvidia.com"
    ]
    del config["nodePools"]["l4-dra"]
    config["tenants"]["acme"]["quota"]["deviceClasses"] = {VFIO_CLASS: 1}
    assert errors(config) == [
        f"{A}.quota.deviceClasses.vfio.gpu.nvidia.com: is offered by no pool of the region; "
        "offered: none (no pool has gpuMode dra)"
    ]
    config["tenants"]["acme"]["quota"]["deviceClasses"] = {"Not_A_Class": 1}
    assert errors(config) == [
        f"{A}.quota.deviceClasses.Not_A_Class: 'Not_A_Class' is not a DeviceClass name (a DNS "
        "subdomain such as vfio.gpu.nvidia.com)"
    ]


def test_device_class_quotas_of_all_tenants_share_the_dra_gpus() -> None:
    config = region(acme={}, globex={})
    config["tenants"]["globex"]["quota"]["deviceClasses"] = {}
    assert errors(config) == []  # acme's 4 + 4 are the pool's 8 GPUs
    config["tenants"]["globex"]["quota"]["deviceClasses"] = {GPU_CLASS: 1}
    assert errors(config) == [
        "regions.fra1.tenants.globex.quota.deviceClasses.gpu.nvidia.com: tenants reserve 9 devices of the dra pools "
        "in all (gpu.nvidia.com and vfio.gpu.nvidia.com draw on the same GPUs), the region has 8; lower the quotas "
        "or set allowGpuOvercommit: true"
    ]
    config["allowGpuOvercommit"] = True
    assert errors(config) == []


def test_dra_workloads_count_against_their_class_quota() -> None:
    config = region(acme={"virtualMachines": {"a": dra_vm(2), "b": dra_vm(3)}})
    assert errors(config) == [
        f"{A}.virtualMachines.b: needs 3 vfio.gpu.nvidia.com devices (5 with the tenant's other workloads), tenant "
        "quota.deviceClasses allows 4"
    ]
    config = region(acme={"modelEndpoints": {"llm": dra_endpoint(2, replicas=3)}})
    assert errors(config) == [
        f"{A}.modelEndpoints.llm: needs 6 gpu.nvidia.com devices (6 with the tenant's other workloads), tenant "
        "quota.deviceClasses allows 4"
    ]


def test_containers_and_vms_of_all_tenants_share_the_pools_gpus() -> None:
    """The pool has 8 GPUs; acme's VMs take 4 and notebook 2, globex's notebook the ninth GPU."""
    config = region(
        acme={"virtualMachines": {"a": dra_vm(4)}, "notebooks": {"nb": dra_notebook(2)}},
        globex={"notebooks": {"nb2": dra_notebook(3)}},
    )
    config["allowGpuOvercommit"] = True  # the quotas may promise more; the declared workloads may not
    assert errors(config) == [
        "regions.fra1.tenants.globex.notebooks.nb2.gpu: brings the GPUs declared on dra pool l4-dra to 9 (containers "
        "5, VMs 4, all tenants, endpoints at maxReplicas), which hold 8 (l4-dra: 2 nodes x 4 L4); a GPU serves one "
        "container or one VM at a time: lower the GPUs or add hosts"
    ]
    config["tenants"]["globex"]["notebooks"]["nb2"] = dra_notebook(2)
    assert errors(config) == []


def test_workloads_that_may_use_two_dra_pools_are_checked_against_both() -> None:
    """A model-less notebook may land on either pool; a VM pinned to one pool only counts there."""
    config = region(
        acme={"virtualMachines": {"a": dra_vm(4, pool="l4-dra"), "b": dra_vm(4, pool="l4-dra")}},
        globex={"notebooks": {"nb": dra_notebook(2)}},
    )
    config["nodePools"]["t4-dra"] = {
        "role": "gpu",
        "gpuModel": "T4",
        "gpusPerNode": 2,
        "gpuMode": "dra",
        "hosts": [{"name": "fra1-t4-1", "address": "10.110.0.75"}],
    }
    config["tenants"]["acme"]["quota"]["deviceClasses"] = {VFIO_CLASS: 8}
    config["allowGpuOvercommit"] = True
    assert errors(config) == []  # the notebook fits the T4 pool
    config["tenants"]["globex"]["notebooks"]["nb2"] = dra_notebook(1)
    assert errors(config) == [
        "regions.fra1.tenants.globex.notebooks.nb2.gpu: brings the GPUs declared on dra pools l4-dra, t4-dra to 11 "
        "(containers 3, VMs 8, all tenants, endpoints at maxReplicas), which hold 10 (l4-dra: 2 nodes x 4 L4; "
        "t4-dra: 1 nodes x 2 T4); a GPU serves one container or one VM at a time: lower the GPUs or add hosts"
    ]


# -- inventory and the capacity view -------------------------------------------------------------------------------
def test_dra_pools_are_kept_out_of_the_extended_resources() -> None:
    spec = CellSpec.model_validate(PROD_FRA1)
    assert DRA_SHARED not in capacity(gpu_offers(spec.node_pools, spec.effective_mig_strategy.value))
    (offer,) = dra_offers(spec.node_pools)
    assert (offer.resource, offer.pool, offer.model, offer.kind, offer.per_node, offer.nodes, offer.total) == (
        "gpu.nvidia.com+vfio.gpu.nvidia.com",
        "l4-dra",
        "L4",
        OfferKind.DRA,
        4,
        2,
        8,
    )


def test_capacity_view_shows_the_shared_pool() -> None:
    lines = render_capacity(CellSpec.model_validate(PROD_FRA1))
    dra = [line.split() for line in lines[-3:]]
    # prod: acme reserves 4 + 4; cad-01 holds one GPU as a VM, nb-carol one as a container
    assert dra == [
        ["gpu.nvidia.com+vfio.gpu.nvidia.com", "dra", "L4", "(l4-dra)", "8", "8", "2"],
        ["gpu.nvidia.com", "shared", "containers", "-", "4", "1"],
        ["vfio.gpu.nvidia.com", "shared", "VMs", "-", "4", "1"],
    ]
    config = copy.deepcopy(PROD_FRA1)
    del config["nodePools"]["l4-dra"]
    for tenant in config["tenants"].values():
        tenant["quota"].pop("deviceClasses", None)
        tenant["virtualMachines"].pop("cad-01", None)
        tenant["notebooks"].pop("nb-carol", None)
    assert not any("dra" in line for line in render_capacity(CellSpec.model_validate(config)))
