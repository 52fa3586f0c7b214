# shellcheck shell=bash
# shellcheck disable=SC2170  # numbers come in as placeholders
# A fragment of the node scripts, rendered by gpucell/k3s/_host_setup.py (placeholders: _script_files.py).


# Host CPUs and memory of pool @@POOL@@ (topology profile): the kernel must report what admission budgets VMs on.
gpucell_sysfs="${GPUCELL_SYSFS_ROOT:-/sys}"
gpucell_nodes="$gpucell_sysfs/devices/system/node"
gpucell_found=0
for gpucell_dir in "$gpucell_nodes"/node[0-9]*; do
  if [ -d "$gpucell_dir" ]; then
    gpucell_found=$((gpucell_found + 1))
  fi
done
if [ "$gpucell_found" -ne @@NUMA@@ ]; then
  gpucell_msg="gpucell: pool @@POOL@@ declares @@NUMA@@ NUMA nodes (topology.numaNodes),"
  echo "$gpucell_msg this host has $gpucell_found ($gpucell_nodes)" >&2
  exit 1
fi
for gpucell_node in $(seq 0 @@LAST@@); do
  gpucell_dir="$gpucell_nodes/node$gpucell_node"
  gpucell_kb=$(awk '$3 == "MemTotal:" { print $4 }' "$gpucell_dir/meminfo" 2>/dev/null || true)
  gpucell_gib=$(( ${gpucell_kb:-0} / 1048576 ))
  gpucell_cpus=$(awk -F , '{ n = 0; for (i = 1; i <= NF; i++) { split($i, r, "-");
    n += (r[2] == "" ? 1 : r[2] - r[1] + 1) } print n }' "$gpucell_dir/cpulist" 2>/dev/null || true)
  if [ "${gpucell_cpus:-0}" -ne @@CPUS@@ ]; then
    gpucell_msg="gpucell: NUMA node $gpucell_node has ${gpucell_cpus:-0} CPUs (cpulist),"
    echo "$gpucell_msg pool @@POOL@@ declares topology.cpusPerNuma @@CPUS@@" >&2
    exit 1
  fi
  if [ "$gpucell_gib" -lt @@MEMORY@@ ]; then
    gpucell_msg="gpucell: NUMA node $gpucell_node has $gpucell_gib GiB of memory (MemTotal),"
    echo "$gpucell_msg less than pool @@POOL@@ declares (topology.memoryPerNumaGib @@MEMORY@@)" >&2
    exit 1
  fi
@@PAGES@@
done
echo "gpucell: host of pool @@POOL@@ as declared: @@NUMA@@ NUMA nodes x @@CPUS@@ CPUs and @@MEMORY@@ GiB@@SUMMARY@@"
