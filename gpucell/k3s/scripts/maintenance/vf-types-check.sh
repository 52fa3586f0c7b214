# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

  value="$(node_field '{.metadata.annotations.@@KEY@@}')"
  if [ "$value" != @@WANT@@ ]; then
    echo "@@WHAT@@ is '${value:-unset}', not '@@WANT_TEXT@@'"
  fi
