#!/usr/bin/env bash
# gpucell acceptance: an all-reduce across the node's GPUs (rendered by gpucell/k3s/_acceptance.py).
set -euo pipefail

readonly GPUS=@@GPUS@@
readonly MIN_BUSBW=@@MIN_BUSBW@@

# 1 GiB to 8 GiB, doubling: the sizes at which the links, not latency, set the bus bandwidth. -c 1 checks the
# results; all_reduce_perf exits non-zero on a wrong value or a CUDA/NCCL error.
code=0
out="$(all_reduce_perf -b 1G -e 8G -f 2 -g "$GPUS" -c 1 2>&1)" || code=$?
echo "$out"
if [ "$code" -ne 0 ]; then
  echo "gpucell-acceptance: FAIL all_reduce_perf across $GPUS GPUs failed (exit $code); its output is above"
  exit 1
fi
busbw="$(awk '/Avg bus bandwidth/ { print $NF }' <<<"$out")"
if [ -z "$busbw" ]; then
  echo "gpucell-acceptance: FAIL all_reduce_perf printed no average bus bandwidth"
  exit 1
fi
if ! awk -v got="$busbw" -v min="$MIN_BUSBW" 'BEGIN { exit !(got >= min) }'; then
  echo "gpucell-acceptance: FAIL all-reduce bus bandwidth $busbw GB/s across $GPUS GPUs is below $MIN_BUSBW GB/s" \
    "(an NVLink, NVSwitch or Fabric Manager fault, or a PCIe link trained down)"
  exit 1
fi
echo "gpucell-acceptance: PASS all-reduce bus bandwidth $busbw GB/s across $GPUS GPUs (at least $MIN_BUSBW)"
