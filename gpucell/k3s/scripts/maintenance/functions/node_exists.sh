# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

node_exists() {
  [ -n "$(kc get node "$NODE" --ignore-not-found -o name)" ]
}
