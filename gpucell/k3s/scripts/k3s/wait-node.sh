# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_scripts.py (placeholders: _script_files.py).

# After a (re)start: a node that was Ready ($1 starts with True) is done when it is Ready again on the pinned
# version; a new node when it registered (it becomes Ready once the CNI runs, which comes after the servers).
# WAIT_WAY_OUT, when set, ends the message instead of the pointer to the journal.
wait_node() {
  local want what now _
  if [ "${1%% *}" = True ]; then
    want="True $K3S_VERSION"
    what="Ready on $K3S_VERSION"
  else
    want=""
    what="registered"
  fi
  now=""
  for _ in $(seq 1 @@ATTEMPTS@@); do
    now="$(node_status)"
    if { [ -n "$want" ] && [ "$now" = "$want" ]; } || { [ -z "$want" ] && [ -n "$now" ]; }; then
      echo "gpucell: node $NODE_NAME $what"
      return 0
    fi
    sleep 5
  done
  echo "gpucell: node $NODE_NAME not $what after @@TIMEOUT@@ s (its kubelet reports" \
    "'$now')${WAIT_WAY_OUT:-"; see journalctl -u $K3S_SERVICE"}" >&2
  exit 1
}

