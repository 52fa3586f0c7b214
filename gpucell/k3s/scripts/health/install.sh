# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/gpu_host_health.py (placeholders: _script_files.py).


# Host-side GPU health (pool @@POOL@@, gpuMode @@MODE@@): the service writing node-exporter's textfile of this host's
# GPUs, PCIe AER counters, vfio errors and Xid lines (gpucell/k3s/gpu_host_health.py).
health_work="$(mktemp -d)"
cat >"$health_work/collector" <<'GPUCELL_GPU_HEALTH_COLLECTOR'
@@SCRIPT@@
GPUCELL_GPU_HEALTH_COLLECTOR
cat >"$health_work/unit" <<'GPUCELL_GPU_HEALTH_UNIT'
@@UNIT@@
GPUCELL_GPU_HEALTH_UNIT
health_changed=""
if ! as_root cmp -s "$health_work/collector" @@PATH@@ || ! as_root cmp -s "$health_work/unit" @@UNIT_PATH@@; then
  as_root install -D -m 0755 "$health_work/collector" @@PATH@@
  as_root install -D -m 0644 "$health_work/unit" @@UNIT_PATH@@
  as_root systemctl daemon-reload
  health_changed=1
fi
rm -rf "$health_work"
as_root systemctl enable @@UNIT_NAME@@ >/dev/null 2>&1
if [ -n "$health_changed" ]; then
  as_root systemctl restart @@UNIT_NAME@@
  echo "gpucell: @@UNIT_NAME@@ (re)started: GPU health of pool @@POOL@@ every @@INTERVAL@@ s"
else
  as_root systemctl start @@UNIT_NAME@@
fi
