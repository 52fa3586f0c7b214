# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

if [ ! -x "$K3S_BIN" ]; then
  echo "gpucell: k3s is not installed on this server: nothing to forget about $NODE"
  exit 0
fi
if ! api_up; then
  echo "gpucell: the API server on this server does not answer; cannot delete node $NODE" >&2
  exit 1
fi
@@ALIVE_GUARD@@
# k3s is uninstalled from the node by now (or the machine is gone), so its kubelet cannot register it
# again. On a server, k3s removes its etcd member before the Node goes (its etcd.k3s.cattle.io finalizer).
kc delete node "$NODE" --ignore-not-found --wait=false
for _ in $(seq 1 @@ATTEMPTS@@); do
  if ! node_exists; then
    # The node's password goes too: a host rebuilt under the same name could not join again (k3s-io/k3s#6054).
    kc -n kube-system delete secret "$NODE.node-password.k3s" --ignore-not-found >/dev/null
    # A GPU VM a drain of this node stopped and nothing gave back yet (a removal begun before gpucell gave them back
    # on the drain): its runStrategy back, so that it starts on another node.
    start_stopped_vms
    echo "gpucell: node $NODE removed from the cell"
    exit 0
  fi
  sleep "$POLL_SECONDS"
done
echo "gpucell: node $NODE is still listed after @@TIMEOUT@@ s; see kubectl get node $NODE -o yaml (finalizers)" >&2
exit 1
