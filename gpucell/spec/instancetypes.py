"""Instancetypes and preferences: the sizes and guest preferences KubeVirt users pick a VM by.

A cell defines cluster-wide ones (``kubevirt.instancetypes``/``kubevirt.preferences``, rendered as
``VirtualMachineClusterInstancetype``/``VirtualMachineClusterPreference``), a tenant its own
(``tenants.<t>.instancetypes``/``preferences``, ``VirtualMachineInstancetype``/``VirtualMachinePreference`` in its
namespace), and KubeVirt's common ones (``u1.large``, ``windows.11``) are there too
(:mod:`gpucell.catalog.common_instancetypes`). A VM names one (``instancetype: {name, kind}``, KubeVirt's
``spec.instancetype`` matcher) instead of its own ``cpu`` and ``memoryGib``. Shapes follow KubeVirt v1.9.0's
``instancetype.kubevirt.io/v1beta1`` (``api/openapi-spec/swagger.json``: ``v1beta1.VirtualMachineInstancetypeSpec``,
``v1beta1.VirtualMachinePreferenceSpec``, ``v1.InstancetypeMatcher``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

from pydantic import Field, StrictInt, field_validator, model_validator

from gpucell.errors import SpecError, shown
from gpucell.spec._base import SpecModel
from gpucell.spec.firmware import EfiSpec, TpmSpec
from gpucell.spec.network import DNS_SUBDOMAIN

__all__ = [
    "CpuTopologyPreference",
    "DiskBus",
    "InstancetypeKind",
    "InstancetypeRef",
    "InstancetypeSpec",
    "InterfaceModel",
    "PreferenceKind",
    "PreferenceRef",
    "PreferenceSpec",
    "check_object_names",
]


class InstancetypeKind(StrEnum):
    """``spec.instancetype.kind`` of a VM (KubeVirt ``v1.InstancetypeMatcher``)."""

    CLUSTER = "VirtualMachineClusterInstancetype"
    NAMESPACED = "VirtualMachineInstancetype"


class PreferenceKind(StrEnum):
    """``spec.preference.kind`` of a VM (KubeVirt ``v1.PreferenceMatcher``)."""

    CLUSTER = "VirtualMachineClusterPreference"
    NAMESPACED = "VirtualMachinePreference"


_T = TypeVar("_T")


def _object_name(value: str) -> str:
    if len(value) > 253 or not DNS_SUBDOMAIN.fullmatch(value):
        raise ValueError("is not an object name (a DNS-1123 subdomain: lower-case letters, digits, '-', '.'; u1.large)")
    return value


def check_object_names(names: dict[str, _T]) -> dict[str, _T]:
    """``names`` when every key is a DNS-1123 subdomain (an instancetype or preference name); else
    :class:`SpecError` at the first bad key."""
    for name in names:
        try:
            _object_name(name)
        except ValueError as exc:
            raise SpecError((name,), f"{shown(name)} {exc}") from None
    return names


class _ObjectRef(SpecModel):
    name: str
    """``metadata.name`` of the object (``u1.large``, ``gpu.h100x8``, ``ubuntu``, ``windows.11``)."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _object_name(value)


class InstancetypeRef(_ObjectRef):
    """The instancetype a VM is sized by: KubeVirt's ``spec.instancetype`` (``{name, kind}``)."""

    kind: InstancetypeKind = InstancetypeKind.CLUSTER
    """``VirtualMachineClusterInstancetype`` (default: ``kubevirt.instancetypes`` or KubeVirt's common ones) or
    ``VirtualMachineInstancetype`` (the tenant's ``instancetypes``)."""


class PreferenceRef(_ObjectRef):
    """The preference a VM takes guest defaults from: KubeVirt's ``spec.preference`` (``{name, kind}``)."""

    kind: PreferenceKind = PreferenceKind.CLUSTER
    """``VirtualMachineClusterPreference`` (default: ``kubevirt.preferences`` or KubeVirt's common ones) or
    ``VirtualMachinePreference`` (the tenant's ``preferences``)."""


class InstancetypeSpec(SpecModel):
    """A VM size: vCPUs, memory and, optionally, dedicated CPUs, hugepages, guest NUMA and GPUs.

    Rendered as ``spec.cpu`` ``{guest, dedicatedCPUPlacement, numa.guestMappingPassthrough}``, ``spec.memory``
    ``{guest: "<n>Gi", hugepages.pageSize}`` and ``spec.gpus`` (``gpu0``.. with the device plugin's resource of
    ``gpuModel``, or of ``vgpuProfile``). A VM sized by it may not set these itself (KubeVirt refuses such
    conflicts, ``pkg/instancetype/apply``), so the whole shape lives here.
    """

    cpus: StrictInt = Field(ge=1, le=512)
    """vCPUs the guest sees (``cpu.guest``); the guest topology comes from the VM's preference (KubeVirt's default:
    one socket per vCPU)."""
    memory_gib: StrictInt = Field(ge=1, le=4096)
    """Guest memory, GiB (``memory.guest``)."""
    dedicated_cpus: bool = False
    """Pin each vCPU to a host CPU (``cpu.dedicatedCPUPlacement``); needs a pool with a topology profile. Defaults
    to false."""
    hugepages: str | None = None
    """Back guest memory with hugepages of this size, ``1Gi`` or ``2Mi`` (``memory.hugepages.pageSize``); needs a pool
    with a topology profile."""
    numa_passthrough: bool = False
    """Mirror the host NUMA topology into the guest (``cpu.numa.guestMappingPassthrough``); needs ``dedicatedCpus``
    and ``hugepages``. Defaults to false."""
    gpu_model: str | None = None
    """GPU catalog model (``H100-SXM5-80GB``) of the ``gpus`` every VM of this size gets (``spec.gpus``, from the
    device plugin: passthrough, or vGPUs with ``vgpuProfile``); none for a CPU-only size."""
    gpus: StrictInt = Field(default=0, ge=0, le=16)
    """Whole GPUs (or vGPUs with ``vgpuProfile``) of ``gpuModel``, count. Defaults to 0."""
    vgpu_profile: str | None = None
    """vGPU type (``L40S-12Q``): the ``gpus`` are vGPUs of it from a vm-vgpu pool."""

    @field_validator("hugepages")
    @classmethod
    def _page_size(cls, value: str | None) -> str | None:
        if value is not None and value not in ("1Gi", "2Mi"):
            raise ValueError("is not a hugepage size; use 1Gi or 2Mi")
        return value

    @model_validator(mode="after")
    def _shape(self) -> InstancetypeSpec:
        if self.numa_passthrough and not (self.dedicated_cpus and self.hugepages):
            raise SpecError(("numaPassthrough",), "needs dedicatedCpus: true and hugepages (KubeVirt guest NUMA)")
        if self.gpus and self.gpu_model is None:
            raise SpecError(("gpuModel",), f"is required with gpus: {self.gpus}")
        if self.gpu_model is not None and not self.gpus:
            raise SpecError(("gpus",), f"must be at least 1 with gpuModel {shown(self.gpu_model)}")
        if self.vgpu_profile is not None and not self.gpus:
            raise SpecError(("gpus",), f"must be at least 1 with vgpuProfile {shown(self.vgpu_profile)}")
        return self


class CpuTopologyPreference(StrEnum):
    """``cpu.preferredCPUTopology``: how the instancetype's vCPUs are laid out (KubeVirt v1.9.0 ``v1beta1``)."""

    SOCKETS = "sockets"
    CORES = "cores"
    THREADS = "threads"
    SPREAD = "spread"
    ANY = "any"


class DiskBus(StrEnum):
    """``devices.preferredDiskBus``: the bus of the VM's disks."""

    VIRTIO = "virtio"
    SATA = "sata"
    SCSI = "scsi"


class InterfaceModel(StrEnum):
    """``devices.preferredInterfaceModel``: the NIC the guest sees."""

    VIRTIO = "virtio"
    E1000E = "e1000e"
    E1000 = "e1000"


class PreferenceSpec(SpecModel):
    """Guest defaults a VM takes unless it says otherwise: CPU layout, disk bus and NIC model (a guest without
    virtio drivers), EFI and a TPM. Rendered as ``spec.cpu.preferredCPUTopology``, ``spec.devices.preferredDiskBus``/
    ``preferredInterfaceModel``/``preferredTPM``, ``spec.firmware.preferredEfi`` and, with Secure Boot,
    ``spec.features.preferredSmm``."""

    cpu_topology: CpuTopologyPreference | None = None
    """How the instancetype's vCPUs are laid out (``sockets``, ``cores``, ``threads``, ``spread``, ``any``);
    KubeVirt's default is one socket per vCPU."""
    disk_bus: DiskBus | None = None
    """Bus of the VM's disks (``virtio``, ``sata``, ``scsi``): ``sata`` for a guest without virtio drivers (a Windows
    installer). gpucell then leaves the bus out of the VM's disks. None: ``virtio``."""
    interface_model: InterfaceModel | None = None
    """NIC model (``virtio``, ``e1000e``, ``e1000``). None: KubeVirt's default, ``virtio``."""
    efi: EfiSpec | None = None
    """Boot with EFI (``firmware.preferredEfi``), with Secure Boot (then SMM on) and persistent NVRAM as given."""
    tpm: TpmSpec | None = None
    """A virtual TPM (``devices.preferredTPM``), persistent or not."""
