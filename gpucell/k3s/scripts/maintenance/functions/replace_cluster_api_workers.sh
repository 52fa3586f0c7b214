# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

# Tenant-cluster workers on the node (all of them with "all", else those holding GPUs) are not stopped: their
# Machines are deleted, so Cluster API drains each node through its tenant cluster, deletes the VM and creates a
# successor, which lands on another node or here once this one is back. Control-plane VMs are left to the drain:
# their evictionStrategy External makes CAPK drain them through the tenant cluster before their VM moves.
replace_cluster_api_workers() {
  local ns pod owner machine
  local template='{range .items[*]}{.metadata.namespace}{"\t"}{.metadata.name}{"\t"}'
  template+='{.metadata.ownerReferences[0].name}{"\n"}{end}'
  while IFS=$'\t' read -r ns pod owner; do
    [ -n "$owner" ] || continue
    # No Machine (a pod labelled so by hand, or a cell without CAPK's CRDs): left to the drain, named if it stays.
    machine="$(kc -n "$ns" get kubevirtmachines.infrastructure.cluster.x-k8s.io "$owner" --ignore-not-found \
      -o 'jsonpath={.metadata.ownerReferences[?(@.kind=="Machine")].name}')" || machine=""
    if [ -n "$machine" ]; then
      echo "gpucell: replacing tenant-cluster worker $ns/$owner on $NODE (pod $pod): deleting its Machine" \
        "$machine (Cluster API drains the node in the tenant cluster first)"
      kc -n "$ns" delete machines.cluster.x-k8s.io "$machine" --ignore-not-found --wait=false >/dev/null
    fi
  done < <(
    pods="$(kc get pods --all-namespaces --field-selector "spec.nodeName=$NODE" -l cluster.x-k8s.io/role=worker \
      -o "jsonpath=$template")" || pods=""
    if [ "$1" = all ]; then
      printf '%s\n' "$pods"
    else  # the workers holding a GPU: their pods are among gpu_pods (namespace, pod, owner)
      grep -F -x -f <(gpu_pods | awk -F '\t' '{ print $1 "\t" $2 "\t" $4 }') <<<"$pods" || true
    fi
  )
}
