# shellcheck shell=bash
# shellcheck disable=SC2034  # DRAIN_LOST: read by the callers (prepare, removal-drain)
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

# Drain the whole node (GPU VMs stopped first): kubectl drain evicts through the Eviction API. A failure says
# what it was, from the node and the time the drain took: the node lost (not Ready: DRAIN_LOST=1, for the caller),
# the timeout run out (a PodDisruptionBudget, a pod that does not terminate) or kubectl refusing at once (its
# message above names the pod).
drain_node() {
  local started
  DRAIN_LOST=0
  replace_cluster_api_workers all
  stop_gpu_vms
  started=$SECONDS
  if kc drain "$NODE" --ignore-daemonsets --delete-emptydir-data --timeout="${DRAIN_TIMEOUT}s"; then
    return 0
  fi
  if [ "$(node_field '{.status.conditions[?(@.type=="Ready")].status}')" != True ]; then
    DRAIN_LOST=1
    echo "gpucell: $NODE stopped answering during its drain (it is not Ready: its host is down or its kubelet" \
      "stopped), so its pods cannot be confirmed gone" >&2
    return 1
  elif [ $((SECONDS - started + 2)) -ge "$DRAIN_TIMEOUT" ]; then
    echo "gpucell: could not drain $NODE within $DRAIN_TIMEOUT s (see kubectl's message above: a" \
      "PodDisruptionBudget that forbids an eviction, or a pod that does not terminate); $NODE stays cordoned;" \
      "resolve it, then run pulumi up again" >&2
  else
    echo "gpucell: kubectl drain $NODE failed before its $DRAIN_TIMEOUT s timeout (see its message above);" \
      "$NODE stays cordoned; resolve it, then run pulumi up again" >&2
  fi
  cluster_api_left
  return 1
}
