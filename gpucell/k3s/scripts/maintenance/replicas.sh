# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).
# Longhorn: the node's replicas are rebuilt on other nodes before it goes; a node deleted with replicas on it leaves
# their volumes degraded or stuck (longhorn/longhorn#1631).

if [ -n "$(kc -n longhorn-system get nodes.longhorn.io "$NODE" --ignore-not-found -o name)" ]; then
  kc -n longhorn-system patch nodes.longhorn.io "$NODE" --type merge \
    -p '{"spec":{"allowScheduling":false,"evictionRequested":true}}' >/dev/null
  replicas=""
  for _ in $(seq 1 "$DRAIN_ATTEMPTS"); do
    replicas="$(kc -n longhorn-system get replicas.longhorn.io -l "longhorn.io/node=$NODE" -o name)"
    if [ -z "$replicas" ]; then
      break
    fi
    sleep "$POLL_SECONDS"
  done
  if [ -n "$replicas" ]; then
    echo "gpucell: Longhorn replicas still on $NODE after $DRAIN_TIMEOUT s: $(tr '\n' ' ' <<<"$replicas")- their" \
      "volumes have nowhere else to go (storage.replicas above the nodes left, or too little disk); $NODE stays" \
      "cordoned; see kubectl -n longhorn-system get volumes.longhorn.io, then run pulumi up again" >&2
    exit 1
  fi
  echo "gpucell: Longhorn rebuilt every replica of $NODE on other nodes"
fi
