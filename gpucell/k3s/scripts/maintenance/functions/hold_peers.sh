# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

# While this GPU pool rolls, the nodes next in line after this one (NEXT_IN_LINE: the pool's next maxUnavailable
# registered hosts, in the rollout's order) that still wait for their own maintenance (another k3s version or GPU
# configuration) are cordoned ("held", annotation @@HELD@@), so that no GPU pod this node's drain evicts and no VM
# its settle starts again lands on a node whose turn comes next. Only that window: the rest of the pool keeps
# serving. On an SR-IOV vGPU pool (HOLD_RETYPED) a node still typed the old way is held wherever it is in line:
# KubeVirt serves every type of a model under one resource name. Each held node's own prepare takes it over, or
# releases it; a failed step of this node releases them all (release_peers).
hold_peers() {
  local peer why window
  while read -r peer; do
    if [ -z "$peer" ] || [ "$peer" = "$NODE" ]; then
      continue
    fi
    window=false
    if [[ " ${NEXT_IN_LINE[*]} " == *" $peer "* ]]; then
      window=true
    elif [ "$HOLD_RETYPED" != true ]; then
      continue  # beyond the window: not even looked at
    fi
    if [ "$(field_of "$peer" '{.spec.unschedulable}')" = true ]; then
      continue  # out of service already: in maintenance, held, quarantined or cordoned by someone
    fi
    why="$(reasons_of "$peer" "")"
    if [ -z "$why" ] || { [ "$window" = false ] && [[ ",$why," != *,gpu-reconfiguration,* ]]; }; then
      continue
    fi
    kc annotate node "$peer" --overwrite "@@HELD@@=$NODE" >/dev/null
    kc cordon "$peer" >/dev/null
    echo "gpucell: holding $peer (cordoned) until its own maintenance ($why): nothing this rollout moves" \
      "lands there"
  done < <(kc get nodes -l "@@POOL_LABEL@@=$POOL" -o 'jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}')
}
