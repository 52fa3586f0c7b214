# shellcheck shell=bash
# shellcheck disable=SC2034  # DRAIN_TIMEOUT: read by functions/drain_node.sh
# shellcheck disable=SC2153  # DRAIN_LOST: set by functions/drain_node.sh
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
  start_stopped_vms
  echo "gpucell: $NODE is not registered: nothing to drain"
  exit 0
fi
@@QUORUM@@
kc cordon "$NODE"
# The node leaves for good: the GPU VMs its drain stopped (Halted, their runStrategy recorded), on this run or on
# one that failed or found the host dead mid-drain, get their runStrategy back at once and start on another node,
# whichever way the removal goes on; no later step of this node would give it back.
if [ "$(node_field '{.status.conditions[?(@.type=="Ready")].status}')" != True ]; then
  start_stopped_vms
  echo "gpucell: $NODE is not Ready (its kubelet is gone): not draining; its pods go with its Node object"
  exit 0
fi
if ! drain_node; then
  start_stopped_vms
  if [ "$DRAIN_LOST" = 1 ]; then
    echo "gpucell: $NODE is removed without its drain; its pods go with its Node object"
    exit 0
  fi
  exit 1
fi
start_stopped_vms
@@REPLICAS@@
echo "gpucell: $NODE is drained and cordoned for removal"
