# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

# Drain the whole node (GPU VMs stopped first): kubectl drain evicts through the Eviction API.
drain_node() {
  replace_cluster_api_workers all
  stop_gpu_vms
  if ! kc drain "$NODE" --ignore-daemonsets --delete-emptydir-data --timeout="${DRAIN_TIMEOUT}s"; then
    echo "gpucell: could not drain $NODE within $DRAIN_TIMEOUT s (see kubectl's message above: a" \
      "PodDisruptionBudget, or a pod without a controller); $NODE stays cordoned; resolve it, then run" \
      "pulumi up again" >&2
    cluster_api_left
    return 1
  fi
}
