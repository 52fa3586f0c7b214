# shellcheck shell=bash
# shellcheck disable=SC2153  # NODE: maintenance/variables.sh
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

# The VMs maintenance stopped on this node get their runStrategy back (Always, RerunOnFailure and Once start
# again); a Manual one is started through KubeVirt's start subresource, as virtctl start does.
start_stopped_vms() {
  local ns name node strategy
  local template='{range .items[*]}{.metadata.namespace}{"\t"}{.metadata.name}{"\t"}'
  template+='{.metadata.annotations.@@STOPPED_BY_PATH@@}{"\t"}{.metadata.annotations.@@RUN_STRATEGY_PATH@@}{"\n"}{end}'
  while IFS=$'\t' read -r ns name node strategy; do
    if [ "$node" != "$NODE" ] || [ -z "$strategy" ]; then
      continue
    fi
    kc -n "$ns" patch virtualmachines.kubevirt.io "$name" --type merge \
      -p "{\"spec\":{\"runStrategy\":\"$strategy\"}}" >/dev/null
    if [ "$strategy" = Manual ]; then
      kc replace --raw "/apis/subresources.kubevirt.io/v1/namespaces/$ns/virtualmachines/$name/start" -f - \
        >/dev/null <<<'{}'
    fi
    kc -n "$ns" annotate virtualmachines.kubevirt.io "$name" "@@STOPPED_BY@@-" "@@RUN_STRATEGY@@-" >/dev/null
    echo "gpucell: started VM $ns/$name again (runStrategy $strategy), stopped for the maintenance of $NODE"
  done < <(kc get virtualmachines.kubevirt.io --all-namespaces -o "jsonpath=$template")
}
