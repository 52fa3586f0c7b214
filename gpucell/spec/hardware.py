"""Region-wide rules about the GPU hardware itself: which vGPU framework a pool's boards use with the region's
vGPU driver, and what KubeVirt, the GPU Operator and Longhorn can actually serve on them.

Each rule refuses, at plan time, a combination that would deploy but never work on the hosts, naming the way out.
The upstream facts behind them are in :mod:`gpucell.catalog.gpu_catalog` and ``docs/decisions/0011-*.md``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from gpucell.catalog.gpu_catalog import VgpuFramework
from gpucell.errors import SpecError
from gpucell.spec.platform import StorageBackend
from gpucell.spec.pools import GpuMode, gpu_pools

if TYPE_CHECKING:
    from collections.abc import Mapping

    from gpucell.spec.platform import GpuOperatorSpec, ImageSpec, StorageSpec
    from gpucell.spec.pools import NodePool

__all__ = ["check_hardware", "driver_branch", "pool_vgpu_framework", "vgpu_pools"]

_DRIVER_VERSION = re.compile(r"^v?(?P<branch>\d{3})\.\d+(\.\d+)?([-_.].*)?$")
LONGHORN_RESERVED_TAINT_SUBSTRING = "kubernetes.io"
"""Longhorn's ``taint-toleration`` setting may not contain this substring ("It is used and considered as the key of
Kubernetes default tolerations", longhorn/longhorn ``docs/taint-toleration.md``)."""


def driver_branch(version: str) -> int | None:
    """The NVIDIA driver branch an image tag starts with: ``580`` for ``580.95.02-ubuntu24.04``; ``None`` when the
    tag does not start with a driver version (``latest``, ``my-build``)."""
    match = _DRIVER_VERSION.match(version)
    return int(match["branch"]) if match else None


def pool_vgpu_framework(image: ImageSpec | None, pool: NodePool) -> VgpuFramework:
    """How the vGPUs of ``vm-vgpu`` pool ``pool`` appear on its hosts, from its board and the region's vGPU driver
    ``image`` (``gpuOperator.vgpuDriverImage``, its version):
    :meth:`gpucell.catalog.gpu_catalog.GpuModel.vgpu_framework`.

    Raises ``ValueError`` for a pool that is not ``vm-vgpu``, or when the driver image is missing or its tag does
    not start with a driver version (the spec refuses both first).
    """
    branch = driver_branch(image.version) if image is not None else None
    if pool.gpu_mode is not GpuMode.VM_VGPU or branch is None:
        raise ValueError("not a vm-vgpu pool of a region with a versioned vGPU driver image")
    return pool.model.vgpu_framework(branch)


def vgpu_pools(pools: Mapping[str, NodePool], image: ImageSpec | None, framework: VgpuFramework) -> dict[str, NodePool]:
    """The ``vm-vgpu`` pools of ``pools`` whose boards expose vGPUs through ``framework`` with the vGPU driver
    ``image`` (:func:`pool_vgpu_framework`), in order."""
    return {n: p for n, p in gpu_pools(pools, GpuMode.VM_VGPU).items() if pool_vgpu_framework(image, p) is framework}


def check_hardware(pools: Mapping[str, NodePool], gpu_operator: GpuOperatorSpec, storage: StorageSpec) -> None:
    """Raise :class:`SpecError` (path below the region) at the first pool of ``pools`` whose hardware setup cannot
    work with the region's ``gpuOperator`` (its vGPU driver) and ``storage`` (Longhorn's taint rules)."""
    image = gpu_operator.vgpu_driver_image
    _check_driver_version(pools, image)
    _check_sriov_vgpu(pools, image)
    _check_hgx_pools(pools)
    _check_longhorn_taints(pools, storage)


def _check_driver_version(pools: Mapping[str, NodePool], image: ImageSpec | None) -> None:
    if image is None or not gpu_pools(pools, GpuMode.VM_VGPU) or driver_branch(image.version) is not None:
        return
    raise SpecError(
        ("gpuOperator", "vgpuDriverImage", "version"),
        f"{image.version!r} does not start with the vGPU host driver version (e.g. 580.95.02-ubuntu24.04): gpucell "
        "reads the driver branch from it to tell mediated-device vGPUs from SR-IOV ones; tag the image so",
    )


def _check_sriov_vgpu(pools: Mapping[str, NodePool], image: ImageSpec | None) -> None:
    """SR-IOV vGPU pools: a catalogued VF id, one vGPU type per board model, no whole-GPU passthrough of it."""
    branch = driver_branch(image.version) if image is not None else None
    sriov: dict[str, str] = {}  # model -> first SR-IOV pool
    passthrough = {pool.model.name: name for name, pool in gpu_pools(pools, GpuMode.VM_PASSTHROUGH).items()}
    for name, pool in gpu_pools(pools, GpuMode.VM_VGPU).items():
        if branch is None or pool.model.vgpu_framework(branch) is not VgpuFramework.SRIOV:
            continue
        model = pool.model
        where = ("nodePools", name)
        if model.vf_pci_selector is None:
            raise SpecError(
                (*where, "gpuModel"),
                f"{model.name!r}: with vGPU driver branch {branch} its vGPUs are "
                "SR-IOV virtual functions, and the PCI id those report is not catalogued (KubeVirt "
                f"permits VFs by vendor:device id); run {model.name} in vm-passthrough or container mode",
            )
        first = sriov.setdefault(model.name, name)
        profile = pools[first].vgpu_profile
        if first != name and pool.vgpu_profile != profile:
            raise SpecError(
                (*where, "vgpuProfile"),
                f"{pool.vgpu_profile!r}: pool {first} already runs {model.name} "
                f"SR-IOV vGPUs as {profile}, and KubeVirt advertises every VF of one PCI id "
                f"({model.vf_pci_selector}) under one resource; use one vgpuProfile per GPU model",
            )
        if model.name in passthrough:
            raise SpecError(
                (*where, "gpuModel"),
                f"{model.name!r}: pool {passthrough[model.name]} passes "
                f"{model.name} through whole ({model.pci_selector} on vfio-pci), which KubeVirt's device "
                f"plugin for this pool's VFs would also advertise as {model.vgpu_resource(profile or '')}; "
                f"give {model.name} one VM mode per region",
            )


def _check_hgx_pools(pools: Mapping[str, NodePool]) -> None:
    """vm-passthrough pools of SXM GPUs hold whole HGX boards, so that a VM's share of the board is known."""
    for name, pool in gpu_pools(pools, GpuMode.VM_PASSTHROUGH).items():
        board = pool.model.hgx
        if board is not None and pool.gpus_per_node != board.gpus:
            raise SpecError(
                ("nodePools", name, "gpusPerNode"),
                f"{pool.gpus_per_node} {pool.model.name} GPUs per node: gpucell models SXM GPUs on {board.gpus}-GPU "
                f"HGX boards, whose NVLinks run through NVSwitches; vm-passthrough pools of {pool.model.name} need "
                f"gpusPerNode {board.gpus} (other baseboards: use container mode)",
            )


def _check_longhorn_taints(pools: Mapping[str, NodePool], storage: StorageSpec) -> None:
    if storage.backend is not StorageBackend.LONGHORN:
        return
    for name, pool in pools.items():
        for index, taint in enumerate(pool.taints):
            if LONGHORN_RESERVED_TAINT_SUBSTRING in taint.rsplit(":", 1)[0]:
                raise SpecError(
                    ("nodePools", name, "taints", index),
                    f"{taint!r}: Longhorn's taint-toleration setting refuses keys containing kubernetes.io, so its "
                    "instance managers and CSI plugin could not run on this pool; use a key such as gpucell.io/gpu",
                )
