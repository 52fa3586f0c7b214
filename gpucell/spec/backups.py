"""Backups of tenants' VMs and volumes: Velero with KubeVirt's plugin, taking CSI snapshots of the tenant's Longhorn
volumes and moving their data into an S3-compatible bucket
(docs/decisions/0025-vm-backups-tenant-runtimes-priority-classes.md).

- ``backups`` (:class:`BackupsSpec`, one per cell): the bucket, the cell's two secrets (the bucket credentials and
  the password of Velero's backup repositories), how long one volume may take, Velero chart values.
- ``tenants.<tenant>.backup`` (:class:`TenantBackupSpec`): when the tenant's namespace is backed up and how long
  each backup is kept (a Velero ``Schedule`` per tenant).

The releases that work together are the facts below: a Velero chart gpucell knows installs one Velero release, and
each Velero minor has the plugin lines its plugins' READMEs test with it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from urllib.parse import urlsplit

from pydantic import Field, StrictInt, field_validator, model_validator

from gpucell.catalog.releases import release
from gpucell.errors import SpecError, shown
from gpucell.spec._base import SpecModel
from gpucell.spec._values import check_config_key, check_endpoint_host, check_url
from gpucell.spec.etcd import EtcdS3, check_cron, check_s3_bucket, check_s3_folder, check_s3_region

__all__ = [
    "CHECKSUM_OFF_BROKEN",
    "FIXED_VALUES",
    "OWNED_VALUES",
    "PLUGIN_LINES",
    "VELERO_CHARTS",
    "BackupStorageSpec",
    "BackupsSpec",
    "S3Place",
    "TenantBackupSpec",
    "check_backup_plugins",
    "velero_release",
]

VELERO_CHARTS: Mapping[str, str] = MappingProxyType({"12.1.0": "v1.18.1"})
"""Velero chart version (vmware-tanzu/helm-charts ``charts/velero``) -> the Velero release it installs (its
``appVersion`` and image tag; chart 12.1.0 at tag velero-12.1.0 installs ``velero/velero:v1.18.1``)."""
PLUGIN_LINES: Mapping[tuple[int, int], tuple[str, str]] = MappingProxyType({(1, 18): ("v1.14", "v0.9")})
"""Velero ``(major, minor)`` -> the velero-plugin-for-aws and kubevirt-velero-plugin lines tested with it: the
compatibility tables of velero-io/velero-plugin-for-aws (README at v1.14.2: "v1.14.x = Velero v1.18.x") and
kubevirt/kubevirt-velero-plugin (README, table added after v0.9.0 by PR #410: "v0.9.x = Velero v1.18.x, KubeVirt
>= v1.1.0, CDI >= v1.57.0")."""
CHECKSUM_OFF_BROKEN = frozenset({"v1.14.0", "v1.14.1", "v1.14.2"})
"""velero-plugin-for-aws releases in which ``checksumAlgorithm: ""`` breaks S3-compatible stores: v1.14.1 still
sends the AWS SDK's trailing checksum (velero-io/velero#9804, HTTP 400) and v1.14.2 writes the chunked checksum
envelope into the objects themselves, corrupting every backup (velero-io/velero#9951); fixed on the release-1.14
branch by velero-io/velero-plugin-for-aws#313 (2026-07-16), after v1.14.2."""
OWNED_VALUES: Mapping[tuple[str, ...], str] = MappingProxyType(
    {
        ("configuration", "backupStorageLocation"): "backups.storage",
        ("credentials",): "backups.storage.credentialsConfigKey",
        ("initContainers",): "versions.veleroPluginForAws and versions.kubevirtVeleroPlugin",
        ("configuration", "dataMoverPrepareTimeout"): "backups.volumeTimeoutHours",
        ("configuration", "defaultItemOperationTimeout"): "backups.volumeTimeoutHours",
        ("schedules",): "tenants.<tenant>.backup",
    }
)
"""Velero chart value paths gpucell sets from a config key (:func:`gpucell.components.backups.velero_values`)."""
FIXED_VALUES: Mapping[tuple[str, ...], str] = MappingProxyType(
    {
        ("configuration", "features"): "EnableCSI turns on the CSI snapshots every backup takes",
        ("configuration", "volumeSnapshotLocation"): "backups use CSI snapshots, not a snapshot provider plugin",
        ("configuration", "defaultVolumesToFsBackup"): "file-system backup is untested with KubeVirt's plugin "
        "(kubevirt-velero-plugin README); volumes are backed up through CSI snapshots",
        ("snapshotsEnabled",): "no VolumeSnapshotLocation is used",
        ("backupsEnabled",): "the BackupStorageLocation is the bucket of backups.storage",
        ("deployNodeAgent",): "the node-agent runs the data movers; without it every backup hangs "
        "(velero-io/velero#9698)",
        ("nodeAgent", "disableHostPath"): "data movers need no host path, file-system backup is not used",
        ("cleanUpCRDs",): "its pre-delete job deletes every Backup, Restore and BackupStorageLocation",
        ("upgradeCRDs",): "Velero's CRDs must follow every chart upgrade",
        ("namespace", "labels"): "gpucell labels the velero namespace (Pod Security baseline)",
    }
)
"""Velero chart value paths gpucell fixes, with why; no config key changes them."""
_CREDENTIALS_HOW = "'<access key id>:<secret access key>' (pulumi config set --secret <key> -- 'AKIA...:...')"


def velero_release(chart: str) -> str | None:
    """The Velero release chart ``chart`` installs (:data:`VELERO_CHARTS`), or ``None`` when gpucell does not know
    the chart."""
    return VELERO_CHARTS.get(chart.lstrip("v"))


class BackupStorageSpec(SpecModel):
    """The S3-compatible bucket backups go to: Velero's BackupStorageLocation ``default`` (provider ``aws``, the
    velero-plugin-for-aws object store; its README "Create S3 bucket" and "BackupStorageLocation" config keys)."""

    bucket: str
    """Bucket name; it must exist, and hold nothing but this cell's backups (Velero syncs every backup it finds
    under ``prefix`` into the cell, and garbage-collects the expired ones)."""
    prefix: str | None = None
    """Key prefix in the bucket (BackupStorageLocation ``objectStorage.prefix``). Defaults to the bucket root; two
    regions sharing a bucket need one each."""
    region: str = "us-east-1"
    """Bucket region (``config.region``); S3-compatible stores take any name (MinIO: ``minio``). Defaults to
    ``us-east-1``."""
    endpoint: str | None = None
    """``https://`` URL of an S3-compatible store (``config.s3Url``, e.g. ``https://s3.fra1.example.net``);
    defaults to AWS S3. Backups hold tenants' disks and Secrets: plain HTTP is refused, and so are hosts at a
    loopback, link-local or other non-routable address or at a node of the cell."""
    force_path_style: bool = False
    """Address the bucket as ``<endpoint>/<bucket>`` (``config.s3ForcePathStyle``), which MinIO and Ceph RGW
    need. Defaults to false (virtual-hosted style, AWS S3)."""
    disable_checksum: bool = False
    """Send no checksum with uploads (``config.checksumAlgorithm: ""``), for stores that refuse the AWS SDK's
    CRC32 checksums (older MinIO, Ceph, StorageGRID: ``XAmzContentSHA256Mismatch``). Refused with the
    velero-plugin-for-aws releases that corrupt uploads that way (:data:`CHECKSUM_OFF_BROKEN`). Defaults to false."""
    credentials_config_key: str | None = None
    """Secret stack config key holding ``<access key id>:<secret access key>`` of the bucket: a secret of the cell
    (docs/security.md, "Who owns a secret"), required."""

    _bucket = field_validator("bucket")(check_s3_bucket)
    _prefix = field_validator("prefix")(check_s3_folder)
    _region = field_validator("region")(check_s3_region)

    @field_validator("endpoint")
    @classmethod
    def _https(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            check_url(value, ("https",))
        except ValueError:
            raise ValueError(
                "is not an https:// URL with a host (backups hold tenants' disks and Secrets: they travel over TLS)"
            ) from None
        check_endpoint_host(urlsplit(value).hostname or "", "the S3 store")
        return value

    @field_validator("credentials_config_key")
    @classmethod
    def _key(cls, value: str | None) -> str | None:
        return None if value is None else check_config_key(value)

    @model_validator(mode="after")
    def _needs_credentials(self) -> BackupStorageSpec:
        if self.credentials_config_key is None:
            raise SpecError(
                ("credentialsConfigKey",),
                f"is required: name a secret config key holding the bucket's {_CREDENTIALS_HOW}",
            )
        return self


_AWS = "AWS S3"
"""The store of every ``*.amazonaws.com`` endpoint: AWS bucket names are global, so one name is one bucket whichever
regional endpoint reaches it."""


@dataclass(frozen=True)
class S3Place:
    """Where objects land: a store (``host:port``, or AWS S3), a bucket, and a key prefix (``""``: the bucket root)."""

    store: str
    bucket: str
    prefix: str

    @classmethod
    def at(cls, host: str | None, port: int, bucket: str, prefix: str | None) -> S3Place:
        """The place of ``bucket`` under ``prefix`` on ``host:port`` (``None``: AWS S3)."""
        host = (host or "").lower().rstrip(".")
        store = _AWS if not host or host == "amazonaws.com" or host.endswith(".amazonaws.com") else f"{host}:{port}"
        return cls(store, bucket, (prefix or "").strip("/"))

    @classmethod
    def of_etcd(cls, s3: EtcdS3) -> S3Place:
        """Where k3s uploads etcd snapshots (``etcd-s3-endpoint``: ``host[:port]``, port 443, 80 when insecure)."""
        host, _, port = s3.endpoint.rpartition(":") if s3.endpoint.count(":") == 1 else (s3.endpoint, "", "")
        return cls.at(host, int(port) if port else (80 if s3.insecure else 443), s3.bucket, s3.folder)

    @classmethod
    def of_backups(cls, storage: BackupStorageSpec) -> S3Place:
        """Where Velero keeps backups (``config.s3Url``, an ``https://`` URL; none: AWS S3)."""
        url = urlsplit(storage.endpoint or "")
        return cls.at(url.hostname, url.port or 443, storage.bucket, storage.prefix)

    @property
    def shown(self) -> str:
        """The prefix as an error line names it."""
        return self.prefix or "the bucket root"

    def overlaps(self, other: S3Place) -> bool:
        """True when both are in one bucket of one store and one prefix is the other or lies under it (the bucket
        root lies over every prefix)."""
        if (self.store, self.bucket) != (other.store, other.bucket):
            return False
        a, b = f"{self.prefix}/".lstrip("/"), f"{other.prefix}/".lstrip("/")
        return a.startswith(b) or b.startswith(a)


class BackupsSpec(SpecModel):
    """Velero in the cell (namespace ``velero``, chart ``versions.velero``) with the KubeVirt and AWS plugins, the
    CSI snapshot controller and Longhorn's VolumeSnapshotClass (:mod:`gpucell.components.backups`). Tenants with a
    ``backup`` get a Schedule each; a cell with ``backups`` and no such tenant runs Velero idle. Needs
    ``storage.backend: longhorn``: volumes are backed up through CSI snapshots, which local-path cannot take."""

    storage: BackupStorageSpec
    """The bucket."""
    repository_password_config_key: str | None = None
    """Secret stack config key holding the password of Velero's backup repositories (Kopia), which encrypts every
    volume's data in the bucket: a secret of the cell, required. Velero would otherwise use its built-in
    ``static-passw0rd`` (``velero-repo-credentials``). Never change it once backups exist: the repositories keep the
    password they were created with, and the backups in them cannot be read with another; keep it outside the cell
    too, a restore into a rebuilt cell needs it."""
    volume_timeout_hours: StrictInt = Field(default=24, ge=1, le=720)
    """How long one volume's backup or restore may take, hours: Longhorn first clones the snapshot into a volume of
    its own (the data mover's ``dataMoverPrepareTimeout``, 30 minutes upstream, too short for a TiB-sized VM disk:
    velero-io/velero#8113, #7742), then the data is uploaded (each Backup's ``itemOperationTimeout``, 4 hours
    upstream). Defaults to 24."""
    values: dict[str, object] = {}
    """Velero chart values merged over what gpucell renders (maps merge key by key); the paths gpucell sets or fixes
    (:data:`OWNED_VALUES`, :data:`FIXED_VALUES`) are refused."""

    @field_validator("repository_password_config_key")
    @classmethod
    def _key(cls, value: str | None) -> str | None:
        return None if value is None else check_config_key(value)

    @model_validator(mode="after")
    def _needs_password(self) -> BackupsSpec:
        if self.repository_password_config_key is None:
            raise SpecError(
                ("repositoryPasswordConfigKey",),
                "is required: name a secret config key holding the password that encrypts the backed-up volumes "
                '(pulumi config set --secret <key> -- "$(openssl rand -base64 32)"); Velero\'s default is the '
                "same static password in every cluster",
            )
        return self

    @model_validator(mode="after")
    def _no_owned_values(self) -> BackupsSpec:
        refused = {path: f"is set by gpucell from {key}; set {key} instead" for path, key in OWNED_VALUES.items()}
        refused.update({path: f"is fixed by gpucell: {why}; remove it" for path, why in FIXED_VALUES.items()})
        for path, why in refused.items():
            node: object = self.values
            for part in path:
                node = node.get(part) if isinstance(node, dict) else None
            if node is not None:
                raise SpecError(("values", *path), why)
        return self

    @property
    def location_config(self) -> dict[str, str]:
        """The BackupStorageLocation's ``config`` (velero-plugin-for-aws keys, every value a string as the plugin
        reads them): ``region``, and ``s3Url``, ``s3ForcePathStyle``, ``checksumAlgorithm`` when set."""
        storage = self.storage
        config = {"region": storage.region}
        if storage.endpoint is not None:
            config["s3Url"] = storage.endpoint
        if storage.force_path_style:
            config["s3ForcePathStyle"] = "true"
        if storage.disable_checksum:
            config["checksumAlgorithm"] = ""
        return config


class TenantBackupSpec(SpecModel):
    """When a tenant's namespace is backed up, and for how long: a Velero ``Schedule`` in the ``velero`` namespace,
    each Backup taking every object of the namespace (VMs with their DataVolumes, Secrets, notebooks' and endpoints'
    objects) and a CSI snapshot of every volume, whose data is moved to the bucket."""

    schedule: str
    """Five-field cron schedule in UTC (Velero parses it with robfig/cron ``ParseStandard``), e.g.
    ``0 3 * * *``."""
    retention_days: StrictInt = Field(default=30, ge=1, le=3650)
    """How long each backup is kept, days (the Backup's ``ttl``); Velero deletes it, and its data in the bucket,
    when it expires. A changed retention applies to backups taken from then on. Defaults to 30."""
    paused: bool = False
    """Take no backups for now (the Schedule's ``paused``); existing backups are kept until they expire. Defaults
    to false."""

    _cron = field_validator("schedule")(check_cron)

    @property
    def ttl(self) -> str:
        """``retentionDays`` as a Go duration, as Velero writes ``ttl``: ``"720h0m0s"`` for 30 days."""
        return f"{self.retention_days * 24}h0m0s"


def check_backup_plugins(
    chart: str, aws_plugin: str, kubevirt_plugin: str, *, disable_checksum: bool
) -> Iterator[SpecError]:
    """The Velero chart is one gpucell knows and the plugins are the lines its Velero release is tested with
    (:data:`PLUGIN_LINES`); ``disable_checksum`` is refused with a plugin of :data:`CHECKSUM_OFF_BROKEN`. Paths below
    the region."""
    velero = velero_release(chart)
    if velero is None:
        yield SpecError(
            ("versions", "velero"),
            f"{shown(chart)} is a Velero chart gpucell does not know the Velero release of (it knows "
            f"{', '.join(f'{c} = Velero {v}' for c, v in VELERO_CHARTS.items())}); pin one of those, or add the "
            "chart to gpucell.spec.backups.VELERO_CHARTS with the plugin lines its release is tested with",
        )
        return
    aws_line, kubevirt_line = PLUGIN_LINES[release(velero)]
    for key, pinned, line, source in (
        ("veleroPluginForAws", aws_plugin, aws_line, "velero-plugin-for-aws README"),
        ("kubevirtVeleroPlugin", kubevirt_plugin, kubevirt_line, "kubevirt-velero-plugin README"),
    ):
        if release(pinned) != release(line):
            yield SpecError(
                ("versions", key),
                f"{shown(pinned)} is not tested with Velero {velero} (chart {chart}); the {source} pairs it with "
                f"{line}.x",
            )
    if disable_checksum and aws_plugin in CHECKSUM_OFF_BROKEN:
        yield SpecError(
            ("backups", "storage", "disableChecksum"),
            f"true with versions.veleroPluginForAws {aws_plugin} breaks the bucket: that release still checksums "
            "the uploads and v1.14.2 writes the checksum envelope into every object (velero-io/velero#9804, #9951); "
            "pin a v1.14 release with velero-io/velero-plugin-for-aws#313, or leave disableChecksum off",
        )
