"""A VM's shape once its instancetype and preference are resolved: what admission, quotas and the capacity view count.

A VM sized by an instancetype declares no ``cpu`` or ``memoryGib``; KubeVirt applies the instancetype's at start
(``pkg/instancetype/apply`` in kubevirt/kubevirt v1.9.0). :func:`resolve_vm` finds the instancetype (the cell's
``kubevirt.instancetypes``, KubeVirt's common ones of :mod:`gpucell.catalog.common_instancetypes`, or the tenant's own)
and the preference the same way, and returns the VM spec as KubeVirt will run it (:attr:`VmShape.spec`: vCPUs, memory,
dedicated CPUs, hugepages, guest NUMA and GPUs filled in), so placement, the quota rules and the capacity view read one
spec whatever sized it. A common instancetype's memory is counted in whole GiB, rounded up (``u1.nano``'s 512Mi as 1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from gpucell.catalog.common_instancetypes import (
    COMMON_BUNDLE_VERSIONS,
    CommonInstancetype,
    CommonPreference,
    common_instancetypes,
    common_preferences,
)
from gpucell.errors import shown
from gpucell.spec.firmware import EfiSpec, TpmSpec
from gpucell.spec.instancetypes import InstancetypeKind, InstancetypeSpec, PreferenceKind, PreferenceSpec
from gpucell.spec.workloads import CpuTopology, GpuVirtualMachineSpec

if TYPE_CHECKING:
    from gpucell.spec.kubevirt import KubeVirtSpec
    from gpucell.spec.tenancy import TenantSpec

__all__ = ["ShapeError", "VmShape", "resolve_vm"]


class ShapeError(Exception):
    """A VM's instancetype or preference cannot be resolved. ``rel_path`` is the key below the VM."""

    def __init__(self, rel_path: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.rel_path = rel_path
        self.message = message


@dataclass(frozen=True)
class VmShape:
    """A VM as KubeVirt runs it: the declared spec with its instancetype's sizes, and its effective firmware."""

    spec: GpuVirtualMachineSpec
    """The VM spec with ``cpu`` (vCPUs as cores), ``memoryGib``, ``dedicatedCpus``, ``hugepages``, ``numaPassthrough``
    and the GPU keys taken from the instancetype when it names one; the declared spec otherwise."""
    gpus_from_instancetype: bool = False
    """The GPUs are the instancetype's ``spec.gpus``: the VM renders none of its own."""
    emulator_cpus: int = 0
    """Host CPUs pinned besides the vCPUs (``isolateEmulatorThread`` of a common instancetype: 1), counted by the
    quota."""
    efi: EfiSpec | None = None
    """EFI as the guest boots: the VM's own ``efi``, else its preference's."""
    tpm: TpmSpec | None = None
    """The TPM: the VM's own ``tpm``, else its preference's."""
    preference: PreferenceSpec | CommonPreference | None = None
    """The resolved preference, if the VM names one."""

    @property
    def needs_state_storage(self) -> bool:
        """True when KubeVirt keeps EFI NVRAM or TPM state for the VM in a backend-storage PVC."""
        return bool((self.efi is not None and self.efi.persistent) or (self.tpm is not None and self.tpm.persistent))


def _common_scope(version: str) -> str:
    bundle = COMMON_BUNDLE_VERSIONS.get(_minor(version))
    return f"KubeVirt {version}'s common ones (common-instancetypes {bundle})" if bundle else ""


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.lstrip("v").split(".")[:2]
    return int(major), int(minor)


_T = TypeVar("_T")
_C = TypeVar("_C")


def _lookup(
    what: str,
    name: str,
    namespaced: bool,
    found: tuple[Mapping[str, _T], Mapping[str, _T], Mapping[str, _C] | None],
    *,
    platform: KubeVirtSpec,
    version: str,
) -> _T | _C:
    """The ``what`` (``instancetype``/``preference``) ``name``: the tenant's own when ``namespaced``, else the cell's
    or a common one (``found``: the tenant's, the cell's, the common ones or ``None``). Raises :class:`ShapeError`."""
    own, defined, common = found
    kind = "VirtualMachineInstancetype" if what == "instancetype" else "VirtualMachinePreference"
    if namespaced:
        if name not in own:
            raise ShapeError(
                (what, "name"),
                f"{shown(name)} is not a {kind} of the tenant; its {what}s: {', '.join(own) or 'none'}",
            )
        return own[name]
    if name in defined:
        return defined[name]
    if common is not None and name in common:
        return common[name]
    scope = _common_scope(version) if platform.common_instancetypes else ""
    accepted = f"kubevirt.{what}s ({', '.join(defined) or 'none'})" + (f" or {scope}" if scope else "")
    if not scope and platform.common_instancetypes:
        accepted += f" (gpucell knows KubeVirt's common {what}s for KubeVirt v1.9 only)"
    line = f"{shown(name)} is not a cluster {what} of the cell; name one of {accepted}"
    if name in own:
        article = "an" if what[0] in "aeiou" else "a"
        line += f"; the tenant has {article} {what} of that name: set kind: {kind}"
    raise ShapeError((what, "name"), line)


def _find_instancetype(
    platform: KubeVirtSpec, version: str, tenant: TenantSpec, vm: GpuVirtualMachineSpec
) -> InstancetypeSpec | CommonInstancetype:
    ref = vm.instancetype
    assert ref is not None
    common = common_instancetypes(version) if platform.common_instancetypes else None
    namespaced = ref.kind is InstancetypeKind.NAMESPACED
    own = (tenant.instancetypes, platform.instancetypes, common)
    found = _lookup("instancetype", ref.name, namespaced, own, platform=platform, version=version)
    if isinstance(found, CommonInstancetype) and found.realtime:
        raise ShapeError(
            ("instancetype", "name"),
            f"{shown(ref.name)} is a real-time instancetype, which needs hosts tuned for real time "
            "(isolated CPUs, a real-time kernel) that gpucell does not set up; use a cx1 or n1 instancetype",
        )
    return found


def _find_preference(
    platform: KubeVirtSpec, version: str, tenant: TenantSpec, vm: GpuVirtualMachineSpec
) -> PreferenceSpec | CommonPreference | None:
    ref = vm.preference
    if ref is None:
        return None
    common = common_preferences(version) if platform.common_instancetypes else None
    namespaced = ref.kind is PreferenceKind.NAMESPACED
    own = (tenant.preferences, platform.preferences, common)
    found = _lookup("preference", ref.name, namespaced, own, platform=platform, version=version)
    if isinstance(found, CommonPreference) and found.architecture is not None:
        raise ShapeError(
            ("preference", "name"),
            f"{shown(ref.name)} is for {found.architecture} guests; the cell's hosts are amd64: use "
            f"{ref.name.rsplit('.', 1)[0]}",
        )
    return found


def _preference_firmware(preference: PreferenceSpec | CommonPreference | None) -> tuple[EfiSpec | None, TpmSpec | None]:
    if preference is None:
        return None, None
    if isinstance(preference, PreferenceSpec):
        return preference.efi, preference.tpm
    efi = EfiSpec(secure_boot=preference.secure_boot, persistent=preference.persistent_efi) if preference.efi else None
    tpm = TpmSpec(persistent=preference.persistent_tpm) if preference.tpm else None
    return efi, tpm


def _sized(
    vm: GpuVirtualMachineSpec, instancetype: InstancetypeSpec | CommonInstancetype
) -> tuple[GpuVirtualMachineSpec, bool]:
    """``vm`` with the instancetype's sizes (and GPUs, when it has them); whether the GPUs are the instancetype's."""
    if isinstance(instancetype, InstancetypeSpec):
        memory_gib, gpus = instancetype.memory_gib, instancetype.gpus
    else:
        memory_gib, gpus = math.ceil(instancetype.memory_mib / 1024), 0
    update: dict[str, object] = {
        "cpu": CpuTopology(cores=instancetype.cpus),
        "memory_gib": memory_gib,
        "dedicated_cpus": instancetype.dedicated_cpus,
        "hugepages": instancetype.hugepages,
        "numa_passthrough": instancetype.numa_passthrough,
    }
    if gpus and isinstance(instancetype, InstancetypeSpec):
        update |= {"gpu_model": instancetype.gpu_model, "gpus": gpus, "vgpu_profile": instancetype.vgpu_profile}
    return vm.model_copy(update=update), bool(gpus)


def resolve_vm(platform: KubeVirtSpec, kubevirt_version: str, tenant: TenantSpec, vm: GpuVirtualMachineSpec) -> VmShape:
    """``vm`` of ``tenant`` with its instancetype and preference resolved (see the module doc), against the cell's
    ``kubevirt`` section (``platform``) and its pinned KubeVirt (``kubevirt_version``: its common ones).

    Raises :class:`ShapeError` (key below the VM) when the instancetype or preference is not defined where its
    ``kind`` says (naming what is, and the tenant's own of that name when ``kind`` is the cluster one), is a real-time
    or non-amd64 common one, when the VM declares GPUs and its instancetype has them too, or when the preference's
    ``requirements`` (vCPUs, memory) exceed the VM's size.
    """
    preference = _find_preference(platform, kubevirt_version, tenant, vm)
    pref_efi, pref_tpm = _preference_firmware(preference)
    spec, from_instancetype, emulator = vm, False, 0
    if vm.instancetype is not None:
        instancetype = _find_instancetype(platform, kubevirt_version, tenant, vm)
        if vm.gpus and getattr(instancetype, "gpus", 0):
            raise ShapeError(
                ("gpus",),
                f"conflicts with instancetype {shown(vm.instancetype.name)}, which gives the VM its GPUs "
                "(KubeVirt refuses both, pkg/instancetype/apply/gpu.go); drop gpuModel and gpus here",
            )
        spec, from_instancetype = _sized(vm, instancetype)
        emulator = int(getattr(instancetype, "isolate_emulator_thread", False))
    if isinstance(preference, CommonPreference) and vm.preference is not None:
        memory_mib = (spec.memory_gib or 0) * 1024
        if spec.cpu.vcpus < preference.min_cpus or memory_mib < preference.min_memory_mib:
            raise ShapeError(
                ("preference", "name"),
                f"{shown(vm.preference.name)} requires at least {preference.min_cpus} vCPUs and "
                f"{preference.min_memory_mib} MiB of memory (its requirements); the VM has {spec.cpu.vcpus} vCPUs "
                f"and {memory_mib} MiB",
            )
    return VmShape(
        spec=spec,
        gpus_from_instancetype=from_instancetype,
        emulator_cpus=emulator,
        efi=vm.efi or pref_efi,
        tpm=vm.tpm or pref_tpm,
        preference=preference,
    )
