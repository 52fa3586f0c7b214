# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

readonly WANT_VERSION=@@VERSION@@
readonly WANT_CONFIG=@@DIGEST@@
readonly READY_ATTEMPTS=@@READY_ATTEMPTS@@
readonly WANT_LABELS=@@WANT_LABELS@@
readonly WANT_GPU=@@GPU_PROFILE@@
readonly QUARANTINE=@@QUARANTINE@@
@@GPU_VALUES@@

# The GPU configuration the node now runs, for the next prepare to compare (not on non-GPU nodes).
record_gpu_config() {
  if [ -n "$WANT_GPU" ] && [ "$(node_field '{.metadata.annotations.@@GPU_CONFIG_PATH@@}')" != "$WANT_GPU" ]; then
    kc annotate node "$NODE" --overwrite "@@GPU_CONFIG@@=$WANT_GPU" >/dev/null
  fi
}

# Labels gpucell kept here before and no longer wants are removed: the NodePatch only gives up its own claim on
# them, and k3s's registration may share it.
prune_labels() {
  local had key
  local -a keys
  had="$(node_field '{.metadata.annotations.@@LABELS_PATH@@}')"
  IFS=, read -ra keys <<<"$had"
  for key in "${keys[@]}"; do
    case ",$WANT_LABELS," in
      *",$key,"*) ;;
      *)
        kc label node "$NODE" "$key-" >/dev/null
        echo "gpucell: removed label $key from $NODE"
        ;;
    esac
  done
  if [ "$had" != "$WANT_LABELS" ]; then
    kc annotate node "$NODE" --overwrite "@@LABELS@@=$WANT_LABELS" >/dev/null
  fi
}

# The node Ready on the pinned version, within READY_ATTEMPTS polls.
wait_ready() {
  local status=""
  for _ in $(seq 1 "$READY_ATTEMPTS"); do
    status="$(node_field '{.status.conditions[?(@.type=="Ready")].status} {.status.nodeInfo.kubeletVersion}')" \
      || status="(the API did not answer)"
    if [ "$status" = "True $WANT_VERSION" ]; then
      return 0
    fi
    sleep "$POLL_SECONDS"
  done
  echo "gpucell: $NODE is not Ready on $WANT_VERSION within $((READY_ATTEMPTS * POLL_SECONDS)) s (it reports" \
    "'$status'); it stays cordoned; see kubectl describe node $NODE and the k3s service's journal on the host," \
    "then run pulumi up again" >&2
  return 1
}

@@GPU_STATE_FUNCTION@@
if [ ! -x "$K3S_BIN" ]; then
  echo "gpucell: k3s is not installed on this server; cannot settle $NODE" >&2
  exit 1
fi
if ! api_up; then
  echo "gpucell: the API server on this server does not answer; cannot settle $NODE" >&2
  exit 1
fi
if ! node_exists; then
  echo "gpucell: $NODE is not registered; its k3s did not join the cell" >&2
  exit 1
fi
@@RELEASE_TRAP@@
prune_labels
reasons="$(node_field '{.metadata.annotations.@@MAINTENANCE_PATH@@}')"
if [ -z "$reasons" ]; then
  if [ "$(node_field '{.metadata.annotations.@@CONFIG_PATH@@}')" != "$WANT_CONFIG" ]; then
    kc annotate node "$NODE" --overwrite "@@CONFIG@@=$WANT_CONFIG" >/dev/null
  fi
  record_gpu_config
  start_stopped_vms
@@BAKE_UNFINISHED@@
  echo "gpucell: $NODE was not taken out of service; nothing to settle"
  exit 0
fi

# A quarantined host stays out of service: Ready on the pinned version after a k3s change, but its GPU state is not
# waited for (its fault is why it is out); the GPU VMs stopped on it start again elsewhere.
if [ -n "$QUARANTINE" ]; then
  case ",$reasons," in
    *,k3s-upgrade,* | *,k3s-restart,*) wait_ready || exit 1 ;;
  esac
  kc annotate node "$NODE" --overwrite "@@CONFIG@@=$WANT_CONFIG" "@@MAINTENANCE@@=quarantine" >/dev/null
  start_stopped_vms
  echo "gpucell: $NODE stays cordoned: quarantined ($QUARANTINE); its GPU VMs start again elsewhere"
  exit 0
fi

wait_ready || exit 1
@@GPU_WAIT@@
kc annotate node "$NODE" --overwrite "@@CONFIG@@=$WANT_CONFIG" >/dev/null
record_gpu_config
if [ "$(node_field '{.metadata.annotations.@@KEEP_CORDONED_PATH@@}')" = true ]; then
  echo "gpucell: $NODE was cordoned before its maintenance; it stays cordoned"
  kc annotate node "$NODE" "@@MAINTENANCE@@-" "@@KEEP_CORDONED@@-" >/dev/null
else
  kc annotate node "$NODE" "@@MAINTENANCE@@-" >/dev/null
  kc uncordon "$NODE"
fi
start_stopped_vms
echo "gpucell: $NODE is back in service"
@@BAKE@@
