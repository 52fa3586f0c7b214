"""Tenant attacks on the network (issue 35, item 6): a policy a tenant member writes in its namespace, and what it then
tries to reach. Each is refused by a cluster-wide Cilium deny rule (:mod:`gpucell.components.cluster_deny`), shown
offline with a small Cilium policy evaluator (:mod:`tests.cilium_policy`) over every policy prod's fra1 renders plus the
attack's.

Legitimate flows (DNS, the API port, the internet, egressCidrs and egressFqdns, the tenant's own pods, the platform
calling tenants and webhooks) stay allowed.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpucell.stacks.plan import Plan
from gpucell.tenancy.tenant import namespace_labels
from tests.cilium_policy import Endpoint, External, Flow, Health, Node, Verdict, connect
from tests.conftest import KUBERNETES_MINOR, shared_plan, violations

# -- who and what -------------------------------------------------------------------------------------------------


def tenant_pod(tenant: str, **labels: str) -> Endpoint:
    """A pod of ``tenant`` in prod's fra1, its namespace labelled as gpucell labels it."""
    namespace = f"tenant-{tenant}"
    ns_labels = {**namespace_labels(tenant, KUBERNETES_MINOR), "kubernetes.io/metadata.name": namespace}
    return Endpoint(namespace, labels or {"app": "shell"}, ns_labels)


def platform_pod(namespace: str, **labels: str) -> Endpoint:
    """A pod of a platform namespace (only Kubernetes' own namespace label)."""
    return Endpoint(namespace, labels, {"kubernetes.io/metadata.name": namespace})


GLOBEX = tenant_pod("globex")
"""The attacker: globex has ``egress: internet`` in fra1."""
ACME = tenant_pod("acme")
"""acme has ``egress: custom``: egressCidrs 10.200.0.0/16 and egressFqdns (huggingface.co...)."""
SERVER = Node("10.110.0.11", api_server=True)
"""fra1-srv-1: etcd, the API server, the kubelet, SSH."""
GPU_NODE = Node("10.110.0.21")
"""fra1-h100-1, another node than the attacker's."""
OWN_NODE = Node("10.110.0.22", local=True)
"""The node the attacker's pod runs on."""
BMC = External("10.110.1.21")
"""A BMC on fra1's node network (10.110.0.0/22), not a node."""
API_VIP = External("10.110.0.10")
"""fra1's API endpoint (an external load balancer) on the node network."""
METADATA = External("169.254.169.254")
OTHER_CELL = External("10.120.0.11")
"""iad1-srv-1, from fra1: outside the cluster."""
OPERATOR_S3 = External("172.20.0.5", name="s3.fra1.gpucell.example")
"""An S3 endpoint on a private network of the operator's."""
ACME_NETWORK = External("10.200.0.5")
"""An address of acme's egressCidrs 10.200.0.0/16."""
PROMETHEUS = platform_pod("monitoring", **{"app.kubernetes.io/name": "prometheus", "prometheus": "kube-prometheus"})
HUBBLE_RELAY = platform_pod("kube-system", **{"k8s-app": "hubble-relay"})
LONGHORN = platform_pod("longhorn-system", app="longhorn-manager")
KUBE_DNS = platform_pod("kube-system", **{"k8s-app": "kube-dns"})
KSERVE_WEBHOOK = platform_pod("kserve", **{"control-plane": "kserve-controller-manager"})
KUBE_STATE_METRICS = platform_pod("monitoring", **{"app.kubernetes.io/name": "kube-state-metrics"})


def attack_policy(kind: str, name: str, spec: dict[str, Any], tenant: str = "globex") -> dict[str, Any]:
    """A policy a tenant member writes in its own namespace."""
    api = "networking.k8s.io/v1" if kind == "NetworkPolicy" else "cilium.io/v2"
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": f"tenant-{tenant}"}, "spec": spec}


NP_ALL_EGRESS = attack_policy(
    "NetworkPolicy", "allow-all", {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{}]}
)
NP_ANY_ADDRESS = attack_policy(
    "NetworkPolicy",
    "any-address",
    {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}]},
)
CNP_WORLD = attack_policy(
    "CiliumNetworkPolicy", "world", {"endpointSelector": {}, "egress": [{"toEntities": ["world"]}]}
)
CNP_API_SERVER = attack_policy(
    "CiliumNetworkPolicy", "api-all-ports", {"endpointSelector": {}, "egress": [{"toEntities": ["kube-apiserver"]}]}
)
CNP_CLUSTER = attack_policy(
    "CiliumNetworkPolicy", "cluster", {"endpointSelector": {}, "egress": [{"toEntities": ["cluster"]}]}
)
CNP_MONITORING = attack_policy(
    "CiliumNetworkPolicy",
    "monitoring",
    {
        "endpointSelector": {},
        "egress": [{"toEndpoints": [{"matchLabels": {"k8s:io.kubernetes.pod.namespace": "monitoring"}}]}],
    },
)
NODES = "CiliumClusterwideNetworkPolicy/gpucell-tenants-deny-nodes"
NETWORKS = "CiliumClusterwideNetworkPolicy/gpucell-tenants-deny-networks"
PLATFORM = "CiliumClusterwideNetworkPolicy/gpucell-tenants-deny-platform"
PLATFORM_INGRESS = "CiliumClusterwideNetworkPolicy/gpucell-platform-deny-tenants"
PRIVATE_GLOBEX = "CiliumClusterwideNetworkPolicy/gpucell-deny-private-globex"
LAYER = "Cilium deny"

ATTACKS: list[tuple[str, dict[str, Any], Flow, str, str]] = [
    # (id, what the tenant applies, what it then connects to, refusing layer, the rendered policy that refuses it)
    ("np-all-egress-etcd", NP_ALL_EGRESS, Flow(SERVER, 2379), LAYER, NODES),
    ("np-all-egress-etcd-peer", NP_ALL_EGRESS, Flow(SERVER, 2380), LAYER, NODES),
    ("np-all-egress-kubelet", NP_ALL_EGRESS, Flow(GPU_NODE, 10250), LAYER, NODES),
    ("np-all-egress-ssh", NP_ALL_EGRESS, Flow(SERVER, 22), LAYER, NODES),
    ("np-all-egress-hubble-server-own-node", NP_ALL_EGRESS, Flow(OWN_NODE, 4244), LAYER, NODES),
    ("np-all-egress-node-exporter", NP_ALL_EGRESS, Flow(GPU_NODE, 9100), LAYER, NODES),
    ("np-all-egress-api-over-udp", NP_ALL_EGRESS, Flow(SERVER, 6443, "UDP"), LAYER, NODES),
    ("np-all-egress-cilium-health", NP_ALL_EGRESS, Flow(Health(), 4240), LAYER, NODES),
    ("np-all-egress-bmc-ipmi", NP_ALL_EGRESS, Flow(BMC, 623, "UDP"), LAYER, NETWORKS),
    ("np-all-egress-bmc-https", NP_ALL_EGRESS, Flow(BMC, 443), LAYER, NETWORKS),
    ("np-all-egress-api-vip-ssh", NP_ALL_EGRESS, Flow(API_VIP, 22), LAYER, NETWORKS),
    ("np-all-egress-other-cell", NP_ALL_EGRESS, Flow(OTHER_CELL, 6443), LAYER, NETWORKS),
    ("np-all-egress-metadata", NP_ALL_EGRESS, Flow(METADATA, 80), LAYER, NETWORKS),
    ("np-all-egress-operator-s3", NP_ALL_EGRESS, Flow(OPERATOR_S3, 443), LAYER, PRIVATE_GLOBEX),
    ("np-all-egress-prometheus", NP_ALL_EGRESS, Flow(PROMETHEUS, 9090), LAYER, PLATFORM),
    ("np-all-egress-hubble-relay", NP_ALL_EGRESS, Flow(HUBBLE_RELAY, 4245), LAYER, PLATFORM),
    ("np-all-egress-longhorn-api", NP_ALL_EGRESS, Flow(LONGHORN, 9500), LAYER, PLATFORM),
    ("np-ipblock-any-acme-network", NP_ANY_ADDRESS, Flow(ACME_NETWORK, 443), LAYER, PRIVATE_GLOBEX),
    ("np-ipblock-any-bmc", NP_ANY_ADDRESS, Flow(BMC, 443), LAYER, NETWORKS),
    ("cnp-world-bmc", CNP_WORLD, Flow(BMC, 443), LAYER, NETWORKS),
    ("cnp-world-metadata", CNP_WORLD, Flow(METADATA, 80), LAYER, NETWORKS),
    ("cnp-world-other-cell", CNP_WORLD, Flow(OTHER_CELL, 22), LAYER, NETWORKS),
    ("cnp-kube-apiserver-etcd", CNP_API_SERVER, Flow(SERVER, 2379), LAYER, NODES),
    ("cnp-kube-apiserver-kubelet", CNP_API_SERVER, Flow(SERVER, 10250), LAYER, NODES),
    ("cnp-cluster-hubble-server", CNP_CLUSTER, Flow(GPU_NODE, 4244), LAYER, NODES),
    ("cnp-cluster-prometheus", CNP_CLUSTER, Flow(PROMETHEUS, 9090), LAYER, PLATFORM),
    ("cnp-monitoring-prometheus", CNP_MONITORING, Flow(PROMETHEUS, 9090), LAYER, PLATFORM),
]
"""The attacks, globex's (``egress: internet``)."""

LEGITIMATE: list[tuple[str, Endpoint | Node, Flow, str]] = [
    # (id, who connects, to what, the policy that allows it)
    ("dns", ACME, Flow(KUBE_DNS, 53, "UDP"), "CiliumNetworkPolicy/tenant-acme/tenant-allow-dns"),
    ("dns-tcp", GLOBEX, Flow(KUBE_DNS, 53), "CiliumNetworkPolicy/tenant-globex/tenant-allow-dns"),
    ("cluster-api-server", GLOBEX, Flow(SERVER, 6443), "CiliumNetworkPolicy/tenant-globex/tenant-allow-egress-cluster"),
    ("cluster-api-vip", GLOBEX, Flow(API_VIP, 6443), "CiliumNetworkPolicy/tenant-globex/tenant-allow-egress-cluster"),
    (
        "cluster-platform-services",
        GLOBEX,
        Flow(Endpoint("shared-registry", {"app": "registry"}, {"gpucell.io/platform-services": "true"}), 5000),
        "CiliumNetworkPolicy/tenant-globex/tenant-allow-egress-cluster",
    ),
    (
        "internet",
        GLOBEX,
        Flow(External("93.184.216.34"), 443),
        "CiliumNetworkPolicy/tenant-globex/tenant-allow-egress-internet",
    ),
    ("egress-cidrs", ACME, Flow(ACME_NETWORK, 443), "CiliumNetworkPolicy/tenant-acme/tenant-allow-egress-cidrs"),
    (
        "egress-fqdns",
        ACME,
        Flow(External("18.164.1.10", name="huggingface.co"), 443),
        "CiliumNetworkPolicy/tenant-acme/tenant-allow-egress-fqdns",
    ),
    (
        "intra-tenant",
        ACME,
        Flow(tenant_pod("acme", app="trainer"), 8080),
        "CiliumNetworkPolicy/tenant-acme/tenant-allow-intra-tenant",
    ),
    (
        "prometheus-scrapes-a-predictor",
        PROMETHEUS,
        Flow(tenant_pod("acme", **{"serving.kserve.io/inferenceservice": "llama-8b"}), 8080),
        "CiliumNetworkPolicy/tenant-acme/llama-8b-allow-metrics",
    ),
    ("prometheus-scrapes-the-platform", PROMETHEUS, Flow(KUBE_STATE_METRICS, 8080), "no policy"),
    ("api-server-calls-a-webhook", SERVER, Flow(KSERVE_WEBHOOK, 9443), "no policy"),
]


@pytest.fixture(scope="module")
def prod() -> Plan:
    return shared_plan("prod-fra1")


@pytest.fixture(scope="module")
def rendered(prod: Plan) -> list[dict[str, Any]]:
    """Every network policy fra1 renders, as manifests."""
    kinds = ("CiliumNetworkPolicy", "CiliumClusterwideNetworkPolicy", "NetworkPolicy")
    return [
        {key: r.inputs[key] for key in ("apiVersion", "kind", "metadata", "spec")}
        for r in prod.region_resources("fra1")
        if r.type.rsplit(":", 1)[-1] in kinds
    ]


def without_cluster_deny(policies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in policies if p["kind"] != "CiliumClusterwideNetworkPolicy"]


@pytest.mark.parametrize("attack", ATTACKS, ids=[a[0] for a in ATTACKS])
def test_an_attack_is_refused_by_a_cluster_wide_deny(
    rendered: list[dict[str, Any]], attack: tuple[str, dict[str, Any], Flow, str, str]
) -> None:
    _, added, flow, layer, refused_by = attack
    assert layer == "Cilium deny"
    verdict = connect(GLOBEX, flow, [*rendered, added])
    assert not verdict.allowed
    assert refused_by in verdict.by
    assert all(name.startswith("CiliumClusterwideNetworkPolicy/") or "deny-link-local" in name for name in verdict.by)


@pytest.mark.parametrize(("attack", "added", "flow"), [a[:3] for a in ATTACKS], ids=[a[0] for a in ATTACKS])
def test_without_the_cluster_wide_deny_the_attack_would_work(
    rendered: list[dict[str, Any]], attack: str, added: dict[str, Any], flow: Flow
) -> None:
    verdict = connect(GLOBEX, flow, [*without_cluster_deny(rendered), added])
    if flow.to == METADATA:  # the tenant's own link-local deny held there already
        assert verdict == Verdict(False, ("CiliumNetworkPolicy/tenant-globex/tenant-deny-link-local",))
    else:
        assert verdict.allowed, verdict


@pytest.mark.parametrize(("case", "source", "flow", "allowed_by"), LEGITIMATE, ids=[c[0] for c in LEGITIMATE])
def test_legitimate_flows_stay_allowed(
    rendered: list[dict[str, Any]], case: str, source: Endpoint | Node, flow: Flow, allowed_by: str
) -> None:
    assert connect(source, flow, rendered) == Verdict(True, (allowed_by,))


@pytest.mark.parametrize(
    "flow", [Flow(KUBE_DNS, 53, "UDP"), Flow(SERVER, 6443), Flow(API_VIP, 6443)], ids=["dns", "api", "api-vip"]
)
def test_an_allow_all_policy_keeps_dns_and_the_api_port(rendered: list[dict[str, Any]], flow: Flow) -> None:
    assert connect(GLOBEX, flow, [*rendered, NP_ALL_EGRESS]).allowed


def test_acme_egress_cidrs_reopen_its_network_but_no_node_or_cell_network(rendered: list[dict[str, Any]]) -> None:
    acme_all = attack_policy("NetworkPolicy", "allow-all", NP_ALL_EGRESS["spec"], tenant="acme")
    assert connect(ACME, Flow(ACME_NETWORK, 443), [*rendered, acme_all]).allowed
    assert connect(ACME, Flow(OPERATOR_S3, 443), [*rendered, acme_all]).by == (
        "CiliumClusterwideNetworkPolicy/gpucell-deny-private-acme",
    )
    assert NETWORKS in connect(ACME, Flow(BMC, 443), [*rendered, acme_all]).by
    assert connect(ACME, Flow(SERVER, 2379), [*rendered, acme_all]).by == (NODES,)


def test_the_platform_refuses_tenants_even_if_the_egress_deny_went_missing(rendered: list[dict[str, Any]]) -> None:
    later = [p for p in rendered if p["metadata"]["name"] != "gpucell-tenants-deny-platform"]
    for target, port in ((PROMETHEUS, 9090), (HUBBLE_RELAY, 4245), (LONGHORN, 9500)):
        assert connect(GLOBEX, Flow(target, port), [*later, NP_ALL_EGRESS]) == Verdict(False, (PLATFORM_INGRESS,))
    assert connect(GLOBEX, Flow(KUBE_DNS, 53, "UDP"), [*later, NP_ALL_EGRESS]).allowed


def test_a_tenant_the_rules_do_not_list_gets_no_private_network(rendered: list[dict[str, Any]]) -> None:
    stranger = tenant_pod("initech")
    policy = attack_policy("NetworkPolicy", "allow-all", NP_ALL_EGRESS["spec"], tenant="initech")
    verdict = connect(stranger, Flow(ACME_NETWORK, 443), [*rendered, policy])
    assert verdict == Verdict(False, ("CiliumClusterwideNetworkPolicy/gpucell-deny-private-unlisted",))


def test_every_cluster_wide_policy_validates_against_cilium_crd(rendered: list[dict[str, Any]]) -> None:
    cluster_wide = [p for p in rendered if p["kind"] == "CiliumClusterwideNetworkPolicy"]
    assert sorted(p["metadata"]["name"] for p in cluster_wide) == [
        "gpucell-deny-private-acme",
        "gpucell-deny-private-globex",
        "gpucell-deny-private-unlisted",
        "gpucell-platform-deny-tenants",
        "gpucell-tenants-deny-networks",
        "gpucell-tenants-deny-nodes",
        "gpucell-tenants-deny-platform",
    ]
    assert {p["metadata"]["name"]: violations(p) for p in cluster_wide} == {
        p["metadata"]["name"]: [] for p in cluster_wide
    }


# -- the evaluator reads Cilium as documented ----------------------------------------------------------------------


def test_evaluator_deny_wins_over_any_allow_and_allows_add_up() -> None:
    deny = attack_policy(
        "CiliumNetworkPolicy",
        "no-ssh",
        {"endpointSelector": {}, "egressDeny": [{"toPorts": [{"ports": [{"port": "22"}]}]}]},
    )
    assert connect(GLOBEX, Flow(BMC, 22), [NP_ALL_EGRESS, deny]) == Verdict(
        False, ("CiliumNetworkPolicy/tenant-globex/no-ssh",)
    )
    assert connect(GLOBEX, Flow(BMC, 443), [NP_ALL_EGRESS, deny]) == Verdict(
        True, ("NetworkPolicy/tenant-globex/allow-all",)
    )


def test_evaluator_an_empty_cilium_rule_allows_nothing_and_deny_only_policies_may_leave_default_allow() -> None:
    empty = attack_policy("CiliumNetworkPolicy", "empty", {"endpointSelector": {}, "egress": [{}]})
    assert connect(GLOBEX, Flow(BMC, 443), [empty]) == Verdict(False, ("default deny",))
    deny_only = attack_policy(
        "CiliumNetworkPolicy", "deny", {"endpointSelector": {}, "egressDeny": [{"toEntities": ["health"]}]}
    )
    assert connect(GLOBEX, Flow(BMC, 443), [deny_only]) == Verdict(False, ("default deny",))
    deny_only["spec"]["enableDefaultDeny"] = {"egress": False}
    assert connect(GLOBEX, Flow(BMC, 443), [deny_only]) == Verdict(True, ("no policy",))


def test_evaluator_scopes_peers_as_cilium_does() -> None:
    # a namespaced policy's selector without a namespace: its own namespace only; a clusterwide one's: pods only
    same_app = {"endpointSelector": {}, "egress": [{"toEndpoints": [{"matchLabels": {"app": "shell"}}]}]}
    own = attack_policy("CiliumNetworkPolicy", "same-app", same_app)
    assert connect(GLOBEX, Flow(tenant_pod("acme"), 80), [own]).by == ("default deny",)
    assert connect(GLOBEX, Flow(tenant_pod("globex"), 80), [own]).allowed
    wide = {"apiVersion": "cilium.io/v2", "kind": "CiliumClusterwideNetworkPolicy", "metadata": {"name": "w"}}
    everything = wide | {"spec": {"endpointSelector": {}, "egress": [{"toEndpoints": [{}]}]}}
    assert connect(GLOBEX, Flow(tenant_pod("acme"), 80), [everything]).allowed
    assert connect(GLOBEX, Flow(GPU_NODE, 80), [everything]) == Verdict(False, ("default deny",))
