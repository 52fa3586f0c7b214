"""Plan-time rules of a cell's VM platform: instancetypes, preferences, image catalogs, cloud-init and VM state storage.

Each is a mistake KubeVirt or CDI would otherwise report only on the live cell, long after ``pulumi up`` succeeded (a
VM stuck ``FailedFindInstancetype``, a clone refused "insufficient permissions in clone source namespace", a backend
storage PVC that never binds) or, worse, not at all (user data whose ``users`` replace gpucell's login). Every rule
yields one :class:`~gpucell.errors.SpecError` per problem, with a key path below the region.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from gpucell.admission.vm_shape import ShapeError, resolve_vm
from gpucell.catalog.common_instancetypes import common_instancetypes, common_preferences
from gpucell.catalog.gpu_catalog import GpuModel
from gpucell.errors import SpecError, shown
from gpucell.spec.cloud_init import GpucellUserData, UserDataError, merge_user_data, parse_cloud_config
from gpucell.spec.gpu_models import unknown_model
from gpucell.spec.images import data_source_name
from gpucell.spec.instancetypes import InstancetypeSpec
from gpucell.spec.tenancy import SYSTEM_NAMESPACES, TENANT_NAMESPACE_PREFIX
from gpucell.spec.workloads import DiskSource, VmDisk

if TYPE_CHECKING:
    from gpucell.spec.images import ImageCatalogSpec
    from gpucell.spec.isolation import TenantIsolation
    from gpucell.spec.kubevirt import KubeVirtSpec
    from gpucell.spec.platform import StorageSpec
    from gpucell.spec.tenancy import TenantSpec
    from gpucell.spec.versions import Versions
    from gpucell.spec.workloads import GpuVirtualMachineSpec

__all__ = [
    "VmPlatform",
    "VmPlatformSource",
    "catalog_tenants",
    "check_vm_platform",
    "image_classes",
    "state_storage_class",
]


class VmPlatformSource(Protocol):
    """What :meth:`VmPlatform.of` reads: a cell spec or a cluster's facts (``ClusterFacts``), fields of the same
    names."""

    @property
    def kubevirt(self) -> KubeVirtSpec:
        """``kubevirt``."""

    @property
    def versions(self) -> Versions:
        """``versions`` (``versions.kubevirt`` is read)."""

    @property
    def storage(self) -> StorageSpec:
        """``storage`` (its classes and default class)."""

    @property
    def image_catalogs(self) -> Mapping[str, ImageCatalogSpec]:
        """``imageCatalogs``."""

    @property
    def image_namespaces(self) -> Sequence[str]:
        """``imageNamespaces``."""

    @property
    def tenants(self) -> Mapping[str, TenantSpec]:
        """``tenants``."""

    @property
    def gpu_catalog(self) -> Mapping[str, GpuModel]:
        """The GPU models workloads may name."""


@dataclass(frozen=True)
class VmPlatform:
    """What the VM platform rules read of a cell or a cluster (:meth:`of`; ``CellSpec.vm_platform`` and
    ``ClusterFacts.vm_platform``)."""

    kubevirt: KubeVirtSpec
    """The cell's ``kubevirt`` section."""
    kubevirt_version: str
    """``versions.kubevirt``."""
    storage_classes: Sequence[str]
    """The StorageClasses the cell has (``storage.classes``)."""
    default_class: str
    """The cell's default StorageClass (its storage backend's)."""
    image_catalogs: Mapping[str, ImageCatalogSpec]
    """``imageCatalogs``."""
    image_namespaces: Sequence[str]
    """``imageNamespaces``."""
    tenants: Mapping[str, TenantSpec]
    """``tenants``."""
    gpu_catalog: Mapping[str, GpuModel]
    """The stack's GPU models (``CellSpec.gpu_catalog``)."""

    @classmethod
    def of(cls, source: VmPlatformSource) -> VmPlatform:
        """What the rules read of a cell spec or a cluster's facts (the same fields): only ``kubevirt``,
        ``versions``, ``storage``, ``imageCatalogs``, ``imageNamespaces``, ``tenants`` and the GPU catalog, so that
        it also serves a spec whose other sections did not validate."""
        return cls(
            kubevirt=source.kubevirt,
            kubevirt_version=source.versions.kubevirt,
            storage_classes=source.storage.classes,
            default_class=source.storage.backend.value,
            image_catalogs=source.image_catalogs,
            image_namespaces=source.image_namespaces,
            tenants=source.tenants,
            gpu_catalog=source.gpu_catalog,
        )


_STATE = "kubevirt.vmStateStorageClass"


def state_storage_class(cell: VmPlatform) -> str:
    """The StorageClass of KubeVirt's VM state PVCs: ``kubevirt.vmStateStorageClass``, else the cell's default."""
    return cell.kubevirt.vm_state_storage_class or cell.default_class


def image_classes(cell: VmPlatform, catalog: str, image: str) -> list[str]:
    """The StorageClasses ``catalog``'s ``image`` is imported into: its ``storageClasses``, else the default class."""
    return cell.image_catalogs[catalog].images[image].storage_classes or [cell.default_class]


def catalog_tenants(cell: VmPlatform, catalog: str) -> list[str]:
    """The tenants that may clone ``catalog``'s images: its ``tenants``, else every tenant of the region."""
    listed = cell.image_catalogs[catalog].tenants
    return list(cell.tenants) if listed is None else list(listed)


def _instancetype_gpus(
    where: tuple[str | int, ...], spec: InstancetypeSpec, catalog: Mapping[str, GpuModel]
) -> Iterator[SpecError]:
    """An instancetype's GPUs must name a catalogued model (and one of its vGPU types): its ``spec.gpus`` carry the
    device plugin's resource name, which comes from the catalog."""
    if spec.gpu_model is None:
        return
    model = catalog.get(spec.gpu_model)
    if model is None:
        yield SpecError((*where, "gpuModel"), unknown_model(spec.gpu_model, catalog))
    elif spec.vgpu_profile is not None and spec.vgpu_profile not in model.vgpu_profiles:
        yield SpecError(
            (*where, "vgpuProfile"),
            f"{shown(spec.vgpu_profile)} is not a vGPU profile of {spec.gpu_model}; accepted: "
            f"{', '.join(model.vgpu_profiles) or 'none'}",
        )


def _check_definitions(cell: VmPlatform) -> Iterator[SpecError]:
    common = common_instancetypes(cell.kubevirt_version) or {} if cell.kubevirt.common_instancetypes else {}
    preferences = common_preferences(cell.kubevirt_version) or {} if cell.kubevirt.common_instancetypes else {}
    for kind, defined, deployed in (
        ("instancetypes", cell.kubevirt.instancetypes, common),
        ("preferences", cell.kubevirt.preferences, preferences),
    ):
        for name in defined:
            if name in deployed:
                yield SpecError(
                    ("kubevirt", kind, name),
                    f"is one of KubeVirt's common {kind}, which virt-operator deploys and owns; both would manage "
                    "the same object: pick another name, or set kubevirt.commonInstancetypes: false",
                )
    for name, spec in cell.kubevirt.instancetypes.items():
        yield from _instancetype_gpus(("kubevirt", "instancetypes", name), spec, cell.gpu_catalog)
    for tenant_name, tenant in cell.tenants.items():
        for name, spec in tenant.instancetypes.items():
            yield from _instancetype_gpus(("tenants", tenant_name, "instancetypes", name), spec, cell.gpu_catalog)


def _check_catalogs(cell: VmPlatform) -> Iterator[SpecError]:
    for namespace, catalog in cell.image_catalogs.items():
        where = ("imageCatalogs", namespace)
        why = None
        if namespace.startswith(TENANT_NAMESPACE_PREFIX):
            why = f"is a tenant's namespace ({TENANT_NAMESPACE_PREFIX}*)"
        elif namespace in SYSTEM_NAMESPACES:
            why = "is a system or platform namespace"
        elif namespace in cell.image_namespaces:
            why = "is also in imageNamespaces, whose PVCs gpucell does not manage"
        if why is not None:
            yield SpecError(where, f"{shown(namespace)} {why}; give the catalog a namespace of its own")
            continue
        for tenant in catalog.tenants or []:
            if tenant not in cell.tenants:
                yield SpecError(
                    (*where, "tenants"),
                    f"{shown(tenant)} is not a tenant of the region; tenants: {', '.join(cell.tenants) or 'none'}",
                )
        for image, spec in catalog.images.items():
            for index, storage_class in enumerate(spec.storage_classes):
                if storage_class not in cell.storage_classes:
                    yield SpecError(
                        (*where, "images", image, "storageClasses", index),
                        f"{shown(storage_class)} is not a StorageClass of the cell ({', '.join(cell.storage_classes)})",
                    )
            for storage_class in image_classes(cell, namespace, image):
                name = data_source_name(image, storage_class)
                if len(name) > 63:
                    yield SpecError(
                        (*where, "images", image),
                        f"names the DataSource {shown(name)} in class {storage_class}, longer than the 63 characters "
                        "CDI allows a DataImportCron's managedDataSource; shorten the image name",
                    )


def _disk_key(index: int) -> tuple[str | int, ...]:
    return ("rootDisk",) if index == 0 else ("dataDisks", index - 1)


def _check_image_disk(
    cell: VmPlatform, tenant_name: str, where: tuple[str | int, ...], disk: VmDisk
) -> Iterator[SpecError]:
    image_ref = disk.source.image
    if image_ref is None:
        return
    catalog, image = image_ref.split("/", 1)
    key = (*where, "source", "image")
    if catalog not in cell.image_catalogs:
        yield SpecError(
            key,
            f"{shown(image_ref)} names no image catalog of the region; imageCatalogs: "
            f"{', '.join(cell.image_catalogs) or 'none'}",
        )
        return
    images = cell.image_catalogs[catalog].images
    if image not in images:
        yield SpecError(
            key, f"{shown(image_ref)}: catalog {catalog} has no image {image}; its images: {', '.join(images)}"
        )
        return
    allowed = catalog_tenants(cell, catalog)
    if tenant_name not in allowed:
        yield SpecError(
            key,
            f"{shown(image_ref)} is a DataSource tenant {tenant_name} may not use: imageCatalogs.{catalog}.tenants "
            f"lists {', '.join(allowed)}; add {tenant_name} there, or import the image for this tenant",
        )
        return
    storage_class = disk.storage_class or cell.default_class
    classes = image_classes(cell, catalog, image)
    if storage_class not in classes:
        yield SpecError(
            (*where, "storageClass") if disk.storage_class else key,
            f"{shown(storage_class)}: image {image_ref} is imported into {', '.join(classes)} only; clone it onto "
            f"one of those, or add {storage_class} to imageCatalogs.{catalog}.images.{image}.storageClasses",
        )
        return
    if disk.size_gib < images[image].size_gib:
        yield SpecError(
            (*where, "sizeGib"),
            f"{disk.size_gib} is smaller than image {image_ref} ({images[image].size_gib} GiB): a clone is at least "
            "as large as its source",
        )


def _check_user_data(where: tuple[str | int, ...], vm: GpuVirtualMachineSpec) -> Iterator[SpecError]:
    if vm.cloud_init is None or vm.cloud_init.user_data is None:
        return
    ours = GpucellUserData(vm.user, vm.ssh_keys)
    label = ".".join(str(p) for p in where[2:])
    try:
        merge_user_data(parse_cloud_config(vm.cloud_init.user_data), ours, where=label)
    except UserDataError as exc:
        yield SpecError((*where, "cloudInit", "userData", *exc.rel_path), exc.message)


def _check_vm(
    cell: VmPlatform, tenant_name: str, tenant: TenantSpec, name: str, vm: GpuVirtualMachineSpec
) -> Iterator[SpecError]:
    where: tuple[str | int, ...] = ("tenants", tenant_name, "virtualMachines", name)
    try:
        shape = resolve_vm(cell.kubevirt, cell.kubevirt_version, tenant, vm)
    except ShapeError as exc:
        yield SpecError((*where, *exc.rel_path), exc.message)
        return
    for index, disk in enumerate(vm.disks):
        yield from _check_image_disk(cell, tenant_name, (*where, *_disk_key(index)), disk)
    yield from _check_user_data(where, vm)
    if shape.needs_state_storage and state_storage_class(cell) not in cell.storage_classes:
        what = "efi" if shape.efi is not None and shape.efi.persistent else "tpm"
        yield SpecError(
            (*where, what, "persistent") if getattr(vm, what) is not None else (*where, "preference"),
            f"keeps {'EFI NVRAM' if what == 'efi' else 'TPM state'} in a PVC of StorageClass "
            f"{shown(state_storage_class(cell))} ({_STATE}), which the cell does not have; "
            f"name one of {', '.join(cell.storage_classes)} there",
        )


def _check_guest_image(cell: VmPlatform, tenant_name: str, isolation: TenantIsolation) -> Iterator[SpecError]:
    """The tenant's ``isolation.guestImage`` is a catalog image it may clone, in the cell's default class, no larger
    than ``isolation.rootDiskGib`` (the root disk of every isolated workload's VM,
    :func:`gpucell.admission.isolation.guest_vm`); problems name the tenant's ``isolation`` keys."""
    if isolation.guest_image is None:
        return
    root = VmDisk(source=DiskSource(image=isolation.guest_image), size_gib=isolation.root_disk_gib)
    where = ("tenants", tenant_name, "isolation")
    for problem in _check_image_disk(cell, tenant_name, where, root):
        key = "rootDiskGib" if problem.rel_path[-1] == "sizeGib" else "guestImage"
        yield SpecError((*where, key), problem.message)


def check_vm_platform(cell: VmPlatform) -> Iterator[SpecError]:
    """Every problem of the cell's instancetypes, preferences, image catalogs and VM state storage, and of each VM's
    instancetype, preference, catalog images and user data (paths below the region)."""
    yield from _check_definitions(cell)
    yield from _check_catalogs(cell)
    vm_problems = [
        problem
        for tenant_name, tenant in cell.tenants.items()
        for name, vm in tenant.virtual_machines.items()
        for problem in _check_vm(cell, tenant_name, tenant, name, vm)
    ]
    yield from vm_problems
    for tenant_name, tenant in cell.tenants.items():
        yield from _check_guest_image(cell, tenant_name, tenant.isolation)
    state = cell.kubevirt.vm_state_storage_class
    if state is not None and state not in cell.storage_classes and not any(_STATE in p.message for p in vm_problems):
        yield SpecError(
            ("kubevirt", "vmStateStorageClass"),
            f"{shown(state)} is not a StorageClass of the cell ({', '.join(cell.storage_classes)}): KubeVirt's VM "
            "state PVCs would never bind; name one, or list a class installed outside gpucell in storage.otherClasses",
        )
