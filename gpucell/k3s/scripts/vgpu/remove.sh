# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/vgpu_sriov.py (placeholders: _script_files.py).


# No SR-IOV vGPU on this node (any more): the VF-typing service goes, if an earlier pool left it here.
if as_root test -e @@UNIT_PATH@@; then
  as_root systemctl disable --now @@UNIT_NAME@@ >/dev/null 2>&1 || true
  as_root rm -f @@UNIT_PATH@@ @@PATH@@
  as_root systemctl daemon-reload
  echo "gpucell: removed @@UNIT_NAME@@"
fi
