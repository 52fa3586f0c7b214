"""CDI (Containerized Data Importer): imports, uploads and clones VM disk images into PVCs.

The operator comes from the pinned release's manifest (``cdi-operator.yaml`` of the GitHub release
``kubevirt/containerized-data-importer`` ``<version>``; it creates the ``cdi`` namespace, the CRDs and the
operator Deployment). Configuration lives in the cluster-scoped ``CDI`` custom resource (checked against
``v1beta1.CDI`` in CDI v1.66.0 ``api/openapi-spec/swagger.json``). Then the ``StorageProfile`` CDI keeps for
the cluster's default StorageClass is patched so DataVolumes that only name a size get the PVC shape VM disks
need there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi_kubernetes.apiextensions import CustomResource, CustomResourcePatch
from pulumi_kubernetes.yaml.v2 import ConfigFile

from gpucell._component import CellComponent
from gpucell.components.kubevirt import WAIT_FOR_AVAILABLE, release_tag
from gpucell.components.platform_tolerations import vm_pool_tolerations
from gpucell.errors import ConfigError, shown
from gpucell.spec.lifecycle import RemovalPolicy, removal_options
from gpucell.spec.platform import CdiSpec
from gpucell.spec.pools import NodePool
from gpucell.spec.versions import Versions
from gpucell.spec.workloads import AccessMode, VolumeMode

if TYPE_CHECKING:
    from gpucell.cluster import Cluster
    from gpucell.components.storage import Storage
    from gpucell.spec.cell import CellSpec

__all__ = [
    "API_VERSION",
    "CR_NAME",
    "FEATURE_GATES",
    "NAMESPACE",
    "PATCH_FORCE",
    "Cdi",
    "CdiArgs",
    "VolumeClass",
    "cdi_spec",
    "operator_manifest_url",
    "storage_profile_spec",
]

API_VERSION = "cdi.kubevirt.io/v1beta1"
"""API version of the ``CDI`` and ``StorageProfile`` kinds."""
CR_NAME = "cdi"
"""Name of the cluster-scoped ``CDI`` CR (the operator manages exactly one)."""
NAMESPACE = "cdi"
"""The namespace the operator manifest installs CDI into, where its controller runs a ``DataImportCron``'s digest
poller (``newCronJob`` in ``pkg/controller/dataimportcron-controller.go`` at v1.66.0: ``r.cdiNamespace``)."""
FEATURE_GATES = ("HonorWaitForFirstConsumer",)
"""CDI feature gates, as the release's own ``cdi-cr.yaml`` sets them. ``HonorWaitForFirstConsumer`` keeps CDI
from binding a ``WaitForFirstConsumer`` PVC (``local-path``) with its importer pod: the disk is imported where
the VM that consumes it is scheduled, instead of pinning the VM to wherever the importer ran."""
PATCH_FORCE = {"pulumi.com/patchForce": "true"}
"""Server-side apply wins field conflicts: gpucell is the source of truth for the patched fields."""


@dataclass(frozen=True)
class VolumeClass:
    """A StorageClass VM disks live in and the PVC shape they need there: what :class:`Cdi` takes of the storage.

    :meth:`of` takes them from gpucell's :class:`~gpucell.components.storage.Storage`; on a cluster with storage of its
    own, name its default class and the shape its CSI driver serves (``Block`` when it serves raw block volumes).
    """

    name: pulumi.Input[str]
    """The StorageClass: CDI's scratch space and the StorageProfile patched (the cluster's default class)."""
    access_modes: Sequence[str] = ("ReadWriteOnce",)
    """``accessModes`` of a VM disk's PVC (:class:`~gpucell.spec.workloads.AccessMode` values). Defaults to
    ``ReadWriteOnce``."""
    volume_mode: str = "Filesystem"
    """``volumeMode`` of a VM disk's PVC (:class:`~gpucell.spec.workloads.VolumeMode`): ``Filesystem`` (default) or
    ``Block``."""
    ready: Sequence[pulumi.Resource] = ()
    """What must exist before the class can be used (the ``CDI`` CR waits for it)."""

    def __post_init__(self) -> None:
        """Raises :class:`~gpucell.errors.ConfigError` (one line per problem) for a mode Kubernetes does not know:
        the StorageProfile would be applied with it, and every VM disk's PVC refused."""
        problems = [
            f"VolumeClass.access_modes[{index}]: {shown(mode)} is not one of {', '.join(AccessMode)}"
            for index, mode in enumerate(self.access_modes)
            if mode not in set(AccessMode)
        ]
        if self.volume_mode not in set(VolumeMode):
            problems.append(f"VolumeClass.volume_mode: {shown(self.volume_mode)} is not one of {', '.join(VolumeMode)}")
        if problems:
            raise ConfigError(problems)

    @classmethod
    def of(cls, storage: Storage) -> VolumeClass:
        """The class of gpucell's storage layer: its class name, PVC shape and ready resources."""
        return cls(storage.storage_class_name, tuple(storage.access_modes), storage.volume_mode, tuple(storage.ready))


@dataclass(frozen=True)
class CdiArgs:
    """Inputs of :class:`Cdi`: only what it uses."""

    cluster: Cluster
    """The cluster to install into (its provider and readiness)."""
    volumes: VolumeClass
    """The StorageClass of VM disks: CDI's scratch space, the StorageProfile patched; the CDI CR waits for its
    ``ready``."""
    spec: CdiSpec = field(default_factory=CdiSpec)
    """The ``cdi`` settings (``uploadProxyUrl``). Defaults to none."""
    node_pools: Mapping[str, NodePool] = field(default_factory=dict)
    """The cluster's node pools: CDI's importer, uploader and cloner pods tolerate the taints of the pools VMs run on.
    Defaults to none."""
    version: str = Versions().cdi
    """CDI release (``versions.cdi``); defaults to gpucell's pin."""
    removal_policy: RemovalPolicy = RemovalPolicy.PROTECT
    """What removing the component may do to the operator manifest and the CR (deleting them deletes every
    DataVolume): ``protect`` (default), ``retain`` or ``delete``."""

    @classmethod
    def from_cell(cls, cell: CellSpec, cluster: Cluster, storage: Storage) -> CdiArgs:
        """CDI of ``cell`` on ``cluster`` over its ``storage`` layer: ``cdi``, ``nodePools``, ``versions.cdi`` and the
        region's ``removalPolicy``."""
        return cls(cluster, VolumeClass.of(storage), cell.cdi, cell.node_pools, cell.versions.cdi, cell.removal_policy)


def operator_manifest_url(version: str) -> str:
    """URL of the operator manifest of CDI ``version`` (``versions.cdi``)."""
    tag = release_tag(version)
    return f"https://github.com/kubevirt/containerized-data-importer/releases/download/{tag}/cdi-operator.yaml"


def cdi_spec(
    scratch_class: pulumi.Input[str],
    upload_proxy_url: str | None = None,
    workload_tolerations: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """The ``spec`` of the ``CDI`` CR.

    - ``config.scratchSpaceStorageClass``: the cell's default class. CDI needs scratch space (always a
      ``Filesystem`` ``ReadWriteOnce`` PVC) to convert images and to import into block volumes; naming the
      class keeps that working whatever the default class is later.
    - ``config.featureGates``: :data:`FEATURE_GATES`.
    - ``config.uploadProxyURLOverride``: only when ``upload_proxy_url`` is given.
    - ``imagePullPolicy: IfNotPresent``, and ``infra``/``workload`` as in the release's ``cdi-cr.yaml``: Linux
      nodes, and the control plane tolerating ``CriticalAddonsOnly`` (a taint k3s HA servers often carry).
    - ``workload.tolerations``: ``workload_tolerations`` when given (the taints of the pools VMs run on,
      :func:`gpucell.components.platform_tolerations.vm_pool_tolerations`): CDI's importer, uploader and cloner pods are
      placed by ``spec.workload`` (``api.NodePlacement`` in the CDI v1.66.0 swagger, "Restrict on which nodes CDI
      workload pods will be scheduled"), and with ``WaitForFirstConsumer`` an importer runs on the VM's node.
    """
    config: dict[str, Any] = {"scratchSpaceStorageClass": scratch_class, "featureGates": list(FEATURE_GATES)}
    if upload_proxy_url is not None:
        config["uploadProxyURLOverride"] = upload_proxy_url
    linux = {"kubernetes.io/os": "linux"}
    return {
        "config": config,
        "imagePullPolicy": "IfNotPresent",
        "infra": {
            "nodeSelector": linux,
            "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
        },
        "workload": {
            "nodeSelector": dict(linux),
            **({"tolerations": workload_tolerations} if workload_tolerations else {}),
        },
    }


def storage_profile_spec(volumes: VolumeClass) -> dict[str, Any]:
    """``StorageProfile.spec``: the claim property set ``volumes.access_modes`` + ``volumes.volume_mode``; on a
    ``Block`` class also ``ReadWriteOnce`` + ``Filesystem`` after it.

    CDI fills in ``accessModes``/``volumeMode`` of a DataVolume's PVC from the first set when the DataVolume
    leaves them out, and the ``volumeMode`` from the first set with its access mode when it gives only that (CDI
    v1.66.0 ``pkg/controller/datavolume/util.go``), so VM disks stay on the first. The second is for KubeVirt's
    backend-storage PVCs (persistent EFI NVRAM and TPM state, always ``Filesystem``): KubeVirt v1.9.0 asks for
    ``ReadWriteOnce`` when the profile has a ``Filesystem`` set with it, and ``ReadWriteMany`` otherwise
    (``getAccessMode`` in ``pkg/storage/backend-storage/backend-storage.go``), which a Longhorn volume serves only
    through its NFS share manager. Both keys of a set must be set together.
    """
    claim = {"accessModes": list(volumes.access_modes), "volumeMode": volumes.volume_mode}
    sets = [claim]
    if volumes.volume_mode == "Block":
        sets.append({"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem"})
    return {"claimPropertySets": sets}


class Cdi(CellComponent):
    """CDI for one cluster. Depend on :attr:`storage_profile` (or this component) before creating DataVolumes.

    Children, on the provider of ``args.cluster`` and after its ``ready``: ``f"{name}-operator"``
    (``kubernetes:yaml/v2:ConfigFile`` of the operator manifest); ``f"{name}-cdi"`` (the ``CDI`` CR ``cdi``,
    annotated ``pulumi.com/waitFor: condition=Available``, depending on the operator and on ``volumes.ready``);
    ``f"{name}-storage-profile"`` (a ``kubernetes:cdi.kubevirt.io/v1beta1:StorageProfilePatch`` of the profile named
    after the storage class, applied server-side after the CR is Available, since CDI's controller creates the
    profile itself). The operator manifest and the CR take ``args.removal_policy`` (``protect`` by default).
    """

    def __init__(self, name: str, args: CdiArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("Cdi", name, opts, args.cluster)
        volumes = args.volumes
        # Deleting the operator manifest deletes CDI's CRDs, and with them every DataVolume (VM disks).
        lifecycle = removal_options(args.removal_policy)
        self.operator = ConfigFile(
            f"{name}-operator", file=operator_manifest_url(args.version), opts=self.child(**lifecycle)
        )
        self.cr = CustomResource(
            f"{name}-cdi",
            api_version=API_VERSION,
            kind="CDI",
            metadata={"name": CR_NAME, "annotations": dict(WAIT_FOR_AVAILABLE)},
            spec=cdi_spec(volumes.name, args.spec.upload_proxy_url, vm_pool_tolerations(args.node_pools)),
            opts=self.child(depends_on=[self.operator, *volumes.ready], **lifecycle),
        )
        self.storage_profile = CustomResourcePatch(
            f"{name}-storage-profile",
            api_version=API_VERSION,
            kind="StorageProfile",
            metadata={"name": volumes.name, "annotations": dict(PATCH_FORCE)},
            spec=storage_profile_spec(volumes),
            opts=self.child(depends_on=[self.cr]),
        )
        self.register_outputs({})
