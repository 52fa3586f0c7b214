"""KubeVirt settings of a cell that are not derived from its pools: cluster-wide instancetypes and preferences, the
common ones, and where VMs keep their persistent EFI and TPM state."""

from __future__ import annotations

from pydantic import field_validator

from gpucell.spec._base import SpecModel
from gpucell.spec.instancetypes import InstancetypeSpec, PreferenceSpec, check_object_names
from gpucell.spec.network import DNS_SUBDOMAIN

__all__ = ["KubeVirtSpec"]


class KubeVirtSpec(SpecModel):
    """The ``kubevirt`` key of a region."""

    instancetypes: dict[str, InstancetypeSpec] = {}
    """Name (``gpu.h100x8``, a DNS-1123 subdomain) -> a ``VirtualMachineClusterInstancetype`` every tenant's VMs may
    be sized by. Defaults to none."""
    preferences: dict[str, PreferenceSpec] = {}
    """Name -> a ``VirtualMachineClusterPreference`` every tenant's VMs may name. Defaults to none."""
    common_instancetypes: bool = True
    """Deploy KubeVirt's common instancetypes and preferences (``u1.large``, ``cx1.2xlarge``, ``ubuntu``,
    ``windows.11``...; ``configuration.commonInstancetypesDeployment.enabled``), which VMs may then name. Defaults
    to true, KubeVirt's default; false refuses VMs that name one."""
    vm_state_storage_class: str | None = None
    """StorageClass of the PVCs KubeVirt keeps persistent EFI NVRAM and TPM state in (``vmStateStorageClass``); it
    must serve ``Filesystem`` volumes. Defaults to the cell's default class (``local-path`` or ``longhorn``: both
    do)."""

    _names = field_validator("instancetypes", "preferences")(check_object_names)

    @field_validator("vm_state_storage_class")
    @classmethod
    def _class(cls, value: str | None) -> str | None:
        if value is not None and not DNS_SUBDOMAIN.fullmatch(value):
            raise ValueError("is not a StorageClass name (a DNS-1123 subdomain)")
        return value
