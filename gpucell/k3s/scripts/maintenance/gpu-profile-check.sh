# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

  have="$(field_of "$1" '{.metadata.annotations.@@GPU_CONFIG_PATH@@}')"
  if [ -n "$have" ] && [ "$have" != "$WANT_GPU" ]; then
    found+=",gpu-reconfiguration"
  fi
