"""Lifecycle keys of the spec: removalPolicy, rollout, etcd (init server and snapshots), with their exact messages."""

from __future__ import annotations

from typing import Any

import pytest

from gpucell.errors import ConfigError
from gpucell.k3s.cluster import etcd_s3_secret_data, even_server_warning
from gpucell.spec import CellSpec, RemovalPolicy, StackSpec
from gpucell.spec.lifecycle import removal_options
from tests.conftest import minimal_cell_config


def errors_of(region: dict[str, Any]) -> list[str]:
    try:
        StackSpec.model_validate({"regions": {"fra1": region}})
    except ConfigError as exc:
        return exc.lines
    pytest.fail("config was accepted")


def ha(count: int = 3, **etcd: Any) -> dict[str, Any]:
    config = minimal_cell_config()
    config["network"]["apiEndpoint"] = "10.20.0.5"
    config["nodePools"]["servers"]["hosts"] = [
        {"name": f"srv-{i}", "address": f"10.20.0.1{i}"} for i in range(1, count + 1)
    ]
    if etcd:
        config["etcd"] = etcd
    return config


# -- removalPolicy ---------------------------------------------------------------------------------------------
def test_removal_options_map_to_pulumi_options() -> None:
    assert removal_options(RemovalPolicy.PROTECT) == {"protect": True}
    assert removal_options(RemovalPolicy.RETAIN) == {"protect": False, "retain_on_delete": True}
    assert removal_options(RemovalPolicy.DELETE) == {"protect": False}


@pytest.mark.parametrize(
    ("path", "where", "accepted"),
    [
        (("removalPolicy",), "regions.fra1.removalPolicy", "protect, retain, delete"),
        (
            ("nodePools", "cpu", "hosts", 0, "removalPolicy"),
            "regions.fra1.nodePools.cpu.hosts[0].removalPolicy",
            "protect, retain, delete, forget",
        ),
    ],
)
def test_an_unknown_removal_policy_names_the_accepted_ones(path: tuple[Any, ...], where: str, accepted: str) -> None:
    config = minimal_cell_config()
    node: Any = config
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = "keep"
    assert errors_of(config) == [f"{where}: 'keep' is not one of {accepted}"]


def test_host_policies_default_by_role_and_storage() -> None:
    local = CellSpec.model_validate(minimal_cell_config())
    for pool_name, pool in local.node_pools.items():
        assert local.removal_policy_of(pool_name, pool.hosts[0]) is RemovalPolicy.PROTECT, pool_name  # volumes
    longhorn_config = ha(initServer="srv-1")
    longhorn_config["storage"] = {"backend": "longhorn"}
    longhorn_config["nodePools"]["cpu"]["hosts"][0]["removalPolicy"] = "retain"
    longhorn = CellSpec.model_validate(longhorn_config)
    assert longhorn.removal_policy_of("servers", longhorn.node_pools["servers"].hosts[0]) is RemovalPolicy.PROTECT
    assert longhorn.removal_policy_of("l40s", longhorn.node_pools["l40s"].hosts[0]) is RemovalPolicy.DELETE
    assert longhorn.removal_policy_of("cpu", longhorn.node_pools["cpu"].hosts[0]) is RemovalPolicy.RETAIN


# -- rollout ---------------------------------------------------------------------------------------------------
def test_servers_go_through_maintenance_one_at_a_time() -> None:
    config = minimal_cell_config()
    config["nodePools"]["servers"]["rollout"] = {"maxUnavailable": 2}
    assert errors_of(config) == [
        "regions.fra1.nodePools.servers.rollout.maxUnavailable: 2 on a server pool: servers (etcd members) go "
        "through maintenance one at a time; use 1"
    ]


def test_rollout_bounds() -> None:
    config = minimal_cell_config()
    config["nodePools"]["cpu"]["rollout"] = {"maxUnavailable": 0}
    assert errors_of(config) == [
        "regions.fra1.nodePools.cpu.rollout.maxUnavailable: 0 is invalid: Input should be greater than or equal to 1"
    ]


# -- etcd: the init server -------------------------------------------------------------------------------------
def test_more_than_one_server_needs_the_init_server_named() -> None:
    assert errors_of(ha()) == [
        "regions.fra1.etcd.initServer: is required with 3 servers: name the server that initialised etcd (usually "
        "the first, srv-1) and keep it when that server is removed, so that no other server is ever given "
        "cluster-init"
    ]


def test_the_init_server_must_be_a_server() -> None:
    config = minimal_cell_config()
    config["etcd"] = {"initServer": "lab-gpu-1"}
    assert errors_of(config) == ["regions.fra1.etcd.initServer: 'lab-gpu-1' is a gpu node of pool l40s, not a server"]


def test_the_init_server_may_name_a_removed_server() -> None:
    spec = CellSpec.model_validate(ha(2, initServer="srv-0", initServerRemoved=True))
    assert spec.init_server is None  # every server joins through the API endpoint
    # without initServerRemoved, a name that is no server is a typo: a new cell would have no init server
    assert errors_of(ha(3, initServer="srv-0")) == [
        "regions.fra1.etcd.initServer: 'srv-0' is not a server of the region (servers: srv-1, srv-2, srv-3); name "
        "the server that initialises etcd, or, when that server was removed from the running cell, keep its name "
        "and set etcd.initServerRemoved: true"
    ]
    assert errors_of(ha(3, initServer="srv-1", initServerRemoved=True)) == [
        "regions.fra1.etcd.initServerRemoved: is true, but 'srv-1' is still a server of the region; drop "
        "initServerRemoved"
    ]
    assert CellSpec.model_validate(ha(3, initServer="srv-2")).init_server == "srv-2"
    assert CellSpec.model_validate(minimal_cell_config()).init_server == "lab-srv-1"


def test_even_server_counts_warn() -> None:
    assert even_server_warning(1) is None
    assert even_server_warning(3) is None
    assert even_server_warning(4) == (
        "4 servers: an even number of etcd members tolerates no more failures than 3 (1: quorum is 3 of 4); use it "
        "only as a step to 3 or 5 servers"
    )


_BUCKET_RULE = (
    "is not an S3 bucket name (3-63 of a-z, 0-9, '.', '-', starting and ending alphanumeric, no '..'"
    ", '.-' or '-.', not an IP address, no xn-- or sthree- prefix)"
)
_FOLDER_RULE = (
    "is not a folder name (letters, digits, '.', '_', '-' and '/', not starting with '/', no '//', at "
    "most 512 characters)"
)


# -- etcd: snapshots -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("snapshots", "line"),
    [
        (
            {"schedule": "hourly"},
            "etcd.snapshots.schedule: 'hourly' is not a five-field cron schedule such as '0 */6 * * *' (minute hour "
            "day month weekday)",
        ),
        (
            {"schedule": "61 * * * *"},
            "etcd.snapshots.schedule: '61 * * * *' has '61' in its minute field, which takes 0-59 (a range as "
            "low-high)",
        ),
        (
            {"schedule": "0 */0 * * *"},
            "etcd.snapshots.schedule: '0 */0 * * *' has the step '*/0' in its hour field, which takes steps of 1-23",
        ),
        (
            {"schedule": "0 */6 * * *\n"},
            "etcd.snapshots.schedule: '0 */6 * * *\\n' is not a single line of cron schedule (empty, padded "
            "with spaces, "
            "or holding a newline or control character)",
        ),
        ({"retention": 0}, "etcd.snapshots.retention: 0 is invalid: Input should be greater than or equal to 1"),
        (
            {"s3": {"endpoint": "https://minio:9000", "bucket": "etcd", "credentialsConfigKey": "k"}},
            "etcd.snapshots.s3.endpoint: 'https://minio:9000' is not host[:port]; give the S3 endpoint without a "
            "scheme, e.g. minio.example:9000",
        ),
        (
            {"s3": {"endpoint": "minio:99999", "bucket": "etcd", "credentialsConfigKey": "k"}},
            "etcd.snapshots.s3.endpoint: 'minio:99999' is not host[:port]; give the S3 endpoint without a scheme, e.g. "
            "minio.example:9000 (a port is 1-65535)",
        ),
        (
            {"s3": {"bucket": "Etcd_Backups", "credentialsConfigKey": "k"}},
            "etcd.snapshots.s3.bucket: 'Etcd_Backups' " + _BUCKET_RULE,
        ),
        ({"s3": {"bucket": "b..c", "credentialsConfigKey": "k"}}, "etcd.snapshots.s3.bucket: 'b..c' " + _BUCKET_RULE),
        (
            {"s3": {"bucket": "10.0.0.1", "credentialsConfigKey": "k"}},
            "etcd.snapshots.s3.bucket: '10.0.0.1' " + _BUCKET_RULE,
        ),
        (
            {"s3": {"bucket": "etcd\n", "credentialsConfigKey": "k"}},
            "etcd.snapshots.s3.bucket: 'etcd\\n' " + _BUCKET_RULE,
        ),
        ({"s3": {"bucket": "etcd"}}, "etcd.snapshots.s3.credentialsConfigKey: required key is missing"),
        (
            {"s3": {"bucket": "etcd", "folder": "/abs", "credentialsConfigKey": "k"}},
            "etcd.snapshots.s3.folder: '/abs' " + _FOLDER_RULE,
        ),
        (
            {"s3": {"bucket": "etcd", "folder": "fra1\n", "credentialsConfigKey": "k"}},
            "etcd.snapshots.s3.folder: 'fra1\\n' " + _FOLDER_RULE,
        ),
        (
            {"s3": {"bucket": "etcd", "region": "eu-central-1\n", "credentialsConfigKey": "k"}},
            "etcd.snapshots.s3.region: 'eu-central-1\\n' is not an S3 region name such as us-east-1",
        ),
    ],
    ids=[
        "cron",
        "cron-61",
        "cron-step",
        "cron-newline",
        "retention",
        "scheme",
        "port",
        "bucket",
        "bucket-dots",
        "bucket-ip",
        "bucket-newline",
        "credentials",
        "folder",
        "folder-newline",
        "region-newline",
    ],
)
def test_snapshot_settings_are_checked(snapshots: dict[str, Any], line: str) -> None:
    config = minimal_cell_config()
    config["etcd"] = {"snapshots": snapshots}
    assert errors_of(config) == [f"regions.fra1.{line}"]


def test_the_s3_secret_data_and_a_malformed_credential() -> None:
    config = minimal_cell_config()
    config["etcd"] = {
        "snapshots": {
            "s3": {"endpoint": "minio.lab:9000", "bucket": "etcd", "insecure": True, "credentialsConfigKey": "etcdS3"}
        }
    }
    spec = CellSpec.model_validate(config)
    assert etcd_s3_secret_data(spec, "AKIA:abc:def") == {
        "etcd-s3-endpoint": "minio.lab:9000",
        "etcd-s3-bucket": "etcd",
        "etcd-s3-region": "us-east-1",
        "etcd-s3-access-key": "AKIA",
        "etcd-s3-secret-key": "abc:def",
        "etcd-s3-insecure": "true",
        "etcd-s3-skip-ssl-verify": "false",
    }
    with pytest.raises(
        ValueError,
        match=r"^etcd\.snapshots\.s3\.credentialsConfigKey 'etcdS3': the secret is not "
        r"'<access key id>:<secret access key>'$",
    ) as raised:
        etcd_s3_secret_data(spec, "no-colon-SECRET")
    assert "SECRET" not in str(raised.value)


def test_forget_on_every_server_is_refused() -> None:
    config = minimal_cell_config()
    for host in config["nodePools"]["servers"]["hosts"]:
        host["removalPolicy"] = "forget"
    assert errors_of(config) == [
        "regions.fra1.nodePools.servers.hosts[0].removalPolicy: 'forget' on every server leaves no server to run "
        "the nodes' maintenance on; keep at least one healthy server without it"
    ]
