# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

# Evict (or, for GPU VMs, stop) every GPU pod on the node, retrying until none is left or the drain timeout.
evict_gpu_pods() {
  local pods ns pod kind owner _
  replace_cluster_api_workers gpu
  stop_gpu_vms
  for _ in $(seq 1 "$DRAIN_ATTEMPTS"); do
    pods="$(gpu_pods)"
    if [ -z "$pods" ]; then
      echo "gpucell: no GPU workloads left on $NODE"
      return 0
    fi
    while IFS=$'\t' read -r ns pod kind owner; do
      if [ "$kind" = VirtualMachineInstance ] && cluster_api_vm "$ns" "$owner"; then
        :  # Cluster API deletes it once the tenant's node is drained
      elif [ "$kind" = VirtualMachineInstance ]; then
        kc -n "$ns" delete virtualmachineinstances.kubevirt.io "$owner" --ignore-not-found --wait=false \
          >/dev/null 2>&1 || true
      else
        evict "$ns" "$pod" || true  # 429: a PodDisruptionBudget says not yet; retried
      fi
    done <<<"$pods"
    sleep "$POLL_SECONDS"
  done
  echo "gpucell: GPU workloads still on $NODE after $DRAIN_TIMEOUT s (a PodDisruptionBudget may forbid evicting" \
    "them): $(gpu_pods | awk -F '\t' '{ printf "%s/%s ", $1, $2 }')- $NODE stays cordoned; move or stop them," \
    "then run pulumi up again" >&2
  cluster_api_left
  return 1
}
