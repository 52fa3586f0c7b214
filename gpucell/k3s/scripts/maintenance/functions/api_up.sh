# shellcheck shell=bash
# shellcheck disable=SC2034  # API_SERVER: read by kc_once (functions/kc.sh)
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

# An API server that answers /readyz: this server's own (it may be restarting), else the cell's API endpoint, which
# reaches the other servers; each tried in turn, for up to @@API_TIMEOUT@@ s in all. The one found serves every later
# call (API_SERVER, empty for this server's own).
api_up() {
  local round endpoint
  local -a endpoints=("")
  if [ -n "$API_ENDPOINT" ]; then
    endpoints+=("$API_ENDPOINT")
  fi
  for round in $(seq 1 @@API_ATTEMPTS@@); do
    for endpoint in "${endpoints[@]}"; do
      API_SERVER=$endpoint
      if kc_once get --raw=/readyz >/dev/null 2>&1; then
        if [ -n "$endpoint" ]; then
          echo "gpucell: using the API at $endpoint: this server's own does not answer"
        fi
        return 0
      fi
      if [ "$round" -eq 1 ] && [ -z "$endpoint" ] && [ -n "$API_ENDPOINT" ]; then
        echo "gpucell: the API on this server (127.0.0.1) does not answer; trying the cell's API endpoint" \
          "$API_ENDPOINT" >&2
      fi
    done
    sleep "$POLL_SECONDS"
  done
  API_SERVER=""
  if [ -n "$API_ENDPOINT" ]; then
    echo "gpucell: neither this server's API nor $API_ENDPOINT answered within @@API_TIMEOUT@@ s" >&2
  fi
  return 1
}
