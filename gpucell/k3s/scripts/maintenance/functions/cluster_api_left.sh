# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

# After a timeout: name the tenant-cluster VMs still on the node and where to look. Cluster API takes them down (a
# worker once its Machine is deleted, a control-plane VM once CAPK has drained its node), so when they stay, its
# controllers or the Machines' drains in the tenant cluster are stuck, not a PodDisruptionBudget of the cell.
cluster_api_left() {
  local left
  left="$(kc get pods --all-namespaces --field-selector "spec.nodeName=$NODE" -l cluster.x-k8s.io/cluster-name \
    -o 'jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.ownerReferences[0].name} {end}')" || left=""
  [ -n "$left" ] || return 0
  echo "gpucell: tenant-cluster VMs still on $NODE: ${left}- Cluster API takes them down, each after draining its" \
    "node in the tenant cluster (for at most the Machine's nodeDrainTimeoutSeconds): check its controllers" \
    "(kubectl -n capi-system get pods; kubectl -n capk-system get pods) and the Machines (kubectl -n <namespace>" \
    "get machines)" >&2
}
