# shellcheck shell=bash
# shellcheck disable=SC2034  # RETRIGGER_POLLS: read by the re-triggers of maintenance/gpu-wait.sh
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

readonly RETRIGGER_POLLS=@@RETRIGGER_POLLS@@

# Restart the pods matching selector $2 in namespace $1 on the node (their DaemonSet starts new ones), because $3.
restart_pods() {
  echo "gpucell: restarting $2 pods in $1 on $NODE: $3"
  kc -n "$1" delete pods -l "$2" --field-selector "spec.nodeName=$NODE" --ignore-not-found --wait=false >/dev/null
}

