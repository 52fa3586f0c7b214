# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/vgpu_sriov.py (placeholders: _script_files.py).


# SR-IOV vGPU: the service that types this host's @@MODEL@@ VFs as @@TYPE_NAME@@ (gpucell/k3s/vgpu_sriov.py).
vgpu_work="$(mktemp -d)"
cat >"$vgpu_work/reconciler" <<'GPUCELL_VGPU_RECONCILER'
@@SCRIPT@@
GPUCELL_VGPU_RECONCILER
cat >"$vgpu_work/unit" <<'GPUCELL_VGPU_UNIT'
@@UNIT@@
GPUCELL_VGPU_UNIT
vgpu_changed=""
if ! as_root cmp -s "$vgpu_work/reconciler" @@PATH@@ || ! as_root cmp -s "$vgpu_work/unit" @@UNIT_PATH@@; then
  as_root install -m 0755 "$vgpu_work/reconciler" @@PATH@@
  as_root install -m 0644 "$vgpu_work/unit" @@UNIT_PATH@@
  as_root systemctl daemon-reload
  vgpu_changed=1
fi
rm -rf "$vgpu_work"
as_root systemctl enable @@UNIT_NAME@@ >/dev/null 2>&1
if [ -n "$vgpu_changed" ]; then
  as_root systemctl restart @@UNIT_NAME@@
  echo "gpucell: @@UNIT_NAME@@ (re)started: @@TYPE_NAME@@, @@PER_GPU@@ per GPU"
else
  as_root systemctl start @@UNIT_NAME@@
fi
