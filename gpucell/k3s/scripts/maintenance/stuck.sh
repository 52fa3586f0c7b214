# shellcheck shell=bash
# shellcheck disable=SC2034  # stuck_after, restarted, plugin_restarts: read by the re-triggers of gpu-wait.sh
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).
# The first look past which a state neither 'success' nor 'failed' counts as stuck: at once when the last wait on
# the node ran out (it left the annotation), else after STUCK_POLLS looks.

stuck_after=@@STUCK_POLLS@@
restarted=()  # per re-trigger: the poll at which it acted, 0 before
plugin_restarts=0  # of the device plugin, while only the resources are wrong
for i in "${!RETRIGGER_WHAT[@]}"; do
  restarted[i]=0
done
if [ -n "$last_wait" ]; then
  echo "gpucell: the last wait for $NODE's GPU state ran out ($last_wait): re-triggering what must act first"
  stuck_after=1
fi
