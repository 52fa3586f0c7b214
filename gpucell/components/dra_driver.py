"""The NVIDIA DRA driver for GPUs on a cell's ``gpuMode: dra`` pools, next to the GPU Operator that runs their driver.

One Helm release of chart ``dra-driver-nvidia-gpu`` (``oci://registry.k8s.io/dra-driver-nvidia/charts``, the
address of kubernetes-sigs/dra-driver-nvidia-gpu ``docs/install.md`` at v0.4.1) at ``versions.draDriver``, in its own
namespace ``dra-driver-nvidia-gpu`` (the chart refuses ``default``: ``templates/validation.yaml``). Every value gpucell
sets is checked against the chart's ``values.yaml`` at the pinned version by ``gpucell plan --check``.

How it shares the nodes with the GPU Operator (docs/decisions/0017):

- A ``dra`` node runs the operator's ``container`` workload: its driver container (mounted at ``/run/nvidia/driver``,
  the operator's ``hostPaths.driverInstallDir``), toolkit, GFD and validator. Its device plugin, DCGM and DCGM
  exporter are off there by node label (:data:`gpucell.spec.pools.DRA_DISABLED_OPERANDS`; the chart refuses to
  install GPU resources unless ``gpuResourcesEnabledOverride`` says the device plugin is gone); the sandbox device
  plugin and the vfio-manager only ever run on ``vm-passthrough``/``vm-vgpu`` nodes.
- The kubelet plugin runs only on nodes labelled ``gpucell.io/dra-kubelet-plugin=true`` (the ``dra`` pools): the
  chart's own affinity takes any node with an NVIDIA GPU, and a second GPU allocator on a device-plugin node would
  hand out the same GPUs twice.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi_kubernetes.helm.v3 import Release

from gpucell._component import CellComponent
from gpucell.admission.dra import RESOURCE_API_VERSION
from gpucell.components._chart import ChartSource, helm_release
from gpucell.spec.acceptance import ACCEPTANCE_TOLERATION
from gpucell.spec.platform import DraDriverSpec, GpuOperatorSpec
from gpucell.spec.pools import DRA_KUBELET_PLUGIN_LABEL, GpuMode, NodePool, gpu_pools, taint_tolerations
from gpucell.spec.versions import Versions

if TYPE_CHECKING:
    from gpucell.cluster import Cluster, ContainerRuntime
    from gpucell.spec.cell import CellSpec

__all__ = [
    "CHART",
    "FEATURE_GATES",
    "KUBELET_PLUGIN_TOLERATIONS",
    "NAMESPACE",
    "OPERATOR_DRIVER_ROOT",
    "RELEASE_NAME",
    "TOOLKIT_ANNOTATION",
    "DraDriver",
    "DraDriverArgs",
    "dra_driver_values",
    "driver_root",
    "toolkit_fingerprint",
]

CHART = ChartSource("oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu")
"""The chart's OCI reference."""
NAMESPACE = "dra-driver-nvidia-gpu"
"""Namespace of the kubelet plugin (fixed: each cell is its own cluster; the driver's docs use this name)."""
RELEASE_NAME = "dra-driver-nvidia-gpu"
"""Helm release name in the cluster."""
OPERATOR_DRIVER_ROOT = "/run/nvidia/driver"
"""Where the GPU Operator's driver container mounts the driver on the host (chart ``gpu-operator`` v26.7.0
``hostPaths.driverInstallDir``); the DRA driver's ``nvidiaDriverRoot`` ("If the NVIDIA GPU Operator manages the NVIDIA
GPU driver on your nodes, set to ``/run/nvidia/driver``", ``docs/install.md`` v0.4.1)."""
FEATURE_GATES = {"PassthroughSupport": True, "DeviceMetadata": True}
"""Driver gates (``pkg/featuregates/featuregates.go`` v0.4.1, both Alpha and off by default): ``PassthroughSupport``
publishes every GPU also as a VFIO device and binds it to ``vfio-pci`` for a claim; ``DeviceMetadata`` (which requires
it) writes the prepared VFIO devices' attributes to the metadata files virt-launcher reads. kubernetes-sigs/
dra-driver-nvidia-gpu #1217/#1218 name both as what KubeVirt needs."""
KUBELET_PLUGIN_TOLERATIONS: tuple[dict[str, str], ...] = (
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
)
"""The chart's default ``kubeletPlugin.tolerations`` (0.4.1 ``values.yaml``), kept first: a list replaces the whole."""

TOOLKIT_ANNOTATION = "gpucell.io/container-toolkit"
"""Pod annotation of the kubelet plugin (``kubeletPlugin.podAnnotations``): :func:`toolkit_fingerprint`. A change
rolls the plugin's DaemonSet, so it never keeps CDI state from a container toolkit the GPU Operator replaced."""


@dataclass(frozen=True)
class DraDriverArgs:
    """Inputs of :class:`DraDriver`: only what it uses."""

    cluster: Cluster
    """The cluster to install into (its provider and readiness)."""
    spec: DraDriverSpec = field(default_factory=DraDriverSpec)
    """The ``draDriver`` settings (chart ``values``). Defaults to none."""
    node_pools: Mapping[str, NodePool] = field(default_factory=dict)
    """The cluster's node pools: the kubelet plugin tolerates the taints of the ``dra`` pools (it runs on the nodes
    labelled ``gpucell.io/dra-kubelet-plugin=true``). Defaults to none."""
    version: str = Versions().dra_driver
    """Chart version (``versions.draDriver``); defaults to gpucell's pin."""
    driver_root: str = OPERATOR_DRIVER_ROOT
    """Host path of the NVIDIA driver (chart ``nvidiaDriverRoot``): the GPU Operator's driver container
    (:data:`OPERATOR_DRIVER_ROOT`, the default), or ``/`` for a driver installed on the host (:func:`driver_root`)."""
    toolkit: str | None = None
    """What the GPU Operator's container toolkit is (:func:`toolkit_fingerprint`), written on the kubelet plugin's
    pods (:data:`TOOLKIT_ANNOTATION`) so they restart when it changes. Defaults to none (no annotation)."""

    @classmethod
    def from_cell(cls, cell: CellSpec, cluster: Cluster) -> DraDriverArgs:
        """The DRA driver of ``cell`` on ``cluster``: ``draDriver``, ``nodePools``, ``versions.draDriver`` and the
        GPU Operator's driver root (:func:`driver_root` of ``gpuOperator``) and its toolkit
        (:func:`toolkit_fingerprint` of ``versions.gpuOperator``, ``gpuOperator`` and the cluster's runtime)."""
        toolkit = toolkit_fingerprint(cell.versions.gpu_operator, cell.gpu_operator, cluster.runtime)
        root = driver_root(cell.gpu_operator)
        return cls(cluster, cell.dra_driver, cell.node_pools, cell.versions.dra_driver, root, toolkit)


def toolkit_fingerprint(version: str, gpu_operator: GpuOperatorSpec, runtime: ContainerRuntime) -> str:
    """``<gpu operator chart version>-<10 hex digits>``: the chart version (which pins ``toolkit.version``, v1.20.0 in
    v26.7.0) and a SHA-256 of the toolkit's env for ``runtime`` and ``gpuOperator.values.toolkit``: what makes the
    operator replace the container toolkit's pods.

    kubernetes-sigs/dra-driver-nvidia-gpu#1144: after the operator replaced the toolkit, a kubelet plugin left running
    fails every ``NodePrepareResources`` with ``invalid CDI Spec ... empty device edits`` until restarted; v0.4.1 still
    caches the device specs it builds (``cmd/gpu-kubelet-plugin/cdi.go``: ``GetDeviceSpecsByUUIDCached``,
    ``GetCommonEditsCached``). The driver manager only restarts it across a driver reload
    (:data:`gpucell.components.gpu_operator.DRA_PLUGIN_EVICTION`), not a toolkit change."""
    toolkit = {"env": runtime.toolkit_env(), "values": gpu_operator.values.get("toolkit")}
    digest = hashlib.sha256(json.dumps(toolkit, sort_keys=True, default=str).encode()).hexdigest()
    return f"{version}-{digest[:10]}"


def driver_root(gpu_operator: GpuOperatorSpec) -> str:
    """The host path of the NVIDIA driver the kubelet plugin uses, from the GPU Operator's settings: its
    ``hostPaths.driverInstallDir`` (default :data:`OPERATOR_DRIVER_ROOT`), or ``/`` when
    ``gpuOperator.values.driver.enabled`` is false (a driver installed on the host)."""
    values = gpu_operator.values
    driver = values.get("driver")
    if isinstance(driver, dict) and driver.get("enabled") is False:
        return "/"
    paths = values.get("hostPaths")
    configured = paths.get("driverInstallDir") if isinstance(paths, dict) else None
    return str(configured or OPERATOR_DRIVER_ROOT)


def dra_driver_values(
    node_pools: Mapping[str, NodePool], root: str = OPERATOR_DRIVER_ROOT, toolkit: str | None = None
) -> dict[str, Any]:
    """The chart values gpucell owns for the ``dra`` pools of ``node_pools`` (``draDriver.values`` is merged over
    them; the spec refuses overrides of these):

    - ``nvidiaDriverRoot``: ``root`` (:func:`driver_root`).
    - ``resources.gpus.enabled: true`` (the GPU kubelet plugin and DeviceClasses ``gpu.nvidia.com``,
      ``mig.nvidia.com``, ``vfio.gpu.nvidia.com``) with ``gpuResourcesEnabledOverride: true`` (the chart fails without
      it, as it cannot know the device plugin is off on these nodes); ``resources.computeDomains.enabled: false``
      (no ComputeDomain controller: gpucell runs no multi-node NVLink domains).
    - ``resourceApiVersion: resource.k8s.io/v1``: the chart picks the version from ``.Capabilities``, which a Helm
      render without the cluster's discovery may not see; the claims use v1.
    - ``featureGates``: :data:`FEATURE_GATES`.
    - ``kubeletPlugin.nodeSelector``: ``gpucell.io/dra-kubelet-plugin: "true"`` (the ``dra`` nodes; ANDed with the
      chart's GPU-node affinity), ``kubeletPlugin.tolerations``: the chart's default plus the ``dra`` pools' taints
      (and ``gpucell.io/acceptance`` when a ``dra`` pool runs acceptance).
    - ``kubeletPlugin.podAnnotations``: :data:`TOOLKIT_ANNOTATION` = ``toolkit`` when given
      (:func:`toolkit_fingerprint`), so the plugin restarts with a new container toolkit.
    """
    dra = gpu_pools(node_pools, GpuMode.DRA).values()
    tolerations = [dict(t) for t in KUBELET_PLUGIN_TOLERATIONS]
    tolerations += [
        t for t in taint_tolerations(taint for pool in dra for taint in pool.taints) if t not in tolerations
    ]
    if any(pool.acceptance_run is not None for pool in dra):  # the node's acceptance run needs the plugin first
        tolerations.append(dict(ACCEPTANCE_TOLERATION))
    plugin: dict[str, Any] = {"nodeSelector": {DRA_KUBELET_PLUGIN_LABEL: "true"}, "tolerations": tolerations}
    if toolkit is not None:
        plugin["podAnnotations"] = {TOOLKIT_ANNOTATION: toolkit}
    return {
        "nvidiaDriverRoot": root,
        "resourceApiVersion": RESOURCE_API_VERSION,
        "gpuResourcesEnabledOverride": True,
        "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": False}},
        "featureGates": dict(FEATURE_GATES),
        "kubeletPlugin": plugin,
    }


class DraDriver(CellComponent):
    """The NVIDIA DRA driver for GPUs of one cluster (a cell builds it only when a pool has ``gpuMode: dra``).

    Children: one ``kubernetes:helm.sh/v3:Release`` named ``f"{name}-dra-driver"`` (release ``dra-driver-nvidia-gpu``
    in namespace ``dra-driver-nvidia-gpu``), on the provider of ``args.cluster`` and after its ``ready``. Construct it
    after the GPU Operator: the kubelet plugin's init container
    waits for the operator's driver under ``nvidiaDriverRoot``, and a GPU Operator upgrade's new toolkit comes
    first, then the plugin's restart (:data:`TOOLKIT_ANNOTATION`). Helm's wait ends at once for the plugin's DaemonSet
    (the chart's ``maxUnavailable: 100%``), so a node still building its driver does not fail the release.
    """

    namespace: pulumi.Output[str]
    """Namespace of the kubelet plugin (``dra-driver-nvidia-gpu``)."""

    def __init__(self, name: str, args: DraDriverArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("DraDriver", name, opts, args.cluster)
        self.release: Release = helm_release(
            f"{name}-dra-driver",
            source=CHART,
            version=args.version,
            namespace=NAMESPACE,
            values=dra_driver_values(args.node_pools, args.driver_root, args.toolkit),
            overrides=args.spec.values,
            release_name=RELEASE_NAME,
            opts=self.child(),
        )
        self.namespace = self.release.namespace.apply(lambda ns: ns or NAMESPACE)
        self.register_outputs({"namespace": self.namespace})
