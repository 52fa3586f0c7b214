"""LoadBalancerAddresses: the cell's own LoadBalancer addresses (Cilium LB IPAM pools) and how they are announced.

What is rendered (cluster-scoped, checked against the Cilium CRDs in ``shared/upstream/cilium/``):

- one ``cilium.io/v2`` ``CiliumLoadBalancerIPPool`` ``gpucell-<pool>`` per ``loadBalancer.pools`` entry
  (:func:`pool_manifest`). Its ``serviceSelector`` admits a Service only when it lives in a namespace of a tenant the
  pool lists (``io.kubernetes.service.namespace``, a key Cilium sets from the Service's real namespace, which a
  tenant cannot forge) *and* carries :data:`POOL_LABEL` naming the pool. So one tenant never draws from another
  tenant's pool, and a Service chooses among its tenant's pools by that label. Cilium hands each Service an address
  of its own unless two Services both ask to share one (``lbipam.cilium.io/sharing-key``, and across namespaces
  ``lbipam.cilium.io/sharing-cross-namespace`` on both sides): two tenants never share an address unless both opt in.
- ``announce: l2``: a ``cilium.io/v2alpha1`` ``CiliumL2AnnouncementPolicy`` ``gpucell`` (:func:`l2_policy_manifest`):
  LoadBalancer addresses (not external IPs) answered by ARP on the configured interfaces of the selected nodes.
- ``announce: bgp``: a ``CiliumBGPClusterConfig`` ``gpucell`` (one BGP instance with the nodes' ASN and every peer),
  a ``CiliumBGPPeerConfig`` ``gpucell`` (IPv4 unicast, advertising what carries :data:`ADVERTISE_LABEL`) and a
  ``CiliumBGPAdvertisement`` ``gpucell-lb`` advertising every Service's LoadBalancer address
  (:func:`bgp_manifests`; "BGP Control Plane Resources", Cilium 1.20: a ``NotIn`` selector on a key no Service has
  selects all Services).

Sources: Cilium 1.20 docs "LoadBalancer IP Address Management (LB IPAM)" (``serviceSelector``, the
``io.kubernetes.service.namespace``/``name`` keys, ``lbipam.cilium.io/ips``, sharing keys), "L2 Announcements / L2
Aware LB", "BGP Control Plane Resources".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi_kubernetes.apiextensions import CustomResource

from gpucell._component import MANAGED_BY, CellComponent, custom_resource
from gpucell.spec.pools import POOL_LABEL as NODE_POOL_LABEL
from gpucell.spec.tenancy import namespace_of
from gpucell.spec.traffic import (
    ADDRESS_ANNOTATION,
    GATEWAY_NAMESPACE,
    POOL_LABEL,
    SERVICE_NAMESPACE_KEY,
    AnnounceMode,
    BgpSpec,
    L2Spec,
    LbPoolSpec,
    LoadBalancerSpec,
)

if TYPE_CHECKING:
    from gpucell.cluster import Cluster

__all__ = [
    "ADDRESS_ANNOTATION",
    "ADVERTISE_LABEL",
    "GATEWAY_NAMESPACE",
    "POOL_LABEL",
    "SERVICE_NAMESPACE_KEY",
    "LoadBalancerAddresses",
    "LoadBalancerAddressesArgs",
    "bgp_manifests",
    "l2_policy_manifest",
    "pool_manifest",
    "pool_resource_name",
]

ADVERTISE_LABEL = {"gpucell.io/advertise": "load-balancer"}
"""Label of the ``CiliumBGPAdvertisement`` the peer config selects."""
_NO_SUCH_KEY = "gpucell.io/never-set"


@dataclass(frozen=True)
class LoadBalancerAddressesArgs:
    """Inputs of :class:`LoadBalancerAddresses`."""

    cluster: Cluster
    """The cluster to install into (its provider and readiness)."""
    load_balancer: LoadBalancerSpec
    """The region's ``loadBalancer``: its pools and their announcement."""
    gateway_pool: str | None = None
    """The pool the cell's Gateway draws from (``gateway.pool``): its selector also admits the Gateway namespace."""


def pool_resource_name(pool: str) -> str:
    """``metadata.name`` of a pool's ``CiliumLoadBalancerIPPool``: ``gpucell-<pool>``."""
    return f"gpucell-{pool}"


def pool_manifest(name: str, pool: LbPoolSpec, *, serves_gateway: bool = False) -> dict[str, Any]:
    """The ``CiliumLoadBalancerIPPool`` of pool ``name``: ``blocks`` (``cidr``, or ``start``/``stop`` for a range),
    ``allowFirstLastIPs: "Yes"`` (every address of a routed block is usable) and a ``serviceSelector`` requiring
    :data:`POOL_LABEL` ``= name`` and a namespace of the listed tenants (plus :data:`GATEWAY_NAMESPACE` when the pool
    serves the Gateway)."""
    namespaces = [namespace_of(tenant) for tenant in pool.tenants]
    if serves_gateway:
        namespaces.append(GATEWAY_NAMESPACE)
    return {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumLoadBalancerIPPool",
        "metadata": {"name": pool_resource_name(name), "labels": dict(MANAGED_BY)},
        "spec": {
            "blocks": [block.manifest() for block in pool.parsed],
            "allowFirstLastIPs": "Yes",
            "serviceSelector": {
                "matchLabels": {POOL_LABEL: name},
                "matchExpressions": [{"key": SERVICE_NAMESPACE_KEY, "operator": "In", "values": namespaces}],
            },
        },
    }


def _node_selector(node_pools: list[str]) -> dict[str, Any] | None:
    if not node_pools:
        return None
    return {"matchExpressions": [{"key": NODE_POOL_LABEL, "operator": "In", "values": list(node_pools)}]}


def l2_policy_manifest(l2: L2Spec) -> dict[str, Any]:
    """The ``CiliumL2AnnouncementPolicy`` ``gpucell``: ``loadBalancerIPs: true``, ``externalIPs: false``, the
    ``interfaces`` as given and, with ``nodePools``, a ``nodeSelector`` on the nodes' ``gpucell.io/pool`` label."""
    spec: dict[str, Any] = {"loadBalancerIPs": True, "externalIPs": False, "interfaces": list(l2.interfaces)}
    selector = _node_selector(l2.node_pools)
    if selector is not None:
        spec["nodeSelector"] = selector
    return {
        "apiVersion": "cilium.io/v2alpha1",
        "kind": "CiliumL2AnnouncementPolicy",
        "metadata": {"name": "gpucell", "labels": dict(MANAGED_BY)},
        "spec": spec,
    }


def bgp_manifests(bgp: BgpSpec) -> list[dict[str, Any]]:
    """``CiliumBGPClusterConfig`` ``gpucell``, ``CiliumBGPPeerConfig`` ``gpucell`` and ``CiliumBGPAdvertisement``
    ``gpucell-lb``, in that order (see the module doc)."""
    cluster: dict[str, Any] = {
        "bgpInstances": [
            {
                "name": "gpucell",
                "localASN": bgp.local_asn,
                "peers": [
                    {
                        "name": name,
                        "peerAddress": str(peer.address),
                        "peerASN": peer.asn,
                        "peerConfigRef": {"name": "gpucell"},
                    }
                    for name, peer in bgp.peers.items()
                ],
            }
        ],
    }
    selector = _node_selector(bgp.node_pools)
    if selector is not None:
        cluster["nodeSelector"] = selector
    meta = {"labels": dict(MANAGED_BY)}
    return [
        {
            "apiVersion": "cilium.io/v2",
            "kind": "CiliumBGPClusterConfig",
            "metadata": {"name": "gpucell", **meta},
            "spec": cluster,
        },
        {
            "apiVersion": "cilium.io/v2",
            "kind": "CiliumBGPPeerConfig",
            "metadata": {"name": "gpucell", **meta},
            "spec": {
                "families": [
                    {"afi": "ipv4", "safi": "unicast", "advertisements": {"matchLabels": dict(ADVERTISE_LABEL)}}
                ]
            },
        },
        {
            "apiVersion": "cilium.io/v2",
            "kind": "CiliumBGPAdvertisement",
            "metadata": {"name": "gpucell-lb", "labels": {**MANAGED_BY, **ADVERTISE_LABEL}},
            "spec": {
                "advertisements": [
                    {
                        "advertisementType": "Service",
                        "service": {"addresses": ["LoadBalancerIP"]},
                        "selector": {
                            "matchExpressions": [{"key": _NO_SUCH_KEY, "operator": "NotIn", "values": ["never"]}]
                        },
                    }
                ]
            },
        },
    ]


class LoadBalancerAddresses(CellComponent):
    """The cell's LB IPAM pools and their announcement (``gpucell:index:LoadBalancerAddresses``).

    Children: ``f"{name}-pool-<pool>"`` per pool, then ``f"{name}-l2"`` or ``f"{name}-bgp-cluster"``,
    ``f"{name}-bgp-peer"``, ``f"{name}-bgp-advertisement"``. Give it the cell's Kubernetes provider and make it depend
    on Cilium (whose operator installs these CRDs). A changed pool is updated in place; Services keep their address
    while it stays in a pool that selects them (Cilium re-allocates those that no longer fit).
    """

    pool_names: pulumi.Output[list[str]]
    """``metadata.name`` of every pool (``gpucell-<pool>``)."""

    def __init__(self, name: str, args: LoadBalancerAddressesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("LoadBalancerAddresses", name, opts, args.cluster)
        lb = args.load_balancer
        self.pools: list[CustomResource] = [
            custom_resource(
                f"{name}-pool-{pool}", pool_manifest(pool, spec, serves_gateway=pool == args.gateway_pool), self.child()
            )
            for pool, spec in lb.pools.items()
        ]
        self.announcements: list[CustomResource] = []
        """The L2 policy, or the BGP cluster config, peer config and advertisement."""
        if lb.announce is AnnounceMode.L2:
            assert lb.l2 is not None  # LoadBalancerSpec requires it
            self.announcements.append(custom_resource(f"{name}-l2", l2_policy_manifest(lb.l2), self.child()))
        else:
            assert lb.bgp is not None
            for suffix, manifest in zip(
                ("bgp-cluster", "bgp-peer", "bgp-advertisement"), bgp_manifests(lb.bgp), strict=True
            ):
                self.announcements.append(custom_resource(f"{name}-{suffix}", manifest, self.child()))
        names = [pool_resource_name(pool) for pool in lb.pools]
        self.pool_names = pulumi.Output.all(*[p.urn for p in self.pools]).apply(lambda _: names)
        self.register_outputs({"poolNames": self.pool_names})
