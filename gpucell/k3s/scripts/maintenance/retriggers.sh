# shellcheck shell=bash
# shellcheck disable=SC2154  # problems, poll, stuck_after, restarted, plugin_restarts: the loop of gpu-wait.sh
# shellcheck disable=SC2034  # gave_up, gpus_lost: read after the loop of maintenance/gpu-wait.sh
# shellcheck disable=SC2153  # RETRIGGER_*, PLUGIN_*: the settle's header
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).
# A state manager acts on a *change* of its label: after 'failed' it is restarted so that it reads the label
# again (NVIDIA/gpu-operator#2833); still 'failed' a minute after that ends the wait. A state stuck elsewhere
# ('pending', unset) past stuck_after gets the same restart, once; 'rebooting' is the MIG manager at work.
# Re-trigger i runs "${RETRIGGER_DO[i]}" namespace selector reason (restart_pods, restart_vgpu_manager, retype_vfs).
# Only the advertised resources wrong, for a minute (at once when the last wait ran out): the device plugin read the
# devices before they changed and does not refresh (kubevirt/kubevirt#7084); restarted once a minute while that lasts.

  for i in "${!RETRIGGER_WHAT[@]}"; do
    what="${RETRIGGER_WHAT[$i]}"
    if [ "${restarted[$i]}" -eq 0 ]; then
      if grep -qF "$what is 'failed" <<<"$problems"; then
        "${RETRIGGER_DO[$i]}" "${RETRIGGER_NS[$i]}" "${RETRIGGER_SELECTOR[$i]}" "$what is 'failed' (${RETRIGGER_WHY[$i]})"
        restarted[i]=$poll
      elif [ "$poll" -ge "$stuck_after" ] && grep -qF "$what is '" <<<"$problems" \
        && ! grep -qF "$what is 'rebooting'" <<<"$problems"; then
        "${RETRIGGER_DO[$i]}" "${RETRIGGER_NS[$i]}" "${RETRIGGER_SELECTOR[$i]}" \
          "$what has not reached 'success' after $(((poll - 1) * POLL_SECONDS)) s (${RETRIGGER_WHY[$i]})"
        restarted[i]=$poll
      fi
    elif grep -qF "$what is 'failed" <<<"$problems" && [ $((poll - restarted[i])) -ge "$RETRIGGER_POLLS" ]; then
      gave_up="$what is still 'failed' $(((poll - restarted[i]) * POLL_SECONDS)) s after the restart"
      break 2
    fi
  done
  if [ -n "$PLUGIN_NS" ] && ! grep -qv '^allocatable ' <<<"$problems" \
    && { [ $((poll % RETRIGGER_POLLS)) -eq 0 ] || [ "$poll" -eq "$stuck_after" ]; }; then
    # Still short after PLUGIN_RESTARTS restarts: the devices are not there to find (a GPU off the bus, Xid 79),
    # which no restart brings back: the way out is the host's quarantine, not the rest of the timeout.
    if [ "$plugin_restarts" -ge "$PLUGIN_RESTARTS" ] && gpus_lost="$(gpus_missing)"; then
      gave_up="$plugin_restarts restarts of the device plugin did not bring the GPU resources back"
    else
      plugin_restarts=$((plugin_restarts + 1))
      restart_pods "$PLUGIN_NS" "$PLUGIN_SELECTOR" \
        "the node does not advertise its GPU resources (kubevirt/kubevirt#7084)"
    fi
  fi
