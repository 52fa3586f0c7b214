#!/usr/bin/env bash
# gpucell acceptance: a VM pool's GPUs checked from the host's /sys (rendered by gpucell/k3s/_acceptance.py).
set -euo pipefail

readonly GPUS=@@GPUS@@
readonly DEVICE=@@DEVICE@@
readonly DRIVER=@@DRIVER@@

problems=()
found=0
for dev in /sys/bus/pci/devices/*; do
  [ "$(cat "$dev/vendor")" = 0x10de ] && [ "$(cat "$dev/device")" = "0x$DEVICE" ] || continue
  found=$((found + 1))
  address="${dev##*/}"
  driver=none
  if [ -e "$dev/driver" ]; then
    driver="$(basename "$(readlink "$dev/driver")")"
  fi
  if [ "$driver" != "$DRIVER" ]; then
    problems+=("$address is bound to $driver, not $DRIVER")
  fi
  # An idle GPU lowers its link speed to save power, so only the width is compared.
  if [ -r "$dev/current_link_width" ] && [ "$(cat "$dev/current_link_width")" != "$(cat "$dev/max_link_width")" ]; then
    problems+=("$address runs its PCIe link at x$(cat "$dev/current_link_width") of x$(cat "$dev/max_link_width")")
  fi
  for kind in fatal nonfatal; do
    if [ -r "$dev/aer_dev_$kind" ]; then
      count="$(awk '$1 == "TOTAL_ERR_'"${kind^^}"'" { print $2 }' "$dev/aer_dev_$kind")"
      if [ -n "$count" ] && [ "$count" != 0 ]; then
        problems+=("$address counted $count $kind PCIe AER errors")
      fi
    fi
  done
done
if [ "$found" -ne "$GPUS" ]; then
  problems=("$found GPUs 10de:$DEVICE on the PCI bus, expected $GPUS" "${problems[@]}")
fi
if [ "${#problems[@]}" -gt 0 ]; then
  printf '%s\n' "${problems[@]}"
  echo "gpucell-acceptance: FAIL ${problems[0]}"
  exit 1
fi
echo "gpucell-acceptance: PASS $GPUS GPUs 10de:$DEVICE on $DRIVER, full link width, no AER errors"
