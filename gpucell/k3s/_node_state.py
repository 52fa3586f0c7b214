"""What one node should look like once it converged: labels and taints through the API, and, on a GPU node, the
state the GPU Operator must report for it.

Pure ``spec -> value`` functions, shared by the NodePatch each node gets (:mod:`gpucell.k3s.cluster`) and the
maintenance scripts that wait for a node (:mod:`gpucell.k3s._maintenance_scripts`).

GPU Operator facts (NVIDIA/gpu-operator v26.7.0, and the managers it pins):

- the workload mode is the label ``nvidia.com/gpu.workload.config`` (``controllers/state_manager.go``
  ``gpuWorkloadConfigLabelKey``); the operator then sets the ``nvidia.com/gpu.deploy.<operand>`` labels itself
  and the MIG and vGPU managers pause operands by rewriting them, so gpucell never manages those;
- the MIG manager (k8s-mig-manager v0.15.0, ``pkg/mig/reconfigure``) applies ``nvidia.com/mig.config`` and
  reports ``nvidia.com/mig.config.state`` = ``pending`` | ``rebooting`` | ``success`` | ``failed``;
- the vGPU device manager (v0.5.0, ``cmd/nvidia-k8s-vgpu-dm``) applies ``nvidia.com/vgpu.config`` and reports
  ``nvidia.com/vgpu.config.state`` = ``pending`` | ``success`` | ``failed``;
- the resources a node advertises per mode are :func:`gpucell.admission.inventory.gpu_offers`'.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucell.admission.inventory import gpu_offers
from gpucell.k3s._scripts import pool_managed_labels
from gpucell.spec import GpuMode, NodePool, NodeRole
from gpucell.spec.lifecycle import Rollout
from gpucell.spec.nodes import NodeViews
from gpucell.spec.pools import MIG_LABEL, VGPU_LABEL, WORKLOAD_LABEL

__all__ = [
    "DEVICE_PLUGIN_PODS",
    "DRA_DRIVER_NAMESPACE",
    "GPU_OPERATOR_NAMESPACE",
    "KUBEVIRT_NAMESPACE",
    "MIG_STATE_LABEL",
    "STATE_MANAGER_PODS",
    "VALIDATOR_POD_PREFIX",
    "VGPU_STATE_LABEL",
    "NodeState",
    "node_state",
]

MIG_STATE_LABEL = "nvidia.com/mig.config.state"
"""Set by the GPU Operator's MIG manager: ``success`` once the node's ``nvidia.com/mig.config`` is applied."""
VGPU_STATE_LABEL = "nvidia.com/vgpu.config.state"
"""Set by the GPU Operator's vGPU device manager: ``success`` once the node's ``nvidia.com/vgpu.config`` is
applied."""
GPU_OPERATOR_NAMESPACE = "gpu-operator"
"""Where the GPU Operator's operands run (:data:`gpucell.components.gpu_operator.NAMESPACE`)."""
DRA_DRIVER_NAMESPACE = "dra-driver-nvidia-gpu"
"""Where the DRA driver's kubelet plugin runs (:data:`gpucell.components.dra_driver.NAMESPACE`)."""
VALIDATOR_POD_PREFIX = "nvidia-operator-validator-"
"""Name prefix of the GPU Operator's validator pods (its ``nvidia-operator-validator`` DaemonSet)."""
KUBEVIRT_NAMESPACE = "kubevirt"
"""Where KubeVirt's virt-handler runs (:data:`gpucell.components.kubevirt.NAMESPACE`)."""
_GPU_CONFIG_LABELS = (WORKLOAD_LABEL, MIG_LABEL, VGPU_LABEL)
STATE_MANAGER_PODS = {
    MIG_STATE_LABEL: (GPU_OPERATOR_NAMESPACE, "app=nvidia-mig-manager"),
    VGPU_STATE_LABEL: (GPU_OPERATOR_NAMESPACE, "app=nvidia-vgpu-device-manager"),
}
"""State label -> (namespace, label selector) of the GPU Operator pod that sets it. The MIG manager acts only on a
*change* of ``nvidia.com/mig.config``: after a ``failed`` state with the label unchanged nothing re-triggers it
until its pod restarts and reads the label again (NVIDIA/gpu-operator#2833); the same holds for the vGPU device
manager. Selectors: the operator's ``assets/state-mig-manager`` and ``state-vgpu-device-manager`` DaemonSets."""
DEVICE_PLUGIN_PODS = {
    "container": (GPU_OPERATOR_NAMESPACE, "app=nvidia-device-plugin-daemonset"),
    "vm-passthrough": (GPU_OPERATOR_NAMESPACE, "app=nvidia-sandbox-device-plugin-daemonset"),
    "vm-vgpu": (GPU_OPERATOR_NAMESPACE, "app=nvidia-sandbox-device-plugin-daemonset"),
    "vm-vgpu-sriov": (KUBEVIRT_NAMESPACE, "kubevirt.io=virt-handler"),
}
"""GPU configuration kind -> (namespace, label selector) of the pod whose device plugin advertises the node's GPU
resources. A started device plugin does not re-read the host's devices (kubevirt/kubevirt#7084 for KubeVirt's own
PCI device plugin in virt-handler, which advertises SR-IOV vGPU VFs; the same for the sandbox device plugin and
the container device plugin), so a node whose advertised resources do not match after a reconfiguration has that
pod restarted (its DaemonSet starts a new one). ``dra`` nodes advertise no extended resources."""


@dataclass(frozen=True)
class NodeState:
    """One node as gpucell wants it."""

    name: str
    """Node name."""
    role: NodeRole
    """Its pool's role."""
    labels: dict[str, str]
    """Every label gpucell keeps on the node: :func:`gpucell.k3s._scripts.pool_managed_labels`, then the pool's."""
    taints: list[dict[str, str]]
    """The node's whole taint list (``core/v1`` Taint objects), possibly empty."""
    gpu_config: dict[str, str]
    """The labels that select the node's GPU configuration (workload mode, MIG layout, vGPU type); a change of any
    makes the node go through a GPU reconfiguration. Empty on non-GPU nodes."""
    state_labels: tuple[str, ...]
    """Labels the GPU Operator sets to ``success`` once the configuration is applied (MIG and/or vGPU state)."""
    resources: dict[str, int]
    """Extended resources the node must advertise in ``status.allocatable`` once converged: name -> count."""
    rollout: Rollout
    """How the node's pool goes through maintenance."""
    gpu_profile: str = ""
    """The node's whole GPU configuration as one comparable value (``mode=<gpuMode>``, then ``mig=<layout>``,
    ``vgpu=<type>`` and ``vgpu-framework=<sriov|mdev>`` where they apply), recorded by ``-settle`` in the
    annotation ``gpucell.io/gpu-config``. It catches what the labels do not: an SR-IOV vGPU type (those nodes have
    no ``nvidia.com/vgpu.config``) and ``dra`` <-> ``container`` (both ``workload.config=container``). Empty on
    non-GPU nodes."""
    device_plugin: tuple[str, str] | None = None
    """(namespace, label selector) of the pods to restart when the advertised resources do not match
    (:data:`DEVICE_PLUGIN_PODS`); ``None`` on non-GPU and ``dra`` nodes."""
    pod_namespaces: tuple[str, ...] = ()
    """Namespaces besides the GPU Operator's whose pods on the node must be ready once converged (the DRA
    driver's on ``dra`` nodes)."""
    skip_pods: str = ""
    """Name prefix of GPU Operator pods not waited for: on ``dra`` nodes the validator, whose plugin check waits
    for ``nvidia.com/gpu``, which those nodes never advertise (docs/decisions/0017)."""
    vf_type: str = ""
    """On an SR-IOV vGPU node, the vGPU type name its VF-typing service must report done (``NVIDIA L40S-24Q``,
    :mod:`gpucell.k3s.vgpu_sriov`); else empty."""
    quarantine: str = ""
    """The host's quarantine reason as a label value (:attr:`gpucell.spec.network.Quarantine.taint_value`) while it
    is quarantined: its maintenance steps drain it and keep it cordoned. Empty for a host in service."""

    @property
    def is_gpu(self) -> bool:
        """True on GPU nodes."""
        return self.role is NodeRole.GPU


def node_state(cell: NodeViews, pool_name: str, pool: NodePool, host_name: str) -> NodeState:
    """The :class:`NodeState` of host ``host_name`` of pool ``pool_name`` in ``cell``."""
    labels = {**pool_managed_labels(cell, pool_name, pool), **{k: pool.labels[k] for k in sorted(pool.labels)}}
    gpu_config = {k: labels[k] for k in _GPU_CONFIG_LABELS if k in labels}
    state_labels: tuple[str, ...] = ()
    resources: dict[str, int] = {}
    if pool.role is NodeRole.GPU:
        if MIG_LABEL in labels:
            state_labels += (MIG_STATE_LABEL,)
        if VGPU_LABEL in labels:  # mdev vGPU nodes; on SR-IOV ones the vGPU device manager is off
            state_labels += (VGPU_STATE_LABEL,)
        for offer in gpu_offers({pool_name: pool}, cell.effective_mig_strategy.value):
            resources[offer.resource] = resources.get(offer.resource, 0) + offer.per_node
    dra = pool.role is NodeRole.GPU and pool.mode is GpuMode.DRA
    profile, plugin = _gpu_profile(pool, labels) if pool.role is NodeRole.GPU else ("", None)
    host = next(h for h in pool.hosts if h.name == host_name)
    sriov = plugin == DEVICE_PLUGIN_PODS["vm-vgpu-sriov"] and pool.vgpu_profile is not None
    return NodeState(
        name=host_name,
        role=pool.role,
        labels=labels,
        taints=pool.taint_objects + _quarantine_taints(pool, host_name),
        gpu_config=gpu_config,
        state_labels=state_labels,
        resources=resources,
        rollout=pool.rollout,
        gpu_profile=profile,
        device_plugin=plugin,
        pod_namespaces=(DRA_DRIVER_NAMESPACE,) if dra else (),
        skip_pods=VALIDATOR_POD_PREFIX if dra else "",
        vf_type=pool.model.vgpu_type_name(pool.vgpu_profile) if sriov and pool.vgpu_profile else "",
        quarantine=host.quarantine.taint_value if host.quarantine is not None else "",
    )


QUARANTINE_TAINT = "gpucell.io/quarantine"
"""Taint key of a quarantined host's Node (:class:`gpucell.spec.network.Quarantine`); its value is the reason."""


def _quarantine_taints(pool: NodePool, host_name: str) -> list[dict[str, str]]:
    """``[gpucell.io/quarantine=<reason>:NoSchedule]`` when the host is quarantined, else ``[]``."""
    host = next(h for h in pool.hosts if h.name == host_name)
    if host.quarantine is None:
        return []
    return [{"key": QUARANTINE_TAINT, "value": host.quarantine.taint_value, "effect": "NoSchedule"}]


def _gpu_profile(pool: NodePool, labels: dict[str, str]) -> tuple[str, tuple[str, str] | None]:
    """The :attr:`NodeState.gpu_profile` and :attr:`NodeState.device_plugin` of a GPU pool's node."""
    parts = [f"mode={pool.mode.value}"]
    kind = pool.mode.value
    if MIG_LABEL in labels:
        parts.append(f"mig={labels[MIG_LABEL]}")
    if pool.vgpu_profile is not None:
        sriov = VGPU_LABEL not in labels  # pool_managed_labels: SR-IOV nodes get no vgpu.config label
        parts += [f"vgpu={pool.vgpu_profile}", f"vgpu-framework={'sriov' if sriov else 'mdev'}"]
        kind = "vm-vgpu-sriov" if sriov else kind
    return ",".join(parts), DEVICE_PLUGIN_PODS.get(kind)
