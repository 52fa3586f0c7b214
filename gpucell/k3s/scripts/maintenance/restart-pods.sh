# shellcheck shell=bash
# shellcheck disable=SC2034  # RETRIGGER_POLLS, PLUGIN_RESTARTS: read by the re-triggers of maintenance/gpu-wait.sh
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

readonly RETRIGGER_POLLS=@@RETRIGGER_POLLS@@
readonly PLUGIN_RESTARTS=@@PLUGIN_RESTARTS@@

# Restart the pods matching selector $2 in namespace $1 on the node (their DaemonSet starts new ones), because $3.
restart_pods() {
  echo "gpucell: restarting $2 pods in $1 on $NODE: $3"
  kc -n "$1" delete pods -l "$2" --field-selector "spec.nodeName=$NODE" --ignore-not-found --wait=false >/dev/null
}


# One line naming the GPU resources the node advertises fewer of than its hardware has, and the way out (its
# quarantine); fails when none is short (a count off the other way is not a lost GPU).
gpus_missing() {
  local i have short=""
  for i in "${!RESOURCES[@]}"; do
    have="$(node_field "{.status.allocatable.${RESOURCE_PATHS[$i]}}")"
    if [ "${have:-0}" -lt "${RESOURCE_COUNTS[$i]}" ] 2>/dev/null; then
      short+="${short:+, }$((RESOURCE_COUNTS[i] - ${have:-0})) of its ${RESOURCE_COUNTS[$i]} ${RESOURCES[$i]}"
    fi
  done
  [ -n "$short" ] || return 1
  echo "gpucell: $NODE is missing $short: a GPU its device plugin no longer finds is off the bus or failed (Xid" \
    "79 or 48/74/94/95: see nvidia-smi and the kernel log on the host), which no restart brings back. Quarantine" \
    "the host: quarantine: {reason: ...} on it under nodePools.$POOL_NAME.hosts in the stack config (its Node" \
    "gets the taint @@QUARANTINE_TAINT@@; docs/operations.md, 'Quarantine a host'), then run pulumi up again"
}
