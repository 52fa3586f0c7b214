"""Plan-time admission of tenant clusters: their machines fit the region's pools and the tenant's quota, and the
region's Cluster API releases can build them.

A tenant cluster's VMs are the tenant's VMs: placed by :func:`gpucell.admission.placement.place_vm` (the same call the
renderer makes), their GPUs counted against ``quota.gpus`` and the pools' capacity (:func:`machines`, which
:func:`gpucell.admission.tenants.placements` yields), their CPU, memory and disks against the tenant's quota
(:func:`usage`, with the one extra VM a rolling update creates). What only tenant clusters need is here:
:func:`check_tenant_clusters`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from gpucell.admission.inventory import GpuOffer
from gpucell.admission.placement import Placement, PlacementError, place_vm
from gpucell.catalog.cluster_api_facts import (
    KNOWN_CAAPH,
    KNOWN_CAPI_OPERATOR,
    KNOWN_CAPK,
    MANAGEMENT_KUBERNETES,
    WORKLOAD_KUBERNETES,
)
from gpucell.catalog.gpu_catalog import GpuModel
from gpucell.catalog.releases import release
from gpucell.errors import SpecError, shown
from gpucell.spec.tenancy import EgressClass

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpucell.spec.network import Network
    from gpucell.spec.pools import NodePool
    from gpucell.spec.tenancy import TenantSpec
    from gpucell.spec.tenant_clusters import TenantClusterSpec
    from gpucell.spec.versions import Versions

__all__ = [
    "check_cluster_api_versions",
    "check_tenant_clusters",
    "machine_placements",
    "machines",
    "rollout_surge",
    "usage",
]


def _minor(version: tuple[int, int]) -> str:
    return f"v{version[0]}.{version[1]}"


def machine_placements(
    name: str,
    spec: TenantClusterSpec,
    node_pools: Mapping[str, NodePool],
    offers: Sequence[GpuOffer],
    *,
    catalog: Mapping[str, GpuModel],
) -> tuple[Placement, dict[str, Placement]]:
    """Where the control-plane VMs and each worker pool's VMs run: :func:`gpucell.admission.placement.place_vm` over the
    region's ``nodePools``, their GPU ``offers`` (:func:`gpucell.admission.inventory.gpu_offers`) and GPU ``catalog``
    (:attr:`gpucell.spec.CellSpec.gpu_catalog`), as for the tenant's own VMs. Raises :class:`SpecError` with a path
    below the tenant cluster (``controlPlane.pool``, ``workerPools.gpu.gpuModel``...) when a part fits nowhere."""
    try:
        control_plane = place_vm(f"{name}-control-plane", spec.control_plane_vm(), node_pools, offers, catalog=catalog)
    except PlacementError as exc:
        raise SpecError(("controlPlane", *exc.rel_path), exc.message) from None
    workers: dict[str, Placement] = {}
    for pool in spec.worker_pools:
        try:
            workers[pool] = place_vm(f"{name}-{pool}", spec.worker_vm(pool), node_pools, offers, catalog=catalog)
        except PlacementError as exc:
            raise SpecError(("workerPools", pool, *_worker_key(exc.rel_path)), exc.message) from None
    return control_plane, workers


def _worker_key(rel_path: tuple[str, ...]) -> tuple[str, ...]:
    """A VM key path as the worker pool spells it (a worker's root disk is ``diskGib``)."""
    return ("diskGib",) if rel_path[:1] == ("rootDisk",) else rel_path


def machines(
    tenant: TenantSpec,
    node_pools: Mapping[str, NodePool],
    offers: Sequence[GpuOffer],
    *,
    catalog: Mapping[str, GpuModel],
) -> Iterator[tuple[tuple[str, ...], Placement, int]]:
    """``(path below the tenant, placement, GPU units)`` of every worker pool of the tenant's clusters (units =
    replicas x GPUs), then each control plane (no GPUs). Raises :class:`SpecError` when a part fits nowhere."""
    for name, spec in tenant.tenant_clusters.items():
        base = ("tenantClusters", name)
        try:
            control_plane, workers = machine_placements(name, spec, node_pools, offers, catalog=catalog)
        except SpecError as exc:
            raise SpecError((*base, *exc.rel_path), exc.message) from None
        for pool, placement in workers.items():
            yield (*base, "workerPools", pool), placement, placement.count * spec.worker_pools[pool].replicas
        yield (*base, "controlPlane"), control_plane, 0


def rollout_surge(spec: TenantClusterSpec) -> dict[str, int]:
    """VMs a rolling update adds for a while, per part: the control plane one (``maxSurge: 1``), each CPU worker
    pool with machines one (``maxSurge: 1``); GPU pools none (they replace in place, ``maxSurge: 0``)."""
    surge = {"controlPlane": 1}
    for name, pool in spec.worker_pools.items():
        surge[name] = 0 if pool.gpus or not pool.replicas else 1
    return surge


def usage(spec: TenantClusterSpec) -> tuple[int, int, int]:
    """``(CPU millicores, memory GiB, disk GiB)`` the tenant cluster's VMs request during a rolling update, when
    there are the most of them (:func:`rollout_surge`): requests equal limits, as for the tenant's VMs."""
    surge = rollout_surge(spec)
    parts = [(spec.control_plane_vm(), spec.control_plane.replicas + surge["controlPlane"])]
    parts += [(spec.worker_vm(name), pool.replicas + surge[name]) for name, pool in spec.worker_pools.items()]
    cpu = sum(vm.cpu.vcpus * 1000 * count for vm, count in parts)
    memory = sum(vm.guest_memory_gib * count for vm, count in parts)
    disks = sum(vm.root_disk.size_gib * count for vm, count in parts)
    return cpu, memory, disks


def check_cluster_api_versions(versions: Versions) -> Iterator[SpecError]:
    """For a region with tenant clusters (paths below the region): its Cluster API, CAPK and CAAPH releases and its
    cluster-api-operator chart (``versions``) are ones gpucell has facts for, and the cell's Kubernetes is a
    management cluster Cluster API supports."""
    core = release(versions.cluster_api)
    if core not in WORKLOAD_KUBERNETES:
        known = ", ".join(_minor(v) for v in WORKLOAD_KUBERNETES)
        yield SpecError(
            ("versions", "clusterApi"),
            f"{shown(versions.cluster_api)}: gpucell knows the Kubernetes versions Cluster API {known} supports "
            "(docs/book/src/reference/versions.md), not this release's; pin such a release, or add its row to "
            "gpucell.catalog.cluster_api_facts",
        )
        return
    low, high = MANAGEMENT_KUBERNETES[core]
    cell_minor = release(versions.kubernetes_minor)
    if not low <= cell_minor <= high:
        yield SpecError(
            ("versions", "k3s"),
            f"{shown(versions.k3s)}: Cluster API {_minor(core)} runs on management clusters of Kubernetes "
            f"{_minor(low)} to {_minor(high)}, and tenant clusters need it in this cell",
        )
    for key, pinned, known_minors, what in (
        ("capk", versions.capk, KNOWN_CAPK, "CAPK, whose KubevirtMachineTemplate schema gpucell checked"),
        ("caaph", versions.caaph, KNOWN_CAAPH, "CAAPH, whose HelmChartProxy gpucell renders"),
        (
            "capiOperator",
            versions.capi_operator,
            KNOWN_CAPI_OPERATOR,
            "the cluster-api-operator chart, whose provider objects gpucell renders",
        ),
    ):
        if release(pinned) not in known_minors:
            yield SpecError(
                ("versions", key),
                f"{shown(pinned)}: gpucell knows {what}, at {', '.join(_minor(v) for v in known_minors)} only; "
                "pin such a release, or add this one's facts to gpucell.catalog.cluster_api_facts",
            )


def _check_networks(net: Network, where: tuple[str, ...], spec: TenantClusterSpec) -> Iterator[SpecError]:
    """The tenant cluster's networks stay clear of the cell's (``net``): inside a VM, a route to its own pod or
    service range would hide the cell's addresses there (its DNS, the API, the node network)."""
    theirs = (("podCidr", spec.network.pod_cidr), ("serviceCidr", spec.network.service_cidr))
    ours = (("nodeCidr", net.node_cidr), ("podCidr", net.pod_cidr), ("serviceCidr", net.service_cidr))
    for key, network in theirs:
        for cell_key, cell_network in ours:
            if network.overlaps(cell_network):
                yield SpecError(
                    (*where, "network", key),
                    f"{shown(str(network))} overlaps the cell's network.{cell_key} {cell_network}; the tenant "
                    "cluster's networks must stay clear of the cell's, which its VMs reach",
                )
                return


def _check_board_halves(where: tuple[str, ...], workers: Mapping[str, Placement]) -> Iterator[SpecError]:
    """Whole HGX boards and parts of boards in one tenant cluster: the GPU Operator there loads one driver
    configuration on every node, with NVLink or without."""
    whole = [pool for pool, placement in workers.items() if placement.nvswitch_resource is not None]
    part = [pool for pool, placement in workers.items() if placement.nvlink_disabled]
    if whole and part:
        yield SpecError(
            (*where, "workerPools", part[0], "gpus"),
            f"holds part of an HGX board (its guest driver runs with NVLink off) while pool {whole[0]} holds "
            "whole boards (NVLink on); the GPU Operator of a tenant cluster loads one driver configuration on "
            "every node: give both pools whole boards, or both part of one, or use two tenant clusters",
        )


def check_tenant_clusters(
    tenant_name: str,
    tenant: TenantSpec,
    *,
    versions: Versions,
    network: Network,
    storage_classes: Sequence[str],
    node_pools: Mapping[str, NodePool],
    offers: Sequence[GpuOffer],
    catalog: Mapping[str, GpuModel],
) -> Iterator[SpecError]:
    """What only tenant clusters need, as :class:`SpecError` (paths below the region): a Kubernetes version the
    region's Cluster API (``versions``) supports, egress ``internet``, networks clear of the cell's ``network``, one
    of the cell's ``storage_classes``, and one NVLink setting per cluster (placed over ``node_pools``, their
    ``offers`` and the GPU ``catalog``). The releases are :func:`check_cluster_api_versions`'; placement and quota are
    :mod:`gpucell.admission.tenants`'s, through :func:`machines`."""
    window = WORKLOAD_KUBERNETES.get(release(versions.cluster_api))
    for name, spec in tenant.tenant_clusters.items():
        where = ("tenants", tenant_name, "tenantClusters", name)
        if window is not None and not window[0] <= spec.minor <= window[1]:
            yield SpecError(
                (*where, "kubernetesVersion"),
                f"{shown(spec.kubernetes_version)} is outside what Cluster API {versions.cluster_api} builds: "
                f"{_minor(window[0])} to {_minor(window[1])}",
            )
        if tenant.egress is not EgressClass.INTERNET:
            yield SpecError(
                (*where,),
                f"needs the tenant's egress to be internet (it is {tenant.egress.value}): the cluster's nodes pull "
                "their images (Cilium from quay.io, the GPU Operator and its driver from nvcr.io, Kubernetes' own "
                "from registry.k8s.io, whose blobs come from cloud buckets no allow-list can name) from the "
                "tenant's namespace",
            )
        if spec.storage_class is not None and spec.storage_class not in storage_classes:
            yield SpecError(
                (*where, "storageClass"),
                f"{shown(spec.storage_class)} is not a StorageClass of the cell ({', '.join(storage_classes)})",
            )
        yield from _check_networks(network, where, spec)
        try:
            _, workers = machine_placements(name, spec, node_pools, offers, catalog=catalog)
        except SpecError:
            continue  # reported by the tenant's placement checks
        yield from _check_board_halves(where, workers)
