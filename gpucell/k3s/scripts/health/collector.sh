#!/usr/bin/env bash
# gpucell: host-side GPU health of a @@MODE@@ node (pool @@POOL@@), where DCGM does not run: the NVIDIA GPUs
# that answer on the PCI bus, their PCIe AER counters, vfio-pci errors and the NVIDIA driver's Xid lines in this
# boot's kernel log, for node-exporter's textfile collector, written every @@INTERVAL@@ s to
# @@TEXTFILE@@
# Rendered by gpucell (gpucell/k3s/gpu_host_health.py); run by @@UNIT@@.
# Pass --once for a single pass.
set -uo pipefail

readonly SYSFS="${GPUCELL_SYSFS_ROOT:-/sys}"
readonly OUT_DIR="${GPUCELL_TEXTFILE_DIR:-@@TEXTFILE_DIR@@}"
readonly OUT="$OUT_DIR/@@TEXTFILE_NAME@@"
readonly JOURNALCTL="${GPUCELL_JOURNALCTL:-journalctl}"
readonly TRIES="${GPUCELL_PCI_TRIES:-3}"
readonly INTERVAL=@@INTERVAL@@

# The NVIDIA GPUs listed on the bus: vendor 0x10de, class 0x0300xx (VGA) or 0x0302xx (3D controller); SR-IOV
# virtual functions (vGPUs, a physfn link) are left out: their board is counted. One PCI address a line.
gpus() {
  local dev class
  for dev in "$SYSFS"/bus/pci/devices/*; do
    [ -e "$dev/physfn" ] && continue
    [ "$(cat "$dev/vendor" 2>/dev/null)" = 0x10de ] || continue
    class=$(cat "$dev/class" 2>/dev/null)
    case "$class" in
      0x0300* | 0x0302*) echo "${dev##*/}" ;;
    esac
  done
}

# Whether the GPU at $1 answers: its config space, read live, starts with NVIDIA's vendor id (a GPU that fell off
# the bus but is still listed reads all ones). Read again 1 s apart: a GPU in a function-level reset (vfio-pci
# resets it whenever a VM starts or stops) does not answer for up to a second.
answers() {
  local try vendor
  for ((try = 1; try <= TRIES; try++)); do
    vendor=$(od -An -tx2 -N2 "$SYSFS/bus/pci/devices/$1/config" 2>/dev/null | tr -d ' \n')
    [ "$vendor" = 10de ] && return 0
    [ "$try" -lt "$TRIES" ] && sleep 1
  done
  return 1
}

# The kernel's count in AER file $1 (aer_dev_correctable, aer_dev_fatal, aer_dev_nonfatal): its TOTAL_ERR_* line.
aer_total() {
  awk '/^TOTAL_ERR_/ { print $2; exit }' "$1" 2>/dev/null
}

# Every metric, in the text format (node-exporter's textfile collector reads it).
collect() {
  local gpu driver device up=0 log readable=1 file severity count xid
  local -a listed=()
  mapfile -t listed < <(gpus)
  if ! log=$("$JOURNALCTL" -k -b 0 --no-pager -o cat 2>/dev/null); then
    readable=0
    log=""
  fi
  echo "# HELP gpucell_host_gpu_pci_device_up Whether the NVIDIA GPU at this address answers (config reads 0x10de)."
  echo "# TYPE gpucell_host_gpu_pci_device_up gauge"
  for gpu in "${listed[@]}"; do
    driver=$(readlink "$SYSFS/bus/pci/devices/$gpu/driver" 2>/dev/null)
    driver=${driver##*/}
    device=$(cat "$SYSFS/bus/pci/devices/$gpu/device" 2>/dev/null)
    if answers "$gpu"; then
      up=$((up + 1))
      echo "gpucell_host_gpu_pci_device_up{bdf=\"$gpu\",device=\"$device\",driver=\"${driver:-none}\"} 1"
    else
      echo "gpucell_host_gpu_pci_device_up{bdf=\"$gpu\",device=\"$device\",driver=\"${driver:-none}\"} 0"
    fi
  done
  echo "# HELP gpucell_host_gpu_pci_devices NVIDIA GPUs answering on this host's PCI bus."
  echo "# TYPE gpucell_host_gpu_pci_devices gauge"
  echo "gpucell_host_gpu_pci_devices $up"
  echo "# HELP gpucell_host_gpu_pcie_aer_errors_total PCIe AER errors of the GPU since boot (aer_dev_*: TOTAL_ERR_*)."
  echo "# TYPE gpucell_host_gpu_pcie_aer_errors_total counter"
  for gpu in "${listed[@]}"; do
    for severity in correctable fatal nonfatal; do
      file="$SYSFS/bus/pci/devices/$gpu/aer_dev_$severity"
      count=$(aer_total "$file")
      if [ -n "$count" ]; then
        echo "gpucell_host_gpu_pcie_aer_errors_total{bdf=\"$gpu\",severity=\"$severity\"} $count"
      fi
    done
  done
  echo "# HELP gpucell_host_gpu_vfio_error_lines_total vfio-pci error lines about the GPU in this boot's kernel log."
  echo "# TYPE gpucell_host_gpu_vfio_error_lines_total counter"
  for gpu in "${listed[@]}"; do
    count=$(grep -cE "vfio-pci $gpu: .*(not ready|giving up|reset recovery|[Ff]ailed|timed out|[Ee]rror)" <<<"$log")
    echo "gpucell_host_gpu_vfio_error_lines_total{bdf=\"$gpu\"} $count"
  done
  echo "# HELP gpucell_host_gpu_xid_lines NVIDIA Xid lines of the GPU in this boot's kernel log, per Xid."
  echo "# TYPE gpucell_host_gpu_xid_lines gauge"
  sed -nE 's/.*NVRM: Xid \(PCI:([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})\): ([0-9]+),.*/\1 \2/p' <<<"$log" |
    sort | uniq -c | while read -r count gpu xid; do
      echo "gpucell_host_gpu_xid_lines{bdf=\"${gpu,,}.0\",xid=\"$xid\"} $count"
    done
  echo "# HELP gpucell_host_gpu_kernel_log_readable Whether this boot's kernel log could be read (journalctl -k)."
  echo "# TYPE gpucell_host_gpu_kernel_log_readable gauge"
  echo "gpucell_host_gpu_kernel_log_readable $readable"
}

# Write the file whole (a temporary name the collector skips, then a rename), so that no scrape reads half of it.
write() {
  local tmp="$OUT_DIR/.@@TEXTFILE_NAME@@.tmp"
  mkdir -p "$OUT_DIR" && collect >"$tmp" && chmod 0644 "$tmp" && mv -f "$tmp" "$OUT"
}

write
if [ "${1:-}" = "--once" ]; then
  exit 0
fi
while sleep "$INTERVAL"; do
  write
done
