"""The GPU models a cell can hold: PCI identity, the resource names that advertise them, memory, MIG, vGPU, HGX.

One entry per model, keyed by the name a stack config uses (``gpuModel: H100-SXM5-80GB``). :data:`CATALOG` holds the
built-in models; a stack adds its own under ``gpucell:gpuModels`` (:mod:`gpucell.spec.gpu_models`), checked by the
same rules, into a catalog of its own that nothing else sees.

Sources, per field:

- ``pci_device_id`` and ``pci_device_name``: the PCI ID Repository (``pci.ids``, vendor ``10de``) as bundled in
  NVIDIA/kubevirt-gpu-device-plugin v1.6.0 (``utils/pci.ids``, "Version: 2025.07.11"), the copy the GPU
  Operator v26.7.0's sandbox device plugin names devices from; ``lspci -nn`` prints the same on the node. Every
  built-in entry has the same name in pciutils/pciids "Version: 2026.08.22" (compared when the entries were
  written).
- ``passthrough_resource``: the sandbox device plugin advertises a passthrough device as ``nvidia.com/`` + the
  ``pci.ids`` device name upper-cased, brackets dropped and spaces, ``/`` and ``.`` turned into ``_``
  (``getDeviceName`` in ``pkg/device_plugin/device_plugin.go`` at v1.6.0): ``TU104GL [Tesla T4]`` ->
  ``nvidia.com/TU104GL_TESLA_T4``. KubeVirt's ``permittedHostDevices.pciHostDevices[].resourceName`` and a VM's
  ``devices.gpus[].deviceName`` must use it.
- ``framebuffer_mib``: the board's framebuffer as ``nvidia-smi`` (NVML) reports it; ``memory_gib`` is that, in
  GiB, rounded down (H200: 143771 MiB -> 140). Values per model below, with where they were read.
- ``mig_configs``: the ``nvidia.com/mig.config`` layouts the GPU Operator v26.7.0 mig-manager ships for the device
  (``assets/state-mig-manager/0400_configmap.yaml``), as MIG profile -> instances per GPU. ``tests/`` checks every
  entry against that file. The mig-manager it pins (k8s-mig-manager v0.15.0) builds the same names from the GPU
  itself (``pkg/mig/builder``: ``all-disabled``, ``all-<profile>`` at the profile's most instances,
  ``all-balanced``) and reads that file only when discovery finds no profile.
- ``vgpu_profiles``: NVIDIA vGPU type (``L40S-12Q``) -> vGPUs of it one GPU holds, exactly as the GPU Operator
  v26.7.0's vGPU device manager config lists them (``assets/state-vgpu-device-manager/0500_configmap.yaml``,
  ConfigMap ``default-vgpu-devices-config``: ``L40S-1Q: 32``, ``L40S-12Q: 4``). ``tests/`` checks every entry
  against that file. Only time-sliced Q (virtual workstation) and C (compute) types of Turing and Ada boards are
  catalogued (see :meth:`GpuModel.vgpu_framework` for why no Ampere type).
- ``architecture``: decides how vGPUs appear on the host (:meth:`GpuModel.vgpu_framework`).
- ``vf_pci_device_id``: the ``vendor:device`` id an SR-IOV virtual function of the board reports, which KubeVirt
  matches VFs by. Only where observed: the L40S's VFs report the PF's id ``10de:26b9`` (Cozystack vGPU guide,
  cozystack/website ``content/en/docs/v1.6/virtualization/vgpu.md``: "the SR-IOV VFs report the same PCI device
  ID as the PF"). Unobserved boards have ``None`` and SR-IOV vGPU pools of them are refused at plan time.
- ``hgx``: SXM boards on an HGX baseboard, whose NVLinks run through NVSwitches (:class:`HgxBoard`).
- ``bar1_mib``: *assumed* for every board, not read from a source: the BAR1 aperture ``nvidia-smi -q`` reports
  ("BAR1 Memory Usage: Total") as remembered for data-center boards, which size it to cover their framebuffer
  (the next power of two, 256 MiB on the T4). Only :func:`needs_host_cpu_model` reads it; check it on hardware
  before relying on a borderline case.

Not built in, and why: the A100 PCIe 40GB's second id ``10de:20f1`` (``pci.ids`` gives it the same name as
``20b1``, so both would advertise one resource from two device ids); the H200 NVL, GH200 144G, A30, A40, L20 and
RTX PRO 6000 Blackwell Server Edition (not added yet: their framebuffer was not sourced); the B300, GB300 and HGX
B200 168GB (the plugin's ``pci.ids`` of 2025.07.11 does not list them, so it would advertise them without a name).
Add any of them under ``gpucell:gpuModels``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

__all__ = [
    "CATALOG",
    "GUEST_MMIO64_WINDOW_MIB",
    "NVIDIA_PCI_VENDOR",
    "NVSWITCHES",
    "PASSTHROUGH_ONLY",
    "VENDOR_VFIO_DRIVER_BRANCH",
    "GpuArchitecture",
    "GpuModel",
    "HgxBoard",
    "MigLayout",
    "NvSwitch",
    "VgpuFramework",
    "mig_resource_name",
    "needs_host_cpu_model",
    "pci_resource_name",
]

NVIDIA_PCI_VENDOR = "10de"
VENDOR_VFIO_DRIVER_BRANCH = 550
"""First NVIDIA vGPU host driver branch (vGPU 17.0 = R550) with which Ada Lovelace and newer boards expose vGPUs as
SR-IOV virtual functions typed through ``current_vgpu_type`` (NVIDIA's vendor-specific VFIO framework) instead of
mediated devices. Branches: vGPU 17 = R550 (Azure/aks-gpu PR #154, "550.144.06 (vGPU 17.55)"), 18 = R570, 19 =
R580, 20 = R595 (Cozystack vGPU guide: "NVIDIA vGPU 20.0 host driver 595.58.02"). The vendor-specific framework
needs Linux 6.8 or later on the host (kernel 6.8 moved NVIDIA vGPU off mdev; kubevirt/enhancements VEP 210
``veps/sig-compute/210-centos-stream-10/vep.md``); nodes check that at install."""

MigLayout = Mapping[str, int]
"""MIG profile (``1g.10gb``) -> instances on one GPU."""


def mig_resource_name(profile: str) -> str:
    """The extended resource a MIG profile is advertised as under the ``mixed`` strategy (``nvidia.com/mig-1g.10gb``).

    Source: NVIDIA k8s-device-plugin, "MIG support" (strategy ``mixed``).
    """
    return f"nvidia.com/mig-{profile}"


def pci_resource_name(pci_device_name: str) -> str:
    """The sandbox device plugin's resource for a PCI device bound to ``vfio-pci``: ``nvidia.com/`` + the ``pci.ids``
    name upper-cased, ``/`` and ``.`` as ``_``, whitespace runs as one ``_``, anything but ``[A-Za-z0-9_.]`` dropped.

    ``pci_resource_name("GH100 [H100 NVSwitch]") == "nvidia.com/GH100_H100_NVSWITCH"``. Source: ``getDeviceName``,
    NVIDIA/kubevirt-gpu-device-plugin v1.6.0 ``pkg/device_plugin/device_plugin.go``.
    """
    name = pci_device_name.upper().replace("/", "_").replace(".", "_")
    name = "_".join(name.split())
    return "nvidia.com/" + re.sub(r"[^A-Za-z0-9_.]", "", name)


class GpuArchitecture(StrEnum):
    """NVIDIA GPU architecture generation. Pascal and Volta boards serve ``vm-passthrough`` pools only (the guest
    brings its own driver; :data:`PASSTHROUGH_ONLY`)."""

    PASCAL = "Pascal"
    VOLTA = "Volta"
    TURING = "Turing"
    AMPERE = "Ampere"
    ADA = "Ada Lovelace"
    HOPPER = "Hopper"
    BLACKWELL = "Blackwell"


PASSTHROUGH_ONLY = (GpuArchitecture.PASCAL, GpuArchitecture.VOLTA)
"""Architectures the host's NVIDIA driver no longer serves: NVIDIA's R580 branch is the last for Pascal and Volta,
and GPU Operator v26.7.0 installs 595.91.07 (``values.yaml`` ``driver.version``); vGPU and the DRA driver need that
host driver. A ``vm-passthrough`` node binds GPUs to vfio-pci (the operator's vfio-manager, any NVIDIA PCI device)
and the sandbox device plugin advertises them by PCI id, so there they work."""


class VgpuFramework(StrEnum):
    """How the host exposes NVIDIA vGPUs, which decides what KubeVirt and the GPU Operator must be told.

    - ``mdev``: mediated devices (``/sys/bus/mdev/devices``), created by the GPU Operator's vGPU device manager
      (NVIDIA/vgpu-device-manager v0.5.0 creates only mdevs) and advertised by its sandbox device plugin
      (kubevirt-gpu-device-plugin v1.6.0 walks only ``/sys/bus/mdev/devices``) as ``nvidia.com/NVIDIA_<type>``.
    - ``sriov``: NVIDIA's vendor-specific VFIO framework: SR-IOV virtual functions bound to the ``nvidia`` driver,
      each given a type by writing the type id to ``/sys/bus/pci/devices/<VF>/nvidia/current_vgpu_type``; there is
      no mdev. Nothing in the GPU Operator v26.7.0 writes that file (the vGPU device manager fails with "no parent
      devices found for GPU at index '0'", ``pkg/vgpu/config.go``), and the sandbox device plugin ignores such
      VFs; KubeVirt v1.9.0's own PCI device plugin advertises VFs with a non-zero ``current_vgpu_type``
      (kubevirt/kubevirt#16890, ``pkg/virt-handler/device-manager/nvidia.go``).
    """

    MDEV = "mdev"
    SRIOV = "sriov"


@dataclass(frozen=True)
class NvSwitch:
    """An NVSwitch chip of an HGX baseboard, as a PCI device (class ``0x0680``) the host can pass to a VM."""

    pci_device_id: str
    """PCI device ID, lower-case hex (vendor ``10de``)."""
    pci_device_name: str
    """Device name as ``pci.ids`` spells it, e.g. ``GH100 [H100 NVSwitch]``."""

    @property
    def pci_selector(self) -> str:
        """``10DE:22A3``: KubeVirt's ``pciVendorSelector``."""
        return f"{NVIDIA_PCI_VENDOR}:{self.pci_device_id}".upper()

    @property
    def passthrough_resource(self) -> str:
        """What the sandbox device plugin advertises once the GPU Operator's vfio-manager has bound the NVSwitches
        to ``vfio-pci`` (``BIND_NVSWITCHES=true``): ``nvidia.com/GH100_H100_NVSWITCH``. The plugin has no device
        class filter (every ``10de`` function on ``vfio-pci`` is advertised, grouped by device id), so this is
        derived from its naming rule, not observed on hardware."""
        return pci_resource_name(self.pci_device_name)


NVSWITCHES: Mapping[str, NvSwitch] = MappingProxyType(
    {
        "GA100": NvSwitch("1af1", "GA100 [A100 NVSwitch]"),
        "GH100": NvSwitch("22a3", "GH100 [H100 NVSwitch]"),
    }
)
"""The NVSwitch chips ``pci.ids`` (2025.07.11) lists: gen-2 (HGX A100) and gen-3 (HGX H100 and HGX H200; no other
Hopper NVSwitch id exists there). It lists none for Blackwell HGX boards."""


@dataclass(frozen=True)
class HgxBoard:
    """The HGX baseboard SXM GPUs of a model sit on: GPUs per board and the NVSwitches between their NVLinks.

    On such a board the driver of a VM holding some of the GPUs but no NVSwitch waits forever for an NVLink fabric
    ("Fabric State: In Progress", CUDA "system not yet initialized") unless NVLink is disabled with the ``nvidia``
    module option ``NVreg_NvLinkDisable=1`` (cozystack/cozystack ``packages/apps/kubernetes/templates/
    helmreleases/gpu-operator.yaml``); a VM holding the whole board needs its NVSwitches too, and Fabric Manager
    running in the guest (NVIDIA Fabric Manager User Guide, "Full Passthrough Virtualization Model").
    """

    gpus: int
    """GPUs on one board (count)."""
    nvswitch: NvSwitch | None
    """The NVSwitch chip, ``None`` when its PCI identity is not catalogued (then whole-board VMs are refused)."""
    nvswitches: int = 0
    """NVSwitch chips on one board (count): 6 on HGX A100 8-GPU, 4 on HGX H100/H200 8-GPU."""


@dataclass(frozen=True)
class GpuModel:
    """One GPU model. Immutable; look built-in models up in :data:`CATALOG`, a stack's in its cell's
    :attr:`~gpucell.spec.CellSpec.gpu_catalog`."""

    name: str
    """Catalog key used in stack config, e.g. ``H100-SXM5-80GB``."""
    pci_device_id: str
    """PCI device ID, lower-case hex without ``0x`` (vendor is always ``10de``)."""
    pci_device_name: str
    """Device name as ``pci.ids`` spells it, e.g. ``GH100 [H100 SXM5 80GB]``."""
    architecture: GpuArchitecture
    """Architecture generation."""
    framebuffer_mib: int
    """Framebuffer per GPU as ``nvidia-smi`` reports it, MiB."""
    mig_configs: Mapping[str, MigLayout] = field(default_factory=dict)
    """``nvidia.com/mig.config`` name -> per-GPU layout. Empty: the model has no MIG."""
    vgpu_profiles: Mapping[str, int] = field(default_factory=dict)
    """vGPU type name (``L40S-24Q``) -> vGPUs of that type per GPU. Empty: no vGPU support catalogued."""
    vf_pci_device_id: str | None = None
    """PCI device ID an SR-IOV virtual function of the board reports, where observed (lower-case hex)."""
    hgx: HgxBoard | None = None
    """The HGX baseboard of an SXM model; ``None`` for PCIe boards."""
    bar1_mib: int = 256
    """The BAR1 aperture one GPU maps into a guest's 64-bit MMIO space, MiB (``nvidia-smi -q``, "BAR1 Memory Usage:
    Total"); data-center GPUs size it to cover their framebuffer. See :func:`needs_host_cpu_model`."""

    @property
    def memory_gib(self) -> int:
        """Framebuffer per GPU, GiB, rounded down: ``framebuffer_mib // 1024``."""
        return self.framebuffer_mib // 1024

    @property
    def pci_selector(self) -> str:
        """``VENDOR:DEVICE`` as KubeVirt's ``pciVendorSelector`` wants it (upper-case), e.g. ``10DE:2330``."""
        return f"{NVIDIA_PCI_VENDOR}:{self.pci_device_id}".upper()

    @property
    def vf_pci_selector(self) -> str | None:
        """``VENDOR:DEVICE`` of the board's SR-IOV virtual functions (``10DE:26B9``), ``None`` when not observed."""
        if self.vf_pci_device_id is None:
            return None
        return f"{NVIDIA_PCI_VENDOR}:{self.vf_pci_device_id}".upper()

    @property
    def passthrough_resource(self) -> str:
        """Resource name of the whole GPU in ``vm-passthrough`` mode, e.g. ``nvidia.com/GH100_H100_SXM5_80GB``."""
        return pci_resource_name(self.pci_device_name)

    @property
    def supports_mig(self) -> bool:
        """True when the mig-manager ships MIG layouts for this device."""
        return bool(self.mig_configs)

    def vgpu_framework(self, driver_branch: int) -> VgpuFramework:
        """How this board's vGPUs appear with a vGPU host driver of ``driver_branch`` (``580`` for 580.95.02).

        Ada Lovelace, Hopper and Blackwell boards on branch >= :data:`VENDOR_VFIO_DRIVER_BRANCH` (vGPU 17+):
        ``sriov``. Everything else: ``mdev`` (Turing has no SR-IOV and keeps mdevs on the physical function; older
        drivers kept mdevs on Ada too). No Ampere vGPU type is catalogued: secondary sources disagree on whether
        Ampere boards switch framework on Linux 6.8 (NVIDIA's own operator comment says "VFs on Ampere+ SR-IOV" are
        mdev parents; KubeVirt's VEP 210 says they use the vendor-specific framework).
        """
        modern = self.architecture in (GpuArchitecture.ADA, GpuArchitecture.HOPPER, GpuArchitecture.BLACKWELL)
        return VgpuFramework.SRIOV if modern and driver_branch >= VENDOR_VFIO_DRIVER_BRANCH else VgpuFramework.MDEV

    def vgpu_resource(self, profile: str) -> str:
        """Resource name of one vGPU of ``profile``: ``nvidia.com/NVIDIA_L40S-24Q``.

        The sandbox device plugin names mediated devices after the mdev type name (``NVIDIA L40S-24Q``) with
        spaces turned into ``_``. SR-IOV vGPUs are advertised by KubeVirt's own device plugin under the name its
        ``pciHostDevices`` entry gives; gpucell gives them the same name, so tenant quotas do not depend on the
        framework.
        """
        return f"nvidia.com/NVIDIA_{profile}"

    def vgpu_type_name(self, profile: str) -> str:
        """The vGPU type as the host driver names it: ``NVIDIA L40S-24Q``: the mdev type name KubeVirt's
        ``mdevNameSelector`` matches, and the name ``nvidia/creatable_vgpu_types`` of an SR-IOV VF lists."""
        return f"NVIDIA {profile}"

    def vgpus_per_gpu(self, profile: str) -> int:
        """How many vGPUs of ``profile`` one GPU holds (the operator's ``default-vgpu-devices-config`` count)."""
        return self.vgpu_profiles[profile]


def _uniform(profiles: Mapping[str, int]) -> dict[str, MigLayout]:
    """``all-<profile>`` layouts: every GPU cut into one profile."""
    return {f"all-{p}": {p: n} for p, n in profiles.items()}


def _mig(uniform: Mapping[str, int], balanced: MigLayout) -> Mapping[str, MigLayout]:
    return MappingProxyType({"all-disabled": {}, **_uniform(uniform), "all-balanced": dict(balanced)})


def _vgpus(board: str, counts: str) -> Mapping[str, int]:
    """``"1Q:32 2Q:24"`` -> ``{"L40S-1Q": 32, "L40S-2Q": 24}``, in the order the operator's config lists them."""
    return MappingProxyType({f"{board}-{size}": int(n) for size, n in (item.split(":") for item in counts.split())})


_HGX_A100 = HgxBoard(gpus=8, nvswitch=NVSWITCHES["GA100"], nvswitches=6)
_HGX_H100 = HgxBoard(gpus=8, nvswitch=NVSWITCHES["GH100"], nvswitches=4)
_HGX_B200 = HgxBoard(gpus=8, nvswitch=None)

_MODELS = (
    GpuModel(
        name="T4",
        bar1_mib=256,
        pci_device_id="1eb8",
        pci_device_name="TU104GL [Tesla T4]",
        architecture=GpuArchitecture.TURING,
        # NVIDIA/cloud-native-docs openshift/install-gpu-ocp.rst (nvidia-smi: "0MiB / 15360MiB").
        framebuffer_mib=15360,
        vgpu_profiles=_vgpus("T4", "1Q:16 2Q:8 4C:4 4Q:4 8C:2 8Q:2 16C:1 16Q:1"),
    ),
    GpuModel(
        name="A100-SXM4-40GB",
        bar1_mib=65536,
        pci_device_id="20b0",
        pci_device_name="GA100 [A100 SXM4 40GB]",
        architecture=GpuArchitecture.AMPERE,
        # NVIDIA/cloud-native-docs kubernetes/index.rst (GFD label nvidia.com/gpu.memory "40537" for A100-SXM4-40GB).
        framebuffer_mib=40537,
        mig_configs=_mig(
            {"1g.5gb": 7, "1g.10gb": 4, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1, "7g.40gb": 1},
            {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
        ),
        hgx=_HGX_A100,
    ),
    GpuModel(
        name="A100-SXM4-80GB",
        bar1_mib=131072,
        pci_device_id="20b2",
        pci_device_name="GA100 [A100 SXM4 80GB]",
        architecture=GpuArchitecture.AMPERE,
        # nvidia-smi on A100-SXM4-80GB: "0MiB / 81920MiB" (public nvidia-smi outputs; not in NVIDIA's docs).
        framebuffer_mib=81920,
        mig_configs=_mig(
            {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1},
            {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
        ),
        hgx=_HGX_A100,
    ),
    GpuModel(
        name="A100-PCIe-40GB",
        bar1_mib=65536,
        pci_device_id="20b1",
        pci_device_name="GA100 [A100 PCIe 40GB]",
        architecture=GpuArchitecture.AMPERE,
        # nvidia-smi on A100-PCIE-40GB: "40960 MiB" (public nvidia-smi outputs).
        framebuffer_mib=40960,
        # The mig-manager's layouts for 0x20B110DE: the A100 40GB's (1g.10gb at 4 per GPU by its device-filter).
        mig_configs=_mig(
            {"1g.5gb": 7, "1g.10gb": 4, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1, "7g.40gb": 1},
            {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
        ),
    ),
    GpuModel(
        name="A100-PCIe-80GB",
        bar1_mib=131072,
        pci_device_id="20b5",
        pci_device_name="GA100 [A100 PCIe 80GB]",
        architecture=GpuArchitecture.AMPERE,
        # nvidia-smi on A100 80GB PCIe: "81920 MiB" (public nvidia-smi outputs, drivers 535.183.01 and 580).
        framebuffer_mib=81920,
        # The mig-manager's device-filters list 0x20B510DE beside 0x20B210DE (A100 SXM4 80GB).
        mig_configs=_mig(
            {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1},
            {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
        ),
    ),
    GpuModel(
        name="H100-SXM5-80GB",
        bar1_mib=131072,
        pci_device_id="2330",
        pci_device_name="GH100 [H100 SXM5 80GB]",
        architecture=GpuArchitecture.HOPPER,
        # NVIDIA/cloud-native-docs gpu-operator/manifests/output/mig-node-labels.json (gpu.memory "81559").
        framebuffer_mib=81559,
        mig_configs=_mig(
            {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1},
            {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
        ),
        hgx=_HGX_H100,
    ),
    GpuModel(
        name="H100-PCIe-80GB",
        # BAR1 as the H100 SXM5's: the same GH100 die and 80 GB framebuffer (assumed, not read on a PCIe board).
        bar1_mib=131072,
        pci_device_id="2331",
        pci_device_name="GH100 [H100 PCIe]",
        architecture=GpuArchitecture.HOPPER,
        # nvidia-smi on H100 PCIe: "1MiB /  81559MiB" (public nvidia-smi outputs, drivers 535 and 550).
        framebuffer_mib=81559,
        # The mig-manager's device-filter lists 0x233110DE beside 0x233010DE with the H100 SXM5's layouts.
        mig_configs=_mig(
            {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1},
            {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
        ),
    ),
    GpuModel(
        name="H100-NVL-94GB",
        # BAR1 as the H100 SXM5's (assumed, see the module docstring).
        bar1_mib=131072,
        pci_device_id="2321",
        pci_device_name="GH100 [H100L 94GB]",
        architecture=GpuArchitecture.HOPPER,
        # nvidia-smi on H100 NVL (driver 535.183.01): "0MiB / 95830MiB" (NVIDIA/gpu-admin-tools#4).
        framebuffer_mib=95830,
        # nvidia-smi mig -lgip on H100 NVL: 1g.12gb x7, 1g.24gb x4, 2g.24gb x3, 3g.47gb x2 (NVIDIA/gpu-operator#900,
        # NVIDIA/mig-parted#101); the mig-manager's all-balanced for 0x232110DE is 1g.12gb/2g.24gb/3g.47gb.
        mig_configs=_mig(
            {"1g.12gb": 7, "1g.24gb": 4, "2g.24gb": 3, "3g.47gb": 2, "4g.47gb": 1, "7g.94gb": 1},
            {"1g.12gb": 2, "2g.24gb": 1, "3g.47gb": 1},
        ),
    ),
    GpuModel(
        name="GH200-96GB",
        # BAR1 as the H100's (assumed, see the module docstring).
        bar1_mib=131072,
        pci_device_id="2342",
        pci_device_name="GH100 [GH200 120GB / 480GB]",
        architecture=GpuArchitecture.HOPPER,
        # nvidia-smi on GH200 (NVML name "NVIDIA GH200 480GB", device 0x234210DE, driver 580.95.05): 97871 MiB
        # (public nvidia-smi outputs). The host is a Grace (arm64) CPU; its GPU binds to nvgrace_gpu_vfio_pci for
        # VMs, which the sandbox device plugin v1.6.0 and the operator's validator accept beside vfio-pci.
        framebuffer_mib=97871,
        # The MIG User Guide lists "H100 on GH200, 96GB, 7 instances"; the mig-manager's all-balanced for
        # 0x234210DE is 1g.12gb/2g.24gb/3g.48gb, its uniform layouts of those 96 GB sizes are all-<profile> below.
        mig_configs=_mig(
            {"1g.12gb": 7, "1g.24gb": 4, "2g.24gb": 3, "3g.48gb": 2, "4g.48gb": 1, "7g.96gb": 1},
            {"1g.12gb": 2, "2g.24gb": 1, "3g.48gb": 1},
        ),
    ),
    GpuModel(
        name="H200-SXM-141GB",
        bar1_mib=262144,
        pci_device_id="2335",
        pci_device_name="GH100 [H200 SXM 141GB]",
        architecture=GpuArchitecture.HOPPER,
        # nvidia-smi on H200 with driver 580.159.04: "0MiB / 143771MiB" (140.4 GiB).
        framebuffer_mib=143771,
        mig_configs=_mig(
            {"1g.18gb": 7, "1g.35gb": 4, "2g.35gb": 3, "3g.71gb": 2, "4g.71gb": 1, "7g.141gb": 1},
            {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
        ),
        hgx=_HGX_H100,
    ),
    GpuModel(
        name="A10",
        # BAR1 assumed (see the module docstring).
        bar1_mib=32768,
        pci_device_id="2236",
        pci_device_name="GA102GL [A10]",
        architecture=GpuArchitecture.AMPERE,
        # nvidia-smi on A10: "23028MiB" (modal-labs/modal-client#2797); NVML total 24146608128 bytes = 23028 MiB
        # (driver 535.129.03, mayooot/detect-gpu#3). No MIG; no vGPU type catalogued (Ampere, see vgpu_framework).
        framebuffer_mib=23028,
    ),
    GpuModel(
        name="L4",
        bar1_mib=32768,
        pci_device_id="27b8",
        pci_device_name="AD104GL [L4]",
        architecture=GpuArchitecture.ADA,
        # nvidia-smi on L4: "0MiB / 23034MiB" (public nvidia-smi outputs).
        framebuffer_mib=23034,
        vgpu_profiles=_vgpus("L4", "1Q:24 2Q:12 3Q:8 4C:6 4Q:6 6C:4 6Q:4 8C:3 8Q:3 12C:2 12Q:2 24C:1 24Q:1"),
    ),
    GpuModel(
        name="L40",
        # BAR1 as the L40S's (assumed, see the module docstring).
        bar1_mib=65536,
        pci_device_id="26b5",
        pci_device_name="AD102GL [L40]",
        architecture=GpuArchitecture.ADA,
        # nvidia-smi on L40: "NVIDIA L40, 46068 MiB" (public nvidia-smi outputs, driver 570.144 among them).
        framebuffer_mib=46068,
        vgpu_profiles=_vgpus(
            "L40", "1Q:32 2Q:24 3Q:16 4C:12 4Q:12 6C:8 6Q:8 8C:6 8Q:6 12C:4 12Q:4 16C:3 16Q:3 24C:2 24Q:2 48C:1 48Q:1"
        ),
    ),
    GpuModel(
        name="L40S",
        bar1_mib=65536,
        pci_device_id="26b9",
        pci_device_name="AD102GL [L40S]",
        architecture=GpuArchitecture.ADA,
        # nvidia-smi on L40S: "0MiB / 46068MiB" (public nvidia-smi outputs).
        framebuffer_mib=46068,
        vgpu_profiles=_vgpus(
            "L40S", "1Q:32 2Q:24 3Q:16 4C:12 4Q:12 6C:8 6Q:8 8C:6 8Q:6 12C:4 12Q:4 16C:3 16Q:3 24C:2 24Q:2 48C:1 48Q:1"
        ),
        vf_pci_device_id="26b9",
    ),
    GpuModel(
        name="B200",
        bar1_mib=262144,
        pci_device_id="2901",
        pci_device_name="GB100 [B200]",
        architecture=GpuArchitecture.BLACKWELL,
        # nvidia-smi on B200 (drivers 570.172.08 and 595.71.05): "0MiB / 183359MiB".
        framebuffer_mib=183359,
        mig_configs=_mig(
            {"1g.23gb": 7, "1g.45gb": 4, "2g.45gb": 3, "3g.90gb": 2, "4g.90gb": 1, "7g.180gb": 1},
            {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1},
        ),
        hgx=_HGX_B200,
    ),
)

CATALOG: Mapping[str, GpuModel] = MappingProxyType({m.name: m for m in _MODELS})
"""The built-in models: catalog key -> :class:`GpuModel`. Read-only; a stack's own models join a copy of it
(:func:`gpucell.spec.gpu_models.extend_catalog`), never this mapping."""


GUEST_MMIO64_WINDOW_MIB = 65536
"""The 64-bit PCI MMIO window a guest's firmware can be relied on to open without help, MiB: OVMF sizes it from the
guest's physical address bits, which KubeVirt's default CPU model (``host-model``) may report lower than the host's,
and older OVMF opened 32 GiB. GPUs whose BARs do not fit are left unassigned ("This PCI I/O region assigned to your
NVIDIA device is invalid", kubevirt/kubevirt#11093, harvester/harvester#8972)."""


def needs_host_cpu_model(model: GpuModel, whole_gpus: int) -> bool:
    """Whether a VM with ``whole_gpus`` passthrough GPUs of ``model`` needs ``domain.cpu.model: host-passthrough``:
    several large-BAR GPUs whose BAR1 apertures together exceed :data:`GUEST_MMIO64_WINDOW_MIB`. With the host's CPU
    model the guest sees the host's physical address bits and its firmware opens a window that fits them. A GPU VM
    never live-migrates (gpucell sets no eviction strategy with GPUs), so the model ties it to nothing more."""
    return whole_gpus >= 2 and model.bar1_mib * whole_gpus > GUEST_MMIO64_WINDOW_MIB
