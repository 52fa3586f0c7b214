# shellcheck shell=bash
# shellcheck disable=SC2154  # QUARANTINE, WANT_CONFIG: the settle's header
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

readonly ACCEPT_NS=@@NAMESPACE@@
readonly ACCEPT_JOB_NAME=@@JOB_NAME@@
readonly ACCEPT_ATTEMPTS=@@ATTEMPTS@@
readonly ACCEPT_TIMEOUT=@@TIMEOUT@@
readonly ACCEPT_ESTIMATE_SECONDS=@@ESTIMATE@@
# shellcheck disable=SC2016  # the Job's own scripts, expanded in its pod, not here
readonly ACCEPT_JOB=@@MANIFEST@@

# Why the node must pass an acceptance run before tenants may use it (empty: it need not): a GPU reconfiguration,
# a lifted quarantine, an earlier run that failed or was interrupted, a new machine ID (a re-image), or a node that
# joins. A node in service before gpucell ran acceptance (it has a k3s-config record, but no acceptance record) is
# adopted as it is. A quarantined host runs none: it stays out of service anyway.
acceptance_due() {
  local record machine
  if [ -n "$QUARANTINE" ]; then
    return 0
  fi
  case ",$1," in
    *,gpu-reconfiguration,*)
      echo "a GPU reconfiguration"
      return 0
      ;;
    *,quarantine-lifted,*)
      echo "a lifted quarantine"
      return 0
      ;;
  esac
  record="$(node_field '{.metadata.annotations.@@ACCEPTANCE_PATH@@}')"
  machine="$(node_field '{.status.nodeInfo.machineID}')"
  case "$record" in
    failed) echo "a failed acceptance run" ;;
    running) echo "an acceptance run that was interrupted" ;;
    passed | adopted)
      if [ "$(node_field '{.metadata.annotations.@@MACHINE_PATH@@}')" != "$machine" ]; then
        echo "a re-image (machine ID $machine)"
      fi
      ;;
    *)
      if [ -z "$(node_field '{.metadata.annotations.@@CONFIG_PATH@@}')" ]; then
        echo "joining the cell"
      else
        kc annotate node "$NODE" --overwrite "@@ACCEPTANCE@@=adopted" "@@MACHINE@@=$machine" >/dev/null
      fi
      ;;
  esac
}

# Tenants are kept off the node (its taint) from now until its run passes.
acceptance_hold() {
  if [ -z "$(node_field '{.spec.taints[?(@.key=="@@TAINT@@")].effect}')" ]; then
    kc taint node "$NODE" "@@TAINT@@:NoSchedule" --overwrite >/dev/null
  fi
  kc annotate node "$NODE" --overwrite "@@ACCEPTANCE@@=running" >/dev/null
  echo "gpucell: $NODE keeps the taint @@TAINT@@ (no tenant workload) until its acceptance run passes, after $1"
}

# The acceptance Job on the node, waited for within ACCEPT_TIMEOUT; a pass lifts the taint, a failure keeps it and
# records why on the node.
run_acceptance() {
  local why="$1" manifest status="" poll=0 findings reason machine
  kc -n "$ACCEPT_NS" delete job "$ACCEPT_JOB_NAME" --ignore-not-found --cascade=foreground >/dev/null
  manifest="$(mktemp)"
  printf '%s\n' "$ACCEPT_JOB" >"$manifest"
  if ! kc apply -f "$manifest" >/dev/null; then
    rm -f "$manifest"
    echo "gpucell: could not create the acceptance Job of $NODE ($ACCEPT_NS/$ACCEPT_JOB_NAME); $NODE keeps the" \
      "taint @@TAINT@@; run pulumi up again" >&2
    return 1
  fi
  rm -f "$manifest"
  echo "gpucell: running the acceptance Job $ACCEPT_NS/$ACCEPT_JOB_NAME on $NODE (about" \
    "$((ACCEPT_ESTIMATE_SECONDS / 60)) min, at most $((ACCEPT_TIMEOUT / 60)) min)"
  while [ "$poll" -lt "$ACCEPT_ATTEMPTS" ]; do
    poll=$((poll + 1))
    status="$(kc -n "$ACCEPT_NS" get job "$ACCEPT_JOB_NAME" \
      -o 'jsonpath={.status.conditions[?(@.status=="True")].type}')" || status=""
    case " $status " in
      *" Complete "* | *" Failed "*) break ;;
    esac
    sleep "$POLL_SECONDS"
  done
  findings="$(kc -n "$ACCEPT_NS" logs "job/$ACCEPT_JOB_NAME" --all-containers=true --tail=200 2>/dev/null \
    | grep '^gpucell-acceptance: ' || true)"
  case " $status " in
    *" Complete "*)
      machine="$(node_field '{.status.nodeInfo.machineID}')"
      kc annotate node "$NODE" --overwrite "@@ACCEPTANCE@@=passed" "@@MACHINE@@=$machine" >/dev/null
      if [ -n "$(node_field '{.metadata.annotations.@@RESULT_PATH@@}')" ]; then
        kc annotate node "$NODE" "@@RESULT@@-" >/dev/null
      fi
      kc taint node "$NODE" "@@TAINT@@:NoSchedule-" >/dev/null
      kc -n "$ACCEPT_NS" delete job "$ACCEPT_JOB_NAME" --ignore-not-found >/dev/null
      echo "gpucell: $NODE passed its acceptance run (after $why); the taint @@TAINT@@ is lifted"
      if [ -n "$findings" ]; then
        echo "${findings//gpucell-acceptance: /  }"
      fi
      return 0
      ;;
    *" Failed "*)
      reason="$(grep '^gpucell-acceptance: FAIL ' <<<"$findings" | tail -n 1 || true)"
      reason="${reason#gpucell-acceptance: FAIL }"
      reason="${reason:-the Job failed without a finding (kubectl -n $ACCEPT_NS describe job $ACCEPT_JOB_NAME)}"
      ;;
    *) reason="the acceptance Job did not finish within $ACCEPT_TIMEOUT s" ;;
  esac
  kc annotate node "$NODE" --overwrite "@@ACCEPTANCE@@=failed" "@@RESULT@@=$reason" >/dev/null
  echo "gpucell: $NODE failed its acceptance run (after $why): $reason" >&2
  echo "it stays out of service (taint @@TAINT@@, the reason in its annotation @@RESULT@@); see kubectl -n" \
    "$ACCEPT_NS logs job/$ACCEPT_JOB_NAME --all-containers; repair or replace the GPU (or quarantine the host:" \
    "quarantine: {reason: ...} on it), then run pulumi up again, which runs acceptance again" >&2
  return 1
}
