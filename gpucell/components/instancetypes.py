"""Instancetypes and preferences as KubeVirt objects: cluster-wide for a cell, namespaced for a tenant.

Rendered as ``instancetype.kubevirt.io/v1beta1`` (the only version KubeVirt v1.9.0 serves: ``NewVirtualMachine
ClusterInstancetypeCrd`` in ``pkg/virt-operator/resource/generate/components/crds.go``), checked against
``v1beta1.VirtualMachineInstancetypeSpec``/``VirtualMachinePreferenceSpec`` of its ``api/openapi-spec/swagger.json``:

- ``VirtualMachineClusterInstancetype``/``VirtualMachineInstancetype`` ``<name>``: ``cpu`` ``{guest,
  dedicatedCPUPlacement, numa.guestMappingPassthrough}``, ``memory`` ``{guest: "<n>Gi", hugepages.pageSize}``, ``gpus``
  (``gpu0``.. with the device plugin's resource of the GPU model or vGPU type: :func:`instancetype_gpu_resource`);
- ``VirtualMachineClusterPreference``/``VirtualMachinePreference`` ``<name>``: ``cpu.preferredCPUTopology``,
  ``devices.preferredDiskBus``/``preferredInterfaceModel``/``preferredTPM``, ``firmware.preferredEfi`` and, with Secure
  Boot, ``features.preferredSmm: {}``.

A VM captures a ControllerRevision of its instancetype and preference when it first starts and keeps it
(``pkg/instancetype/revision/store.go``: a new revision only when the VM names another instancetype), so a changed
size reaches new VMs only; ``gpucell diff`` says so, and the guard refuses resizing one that deployed VMs use
(:mod:`gpucell.day2.disruption`, ``instancetypeResized``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pulumi

from gpucell._component import MANAGED_BY, CellComponent, custom_resource
from gpucell.catalog.gpu_catalog import CATALOG, GpuModel
from gpucell.spec.instancetypes import InstancetypeSpec, PreferenceSpec

if TYPE_CHECKING:
    from gpucell.cluster import Cluster
    from gpucell.spec.cell import CellSpec

__all__ = [
    "API_VERSION",
    "Instancetypes",
    "InstancetypesArgs",
    "instancetype_gpu_resource",
    "instancetype_manifest",
    "preference_manifest",
]

API_VERSION = "instancetype.kubevirt.io/v1beta1"
"""API version of the instancetype and preference kinds."""


def instancetype_gpu_resource(spec: InstancetypeSpec, catalog: Mapping[str, GpuModel] = CATALOG) -> str | None:
    """The extended resource of an instancetype's GPUs: ``nvidia.com/<PCI device>`` for passthrough,
    ``nvidia.com/NVIDIA_<type>`` for vGPUs (what the cell's ``KubeVirt`` CR permits,
    :func:`gpucell.components.kubevirt.permitted_host_devices`); ``None`` without GPUs. ``catalog``: the stack's GPU
    models (``CellSpec.gpu_catalog``; default the built-in ones)."""
    if spec.gpu_model is None:
        return None
    model = catalog[spec.gpu_model]
    return model.vgpu_resource(spec.vgpu_profile) if spec.vgpu_profile else model.passthrough_resource


def _metadata(name: str, namespace: str | None, labels: Mapping[str, str]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {**MANAGED_BY, **labels}}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def instancetype_manifest(
    name: str,
    spec: InstancetypeSpec,
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
    *,
    catalog: Mapping[str, GpuModel] = CATALOG,
) -> dict[str, Any]:
    """The ``VirtualMachineClusterInstancetype`` ``name`` (or, with ``namespace``, the ``VirtualMachineInstancetype``
    there) of ``spec``."""
    cpu: dict[str, Any] = {"guest": spec.cpus}
    if spec.dedicated_cpus:
        cpu["dedicatedCPUPlacement"] = True
    if spec.numa_passthrough:
        cpu["numa"] = {"guestMappingPassthrough": {}}
    memory: dict[str, Any] = {"guest": f"{spec.memory_gib}Gi"}
    if spec.hugepages is not None:
        memory["hugepages"] = {"pageSize": spec.hugepages}
    body: dict[str, Any] = {"cpu": cpu, "memory": memory}
    resource = instancetype_gpu_resource(spec, catalog)
    if resource is not None:
        body["gpus"] = [{"name": f"gpu{i}", "deviceName": resource} for i in range(spec.gpus)]
    kind = "VirtualMachineInstancetype" if namespace else "VirtualMachineClusterInstancetype"
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": _metadata(name, namespace, labels or {}), "spec": body}


def preference_manifest(
    name: str, spec: PreferenceSpec, namespace: str | None = None, labels: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The ``VirtualMachineClusterPreference`` ``name`` (or, with ``namespace``, the ``VirtualMachinePreference``)
    of ``spec``; sections without a preference are left out."""
    body: dict[str, Any] = {}
    if spec.cpu_topology is not None:
        body["cpu"] = {"preferredCPUTopology": spec.cpu_topology.value}
    devices: dict[str, Any] = {}
    if spec.disk_bus is not None:
        devices["preferredDiskBus"] = spec.disk_bus.value
    if spec.interface_model is not None:
        devices["preferredInterfaceModel"] = spec.interface_model.value
    if spec.tpm is not None:
        devices["preferredTPM"] = {"persistent": spec.tpm.persistent}
    if devices:
        body["devices"] = devices
    if spec.efi is not None:
        body["firmware"] = {"preferredEfi": {"secureBoot": spec.efi.secure_boot, "persistent": spec.efi.persistent}}
        if spec.efi.secure_boot:
            body["features"] = {"preferredSmm": {}}  # Secure Boot needs SMM (KubeVirt's VMI admitter)
    kind = "VirtualMachinePreference" if namespace else "VirtualMachineClusterPreference"
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": _metadata(name, namespace, labels or {}), "spec": body}


@dataclass(frozen=True)
class InstancetypesArgs:
    """Inputs of :class:`Instancetypes`: only what it uses."""

    cluster: Cluster
    """The cluster to create them in (its provider and readiness); it runs KubeVirt (their CRDs)."""
    instancetypes: Mapping[str, InstancetypeSpec]
    """Name -> instancetype."""
    preferences: Mapping[str, PreferenceSpec]
    """Name -> preference."""
    namespace: str | None = None
    """The tenant namespace they live in (``VirtualMachineInstancetype``/``VirtualMachinePreference``); ``None``:
    cluster-wide."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Labels every object carries (a tenant's: ``gpucell.io/tenant``), besides ``app.kubernetes.io/managed-by``."""
    gpu_catalog: Mapping[str, GpuModel] = field(default_factory=lambda: CATALOG)
    """The GPU models the instancetypes' ``gpuModel`` names (``CellSpec.gpu_catalog``); default the built-in ones."""

    @classmethod
    def from_cell(cls, cell: CellSpec, cluster: Cluster) -> InstancetypesArgs:
        """The cluster-wide instancetypes and preferences of ``cell`` (``kubevirt.instancetypes``/``preferences``) on
        ``cluster``, with the cell's GPU catalog."""
        return cls(cluster, cell.kubevirt.instancetypes, cell.kubevirt.preferences, gpu_catalog=cell.gpu_catalog)


class Instancetypes(CellComponent):
    """A set of instancetypes and preferences (``gpucell:index:Instancetypes``).

    Children: ``f"{name}-instancetype-{n}"`` and ``f"{name}-preference-{n}"`` per entry, each a ``CustomResource`` of
    :func:`instancetype_manifest`/:func:`preference_manifest`, on the provider of ``args.cluster`` and after its
    ``ready``. Give ``opts`` the KubeVirt CR to come after (its CRDs); they hold no data and are never protected: a
    VM keeps its own copy (a ControllerRevision).
    """

    def __init__(self, name: str, args: InstancetypesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("Instancetypes", name, opts, args.cluster)
        self.objects: list[pulumi.Resource] = []
        """The registered instancetypes and preferences, in config order."""
        for entry, spec in args.instancetypes.items():
            manifest = instancetype_manifest(entry, spec, args.namespace, args.labels, catalog=args.gpu_catalog)
            self.objects.append(custom_resource(f"{name}-instancetype-{entry}", manifest, self.child()))
        for entry, preference in args.preferences.items():
            manifest = preference_manifest(entry, preference, args.namespace, args.labels)
            self.objects.append(custom_resource(f"{name}-preference-{entry}", manifest, self.child()))
        self.register_outputs({})
