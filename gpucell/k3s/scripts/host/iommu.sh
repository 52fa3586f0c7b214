# shellcheck shell=bash
# A fragment of the node scripts, rendered by gpucell/k3s/_host_setup.py (placeholders: _script_files.py).


# Pool @@POOL@@ (gpuMode dra): the DRA driver binds a VM's GPU to vfio-pci, which needs the IOMMU.
gpucell_groups="${GPUCELL_SYSFS_ROOT:-/sys}/kernel/iommu_groups"
if [ -z "$(find "$gpucell_groups" -mindepth 1 -maxdepth 1 2>/dev/null | head -n 1)" ]; then
  gpucell_msg="gpucell: pool @@POOL@@ (gpuMode dra) needs the IOMMU, and $gpucell_groups is empty: turn on VT-d or"
  echo "$gpucell_msg AMD-Vi in firmware and boot with intel_iommu=on iommu=pt (or amd_iommu=on iommu=pt)" >&2
  exit 1
fi
