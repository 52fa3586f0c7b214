# shellcheck shell=bash
# shellcheck disable=SC2034  # GPU_ATTEMPTS, GPU_TIMEOUT: read by maintenance/gpu-wait.sh
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

readonly GPU_ATTEMPTS=@@GPU_ATTEMPTS@@
readonly GPU_TIMEOUT=@@GPU_TIMEOUT@@

# What still keeps the node from its GPU state, one line each; nothing once the GPU Operator reports it.
gpu_state_problems() {
  local @@LOCALS@@
@@STATE_CHECKS@@
@@RESOURCE_CHECKS@@
  template='{range .items[*]}{.metadata.name}{"\t"}{.status.phase}{"\t"}'
  template+='{.status.containerStatuses[*].ready}{"\n"}{end}'
  local -a namespaces=(@@POD_NAMESPACES@@)
  for namespace in "${namespaces[@]}"; do
    pods="$(kc get pods -n "$namespace" --field-selector "spec.nodeName=$NODE" -o "jsonpath=$template")"
    if [ -z "$pods" ]; then
      echo "no pod of $namespace runs on $NODE yet"
    fi
    awk -F '\t' -v ns="$namespace" -v skip=@@SKIP_PODS@@ 'NF && (skip == "" || index($1, skip) != 1) \
      && $2 != "Succeeded" && ($2 != "Running" || $3 == "" || $3 ~ /false/) {
      print "pod " ns "/" $1 " is not ready (" $2 ")" }' <<<"$pods"
  done
}

