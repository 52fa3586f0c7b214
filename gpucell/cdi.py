"""CDI (Containerized Data Importer): imports, uploads and clones VM disk images into PVCs.

The operator comes from the pinned release's manifest (``cdi-operator.yaml`` of the GitHub release
``kubevirt/containerized-data-importer`` ``<version>``; it creates the ``cdi`` namespace, the CRDs and the
operator Deployment). Configuration lives in the cluster-scoped ``CDI`` custom resource (checked against
``v1beta1.CDI`` in CDI v1.66.0 ``api/openapi-spec/swagger.json``). Then the ``StorageProfile`` CDI keeps for
the cell's default StorageClass is patched so DataVolumes that only name a size get the PVC shape VM disks
need there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi_kubernetes.apiextensions import CustomResource, CustomResourcePatch
from pulumi_kubernetes.yaml.v2 import ConfigFile

from gpucell._component import CellComponent
from gpucell.kubevirt import WAIT_FOR_AVAILABLE, release_tag
from gpucell.platform_tolerations import vm_pool_tolerations
from gpucell.spec import CellSpec
from gpucell.spec.lifecycle import removal_options
from gpucell.storage import Storage

__all__ = [
    "API_VERSION",
    "CR_NAME",
    "FEATURE_GATES",
    "NAMESPACE",
    "PATCH_FORCE",
    "Cdi",
    "CdiArgs",
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
class CdiArgs:
    """Inputs of :class:`Cdi`."""

    cell: CellSpec
    """The cell; ``versions.cdi`` and ``cdi.upload_proxy_url`` are used."""
    storage: Storage
    """The cell's storage layer: its class is CDI's scratch space; the CDI CR waits for ``storage.ready``."""


def operator_manifest_url(cell: CellSpec) -> str:
    """URL of the operator manifest of ``versions.cdi``."""
    tag = release_tag(cell.versions.cdi)
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
      :func:`gpucell.platform_tolerations.vm_pool_tolerations`): CDI's importer, uploader and cloner pods are
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


def storage_profile_spec(storage: Storage) -> dict[str, Any]:
    """``StorageProfile.spec``: the claim property set ``storage.access_modes`` + ``storage.volume_mode``; on a
    ``Block`` class also ``ReadWriteOnce`` + ``Filesystem`` after it.

    CDI fills in ``accessModes``/``volumeMode`` of a DataVolume's PVC from the first set when the DataVolume
    leaves them out, and the ``volumeMode`` from the first set with its access mode when it gives only that (CDI
    v1.66.0 ``pkg/controller/datavolume/util.go``), so VM disks stay on the first. The second is for KubeVirt's
    backend-storage PVCs (persistent EFI NVRAM and TPM state, always ``Filesystem``): KubeVirt v1.9.0 asks for
    ``ReadWriteOnce`` when the profile has a ``Filesystem`` set with it, and ``ReadWriteMany`` otherwise
    (``getAccessMode`` in ``pkg/storage/backend-storage/backend-storage.go``), which a Longhorn volume serves only
    through its NFS share manager. Both keys of a set must be set together.
    """
    claim = {"accessModes": list(storage.access_modes), "volumeMode": storage.volume_mode}
    sets = [claim]
    if storage.volume_mode == "Block":
        sets.append({"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem"})
    return {"claimPropertySets": sets}


class Cdi(CellComponent):
    """CDI for one cell. Depend on :attr:`storage_profile` (or this component) before creating DataVolumes.

    Children: ``f"{name}-operator"`` (``kubernetes:yaml/v2:ConfigFile`` of the operator manifest);
    ``f"{name}-cdi"`` (the ``CDI`` CR ``cdi``, annotated ``pulumi.com/waitFor: condition=Available``,
    depending on the operator and on ``storage.ready``); ``f"{name}-storage-profile"`` (a
    ``kubernetes:cdi.kubevirt.io/v1beta1:StorageProfilePatch`` of the profile named after the storage class,
    applied server-side after the CR is Available, since CDI's controller creates the profile itself). The
    operator manifest and the CR take the region's ``removalPolicy`` (``protect`` by default).
    """

    def __init__(self, name: str, args: CdiArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("Cdi", name, opts)
        cell, storage = args.cell, args.storage
        # Deleting the operator manifest deletes CDI's CRDs, and with them every DataVolume (VM disks).
        lifecycle = removal_options(cell.removal_policy)
        self.operator = ConfigFile(f"{name}-operator", file=operator_manifest_url(cell), opts=self.child(**lifecycle))
        self.cr = CustomResource(
            f"{name}-cdi",
            api_version=API_VERSION,
            kind="CDI",
            metadata={"name": CR_NAME, "annotations": dict(WAIT_FOR_AVAILABLE)},
            spec=cdi_spec(storage.storage_class_name, args.cell.cdi.upload_proxy_url, vm_pool_tolerations(cell)),
            opts=self.child(depends_on=[self.operator, *storage.ready], **lifecycle),
        )
        self.storage_profile = CustomResourcePatch(
            f"{name}-storage-profile",
            api_version=API_VERSION,
            kind="StorageProfile",
            metadata={"name": storage.storage_class_name, "annotations": dict(PATCH_FORCE)},
            spec=storage_profile_spec(storage),
            opts=self.child(depends_on=[self.cr]),
        )
        self.register_outputs({})
