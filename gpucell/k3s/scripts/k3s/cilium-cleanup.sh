# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_scripts.py (placeholders: _script_files.py).
# Cilium's host state goes before k3s's uninstall script (k3s-io/k3s#8347, k3s-io/docs#134: with it left in place
# the host can lose its network, and the SSH session running this with it). First every pod stops (k3s-killall.sh,
# so that the Cilium agent cannot put anything back), then what k3s's docs ("Uninstalling K3s", Cilium) and
# `cilium-dbg cleanup` (Cilium v1.20 cilium-dbg/cmd/cleanup.go) remove: its links, its iptables rules, the BPF
# programs it attached (tc/tcx filters and XDP on every interface; tcx links and maps are pinned under
# /sys/fs/bpf) and its cgroup2 mount. Each step is bounded and tolerated: the uninstall must still run. A tool's
# output is read whole before grep looks at it: `tool | grep -q` under pipefail fails when grep exits at the first
# match and the tool dies of SIGPIPE, which skipped the iptables cleanup on a host with many rules (and in CI).

readonly KILLALL=@@KILLALL@@

cleanup_cilium() {
  local link table hook out proto pref handle
  if [ -x "$KILLALL" ]; then
    as_root timeout 300 "$KILLALL" >/dev/null 2>&1 || echo "gpucell: $KILLALL failed; cleaning Cilium anyway" >&2
  fi
  for link in cilium_host cilium_net cilium_vxlan cilium_geneve cilium_wg0; do
    if ip link show "$link" >/dev/null 2>&1; then
      as_root ip link delete "$link" || true
    fi
  done
  # Only Cilium's programs (named cil_*): other tc filters and XDP programs on the host stay.
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }'); do
    out=$(ip link show dev "$link" 2>/dev/null) || out=""
    if grep -q 'name cil_' <<<"$out"; then
      as_root ip link set dev "$link" xdp off || true
    fi
    for hook in ingress egress; do
      out=$(tc filter show dev "$link" "$hook" 2>/dev/null) || out=""
      # Each cil_ filter by its protocol, pref and handle ("filter protocol all pref 1 bpf chain 0 handle 0x1
      # cil_from_netdev-eth0 direct-action ..."): a hook's other filters stay.
      awk '/ cil_/ { proto = pref = handle = ""
          for (i = 1; i < NF; i++) {
            if ($i == "protocol") proto = $(i + 1)
            if ($i == "pref") pref = $(i + 1)
            if ($i == "handle") handle = $(i + 1)
          }
          if (proto != "" && pref != "" && handle != "") print proto, pref, handle }' <<<"$out" \
        | while read -r proto pref handle; do
          as_root tc filter del dev "$link" "$hook" protocol "$proto" pref "$pref" handle "$handle" bpf || true
        done
    done
  done
  for table in iptables ip6tables; do
    command -v "$table-save" >/dev/null 2>&1 || continue
    out=$(as_root timeout 60 "$table-save" 2>/dev/null) || continue
    if grep -qi cilium <<<"$out"; then
      grep -iv cilium <<<"$out" | as_root timeout 60 "$table-restore" \
        || echo "gpucell: could not remove Cilium's $table rules" >&2
    fi
  done
  if mountpoint -q /run/cilium/cgroupv2 2>/dev/null; then
    as_root umount /run/cilium/cgroupv2 || true
  fi
  as_root rm -rf /sys/fs/bpf/cilium /sys/fs/bpf/tc/globals/cilium_* /var/run/cilium 2>/dev/null || true
  echo "gpucell: removed Cilium's host state"
}

