# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

# The pool's bake time (rollout.bakeMinutes): the node, back in service, must stay Ready on the pinned version for
# @@BAKE_ATTEMPTS@@ polls before the next node of its window begins (that node's prepare waits for this settle).
# Annotation @@BAKING@@ while it runs: a bake cut short (a failure, a run stopped) is done again by the next settle.
bake() {
  local status attempt
  kc annotate node "$NODE" --overwrite "@@BAKING@@=$WANT_VERSION" >/dev/null
  for attempt in $(seq 1 @@BAKE_ATTEMPTS@@); do
    sleep "$POLL_SECONDS"
    status="$(node_field '{.status.conditions[?(@.type=="Ready")].status} {.status.nodeInfo.kubeletVersion}')" \
      || status="(the API did not answer)"
    if [ "$status" != "True $WANT_VERSION" ]; then
      echo "gpucell: $NODE failed its bake after $((attempt * POLL_SECONDS)) s of @@BAKE_SECONDS@@ s: it reports" \
        "'$status'; the pool's rollout stops here; see kubectl describe node $NODE, then run pulumi up again" >&2
      return 1
    fi
  done
  kc annotate node "$NODE" "@@BAKING@@-" >/dev/null
  echo "gpucell: $NODE stayed Ready on $WANT_VERSION through its bake (@@BAKE_SECONDS@@ s)"
}

# A bake the last run did not finish is done again before anything else of the pool goes on.
bake_unfinished() {
  if [ -n "$(node_field '{.metadata.annotations.@@BAKING_PATH@@}')" ]; then
    echo "gpucell: $NODE's bake did not finish in the last run: baking it again"
    bake
  fi
}
