# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

# "<namespace> <pod> <owner kind> <owner name>", tab-separated, of every unfinished pod on the node that holds a
# GPU: a limit on an nvidia.com/ resource (a GPU, MIG slice, passthrough GPU or vGPU) in a container or an init
# container, or a DRA ResourceClaim (spec.resourceClaims: no extended resource shows such a GPU).
gpu_pods() {
  local template='{range .items[*]}{.metadata.namespace}{"\t"}{.metadata.name}{"\t"}'
  template+='{.metadata.ownerReferences[0].kind}{"\t"}{.metadata.ownerReferences[0].name}{"\t"}'
  template+='{.spec.containers[*].resources.limits} {.spec.initContainers[*].resources.limits}{"\t"}'
  template+='{.spec.resourceClaims[*].name}{"\n"}{end}'
  kc get pods --all-namespaces --field-selector "spec.nodeName=$NODE,status.phase!=Succeeded,status.phase!=Failed" \
    -o "jsonpath=$template" \
    | awk -F '\t' '$5 ~ /"nvidia\.com\// || $6 != "" { print $1 "\t" $2 "\t" $3 "\t" $4 }'
}
