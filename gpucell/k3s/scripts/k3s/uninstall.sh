# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_scripts.py (placeholders: _script_files.py).

readonly UNINSTALL=@@PATH@@
if [ -x "$UNINSTALL" ]; then
  cleanup_cilium
  as_root "$UNINSTALL"
else
  echo "gpucell: $UNINSTALL not found; k3s is not installed here: nothing to uninstall"
fi
