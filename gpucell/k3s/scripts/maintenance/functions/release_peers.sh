# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

# The nodes of the pool that this node's maintenance held (annotation @@HELD@@ naming it) are given back:
# annotation removed, uncordoned. A failed run so leaves no more of the pool out of service than the node itself;
# the next run holds its window again when it resumes.
release_peers() {
  local peer held_by
  while IFS=$'\t' read -r peer held_by; do
    if [ -n "$peer" ] && [ "$held_by" = "$NODE" ]; then
      kc annotate node "$peer" "@@HELD@@-" >/dev/null
      kc uncordon "$peer" >/dev/null
      echo "gpucell: released $peer (held for the maintenance of $NODE, which failed)"
    fi
  done < <(kc get nodes -l "@@POOL_LABEL@@=$POOL" \
    -o 'jsonpath={range .items[*]}{.metadata.name}{"\t"}{.metadata.annotations.@@HELD_PATH@@}{"\n"}{end}')
}

# The EXIT trap of a GPU node's steps: on a failure (any exit but 0), release the held peers, then exit as failed.
release_on_failure() {
  local code=$?
  trap - EXIT
  if [ "$code" -ne 0 ]; then
    release_peers || echo "gpucell: could not release the nodes held for $NODE; see kubectl get nodes -l" \
      "@@POOL_LABEL@@=$POOL and uncordon those annotated @@HELD@@=$NODE" >&2
  fi
  exit "$code"
}
