"""The spec of one regional cell, and of a stack (its regions), with the rules that span several sections."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from enum import StrEnum
from ipaddress import IPv4Address, IPv4Network
from typing import Any, ClassVar

from pydantic import Field, StrictInt, field_validator, model_validator

from gpucell.errors import SpecError
from gpucell.gpu_catalog import VgpuFramework
from gpucell.spec._base import SpecModel
from gpucell.spec.dra import check_dra
from gpucell.spec.hardware import check_hardware, pool_vgpu_framework
from gpucell.spec.network import Host, Network, Ssh, check_names
from gpucell.spec.pools import GpuMode, NodePool, NodeRole
from gpucell.spec.tenancy import TENANT_NAMESPACE_PREFIX, TenantSpec
from gpucell.spec.versions import DeploymentMode, Versions, kserve_deployment_modes

__all__ = [
    "CdiSpec",
    "CellSpec",
    "ChartSpec",
    "CiliumSpec",
    "DraDriverSpec",
    "GpuOperatorSpec",
    "ImageSpec",
    "KServeSpec",
    "MigStrategy",
    "StackSpec",
    "StorageBackend",
    "StorageSpec",
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


class GpuOperatorSpec(ChartSpec):
    """NVIDIA GPU Operator settings that are not derived from the node pools."""

    owned_values: ClassVar[dict[tuple[str, ...], str]] = {
        ("mig", "strategy"): "gpuOperator.migStrategy",
        ("vgpuManager", "repository"): "gpuOperator.vgpuDriverImage",
        ("vgpuManager", "image"): "gpuOperator.vgpuDriverImage",
        ("vgpuManager", "version"): "gpuOperator.vgpuDriverImage",
        ("dcgmExporter", "enabled"): "gpuOperator.dcgmExporter",
        # GPU notebooks and endpoints run with runtimeClassName nvidia: the RuntimeClass must keep that name.
        ("operator", "runtimeClass"): "its GPU workloads' runtimeClassName (nvidia; not configurable)",
        ("daemonsets", "tolerations"): "nodePools.<pool>.taints",
        ("node-feature-discovery", "worker", "tolerations"): "nodePools.<pool>.taints",
    }
    fixed_values: ClassVar[dict[tuple[str, ...], str]] = {
        ("operator", "upgradeCRD"): "the operator's CRDs must follow every chart upgrade (NVIDIA/gpu-operator#602)",
    }

    @model_validator(mode="after")
    def _runtime_class_kept(self) -> GpuOperatorSpec:
        env = ((self.values.get("toolkit") or {}).get("env") or []) if isinstance(self.values, dict) else []
        for index, entry in enumerate(env):
            if isinstance(entry, dict) and entry.get("name") in ("CONTAINERD_RUNTIME_CLASS", "NVIDIA_RUNTIME_NAME"):
                raise SpecError(("values", "toolkit", "env", index, "name"), f"{entry['name']!r} renames the NVIDIA "
                                "runtime handler, which gpucell's GPU workloads use as RuntimeClass nvidia; remove it")
        return self

    mig_strategy: MigStrategy | None = None
    """``single`` or ``mixed``. Defaults to ``mixed`` when any pool uses MIG (any layout works), else ``single``."""
    vgpu_driver_image: ImageSpec | None = None
    """The NVIDIA vGPU Manager image built from NVIDIA's licensed vGPU driver; required with a vm-vgpu pool."""
    dcgm_exporter: bool = True
    """Run the DCGM exporter for GPU metrics. Defaults to true."""


class DraDriverSpec(ChartSpec):
    """NVIDIA DRA driver for GPUs settings (chart ``dra-driver-nvidia-gpu``, installed with a ``dra`` pool); ``values``
    is merged into the chart's values (:func:`gpucell.dra_driver.dra_driver_values` renders the rest)."""

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
                raise SpecError(("values", "featureGates", gate), "cannot be on with PassthroughSupport, which dra "
                                "pools need: the driver refuses to start (ValidateFeatureGates); remove it")
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
    ``uploadProxyURLOverride``). Defaults to none: the cell exposes no ingress for it, and ``virtctl
    image-upload --uploadproxy-url`` works through a port-forward."""

    @field_validator("upload_proxy_url")
    @classmethod
    def _https(cls, value: str | None) -> str | None:
        if value is not None and (not value.startswith("https://") or len(value) <= len("https://")):
            raise ValueError("is not an https:// URL (virtctl talks TLS to the upload proxy)")
        return value


class CellSpec(SpecModel):
    """Everything that defines one regional cell. Validated whole before any resource is registered."""

    versions: Versions = Versions()
    """Pinned releases of k3s and every add-on."""
    network: Network
    """Address plan and API endpoint."""
    ssh: Ssh = Ssh()
    """Default SSH settings for every pool."""
    node_pools: dict[str, NodePool] = Field(min_length=1)
    """Pool name (DNS-1123 label) -> pool."""
    storage: StorageSpec = StorageSpec()
    """Storage layer."""
    cilium: CiliumSpec = CiliumSpec()
    """Cilium chart overrides."""
    cert_manager: ChartSpec = ChartSpec()
    """cert-manager chart overrides."""
    gpu_operator: GpuOperatorSpec = GpuOperatorSpec()
    """GPU Operator settings."""
    kserve: KServeSpec = KServeSpec()
    """KServe settings."""
    cdi: CdiSpec = CdiSpec()
    """CDI settings."""
    dra_driver: DraDriverSpec = DraDriverSpec()
    """NVIDIA DRA driver settings; the driver is installed only when a pool has ``gpuMode: dra``."""
    tenants: dict[str, TenantSpec] = {}
    """Tenant name (DNS-1123 label, at most 56 characters: the namespace is ``tenant-<name>``) -> tenant."""
    allow_gpu_overcommit: bool = False
    """Let the tenants' GPU quotas add up to more than the region has. Defaults to false."""
    image_namespaces: list[str] = []
    """Namespaces holding golden VM images every tenant may clone (``rootDisk.source.pvc: <ns>/<name>``); a tenant
    may always clone from its own namespace. Defaults to none."""

    _pool_names = field_validator("node_pools")(check_names)

    @field_validator("tenants")
    @classmethod
    def _tenant_names(cls, tenants: dict[str, TenantSpec]) -> dict[str, TenantSpec]:
        check_names(tenants)
        for name in tenants:
            if len(TENANT_NAMESPACE_PREFIX + name) > 63:
                raise SpecError((name,), f"{name!r} is too long: the namespace {TENANT_NAMESPACE_PREFIX}{name} "
                                "would exceed 63 characters")
        return tenants

    @model_validator(mode="after")
    def _cross_checks(self) -> CellSpec:
        self._check_server_count()
        self._check_hosts()
        self._check_cidrs()
        self._check_api_endpoint()
        self._check_gpu_operator()
        self._check_kserve_mode()
        self._check_storage_replicas()
        check_hardware(self)
        check_dra(self)
        # Imported here: admission needs the inventory, which needs gpucell.spec.pools (import cycle).
        from gpucell.spec.admission import check_tenants  # noqa: PLC0415

        check_tenants(self)
        return self

    # -- views ---------------------------------------------------------------------------------------------------
    def pools(self, role: NodeRole) -> dict[str, NodePool]:
        """Pools of one role, in config order."""
        return {n: p for n, p in self.node_pools.items() if p.role is role}

    def gpu_pools(self, *modes: GpuMode) -> dict[str, NodePool]:
        """GPU pools, optionally only those in ``modes``."""
        return {n: p for n, p in self.pools(NodeRole.GPU).items() if not modes or p.mode in modes}

    def vgpu_pools(self, framework: VgpuFramework) -> dict[str, NodePool]:
        """The ``vm-vgpu`` pools whose boards expose vGPUs through ``framework`` with the region's vGPU driver
        (:func:`gpucell.spec.hardware.pool_vgpu_framework`), in config order."""
        return {n: p for n, p in self.gpu_pools(GpuMode.VM_VGPU).items() if pool_vgpu_framework(self, p) is framework}

    @property
    def servers(self) -> list[tuple[str, Host]]:
        """(pool name, host) of every server, in config order; the first initialises etcd."""
        return [(n, h) for n, p in self.pools(NodeRole.SERVER).items() for h in p.hosts]

    def ssh_for(self, pool_name: str) -> Ssh:
        """The SSH settings of a pool's hosts: the region's ``ssh`` with the pool's override applied."""
        override = self.node_pools[pool_name].ssh
        return override.over(self.ssh) if override else self.ssh

    @property
    def api_endpoint(self) -> str:
        """Where the API server is reached: ``network.apiEndpoint`` or the single server's address."""
        if self.network.api_endpoint is not None:
            return self.network.api_endpoint
        return str(self.servers[0][1].address)

    @property
    def effective_mig_strategy(self) -> MigStrategy:
        """``gpuOperator.migStrategy``, or ``mixed`` when any pool uses MIG and ``single`` otherwise."""
        if self.gpu_operator.mig_strategy is not None:
            return self.gpu_operator.mig_strategy
        uses_mig = any(p.mig_layout for p in self.gpu_pools().values())
        return MigStrategy.MIXED if uses_mig else MigStrategy.SINGLE

    @property
    def deployment_mode(self) -> DeploymentMode:
        """The KServe default deployment mode in force."""
        return self.kserve.deployment_mode or kserve_deployment_modes(self.versions.kserve)[0]

    def _all_hosts(self) -> Iterator[tuple[str, int, Host]]:
        for pool_name, pool in self.node_pools.items():
            for index, host in enumerate(pool.hosts):
                yield pool_name, index, host

    # -- rules ---------------------------------------------------------------------------------------------------
    def _check_server_count(self) -> None:
        count = len(self.servers)
        if count == 0:
            raise SpecError(("nodePools",), "no pool has role server; a cell needs 1 or an odd number >= 3 of servers")
        if count != 1 and count % 2 == 0:
            raise SpecError(
                ("nodePools",),
                f"{count} servers: embedded etcd needs 1 or an odd number >= 3 of servers (3, 5, 7) to keep quorum",
            )

    def _check_hosts(self) -> None:
        seen_name: dict[str, tuple[str, int]] = {}
        seen_address: dict[IPv4Address, tuple[str, int]] = {}
        for pool_name, index, host in self._all_hosts():
            where = ("nodePools", pool_name, "hosts", index)
            other = seen_name.get(host.name) or seen_address.get(host.address)
            if other is not None:
                self._check_one_mode(pool_name, other[0], host, where)
            if host.name in seen_name:
                first = seen_name[host.name]
                raise SpecError(
                    (*where, "name"), f"{host.name!r} is already used by nodePools.{first[0]}.hosts[{first[1]}]"
                )
            if host.address in seen_address:
                first = seen_address[host.address]
                raise SpecError(
                    (*where, "address"),
                    f"{str(host.address)!r} is already used by nodePools.{first[0]}.hosts[{first[1]}]",
                )
            if host.address not in self.network.node_cidr:
                raise SpecError(
                    (*where, "address"), f"{str(host.address)!r} is outside network.nodeCidr {self.network.node_cidr}"
                )
            seen_name[host.name] = (pool_name, index)
            seen_address[host.address] = (pool_name, index)

    def _check_one_mode(self, pool_name: str, other_pool: str, host: Host, where: tuple[Any, ...]) -> None:
        mine, theirs = self.node_pools[pool_name], self.node_pools[other_pool]
        if mine.role is NodeRole.GPU and theirs.role is NodeRole.GPU and mine.gpu_mode != theirs.gpu_mode:
            raise SpecError(
                where,
                f"host {host.name!r} is in pools {other_pool} ({theirs.gpu_mode}) and {pool_name} ({mine.gpu_mode}); "
                "a node runs exactly one GPU mode",
            )

    def _check_cidrs(self) -> None:
        net = self.network
        ranges: list[tuple[str, IPv4Network]] = [
            ("nodeCidr", net.node_cidr), ("podCidr", net.pod_cidr), ("serviceCidr", net.service_cidr)
        ]
        for (key_a, a), (key_b, b) in itertools.combinations(ranges, 2):
            if a.overlaps(b):
                raise SpecError(("network", key_b), f"{str(b)!r} overlaps network.{key_a} {a}")
        if net.cluster_dns not in net.service_cidr:
            raise SpecError(
                ("network", "clusterDns"), f"{str(net.cluster_dns)!r} is outside network.serviceCidr {net.service_cidr}"
            )
        if net.cluster_dns in (net.service_cidr.network_address, net.service_cidr.broadcast_address):
            raise SpecError(
                ("network", "clusterDns"),
                f"{str(net.cluster_dns)!r} is the network or broadcast address of {net.service_cidr}; "
                "use a host address such as the .10",
            )
        if net.pod_cidr_mask_size <= net.pod_cidr.prefixlen:
            raise SpecError(
                ("network", "podCidrMaskSize"),
                f"{net.pod_cidr_mask_size} must be longer than network.podCidr's /{net.pod_cidr.prefixlen}",
            )

    def _check_api_endpoint(self) -> None:
        if self.network.api_endpoint is None and len(self.servers) > 1:
            raise SpecError(
                ("network", "apiEndpoint"),
                f"is required with {len(self.servers)} servers: a VIP or load-balanced name in front of all of them",
            )

    def _check_gpu_operator(self) -> None:
        vgpu_pools = self.gpu_pools(GpuMode.VM_VGPU)
        if vgpu_pools and self.gpu_operator.vgpu_driver_image is None:
            raise SpecError(
                ("gpuOperator", "vgpuDriverImage"),
                f"is required because pool {next(iter(vgpu_pools))} runs vm-vgpu; "
                "give the repository and version of your NVIDIA vGPU Manager image",
            )
        if self.gpu_operator.mig_strategy is MigStrategy.SINGLE:
            for name, pool in self.gpu_pools().items():
                if len(pool.mig_layout) > 1:
                    raise SpecError(
                        ("nodePools", name, "migConfig"),
                        f"{pool.mig_config!r} mixes MIG profiles, which gpuOperator.migStrategy single cannot "
                        "advertise; use a uniform all-<profile> layout or migStrategy mixed",
                    )

    def _check_storage_replicas(self) -> None:
        nodes = sum(len(p.hosts) for p in self.node_pools.values())
        if self.storage.backend is StorageBackend.LONGHORN and self.storage.replicas > nodes:
            raise SpecError(
                ("storage", "replicas"),
                f"{self.storage.replicas} replicas need as many nodes, the region has {nodes}; Longhorn keeps "
                "each replica of a volume on a different node",
            )

    def _check_kserve_mode(self) -> None:
        mode = self.kserve.deployment_mode
        accepted = kserve_deployment_modes(self.versions.kserve)
        if mode is not None and mode not in accepted:
            raise SpecError(
                ("kserve", "deploymentMode"),
                f"{mode.value!r} is not a deployment mode of KServe {self.versions.kserve}; "
                f"accepted: {', '.join(m.value for m in accepted)}",
            )
        if mode is not None and mode is not accepted[0]:
            raise SpecError(
                ("kserve", "deploymentMode"),
                f"{mode.value!r} needs Knative Serving, which gpucell does not install; use {accepted[0].value}",
            )


class StackSpec(SpecModel):
    """A stack's ``gpucell:regions`` config: region name -> cell. Each region becomes one independent cell."""

    regions: dict[str, CellSpec] = Field(min_length=1)
    """Region name (DNS-1123 label, used in every resource name of the cell) -> cell spec."""

    _region_names = field_validator("regions")(check_names)
