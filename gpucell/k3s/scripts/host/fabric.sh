# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_host_setup.py (placeholders: _script_files.py).
# Each device line is "<what> <pci address> <vendor>:<device> <numa node> <key path>", generated from the pool's fabric.


# PCIe topology of pool @@POOL@@ (fabric): every declared GPU, NIC and NVSwitch where the pool says, on its NUMA node.
gpucell_pci="${GPUCELL_SYSFS_ROOT:-/sys}/bus/pci/devices"
gpucell_fix="correct nodePools.@@POOL@@.fabric from this host (lspci -Dnn; numa_node in $gpucell_pci/<address>)"
while read -r gpucell_what gpucell_bdf gpucell_id gpucell_numa gpucell_key; do
  gpucell_dev="$gpucell_pci/$gpucell_bdf"
  if [ ! -d "$gpucell_dev" ]; then
    echo "gpucell: $gpucell_what $gpucell_bdf ($gpucell_key) is not a PCI device of this host; $gpucell_fix" >&2
    exit 1
  fi
  gpucell_vendor="$(cat "$gpucell_dev/vendor" 2>/dev/null || true)"
  gpucell_device="$(cat "$gpucell_dev/device" 2>/dev/null || true)"
  gpucell_found="${gpucell_vendor#0x}:${gpucell_device#0x}"
  if [ "$gpucell_found" != "$gpucell_id" ]; then
    gpucell_msg="gpucell: $gpucell_bdf ($gpucell_key) is PCI device $gpucell_found, not the $gpucell_what"
    echo "$gpucell_msg the pool declares ($gpucell_id); $gpucell_fix" >&2
    exit 1
  fi
  gpucell_node="$(cat "$gpucell_dev/numa_node" 2>/dev/null || echo -1)"
  if [ "$gpucell_numa" != "-" ] && [ "$gpucell_node" != "$gpucell_numa" ]; then
    gpucell_msg="gpucell: $gpucell_what $gpucell_bdf sits on NUMA node $gpucell_node (numa_node), pool @@POOL@@"
    echo "$gpucell_msg declares it on NUMA node $gpucell_numa ($gpucell_key); $gpucell_fix" >&2
    exit 1
  fi
done <<'GPUCELL_DEVICES'
@@DEVICES@@
GPUCELL_DEVICES
echo "gpucell: PCIe topology of pool @@POOL@@ as declared: @@SUMMARY@@"
