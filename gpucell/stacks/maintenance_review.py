"""What a change does to running workloads through node maintenance, read from two plans for ``gpucell diff``.

A node's ``-prepare`` command (:mod:`gpucell._maintenance_scripts`) embeds what the node must run: ``WANT_VERSION``
(the pinned k3s), ``WANT_CONFIG`` (the restart digest), ``WANT_GPU`` (its whole GPU configuration) and the GPU label
checks. When one of the first two differs between the base and the head, the node is drained; when only the GPU part
differs, its GPU workloads are evicted and its GPU VMs stopped. The GPU VMs are the head's KubeVirt
``VirtualMachine`` resources with ``gpus``, ``hostDevices`` or resource claims, their own or their instancetype's
(an instancetype of the head plan), listed per tenant namespace: which of
them run on a given node is only known in the cluster, so every one is named when a GPU node goes through
maintenance.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpucell.stacks.plan_diff import index_plan, unwrap_script

__all__ = ["Maintenance", "maintenance"]

_PREPARE_SUFFIX = "-prepare"
_COMMAND = "command:remote:Command"
_VM_TYPE = "kubernetes:kubevirt.io/v1:VirtualMachine"
_DRAIN_KEYS = ("WANT_VERSION", "WANT_CONFIG")
_INSTANCETYPE_KINDS = ("VirtualMachineClusterInstancetype", "VirtualMachineInstancetype")
_GPU_LINES = re.compile(r"^(readonly WANT_GPU=.*|if \[ \"\$\(node_field '\{\.metadata\.labels\..*)$", re.MULTILINE)


@dataclass
class Maintenance:
    """The nodes of one region that a change takes out of service, and the GPU VMs that may stop."""

    drained: list[str] = field(default_factory=list)
    """Nodes cordoned and drained (a k3s upgrade or restart), in plan order."""
    reconfigured: list[str] = field(default_factory=list)
    """Nodes whose GPU workloads are evicted and GPU VMs stopped (a GPU reconfiguration only)."""
    gpu_vms: dict[str, list[str]] = field(default_factory=dict)
    """Tenant namespace -> its GPU VMs (names), when any GPU node is in :attr:`drained` or :attr:`reconfigured`."""


def _value(script: str, key: str) -> str | None:
    match = re.search(rf"^readonly {key}=(.*)$", script, re.MULTILINE)
    return match[1] if match else None


def _gpu_instancetypes(plan: Mapping[str, Mapping[str, Any]]) -> set[tuple[str, str, str]]:
    """``(kind, namespace, name)`` of the plan's instancetypes that give VMs GPUs or host devices (``""`` namespace
    for cluster-wide ones)."""
    found: set[tuple[str, str, str]] = set()
    for resource in plan.values():
        inputs = resource.get("inputs") or {}
        if inputs.get("kind") in _INSTANCETYPE_KINDS:
            spec = inputs.get("spec") or {}
            if spec.get("gpus") or spec.get("hostDevices"):
                meta = inputs.get("metadata") or {}
                found.add((str(inputs["kind"]), str(meta.get("namespace", "")), str(meta.get("name"))))
    return found


def _has_gpu(resource: Mapping[str, Any], gpu_instancetypes: set[tuple[str, str, str]]) -> bool:
    """A VM with GPUs, host devices or claims of its own, or an instancetype of the plan that gives it some."""
    inputs = resource.get("inputs") or {}
    spec = ((inputs.get("spec") or {}).get("template") or {}).get("spec") or {}
    devices = (spec.get("domain") or {}).get("devices") or {}
    if devices.get("gpus") or devices.get("hostDevices") or spec.get("resourceClaims"):
        return True
    ref = (inputs.get("spec") or {}).get("instancetype") or {}
    kind = str(ref.get("kind") or "VirtualMachineClusterInstancetype")
    namespace = str((inputs.get("metadata") or {}).get("namespace", "")) if kind == "VirtualMachineInstancetype" else ""
    return (kind, namespace, str(ref.get("name"))) in gpu_instancetypes


def maintenance(base: Mapping[str, Any], head: Mapping[str, Any]) -> dict[str, Maintenance]:
    """Region -> its :class:`Maintenance` from plan ``base`` to plan ``head`` (``gpucell plan --json`` documents);
    regions without node maintenance are left out. A node new in the head is not listed (it joins, nothing runs)."""
    old = {r["urn"]: r for r in index_plan(base).values()}
    regions: dict[str, Maintenance] = {}
    gpu_nodes: set[str] = set()
    head_index = index_plan(head)
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
        if any(_value(new, key) != _value(was, key) for key in _DRAIN_KEYS):
            item.drained.append(node)
        elif _GPU_LINES.findall(new) != _GPU_LINES.findall(was):
            item.reconfigured.append(node)
        else:
            continue
        if "readonly WANT_GPU=" in new:
            gpu_nodes.add(node)
    gpu_instancetypes = _gpu_instancetypes(head_index)
    for region, item in regions.items():
        if not gpu_nodes & {*item.drained, *item.reconfigured}:
            continue
        for resource in head_index.values():
            if (
                resource.get("type") == _VM_TYPE
                and resource["region"] == region
                and _has_gpu(resource, gpu_instancetypes)
            ):
                metadata = (resource.get("inputs") or {}).get("metadata") or {}
                item.gpu_vms.setdefault(str(metadata.get("namespace")), []).append(str(metadata.get("name")))
    return {region: item for region, item in regions.items() if item.drained or item.reconfigured}
