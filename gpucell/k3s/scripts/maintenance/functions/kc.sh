# shellcheck shell=bash
# shellcheck disable=SC2170  # numbers come in as placeholders
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

API_SERVER=""

kc_once() {
  if [ -n "$API_SERVER" ]; then
    as_root "$K3S_BIN" kubectl --kubeconfig "$KUBECONFIG_FILE" --server "$API_SERVER" --request-timeout=60s "$@"
  else
    as_root "$K3S_BIN" kubectl --kubeconfig "$KUBECONFIG_FILE" --request-timeout=60s "$@"
  fi
}

# kubectl, with a call that fails retried (@@KC_ATTEMPTS@@ attempts, @@POLL@@ s apart): an API server restarting or a
# timeout must not end the script (set -e). Not retried: drain (bounded by its own --timeout) and create (an
# eviction, whose 429 its callers retry until their timeout).
kc() {
  local attempt
  for attempt in $(seq 1 @@KC_ATTEMPTS@@); do
    if kc_once "$@"; then
      return 0
    fi
    case "$1" in
      drain | create) return 1 ;;
    esac
    if [ "$attempt" -lt @@KC_ATTEMPTS@@ ]; then
      echo "gpucell: kubectl $1 failed (attempt $attempt of @@KC_ATTEMPTS@@); retrying in $POLL_SECONDS s" >&2
      sleep "$POLL_SECONDS"
    fi
  done
  echo "gpucell: kubectl $* failed @@KC_ATTEMPTS@@ times" >&2
  return 1
}
