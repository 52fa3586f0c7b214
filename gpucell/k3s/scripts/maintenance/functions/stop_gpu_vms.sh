# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

# A GPU VM cannot live-migrate: delete its VirtualMachineInstance, which shuts the guest down gracefully. Its
# VirtualMachine's runStrategy decides whether it starts again elsewhere (Always) or stays stopped. A tenant
# cluster's VMs are Cluster API's to take down (replace_cluster_api_workers).
stop_gpu_vms() {
  local ns pod kind owner strategy
  while IFS=$'\t' read -r ns pod kind owner; do
    if [ "$kind" = VirtualMachineInstance ] && ! cluster_api_vm "$ns" "$owner"; then
      echo "gpucell: stopping VM $ns/$owner on $NODE (pod $pod): a VM with GPUs cannot live-migrate"
      # Halted first, its runStrategy recorded: settle gives it back once the node is in service again, and an
      # Always VM does not start on the next node to be drained meanwhile.
      strategy="$(kc -n "$ns" get virtualmachines.kubevirt.io "$owner" --ignore-not-found \
        -o 'jsonpath={.spec.runStrategy}')"
      if [ -n "$strategy" ] && [ "$strategy" != Halted ]; then
        kc -n "$ns" annotate virtualmachines.kubevirt.io "$owner" --overwrite "@@STOPPED_BY@@=$NODE" \
          "@@RUN_STRATEGY@@=$strategy" >/dev/null
        kc -n "$ns" patch virtualmachines.kubevirt.io "$owner" --type merge \
          -p '{"spec":{"runStrategy":"Halted"}}' >/dev/null
      fi
      kc -n "$ns" delete virtualmachineinstances.kubevirt.io "$owner" --ignore-not-found --wait=false >/dev/null
    fi
  done < <(gpu_pods)
}
