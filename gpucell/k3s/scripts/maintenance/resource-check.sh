# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

  value="$(node_field '{.status.allocatable.@@KEY@@}')"
  if [ "$value" != @@COUNT@@ ]; then
    echo "allocatable @@RESOURCE@@ is '${value:-0}', expected @@COUNT@@"
  fi
