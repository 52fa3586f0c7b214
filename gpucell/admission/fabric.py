"""RDMA NICs at plan time: which rails a VM may take with its GPUs, and what a tenant's quota allows of them
(docs/decisions/0039-gpu-fabric-rdma-nics.md).

A pool's ``fabric`` numbers its NICs as rails (:class:`gpucell.spec.fabric.Rail`), each an SR-IOV resource of its own
(``nvidia.com/<pool>_rail<i>``). The kubelet's topology manager aligns a VM's GPUs with the VFs it requests by NUMA
node, so a VM names the rails of the NUMA nodes its GPUs are to come from, whole: a VM smaller than a node takes a
whole NUMA node of GPUs and exactly that node's rails, or it is refused with the rails that would fit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping

from gpucell.errors import SpecError
from gpucell.spec.fabric import LinkType, rail_resource_name
from gpucell.spec.pools import NodePool
from gpucell.spec.workloads import GpuVirtualMachineSpec

__all__ = [
    "RESOURCE_PREFIX",
    "check_fabric_names",
    "nic_offers",
    "nic_quota",
    "rail_refusal",
    "rail_resource",
    "tenant_network_name",
]

RESOURCE_PREFIX = "nvidia.com"
"""The SR-IOV device plugin's resource prefix under the Network Operator chart 26.4.1
(``sriov-network-operator.operator.resourcePrefix``)."""


def rail_resource(pool: str, rail: int) -> str:
    """The extended resource of a VF of rail ``rail`` of ``pool``: ``nvidia.com/h100vm_rail0``."""
    return f"{RESOURCE_PREFIX}/{rail_resource_name(pool, rail)}"


def tenant_network_name(tenant: str, pool: str, rail: int) -> str:
    """The ``SriovNetwork`` of ``tenant`` on rail ``rail`` of ``pool``, and so the NetworkAttachmentDefinition the
    Network Operator renders in the tenant's namespace, which the tenant's VMs name: ``acme-h100-vm-rail0``."""
    return f"{tenant}-{pool}-rail{rail}"


def _ranges(rails: list[int]) -> str:
    if len(rails) > 1 and rails == list(range(rails[0], rails[-1] + 1)):
        return f"{rails[0]}-{rails[-1]}"
    return ", ".join(map(str, rails))


def _numa_rails(pool: NodePool) -> str:
    fabric = pool.fabric
    assert fabric is not None  # callers check
    return ", ".join(f"NUMA node {node}: rails {_ranges(fabric.rails_of(node))}" for node in fabric.numa_nodes)


def rail_refusal(vm: GpuVirtualMachineSpec, pool_name: str, pool: NodePool) -> tuple[tuple[str, ...], str] | None:
    """Why ``vm`` with ``rdmaNics`` cannot have those NICs on ``pool``, as ``(key path below the VM, message)``, or
    ``None`` when its GPUs are whole NUMA nodes of ``pool`` and its rails exactly theirs."""
    fabric = pool.fabric
    if fabric is None:
        return ("rdmaNics",), f"pool {pool_name} declares no fabric (nodePools.{pool_name}.fabric): it has no RDMA NICs"
    if fabric.link_type is LinkType.INFINIBAND:
        return ("rdmaNics",), (
            f"pool {pool_name}'s fabric is infiniband, whose per-tenant partition keys gpucell does not render yet "
            "(they need ib-kubernetes with UFM, decision 0039); run the NICs as ethernet (RoCE), tenants on VLANs"
        )
    known = [rail.index for rail in fabric.rails]
    for index, rail in enumerate(vm.rdma_nics):
        if rail not in known:
            return ("rdmaNics", str(index)), f"{rail} is not a rail of pool {pool_name} ({_numa_rails(pool)})"
    per_numa = pool.gpus_per_numa
    if vm.gpus % per_numa:
        return ("gpus",), (
            f"{vm.gpus} GPUs with rdmaNics: pool {pool_name} pairs GPUs with NICs by whole NUMA nodes of {per_numa} "
            f"GPUs ({_numa_rails(pool)}); give the VM a multiple of {per_numa} GPUs, or drop rdmaNics"
        )
    nodes = sorted({rail.numa_node for rail in fabric.rails if rail.index in vm.rdma_nics})
    wanted = sorted(r for node in nodes for r in fabric.rails_of(node))
    if sorted(vm.rdma_nics) != wanted or len(nodes) != vm.gpus // per_numa:
        named = ", ".join(map(str, vm.rdma_nics))
        on = " and ".join(map(str, nodes))
        return ("rdmaNics",), (
            f"[{named}] takes NICs from NUMA node{'s' if len(nodes) > 1 else ''} {on} of pool {pool_name}, and "
            f"{vm.gpus} GPUs come from {vm.gpus // per_numa} whole NUMA node{'s' if vm.gpus > per_numa else ''} with "
            f"the NICs beside them; name exactly the rails of the GPUs' NUMA nodes ({_numa_rails(pool)})"
        )
    return None


def nic_offers(pools: Mapping[str, NodePool]) -> dict[str, tuple[str, int]]:
    """Rail resource -> (pool, VFs across the pool's in-service hosts) of every fabric pool, in pool and rail order."""
    offers: dict[str, tuple[str, int]] = {}
    for name, pool in pools.items():
        if pool.fabric is None:
            continue
        for rail in pool.fabric.rails:
            offers[rail_resource(name, rail.index)] = (name, pool.fabric.vfs_per_nic * len(pool.in_service_hosts))
    return offers


def nic_quota(gpu_quota: Mapping[str, int], fabric_vlan: int | None, pools: Mapping[str, NodePool]) -> dict[str, int]:
    """Rail resource -> VFs a tenant may hold: per rail of each fabric pool, as many as the whole hosts the tenant's
    quota of that pool's passthrough GPUs covers, rounded up (16 H100s on 8-GPU hosts: 2 per rail); 0 for every
    rail of a tenant without ``fabricVlan`` (it has no network to put a VF on, and a bare VF would be untagged)."""
    quota: dict[str, int] = {}
    for name, pool in pools.items():
        if pool.fabric is None:
            continue
        gpus = gpu_quota.get(pool.model.passthrough_resource, 0) if fabric_vlan is not None else 0
        hosts = math.ceil(gpus / (pool.gpus_per_node or 1))
        for rail in pool.fabric.rails:
            quota[rail_resource(name, rail.index)] = hosts
    return quota


def check_fabric_names(pools: Mapping[str, NodePool], vlan_tenants: Iterable[str]) -> Iterator[SpecError]:
    """Names derived from two pools, or two (tenant, pool) pairs, that would be one: a rail's resource keeps a pool
    name's letters and digits only (``h100-vm`` and ``h100vm`` would both advertise ``nvidia.com/h100vm_rail0``, one
    resource on both pools' hosts, and the quota of one would be the other's), and a tenant's network is
    ``<tenant>-<pool>-rail<i>`` in the Network Operator's namespace (tenant ``acme`` on pool ``h100-vm`` and tenant
    ``acme-h100`` on pool ``vm`` would write one ``SriovNetwork``, with one VLAN, for both). ``vlan_tenants``: the
    tenants with a ``fabricVlan``, in config order. Paths below the region."""
    fabric = {name: pool for name, pool in pools.items() if pool.fabric is not None}
    resources: dict[str, str] = {}
    for name in fabric:
        resource = rail_resource(name, 0)
        other = resources.setdefault(resource, name)
        if other != name:
            yield SpecError(
                ("nodePools", name),
                f"its rails' resources would be pool {other}'s ({resource}, ...: a resource name keeps a pool name's "
                "letters and digits only), one resource on both pools' hosts; rename one of the two fabric pools",
            )
    ethernet = [name for name, pool in fabric.items() if pool.fabric and pool.fabric.link_type is LinkType.ETHERNET]
    networks: dict[str, tuple[str, str]] = {}
    for tenant in vlan_tenants:
        for name in ethernet:
            network = tenant_network_name(tenant, name, 0)
            taken = networks.setdefault(network, (tenant, name))
            if taken != (tenant, name):
                yield SpecError(
                    ("tenants", tenant, "fabricVlan"),
                    f"the fabric network of tenant {tenant} on pool {name} would be named as tenant {taken[0]}'s on "
                    f"pool {taken[1]} ({network}, ...: <tenant>-<pool>-rail<i>, one SriovNetwork with one VLAN); "
                    "rename the tenant or the pool",
                )
