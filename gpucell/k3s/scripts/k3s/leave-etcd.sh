# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_scripts.py (placeholders: _script_files.py).

readonly K3S_BIN=/usr/local/bin/k3s
readonly NODE_NAME=@@NODE_NAME@@

kc() {
  as_root "$K3S_BIN" kubectl --kubeconfig @@KUBECONFIG@@ --request-timeout=30s "$@"
}

# Leave etcd before going away: deleting this server's Node object (with its own admin kubeconfig) makes k3s
# remove its etcd member, so the remaining servers keep their quorum. Never --force, which skips the finalizer
# that does it. Waits (bounded) until the Node is gone, so that servers leave one after another. Tolerated
# failure (API already down, node already gone): the uninstall below must still run.
if [ -x "$K3S_BIN" ]; then
  if kc delete node "$NODE_NAME" --wait=false; then
    echo "gpucell: deleted node $NODE_NAME; waiting for k3s to remove its etcd member"
    gone=""
    for _ in $(seq 1 @@ATTEMPTS@@); do
      if [ -z "$(kc get node "$NODE_NAME" --ignore-not-found -o name 2>/dev/null)" ]; then
        gone=1
        break
      fi
      sleep 5
    done
    if [ -z "$gone" ]; then
      echo "gpucell: node $NODE_NAME still listed after @@TIMEOUT@@ s; check the etcd member list on the other" \
        "servers" >&2
    fi
  else
    echo "gpucell: could not delete node $NODE_NAME; check the etcd member list on the other servers" >&2
  fi
fi

