#!/usr/bin/env bash
# gpucell: give the SR-IOV vGPU virtual functions of every @@MODEL@@ on this host the vGPU type @@TYPE_NAME@@, @@PER_GPU@@
# per GPU (NVIDIA vendor-specific VFIO framework: nvidia/current_vgpu_type of each VF).
# Rendered by gpucell (gpucell/k3s/vgpu_sriov.py); run by @@UNIT@@. Pass --once for a single pass.
set -uo pipefail

readonly SYSFS="${GPUCELL_SYSFS_ROOT:-/sys}"
readonly STATE_DIR="${GPUCELL_STATE_DIR:-/var/lib/gpucell}"
readonly STATE_FILE="$STATE_DIR/vgpu-type"
readonly RETRIGGER_FILE="$STATE_DIR/vgpu-retrigger"
readonly K3S="${GPUCELL_K3S_BIN:-/usr/local/bin/k3s}"
readonly NODE_KUBECONFIG="${GPUCELL_KUBECONFIG:-@@NODE_KUBECONFIG@@}"
readonly K3S_CONFIG="${GPUCELL_K3S_CONFIG:-@@K3S_CONFIG@@}"
readonly VENDOR=0x@@VENDOR@@
readonly DEVICE=0x@@DEVICE@@
readonly TYPE_NAME=@@TYPE_NAME_Q@@
readonly PER_GPU=@@PER_GPU@@
readonly INTERVAL=@@INTERVAL@@
readonly FAIL_AFTER="${GPUCELL_FAIL_AFTER:-@@FAIL_AFTER@@}"
want=""
last_report=""
reported=""
passes=0

# This node's name, from the k3s config (written by the install script).
node_name() {
  awk '/^node-name:/ { print $2; exit }' "$K3S_CONFIG" 2>/dev/null
}

# kubectl as this node's kubelet, which may read and annotate its own Node (the Node authorizer).
node_kubectl() {
  "$K3S" kubectl --kubeconfig "$NODE_KUBECONFIG" --request-timeout=10s "$@"
}

# Tell the cluster how far the typing got (@@ANNOTATION@@: "<success|pending|failed> <type>[: what is short]"), for
# the node's settle to wait on; written when it changes, tried again next pass when the API does not answer.
report() {
  local node text="$1 $TYPE_NAME${2:+: $2}"
  node=$(node_name)
  if [ "$text" = "$reported" ] || [ -z "$node" ]; then
    return 0
  fi
  if node_kubectl annotate node "$node" --overwrite "@@ANNOTATION@@=$text" >/dev/null 2>&1; then
    reported=$text
  fi
}

# A new value of @@RETRIGGER@@ on the Node (set by the node's settle when the typing failed or stuck) makes this
# service start over: the type id is learned again (a new driver may number types differently) and the VFs retyped.
check_retrigger() {
  local node value
  node=$(node_name)
  [ -n "$node" ] || return 0
  value=$(node_kubectl get node "$node" \
    -o 'jsonpath={.metadata.annotations.@@RETRIGGER_PATH@@}{"\t"}{.metadata.annotations.@@ANNOTATION_PATH@@}' \
    2>/dev/null) || return 0
  reported=${value#*$'\t'}  # what the Node says already: written again only when it changes
  value=${value%%$'\t'*}
  if [ -n "$value" ] && [ "$value" != "$(cat "$RETRIGGER_FILE" 2>/dev/null)" ]; then
    echo "gpucell-vgpu-types: re-triggered ($value): learning the type id again and retyping" >&2
    want=""
    passes=0
    rm -f "$STATE_FILE"
    mkdir -p "$STATE_DIR" && printf '%s\n' "$value" >"$RETRIGGER_FILE"
  fi
}

# The numeric id of TYPE_NAME in a creatable_vgpu_types file ("1155 : NVIDIA L40S-12Q" lines), or nothing.
type_id() {
  awk -v want="$TYPE_NAME" '{
    id = $0; sub(/[ \t]*:.*$/, "", id); gsub(/[ \t]/, "", id)
    name = $0; sub(/^[^:]*:[ \t]*/, "", name); sub(/[ \t\r]+$/, "", name)
    if (id ~ /^[0-9]+$/ && name == want) { print id; exit }
  }' "$1" 2>/dev/null
}

# The physical functions of the model (SR-IOV capable: sriov_totalvfs present), one per line.
pfs() {
  local dev
  for dev in "$SYSFS"/bus/pci/devices/*; do
    [ -e "$dev/sriov_totalvfs" ] || continue
    [ "$(cat "$dev/vendor" 2>/dev/null)" = "$VENDOR" ] || continue
    [ "$(cat "$dev/device" 2>/dev/null)" = "$DEVICE" ] || continue
    echo "$dev"
  done
}

# The enabled VFs of a physical function, in VF order (virtfn0, virtfn1... virtfn10), one per line.
vfs_of() {
  local n i
  n=$(cat "$1/sriov_numvfs" 2>/dev/null || echo 0)
  for ((i = 0; i < n; i++)); do
    [ -r "$1/virtfn$i/nvidia/current_vgpu_type" ] && echo "$1/virtfn$i"
  done
}

current_of() {
  tr -d '[:space:]' <"$1/nvidia/current_vgpu_type"
}

# A VF's type set to $2; false when the kernel refuses (a VM holds the VF, or the type is not creatable).
set_type() {
  echo "$2" >"$1/nvidia/current_vgpu_type" 2>/dev/null
}

# The id of TYPE_NAME: remembered from an earlier pass (ids are the driver's), else looked up in the VFs'
# creatable_vgpu_types. A VF typed already lists nothing creatable, hence the state file.
learn_type_id() {
  local pf vf id
  if [ -z "$want" ] && [ -r "$STATE_FILE" ]; then
    want=$(awk -F '\t' -v name="$TYPE_NAME" '$2 == name { print $1; exit }' "$STATE_FILE")
  fi
  [ -z "$want" ] || return 0
  while read -r pf; do
    while read -r vf; do
      id=$(type_id "$vf/nvidia/creatable_vgpu_types")
      if [ -n "$id" ]; then
        want=$id
        mkdir -p "$(dirname "$STATE_FILE")" && printf '%s\t%s\n' "$want" "$TYPE_NAME" >"$STATE_FILE"
        return 0
      fi
    done < <(vfs_of "$pf")
  done < <(pfs)
}

reconcile() {
  local pf vf current typed vfs report=""
  check_retrigger
  learn_type_id
  while read -r pf; do
    typed=0
    vfs=0
    while read -r vf; do
      vfs=$((vfs + 1))
      current=$(current_of "$vf")
      if [ -n "$want" ] && [ "$current" = "$want" ]; then
        typed=$((typed + 1))
      elif [ "$current" != "0" ] && [ -n "$current" ]; then
        # Another type (an earlier vgpuProfile, which keeps TYPE_NAME from being creatable on this GPU).
        set_type "$vf" 0 && echo "gpucell-vgpu-types: $vf: cleared vGPU type $current" >&2
      fi
    done < <(vfs_of "$pf")
    if [ -n "$want" ]; then
      while read -r vf && [ "$typed" -lt "$PER_GPU" ]; do
        [ "$(current_of "$vf")" = "0" ] || continue
        if set_type "$vf" "$want"; then
          typed=$((typed + 1))
          echo "gpucell-vgpu-types: $vf: vGPU type $want ($TYPE_NAME)" >&2
        fi
      done < <(vfs_of "$pf")
    fi
    if [ "$typed" -lt "$PER_GPU" ]; then
      report+="${pf##*/}: $typed of $PER_GPU ($vfs VFs enabled); "
    fi
  done < <(pfs)
  if [ -n "$report" ] && [ "$report" != "$last_report" ]; then
    echo "gpucell-vgpu-types: short of $TYPE_NAME vGPUs: $report" >&2
  fi
  last_report=$report
  passes=$((passes + 1))
  if [ -z "$report" ] && [ -n "$(pfs)" ]; then
    report success
  elif [ "$passes" -lt "$FAIL_AFTER" ]; then
    report pending "${report:-no $TYPE_NAME GPU found yet}"
  else
    report failed "${report:-no $TYPE_NAME GPU found}"
  fi
}

reconcile
if [ "${1:-}" = "--once" ]; then
  exit 0
fi
while sleep "$INTERVAL"; do
  reconcile
done
