# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_host_setup.py (placeholders: _script_files.py).

# Longhorn's v1 engine attaches every volume to its node over iSCSI, with the host's open-iscsi: iscsiadm needs the
# iscsi_tcp kernel module (longhorn/longhorn#1853: "iSCSI driver tcp is not loaded", the volume attaches and detaches
# in a loop) and a running iscsid (longhorn/longhorn#2398: "can not connect to iSCSI daemon"). Both must hold after a
# reboot too: the module is listed in modules-load.d and loaded now, iscsid is enabled and started.
gpucell_iscsi_modules=@@PATH@@
if ! command -v iscsiadm >/dev/null 2>&1; then
  echo "gpucell: this host has no iscsiadm, and Longhorn attaches its volumes through open-iscsi" \
    "(longhorn/longhorn#2398); install it (apt-get install open-iscsi), then run pulumi up again" >&2
  exit 1
fi
if [ "$(as_root cat "$gpucell_iscsi_modules" 2>/dev/null)" != "iscsi_tcp" ]; then
  as_root install -d -m 0755 "$(dirname "$gpucell_iscsi_modules")"
  printf 'iscsi_tcp\n' | as_root tee "$gpucell_iscsi_modules" >/dev/null
  echo "gpucell: iscsi_tcp is loaded at every boot ($gpucell_iscsi_modules written)"
fi
if [ ! -d "${GPUCELL_SYSFS_ROOT:-/sys}/module/iscsi_tcp" ]; then
  as_root modprobe iscsi_tcp
  echo "gpucell: iscsi_tcp loaded"
fi
if ! as_root systemctl is-enabled --quiet iscsid || ! as_root systemctl is-active --quiet iscsid; then
  as_root systemctl enable --now iscsid
  echo "gpucell: iscsid is enabled and running"
fi
