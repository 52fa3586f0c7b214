# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_scripts.py (placeholders: _script_files.py).

# A server is done when its API server answers; the next server and the agents join through it.
wait_api() {
  local _
  for _ in $(seq 1 @@ATTEMPTS@@); do
    if as_root "$K3S_BIN" kubectl get --raw=/readyz >/dev/null 2>&1; then
      echo "gpucell: API server ready"
      return 0
    fi
    sleep 5
  done
  echo "gpucell: API server not ready after @@TIMEOUT@@ s" >&2
  exit 1
}

