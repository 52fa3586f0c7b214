"""How long ``pulumi up`` takes: the plan's dependency graph walked with documented per-step estimates.

Pulumi runs a resource as soon as everything it depends on is done (explicit ``dependsOn``, its parent, its
provider) and, by default, without a limit on parallelism; gpucell bounds what needs bounding with the graph itself
(rollout chains, the first-join window, decisions 0016 and 0023). So the wall time of a run is the longest path
through the graph, each resource weighted by how long its step takes. :data:`CREATE_SECONDS` and
:data:`UPDATE_SECONDS` are those weights, rough figures for real hardware (a k3s install downloads the release and
starts the node; a maintenance drains it); they say which chain is long and in which order of magnitude, not the
minute.

For a new region every resource is created. Against a base plan only what differs runs: a resource missing from the
base is created, one whose inputs differ is updated, the others take no time.

A GPU node's ``-settle`` whose pool runs acceptance (docs/decisions/0037) embeds its run's estimate
(``ACCEPT_ESTIMATE_SECONDS``): a new node waits for its GPU state (:data:`NEW_GPU_STATE_SECONDS`) and runs it; an
existing one runs it when its GPU configuration (``WANT_GPU``) changes or its quarantine is lifted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpucell.engine.mock_engine import Registration

__all__ = [
    "CHART_SECONDS",
    "CREATE_SECONDS",
    "KIND_SECONDS",
    "NEW_GPU_STATE_SECONDS",
    "UPDATE_SECONDS",
    "Estimate",
    "acceptance_seconds",
    "estimate",
    "human",
    "step_seconds",
    "timeline",
]

CREATE_SECONDS: Mapping[str, float] = {
    "prepare": 5,  # on the control server: no Node yet, nothing to drain
    "install-server": 150,  # installer + k3s release download, etcd member join, API up
    "install-agent": 90,  # installer + release download, kubelet registered
    "settle": 20,  # the node is Ready (a new node has no GPU state to wait for yet)
    "kubeconfig": 5,
    "command": 10,
    "manifests": 120,  # an operator's release manifests (KubeVirt, CDI) applied and awaited
    "kubernetes": 2,  # one object through the API (pulumi-kubernetes awaits readiness where it has a rule)
}
"""Seconds to create one resource, by step (see :func:`step_seconds`)."""
UPDATE_SECONDS: Mapping[str, float] = {
    "prepare": 240,  # cordon and drain: evictions, PodDisruptionBudgets, GPU VMs stopped
    "install-server": 120,  # k3s upgrade or restart of a server, etcd back in quorum
    "install-agent": 90,  # k3s upgrade or restart, kubelet back
    "settle": 90,  # Ready again (and the GPU Operator's report on GPU nodes), uncordoned
    "kubeconfig": 0,
    "command": 10,
    "manifests": 120,
    "kubernetes": 2,
}
"""Seconds to update one resource, by step."""
CHART_SECONDS: Mapping[str, float] = {
    "cilium": 120,
    "cert-manager": 60,
    "gpu-operator": 240,
    "longhorn": 180,
    "kserve-crd": 30,
    "kserve-resources": 90,
    "kserve-runtime-configs": 30,
    "dra-driver-nvidia-gpu": 90,
}
"""Seconds a Helm release takes to install or upgrade and become ready (``skipAwait: false``), by chart name; 120
for a chart not listed."""
KIND_SECONDS: Mapping[str, tuple[float, float]] = {
    # pulumi.com/waitFor: condition=ControlPlaneInitialized (gpucell.workloads.tenant_cluster.cluster_manifest): the
    # create waits while CDI imports the node image into the first control-plane VM's root disk, the VM boots and
    # kubeadm init runs; gpucell's create timeout is 40 min (tenant_cluster._CLUSTER_CREATE_TIMEOUT), a typical run
    # about 10. An update finds the condition already true.
    "kubernetes:cluster.x-k8s.io/v1beta2:Cluster": (600, 2),
}
"""(create, update) seconds of the Kubernetes kinds ``pulumi up`` waits on longer than one API call, by resource
type. A ``VirtualMachine`` is not among them: gpucell sets no ``pulumi.com/waitFor`` on it, so ``pulumi up`` goes on
once the API accepted it (its disks import and it boots afterwards, outside the run's wall time). Checked for issue 30
against pulumi-kubernetes (pinned 4.34.2): ``ReadyCondition`` in ``provider/pkg/await`` waits on a kind without
built-in await logic only for a ``pulumi.com/waitFor`` annotation or with ``PULUMI_K8S_AWAIT_ALL=true`` ("Otherwise
we no-op"), which neither gpucell nor its workflows set; so 2 s, one API call, is the VM's share of the run."""
NEW_GPU_STATE_SECONDS = 300.0
"""Seconds a new GPU node takes to reach its GPU state (the GPU Operator's driver container builds and loads the driver,
then the toolkit, device plugin and validators start): what a new node's ``-settle`` waits for before its acceptance
run."""
_ACCEPT = re.compile(r"^readonly ACCEPT_ESTIMATE_SECONDS=(\d+)$", re.MULTILINE)
_WANT = re.compile(r"^readonly (?:WANT_GPU|QUARANTINE)=(.*)$", re.MULTILINE)
DEFAULT_CHART_SECONDS = 120.0
_FREE = ("pulumi:providers:", "pulumi:pulumi:", "gpucell:index:", "random:")


def _step(r: Registration) -> str:
    if r.type == "command:remote:Command":
        for suffix in ("prepare", "settle", "kubeconfig"):
            if r.name.endswith(f"-{suffix}"):
                return suffix
        if "stdin" in r.inputs:  # only a node's install gets the cluster token
            agent = "k3s-agent-uninstall.sh" in str(r.inputs.get("delete") or "")
            return "install-agent" if agent else "install-server"
        return "command"
    if r.type == "kubernetes:yaml/v2:ConfigFile":
        return "manifests"
    return "kubernetes"


def _script(inputs: Mapping[str, Any] | None) -> str:
    create = (inputs or {}).get("create")
    return create if isinstance(create, str) else json.dumps(create, default=str)


def acceptance_seconds(r: Registration, base: Mapping[str, Any] | None) -> float:
    """The acceptance run a node's ``-settle`` ``r`` adds (0 for anything else): created (``base`` ``None``), its GPU
    state and its run; updated with another ``WANT_GPU`` or ``QUARANTINE`` than ``base`` (its inputs), its run."""
    if r.type != "command:remote:Command" or not r.name.endswith("-settle"):
        return 0.0
    script = _script(r.inputs)
    found = _ACCEPT.search(script)
    if found is None:
        return 0.0
    if base is None:
        return NEW_GPU_STATE_SECONDS + float(found[1])
    return float(found[1]) if _WANT.findall(script) != _WANT.findall(_script(base)) else 0.0


def step_seconds(r: Registration, *, update: bool = False) -> float:
    """Estimated seconds of ``r``'s step when created (or, with ``update``, updated); 0 for components,
    providers, passwords and stack reads."""
    if r.type.startswith(_FREE):
        return 0.0
    if r.type == "kubernetes:helm.sh/v3:Release":
        chart = str(r.inputs.get("chart", "")).rstrip("/").rsplit("/", 1)[-1]
        return float(CHART_SECONDS.get(chart, DEFAULT_CHART_SECONDS))
    if r.type in KIND_SECONDS:
        return float(KIND_SECONDS[r.type][1 if update else 0])
    return float((UPDATE_SECONDS if update else CREATE_SECONDS)[_step(r)])


@dataclass(frozen=True)
class Estimate:
    """The longest chain of a run and its estimated wall time."""

    seconds: float
    """Estimated wall time, seconds."""
    chain: tuple[str, ...]
    """Names of the resources on the longest chain that take time, first to last."""


def _canonical(inputs: Any) -> str:
    return json.dumps(inputs, sort_keys=True, default=str)


def estimate(registrations: list[Registration], base: Mapping[str, Any] | None = None) -> Estimate:
    """The :class:`Estimate` of running ``registrations``: all created (``base`` ``None``: a new region), or against
    ``base`` (URN -> inputs of the base plan): created when missing there, updated when their inputs differ, else
    free. Linear in resources and edges."""
    by_urn, cost, finish, critical = _walk(registrations, base, {})
    if not finish:
        return Estimate(0.0, ())
    end = max(finish, key=lambda u: finish[u])
    total = finish[end]
    last: str | None = end
    chain: list[str] = []
    while last is not None:
        if cost[last] > 0:
            chain.append(by_urn[last].name)
        last = critical[last]
    return Estimate(total, tuple(reversed(chain)))


def timeline(
    registrations: list[Registration],
    base: Mapping[str, Any] | None = None,
    extra: Mapping[str, float] | None = None,
) -> dict[str, tuple[float, float]]:
    """Resource name -> (start, finish) seconds from the run's start, as :func:`estimate` walks it; ``extra``
    (resource name -> seconds) lengthens those steps (a bake a step waits out, for the benchmark). A step that takes
    no time starts and finishes at once."""
    by_urn, cost, finish, _ = _walk(registrations, base, extra or {})
    return {by_urn[u].name: (finish[u] - cost[u], finish[u]) for u in finish}


def _walk(
    registrations: list[Registration], base: Mapping[str, Any] | None, extra: Mapping[str, float]
) -> tuple[dict[str, Registration], dict[str, float], dict[str, float], dict[str, str | None]]:
    """(URN -> registration, URN -> cost, URN -> finish, URN -> the dependency that finished last) of a run."""
    providers = {r.name: r.urn for r in registrations if r.type.startswith("pulumi:providers:")}
    by_urn = {r.urn: r for r in registrations}
    after = {
        r.urn: [u for u in (*r.dependencies, r.parent, providers.get(r.provider, "")) if u in by_urn]
        for r in registrations
    }
    cost: dict[str, float] = {}
    for r in registrations:
        if base is None or r.urn not in base:
            cost[r.urn] = step_seconds(r) + acceptance_seconds(r, None)
        elif _canonical(base[r.urn]) != _canonical(r.inputs):
            cost[r.urn] = step_seconds(r, update=True) + acceptance_seconds(r, base[r.urn])
        else:
            cost[r.urn] = 0.0
        cost[r.urn] += extra.get(r.name, 0.0)
    finish: dict[str, float] = {}
    critical: dict[str, str | None] = {}
    for start in after:
        stack = [start]
        while stack:
            urn = stack[-1]
            pending = [u for u in after[urn] if u not in finish]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            if urn in finish:
                continue
            before = max(after[urn], key=lambda u: finish[u], default=None)
            critical[urn] = before
            finish[urn] = cost[urn] + (finish[before] if before is not None else 0.0)
    return by_urn, cost, finish, critical


def human(seconds: float) -> str:
    """``about 12 min``, ``about 5 h 10 min``; ``nothing to do`` for 0."""
    if seconds <= 0:
        return "nothing to do"
    minutes = max(1, round(seconds / 60))
    hours, minutes = divmod(minutes, 60)
    return f"about {hours} h {minutes} min" if hours else f"about {minutes} min"
