# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_maintenance_scripts.py (placeholders: _script_files.py).
# removalPolicy: forget deletes the Node of a machine that is gone; a kubelet still posting Ready would register it
# again at once, and a live server would keep its etcd member.

if node_exists && [ "$(node_field '{.status.conditions[?(@.type=="Ready")].status}')" = True ]; then
  echo "gpucell: $NODE is Ready: its k3s still runs, so removalPolicy: forget cannot remove it (its kubelet would" \
    "register it again); set removalPolicy: delete on it to uninstall k3s over SSH, or stop k3s on it first" >&2
  exit 1
fi
