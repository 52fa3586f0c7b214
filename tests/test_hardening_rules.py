"""Every bad config is one clear line: strings, addresses, bounds, tenant isolation and sign-in rules, each with its
exact message, on the fra1 region of Pulumi.prod-fra1.yaml; and how the lines are shown (one line, shortened, never an
empty key path, cross-field rules beside field errors)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pytest

from gpucell.engine.mock_engine import run_program
from gpucell.errors import ConfigError, join_path, shown
from gpucell.spec import StackSpec
from gpucell.stacks import cli
from gpucell.stacks.program import main as program_main
from tests.conftest import REPO, prod_regions

PROD: dict[str, Any] = prod_regions()
FRA1_HOSTS = sum(len(pool["hosts"]) for pool in PROD["fra1"]["nodePools"].values())
FRA1 = ("fra1",)
ACME = ("fra1", "tenants", "acme")
GLOBEX = ("fra1", "tenants", "globex")
Edit = Callable[[dict[str, Any]], None]


def put(path: tuple[str | int, ...], value: Any) -> Edit:
    """An edit of the prod regions setting ``path`` (missing maps created) to ``value``."""

    def edit(regions: dict[str, Any]) -> None:
        node: Any = regions
        for key in path[:-1]:
            node = node.setdefault(key, {}) if isinstance(node, dict) else node[key]
        node[path[-1]] = value

    return edit


def errors(*edits: Edit) -> list[str]:
    """The lines of the prod regions after ``edits``; ``["OK"]`` when they validate."""
    regions = copy.deepcopy(PROD)
    for edit in edits:
        edit(regions)
    try:
        StackSpec.model_validate({"regions": regions})
    except ConfigError as exc:
        return exc.lines
    return ["OK"]


def test_prod_validates() -> None:
    assert errors() == ["OK"]


# -- strings: the whole value, one line, of the right kind -----------------------------------------------------

TRAILING_NEWLINE = [
    (
        (*FRA1, "versions", "k3s"),
        "v1.34.2+k3s1\n",
        "regions.fra1.versions.k3s: 'v1.34.2+k3s1\\n' is not a pinned k3s release; use the form v1.34.2+k3s1 "
        "(no latest, "
        "stable or channels)",
    ),
    (
        (*FRA1, "nodePools", "cpu", "hosts", 0, "name"),
        "fra1-cpu-1\n",
        "regions.fra1.nodePools.cpu.hosts[0].name: 'fra1-cpu-1\\n' is not a DNS-1123 label (lower-case letters, digits "
        "and '-', at most 63 characters)",
    ),
    (
        (*FRA1, "nodePools", "h100-vm", "topology", "reservedCpus"),
        "0-3\n",
        "regions.fra1.nodePools.h100-vm.topology.reservedCpus: '0-3\\n' is not a cpuset; use a list of CPUs and ranges "
        "such as 0-3,64-67",
    ),
    (
        (*FRA1, "nodePools", "cpu", "taints"),
        ["a=b:NoSchedule\n"],
        "regions.fra1.nodePools.cpu.taints[0]: 'a=b:NoSchedule\\n' is not a taint; use "
        "key[=value]:NoSchedule|PreferNoSchedule|NoExecute",
    ),
    (
        (*FRA1, "nodePools", "cpu", "labels"),
        {"rack": "r1\n"},
        "regions.fra1.nodePools.cpu.labels.rack: 'r1\\n' is not a label value; at most 63 of [A-Za-z0-9-_.], "
        "alphanumeric at both ends",
    ),
    (
        (*FRA1, "network", "tlsSans"),
        ["api.example\n"],
        "regions.fra1.network.tlsSans[0]: 'api.example\\n' is neither an IP address nor a DNS name; give a bare "
        "address "
        "or name such as 10.0.0.10 or api.fra1.example.net (no https://, no :port)",
    ),
    (
        (*FRA1, "network", "apiEndpoint"),
        "10.110.0.10\n",
        "regions.fra1.network.apiEndpoint: '10.110.0.10\\n' is neither an IP address nor a DNS name; give a bare "
        "address or name such as 10.0.0.10 or api.fra1.example.net (no https://, no :port)",
    ),
]


@pytest.mark.parametrize(("path", "value", "line"), TRAILING_NEWLINE, ids=[str(c[0][-1]) for c in TRAILING_NEWLINE])
def test_a_trailing_newline_is_refused_everywhere(path: tuple[str | int, ...], value: Any, line: str) -> None:
    assert errors(put(path, value)) == [line]


@pytest.mark.parametrize("where", ["nodePools", "tenants", "virtualMachines", "region"])
def test_names_with_a_trailing_newline_are_refused(where: str) -> None:
    def rename(regions: dict[str, Any]) -> None:
        parent = {
            "nodePools": regions["fra1"]["nodePools"],
            "tenants": regions["fra1"]["tenants"],
            "virtualMachines": regions["fra1"]["tenants"]["acme"]["virtualMachines"],
            "region": regions,
        }[where]
        old = next(iter(parent))
        parent[f"{old}\n"] = parent.pop(old)

    (line,) = [line for line in errors(rename) if "\\n" in line]
    assert "\n" not in line
    assert line.endswith(
        (
            "is not a DNS-1123 label (lower-case letters, digits and '-', at most 63 characters)",
            "workloads get Services of that name",
        )
    )


STRINGS = [
    (
        (*FRA1, "ssh", "user"),
        "",
        "regions.fra1.ssh.user: '' is not a login name; use lower-case letters, digits, '_' and '-', starting with a "
        "letter or '_', at most 32 characters (e.g. ubuntu)",
    ),
    (
        (*FRA1, "ssh", "user"),
        " ubuntu",
        "regions.fra1.ssh.user: ' ubuntu' is not a login name; use lower-case letters, digits, '_' and '-', starting "
        "with a letter or '_', at most 32 characters (e.g. ubuntu)",
    ),
    (
        (*ACME, "virtualMachines", "desk-01", "user"),
        "root",
        "regions.fra1.tenants.acme.virtualMachines.desk-01.user: 'root' is root, whose SSH login cloud-init disables "
        "(disable_root); use e.g. ubuntu",
    ),
    (
        (*ACME, "notebooks", "nb-alice", "image"),
        "not an image!",
        "regions.fra1.tenants.acme.notebooks.nb-alice.image: 'not an image!' is not a container image reference; use "
        "[registry[:port]/]path[:tag][@sha256:digest] with a lower-case path (e.g. "
        "quay.io/jupyter/pytorch-notebook:cuda12-2025-11-24)",
    ),
    (
        (*FRA1, "gpuOperator", "vgpuDriverImage", "repository"),
        "HTTPS://registry/x",
        "regions.fra1.gpuOperator.vgpuDriverImage.repository: 'HTTPS://registry/x' is not an image repository path "
        "([registry[:port]/]path, lower-case, no tag)",
    ),
    (
        (*FRA1, "gpuOperator", "vgpuDriverImage", "version"),
        "580 beta",
        "regions.fra1.gpuOperator.vgpuDriverImage.version: '580 beta' is not an image tag (letters, digits, '_', '.', "
        "'-'; at most 128; no leading . or -)",
    ),
    (
        (*ACME, "modelEndpoints", "llama-8b", "modelFormat"),
        "hugging face; rm -rf /",
        "regions.fra1.tenants.acme.modelEndpoints.llama-8b.modelFormat: 'hugging face; rm -rf /' is not a KServe model "
        "format name (letters, digits, '.', '_', '-'; e.g. huggingface, vLLM, onnx)",
    ),
    (
        (*ACME, "notebooks", "nb-alice", "storageClass"),
        "Fast SSD",
        "regions.fra1.tenants.acme.notebooks.nb-alice.storageClass: 'Fast SSD' is not a StorageClass name (a DNS-1123 "
        "subdomain: lower-case letters, digits, '-', '.')",
    ),
    (
        (
            *FRA1,
            "imageNamespaces",
        ),
        ["Images"],
        "regions.fra1.imageNamespaces[0]: 'Images' is not a namespace name (a DNS-1123 label)",
    ),
    (
        (*ACME, "virtualMachines", "desk-01", "rootDisk", "source"),
        {"registry": "docker://"},
        "regions.fra1.tenants.acme.virtualMachines.desk-01.rootDisk.source.registry: 'docker://' has nothing after "
        "docker://; e.g. docker://quay.io/containerdisks/ubuntu:24.04",
    ),
    (
        (*ACME, "virtualMachines", "train-01", "dataDisks", 0, "source"),
        {"http": "https://"},
        "regions.fra1.tenants.acme.virtualMachines.train-01.dataDisks[0].source.http: 'https://' is not an https:// or "
        "http:// URL with a host (and no user:password@)",
    ),
    (
        (*ACME, "virtualMachines", "desk-01", "sshKeys"),
        ["ssh-ed25519 AAAAC3Nz a\nssh-rsa AAAA b"],
        "regions.fra1.tenants.acme.virtualMachines.desk-01.sshKeys[0]: is not one SSH public key on one line "
        "(ssh-ed25519 AAAA... comment, ssh-rsa AAAA...)",
    ),
    (
        (*ACME, "groups", "members"),
        ["acme-ml\nsystem:masters"],
        "regions.fra1.tenants.acme.groups.members[0]: 'acme-ml\\nsystem:masters' is not a single line of text (empty, "
        "padded with spaces, or holding a newline or control character)",
    ),
    (
        (*ACME, "modelEndpoints", "llama-8b", "credentialsConfigKey"),
        "",
        "regions.fra1.tenants.acme.modelEndpoints.llama-8b.credentialsConfigKey: '' is not a config key name; use "
        "letters, digits, '_' and '-', starting with a letter (e.g. hfTokenAcme)",
    ),
    (
        (*GLOBEX, "modelEndpoints", "fraud-detector", "s3Endpoint"),
        "https://minio/x",
        "regions.fra1.tenants.globex.modelEndpoints.fraud-detector.s3Endpoint: 'https://minio/x' is not a host name or "
        "address with an optional :port (no https://, no path; e.g. minio.storage.example.net:9000)",
    ),
]


@pytest.mark.parametrize(("path", "value", "line"), STRINGS, ids=[f"{c[0][-1]}={c[1]!r}" for c in STRINGS])
def test_strings_are_validated(path: tuple[str | int, ...], value: Any, line: str) -> None:
    assert errors(put(path, value)) == [line]


# -- addresses and physical bounds ----------------------------------------------------------------------------

ADDRESSES = [
    (
        (*FRA1, "nodePools", "cpu", "hosts", 0, "address"),
        "10.110.0.0",
        "regions.fra1.nodePools.cpu.hosts[0].address: '10.110.0.0' is the network or broadcast address of "
        "network.nodeCidr 10.110.0.0/22",
    ),
    (
        (*FRA1, "nodePools", "cpu", "hosts", 0, "address"),
        "10.110.3.255",
        "regions.fra1.nodePools.cpu.hosts[0].address: '10.110.3.255' is the network or broadcast address of "
        "network.nodeCidr 10.110.0.0/22",
    ),
    (
        (*FRA1, "nodePools", "cpu", "hosts", 0, "address"),
        175243345,
        "regions.fra1.nodePools.cpu.hosts[0].address: 175243345 is not an IPv4 address written as a string (e.g. "
        "10.0.0.1)",
    ),
    (
        (*FRA1, "network", "apiEndpoint"),
        "255.255.255.255",
        "regions.fra1.network.apiEndpoint: '255.255.255.255' is the limited broadcast address; the API endpoint "
        "must be "
        "a unicast address (a VIP or load balancer)",
    ),
    (
        (*FRA1, "network", "apiEndpoint"),
        "10.110.0.81",
        "regions.fra1.network.apiEndpoint: '10.110.0.81' is the address of agent fra1-cpu-1 (nodePools.cpu.hosts[0]), "
        "which runs no API server; use a server's address or a VIP in front of the servers",
    ),
    (
        (*FRA1, "network", "apiEndpoint"),
        "10.111.0.10",
        "regions.fra1.network.apiEndpoint: '10.111.0.10' is inside network.podCidr 10.111.0.0/16; the API "
        "endpoint must "
        "be reachable from the nodes before any pod runs",
    ),
    (
        (*FRA1, "network", "apiEndpoint"),
        "10.112.0.1",
        "regions.fra1.network.apiEndpoint: '10.112.0.1' is inside network.serviceCidr 10.112.0.0/16; the API endpoint "
        "must be reachable from the nodes before any pod runs",
    ),
    (
        (*ACME, "notebooks", "nb-alice", "cpuMillicores"),
        10**9,
        "regions.fra1.tenants.acme.notebooks.nb-alice.cpuMillicores: 1000000000 is invalid: Input should be less than "
        "or equal to 1024000",
    ),
    (
        (*ACME, "quota", "nodePorts"),
        5000,
        "regions.fra1.tenants.acme.quota.nodePorts: 5000 is invalid: Input should be less than or equal to 2768",
    ),
    (
        (*FRA1, "nodePools", "h100-vm", "topology", "reservedCpus"),
        "3-0",
        "regions.fra1.nodePools.h100-vm.topology.reservedCpus: '3-0' has the range 3-0 running backwards; write it as "
        "0-3",
    ),
    (
        (*FRA1, "nodePools", "h100-vm", "topology", "reservedCpus"),
        "0-9000",
        "regions.fra1.nodePools.h100-vm.topology.reservedCpus: '0-9000' names CPU 9000; Linux numbers CPUs 0-8191",
    ),
]


@pytest.mark.parametrize(("path", "value", "line"), ADDRESSES, ids=[f"{c[0][-1]}={c[1]!r}" for c in ADDRESSES])
def test_addresses_and_bounds(path: tuple[str | int, ...], value: Any, line: str) -> None:
    assert errors(put(path, value)) == [line]


def test_a_copied_region_would_install_two_cells_on_the_same_machines() -> None:
    lines = errors(lambda regions: regions.__setitem__("fra2", copy.deepcopy(regions["fra1"])))
    assert len(lines) == FRA1_HOSTS + 3  # one per host of fra1, its backups' place and its two address blocks
    assert lines[0] == (
        "regions.fra2.nodePools.servers.hosts[0].address: '10.110.0.11' (SSH port 22) is already a host of "
        "regions.fra1.nodePools.servers.hosts[0]; one machine can be a node of one cell only"
    )
    assert lines[-3:] == [
        "regions.fra2.backups.storage.prefix: 'fra1' in bucket gpucell-backups-fra1 is where region fra1 keeps its "
        "backups: each region's Velero would import and expire the other's; give each region its own prefix (e.g. "
        "the region's name)",
        "regions.fra2.loadBalancer.pools.acme-public.blocks[0]: '203.0.113.16/28' overlaps "
        "regions.fra1.loadBalancer.pools.acme-public.blocks[0] 203.0.113.16/28: both cells would hand out and "
        "announce the same addresses; give each cell's pools addresses no other cell uses",
        "regions.fra2.loadBalancer.pools.platform.blocks[0]: '203.0.113.8/30' overlaps "
        "regions.fra1.loadBalancer.pools.platform.blocks[0] 203.0.113.8/30: both cells would hand out and announce "
        "the same addresses; give each cell's pools addresses no other cell uses",
    ]

    # another SSH port is another machine behind the same address (a bastion's port forwards)
    def other_port(regions: dict[str, Any]) -> None:
        regions["fra2"] = copy.deepcopy(regions["fra1"])
        regions["fra2"]["ssh"] = {"user": "ubuntu", "port": 2222}
        regions["fra2"]["backups"]["storage"]["prefix"] = "fra2"
        # its public addresses are its own (two cells never hand out the same addresses)
        fra2 = regions["fra2"]
        fra2["loadBalancer"]["pools"]["acme-public"]["blocks"] = ["192.0.2.16/28"]
        fra2["loadBalancer"]["pools"]["platform"]["blocks"] = ["192.0.2.8/30"]
        fra2["gateway"]["address"] = "192.0.2.9"
        for vm in fra2["tenants"]["acme"]["virtualMachines"].values():
            if vm.get("sshService", {}).get("address") == "203.0.113.20":
                vm["sshService"]["address"] = "192.0.2.20"

    assert errors(other_port) == ["OK"]


# -- tenant isolation -----------------------------------------------------------------------------------------

ISOLATION = [
    (
        (
            *FRA1,
            "imageNamespaces",
        ),
        ["tenant-globex"],
        "regions.fra1.imageNamespaces[0]: 'tenant-globex' is a tenant's namespace (tenant-*): every tenant could clone "
        "that tenant's disks; put shared images in a namespace of their own",
    ),
    (
        (
            *FRA1,
            "imageNamespaces",
        ),
        ["kube-system"],
        "regions.fra1.imageNamespaces[0]: 'kube-system' is a system or platform namespace; put shared images in a "
        "namespace of their own",
    ),
    (
        (*ACME, "groups", "admins"),
        ["system:masters"],
        "regions.fra1.tenants.acme.groups.admins[0]: 'system:masters' is a Kubernetes group (system:*: every "
        "authenticated user, cluster admins, service accounts); bind a group of the tenant's own",
    ),
    (
        (*ACME, "groups", "viewers"),
        ["system:authenticated"],
        "regions.fra1.tenants.acme.groups.viewers[0]: 'system:authenticated' is a Kubernetes group (system:*: every "
        "authenticated user, cluster admins, service accounts); bind a group of the tenant's own",
    ),
    (
        (
            *ACME,
            "egressCidrs",
        ),
        ["0.0.0.0/0"],
        "regions.fra1.tenants.acme.egressCidrs[0]: '0.0.0.0/0' is the whole internet; use egress: internet, "
        "which keeps "
        "the cell's own networks and instance metadata out",
    ),
    (
        (
            *ACME,
            "egressCidrs",
        ),
        ["169.254.169.254/32"],
        "regions.fra1.tenants.acme.egressCidrs[0]: '169.254.169.254/32' overlaps link-local 169.254.0.0/16, where "
        "instance metadata (169.254.169.254) is served",
    ),
    (
        (
            *ACME,
            "egressCidrs",
        ),
        ["10.110.0.0/24"],
        "regions.fra1.tenants.acme.egressCidrs[0]: '10.110.0.0/24' overlaps network.nodeCidr 10.110.0.0/22: "
        "egressCidrs "
        "reach outside the cell; use egress cluster for the cell's own services",
    ),
    (
        (
            *ACME,
            "egressCidrs",
        ),
        ["10.111.5.0/24"],
        "regions.fra1.tenants.acme.egressCidrs[0]: '10.111.5.0/24' overlaps network.podCidr 10.111.0.0/16: egressCidrs "
        "reach outside the cell; use egress cluster for the cell's own services",
    ),
    (
        (
            *ACME,
            "egressCidrs",
        ),
        ["10.112.0.0/24"],
        "regions.fra1.tenants.acme.egressCidrs[0]: '10.112.0.0/24' overlaps network.serviceCidr 10.112.0.0/16: "
        "egressCidrs reach outside the cell; use egress cluster for the cell's own services",
    ),
    (
        (*ACME, "virtualMachines", "train-01", "sshService"),
        {"type": "NodePort"},
        "regions.fra1.tenants.acme.virtualMachines.train-01.sshService.allowFromCidrs: is required with type NodePort: "
        "list the client networks (VPN, office) that may reach SSH, or 0.0.0.0/0 to open it to the world",
    ),
    (
        (*ACME, "virtualMachines", "desk-01", "sshService"),
        {"type": "ClusterIP", "allowFromCidrs": ["10.0.0.0/8"]},
        "regions.fra1.tenants.acme.virtualMachines.desk-01.sshService.allowFromCidrs: only applies to type NodePort or "
        "LoadBalancer (a ClusterIP Service is reachable from inside the tenant only)",
    ),
    (
        (*ACME, "quota", "nodePorts"),
        0,
        "regions.fra1.tenants.acme.virtualMachines.train-01.sshService.type: 'NodePort' brings the tenant's node ports "
        "to 1, quota.nodePorts allows 0; raise quota.nodePorts (each NodePort opens a port on every node)",
    ),
    (
        (*GLOBEX, "modelEndpoints", "embedder", "credentialsConfigKey"),
        "hfTokenAcme",
        "regions.fra1.tenants.globex.modelEndpoints.embedder.credentialsConfigKey: 'hfTokenAcme' is already the "
        "credentials key of tenant acme (regions.fra1.tenants.acme); each tenant needs its own, its Secret is readable "
        "in the tenant's namespace",
    ),
    (
        (*ACME, "virtualMachines", "train-01", "dataDisks", 0, "source"),
        {"http": "http://images.acme.example/x.qcow2"},
        "regions.fra1.tenants.acme.virtualMachines.train-01.dataDisks[0].source.http: "
        "'http://images.acme.example/x.qcow2' is plain HTTP: anyone on the path can replace the image; use https:// or "
        "set allowPlainHttp: true",
    ),
    (
        (*ACME, "virtualMachines", "train-01", "dataDisks", 0, "source"),
        {"http": "https://images.acme.example/x.qcow2", "allowPlainHttp": True},
        "regions.fra1.tenants.acme.virtualMachines.train-01.dataDisks[0].source.allowPlainHttp: only applies to an "
        "http:// source",
    ),
    (
        (*ACME, "notebooks", "nb-alice", "expose"),
        {"host": "nb.acme.example.net", "ingressClass": "nginx"},
        "regions.fra1.tenants.acme.notebooks.nb-alice.expose.tlsSecret: is required: without it the notebook's token "
        "and code travel in clear text; name the TLS Secret for host, or set allowPlainHttp: true",
    ),
]


@pytest.mark.parametrize(("path", "value", "line"), ISOLATION, ids=[f"{c[0][-1]}={c[1]!r}" for c in ISOLATION])
def test_config_that_breaks_tenant_isolation_is_refused(path: tuple[str | int, ...], value: Any, line: str) -> None:
    assert errors(put(path, value)) == [line]


def test_explicit_opt_ins_are_accepted() -> None:
    assert errors(
        put(
            (*ACME, "virtualMachines", "train-01", "dataDisks", 0, "source"),
            {"http": "http://images.acme.example/x.qcow2", "allowPlainHttp": True},
        ),
        put(
            (*ACME, "notebooks", "nb-alice", "expose"),
            {"host": "nb.acme.example.net", "ingressClass": "nginx", "allowPlainHttp": True},
        ),
        put((*ACME, "virtualMachines", "train-01", "sshService", "allowFromCidrs"), ["0.0.0.0/0"]),
    ) == ["OK"]


def test_a_credentials_key_is_one_tenants_across_regions_and_never_an_ssh_key() -> None:
    # acme names hfTokenAcme in fra1 and iad1 (both prod stack files): the same tenant
    assert errors(
        put(("iad1", "tenants", "globex", "modelEndpoints", "embedder", "credentialsConfigKey"), "hfTokenAcme")
    ) == [
        "regions.iad1.tenants.globex.modelEndpoints.embedder.credentialsConfigKey: 'hfTokenAcme' is already the "
        "credentials key of tenant acme (regions.fra1.tenants.acme); each tenant needs its own, its Secret is readable "
        "in the tenant's namespace"
    ]
    assert errors(
        put(("iad1", "ssh", "privateKeyConfigKey"), "sshIad1"),
        put(("fra1", "tenants", "globex", "modelEndpoints", "embedder", "credentialsConfigKey"), "sshIad1"),
    ) == [
        "regions.fra1.tenants.globex.modelEndpoints.embedder.credentialsConfigKey: 'sshIad1' is the SSH private key of "
        "region iad1; name a secret that holds only this endpoint's storage credentials"
    ]


@pytest.mark.parametrize(
    "path",
    [
        ("etcd", "snapshots", "s3", "credentialsConfigKey"),
        ("metrics", "remoteWrite", "credentialsConfigKey"),
        ("imageCatalogs", "os-images", "images", "ubuntu-2404", "source", "credentialsConfigKey"),
        ("backups", "storage", "credentialsConfigKey"),
        ("backups", "repositoryPasswordConfigKey"),
    ],
)
def test_no_field_of_the_cell_names_an_ssh_key_but_ssh(path: tuple[str, ...]) -> None:
    """As the backup repository password (any 16 characters pass) the SSH key would sit in velero's Secret, as a
    catalog image's credentials it would go to the registry: root on every node."""
    assert errors(put(("fra1", *path), "sshPrivateKey")) == [
        f"regions.fra1.{'.'.join(path)}: 'sshPrivateKey' is the SSH private key of region fra1; name a secret of its "
        "own"
    ]
    assert errors(put(("iad1", "ssh", "privateKeyConfigKey"), "sshIad1"), put(("fra1", *path), "sshIad1")) == [
        f"regions.fra1.{'.'.join(path)}: 'sshIad1' is the SSH private key of region iad1; name a secret of its own"
    ]


def test_a_tenant_may_not_name_a_cell_secret() -> None:
    """The etcd S3 credentials of any region are the cell's: a tenant's Secret would hand them to its members."""
    assert errors(put((*ACME, "modelEndpoints", "llama-8b", "credentialsConfigKey"), "etcdS3CredentialsFra1")) == [
        "regions.fra1.tenants.acme.modelEndpoints.llama-8b.credentialsConfigKey: 'etcdS3CredentialsFra1' is a secret "
        "of the cell (regions.fra1.etcd.snapshots.s3.credentialsConfigKey names it), which the tenant's namespace "
        "would then hold; name a secret of tenant acme that holds only this endpoint's storage credentials"
    ]
    assert errors(
        put(
            ("iad1", "tenants", "globex", "modelEndpoints", "fraud-detector", "credentialsConfigKey"),
            "etcdS3CredentialsFra1",
        )
    )[0].startswith(
        "regions.iad1.tenants.globex.modelEndpoints.fraud-detector.credentialsConfigKey: 'etcdS3CredentialsFra1' is "
        "a secret of the cell (regions.fra1.etcd"
    )
    # the other way round: the etcd target pointed at a tenant's key makes it the cell's too, and both regions'
    # endpoints that name it are refused
    assert errors(put(("fra1", "etcd", "snapshots", "s3", "credentialsConfigKey"), "s3CredentialsGlobex")) == [
        f"regions.{region}.tenants.globex.modelEndpoints.fraud-detector.credentialsConfigKey: 's3CredentialsGlobex' "
        "is a secret of the cell (regions.fra1.etcd.snapshots.s3.credentialsConfigKey names it), which the tenant's "
        "namespace would then hold; name a secret of tenant globex that holds only this endpoint's storage "
        "credentials"
        for region in ("fra1", "iad1")
    ]
    # the metrics remote-write credentials are the cell's too (a tenant's VM disk import would hold them)
    disk = (*ACME, "virtualMachines", "train-01", "dataDisks", 0, "source")
    source = {"registry": "docker://quay.io/acme/data:1", "credentialsConfigKey": "remoteWriteFra1"}
    assert errors(put(disk, source)) == [
        "regions.fra1.tenants.acme.virtualMachines.train-01.dataDisks[0].source.credentialsConfigKey: "
        "'remoteWriteFra1' is a secret of the cell (regions.fra1.metrics.remoteWrite.credentialsConfigKey names it), "
        "which the tenant's namespace would then hold; name a secret of tenant acme that holds only this disk's "
        "import credentials"
    ]
    assert errors(put((*ACME, "modelEndpoints", "llama-8b", "credentialsConfigKey"), "acknowledge")) == [
        "regions.fra1.tenants.acme.modelEndpoints.llama-8b.credentialsConfigKey: 'acknowledge' is the region's SSH "
        "key (or its config); name a secret that holds only this endpoint's storage credentials"
    ]


# -- sign-in --------------------------------------------------------------------------------------------------

OIDC = {"issuerUrl": "https://idp.example.net/realms/gpucell", "clientId": "kubernetes"}
SIGN_IN = [
    (
        {**OIDC, "groupsPrefix": "system:"},
        "regions.fra1.oidc.groupsPrefix: 'system:' must not start with 'system:' or contain spaces; use e.g. 'oidc:'",
    ),
    (
        {**OIDC, "usernamePrefix": ""},
        "regions.fra1.oidc.usernamePrefix: '' is not a single line of text (empty, padded with spaces, or holding a "
        "newline or control character)",
    ),
    (
        {**OIDC, "issuerUrl": "http://idp.example.net"},
        "regions.fra1.oidc.issuerUrl: 'http://idp.example.net' is not an https:// URL with a host (and no "
        "user:password@)",
    ),
    (
        {**OIDC, "issuerUrl": "https://idp.example.net/?realm=x"},
        "regions.fra1.oidc.issuerUrl: 'https://idp.example.net/?realm=x' must not have a query or fragment (Kubernetes "
        "requires a bare https:// issuer URL)",
    ),
]


@pytest.mark.parametrize(("oidc", "line"), SIGN_IN, ids=[line.split(":")[0] for _, line in SIGN_IN])
def test_oidc_settings(oidc: dict[str, Any], line: str) -> None:
    assert errors(
        put(
            (
                *FRA1,
                "oidc",
            ),
            oidc,
        )
    ) == [line]


def test_tenant_groups_are_the_identity_providers_names() -> None:
    assert errors(
        put(
            (
                *FRA1,
                "oidc",
            ),
            OIDC,
        ),
        put((*ACME, "groups", "members"), ["oidc:acme-ml"]),
    ) == [
        "regions.fra1.tenants.acme.groups.members[0]: 'oidc:acme-ml' already starts with oidc.groupsPrefix 'oidc:'; "
        "give the identity provider's group name, gpucell adds the prefix"
    ]


# -- how lines are shown ------------------------------------------------------------------------------------


def test_cross_field_rules_are_reported_beside_field_errors() -> None:
    assert errors(
        put((*FRA1, "nodePools", "cpu", "role"), "cpux"),
        put((*FRA1, "network", "podCidr"), "10.110.0.0/16"),
        put(
            (
                *FRA1,
                "versions",
            ),
            {"k3s": "v1.35.0+k3s1"},
        ),
    ) == [
        "regions.fra1.network.podCidr: '10.110.0.0/16' overlaps network.nodeCidr 10.110.0.0/22",
        "regions.fra1.nodePools.cpu.role: 'cpux' is not one of server, gpu, cpu",
        "regions.fra1.k3s.installerSha256: is required for versions.k3s 'v1.35.0+k3s1': gpucell has reviewed the "
        "install.sh of v1.34.2+k3s1 only; read https://raw.githubusercontent.com/k3s-io/k3s/v1.35.0%2Bk3s1/install.sh "
        "and set its checksum (curl -sfL <that URL> | sha256sum)",
    ]


def test_rules_across_regions_run_on_the_regions_that_validated() -> None:
    lines = errors(
        lambda regions: regions.__setitem__("fra2", copy.deepcopy(regions["fra1"])),
        put(("iad1", "nodePools", "cpu", "role"), "cpux"),
    )
    assert lines[0] == "regions.iad1.nodePools.cpu.role: 'cpux' is not one of server, gpu, cpu"
    # and every host fra2 shares with fra1, its backups' place and its two address blocks
    assert len(lines) == 1 + FRA1_HOSTS + 3


def test_several_cross_field_problems_are_all_reported() -> None:
    lines = errors(
        put((*FRA1, "nodePools", "cpu", "hosts", 0, "address"), "10.110.0.0"),
        put((*FRA1, "network", "apiEndpoint"), "10.110.0.81"),
        put((*FRA1, "nodePools", "cpu", "hosts", 1, "address"), "10.110.0.81"),
    )
    assert [line.split(":")[0] for line in lines] == [
        "regions.fra1.nodePools.cpu.hosts[0].address",
        "regions.fra1.network.apiEndpoint",
    ]


def test_a_long_value_is_shortened_and_every_line_is_one_line() -> None:
    (line,) = errors(put((*FRA1, "nodePools", "cpu", "hosts", 0, "name"), "x" * 200 + "\n"))
    assert line == (
        f"regions.fra1.nodePools.cpu.hosts[0].name: '{'x' * 56}...' is not a DNS-1123 label (lower-case "
        "letters, digits and '-', at most 63 characters)"
    )
    assert shown("a\nb") == "'a\\nb'"
    # the new-user trial: `acceptance: true` read "True is not a mapping of keys", an empty value "None is not ..."
    assert (shown(True), shown(False), shown(None), shown(1), shown(0.5)) == ("true", "false", "null", "1", "0.5")
    assert ConfigError(["x: 'a\nb'"]).lines == ["x: 'a\\nb'"]


def test_a_key_path_is_never_empty() -> None:
    assert join_path(["regions", "", "x"]) == "regions[''].x"
    assert join_path(["labels", "bad key", 0]) == "labels['bad key'][0]"
    assert join_path(["quota", "gpus", "nvidia.com/gpu"]) == "quota.gpus.nvidia.com/gpu"
    with pytest.raises(ValueError, match="needs a key path"):
        ConfigError.at((), "bad")
    (line,) = errors(lambda regions: regions["fra1"]["nodePools"].__setitem__("", regions["fra1"]["nodePools"]["cpu"]))
    assert line.startswith("regions.fra1.nodePools['']: '' is not a DNS-1123 label")


# -- values YAML types that JSON cannot carry, and the shape of the stack file ------------------------------


def _plan(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    (tmp_path / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text())
    (tmp_path / "Pulumi.dev.yaml").write_text(text)
    code = cli.main(["plan", "dev", "--project-dir", str(tmp_path)])
    return code, capsys.readouterr().err


DEV = (REPO / "Pulumi.dev.yaml").read_text()
YAML_TYPES = [
    (
        DEV.replace(
            "      storage: {backend: local-path}",
            "      storage: {backend: local-path}\n      versions: {longhorn: 2025-01-01}",
        ),
        "regions.lab1.versions.longhorn: 2025-01-01 is a YAML date, which Pulumi config reads as text; quote it "
        "('2025-01-01')\n",
    ),
    (
        DEV.replace("tlsSans: [api.lab1.gpucell.internal]", "tlsSans: !!set {api.lab1.gpucell.internal: null}"),
        "regions.lab1.network.tlsSans: is a YAML !!set, which JSON config cannot carry; write a list\n",
    ),
    (
        DEV.replace("ssh: {user: ubuntu}", "ssh: {user: !!binary dWJ1bnR1}"),
        "regions.lab1.ssh.user: is YAML !!binary, which JSON config cannot carry; write the text as a plain string\n",
    ),
    (
        DEV.replace("      ssh: {user: ubuntu}", "      ssh: {user: ubuntu}\n      2025-01-01: x"),
        "regions.lab1: key 2025-01-01 is a YAML date, not a string; quote it ('2025-01-01')\n",
    ),
    (
        "config:\n- gpucell:regions\n",
        "Pulumi.dev.yaml.config: is a YAML list; it must be a mapping of config keys (gpucell:regions, "
        "gpucell:sshPrivateKey...)\n",
    ),
    (
        "config: 3\n",
        "Pulumi.dev.yaml.config: is a YAML number; it must be a mapping of config keys (gpucell:regions, "
        "gpucell:sshPrivateKey...)\n",
    ),
    ("config:\n  12: x\n", "Pulumi.dev.yaml.config: key 12 is a YAML number, not a string; quote it ('12')\n"),
]


@pytest.mark.parametrize(
    ("text", "err"), YAML_TYPES, ids=["date", "set", "binary", "date-key", "list", "number", "int-key"]
)
def test_yaml_values_json_cannot_carry_are_config_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, err: str
) -> None:
    assert _plan(tmp_path, text, capsys) == (2, err)


# -- a malformed secret under pulumi up -----------------------------------------------------------------------


def test_malformed_s3_credentials_are_one_run_error_line_naming_the_key() -> None:
    config = {
        "gpucell:regions": prod_regions(),
        "gpucell:sshPrivateKey": "key",
        "gpucell:hfTokenAcme": "hf_token",
        "gpucell:hfTokenGlobex": "hf_token",
        "gpucell:s3CredentialsGlobex": "AKIAEXAMPLE-NO-COLON-SECRET",
        "gpucell:etcdS3CredentialsFra1": "AKIAEXAMPLE:SECRET",
        "gpucell:etcdS3CredentialsIad1": "AKIAEXAMPLE:SECRET",
        "gpucell:remoteWriteFra1": "fra1:password",
        "gpucell:remoteWriteIad1": "iad1:password",
        "gpucell:backupS3Fra1": "AKIAEXAMPLE:SECRET",
        "gpucell:backupS3Iad1": "AKIAEXAMPLE:SECRET",
        "gpucell:backupRepoFra1": "a-repository-password-fra1",
        "gpucell:backupRepoIad1": "a-repository-password-iad1",
        "gpucell:vllmApiKeyAcme": "vllm-api-key",
    }
    registered: list[str] = []
    with pytest.raises(pulumi.RunError) as info:
        registered.extend(
            r.name for r in run_program(program_main, config=config, secret_keys=list(config)[1:]).resources
        )
    assert str(info.value) == (
        "s3CredentialsGlobex: s3 credentials must be '<AWS_ACCESS_KEY_ID>:<AWS_SECRET_ACCESS_KEY>' "
        "(regions.fra1.tenants.globex.modelEndpoints.fraud-detector reads it for s3:// storage); set it with "
        "`pulumi config set --secret s3CredentialsGlobex -- '<AWS_ACCESS_KEY_ID>:<AWS_SECRET_ACCESS_KEY>'`"
    )
    assert "NO-COLON" not in str(info.value)
    assert registered == []


# -- values checked for what they become (issue 17) ------------------------------------------------------------


def _renamed(kind: str, old: str, new: str) -> Edit:
    def edit(regions: dict[str, Any]) -> None:
        workloads = regions["fra1"]["tenants"]["acme"][kind]
        workloads[new] = workloads.pop(old)

    return edit


def test_workload_names_fit_the_longest_object_name_made_from_them() -> None:
    assert errors(
        _renamed("notebooks", "nb-alice", "n" * 52),
        _renamed("modelEndpoints", "llama-8b", "m" * 53),
        _renamed("virtualMachines", "desk-01", "v" * 59),
    ) == ["OK"]
    assert errors(_renamed("notebooks", "nb-alice", "n" * 60)) == [
        f"regions.fra1.tenants.acme.notebooks.{'n' * 60}: {shown('n' * 60)} is 60 characters; at most 52: its "
        "StatefulSet's pods carry the label controller-revision-hash: <name>-<10-character hash>, a label value of at "
        "most 63 characters, or they are never created (kubernetes/kubernetes#64023)"
    ]
    assert errors(_renamed("modelEndpoints", "llama-8b", "m" * 54))[0].endswith(
        "is 54 characters; at most 53: KServe names its Deployment, Service and autoscaler <name>-predictor, and a "
        "Service name is a DNS-1035 label of at most 63 characters"
    )
    assert errors(_renamed("virtualMachines", "desk-01", "v" * 60))[0].endswith(
        "is 60 characters; at most 59: its SSH Service <name>-ssh is a DNS-1035 label of at most 63 characters"
    )


@pytest.mark.parametrize("group", ["acme\u202eml", "\u0430cme-ml", "acme\u200bml", "acme;ml"])
def test_group_names_are_plain_ascii(group: str) -> None:
    assert errors(put((*ACME, "groups", "members"), [group])) == [
        f"regions.fra1.tenants.acme.groups.members[0]: {shown(ascii(group)[1:-1])} is not a group name gpucell binds: "
        "ASCII letters, digits, spaces and . _ @ / : = + - (no look-alike or direction-changing characters), at most "
        "256 characters"
    ]


@pytest.mark.parametrize(
    ("key", "value", "bound"),
    [
        ("cpuMillicores", 100_000_001, 100_000_000),
        ("memoryGib", 2**20 + 1, 2**20),
        ("storageGib", 2**24 + 1, 2**24),
        ("pods", 100_001, 100_000),
        ("services", 100_001, 100_000),
        ("persistentVolumeClaims", 100_001, 100_000),
    ],
)
def test_quota_numbers_have_upper_bounds(key: str, value: int, bound: int) -> None:
    assert errors(put((*ACME, "quota", key), value)) == [
        f"regions.fra1.tenants.acme.quota.{key}: {value} is invalid: Input should be less than or equal to {bound}"
    ]


def test_quota_maps_have_upper_bounds() -> None:
    assert errors(put((*ACME, "quota", "gpus", "nvidia.com/gpu"), 100_001)) == [
        "regions.fra1.tenants.acme.quota.gpus.nvidia.com/gpu: 100001 is not 0-100000 units"
    ]
    assert errors(put((*ACME, "quota", "deviceClasses", "gpu.nvidia.com"), 100_001)) == [
        "regions.fra1.tenants.acme.quota.deviceClasses.gpu.nvidia.com: 100001 is not 0-100000 devices"
    ]


def test_a_vm_has_a_login_or_says_it_needs_none() -> None:
    vm = (*ACME, "virtualMachines", "desk-01")
    assert errors(put((*vm, "sshKeys"), [])) == [
        "regions.fra1.tenants.acme.virtualMachines.desk-01.sshKeys: is empty, so nobody can log into VM desk-01 "
        "(cloud-init sets no password, so the serial console has no login either); add an SSH public key, or set "
        "noLogin: true"
    ]
    assert errors(put((*vm, "sshKeys"), []), put((*vm, "noLogin"), True)) == ["OK"]
    assert errors(put((*vm, "noLogin"), True)) == [
        "regions.fra1.tenants.acme.virtualMachines.desk-01.noLogin: is true, but sshKeys gives a login; drop one of "
        "them"
    ]


def test_storage_classes_are_the_cells() -> None:
    assert errors(
        put((*ACME, "notebooks", "nb-alice", "storageClass"), "fast-nvme"),
        put((*ACME, "virtualMachines", "train-01", "dataDisks", 0, "storageClass"), "longhorn"),
    ) == [
        "regions.fra1.tenants.acme.notebooks.nb-alice.storageClass: 'fast-nvme' is not a StorageClass of the cell "
        "(longhorn); name one, or list a class installed outside gpucell in storage.otherClasses"
    ]
    assert errors(
        put((*ACME, "notebooks", "nb-alice", "storageClass"), "fast-nvme"),
        put(("fra1", "storage", "otherClasses"), ["fast-nvme"]),
        put((*ACME, "backup"), None),
    ) == ["OK"]
    # a tenant with backups keeps its volumes where Velero can snapshot them
    assert errors(
        put((*ACME, "notebooks", "nb-alice", "storageClass"), "fast-nvme"),
        put(("fra1", "storage", "otherClasses"), ["fast-nvme"]),
    ) == [
        "regions.fra1.tenants.acme.notebooks.nb-alice.storageClass: 'fast-nvme' cannot be snapshotted by the "
        "cell's backups (only longhorn volumes are); the tenant has a backup: move the volume to longhorn, or back "
        "it up outside gpucell"
    ]


def test_the_api_endpoint_is_not_another_regions_node() -> None:
    assert errors(put(("fra1", "network", "apiEndpoint"), "10.120.0.11")) == [
        "regions.fra1.network.apiEndpoint: '10.120.0.11' is the address of regions.iad1.nodePools.servers.hosts[0], a "
        "node of another region; every node of fra1 would join that region's cluster; give fra1's own API VIP or name"
    ]


def test_socket_lb_beyond_the_host_namespace_is_refused_with_vms() -> None:
    assert errors(put(("fra1", "cilium"), {"values": {"socketLB": {"hostNamespaceOnly": False}}})) == [
        "regions.fra1.cilium.values.socketLB.hostNamespaceOnly: false breaks Service access from VMs (VMs "
        "acme/train-01, acme/desk-01, acme/cad-01): socket-LB would translate inside the virt-launcher pods, which "
        "the guest's traffic bypasses (cilium/cilium#14563); remove it, gpucell sets true"
    ]
    assert errors(put(("fra1", "cilium"), {"values": {"socketLB": {"hostNamespaceOnly": True}}})) == ["OK"]
