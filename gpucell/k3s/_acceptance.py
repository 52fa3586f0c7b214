"""A GPU node's acceptance run (burn-in): the Job a node's ``-settle`` runs on it before tenants may use it.

A node that joins, or comes back from a GPU reconfiguration, a quarantine or a re-image (its machine ID changed),
gets the taint ``gpucell.io/acceptance:NoSchedule`` (:data:`ACCEPTANCE_TAINT`, which no tenant workload may
tolerate: :data:`gpucell.tenancy.tenant_admission.GPUCELL_TAINTS`) from its ``-settle``, which then waits for the
GPU state as before and runs a Job pinned to the node (``nodeSelector`` ``kubernetes.io/hostname``, tolerating the
acceptance taint, the cordon and the pool's taints) in the GPU Operator's namespace, bounded by the run's timeout:

- ``nvidia`` (``container`` and ``dra`` pools, GPUs on the ``nvidia`` driver): ``dcgmi diag -r <level>`` in DCGM's
  image (:data:`gpucell.catalog.acceptance_facts.DCGM_IMAGE`, ``versions.dcgm``), then, with more than one GPU and
  no MIG, ``all_reduce_perf`` of nccl-tests (``versions.ncclTests``) across them, whose average bus bandwidth must
  reach the pool's floor; both through the ``nvidia`` runtime with every GPU visible (``NVIDIA_VISIBLE_DEVICES=all``:
  the node is drained of GPU workloads and tainted, so nothing else holds them);
- ``host`` (``vm-passthrough`` and ``vm-vgpu`` pools): from the host's ``/sys`` (read-only, unprivileged): the pool's
  GPUs on the PCI bus (``10de:<device>``, as many as ``gpusPerNode``) bound to the driver the mode binds
  (``vfio-pci``; ``nvidia`` on vGPU hosts), each link at its full width, no fatal or non-fatal PCIe AER error
  counted. Link *speed* is not compared: an idle GPU trains its link down to save power.

A pass records ``gpucell.io/acceptance: passed`` and the node's machine ID and lifts the taint; a failure records
``failed`` with the reason (``gpucell.io/acceptance-result``), keeps the taint and ends the ``-settle`` (so the
``pulumi up``) naming the way out. docs/decisions/0037 says why, and why VM pools are checked from the host.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass
from typing import Any

from gpucell.catalog.acceptance_facts import DCGM_IMAGE, NCCL_TESTS_IMAGE, min_bus_bandwidth
from gpucell.k3s._node_state import GPU_OPERATOR_NAMESPACE
from gpucell.k3s._script_files import render
from gpucell.spec import GpuMode, NodePool
from gpucell.spec.acceptance import ACCEPTANCE_TAINT, ACCEPTANCE_TOLERATION, Acceptance
from gpucell.spec.pools import taint_tolerations
from gpucell.spec.versions import Versions

__all__ = [
    "ACCEPTANCE_ANNOTATION",
    "ACCEPTANCE_MACHINE_ANNOTATION",
    "ACCEPTANCE_RESULT_ANNOTATION",
    "ACCEPTANCE_TAINT",
    "AcceptancePlan",
    "acceptance_plan",
    "job_manifest",
    "job_name",
]

ACCEPTANCE_ANNOTATION = "gpucell.io/acceptance"
"""On a GPU node: ``running``, ``passed``, ``failed``, or ``adopted`` (in service before gpucell ran acceptance)."""
ACCEPTANCE_MACHINE_ANNOTATION = "gpucell.io/acceptance-machine"
"""The node's ``status.nodeInfo.machineID`` when its run passed (or it was adopted): another one is a re-image."""
ACCEPTANCE_RESULT_ANNOTATION = "gpucell.io/acceptance-result"
"""Why the node's last run failed (the Job's ``gpucell-acceptance: FAIL`` line, or that it ran out of time)."""
_VM_DRIVERS = {GpuMode.VM_PASSTHROUGH: "vfio-pci", GpuMode.VM_VGPU: "nvidia"}
"""The driver a VM pool's GPUs are bound to on the host: the GPU Operator's vfio-manager binds ``vfio-pci``; a vGPU
host runs NVIDIA's vGPU manager, the ``nvidia`` host driver."""
_RUNTIME_CLASS = "nvidia"
"""The GPU Operator's RuntimeClass, whose runtime honours ``NVIDIA_VISIBLE_DEVICES`` (docs/decisions/0017)."""


@dataclass(frozen=True)
class AcceptancePlan:
    """What one node's acceptance run does, and how long it may take."""

    kind: str
    """``nvidia`` (DCGM diagnostics, all-reduce) or ``host`` (PCI bus, link, AER from the host's ``/sys``)."""
    gpus: int
    """GPUs in the node (count)."""
    pci_device_id: str
    """The model's PCI device ID (lower-case hex, vendor ``10de``)."""
    driver: str
    """``host``: the driver the GPUs must be bound to; ``nvidia``: empty."""
    dcgm_level: int
    """``nvidia``: ``dcgmi diag -r`` level; ``host``: 0."""
    min_bus_bandwidth_gbps: float
    """``nvidia`` with an all-reduce: the least average bus bandwidth, GB/s; else 0 (no all-reduce)."""
    dcgm_image: str
    """DCGM's image, ``repository:tag``."""
    nccl_image: str
    """nccl-tests' image, ``repository:tag``; empty without an all-reduce."""
    seconds: int
    """Estimated duration of the run, seconds (image pulls, DCGM level, all-reduce)."""
    timeout_seconds: int
    """How long the run may take before the node counts as failed, seconds."""

    @property
    def all_reduce(self) -> bool:
        """True when the run includes the all-reduce."""
        return bool(self.nccl_image)


def acceptance_plan(pool: NodePool, versions: Versions) -> AcceptancePlan | None:
    """The acceptance run of a node of ``pool`` (``None``: not a GPU pool, or ``acceptance.skip``)."""
    run = pool.acceptance_run
    if run is None:
        return None
    model = pool.model
    gpus = pool.gpus_per_node or 1
    dcgm_image = f"{DCGM_IMAGE}:{versions.dcgm}"
    if not pool.mode.runs_containers:
        seconds = pool.acceptance_estimate_seconds
        return AcceptancePlan(
            "host",
            gpus,
            model.pci_device_id,
            _VM_DRIVERS[pool.mode],
            0,
            0.0,
            dcgm_image,
            "",
            seconds,
            _timeout(run, seconds),
        )
    all_reduce = pool.acceptance_all_reduce
    floor = 0.0
    if all_reduce:
        found = run.min_bus_bandwidth_gbps or min_bus_bandwidth(model.name, model.hgx is not None)
        assert found is not None  # NodePool._check_acceptance
        floor = float(found)
    seconds = pool.acceptance_estimate_seconds
    nccl_image = f"{NCCL_TESTS_IMAGE}:{versions.nccl_tests}" if all_reduce else ""
    return AcceptancePlan(
        "nvidia", gpus, model.pci_device_id, "", run.dcgm_level, floor, dcgm_image, nccl_image, seconds,
        _timeout(run, seconds),
    )  # fmt: skip


def _timeout(run: Acceptance, seconds: int) -> int:
    """The run's ``timeoutMinutes`` in seconds, else twice ``seconds`` and at least 10 minutes."""
    if run.timeout_minutes is not None:
        return int(run.timeout_minutes) * 60
    return max(600, 2 * seconds)


def job_name(node: str) -> str:
    """``gpucell-acceptance-<node>``; a name over 63 characters (the Job's ``job-name`` label) is cut and given a
    hash of the node name."""
    name = f"gpucell-acceptance-{node}"
    if len(name) <= 63:
        return name
    return f"{name[:54].rstrip('-.')}-{hashlib.sha256(node.encode()).hexdigest()[:8]}"


def _container(name: str, image: str, script: str, *, gpus: bool) -> dict[str, Any]:
    security: dict[str, Any] = (
        {"privileged": True}  # DCGM's diagnostics and NCCL reach every GPU's device files and management interface
        if gpus
        else {
            "runAsNonRoot": True,
            "runAsUser": 65534,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        }
    )
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["bash", "-c", script],
        **({"env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]} if gpus else {}),
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "8Gi"}},
        "securityContext": security,
    }


def _steps(plan: AcceptancePlan) -> list[dict[str, Any]]:
    """The Job's containers in the order they run (all but the last become init containers)."""
    if plan.kind == "host":
        script = render(
            "acceptance/host",
            gpus=plan.gpus,
            device=shlex.quote(plan.pci_device_id),
            driver=shlex.quote(plan.driver),
        )
        return [_container("host-checks", plan.dcgm_image, script, gpus=False)]
    steps = [_container("dcgm-diag", plan.dcgm_image, render("acceptance/dcgm", level=plan.dcgm_level), gpus=True)]
    if plan.all_reduce:
        script = render("acceptance/all-reduce", gpus=plan.gpus, min_busbw=f"{plan.min_bus_bandwidth_gbps:g}")
        steps.append(_container("all-reduce", plan.nccl_image, script, gpus=True))
    return steps


def job_manifest(plan: AcceptancePlan, node: str, pool_taints: list[str]) -> dict[str, Any]:
    """The ``batch/v1`` Job of ``node``'s acceptance run: pinned to the node, tolerating the acceptance taint, the
    cordon (``node.kubernetes.io/unschedulable``) and ``pool_taints``; no retries (``backoffLimit: 0``), ended by
    the API at the run's timeout (``activeDeadlineSeconds``); no service account token."""
    steps = _steps(plan)
    tolerations = [
        dict(ACCEPTANCE_TOLERATION),
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
        *taint_tolerations(pool_taints),
    ]
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "nodeSelector": {"kubernetes.io/hostname": node},
        "tolerations": tolerations,
        "automountServiceAccountToken": False,
        **({"runtimeClassName": _RUNTIME_CLASS} if plan.kind == "nvidia" else {}),
        **({"initContainers": steps[:-1]} if len(steps) > 1 else {}),
        "containers": steps[-1:],
    }
    labels = {"app.kubernetes.io/managed-by": "gpucell", "app.kubernetes.io/name": "gpucell-acceptance"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job_name(node), "namespace": GPU_OPERATOR_NAMESPACE, "labels": labels},
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": plan.timeout_seconds,
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }


def manifest_text(plan: AcceptancePlan, node: str, pool_taints: list[str]) -> str:
    """:func:`job_manifest` as JSON, what the settle applies: one field a line, so that a review's script diff shows
    the fields that change (each container's script stays one line)."""
    return json.dumps(job_manifest(plan, node, pool_taints), indent=1, sort_keys=True)
