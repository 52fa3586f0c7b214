"""Cilium: the cell's CNI, kube-proxy replacement and network policy engine, with Hubble for flow visibility.

One Helm release (``cilium`` from https://helm.cilium.io) in ``kube-system``. k3s runs with ``flannel-backend:
none``, ``disable-network-policy`` and ``disable-kube-proxy`` (see :mod:`gpucell.k3s._scripts`), so until
this release is ready no node is Ready and no Service ClusterIP is routed. Key paths and types are checked
against the chart's ``values.yaml`` and ``values.schema.json`` at the pinned version (cilium/charts
``cilium-1.20.0.tgz``).

Sources: Cilium "Installation Using K3s" (pod CIDR handed to cluster-pool IPAM) and "Kubernetes Without
kube-proxy" (``k8sServiceHost``/``k8sServicePort``; socket-LB must skip pod namespaces for KubeVirt,
cilium/cilium PR #17847, fixing #14563).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi_kubernetes.helm.v3 import Release

from gpucell._component import CellComponent
from gpucell.components._chart import ChartSource, helm_release
from gpucell.spec.network import Network
from gpucell.spec.platform import CiliumSpec
from gpucell.spec.tenancy import TenantSpec
from gpucell.spec.traffic import AnnounceMode, GatewaySpec, LoadBalancerSpec
from gpucell.spec.versions import Versions

if TYPE_CHECKING:
    from gpucell.cluster import Cluster
    from gpucell.spec.cell import CellSpec

__all__ = [
    "CHART",
    "NAMESPACE",
    "RELEASE_NAME",
    "Cilium",
    "CiliumArgs",
    "announcement_values",
    "cilium_values",
    "max_load_balancers",
]

CHART = ChartSource("cilium", "https://helm.cilium.io/")
"""Cilium's Helm repository and chart name."""
NAMESPACE = "kube-system"
"""Namespace of the release (Cilium's documented install namespace)."""
RELEASE_NAME = "cilium"
"""Helm release name in the cell's cluster (fixed: each cell is its own cluster)."""


@dataclass(frozen=True)
class CiliumArgs:
    """Inputs of :class:`Cilium`: only what it uses."""

    cluster: Cluster
    """The cluster to install into (its provider; ``ready``: the API server answering, no CNI yet)."""
    network: Network
    """The address plan: ``podCidr`` and ``podCidrMaskSize`` (cluster-pool IPAM), ``apiPort``."""
    api_host: str
    """Where the agents reach the API server without a ``kubernetes`` Service (``k8sServiceHost``): a cell's
    ``network.apiEndpoint``, or its single server's address."""
    operator_replicas: int = 2
    """Cilium operator replicas: 2, or 1 with a single server (the chart's anti-affinity would leave one Pending)."""
    spec: CiliumSpec = field(default_factory=CiliumSpec)
    """The ``cilium`` section (chart ``values``). Defaults to none."""
    version: str = Versions().cilium
    """Chart version (``versions.cilium``); defaults to gpucell's pin."""
    load_balancer: LoadBalancerSpec | None = None
    """The LoadBalancer addresses' announcement (L2 or BGP), when the cluster hands out addresses itself."""
    load_balancers: int = 0
    """LoadBalancer Services the cluster can hold (:func:`max_load_balancers`): the L2 client rate limit follows."""
    gateway_api: bool = False
    """Cilium serves the Gateway API (``gatewayAPI.enabled``; its CRDs are installed first). Defaults to false."""
    hubble_metrics: bool = False
    """Hubble's flow metrics for the metrics stack. Defaults to false."""
    multus: bool = False
    """Multus chains secondary networks behind Cilium (a ``fabric`` pool's Network Operator): ``cni.exclusive:
    false``, or Cilium would rename Multus' CNI configuration away. Defaults to false."""

    @classmethod
    def from_cell(cls, cell: CellSpec, cluster: Cluster) -> CiliumArgs:
        """Cilium of ``cell`` on ``cluster``: ``network``, the API endpoint, the server count, ``cilium``,
        ``versions.cilium``, ``loadBalancer``, ``gateway`` and ``metrics.enabled``."""
        return cls(
            cluster,
            cell.network,
            cell.api_endpoint,
            1 if len(cell.servers) == 1 else 2,
            cell.cilium,
            cell.versions.cilium,
            cell.load_balancer,
            max_load_balancers(cell.tenants, cell.gateway),
            gateway_api=cell.gateway is not None,
            hubble_metrics=cell.metrics.enabled,
            multus=any(pool.fabric is not None for pool in cell.node_pools.values()),
        )

    def values(self) -> dict[str, Any]:
        """:func:`cilium_values` of these inputs."""
        return cilium_values(
            self.network,
            self.api_host,
            operator_replicas=self.operator_replicas,
            load_balancer=self.load_balancer,
            load_balancers=self.load_balancers,
            gateway_api=self.gateway_api,
            hubble_metrics=self.hubble_metrics,
            multus=self.multus,
        )


HUBBLE_METRICS = ("dns", "drop", "tcp", "flow", "port-distribution", "icmp", "httpV2")
"""Hubble metrics enabled with the metrics stack (Cilium's "Hubble Exported Metrics" list)."""


def cilium_values(
    network: Network,
    api_host: str,
    *,
    operator_replicas: int = 2,
    load_balancer: LoadBalancerSpec | None = None,
    load_balancers: int = 0,
    gateway_api: bool = False,
    hubble_metrics: bool = False,
    multus: bool = False,
) -> dict[str, Any]:
    """The chart values gpucell owns (``cilium.values`` is merged over them later); the keyword arguments are
    :class:`CiliumArgs`' fields.

    - ``kubeProxyReplacement: true`` with ``k8sServiceHost``/``k8sServicePort`` = ``api_host`` and
      ``network.apiPort``: k3s runs without kube-proxy, so the agent must reach the API server directly rather
      than through the ``kubernetes`` Service it is about to implement.
    - ``ipam.mode: cluster-pool`` carving ``network.podCidrMaskSize`` ranges out of ``network.podCidr`` (the
      same CIDR as k3s ``cluster-cidr``); the chart's default pool ``10.0.0.0/8`` would overlap most node
      networks.
    - ``hubble.enabled`` and ``hubble.relay.enabled``: cluster-wide flow visibility (``hubble observe``).
    - ``operator.replicas``: ``operator_replicas`` (1 on a single-server cell, else 2). The chart's default of 2
      carries a required anti-affinity per node, which leaves one replica Pending (and Helm waiting) on a one-node
      lab.
    - ``socketLB.hostNamespaceOnly: true``: with kube-proxy replacement, socket-LB translates Service
      addresses at ``connect()`` inside pod namespaces; a KubeVirt guest's packets never pass a socket in the
      virt-launcher pod, so Services would be unreachable from VMs unless socket-LB is limited to the host
      namespace and pod traffic is translated at the pod's interface instead (Cilium kube-proxy-free guide,
      cilium/cilium PR #17847). ``values.yaml`` documents this key commented out (its default is false).
    - with ``hubble_metrics`` (the metrics stack): ``hubble.metrics.enabled`` :data:`HUBBLE_METRICS` (the
      ``hubble-metrics`` Service, port 9965, that :func:`gpucell.components.metrics.hubble_service_monitor` scrapes).
    - ``rollOutCiliumPods`` and ``operator.rollOutPods``: the agents and operator read ``cilium-config`` only
      at start, so without a rollout a ``pulumi up`` that changes a value would leave them on the old one.
    - With ``load_balancer``: :func:`announcement_values` (L2 announcements or the BGP control plane, and the client
      rate limit L2 leases need for ``load_balancers`` Services). With ``gateway_api``: ``gatewayAPI.enabled`` (the
      Gateway API CRDs are installed before this release, :mod:`gpucell.components.gateway_api`, because the operator
      only watches kinds that exist when it starts).
    - With ``multus``: ``cni.exclusive: false``. By default Cilium takes ``/etc/cni/net.d`` over and renames every
      other CNI configuration (``values.yaml`` 1.20.0 ``cni.exclusive``), Multus' among them, which would leave a
      fabric pool's VMs without their SR-IOV networks (docs/decisions/0039).
    """
    values = _base_values(network, api_host, operator_replicas, hubble_metrics=hubble_metrics)
    if multus:
        values["cni"] = {"exclusive": False}
    if load_balancer is not None:
        values.update(announcement_values(load_balancer, load_balancers))
    if gateway_api:
        values["gatewayAPI"] = {"enabled": True}
    return values


L2_RENEW_SECONDS = 5
"""``l2announcements.leaseRenewDeadline`` left at the chart's default, 5 s: how often each L2 lease is renewed."""
AGENT_BASE_QPS = 10
"""The agent's default client rate limit, requests per second (cilium ``values.yaml`` 1.20.0 ``k8sClientRateLimit.qps``
``@default -- 10``)."""


def max_load_balancers(tenants: Mapping[str, TenantSpec], gateway: GatewaySpec | None) -> int:
    """LoadBalancer Services a cell can hold: every tenant's ``quota.loadBalancers`` plus the ``gateway``'s
    Gateways (one, or one per tenant that exposes an endpoint with ``perTenant``)."""
    gateways = 0
    if gateway is not None:
        exposed = [t for t, spec in tenants.items() if any(e.expose for e in spec.model_endpoints.values())]
        gateways = len(exposed) if gateway.per_tenant else 1
    return sum(t.quota.load_balancers for t in tenants.values()) + gateways


def announcement_values(lb: LoadBalancerSpec, services: int) -> dict[str, Any]:
    """Chart values for announcing LB IPAM addresses (LB IPAM itself is always on, dormant until a pool exists).

    - ``announce: l2``: ``l2announcements.enabled`` and, because every announced Service holds a Lease the agent
      renews every :data:`L2_RENEW_SECONDS`, ``k8sClientRateLimit.qps`` = the default 10 plus ``services / 5``
      (rounded up) and ``burst`` twice that: Cilium's L2 announcements guide warns that leases throttled by the
      client rate limit are lost and the addresses fail over (cilium/cilium#26711 added these values for it).
    - ``announce: bgp``: ``bgpControlPlane.enabled``.

    ``services`` is :func:`max_load_balancers`.
    """
    if lb.announce is AnnounceMode.BGP:
        return {"bgpControlPlane": {"enabled": True}}
    qps = AGENT_BASE_QPS + math.ceil(services / L2_RENEW_SECONDS)
    return {"l2announcements": {"enabled": True}, "k8sClientRateLimit": {"qps": qps, "burst": 2 * qps}}


def _base_values(net: Network, api_host: str, operator_replicas: int, *, hubble_metrics: bool) -> dict[str, Any]:
    values: dict[str, Any] = {
        "kubeProxyReplacement": True,
        "k8sServiceHost": api_host,
        "k8sServicePort": net.api_port,
        "ipam": {
            "mode": "cluster-pool",
            "operator": {
                "clusterPoolIPv4PodCIDRList": [str(net.pod_cidr)],
                "clusterPoolIPv4MaskSize": net.pod_cidr_mask_size,
            },
        },
        "hubble": {"enabled": True, "relay": {"enabled": True}},
        "operator": {"replicas": operator_replicas, "rollOutPods": True},
        "rollOutCiliumPods": True,
        "socketLB": {"hostNamespaceOnly": True},
    }
    if hubble_metrics:  # Hubble's flow metrics, scraped by the metrics stack's ServiceMonitor
        values["hubble"]["metrics"] = {"enabled": list(HUBBLE_METRICS)}
    return values


class Cilium(CellComponent):
    """Cilium for one cluster. Depend on this component to run after pod networking and Services work.

    Children: one ``kubernetes:helm.sh/v3:Release`` named ``f"{name}-cilium"`` (Helm release ``cilium`` in
    ``kube-system``, chart version ``args.version``), on the provider of ``args.cluster`` and after its ``ready``.
    Helm waits for the agent DaemonSet, the operator and Hubble Relay to be ready, which needs every node's CNI to
    be up.
    """

    release_name: pulumi.Output[str]
    """Helm release name of Cilium in the cell's cluster (``cilium``)."""

    def __init__(self, name: str, args: CiliumArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("Cilium", name, opts, args.cluster)
        self.release: Release = helm_release(
            f"{name}-cilium",
            source=CHART,
            version=args.version,
            namespace=NAMESPACE,
            values=args.values(),
            overrides=args.spec.values,
            opts=self.child(),
            release_name=RELEASE_NAME,
        )
        self.release_name = self.release.name.apply(lambda n: n or RELEASE_NAME)
        self.register_outputs({"releaseName": self.release_name})
