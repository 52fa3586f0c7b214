# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_scripts.py (placeholders: _script_files.py).

# Renamed at the same address: the host's k3s config names another node, installed by that node's resource
# earlier in this pulumi up (Pulumi creates new resources before it deletes the ones that left the program).
# Uninstalling would take k3s from the new node; only the old Node object goes (its -prepare delete).
@@READ_NODE_NAME@@
readonly OLD_NAME=@@NODE_NAME@@
if [ -n "$have_name" ] && [ "$have_name" != "$OLD_NAME" ]; then
  echo "gpucell: this host now runs k3s as $have_name: k3s stays installed; only node $OLD_NAME leaves the" \
    "cell"
  exit 0
fi

