# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

  if [ "$(field_of "$1" '{.metadata.labels.@@KEY@@}')" != @@VALUE@@ ]; then
    found+=",gpu-reconfiguration"
  fi
