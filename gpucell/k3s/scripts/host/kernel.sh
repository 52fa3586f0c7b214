# shellcheck shell=bash
# shellcheck disable=SC2170  # numbers come in as placeholders
# A fragment of the node scripts, rendered by gpucell/k3s/_host_setup.py (placeholders: _script_files.py).


# SR-IOV vGPU needs NVIDIA's vendor-specific VFIO framework, which Linux provides from @@MAJOR@@.@@MINOR@@.
gpucell_release=$(cat "${GPUCELL_PROCFS_ROOT:-/proc}/sys/kernel/osrelease")
gpucell_major=$(echo "$gpucell_release" | cut -d . -f 1)
gpucell_minor=$(echo "$gpucell_release" | cut -d . -f 2 | tr -cd '0-9')
if [ "$gpucell_major" -lt @@MAJOR@@ ] \
  || { [ "$gpucell_major" -eq @@MAJOR@@ ] && [ "${gpucell_minor:-0}" -lt @@MINOR@@ ]; }; then
  gpucell_msg="gpucell: kernel $gpucell_release is older than @@MAJOR@@.@@MINOR@@: pool @@POOL@@ runs @@MODEL@@ vGPUs as"
  gpucell_msg+=" SR-IOV virtual functions (vGPU driver branch @@BRANCH@@), which need Linux @@MAJOR@@.@@MINOR@@ or later;"
  echo "$gpucell_msg boot a newer kernel or use a vGPU driver older than branch 550" >&2
  exit 1
fi
