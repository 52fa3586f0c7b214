"""The cell's embedded etcd: which server initialised it, and its scheduled snapshots (local and S3-compatible).

k3s options (config-file keys = flags without ``--``), k3s docs ``docs/cli/etcd-snapshot.md``:
``etcd-snapshot-schedule-cron`` (default ``0 */12 * * *``), ``etcd-snapshot-retention`` (default 5),
``etcd-snapshot-compress``, ``etcd-disable-snapshots``, ``etcd-s3`` and ``etcd-s3-config-secret`` ("Name of secret
in the kube-system namespace used to configure S3, if etcd-s3 is enabled and no other etcd-s3 options are set";
since v1.30.4+k3s1, v1.29.8+k3s1, v1.28.13+k3s1).
"""

from __future__ import annotations

import re

from pydantic import Field, StrictInt, field_validator

from gpucell.errors import shown
from gpucell.spec._base import SpecModel
from gpucell.spec._values import check_config_key, check_endpoint_host, check_single_line
from gpucell.spec.network import check_host_name

__all__ = [
    "DEFAULT_SNAPSHOT_RETENTION",
    "DEFAULT_SNAPSHOT_SCHEDULE",
    "EtcdS3",
    "EtcdSnapshots",
    "EtcdSpec",
    "check_cron",
    "check_s3_bucket",
    "check_s3_folder",
    "check_s3_region",
    "cron_problem",
]

DEFAULT_SNAPSHOT_SCHEDULE = "0 */12 * * *"
"""k3s's default ``etcd-snapshot-schedule-cron`` (00:00 and 12:00 system time)."""
DEFAULT_SNAPSHOT_RETENTION = 5
"""k3s's default ``etcd-snapshot-retention`` (snapshots kept per node)."""
_CRON_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12), ("day of week", 0, 6))
"""The five fields of a cron schedule as robfig/cron (which k3s uses for ``etcd-snapshot-schedule-cron``) parses
them, with their ranges; names (``JAN``, ``MON``) are accepted for months and days of week."""
_CRON_NAMES = {
    3: ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"),
    4: ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"),
}
_CRON_PART = re.compile(r"(\*|\?|[0-9A-Za-z]+(?:-[0-9A-Za-z]+)?)(?:/([0-9]+))?")
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_FOLDER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(?:/[A-Za-z0-9._-]+)*/?")
_REGION = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")


def _cron_value(text: str, index: int) -> int | None:
    if text.isdigit():
        return int(text)
    names = _CRON_NAMES.get(index, ())
    return names.index(text.upper()) + (1 if index == 3 else 0) if text.upper() in names else None


def cron_problem(value: str) -> str | None:
    """What keeps ``value`` from being a five-field cron schedule robfig/cron accepts, or ``None``."""
    try:
        check_single_line(value, "cron schedule")
    except ValueError as exc:
        return str(exc)
    fields = value.split(" ")
    if len(fields) != 5:
        return "is not a five-field cron schedule such as '0 */6 * * *' (minute hour day month weekday)"
    for index, (field, (name, low, high)) in enumerate(zip(fields, _CRON_FIELDS, strict=True)):
        for part in field.split(","):
            match = _CRON_PART.fullmatch(part)
            if match is None:
                return f"has {shown(part)} in its {name} field; use a number, a range a-b, * or a step /n"
            bounds = match.group(1).split("-") if match.group(1) not in ("*", "?") else []
            numbers = [_cron_value(bound, index) for bound in bounds]
            known = [n for n in numbers if n is not None and low <= n <= high]
            if len(known) != len(numbers) or known != sorted(known):
                return f"has {shown(part)} in its {name} field, which takes {low}-{high} (a range as low-high)"
            if match.group(2) is not None and not 1 <= int(match.group(2)) <= high:
                return f"has the step {shown(part)} in its {name} field, which takes steps of 1-{high}"
    return None


def check_cron(value: str) -> str:
    """``value`` when :func:`cron_problem` finds nothing in it; raises ``ValueError`` with the problem."""
    problem = cron_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def check_s3_bucket(value: str) -> str:
    """An S3 bucket name by the AWS S3 User Guide's "Bucket naming rules": 3-63 of a-z, 0-9, ``.`` and ``-``, no two
    adjacent periods, no period next to a hyphen, not shaped like an IPv4 address, none of the reserved prefixes and
    suffixes. Raises ``ValueError`` naming what is accepted."""
    if (
        not _BUCKET.fullmatch(value)
        or ".." in value
        or ".-" in value
        or "-." in value
        or re.fullmatch(r"[0-9]+(\.[0-9]+){3}", value)
        or value.startswith(("xn--", "sthree-"))
        or value.endswith(("-s3alias", "--ol-s3"))
    ):
        raise ValueError(
            "is not an S3 bucket name (3-63 of a-z, 0-9, '.', '-', starting and ending "
            "alphanumeric, no '..', '.-' or '-.', not an IP address, no xn-- or sthree- prefix)"
        )
    return value


def check_s3_region(value: str) -> str:
    """An S3 region name (``us-east-1``). Raises ``ValueError``."""
    if not _REGION.fullmatch(value):
        raise ValueError("is not an S3 region name such as us-east-1")
    return value


def check_s3_folder(value: str | None) -> str | None:
    """A key prefix in a bucket: letters, digits, ``.``, ``_``, ``-`` and ``/``, not starting with ``/``, no ``//``,
    at most 512 characters (``None`` passes). Raises ``ValueError``."""
    if value is not None and (len(value) > 512 or not _FOLDER.fullmatch(value)):
        raise ValueError(
            "is not a folder name (letters, digits, '.', '_', '-' and '/', not starting with '/', "
            "no '//', at most 512 characters)"
        )
    return value


class EtcdS3(SpecModel):
    """An S3-compatible target for the snapshots, configured through a ``kube-system`` Secret (never config.yaml)."""

    endpoint: str = "s3.amazonaws.com"
    """S3 endpoint host, optionally ``:port``, no scheme (k3s ``etcd-s3-endpoint``); neither a loopback, link-local
    or other non-routable address nor a node of the cell. Defaults to ``s3.amazonaws.com``."""
    bucket: str
    """Bucket name (k3s ``etcd-s3-bucket``); it must exist."""
    region: str = "us-east-1"
    """Bucket region (k3s ``etcd-s3-region``). Defaults to ``us-east-1``."""
    folder: str | None = None
    """Folder (key prefix) in the bucket (k3s ``etcd-s3-folder``). Defaults to the bucket root."""
    credentials_config_key: str
    """Name of the *secret* stack config key holding ``<access key id>:<secret access key>``; set it with
    ``pulumi config set --secret <key> -- 'AKIA...:...'``. It reaches the cluster only as a Secret."""
    insecure: bool = False
    """Talk plain HTTP to the endpoint (k3s ``etcd-s3-insecure``). Defaults to false."""
    skip_ssl_verify: bool = False
    """Accept any TLS certificate from the endpoint (k3s ``etcd-s3-skip-ssl-verify``). Defaults to false."""

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str) -> str:
        host, _, port = value.rpartition(":") if value.count(":") == 1 else (value, "", "")
        wrong = "is not host[:port]; give the S3 endpoint without a scheme, e.g. minio.example:9000"
        if port and not (port.isdigit() and 1 <= int(port) <= 65535):
            raise ValueError(f"{wrong} (a port is 1-65535)")
        try:
            check_host_name(host)
        except ValueError:
            raise ValueError(wrong) from None
        check_endpoint_host(host, "the S3 store")
        return value

    _bucket = field_validator("bucket")(check_s3_bucket)
    _region = field_validator("region")(check_s3_region)
    _folder = field_validator("folder")(check_s3_folder)
    _credentials = field_validator("credentials_config_key")(check_config_key)


class EtcdSnapshots(SpecModel):
    """Scheduled etcd snapshots, taken by every server into ``/var/lib/rancher/k3s/server/db/snapshots``.

    Options equal to k3s's defaults are not written to the servers' config, so a cell that keeps them keeps its
    config (and its servers are not restarted).
    """

    schedule: str = DEFAULT_SNAPSHOT_SCHEDULE
    """Cron schedule, five fields, in the servers' time zone (k3s ``etcd-snapshot-schedule-cron``). Defaults to
    ``0 */12 * * *``."""
    retention: StrictInt = Field(default=DEFAULT_SNAPSHOT_RETENTION, ge=1, le=1000)
    """Scheduled snapshots kept per server, and in S3 (k3s ``etcd-snapshot-retention``). Defaults to 5."""
    compress: bool = False
    """Zip each snapshot (k3s ``etcd-snapshot-compress``). Defaults to false."""
    s3: EtcdS3 | None = None
    """Also upload each snapshot to an S3-compatible bucket. Defaults to none (local snapshots only)."""

    _cron = field_validator("schedule")(check_cron)


class EtcdSpec(SpecModel):
    """The region's embedded etcd (every server is a member)."""

    init_server: str | None = None
    """The server that initialised etcd (k3s ``cluster-init``) when the cell was created; every other server joins
    through the API endpoint. Required with more than one server (a single server initialises etcd itself). Keep
    naming it after that server is removed: then no remaining server is given ``cluster-init``, and a server added
    later joins the existing cluster instead of starting a new one."""
    init_server_removed: bool = False
    """``initServer`` names a server that was removed from the running cell (kept so that no remaining server is
    given ``cluster-init``). Without it, ``initServer`` must name a server of the region: a typo would leave a new
    cell with no server that initialises etcd. Defaults to false."""
    snapshots: EtcdSnapshots = EtcdSnapshots()
    """Scheduled snapshots. Defaults to k3s's: every 12 hours, 5 kept, local only."""
