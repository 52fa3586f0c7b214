# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

  value="$(node_field '{.metadata.labels.@@KEY@@}')"
  if [ "$value" != success ]; then
    echo "@@LABEL@@ is '${value:-unset}', not 'success'"
  fi
