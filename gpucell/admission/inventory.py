"""A region's GPU inventory: which extended resources its pools advertise, how many per node and in total.

What a node advertises follows from its pool's mode (the GPU Operator's ``nvidia.com/gpu.workload.config``):

- ``container`` without MIG: ``nvidia.com/gpu``, one per GPU (NVIDIA k8s-device-plugin);
- ``container`` with a MIG layout: ``nvidia.com/mig-<profile>`` per instance under the ``mixed`` strategy, or
  ``nvidia.com/gpu`` per instance under ``single`` (uniform layouts only);
- ``vm-passthrough``: the sandbox device plugin's ``nvidia.com/<PCI device name>``, one per GPU;
- ``vm-vgpu``: ``nvidia.com/NVIDIA_<vGPU type>``, as many per GPU as the GPU Operator's vGPU config allows
  (``L40S-12Q``: 4), whether the sandbox device plugin advertises them as mdevs or KubeVirt as SR-IOV VFs.

``vm-passthrough`` pools of HGX boards also advertise the boards' NVSwitches (:func:`nvswitch_offers`); they are
not GPUs, so they are kept apart: no tenant quota names them, a whole-board VM takes them with its GPUs.

``dra`` pools advertise no extended resource: the NVIDIA DRA driver publishes their GPUs in ResourceSlices, each
both as a container GPU (DeviceClass ``gpu.nvidia.com``) and as a VFIO device (``vfio.gpu.nvidia.com``), and claims
take them (:func:`dra_offers`, :mod:`gpucell.admission.dra`). They are kept apart too: one GPU per unit, shared by the
two classes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from gpucell.admission.dra import GPU_CLASS, VFIO_CLASS
from gpucell.catalog.gpu_catalog import mig_resource_name
from gpucell.spec.pools import GpuMode, NodePool, NodeRole

__all__ = [
    "DRA_SHARED",
    "WHOLE_GPU",
    "GpuOffer",
    "OfferKind",
    "capacity",
    "dra_offers",
    "gpu_offers",
    "nvswitch_offers",
    "nvswitch_quota",
]

WHOLE_GPU = "nvidia.com/gpu"
"""The device plugin's resource for a whole GPU (or a MIG instance under the ``single`` strategy)."""
DRA_SHARED = f"{GPU_CLASS}+{VFIO_CLASS}"
"""The ``resource`` of a ``dra`` pool's offer: its GPUs, each serving either DeviceClass."""


class OfferKind(StrEnum):
    """How a resource is carved out of the hardware."""

    GPU = "gpu"
    MIG = "mig"
    PASSTHROUGH = "passthrough"
    VGPU = "vgpu"
    NVSWITCH = "nvswitch"
    DRA = "dra"


@dataclass(frozen=True)
class GpuOffer:
    """One pool's supply of one extended resource."""

    resource: str
    """Extended resource name, e.g. ``nvidia.com/mig-1g.18gb``."""
    pool: str
    mode: GpuMode
    model: str
    """GPU catalog model behind it."""
    kind: OfferKind
    per_node: int
    """Units on each node of the pool (count)."""
    nodes: int
    """Hosts in the pool (count)."""
    mig_profile: str | None = None
    """The MIG profile, for MIG offers (also under ``single``, where the resource is ``nvidia.com/gpu``)."""

    @property
    def total(self) -> int:
        """Units across the pool (count)."""
        return self.per_node * self.nodes


def gpu_offers(pools: Mapping[str, NodePool], mig_strategy: str) -> list[GpuOffer]:
    """Every (pool, extended resource) the GPU pools' device plugins advertise, in pool order (``dra`` pools: see
    :func:`dra_offers`). ``mig_strategy`` is ``single`` or ``mixed``."""
    offers: list[GpuOffer] = []
    for name, pool in pools.items():
        if pool.role is not NodeRole.GPU or pool.mode is GpuMode.DRA:
            continue
        gpus, nodes, model = pool.gpus_per_node or 0, len(pool.in_service_hosts), pool.model
        if pool.mode is GpuMode.VM_PASSTHROUGH:
            offers.append(
                GpuOffer(model.passthrough_resource, name, pool.mode, model.name, OfferKind.PASSTHROUGH, gpus, nodes)
            )
        elif pool.mode is GpuMode.VM_VGPU:
            assert pool.vgpu_profile is not None  # the spec requires it on vm-vgpu pools
            offers.append(
                GpuOffer(
                    model.vgpu_resource(pool.vgpu_profile),
                    name,
                    pool.mode,
                    model.name,
                    OfferKind.VGPU,
                    gpus * model.vgpus_per_gpu(pool.vgpu_profile),
                    nodes,
                )
            )
        elif pool.mig_layout:
            for profile, per_gpu in pool.mig_layout.items():
                resource = WHOLE_GPU if mig_strategy == "single" else mig_resource_name(profile)
                offers.append(
                    GpuOffer(
                        resource, name, pool.mode, model.name, OfferKind.MIG, gpus * per_gpu, nodes, mig_profile=profile
                    )
                )
        else:
            offers.append(GpuOffer(WHOLE_GPU, name, pool.mode, model.name, OfferKind.GPU, gpus, nodes))
    return offers


def dra_offers(pools: Mapping[str, NodePool]) -> list[GpuOffer]:
    """The whole GPUs of every ``dra`` pool, in pool order: ``resource`` :data:`DRA_SHARED`, kind ``dra``, one unit a
    GPU, which a claim takes as a container GPU or as a VFIO device."""
    return [
        GpuOffer(
            DRA_SHARED,
            name,
            pool.mode,
            pool.model.name,
            OfferKind.DRA,
            pool.gpus_per_node or 0,
            len(pool.in_service_hosts),
        )
        for name, pool in pools.items()
        if pool.role is NodeRole.GPU and pool.mode is GpuMode.DRA
    ]


def nvswitch_offers(pools: Mapping[str, NodePool]) -> list[GpuOffer]:
    """The NVSwitches the ``vm-passthrough`` pools of HGX models advertise once bound to ``vfio-pci``, in pool order
    (``model`` is the GPU model of the board; ``per_node`` the board's NVSwitch count)."""
    offers: list[GpuOffer] = []
    for name, pool in pools.items():
        if pool.role is not NodeRole.GPU or pool.mode is not GpuMode.VM_PASSTHROUGH:
            continue
        board = pool.model.hgx
        if board is not None and board.nvswitch is not None:
            offers.append(
                GpuOffer(
                    board.nvswitch.passthrough_resource,
                    name,
                    pool.mode,
                    pool.model.name,
                    OfferKind.NVSWITCH,
                    board.nvswitches,
                    len(pool.in_service_hosts),
                )
            )
    return offers


def nvswitch_quota(gpu_quota: Mapping[str, int], pools: Mapping[str, NodePool]) -> dict[str, int]:
    """NVSwitch resource -> units a tenant may hold: for each HGX model, its NVSwitches per board times the whole
    boards the tenant's quota of that model's passthrough GPUs covers (16 H100s: 2 boards, 8 NVSwitches)."""
    quota: dict[str, int] = {}
    seen: set[str] = set()
    for pool in pools.values():
        if pool.role is not NodeRole.GPU or pool.mode is not GpuMode.VM_PASSTHROUGH or pool.model.name in seen:
            continue
        seen.add(pool.model.name)
        board = pool.model.hgx
        if board is not None and board.nvswitch is not None:
            boards = gpu_quota.get(pool.model.passthrough_resource, 0) // board.gpus
            resource = board.nvswitch.passthrough_resource
            quota[resource] = quota.get(resource, 0) + boards * board.nvswitches
    return quota


def capacity(offers: list[GpuOffer]) -> dict[str, int]:
    """Resource name -> units across the region (count)."""
    totals: dict[str, int] = {}
    for offer in offers:
        totals[offer.resource] = totals.get(offer.resource, 0) + offer.total
    return totals
