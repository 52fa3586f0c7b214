# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

# True for a VirtualMachineInstance of a tenant cluster (CAPK labels every VM it makes with its Cluster's name):
# Cluster API takes those down itself (replace_cluster_api_workers; KubeVirt's External eviction for the others).
cluster_api_vm() {
  [ -n "$(kc -n "$1" get virtualmachineinstances.kubevirt.io "$2" --ignore-not-found \
    -o 'jsonpath={.metadata.labels.cluster\.x-k8s\.io/cluster-name}')" ]
}
