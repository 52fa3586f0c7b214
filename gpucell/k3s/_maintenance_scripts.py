"""The scripts that take a node through maintenance and out of the cell, run with ``kubectl`` on a server.

Each node gets two commands besides its install command (:mod:`gpucell.k3s.cluster`), both run over SSH on the cell's
*control server* (the first server in config order that answers over SSH, :mod:`gpucell.stacks.control_server`)
with ``k3s kubectl`` and the admin kubeconfig there:

- ``<node>-prepare``, before the install command. Create and update run :func:`prepare_script`: when the node's
  k3s will restart (a new version, a changed config) it cordons and drains the node; when only its GPU
  configuration changes it cordons it and evicts just its GPU workloads; a quarantined host is cordoned and drained
  and stays so. Delete runs :func:`forget_script`, the last step of a removal: delete the Node object once k3s is
  uninstalled.
- ``<node>-settle``, after the install command and the node's NodePatch (the relabel). Create and update run
  :func:`settle_script`: remove the labels gpucell no longer keeps; wait until the node is Ready on the pinned
  version and, on a GPU node, until the GPU Operator reports the new state, then uncordon (a quarantined host
  stays cordoned). Delete runs :func:`removal_drain_script`, the first step of a removal: cordon and drain.

The scripts decide by *looking at the node*, not at why Pulumi ran them: a run caused by a new SSH key, a
retried failure or the first ``pulumi up`` after an upgrade of gpucell finds nothing to do and changes nothing.
What they compare:

- the kubelet version (``status.nodeInfo.kubeletVersion``) with the pinned k3s version;
- the annotation ``gpucell.io/k3s-config`` (the :func:`gpucell.k3s._scripts.restart_digest` recorded by the last
  successful settle) with the digest of the new config: a node without it is taken as converged;
- the GPU configuration labels (:attr:`gpucell.k3s._node_state.NodeState.gpu_config`) and the annotation
  ``gpucell.io/gpu-config`` with the desired ones.

Prepare records why it cordoned in ``gpucell.io/maintenance`` (and ``gpucell.io/keep-cordoned: "true"`` when the
node was already cordoned by someone else, so settle leaves it cordoned); settle acts only when that annotation
is there. Every wait is bounded (the pool's ``rollout``), and a failure leaves the node cordoned and says what is
left; the next ``pulumi up`` resumes where it stopped.

While a GPU pool rolls, the next window of its nodes still waiting for their own maintenance is *held*: a node's
prepare cordons the pool's next ``rollout.maxUnavailable`` registered hosts in the rollout's order (annotation
``gpucell.io/held: <node>``), so that neither the GPU pods it evicts nor the GPU VMs its settle starts again land on
a node whose turn comes next; the rest of the pool keeps serving. On an SR-IOV vGPU pool every node still typed the
old way is held, wherever it is in line, since KubeVirt renames the type for the whole region under one resource
name. Each held node's own prepare takes it over (or releases it, when it needs nothing); its settle uncordons it. A
GPU node's prepare or settle that fails releases the nodes it held (an ``EXIT`` trap), and the next run holds the
window again as it resumes (docs/decisions/0018, 0035). With ``rollout.bakeMinutes``, each settle then watches its node,
back in service, for that long before the next node of its window begins (annotation ``gpucell.io/baking`` while
it runs, so that a bake cut short is done again).

GPU workloads are pods whose containers or init containers have a limit on an ``nvidia.com/`` resource, or
that hold a DRA ResourceClaim (``spec.resourceClaims``). Pods are evicted through the
Eviction API, so PodDisruptionBudgets hold (a 429 is retried until the timeout). A GPU VM's virt-launcher pod is
not evicted: its VirtualMachineInstance is deleted, which shuts the guest down gracefully, because a VM with GPUs
cannot live-migrate (KubeVirt v1.9.0 ``pkg/virt-handler/vm.go``: host devices and GPUs are not migratable). Its
VirtualMachine is first set to ``runStrategy: Halted``, its own recorded in ``gpucell.io/run-strategy`` with
``gpucell.io/stopped-by-maintenance: <node>``; the node's settle restores it once the node is back in service, or
at once for a quarantined host, which stays cordoned and tainted so the VM starts elsewhere; a removal's drain (and
its last step) restores it at once too, the node staying cordoned until it goes (``Always``,
``RerunOnFailure`` and ``Once`` start again through their runStrategy, ``Manual`` through the ``start``
subresource, as ``virtctl start``).

A tenant cluster's VMs (labelled ``cluster.x-k8s.io/cluster-name`` by CAPK) are never stopped that way: a worker's
Machine is deleted, so that Cluster API drains its node through the tenant cluster and creates a successor
(docs/decisions/0024), and a control-plane VM, ``evictionStrategy: External``, answers the drain's eviction with
429 while CAPK drains its node in the tenant cluster and then deletes it (KubeVirt v1.9.0
``pod-eviction-admitter.go``; CAPK v0.11.2 ``pkg/kubevirt/machine.go``).

The bash is in ``scripts/maintenance/`` (its shell functions in ``scripts/maintenance/functions/``, one file each,
rendered only into the scripts that call them), read by :mod:`gpucell.k3s._script_files`.

Upstream: ``kubectl drain``/``cordon``/``uncordon`` and the Eviction API (kubernetes.io "Safely Drain a Node",
"API-initiated Eviction"); KubeVirt "Node maintenance" (user guide); the GPU Operator state labels in
:mod:`gpucell.k3s._node_state`.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from gpucell.k3s._acceptance import (
    ACCEPTANCE_ANNOTATION,
    ACCEPTANCE_MACHINE_ANNOTATION,
    ACCEPTANCE_RESULT_ANNOTATION,
    ACCEPTANCE_TAINT,
    AcceptancePlan,
    job_name,
    manifest_text,
)
from gpucell.k3s._node_state import (
    GPU_OPERATOR_NAMESPACE,
    QUARANTINE_TAINT,
    STATE_MANAGER_PODS,
    VGPU_STATE_LABEL,
    NodeState,
)
from gpucell.k3s._script_files import render, text
from gpucell.k3s._scripts import KUBECONFIG_PATH
from gpucell.k3s.vgpu_sriov import VGPU_TYPES_ANNOTATION, VGPU_TYPES_RETRIGGER_ANNOTATION
from gpucell.spec import NodeRole
from gpucell.spec.pools import POOL_LABEL

__all__ = [
    "BAKING_ANNOTATION",
    "CONFIG_ANNOTATION",
    "GPU_CONFIG_ANNOTATION",
    "GPU_WAIT_ANNOTATION",
    "HELD_ANNOTATION",
    "KEEP_CORDONED_ANNOTATION",
    "LABELS_ANNOTATION",
    "MAINTENANCE_ANNOTATION",
    "POLL_SECONDS",
    "SOURCE",
    "forget_script",
    "forgotten_script",
    "jsonpath_key",
    "prepare_script",
    "removal_drain_script",
    "settle_script",
]

SOURCE = "gpucell/k3s/_maintenance_scripts.py"
"""The source path the scripts name in their header."""
STOPPED_BY_ANNOTATION = "gpucell.io/stopped-by-maintenance"
"""On a VirtualMachine that maintenance stopped (runStrategy set to ``Halted``): the node it ran on."""
RUN_STRATEGY_ANNOTATION = "gpucell.io/run-strategy"
"""On a VirtualMachine that maintenance stopped: its runStrategy before, restored by the node's settle."""
MAINTENANCE_ANNOTATION = "gpucell.io/maintenance"
"""Set on a node that gpucell cordoned, to why (``k3s-upgrade``, ``k3s-restart``, ``gpu-reconfiguration``,
``quarantine``, ``quarantine-lifted``)."""
KEEP_CORDONED_ANNOTATION = "gpucell.io/keep-cordoned"
"""``"true"`` on a node that was already cordoned when gpucell's maintenance began: it stays cordoned after."""
HELD_ANNOTATION = "gpucell.io/held"
"""On a node of a GPU pool cordoned because another node of its pool began its maintenance (the value names it)
while this one still waits for its own: no GPU pod or VM the rollout moves lands there meanwhile."""
BAKING_ANNOTATION = "gpucell.io/baking"
"""On a node whose settle is baking it (``rollout.bakeMinutes``), the k3s version it bakes on; removed when the bake
passes. A settle that finds it (the bake failed or was cut short) bakes the node again."""
CONFIG_ANNOTATION = "gpucell.io/k3s-config"
"""The :func:`gpucell.k3s._scripts.restart_digest` the node last converged to."""
GPU_CONFIG_ANNOTATION = "gpucell.io/gpu-config"
"""The :attr:`gpucell.k3s._node_state.NodeState.gpu_profile` the node last settled in: what prepare compares, since the
labels alone do not tell an SR-IOV vGPU type nor ``dra`` from ``container``."""
GPU_WAIT_ANNOTATION = "gpucell.io/gpu-state-wait"
"""Set by a settle whose wait for the GPU state ran out (to the first thing missing): the next settle re-triggers
what must act (the MIG or vGPU manager, the VF typing, the device plugin) before it waits again."""
LABELS_ANNOTATION = "gpucell.io/labels"
"""The label keys gpucell kept on the node at the last settle, comma-separated: a key that leaves the pool's labels
is removed from the node, even when k3s's registration still shares it (server-side apply would keep it then)."""
POLL_SECONDS = 5
"""Seconds between two looks at the node in every wait."""
VGPU_PAUSED_OPERANDS = ("nvidia.com/gpu.deploy.sandbox-validator", "nvidia.com/gpu.deploy.sandbox-device-plugin")
"""The operand labels the vGPU device manager sets to ``paused-for-vgpu-change`` while it applies a type and can
leave so (NVIDIA/gpu-operator#2845; vgpu-device-manager ``cmd/nvidia-k8s-vgpu-dm/main.go`` ``shutdownGPUOperands``)."""
KC_ATTEMPTS = 13
"""Attempts of every ``kubectl`` call but ``drain`` and ``create`` that did not reach the API before the script
gives up on it: 12 x :data:`POLL_SECONDS`, a minute, longer than a k3s server takes to restart (issue 30: 3 attempts
over 10 s failed a step on an API that was down about 20 s)."""
KC_UNREACHABLE = (
    "unable to connect|connection refused|connection reset|was refused|i/o timeout|Client.Timeout|TLS handshake"
    "|no route to host|ServiceUnavailable|currently unable to handle|etcdserver|EOF$|timed out|http2: "
)
"""What kubectl's error says when the call did not reach a working API (an extended regular expression, matched
without case): retried. Any other error is an answer of the API and fails at once."""
RETRIGGER_POLLS = 12
"""Polls (x :data:`POLL_SECONDS`: one minute) a GPU node's state may stay ``failed`` after the manager was restarted
before the wait ends, and between two restarts of the device plugin while only the resources are wrong."""
PLUGIN_RESTARTS = 2
"""Restarts of the device plugin (one every :data:`RETRIGGER_POLLS`) after which a node that still advertises fewer
GPU resources than it has ends its wait: a GPU off the bus (Xid 79) is not found again by a restart
(kubevirt/kubevirt#7084 is a plugin that missed new devices; one restart fixes that), so settle names the missing
count and the host's quarantine instead of restarting the plugin for the rest of ``gpuStateTimeoutMinutes``."""
STUCK_POLLS = 60
"""Polls (x :data:`POLL_SECONDS`: five minutes) a state may stay neither ``success`` nor ``failed`` before settle
restarts what must act, once; 1 when the node's last wait ran out (:data:`GPU_WAIT_ANNOTATION`)."""
API_ATTEMPTS = 24
"""Rounds of looks at ``/readyz`` (this server's API, then the cell's API endpoint) before the API counts as down
(x :data:`POLL_SECONDS`)."""


def jsonpath_key(key: str) -> str:
    """A label or annotation key as a kubectl JSONPath member: dots escaped (``nvidia\\.com/mig\\.config``)."""
    return key.replace(".", "\\.")


_ANNOTATIONS = {
    "maintenance": MAINTENANCE_ANNOTATION,
    "maintenance_path": jsonpath_key(MAINTENANCE_ANNOTATION),
    "config": CONFIG_ANNOTATION,
    "config_path": jsonpath_key(CONFIG_ANNOTATION),
    "keep_cordoned": KEEP_CORDONED_ANNOTATION,
    "keep_cordoned_path": jsonpath_key(KEEP_CORDONED_ANNOTATION),
    "held": HELD_ANNOTATION,
    "held_path": jsonpath_key(HELD_ANNOTATION),
    "baking": BAKING_ANNOTATION,
    "baking_path": jsonpath_key(BAKING_ANNOTATION),
    "labels": LABELS_ANNOTATION,
    "stopped_by": STOPPED_BY_ANNOTATION,
    "stopped_by_path": jsonpath_key(STOPPED_BY_ANNOTATION),
    "run_strategy": RUN_STRATEGY_ANNOTATION,
    "run_strategy_path": jsonpath_key(RUN_STRATEGY_ANNOTATION),
    "gpu_config": GPU_CONFIG_ANNOTATION,
    "gpu_config_path": jsonpath_key(GPU_CONFIG_ANNOTATION),
    "labels_path": jsonpath_key(LABELS_ANNOTATION),
    "pool_label": POOL_LABEL,
}


def _header(title: str, node: str, functions: tuple[str, ...], api_endpoint: str = "", **values: object) -> str:
    """The preamble, the variables and ``functions`` (each a file of ``scripts/maintenance/functions/``), rendered
    with the annotations, the API and ``kubectl`` bounds and ``values``."""
    variables = render(
        "maintenance/variables",
        kubeconfig=KUBECONFIG_PATH,
        node=shlex.quote(node),
        poll=POLL_SECONDS,
        api_endpoint=shlex.quote(api_endpoint),
    )
    parts = [
        render(
            f"maintenance/functions/{name}",
            api_attempts=API_ATTEMPTS,
            api_timeout=API_ATTEMPTS * POLL_SECONDS,
            kc_attempts=KC_ATTEMPTS,
            kc_seconds=(KC_ATTEMPTS - 1) * POLL_SECONDS,
            unreachable=KC_UNREACHABLE,
            poll=POLL_SECONDS,
            **_ANNOTATIONS,
            **values,
        )
        for name in functions
    ]
    return render("preamble", title=title, source=SOURCE) + "\n" + variables + "\n".join(parts) + "\n"


_BASE = ("kc", "api_up", "node_exists", "node_field")
_DRAIN = ("gpu_pods", "cluster_api_vm", "replace_cluster_api_workers", "cluster_api_left", "stop_gpu_vms", "drain_node")


def _attempts(minutes: int) -> int:
    return max(1, minutes * 60 // POLL_SECONDS)


def _readonly(name: str, value: object) -> str:
    """A header line of the scripts: ``readonly NAME=<value>``, the value quoted for bash."""
    return f"readonly {name}={shlex.quote(str(value))}\n"


def _array(name: str, values: Iterable[object]) -> str:
    """A header line of the scripts: ``readonly NAME=(<values>)``, each quoted for bash; ``()`` for none."""
    return f"readonly {name}=({' '.join(shlex.quote(str(value)) for value in values)})\n"


def _prepare_gpu_values(state: NodeState, next_in_line: tuple[str, ...]) -> str:
    """The GPU part of the prepare's header, which its ``reasons_of`` loops over: the GPU configuration labels (as
    JSONPath members) and their values, the recorded configuration, the resources the node advertises; empty
    arrays on a node without GPUs. On a GPU node (whose prepare holds the next window of its pool) also ``POOL``,
    ``NEXT_IN_LINE`` (the window) and ``HOLD_RETYPED`` (``true`` on an SR-IOV vGPU pool: a node still typed the old
    way is held wherever it is in line)."""
    values = (
        _readonly("WANT_GPU", state.gpu_profile)
        + _array("GPU_LABEL_PATHS", map(jsonpath_key, state.gpu_config))
        + _array("GPU_LABEL_VALUES", state.gpu_config.values())
        + _array("GPU_RESOURCE_PATHS", map(jsonpath_key, state.resources) if state.gpu_profile else ())
    )
    if state.is_gpu:
        values += (
            _readonly("POOL", state.labels[POOL_LABEL])
            + _array("NEXT_IN_LINE", next_in_line)
            + _readonly("HOLD_RETYPED", "true" if state.vf_type else "false")
        )
    return values


def prepare_script(
    state: NodeState, version: str, digest: str, *, api_endpoint: str = "", next_in_line: tuple[str, ...] = ()
) -> str:
    """Create/update of ``<node>-prepare``: take the node out of service when what it runs must change.

    Reasons, from the live Node: ``k3s-upgrade`` (kubelet version is not ``version``), ``k3s-restart`` (annotation
    ``gpucell.io/k3s-config`` present and not ``digest``), ``gpu-reconfiguration`` (a label of
    ``state.gpu_config`` or the recorded ``gpucell.io/gpu-config`` differs), ``quarantine`` (``state.quarantine``),
    plus any left in ``gpucell.io/maintenance`` by an interrupted run (``quarantine`` there becomes
    ``quarantine-lifted`` once the config lifts it). With none it exits 0, releasing the node when another node of
    its pool held it; also when k3s is not installed on the control server (a new cell) or the node is not
    registered (a new node). Otherwise: record the reasons, cordon, on a GPU node hold the nodes of
    ``next_in_line`` (the pool's next ``rollout.maxUnavailable`` registered hosts after this one, in the rollout's
    order; on an SR-IOV vGPU pool also every node of the pool, label ``gpucell.io/pool``, still on another GPU
    configuration) that are in service and still need another k3s version or GPU configuration, and drain (k3s
    reasons and a quarantine) or evict only GPU workloads, within ``state.rollout.drain_timeout_minutes``; exits 1
    with the pods left when that runs out, releasing the nodes it held (an ``EXIT`` trap). A NotReady node fails at
    once (a quarantined one is only cordoned). ``api_endpoint`` (``https://<apiEndpoint>:<port>``) is tried when
    this server's API does not answer.
    """
    hold = state.is_gpu
    body = render(
        "maintenance/prepare",
        version=shlex.quote(version),
        digest=shlex.quote(digest),
        drain_timeout=state.rollout.drain_timeout_minutes * 60,
        drain_attempts=_attempts(state.rollout.drain_timeout_minutes),
        quarantine=shlex.quote(state.quarantine),
        gpu_values=_prepare_gpu_values(state, next_in_line),
        hold="trap release_on_failure EXIT\nhold_peers\n" if hold else "",
        **_ANNOTATIONS,
    )
    functions = (*_BASE, *_DRAIN, "evict", "evict_gpu_pods", *(("hold_peers", "release_peers") if hold else ()))
    title = f"gpucell: prepare {state.name} for maintenance"
    return _header(title, state.name, functions, api_endpoint) + body


def settle_script(
    state: NodeState,
    version: str,
    digest: str,
    *,
    api_endpoint: str = "",
    acceptance: AcceptancePlan | None = None,
) -> str:
    """Create/update of ``<node>-settle``: bring a node that prepare took out of service back.

    First, in every case, it removes the labels listed in ``gpucell.io/labels`` (what gpucell kept at the last
    settle) that ``state.labels`` no longer has, and records the current keys there. Without
    ``gpucell.io/maintenance`` on the node it then only records ``gpucell.io/k3s-config: <digest>`` and exits
    0. A quarantined node (``state.quarantine``) is waited Ready after a k3s change, keeps ``gpucell.io/maintenance:
    quarantine`` and stays cordoned; the GPU VMs stopped on it start again elsewhere. Otherwise it waits (``READY`` x
    :data:`POLL_SECONDS`, 5 minutes) until the node is Ready on ``version``; on a GPU node also until, within
    ``state.rollout.gpu_state_timeout_minutes``, every label of ``state.state_labels`` is ``success`` (and on an
    SR-IOV vGPU node its VF-typing service reports ``success <type>``), ``status.allocatable`` has
    ``state.resources`` exactly, and the pods of the GPU Operator (and of ``state.pod_namespaces``) on the node are
    ready, but those named ``state.skip_pods*``. A ``failed`` state restarts its manager (retypes the VFs) and ends
    the wait a minute later if it stays; a state stuck elsewhere five minutes gets the same restart once; a wait
    that runs out leaves ``gpucell.io/gpu-state-wait`` so that the next settle re-triggers at once. Then it records
    the digest, removes ``gpucell.io/maintenance`` and uncordons (unless ``gpucell.io/keep-cordoned``). Exits 1
    naming what is missing, leaving the node cordoned; on a GPU node it then releases the nodes its prepare held.

    With ``state.rollout.bake_minutes``, a node it put back in service (or whose bake the last run did not finish,
    annotation ``gpucell.io/baking``) must then stay Ready on ``version`` that long, polled every
    :data:`POLL_SECONDS`; exits 1 naming what it reports when it does not, which stops the pool's rollout.

    With ``acceptance`` (a GPU node whose pool runs acceptance, :mod:`gpucell.k3s._acceptance`): a node that joins,
    was reconfigured, comes back from a quarantine, was re-imaged or failed an earlier run first gets the taint
    ``gpucell.io/acceptance``; after the GPU state is reached the node's acceptance Job runs, and its pass lifts the
    taint (then the node is uncordoned as above) while its failure keeps taint and cordon, records the reason on the
    node and exits 1 naming the way out. A node in service before (a ``gpucell.io/k3s-config`` record, no
    acceptance record) is adopted without a run.
    """
    gpu_values = gpu_state_function = gpu_wait = release_trap = ""
    if state.is_gpu:
        gpu_values = _settle_gpu_values(state)
        release_trap = "trap release_on_failure EXIT\n"
        gpu_state_function = render(
            "maintenance/gpu-state-function", vf_types_path=jsonpath_key(VGPU_TYPES_ANNOTATION), vf_types=_VF_TYPES
        )
        gpu_wait = _gpu_wait(state)
    baking = state.rollout.bake_minutes > 0
    body = render(
        "maintenance/settle",
        version=shlex.quote(version),
        digest=shlex.quote(digest),
        ready_attempts=_attempts(5),
        want_labels=shlex.quote(",".join(state.labels)),
        gpu_profile=shlex.quote(state.gpu_profile),
        quarantine=shlex.quote(state.quarantine),
        gpu_values=gpu_values,
        gpu_state_function=gpu_state_function,
        gpu_wait=gpu_wait,
        release_trap=release_trap,
        bake="bake\n" if baking else "",
        bake_unfinished="  bake_unfinished\n" if baking else "",
        **_acceptance_blocks(state, acceptance),
        **_ANNOTATIONS,
    )
    title = f"gpucell: settle {state.name} after maintenance"
    functions = (
        *_BASE,
        "start_stopped_vms",
        *(("release_peers",) if state.is_gpu else ()),
        *(("bake",) if baking else ()),
    )
    bake_values = {
        "bake_attempts": _attempts(state.rollout.bake_minutes),
        "bake_seconds": state.rollout.bake_minutes * 60,
    }
    return _header(title, state.name, functions, api_endpoint, **bake_values) + body


def _acceptance_blocks(state: NodeState, plan: AcceptancePlan | None) -> dict[str, str]:
    """The settle's acceptance blocks: its functions (with the Job's manifest), the check of whether the node is
    due, the taint, the run; all empty without ``plan`` or on a node without GPUs."""
    if plan is None or not state.is_gpu:
        return dict.fromkeys(("acceptance_functions", "accept_due", "accept_hold", "accept_run"), "")
    taints = [
        f"{t['key']}={t['value']}:{t['effect']}" if "value" in t else f"{t['key']}:{t['effect']}" for t in state.taints
    ]
    functions = render(
        "maintenance/acceptance",
        namespace=shlex.quote(GPU_OPERATOR_NAMESPACE),
        job_name=shlex.quote(job_name(state.name)),
        attempts=max(1, plan.timeout_seconds // POLL_SECONDS),
        timeout=plan.timeout_seconds,
        estimate=plan.seconds,
        manifest=shlex.quote(manifest_text(plan, state.name, taints)),
        acceptance=ACCEPTANCE_ANNOTATION,
        acceptance_path=jsonpath_key(ACCEPTANCE_ANNOTATION),
        machine=ACCEPTANCE_MACHINE_ANNOTATION,
        machine_path=jsonpath_key(ACCEPTANCE_MACHINE_ANNOTATION),
        result=ACCEPTANCE_RESULT_ANNOTATION,
        result_path=jsonpath_key(ACCEPTANCE_RESULT_ANNOTATION),
        taint=ACCEPTANCE_TAINT,
        config_path=jsonpath_key(CONFIG_ANNOTATION),
    )
    return {
        "acceptance_functions": functions,
        "accept_due": 'accept="$(acceptance_due "$reasons")"\n',
        "accept_hold": 'if [ -n "$accept" ]; then\n  acceptance_hold "$accept"\nfi\n',
        "accept_run": 'if [ -n "$accept" ]; then\n  run_acceptance "$accept" || exit 1\nfi\n',
    }


_VF_TYPES = "SR-IOV vGPU typing"
"""What the settle calls the VF-typing service's report in its problem lines."""


def _retriggers(state: NodeState) -> list[tuple[str, str, str, str, str]]:
    """What the settle's wait may re-trigger, in order: ``(what, function, namespace, selector, why)``, ``what`` as
    the problem lines name it. A state label's manager (its pods restarted; the vGPU device manager after its paused
    operands are set back), then the SR-IOV VF typing (``retype_vfs``, which takes no namespace or selector)."""
    found = []
    for label in state.state_labels:
        namespace, selector = STATE_MANAGER_PODS[label]
        restart = "restart_vgpu_manager" if label == VGPU_STATE_LABEL else "restart_pods"
        found.append((label, restart, namespace, selector, "NVIDIA/gpu-operator#2833"))
    if state.vf_type:
        found.append((_VF_TYPES, "retype_vfs", "", "", "gpucell-vgpu-types.service on the host"))
    return found


def _plugin(state: NodeState) -> tuple[str, str]:
    """The device plugin's ``(namespace, selector)`` the wait restarts while only the resources are wrong; empty
    strings when it has none or the node advertises no resources."""
    return state.device_plugin if state.device_plugin is not None and state.resources else ("", "")


def _settle_gpu_values(state: NodeState) -> str:
    """The GPU part of the settle's header, which its wait loops over: the attempts and timeout, the state labels
    (and as JSONPath members), the VF typing's wanted report, the resources and their counts, the pod namespaces,
    and with anything to re-trigger the re-triggers (:func:`_retriggers`) and the device plugin."""
    values = (
        _readonly("GPU_ATTEMPTS", _attempts(state.rollout.gpu_state_timeout_minutes))
        + _readonly("GPU_TIMEOUT", state.rollout.gpu_state_timeout_minutes * 60)
        + _array("STATE_LABELS", state.state_labels)
        + _array("STATE_LABEL_PATHS", map(jsonpath_key, state.state_labels))
        + _readonly("WANT_VF_TYPES", f"success {state.vf_type}" if state.vf_type else "")
        + _array("RESOURCES", state.resources)
        + _array("RESOURCE_PATHS", map(jsonpath_key, state.resources))
        + _array("RESOURCE_COUNTS", state.resources.values())
        + _array("POD_NAMESPACES", (GPU_OPERATOR_NAMESPACE, *state.pod_namespaces))
        + _readonly("SKIP_PODS", state.skip_pods)
        + _readonly("POOL", state.labels[POOL_LABEL])
    )
    retriggers = _retriggers(state)
    plugin_namespace, plugin_selector = _plugin(state)
    if retriggers or plugin_namespace:
        columns = list(zip(*retriggers, strict=True)) or [(), (), (), (), ()]
        for name, column in zip(("WHAT", "DO", "NS", "SELECTOR", "WHY"), columns, strict=True):
            values += _array(f"RETRIGGER_{name}", column)
        values += _readonly("PLUGIN_NS", plugin_namespace) + _readonly("PLUGIN_SELECTOR", plugin_selector)
        values += _readonly("POOL_NAME", state.labels[POOL_LABEL])
    return values


def _gpu_wait(state: NodeState) -> str:
    """The settle's wait for the GPU state, with the restarts that re-trigger a stuck manager, VF typing or device
    plugin (a loop over the header's arrays, :func:`_settle_gpu_values`)."""
    retriggers = _retriggers(state)
    any_retrigger = bool(retriggers) or bool(_plugin(state)[0])
    helpers = ""
    if any(function == "restart_vgpu_manager" for _, function, *_ in retriggers):
        helpers += render("maintenance/unpause", operands=" ".join(VGPU_PAUSED_OPERANDS))
    if state.vf_type:
        helpers += render("maintenance/retype", retrigger=VGPU_TYPES_RETRIGGER_ANNOTATION)
    return render(
        "maintenance/gpu-wait",
        operator_ns=GPU_OPERATOR_NAMESPACE,
        restart_pods=render(
            "maintenance/restart-pods",
            retrigger_polls=RETRIGGER_POLLS,
            plugin_restarts=PLUGIN_RESTARTS,
            quarantine_taint=QUARANTINE_TAINT,
        )
        + helpers
        if any_retrigger
        else "",
        stuck=render("maintenance/stuck", stuck_polls=STUCK_POLLS) if any_retrigger else "",
        retriggers=text("maintenance/retriggers") if any_retrigger else "",
        again=" (it re-triggers them first)" if any_retrigger else "",
        gpu_wait_key=GPU_WAIT_ANNOTATION,
        gpu_wait_path=jsonpath_key(GPU_WAIT_ANNOTATION),
    )


def removal_drain_script(state: NodeState, *, api_endpoint: str = "", longhorn: bool = False) -> str:
    """Delete of ``<node>-settle``, the first step of removing a node: cordon, stop its GPU VMs and drain it
    (``kubectl drain --ignore-daemonsets --delete-emptydir-data``) within ``state.rollout.drain_timeout_minutes``;
    with ``longhorn``, then have Longhorn rebuild the node's replicas elsewhere (``evictionRequested`` on its
    ``nodes.longhorn.io``) and wait, as long again, until none is left on it.

    A server is not removed while another server (label ``node-role.kubernetes.io/etcd=true``) is not Ready: exits
    1 before anything changes, naming it (etcd quorum). Exits 0 without draining when the node is not registered,
    when it is not Ready (a dead kubelet cannot confirm evictions; the pods go with the Node object) or when k3s is
    not on the control server; exits 1 when the API does not answer or the drain (or the eviction of replicas)
    fails, which stops the removal before anything is uninstalled. A node found NotReady after its drain failed (the
    host died mid-drain) counts as dead: exits 0. In every case but a down API, the GPU VMs a drain of this node
    stopped (``gpucell.io/stopped-by-maintenance: <node>``, on this run or an earlier one) get their recorded
    runStrategy back and start on another node: no settle of a leaving node runs again to give it back (issue 30).
    """
    body = render(
        "maintenance/removal-drain",
        drain_timeout=state.rollout.drain_timeout_minutes * 60,
        drain_attempts=f"readonly DRAIN_ATTEMPTS={_attempts(state.rollout.drain_timeout_minutes)}\n"
        if longhorn
        else "",
        quorum=text("maintenance/quorum") if state.role is NodeRole.SERVER else "",
        replicas=text("maintenance/replicas") if longhorn else "",
    )
    title = f"gpucell: drain {state.name} before removing it"
    return _header(title, state.name, (*_BASE, *_DRAIN, "start_stopped_vms"), api_endpoint) + body


def forget_script(node: str, *, forgotten: bool = False, api_endpoint: str = "") -> str:
    """Delete of ``<node>-prepare``, the last step of removing a node: delete its Node object (k3s is uninstalled
    from it by then, so it cannot register again), wait up to 5 minutes for it to be gone, then delete its k3s node
    password (the ``kube-system`` Secret ``<node>.node-password.k3s``: k3s-io/k3s#6054, a host rebuilt under the same
    name could not join again) and give the GPU VMs a drain of it stopped their runStrategy back. A server's Node is
    already gone (it deleted its own to leave etcd). Exits 0 when k3s is not on the control server. ``forgotten``
    (``removalPolicy: forget``, nothing was uninstalled): exits 1 without deleting anything when the Node is Ready
    (its k3s still runs); else deleting a server's Node makes k3s remove its etcd member."""
    body = render(
        "maintenance/forget",
        attempts=_attempts(5),
        timeout=300,
        alive_guard=text("maintenance/alive-guard") if forgotten else "",
    )
    functions = ("kc", "api_up", "node_exists", *(("node_field",) if forgotten else ()), "start_stopped_vms")
    return _header(f"gpucell: delete node {node} from the cell", node, functions, api_endpoint) + body


def forgotten_script(node: str) -> str:
    """Create/update of ``<node>-prepare`` and ``-settle`` of a ``removalPolicy: forget`` host: nothing to do (its
    machine is gone); says so."""
    header = render("preamble", title=f"gpucell: {node} is forgotten", source=SOURCE)
    return header + f"\nreadonly NODE={shlex.quote(node)}\n" + text("maintenance/forgotten")
