# shellcheck shell=bash
# shellcheck disable=SC2043  # @@OPERANDS@@ is a list of words
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).
# The vGPU device manager pauses the sandbox operands by label while it applies a type; killed meanwhile, it leaves
# them paused for good, and its own init container then waits for the paused validator forever
# (NVIDIA/gpu-operator#2845). Before it is restarted they are set back to "true", as its own cleanup would have.

# Operand labels the vGPU device manager left at paused-for-vgpu-change are set back to "true", then it is restarted
# in namespace $1 (selector $2), because $3.
restart_vgpu_manager() {
  local key
  for key in @@OPERANDS@@; do
    if [ "$(node_field "{.metadata.labels.${key//./\\.}}")" = paused-for-vgpu-change ]; then
      kc label node "$NODE" --overwrite "$key=true" >/dev/null
      echo "gpucell: $key on $NODE was left paused-for-vgpu-change (NVIDIA/gpu-operator#2845): set back to true"
    fi
  done
  restart_pods "$1" "$2" "$3"
}

