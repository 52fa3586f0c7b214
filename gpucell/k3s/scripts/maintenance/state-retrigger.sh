# shellcheck shell=bash
# shellcheck disable=SC1102,SC2046,SC2086,SC2145,SC2170,SC2198,SC2276  # @@VAR@@ names a shell variable
# shellcheck disable=SC2105,SC2154  # problems, poll, stuck_after, break: the loop of maintenance/gpu-wait.sh
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).
# A state manager acts on a *change* of its label: after 'failed' it is restarted so that it reads the label
# again (NVIDIA/gpu-operator#2833); still 'failed' a minute after that ends the wait. A state stuck elsewhere
# ('pending', unset) past stuck_after gets the same restart, once; 'rebooting' is the MIG manager at work.

  if [ "$@@VAR@@" -eq 0 ]; then
    if grep -qF "@@WHAT@@ is 'failed" <<<"$problems"; then
      @@ACTION@@ "@@WHAT@@ is 'failed' (@@WHY@@)"
      @@VAR@@=$poll
    elif [ "$poll" -ge "$stuck_after" ] && grep -qF "@@WHAT@@ is '" <<<"$problems" \
      && ! grep -qF "@@WHAT@@ is 'rebooting'" <<<"$problems"; then
      @@ACTION@@ "@@WHAT@@ has not reached 'success' after $(((poll - 1) * POLL_SECONDS)) s (@@WHY@@)"
      @@VAR@@=$poll
    fi
  elif grep -qF "@@WHAT@@ is 'failed" <<<"$problems" && [ $((poll - @@VAR@@)) -ge "$RETRIGGER_POLLS" ]; then
    break
  fi
