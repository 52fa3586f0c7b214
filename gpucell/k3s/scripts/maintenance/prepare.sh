# shellcheck shell=bash
# shellcheck disable=SC2034  # DRAIN_TIMEOUT, DRAIN_ATTEMPTS: read by the drain functions
# shellcheck disable=SC2153  # DRAIN_LOST: set by functions/drain_node.sh
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

readonly WANT_VERSION=@@VERSION@@
readonly WANT_CONFIG=@@DIGEST@@
readonly DRAIN_TIMEOUT=@@DRAIN_TIMEOUT@@
readonly DRAIN_ATTEMPTS=@@DRAIN_ATTEMPTS@@
readonly QUARANTINE=@@QUARANTINE@@
@@GPU_VALUES@@

# Why Node $1 must leave service to run what is wanted (with $2 its config digest; empty for another node of the
# pool, whose digest is its own), comma-separated; nothing when it already does.
reasons_of() {
  local found="" have i path
  have="$(field_of "$1" '{.status.nodeInfo.kubeletVersion}')"
  if [ "$have" != "$WANT_VERSION" ]; then
    found+=",k3s-upgrade"
  fi
  have="$(field_of "$1" '{.metadata.annotations.@@CONFIG_PATH@@}')"
  if [ -n "$2" ] && [ -n "$have" ] && [ "$have" != "$2" ]; then
    found+=",k3s-restart"
  fi
  # The GPU configuration: its labels, the one recorded at the last settle, the resources it advertises. A node
  # that never settled under this gpucell has no gpu-config annotation: a resource it should advertise and does not
  # at all (another vGPU type, dra -> container) means its GPU configuration changes.
  for i in "${!GPU_LABEL_PATHS[@]}"; do
    if [ "$(field_of "$1" "{.metadata.labels.${GPU_LABEL_PATHS[$i]}}")" != "${GPU_LABEL_VALUES[$i]}" ]; then
      found+=",gpu-reconfiguration"
    fi
  done
  if [ -n "$WANT_GPU" ]; then
    have="$(field_of "$1" '{.metadata.annotations.@@GPU_CONFIG_PATH@@}')"
    if [ -n "$have" ] && [ "$have" != "$WANT_GPU" ]; then
      found+=",gpu-reconfiguration"
    fi
    for path in "${GPU_RESOURCE_PATHS[@]}"; do
      if [ -z "$have" ] && [ -z "$(field_of "$1" "{.status.allocatable.$path}")" ]; then
        found+=",gpu-reconfiguration"
      fi
    done
  fi
  tr ',' '\n' <<<"$found" | awk 'NF && !seen[$0]++' | paste -sd, -
}

if [ ! -x "$K3S_BIN" ]; then
  echo "gpucell: k3s is not installed on this server yet (a new cell): nothing to prepare on $NODE"
  exit 0
fi
if ! api_up; then
  echo "gpucell: the API server on this server does not answer; cannot prepare $NODE" >&2
  exit 1
fi
if ! node_exists; then
  echo "gpucell: $NODE is not registered yet: nothing to prepare"
  exit 0
fi

# Why the node must leave service: what an interrupted run recorded, what it runs now, and its quarantine. A
# quarantine the config no longer has is lifted: the node was drained already, settle gives it back.
carried="$(node_field '{.metadata.annotations.@@MAINTENANCE_PATH@@}')"
if [ -z "$QUARANTINE" ] && [[ ",$carried," == *,quarantine,* ]]; then
  carried="$(tr ',' '\n' <<<"$carried" | awk '$0 != "quarantine"' | paste -sd, -),quarantine-lifted"
fi
reasons="$carried,$(reasons_of "$NODE" "$WANT_CONFIG")"
if [ -n "$QUARANTINE" ]; then
  reasons="$reasons,quarantine"
fi
reasons="$(tr ',' '\n' <<<"$reasons" | awk 'NF && !seen[$0]++' | paste -sd, -)"
if [ -z "$reasons" ]; then
  held_by="$(node_field '{.metadata.annotations.@@HELD_PATH@@}')"
  if [ -n "$held_by" ]; then
    kc annotate node "$NODE" "@@HELD@@-" >/dev/null
    kc uncordon "$NODE" >/dev/null
    echo "gpucell: $NODE needs no maintenance: released (it was held for the rollout begun on $held_by)"
  fi
  echo "gpucell: $NODE already runs k3s $WANT_VERSION with its config and GPU configuration; nothing to prepare"
  exit 0
fi

# A NotReady node's kubelet cannot confirm an eviction: draining it would only wait out the whole timeout.
if [ "$(node_field '{.status.conditions[?(@.type=="Ready")].status}')" != True ]; then
  if [ -n "$carried" ]; then
    echo "gpucell: $NODE is not Ready but already out of service ($reasons): continuing its maintenance"
    exit 0
  fi
  if [ "$reasons" = quarantine ]; then
    kc annotate node "$NODE" --overwrite "@@MAINTENANCE@@=quarantine" >/dev/null
    kc cordon "$NODE"
    echo "gpucell: $NODE is not Ready: quarantined without a drain (its kubelet cannot confirm evictions; its pods" \
      "go once it is back, or with its Node when it is removed)"
    exit 0
  fi
  echo "gpucell: $NODE is not Ready (its kubelet does not answer), so it cannot be drained for: $reasons." \
    "If the host is down for good, set removalPolicy: forget on it and remove it from the config (see" \
    "docs/operations.md, 'A host died'); if it was re-imaged, remove it in one pulumi up and add it back in the" \
    "next ('A re-imaged host'); if it comes back, run pulumi up again" >&2
  exit 1
fi

echo "gpucell: taking $NODE out of service: $reasons"
if [ "$(node_field '{.spec.unschedulable}')" = true ] && [ -z "$carried" ] \
  && [ -z "$(node_field '{.metadata.annotations.@@HELD_PATH@@}')" ]; then
  kc annotate node "$NODE" --overwrite "@@KEEP_CORDONED@@=true" >/dev/null
fi
kc annotate node "$NODE" --overwrite "@@MAINTENANCE@@=$reasons" >/dev/null
if [ -n "$(node_field '{.metadata.annotations.@@HELD_PATH@@}')" ]; then
  kc annotate node "$NODE" "@@HELD@@-" >/dev/null
fi
kc cordon "$NODE"
@@HOLD@@
case ",$reasons," in
  *,k3s-upgrade,* | *,k3s-restart,* | *,quarantine,*)
    if ! drain_node; then
      if [ "$DRAIN_LOST" = 1 ]; then
        echo "gpucell: $NODE stays cordoned ($reasons). If the host is down for good, set removalPolicy: forget on" \
          "it and remove it from the config (see docs/operations.md, 'A host died'); if it comes back, run pulumi" \
          "up again" >&2
      fi
      exit 1
    fi
    ;;
  *,gpu-reconfiguration,*) evict_gpu_pods ;;
  *) ;;  # quarantine-lifted alone: drained when it was quarantined
esac
echo "gpucell: $NODE is ready for maintenance"
