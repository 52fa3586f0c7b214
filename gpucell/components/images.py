"""An image catalog: golden VM images in a namespace of the cell, imported and kept current by CDI, cloned by the
tenants it lists.

What is rendered per catalog (namespace ``<catalog>``; shapes checked against CDI v1.66.0 ``api/openapi-spec/
swagger.json`` ``v1beta1.DataImportCron``/``DataSource``/``DataVolume``):

- the ``Namespace``, Pod Security ``restricted`` (CDI's importer pods are restricted: ``SetRestrictedSecurityContext``
  in ``pkg/controller/common/util.go``);
- per image and StorageClass, DataSource ``<image>-<class>`` (:func:`gpucell.spec.images.data_source_name`):
  a registry image's ``DataImportCron`` of that name (``managedDataSource`` the same; ``schedule``, ``importsToKeep``,
  ``garbageCollect: Outdated``, ``retentionPolicy: RetainAll``: removing it from the config leaves the DataSource and
  its imports), which CDI's webhook never lets change ("Cannot update DataImportCron Spec",
  ``pkg/apiserver/webhooks/dataimportcron-validate.go``), hence ``replaceOnChanges: [spec]`` with
  ``deleteBeforeReplace``; an HTTP image's ``DataVolume`` ``<image>-<class>-<digest>`` (a new name whenever what it
  imports changes: CDI refuses DataVolume spec updates) bound at once (``cdi.kubevirt.io/storage.bind.immediate.
  requested``: nothing consumes a golden image, and a ``WaitForFirstConsumer`` class would wait for ever) and a
  ``DataSource`` pointing at it;
- per image with ``credentialsConfigKey``: a ``Secret`` ``<catalog>-<image>-import`` (``accessKeyId``/``secretKey``);
  with ``caBundle``: a ``ConfigMap`` ``<catalog>-<image>-import-ca``. For a registry image both are also rendered in
  CDI's namespace (``cdi``) under the same names: a DataImportCron's digest poller runs there (a CronJob of CDI's
  controller, ``InitPollerPod`` in ``pkg/controller/dataimportcron-controller.go``) and reads the cron's
  ``secretRef`` and ``certConfigMap`` by name from its own namespace, while the imports it starts read them from the
  catalog's; without the copies the poller never starts ("secret not found") and the image is never imported;
- the ``Role`` and ``RoleBinding`` ``gpucell-image-clone``: ``create`` on ``datavolumes/source`` (what CDI checks
  before a clone out of a namespace: ``CanServiceAccountClonePVC``/``CanUserClonePVC``, ``authorize_utils.go`` of
  the CDI API; KubeVirt checks it for the VM's service account, ``authorizeDataVolume`` in kubevirt v1.9.0
  ``pkg/virt-controller/watch/vm/vm.go``) and ``get``/``list``/``watch`` on ``datasources``, bound to the service
  accounts of each allowed tenant's namespace (``system:serviceaccounts:tenant-<t>``) and to the tenant's admin and
  member groups. No other tenant may clone from the namespace.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi_kubernetes.core.v1 import ConfigMap, Namespace, Secret
from pulumi_kubernetes.rbac.v1 import Role, RoleBinding

from gpucell._component import MANAGED_BY, CellComponent, custom_resource
from gpucell.admission.vm_rules import catalog_tenants
from gpucell.components.cdi import NAMESPACE as CDI_NAMESPACE
from gpucell.components.disk_import import CA_BUNDLE_KEY, import_secret_data, import_source
from gpucell.spec.images import CatalogImageSpec, ImageCatalogSpec, data_source_name
from gpucell.spec.lifecycle import RemovalPolicy, removal_options

if TYPE_CHECKING:
    from gpucell.cluster import Cluster
    from gpucell.spec.cell import CellSpec

__all__ = [
    "CATALOG_LABEL",
    "CDI_API_VERSION",
    "CLONE_ROLE",
    "IMMEDIATE_BINDING",
    "ImageCatalog",
    "ImageCatalogArgs",
    "catalog_objects",
    "clone_rbac",
    "import_object_names",
]

CDI_API_VERSION = "cdi.kubevirt.io/v1beta1"
"""API version of DataImportCron, DataSource and DataVolume."""
CATALOG_LABEL = "gpucell.io/image-catalog"
"""Label on every object of a catalog, naming it."""
CLONE_ROLE = "gpucell-image-clone"
"""Name of the catalog's clone Role and RoleBinding."""
IMMEDIATE_BINDING = {"cdi.kubevirt.io/storage.bind.immediate.requested": "true"}
"""CDI's annotation for a DataVolume to bind and import without waiting for a consumer."""
_RBAC = "rbac.authorization.k8s.io"


@dataclass(frozen=True)
class ImageCatalogArgs:
    """Inputs of :class:`ImageCatalog`: only what it uses."""

    cluster: Cluster
    """The cluster to create it in (its provider and readiness; its Kubernetes minor pins the namespace's Pod Security
    labels); it runs CDI."""
    namespace: str
    """The catalog's namespace (its ``imageCatalogs`` key)."""
    spec: ImageCatalogSpec
    """The catalog."""
    default_class: str
    """The cell's default StorageClass: where an image without ``storageClasses`` is imported."""
    tenants: Mapping[str, Sequence[str]]
    """Allowed tenant -> the groups that act for it (admins and members, as the API server names them)."""
    credentials: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    """Config key -> ``<user>:<password>`` (a Pulumi secret), for every ``credentialsConfigKey`` of its images."""
    removal_policy: RemovalPolicy = RemovalPolicy.PROTECT
    """What removing the catalog may do to its namespace (and the imported images in it)."""

    @classmethod
    def from_cell(
        cls, cell: CellSpec, cluster: Cluster, catalog: str, credentials: Mapping[str, pulumi.Input[str]]
    ) -> ImageCatalogArgs:
        """``cell``'s catalog ``catalog`` on ``cluster``: its allowed tenants with their admin and member groups (as
        the API server names them, with the cell's OIDC ``groupsPrefix``), the cell's default class and removal
        policy, and of ``credentials`` (config key -> ``<user>:<password>``) those its images name."""
        spec = cell.image_catalogs[catalog]
        tenants: dict[str, list[str]] = {}
        for tenant in catalog_tenants(cell.vm_platform, catalog):
            groups = cell.tenants[tenant].groups
            names = [*groups.admins, *groups.members]
            tenants[tenant] = [cell.oidc.group(g) if cell.oidc else g for g in names]
        keys = sorted(k for k in (i.source.credentials_config_key for i in spec.images.values()) if k is not None)
        return cls(
            cluster,
            namespace=catalog,
            spec=spec,
            default_class=cell.storage.backend.value,
            tenants=tenants,
            credentials={key: credentials[key] for key in keys},
            removal_policy=cell.removal_policy,
        )


def _meta(catalog: str, name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "namespace": catalog, "labels": {**MANAGED_BY, CATALOG_LABEL: catalog}, **extra}


def _size(image: CatalogImageSpec, storage_class: str) -> dict[str, Any]:
    return {"resources": {"requests": {"storage": f"{image.size_gib}Gi"}}, "storageClassName": storage_class}


def import_object_names(catalog: str, image: str) -> tuple[str, str]:
    """Names of ``catalog``'s ``image``'s import credentials Secret and CA ConfigMap: ``<catalog>-<image>-import`` and
    ``<catalog>-<image>-import-ca``, unique in CDI's namespace too, where a registry image's copies live."""
    return f"{catalog}-{image}-import", f"{catalog}-{image}-import-ca"


def _source(catalog: str, name: str, image: CatalogImageSpec) -> dict[str, Any]:
    return import_source(image.source, *import_object_names(catalog, name))


def catalog_objects(catalog: str, spec: ImageCatalogSpec, default_class: str) -> list[dict[str, Any]]:
    """The catalog's DataImportCrons, DataVolumes and DataSources, image by image and class by class (see the
    module doc). An HTTP image's DataVolume name ends in the first 8 hex digits of the SHA-256 of what it imports
    (source, size, class), so that a change imports a new copy rather than updating an immutable spec."""
    out: list[dict[str, Any]] = []
    for image_name, image in spec.images.items():
        for storage_class in image.storage_classes or [default_class]:
            source_name = data_source_name(image_name, storage_class)
            source = _source(catalog, image_name, image)
            storage = _size(image, storage_class)
            if image.source.registry:
                cron_spec = {
                    "template": {"spec": {"source": source, "storage": storage}},
                    "schedule": image.effective_schedule,
                    "managedDataSource": source_name,
                    "importsToKeep": image.imports_to_keep,
                    "garbageCollect": "Outdated",
                    "retentionPolicy": "RetainAll",
                }
                out.append(_object("DataImportCron", _meta(catalog, source_name), cron_spec))
                continue
            digest = hashlib.sha256(json.dumps([source, storage], sort_keys=True).encode()).hexdigest()[:8]
            volume = f"{source_name}-{digest}"
            meta = _meta(catalog, volume, annotations=dict(IMMEDIATE_BINDING))
            out.append(_object("DataVolume", meta, {"source": source, "storage": storage}))
            pvc = {"source": {"pvc": {"namespace": catalog, "name": volume}}}
            out.append(_object("DataSource", _meta(catalog, source_name), pvc))
    return out


def _object(kind: str, metadata: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": CDI_API_VERSION, "kind": kind, "metadata": metadata, "spec": spec}


def clone_rbac(catalog: str, tenants: Mapping[str, Sequence[str]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The catalog's clone ``Role`` and ``RoleBinding`` (:data:`CLONE_ROLE`, see the module doc) for ``tenants``
    (tenant -> its groups)."""
    role = {
        "apiVersion": f"{_RBAC}/v1",
        "kind": "Role",
        "metadata": _meta(catalog, CLONE_ROLE),
        "rules": [
            {"apiGroups": ["cdi.kubevirt.io"], "resources": ["datavolumes/source"], "verbs": ["create"]},
            {"apiGroups": ["cdi.kubevirt.io"], "resources": ["datasources"], "verbs": ["get", "list", "watch"]},
        ],
    }
    subjects: list[dict[str, str]] = []
    for tenant, groups in tenants.items():
        subjects.append({"kind": "Group", "apiGroup": _RBAC, "name": f"system:serviceaccounts:tenant-{tenant}"})
        subjects += [{"kind": "Group", "apiGroup": _RBAC, "name": group} for group in groups]
    binding = {
        "apiVersion": f"{_RBAC}/v1",
        "kind": "RoleBinding",
        "metadata": _meta(catalog, CLONE_ROLE),
        "roleRef": {"apiGroup": _RBAC, "kind": "Role", "name": CLONE_ROLE},
        "subjects": subjects,
    }
    return role, binding


class ImageCatalog(CellComponent):
    """One image catalog of a cell (``gpucell:index:ImageCatalog``), on the provider of ``args.cluster`` and after its
    ``ready``; give ``opts`` the CDI CR (its CRDs, its webhooks) to come after.

    Children: ``f"{name}-namespace"`` (taking ``removal_policy``: deleting it deletes every imported image),
    ``f"{name}-<image>-import"`` (Secret) and ``f"{name}-<image>-import-ca"`` (ConfigMap) where an image has them,
    and for a registry image also ``f"{name}-<image>-import-cdi"``/``f"{name}-<image>-import-ca-cdi"``, their copies in
    CDI's namespace (:func:`import_object_names`),
    ``f"{name}-<object name>"`` per :func:`catalog_objects` entry (DataImportCrons replaced on any spec change,
    delete first), ``f"{name}-clone-role"``/``f"{name}-clone"`` (:func:`clone_rbac`).
    """

    namespace: pulumi.Output[str]
    """The catalog's namespace, once it exists."""

    def __init__(self, name: str, args: ImageCatalogArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("ImageCatalog", name, opts, args.cluster)
        catalog = args.namespace
        minor = f"v{args.cluster.kubernetes_version}"
        labels = {**MANAGED_BY, CATALOG_LABEL: catalog}
        for mode in ("enforce", "warn", "audit"):
            labels[f"pod-security.kubernetes.io/{mode}"] = "restricted"
            labels[f"pod-security.kubernetes.io/{mode}-version"] = minor
        self.namespace_resource = Namespace(
            f"{name}-namespace",
            metadata={"name": catalog, "labels": labels},
            opts=self.child(**removal_options(args.removal_policy)),
        )
        inside: list[pulumi.Resource] = [self.namespace_resource]
        for image_name, image in args.spec.images.items():
            # A registry image's DataImportCron polls from CDI's namespace, which needs its own copies (module doc).
            namespaces = [catalog, CDI_NAMESPACE] if image.source.registry else [catalog]
            for namespace in namespaces:
                inside += self._import_objects(
                    name, namespace, catalog, image_name, image=image, credentials=args.credentials
                )
        self.objects: list[pulumi.Resource] = []
        """The DataImportCrons, DataVolumes and DataSources."""
        by_name: dict[str, pulumi.Resource] = {}
        for obj in catalog_objects(catalog, args.spec, args.default_class):
            after = list(inside)
            pointed = obj["spec"].get("source", {}).get("pvc", {}).get("name") if obj["kind"] == "DataSource" else None
            if pointed in by_name:
                after.append(by_name[pointed])
            immutable = {"replace_on_changes": ["spec"], "delete_before_replace": True}
            options = self.child(depends_on=after, **(immutable if obj["kind"] == "DataImportCron" else {}))
            resource = custom_resource(f"{name}-{obj['metadata']['name']}", obj, options)
            by_name[obj["metadata"]["name"]] = resource
            self.objects.append(resource)
        role, binding = clone_rbac(catalog, args.tenants)
        rbac_after = self.child(depends_on=inside[:1])
        self.clone_role = Role(f"{name}-clone-role", metadata=role["metadata"], rules=role["rules"], opts=rbac_after)
        self.clone_binding = RoleBinding(
            f"{name}-clone",
            metadata=binding["metadata"],
            role_ref=binding["roleRef"],
            subjects=binding["subjects"],
            opts=self.child(depends_on=[*inside[:1], self.clone_role]),
        )
        self.namespace = self.namespace_resource.urn.apply(lambda _: catalog)
        self.register_outputs({"namespace": self.namespace})

    def _import_objects(
        self,
        name: str,
        namespace: str,
        catalog: str,
        image_name: str,
        *,
        image: CatalogImageSpec,
        credentials: Mapping[str, pulumi.Input[str]],
    ) -> list[pulumi.Resource]:
        """``image``'s credentials Secret and CA ConfigMap in ``namespace`` (the catalog's, or CDI's for a registry
        image's poller), where it has them; children ``f"{name}-{image_name}-import"``/``-import-ca``, with ``-cdi``
        after ``import`` for CDI's copies."""
        secret_name, ca_name = import_object_names(catalog, image_name)
        suffix = "-cdi" if namespace != catalog else ""
        labels = {**MANAGED_BY, CATALOG_LABEL: catalog}
        after = self.child(depends_on=[self.namespace_resource])
        made: list[pulumi.Resource] = []
        key = image.source.credentials_config_key
        if key is not None:
            made.append(
                Secret(
                    f"{name}-{image_name}-import{suffix}",
                    metadata={"name": secret_name, "namespace": namespace, "labels": labels},
                    type="Opaque",
                    string_data=pulumi.Output.secret(credentials[key]).apply(import_secret_data),
                    opts=after,
                )
            )
        if image.source.ca_bundle is not None:
            made.append(
                ConfigMap(
                    f"{name}-{image_name}-import-ca{suffix}",
                    metadata={"name": ca_name, "namespace": namespace, "labels": labels},
                    data={CA_BUNDLE_KEY: image.source.ca_bundle},
                    opts=after,
                )
            )
        return made
