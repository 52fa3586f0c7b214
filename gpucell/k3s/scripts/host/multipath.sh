# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_host_setup.py (placeholders: _script_files.py).

# Longhorn (longhorn/longhorn#1210): multipathd, on by default in Ubuntu, takes the iSCSI disk Longhorn's engine
# exposes on the node (its tgt target: vendor IET, product VIRTUAL-DISK) into a multipath map, and the volume's mount
# then fails "already mounted or mount point busy". A drop-in of multipathd's config_dir blacklists those disks (the
# host's own multipath devices stay), and a running multipathd reads its configuration again.
gpucell_multipath=@@PATH@@
gpucell_blacklist='@@BLACKLIST@@'
if [ "$(as_root cat "$gpucell_multipath" 2>/dev/null)" != "$gpucell_blacklist" ]; then
  as_root install -d -m 0755 "$(dirname "$gpucell_multipath")"
  printf '%s\n' "$gpucell_blacklist" | as_root tee "$gpucell_multipath" >/dev/null
  if as_root systemctl is-active --quiet multipathd; then
    as_root systemctl reload multipathd
    echo "gpucell: multipathd leaves Longhorn's disks alone ($gpucell_multipath written, multipathd reloaded)"
  else
    echo "gpucell: multipathd will leave Longhorn's disks alone ($gpucell_multipath written; it is not running)"
  fi
fi
