# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

# Make the node's VF-typing service (gpucell-vgpu-types.service) start over, because $3 ($1 and $2, a namespace and
# a selector, are the other re-triggers'): it reads this annotation on every pass, learns the type id again and
# retypes the VFs.
retype_vfs() {
  echo "gpucell: re-triggering the SR-IOV vGPU typing on $NODE: $3"
  kc annotate node "$NODE" --overwrite "@@RETRIGGER@@=$(date +%s)" >/dev/null
}

