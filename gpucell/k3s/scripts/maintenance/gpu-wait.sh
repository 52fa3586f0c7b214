# shellcheck shell=bash
# shellcheck disable=SC2154  # GPU_ATTEMPTS, GPU_TIMEOUT: the settle's header; gpus_lost: the re-triggers
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

@@RESTART_PODS@@
last_wait="$(node_field '{.metadata.annotations.@@GPU_WAIT_PATH@@}')"
@@STUCK@@
problems=""
gave_up=""  # why the wait ended before its timeout (set by the re-triggers)
poll=0
while [ "$poll" -lt "$GPU_ATTEMPTS" ] && [ -z "$gave_up" ]; do
  poll=$((poll + 1))
  problems="$(gpu_state_problems)"
  if [ -z "$problems" ]; then
    break
  fi
@@RETRIGGERS@@
  sleep "$POLL_SECONDS"
done
if [ -n "$problems" ]; then
  kc annotate node "$NODE" --overwrite "@@GPU_WAIT_KEY@@=$(head -n 1 <<<"$problems")" >/dev/null
  if [ -n "$gave_up" ]; then
    echo "gpucell: $NODE did not reach its GPU state; the wait ended after $((poll * POLL_SECONDS)) s of at most" \
      "$GPU_TIMEOUT s: $gave_up; it stays cordoned:" >&2
  else
    echo "gpucell: $NODE did not reach its GPU state within $GPU_TIMEOUT s; it stays cordoned:" >&2
  fi
  echo "$problems" >&2
  if [ -n "${gpus_lost:-}" ]; then
    echo "$gpus_lost" >&2
    exit 1
  fi
  echo "see kubectl describe node $NODE and the GPU Operator's pods there (kubectl -n @@OPERATOR_NS@@ get pods" \
    "-o wide), then run pulumi up again@@AGAIN@@" >&2
  exit 1
fi
if [ -n "$last_wait" ]; then
  kc annotate node "$NODE" "@@GPU_WAIT_KEY@@-" >/dev/null
fi
echo "gpucell: the GPU Operator reports $NODE in its new GPU state"
