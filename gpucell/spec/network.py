"""Where a cell's nodes live and how they are reached: hosts, SSH, and the cell's address plan."""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from enum import StrEnum
from ipaddress import IPv4Address, IPv4Network, ip_address
from typing import TypeVar

from pydantic import Field, StrictInt, field_validator, model_validator

from gpucell.errors import SpecError, shown
from gpucell.spec._base import SpecModel
from gpucell.spec._values import (
    Ipv4Address,
    Ipv4Cidr,
    check_config_key,
    check_each,
    check_login_name,
    check_routable_cidr,
    unicast_problem,
)
from gpucell.spec.lifecycle import HostRemovalPolicy

__all__ = [
    "DNS_LABEL",
    "DNS_SUBDOMAIN",
    "ApiVip",
    "ApiVipBgp",
    "ApiVipMode",
    "BgpPeer",
    "Host",
    "Network",
    "Ssh",
    "SshOverride",
    "as_address",
    "check_dns_label",
    "check_host_name",
    "check_names",
    "check_node_name",
    "check_peer_address",
    "check_service_names",
]

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"(?=.{1,253}\Z)[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*")


def check_dns_label(value: str) -> str:
    """Raise ``ValueError`` unless ``value`` is an RFC 1123 label (what Kubernetes accepts as a node or object name)."""
    if not DNS_LABEL.fullmatch(value):
        raise ValueError("is not a DNS-1123 label (lower-case letters, digits and '-', at most 63 characters)")
    return value


def check_node_name(value: str) -> str:
    """Raise ``ValueError`` unless ``value`` is a name Kubernetes accepts for a Node: an RFC 1123 subdomain (labels
    joined by ``.``, at most 253 characters), as EKS (``ip-10-0-1-5.ec2.internal``), kubeadm and RKE2 nodes named
    after their FQDN are. A gpucell cell's own hosts are single labels (:class:`gpucell.spec.nodes.NodeViews`), so
    the message names the label's rule, which every cluster accepts."""
    if not DNS_SUBDOMAIN.fullmatch(value):
        check_dns_label(value)
    return value


_Names = TypeVar("_Names", bound=Mapping[str, object])


def check_names(names: _Names) -> _Names:
    """Raise :class:`SpecError` at the first key of ``names`` that is not a DNS-1123 label."""
    for name in names:
        try:
            check_dns_label(name)
        except ValueError as exc:
            raise SpecError((name,), f"{shown(name)} {exc}") from None
    return names


_DNS_1035 = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")


def check_service_names(names: _Names) -> _Names:
    """Raise :class:`SpecError` at the first key that is not a DNS-1035 label: workloads get Services named after
    them, and a Service name must start with a letter."""
    for name in names:
        if not _DNS_1035.fullmatch(name):
            raise SpecError(
                (name,),
                f"{shown(name)} is not a DNS-1035 label (starts with a lower-case letter; "
                "lower-case letters, digits and '-'; at most 63 characters): workloads get Services of "
                "that name",
            )
    return names


def check_host_name(value: str) -> str:
    """Raise ``ValueError`` unless ``value`` is an IP address or a DNS name (no scheme, no port, no path)."""
    try:
        ip_address(value)
    except ValueError:
        if not DNS_SUBDOMAIN.fullmatch(value):
            raise ValueError(
                "is neither an IP address nor a DNS name; give a bare address or name such as 10.0.0.10 or "
                "api.fra1.example.net (no https://, no :port)"
            ) from None
    return value


_QUARANTINE_REASON = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._:,/#()+-]{0,119}")
"""A quarantine reason: one line of at most 120 printable ASCII characters, no quotes, no shell metacharacters."""


class Quarantine(SpecModel):
    """Why a host is out of service while it stays in the config (a GPU fault, a failed burn-in): its node's
    maintenance steps cordon and drain it (its GPU VMs stopped and started again on other hosts) and keep it cordoned,
    its Node carries the taint ``gpucell.io/quarantine=<reason as a label value>:NoSchedule`` (kept by every run
    through the node's NodePatch until the field is removed, when it goes back into service), and admission and the
    capacity view count it out (docs/operations.md, "Quarantine a host")."""

    reason: str
    """Why, one line (``GPU 3 Xid 79``, ``burn-in failed``): letters, digits, spaces and ``._:,/#()+-``, at most 120
    characters, starting with a letter or digit. Required."""

    @field_validator("reason")
    @classmethod
    def _one_safe_line(cls, value: str) -> str:
        if _QUARANTINE_REASON.fullmatch(value) is None:
            raise ValueError(
                "is not a quarantine reason; give one line of at most 120 characters: "
                "letters, digits, spaces and ._:,/#()+-, starting with a letter or digit"
            )
        return value

    @property
    def taint_value(self) -> str:
        """The reason as a label value (``core/v1`` Taint ``value``): lower case, runs of other characters as ``-``,
        at most 63 characters."""
        return re.sub(r"[^a-z0-9._]+", "-", self.reason.lower()).strip("-._")[:63].rstrip("-._") or "quarantined"


class Host(SpecModel):
    """One machine of a node pool."""

    name: str
    """Kubernetes node name, unique in the region: on a gpucell cell a DNS-1123 label (``node-name`` in the k3s
    config); in the :class:`~gpucell.admission.tenants.ClusterFacts` of a cluster gpucell did not build, its Node's name
    as the API shows it (a DNS-1123 subdomain such as ``ip-10-0-1-5.ec2.internal``)."""
    address: Ipv4Address
    """IPv4 address on the node network, used for SSH and as the node IP; unique in the region and the stack."""
    removal_policy: HostRemovalPolicy | None = None
    """What removing the host from the config may do: ``protect`` (refused), ``retain`` (gpucell forgets the node,
    k3s keeps running), ``delete`` (drained, its Node deleted, k3s uninstalled; a server leaves etcd first) or
    ``forget`` (the machine is gone: nothing runs on it over SSH; its Node, and a server's etcd member, are deleted
    from a healthy server; :class:`gpucell.spec.lifecycle.HostRemovalPolicy`).
    Defaults to the region's ``removalPolicy`` for servers, and for agents too with the ``local-path`` backend
    (their disks hold volumes); agents of a Longhorn region default to ``delete``."""
    quarantine: Quarantine | None = None
    """Takes the host out of service without removing it: ``{reason: "GPU 3 Xid 79"}`` cordons and drains it, taints
    its Node ``gpucell.io/quarantine=<reason>:NoSchedule`` and counts it out of the region's capacity, until the
    field is removed (:class:`Quarantine`). Defaults to in service."""

    @field_validator("name")
    @classmethod
    def _node_name(cls, value: str) -> str:
        return check_node_name(value)

    @field_validator("address")
    @classmethod
    def _unicast(cls, value: IPv4Address) -> IPv4Address:
        problem = unicast_problem(value)
        if problem is not None:
            raise ValueError(f"{problem}; a node needs a unicast host address")
        return value


class Ssh(SpecModel):
    """How Pulumi reaches nodes over SSH (``pulumi-command`` remote connection)."""

    user: str = "root"
    """Login user; needs root or password-less sudo. Defaults to ``root``."""
    port: StrictInt = Field(default=22, ge=1, le=65535)
    """TCP port. Defaults to 22."""
    private_key_config_key: str = "sshPrivateKey"
    """Name of the *secret* stack config key holding the PEM/OpenSSH private key. Defaults to ``sshPrivateKey``."""
    join_concurrency: StrictInt = Field(default=5, ge=1, le=50)
    """New agents joining at the same time (count), across pools: at most this many first-join steps at once on
    the control server, each a short SSH session, so at most twice this many sessions (a ``-prepare`` and a
    ``-settle`` window) besides the pools' ``rollout.maxUnavailable``. Defaults to 5: 10 sessions, within OpenSSH's
    default ``MaxStartups 10:30:100`` (sshd drops new unauthenticated connections at random from the 10th on).
    Each node's install runs on its own host, all at once. Changing it only reorders a later run's first joins
    (docs/decisions/0023-parallel-first-joins.md)."""

    @field_validator("user")
    @classmethod
    def _login(cls, value: str) -> str:
        return check_login_name(value)

    @field_validator("private_key_config_key")
    @classmethod
    def _key(cls, value: str) -> str:
        return check_config_key(value)


class SshOverride(SpecModel):
    """A pool's departures from the region's ``ssh`` settings; the private key is always the region's."""

    user: str | None = None
    """Login user for this pool's hosts. Defaults to the region's ``ssh.user``."""
    port: StrictInt | None = Field(default=None, ge=1, le=65535)
    """TCP port for this pool's hosts. Defaults to the region's ``ssh.port``."""

    @field_validator("user")
    @classmethod
    def _login(cls, value: str | None) -> str | None:
        return None if value is None else check_login_name(value)

    def over(self, base: Ssh) -> Ssh:
        """``base`` with this override's fields applied."""
        return base.model_copy(update={k: v for k, v in (("user", self.user), ("port", self.port)) if v is not None})


_INTERFACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,14}")
"""A Linux interface name: at most 15 characters (``IFNAMSIZ`` 16 with the NUL), no ``/``, space or ``:``."""


class ApiVipMode(StrEnum):
    """How kube-vip announces the API VIP (kube-vip ``vip_arp`` / ``bgp_enable``)."""

    ARP = "arp"
    """Gratuitous ARP from the leader on the node network (kube-vip ``vip_arp: "true"``)."""
    BGP = "bgp"
    """A /32 route from every server to the given peers (kube-vip ``bgp_enable: "true"``)."""


class BgpPeer(SpecModel):
    """A BGP router the servers advertise the API VIP to (an entry of kube-vip's ``bgp_peers``)."""

    address: Ipv4Address
    """The router's IPv4 address: a unicast host address (not loopback, link-local, multicast, broadcast,
    reserved or unspecified), and not the VIP itself."""
    asn: StrictInt = Field(ge=1, le=4294967295)
    """The router's AS number."""

    @field_validator("address")
    @classmethod
    def _router(cls, value: IPv4Address) -> IPv4Address:
        return check_peer_address(value)


class ApiVipBgp(SpecModel):
    """kube-vip's BGP settings for the API VIP."""

    asn: StrictInt = Field(ge=1, le=4294967295)
    """The servers' AS number (kube-vip ``bgp_as``)."""
    peers: list[BgpPeer] = Field(min_length=1)
    """Routers to advertise the VIP to (kube-vip ``bgp_peers``, ``<address>:<asn>::false`` each)."""


class ApiVip(SpecModel):
    """The API VIP served by the cell itself: kube-vip v1.x as a static pod on every server
    (docs/decisions/0020-traffic-in.md). The VIP is ``network.apiEndpoint``, which must then be an IPv4 address."""

    provider: str = "kube-vip"
    """What serves the VIP; only ``kube-vip`` (https://kube-vip.io/docs/installation/static/)."""
    mode: ApiVipMode
    """``arp`` (the VIP in ``nodeCidr``, announced by the leader) or ``bgp`` (advertised to ``bgp.peers``)."""
    interface: str
    """The servers' network interface the VIP is added to (kube-vip ``vip_interface``), e.g. ``eth0``; with ``bgp``
    also where the router id comes from (``bgp_routerinterface``)."""
    bgp: ApiVipBgp | None = None
    """Required with ``mode: bgp``, refused with ``arp``."""

    @field_validator("provider")
    @classmethod
    def _provider(cls, value: str) -> str:
        if value != "kube-vip":
            raise ValueError("is not a supported VIP provider; use kube-vip")
        return value

    @field_validator("interface")
    @classmethod
    def _interface(cls, value: str) -> str:
        if not _INTERFACE.fullmatch(value):
            raise ValueError(
                "is not a network interface name (letters, digits, '_', '.', '-'; "
                "at most 15 characters), e.g. eth0 or bond0.100"
            )
        return value

    @model_validator(mode="after")
    def _bgp(self) -> ApiVip:
        if self.mode is ApiVipMode.BGP and self.bgp is None:
            raise SpecError(("bgp",), "is required with mode bgp: the servers' asn and the peers")
        if self.mode is ApiVipMode.ARP and self.bgp is not None:
            raise SpecError(("bgp",), "is set but mode is arp; remove it or use mode: bgp")
        return self


class Network(SpecModel):
    """The cell's address plan. Pod and service CIDRs must overlap neither each other nor the node network, and no
    network may overlap loopback, link-local, multicast or the other special ranges (RFC 6890)."""

    node_cidr: Ipv4Cidr
    """The network the hosts' addresses are in, e.g. ``10.20.0.0/24``."""
    pod_cidr: Ipv4Cidr = IPv4Network("10.42.0.0/16")
    """Pod network handed to Cilium's cluster-pool IPAM and k3s ``cluster-cidr``. Defaults to ``10.42.0.0/16``."""
    pod_cidr_mask_size: StrictInt = Field(default=24, ge=16, le=28)
    """Prefix length of each node's pod range carved from ``podCidr``. Defaults to 24 (254 pods per node)."""
    service_cidr: Ipv4Cidr = IPv4Network("10.43.0.0/16")
    """ClusterIP range (k3s ``service-cidr``). Defaults to ``10.43.0.0/16``."""
    cluster_dns: Ipv4Address = IPv4Address("10.43.0.10")
    """CoreDNS service IP (k3s ``cluster-dns``); inside ``serviceCidr``. Defaults to ``10.43.0.10``."""
    api_endpoint: str | None = None
    """Address or DNS name clients and agents use for the API server (a VIP or load balancer for HA servers).
    Required with more than one server; defaults to the single server's address otherwise. An address must be
    a unicast host address outside the pod and service CIDRs, and not an agent's own address."""
    api_port: StrictInt = Field(default=6443, ge=1, le=65535)
    """API server port behind ``apiEndpoint``. Defaults to 6443."""
    api_vip: ApiVip | None = None
    """The API VIP served by the servers themselves (kube-vip static pods): ``apiEndpoint`` is then the VIP.
    Absent (the default): an external load balancer or DNS name serves ``apiEndpoint``."""
    tls_sans: list[str] = []
    """Extra names and addresses in the API server certificate (k3s ``tls-san``); ``apiEndpoint`` is always added."""

    _routable = field_validator("node_cidr", "pod_cidr", "service_cidr")(check_routable_cidr)

    @field_validator("api_endpoint")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is None:
            return None
        check_host_name(value)
        address = as_address(value)
        problem = None if address is None else unicast_problem(address)
        if problem is not None:
            raise ValueError(f"{problem}; the API endpoint must be a unicast address (a VIP or load balancer)")
        return value

    @field_validator("tls_sans")
    @classmethod
    def _sans(cls, values: list[str]) -> list[str]:
        return check_each(values, check_host_name)

    @property
    def api_address(self) -> IPv4Address | None:
        """``apiEndpoint`` as an address, or ``None`` when it is a DNS name or not set."""
        return None if self.api_endpoint is None else as_address(self.api_endpoint)

    @model_validator(mode="after")
    def _address_plan(self) -> Network:
        ranges: list[tuple[str, IPv4Network]] = [
            ("nodeCidr", self.node_cidr),
            ("podCidr", self.pod_cidr),
            ("serviceCidr", self.service_cidr),
        ]
        for (key_a, a), (key_b, b) in itertools.combinations(ranges, 2):
            if a.overlaps(b):
                raise SpecError((key_b,), f"{shown(str(b))} overlaps network.{key_a} {a}")
        if self.cluster_dns not in self.service_cidr:
            raise SpecError(
                ("clusterDns",), f"{shown(str(self.cluster_dns))} is outside network.serviceCidr {self.service_cidr}"
            )
        if self.cluster_dns in (self.service_cidr.network_address, self.service_cidr.broadcast_address):
            raise SpecError(
                ("clusterDns",),
                f"{shown(str(self.cluster_dns))} is the network or broadcast address of {self.service_cidr}; "
                "use a host address such as the .10",
            )
        if self.pod_cidr_mask_size <= self.pod_cidr.prefixlen:
            raise SpecError(
                ("podCidrMaskSize",),
                f"{self.pod_cidr_mask_size} must be longer than network.podCidr's /{self.pod_cidr.prefixlen}",
            )
        address = self.api_address
        if address is not None:
            for key, net in (("podCidr", self.pod_cidr), ("serviceCidr", self.service_cidr)):
                if address in net:
                    raise SpecError(
                        ("apiEndpoint",),
                        f"{shown(str(address))} is inside network.{key} {net}; "
                        "the API endpoint must be reachable from the nodes before any pod runs",
                    )
            if (
                address in self.node_cidr
                and self.node_cidr.prefixlen < 31
                and address in (self.node_cidr.network_address, self.node_cidr.broadcast_address)
            ):
                raise SpecError(
                    ("apiEndpoint",),
                    f"{shown(str(address))} is the network or broadcast address of network.nodeCidr {self.node_cidr}",
                )
        self._check_vip()
        return self

    def _check_vip(self) -> None:
        vip = self.api_vip
        if vip is None:
            return
        address = self.api_address
        if address is None:
            raise SpecError(
                ("apiVip",),
                f"needs network.apiEndpoint to be the VIP's IPv4 address, not "
                f"{shown(self.api_endpoint)}; set apiEndpoint to an unused address of network.nodeCidr",
            )
        if vip.mode is ApiVipMode.ARP and address not in self.node_cidr:
            raise SpecError(
                ("apiEndpoint",),
                f"{shown(str(address))} is outside network.nodeCidr {self.node_cidr}; "
                "an ARP VIP must be on the servers' own segment (or use apiVip.mode: bgp)",
            )
        for index, peer in enumerate(vip.bgp.peers if vip.bgp is not None else []):
            if peer.address == address:
                raise SpecError(
                    ("apiVip", "bgp", "peers", index, "address"),
                    f"{shown(str(peer.address))} is the VIP itself (network.apiEndpoint); give the router's address",
                )
        if self.api_port != K3S_API_PORT:
            raise SpecError(
                ("apiPort",),
                f"{self.api_port} with apiVip: the VIP reaches the API servers on "
                f"their own port; use {K3S_API_PORT} or an external load balancer",
            )


K3S_API_PORT = 6443
"""k3s's default ``https-listen-port``, the port behind a kube-vip VIP (control plane mode forwards nothing)."""


def check_peer_address(value: IPv4Address) -> IPv4Address:
    """``value`` when it can be a BGP router's address (:func:`~gpucell.spec._values.unicast_problem` finds nothing);
    raises ``ValueError`` naming the problem otherwise."""
    problem = unicast_problem(value)
    if problem is not None:
        raise ValueError(f"{problem}; a BGP peer is a router's unicast address (e.g. 10.110.0.1)")
    return value


def as_address(value: str) -> IPv4Address | None:
    """``value`` as an IPv4 address, or ``None`` when it is a DNS name."""
    try:
        return IPv4Address(value)
    except ValueError:
        return None
