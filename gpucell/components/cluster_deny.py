"""ClusterDeny: cluster-wide Cilium deny rules that fence tenants in whatever allow is added later.

A tenant's ``CiliumNetworkPolicy`` objects (:func:`gpucell.tenancy.tenant.network_policy_manifests`) are allow lists,
and Cilium *adds up* the allows of every policy that selects an endpoint, a Kubernetes ``NetworkPolicy`` or a
``CiliumNetworkPolicy`` a tenant member writes included: ``egress: [{}]`` in a tenant namespace would reopen every
node port, every private network and every platform pod. Only deny rules win over allows ("Deny policies take
precedence over allow policies, regardless of whether they are a Cilium Network Policy, a Clusterwide Cilium Network
Policy or even a Kubernetes Network Policy", Cilium 1.20 "Deny Policies"). So what a tenant must never reach is
denied here, in cluster-scoped ``cilium.io/v2`` ``CiliumClusterwideNetworkPolicy`` objects no tenant can write
(docs/decisions/0031-cluster-wide-deny.md):

- ``gpucell-tenants-deny-nodes``: every node (entities ``host``, ``remote-node``, ``kube-apiserver``) on every TCP,
  UDP and SCTP port but the API servers' own TCP port (etcd 2379-2380, the kubelet's 10250, SSH, Hubble's 4244,
  node-exporter...), and Cilium's ``health`` endpoints on every port (:func:`nodes_policy`);
- ``gpucell-tenants-deny-networks``: the cell's node network but the API endpoint (BMCs, switches, storage), the
  API endpoint on every port but ``apiPort``, the pod and service CIDRs (the cluster DNS address aside),
  link-local, and the other cells' networks (:func:`networks_policy`);
- ``gpucell-tenants-deny-platform``: every pod of the platform namespaces but the cluster DNS
  (:func:`platform_policy`);
- ``gpucell-deny-private-<tenant>``, one per tenant of the facts, and ``gpucell-deny-private-unlisted`` for any other
  tenant namespace: the private ranges (:data:`gpucell.spec.tenancy.PRIVATE_RANGES`) but the tenant's own
  ``egressCidrs`` and the API endpoint (:func:`private_policies`);
- ``gpucell-platform-deny-tenants``: ingress to the platform namespaces' pods (the cluster DNS aside) from any
  tenant endpoint (:func:`platform_ingress_policy`).

Tenant endpoints are selected by their namespace's ``gpucell.io/tenant`` label (Cilium's
``k8s:io.cilium.k8s.namespace.labels.*`` identity labels, which a pod cannot imitate since Cilium 1.14.2,
CVE-2023-39347; a tenant cannot label its own Namespace). Every policy sets ``enableDefaultDeny`` ``false`` for both
directions: a policy with only deny rules otherwise puts the endpoints it selects into default deny for that direction
("If not specified, the default is true for each traffic direction that has rules", the CRD's ``enableDefaultDeny``),
which would cut every platform pod off from the traffic it lives on (webhooks, scrapes, controllers).

Semantics these rules rely on (Cilium 1.20 "Layer 3 Examples" and "Deny Policies"): CIDR rules never match
endpoints or nodes of the cluster (the default ``policyCIDRMatchMode``), so the node-network deny leaves the
servers to the entity rule and its API port; a Service address (ClusterIP, LoadBalancer) is translated to its
backend before policy sees it, so denying the service CIDR or a LoadBalancer block inside the node network never
closes a Service, only addresses nothing translates; deny rules take L4 ports (ranges with ``endPort``) but no L7
rules. ICMP is not a port and is not denied here.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from ipaddress import IPv4Network
from typing import TYPE_CHECKING, Any

import pulumi

from gpucell._component import MANAGED_BY, CellComponent, custom_resource
from gpucell.admission.tenants import ClusterFacts
from gpucell.cluster import Cluster, listen_port
from gpucell.spec.network import Network
from gpucell.spec.tenancy import (
    DNS_SELECTOR,
    LINK_LOCAL,
    NAMESPACE_KEY,
    PRIVATE_RANGES,
    SYSTEM_NAMESPACES,
    TENANT_LABEL,
    TenantSpec,
)
from gpucell.spec.traffic import GATEWAY_NAMESPACE

if TYPE_CHECKING:
    from gpucell.spec.cell import CellSpec

__all__ = [
    "API_VERSION",
    "KIND",
    "TENANT_ENDPOINTS",
    "ClusterDeny",
    "ClusterDenyArgs",
    "all_ports_but",
    "cell_networks",
    "cluster_deny_manifests",
    "networks_policy",
    "nodes_policy",
    "other_cells",
    "platform_ingress_policy",
    "platform_namespaces",
    "platform_policy",
    "private_policies",
]

API_VERSION = "cilium.io/v2"
KIND = "CiliumClusterwideNetworkPolicy"
NAMESPACE_LABELS = "k8s:io.cilium.k8s.namespace.labels."
"""Prefix of Cilium's identity labels carrying a pod's namespace labels."""
TENANT_KEY = f"{NAMESPACE_LABELS}{TENANT_LABEL}"
TENANT_ENDPOINTS: dict[str, Any] = {"matchExpressions": [{"key": TENANT_KEY, "operator": "Exists"}]}
"""Every endpoint of a tenant namespace (one labelled ``gpucell.io/tenant``), whatever its tenant."""
NOT_DNS = {"key": "k8s:k8s-app", "operator": "NotIn", "values": [DNS_SELECTOR["k8s:k8s-app"]]}
"""Any pod but the cluster DNS (k3s's CoreDNS pods carry ``k8s-app: kube-dns``, as kubeadm's and EKS's do)."""
NO_DEFAULT_DENY = {"ingress": False, "egress": False}
"""``enableDefaultDeny`` of every policy here: deny rules only, no endpoint put into default deny by them."""
NODE_ENTITIES = ("host", "remote-node", "kube-apiserver")
"""Cilium's entities for the nodes: the local node, the others, and the nodes (or addresses) serving the API."""


def all_ports_but(port: int) -> list[dict[str, Any]]:
    """``toPorts[].ports`` naming every TCP, UDP and SCTP port but TCP ``port`` (1-65535): protocol ``ANY`` ranges
    below and above it (``endPort``), and ``port`` itself over UDP and SCTP."""
    ports: list[dict[str, Any]] = []
    for first, last in ((1, port - 1), (port + 1, 65535)):
        if first < last:
            ports.append({"port": str(first), "endPort": last, "protocol": "ANY"})
        elif first == last:
            ports.append({"port": str(first), "protocol": "ANY"})
    return [*ports, {"port": str(port), "protocol": "UDP"}, {"port": str(port), "protocol": "SCTP"}]


def _denied(networks: Iterable[IPv4Network], kept: Sequence[IPv4Network]) -> list[dict[str, Any]]:
    """``toCIDRSet`` entries denying ``networks`` but the ``kept`` ones: a network inside a kept one is left out, a
    kept network inside a denied one is its ``except`` (IPv4 networks are nested or apart, never half over)."""
    out: list[dict[str, Any]] = []
    for net in dict.fromkeys(networks):
        if any(net.subnet_of(keep) for keep in kept):
            continue
        entry: dict[str, Any] = {"cidr": str(net)}
        inside = sorted({keep for keep in kept if keep.subnet_of(net)})
        if inside:
            entry["except"] = [str(keep) for keep in inside]
        out.append(entry)
    return out


def _api_address(network: Network) -> list[IPv4Network]:
    """The API endpoint as a ``/32``, when it is an address (``cluster`` egress reaches it on ``apiPort``)."""
    api = network.api_address
    return [] if api is None else [IPv4Network(f"{api}/32")]


def _policy(name: str, description: str, selector: Mapping[str, Any], rules: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "labels": dict(MANAGED_BY)},
        "spec": {
            "description": description,
            "endpointSelector": copy.deepcopy(dict(selector)),
            "enableDefaultDeny": dict(NO_DEFAULT_DENY),
            **copy.deepcopy(dict(rules)),
        },
    }


def nodes_policy(network: Network) -> dict[str, Any]:
    """``gpucell-tenants-deny-nodes``: ``egressDeny`` from tenant endpoints to the node entities (:data:`NODE_ENTITIES`)
    on :func:`all_ports_but` the API servers' port (:func:`gpucell.cluster.listen_port`: what ``cluster`` egress
    allows), and to Cilium's ``health`` endpoints on every port.

    On k3s the API server runs on the servers themselves, so ``kube-apiserver`` is the servers' ``host``/
    ``remote-node`` identity (Cilium gives a node serving the API the ``reserved:kube-apiserver`` label too): etcd
    (2379, 2380), the kubelet (10250), SSH, the supervisor's and Cilium's ports (4240, 4244) are all on those
    addresses. Agents and host-network pods (node-exporter, kube-vip) are covered the same way."""
    port = listen_port(network)
    return _policy(
        "gpucell-tenants-deny-nodes",
        f"Tenant endpoints never reach a node on any port but the API servers' TCP {port}, nor Cilium's health "
        "endpoints",
        TENANT_ENDPOINTS,
        {
            "egressDeny": [
                {"toEntities": list(NODE_ENTITIES), "toPorts": [{"ports": all_ports_but(port)}]},
                {"toEntities": ["health"]},
            ]
        },
    )


def networks_policy(network: Network, others: Sequence[IPv4Network] = ()) -> dict[str, Any]:
    """``gpucell-tenants-deny-networks``: ``egressDeny`` from tenant endpoints to

    - the node CIDR but the API endpoint's address (BMCs, switches, storage, the servers' out-of-band side), the pod
      CIDR, the service CIDR but ``clusterDns`` (so DNS never depends on where a Service address is translated),
      link-local, and ``others`` (the other cells' networks, :func:`other_cells`), each but the API endpoint's
      address where it holds it;
    - the API endpoint's address (when ``apiEndpoint`` is one) on :func:`all_ports_but` ``apiPort``.

    The nodes themselves are never a CIDR match (the entity rule of :func:`nodes_policy` covers them), and addresses
    Cilium translates (ClusterIPs, LoadBalancer addresses of the cell) are matched as their backends, so a tenant
    still reaches a Service in its own namespace through them."""
    api = _api_address(network)
    dns = IPv4Network(f"{network.cluster_dns}/32")
    cell = [*_denied([network.node_cidr, network.pod_cidr], api), *_denied([network.service_cidr], [*api, dns])]
    rules: list[dict[str, Any]] = [{"toCIDRSet": [*cell, *_denied([LINK_LOCAL, *others], api)]}]
    if api:
        ports = all_ports_but(network.api_port)
        rules.append({"toCIDRSet": [{"cidr": str(api[0])}], "toPorts": [{"ports": ports}]})
    return _policy(
        "gpucell-tenants-deny-networks",
        "Tenant endpoints never reach the cell's node, pod and service networks, link-local or the other cells, "
        "nor the API endpoint but on its port",
        TENANT_ENDPOINTS,
        {"egressDeny": rules},
    )


def platform_namespaces(facts: ClusterFacts, extra: Sequence[str] = ()) -> list[str]:
    """The namespaces tenants never reach (sorted): Kubernetes' and gpucell's platform namespaces
    (:data:`gpucell.spec.tenancy.SYSTEM_NAMESPACES`: Cilium's Hubble Relay, CoreDNS, KubeVirt, CDI, the GPU Operator,
    Longhorn, cert-manager, KServe, the metrics stack, KEDA, Velero, Cluster API), the Gateway's, the image catalogs'
    and image namespaces of ``facts``, and ``extra``."""
    catalogs = [*facts.image_catalogs, *facts.image_namespaces]
    return sorted({*SYSTEM_NAMESPACES, GATEWAY_NAMESPACE, *catalogs, *extra})


def _platform_pods(namespaces: Sequence[str]) -> dict[str, Any]:
    """Every pod of ``namespaces`` but the cluster DNS. The namespace requirement is ``In`` on purpose: a selector
    of negative requirements only would also match identities without namespace labels (``world``, the nodes;
    cilium/cilium#46949)."""
    return {"matchExpressions": [{"key": NAMESPACE_KEY, "operator": "In", "values": list(namespaces)}, NOT_DNS]}


def platform_policy(namespaces: Sequence[str]) -> dict[str, Any]:
    """``gpucell-tenants-deny-platform``: ``egressDeny`` from tenant endpoints to every pod of ``namespaces``
    (:func:`platform_namespaces`) but the cluster DNS, whatever namespace labels say (a platform namespace labelled
    ``gpucell.io/platform-services`` stays closed: offer tenants a service from a namespace of its own)."""
    return _policy(
        "gpucell-tenants-deny-platform",
        "Tenant endpoints never reach a pod of the platform namespaces but the cluster DNS",
        TENANT_ENDPOINTS,
        {"egressDeny": [{"toEndpoints": [_platform_pods(namespaces)]}]},
    )


def platform_ingress_policy(namespaces: Sequence[str]) -> dict[str, Any]:
    """``gpucell-platform-deny-tenants``: ``ingressDeny`` on every pod of ``namespaces`` but the cluster DNS from any
    tenant endpoint: the platform side of :func:`platform_policy`, which holds even for a pod a later change leaves
    out of it. Everything else reaching those pods (the API server calling webhooks, Prometheus scraping, the
    controllers, the Gateway) is untouched: the policy puts no pod into default deny, and replies to connections a
    platform pod opens into a tenant are not new connections."""
    return _policy(
        "gpucell-platform-deny-tenants",
        "Platform pods but the cluster DNS never accept a connection from a tenant endpoint",
        _platform_pods(namespaces),
        {"ingressDeny": [{"fromEndpoints": [TENANT_ENDPOINTS]}]},
    )


def private_policies(tenants: Mapping[str, TenantSpec], network: Network) -> list[dict[str, Any]]:
    """``gpucell-deny-private-<tenant>`` per tenant: ``egressDeny`` to the private ranges
    (:data:`gpucell.spec.tenancy.PRIVATE_RANGES`) but the tenant's ``egressCidrs`` (the networks its operator chose for
    it) and the API endpoint's address (no policy when those cover every range); then
    ``gpucell-deny-private-unlisted``, the whole ranges but the API endpoint for any tenant namespace not in
    ``tenants`` (one built outside these facts is fenced in, not opened).

    ``internet`` egress already leaves the private ranges out, but an allow a tenant adds (a ``NetworkPolicy``
    ``ipBlock``, a name of ``egressFqdns`` the tenant's own DNS points at a private address) would reopen them."""
    api = _api_address(network)
    out = []
    for tenant, spec in tenants.items():
        denied = _denied(PRIVATE_RANGES, [*api, *spec.egress_cidrs])
        if denied:  # egressCidrs may hold whole ranges (10.0.0.0/8 beside a cell on 192.168.0.0/16)
            out.append(
                _policy(
                    f"gpucell-deny-private-{tenant}",
                    f"Tenant {tenant} never reaches a private network but its egressCidrs",
                    {"matchLabels": {TENANT_KEY: tenant}},
                    {"egressDeny": [{"toCIDRSet": denied}]},
                )
            )
    unlisted: dict[str, Any] = {"matchExpressions": [{"key": TENANT_KEY, "operator": "Exists"}]}
    if tenants:
        unlisted["matchExpressions"].append({"key": TENANT_KEY, "operator": "NotIn", "values": sorted(tenants)})
    out.append(
        _policy(
            "gpucell-deny-private-unlisted",
            "A tenant these rules do not list never reaches a private network",
            unlisted,
            {"egressDeny": [{"toCIDRSet": _denied(PRIVATE_RANGES, api)}]},
        )
    )
    return out


def cluster_deny_manifests(
    facts: ClusterFacts, others: Sequence[IPv4Network] = (), extra_namespaces: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """Every ``CiliumClusterwideNetworkPolicy`` of the cluster deny, in order (the module doc): from ``facts``
    (address plan, tenants and their ``egressCidrs``, image catalogs, Gateway), the other cells' networks ``others``
    and ``extra_namespaces`` of the platform."""
    namespaces = platform_namespaces(facts, extra_namespaces)
    return [
        nodes_policy(facts.network),
        networks_policy(facts.network, others),
        platform_policy(namespaces),
        *private_policies(facts.tenants, facts.network),
        platform_ingress_policy(namespaces),
    ]


def _private(net: IPv4Network) -> bool:
    return any(net.subnet_of(private) for private in PRIVATE_RANGES)


def cell_networks(cell: CellSpec) -> list[IPv4Network]:
    """What another cell's tenants never reach of ``cell``: its node, pod and service CIDRs, and where they are
    private, its LoadBalancer blocks and API endpoint. A public LoadBalancer address (a tenant VM's, the model
    Gateway's) is the cell's public face, reachable from anywhere on the internet, so denying it would only stop
    legitimate calls from one region to another."""
    net = cell.network
    out = [net.node_cidr, net.pod_cidr, net.service_cidr]
    if cell.load_balancer is not None:
        blocks = [n for pool in cell.load_balancer.pools.values() for block in pool.parsed for n in block.networks()]
        out.extend(n for n in blocks if _private(n))
    out.extend(n for n in _api_address(net) if _private(n))
    return list(dict.fromkeys(out))


def _outermost(networks: Iterable[IPv4Network]) -> list[IPv4Network]:
    """``networks`` in order, without repeats and without those inside another of them."""
    unique = list(dict.fromkeys(networks))
    return [net for net in unique if not any(net != other and net.subnet_of(other) for other in unique)]


def other_cells(
    cells: Mapping[str, CellSpec], region: str, outside: Mapping[str, Sequence[IPv4Network]] | None = None
) -> list[IPv4Network]:
    """:func:`cell_networks` of every cell of ``cells`` but ``region``'s, in region order, then the networks of
    ``outside`` (``gpucell:otherCells``: region -> networks of the fleet's cells deployed by other stacks; an entry
    naming a region of ``cells`` is skipped, that cell's own networks count), without repeats or networks inside
    another (a LoadBalancer block or API VIP on its cell's node network). So a region planned in a stack of its own
    with ``outside`` listing the other regions denies what it denied in a stack holding them all."""
    fleet = [n for name, nets in (outside or {}).items() if name not in cells for n in nets]
    return _outermost([*(n for name, cell in cells.items() if name != region for n in cell_networks(cell)), *fleet])


@dataclass(frozen=True)
class ClusterDenyArgs:
    """Inputs of :class:`ClusterDeny`: the cluster, its facts, and what else of the network tenants never reach."""

    cluster: Cluster
    """The cluster to create the policies in (Cilium must run there: the CRD comes with it)."""
    facts: ClusterFacts
    """Address plan (``network``), the tenants and their ``egressCidrs``, image catalogs and the Gateway."""
    other_cells: Sequence[IPv4Network] = ()
    """Networks of the stack's other cells (:func:`other_cells`). Defaults to none."""
    extra_namespaces: Sequence[str] = field(default_factory=tuple)
    """Namespaces of platform pieces of your own that tenants never reach, besides :func:`platform_namespaces`.
    Defaults to none."""

    @classmethod
    def from_cell(cls, cell: CellSpec, cluster: Cluster, others: Sequence[IPv4Network] = ()) -> ClusterDenyArgs:
        """The cluster deny of ``cell`` (its facts, :meth:`gpucell.admission.tenants.ClusterFacts.from_cell`) with the
        other cells' networks ``others``."""
        return cls(cluster, ClusterFacts.from_cell(cell), tuple(others))


class ClusterDeny(CellComponent):
    """The cluster-wide deny rules (``gpucell:index:ClusterDeny``): one child per policy of
    :func:`cluster_deny_manifests`, named ``f"{name}-<policy name without gpucell->"``. The policies are cluster
    objects of the platform: no tenant role grants ``ciliumclusterwidenetworkpolicies``. Tenants' objects come after
    it when it is their platform's (:attr:`gpucell.platform.Platform.cluster_deny`)."""

    def __init__(self, name: str, args: ClusterDenyArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("ClusterDeny", name, opts, args.cluster)
        manifests = cluster_deny_manifests(args.facts, args.other_cells, args.extra_namespaces)
        self.policies: list[pulumi.CustomResource] = [
            custom_resource(f"{name}-{obj['metadata']['name'].removeprefix('gpucell-')}", obj, self.child())
            for obj in manifests
        ]
        """The registered policies, in :func:`cluster_deny_manifests` order."""
        self.register_outputs({})
