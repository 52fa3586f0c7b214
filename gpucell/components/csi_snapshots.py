"""CSI snapshots in a cell: the VolumeSnapshot CRDs, the snapshot-controller, and Longhorn's VolumeSnapshotClass.

A CSI driver's ``csi-snapshotter`` sidecar (Longhorn 1.12.1 runs ``longhornio/csi-snapshotter:v8.6.0``) only acts
on VolumeSnapshotContents; turning a ``VolumeSnapshot`` into one is the job of the cluster-wide snapshot-controller,
which, like the CRDs, "should be installed as part of the base Kubernetes distribution" (external-snapshotter
``deploy/kubernetes/snapshot-controller/setup-snapshot-controller.yaml``). k3s ships neither, nor does Longhorn's
chart (Longhorn docs, "Enable CSI Snapshot Support"), so backups (Velero's CSI snapshots) need them. What is
registered, with ``versions.externalSnapshotter`` (v8.6.0):

- the three CRDs of ``snapshot.storage.k8s.io/v1`` (``client/config/crd/snapshot.storage.k8s.io_*.yaml`` at the
  tag, one ``ConfigFile`` each, ``retainOnDelete``: deleting a CRD deletes every VolumeSnapshot in the cluster,
  other tools' too). The ``groupsnapshot.storage.k8s.io`` CRDs are left out: the controller watches them only with
  its ``CSIVolumeGroupSnapshot`` gate (default off at v8.6.0, ``pkg/features/features.go``);
- in ``kube-system``: ServiceAccount ``snapshot-controller``, ClusterRole ``snapshot-controller-runner`` and its
  binding, the leader-election Role and binding, as ``deploy/kubernetes/snapshot-controller/
  rbac-snapshot-controller.yaml`` has them (without the group-snapshot rules), and the Deployment
  ``snapshot-controller``: two replicas with leader election, ``maxSurge: 0``, ``minReadySeconds: 35`` as upstream,
  the image of the pinned release (the tag's own manifest still names ``v8.5.0``), diagnostics on ``:8080`` for the
  liveness probe (``--http-endpoint``, ``/healthz/leader-election``), non-root and read-only;
- the ``VolumeSnapshotClass`` :data:`LONGHORN_CLASS` for ``driver.longhorn.io`` with ``type: snap`` (a Longhorn
  snapshot inside the volume, which a data mover then copies elsewhere; Longhorn docs "CSI VolumeSnapshot Associated
  with Longhorn Snapshot"), labelled ``velero.io/csi-volumesnapshot-class: "true"``: Velero picks, per driver, the
  one class carrying that label (Velero 1.18 docs "Container Storage Interface Snapshot Support").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi_kubernetes.apps.v1 import Deployment
from pulumi_kubernetes.core.v1 import ServiceAccount
from pulumi_kubernetes.rbac.v1 import ClusterRole, ClusterRoleBinding, Role, RoleBinding
from pulumi_kubernetes.yaml.v2 import ConfigFile

from gpucell._component import MANAGED_BY, CellComponent
from gpucell.cluster import Cluster

if TYPE_CHECKING:
    from gpucell.spec import CellSpec

__all__ = [
    "CONTROLLER",
    "CRD_PLURALS",
    "LONGHORN_CLASS",
    "LONGHORN_DRIVER",
    "NAMESPACE",
    "VELERO_CLASS_LABEL",
    "CsiSnapshots",
    "CsiSnapshotsArgs",
    "KubernetesObject",
    "controller_deployment",
    "controller_rbac",
    "crd_url",
    "snapshot_class",
]

NAMESPACE = "kube-system"
"""Where the snapshot-controller runs (upstream's manifests)."""
CONTROLLER = "snapshot-controller"
"""Name of its Deployment and ServiceAccount."""
IMAGE = "registry.k8s.io/sig-storage/snapshot-controller"
"""The controller's image repository."""
CRD_PLURALS = ("volumesnapshotclasses", "volumesnapshotcontents", "volumesnapshots")
"""The ``snapshot.storage.k8s.io`` CRDs installed."""
LONGHORN_DRIVER = "driver.longhorn.io"
"""Longhorn's CSI driver name."""
LONGHORN_CLASS = "longhorn-snapshot"
"""The VolumeSnapshotClass of Longhorn volumes."""
VELERO_CLASS_LABEL = "velero.io/csi-volumesnapshot-class"
"""Label (value ``"true"``) by which Velero picks a driver's VolumeSnapshotClass."""
_SNAPSHOT_GROUP = "snapshot.storage.k8s.io"
_RBAC = "rbac.authorization.k8s.io"


def crd_url(version: str, plural: str) -> str:
    """The CRD of ``plural`` at external-snapshotter ``version``:
    ``https://raw.githubusercontent.com/kubernetes-csi/external-snapshotter/<tag>/client/config/crd/
    snapshot.storage.k8s.io_<plural>.yaml``."""
    tag = version if version.startswith("v") else f"v{version}"
    return (
        "https://raw.githubusercontent.com/kubernetes-csi/external-snapshotter/"
        f"{tag}/client/config/crd/{_SNAPSHOT_GROUP}_{plural}.yaml"
    )


def _meta(name: str, namespace: str | None = NAMESPACE) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {**MANAGED_BY, "app.kubernetes.io/name": CONTROLLER}}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def controller_rbac() -> list[dict[str, Any]]:
    """The controller's ServiceAccount, ClusterRole (PVs read, PVCs updated for their finalizer, events, snapshot
    classes read, snapshots and contents managed), ClusterRoleBinding, and the Role and RoleBinding on ``leases``
    for leader election: external-snapshotter v8.6.0 ``rbac-snapshot-controller.yaml`` without the
    ``groupsnapshot.storage.k8s.io`` rules."""
    read = ["get", "list", "watch"]
    account = {"kind": "ServiceAccount", "name": CONTROLLER, "namespace": NAMESPACE}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(CONTROLLER)},
        {
            "apiVersion": f"{_RBAC}/v1",
            "kind": "ClusterRole",
            "metadata": _meta("snapshot-controller-runner", None),
            "rules": [
                {"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": read},
                {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": [*read, "update"]},
                {"apiGroups": [""], "resources": ["events"], "verbs": ["list", "watch", "create", "update", "patch"]},
                {"apiGroups": [_SNAPSHOT_GROUP], "resources": ["volumesnapshotclasses"], "verbs": read},
                {
                    "apiGroups": [_SNAPSHOT_GROUP],
                    "resources": ["volumesnapshotcontents"],
                    "verbs": ["create", *read, "update", "delete", "patch"],
                },
                {"apiGroups": [_SNAPSHOT_GROUP], "resources": ["volumesnapshotcontents/status"], "verbs": ["patch"]},
                {
                    "apiGroups": [_SNAPSHOT_GROUP],
                    "resources": ["volumesnapshots"],
                    "verbs": ["create", *read, "update", "patch", "delete"],
                },
                {"apiGroups": [_SNAPSHOT_GROUP], "resources": ["volumesnapshots/status"], "verbs": ["update", "patch"]},
            ],
        },
        {
            "apiVersion": f"{_RBAC}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": _meta("snapshot-controller-role", None),
            "subjects": [account],
            "roleRef": {"kind": "ClusterRole", "name": "snapshot-controller-runner", "apiGroup": _RBAC},
        },
        {
            "apiVersion": f"{_RBAC}/v1",
            "kind": "Role",
            "metadata": _meta("snapshot-controller-leaderelection"),
            "rules": [
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "verbs": [*read, "delete", "update", "create"],
                }
            ],
        },
        {
            "apiVersion": f"{_RBAC}/v1",
            "kind": "RoleBinding",
            "metadata": _meta("snapshot-controller-leaderelection"),
            "subjects": [account],
            "roleRef": {"kind": "Role", "name": "snapshot-controller-leaderelection", "apiGroup": _RBAC},
        },
    ]


def controller_deployment(version: str) -> dict[str, Any]:
    """The ``snapshot-controller`` Deployment of ``version`` (see the module doc): image
    ``registry.k8s.io/sig-storage/snapshot-controller:<version>``, args ``--leader-election=true`` and
    ``--http-endpoint=:8080``, liveness on ``/healthz/leader-election``, 50m CPU and 64 MiB requested (256 MiB
    limit), UID 65532 non-root, read-only root, no capabilities, seccomp ``RuntimeDefault``."""
    tag = version if version.startswith("v") else f"v{version}"
    labels = {"app.kubernetes.io/name": CONTROLLER}
    reasons = [
        "CKV_K8S_43=a release tag of registry.k8s.io, whose image promotion never moves a tag; the pinned "
        "versions.externalSnapshotter names it",
        "CKV_K8S_38=the controller reads and writes snapshots through the API, with this ServiceAccount's token",
        "CKV2_K8S_6=a platform controller in kube-system; tenant isolation is the tenants' CiliumNetworkPolicies",
    ]
    metadata = _meta(CONTROLLER)
    metadata["annotations"] = {f"checkov.io/skip{i}": reason for i, reason in enumerate(reasons, start=1)}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "minReadySeconds": 35,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": CONTROLLER,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 65532,
                        "runAsGroup": 65532,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [
                        {
                            "name": CONTROLLER,
                            "image": f"{IMAGE}:{tag}",
                            "imagePullPolicy": "Always",
                            "args": ["--leader-election=true", "--http-endpoint=:8080"],
                            "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                            "livenessProbe": {
                                "httpGet": {"path": "/healthz/leader-election", "port": "http"},
                                "initialDelaySeconds": 10,
                                "periodSeconds": 20,
                                "timeoutSeconds": 10,
                                "failureThreshold": 3,
                            },
                            "readinessProbe": {"httpGet": {"path": "/metrics", "port": "http"}, "periodSeconds": 20},
                            "resources": {
                                "requests": {"cpu": "50m", "memory": "64Mi"},
                                "limits": {"cpu": "500m", "memory": "256Mi"},
                            },
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]},
                            },
                        }
                    ],
                },
            },
        },
    }


def snapshot_class() -> dict[str, Any]:
    """The ``VolumeSnapshotClass`` :data:`LONGHORN_CLASS` (see the module doc): ``deletionPolicy: Delete`` (Velero
    deletes the snapshot once its data is in the bucket)."""
    meta = _meta(LONGHORN_CLASS, None)
    meta["labels"] = {**MANAGED_BY, VELERO_CLASS_LABEL: "true"}
    return {
        "apiVersion": f"{_SNAPSHOT_GROUP}/v1",
        "kind": "VolumeSnapshotClass",
        "metadata": meta,
        "driver": LONGHORN_DRIVER,
        "deletionPolicy": "Delete",
        "parameters": {"type": "snap"},
    }


class KubernetesObject(pulumi.CustomResource):
    """Any Kubernetes object registered with the fields it has, for kinds whose data is not under ``spec`` (a
    ``VolumeSnapshotClass``'s ``driver``): ``apiextensions.CustomResource`` passes on ``spec`` alone. The type token
    is pulumi-kubernetes' own for the kind (``kubernetes:<apiVersion>:<kind>``), so the provider applies it as it
    applies any custom resource."""

    def __init__(self, resource_name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions) -> None:
        super().__init__(f"kubernetes:{manifest['apiVersion']}:{manifest['kind']}", resource_name, dict(manifest), opts)


@dataclass(frozen=True)
class CsiSnapshotsArgs:
    """Inputs of :class:`CsiSnapshots`."""

    cluster: Cluster
    """The cluster to install into (its provider; children wait for its ``ready``)."""
    version: str
    """external-snapshotter release (``versions.externalSnapshotter``)."""
    storage: pulumi.Resource | None = None
    """What installs Longhorn (its Release): the VolumeSnapshotClass names its driver, so it comes after."""

    @classmethod
    def from_cell(cls, cell: CellSpec, cluster: Cluster, storage: pulumi.Resource | None = None) -> CsiSnapshotsArgs:
        """The args of ``cell``: its pinned ``versions.externalSnapshotter``; ``storage`` as :attr:`storage`."""
        return cls(cluster, cell.versions.external_snapshotter, storage)


class CsiSnapshots(CellComponent):
    """CSI snapshots for one cell (``gpucell:index:CsiSnapshots``). Children: ``f"{name}-crd-<plural>"`` (three
    ``ConfigFile``), ``f"{name}-<kind>"`` for the controller's objects (``-service-account``, ``-cluster-role``,
    ``-cluster-role-binding``, ``-role``, ``-role-binding``, ``-controller``) and ``f"{name}-longhorn-class"``."""

    snapshot_class_name: pulumi.Output[str]
    """:data:`LONGHORN_CLASS`, once the class exists."""

    def __init__(self, name: str, args: CsiSnapshotsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("CsiSnapshots", name, opts)
        on = self._on(args.cluster)
        self.crds = [
            ConfigFile(f"{name}-crd-{plural}", file=crd_url(args.version, plural), opts=on(retain_on_delete=True))
            for plural in CRD_PLURALS
        ]
        suffixes = ["service-account", "cluster-role", "cluster-role-binding", "role", "role-binding"]
        self.rbac: list[pulumi.CustomResource] = []
        for suffix, obj in zip(suffixes, controller_rbac(), strict=True):
            self.rbac.append(_rbac_object(f"{name}-{suffix}", obj, on()))
        deployment = controller_deployment(args.version)
        self.controller = Deployment(
            f"{name}-controller",
            metadata=deployment["metadata"],
            spec=deployment["spec"],
            opts=on(*self.crds, *self.rbac),
        )
        storage = [args.storage] if args.storage is not None else []
        self.snapshot_class = KubernetesObject(f"{name}-longhorn-class", snapshot_class(), on(*self.crds, *storage))
        self.snapshot_class_name = self.snapshot_class.urn.apply(lambda _: LONGHORN_CLASS)
        self.register_outputs({"snapshotClassName": self.snapshot_class_name})

    def _on(self, cluster: Cluster) -> Any:
        """Options for a child on ``cluster``: this component as parent, the cluster's provider, after ``ready``."""

        def options(*after: pulumi.Resource, **extra: Any) -> pulumi.ResourceOptions:
            return self.child(depends_on=[*cluster.ready, *after], providers={"kubernetes": cluster.provider}, **extra)

        return options


def _rbac_object(resource_name: str, obj: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    kind = obj["kind"]
    if kind == "ServiceAccount":
        return ServiceAccount(resource_name, metadata=obj["metadata"], opts=opts)
    if kind == "ClusterRole":
        return ClusterRole(resource_name, metadata=obj["metadata"], rules=obj["rules"], opts=opts)
    if kind == "Role":
        return Role(resource_name, metadata=obj["metadata"], rules=obj["rules"], opts=opts)
    binding = ClusterRoleBinding if kind == "ClusterRoleBinding" else RoleBinding
    return binding(
        resource_name, metadata=obj["metadata"], subjects=obj["subjects"], role_ref=obj["roleRef"], opts=opts
    )
