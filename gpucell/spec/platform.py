"""The platform components' own sections of a cell's spec: chart overrides and the typed settings of Cilium, the
storage layer, the GPU Operator, the NVIDIA DRA driver, KServe and CDI.

They sit below the cell spec (:mod:`gpucell.spec.cell` re-exports them) so that a component's narrow args take its
own section without loading the whole cell spec and tenant admission (docs/decisions/0019-standalone-components.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import Field, StrictInt, field_validator, model_validator

from gpucell.errors import SpecError, shown
from gpucell.spec._base import SpecModel
from gpucell.spec._values import IMAGE_REPOSITORY, IMAGE_TAG, check_url
from gpucell.spec.network import DNS_SUBDOMAIN
from gpucell.spec.pools import NodePool, NodeRole
from gpucell.spec.versions import DeploymentMode, kserve_deployment_modes

__all__ = [
    "CdiSpec",
    "ChartSpec",
    "CiliumSpec",
    "DraDriverSpec",
    "GpuOperatorSpec",
    "ImageSpec",
    "KServeSpec",
    "MigStrategy",
    "StorageBackend",
    "StorageSpec",
    "check_kserve_mode",
    "check_mig_strategy",
    "effective_mig_strategy",
]


class ChartSpec(SpecModel):
    """A Helm chart we install: the typed values live in its component; ``values`` is deep-merged last.

    ``values`` may not set a chart value gpucell derives from a typed key (``owned_values``): an override
    there would silently undo a rule the typed key is checked against.
    """

    owned_values: ClassVar[dict[tuple[str, ...], str]] = {}
    """Chart value path -> the config key (relative to the region) that sets it."""
    fixed_values: ClassVar[dict[tuple[str, ...], str]] = {}
    """Chart value path -> why gpucell fixes it (no config key sets it)."""

    values: dict[str, Any] = {}
    """Chart values merged over what gpucell renders (maps merge key by key, anything else replaces)."""

    @model_validator(mode="after")
    def _no_owned_values(self) -> ChartSpec:
        for path, key in self.owned_values.items():
            node: Any = self.values
            for part in path:
                node = node.get(part) if isinstance(node, dict) else None
            if node is not None:
                raise SpecError(("values", *path), f"is set by gpucell from {key}; set {key} instead")
        for path, reason in self.fixed_values.items():
            node = self.values
            for part in path:
                node = node.get(part) if isinstance(node, dict) else None
            if node is not None:
                raise SpecError(("values", *path), f"is fixed by gpucell: {reason}; remove it")
        return self


class CiliumSpec(ChartSpec):
    """Cilium chart overrides. The address plan comes from ``network``."""

    owned_values: ClassVar[dict[tuple[str, ...], str]] = {
        ("k8sServiceHost",): "network.apiEndpoint",
        ("k8sServicePort",): "network.apiPort",
        ("ipam", "operator", "clusterPoolIPv4PodCIDRList"): "network.podCidr",
        ("ipam", "operator", "clusterPoolIPv4MaskSize"): "network.podCidrMaskSize",
        ("l2announcements", "enabled"): "loadBalancer.announce",
        ("bgpControlPlane", "enabled"): "loadBalancer.announce",
        ("gatewayAPI", "enabled"): "gateway",
    }


class StorageBackend(StrEnum):
    """Where PVCs (and so VM disks) live."""

    LOCAL_PATH = "local-path"
    LONGHORN = "longhorn"


class StorageSpec(ChartSpec):
    """The cell's storage layer and its one default StorageClass. ``values`` go to the Longhorn chart."""

    owned_values: ClassVar[dict[tuple[str, ...], str]] = {
        ("persistence", "defaultClassReplicaCount"): "storage.replicas",
        ("defaultSettings", "defaultReplicaCount"): "storage.replicas",
        ("longhornManager", "tolerations"): "nodePools.<pool>.taints",
        ("longhornDriver", "tolerations"): "nodePools.<pool>.taints",
        ("defaultSettings", "taintToleration"): "nodePools.<pool>.taints",
    }

    backend: StorageBackend = StorageBackend.LOCAL_PATH
    """``local-path`` (k3s's bundled provisioner; node-local, lab use) or ``longhorn`` (replicated block storage)."""
    replicas: StrictInt = Field(default=3, ge=1, le=10)
    """Longhorn: replicas per volume (count), each on a different node. Defaults to 3."""
    other_classes: list[str] = []
    """StorageClasses installed outside gpucell (an NFS or CSI driver of the operator's) that a VM disk's or a
    notebook's ``storageClass`` may name, besides the backend's own (``local-path`` or ``longhorn``). A PVC of a
    class the cell does not have stays Pending for ever. Defaults to none."""

    @field_validator("other_classes")
    @classmethod
    def _class_names(cls, names: list[str]) -> list[str]:
        for index, name in enumerate(names):
            if not DNS_SUBDOMAIN.fullmatch(name):
                raise SpecError((index,), f"{shown(name)} is not a StorageClass name (a DNS-1123 subdomain)")
        return names

    @property
    def classes(self) -> list[str]:
        """The StorageClasses workloads may name: the backend's, then ``otherClasses``."""
        return [self.backend.value, *self.other_classes]

    @model_validator(mode="after")
    def _values_need_a_chart(self) -> StorageSpec:
        if self.backend is StorageBackend.LOCAL_PATH:
            if self.values:
                raise SpecError(
                    ("values",),
                    "only applies to the longhorn backend (local-path is built into k3s and has no chart values)",
                )
            if "replicas" in self.model_fields_set:
                raise SpecError(
                    ("replicas",), f"{self.replicas} only applies to the longhorn backend (local-path keeps one copy)"
                )
        return self


class MigStrategy(StrEnum):
    """How the device plugin exposes MIG devices (GPU Operator ``mig.strategy``)."""

    SINGLE = "single"
    MIXED = "mixed"


class ImageSpec(SpecModel):
    """A container image split the way the GPU Operator chart takes it."""

    repository: str
    """Registry and path without the image name, e.g. ``registry.example.com/nvidia``."""
    image: str = "vgpu-manager"
    """Image name. Defaults to ``vgpu-manager``."""
    version: str
    """Tag, e.g. ``580.95.02-ubuntu24.04``."""

    @field_validator("repository", "image")
    @classmethod
    def _path(cls, value: str) -> str:
        if len(value) > 255 or not IMAGE_REPOSITORY.fullmatch(value):
            raise ValueError("is not an image repository path ([registry[:port]/]path, lower-case, no tag)")
        return value

    @field_validator("version")
    @classmethod
    def _tag(cls, value: str) -> str:
        if not IMAGE_TAG.fullmatch(value):
            raise ValueError("is not an image tag (letters, digits, '_', '.', '-'; at most 128; no leading . or -)")
        return value


class GpuOperatorSpec(ChartSpec):
    """NVIDIA GPU Operator settings that are not derived from the node pools."""

    owned_values: ClassVar[dict[tuple[str, ...], str]] = {
        ("mig", "strategy"): "gpuOperator.migStrategy",
        ("vgpuManager", "repository"): "gpuOperator.vgpuDriverImage",
        ("vgpuManager", "image"): "gpuOperator.vgpuDriverImage",
        ("vgpuManager", "version"): "gpuOperator.vgpuDriverImage",
        ("dcgmExporter", "enabled"): "gpuOperator.dcgmExporter",
        ("daemonsets", "tolerations"): "nodePools.<pool>.taints",
        ("node-feature-discovery", "worker", "tolerations"): "nodePools.<pool>.taints",
        # on with a vm-passthrough or vm-vgpu pool: the VM operands (vfio-manager, sandbox device plugin) need it
        ("sandboxWorkloads", "enabled"): "nodePools.<pool>.gpuMode",
        # a custom mig-parted config drops the chart's layouts, which gpucell labels MIG nodes with
        ("migManager", "config"): "nodePools.<pool>.migConfig",
    }
    fixed_values: ClassVar[dict[tuple[str, ...], str]] = {
        ("operator", "upgradeCRD"): "the operator's CRDs must follow every chart upgrade (NVIDIA/gpu-operator#602)",
        ("driver", "upgradePolicy", "autoUpgrade"): "gpucell's maintenance owns node cordons; the upgrade "
        "controller would uncordon nodes gpucell holds cordoned (NVIDIA/gpu-operator#2820)",
        ("devicePlugin", "config"): "a device plugin config (time-slicing, MPS) multiplies the nvidia.com/gpu nodes "
        "advertise while capacity, quotas and metering count whole GPUs; share GPUs with MIG "
        "(nodePools.<pool>.migConfig) or vGPU pools",
    }
    runtime_class: ClassVar[str] = "nvidia"
    """The RuntimeClass gpucell's GPU notebooks and endpoints name (``runtimeClassName``): the chart's default
    ``operator.runtimeClass`` (gpu-operator v26.7.0 ``values.yaml``)."""

    @model_validator(mode="after")
    def _runtime_class_kept(self) -> GpuOperatorSpec:
        """``operator.runtimeClass`` may only repeat gpucell's own value; the toolkit's runtime handler keeps its
        name."""
        operator = self.values.get("operator") if isinstance(self.values, dict) else None
        runtime_class = operator.get("runtimeClass") if isinstance(operator, dict) else None
        if runtime_class is not None and runtime_class != self.runtime_class:
            raise SpecError(
                ("values", "operator", "runtimeClass"),
                f"{shown(runtime_class)} renames the RuntimeClass, which gpucell's GPU workloads name as "
                f"runtimeClassName {self.runtime_class}; remove it (or set {self.runtime_class})",
            )
        env = ((self.values.get("toolkit") or {}).get("env") or []) if isinstance(self.values, dict) else []
        for index, entry in enumerate(env):
            if isinstance(entry, dict) and entry.get("name") in ("CONTAINERD_RUNTIME_CLASS", "NVIDIA_RUNTIME_NAME"):
                raise SpecError(
                    ("values", "toolkit", "env", index, "name"),
                    f"{shown(entry['name'])} renames the "
                    "NVIDIA runtime handler, which gpucell's GPU workloads use as RuntimeClass nvidia; "
                    "remove it",
                )
        for section in (("driver", "manager"), ("vgpuManager", "driverManager")):
            self._no_cordon_env(section)
        return self

    def _no_cordon_env(self, section: tuple[str, str]) -> None:
        """``<section>.env`` may not turn the driver manager's cordon back on (``ENABLE_GPU_POD_EVICTION``,
        ``ENABLE_AUTO_DRAIN``: :data:`gpucell.components.gpu_operator.DRIVER_MANAGER_HANDS_OFF`)."""
        node: Any = self.values
        for part in (*section, "env"):
            node = node.get(part) if isinstance(node, dict) else None
        for index, entry in enumerate(node if isinstance(node, list) else []):
            if isinstance(entry, dict) and entry.get("name") in ("ENABLE_GPU_POD_EVICTION", "ENABLE_AUTO_DRAIN"):
                raise SpecError(
                    ("values", *section, "env", index, "name"),
                    f"{shown(entry['name'])} would let the driver manager cordon and uncordon nodes, which "
                    "gpucell's maintenance owns (NVIDIA/gpu-operator#304); remove it",
                )

    mig_strategy: MigStrategy | None = None
    """``single`` or ``mixed``. Defaults to ``mixed`` when any pool uses MIG (any layout works), else ``single``."""
    vgpu_driver_image: ImageSpec | None = None
    """The NVIDIA vGPU Manager image built from NVIDIA's licensed vGPU driver; required with a vm-vgpu pool."""
    dcgm_exporter: bool = True
    """Run the DCGM exporter for GPU metrics. Defaults to true."""


class DraDriverSpec(ChartSpec):
    """NVIDIA DRA driver for GPUs settings (chart ``dra-driver-nvidia-gpu``, installed with a ``dra`` pool); ``values``
    is merged into the chart's values (:func:`gpucell.components.dra_driver.dra_driver_values` renders the rest)."""

    owned_values: ClassVar[dict[tuple[str, ...], str]] = {
        ("kubeletPlugin", "nodeSelector"): "nodePools.<pool>.gpuMode (dra)",
        ("kubeletPlugin", "tolerations"): "nodePools.<pool>.taints",
    }
    fixed_values: ClassVar[dict[tuple[str, ...], str]] = {
        ("nvidiaDriverRoot",): "the GPU Operator's driver root (/run/nvidia/driver, or / with "
        "gpuOperator.values.driver.enabled false)",
        ("resources", "gpus", "enabled"): "dra pools are the GPU kubelet plugin",
        ("resources", "computeDomains", "enabled"): "gpucell runs no ComputeDomains (multi-node NVLink)",
        ("gpuResourcesEnabledOverride",): "the GPU Operator's device plugin is off on dra nodes",
        ("resourceApiVersion",): "resource.k8s.io/v1, which the claims use",
        ("featureGates", "PassthroughSupport"): "dra pools hand GPUs to VMs",
        ("featureGates", "DeviceMetadata"): "KubeVirt reads the VFIO devices' metadata files",
    }
    conflicting_gates: ClassVar[tuple[str, ...]] = ("DynamicMIG", "NVMLDeviceHealthCheck")
    """Driver gates ``ValidateFeatureGates`` refuses together with ``PassthroughSupport`` (v0.4.1
    ``pkg/featuregates/featuregates.go``): the kubelet plugin would not start."""

    @model_validator(mode="after")
    def _gates_fit_passthrough(self) -> DraDriverSpec:
        gates = self.values.get("featureGates") if isinstance(self.values, dict) else None
        for gate in self.conflicting_gates:
            if isinstance(gates, dict) and gates.get(gate) is True:
                raise SpecError(
                    ("values", "featureGates", gate),
                    "cannot be on with PassthroughSupport, which dra "
                    "pools need: the driver refuses to start (ValidateFeatureGates); remove it",
                )
        return self


class KServeSpec(ChartSpec):
    """KServe settings; ``values`` is merged into the ``kserve-resources`` chart."""

    owned_values: ClassVar[dict[tuple[str, ...], str]] = {
        ("kserve", "controller", "deploymentMode"): "kserve.deploymentMode",
    }

    deployment_mode: DeploymentMode | None = None
    """Default ``deploymentMode`` of InferenceServices: raw Kubernetes Deployments, ``Standard`` since KServe
    v0.16 (``RawDeployment`` before), which is also the default. ``Knative``/``Serverless`` are rejected: they
    need Knative Serving and a networking layer, which gpucell does not install."""


class CdiSpec(SpecModel):
    """CDI settings that are not derived from the storage layer."""

    upload_proxy_url: str | None = None
    """External ``https://`` URL of ``cdi-uploadproxy`` for ``virtctl image-upload`` (CDI
    ``uploadProxyURLOverride``), or a bare host name (``cdi-upload.example.net``), to which virtctl adds
    ``https://``. Defaults to none: the cell exposes no ingress for it, and ``virtctl image-upload
    --uploadproxy-url`` works through a port-forward."""

    @field_validator("upload_proxy_url")
    @classmethod
    def _https(cls, value: str | None) -> str | None:
        """Kept as given (CDI hands it to virtctl). virtctl adds ``https://`` to a value whose Go ``url.Parse``
        finds no scheme (kubevirt v1.9.0 ``pkg/virtctl/imageupload/imageupload.go`` 349-356); ``host:port`` parses
        as scheme ``host``, so a port needs ``https://``."""
        if value is None:
            return None
        bare = "://" not in value
        try:
            if bare and ":" in value:
                raise ValueError
            check_url("https://" + value if bare else value, ("https",))
        except ValueError:
            raise ValueError(
                "is not an https:// URL with a host, nor a bare host name (with a port, write https://host:port: "
                "virtctl reads host:port as a URL scheme)"
            ) from None
        return value


def effective_mig_strategy(configured: MigStrategy | None, pools: Mapping[str, NodePool]) -> MigStrategy:
    """``configured`` (``gpuOperator.migStrategy``), or ``mixed`` when any GPU pool of ``pools`` uses MIG and
    ``single`` otherwise."""
    if configured is not None:
        return configured
    uses_mig = any(p.mig_layout for p in pools.values() if p.role is NodeRole.GPU)
    return MigStrategy.MIXED if uses_mig else MigStrategy.SINGLE


def check_mig_strategy(
    strategy: MigStrategy | None, pools: Mapping[str, NodePool], setting: str
) -> Iterator[SpecError]:
    """With ``strategy`` ``single`` (the config key ``setting``, e.g. ``gpuOperator.migStrategy``), every GPU pool of
    ``pools`` whose ``migConfig`` mixes MIG profiles, which the device plugin's single strategy cannot advertise."""
    if strategy is not MigStrategy.SINGLE:
        return
    for name, pool in pools.items():
        if pool.role is NodeRole.GPU and len(pool.mig_layout) > 1:
            yield SpecError(
                ("nodePools", name, "migConfig"),
                f"{shown(pool.mig_config)} mixes MIG profiles, which {setting} single cannot "
                "advertise; use a uniform all-<profile> layout or migStrategy mixed",
            )


def check_kserve_mode(kserve: KServeSpec, version: str) -> Iterator[SpecError]:
    """``kserve.deploymentMode`` when KServe ``version`` does not know it, or when it needs Knative Serving."""
    mode = kserve.deployment_mode
    accepted = kserve_deployment_modes(version)
    if mode is not None and mode not in accepted:
        yield SpecError(
            ("kserve", "deploymentMode"),
            f"{shown(mode.value)} is not a deployment mode of KServe {version}; "
            f"accepted: {', '.join(m.value for m in accepted)}",
        )
    elif mode is not None and mode is not accepted[0]:
        yield SpecError(
            ("kserve", "deploymentMode"),
            f"{shown(mode.value)} needs Knative Serving, which gpucell does not install; use {accepted[0].value}",
        )
