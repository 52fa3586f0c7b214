"""What serves the cell's GPU configurations while a pool changes its own: add before, remove after.

The GPU Operator values, KubeVirt's ``permittedHostDevices`` and feature gates, the DRA driver release and the
tolerations of their DaemonSets serve every node at once, while a pool's nodes change their GPU configuration one at
a time (docs/decisions/0018). So these cell-wide pieces are rendered from a *serving* spec: the cell as configured,
plus, for every host whose configuration in the last completed deployment differs from its configuration now, a
hidden pool that still holds it as it was (:func:`gpu_serving`). What served the old configuration stays while any
node may still run it; what serves the new one is there before the first of those nodes is prepared
(:class:`gpucell.k3s.cluster.K3sCluster` orders each such host's ``-prepare`` after the cell-wide pieces).

The last completed deployment is read from the stack output ``<region>GpuNodes`` (:func:`node_records`), which
the program exports as an Output of every ``-settle`` of the region: a run where any node fails never completes that
Output, and the Python SDK then registers none of the stack's outputs, so the engine keeps the last ones
(pulumi/pulumi#15754, Pulumi 3.112 and later: "If the stack did not run successfully to completion ... leave any
existing stack outputs as-is"). So the record changes only once every node of the run has settled, and the first
``pulumi up`` after that narrows the cell-wide pieces to the configuration in force. A region deployed by a gpucell
without the record is read from its fingerprint instead (:func:`records_from_fingerprint`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpucell.catalog.gpu_catalog import VgpuFramework
from gpucell.errors import ConfigError
from gpucell.spec import CellSpec, GpuMode, NodePool, NodeRole
from gpucell.spec.hardware import pool_vgpu_framework

__all__ = [
    "DEPLOYED_POOL_SUFFIX",
    "RECORD_SUFFIX",
    "SERVED_KEYS",
    "GpuServing",
    "gpu_serving",
    "node_records",
    "records_from_fingerprint",
]

RECORD_SUFFIX = "GpuNodes"
"""Stack output ``<region>GpuNodes``: :func:`node_records` of the region's last completed deployment."""
SERVED_KEYS = ("role", "gpuModel", "gpusPerNode", "gpuMode", "migConfig", "vgpuProfile", "topology", "taints")
"""The pool keys (stack config spelling) that decide what the cell-wide pieces serve on a node: its mode, model,
MIG layout, vGPU type, topology profile (KubeVirt's ``CPUManager`` gate) and taints (the operands' tolerations)."""
DEPLOYED_POOL_SUFFIX = "@deployed"
"""Name suffix of a hidden pool in the serving spec (``l4-dra@deployed``); ``@`` is never in a pool name."""


def _record(pool_name: str, pool: NodePool, address: str) -> dict[str, Any]:
    fields = pool.model_dump(mode="json", by_alias=True, exclude_none=True, include=set(_FIELDS))
    served = {key: fields[key] for key in SERVED_KEYS if key in fields and fields[key] not in ([], None)}
    return {"pool": pool_name, "address": address, **served}


_FIELDS = ("role", "gpu_model", "gpus_per_node", "gpu_mode", "mig_config", "vgpu_profile", "topology", "taints")


def node_records(cell: CellSpec) -> dict[str, dict[str, Any]]:
    """Host -> ``{"pool", "address", <SERVED_KEYS set on its pool>}`` of every agent (gpu and cpu pools) of
    ``cell``, in config order: what the stack output ``<region>GpuNodes`` records once every node has settled."""
    return {
        host.name: _record(name, pool, str(host.address))
        for name, pool in cell.node_pools.items()
        if pool.role is not NodeRole.SERVER
        for host in pool.hosts
    }


def records_from_fingerprint(fingerprint: Mapping[str, Any], cell: CellSpec) -> dict[str, dict[str, Any]]:
    """The records of a region deployed by a gpucell without ``<region>GpuNodes``, from its fingerprint's
    ``nodes`` (pool, role, address, gpuMode, migConfig, vgpuProfile): the other served keys (model, GPUs per node,
    topology, taints) are taken from the pool of that name in ``cell``; a host whose pool is gone, or was a server, is
    left out (nothing is known of what served it)."""
    records: dict[str, dict[str, Any]] = {}
    for host, node in (fingerprint.get("nodes") or {}).items():
        pool = cell.node_pools.get(str(node.get("pool")))
        if pool is None or pool.role is NodeRole.SERVER or node.get("role") != pool.role.value:
            continue
        record = _record(str(node["pool"]), pool, str(node.get("address", "")))
        for key in ("gpuMode", "migConfig", "vgpuProfile"):
            record.pop(key, None)
            if node.get(key) is not None:
                record[key] = node[key]
        records[host] = record
    return records


@dataclass(frozen=True)
class GpuServing:
    """The cell-wide pieces' view of a region while some of its hosts change configuration."""

    cell: CellSpec
    """The spec the GPU Operator, KubeVirt and DRA driver are rendered from: the region's own, plus a hidden pool
    ``<pool>@deployed`` per deployed configuration some host still had at the last completed deployment."""
    reconfigured: frozenset[str] = frozenset()
    """Hosts (still in the config) whose served configuration differs from the last completed deployment: each one's
    ``-prepare`` waits for the cell-wide pieces."""
    held: dict[str, list[str]] = field(default_factory=dict)
    """Hidden pool -> the hosts it holds (also hosts removed from the config), in record order."""
    renamed: frozenset[str] = frozenset()
    """Reconfigured hosts whose SR-IOV vGPU resource is renamed for the whole region: another vGPU type of the same
    model, whose virtual functions have the same PCI id. KubeVirt keys its PCI device plugins by that id, so one name
    serves every such VF in the region and both cannot be served at once: the ``KubeVirt`` CR takes the new name
    after the first of these hosts' ``-prepare`` has cordoned the pool's nodes still on the old type
    (:func:`gpucell.k3s._maintenance_scripts.prepare_script`), and their ``-prepare`` does not wait for the CR."""


def gpu_serving(cell: CellSpec, deployed: Mapping[str, Mapping[str, Any]] | None) -> GpuServing:
    """The :class:`GpuServing` of ``cell`` against ``deployed`` (:func:`node_records` of the last completed
    deployment; ``None`` or empty for a region never deployed: then nothing is held and nothing waits).

    A deployed record that no longer validates as a pool (a GPU model since dropped from the catalog) is not held."""
    now = node_records(cell)
    groups: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    reconfigured: set[str] = set()
    for host, record in (deployed or {}).items():
        current = now.get(host)
        if current is not None and _served(current) == _served(record):
            continue
        if current is not None:
            reconfigured.add(host)
        groups.setdefault(f"{record.get('pool')}{DEPLOYED_POOL_SUFFIX}", []).append((host, record))
    hidden: dict[str, NodePool] = {}
    for name, members in groups.items():
        pool = _deployed_pool(members)
        if pool is not None:
            hidden[name] = pool
    if not hidden:
        return GpuServing(cell, frozenset(reconfigured))
    serving = cell.model_copy(update={"node_pools": {**cell.node_pools, **hidden}})
    held = {name: [host.name for host in pool.hosts] for name, pool in hidden.items()}
    renamed = {host for host in reconfigured if _vf_renamed(serving, host)}
    return GpuServing(serving, frozenset(reconfigured), held, frozenset(renamed))


def _sriov_type(cell: CellSpec, pool: NodePool) -> tuple[str, str] | None:
    """(VF PCI id, vGPU resource) of an SR-IOV ``vm-vgpu`` pool, else ``None``."""
    if pool.role is not NodeRole.GPU or pool.mode is not GpuMode.VM_VGPU or pool.vgpu_profile is None:
        return None
    framework = pool_vgpu_framework(cell.gpu_operator.vgpu_driver_image, pool)
    if framework is not VgpuFramework.SRIOV or pool.model.vf_pci_selector is None:
        return None
    return pool.model.vf_pci_selector, pool.model.vgpu_resource(pool.vgpu_profile)


def _vf_renamed(serving: CellSpec, host: str) -> bool:
    """Whether ``host``'s configured and deployed pools type the same SR-IOV VFs as different vGPU resources."""
    types = [
        _sriov_type(serving, pool)
        for pool in serving.node_pools.values()
        if any(member.name == host for member in pool.hosts)
    ]
    known = [t for t in types if t is not None]
    return len(known) == 2 and known[0][0] == known[1][0] and known[0][1] != known[1][1]


def _served(record: Mapping[str, Any]) -> dict[str, Any]:
    return {"pool": record.get("pool"), **{key: _whole_numbers(record[key]) for key in SERVED_KEYS if key in record}}


def _whole_numbers(value: Any) -> Any:
    """``value`` with integral floats as ints, all the way down: stack outputs come back through protobuf's
    ``Struct``, whose numbers are all doubles (``8`` is read back as ``8.0``)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {key: _whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(item) for item in value]
    return value


def _deployed_pool(members: list[tuple[str, Mapping[str, Any]]]) -> NodePool | None:
    """The hidden pool holding ``members`` (host, record) as deployed: the first record's served keys."""
    served = {key: _whole_numbers(value) for key, value in members[0][1].items() if key in SERVED_KEYS}
    hosts = [{"name": host, "address": record.get("address")} for host, record in members]
    try:
        return NodePool.model_validate({**served, "hosts": hosts})
    except ConfigError:
        return None
