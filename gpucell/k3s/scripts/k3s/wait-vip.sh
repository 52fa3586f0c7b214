# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_scripts.py (placeholders: _script_files.py).

# The API VIP (network.apiVip) comes from kube-vip on the servers: joining through it, or finishing the first
# server, waits until it answers.
wait_vip() {
  local _
  for _ in $(seq 1 @@ATTEMPTS@@); do
    if curl -sfk --max-time 5 "$API_URL/cacerts" >/dev/null 2>&1; then
      echo "gpucell: API VIP $API_URL answers"
      return 0
    fi
    sleep 5
  done
  echo "gpucell: API VIP $API_URL does not answer after @@TIMEOUT@@ s; see the kube-vip pod on the servers" \
    "(crictl logs, network.apiVip.interface @@INTERFACE@@), or remove network.apiVip and put a load balancer at" \
    "network.apiEndpoint" >&2
  exit 1
}

