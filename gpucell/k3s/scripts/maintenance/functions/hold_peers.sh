# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

# While this GPU pool rolls, its nodes still waiting for their own maintenance (another k3s version or GPU
# configuration) are cordoned ("held", annotation @@HELD@@), so that no GPU pod or VM this rollout moves, and no vGPU
# resource KubeVirt renames for the whole region, lands on a node that is next in line. Each one's own prepare
# takes it over, or releases it.
hold_peers() {
  local peer why
  while read -r peer; do
    if [ -z "$peer" ] || [ "$peer" = "$NODE" ] || [ "$(field_of "$peer" '{.spec.unschedulable}')" = true ]; then
      continue  # out of service already: in maintenance, held, quarantined or cordoned by someone
    fi
    why="$(reasons_of "$peer" "")"
    if [ -n "$why" ]; then
      kc annotate node "$peer" --overwrite "@@HELD@@=$NODE" >/dev/null
      kc cordon "$peer" >/dev/null
      echo "gpucell: holding $peer (cordoned) until its own maintenance ($why): nothing this rollout moves" \
        "lands there"
    fi
  done < <(kc get nodes -l "@@POOL_LABEL@@=$POOL" -o 'jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}')
}
