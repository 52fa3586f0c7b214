"""Bad input the config fuzz and a review found accepted (or crashing) ends with one line naming the key, the value and
what is accepted; ``gpucell plan`` exits 2 and plans nothing (issue 35, item 5): cloud-init nested past the bound, a
Gateway domain over the API's or the issuer's names, a Gateway in a tenant's pool, address blocks shared by two cells,
BGP peers and stores at addresses that are not theirs, special ranges in tenant clusters, backups in the etcd
snapshots' place, an upper-case PCI id."""

from __future__ import annotations

import contextlib
import copy
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucell.errors import ConfigError
from gpucell.spec.backups import S3Place
from gpucell.spec.cell import StackSpec
from gpucell.spec.cloud_init import MAX_CLOUD_INIT_DEPTH
from gpucell.stacks import cli
from tests.conftest import REPO, prod_lab_config
from tests.test_gpu_models import H800

Edit = Callable[[dict[str, Any]], None]
"""An edit of a stack file's ``config`` mapping."""


def _stack(stack: str) -> dict[str, Any]:
    """The stack file of ``stack``; ``prod`` is both production regions in one lab stack
    (:func:`tests.conftest.prod_lab_config`), where the rules across regions judge them together."""
    if stack == "prod":
        return {"config": prod_lab_config()}
    loaded: dict[str, Any] = yaml.safe_load((REPO / f"Pulumi.{stack}.yaml").read_text())
    return loaded


def put(path: tuple[str | int, ...], value: Any) -> Edit:
    """Set ``path`` below ``gpucell:regions`` (missing maps created) to ``value``."""

    def edit(config: dict[str, Any]) -> None:
        node: Any = config["gpucell:regions"]
        for key in path[:-1]:
            node = node.setdefault(key, {}) if isinstance(node, dict) else node[key]
        node[path[-1]] = value

    return edit


def nested(levels: int, top: str = "#cloud-config\nx: ") -> str:
    """A YAML document whose ``x`` nests ``levels`` flow lists (the top mapping is one level more)."""
    return top + "[" * levels + "]" * levels + "\n"


def plan(tmp_path: Path, stack: str, *edits: Edit) -> tuple[int, str, str]:
    """``gpucell plan <stack>`` of the repository's stack file after ``edits``: exit code, stdout, stderr."""
    document = _stack(stack)
    for edit in edits:
        edit(document["config"])
    (tmp_path / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text())
    (tmp_path / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(document))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["plan", stack, "--project-dir", str(tmp_path)])
    return code, out.getvalue(), err.getvalue()


BASTION = ("lab1", "tenants", "research", "virtualMachines", "bastion")
FRA1, IAD1 = ("fra1",), ("iad1",)
VIP_BGP = {
    "mode": "bgp",
    "interface": "bond0",
    "bgp": {"asn": 65120, "peers": [{"address": "10.120.0.1", "asn": 65100}]},
}
LINK_LOCAL_NOTE = "a link-local address (where clouds serve instance metadata and credentials)"
COVERS = (
    "an endpoint's expose.host under it could take {}, and the Gateway's issuer would sign a certificate for it; give "
    "the Gateway a domain of its own (e.g. models.<region>.example.net)"
)
OTHER_CELL = "give each cell's pools addresses no other cell uses"
STORE_AT_NODE = "would stay on the cell they are sent away from (and be lost with it); give a store outside the cell"
BUCKET_CLASH = (
    "Velero would meet k3s's objects under its prefix (a backup store holds Velero's directories only), and the "
    "snapshots, which hold every Secret of the cell, would lie where the backup location reads and deletes; give "
    "backups a bucket of their own, or a prefix apart from that folder"
)


def _vip(peer: str) -> dict[str, Any]:
    vip = copy.deepcopy(VIP_BGP)
    vip["bgp"]["peers"][0]["address"] = peer
    return vip


def _gpu_model(config: dict[str, Any]) -> None:
    config["gpucell:gpuModels"] = {"H800-PCIe-80GB": {**H800, "pciDeviceId": "233A"}}


CASES: list[tuple[str, str, list[Edit], str]] = [
    (
        "cloud-init nested 330 levels",
        "dev",
        [put((*BASTION, "cloudInit"), {"userData": nested(330)})],
        f"regions.lab1.tenants.research.virtualMachines.bastion.cloudInit.userData: nests mappings and lists more "
        f"than {MAX_CLOUD_INIT_DEPTH} levels deep (line 2); gpucell accepts user data of at most "
        f"{MAX_CLOUD_INIT_DEPTH} levels",
    ),
    (
        "network data nested past the bound",
        "dev",
        [put((*BASTION, "cloudInit"), {"networkData": nested(MAX_CLOUD_INIT_DEPTH, "version: 2\nx: ")})],
        f"regions.lab1.tenants.research.virtualMachines.bastion.cloudInit.networkData: nests mappings and lists more "
        f"than {MAX_CLOUD_INIT_DEPTH} levels deep (line 2); gpucell accepts network data of at most "
        f"{MAX_CLOUD_INIT_DEPTH} levels",
    ),
    (
        "gateway domain over the API name",
        "prod",
        [put((*FRA1, "gateway", "domain"), "fra1.gpucell.example")],
        "regions.fra1.gateway.domain: 'fra1.gpucell.example' covers api.fra1.gpucell.example (network.tlsSans[0]): "
        + COVERS.format("that name"),
    ),
    (
        "OIDC issuer under the gateway domain",
        "prod",
        [put((*FRA1, "oidc", "issuerUrl"), "https://login.models.fra1.gpucell.example/realms/gpucell")],
        "regions.fra1.gateway.domain: 'models.fra1.gpucell.example' covers login.models.fra1.gpucell.example "
        "(oidc.issuerUrl): " + COVERS.format("that name"),
    ),
    (
        "gateway domain over both",
        "prod",
        [put((*FRA1, "gateway", "domain"), "gpucell.example")],
        "regions.fra1.gateway.domain: 'gpucell.example' covers api.fra1.gpucell.example (network.tlsSans[0]), "
        "login.gpucell.example (oidc.issuerUrl): " + COVERS.format("those names"),
    ),
    (
        "gateway domain over another region's API name",
        "prod",
        [put((*IAD1, "gateway", "domain"), "fra1.gpucell.example")],
        "regions.iad1.gateway.domain: 'fra1.gpucell.example' covers api.fra1.gpucell.example "
        "(regions.fra1.network.tlsSans[0]): " + COVERS.format("that name"),
    ),
    (
        "gateway pool of a tenant",
        "prod",
        [put((*FRA1, "gateway", "pool"), "acme-public"), put((*FRA1, "gateway", "address"), "203.0.113.17")],
        "regions.fra1.gateway.pool: 'acme-public' lists tenants (acme), whose LoadBalancer Services could take the "
        "Gateway's address first; give the Gateway a pool that lists no tenants (pools without tenants: platform)",
    ),
    (
        "LB block of another region",
        "prod",
        [put((*IAD1, "loadBalancer", "pools", "platform", "blocks"), ["203.0.113.8/30"])],
        "regions.iad1.loadBalancer.pools.platform.blocks[0]: '203.0.113.8/30' overlaps "
        "regions.fra1.loadBalancer.pools.platform.blocks[0] 203.0.113.8/30: both cells would hand out and announce "
        f"the same addresses; {OTHER_CELL}",
    ),
    (
        "LB block in another region's node network",
        "prod",
        [put((*IAD1, "loadBalancer", "pools", "platform", "blocks"), ["10.110.3.240/29"])],
        "regions.iad1.loadBalancer.pools.platform.blocks[0]: '10.110.3.240/29' overlaps regions.fra1.network.nodeCidr "
        f"10.110.0.0/22: that cell would route the addresses to its own nodes, pods or Services; {OTHER_CELL}",
    ),
    (
        "LB block in another region's pod network",
        "prod",
        [put((*IAD1, "loadBalancer", "pools", "platform", "blocks"), ["10.111.0.8/30"])],
        "regions.iad1.loadBalancer.pools.platform.blocks[0]: '10.111.0.8/30' overlaps regions.fra1.network.podCidr "
        f"10.111.0.0/16: that cell would route the addresses to its own nodes, pods or Services; {OTHER_CELL}",
    ),
    (
        "apiVip BGP peer link-local",
        "prod",
        [put((*IAD1, "network", "apiVip"), _vip("169.254.0.1"))],
        "regions.iad1.network.apiVip.bgp.peers[0].address: '169.254.0.1' is a link-local address; a BGP peer is a "
        "router's unicast address (e.g. 10.110.0.1)",
    ),
    (
        "apiVip BGP peer loopback",
        "prod",
        [put((*IAD1, "network", "apiVip"), _vip("127.0.0.1"))],
        "regions.iad1.network.apiVip.bgp.peers[0].address: '127.0.0.1' is a loopback address (every node would reach "
        "itself); a BGP peer is a router's unicast address (e.g. 10.110.0.1)",
    ),
    (
        "apiVip BGP peer multicast",
        "prod",
        [put((*IAD1, "network", "apiVip"), _vip("224.0.0.5"))],
        "regions.iad1.network.apiVip.bgp.peers[0].address: '224.0.0.5' is a multicast address; a BGP peer is a "
        "router's unicast address (e.g. 10.110.0.1)",
    ),
    (
        "apiVip BGP peer is the VIP",
        "prod",
        [put((*IAD1, "network", "apiVip"), _vip("10.120.0.10"))],
        "regions.iad1.network.apiVip.bgp.peers[0].address: '10.120.0.10' is the VIP itself (network.apiEndpoint); "
        "give the router's address",
    ),
    (
        "loadBalancer BGP peer loopback",
        "prod",
        [put((*FRA1, "loadBalancer", "bgp", "peers", "tor-a", "address"), "127.0.0.1")],
        "regions.fra1.loadBalancer.bgp.peers.tor-a.address: '127.0.0.1' is a loopback address (every node would reach "
        "itself); a BGP peer is a router's unicast address (e.g. 10.110.0.1)",
    ),
    *[
        (
            f"apiVip interface {name!r}",
            "prod",
            [put((*IAD1, "network", "apiVip", "interface"), name)],
            f"regions.iad1.network.apiVip.interface: {name!r} is not a network interface name (letters, digits, '_', "
            "'.', '-'; at most 15 characters), e.g. eth0 or bond0.100",
        )
        for name in ("bond0-storage-v42", "bond0/1", "bond 0", "..")
    ],
    (
        "etcd S3 endpoint link-local",
        "prod",
        [put((*FRA1, "etcd", "snapshots", "s3", "endpoint"), "169.254.169.254")],
        f"regions.fra1.etcd.snapshots.s3.endpoint: '169.254.169.254' has the host 169.254.169.254, which is "
        f"{LINK_LOCAL_NOTE}; give the S3 store's own routable address or DNS name",
    ),
    (
        "etcd S3 endpoint localhost",
        "prod",
        [put((*FRA1, "etcd", "snapshots", "s3", "endpoint"), "localhost:9000")],
        "regions.fra1.etcd.snapshots.s3.endpoint: 'localhost:9000' has the host localhost, which names loopback "
        "(every node would reach itself); give the S3 store's own routable address or DNS name",
    ),
    (
        "etcd S3 endpoint at a node",
        "prod",
        [put((*FRA1, "etcd", "snapshots", "s3", "endpoint"), "10.110.0.11:9000")],
        "regions.fra1.etcd.snapshots.s3.endpoint: '10.110.0.11:9000' is at 10.110.0.11, the address of node "
        f"fra1-srv-1 (nodePools.servers.hosts[0]): the etcd snapshots {STORE_AT_NODE}",
    ),
    (
        "backup S3 endpoint link-local",
        "prod",
        [put((*FRA1, "backups", "storage", "endpoint"), "https://169.254.169.254")],
        f"regions.fra1.backups.storage.endpoint: 'https://169.254.169.254' has the host 169.254.169.254, which is "
        f"{LINK_LOCAL_NOTE}; give the S3 store's own routable address or DNS name",
    ),
    (
        "backup S3 endpoint in a tenant's LB pool",
        "prod",
        [put((*FRA1, "backups", "storage", "endpoint"), "https://203.0.113.21:9000")],
        "regions.fra1.backups.storage.endpoint: 'https://203.0.113.21:9000' is at 203.0.113.21, inside "
        "loadBalancer.pools.acme-public.blocks[0], whose addresses the cell hands to LoadBalancer Services: a tenant's "
        "Service could take it and receive the backups; give a store outside the cell",
    ),
    (
        "remote-write receiver at a node",
        "prod",
        [put((*FRA1, "metrics", "remoteWrite", "url"), "https://10.110.0.21/api/v1/push")],
        "regions.fra1.metrics.remoteWrite.url: 'https://10.110.0.21/api/v1/push' is at 10.110.0.21, the address of "
        f"node fra1-h100-1 (nodePools.h100-vm.hosts[0]): the samples {STORE_AT_NODE}",
    ),
    (
        "remote-write receiver link-local",
        "prod",
        [put((*FRA1, "metrics", "remoteWrite", "url"), "https://[fe80::1]/api/v1/push")],
        "regions.fra1.metrics.remoteWrite.url: 'https://[fe80::1]/api/v1/push' has the host fe80::1, which is "
        f"{LINK_LOCAL_NOTE}; give the remote-write receiver's own routable address or DNS name",
    ),
    (
        "OIDC issuer loopback",
        "prod",
        [put((*FRA1, "oidc", "issuerUrl"), "https://127.0.0.1:8443/realms/gpucell")],
        "regions.fra1.oidc.issuerUrl: 'https://127.0.0.1:8443/realms/gpucell' has the host 127.0.0.1, which is a "
        "loopback address (every node would reach itself); give the issuer's own routable address or DNS name",
    ),
    (
        "image catalog HTTP source link-local",
        "prod",
        [
            put(
                (*FRA1, "imageCatalogs", "os-images", "images", "ubuntu-2404", "source"),
                {"http": "https://169.254.169.254/x.img"},
            )
        ],
        "regions.fra1.imageCatalogs.os-images.images.ubuntu-2404.source.http: 'https://169.254.169.254/x.img' has the "
        f"host 169.254.169.254, which is {LINK_LOCAL_NOTE}; give the image server's own routable address or DNS name",
    ),
    (
        "tenant cluster loopback pod CIDR",
        "prod",
        [put((*IAD1, "tenants", "globex", "tenantClusters", "ml", "network"), {"podCidr": "127.0.0.0/16"})],
        "regions.iad1.tenants.globex.tenantClusters.ml.network.podCidr: '127.0.0.0/16' overlaps loopback "
        "(127.0.0.0/8: every host would reach itself); give a range outside it (e.g. of 10.0.0.0/8)",
    ),
    (
        "tenant cluster link-local service CIDR",
        "prod",
        [put((*IAD1, "tenants", "globex", "tenantClusters", "ml", "network"), {"serviceCidr": "169.254.0.0/16"})],
        "regions.iad1.tenants.globex.tenantClusters.ml.network.serviceCidr: '169.254.0.0/16' overlaps link-local "
        "(169.254.0.0/16, where clouds serve instance metadata); give a range outside it (e.g. of 10.0.0.0/8)",
    ),
    (
        "tenant cluster loopback API address",
        "prod",
        [put((*IAD1, "tenants", "globex", "tenantClusters", "ml", "apiServer", "address"), "127.0.0.1")],
        "regions.iad1.tenants.globex.tenantClusters.ml.apiServer.address: '127.0.0.1' is a loopback address (every "
        "node would reach itself); the API server's address is a unicast address of a loadBalancer pool",
    ),
    (
        "cell pod CIDR in loopback",
        "dev",
        [put(("lab1", "network", "podCidr"), "127.64.0.0/16")],
        "regions.lab1.network.podCidr: '127.64.0.0/16' overlaps loopback (127.0.0.0/8: every host would reach itself); "
        "give a range outside it (e.g. of 10.0.0.0/8)",
    ),
    (
        "backups in the etcd snapshots' bucket and folder",
        "prod",
        [put((*FRA1, "backups", "storage", "bucket"), "gpucell-etcd-fra1")],
        "regions.fra1.backups.storage.prefix: 'fra1' in bucket gpucell-etcd-fra1 (s3.fra1.gpucell.example:443) "
        f"overlaps etcd.snapshots.s3 (folder fra1): {BUCKET_CLASH}",
    ),
    (
        "backups over the etcd snapshots' folder",
        "prod",
        [
            put((*FRA1, "backups", "storage", "bucket"), "gpucell-etcd-fra1"),
            put((*FRA1, "etcd", "snapshots", "s3", "folder"), "fra1/etcd"),
        ],
        "regions.fra1.backups.storage.prefix: 'fra1' in bucket gpucell-etcd-fra1 (s3.fra1.gpucell.example:443) "
        f"overlaps etcd.snapshots.s3 (folder fra1/etcd): {BUCKET_CLASH}",
    ),
    (
        "backups in another region's etcd snapshots",
        "prod",
        [
            put(
                (*IAD1, "backups", "storage"),
                {
                    **_stack("prod")["config"]["gpucell:regions"]["iad1"]["backups"]["storage"],
                    "endpoint": "https://s3.fra1.gpucell.example",
                    "bucket": "gpucell-etcd-fra1",
                    "prefix": None,
                },
            ),
        ],
        "regions.iad1.backups.storage.prefix: '' in bucket gpucell-etcd-fra1 (s3.fra1.gpucell.example:443) overlaps "
        f"regions.fra1.etcd.snapshots.s3 (folder fra1): {BUCKET_CLASH}",
    ),
    (
        "negative GPU quota",
        "dev",
        [put(("lab1", "tenants", "research", "quota", "gpus"), {"nvidia.com/gpu": -1})],
        "regions.lab1.tenants.research.quota.gpus.nvidia.com/gpu: -1 is not 0-100000 units",
    ),
    (
        "upper-case pciDeviceId",
        "dev",
        [_gpu_model],
        "gpuModels.H800-PCIe-80GB.pciDeviceId: '233A' is not a PCI device id as lspci and sysfs print it (lower-case "
        "hex); write '233a'",
    ),
]


@pytest.mark.parametrize(("stack", "edits", "line"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_and_nothing_planned(
    tmp_path: Path, stack: str, edits: list[Edit], line: str
) -> None:
    assert plan(tmp_path, stack, *edits) == (2, "", line + "\n")


def _regions(*edits: Edit) -> list[str]:
    """The lines of the prod regions after ``edits``, validated as a stack; ``["OK"]`` when they validate."""
    config = copy.deepcopy(_stack("prod")["config"])
    for edit in edits:
        edit(config)
    try:
        StackSpec.model_validate({"regions": config["gpucell:regions"]})
    except ConfigError as exc:
        return exc.lines
    return ["OK"]


def test_what_lies_apart_is_still_accepted() -> None:
    # the etcd snapshots' bucket with a prefix apart from their folder (prod's Gateway domains are siblings of the
    # API's and the issuer's names already)
    assert _regions(
        put((*FRA1, "backups", "storage", "bucket"), "gpucell-etcd-fra1"),
        put((*FRA1, "backups", "storage", "prefix"), "fra1-backups"),
    ) == ["OK"]
    # cloud-init at the bound, and a BGP peer on the node network
    assert _regions(
        put((*IAD1, "tenants", "globex", "virtualMachines", "sim-01", "cloudInit"), {"userData": nested(63)}),
        put((*IAD1, "network", "apiVip"), VIP_BGP),
    ) == ["OK"]


def test_places_in_a_bucket_overlap_by_whole_path_segments() -> None:
    place = S3Place.at("S3.example.net.", 443, "b", "fra1/")
    assert place == S3Place("s3.example.net:443", "b", "fra1")
    assert place.overlaps(S3Place.at("s3.example.net", 443, "b", "fra1/etcd"))
    assert place.overlaps(S3Place.at("s3.example.net", 443, "b", None))  # the bucket root lies over every prefix
    assert not place.overlaps(S3Place.at("s3.example.net", 443, "b", "fra10"))
    assert not place.overlaps(S3Place.at("s3.example.net", 9000, "b", "fra1"))
    # AWS bucket names are global: every amazonaws.com endpoint reaches the same bucket
    assert S3Place.at(None, 443, "b", "x").overlaps(S3Place.at("s3.eu-central-1.amazonaws.com", 443, "b", "x"))
