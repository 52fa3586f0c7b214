"""Which pools' taints each platform component tolerates, so that tainting a pool never strands its nodes without
the driver, device plugin, storage or VM handler they need.

A pool's ``taints`` repel every pod without a matching toleration. Tenant workloads get tolerations for the pools
they are placed on (:func:`gpucell.tenancy._common.scheduling`); the platform components that must run *on*
those nodes get them here (longhorn/longhorn#5306: a tainted node without them gets no Longhorn driver, and its
volumes never attach):

- :func:`gpu_pool_tolerations`: GPU Operator operands (chart value ``daemonsets.tolerations``: driver, toolkit,
  device plugins, vfio-manager, vGPU manager, MIG manager, validators, DCGM exporter) and the Node Feature
  Discovery worker (``node-feature-discovery.worker.tolerations``), which labels the GPU nodes the operator selects.
  The NVIDIA DRA driver's kubelet plugin tolerates the ``dra`` pools' taints (:mod:`gpucell.components.dra_driver`).
- :func:`vm_pool_tolerations`: KubeVirt's virt-handler (``KubeVirt`` CR ``spec.workloads.nodePlacement``) and CDI's
  importer, uploader and cloner pods (``CDI`` CR ``spec.workload``): the pools VMs run on.
- :func:`fabric_pool_tolerations`: the Network Operator's DaemonSets (``NicClusterPolicy`` ``spec.tolerations``: the
  DOCA driver, Multus, the CNI plugins), on the pools that declare a ``fabric``. The SR-IOV Network Operator's config
  daemon and device plugin need none: they tolerate every taint already (sriov-network-operator
  ``bindata/manifests/daemon/daemonset.yaml`` and ``bindata/manifests/plugins/sriov-device-plugin.yaml``:
  ``tolerations: [{operator: Exists}]``), as Cilium's agent does.
- :func:`worker_pool_tolerations`: Longhorn's manager and driver deployer (chart values) and its system-managed
  components (``defaultSettings.taintToleration``): every pool a pod with a volume may run on.
- :func:`fabric_pool_tolerations`: the NVIDIA Network Operator's DaemonSets (DOCA driver, Multus, CNI plugins:
  ``NicClusterPolicy`` ``spec.tolerations``), which tolerate none of a pool's taints by themselves
  (Mellanox/network-operator#435) and, since PR #1544, skip the DOCA driver on nodes whose taints they do not
  tolerate: the pools that declare a ``fabric``.
- :func:`no_execute_tolerations`: the metrics stack's node-exporter, whose chart tolerates every ``NoSchedule`` taint
  but no ``NoExecute`` one (prometheus-community/helm-charts#1347): the ``NoExecute`` taints of every pool.

The GPU Operator's operands, NFD, virt-handler, CDI and the Network Operator's DaemonSets also tolerate
``gpucell.io/acceptance`` when one of their pools is a GPU pool that runs acceptance: a GPU node keeps that taint
from its join until its acceptance run passes (docs/decisions/0037), and the GPU state the run waits for needs them
there first (virt-handler advertises SR-IOV vGPUs; a fabric node's NICs need their driver). Longhorn does not: the
run needs no volume, and Longhorn applies a changed toleration only once every volume is detached, which a running
cell would wait for.

Cilium's agent tolerates every taint already (its chart's ``tolerations: [{operator: Exists}]``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gpucell.spec.acceptance import ACCEPTANCE_TOLERATION
from gpucell.spec.pools import NodePool, NodeRole, gpu_pools, taint_tolerations

__all__ = [
    "fabric_pool_tolerations",
    "gpu_pool_tolerations",
    "longhorn_taint_toleration",
    "no_execute_tolerations",
    "vm_pool_tolerations",
    "worker_pool_tolerations",
]


def _of(pools: Iterable[NodePool], *, acceptance: bool = True) -> list[dict[str, str]]:
    pools = list(pools)
    tolerations = taint_tolerations(taint for pool in pools for taint in pool.taints)
    if acceptance and any(pool.acceptance_run is not None for pool in pools):
        tolerations.append(dict(ACCEPTANCE_TOLERATION))
    return tolerations


def gpu_pool_tolerations(pools: Mapping[str, NodePool]) -> list[dict[str, str]]:
    """Tolerations for the taints of every GPU pool of ``pools``, in pool order, then ``gpucell.io/acceptance``'s
    when one of them runs acceptance."""
    return _of(gpu_pools(pools).values())


def vm_pool_tolerations(pools: Mapping[str, NodePool]) -> list[dict[str, str]]:
    """Tolerations for the taints of the pools of ``pools`` VMs may run on: ``vm-passthrough``, ``vm-vgpu`` and
    ``dra`` pools and cpu pools (CPU-only VMs); then ``gpucell.io/acceptance``'s when one of them runs acceptance."""
    return _of(p for p in pools.values() if p.role is NodeRole.CPU or (p.role is NodeRole.GPU and p.mode.runs_vms))


def fabric_pool_tolerations(pools: Mapping[str, NodePool]) -> list[dict[str, str]]:
    """Tolerations for the taints of the pools of ``pools`` that declare a ``fabric`` (RDMA NICs, decision 0039),
    in pool order, then ``gpucell.io/acceptance``'s when one of them runs acceptance (a fabric pool is a GPU pool)."""
    return _of(p for p in pools.values() if p.fabric is not None)


def worker_pool_tolerations(pools: Mapping[str, NodePool]) -> list[dict[str, str]]:
    """Tolerations for the taints of every gpu and cpu pool of ``pools`` (where tenant pods and VMs, so volumes,
    run)."""
    return _of((p for p in pools.values() if p.role is not NodeRole.SERVER), acceptance=False)


def no_execute_tolerations(pools: Mapping[str, NodePool]) -> list[dict[str, str]]:
    """Tolerations for the ``NoExecute`` taints of every pool of ``pools`` (servers included), in pool order."""
    return [t for t in _of(pools.values(), acceptance=False) if t["effect"] == "NoExecute"]


def longhorn_taint_toleration(tolerations: Iterable[dict[str, str]]) -> str | None:
    """Longhorn's ``taint-toleration`` setting for ``tolerations``: ``kubectl taint`` syntax joined by ``;``
    (``key=value:NoSchedule;key:NoExecute``; longhorn/longhorn v1.12.1 ``chart/values.yaml``
    ``defaultSettings.taintToleration``), or ``None`` when there are none."""
    parts = [
        f"{t['key']}={t['value']}:{t['effect']}" if t["operator"] == "Equal" else f"{t['key']}:{t['effect']}"
        for t in tolerations
    ]
    return ";".join(parts) or None
