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

# kubectl, with a call that could not reach the API retried (@@KC_ATTEMPTS@@ attempts @@POLL@@ s apart, over
# @@KC_SECONDS@@ s: more than an API server takes to restart), so that a restarting API server or a timeout does not
# end the script (set -e). An answer of the API (NotFound, Forbidden, a missing kind) is not retried: it would not
# change. Not retried either: drain (bounded by its own --timeout) and create (an eviction, whose 429 its callers
# retry until their timeout). Its standard error is read (to tell the two apart) and printed; its output goes through.
kc() {
  local attempt err
  for attempt in $(seq 1 @@KC_ATTEMPTS@@); do
    if { err="$(kc_once "$@" 2>&1 1>&3 3>&-)"; } 3>&1; then
      [ -z "$err" ] || printf '%s\n' "$err" >&2
      return 0
    fi
    [ -z "$err" ] || printf '%s\n' "$err" >&2
    case "$1" in
      drain | create) return 1 ;;
    esac
    if ! grep -qiE '@@UNREACHABLE@@' <<<"$err"; then
      return 1
    fi
    if [ "$attempt" -lt @@KC_ATTEMPTS@@ ]; then
      echo "gpucell: kubectl $1 failed (attempt $attempt of @@KC_ATTEMPTS@@); retrying in $POLL_SECONDS s" >&2
      sleep "$POLL_SECONDS"
    fi
  done
  echo "gpucell: kubectl $* could not reach the API for @@KC_SECONDS@@ s (@@KC_ATTEMPTS@@ attempts): longer than a" \
    "restart of an API server takes; check the servers (sudo k3s kubectl get --raw=/readyz, journalctl -u k3s on" \
    "each), then run pulumi up again: every step resumes from the node's state" >&2
  return 1
}
