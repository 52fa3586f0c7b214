"""ClusterDeny: what the cluster-wide deny rules hold (ports, networks, other cells, private ranges per tenant), that
a cluster gpucell did not build gets them from its ClusterFacts, and the cell's wiring (after Cilium, before tenants).
The attacks they refuse are in tests/test_tenant_attacks_network.py."""

from __future__ import annotations

from ipaddress import IPv4Network
from typing import Any

from gpucell.admission.tenants import ClusterFacts
from gpucell.cluster import Cluster, ContainerRuntime
from gpucell.components.cluster_deny import (
    ClusterDeny,
    ClusterDenyArgs,
    all_ports_but,
    cluster_deny_manifests,
    other_cells,
    platform_namespaces,
)
from gpucell.engine.mock_engine import run_program
from gpucell.spec import StackSpec
from tests.conftest import prod_regions, shared_plan, violations

PROD = StackSpec.model_validate({"regions": prod_regions()})


def facts(**changes: Any) -> ClusterFacts:
    """An EKS-like cluster gpucell did not build: API on 443, two tenants."""
    base: dict[str, Any] = {
        "network": {"nodeCidr": "192.168.0.0/20", "apiPort": 443},
        "tenants": {
            "acme": {"quota": {"cpuMillicores": 1000, "memoryGib": 1, "storageGib": 1}, "egress": "cluster"},
            "globex": {
                "quota": {"cpuMillicores": 1000, "memoryGib": 1, "storageGib": 1},
                "egress": "internet",
                "egressCidrs": ["100.64.0.0/10", "172.20.0.0/16"],
            },
        },
    }
    return ClusterFacts.model_validate(base | changes)


def test_every_port_but_the_api_port_over_tcp() -> None:
    assert all_ports_but(6443) == [
        {"port": "1", "endPort": 6442, "protocol": "ANY"},
        {"port": "6444", "endPort": 65535, "protocol": "ANY"},
        {"port": "6443", "protocol": "UDP"},
        {"port": "6443", "protocol": "SCTP"},
    ]
    assert all_ports_but(2)[0] == {"port": "1", "protocol": "ANY"}
    assert all_ports_but(65535)[:2] == [
        {"port": "1", "endPort": 65534, "protocol": "ANY"},
        {"port": "65535", "protocol": "UDP"},
    ]


def test_other_cells_are_their_networks_and_private_blocks_never_their_public_face() -> None:
    # iad1's LB pools and API VIP sit on its node network: covered by it
    assert other_cells(PROD.regions, "fra1") == [
        IPv4Network(n) for n in ("10.120.0.0/22", "10.121.0.0/16", "10.122.0.0/16")
    ]
    # fra1's pools are public (203.0.113.x): iad1's tenants may call fra1's endpoints as anyone on the internet can
    assert other_cells(PROD.regions, "iad1") == [
        IPv4Network(n) for n in ("10.110.0.0/22", "10.111.0.0/16", "10.112.0.0/16")
    ]


def test_a_cluster_gpucell_did_not_build_is_fenced_from_its_facts() -> None:
    objs = {
        o["metadata"]["name"]: o["spec"]
        for o in cluster_deny_manifests(facts(), extra_namespaces=["amazon-cloudwatch"])
    }
    assert list(objs) == [
        "gpucell-tenants-deny-nodes",
        "gpucell-tenants-deny-networks",
        "gpucell-tenants-deny-platform",
        "gpucell-deny-private-acme",
        "gpucell-deny-private-globex",
        "gpucell-deny-private-unlisted",
        "gpucell-platform-deny-tenants",
    ]
    # no apiEndpoint: the servers listen on apiPort, 443 on EKS
    assert objs["gpucell-tenants-deny-nodes"]["egressDeny"][0]["toPorts"][0]["ports"][1] == {
        "port": "444",
        "endPort": 65535,
        "protocol": "ANY",
    }
    assert objs["gpucell-tenants-deny-networks"]["egressDeny"] == [
        {
            "toCIDRSet": [
                {"cidr": "192.168.0.0/20"},
                {"cidr": "10.42.0.0/16"},
                {"cidr": "10.43.0.0/16", "except": ["10.43.0.10/32"]},
                {"cidr": "169.254.0.0/16"},
            ]
        }
    ]
    assert objs["gpucell-deny-private-acme"]["egressDeny"] == [
        {"toCIDRSet": [{"cidr": n} for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")]}
    ]
    # globex's egressCidrs: 100.64.0.0/10 whole, a network of 172.16.0.0/12
    assert objs["gpucell-deny-private-globex"]["egressDeny"] == [
        {
            "toCIDRSet": [
                {"cidr": "10.0.0.0/8"},
                {"cidr": "172.16.0.0/12", "except": ["172.20.0.0/16"]},
                {"cidr": "192.168.0.0/16"},
            ]
        }
    ]
    assert objs["gpucell-deny-private-unlisted"]["endpointSelector"]["matchExpressions"][1] == {
        "key": "k8s:io.cilium.k8s.namespace.labels.gpucell.io/tenant",
        "operator": "NotIn",
        "values": ["acme", "globex"],
    }
    assert (
        "amazon-cloudwatch"
        in objs["gpucell-tenants-deny-platform"]["egressDeny"][0]["toEndpoints"][0]["matchExpressions"][0]["values"]
    )
    for spec in objs.values():
        assert spec["enableDefaultDeny"] == {"ingress": False, "egress": False}


def test_platform_namespaces_hold_every_namespace_gpucell_installs_into() -> None:
    fra1 = ClusterFacts.from_cell(PROD.regions["fra1"])
    assert {"kube-system", "monitoring", "longhorn-system", "kserve", "keda", "velero", "gpucell-gateway"} <= set(
        platform_namespaces(fra1)
    )
    assert "os-images" in platform_namespaces(fra1)  # fra1's image catalog
    assert not [ns for ns in platform_namespaces(fra1) if ns.startswith("tenant-")]


def test_the_component_on_a_cluster_of_its_own() -> None:
    def program() -> None:
        cluster = Cluster.from_kubeconfig("eks", "apiVersion: v1\nkind: Config\n", "1.34", ContainerRuntime.k3s("1.34"))
        ClusterDeny("eks-deny", ClusterDenyArgs(cluster, facts()))

    plan = run_program(program)
    policies = [r for r in plan.resources if r.type == "kubernetes:cilium.io/v2:CiliumClusterwideNetworkPolicy"]
    assert [r.name for r in policies] == [
        "eks-deny-tenants-deny-nodes",
        "eks-deny-tenants-deny-networks",
        "eks-deny-tenants-deny-platform",
        "eks-deny-deny-private-acme",
        "eks-deny-deny-private-globex",
        "eks-deny-deny-private-unlisted",
        "eks-deny-platform-deny-tenants",
    ]
    assert {r.provider.split("::")[-1] for r in policies} == {"eks-k8s"}
    assert [violations(r.inputs) for r in policies] == [[]] * 7


def test_the_cell_renders_it_after_cilium_and_tenants_wait_for_it() -> None:
    plan = shared_plan("prod-iad1").result
    deny = plan.named("iad1-cluster-deny")
    assert deny.dependencies == [plan.named("iad1-cilium-cilium").urn]
    networks = plan.named("iad1-cluster-deny-tenants-deny-networks")
    assert networks.inputs["spec"]["egressDeny"][0]["toCIDRSet"][-3:] == [
        {"cidr": "10.110.0.0/22"},
        {"cidr": "10.111.0.0/16"},
        {"cidr": "10.112.0.0/16"},
    ]
    assert networks.urn in plan.named("iad1-globex-default-deny").dependencies
