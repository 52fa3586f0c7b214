"""Where a workload can run and which GPU resource it asks for, decided from the region's inventory.

Used twice, so the two can never disagree: by the admission rules (a workload that fits nowhere is a config
error) and by the renderers (the node selector and the resource requests of the rendered object).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpucell.admission.dra import GPU_CLASS, VFIO_CLASS
from gpucell.admission.fabric import rail_refusal
from gpucell.admission.inventory import WHOLE_GPU, GpuOffer, OfferKind, dra_offers
from gpucell.catalog.gpu_catalog import GpuModel
from gpucell.errors import shown
from gpucell.spec.gpu_models import unknown_model
from gpucell.spec.pools import GpuMode, NodePool, NodeRole, TopologyManagerPolicy
from gpucell.spec.workloads import GpuAllocation, GpuRequest, GpuVirtualMachineSpec

__all__ = ["Placement", "PlacementError", "cpu_pools", "host_refusal", "place_container", "place_vm"]


class PlacementError(Exception):
    """A workload fits no pool. ``rel_path`` is the key below the workload (``("gpuModel",)``)."""

    def __init__(self, rel_path: Sequence[str], message: str) -> None:
        super().__init__(message)
        self.rel_path = tuple(rel_path)
        self.message = message


@dataclass(frozen=True)
class Placement:
    """The pools a workload may land on and the GPU resource it requests."""

    pools: tuple[str, ...]
    """Candidate pools (the rendered node affinity); empty means anywhere."""
    resource: str | None = None
    """Extended resource requested, or ``None`` without GPUs or with DRA."""
    count: int = 0
    """Units of ``resource`` (or devices of ``device_class``) per pod or VM (count)."""
    device_class: str | None = None
    """With ``dra`` allocation: the DeviceClass the workload's claim requests (``gpu.nvidia.com`` for containers,
    ``vfio.gpu.nvidia.com`` for VMs), from the ``dra`` pools in ``pools``; else ``None``."""
    nvswitch_resource: str | None = None
    """A whole-HGX-board VM: the board's NVSwitch resource (``nvidia.com/GH100_H100_NVSWITCH``), else ``None``."""
    nvswitch_count: int = 0
    """NVSwitches a whole-board VM gets (count)."""
    nvlink_disabled: bool = False
    """True for a VM with part of an HGX board and no NVSwitch: its guest driver must run with NVLink off."""
    model: GpuModel | None = None
    """The GPU model the workload asked for (its catalog entry: what the renderers read, never the catalog
    again), ``None`` without GPUs or for any model."""
    rails: tuple[int, ...] = ()
    """A VM with ``rdmaNics``: the rails of its pool's fabric it gets a VF of, in the VM's order (its ``pools`` is
    then the one fabric pool they belong to); else empty."""

    @property
    def has_gpus(self) -> bool:
        """True when the workload gets GPUs, by extended resource or by claim."""
        return self.resource is not None or self.device_class is not None


def _names(offers: Sequence[GpuOffer]) -> str:
    return ", ".join(sorted({o.pool for o in offers}))


def _fit(offers: Sequence[GpuOffer], count: int, what: str, path: tuple[str, ...]) -> tuple[GpuOffer, ...]:
    fitting = tuple(o for o in offers if o.per_node >= count)
    if fitting and all(o.nodes == 0 for o in fitting):  # every host that would hold it is quarantined
        raise PlacementError(
            path,
            f"{count} {what} fit only on quarantined hosts (pool {_names(fitting)}); lift a host's "
            "quarantine or add hosts",
        )
    fitting = tuple(o for o in fitting if o.nodes > 0) or fitting
    if not fitting:
        best = max(offers, key=lambda o: o.per_node)
        raise PlacementError(path, f"{count} {what} do not fit one node: pool {best.pool} has {best.per_node} per node")
    return fitting


def _topology_key(vm: GpuVirtualMachineSpec) -> str:
    """The field that asked for a topology profile, for error paths."""
    if vm.dedicated_cpus:
        return "dedicatedCpus"
    return "hugepages" if vm.hugepages is not None else "numaPassthrough"


def place_vm(
    name: str,
    vm: GpuVirtualMachineSpec,
    pools: Mapping[str, NodePool],
    offers: Sequence[GpuOffer],
    *,
    catalog: Mapping[str, GpuModel],
) -> Placement:
    """Placement of a VM: passthrough or vGPU pools of its model, ``dra`` pools with ``gpuAllocation: dra`` (a claim
    for ``vfio.gpu.nvidia.com`` devices), or CPU pools for a CPU-only VM. ``catalog`` is the region's GPU catalog
    (:attr:`gpucell.spec.CellSpec.gpu_catalog`), which ``gpuModel`` must name."""
    needs_topology = vm.dedicated_cpus or vm.hugepages is not None or vm.numa_passthrough
    workers = [n for n, p in pools.items() if p.role is not NodeRole.SERVER]
    if vm.pool is not None and vm.pool not in workers:
        why = "is a server pool" if vm.pool in pools else "is not a node pool of the region"
        raise PlacementError(("pool",), f"{shown(vm.pool)} {why}; VMs run on gpu or cpu pools: {', '.join(workers)}")
    if vm.gpu_model is None:
        candidates = [vm.pool] if vm.pool else cpu_pools(pools)
        placement = _with_topology(candidates, pools, needs_topology, _topology_key(vm))
        refusals = {name: host_refusal(vm, name, pools[name]) for name in placement.pools}
        fits = tuple(name for name, refusal in refusals.items() if refusal is None)
        if placement.pools and not fits:
            raise PlacementError(*next(r for r in refusals.values() if r is not None))
        return Placement(fits)
    if vm.gpu_model not in catalog:
        raise PlacementError(("gpuModel",), unknown_model(vm.gpu_model, catalog))
    model = catalog[vm.gpu_model]
    if vm.gpu_allocation is GpuAllocation.DRA:
        if vm.rdma_nics:
            raise PlacementError(("rdmaNics",), "needs a vm-passthrough pool with a fabric; dra pools have no NICs")
        return dataclasses.replace(_place_dra_vm(vm, pools, needs_topology), model=model)
    profiles = model.vgpu_profiles
    if vm.vgpu_profile is not None and vm.vgpu_profile not in profiles:
        raise PlacementError(
            ("vgpuProfile",),
            f"{shown(vm.vgpu_profile)} is not a vGPU profile of {vm.gpu_model}; "
            f"accepted: {', '.join(profiles) or 'none: no vGPU profiles catalogued'}",
        )
    kind = OfferKind.VGPU if vm.vgpu_profile else OfferKind.PASSTHROUGH
    mode = GpuMode.VM_VGPU if vm.vgpu_profile else GpuMode.VM_PASSTHROUGH
    of_model = [o for o in offers if o.model == vm.gpu_model]
    matching = [
        o
        for o in of_model
        if o.kind is kind and (vm.vgpu_profile is None or o.resource.endswith(f"_{vm.vgpu_profile}"))
    ]
    if vm.pool is not None:
        matching = [o for o in matching if o.pool == vm.pool]
    if not matching:
        key = "vgpuProfile" if vm.vgpu_profile and any(o.kind is kind for o in of_model) else "gpuModel"
        raise PlacementError(
            (key,), _no_vm_pool(vm, mode, of_model) + _dra_hint(vm.gpu_model, vm.pool, pools, "gpuAllocation")
        )
    matching = [o for o in matching if not needs_topology or pools[o.pool].topology is not None]
    if not matching:
        raise PlacementError(
            (_topology_key(vm),),
            f"dedicated CPUs, hugepages or NUMA passthrough need a pool with "
            f"a topology profile; no {mode.value} pool with {vm.gpu_model} has one",
        )
    fitting = _fit(matching, vm.gpus, "vGPUs" if vm.vgpu_profile else f"{vm.gpu_model} GPUs", ("gpus",))
    fitting = tuple(_host_fits(vm, fitting, pools))
    if vm.rdma_nics:
        fitting = _with_rails(vm, fitting, pools)
    placement = Placement(tuple(o.pool for o in fitting), fitting[0].resource, vm.gpus, model=model)
    if vm.rdma_nics:
        placement = dataclasses.replace(placement, rails=tuple(vm.rdma_nics))
    return _with_fabric(placement, model, kind)


def _with_rails(
    vm: GpuVirtualMachineSpec, offers: Sequence[GpuOffer], pools: Mapping[str, NodePool]
) -> tuple[GpuOffer, ...]:
    """The first offer whose pool has the fabric rails ``vm.rdmaNics`` names, aligned with its GPUs
    (:func:`gpucell.admission.fabric.rail_refusal`): a VM's rails are resources of one pool, so it is pinned there;
    raises with the first refusal."""
    refusals = []
    for offer in offers:
        refusal = rail_refusal(vm, offer.pool, pools[offer.pool])
        if refusal is None:
            return (offer,)
        refusals.append(refusal)
    with_fabric = [r for o, r in zip(offers, refusals, strict=True) if pools[o.pool].fabric is not None]
    raise PlacementError(*(with_fabric or refusals)[0])


def _place_dra_vm(vm: GpuVirtualMachineSpec, pools: Mapping[str, NodePool], needs_topology: bool) -> Placement:
    """A VM with ``gpuAllocation: dra``: ``dra`` pools of its model (the named one), with a topology profile when it
    asks for dedicated CPUs or hugepages, whose nodes hold its GPUs and memory; claims ``vfio.gpu.nvidia.com``."""
    of_model = [o for o in dra_offers(pools) if o.model == vm.gpu_model]
    matching = [o for o in of_model if vm.pool is None or o.pool == vm.pool]
    if not matching:
        where = f" in pool {vm.pool}" if vm.pool else ""
        elsewhere = f"; {vm.gpu_model} dra pools: {_names(of_model)}" if of_model else ""
        raise PlacementError(
            ("gpuAllocation",), f"'dra': the region has no dra pool with {vm.gpu_model}{where}{elsewhere}"
        )
    matching = [o for o in matching if not needs_topology or pools[o.pool].topology is not None]
    if not matching:
        raise PlacementError(
            (_topology_key(vm),),
            f"dedicated CPUs, hugepages or NUMA passthrough need a pool with "
            f"a topology profile; no dra pool with {vm.gpu_model} has one",
        )
    fitting = _fit(matching, vm.gpus, f"{vm.gpu_model} GPUs", ("gpus",))
    fitting = tuple(_host_fits(vm, fitting, pools))
    return Placement(tuple(o.pool for o in fitting), None, vm.gpus, device_class=VFIO_CLASS)


def _dra_hint(model: str | None, pool: str | None, pools: Mapping[str, NodePool], key: str) -> str:
    """``"; pool l4-dra runs gpuMode dra: set <key>: dra"`` when the named pool, or a pool of ``model``, is a ``dra``
    pool; else empty."""
    dra = [
        o.pool
        for o in dra_offers(pools)
        if (pool is not None and o.pool == pool) or (pool is None and model is not None and o.model == model)
    ]
    if not dra:
        return ""
    runs = "runs" if len(dra) == 1 else "run"
    return f"; pool{'s' if len(dra) > 1 else ''} {', '.join(dra)} {runs} gpuMode dra: set {key}: dra"


def _with_fabric(placement: Placement, model: GpuModel, kind: OfferKind) -> Placement:
    """A passthrough VM's share of an HGX board: all of it with the NVSwitches, or part of it with NVLink off.

    The spec makes every passthrough pool of an HGX model hold whole boards (``gpusPerNode`` = the board's GPUs).
    """
    board = model.hgx
    if board is None or kind is not OfferKind.PASSTHROUGH:
        return placement
    if placement.count < board.gpus:
        return dataclasses.replace(placement, nvlink_disabled=True)
    if board.nvswitch is None:
        raise PlacementError(
            ("gpus",),
            f"{placement.count} {model.name} GPUs are a whole HGX board, whose NVLink "
            "switches gpucell cannot pass through (no PCI identity catalogued for them); give at "
            f"most {board.gpus - 1} GPUs (the guest runs with NVLink off) or use a container-mode "
            "pool",
        )
    return dataclasses.replace(
        placement, nvswitch_resource=board.nvswitch.passthrough_resource, nvswitch_count=board.nvswitches
    )


def _host_fits(vm: GpuVirtualMachineSpec, offers: Sequence[GpuOffer], pools: Mapping[str, NodePool]) -> list[GpuOffer]:
    """The offers on pools whose hosts hold the VM's memory (and dedicated vCPUs); raises with the first refusal."""
    fitting, refusals = [], []
    for offer in offers:
        refusal = host_refusal(vm, offer.pool, pools[offer.pool])
        if refusal is None:
            fitting.append(offer)
        else:
            refusals.append(refusal)
    if not fitting:
        raise PlacementError(*refusals[0])
    return fitting


def host_refusal(vm: GpuVirtualMachineSpec, pool_name: str, pool: NodePool) -> tuple[tuple[str, ...], str] | None:
    """Why one host of ``pool`` cannot hold ``vm``, as ``(key path below the VM, message)``, or ``None``.

    Only pools with a topology profile declare their hosts (CPUs, memory and hugepages per NUMA node); others are not
    checked. The rules, in order:

    - dedicated vCPUs must fit the host's CPUs outside ``reservedCpus``;
    - with ``hugepages``: the VM's memory in pages of that size must fit what one host reserves (kubelet admits
      hugepages only up to the node's ``hugepages-<size>`` capacity, which cannot be overcommitted);
    - with ``numaPassthrough`` too: KubeVirt v1.9 binds guest memory (``numatune`` ``strict``) evenly to the host
      NUMA nodes that hold the VM's pinned vCPUs (``numaMapping``, ``pkg/virt-launcher/virtwrap/converter/vcpu``:
      ``Memory: domain.Memory.Value / uint64(len(numamap))``). The vCPUs may land on as few as ceil(vCPUs /
      ``cpusPerNuma``) nodes (one under ``single-numa-node``), each of which must then hold its share in hugepages,
      else QEMU fails with "unable to map backing store for guest RAM" (kubevirt/kubevirt#14854);
    - without ``hugepages``: the memory must fit the host's ordinary memory left beside its hugepages and the
      kubelet's reservation.
    """
    topology = pool.topology
    if topology is None:
        return None
    if vm.dedicated_cpus and vm.cpu.vcpus > topology.allocatable_cpus:
        return ("cpu",), (
            f"{vm.cpu.vcpus} dedicated vCPUs do not fit one node of pool {pool_name}: {topology.cpus} "
            f"CPUs, {topology.cpus - topology.allocatable_cpus} of them reservedCpus"
        )
    need_mib = vm.guest_memory_gib * 1024
    if vm.hugepages is None:
        regular = topology.regular_memory_per_numa_mib * topology.numa_nodes
        if need_mib > regular:
            return ("memoryGib",), (
                f"{vm.guest_memory_gib} GiB of ordinary memory do not fit one node of pool {pool_name}, "
                f"which leaves {_gib(regular)} GiB beside its hugepages and reserved memory; back "
                "the VM with hugepages (hugepages: 1Gi)"
            )
        return None
    size = vm.hugepages
    per_numa = topology.hugepages_mib_per_numa(size)
    count = topology.hugepages_per_numa(size)
    if per_numa == 0:
        return ("hugepages",), (
            f"{size!r}: pool {pool_name} reserves no {size} hugepages (topology.hugepages{size}PerNuma is 0)"
        )
    per_node = per_numa * topology.numa_nodes
    if need_mib > per_node:
        return ("memoryGib",), (
            f"{vm.guest_memory_gib} GiB of {size} hugepages do not fit one node of pool {pool_name}, "
            f"which reserves {_gib(per_node)} GiB of them ({count} per NUMA node x "
            f"{topology.numa_nodes})"
        )
    if vm.numa_passthrough:
        return _numa_refusal(vm, pool_name, pool, need_mib)
    return None


def _numa_refusal(
    vm: GpuVirtualMachineSpec, pool_name: str, pool: NodePool, need_mib: int
) -> tuple[tuple[str, ...], str] | None:
    topology = pool.topology
    assert topology is not None
    assert vm.hugepages is not None
    single = topology.topology_manager_policy is TopologyManagerPolicy.SINGLE_NUMA_NODE
    nodes = 1 if single else min(topology.numa_nodes, math.ceil(vm.cpu.vcpus / topology.cpus_per_numa))
    share, per_numa = math.ceil(need_mib / nodes), topology.hugepages_mib_per_numa(vm.hugepages)
    if share <= per_numa:
        return None
    why = (
        "its topologyManagerPolicy single-numa-node keeps a VM on one NUMA node"
        if single
        else f"{vm.cpu.vcpus} vCPUs fit on {nodes} of its NUMA nodes ({topology.cpus_per_numa} CPUs each)"
    )
    return ("numaPassthrough",), (
        f"{vm.guest_memory_gib} GiB of {vm.hugepages} hugepages: KubeVirt binds guest memory evenly to the NUMA nodes "
        f"holding the VM's vCPUs, and on pool {pool_name} {why}, leaving {_gib(share)} GiB per NUMA node where "
        f"{_gib(per_numa)} GiB are reserved; lower memoryGib or give the VM more vCPUs"
    )


def _gib(mib: int) -> str:
    """MiB as GiB, without a fraction when whole: ``1024`` -> ``1``, ``1536`` -> ``1.5``."""
    return f"{mib / 1024:g}"


def _no_vm_pool(vm: GpuVirtualMachineSpec, mode: GpuMode, of_model: Sequence[GpuOffer]) -> str:
    wanted = f"{mode.value} pool with {vm.gpu_model}" + (f" ({vm.vgpu_profile})" if vm.vgpu_profile else "")
    where = f" in pool {vm.pool}" if vm.pool else ""
    if of_model:
        modes = ", ".join(
            sorted(
                {f"{o.pool} ({o.mode.value}{', ' + o.resource if o.kind is OfferKind.VGPU else ''})" for o in of_model}
            )
        )
        container_only = all(o.mode is GpuMode.CONTAINER for o in of_model)
        return f"no {wanted}{where}; {vm.gpu_model} is only in {modes}" + (
            ": a GPU VM needs a VM-mode pool" if container_only else ""
        )
    return f"the region has no {wanted}{where}"


def _with_topology(candidates: list[str], pools: Mapping[str, NodePool], needs_topology: bool, key: str) -> Placement:
    if needs_topology:
        candidates = [c for c in candidates if pools[c].topology is not None]
        if not candidates:
            # only gpu pools take a topology profile: a CPU-only NUMA VM is pinned to one with ``pool``
            with_one = [name for name, pool in pools.items() if pool.topology is not None]
            raise PlacementError(
                (key,),
                "dedicated CPUs, hugepages or NUMA passthrough need a pool with a topology profile, and none of the "
                "candidate pools has one; cpu pools take none: set pool to a gpu pool that has one ("
                f"{', '.join(with_one) or 'none in this region'})",
            )
    return Placement(tuple(candidates))


def cpu_pools(pools: Mapping[str, NodePool]) -> list[str]:
    """The cpu-role pools, in config order: where workloads without GPUs go (off the NUMA-pinned GPU nodes)."""
    return [name for name, pool in pools.items() if pool.role is NodeRole.CPU]


def place_container(
    gpu: GpuRequest | None,
    pools: Mapping[str, NodePool],
    offers: Sequence[GpuOffer],
    mig_strategy: str,
    what: str,
    *,
    catalog: Mapping[str, GpuModel],
) -> Placement:
    """Placement of a notebook or endpoint pod: container-mode GPU pools, by whole GPUs or by MIG profile; with
    ``gpu.allocation: dra``, ``dra`` pools (a claim for ``gpu.nvidia.com`` devices).

    ``what`` names the workload kind in messages (``a GPU notebook``). Without GPUs the pod goes to the region's
    :func:`cpu_pools`, so it takes no CPU from NUMA-pinned GPU nodes; anywhere when there are none. ``catalog`` is
    the region's GPU catalog, which ``gpu.model`` must name.
    """
    if gpu is None:
        return Placement(tuple(cpu_pools(pools)))
    if gpu.model is not None and gpu.model not in catalog:
        raise PlacementError(("gpu", "model"), unknown_model(gpu.model, catalog))
    model = catalog[gpu.model] if gpu.model is not None else None
    return dataclasses.replace(_place_container(gpu, pools, offers, mig_strategy, what), model=model)


def _place_container(
    gpu: GpuRequest, pools: Mapping[str, NodePool], offers: Sequence[GpuOffer], mig_strategy: str, what: str
) -> Placement:
    if gpu.allocation is GpuAllocation.DRA:
        return _place_dra_container(gpu, pools)
    of_model = [o for o in offers if gpu.model is None or o.model == gpu.model]
    vm_pools = [o for o in of_model if o.mode is not GpuMode.CONTAINER]
    container = [o for o in of_model if o.mode is GpuMode.CONTAINER]
    if not container:
        hint = _dra_hint(gpu.model, None, pools, "gpu.allocation") if gpu.model else ""
        if vm_pools:
            raise PlacementError(
                ("gpu",),
                f"{what} needs a container-mode pool; "
                f"{_names(vm_pools)} run{'s' if len(vm_pools) == 1 else ''} VMs{hint}",
            )
        raise PlacementError(("gpu",), f"the region has no container-mode GPU pool{_model(gpu)}{hint}")
    if gpu.mig_profile is not None:
        return _place_mig(gpu, container, mig_strategy)
    whole = [o for o in container if o.kind is OfferKind.GPU]
    if not whole:
        raise PlacementError(
            ("gpu",),
            f"no container-mode pool{_model(gpu)} has whole GPUs (all are MIG-partitioned: "
            f"{_names(container)}); ask for a migProfile",
        )
    fitting = _fit(whole, gpu.count, "GPUs", ("gpu", "count"))
    return Placement(tuple(o.pool for o in fitting), WHOLE_GPU, gpu.count)


def _place_dra_container(gpu: GpuRequest, pools: Mapping[str, NodePool]) -> Placement:
    """A pod with ``gpu.allocation: dra``: ``dra`` pools (of ``gpu.model``) whose nodes hold ``gpu.count`` GPUs;
    claims ``gpu.nvidia.com``."""
    candidates = [o for o in dra_offers(pools) if gpu.model is None or o.model == gpu.model]
    if not candidates:
        raise PlacementError(("gpu", "allocation"), f"'dra': the region has no dra pool{_model(gpu)}")
    fitting = _fit(candidates, gpu.count, "GPUs", ("gpu", "count"))
    return Placement(tuple(o.pool for o in fitting), None, gpu.count, device_class=GPU_CLASS)


def _model(gpu: GpuRequest) -> str:
    return f" with {gpu.model}" if gpu.model else ""


def _place_mig(gpu: GpuRequest, container: Sequence[GpuOffer], mig_strategy: str) -> Placement:
    if mig_strategy == "single" and any(o.kind is OfferKind.MIG for o in container):
        raise PlacementError(
            ("gpu", "migProfile"),
            f"{shown(gpu.mig_profile)}: under gpuOperator.migStrategy "
            "single MIG instances are advertised as nvidia.com/gpu; ask for whole GPUs or use "
            "migStrategy mixed",
        )
    slices = [o for o in container if o.kind is OfferKind.MIG and o.mig_profile == gpu.mig_profile]
    if not slices:
        offered = sorted({o.mig_profile for o in container if o.mig_profile})
        raise PlacementError(
            ("gpu", "migProfile"),
            f"{shown(gpu.mig_profile)} is offered by no node's MIG layout"
            f"{_model(gpu)}; offered: {', '.join(offered) or 'none'}",
        )
    fitting = _fit(slices, gpu.count, f"{gpu.mig_profile} instances", ("gpu", "count"))
    return Placement(tuple(o.pool for o in fitting), fitting[0].resource, gpu.count)
