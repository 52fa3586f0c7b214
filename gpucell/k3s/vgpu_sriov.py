"""SR-IOV vGPU: what a ``vm-vgpu`` pool of Ada/Hopper/Blackwell boards on a vGPU 17+ driver needs at the pinned
versions, since neither the GPU Operator nor its sandbox device plugin handles it.

The facts (details and citations in ``docs/decisions/0011-sriov-vgpu-and-hgx-nvswitches.md``):

- With NVIDIA's vendor-specific VFIO framework the vGPU Manager enables the board's SR-IOV virtual functions, bound
  to the ``nvidia`` driver, and each VF becomes a vGPU once a type id is written to
  ``/sys/bus/pci/devices/<VF>/nvidia/current_vgpu_type`` (ids and names in ``nvidia/creatable_vgpu_types``); the
  value resets to 0 when the VFs are re-enumerated (reboot, driver reload). Cozystack vGPU guide
  (cozystack/website ``content/en/docs/v1.6/virtualization/vgpu.md``).
- Nothing in the GPU Operator v26.7.0 writes that file. Its vGPU device manager (NVIDIA/vgpu-device-manager v0.5.0)
  creates only mdevs and fails with "no parent devices found for GPU at index '0'" (``pkg/vgpu/config.go``); its
  sandbox device plugin (kubevirt-gpu-device-plugin v1.6.0) advertises only mdevs and ``vfio-pci`` functions; its
  sandbox validator's ``vgpu-devices`` step counts only mdevs and waits forever (``cmd/nvidia-validator/main.go``
  ``VGPUDevices.runValidation``). So on these nodes gpucell turns those three operands off with the operator's
  own per-node labels ``nvidia.com/gpu.deploy.<operand>=false``, which the operator honours when set
  (``addGPUStateLabels`` in ``controllers/state_manager.go``: "If a required state label already exists on the node
  with a non-empty value, honor it"), and keeps the vGPU Manager, which loads the host driver and enables the VFs.
- gpucell installs a small systemd service on those hosts (:func:`reconciler_script`, :func:`systemd_unit`) that
  types the VFs of every board of the pool's model with the pool's vGPU type, as many per GPU as the operator's
  config allows, and re-does it after every re-enumeration.
- The reconciler is ``scripts/vgpu/reconciler.sh``, installed by the fragments ``scripts/vgpu/install.sh`` and
  ``remove.sh`` (:mod:`gpucell.k3s._script_files`).
- KubeVirt v1.9.0's own PCI device plugin advertises a VF bound to ``nvidia`` with a non-zero ``current_vgpu_type``
  when its ``vendor:device`` is permitted in ``pciHostDevices`` *without* ``externalResourceProvider``
  (kubevirt/kubevirt#16890: ``pkg/virt-handler/device-manager/nvidia.go`` ``shouldPermitNvidia``, ``common.go``
  ``HasVGPUProfile``, ``device_controller.go``); :func:`gpucell.components.kubevirt.permitted_vf_device`.
"""

from __future__ import annotations

import shlex

from gpucell.catalog.gpu_catalog import NVIDIA_PCI_VENDOR, GpuModel
from gpucell.k3s._script_files import render
from gpucell.spec.pools import SRIOV_VGPU_DISABLED_OPERANDS

__all__ = [
    "DISABLED_OPERANDS",
    "RECONCILER_PATH",
    "UNIT_NAME",
    "UNIT_PATH",
    "install_fragment",
    "node_labels",
    "reconciler_script",
    "removal_fragment",
    "systemd_unit",
]

DISABLED_OPERANDS = SRIOV_VGPU_DISABLED_OPERANDS
"""GPU Operator state labels set to ``false`` on SR-IOV vGPU nodes: the mdev-only operands (see the module doc);
defined beside the pool spec that reads them (:data:`gpucell.spec.pools.SRIOV_VGPU_DISABLED_OPERANDS`)."""
UNIT_NAME = "gpucell-vgpu-types.service"
"""The systemd service that types the VFs."""
UNIT_PATH = f"/etc/systemd/system/{UNIT_NAME}"
RECONCILER_PATH = "/usr/local/sbin/gpucell-vgpu-types"
"""Where the reconciler script is installed on the host."""
RECONCILE_INTERVAL_SECONDS = 30
"""How often the reconciler looks at the VFs, seconds."""
K3S_CONFIG_PATH = "/etc/rancher/k3s/config.yaml"
"""The k3s config the reconciler reads its node's name from (:data:`gpucell.k3s._scripts.CONFIG_PATH`, which imports
this module)."""
NODE_KUBECONFIG_PATH = "/var/lib/rancher/k3s/agent/kubelet.kubeconfig"
"""The kubelet's kubeconfig the reconciler reports with (:data:`gpucell.k3s._scripts.KUBELET_KUBECONFIG_PATH`)."""
FAIL_AFTER_PASSES = 10
"""Passes (x :data:`RECONCILE_INTERVAL_SECONDS`: five minutes) a GPU may stay short of vGPUs before the reconciler
reports ``failed`` rather than ``pending``."""
VGPU_TYPES_ANNOTATION = "gpucell.io/vgpu-types"
"""Node annotation the reconciler reports on: ``<success|pending|failed> <vGPU type name>[: what is short]``."""
VGPU_TYPES_RETRIGGER_ANNOTATION = "gpucell.io/vgpu-types-retrigger"
"""Node annotation the node's settle sets to make the reconciler start over (a new value each time)."""


def node_labels() -> dict[str, str]:
    """Node labels of an SR-IOV vGPU node besides its pool and workload labels: :data:`DISABLED_OPERANDS` ``=false``.

    No ``nvidia.com/vgpu.config``: only the (disabled) vGPU device manager reads it.
    """
    return dict.fromkeys(DISABLED_OPERANDS, "false")


_UNIT = """[Unit]
Description=gpucell: type SR-IOV vGPU virtual functions as {type_name} ({per_gpu} per GPU)
Documentation=https://github.com/kubevirt/kubevirt/pull/16890
After=local-fs.target

[Service]
Type=simple
ExecStart={path}
Restart=always
RestartSec=10

[Install]
WantedBy=multi-user.target
"""


def reconciler_script(model: GpuModel, profile: str) -> str:
    """The bash reconciler installed at :data:`RECONCILER_PATH`.

    Every :data:`RECONCILE_INTERVAL_SECONDS` (or once, with ``--once``):

    1. learns the numeric id of the type (``NVIDIA L40S-12Q``) from ``/var/lib/gpucell/vgpu-type`` or else from
       the ``nvidia/creatable_vgpu_types`` of the VFs (lines ``<id> : <name>``), and remembers it there, since a
       typed VF lists nothing creatable;
    2. for every physical function of ``model`` (vendor ``0x10de``, the model's device id, ``sriov_totalvfs``
       present) and its enabled VFs (``virtfn0`` .. ``sriov_numvfs - 1``): counts the VFs of that type, clears VFs
       of any other type (left by an earlier ``vgpuProfile``; the kernel refuses while a VM holds the VF, so a
       profile change completes once its VMs are gone), then types free VFs until the GPU holds
       :meth:`~gpucell.catalog.gpu_catalog.GpuModel.vgpus_per_gpu` of them;
    3. reports a GPU left short (fewer VFs enabled than vGPUs wanted, or a type the driver refuses) on stderr,
       i.e. the journal, whenever the shortfall changes;
    4. reports on its Node, as the node's kubelet (``k3s kubectl --kubeconfig`` the kubelet's kubeconfig; the Node
       authorizer lets a kubelet annotate its own Node), :data:`VGPU_TYPES_ANNOTATION` ``success <type>`` once
       every GPU holds its vGPUs, else ``pending <type>: <shortfall>`` for its first :data:`FAIL_AFTER_PASSES`
       passes and ``failed ...`` after: what the node's settle waits for
       (:func:`gpucell.k3s._maintenance_scripts.settle_script`);
    5. starts over (forgets the learned id, counts its passes again) when
       :data:`VGPU_TYPES_RETRIGGER_ANNOTATION` on its Node takes a new value: the settle's re-trigger after
       ``failed`` or a stuck ``pending`` (the node name comes from ``node-name`` in ``/etc/rancher/k3s/config.yaml``).

    ``$GPUCELL_SYSFS_ROOT`` (default ``/sys``), ``$GPUCELL_STATE_DIR`` (default ``/var/lib/gpucell``),
    ``$GPUCELL_K3S_BIN``, ``$GPUCELL_KUBECONFIG``, ``$GPUCELL_K3S_CONFIG`` and ``$GPUCELL_FAIL_AFTER`` let the tests
    run it against a stub tree and a stub cluster.
    """
    return render(
        "vgpu/reconciler",
        node_kubeconfig=NODE_KUBECONFIG_PATH,
        k3s_config=K3S_CONFIG_PATH,
        annotation=VGPU_TYPES_ANNOTATION,
        retrigger=VGPU_TYPES_RETRIGGER_ANNOTATION,
        retrigger_path=VGPU_TYPES_RETRIGGER_ANNOTATION.replace(".", "\\."),
        annotation_path=VGPU_TYPES_ANNOTATION.replace(".", "\\."),
        fail_after=FAIL_AFTER_PASSES,
        model=model.name,
        type_name=model.vgpu_type_name(profile),
        type_name_q=shlex.quote(model.vgpu_type_name(profile)),
        per_gpu=model.vgpus_per_gpu(profile),
        unit=UNIT_NAME,
        vendor=NVIDIA_PCI_VENDOR,
        device=model.pci_device_id,
        interval=RECONCILE_INTERVAL_SECONDS,
    )


def systemd_unit(model: GpuModel, profile: str) -> str:
    """The ``gpucell-vgpu-types.service`` unit: runs the reconciler, restarted by systemd whenever it stops."""
    return _UNIT.format(
        type_name=model.vgpu_type_name(profile), per_gpu=model.vgpus_per_gpu(profile), path=RECONCILER_PATH
    )


def install_fragment(model: GpuModel, profile: str) -> str:
    """Bash for the node's install script (after its ``as_root`` helper): install or update the reconciler and its
    unit, enable the unit, and restart it only when either file changed (a new ``vgpuProfile``)."""
    return render(
        "vgpu/install",
        model=model.name,
        type_name=model.vgpu_type_name(profile),
        per_gpu=model.vgpus_per_gpu(profile),
        script=reconciler_script(model, profile),
        unit=systemd_unit(model, profile),
        path=RECONCILER_PATH,
        unit_path=UNIT_PATH,
        unit_name=UNIT_NAME,
    )


def removal_fragment() -> str:
    """Bash for the install script of a GPU node outside SR-IOV vGPU pools: stop, disable and remove the VF-typing
    service and its script when an earlier pool installed them (a host moved to another pool, or a pool's mode or
    driver changed). Does nothing where they are absent."""
    return render("vgpu/remove", unit_path=UNIT_PATH, unit_name=UNIT_NAME, path=RECONCILER_PATH)
