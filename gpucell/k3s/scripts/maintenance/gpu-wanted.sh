# shellcheck shell=bash
# shellcheck disable=SC2034  # WANT_GPU: read by the prepare script
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

readonly WANT_GPU=@@PROFILE@@
