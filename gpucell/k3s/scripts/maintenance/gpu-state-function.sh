# shellcheck shell=bash
# shellcheck disable=SC2153  # POD_NAMESPACES, RESOURCES, STATE_LABELS...: the settle's header
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).
# The arrays are the settle's header (GPU values): one entry per state label, per resource.

# What still keeps the node from its GPU state, one line each; nothing once the GPU Operator reports it.
gpu_state_problems() {
  local i value namespace pods template
  for i in "${!STATE_LABELS[@]}"; do
    value="$(node_field "{.metadata.labels.${STATE_LABEL_PATHS[$i]}}")"
    if [ "$value" != success ]; then
      echo "${STATE_LABELS[$i]} is '${value:-unset}', not 'success'"
    fi
  done
  if [ -n "$WANT_VF_TYPES" ]; then
    value="$(node_field '{.metadata.annotations.@@VF_TYPES_PATH@@}')"
    if [ "$value" != "$WANT_VF_TYPES" ]; then
      echo "@@VF_TYPES@@ is '${value:-unset}', not '$WANT_VF_TYPES'"
    fi
  fi
  for i in "${!RESOURCES[@]}"; do
    value="$(node_field "{.status.allocatable.${RESOURCE_PATHS[$i]}}")"
    if [ "$value" != "${RESOURCE_COUNTS[$i]}" ]; then
      echo "allocatable ${RESOURCES[$i]} is '${value:-0}', expected ${RESOURCE_COUNTS[$i]}"
    fi
  done
  template='{range .items[*]}{.metadata.name}{"\t"}{.status.phase}{"\t"}'
  template+='{.status.containerStatuses[*].ready}{"\n"}{end}'
  for namespace in "${POD_NAMESPACES[@]}"; do
    pods="$(kc get pods -n "$namespace" --field-selector "spec.nodeName=$NODE" -o "jsonpath=$template")"
    if [ -z "$pods" ]; then
      echo "no pod of $namespace runs on $NODE yet"
    fi
    awk -F '\t' -v ns="$namespace" -v skip="$SKIP_PODS" 'NF && (skip == "" || index($1, skip) != 1) \
      && $2 != "Succeeded" && ($2 != "Running" || $3 == "" || $3 ~ /false/) {
      print "pod " ns "/" $1 " is not ready (" $2 ")" }' <<<"$pods"
  done
}

