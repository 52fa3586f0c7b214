"""The NVIDIA Network Operator on a cell's fabric pools: the NICs' driver, Multus, SR-IOV VFs per rail, and one
isolated secondary network per tenant and rail (docs/decisions/0039-gpu-fabric-rdma-nics.md).

One Helm release of chart ``network-operator`` (``https://helm.ngc.nvidia.com/nvidia``) at
``versions.networkOperator`` in namespace ``nvidia-network-operator``, with its SR-IOV Network Operator subchart on and
its NFD subchart off (the GPU Operator's NFD labels the nodes; the chart's README says to turn one of the two off).
Then, after the release (whose CRDs they need), in the release's namespace:

- the ``NicClusterPolicy`` ``nic-cluster-policy`` (mellanox.com/v1alpha1, the one name the operator reconciles): the
  DOCA driver, Multus and the CNI plugins, on the fabric pools' nodes only;
- per fabric pool and rail (:class:`gpucell.spec.fabric.Rail`), a ``SriovNetworkNodePolicy`` creating the NIC's VFs
  bound to ``vfio-pci`` and advertising them as ``nvidia.com/<pool>_rail<i>``;
- per tenant with a ``fabricVlan`` and fabric pool rail, a ``SriovNetwork`` the operator renders as a
  NetworkAttachmentDefinition in the tenant's namespace (:func:`gpucell.admission.fabric.tenant_network_name`), with
  the tenant's VLAN set on the VF by the host, ``trust: off`` and ``spoofChk: on`` so that the guest cannot leave it.

Every object validates against the CRDs of ../shared/upstream/network-operator (``gpucell plan --check``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pulumi

from gpucell._component import MANAGED_BY, CellComponent, custom_resource
from gpucell.admission.fabric import tenant_network_name
from gpucell.components._chart import ChartSource, helm_release
from gpucell.components.platform_tolerations import fabric_pool_tolerations
from gpucell.spec.fabric import MELLANOX_PCI_VENDOR, LinkType, rail_resource_name
from gpucell.spec.pools import POOL_LABEL, NodePool
from gpucell.spec.versions import Versions

if TYPE_CHECKING:
    from pulumi_kubernetes.apiextensions import CustomResource
    from pulumi_kubernetes.helm.v3 import Release

    from gpucell.cluster import Cluster
    from gpucell.spec.cell import CellSpec

__all__ = [
    "CHART",
    "DOCA_DRIVER_VERSION",
    "IMAGE_REPOSITORY",
    "NAMESPACE",
    "POLICY_NAME",
    "RELEASE_NAME",
    "NetworkOperator",
    "NetworkOperatorArgs",
    "fabric_pools",
    "network_operator_values",
    "nic_cluster_policy",
    "node_policies",
    "tenant_networks",
]

CHART = ChartSource("network-operator", "https://helm.ngc.nvidia.com/nvidia")
"""The chart and its repository (NVIDIA's NGC Helm repository, Network Operator docs "Helm" install)."""
NAMESPACE = "nvidia-network-operator"
"""Namespace of the operator, the SR-IOV operator and their policies (the name NVIDIA's install guide uses)."""
RELEASE_NAME = "network-operator"
"""Helm release name in the cluster."""
POLICY_NAME = "nic-cluster-policy"
"""The NicClusterPolicy name the operator reconciles (other names are ignored)."""
IMAGE_REPOSITORY = "nvcr.io/nvidia/mellanox"
"""Where the NicClusterPolicy's images come from (Network Operator v26.4.1 release notes, "Container Images")."""
COMPONENT_VERSION = "network-operator-v26.4.1"
"""Tag of Multus and the CNI plugins in Network Operator v26.4.1 (release notes, "Container Images")."""
DOCA_DRIVER_VERSION = "doca3.4.1-26.04-1.1.0.0-1"
"""The DOCA-OFED driver container of Network Operator v26.4.1 (release notes, "DOCA-OFED Driver Container Images";
the operator appends the node's OS and architecture, ``-ubuntu24.04-amd64``)."""


def fabric_pools(node_pools: Mapping[str, NodePool]) -> dict[str, NodePool]:
    """The pools of ``node_pools`` that declare a ``fabric``, in config order."""
    return {name: pool for name, pool in node_pools.items() if pool.fabric is not None}


def _meta(name: str) -> dict[str, Any]:
    return {"name": name, "namespace": NAMESPACE, "labels": dict(MANAGED_BY)}


def network_operator_values() -> dict[str, Any]:
    """The chart values gpucell owns: NFD off (``nfd.enabled``), the SR-IOV Network Operator on
    (``sriovNetworkOperator.enabled``) with its ``default`` SriovOperatorConfig
    (``sriov-network-operator.sriovOperatorConfig.deploy``)."""
    return {
        "nfd": {"enabled": False},
        "sriovNetworkOperator": {"enabled": True},
        "sriov-network-operator": {"sriovOperatorConfig": {"deploy": True}},
    }


def _on_pools(pools: Mapping[str, NodePool]) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": POOL_LABEL, "operator": "In", "values": list(pools)}]}
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}


def nic_cluster_policy(node_pools: Mapping[str, NodePool]) -> dict[str, Any]:
    """The ``NicClusterPolicy``: the DOCA driver (:data:`DOCA_DRIVER_VERSION`; upgraded one node at a time, drained
    first), Multus and the CNI plugins, on the nodes of :func:`fabric_pools` (``nodeAffinity``), tolerating those
    pools' taints and, when one runs acceptance, ``gpucell.io/acceptance``
    (:func:`gpucell.components.platform_tolerations.fabric_pool_tolerations`; ``spec.tolerations``, which the
    operator adds to every DaemonSet it manages, beside its own ``nvidia.com/gpu``; only with some), so that a
    tainted fabric pool, or one tainted later, keeps its RDMA NICs (Mellanox/network-operator#435)."""
    image = {"repository": IMAGE_REPOSITORY, "version": COMPONENT_VERSION}
    tolerations = fabric_pool_tolerations(node_pools)
    return {
        "apiVersion": "mellanox.com/v1alpha1",
        "kind": "NicClusterPolicy",
        "metadata": {"name": POLICY_NAME, "labels": dict(MANAGED_BY)},
        "spec": {
            "nodeAffinity": _on_pools(fabric_pools(node_pools)),
            "ofedDriver": {
                "image": "doca-driver",
                "repository": IMAGE_REPOSITORY,
                "version": DOCA_DRIVER_VERSION,
                "upgradePolicy": {
                    "autoUpgrade": True,
                    "maxParallelUpgrades": 1,
                    "drain": {"enable": True, "force": False, "timeoutSeconds": 900},
                },
            },
            "secondaryNetwork": {
                "multus": {"image": "multus-cni", **image},
                "cniPlugins": {"image": "plugins", **image},
            },
            **({"tolerations": tolerations} if tolerations else {}),
        },
    }


def node_policies(node_pools: Mapping[str, NodePool]) -> list[dict[str, Any]]:
    """One ``SriovNetworkNodePolicy`` per fabric pool and rail (``<pool>-rail<i>``): ``fabric.vfsPerNic`` VFs on that
    NIC alone (``nicSelector.rootDevices``, vendor and device id of the model), bound to ``vfio-pci`` for KubeVirt,
    the port's ``linkType`` and ``mtu``, on the pool's nodes; resource ``<pool>_rail<i>``."""
    policies: list[dict[str, Any]] = []
    for name, pool in fabric_pools(node_pools).items():
        fabric = pool.fabric
        assert fabric is not None  # fabric_pools
        for rail in fabric.rails:
            spec: dict[str, Any] = {
                "resourceName": rail_resource_name(name, rail.index),
                "nodeSelector": {POOL_LABEL: name},
                "numVfs": fabric.vfs_per_nic,
                "nicSelector": {
                    "vendor": MELLANOX_PCI_VENDOR,
                    "deviceID": fabric.nic_device_id,
                    "rootDevices": [rail.nic],
                },
                "deviceType": "vfio-pci",
                "linkType": fabric.link_type.sriov,
            }
            if fabric.mtu is not None:
                spec["mtu"] = fabric.mtu
            policies.append(
                {
                    "apiVersion": "sriovnetwork.openshift.io/v1",
                    "kind": "SriovNetworkNodePolicy",
                    "metadata": _meta(f"{name}-rail{rail.index}"),
                    "spec": spec,
                }
            )
    return policies


def tenant_networks(node_pools: Mapping[str, NodePool], tenant_vlans: Mapping[str, int]) -> list[dict[str, Any]]:
    """One ``SriovNetwork`` per tenant of ``tenant_vlans`` (tenant -> VLAN) and rail of each ``ethernet`` fabric
    pool (:func:`gpucell.admission.fabric.tenant_network_name`): the rail's resource, ``networkNamespace:
    tenant-<t>``, the tenant's ``vlan``, ``spoofChk: on``, ``trust: off`` (the guest can change neither VLAN nor
    MAC) and ``linkState: enable``. No ``ipam``: a ``vfio-pci`` VF is configured by the guest."""
    networks: list[dict[str, Any]] = []
    for tenant, vlan in tenant_vlans.items():
        for name, pool in fabric_pools(node_pools).items():
            fabric = pool.fabric
            assert fabric is not None  # fabric_pools
            if fabric.link_type is not LinkType.ETHERNET:
                continue  # partition keys need ib-kubernetes (decision 0039, "Left out"); admission refuses VMs there
            for rail in fabric.rails:
                networks.append(
                    {
                        "apiVersion": "sriovnetwork.openshift.io/v1",
                        "kind": "SriovNetwork",
                        "metadata": _meta(tenant_network_name(tenant, name, rail.index)),
                        "spec": {
                            "resourceName": rail_resource_name(name, rail.index),
                            "networkNamespace": f"tenant-{tenant}",
                            "vlan": vlan,
                            "spoofChk": "on",
                            "trust": "off",
                            "linkState": "enable",
                        },
                    }
                )
    return networks


@dataclass(frozen=True)
class NetworkOperatorArgs:
    """Inputs of :class:`NetworkOperator`: only what it uses."""

    cluster: Cluster
    """The cluster to install into (its provider and readiness)."""
    node_pools: Mapping[str, NodePool] = field(default_factory=dict)
    """The cluster's node pools: those with a ``fabric`` get the driver, VFs and networks. Defaults to none."""
    tenant_vlans: Mapping[str, int] = field(default_factory=dict)
    """Tenant -> its ``fabricVlan``: one network per tenant and rail. Defaults to none."""
    version: str = Versions().network_operator
    """Chart version (``versions.networkOperator``); defaults to gpucell's pin."""
    values: Mapping[str, Any] = field(default_factory=dict)
    """Chart values merged over gpucell's (:func:`network_operator_values`). Defaults to none."""

    @classmethod
    def from_cell(cls, cell: CellSpec, cluster: Cluster) -> NetworkOperatorArgs:
        """The Network Operator of ``cell`` on ``cluster``: its ``nodePools``, the tenants' ``fabricVlan`` and
        ``versions.networkOperator``."""
        vlans = {name: t.fabric_vlan for name, t in cell.tenants.items() if t.fabric_vlan is not None}
        return cls(cluster, cell.node_pools, vlans, cell.versions.network_operator)


class NetworkOperator(CellComponent):
    """The NVIDIA Network Operator of one cluster (a cell builds it only when a pool declares a ``fabric``).

    Children: the ``kubernetes:helm.sh/v3:Release`` ``f"{name}-network-operator"``, then, after it, the custom
    resources of :func:`nic_cluster_policy`, :func:`node_policies` and :func:`tenant_networks` (named
    ``f"{name}-<kind>-<object name>"``). Usable on its own on any cluster with ConnectX NICs and Multus-free CNI
    configuration (Cilium with ``cni.exclusive: false``).
    """

    namespace: pulumi.Output[str]
    """Namespace of the operator and its policies (``nvidia-network-operator``)."""

    def __init__(self, name: str, args: NetworkOperatorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("NetworkOperator", name, opts, args.cluster)
        self.release: Release = helm_release(
            f"{name}-network-operator",
            source=CHART,
            version=args.version,
            namespace=NAMESPACE,
            values=network_operator_values(),
            overrides=args.values,
            release_name=RELEASE_NAME,
            opts=self.child(),
        )
        after = self.child(depends_on=[self.release])
        self.policy: CustomResource = custom_resource(
            f"{name}-nic-cluster-policy", nic_cluster_policy(args.node_pools), after
        )
        self.node_policies: list[CustomResource] = [
            custom_resource(f"{name}-sriov-policy-{m['metadata']['name']}", m, after)
            for m in node_policies(args.node_pools)
        ]
        self.networks: list[CustomResource] = [
            custom_resource(f"{name}-sriov-network-{m['metadata']['name']}", m, after)
            for m in tenant_networks(args.node_pools, args.tenant_vlans)
        ]
        self.namespace = self.release.namespace.apply(lambda ns: ns or NAMESPACE)
        self.register_outputs({"namespace": self.namespace})
