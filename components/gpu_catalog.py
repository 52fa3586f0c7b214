"""The GPU models a cell can hold: PCI identity, the resource names the GPU Operator advertises, memory, MIG.

One entry per model, keyed by the name a stack config uses (``gpuModel: H100-SXM5-80GB``).

Sources, per field:

- ``pci_device_id`` and ``pci_device_name``: the PCI ID Repository (``pci.ids``, vendor ``10de``), as ``lspci -nn``
  prints them on the node.
- ``passthrough_resource``: NVIDIA's ``kubevirt-gpu-device-plugin`` (the GPU Operator's *sandbox device plugin*)
  advertises a passthrough GPU as ``nvidia.com/`` + the ``pci.ids`` device name upper-cased, brackets dropped and
  spaces turned into ``_`` (``TU104GL [Tesla T4]`` -> ``nvidia.com/TU104GL_TESLA_T4``). KubeVirt's
  ``permittedHostDevices.pciHostDevices[].resourceName`` and a VM's ``devices.gpus[].deviceName`` must use it.
- ``memory_gib``: the board's framebuffer in GiB as ``nvidia-smi`` reports it, rounded down.
- ``mig_configs``: the ``nvidia.com/mig.config`` layouts the GPU Operator v26.7.0 mig-manager ships for the device
  (``assets/state-mig-manager/0400_configmap.yaml``), as MIG profile -> instances per GPU. ``tests/`` checks every
  entry against that file.
- ``vgpu_profiles``: NVIDIA vGPU (Q-series) profile -> framebuffer GiB per vGPU, from the NVIDIA Virtual GPU
  Software user guide's per-board profile tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["CATALOG", "NVIDIA_PCI_VENDOR", "GpuModel", "MigLayout", "mig_resource_name"]

NVIDIA_PCI_VENDOR = "10de"

MigLayout = Mapping[str, int]
"""MIG profile (``1g.10gb``) -> instances on one GPU."""


def mig_resource_name(profile: str) -> str:
    """The extended resource a MIG profile is advertised as under the ``mixed`` strategy (``nvidia.com/mig-1g.10gb``).

    Source: NVIDIA k8s-device-plugin, "MIG support" (strategy ``mixed``).
    """
    return f"nvidia.com/mig-{profile}"


@dataclass(frozen=True)
class GpuModel:
    """One GPU model. Immutable; look models up in :data:`CATALOG`."""

    name: str
    """Catalog key used in stack config, e.g. ``H100-SXM5-80GB``."""
    pci_device_id: str
    """PCI device ID, lower-case hex without ``0x`` (vendor is always ``10de``)."""
    pci_device_name: str
    """Device name as ``pci.ids`` spells it, e.g. ``GH100 [H100 SXM5 80GB]``."""
    memory_gib: int
    """Framebuffer per GPU, GiB."""
    mig_configs: Mapping[str, MigLayout] = field(default_factory=dict)
    """``nvidia.com/mig.config`` name -> per-GPU layout. Empty: the model has no MIG."""
    vgpu_profiles: Mapping[str, int] = field(default_factory=dict)
    """vGPU type name (``L40S-24Q``) -> framebuffer GiB per vGPU. Empty: no vGPU support catalogued."""

    @property
    def pci_selector(self) -> str:
        """``VENDOR:DEVICE`` as KubeVirt's ``pciVendorSelector`` wants it (upper-case), e.g. ``10DE:2330``."""
        return f"{NVIDIA_PCI_VENDOR}:{self.pci_device_id}".upper()

    @property
    def passthrough_resource(self) -> str:
        """Resource name of the whole GPU in ``vm-passthrough`` mode, e.g. ``nvidia.com/GH100_H100_SXM5_80GB``."""
        cleaned = self.pci_device_name.replace("[", "").replace("]", "").replace("/", "_")
        return "nvidia.com/" + "_".join(cleaned.upper().split())

    @property
    def supports_mig(self) -> bool:
        """True when the mig-manager ships MIG layouts for this device."""
        return bool(self.mig_configs)

    def vgpu_resource(self, profile: str) -> str:
        """Resource name of one vGPU of ``profile``: ``nvidia.com/NVIDIA_L40S-24Q``.

        The sandbox device plugin names mediated devices after the mdev type name (``NVIDIA L40S-24Q``) with
        spaces turned into ``_``.
        """
        return f"nvidia.com/NVIDIA_{profile}"

    def vgpu_mdev_name(self, profile: str) -> str:
        """The mdev type name KubeVirt's ``mdevNameSelector`` matches: ``NVIDIA L40S-24Q``."""
        return f"NVIDIA {profile}"

    def vgpus_per_gpu(self, profile: str) -> int:
        """How many vGPUs of ``profile`` one GPU holds: the board's full-framebuffer profile / this one."""
        return max(self.vgpu_profiles.values()) // self.vgpu_profiles[profile]


def _uniform(profiles: Mapping[str, int]) -> dict[str, MigLayout]:
    """``all-<profile>`` layouts: every GPU cut into one profile."""
    return {f"all-{p}": {p: n} for p, n in profiles.items()}


def _mig(uniform: Mapping[str, int], balanced: MigLayout) -> Mapping[str, MigLayout]:
    return MappingProxyType({"all-disabled": {}, **_uniform(uniform), "all-balanced": dict(balanced)})


def _q_profiles(board: str, sizes: tuple[int, ...]) -> Mapping[str, int]:
    return MappingProxyType({f"{board}-{s}Q": s for s in sizes})


_MODELS = (
    GpuModel(
        name="T4",
        pci_device_id="1eb8",
        pci_device_name="TU104GL [Tesla T4]",
        memory_gib=15,
        vgpu_profiles=_q_profiles("T4", (1, 2, 4, 8, 16)),
    ),
    GpuModel(
        name="A100-SXM4-40GB",
        pci_device_id="20b0",
        pci_device_name="GA100 [A100 SXM4 40GB]",
        memory_gib=39,
        mig_configs=_mig(
            {"1g.5gb": 7, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1, "7g.40gb": 1},
            {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
        ),
    ),
    GpuModel(
        name="A100-SXM4-80GB",
        pci_device_id="20b2",
        pci_device_name="GA100 [A100 SXM4 80GB]",
        memory_gib=79,
        mig_configs=_mig(
            {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1},
            {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
        ),
    ),
    GpuModel(
        name="H100-SXM5-80GB",
        pci_device_id="2330",
        pci_device_name="GH100 [H100 SXM5 80GB]",
        memory_gib=79,
        mig_configs=_mig(
            {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1},
            {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
        ),
    ),
    GpuModel(
        name="H200-SXM-141GB",
        pci_device_id="2335",
        pci_device_name="GH100 [H200 SXM 141GB]",
        memory_gib=139,
        mig_configs=_mig(
            {"1g.18gb": 7, "1g.35gb": 4, "2g.35gb": 3, "3g.71gb": 2, "4g.71gb": 1, "7g.141gb": 1},
            {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
        ),
    ),
    GpuModel(
        name="L4",
        pci_device_id="27b8",
        pci_device_name="AD104GL [L4]",
        memory_gib=22,
        vgpu_profiles=_q_profiles("L4", (1, 2, 3, 4, 6, 8, 12, 24)),
    ),
    GpuModel(
        name="L40S",
        pci_device_id="26b9",
        pci_device_name="AD102GL [L40S]",
        memory_gib=44,
        vgpu_profiles=_q_profiles("L40S", (1, 2, 3, 4, 6, 8, 12, 16, 24, 48)),
    ),
    GpuModel(
        name="B200",
        pci_device_id="2901",
        pci_device_name="GB100 [B200]",
        memory_gib=179,
        mig_configs=_mig(
            {"1g.23gb": 7, "1g.45gb": 4, "2g.45gb": 3, "3g.90gb": 2, "4g.90gb": 1, "7g.180gb": 1},
            {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1},
        ),
    ),
)

CATALOG: Mapping[str, GpuModel] = MappingProxyType({m.name: m for m in _MODELS})
"""Catalog key -> :class:`GpuModel`."""
