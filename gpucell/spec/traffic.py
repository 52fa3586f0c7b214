"""Traffic into a cell: the addresses it hands out itself (Cilium LB IPAM), how they are announced (L2 or BGP), and
the Gateway that serves model endpoints over HTTPS.

These are plan-time values; the rules that need the rest of the region (its networks, tenants and pools) are
:func:`check_traffic`, run as one of the cell's cross-field rules. Upstream: Cilium 1.20 "LoadBalancer IP Address
Management (LB IPAM)", "L2 Announcements / L2 Aware LB", "BGP Control Plane" (CRDs ``CiliumLoadBalancerIPPool``
cilium.io/v2, ``CiliumL2AnnouncementPolicy`` cilium.io/v2alpha1, ``CiliumBGPClusterConfig``/``PeerConfig``/
``Advertisement`` cilium.io/v2); Gateway API v1.5.1 (standard channel); cert-manager v1.21 ``ClusterIssuer``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence
from enum import StrEnum
from ipaddress import IPv4Address, IPv4Network, summarize_address_range
from typing import TYPE_CHECKING, Protocol

from pydantic import Field, StrictInt, field_validator, model_validator

from gpucell.errors import SpecError, shown
from gpucell.spec._base import SpecModel
from gpucell.spec._values import Ipv4Address, check_each, check_url, unicast_problem
from gpucell.spec.network import DNS_LABEL, DNS_SUBDOMAIN, check_peer_address

if TYPE_CHECKING:
    from collections.abc import Mapping

    from gpucell.spec.network import Network
    from gpucell.spec.pools import NodePool
    from gpucell.spec.tenancy import TenantSpec
    from gpucell.spec.tenant_clusters import TenantClusterApiServer
    from gpucell.spec.workloads import SshService

__all__ = [
    "ADDRESS_ANNOTATION",
    "GATEWAY_NAMESPACE",
    "MAX_GATEWAY_LISTENERS",
    "POOL_LABEL",
    "SERVICE_NAMESPACE_KEY",
    "AcmeIssuerSpec",
    "AddressBlock",
    "AnnounceMode",
    "BgpPeerSpec",
    "BgpSpec",
    "CaIssuerSpec",
    "GatewaySpec",
    "IssuerSpec",
    "L2Spec",
    "LbPoolSpec",
    "LoadBalancerSpec",
    "TrafficFacts",
    "check_traffic",
    "endpoint_host",
    "gateway_domain_problem",
    "parse_block",
    "pool_blocks",
    "tenant_pools",
    "vm_pool",
]

POOL_LABEL = "gpucell.io/lb-pool"
"""Service label naming the pool its address comes from (a pool's ``serviceSelector`` requires it)."""
ADDRESS_ANNOTATION = "lbipam.cilium.io/ips"
"""Service annotation asking Cilium LB IPAM for a fixed address (Cilium 1.20 LB IPAM "Requesting IPs")."""
SERVICE_NAMESPACE_KEY = "io.kubernetes.service.namespace"
"""The ``serviceSelector`` key Cilium matches against a Service's namespace."""
GATEWAY_NAMESPACE = "gpucell-gateway"
"""Namespace of the cell's Gateways, their certificates and ACME challenges (see :mod:`gpucell.components.gateway`)."""
MAX_GATEWAY_LISTENERS = 64
"""Listeners one Gateway may have (Gateway API v1.5.1 ``gateways`` CRD: ``spec.listeners`` ``maxItems: 64``)."""
_ASN_MAX = 4_294_967_295
"""Largest 4-byte AS number (RFC 6793); Cilium's ``localASN``/``peerASN`` are int64 in the CRD, capped by BGP."""


class AddressBlock:
    """One block of a pool: a CIDR (``203.0.113.16/28``) or an inclusive range (``203.0.113.10-203.0.113.20``),
    as Cilium's ``spec.blocks[]`` ``cidr`` or ``start``/``stop``."""

    def __init__(self, text: str, first: IPv4Address, last: IPv4Address, cidr: IPv4Network | None) -> None:
        self.text = text
        self.first = first
        self.last = last
        self.cidr = cidr

    def __contains__(self, address: object) -> bool:
        return isinstance(address, IPv4Address) and self.first <= address <= self.last

    def overlaps(self, other: AddressBlock | IPv4Network) -> bool:
        """True when any address is in both."""
        first, last = (
            (other.network_address, other.broadcast_address)
            if isinstance(other, IPv4Network)
            else (other.first, other.last)
        )
        return self.first <= last and first <= self.last

    def networks(self) -> list[IPv4Network]:
        """The block as CIDRs (a range is summarised into the fewest networks covering it exactly)."""
        return [self.cidr] if self.cidr is not None else list(summarize_address_range(self.first, self.last))

    def manifest(self) -> dict[str, str]:
        """The ``spec.blocks[]`` entry of a ``CiliumLoadBalancerIPPool``."""
        if self.cidr is not None:
            return {"cidr": str(self.cidr)}
        return {"start": str(self.first), "stop": str(self.last)}


def parse_block(text: str) -> AddressBlock:
    """``text`` as an :class:`AddressBlock`. Raises ``ValueError`` naming what is accepted."""
    accepted = "give a CIDR such as 203.0.113.16/28 or a range such as 203.0.113.10-203.0.113.20 (IPv4)"
    try:
        if "-" in text:
            start, stop = (IPv4Address(part.strip()) for part in text.split("-", 1))
            if stop < start:
                raise ValueError(f"is a range that ends before it starts; {accepted}")
            block = AddressBlock(text, start, stop, None)
        else:
            net = IPv4Network(text, strict=True)
            block = AddressBlock(text, net.network_address, net.broadcast_address, net)
    except ValueError as exc:
        if "ends before" in str(exc):
            raise
        raise ValueError(f"is not an address block; {accepted}") from None
    for address in (block.first, block.last):
        problem = unicast_problem(address)
        if problem is not None:
            raise ValueError(f"holds {address}, which {problem}; a pool hands out unicast addresses")
    return block


class LbPoolSpec(SpecModel):
    """One LB IPAM pool (a ``CiliumLoadBalancerIPPool``): its addresses and who may draw from it."""

    blocks: list[str] = Field(min_length=1)
    """CIDRs (``203.0.113.16/28``) or inclusive ranges (``203.0.113.10-203.0.113.20``) of IPv4 addresses. Every address
    of a CIDR is handed out, network and broadcast addresses included (Cilium ``allowFirstLastIPs: Yes``, its default
    since 1.16), because routed public blocks have no subnet broadcast."""
    tenants: list[str] = []
    """Tenants whose LoadBalancer Services may take addresses from this pool. Two tenants listed in one pool draw
    from the same addresses (each Service still gets an address of its own); a pool no tenant lists serves only the
    cell's Gateway (``gateway.pool``). A name that is not (yet) a tenant of the region is allowed: the pool is ready
    for it. Defaults to none."""

    @field_validator("blocks")
    @classmethod
    def _blocks(cls, blocks: list[str]) -> list[str]:
        return check_each(blocks, parse_block)

    @property
    def parsed(self) -> list[AddressBlock]:
        """:attr:`blocks` parsed, in order."""
        return [parse_block(text) for text in self.blocks]

    def holds(self, address: IPv4Address) -> bool:
        """True when ``address`` is in one of the pool's blocks."""
        return any(address in block for block in self.parsed)


class AnnounceMode(StrEnum):
    """How the cell makes its LoadBalancer addresses reachable from outside."""

    L2 = "l2"
    """Cilium L2 announcements: a node answers ARP for each address (labs, flat networks)."""
    BGP = "bgp"
    """Cilium's BGP control plane: nodes advertise each address as a /32 to the network's routers (datacenter)."""


_INTERFACE = re.compile(r"[A-Za-z0-9^$.*+?()\[\]|\\_-]{1,64}")
"""An interface name or the regular expression Cilium matches interface names with (``^eth[0-9]+``, ``bond0``)."""


class L2Spec(SpecModel):
    """Cilium L2 announcements (``CiliumL2AnnouncementPolicy``)."""

    interfaces: list[str] = Field(min_length=1)
    """Interfaces (Go regular expressions, Cilium ``spec.interfaces``) on which nodes answer ARP for the addresses,
    e.g. ``^bond0$``; the node network's interface."""
    node_pools: list[str] = []
    """Node pools whose nodes may announce; defaults to every node. With ``externalTrafficPolicy: Local`` (every
    Service gpucell renders) only nodes running a backend take the lease."""

    @field_validator("interfaces")
    @classmethod
    def _interfaces(cls, values: list[str]) -> list[str]:
        for index, value in enumerate(values):
            if not _INTERFACE.fullmatch(value):
                raise SpecError(
                    (index,),
                    f"{shown(value)} is not an interface name or pattern (letters, digits, "
                    "'_', '-', '.', and regular expression characters; e.g. ^bond0$)",
                )
            try:
                re.compile(value)
            except re.error as exc:
                raise SpecError((index,), f"{shown(value)} is not a regular expression: {exc}") from None
        return values


class BgpPeerSpec(SpecModel):
    """One BGP neighbour of the announcing nodes (a top-of-rack router)."""

    address: Ipv4Address
    """The router's address, reachable from the nodes (Cilium ``peerAddress``): a unicast host address."""
    asn: StrictInt = Field(ge=1, le=_ASN_MAX)
    """The router's AS number (Cilium ``peerASN``)."""

    _router = field_validator("address")(check_peer_address)


class BgpSpec(SpecModel):
    """Cilium's BGP control plane (``CiliumBGPClusterConfig``, ``CiliumBGPPeerConfig``, ``CiliumBGPAdvertisement``)."""

    local_asn: StrictInt = Field(ge=1, le=_ASN_MAX)
    """The nodes' AS number (Cilium ``localASN``)."""
    peers: dict[str, BgpPeerSpec] = Field(min_length=1)
    """Peer name (a DNS-1123 label) -> router."""
    node_pools: list[str] = []
    """Node pools whose nodes peer and advertise; defaults to every node."""

    @field_validator("peers")
    @classmethod
    def _peer_names(cls, peers: dict[str, BgpPeerSpec]) -> dict[str, BgpPeerSpec]:
        for name in peers:
            if not DNS_LABEL.fullmatch(name):
                raise SpecError((name,), f"{shown(name)} is not a DNS-1123 label")
        return peers


class LoadBalancerSpec(SpecModel):
    """Addresses the cell hands to LoadBalancer Services itself (Cilium LB IPAM) and how they are announced."""

    pools: dict[str, LbPoolSpec] = Field(min_length=1)
    """Pool name (a DNS-1123 label; the ``CiliumLoadBalancerIPPool`` is ``gpucell-<name>``) -> pool."""
    announce: AnnounceMode
    """``l2`` (with ``l2``) or ``bgp`` (with ``bgp``)."""
    l2: L2Spec | None = None
    """L2 announcement settings; required with ``announce: l2``."""
    bgp: BgpSpec | None = None
    """BGP settings; required with ``announce: bgp``."""

    @field_validator("pools")
    @classmethod
    def _pool_names(cls, pools: dict[str, LbPoolSpec]) -> dict[str, LbPoolSpec]:
        for name in pools:
            if not DNS_LABEL.fullmatch(name) or len(name) > 54:
                raise SpecError((name,), f"{shown(name)} is not a DNS-1123 label of at most 54 characters")
        return pools

    @model_validator(mode="after")
    def _announcement(self) -> LoadBalancerSpec:
        wanted, other = ("l2", "bgp") if self.announce is AnnounceMode.L2 else ("bgp", "l2")
        if getattr(self, wanted) is None:
            raise SpecError((wanted,), f"is required with announce: {self.announce.value}")
        if getattr(self, other) is not None:
            raise SpecError((other,), f"only applies with announce: {other} (announce is {self.announce.value})")
        return self


class AcmeIssuerSpec(SpecModel):
    """An ACME ``ClusterIssuer`` solving HTTP-01 challenges through the cell's Gateway (cert-manager's
    ``gatewayHTTPRoute`` solver): the Gateway gets a plain-HTTP listener on port 80 for the challenges only."""

    server: str = "https://acme-v02.api.letsencrypt.org/directory"
    """The ACME directory URL. Defaults to Let's Encrypt production."""
    email: str
    """Account e-mail address (expiry notices)."""

    @field_validator("server")
    @classmethod
    def _server(cls, value: str) -> str:
        return check_url(value, ("https",))

    @field_validator("email")
    @classmethod
    def _email(cls, value: str) -> str:
        local, at, domain = value.partition("@")
        if not (at and local and DNS_SUBDOMAIN.fullmatch(domain) and "." in domain) or any(c.isspace() for c in value):
            raise ValueError("is not an e-mail address such as ops@example.net")
        return value


class CaIssuerSpec(SpecModel):
    """A CA ``ClusterIssuer``: cert-manager signs with the operator's CA, from a Secret in namespace
    ``cert-manager`` (keys ``tls.crt``, ``tls.key``) that gpucell does not create."""

    secret_name: str
    """Name of the CA Secret in ``cert-manager`` (a DNS-1123 subdomain)."""

    @field_validator("secret_name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not DNS_SUBDOMAIN.fullmatch(value):
            raise ValueError("is not a Secret name (a DNS-1123 subdomain)")
        return value


class IssuerSpec(SpecModel):
    """Where the Gateway's certificates come from: exactly one of ``acme`` and ``ca``."""

    acme: AcmeIssuerSpec | None = None
    """An ACME CA (Let's Encrypt or another) over HTTP-01."""
    ca: CaIssuerSpec | None = None
    """The operator's own CA."""

    @model_validator(mode="after")
    def _one(self) -> IssuerSpec:
        given = [key for key in ("acme", "ca") if getattr(self, key) is not None]
        if len(given) != 1:
            raise SpecError((), f"give exactly one of acme, ca (got {', '.join(given) or 'none'})")
        return self


class GatewaySpec(SpecModel):
    """The Gateway (Cilium's Gateway API implementation) serving the cell's model endpoints over HTTPS."""

    domain: str
    """DNS domain every endpoint's host name is under, e.g. ``models.fra1.example.net``; the operator points
    ``*.<domain>`` (or each host) at the Gateway's address."""
    pool: str
    """The ``loadBalancer.pools`` entry the Gateway's address comes from: one that lists no tenants (a tenant's
    Service could otherwise take the address first)."""
    address: Ipv4Address | None = None
    """A fixed address for the Gateway, inside ``pool``; defaults to any free address of it (then the address is
    only known once Cilium assigns it)."""
    per_tenant: bool = False
    """One Gateway per tenant with endpoints (``gpucell-<tenant>``, each with an address of its own from ``pool``)
    instead of one for the cell (``gpucell``). Defaults to false."""
    issuer: IssuerSpec
    """The ClusterIssuer (``gpucell-gateway``) issuing every endpoint's certificate."""

    @field_validator("domain")
    @classmethod
    def _domain(cls, value: str) -> str:
        if not DNS_SUBDOMAIN.fullmatch(value) or "." not in value or len(value) > 200:
            raise ValueError("is not a DNS domain such as models.fra1.example.net (lower-case, at most 200 characters)")
        return value


def endpoint_host(endpoint: str, tenant: str, domain: str, host: str | None) -> str:
    """The host name an exposed endpoint is served at: its ``expose.host``, else ``<endpoint>.<tenant>.<domain>``."""
    return host if host is not None else f"{endpoint}.{tenant}.{domain}"


def gateway_domain_problem(domain: str, names: Sequence[tuple[str, str]]) -> str | None:
    """What is wrong with ``gateway.domain`` ``domain`` given ``names`` (``(DNS name, key path naming it)``: the API's
    names and the OIDC issuer's host, of its own region or others), or ``None``. A domain that is one of them or a
    parent of one would let an endpoint's ``expose.host`` take that name: the Gateway would answer for it, and its
    issuer would sign a certificate for the API or the issuer."""
    under = [(name, where) for name, where in names if name == domain or name.endswith(f".{domain}")]
    if not under:
        return None
    listed = ", ".join(f"{name} ({where})" for name, where in under[:3])
    more = f" and {len(under) - 3} more" if len(under) > 3 else ""
    them = "that name" if len(under) == 1 else "those names"
    return (
        f"{shown(domain)} covers {listed}{more}: an endpoint's expose.host under it could take {them}, and the "
        "Gateway's issuer would sign a certificate for it; give the Gateway a domain of its own "
        "(e.g. models.<region>.example.net)"
    )


def pool_blocks(lb: LoadBalancerSpec | None) -> list[tuple[tuple[str | int, ...], AddressBlock]]:
    """``(key path below the region, block)`` of every address block of ``lb``'s pools, in config order."""
    if lb is None:
        return []
    return [
        (("loadBalancer", "pools", name, "blocks", index), block)
        for name, pool in lb.pools.items()
        for index, block in enumerate(pool.parsed)
    ]


# -- rules across the region ---------------------------------------------------------------------------------------
class TrafficFacts(Protocol):
    """What the traffic rules read of a region: a :class:`~gpucell.spec.cell.CellSpec` or the
    :class:`~gpucell.admission.tenants.ClusterFacts` of a cluster (same fields, same key paths)."""

    @property
    def load_balancer(self) -> LoadBalancerSpec | None:
        """The LoadBalancer pools and their announcement."""

    @property
    def gateway(self) -> GatewaySpec | None:
        """The Gateway exposed endpoints are served from."""

    @property
    def network(self) -> Network:
        """The address plan."""

    @property
    def node_pools(self) -> Mapping[str, NodePool]:
        """The node pools (their hosts' addresses, and what announces)."""

    @property
    def tenants(self) -> Mapping[str, TenantSpec]:
        """The tenants (their VMs' Services, their endpoints' hosts)."""


def check_traffic(cell: TrafficFacts) -> Iterator[SpecError]:
    """Every problem of ``loadBalancer`` and ``gateway`` against the rest of the region, as :class:`SpecError`
    (paths below the region): pools that overlap each other or the cell's networks, names that are not pools,
    tenants or node pools, gateway addresses and endpoint hosts outside what the config allows."""
    lb = cell.load_balancer
    if lb is not None:
        yield from _pool_overlaps(cell, lb)
        yield from _pool_references(cell, lb)
    yield from _gateway(cell)
    yield from _vm_addresses(cell)


def _pool_overlaps(cell: TrafficFacts, lb: LoadBalancerSpec) -> Iterator[SpecError]:
    blocks = [(name, index, block) for name, pool in lb.pools.items() for index, block in enumerate(pool.parsed)]
    for (name_a, index_a, a), (name_b, index_b, b) in itertools.combinations(blocks, 2):
        if a.overlaps(b):
            yield SpecError(
                ("loadBalancer", "pools", name_b, "blocks", index_b),
                f"{shown(b.text)} overlaps loadBalancer.pools.{name_a}.blocks[{index_a}] {a.text}; "
                "an address belongs to one pool",
            )
    net = cell.network
    hosts = {host.address: host.name for pool in cell.node_pools.values() for host in pool.hosts}
    for name, index, block in blocks:
        where = ("loadBalancer", "pools", name, "blocks", index)
        for key, cell_net in (("podCidr", net.pod_cidr), ("serviceCidr", net.service_cidr)):
            if block.overlaps(cell_net):
                yield SpecError(
                    where,
                    f"{shown(block.text)} overlaps network.{key} {cell_net}; a pool must lie "
                    "outside the cell's pod and service networks",
                )
        if block.overlaps(net.node_cidr):
            yield from _inside_node_network(cell, lb, block, where, hosts)


def _inside_node_network(
    cell: TrafficFacts,
    lb: LoadBalancerSpec,
    block: AddressBlock,
    where: tuple[str | int, ...],
    hosts: dict[IPv4Address, str],
) -> Iterator[SpecError]:
    """A pool in the node network works with L2 announcements only (ARP answers on the node's own segment), and
    only with addresses no host, API endpoint or the subnet itself uses."""
    net = cell.network
    if lb.announce is AnnounceMode.BGP:
        yield SpecError(
            where,
            f"{shown(block.text)} overlaps network.nodeCidr {net.node_cidr}; with announce bgp "
            "a pool must be routed apart from the node network (use a block of its own)",
        )
        return
    taken = [(address, f"the address of node {name}") for address, name in hosts.items()]
    if net.api_address is not None:
        taken.append((net.api_address, "network.apiEndpoint"))
    if net.node_cidr.prefixlen < 31:
        taken += [
            (net.node_cidr.network_address, f"the network address of network.nodeCidr {net.node_cidr}"),
            (net.node_cidr.broadcast_address, f"the broadcast address of network.nodeCidr {net.node_cidr}"),
        ]
    for address, what in sorted(taken):
        if address in block:
            yield SpecError(where, f"{shown(block.text)} holds {address}, {what}; leave it out of the pool")
            return


def _pool_references(cell: TrafficFacts, lb: LoadBalancerSpec) -> Iterator[SpecError]:
    announcer = lb.l2 if lb.l2 is not None else lb.bgp
    mode = lb.announce.value
    for index, pool_name in enumerate(announcer.node_pools if announcer is not None else []):
        if pool_name not in cell.node_pools:
            yield SpecError(
                ("loadBalancer", mode, "nodePools", index),
                f"{shown(pool_name)} is not a node pool; pools: {', '.join(cell.node_pools)}",
            )


def _gateway(cell: TrafficFacts) -> Iterator[SpecError]:
    gateway, lb = cell.gateway, cell.load_balancer
    exposed = [
        (t, n, e) for t, spec in cell.tenants.items() for n, e in spec.model_endpoints.items() if e.expose is not None
    ]
    if gateway is None:
        for tenant, name, _ in exposed[:1]:
            yield SpecError(
                ("tenants", tenant, "modelEndpoints", name, "expose"),
                "needs the region's gateway (domain, pool, issuer) to serve the endpoint from",
            )
        return
    if lb is None or gateway.pool not in lb.pools:
        pools = ", ".join(lb.pools) if lb is not None else "none: configure loadBalancer.pools"
        yield SpecError(("gateway", "pool"), f"{shown(gateway.pool)} is not a loadBalancer pool; pools: {pools}")
    elif lb.pools[gateway.pool].tenants:
        own = [name for name, pool in lb.pools.items() if not pool.tenants]
        yield SpecError(
            ("gateway", "pool"),
            f"{shown(gateway.pool)} lists tenants ({', '.join(lb.pools[gateway.pool].tenants)}), whose "
            "LoadBalancer Services could take the Gateway's address first; give the Gateway a pool that lists no "
            f"tenants ({'pools without tenants: ' + ', '.join(own) if own else 'add one'})",
        )
    elif gateway.address is not None and not lb.pools[gateway.pool].holds(gateway.address):
        yield SpecError(
            ("gateway", "address"),
            f"{shown(str(gateway.address))} is outside loadBalancer.pools."
            f"{gateway.pool} ({', '.join(lb.pools[gateway.pool].blocks)})",
        )
    elif gateway.address is not None and gateway.per_tenant:
        yield SpecError(
            ("gateway", "address"),
            "only applies with perTenant false: each tenant's Gateway takes an address of its own from the pool",
        )
    seen: dict[str, str] = {}
    listeners: dict[str, int] = {}
    limit = MAX_GATEWAY_LISTENERS - (1 if gateway.issuer.acme is not None else 0)  # ACME: the HTTP listener
    for tenant, name, endpoint in exposed:
        assert endpoint.expose is not None
        where = ("tenants", tenant, "modelEndpoints", name, "expose", "host")
        host = endpoint_host(name, tenant, gateway.domain, endpoint.expose.host)
        if not host.endswith(f".{gateway.domain}"):
            yield SpecError(
                where,
                f"{shown(host)} is outside gateway.domain {gateway.domain}; use a name ending in .{gateway.domain}",
            )
            continue
        if host in seen:
            yield SpecError(
                where, f"{shown(host)} is already the host of {seen[host]}; each endpoint needs a host name of its own"
            )
            continue
        seen[host] = f"tenants.{tenant}.modelEndpoints.{name}"
        key = tenant if gateway.per_tenant else ""
        listeners[key] = listeners.get(key, 0) + 1
        if listeners[key] == limit + 1:  # one HTTPS listener per endpoint
            yield SpecError(
                where,
                f"is endpoint {limit + 1} on one Gateway, which holds at most "
                f"{MAX_GATEWAY_LISTENERS} listeners ({limit} endpoints); set gateway.perTenant: true",
            )


def tenant_pools(lb: LoadBalancerSpec | None, tenant: str) -> list[str]:
    """Names of the pools that list ``tenant``, in config order."""
    return [] if lb is None else [name for name, pool in lb.pools.items() if tenant in pool.tenants]


def vm_pool(lb: LoadBalancerSpec | None, tenant: str, pool: str | None) -> str | None:
    """The pool a tenant's LoadBalancer Service draws from: ``pool``, else the first pool listing the tenant."""
    if pool is not None:
        return pool
    pools = tenant_pools(lb, tenant)
    return pools[0] if pools else None


def _load_balancer_services(
    cell: TrafficFacts,
) -> Iterator[tuple[str, tuple[str, ...], SshService | TenantClusterApiServer]]:
    """``(tenant, key path, service)`` of every LoadBalancer Service a tenant declares: a VM's ``sshService``, a
    tenant cluster's ``apiServer``."""
    for tenant, spec in cell.tenants.items():
        for name, vm in spec.virtual_machines.items():
            if vm.ssh_service is not None and vm.ssh_service.type.value == "LoadBalancer":
                yield tenant, ("tenants", tenant, "virtualMachines", name, "sshService"), vm.ssh_service
        for name, cluster in spec.tenant_clusters.items():
            if cluster.api_server.type.value == "LoadBalancer":
                yield tenant, ("tenants", tenant, "tenantClusters", name, "apiServer"), cluster.api_server


def _vm_addresses(cell: TrafficFacts) -> Iterator[SpecError]:
    """Each LoadBalancer Service of a tenant (a VM's SSH, a tenant cluster's API) draws from a pool of its tenant, a
    fixed address lies in that pool, and no address is given twice (to two Services, or to one and the Gateway)."""
    lb, gateway = cell.load_balancer, cell.gateway
    owners: dict[IPv4Address, str] = {}
    if gateway is not None and gateway.address is not None:
        owners[gateway.address] = "gateway.address"
    for tenant, where, service in _load_balancer_services(cell):
        if lb is None:
            yield SpecError(
                (*where, "type"),
                "'LoadBalancer' needs the region's loadBalancer (pools and their "
                "announcement); configure it, or use NodePort or ClusterIP",
            )
            continue
        pool = vm_pool(lb, tenant, service.pool)
        mine = tenant_pools(lb, tenant)
        if pool is None or pool not in mine:
            given = (
                f"{shown(pool)} is not a pool that lists tenant {tenant}"
                if pool
                else (f"no loadBalancer pool lists tenant {tenant}")
            )
            yield SpecError(
                (*where, "pool" if service.pool else "type"),
                f"{given}; its pools: {', '.join(mine) or 'none'} (add the tenant to a pool's tenants)",
            )
            continue
        address = service.address
        if address is None:
            continue
        if not lb.pools[pool].holds(address):
            yield SpecError(
                (*where, "address"),
                f"{shown(str(address))} is outside loadBalancer.pools.{pool} ({', '.join(lb.pools[pool].blocks)})",
            )
        elif address in owners:
            yield SpecError(
                (*where, "address"),
                f"{shown(str(address))} is already the address of "
                f"{owners[address]}; two Services never share an address",
            )
        else:
            owners[address] = ".".join(where[:-1])
