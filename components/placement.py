"""Where a workload can run and which GPU resource it asks for, decided from the region's inventory.

Used twice, so the two can never disagree: by the admission rules (a workload that fits nowhere is a config
error) and by the renderers (the node selector and the resource requests of the rendered object).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpucell.errors import shown
from gpucell.gpu_catalog import CATALOG
from gpucell.inventory import WHOLE_GPU, GpuOffer, OfferKind
from gpucell.spec.pools import GpuMode, NodePool, NodeRole
from gpucell.spec.workloads import GpuRequest, GpuVirtualMachineSpec

__all__ = ["Placement", "PlacementError", "cpu_pools", "place_container", "place_vm"]


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
    """Extended resource requested, or ``None`` without GPUs."""
    count: int = 0
    """Units of ``resource`` per pod or VM (count)."""


def _names(offers: Sequence[GpuOffer]) -> str:
    return ", ".join(sorted({o.pool for o in offers}))


def _fit(offers: Sequence[GpuOffer], count: int, what: str, path: tuple[str, ...]) -> tuple[GpuOffer, ...]:
    fitting = tuple(o for o in offers if o.per_node >= count)
    if not fitting:
        best = max(offers, key=lambda o: o.per_node)
        raise PlacementError(
            path, f"{count} {what} do not fit one node: pool {best.pool} has {best.per_node} per node"
        )
    return fitting


def _topology_key(vm: GpuVirtualMachineSpec) -> str:
    """The field that asked for a topology profile, for error paths."""
    if vm.dedicated_cpus:
        return "dedicatedCpus"
    return "hugepages" if vm.hugepages is not None else "numaPassthrough"


def place_vm(name: str, vm: GpuVirtualMachineSpec, pools: Mapping[str, NodePool],
             offers: Sequence[GpuOffer]) -> Placement:
    """Placement of a VM: passthrough or vGPU pools of its model, or CPU pools for a CPU-only VM."""
    needs_topology = vm.dedicated_cpus or vm.hugepages is not None or vm.numa_passthrough
    workers = [n for n, p in pools.items() if p.role is not NodeRole.SERVER]
    if vm.pool is not None and vm.pool not in workers:
        why = "is a server pool" if vm.pool in pools else "is not a node pool of the region"
        raise PlacementError(("pool",), f"{shown(vm.pool)} {why}; VMs run on gpu or cpu pools: {', '.join(workers)}")
    if vm.gpu_model is None:
        candidates = [vm.pool] if vm.pool else cpu_pools(pools)
        return _with_topology(candidates, pools, needs_topology, _topology_key(vm))
    if vm.gpu_model not in CATALOG:
        raise PlacementError(("gpuModel",),
                             f"{shown(vm.gpu_model)} is not a known GPU model; known: {', '.join(CATALOG)}")
    profiles = CATALOG[vm.gpu_model].vgpu_profiles
    if vm.vgpu_profile is not None and vm.vgpu_profile not in profiles:
        raise PlacementError(("vgpuProfile",), f"{shown(vm.vgpu_profile)} is not a vGPU profile of {vm.gpu_model}; "
                             f"accepted: {', '.join(profiles) or 'none: no vGPU profiles catalogued'}")
    kind = OfferKind.VGPU if vm.vgpu_profile else OfferKind.PASSTHROUGH
    mode = GpuMode.VM_VGPU if vm.vgpu_profile else GpuMode.VM_PASSTHROUGH
    of_model = [o for o in offers if o.model == vm.gpu_model]
    matching = [o for o in of_model if o.kind is kind and (vm.vgpu_profile is None or
                                                          o.resource.endswith(f"_{vm.vgpu_profile}"))]
    if vm.pool is not None:
        matching = [o for o in matching if o.pool == vm.pool]
    if not matching:
        key = "vgpuProfile" if vm.vgpu_profile and any(o.kind is kind for o in of_model) else "gpuModel"
        raise PlacementError((key,), _no_vm_pool(vm, mode, of_model))
    matching = [o for o in matching if not needs_topology or pools[o.pool].topology is not None]
    if not matching:
        raise PlacementError((_topology_key(vm),), f"dedicated CPUs, hugepages or NUMA passthrough need a pool with "
                             f"a topology profile; no {mode.value} pool with {vm.gpu_model} has one")
    fitting = _fit(matching, vm.gpus, "vGPUs" if vm.vgpu_profile else f"{vm.gpu_model} GPUs", ("gpus",))
    return Placement(tuple(o.pool for o in fitting), fitting[0].resource, vm.gpus)


def _no_vm_pool(vm: GpuVirtualMachineSpec, mode: GpuMode, of_model: Sequence[GpuOffer]) -> str:
    wanted = f"{mode.value} pool with {vm.gpu_model}" + (f" ({vm.vgpu_profile})" if vm.vgpu_profile else "")
    where = f" in pool {vm.pool}" if vm.pool else ""
    if of_model:
        modes = ", ".join(sorted({f"{o.pool} ({o.mode.value}{', ' + o.resource if o.kind is OfferKind.VGPU else ''})"
                                  for o in of_model}))
        container_only = all(o.mode is GpuMode.CONTAINER for o in of_model)
        return f"no {wanted}{where}; {vm.gpu_model} is only in {modes}" + (
            ": a GPU VM needs a VM-mode pool" if container_only else ""
        )
    return f"the region has no {wanted}{where}"


def _with_topology(candidates: list[str], pools: Mapping[str, NodePool], needs_topology: bool,
                   key: str) -> Placement:
    if needs_topology:
        candidates = [c for c in candidates if pools[c].topology is not None]
        if not candidates:
            raise PlacementError((key,), "dedicated CPUs, hugepages or NUMA passthrough need a pool with a "
                                 "topology profile, and none of the candidate pools has one")
    return Placement(tuple(candidates))


def cpu_pools(pools: Mapping[str, NodePool]) -> list[str]:
    """The cpu-role pools, in config order: where workloads without GPUs go (off the NUMA-pinned GPU nodes)."""
    return [name for name, pool in pools.items() if pool.role is NodeRole.CPU]


def place_container(gpu: GpuRequest | None, pools: Mapping[str, NodePool], offers: Sequence[GpuOffer],
                    mig_strategy: str, what: str) -> Placement:
    """Placement of a notebook or endpoint pod: container-mode GPU pools, by whole GPUs or by MIG profile.

    ``what`` names the workload kind in messages (``a GPU notebook``). Without GPUs the pod goes to the region's
    :func:`cpu_pools`, so it takes no CPU from NUMA-pinned GPU nodes; anywhere when there are none.
    """
    if gpu is None:
        return Placement(tuple(cpu_pools(pools)))
    if gpu.model is not None and gpu.model not in CATALOG:
        raise PlacementError(("gpu", "model"),
                             f"{shown(gpu.model)} is not a known GPU model; known: {', '.join(CATALOG)}")
    of_model = [o for o in offers if gpu.model is None or o.model == gpu.model]
    vm_pools = [o for o in of_model if o.mode is not GpuMode.CONTAINER]
    container = [o for o in of_model if o.mode is GpuMode.CONTAINER]
    if not container:
        if vm_pools:
            raise PlacementError(("gpu",), f"{what} needs a container-mode pool; "
                                 f"{_names(vm_pools)} run{'s' if len(vm_pools) == 1 else ''} VMs")
        raise PlacementError(("gpu",), f"the region has no container-mode GPU pool{_model(gpu)}")
    if gpu.mig_profile is not None:
        return _place_mig(gpu, container, mig_strategy)
    whole = [o for o in container if o.kind is OfferKind.GPU]
    if not whole:
        raise PlacementError(("gpu",), f"no container-mode pool{_model(gpu)} has whole GPUs (all are MIG-partitioned: "
                             f"{_names(container)}); ask for a migProfile")
    fitting = _fit(whole, gpu.count, "GPUs", ("gpu", "count"))
    return Placement(tuple(o.pool for o in fitting), WHOLE_GPU, gpu.count)


def _model(gpu: GpuRequest) -> str:
    return f" with {gpu.model}" if gpu.model else ""


def _place_mig(gpu: GpuRequest, container: Sequence[GpuOffer], mig_strategy: str) -> Placement:
    if mig_strategy == "single" and any(o.kind is OfferKind.MIG for o in container):
        raise PlacementError(("gpu", "migProfile"), f"{shown(gpu.mig_profile)}: under gpuOperator.migStrategy "
                             "single MIG instances are advertised as nvidia.com/gpu; ask for whole GPUs or use "
                             "migStrategy mixed")
    slices = [o for o in container if o.kind is OfferKind.MIG and o.mig_profile == gpu.mig_profile]
    if not slices:
        offered = sorted({o.mig_profile for o in container if o.mig_profile})
        raise PlacementError(("gpu", "migProfile"), f"{shown(gpu.mig_profile)} is offered by no node's MIG layout"
                             f"{_model(gpu)}; offered: {', '.join(offered) or 'none'}")
    fitting = _fit(slices, gpu.count, f"{gpu.mig_profile} instances", ("gpu", "count"))
    return Placement(tuple(o.pool for o in fitting), fitting[0].resource, gpu.count)
