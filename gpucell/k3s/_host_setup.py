"""What a node's install script checks and sets up on the host itself, before k3s: bash fragments per pool.

- Pools with a ``topology`` profile: the kernel must report the NUMA nodes, memory and hugepages the pool declares
  (``/sys/devices/system/node/node<N>/meminfo`` ``MemTotal``, ``hugepages/hugepages-<kB>kB/nr_hugepages``; torvalds/
  linux ``Documentation/admin-guide/mm/hugetlbpage.rst``), else the script stops with what it found and the kernel
  command line that reserves them. Admission budgets VMs on these numbers, so a host that differs is refused
  rather than admitted VMs that cannot start (kubevirt/kubevirt#14854: a VM whose hugepages fit the node's
  allocatable but not what is free on its NUMA node fails with "unable to map backing store for guest RAM").
- Pools with a ``fabric``: every GPU, NIC and NVSwitch the pool declares must be a PCI device of the host with the
  declared vendor:device id (``/sys/bus/pci/devices/<address>/{vendor,device}``) on the declared NUMA node
  (``numa_node``), else the script stops naming the device and the way out: admission pairs each GPU with the NIC of
  its NUMA node from these addresses (docs/decisions/0039).
- ``dra`` pools: the IOMMU must be on (``/sys/kernel/iommu_groups`` not empty): the NVIDIA DRA driver binds a VM's
  GPU to ``vfio-pci``, and "the GPU kubelet plugin fails to start with ``PassthroughSupport`` enabled if IOMMU is
  off" (kubernetes-sigs/dra-driver-nvidia-gpu ``site/content/docs/guides/gpu-allocation/
  kubevirt-vfio-gpu-passthrough.md``), which would leave the pool without any GPU.
- Every node of a Longhorn cell: multipathd must leave Longhorn's iSCSI disks alone (:func:`multipath_blacklist`,
  longhorn/longhorn#1210), and open-iscsi must be ready at every boot (:func:`iscsi_setup`, longhorn/longhorn#1853,
  #2398).
- ``vm-vgpu`` pools of SR-IOV boards: Linux 6.8 or later (NVIDIA's vendor-specific VFIO framework; kubevirt/
  enhancements VEP 210: "kernel 6.8, where NVIDIA moved from the traditional mdev ... to a vendor-specific VFIO
  framework for vGPU"), then the VF-typing service of :mod:`gpucell.k3s.vgpu_sriov`.
- ``vm-passthrough``, ``vm-vgpu`` and ``dra`` pools: the host-side GPU health collector of
  :mod:`gpucell.k3s.gpu_host_health` (GPUs on the PCI bus, AER, vfio errors, Xid lines for node-exporter), where no
  DCGM exporter watches the GPUs; removed from hosts of ``container`` pools.

The fragments are ``scripts/host/*.sh`` (:mod:`gpucell.k3s._script_files`). Every fragment runs under the install
script's ``set -euo pipefail`` and its ``as_root`` helper, reads only files, and reads the roots
``$GPUCELL_SYSFS_ROOT`` (default ``/sys``) and ``$GPUCELL_PROCFS_ROOT`` (default ``/proc``) so that tests can run it
with bash against stub trees.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpucell.catalog.gpu_catalog import NVIDIA_PCI_VENDOR, VgpuFramework
from gpucell.k3s import gpu_host_health, vgpu_sriov
from gpucell.k3s._script_files import render
from gpucell.spec.fabric import MELLANOX_PCI_VENDOR
from gpucell.spec.hardware import driver_branch
from gpucell.spec.platform import StorageBackend
from gpucell.spec.pools import GpuMode, NodePool, NodeRole

if TYPE_CHECKING:
    from gpucell.spec.nodes import NodeViews
    from gpucell.spec.pools import TopologyProfile

__all__ = [
    "ISCSI_MODULES_LOAD",
    "MIN_SRIOV_VGPU_KERNEL",
    "MULTIPATH_DROP_IN",
    "fabric_check",
    "host_setup",
    "iommu_check",
    "iscsi_setup",
    "kernel_check",
    "memory_check",
    "multipath_blacklist",
]

MIN_SRIOV_VGPU_KERNEL = (6, 8)
"""The first Linux release with NVIDIA's vendor-specific VFIO vGPU framework (secondary sources only: KubeVirt VEP
210, kernel/hypeman PR #364 "Linux 6.8 hosts with NVIDIA R580 drop the mdev interface"); older kernels are refused
as the safe choice."""

MULTIPATH_DROP_IN = "/etc/multipath/conf.d/gpucell-longhorn.conf"
"""The drop-in :func:`multipath_blacklist` writes: a file of multipathd's ``config_dir`` (its default,
``/etc/multipath/conf.d/``, multipath.conf(5)), so that the host's own ``/etc/multipath.conf`` stays as it is."""
MULTIPATH_BLACKLIST = 'blacklist {\n  device {\n    vendor "IET"\n    product "VIRTUAL-DISK"\n  }\n}'
"""The blacklist of Longhorn's disks: the SCSI vendor and product its engine's tgt iSCSI target reports (tgt's
defaults, ``IET`` / ``VIRTUAL-DISK``), rather than the Longhorn KB's ``devnode "^sd[a-z0-9]+"``, which would also
take away every multipath device the host has of its own."""

_PAGE_KB = {"1Gi": 1048576, "2Mi": 2048}
_PAGE_KEY = {"1Gi": "hugepages1GiPerNuma", "2Mi": "hugepages2MiPerNuma"}
_PAGE_ARG = {"1Gi": "1G", "2Mi": "2M"}


def _cmdline(topology: TopologyProfile) -> str:
    """The kernel arguments reserving the declared pages per NUMA node (``hugepagesz=1G hugepages=0:960,1:960``)."""
    args = []
    for size in _PAGE_KB:
        count = topology.hugepages_per_numa(size)
        if count:
            nodes = ",".join(f"{node}:{count}" for node in range(topology.numa_nodes))
            args.append(f"hugepagesz={_PAGE_ARG[size]} hugepages={nodes}")
    return " ".join(args) or "no hugepages: remove hugepages= from it"


def memory_check(pool_name: str, topology: TopologyProfile) -> str:
    """Bash checking that the host has ``topology.numaNodes`` NUMA nodes, each with ``cpusPerNuma`` logical CPUs
    (``cpulist``), at least ``memoryPerNumaGib``
    GiB of ``MemTotal`` (rounded down) and exactly the declared 1 GiB and 2 MiB hugepages (``nr_hugepages``; more
    would take memory the admission counts as ordinary); exits 1 with one ``gpucell: ...`` line on stderr at the
    first difference."""
    pages = "".join(
        render(
            "host/pages",
            kb=_PAGE_KB[size],
            count=topology.hugepages_per_numa(size),
            size=size,
            pool=pool_name,
            key=_PAGE_KEY[size],
            cmdline=_cmdline(topology),
        )
        for size in _PAGE_KB
    )
    reserved = [f"{count} x {size}" for size in _PAGE_KB if (count := topology.hugepages_per_numa(size))]
    summary = f", hugepages {' and '.join(reserved)} per node" if reserved else ""
    return render(
        "host/memory",
        pool=pool_name,
        numa=topology.numa_nodes,
        last=topology.numa_nodes - 1,
        cpus=topology.cpus_per_numa,
        memory=topology.memory_per_numa_gib,
        pages=pages,
        summary=summary,
    )


def kernel_check(pool_name: str, model: str, branch: int) -> str:
    """Bash refusing a kernel older than :data:`MIN_SRIOV_VGPU_KERNEL` on an SR-IOV vGPU node."""
    major, minor = MIN_SRIOV_VGPU_KERNEL
    return render("host/kernel", major=major, minor=minor, pool=pool_name, model=model, branch=branch)


def fabric_check(pool_name: str, pool: NodePool) -> str:
    """Bash checking the PCIe topology ``pool.fabric`` declares: each GPU, NIC and NVSwitch at its PCI address with
    its vendor:device id and (GPUs and NICs) on its NUMA node; exits 1 with one ``gpucell: ...`` line naming the
    device, what the host reports and the way out at the first difference."""
    fabric = pool.fabric
    if fabric is None:
        raise ValueError("not a pool with a fabric")
    gpu = f"{NVIDIA_PCI_VENDOR}:{pool.model.pci_device_id}"
    nic = f"{MELLANOX_PCI_VENDOR}:{fabric.nic_device_id}"
    lines = []
    for index, switch in enumerate(fabric.switches):
        for key, what, pci_id in (("gpus", "GPU", gpu), ("nics", "NIC", nic)):
            for position, address in enumerate(getattr(switch, key)):
                lines.append(f"{what} {address} {pci_id} {switch.numa_node} fabric.switches[{index}].{key}[{position}]")
    board = pool.model.hgx
    if board is not None and board.nvswitch is not None:
        switch_id = f"{NVIDIA_PCI_VENDOR}:{board.nvswitch.pci_device_id}"
        lines += [f"NVSwitch {a} {switch_id} - fabric.nvswitches[{i}]" for i, a in enumerate(fabric.nvswitches)]
    numa = ", ".join(f"NUMA node {node}: rails {_ranges(fabric.rails_of(node))}" for node in fabric.numa_nodes)
    summary = f"{fabric.gpu_count} GPUs and {len(fabric.rails)} {fabric.nic_model} NICs ({numa})"
    return render("host/fabric", pool=pool_name, devices="".join(f"{line}\n" for line in lines), summary=summary)


def _ranges(numbers: list[int]) -> str:
    """``0-3`` for a run of consecutive numbers, else ``0, 2``."""
    if len(numbers) > 1 and numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"{numbers[0]}-{numbers[-1]}"
    return ", ".join(map(str, numbers))


def iommu_check(pool_name: str) -> str:
    """Bash stopping the install on a ``dra`` node whose kernel runs without the IOMMU (no IOMMU groups)."""
    return render("host/iommu", pool=pool_name)


def multipath_blacklist() -> str:
    """The fragment that keeps multipathd off Longhorn's disks (longhorn/longhorn#1210: Ubuntu runs multipathd, which
    claims the engine's iSCSI disk, and the volume's mount fails ``already mounted or mount point busy``): writes
    :data:`MULTIPATH_BLACKLIST` to :data:`MULTIPATH_DROP_IN` when the file differs, then reloads multipathd if it
    runs. Nothing when the file is already so."""
    return render("host/multipath", path=MULTIPATH_DROP_IN, blacklist=MULTIPATH_BLACKLIST)


ISCSI_MODULES_LOAD = "/etc/modules-load.d/gpucell-longhorn.conf"
"""The file :func:`iscsi_setup` writes so that systemd-modules-load loads ``iscsi_tcp`` at every boot
(modules-load.d(5))."""


def iscsi_setup() -> str:
    """The fragment that readies open-iscsi for Longhorn's engine, at once and after every reboot: it stops the script
    when the host has no ``iscsiadm`` (naming the package), lists ``iscsi_tcp`` in :data:`ISCSI_MODULES_LOAD` and
    loads it when ``$GPUCELL_SYSFS_ROOT/module/iscsi_tcp`` is missing (longhorn/longhorn#1853: without it a volume
    attaches and detaches in a loop), and enables and starts ``iscsid`` when it is not both (longhorn/longhorn#2398:
    "can not connect to iSCSI daemon"). Longhorn's install requirements (docs 1.12 "Installation Requirements":
    open-iscsi installed and iscsid running on every node)."""
    return render("host/iscsi", path=ISCSI_MODULES_LOAD)


def host_setup(cell: NodeViews, pool_name: str, pool: NodePool) -> str:
    """The host fragment of a node of ``pool``: :func:`memory_check` with a topology profile, then :func:`fabric_check`
    with a fabric; :func:`iommu_check` on
    ``dra`` pools; on SR-IOV vGPU pools :func:`kernel_check` and :func:`gpucell.k3s.vgpu_sriov.install_fragment`, on
    other GPU pools :func:`gpucell.k3s.vgpu_sriov.removal_fragment` (a host that left an SR-IOV pool); on
    ``vm-passthrough``, ``vm-vgpu`` and ``dra`` pools the host-side GPU health collector
    (:func:`gpucell.k3s.gpu_host_health.install_fragment`), on ``container`` pools its removal; first, on every node
    of a Longhorn cell, :func:`multipath_blacklist` and :func:`iscsi_setup`. Empty for server and cpu pools without a
    topology profile on other cells."""
    parts: list[str] = []
    if cell.storage.backend is StorageBackend.LONGHORN:
        parts.append(multipath_blacklist())
        parts.append(iscsi_setup())
    if pool.topology is not None:
        parts.append(memory_check(pool_name, pool.topology))
    if pool.fabric is not None:
        parts.append(fabric_check(pool_name, pool))
    if pool.gpu_mode is GpuMode.DRA:
        parts.append(iommu_check(pool_name))
    if pool.gpu_mode is GpuMode.VM_VGPU and pool_name in cell.vgpu_pools(VgpuFramework.SRIOV):
        image = cell.gpu_operator.vgpu_driver_image
        branch = driver_branch(image.version) if image is not None else None
        # The spec requires a versioned driver image and a vGPU profile with vm-vgpu pools.
        assert branch is not None
        assert pool.vgpu_profile is not None
        parts.append(kernel_check(pool_name, pool.model.name, branch))
        parts.append(vgpu_sriov.install_fragment(pool.model, pool.vgpu_profile))
    elif pool.role is NodeRole.GPU:
        parts.append(vgpu_sriov.removal_fragment())
    if pool.gpu_mode is not None and pool.gpu_mode.host_health:
        parts.append(gpu_host_health.install_fragment(pool_name, pool.gpu_mode))
    elif pool.role is NodeRole.GPU:
        parts.append(gpu_host_health.removal_fragment())
    return "".join(parts)
