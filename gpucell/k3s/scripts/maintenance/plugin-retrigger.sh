# shellcheck shell=bash
# shellcheck disable=SC2154  # problems, poll, stuck_after: the loop of maintenance/gpu-wait.sh
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).
# Only the advertised resources are wrong, for a minute (at once when the last wait ran out): the device plugin read
# the devices before they changed and does not refresh (kubevirt/kubevirt#7084); restarted once a minute while that
# lasts.

  if ! grep -qv '^allocatable ' <<<"$problems" \
    && { [ $((poll % RETRIGGER_POLLS)) -eq 0 ] || [ "$poll" -eq "$stuck_after" ]; }; then
    restart_pods @@NAMESPACE@@ @@SELECTOR@@ "the node does not advertise its GPU resources (kubevirt/kubevirt#7084)"
  fi
