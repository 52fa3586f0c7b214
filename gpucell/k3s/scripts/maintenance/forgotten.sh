# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).

echo "gpucell: $NODE is removalPolicy: forget: nothing to do until it is removed from the config"
