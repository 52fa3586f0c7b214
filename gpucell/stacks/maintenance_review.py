"""What a change does to running workloads through node maintenance, read from two plans for ``gpucell diff``.

A node's ``-prepare`` command (:mod:`gpucell.k3s._maintenance_scripts`) embeds what the node must run: ``WANT_VERSION``
(the pinned k3s), ``WANT_CONFIG`` (the restart digest), ``WANT_GPU`` (its whole GPU configuration), the GPU labels
(``GPU_LABEL_PATHS`` and ``GPU_LABEL_VALUES``; a check per label before issue 28) and ``QUARANTINE``. When one of
the first two differs between the base and the head, the node is drained; when only the GPU part differs, its GPU
workloads are evicted and its GPU VMs stopped; a quarantine set drains it for good, one lifted gives it back. The
GPU VMs are the head's KubeVirt ``VirtualMachine`` resources with ``gpus``, ``hostDevices`` or resource claims, their
own or their instancetype's (an instancetype of the head plan), listed per tenant namespace: which of them run on a
given node is only known in the cluster, so every one is named when a GPU node goes through maintenance.

A ``-prepare`` of the head that depends on the GPU Operator release, the ``KubeVirt`` CR or the DRA driver release
belongs to a host whose GPU configuration changes: those are rendered to serve its old and new configuration until
the first run after it settled (:mod:`gpucell.day2.gpu_serving`). What the GPU pools offer is compared from the plans'
``capacity`` (:func:`gpucell.stacks.plan.capacity_table`).

A node's ``-settle`` of a GPU pool that runs acceptance (docs/decisions/0037) embeds ``ACCEPT_ESTIMATE_SECONDS``: such
a node that is new in the head, reconfigured or has its quarantine lifted runs its acceptance run before tenants may
use it, for about that long.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpucell.stacks.plan_diff import index_plan, unwrap_script

__all__ = ["Maintenance", "maintenance"]

_PREPARE_SUFFIX = "-prepare"
_SETTLE_SUFFIX = "-settle"
_COMMAND = "command:remote:Command"
_VM_TYPE = "kubernetes:kubevirt.io/v1:VirtualMachine"
_DRAIN_KEYS = ("WANT_VERSION", "WANT_CONFIG")
_MACHINE_TEMPLATE = "KubevirtMachineTemplate"
_WORKER_POOL = "gpucell.io/worker-pool"
"""The label of a tenant cluster's worker-pool objects (:data:`gpucell.workloads.tenant_cluster.WORKER_POOL_LABEL`)."""
_CLUSTER = "gpucell.io/tenant-cluster"
"""The label naming their cluster (:data:`gpucell.workloads.tenant_cluster.TENANT_CLUSTER_LABEL`)."""
_INSTANCETYPE_KINDS = ("VirtualMachineClusterInstancetype", "VirtualMachineInstancetype")
_LABEL_CHECKS = re.compile(r"\{\.metadata\.labels\.([^}]*)\}'\)\" != (\S+)")
"""A ``-prepare``'s GPU label checks (key, wanted value), as gpucell rendered them before issue 28 (one check per
label; now a loop over the header's ``GPU_LABEL_PATHS`` and ``GPU_LABEL_VALUES``)."""
_NONE = ("", "''")
_RESOURCE_CHECKS = re.compile(r"\{\.status\.allocatable\.([^}$]+)\}")
"""The GPU resources a ``-prepare`` checks the node advertises (dots escaped), as gpucell rendered them before issue 28
(now the header's ``GPU_RESOURCE_PATHS``)."""
_FORGOTTEN = "is removalPolicy: forget: nothing to do"
"""What the step of a ``removalPolicy: forget`` host says
(:func:`gpucell.k3s._maintenance_scripts.forgotten_script`)."""
_SERVING_TYPES = {
    "kubernetes:helm.sh/v3:Release": ("-gpu-operator-gpu-operator", "-dra-driver-dra-driver"),
    "kubernetes:kubevirt.io/v1:KubeVirt": ("-kubevirt-kubevirt",),
}


@dataclass
class Maintenance:
    """The nodes of one region that a change takes out of service, and the GPU VMs that may stop."""

    drained: list[str] = field(default_factory=list)
    """Nodes cordoned and drained (a k3s upgrade or restart), in plan order."""
    reconfigured: list[str] = field(default_factory=list)
    """Nodes whose GPU workloads are evicted and GPU VMs stopped (a GPU reconfiguration only)."""
    gpu_workers: dict[str, list[str]] = field(default_factory=dict)
    """Tenant namespace -> its tenant clusters' GPU worker pools (``<cluster>/<pool>``) whose VMs can run on such a
    node: the same rule as :attr:`gpu_vms`, read from each worker pool's ``KubevirtMachineTemplate`` (Cluster API
    replaces those workers: their Machines are deleted, each node drained in the tenant cluster first)."""
    gpu_vms: dict[str, list[str]] = field(default_factory=dict)
    """Tenant namespace -> its GPU VMs (names) that can run on a node in :attr:`drained`, :attr:`reconfigured` or
    :attr:`quarantined`: those asking for a GPU resource such a node advertises (before or after the change), and
    those with DRA claims when such a node is a ``dra`` node."""
    quarantined: dict[str, str] = field(default_factory=dict)
    """Nodes quarantined by the change -> the reason (as a label value): drained, and kept out of service."""
    lifted: list[str] = field(default_factory=list)
    """Nodes whose quarantine the change lifts: back into service once their GPU state is confirmed."""
    forgotten: list[str] = field(default_factory=list)
    """Nodes newly ``removalPolicy: forget``: nothing runs on them any more (their steps do nothing)."""
    serving_both: list[str] = field(default_factory=list)
    """Nodes whose ``-prepare`` waits for cell-wide GPU pieces that serve their old and new configuration."""
    capacity: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)
    """GPU resource whose capacity drops -> (capacity before, after, reserved by quotas, used by workloads)."""
    acceptance: dict[str, int] = field(default_factory=dict)
    """GPU nodes that run an acceptance run before tenants may use them (new, reconfigured, quarantine lifted) ->
    its estimated duration, seconds."""


def _value(script: str, key: str) -> str | None:
    match = re.search(rf"^readonly {key}=(.*)$", script, re.MULTILINE)
    return match[1] if match else None


def _array(script: str, key: str) -> list[str]:
    """The items of the header array ``readonly KEY=(...)`` (unquoted); none without it."""
    found = _value(script, key)
    return shlex.split(found[1:-1]) if found and found.startswith("(") and found.endswith(")") else []


def _resources(script: str) -> set[str]:
    """The GPU resources a ``-prepare`` checks the node advertises (dots escaped), in either rendering."""
    return set(_RESOURCE_CHECKS.findall(script)) | set(_array(script, "GPU_RESOURCE_PATHS"))


def maintenance(base: Mapping[str, Any], head: Mapping[str, Any]) -> dict[str, Maintenance]:
    """Region -> its :class:`Maintenance` from plan ``base`` to plan ``head`` (``gpucell plan --json`` documents);
    regions without node maintenance or lost GPU capacity are left out. A node new in the head is not listed (it
    joins, nothing runs)."""
    old = {r["urn"]: r for r in index_plan(base).values()}
    regions: dict[str, Maintenance] = {}
    served: dict[str, tuple[set[str], bool]] = {}
    head_index = index_plan(head)
    serving_urns = {
        urn
        for urn, resource in head_index.items()
        if str(resource.get("name", "")).endswith(_SERVING_TYPES.get(str(resource.get("type")), ("\0",)))
    }
    for urn, resource in head_index.items():
        if resource.get("type") != _COMMAND or not str(resource.get("name", "")).endswith(_PREPARE_SUFFIX):
            continue
        before = old.get(urn)
        new = unwrap_script((resource.get("inputs") or {}).get("create")) or ""
        was = unwrap_script(((before or {}).get("inputs") or {}).get("create")) or ""
        if before is None or new == was:
            continue
        node = str(resource["name"]).removesuffix(_PREPARE_SUFFIX).split("-k3s-", 1)[-1]
        item = regions.setdefault(resource["region"], Maintenance())
        if serving_urns & set(resource.get("dependencies") or []):
            item.serving_both.append(node)
        if _note(item, node, new, was):
            resources, dra = served.setdefault(resource["region"], (set(), False))
            resources.update(_resources(new) | _resources(was))
            served[resource["region"]] = (resources, dra or "mode=dra" in new + was)
    for region, (resources, dra) in served.items():
        names = {name.replace("\\.", ".") for name in resources}
        regions[region].gpu_vms = _gpu_vms(head_index, region, names, dra)
        regions[region].gpu_workers = _gpu_workers(head_index, region, names, dra)
    for region, drops in _capacity_drops(base, head).items():
        regions.setdefault(region, Maintenance()).capacity = drops
    _acceptance_runs(old, head_index, regions)
    return {
        region: item
        for region, item in regions.items()
        if item.drained
        or item.reconfigured
        or item.quarantined
        or item.lifted
        or item.capacity
        or item.forgotten
        or item.acceptance
    }


def _acceptance_runs(
    old: Mapping[str, Mapping[str, Any]], head_index: Mapping[str, Mapping[str, Any]], regions: dict[str, Maintenance]
) -> None:
    """Record in ``regions`` the GPU nodes whose head ``-settle`` runs acceptance (``ACCEPT_ESTIMATE_SECONDS``) and that
    are new in the head, reconfigured or have their quarantine lifted."""
    for urn, resource in head_index.items():
        if resource.get("type") != _COMMAND or not str(resource.get("name", "")).endswith(_SETTLE_SUFFIX):
            continue
        seconds = _value(unwrap_script((resource.get("inputs") or {}).get("create")) or "", "ACCEPT_ESTIMATE_SECONDS")
        if seconds is None:
            continue
        node = str(resource["name"]).removesuffix(_SETTLE_SUFFIX).split("-k3s-", 1)[-1]
        item = regions.get(resource["region"])
        changed = item is not None and (node in item.reconfigured or node in item.lifted)
        if urn not in old or changed:
            regions.setdefault(resource["region"], Maintenance()).acceptance[node] = int(seconds)


def _note(item: Maintenance, node: str, new: str, was: str) -> bool:
    """Record in ``item`` what the node's ``-prepare`` changing from ``was`` to ``new`` does; True when it takes the
    node out of service (drained, reconfigured or quarantined)."""
    if _FORGOTTEN in new:
        item.forgotten.append(node)
        return False
    quarantine, was_quarantined = _value(new, "QUARANTINE") or "", _value(was, "QUARANTINE") or ""
    if quarantine not in _NONE and was_quarantined in _NONE:
        item.quarantined[node] = quarantine
    elif was_quarantined not in _NONE and quarantine in _NONE:
        item.lifted.append(node)
    if any(_value(new, key) != _value(was, key) for key in _DRAIN_KEYS):
        item.drained.append(node)
    elif _gpu_part(new) != _gpu_part(was):
        item.reconfigured.append(node)
    return node in item.quarantined or node in item.drained or node in item.reconfigured


def _gpu_part(script: str) -> tuple[str, list[tuple[str, str]]]:
    """The GPU configuration a ``-prepare`` wants: ``WANT_GPU`` (``""`` when empty or absent) and its labels as
    (JSONPath member, quoted value), the same from either rendering, so that a new gpucell alone reconfigures
    nothing."""
    want = _value(script, "WANT_GPU") or ""
    labels = zip(_array(script, "GPU_LABEL_PATHS"), _array(script, "GPU_LABEL_VALUES"), strict=True)
    return ("" if want in _NONE else want), _LABEL_CHECKS.findall(script) + [(k, shlex.quote(v)) for k, v in labels]


def _device_names(holder: Mapping[str, Any]) -> set[str]:
    """The ``deviceName`` of every ``gpus`` and ``hostDevices`` entry of ``holder`` (a VM's ``domain.devices``, or an
    instancetype's ``spec``)."""
    return {str(d.get("deviceName")) for d in (holder.get("gpus") or []) + (holder.get("hostDevices") or [])}


def _instancetype_devices(plan: Mapping[str, Mapping[str, Any]]) -> dict[tuple[str, str, str], set[str]]:
    """``(kind, namespace, name)`` -> the device names of the plan's instancetypes that give VMs GPUs or host devices
    (``""`` namespace for cluster-wide ones)."""
    found: dict[tuple[str, str, str], set[str]] = {}
    for resource in plan.values():
        inputs = resource.get("inputs") or {}
        if inputs.get("kind") in _INSTANCETYPE_KINDS:
            names = _device_names(inputs.get("spec") or {})
            if names:
                meta = inputs.get("metadata") or {}
                found[(str(inputs["kind"]), str(meta.get("namespace", "")), str(meta.get("name")))] = names
    return found


def _instancetype_of(inputs: Mapping[str, Any]) -> tuple[str, str, str]:
    """``(kind, namespace, name)`` of the instancetype a VM's inputs name (a cluster-wide one by default)."""
    ref = (inputs.get("spec") or {}).get("instancetype") or {}
    kind = str(ref.get("kind") or "VirtualMachineClusterInstancetype")
    namespace = str((inputs.get("metadata") or {}).get("namespace", "")) if kind == "VirtualMachineInstancetype" else ""
    return kind, namespace, str(ref.get("name"))


def _gpu_vms(
    head_index: Mapping[str, Mapping[str, Any]], region: str, resources: set[str], dra: bool
) -> dict[str, list[str]]:
    """Tenant namespace -> the head's GPU VMs of ``region`` that ask for one of ``resources`` (``gpus`` or
    ``hostDevices`` device names, their own or their instancetype's), or that hold DRA claims when ``dra``."""
    vms: dict[str, list[str]] = {}
    instancetypes = _instancetype_devices(head_index)
    for resource in head_index.values():
        if resource.get("type") != _VM_TYPE or resource["region"] != region:
            continue
        inputs = resource.get("inputs") or {}
        spec = ((inputs.get("spec") or {}).get("template") or {}).get("spec") or {}
        devices = (spec.get("domain") or {}).get("devices") or {}
        names = _device_names(devices) | instancetypes.get(_instancetype_of(inputs), set())
        if names & resources or (dra and spec.get("resourceClaims")):
            metadata = (resource.get("inputs") or {}).get("metadata") or {}
            vms.setdefault(str(metadata.get("namespace")), []).append(str(metadata.get("name")))
    return vms


def _gpu_workers(
    head_index: Mapping[str, Mapping[str, Any]], region: str, resources: set[str], dra: bool
) -> dict[str, list[str]]:
    """Tenant namespace -> ``<cluster>/<pool>`` of the head's tenant-cluster worker pools of ``region`` whose VM
    template (``spec.template.spec.virtualMachineTemplate`` of their ``KubevirtMachineTemplate``) asks for one of
    ``resources``, or holds DRA claims when ``dra`` (issue 30: a k3s upgrade of the H100 hosts named the tenant VMs
    but not the tenant clusters' GPU workers on them)."""
    workers: dict[str, list[str]] = {}
    for resource in head_index.values():
        inputs = resource.get("inputs") or {}
        if inputs.get("kind") != _MACHINE_TEMPLATE or resource.get("region") != region:
            continue
        labels = (inputs.get("metadata") or {}).get("labels") or {}
        if _WORKER_POOL not in labels:
            continue  # the control plane's: no GPUs
        template = (((inputs.get("spec") or {}).get("template") or {}).get("spec") or {}).get("virtualMachineTemplate")
        spec = ((((template or {}).get("spec") or {}).get("template") or {}).get("spec")) or {}
        names = _device_names((spec.get("domain") or {}).get("devices") or {})
        if names & resources or (dra and spec.get("resourceClaims")):
            namespace = str((inputs.get("metadata") or {}).get("namespace"))
            workers.setdefault(namespace, []).append(f"{labels.get(_CLUSTER, '')}/{labels[_WORKER_POOL]}")
    return workers


def _capacity_drops(
    base: Mapping[str, Any], head: Mapping[str, Any]
) -> dict[str, dict[str, tuple[int, int, int, int]]]:
    """Region -> GPU resource -> (capacity before, after, reserved, used) where the head still offers the resource,
    but fewer units than the base (hosts quarantined or removed); nothing for a plan without ``capacity`` (made by a
    gpucell before it)."""
    before, after = base.get("capacity") or {}, head.get("capacity") or {}
    drops: dict[str, dict[str, tuple[int, int, int, int]]] = {}
    for region, resources in after.items():
        was = before.get(region)
        if not isinstance(was, Mapping):
            continue
        for resource, (old_capacity, _, _) in sorted(was.items()):
            if resource not in resources:
                continue  # renamed (another vGPU type, mode or layout): the disruptive changes say so
            new_capacity, reserved, used = resources[resource]
            if new_capacity < old_capacity:
                drops.setdefault(region, {})[resource] = (old_capacity, new_capacity, reserved, used)
    return drops
