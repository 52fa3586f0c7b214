"""The NVIDIA GPU Operator, configured from the cluster's GPU pools and pointed at its nodes' containerd.

One Helm release (``gpu-operator`` from https://helm.ngc.nvidia.com/nvidia) in namespace ``gpu-operator``. The
values we own are derived from the node pools; every key path is checked against the chart's default values at
the pinned version (``deployments/gpu-operator/values.yaml`` of NVIDIA/gpu-operator v26.7.0) by the tests.

A node's workload mode is not set here: k3s registers each GPU node with the label
``nvidia.com/gpu.workload.config`` (``container``, ``vm-passthrough`` or ``vm-vgpu``) and the operator
deploys the matching operands on it (``gpuStateLabels`` in the operator's
``controllers/state_manager.go``). Nodes without the label get ``sandboxWorkloads.defaultWorkload``, which
we keep at ``container``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi_kubernetes.helm.v3 import Release

from gpucell._component import CellComponent
from gpucell.catalog.gpu_catalog import VgpuFramework
from gpucell.components._chart import ChartSource, helm_release
from gpucell.components.gpu_alerts import NODE_RELABELING, dcgm_metrics_csv
from gpucell.components.platform_tolerations import gpu_pool_tolerations
from gpucell.spec.hardware import vgpu_pools
from gpucell.spec.platform import GpuOperatorSpec, effective_mig_strategy
from gpucell.spec.pools import DRA_KUBELET_PLUGIN_LABEL, GpuMode, NodePool, gpu_pools
from gpucell.spec.versions import Versions

if TYPE_CHECKING:
    from gpucell.cluster import Cluster, ContainerRuntime
    from gpucell.spec.cell import CellSpec

__all__ = [
    "BIND_NVSWITCHES",
    "CHART",
    "DAEMONSET_TOLERATIONS",
    "DCGM_METRICS_CONFIG",
    "DRA_PLUGIN_EVICTION",
    "DRIVER_MANAGER_HANDS_OFF",
    "MIG_DEFAULT_CONFIG",
    "NAMESPACE",
    "NFD_WORKER_TOLERATIONS",
    "RELEASE_NAME",
    "GpuOperator",
    "GpuOperatorArgs",
    "dcgm_metrics_values",
    "gpu_operator_values",
    "merge_env",
]

CHART = ChartSource("gpu-operator", "https://helm.ngc.nvidia.com/nvidia")
"""NVIDIA's NGC Helm repository and chart name."""
NAMESPACE = "gpu-operator"
"""Namespace of the operator and its operands (fixed: each cell is its own cluster)."""
RELEASE_NAME = "gpu-operator"
"""Helm release name in the cluster."""

DCGM_METRICS_CONFIG = "gpucell-dcgm-metrics"
"""ConfigMap of the DCGM exporter's fields, rendered by the chart with the metrics stack on."""
MIG_DEFAULT_CONFIG = "all-disabled"
"""``migManager.config.default``: the layout of a node that has no ``nvidia.com/mig.config`` label."""
DAEMONSET_TOLERATIONS: tuple[dict[str, str], ...] = (
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
)
"""The chart's default ``daemonsets.tolerations`` (v26.7.0 ``values.yaml``), kept first: a list value replaces the
chart's whole list."""
NFD_WORKER_TOLERATIONS: tuple[dict[str, str], ...] = (
    {"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "", "effect": "NoSchedule"},
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
)
"""The chart's default ``node-feature-discovery.worker.tolerations`` (v26.7.0 ``values.yaml``), kept first."""
DRA_PLUGIN_EVICTION = {"name": "NODE_LABEL_FOR_GPU_POD_EVICTION", "value": DRA_KUBELET_PLUGIN_LABEL}
"""``driver.manager.env`` entry with ``dra`` pools: the driver manager sets this node label to
``paused-for-driver-upgrade`` before it reloads the driver and back afterwards, so the DRA kubelet plugin (selected by
it) leaves the node and comes back on the new driver (k8s-driver-manager v0.12.0 ``cmd/driver-manager/main.go``:
``NODE_LABEL_FOR_GPU_POD_EVICTION``, ``customOperandNodeLabelValue``)."""
DRIVER_MANAGER_HANDS_OFF: tuple[dict[str, str], ...] = (
    {"name": "ENABLE_GPU_POD_EVICTION", "value": "false"},
    {"name": "ENABLE_AUTO_DRAIN", "value": "false"},
)
"""``driver.manager.env`` entries that keep the driver manager off the node's cordon: k8s-driver-manager v0.12.0
(``cmd/driver-manager/main.go``, both flags default ``true``) cordons before it evicts GPU pods and uncordons
unconditionally afterwards, on failure (``cleanupOnFailure``) and on the no-driver path after a reboot, where it
never cordoned; every ``CordonNode``/``UncordonNode`` call is gated on one of these two flags
(NVIDIA/gpu-operator#304, NVIDIA/k8s-driver-manager#212). gpucell's maintenance cordons, evicts and uncordons
(:mod:`gpucell.k3s._maintenance_scripts`); with these off the manager waits, retrying, until a node's GPU workloads
are gone, as the operator's own vfio-manager does (``assets/state-vfio-manager``, ``ENABLE_GPU_POD_EVICTION:
"false"``)."""
BIND_NVSWITCHES = {"name": "BIND_NVSWITCHES", "value": "true"}
"""``vfioManager.env`` entry making ``vfio-manage bind --all`` bind the NVSwitches to ``vfio-pci`` too (NVIDIA/
k8s-driver-manager v0.12.0 ``cmd/vfio-manage/bind.go``: flag ``bind-nvswitches``, env ``BIND_NVSWITCHES``, "Also
bind NVSwitches to vfio-pci (default: false)"; the operator v26.7.0 never sets it). The sandbox device plugin then
advertises them (:attr:`gpucell.catalog.gpu_catalog.NvSwitch.passthrough_resource`)."""


@dataclass(frozen=True)
class GpuOperatorArgs:
    """Inputs of :class:`GpuOperator`: only what it uses."""

    cluster: Cluster
    """The cluster to install into: its provider, readiness and container runtime (``toolkit.env`` points the
    container toolkit at its containerd, :meth:`gpucell.cluster.ContainerRuntime.toolkit_env`)."""
    spec: GpuOperatorSpec = field(default_factory=GpuOperatorSpec)
    """The ``gpuOperator`` settings: MIG strategy, vGPU Manager image, DCGM exporter, chart ``values``. Defaults to
    gpucell's."""
    node_pools: Mapping[str, NodePool] = field(default_factory=dict)
    """The cluster's node pools: the GPU pools decide which operands run (sandbox workloads, VFIO, vGPU, MIG, DRA),
    and every GPU pool's taints are tolerated. Defaults to none (a container-mode install without MIG)."""
    version: str = Versions().gpu_operator
    """Chart version (``versions.gpuOperator``); defaults to gpucell's pin."""
    metrics: bool = False
    """The cluster runs gpucell's metrics stack (:class:`gpucell.components.metrics.Metrics`): the DCGM exporter's
    fields and ServiceMonitors, and the operator's own ServiceMonitor. Defaults to false."""

    @classmethod
    def from_cell(cls, cell: CellSpec, cluster: Cluster) -> GpuOperatorArgs:
        """The GPU Operator of ``cell`` on ``cluster``: ``gpuOperator``, ``nodePools``, ``versions.gpuOperator``,
        ``metrics.enabled``."""
        return cls(cluster, cell.gpu_operator, cell.node_pools, cell.versions.gpu_operator, cell.metrics.enabled)


def gpu_operator_values(
    spec: GpuOperatorSpec, node_pools: Mapping[str, NodePool], runtime: ContainerRuntime, *, metrics: bool = False
) -> dict[str, Any]:
    """The chart values gpucell owns, derived from the GPU pools of ``node_pools``, the ``gpuOperator`` ``spec`` and
    the nodes' container ``runtime`` (``gpuOperator.values`` is merged over them).

    - ``sandboxWorkloads``: enabled when any pool runs VMs; ``mode`` ``kubevirt``; ``defaultWorkload``
      ``container``.
    - ``vfioManager``: only with a ``vm-passthrough`` pool (binds those GPUs to ``vfio-pci``); with
      :data:`BIND_NVSWITCHES` in its ``env`` when such a pool holds SXM GPUs on HGX boards with a catalogued
      NVSwitch, so whole-board VMs can have the board's NVSwitches.
    - ``sandboxDevicePlugin`` (``kubevirt-gpu-device-plugin``): with a ``vm-passthrough`` or an mdev ``vm-vgpu``
      pool; it advertises ``vfio-pci`` functions and mediated devices, not SR-IOV vGPUs.
    - ``vgpuManager`` (image from ``gpuOperator.vgpuDriverImage``): with any ``vm-vgpu`` pool (it loads the vGPU
      host driver, which enables the SR-IOV VFs on Ada and newer boards). ``vgpuDeviceManager``: only with an mdev
      ``vm-vgpu`` pool (NVIDIA/vgpu-device-manager v0.5.0 creates mdevs only; on SR-IOV nodes gpucell also turns it
      off by node label, :mod:`gpucell.k3s.vgpu_sriov`).
    - ``ccManager``: off. The pinned chart enables it with ``defaultMode: "on"``, which would switch
      CC-capable GPUs (H100, H200, B200) on VM nodes into confidential-computing mode, where only confidential
      guests can use them; gpucell runs ordinary KubeVirt VMs.
    - ``mig.strategy``: ``spec.mig_strategy``, else ``mixed`` with a MIG layout and ``single`` without
      (:func:`gpucell.spec.platform.effective_mig_strategy`); ``migManager`` enabled when any container-mode pool's
      GPU supports MIG (with or without ``migConfig``: gpucell labels those nodes ``all-disabled`` without one, and
      only a running MIG manager turns MIG off again when a layout is removed). Its default layout stays
      ``all-disabled``: each node's layout comes from its ``nvidia.com/mig.config`` label. No custom
      mig-parted ConfigMap is rendered: without one the MIG manager (k8s-mig-manager v0.15.0) builds the layouts
      from the node's GPUs (``all-disabled``, ``all-<profile>``, ``all-balanced``), the names every catalog model,
      built-in or ``gpucell:gpuModels``, is held to (:mod:`gpucell.spec.gpu_models`).
    - ``dcgmExporter.enabled``: ``gpuOperator.dcgmExporter``; with ``metrics``: :func:`dcgm_metrics_values`
      and ``operator.metrics.serviceMonitor`` (the operator's own metrics, ``gpu_operator_*``).
    - ``toolkit.env``: :meth:`gpucell.cluster.ContainerRuntime.toolkit_env` of ``runtime`` (k3s's containerd on a
      gpucell cell, :meth:`~gpucell.cluster.ContainerRuntime.k3s`).
    - ``daemonsets.tolerations`` (every operand DaemonSet) and ``node-feature-discovery.worker.tolerations``: the
      chart's defaults (:data:`DAEMONSET_TOLERATIONS`, :data:`NFD_WORKER_TOLERATIONS`) plus the taints of every
      GPU pool (:func:`gpucell.components.platform_tolerations.gpu_pool_tolerations`), so a tainted GPU pool keeps its
      driver, device plugin and node labels.
    - With ``dra`` pools (:mod:`gpucell.components.dra_driver`): ``driver.manager.env``
    ``NODE_LABEL_FOR_GPU_POD_EVICTION=
      gpucell.io/dra-kubelet-plugin``, so that the driver manager (k8s-driver-manager v0.12.0 ``cmd/driver-manager``:
      "Node label for GPU pod eviction") pauses the DRA driver's kubelet plugin across a driver reload and it restarts
      against the new driver (NVIDIA's DRA-with-the-GPU-Operator install guide names this workaround); and
      ``devicePlugin.enabled: false`` when no ``container`` pool needs it, which also drops the validator's
      plugin-validation step (``TransformValidator`` in ``controllers/object_controls.go``), as ``dra`` nodes
      advertise no ``nvidia.com/gpu``. With a ``container`` pool the plugin stays on and is off on ``dra`` nodes by
      node label (:func:`gpucell.k3s._scripts.managed_labels`).
    - ``driver.upgradePolicy.autoUpgrade: false`` and :data:`DRIVER_MANAGER_HANDS_OFF` in ``driver.manager.env``:
      gpucell's maintenance alone cordons and uncordons nodes (the vGPU Manager's driver manager has both flags
      ``"false"`` in the operator's own ``assets/state-vgpu-manager/0500_daemonset.yaml``; ``gpuOperator.values`` may
      not turn them on there either). The operator's upgrade controller (v26.7.0 ``controllers/upgrade_controller.go``,
      on when ``sandboxWorkloads`` is off) cordons and drains nodes on its own schedule and uncordons a node gpucell
      cordoned after it began (NVIDIA/gpu-operator#2820); the driver manager uncordons whatever it finds
      (NVIDIA/gpu-operator#304). The driver DaemonSet is ``OnDelete`` (``assets/state-driver/0500_daemonset.yaml``): a
      new driver version reaches a node when its driver pod is recreated, at the node's next reboot or after ``kubectl
      delete pod`` of it once gpucell's maintenance drained the node.
    - ``operator.upgradeCRD: true``: the chart's pre-upgrade hook Job (``templates/upgrade_crd.yaml``, running the
      operator image's ``manage-crds apply``) updates the ClusterPolicy, NVIDIADriver, GPUCluster and NFD CRDs on
      every chart upgrade; Helm itself never upgrades ``crds/`` (NVIDIA/gpu-operator#602: the operator crashloops
      on a CRD the upgrade did not add). The chart's comment and NVIDIA's upgrade guide require
      ``--disable-openapi-validation`` with it, which :class:`GpuOperator` sets on the release. The hook does not
      upgrade the DRA ComputeDomain CRDs, which gpucell does not install.

    ``operator.defaultRuntime`` is not set: the pinned chart has no such key (the runtime is detected).
    """
    passthrough_pools = gpu_pools(node_pools, GpuMode.VM_PASSTHROUGH)
    vgpu = bool(gpu_pools(node_pools, GpuMode.VM_VGPU))
    image = spec.vgpu_driver_image
    mdev = bool(vgpu_pools(node_pools, image, VgpuFramework.MDEV))
    runs_vms = bool(passthrough_pools) or vgpu
    uses_mig = any(pool.mig_label is not None for pool in gpu_pools(node_pools).values())
    vgpu_manager: dict[str, Any] = {"enabled": False}
    if vgpu and image is not None:  # the spec requires the image whenever a vm-vgpu pool exists
        vgpu_manager = {
            "enabled": True,
            "repository": image.repository,
            "image": image.image,
            "version": image.version,
        }
    vfio_manager: dict[str, Any] = {"enabled": bool(passthrough_pools)}
    if any(p.model.hgx is not None and p.model.hgx.nvswitch is not None for p in passthrough_pools.values()):
        vfio_manager["env"] = [dict(BIND_NVSWITCHES)]
    tolerations = gpu_pool_tolerations(node_pools)
    values: dict[str, Any] = {
        "operator": {"upgradeCRD": True},
        "daemonsets": {"tolerations": _with(DAEMONSET_TOLERATIONS, tolerations)},
        "node-feature-discovery": {"worker": {"tolerations": _with(NFD_WORKER_TOLERATIONS, tolerations)}},
        "sandboxWorkloads": {"enabled": runs_vms, "mode": "kubevirt", "defaultWorkload": "container"},
        "vfioManager": vfio_manager,
        "sandboxDevicePlugin": {"enabled": bool(passthrough_pools) or mdev},
        "vgpuManager": vgpu_manager,
        "vgpuDeviceManager": {"enabled": mdev},
        "ccManager": {"enabled": False},
        "mig": {"strategy": effective_mig_strategy(spec.mig_strategy, node_pools).value},
        "migManager": {"enabled": uses_mig, "config": {"default": MIG_DEFAULT_CONFIG}},
        "dcgmExporter": {"enabled": spec.dcgm_exporter},
        "toolkit": {"env": runtime.toolkit_env()},
    }
    manager_env = [dict(entry) for entry in DRIVER_MANAGER_HANDS_OFF]
    values["driver"] = {"upgradePolicy": {"autoUpgrade": False}, "manager": {"env": manager_env}}
    if gpu_pools(node_pools, GpuMode.DRA):
        values["driver"]["manager"]["env"].append(dict(DRA_PLUGIN_EVICTION))
        values["devicePlugin"] = {"enabled": bool(gpu_pools(node_pools, GpuMode.CONTAINER))}
    if metrics and spec.dcgm_exporter:
        values["dcgmExporter"].update(dcgm_metrics_values())
        values["operator"]["metrics"] = {"serviceMonitor": {"interval": "30s"}}
    return values


def dcgm_metrics_values() -> dict[str, Any]:
    """With the metrics stack: the exporter's fields (``dcgmExporter.config``, a ConfigMap the chart renders from
    ``data``: :func:`gpucell.components.gpu_alerts.dcgm_metrics_csv`, which adds ECC, retired pages and the power limit
    to the default list) and its ServiceMonitor with the exporter pod's node as label ``node``
    (:data:`gpucell.components.gpu_alerts.NODE_RELABELING`), which the GPU alerts name."""
    return {
        "config": {"name": DCGM_METRICS_CONFIG, "create": True, "data": dcgm_metrics_csv()},
        "serviceMonitor": {"enabled": True, "relabelings": [dict(NODE_RELABELING)]},
    }


def _with(defaults: tuple[dict[str, str], ...], extra: list[dict[str, str]]) -> list[dict[str, str]]:
    """The chart's default list followed by ``extra`` entries it does not already hold."""
    out = [dict(entry) for entry in defaults]
    out += [entry for entry in extra if entry not in out]
    return out


def merge_env(ours: list[dict[str, str]], theirs: list[dict[str, Any]]) -> list[dict[str, str]]:
    """``toolkit.env`` with the user's entries merged in *by name*, every value a string.

    A plain deep merge would replace our list whole and drop the containerd socket and config path; here the user's
    entry wins for a name we set, new names are appended, and ``True``/``1`` become ``"true"``/``"1"`` (the
    ClusterPolicy CRD types env values as strings).
    """
    merged = {entry["name"]: entry["value"] for entry in ours}
    for entry in theirs:
        value = entry.get("value", "")
        merged[str(entry["name"])] = str(value).lower() if isinstance(value, bool) else str(value)
    return [{"name": name, "value": value} for name, value in merged.items()]


def _overrides(spec: GpuOperatorSpec, ours: dict[str, Any]) -> dict[str, Any]:
    """The user's ``gpuOperator.values`` with ``toolkit.env``, ``vfioManager.env``, ``driver.manager.env`` and
    ``vgpuManager.driverManager.env`` already merged by name into ``ours`` (see :func:`merge_env`)."""
    overrides = dict(spec.values)
    for section in ("toolkit", "vfioManager"):
        theirs = overrides.get(section)
        if isinstance(theirs, dict) and isinstance(theirs.get("env"), list):
            overrides[section] = {**theirs, "env": merge_env(ours[section].get("env", []), theirs["env"])}
    for top, sub in (("driver", "manager"), ("vgpuManager", "driverManager")):
        theirs = overrides.get(top)
        manager = theirs.get(sub) if isinstance(theirs, dict) else None
        if isinstance(theirs, dict) and isinstance(manager, dict) and isinstance(manager.get("env"), list):
            mine = ((ours.get(top) or {}).get(sub) or {}).get("env", [])
            overrides[top] = {**theirs, sub: {**manager, "env": merge_env(mine, manager["env"])}}
    return overrides


class GpuOperator(CellComponent):
    """The NVIDIA GPU Operator of one cluster: drivers, toolkit, device plugins, MIG, vGPU, VFIO and DCGM.

    Children: one ``kubernetes:helm.sh/v3:Release`` named ``f"{name}-gpu-operator"`` (Helm release
    ``gpu-operator`` in namespace ``gpu-operator``, chart version ``args.version``,
    ``disableOpenapiValidation: true`` for the CRD upgrade hook, see :func:`gpu_operator_values`), on the provider
    of ``args.cluster`` and after its ``ready``. Helm waits for the operator Deployment; the operands then roll out
    per node as the nodes' labels say (``nvidia.com/gpu.workload.config``, ``nvidia.com/mig.config``: a gpucell cell
    sets them, :mod:`gpucell.k3s._scripts`; on another cluster, label the nodes so).
    """

    namespace: pulumi.Output[str]
    """Namespace the operator and its operands run in (``gpu-operator``)."""

    def __init__(self, name: str, args: GpuOperatorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("GpuOperator", name, opts, args.cluster)
        values = gpu_operator_values(args.spec, args.node_pools, args.cluster.runtime, metrics=args.metrics)
        self.release: Release = helm_release(
            f"{name}-gpu-operator",
            source=CHART,
            version=args.version,
            namespace=NAMESPACE,
            values=values,
            overrides=_overrides(args.spec, values),
            release_name=RELEASE_NAME,
            disable_openapi_validation=True,
            opts=self.child(),
        )
        self.namespace = self.release.namespace.apply(lambda ns: ns or NAMESPACE)
        self.register_outputs({"namespace": self.namespace})
