# shellcheck shell=bash
# shellcheck disable=SC2034  # DRAIN_TIMEOUT: read by functions/drain_node.sh
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

readonly DRAIN_TIMEOUT=@@DRAIN_TIMEOUT@@
@@DRAIN_ATTEMPTS@@

if [ ! -x "$K3S_BIN" ]; then
  echo "gpucell: k3s is not installed on this server: nothing to drain for $NODE"
  exit 0
fi
if ! api_up; then
  echo "gpucell: the API server on this server does not answer; cannot drain $NODE before removing it" >&2
  exit 1
fi
if ! node_exists; then
  echo "gpucell: $NODE is not registered: nothing to drain"
  exit 0
fi
@@QUORUM@@
kc cordon "$NODE"
if [ "$(node_field '{.status.conditions[?(@.type=="Ready")].status}')" != True ]; then
  echo "gpucell: $NODE is not Ready (its kubelet is gone): not draining; its pods go with its Node object"
  exit 0
fi
drain_node
@@REPLICAS@@
echo "gpucell: $NODE is drained and cordoned for removal"
