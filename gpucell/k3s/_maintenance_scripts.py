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

While a GPU pool rolls, its nodes still waiting for their own maintenance are *held*: the first node's prepare
cordons them (annotation ``gpucell.io/held: <node>``), so that neither the GPU pods it evicts nor the GPU VMs a
settle starts again land on a node that is next in line, and an SR-IOV vGPU type that KubeVirt renames for the
whole region is not handed out on a node still typed the old way. Each held node's own prepare takes it over (or
releases it, when it needs nothing); its settle uncordons it (docs/decisions/0018).

GPU workloads are pods whose containers or init containers have a limit on an ``nvidia.com/`` resource, or
that hold a DRA ResourceClaim (``spec.resourceClaims``). Pods are evicted through the
Eviction API, so PodDisruptionBudgets hold (a 429 is retried until the timeout). A GPU VM's virt-launcher pod is
not evicted: its VirtualMachineInstance is deleted, which shuts the guest down gracefully, because a VM with GPUs
cannot live-migrate (KubeVirt v1.9.0 ``pkg/virt-handler/vm.go``: host devices and GPUs are not migratable). Its
VirtualMachine is first set to ``runStrategy: Halted``, its own recorded in ``gpucell.io/run-strategy`` with
``gpucell.io/stopped-by-maintenance: <node>``; the node's settle restores it once the node is back in service, or
at once for a quarantined host, which stays cordoned and tainted so the VM starts elsewhere (``Always``,
``RerunOnFailure`` and ``Once`` start again through their runStrategy, ``Manual`` through the ``start``
subresource, as ``virtctl start``).

A tenant cluster's VMs (labelled ``cluster.x-k8s.io/cluster-name`` by CAPK) are never stopped that way: a worker's
Machine is deleted, so that Cluster API drains its node through the tenant cluster and creates a successor
(docs/decisions/0024), and a control-plane VM, ``evictionStrategy: External``, answers the drain's eviction with
429 while CAPK drains its node in the tenant cluster and then deletes it (KubeVirt v1.9.0
``pod-eviction-admitter.go``; CAPK v0.11.2 ``pkg/kubevirt/machine.go``).

Upstream: ``kubectl drain``/``cordon``/``uncordon`` and the Eviction API (kubernetes.io "Safely Drain a Node",
"API-initiated Eviction"); KubeVirt "Node maintenance" (user guide); the GPU Operator state labels in
:mod:`gpucell.k3s._node_state`.
"""

from __future__ import annotations

import shlex

from gpucell.k3s._node_state import GPU_OPERATOR_NAMESPACE, STATE_MANAGER_PODS, VGPU_STATE_LABEL, NodeState
from gpucell.k3s._scripts import _PREAMBLE, KUBECONFIG_PATH
from gpucell.k3s.vgpu_sriov import VGPU_TYPES_ANNOTATION, VGPU_TYPES_RETRIGGER_ANNOTATION
from gpucell.spec import NodeRole
from gpucell.spec.pools import POOL_LABEL

__all__ = [
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

SOURCE = "gpucell/_maintenance_scripts.py"  # the old path: a new one would update every node's commands (0033)
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
KC_ATTEMPTS = 3
"""Attempts of every ``kubectl`` call but ``drain`` and ``create`` before the script gives up on it."""
RETRIGGER_POLLS = 12
"""Polls (x :data:`POLL_SECONDS`: one minute) a GPU node's state may stay ``failed`` after the manager was restarted
before the wait ends, and between two restarts of the device plugin while only the resources are wrong."""
STUCK_POLLS = 60
"""Polls (x :data:`POLL_SECONDS`: five minutes) a state may stay neither ``success`` nor ``failed`` before settle
restarts what must act, once; 1 when the node's last wait ran out (:data:`GPU_WAIT_ANNOTATION`)."""
API_ATTEMPTS = 24
"""Rounds of looks at ``/readyz`` (this server's API, then the cell's API endpoint) before the API counts as down
(x :data:`POLL_SECONDS`)."""


def jsonpath_key(key: str) -> str:
    """A label or annotation key as a kubectl JSONPath member: dots escaped (``nvidia\\.com/mig\\.config``)."""
    return key.replace(".", "\\.")


_VARIABLES = """\
readonly K3S_BIN=/usr/local/bin/k3s
readonly KUBECONFIG_FILE={kubeconfig}
readonly NODE={node}
readonly POLL_SECONDS={poll}
readonly API_ENDPOINT={api_endpoint}

"""
# Shell functions, each rendered only into the scripts that call it (shellcheck flags unused ones).
_FUNCTIONS = {
    "kc": """\
API_SERVER=""

kc_once() {{
  if [ -n "$API_SERVER" ]; then
    as_root "$K3S_BIN" kubectl --kubeconfig "$KUBECONFIG_FILE" --server "$API_SERVER" --request-timeout=60s "$@"
  else
    as_root "$K3S_BIN" kubectl --kubeconfig "$KUBECONFIG_FILE" --request-timeout=60s "$@"
  fi
}}

# kubectl, with a call that fails retried ({kc_attempts} attempts, {poll} s apart): an API server restarting or a
# timeout must not end the script (set -e). Not retried: drain (bounded by its own --timeout) and create (an
# eviction, whose 429 its callers retry until their timeout).
kc() {{
  local attempt
  for attempt in $(seq 1 {kc_attempts}); do
    if kc_once "$@"; then
      return 0
    fi
    case "$1" in
      drain | create) return 1 ;;
    esac
    if [ "$attempt" -lt {kc_attempts} ]; then
      echo "gpucell: kubectl $1 failed (attempt $attempt of {kc_attempts}); retrying in $POLL_SECONDS s" >&2
      sleep "$POLL_SECONDS"
    fi
  done
  echo "gpucell: kubectl $* failed {kc_attempts} times" >&2
  return 1
}}
""",
    "api_up": """\
# An API server that answers /readyz: this server's own (it may be restarting), else the cell's API endpoint, which
# reaches the other servers; each tried in turn, for up to {api_timeout} s in all. The one found serves every later
# call (API_SERVER, empty for this server's own).
api_up() {{
  local round endpoint
  local -a endpoints=("")
  if [ -n "$API_ENDPOINT" ]; then
    endpoints+=("$API_ENDPOINT")
  fi
  for round in $(seq 1 {api_attempts}); do
    for endpoint in "${{endpoints[@]}}"; do
      API_SERVER=$endpoint
      if kc_once get --raw=/readyz >/dev/null 2>&1; then
        if [ -n "$endpoint" ]; then
          echo "gpucell: using the API at $endpoint: this server's own does not answer"
        fi
        return 0
      fi
      if [ "$round" -eq 1 ] && [ -z "$endpoint" ] && [ -n "$API_ENDPOINT" ]; then
        echo "gpucell: the API on this server (127.0.0.1) does not answer; trying the cell's API endpoint" \\
          "$API_ENDPOINT" >&2
      fi
    done
    sleep "$POLL_SECONDS"
  done
  API_SERVER=""
  if [ -n "$API_ENDPOINT" ]; then
    echo "gpucell: neither this server's API nor $API_ENDPOINT answered within {api_timeout} s" >&2
  fi
  return 1
}}
""",
    "node_exists": """\
node_exists() {{
  [ -n "$(kc get node "$NODE" --ignore-not-found -o name)" ]
}}
""",
    "node_field": """\
# One JSONPath template evaluated on Node $1, e.g. '{{.spec.unschedulable}}'.
field_of() {{
  kc get node "$1" -o "jsonpath=$2"
}}

# One JSONPath template evaluated on this node.
node_field() {{
  field_of "$NODE" "$1"
}}
""",
    "gpu_pods": """\
# "<namespace> <pod> <owner kind> <owner name>", tab-separated, of every unfinished pod on the node that holds a
# GPU: a limit on an nvidia.com/ resource (a GPU, MIG slice, passthrough GPU or vGPU) in a container or an init
# container, or a DRA ResourceClaim (spec.resourceClaims: no extended resource shows such a GPU).
gpu_pods() {{
  local template='{{range .items[*]}}{{.metadata.namespace}}{{"\\t"}}{{.metadata.name}}{{"\\t"}}'
  template+='{{.metadata.ownerReferences[0].kind}}{{"\\t"}}{{.metadata.ownerReferences[0].name}}{{"\\t"}}'
  template+='{{.spec.containers[*].resources.limits}} {{.spec.initContainers[*].resources.limits}}{{"\\t"}}'
  template+='{{.spec.resourceClaims[*].name}}{{"\\n"}}{{end}}'
  kc get pods --all-namespaces --field-selector "spec.nodeName=$NODE,status.phase!=Succeeded,status.phase!=Failed" \\
    -o "jsonpath=$template" \\
    | awk -F '\\t' '$5 ~ /"nvidia\\.com\\// || $6 != "" {{ print $1 "\\t" $2 "\\t" $3 "\\t" $4 }}'
}}
""",
    "cluster_api_vm": """\
# True for a VirtualMachineInstance of a tenant cluster (CAPK labels every VM it makes with its Cluster's name):
# Cluster API takes those down itself (replace_cluster_api_workers; KubeVirt's External eviction for the others).
cluster_api_vm() {{
  [ -n "$(kc -n "$1" get virtualmachineinstances.kubevirt.io "$2" --ignore-not-found \\
    -o 'jsonpath={{.metadata.labels.cluster\\.x-k8s\\.io/cluster-name}}')" ]
}}
""",
    "replace_cluster_api_workers": """\
# Tenant-cluster workers on the node (all of them with "all", else those holding GPUs) are not stopped: their
# Machines are deleted, so Cluster API drains each node through its tenant cluster, deletes the VM and creates a
# successor, which lands on another node or here once this one is back. Control-plane VMs are left to the drain:
# their evictionStrategy External makes CAPK drain them through the tenant cluster before their VM moves.
replace_cluster_api_workers() {{
  local ns pod owner machine
  local template='{{range .items[*]}}{{.metadata.namespace}}{{"\\t"}}{{.metadata.name}}{{"\\t"}}'
  template+='{{.metadata.ownerReferences[0].name}}{{"\\n"}}{{end}}'
  while IFS=$'\\t' read -r ns pod owner; do
    [ -n "$owner" ] || continue
    # No Machine (a pod labelled so by hand, or a cell without CAPK's CRDs): left to the drain, named if it stays.
    machine="$(kc -n "$ns" get kubevirtmachines.infrastructure.cluster.x-k8s.io "$owner" --ignore-not-found \\
      -o 'jsonpath={{.metadata.ownerReferences[?(@.kind=="Machine")].name}}')" || machine=""
    if [ -n "$machine" ]; then
      echo "gpucell: replacing tenant-cluster worker $ns/$owner on $NODE (pod $pod): deleting its Machine" \\
        "$machine (Cluster API drains the node in the tenant cluster first)"
      kc -n "$ns" delete machines.cluster.x-k8s.io "$machine" --ignore-not-found --wait=false >/dev/null
    fi
  done < <(
    pods="$(kc get pods --all-namespaces --field-selector "spec.nodeName=$NODE" -l cluster.x-k8s.io/role=worker \\
      -o "jsonpath=$template")" || pods=""
    if [ "$1" = all ]; then
      printf '%s\\n' "$pods"
    else  # the workers holding a GPU: their pods are among gpu_pods (namespace, pod, owner)
      grep -F -x -f <(gpu_pods | awk -F '\\t' '{{ print $1 "\\t" $2 "\\t" $4 }}') <<<"$pods" || true
    fi
  )
}}
""",
    "cluster_api_left": """\
# After a timeout: name the tenant-cluster VMs still on the node and where to look. Cluster API takes them down (a
# worker once its Machine is deleted, a control-plane VM once CAPK has drained its node), so when they stay, its
# controllers or the Machines' drains in the tenant cluster are stuck, not a PodDisruptionBudget of the cell.
cluster_api_left() {{
  local left
  left="$(kc get pods --all-namespaces --field-selector "spec.nodeName=$NODE" -l cluster.x-k8s.io/cluster-name \\
    -o 'jsonpath={{range .items[*]}}{{.metadata.namespace}}/{{.metadata.ownerReferences[0].name}} {{end}}')" || left=""
  [ -n "$left" ] || return 0
  echo "gpucell: tenant-cluster VMs still on $NODE: ${{left}}- Cluster API takes them down, each after draining its" \\
    "node in the tenant cluster (for at most the Machine's nodeDrainTimeoutSeconds): check its controllers" \\
    "(kubectl -n capi-system get pods; kubectl -n capk-system get pods) and the Machines (kubectl -n <namespace>" \\
    "get machines)" >&2
}}
""",
    "stop_gpu_vms": """\
# A GPU VM cannot live-migrate: delete its VirtualMachineInstance, which shuts the guest down gracefully. Its
# VirtualMachine's runStrategy decides whether it starts again elsewhere (Always) or stays stopped. A tenant
# cluster's VMs are Cluster API's to take down (replace_cluster_api_workers).
stop_gpu_vms() {{
  local ns pod kind owner strategy
  while IFS=$'\\t' read -r ns pod kind owner; do
    if [ "$kind" = VirtualMachineInstance ] && ! cluster_api_vm "$ns" "$owner"; then
      echo "gpucell: stopping VM $ns/$owner on $NODE (pod $pod): a VM with GPUs cannot live-migrate"
      # Halted first, its runStrategy recorded: settle gives it back once the node is in service again, and an
      # Always VM does not start on the next node to be drained meanwhile.
      strategy="$(kc -n "$ns" get virtualmachines.kubevirt.io "$owner" --ignore-not-found \\
        -o 'jsonpath={{.spec.runStrategy}}')"
      if [ -n "$strategy" ] && [ "$strategy" != Halted ]; then
        kc -n "$ns" annotate virtualmachines.kubevirt.io "$owner" --overwrite "{stopped_by}=$NODE" \\
          "{run_strategy}=$strategy" >/dev/null
        kc -n "$ns" patch virtualmachines.kubevirt.io "$owner" --type merge \\
          -p '{{"spec":{{"runStrategy":"Halted"}}}}' >/dev/null
      fi
      kc -n "$ns" delete virtualmachineinstances.kubevirt.io "$owner" --ignore-not-found --wait=false >/dev/null
    fi
  done < <(gpu_pods)
}}
""",
    "start_stopped_vms": """\
# The VMs maintenance stopped on this node get their runStrategy back (Always, RerunOnFailure and Once start
# again); a Manual one is started through KubeVirt's start subresource, as virtctl start does.
start_stopped_vms() {{
  local ns name node strategy
  local template='{{range .items[*]}}{{.metadata.namespace}}{{"\\t"}}{{.metadata.name}}{{"\\t"}}'
  template+='{{.metadata.annotations.{stopped_by_path}}}{{"\\t"}}{{.metadata.annotations.{run_strategy_path}}}{{"\\n"}}{{end}}'
  while IFS=$'\\t' read -r ns name node strategy; do
    if [ "$node" != "$NODE" ] || [ -z "$strategy" ]; then
      continue
    fi
    kc -n "$ns" patch virtualmachines.kubevirt.io "$name" --type merge \\
      -p "{{\\"spec\\":{{\\"runStrategy\\":\\"$strategy\\"}}}}" >/dev/null
    if [ "$strategy" = Manual ]; then
      kc replace --raw "/apis/subresources.kubevirt.io/v1/namespaces/$ns/virtualmachines/$name/start" -f - \\
        >/dev/null <<<'{{}}'
    fi
    kc -n "$ns" annotate virtualmachines.kubevirt.io "$name" "{stopped_by}-" "{run_strategy}-" >/dev/null
    echo "gpucell: started VM $ns/$name again (runStrategy $strategy), stopped for the maintenance of $NODE"
  done < <(kc get virtualmachines.kubevirt.io --all-namespaces -o "jsonpath=$template")
}}
""",
    "evict": """\
# Evict one pod through the Eviction API: a PodDisruptionBudget that forbids it answers 429 (retried by callers).
evict() {{
  kc create --raw "/api/v1/namespaces/$1/pods/$2/eviction" -f - >/dev/null 2>&1 <<EVICTION
{{"apiVersion":"policy/v1","kind":"Eviction","metadata":{{"name":"$2","namespace":"$1"}}}}
EVICTION
}}
""",
    "evict_gpu_pods": """\
# Evict (or, for GPU VMs, stop) every GPU pod on the node, retrying until none is left or the drain timeout.
evict_gpu_pods() {{
  local pods ns pod kind owner _
  replace_cluster_api_workers gpu
  stop_gpu_vms
  for _ in $(seq 1 "$DRAIN_ATTEMPTS"); do
    pods="$(gpu_pods)"
    if [ -z "$pods" ]; then
      echo "gpucell: no GPU workloads left on $NODE"
      return 0
    fi
    while IFS=$'\\t' read -r ns pod kind owner; do
      if [ "$kind" = VirtualMachineInstance ] && cluster_api_vm "$ns" "$owner"; then
        :  # Cluster API deletes it once the tenant's node is drained
      elif [ "$kind" = VirtualMachineInstance ]; then
        kc -n "$ns" delete virtualmachineinstances.kubevirt.io "$owner" --ignore-not-found --wait=false \\
          >/dev/null 2>&1 || true
      else
        evict "$ns" "$pod" || true  # 429: a PodDisruptionBudget says not yet; retried
      fi
    done <<<"$pods"
    sleep "$POLL_SECONDS"
  done
  echo "gpucell: GPU workloads still on $NODE after $DRAIN_TIMEOUT s (a PodDisruptionBudget may forbid evicting" \\
    "them): $(gpu_pods | awk -F '\\t' '{{ printf "%s/%s ", $1, $2 }}')- $NODE stays cordoned; move or stop them," \\
    "then run pulumi up again" >&2
  cluster_api_left
  return 1
}}
""",
    "drain_node": """\
# Drain the whole node (GPU VMs stopped first): kubectl drain evicts through the Eviction API.
drain_node() {{
  replace_cluster_api_workers all
  stop_gpu_vms
  if ! kc drain "$NODE" --ignore-daemonsets --delete-emptydir-data --timeout="${{DRAIN_TIMEOUT}}s"; then
    echo "gpucell: could not drain $NODE within $DRAIN_TIMEOUT s (see kubectl's message above: a" \\
      "PodDisruptionBudget, or a pod without a controller); $NODE stays cordoned; resolve it, then run" \\
      "pulumi up again" >&2
    cluster_api_left
    return 1
  fi
}}
""",
    "hold_peers": """\
# While this GPU pool rolls, its nodes still waiting for their own maintenance (another k3s version or GPU
# configuration) are cordoned ("held", annotation {held}), so that no GPU pod or VM this rollout moves, and no vGPU
# resource KubeVirt renames for the whole region, lands on a node that is next in line. Each one's own prepare
# takes it over, or releases it.
hold_peers() {{
  local peer why
  while read -r peer; do
    if [ -z "$peer" ] || [ "$peer" = "$NODE" ] || [ "$(field_of "$peer" '{{.spec.unschedulable}}')" = true ]; then
      continue  # out of service already: in maintenance, held, quarantined or cordoned by someone
    fi
    why="$(reasons_of "$peer" "")"
    if [ -n "$why" ]; then
      kc annotate node "$peer" --overwrite "{held}=$NODE" >/dev/null
      kc cordon "$peer" >/dev/null
      echo "gpucell: holding $peer (cordoned) until its own maintenance ($why): nothing this rollout moves" \\
        "lands there"
    fi
  done < <(kc get nodes -l "{pool_label}=$POOL" -o 'jsonpath={{range .items[*]}}{{.metadata.name}}{{"\\n"}}{{end}}')
}}
""",
}

_PREPARE = """\
readonly WANT_VERSION={version}
readonly WANT_CONFIG={digest}
readonly DRAIN_TIMEOUT={drain_timeout}
readonly DRAIN_ATTEMPTS={drain_attempts}
readonly QUARANTINE={quarantine}
{gpu_wanted}{pool}
# Why Node $1 must leave service to run what is wanted (with $2 its config digest; empty for another node of the
# pool, whose digest is its own), comma-separated; nothing when it already does.
reasons_of() {{
  local found="" have
  have="$(field_of "$1" '{{.status.nodeInfo.kubeletVersion}}')"
  if [ "$have" != "$WANT_VERSION" ]; then
    found+=",k3s-upgrade"
  fi
  have="$(field_of "$1" '{{.metadata.annotations.{config_path}}}')"
  if [ -n "$2" ] && [ -n "$have" ] && [ "$have" != "$2" ]; then
    found+=",k3s-restart"
  fi
{gpu_checks}  tr ',' '\\n' <<<"$found" | awk 'NF && !seen[$0]++' | paste -sd, -
}}

if [ ! -x "$K3S_BIN" ]; then
  echo "gpucell: k3s is not installed on this server yet (a new cell): nothing to prepare on $NODE"
  exit 0
fi
if ! api_up; then
  echo "gpucell: the API server on this server does not answer; cannot prepare $NODE" >&2
  exit 1
fi
if ! node_exists; then
  echo "gpucell: $NODE is not registered yet: nothing to prepare"
  exit 0
fi

# Why the node must leave service: what an interrupted run recorded, what it runs now, and its quarantine. A
# quarantine the config no longer has is lifted: the node was drained already, settle gives it back.
carried="$(node_field '{{.metadata.annotations.{maintenance_path}}}')"
if [ -z "$QUARANTINE" ] && [[ ",$carried," == *,quarantine,* ]]; then
  carried="$(tr ',' '\\n' <<<"$carried" | awk '$0 != "quarantine"' | paste -sd, -),quarantine-lifted"
fi
reasons="$carried,$(reasons_of "$NODE" "$WANT_CONFIG")"
if [ -n "$QUARANTINE" ]; then
  reasons="$reasons,quarantine"
fi
reasons="$(tr ',' '\\n' <<<"$reasons" | awk 'NF && !seen[$0]++' | paste -sd, -)"
if [ -z "$reasons" ]; then
  held_by="$(node_field '{{.metadata.annotations.{held_path}}}')"
  if [ -n "$held_by" ]; then
    kc annotate node "$NODE" "{held}-" >/dev/null
    kc uncordon "$NODE" >/dev/null
    echo "gpucell: $NODE needs no maintenance: released (it was held for the rollout begun on $held_by)"
  fi
  echo "gpucell: $NODE already runs k3s $WANT_VERSION with its config and GPU configuration; nothing to prepare"
  exit 0
fi

# A NotReady node's kubelet cannot confirm an eviction: draining it would only wait out the whole timeout.
if [ "$(node_field '{{.status.conditions[?(@.type=="Ready")].status}}')" != True ]; then
  if [ -n "$carried" ]; then
    echo "gpucell: $NODE is not Ready but already out of service ($reasons): continuing its maintenance"
    exit 0
  fi
  if [ "$reasons" = quarantine ]; then
    kc annotate node "$NODE" --overwrite "{maintenance}=quarantine" >/dev/null
    kc cordon "$NODE"
    echo "gpucell: $NODE is not Ready: quarantined without a drain (its kubelet cannot confirm evictions; its pods" \\
      "go once it is back, or with its Node when it is removed)"
    exit 0
  fi
  echo "gpucell: $NODE is not Ready (its kubelet does not answer), so it cannot be drained for: $reasons." \\
    "If the host is down for good, set removalPolicy: forget on it and remove it from the config (see" \\
    "docs/operations.md, 'A host died'); if it comes back, run pulumi up again" >&2
  exit 1
fi

echo "gpucell: taking $NODE out of service: $reasons"
if [ "$(node_field '{{.spec.unschedulable}}')" = true ] && [ -z "$carried" ] \\
  && [ -z "$(node_field '{{.metadata.annotations.{held_path}}}')" ]; then
  kc annotate node "$NODE" --overwrite "{keep_cordoned}=true" >/dev/null
fi
kc annotate node "$NODE" --overwrite "{maintenance}=$reasons" >/dev/null
if [ -n "$(node_field '{{.metadata.annotations.{held_path}}}')" ]; then
  kc annotate node "$NODE" "{held}-" >/dev/null
fi
kc cordon "$NODE"
{hold}case ",$reasons," in
  *,k3s-upgrade,* | *,k3s-restart,* | *,quarantine,*) drain_node ;;
  *,gpu-reconfiguration,*) evict_gpu_pods ;;
  *) ;;  # quarantine-lifted alone: drained when it was quarantined
esac
echo "gpucell: $NODE is ready for maintenance"
"""

_GPU_WANTED = """\
readonly WANT_GPU={profile}
"""

_GPU_CHECK = """\
  if [ "$(field_of "$1" '{{.metadata.labels.{key}}}')" != {value} ]; then
    found+=",gpu-reconfiguration"
  fi
"""

_GPU_PROFILE_CHECK = """\
  have="$(field_of "$1" '{{.metadata.annotations.{gpu_config_path}}}')"
  if [ -n "$have" ] && [ "$have" != "$WANT_GPU" ]; then
    found+=",gpu-reconfiguration"
  fi
"""

# A node that never settled under this gpucell has no gpu-config annotation: a resource it should advertise and
# does not at all (another vGPU type, dra -> container) means its GPU configuration changes.
_GPU_RESOURCE_CHECK = """\
  if [ -z "$have" ] && [ -z "$(field_of "$1" '{{.status.allocatable.{key}}}')" ]; then
    found+=",gpu-reconfiguration"
  fi
"""

_SETTLE = """\
readonly WANT_VERSION={version}
readonly WANT_CONFIG={digest}
readonly READY_ATTEMPTS={ready_attempts}
readonly WANT_LABELS={want_labels}
readonly WANT_GPU={gpu_profile}
readonly QUARANTINE={quarantine}

# The GPU configuration the node now runs, for the next prepare to compare (not on non-GPU nodes).
record_gpu_config() {{
  if [ -n "$WANT_GPU" ] && [ "$(node_field '{{.metadata.annotations.{gpu_config_path}}}')" != "$WANT_GPU" ]; then
    kc annotate node "$NODE" --overwrite "{gpu_config}=$WANT_GPU" >/dev/null
  fi
}}

# Labels gpucell kept here before and no longer wants are removed: the NodePatch only gives up its own claim on
# them, and k3s's registration may share it.
prune_labels() {{
  local had key
  local -a keys
  had="$(node_field '{{.metadata.annotations.{labels_path}}}')"
  IFS=, read -ra keys <<<"$had"
  for key in "${{keys[@]}}"; do
    case ",$WANT_LABELS," in
      *",$key,"*) ;;
      *)
        kc label node "$NODE" "$key-" >/dev/null
        echo "gpucell: removed label $key from $NODE"
        ;;
    esac
  done
  if [ "$had" != "$WANT_LABELS" ]; then
    kc annotate node "$NODE" --overwrite "{labels}=$WANT_LABELS" >/dev/null
  fi
}}

# The node Ready on the pinned version, within READY_ATTEMPTS polls.
wait_ready() {{
  local status=""
  for _ in $(seq 1 "$READY_ATTEMPTS"); do
    status="$(node_field '{{.status.conditions[?(@.type=="Ready")].status}} {{.status.nodeInfo.kubeletVersion}}')" \\
      || status="(the API did not answer)"
    if [ "$status" = "True $WANT_VERSION" ]; then
      return 0
    fi
    sleep "$POLL_SECONDS"
  done
  echo "gpucell: $NODE is not Ready on $WANT_VERSION within $((READY_ATTEMPTS * POLL_SECONDS)) s (it reports" \\
    "'$status'); it stays cordoned; see kubectl describe node $NODE and the k3s service's journal on the host," \\
    "then run pulumi up again" >&2
  return 1
}}

{gpu_state_function}if [ ! -x "$K3S_BIN" ]; then
  echo "gpucell: k3s is not installed on this server; cannot settle $NODE" >&2
  exit 1
fi
if ! api_up; then
  echo "gpucell: the API server on this server does not answer; cannot settle $NODE" >&2
  exit 1
fi
if ! node_exists; then
  echo "gpucell: $NODE is not registered; its k3s did not join the cell" >&2
  exit 1
fi
prune_labels
reasons="$(node_field '{{.metadata.annotations.{maintenance_path}}}')"
if [ -z "$reasons" ]; then
  if [ "$(node_field '{{.metadata.annotations.{config_path}}}')" != "$WANT_CONFIG" ]; then
    kc annotate node "$NODE" --overwrite "{config}=$WANT_CONFIG" >/dev/null
  fi
  record_gpu_config
  start_stopped_vms
  echo "gpucell: $NODE was not taken out of service; nothing to settle"
  exit 0
fi

# A quarantined host stays out of service: Ready on the pinned version after a k3s change, but its GPU state is not
# waited for (its fault is why it is out); the GPU VMs stopped on it start again elsewhere.
if [ -n "$QUARANTINE" ]; then
  case ",$reasons," in
    *,k3s-upgrade,* | *,k3s-restart,*) wait_ready || exit 1 ;;
  esac
  kc annotate node "$NODE" --overwrite "{config}=$WANT_CONFIG" "{maintenance}=quarantine" >/dev/null
  start_stopped_vms
  echo "gpucell: $NODE stays cordoned: quarantined ($QUARANTINE); its GPU VMs start again elsewhere"
  exit 0
fi

wait_ready || exit 1
{gpu_wait}kc annotate node "$NODE" --overwrite "{config}=$WANT_CONFIG" >/dev/null
record_gpu_config
if [ "$(node_field '{{.metadata.annotations.{keep_cordoned_path}}}')" = true ]; then
  echo "gpucell: $NODE was cordoned before its maintenance; it stays cordoned"
  kc annotate node "$NODE" "{maintenance}-" "{keep_cordoned}-" >/dev/null
else
  kc annotate node "$NODE" "{maintenance}-" >/dev/null
  kc uncordon "$NODE"
fi
start_stopped_vms
echo "gpucell: $NODE is back in service"
"""

_GPU_STATE_FUNCTION = """\
readonly GPU_ATTEMPTS={gpu_attempts}
readonly GPU_TIMEOUT={gpu_timeout}

# What still keeps the node from its GPU state, one line each; nothing once the GPU Operator reports it.
gpu_state_problems() {{
  local {locals}
{state_checks}{resource_checks}  template='{{range .items[*]}}{{.metadata.name}}{{"\\t"}}{{.status.phase}}{{"\\t"}}'
  template+='{{.status.containerStatuses[*].ready}}{{"\\n"}}{{end}}'
  local -a namespaces=({pod_namespaces})
  for namespace in "${{namespaces[@]}}"; do
    pods="$(kc get pods -n "$namespace" --field-selector "spec.nodeName=$NODE" -o "jsonpath=$template")"
    if [ -z "$pods" ]; then
      echo "no pod of $namespace runs on $NODE yet"
    fi
    awk -F '\\t' -v ns="$namespace" -v skip={skip_pods} 'NF && (skip == "" || index($1, skip) != 1) \\
      && $2 != "Succeeded" && ($2 != "Running" || $3 == "" || $3 ~ /false/) {{
      print "pod " ns "/" $1 " is not ready (" $2 ")" }}' <<<"$pods"
  done
}}

"""

_RESTART_PODS = """\
readonly RETRIGGER_POLLS={retrigger_polls}

# Restart the pods matching selector $2 in namespace $1 on the node (their DaemonSet starts new ones), because $3.
restart_pods() {{
  echo "gpucell: restarting $2 pods in $1 on $NODE: $3"
  kc -n "$1" delete pods -l "$2" --field-selector "spec.nodeName=$NODE" --ignore-not-found --wait=false >/dev/null
}}

"""

# The first look past which a state neither 'success' nor 'failed' counts as stuck: at once when the last wait on
# the node ran out (it left the annotation), else after STUCK_POLLS looks.
_STUCK = """\
stuck_after={stuck_polls}
if [ -n "$last_wait" ]; then
  echo "gpucell: the last wait for $NODE's GPU state ran out ($last_wait): re-triggering what must act first"
  stuck_after=1
fi
"""

# The vGPU device manager pauses the sandbox operands by label while it applies a type; killed meanwhile, it leaves
# them paused for good, and its own init container then waits for the paused validator forever
# (NVIDIA/gpu-operator#2845). Before it is restarted they are set back to "true", as its own cleanup would have.
_UNPAUSE = """\
# Operand labels the vGPU device manager left at paused-for-vgpu-change are set back to "true", then it is restarted
# in namespace $1 (selector $2), because $3.
restart_vgpu_manager() {{
  local key
  for key in {operands}; do
    if [ "$(node_field "{{.metadata.labels.${{key//./\\\\.}}}}")" = paused-for-vgpu-change ]; then
      kc label node "$NODE" --overwrite "$key=true" >/dev/null
      echo "gpucell: $key on $NODE was left paused-for-vgpu-change (NVIDIA/gpu-operator#2845): set back to true"
    fi
  done
  restart_pods "$1" "$2" "$3"
}}

"""

_RETYPE = """\
# Make the node's VF-typing service (gpucell-vgpu-types.service) start over, because $1: it reads this annotation on
# every pass, learns the type id again and retypes the VFs.
retype_vfs() {{
  echo "gpucell: re-triggering the SR-IOV vGPU typing on $NODE: $1"
  kc annotate node "$NODE" --overwrite "{retrigger}=$(date +%s)" >/dev/null
}}

"""

_GPU_WAIT = """\
{restart_pods}last_wait="$(node_field '{{.metadata.annotations.{gpu_wait_path}}}')"
{stuck}problems=""
{retrigger_locals}for {poll} in $(seq 1 "$GPU_ATTEMPTS"); do
  problems="$(gpu_state_problems)"
  if [ -z "$problems" ]; then
    break
  fi
{retriggers}  sleep "$POLL_SECONDS"
done
if [ -n "$problems" ]; then
  kc annotate node "$NODE" --overwrite "{gpu_wait_key}=$(head -n 1 <<<"$problems")" >/dev/null
  echo "gpucell: $NODE did not reach its GPU state within $GPU_TIMEOUT s; it stays cordoned:" >&2
  echo "$problems" >&2
  echo "see kubectl describe node $NODE and the GPU Operator's pods there (kubectl -n {operator_ns} get pods" \\
    "-o wide), then run pulumi up again{again}" >&2
  exit 1
fi
if [ -n "$last_wait" ]; then
  kc annotate node "$NODE" "{gpu_wait_key}-" >/dev/null
fi
echo "gpucell: the GPU Operator reports $NODE in its new GPU state"
"""

# A state manager acts on a *change* of its label: after 'failed' it is restarted so that it reads the label
# again (NVIDIA/gpu-operator#2833); still 'failed' a minute after that ends the wait. A state stuck elsewhere
# ('pending', unset) past stuck_after gets the same restart, once; 'rebooting' is the MIG manager at work.
_STATE_RETRIGGER = """\
  if [ "${var}" -eq 0 ]; then
    if grep -qF "{what} is 'failed" <<<"$problems"; then
      {action} "{what} is 'failed' ({why})"
      {var}=$poll
    elif [ "$poll" -ge "$stuck_after" ] && grep -qF "{what} is '" <<<"$problems" \\
      && ! grep -qF "{what} is 'rebooting'" <<<"$problems"; then
      {action} "{what} has not reached 'success' after $(((poll - 1) * POLL_SECONDS)) s ({why})"
      {var}=$poll
    fi
  elif grep -qF "{what} is 'failed" <<<"$problems" && [ $((poll - {var})) -ge "$RETRIGGER_POLLS" ]; then
    break
  fi
"""

# Only the advertised resources are wrong, for a minute (at once when the last wait ran out): the device plugin read
# the devices before they changed and does not refresh (kubevirt/kubevirt#7084); restarted once a minute while that
# lasts.
_PLUGIN_RETRIGGER = """\
  if ! grep -qv '^allocatable ' <<<"$problems" \\
    && {{ [ $((poll % RETRIGGER_POLLS)) -eq 0 ] || [ "$poll" -eq "$stuck_after" ]; }}; then
    restart_pods {namespace} {selector} "the node does not advertise its GPU resources (kubevirt/kubevirt#7084)"
  fi
"""

_STATE_CHECK = """\
  value="$(node_field '{{.metadata.labels.{key}}}')"
  if [ "$value" != success ]; then
    echo "{label} is '${{value:-unset}}', not 'success'"
  fi
"""

_VF_TYPES_CHECK = """\
  value="$(node_field '{{.metadata.annotations.{key}}}')"
  if [ "$value" != {want} ]; then
    echo "{what} is '${{value:-unset}}', not '{want_text}'"
  fi
"""

_RESOURCE_CHECK = """\
  value="$(node_field '{{.status.allocatable.{key}}}')"
  if [ "$value" != {count} ]; then
    echo "allocatable {resource} is '${{value:-0}}', expected {count}"
  fi
"""

_REMOVAL_DRAIN = """\
readonly DRAIN_TIMEOUT={drain_timeout}
{drain_attempts}
if [ ! -x "$K3S_BIN" ]; then
  echo "gpucell: k3s is not installed on this server: nothing to drain for $NODE"
  exit 0
fi
if ! api_up; then
  echo "gpucell: the API server on this server does not answer; cannot drain $NODE before removing it" >&2
  exit 1
fi
if ! node_exists; then
  echo "gpucell: $NODE is not registered: nothing to drain"
  exit 0
fi
{quorum}kc cordon "$NODE"
if [ "$(node_field '{{.status.conditions[?(@.type=="Ready")].status}}')" != True ]; then
  echo "gpucell: $NODE is not Ready (its kubelet is gone): not draining; its pods go with its Node object"
  exit 0
fi
drain_node
{replicas}echo "gpucell: $NODE is drained and cordoned for removal"
"""

# A server leaves etcd once its removal goes on: with another server down, the members left could not hold quorum
# (k3s-io/k3s#3513), so the removal waits until every other server answers. (Inserted as values: single braces.)
_QUORUM = """\
template='{range .items[*]}{.metadata.name}{"\\t"}{.status.conditions[?(@.type=="Ready")].status}{"\\n"}{end}'
down="$(kc get nodes -l node-role.kubernetes.io/etcd=true -o "jsonpath=$template" \\
  | awk -F '\\t' -v me="$NODE" 'NF && $1 != me && $2 != "True" { printf "%s ", $1 }')"
if [ -n "$down" ]; then
  echo "gpucell: not removing server $NODE while ${down}is not Ready: etcd would be left with too few members" \\
    "answering to keep its quorum (k3s-io/k3s#3513). Bring it back, or remove it first (removalPolicy: forget," \\
    "docs/operations.md 'A host died'), then run pulumi up again" >&2
  exit 1
fi
"""

# Longhorn: the node's replicas are rebuilt on other nodes before it goes; a node deleted with replicas on it leaves
# their volumes degraded or stuck (longhorn/longhorn#1631).
_REPLICAS = """\
if [ -n "$(kc -n longhorn-system get nodes.longhorn.io "$NODE" --ignore-not-found -o name)" ]; then
  kc -n longhorn-system patch nodes.longhorn.io "$NODE" --type merge \\
    -p '{"spec":{"allowScheduling":false,"evictionRequested":true}}' >/dev/null
  replicas=""
  for _ in $(seq 1 "$DRAIN_ATTEMPTS"); do
    replicas="$(kc -n longhorn-system get replicas.longhorn.io -l "longhorn.io/node=$NODE" -o name)"
    if [ -z "$replicas" ]; then
      break
    fi
    sleep "$POLL_SECONDS"
  done
  if [ -n "$replicas" ]; then
    echo "gpucell: Longhorn replicas still on $NODE after $DRAIN_TIMEOUT s: $(tr '\\n' ' ' <<<"$replicas")- their" \\
      "volumes have nowhere else to go (storage.replicas above the nodes left, or too little disk); $NODE stays" \\
      "cordoned; see kubectl -n longhorn-system get volumes.longhorn.io, then run pulumi up again" >&2
    exit 1
  fi
  echo "gpucell: Longhorn rebuilt every replica of $NODE on other nodes"
fi
"""

_FORGET = """\
if [ ! -x "$K3S_BIN" ]; then
  echo "gpucell: k3s is not installed on this server: nothing to forget about $NODE"
  exit 0
fi
if ! api_up; then
  echo "gpucell: the API server on this server does not answer; cannot delete node $NODE" >&2
  exit 1
fi
{alive_guard}# k3s is uninstalled from the node by now (or the machine is gone), so its kubelet cannot register it
# again. On a server, k3s removes its etcd member before the Node goes (its etcd.k3s.cattle.io finalizer).
kc delete node "$NODE" --ignore-not-found --wait=false
for _ in $(seq 1 {attempts}); do
  if ! node_exists; then
    # The node's password goes too: a host rebuilt under the same name could not join again (k3s-io/k3s#6054).
    kc -n kube-system delete secret "$NODE.node-password.k3s" --ignore-not-found >/dev/null
    echo "gpucell: node $NODE removed from the cell"
    exit 0
  fi
  sleep "$POLL_SECONDS"
done
echo "gpucell: node $NODE is still listed after {timeout} s; see kubectl get node $NODE -o yaml (finalizers)" >&2
exit 1
"""


# removalPolicy: forget deletes the Node of a machine that is gone; a kubelet still posting Ready would register it
# again at once, and a live server would keep its etcd member. (Inserted as a value: single braces.)
_ALIVE_GUARD = """\
if node_exists && [ "$(node_field '{.status.conditions[?(@.type=="Ready")].status}')" = True ]; then
  echo "gpucell: $NODE is Ready: its k3s still runs, so removalPolicy: forget cannot remove it (its kubelet would" \\
    "register it again); set removalPolicy: delete on it to uninstall k3s over SSH, or stop k3s on it first" >&2
  exit 1
fi
"""

_FORGOTTEN = """\
echo "gpucell: $NODE is removalPolicy: forget: nothing to do until it is removed from the config"
"""

_ANNOTATIONS = {
    "maintenance": MAINTENANCE_ANNOTATION,
    "maintenance_path": jsonpath_key(MAINTENANCE_ANNOTATION),
    "config": CONFIG_ANNOTATION,
    "config_path": jsonpath_key(CONFIG_ANNOTATION),
    "keep_cordoned": KEEP_CORDONED_ANNOTATION,
    "keep_cordoned_path": jsonpath_key(KEEP_CORDONED_ANNOTATION),
    "held": HELD_ANNOTATION,
    "held_path": jsonpath_key(HELD_ANNOTATION),
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


def _header(title: str, node: str, functions: tuple[str, ...], api_endpoint: str = "") -> str:
    variables = _VARIABLES.format(
        kubeconfig=KUBECONFIG_PATH, node=shlex.quote(node), poll=POLL_SECONDS, api_endpoint=shlex.quote(api_endpoint)
    )
    parts = [
        _FUNCTIONS[name].format(
            api_attempts=API_ATTEMPTS,
            api_timeout=API_ATTEMPTS * POLL_SECONDS,
            kc_attempts=KC_ATTEMPTS,
            poll=POLL_SECONDS,
            **_ANNOTATIONS,
        )
        for name in functions
    ]
    return _PREAMBLE.format(title=title, source=SOURCE) + "\n" + variables + "\n".join(parts) + "\n"


_BASE = ("kc", "api_up", "node_exists", "node_field")
_DRAIN = ("gpu_pods", "cluster_api_vm", "replace_cluster_api_workers", "cluster_api_left", "stop_gpu_vms", "drain_node")


def _attempts(minutes: int) -> int:
    return max(1, minutes * 60 // POLL_SECONDS)


def _reason_checks(state: NodeState) -> str:
    """The GPU part of the prepare's ``reasons_of``: its labels, its recorded configuration, its resources."""
    checks = "".join(
        _GPU_CHECK.format(key=jsonpath_key(key), value=shlex.quote(value)) for key, value in state.gpu_config.items()
    )
    if state.gpu_profile:
        checks += _GPU_PROFILE_CHECK.format(**_ANNOTATIONS)
        checks += "".join(_GPU_RESOURCE_CHECK.format(key=jsonpath_key(name)) for name in state.resources)
    return checks


def prepare_script(state: NodeState, version: str, digest: str, *, api_endpoint: str = "") -> str:
    """Create/update of ``<node>-prepare``: take the node out of service when what it runs must change.

    Reasons, from the live Node: ``k3s-upgrade`` (kubelet version is not ``version``), ``k3s-restart`` (annotation
    ``gpucell.io/k3s-config`` present and not ``digest``), ``gpu-reconfiguration`` (a label of
    ``state.gpu_config`` or the recorded ``gpucell.io/gpu-config`` differs), ``quarantine`` (``state.quarantine``),
    plus any left in ``gpucell.io/maintenance`` by an interrupted run (``quarantine`` there becomes
    ``quarantine-lifted`` once the config lifts it). With none it exits 0, releasing the node when another node of
    its pool held it; also when k3s is not installed on the control server (a new cell) or the node is not
    registered (a new node). Otherwise: record the reasons, cordon, on a GPU node hold the other nodes of its pool
    (label ``gpucell.io/pool``) that still need another k3s version or GPU configuration, and drain (k3s reasons and
    a quarantine) or evict only GPU workloads,
    within ``state.rollout.drain_timeout_minutes``; exits 1 with the pods left when that runs out. A NotReady node
    fails at once (a quarantined one is only cordoned). ``api_endpoint`` (``https://<apiEndpoint>:<port>``) is
    tried when this server's API does not answer.
    """
    hold = state.is_gpu
    body = _PREPARE.format(
        version=shlex.quote(version),
        digest=shlex.quote(digest),
        drain_timeout=state.rollout.drain_timeout_minutes * 60,
        drain_attempts=_attempts(state.rollout.drain_timeout_minutes),
        quarantine=shlex.quote(state.quarantine),
        gpu_wanted=_GPU_WANTED.format(profile=shlex.quote(state.gpu_profile)) if state.gpu_profile else "",
        pool=f"readonly POOL={shlex.quote(state.labels[POOL_LABEL])}\n" if hold else "",
        gpu_checks=_reason_checks(state),
        hold="hold_peers\n" if hold else "",
        **_ANNOTATIONS,
    )
    functions = (*_BASE, *_DRAIN, "evict", "evict_gpu_pods", *(("hold_peers",) if hold else ()))
    title = f"gpucell: prepare {state.name} for maintenance"
    return _header(title, state.name, functions, api_endpoint) + body


def settle_script(state: NodeState, version: str, digest: str, *, api_endpoint: str = "") -> str:
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
    naming what is missing, leaving the node cordoned.
    """
    gpu_state_function = gpu_wait = ""
    if state.is_gpu:
        gpu_state_function = _GPU_STATE_FUNCTION.format(
            state_checks=_state_checks(state),
            resource_checks="".join(
                _RESOURCE_CHECK.format(key=jsonpath_key(name), resource=name, count=count)
                for name, count in state.resources.items()
            ),
            locals=("value " if state.state_labels or state.resources or state.vf_type else "")
            + "namespace pods template",
            pod_namespaces=" ".join(shlex.quote(ns) for ns in (GPU_OPERATOR_NAMESPACE, *state.pod_namespaces)),
            skip_pods=shlex.quote(state.skip_pods),
            gpu_attempts=_attempts(state.rollout.gpu_state_timeout_minutes),
            gpu_timeout=state.rollout.gpu_state_timeout_minutes * 60,
        )
        gpu_wait = _gpu_wait(state)
    body = _SETTLE.format(
        version=shlex.quote(version),
        digest=shlex.quote(digest),
        ready_attempts=_attempts(5),
        want_labels=shlex.quote(",".join(state.labels)),
        gpu_profile=shlex.quote(state.gpu_profile),
        quarantine=shlex.quote(state.quarantine),
        gpu_state_function=gpu_state_function,
        gpu_wait=gpu_wait,
        **_ANNOTATIONS,
    )
    title = f"gpucell: settle {state.name} after maintenance"
    return _header(title, state.name, (*_BASE, "start_stopped_vms"), api_endpoint) + body


_VF_TYPES = "SR-IOV vGPU typing"
"""What the settle calls the VF-typing service's report in its problem lines."""


def _state_checks(state: NodeState) -> str:
    checks = "".join(_STATE_CHECK.format(key=jsonpath_key(label), label=label) for label in state.state_labels)
    if state.vf_type:
        want = f"success {state.vf_type}"
        checks += _VF_TYPES_CHECK.format(
            key=jsonpath_key(VGPU_TYPES_ANNOTATION), want=shlex.quote(want), want_text=want, what=_VF_TYPES
        )
    return checks


def _gpu_wait(state: NodeState) -> str:
    """The settle's wait for the GPU state, with the restarts that re-trigger a stuck manager, VF typing or device
    plugin."""
    retriggers = ""
    variables = []
    helpers = ""
    for index, label in enumerate(state.state_labels):
        namespace, selector = STATE_MANAGER_PODS[label]
        var = f"restarted_{index}"
        variables.append(f"{var}=0\n")
        restart = "restart_pods"
        if label == VGPU_STATE_LABEL:
            restart = "restart_vgpu_manager"
            helpers += _UNPAUSE.format(operands=" ".join(VGPU_PAUSED_OPERANDS))
        action = f"{restart} {shlex.quote(namespace)} {shlex.quote(selector)}"
        retriggers += _STATE_RETRIGGER.format(what=label, var=var, action=action, why="NVIDIA/gpu-operator#2833")
    retype = ""
    if state.vf_type:
        variables.append("retyped=0\n")
        retriggers += _STATE_RETRIGGER.format(
            what=_VF_TYPES, var="retyped", action="retype_vfs", why="gpucell-vgpu-types.service on the host"
        )
        retype = _RETYPE.format(retrigger=VGPU_TYPES_RETRIGGER_ANNOTATION)
    if state.device_plugin is not None and state.resources:
        namespace, selector = state.device_plugin
        retriggers += _PLUGIN_RETRIGGER.format(namespace=shlex.quote(namespace), selector=shlex.quote(selector))
    restart_pods = _RESTART_PODS.format(retrigger_polls=RETRIGGER_POLLS) + helpers + retype if retriggers else ""
    return _GPU_WAIT.format(
        operator_ns=GPU_OPERATOR_NAMESPACE,
        restart_pods=restart_pods,
        stuck=_STUCK.format(stuck_polls=STUCK_POLLS) if retriggers else "",
        retrigger_locals="".join(variables),
        retriggers=retriggers,
        poll="poll" if retriggers else "_",
        again=" (it re-triggers them first)" if retriggers else "",
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
    fails, which stops the removal before anything is uninstalled.
    """
    body = _REMOVAL_DRAIN.format(
        drain_timeout=state.rollout.drain_timeout_minutes * 60,
        drain_attempts=f"readonly DRAIN_ATTEMPTS={_attempts(state.rollout.drain_timeout_minutes)}\n"
        if longhorn
        else "",
        quorum=_QUORUM if state.role is NodeRole.SERVER else "",
        replicas=_REPLICAS if longhorn else "",
    )
    title = f"gpucell: drain {state.name} before removing it"
    return _header(title, state.name, (*_BASE, *_DRAIN), api_endpoint) + body


def forget_script(node: str, *, forgotten: bool = False, api_endpoint: str = "") -> str:
    """Delete of ``<node>-prepare``, the last step of removing a node: delete its Node object (k3s is uninstalled
    from it by then, so it cannot register again), wait up to 5 minutes for it to be gone, then delete its k3s node
    password (the ``kube-system`` Secret ``<node>.node-password.k3s``: k3s-io/k3s#6054, a host rebuilt under the same
    name could not join again). A server's Node is already gone (it deleted its own to leave etcd). Exits 0 when k3s
    is not on the control server.

    ``forgotten`` (``removalPolicy: forget``, nothing was uninstalled): exits 1 without deleting anything when the
    Node is Ready (its k3s still runs); else deleting a server's Node makes k3s remove its etcd member."""
    body = _FORGET.format(attempts=_attempts(5), timeout=300, alive_guard=_ALIVE_GUARD if forgotten else "")
    functions = ("kc", "api_up", "node_exists", *(("node_field",) if forgotten else ()))
    return _header(f"gpucell: delete node {node} from the cell", node, functions, api_endpoint) + body


def forgotten_script(node: str) -> str:
    """Create/update of ``<node>-prepare`` and ``-settle`` of a ``removalPolicy: forget`` host: nothing to do (its
    machine is gone); says so."""
    header = _PREAMBLE.format(title=f"gpucell: {node} is forgotten", source=SOURCE)
    return header + f"\nreadonly NODE={shlex.quote(node)}\n" + _FORGOTTEN
