"""Backups: Velero in one cell, with KubeVirt's plugin, backing tenants' namespaces up on their own schedules.

What is registered with ``backups`` (decision 0025), in namespace ``velero``:

- the ``Namespace`` ``velero``, enforcing Pod Security ``baseline``: the node-agent and the data mover pods it
  starts run as root (Velero 1.18 ``pkg/exposer/csi_snapshot.go`` sets ``runAsUser: 0`` and reads the snapshot's
  block device), which ``restricted`` (the cell's default) refuses; no host path is mounted
  (``nodeAgent.disableHostPath``), so ``privileged`` is not needed;
- ``Secret`` :data:`BUCKET_SECRET` (key ``cloud``: the AWS credentials file the aws plugin reads through
  ``AWS_SHARED_CREDENTIALS_FILE``, chart ``credentials.existingSecret``) and ``Secret`` :data:`REPOSITORY_SECRET`
  (key ``repository-password``, the name and key Velero reads, ``pkg/repository/keys/keys.go`` at v1.18.1: without
  it Velero creates it with ``static-passw0rd``), both Pulumi secrets from the cell's config keys;
- the Helm release ``velero`` (:func:`velero_values`): the BackupStorageLocation ``default`` on the bucket, the
  plugins as init containers, ``EnableCSI``, the node-agent (data movers), the timeouts of ``volumeTimeoutHours``;
- per tenant with ``backup``: a ``Schedule`` ``tenant-<tenant>`` (:func:`schedule_manifest`).

The namespace, the repository password and the release take the region's ``removalPolicy`` (``protect`` by
default): they hold what reads every backup. Removing a tenant's ``backup`` deletes only its Schedule: the backups
it took stay until their ``ttl`` (``useOwnerReferencesInBackup: false``: no owner reference ties them to it).
Tenants get no role in ``velero`` (their RoleBindings are in their own namespace, and Velero's chart aggregates no
ClusterRole into ``admin``/``edit``), so no tenant can read, delete or restore a backup, nor change the
BackupStorageLocation; restores are the platform's (``gpucell restore``, docs/operations.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import pulumi
from pulumi_kubernetes.core.v1 import Namespace, Secret
from pulumi_kubernetes.helm.v3 import Release

from gpucell._component import MANAGED_BY, CellComponent, custom_resource
from gpucell.cluster import Cluster
from gpucell.components._chart import ChartSource, helm_release
from gpucell.spec.backups import BackupsSpec, TenantBackupSpec
from gpucell.spec.lifecycle import RemovalPolicy, removal_options
from gpucell.spec.tenancy import namespace_of

if TYPE_CHECKING:
    from gpucell.spec.cell import CellSpec

__all__ = [
    "AWS_PLUGIN_IMAGE",
    "BUCKET_SECRET",
    "CHART",
    "KUBEVIRT_PLUGIN_IMAGE",
    "LOCATION",
    "NAMESPACE",
    "RELEASE_NAME",
    "REPOSITORY_SECRET",
    "TENANT_LABEL",
    "BackupCredentials",
    "Backups",
    "BackupsArgs",
    "bucket_credentials_file",
    "restore_manifest",
    "schedule_manifest",
    "schedule_name",
    "velero_values",
]

CHART = ChartSource("velero", "https://vmware-tanzu.github.io/helm-charts")
"""The chart and its repository."""
NAMESPACE = "velero"
"""Velero's namespace: its server, node-agent, BackupStorageLocation, Schedules, Backups and Restores."""
RELEASE_NAME = "velero"
"""Helm release name."""
LOCATION = "default"
"""The BackupStorageLocation's name (the chart's default, and Velero's default location)."""
BUCKET_SECRET = "velero-bucket-credentials"
"""Secret with the bucket's credentials file (key ``cloud``)."""
REPOSITORY_SECRET = "velero-repo-credentials"
"""Secret with the backup repositories' password (key ``repository-password``): Velero's own name for it."""
AWS_PLUGIN_IMAGE = "velero/velero-plugin-for-aws"
"""velero-plugin-for-aws's image (its Makefile: REGISTRY velero, BIN velero-plugin-for-aws)."""
KUBEVIRT_PLUGIN_IMAGE = "quay.io/kubevirt/kubevirt-velero-plugin"
"""KubeVirt's Velero plugin image."""
TENANT_LABEL = "gpucell.io/tenant"
"""Label naming the tenant on its Schedule and, through the Schedule's template, on every Backup it takes."""
_POD_SECURITY = "baseline"


@dataclass(frozen=True)
class BackupCredentials:
    """The cell's two backup secrets (Pulumi secrets)."""

    bucket: pulumi.Input[str]
    """``<access key id>:<secret access key>`` of the bucket (``backups.storage.credentialsConfigKey``)."""
    repository_password: pulumi.Input[str]
    """The backup repositories' password (``backups.repositoryPasswordConfigKey``)."""


@dataclass(frozen=True)
class BackupsArgs:
    """Inputs of :class:`Backups`."""

    cluster: Cluster
    """The cluster to install into."""
    spec: BackupsSpec
    """``backups`` of the region."""
    credentials: BackupCredentials
    """The bucket credentials and the repository password."""
    chart_version: str
    """Velero chart version (``versions.velero``)."""
    aws_plugin: str
    """velero-plugin-for-aws release (``versions.veleroPluginForAws``)."""
    kubevirt_plugin: str
    """kubevirt-velero-plugin release (``versions.kubevirtVeleroPlugin``)."""
    tenants: Mapping[str, TenantBackupSpec] = field(default_factory=dict)
    """Tenant name -> its ``backup``: one Schedule each."""
    removal_policy: RemovalPolicy = RemovalPolicy.PROTECT
    """The region's ``removalPolicy``, for the namespace, the repository password and the release."""
    after: tuple[pulumi.Resource, ...] = ()
    """What Velero must come after besides the cluster: the CSI snapshot controller and class, KubeVirt."""

    @classmethod
    def from_cell(
        cls, cell: CellSpec, cluster: Cluster, credentials: BackupCredentials, after: tuple[pulumi.Resource, ...] = ()
    ) -> BackupsArgs:
        """The args of ``cell``: its ``backups``, pinned versions, tenants' backups and removal policy.

        Raises ``ValueError`` when ``cell`` has no ``backups``."""
        if cell.backups is None:
            raise ValueError("the cell has no backups section: Backups needs one")
        versions = cell.versions
        return cls(
            cluster,
            cell.backups,
            credentials,
            versions.velero,
            versions.velero_plugin_for_aws,
            versions.kubevirt_velero_plugin,
            {name: t.backup for name, t in cell.tenants.items() if t.backup is not None},
            cell.removal_policy,
            after,
        )


def bucket_credentials_file(credentials: str) -> str:
    """The AWS credentials file of ``"<access key id>:<secret access key>"`` (split at the first colon), profile
    ``default``, as velero-plugin-for-aws reads it. Raises ``ValueError`` without a colon or with an empty part; the
    message never includes the value."""
    key_id, sep, secret = credentials.partition(":")
    if not (sep and key_id and secret):
        raise ValueError("backups.storage credentials must be '<access key id>:<secret access key>'")
    return f"[default]\naws_access_key_id={key_id}\naws_secret_access_key={secret}\n"


def _plugin(name: str, image: str) -> dict[str, Any]:
    """An init container copying a plugin binary into the chart's ``plugins`` volume (the chart's documented
    ``initContainers`` shape)."""
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "volumeMounts": [{"mountPath": "/target", "name": "plugins"}],
    }


def velero_values(spec: BackupsSpec, aws_plugin: str, kubevirt_plugin: str) -> dict[str, Any]:
    """The chart values gpucell owns (``backups.values`` is merged over them; the spec refuses the owned paths):

    - ``configuration.backupStorageLocation``: one location :data:`LOCATION`, provider ``aws``, the bucket and
      prefix, ``default: true``, ``config`` :attr:`gpucell.spec.backups.BackupsSpec.location_config`;
    - ``credentials``: ``useSecret`` with ``existingSecret`` :data:`BUCKET_SECRET` (so no credential passes through
      Helm values);
    - ``initContainers``: the two plugins at their pinned releases;
    - ``configuration.features: EnableCSI``; ``dataMoverPrepareTimeout`` and ``defaultItemOperationTimeout`` of
      ``volumeTimeoutHours``;
    - ``deployNodeAgent: true`` with ``nodeAgent.disableHostPath: true``; ``snapshotsEnabled: false`` (no
      VolumeSnapshotLocation); ``upgradeCRDs: true``, ``cleanUpCRDs: false``.
    """
    location: dict[str, Any] = {
        "name": LOCATION,
        "provider": "aws",
        "bucket": spec.storage.bucket,
        "default": True,
        "accessMode": "ReadWrite",
        "config": spec.location_config,
    }
    if spec.storage.prefix is not None:
        location["prefix"] = spec.storage.prefix
    hours = f"{spec.volume_timeout_hours}h"
    return {
        "configuration": {
            "backupStorageLocation": [location],
            "features": "EnableCSI",
            "dataMoverPrepareTimeout": hours,
            "defaultItemOperationTimeout": hours,
        },
        "credentials": {"useSecret": True, "existingSecret": BUCKET_SECRET},
        "initContainers": [
            _plugin("velero-plugin-for-aws", f"{AWS_PLUGIN_IMAGE}:{aws_plugin}"),
            _plugin("kubevirt-velero-plugin", f"{KUBEVIRT_PLUGIN_IMAGE}:{kubevirt_plugin}"),
        ],
        "deployNodeAgent": True,
        "nodeAgent": {"disableHostPath": True},
        "snapshotsEnabled": False,
        "backupsEnabled": True,
        "upgradeCRDs": True,
        "cleanUpCRDs": False,
    }


def schedule_name(tenant: str) -> str:
    """The tenant's Schedule: ``tenant-<tenant>`` (its namespace's name); Velero names each Backup it takes
    ``<schedule>-<UTC timestamp YYYYMMDDhhmmss>``."""
    return namespace_of(tenant)


def _labels(tenant: str) -> dict[str, str]:
    return {**MANAGED_BY, TENANT_LABEL: tenant}


def schedule_manifest(tenant: str, backup: TenantBackupSpec, volume_timeout_hours: int) -> dict[str, Any]:
    """The ``velero.io/v1`` ``Schedule`` of ``tenant`` (checked against Velero v1.18.1 ``velero.io_schedules.yaml``).

    ``schedule`` the cron expression (UTC), ``paused``, ``useOwnerReferencesInBackup: false`` (removing the Schedule
    keeps its backups), and the Backup template: ``includedNamespaces`` the tenant's namespace only (every resource
    in it: KubeVirt's plugin refuses a running VM's backup without its VMI and launcher pod), ``storageLocation``
    :data:`LOCATION`, ``ttl`` of ``retentionDays``, ``snapshotMoveData: true`` (the CSI snapshot's data goes to the
    bucket; a Longhorn snapshot alone stays inside the volume it protects), ``defaultVolumesToFsBackup: false``,
    ``itemOperationTimeout`` of ``volumeTimeoutHours``, and the tenant's label on every Backup."""
    return {
        "apiVersion": "velero.io/v1",
        "kind": "Schedule",
        "metadata": {"name": schedule_name(tenant), "namespace": NAMESPACE, "labels": _labels(tenant)},
        "spec": {
            "schedule": backup.schedule,
            "paused": backup.paused,
            "useOwnerReferencesInBackup": False,
            "template": {
                "metadata": {"labels": _labels(tenant)},
                "includedNamespaces": [namespace_of(tenant)],
                "storageLocation": LOCATION,
                "ttl": backup.ttl,
                "snapshotMoveData": True,
                "defaultVolumesToFsBackup": False,
                "itemOperationTimeout": f"{volume_timeout_hours}h0m0s",
            },
        },
    }


def restore_manifest(
    tenant: str,
    backup: str,
    *,
    name: str | None = None,
    workload: str | None = None,
    run_strategy: str | None = None,
    volume_timeout_hours: int = 24,
) -> dict[str, Any]:
    """A ``velero.io/v1`` ``Restore`` of backup ``backup`` into ``tenant``'s own namespace (checked against Velero
    v1.18.1 ``velero.io_restores.yaml``), named ``name`` (default ``<backup>-restore``, at most 63 characters).

    ``includedNamespaces`` the tenant's namespace (never another: a Restore may not leave the tenant), ``restorePVs``,
    ``existingResourcePolicy: none`` (what still exists is left as it is: restore what was lost, not over what
    runs), ``itemOperationTimeout`` of ``volumeTimeoutHours``. With ``workload``: only the objects labelled
    ``app.kubernetes.io/name: <workload>`` (gpucell labels a VM's VirtualMachine, DataVolume templates, Secret and
    Service so, and CDI gives each PVC its DataVolume's labels). With ``run_strategy``: the label
    ``velero.kubevirt.io/restore-run-strategy`` that kubevirt-velero-plugin v0.9.0 applies to restored VMs
    (``Halted`` brings them back stopped)."""
    restore_name = name or f"{backup}-restore"[:63].rstrip("-.")
    labels = _labels(tenant)
    if run_strategy is not None:
        labels["velero.kubevirt.io/restore-run-strategy"] = run_strategy
    spec: dict[str, Any] = {
        "backupName": backup,
        "includedNamespaces": [namespace_of(tenant)],
        "restorePVs": True,
        "existingResourcePolicy": "none",
        "itemOperationTimeout": f"{volume_timeout_hours}h0m0s",
    }
    if workload is not None:
        spec["labelSelector"] = {"matchLabels": {"app.kubernetes.io/name": workload}}
    return {
        "apiVersion": "velero.io/v1",
        "kind": "Restore",
        "metadata": {"name": restore_name, "namespace": NAMESPACE, "labels": labels},
        "spec": spec,
    }


class Backups(CellComponent):
    """Velero in one cell (``gpucell:index:Backups``). Children: ``f"{name}-namespace"``, ``f"{name}-bucket"`` and
    ``f"{name}-repository"`` (Secrets, Pulumi secrets), ``f"{name}-velero"`` (the Release), and
    ``f"{name}-schedule-<tenant>"`` per tenant with a backup (after the Release, whose chart installs the CRDs).

    The credentials are checked inside the Secret's value (``ValueError`` from :func:`bucket_credentials_file`, never
    naming the value); the stack program checks them first (``gpucell.stacks.config``).
    """

    namespace: pulumi.Output[str]
    """``velero``."""

    def __init__(self, name: str, args: BackupsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("Backups", name, opts)
        cluster, spec = args.cluster, args.spec
        lifecycle = removal_options(args.removal_policy)

        def on(*after: pulumi.Resource, **extra: Any) -> pulumi.ResourceOptions:
            return self.child(depends_on=[*cluster.ready, *after], providers={"kubernetes": cluster.provider}, **extra)

        levels = {f"pod-security.kubernetes.io/{mode}": _POD_SECURITY for mode in ("enforce", "audit", "warn")}
        self.namespace_resource = Namespace(
            f"{name}-namespace",
            metadata={"name": NAMESPACE, "labels": {**MANAGED_BY, **levels}},
            opts=on(**lifecycle),
        )
        inside = (self.namespace_resource,)
        bucket = pulumi.Output.secret(args.credentials.bucket).apply(lambda v: {"cloud": bucket_credentials_file(v)})
        self.bucket_secret = _secret(f"{name}-bucket", BUCKET_SECRET, bucket, on(*inside))
        password = pulumi.Output.secret(args.credentials.repository_password).apply(
            lambda v: {"repository-password": v}
        )
        # The password encrypts every backed-up volume: replacing the Secret (a new value) is stopped while protected.
        self.repository_secret = _secret(f"{name}-repository", REPOSITORY_SECRET, password, on(*inside, **lifecycle))
        self.release: Release = helm_release(
            f"{name}-velero",
            source=CHART,
            version=args.chart_version,
            namespace=NAMESPACE,
            values=velero_values(spec, args.aws_plugin, args.kubevirt_plugin),
            overrides=spec.values,
            opts=on(*inside, self.bucket_secret, self.repository_secret, *args.after, **lifecycle),
            release_name=RELEASE_NAME,
        )
        self.scheduled = frozenset(args.tenants)
        """The tenants whose ``Schedule`` this component renders (``BackupsArgs.tenants``)."""
        self.schedules = {
            tenant: custom_resource(
                f"{name}-schedule-{tenant}",
                schedule_manifest(tenant, backup, spec.volume_timeout_hours),
                on(self.release),
            )
            for tenant, backup in args.tenants.items()
        }
        self.namespace = self.release.namespace.apply(lambda ns: ns or NAMESPACE)
        self.register_outputs({"namespace": self.namespace})


def _secret(
    resource_name: str, secret_name: str, data: pulumi.Output[dict[str, str]], opts: pulumi.ResourceOptions
) -> Secret:
    meta = {"name": secret_name, "namespace": NAMESPACE, "labels": dict(MANAGED_BY)}
    return Secret(
        resource_name,
        metadata=cast("Any", meta),
        type="Opaque",
        string_data=cast("pulumi.Output[Mapping[str, str]]", data),
        opts=opts,
    )
