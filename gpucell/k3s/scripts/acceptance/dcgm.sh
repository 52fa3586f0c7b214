#!/usr/bin/env bash
# gpucell acceptance: DCGM diagnostics on every GPU of the node (rendered by gpucell/k3s/_acceptance.py).
set -euo pipefail

readonly LEVEL=@@LEVEL@@

# The hostengine dcgmi talks to; it daemonizes and listens on localhost:5555.
if ! nv-hostengine; then
  echo "gpucell-acceptance: FAIL nv-hostengine did not start (DCGM cannot reach the GPUs: is the driver loaded?)"
  exit 1
fi
code=0
dcgmi diag -r "$LEVEL" || code=$?
if [ "$code" -ne 0 ]; then
  echo "gpucell-acceptance: FAIL dcgmi diag -r $LEVEL failed (exit $code); its results are above"
  exit 1
fi
echo "gpucell-acceptance: PASS dcgmi diag -r $LEVEL"
