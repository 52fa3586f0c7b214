# shellcheck shell=bash
# shellcheck disable=SC2170  # numbers come in as placeholders
# shellcheck disable=SC2154  # gpucell_dir, gpucell_node: the loop of host/memory.sh around it
# A fragment of the node scripts, rendered by gpucell/k3s/_host_setup.py (placeholders: _script_files.py).

  gpucell_pages=$(cat "$gpucell_dir/hugepages/hugepages-@@KB@@kB/nr_hugepages" 2>/dev/null || echo 0)
  if [ "$gpucell_pages" -ne @@COUNT@@ ]; then
    gpucell_msg="gpucell: NUMA node $gpucell_node has $gpucell_pages @@SIZE@@ hugepages, pool @@POOL@@ declares"
    gpucell_msg+=" topology.@@KEY@@ @@COUNT@@; reserve them on the kernel command line (@@CMDLINE@@) and reboot"
    echo "$gpucell_msg" >&2
    exit 1
  fi
