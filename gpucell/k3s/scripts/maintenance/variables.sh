# shellcheck shell=bash
# shellcheck disable=SC2034  # read by the functions and the body after it
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

readonly K3S_BIN=/usr/local/bin/k3s
readonly KUBECONFIG_FILE=@@KUBECONFIG@@
readonly NODE=@@NODE@@
readonly POLL_SECONDS=@@POLL@@
readonly API_ENDPOINT=@@API_ENDPOINT@@

