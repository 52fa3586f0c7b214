# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).
# A node that never settled under this gpucell has no gpu-config annotation: a resource it should advertise and
# does not at all (another vGPU type, dra -> container) means its GPU configuration changes.

  if [ -z "$have" ] && [ -z "$(field_of "$1" '{.status.allocatable.@@KEY@@}')" ]; then
    found+=",gpu-reconfiguration"
  fi
