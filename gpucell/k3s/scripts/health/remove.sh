# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/gpu_host_health.py (placeholders: _script_files.py).


# No host-side GPU health on this node (any more): the service and its textfile go, if an earlier pool left them.
if as_root test -e @@UNIT_PATH@@; then
  as_root systemctl disable --now @@UNIT_NAME@@ >/dev/null 2>&1 || true
  as_root rm -f @@UNIT_PATH@@ @@PATH@@ @@TEXTFILE@@
  as_root systemctl daemon-reload
  echo "gpucell: removed @@UNIT_NAME@@"
fi
