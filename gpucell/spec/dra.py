"""Region-wide rules for ``gpuMode: dra`` pools: the releases DRA in VMs needs, and what must not share a GPU model
with them. Each refuses, at plan time, a combination that would deploy but not work (docs/decisions/0017).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpucell.catalog.gpu_catalog import VgpuFramework
from gpucell.errors import SpecError
from gpucell.spec.hardware import driver_branch
from gpucell.spec.pools import GpuMode, gpu_pools
from gpucell.spec.versions import release

if TYPE_CHECKING:
    from collections.abc import Mapping

    from gpucell.spec.platform import DraDriverSpec, GpuOperatorSpec
    from gpucell.spec.pools import NodePool
    from gpucell.spec.versions import Versions

__all__ = ["MIN_DRA_DRIVER", "MIN_KUBERNETES", "MIN_KUBEVIRT", "check_dra"]

MIN_KUBERNETES = (1, 34)
"""First Kubernetes minor serving ``resource.k8s.io/v1`` (DRA GA), the API gpucell renders claims in."""
MIN_KUBEVIRT = (1, 9)
"""First KubeVirt minor gpucell's DRA VMs are checked against: ``GPUsWithDRA`` Beta, device metadata files
(KEP-5304) read by virt-launcher (KubeVirt v1.9.0 ``pkg/dra/utils.go``; kubevirt/user-guide ``dra_gpu.md``)."""
MIN_DRA_DRIVER = (0, 4)
"""First DRA driver minor with both ``PassthroughSupport`` and ``DeviceMetadata`` (``pkg/featuregates`` at v0.4.0 and
v0.4.1)."""


def check_dra(
    node_pools: Mapping[str, NodePool], versions: Versions, dra_driver: DraDriverSpec, gpu_operator: GpuOperatorSpec
) -> None:
    """Raise :class:`SpecError` (path below the region) at the first rule a ``dra`` pool of ``node_pools`` breaks
    with the pinned ``versions``; ``draDriver.values`` without a ``dra`` pool is refused too (the chart is not
    installed, so they would be ignored). ``gpuOperator`` gives the vGPU driver, whose SR-IOV models may not share a
    ``dra`` pool's model."""
    pools = gpu_pools(node_pools, GpuMode.DRA)
    if not pools:
        if dra_driver.values:
            raise SpecError(
                ("draDriver", "values"),
                "no pool has gpuMode dra, so the DRA driver is not installed; "
                "remove draDriver.values or add a dra pool",
            )
        return
    first = next(iter(pools))
    for key, version, floor, what in (
        ("k3s", versions.kubernetes_minor, MIN_KUBERNETES, "Kubernetes serves resource.k8s.io/v1 from 1.34"),
        (
            "kubevirt",
            versions.kubevirt,
            MIN_KUBEVIRT,
            "gpucell's DRA VMs need KubeVirt v1.9 (GPUsWithDRA, device metadata files)",
        ),
        (
            "draDriver",
            versions.dra_driver,
            MIN_DRA_DRIVER,
            "PassthroughSupport and DeviceMetadata come together from DRA driver 0.4",
        ),
    ):
        if release(version) < floor:
            shown = versions.k3s if key == "k3s" else version
            raise SpecError(
                ("versions", key),
                f"{shown!r} is too old for pool {first} (gpuMode dra): {what}; pin a "
                "newer release or use another gpuMode",
            )
    _check_sriov_models(node_pools, gpu_operator)


def _check_sriov_models(node_pools: Mapping[str, NodePool], gpu_operator: GpuOperatorSpec) -> None:
    """A model in an SR-IOV vGPU pool may not be in a ``dra`` pool of the region: virt-handler advertises every
    function of its PCI id bound to ``vfio-pci`` as that pool's vGPU (:mod:`gpucell.k3s.vgpu_sriov`), and the DRA driver
    binds a VM's GPU to ``vfio-pci``."""
    image = gpu_operator.vgpu_driver_image
    branch = driver_branch(image.version) if image is not None else None
    if branch is None:
        return
    sriov = {
        pool.model.name: name
        for name, pool in gpu_pools(node_pools, GpuMode.VM_VGPU).items()
        if pool.model.vgpu_framework(branch) is VgpuFramework.SRIOV
    }
    for name, pool in gpu_pools(node_pools, GpuMode.DRA).items():
        if pool.model.name in sriov:
            model = pool.model
            raise SpecError(
                ("nodePools", name, "gpuModel"),
                f"{model.name!r}: pool {sriov[model.name]} runs "
                f"{model.name} SR-IOV vGPUs, and KubeVirt advertises every {model.pci_selector} function "
                "on vfio-pci as its vGPU, including a GPU the DRA driver binds for a VM here; give "
                f"{model.name} one of the two modes per region",
            )
