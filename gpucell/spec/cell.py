"""The spec of one regional cell, and of a stack (its regions), with the rules that span several sections."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from enum import StrEnum
from ipaddress import IPv4Address
from typing import Any, ClassVar

from pydantic import Field, PrivateAttr, StrictInt, ValidatorFunctionWrapHandler, field_validator, model_validator

from gpucell.admission import check_announced_vms, check_tenants
from gpucell.errors import SpecError, shown
from gpucell.gpu_catalog import GpuModel, VgpuFramework
from gpucell.spec._base import SpecModel
from gpucell.spec._rules import Rule, validate_with_rules
from gpucell.spec._values import IMAGE_REPOSITORY, IMAGE_TAG, check_url
from gpucell.spec.backups import BackupsSpec, check_backup_plugins
from gpucell.spec.dra import check_dra
from gpucell.spec.etcd import EtcdSpec
from gpucell.spec.gpu_models import GpuModelSpec, catalog_in_force, check_gpu_models, stack_catalog
from gpucell.spec.hardware import check_hardware, pool_vgpu_framework
from gpucell.spec.identity import OidcSpec, check_tenant_groups
from gpucell.spec.k3s import K3sSpec, check_k3s
from gpucell.spec.lifecycle import HostRemovalPolicy, RemovalPolicy
from gpucell.spec.metrics import MetricsSpec
from gpucell.spec.network import DNS_LABEL, DNS_SUBDOMAIN, Host, Network, Ssh, check_names
from gpucell.spec.pools import GpuMode, NodePool, NodeRole
from gpucell.spec.scheduling import PriorityClassSpec, check_class_name, priority_class_problem
from gpucell.spec.tenancy import SYSTEM_NAMESPACES, TENANT_NAMESPACE_PREFIX, TenantSpec
from gpucell.spec.traffic import GatewaySpec, LoadBalancerSpec, check_traffic
from gpucell.spec.versions import DeploymentMode, Versions, kserve_deployment_modes, release
from gpucell.spec.workloads import GpuVirtualMachineSpec, ModelEndpointSpec, NotebookSpec

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
                raise SpecError(
                    ("values", "toolkit", "env", index, "name"),
                    f"{shown(entry['name'])} renames the "
                    "NVIDIA runtime handler, which gpucell's GPU workloads use as RuntimeClass nvidia; "
                    "remove it",
                )
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
    ``uploadProxyURLOverride``). Defaults to none: the cell exposes no ingress for it, and ``virtctl
    image-upload --uploadproxy-url`` works through a port-forward."""

    @field_validator("upload_proxy_url")
    @classmethod
    def _https(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return check_url(value, ("https",))
        except ValueError:
            raise ValueError("is not an https:// URL with a host (virtctl talks TLS to the upload proxy)") from None


class CellSpec(SpecModel):
    """Everything that defines one regional cell. Validated whole before any resource is registered."""

    versions: Versions = Versions()
    """Pinned releases of k3s and every add-on."""
    k3s: K3sSpec = Field(default=K3sSpec(), alias="k3s")
    """k3s hardening (the CIS profile by default) and its pinned installer."""
    oidc: OidcSpec | None = None
    """The OpenID Connect issuer tenants sign in with; none leaves the API server with k3s's own authenticators
    (client certificates and tokens), and tenant groups must then come from another authenticator."""
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
    metrics: MetricsSpec = MetricsSpec()
    """The metrics stack (kube-prometheus-stack), GPU metering, GPU alerts and dashboards; off unless enabled."""
    tenants: dict[str, TenantSpec] = {}
    """Tenant name (DNS-1123 label, at most 56 characters: the namespace is ``tenant-<name>``) -> tenant."""
    allow_gpu_overcommit: bool = False
    """Let the tenants' GPU quotas add up to more than the region has. Defaults to false."""
    image_namespaces: list[str] = []
    """Namespaces holding golden VM images every tenant may clone (``rootDisk.source.pvc: <ns>/<name>``); a tenant
    may always clone from its own namespace. Neither a tenant's namespace (``tenant-*``) nor a system or platform
    namespace. Defaults to none."""
    etcd: EtcdSpec = EtcdSpec()
    """Embedded etcd: the server that initialised it, and scheduled snapshots."""
    load_balancer: LoadBalancerSpec | None = None
    """Addresses the cell hands to LoadBalancer Services itself (Cilium LB IPAM pools, per tenant) and how they are
    announced (L2 or BGP); none: no LoadBalancer Services (a VM's SSH is then ClusterIP or NodePort)."""
    gateway: GatewaySpec | None = None
    """The HTTPS Gateway (Cilium's Gateway API implementation) exposed model endpoints are served from; needs
    ``loadBalancer``. None by default."""
    removal_policy: RemovalPolicy = RemovalPolicy.PROTECT
    """What removing the region's stateful platform may do: its servers (and, with ``local-path``, its agents), the
    cluster token, Longhorn, the KubeVirt and CDI operators with their CRDs (deleting those deletes every VM), and
    Velero with its namespace and repository password.
    ``protect`` (default), ``retain`` or ``delete``; see ``docs/operations.md``."""
    backups: BackupsSpec | None = None
    """Backups of tenants' VMs and volumes (Velero, CSI snapshots moved to an S3-compatible bucket); tenants choose
    their schedule in ``tenants.<tenant>.backup``. None by default."""
    priority_classes: dict[str, PriorityClassSpec] = {}
    """PriorityClass name -> class the tenants' workloads may name (``priorityClassName``). Defaults to none: a
    workload naming a class is refused, and every tenant namespace's quota refuses pods that name one."""

    _gpu_catalog: Mapping[str, GpuModel] = PrivateAttr(default_factory=catalog_in_force)
    """The GPU catalog the cell was validated against (the built-ins, or its stack's ``gpuModels`` with them)."""

    _pool_names = field_validator("node_pools")(check_names)

    @field_validator("image_namespaces")
    @classmethod
    def _image_namespaces(cls, names: list[str]) -> list[str]:
        for index, name in enumerate(names):
            if not DNS_LABEL.fullmatch(name):
                raise SpecError((index,), f"{shown(name)} is not a namespace name (a DNS-1123 label)")
            if name.startswith(TENANT_NAMESPACE_PREFIX):
                raise SpecError(
                    (index,),
                    f"{shown(name)} is a tenant's namespace ({TENANT_NAMESPACE_PREFIX}*): every "
                    "tenant could clone that tenant's disks; put shared images in a namespace of their own",
                )
            if name in SYSTEM_NAMESPACES:
                raise SpecError(
                    (index,),
                    f"{shown(name)} is a system or platform namespace; put shared images in a namespace of their own",
                )
        return names

    @field_validator("tenants")
    @classmethod
    def _tenant_names(cls, tenants: dict[str, TenantSpec]) -> dict[str, TenantSpec]:
        check_names(tenants)
        for name in tenants:
            if len(TENANT_NAMESPACE_PREFIX + name) > 63:
                raise SpecError(
                    (name,),
                    f"{shown(name)} is too long: the namespace {TENANT_NAMESPACE_PREFIX}{name} "
                    "would exceed 63 characters",
                )
        return tenants

    @model_validator(mode="wrap")
    @classmethod
    def _cross_checks(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> CellSpec:
        return validate_with_rules(cls, data, handler, _CELL_RULES)

    # -- views ---------------------------------------------------------------------------------------------------
    @property
    def gpu_catalog(self) -> Mapping[str, GpuModel]:
        """The GPU models the cell's pools and workloads may name: catalog key -> :class:`GpuModel`, the built-ins
        first, then its stack's ``gpuModels`` (:mod:`gpucell.spec.gpu_models`); fixed when the cell was validated."""
        return self._gpu_catalog

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

    @property
    def control_server(self) -> tuple[str, Host]:
        """(pool name, host) of the server the nodes' maintenance steps run on over SSH: the first server in
        config order that is not ``removalPolicy: forget`` (a dead first server is marked so, and the steps move to
        the next; docs/operations.md, "The first server died"). Every server forgotten is refused by the spec."""
        alive = [(n, h) for n, h in self.servers if h.removal_policy is not HostRemovalPolicy.FORGET]
        return (alive or self.servers)[0]

    def ssh_for(self, pool_name: str) -> Ssh:
        """The SSH settings of a pool's hosts: the region's ``ssh`` with the pool's override applied."""
        override = self.node_pools[pool_name].ssh
        return override.over(self.ssh) if override else self.ssh

    @property
    def init_server(self) -> str | None:
        """The server given ``cluster-init``: ``etcd.initServer``, or the single server; ``None`` when that server
        is no longer in the config (every server then joins through the API endpoint)."""
        names = [host.name for _, host in self.servers]
        init = self.etcd.init_server if self.etcd.init_server is not None else names[0]
        return init if init in names else None

    def removal_policy_of(self, pool_name: str, host: Host) -> RemovalPolicy:
        """The effective ``removalPolicy`` of a host: its own, else the region's for servers and for agents of a
        ``local-path`` region (their disks hold volumes), else ``delete``."""
        if host.removal_policy is HostRemovalPolicy.FORGET:
            return RemovalPolicy.DELETE  # its control-server steps run on removal; its install command is retained
        if host.removal_policy is not None:
            return RemovalPolicy(host.removal_policy.value)
        stateful = (
            self.node_pools[pool_name].role is NodeRole.SERVER or self.storage.backend is StorageBackend.LOCAL_PATH
        )
        return self.removal_policy if stateful else RemovalPolicy.DELETE

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

    # -- rules (each yields every problem it finds; see _CELL_RULES) -------------------------------------------
    def _check_hardware(self) -> Iterator[SpecError]:
        """The first pool whose hardware setup cannot work (:func:`gpucell.spec.hardware.check_hardware`)."""
        try:
            check_hardware(self)
        except SpecError as problem:
            yield problem

    def _check_dra(self) -> Iterator[SpecError]:
        """The first ``dra`` pool the pinned versions cannot serve (:func:`gpucell.spec.dra.check_dra`)."""
        try:
            check_dra(self)
        except SpecError as problem:
            yield problem

    def _check_server_count(self) -> Iterator[SpecError]:
        # An even count is accepted, as a step of scaling down one server per run (3 -> 2 -> 1); K3sCluster warns
        # that it tolerates no more failures than one server fewer.
        count = len(self.servers)
        if count == 0:
            yield SpecError(("nodePools",), "no pool has role server; a cell needs 1 or an odd number >= 3 of servers")
            return
        if all(p.role is NodeRole.SERVER and not p.allow_workloads for p in self.node_pools.values()):
            first = next(iter(self.node_pools))
            yield SpecError(
                ("nodePools", first, "allowWorkloads"),
                "is false on every server pool and the cell has no gpu or cpu pool, so no pod could be "
                "scheduled (servers carry node-role.kubernetes.io/control-plane:NoSchedule); add a "
                f"worker pool, or set nodePools.{first}.allowWorkloads: true for a lab",
            )
        if all(h.removal_policy is HostRemovalPolicy.FORGET for _, h in self.servers):
            pool, host = self.servers[0]
            where = ("nodePools", pool, "hosts", self.node_pools[pool].hosts.index(host), "removalPolicy")
            yield SpecError(
                where,
                "'forget' on every server leaves no server to run the nodes' maintenance on; "
                "keep at least one healthy server without it",
            )
        init = self.etcd.init_server
        if count > 1 and init is None:
            yield SpecError(
                ("etcd", "initServer"),
                f"is required with {count} servers: name the server that initialised etcd (usually the first, "
                f"{self.servers[0][1].name}) and keep it when that server is removed, so that no other server is "
                "ever given cluster-init",
            )
        pools = {h.name: n for n, p in self.node_pools.items() for h in p.hosts}
        if init is not None and init in pools and self.node_pools[pools[init]].role is not NodeRole.SERVER:
            yield SpecError(
                ("etcd", "initServer"),
                f"{shown(init)} is a {self.node_pools[pools[init]].role} node of pool {pools[init]}, not a server",
            )
        elif init is not None and init not in pools and not self.etcd.init_server_removed:
            yield SpecError(
                ("etcd", "initServer"),
                f"{shown(init)} is not a server of the region (servers: "
                f"{', '.join(h.name for _, h in self.servers)}); name the server that initialises etcd, or, when "
                "that server was removed from the running cell, keep its name and set etcd.initServerRemoved: true",
            )
        elif init is not None and init in pools and self.etcd.init_server_removed:
            yield SpecError(
                ("etcd", "initServerRemoved"),
                f"is true, but {shown(init)} is still a server of the region; drop initServerRemoved",
            )

    def _check_hosts(self) -> Iterator[SpecError]:
        seen_name: dict[str, tuple[str, int]] = {}
        seen_address: dict[IPv4Address, tuple[str, int]] = {}
        node_cidr = self.network.node_cidr
        for pool_name, index, host in self._all_hosts():
            where = ("nodePools", pool_name, "hosts", index)
            other = seen_name.get(host.name) or seen_address.get(host.address)
            conflict = list(self._check_one_mode(pool_name, other[0], host, where)) if other else []
            if conflict:  # the one line about a host listed in two pools of different modes
                yield from conflict
                continue
            if host.name in seen_name:
                first = seen_name[host.name]
                yield SpecError(
                    (*where, "name"), f"{shown(host.name)} is already used by nodePools.{first[0]}.hosts[{first[1]}]"
                )
            if host.address in seen_address and seen_address[host.address] != seen_name.get(host.name):
                first = seen_address[host.address]
                yield SpecError(
                    (*where, "address"),
                    f"{shown(str(host.address))} is already used by nodePools.{first[0]}.hosts[{first[1]}]",
                )
            if host.address not in node_cidr:
                yield SpecError(
                    (*where, "address"), f"{shown(str(host.address))} is outside network.nodeCidr {node_cidr}"
                )
            elif node_cidr.prefixlen < 31 and host.address in (node_cidr.network_address, node_cidr.broadcast_address):
                yield SpecError(
                    (*where, "address"),
                    f"{shown(str(host.address))} is the network or broadcast address of network.nodeCidr {node_cidr}",
                )
            seen_name.setdefault(host.name, (pool_name, index))
            seen_address.setdefault(host.address, (pool_name, index))

    def _check_one_mode(
        self, pool_name: str, other_pool: str, host: Host, where: tuple[Any, ...]
    ) -> Iterator[SpecError]:
        mine, theirs = self.node_pools[pool_name], self.node_pools[other_pool]
        if mine.role is NodeRole.GPU and theirs.role is NodeRole.GPU and mine.gpu_mode != theirs.gpu_mode:
            yield SpecError(
                where,
                f"host {shown(host.name)} is in pools {other_pool} ({theirs.gpu_mode}) and {pool_name} "
                f"({mine.gpu_mode}); a node runs exactly one GPU mode",
            )

    def _check_api_endpoint(self) -> Iterator[SpecError]:
        if self.network.api_endpoint is None and len(self.servers) > 1:
            yield SpecError(
                ("network", "apiEndpoint"),
                f"is required with {len(self.servers)} servers: a VIP or load-balanced name in front of all of them",
            )
        address = self.network.api_address
        for pool_name, index, host in self._all_hosts():
            if address == host.address and self.network.api_vip is not None:
                yield SpecError(
                    ("network", "apiEndpoint"),
                    f"{shown(str(address))} is the address of {host.name} (nodePools.{pool_name}.hosts[{index}]); "
                    "with apiVip it must be an unused address kube-vip can move between the servers",
                )
            elif address == host.address and self.node_pools[pool_name].role is not NodeRole.SERVER:
                yield SpecError(
                    ("network", "apiEndpoint"),
                    f"{shown(str(address))} is the address of agent {host.name} (nodePools.{pool_name}.hosts[{index}]),"
                    " which runs no API server; use a server's address or a VIP in front of the servers",
                )

    def _check_gpu_operator(self) -> Iterator[SpecError]:
        vgpu_pools = self.gpu_pools(GpuMode.VM_VGPU)
        if vgpu_pools and self.gpu_operator.vgpu_driver_image is None:
            yield SpecError(
                ("gpuOperator", "vgpuDriverImage"),
                f"is required because pool {next(iter(vgpu_pools))} runs vm-vgpu; "
                "give the repository and version of your NVIDIA vGPU Manager image",
            )
        if self.gpu_operator.mig_strategy is MigStrategy.SINGLE:
            for name, pool in self.gpu_pools().items():
                if len(pool.mig_layout) > 1:
                    yield SpecError(
                        ("nodePools", name, "migConfig"),
                        f"{shown(pool.mig_config)} mixes MIG profiles, which gpuOperator.migStrategy single cannot "
                        "advertise; use a uniform all-<profile> layout or migStrategy mixed",
                    )

    def _check_storage_replicas(self) -> Iterator[SpecError]:
        nodes = sum(len(p.hosts) for p in self.node_pools.values())
        if self.storage.backend is StorageBackend.LONGHORN and self.storage.replicas > nodes:
            yield SpecError(
                ("storage", "replicas"),
                f"{self.storage.replicas} replicas need as many nodes, the region has {nodes}; Longhorn keeps "
                "each replica of a volume on a different node",
            )

    def _check_kserve_mode(self) -> Iterator[SpecError]:
        mode = self.kserve.deployment_mode
        accepted = kserve_deployment_modes(self.versions.kserve)
        if mode is not None and mode not in accepted:
            yield SpecError(
                ("kserve", "deploymentMode"),
                f"{shown(mode.value)} is not a deployment mode of KServe {self.versions.kserve}; "
                f"accepted: {', '.join(m.value for m in accepted)}",
            )
        elif mode is not None and mode is not accepted[0]:
            yield SpecError(
                ("kserve", "deploymentMode"),
                f"{shown(mode.value)} needs Knative Serving, which gpucell does not install; use {accepted[0].value}",
            )

    def _check_k3s(self) -> Iterator[SpecError]:
        yield from check_k3s(self.k3s, self.versions.k3s)

    def _check_cilium(self) -> Iterator[SpecError]:
        """``socketLB.hostNamespaceOnly: false`` with VMs in the cell: under kube-proxy replacement socket-LB then
        translates Service addresses inside the virt-launcher pods too, so the guest's own connections to a
        Service bypass the translation and fail (cilium/cilium#14563; Cilium's KubeVirt notes)."""
        socket_lb = self.cilium.values.get("socketLB")
        if not isinstance(socket_lb, dict) or socket_lb.get("hostNamespaceOnly") is not False:
            return
        vm_pools = [n for n, p in self.gpu_pools().items() if p.mode in (GpuMode.VM_PASSTHROUGH, GpuMode.VM_VGPU)]
        vms = [f"{t}/{v}" for t, tenant in self.tenants.items() for v in tenant.virtual_machines]
        if vms or vm_pools:
            where = f"VMs {', '.join(vms[:3])}" if vms else f"VM pools {', '.join(vm_pools)}"
            yield SpecError(
                ("cilium", "values", "socketLB", "hostNamespaceOnly"),
                f"false breaks Service access from VMs ({where}): socket-LB would translate inside "
                "the virt-launcher pods, which the guest's traffic bypasses (cilium/cilium#14563); "
                "remove it, gpucell sets true",
            )

    def _check_sign_in(self) -> Iterator[SpecError]:
        if self.oidc is not None and release(self.versions.k3s.lstrip("v")) < (1, 30):
            yield SpecError(
                ("oidc",),
                f"needs Kubernetes 1.30 or later (structured authentication configuration); "
                f"versions.k3s is {self.versions.k3s}",
            )
        yield from check_tenant_groups(self.oidc, self.tenants)

    def _check_traffic(self) -> Iterator[SpecError]:
        yield from check_traffic(self)
        yield from check_announced_vms(self)

    def _check_llm_scaling(self) -> Iterator[SpecError]:
        """Endpoints scaled on a vLLM metric read it from the cell's Prometheus: the metrics stack must be on."""
        if self.metrics.enabled:
            return
        for tenant_name, tenant in self.tenants.items():
            for name, endpoint in tenant.model_endpoints.items():
                if endpoint.scale_metric.is_vllm:
                    yield SpecError(
                        ("tenants", tenant_name, "modelEndpoints", name, "scaleMetric"),
                        f"{endpoint.scale_metric.value} is read from the cell's Prometheus, which is "
                        "not installed; set metrics.enabled: true, or scale on cpu or memory",
                    )

    def _check_tenants(self) -> Iterator[SpecError]:
        yield from check_tenants(self)

    def _check_backups(self) -> Iterator[SpecError]:
        """Tenant backups need the cell's ``backups``; ``backups`` needs Longhorn (CSI snapshots), a pool whose
        nodes take pods without tolerations (Velero's data movers carry none), and plugins of its Velero line."""
        backups = self.backups
        if backups is None:
            for name, tenant in self.tenants.items():
                if tenant.backup is not None:
                    yield SpecError(
                        ("tenants", name, "backup"),
                        "needs the cell's backups (the bucket and its secrets); add a backups section, or remove it",
                    )
            return
        if self.storage.backend is not StorageBackend.LONGHORN:
            yield SpecError(
                ("backups",),
                f"needs storage.backend longhorn: volumes are backed up through CSI snapshots, which "
                f"{self.storage.backend.value} cannot take",
            )
            return
        versions = self.versions
        yield from check_backup_plugins(
            versions.velero,
            versions.velero_plugin_for_aws,
            versions.kubevirt_velero_plugin,
            disable_checksum=backups.storage.disable_checksum,
        )
        if backups.storage.credentials_config_key == backups.repository_password_config_key:
            yield SpecError(
                ("backups", "repositoryPasswordConfigKey"),
                f"{shown(backups.repository_password_config_key)} is already backups.storage.credentialsConfigKey; "
                "the repository password is a secret of its own",
            )
        if not any(
            not p.taints and (p.role is not NodeRole.SERVER or p.allow_workloads) for p in self.node_pools.values()
        ):
            yield SpecError(
                ("backups",),
                "needs a node pool without taints: Velero's data mover pods carry no tolerations and would never "
                "be scheduled; leave one cpu or gpu pool untainted",
            )
        yield from self._snapshotted_volumes()

    def _snapshotted_volumes(self) -> Iterator[SpecError]:
        """Every volume of a tenant with ``backup`` is on a class Velero can snapshot: the cell's Longhorn. A class
        the cell does not have at all is the storage rule's line, not this one."""
        for name, tenant in self.tenants.items():
            if tenant.backup is None:
                continue
            volumes: list[tuple[tuple[str | int, ...], str | None]] = [
                (("virtualMachines", vm_name, *(("rootDisk",) if i == 0 else ("dataDisks", i - 1))), disk.storage_class)
                for vm_name, vm in tenant.virtual_machines.items()
                for i, disk in enumerate(vm.disks)
            ]
            volumes += [(("notebooks", nb), book.storage_class) for nb, book in tenant.notebooks.items()]
            for where, storage_class in volumes:
                if storage_class in self.storage.other_classes:
                    yield SpecError(
                        ("tenants", name, *where, "storageClass"),
                        f"{shown(storage_class)} cannot be snapshotted by the cell's backups (only longhorn "
                        f"volumes are); the tenant has a backup: move the volume to longhorn, or back it up "
                        "outside gpucell",
                    )

    def _check_priority_classes(self) -> Iterator[SpecError]:
        """Class names are the cell's own, and every workload names a class open to its tenant. A class may name
        tenants the region does not have (regions share their classes, not their tenants)."""
        for name in self.priority_classes:
            problem = check_class_name(name)
            if problem is not None:
                yield SpecError(("priorityClasses", name), problem)
        for tenant_name, tenant in self.tenants.items():
            workloads: list[tuple[str, str, GpuVirtualMachineSpec | NotebookSpec | ModelEndpointSpec]] = [
                *(("virtualMachines", n, w) for n, w in tenant.virtual_machines.items()),
                *(("notebooks", n, w) for n, w in tenant.notebooks.items()),
                *(("modelEndpoints", n, w) for n, w in tenant.model_endpoints.items()),
            ]
            for kind, name, workload in workloads:
                wanted = workload.priority_class_name
                problem = None if wanted is None else priority_class_problem(self.priority_classes, tenant_name, wanted)
                if problem is not None:
                    yield SpecError(("tenants", tenant_name, kind, name, "priorityClassName"), problem)


_CELL_RULES = (
    Rule("servers", ("node_pools", "etcd"), CellSpec._check_server_count),
    Rule("hosts", ("node_pools", "network"), CellSpec._check_hosts),
    Rule("apiEndpoint", ("network", "node_pools"), CellSpec._check_api_endpoint, after=("servers",)),
    Rule("gpuOperator", ("node_pools", "gpu_operator"), CellSpec._check_gpu_operator),
    Rule("hardware", ("node_pools", "gpu_operator", "storage"), CellSpec._check_hardware, after=("gpuOperator",)),
    Rule("dra", ("node_pools", "versions", "dra_driver", "gpu_operator"), CellSpec._check_dra, after=("hardware",)),
    Rule("kserve", ("kserve", "versions"), CellSpec._check_kserve_mode),
    Rule("storage", ("storage", "node_pools"), CellSpec._check_storage_replicas),
    Rule("k3s", ("k3s", "versions"), CellSpec._check_k3s),
    Rule("cilium", ("cilium", "node_pools", "tenants"), CellSpec._check_cilium),
    Rule("llmScaling", ("metrics", "tenants"), CellSpec._check_llm_scaling),
    Rule("signIn", ("oidc", "tenants", "versions"), CellSpec._check_sign_in),
    Rule(
        "traffic",
        ("load_balancer", "gateway", "network", "node_pools", "tenants"),
        CellSpec._check_traffic,
        after=("hosts", "apiEndpoint"),
    ),
    Rule("backups", ("backups", "storage", "versions", "tenants", "node_pools"), CellSpec._check_backups),
    Rule("priorityClasses", ("priority_classes", "tenants"), CellSpec._check_priority_classes),
    Rule(
        "tenants",
        tuple(CellSpec.model_fields),
        CellSpec._check_tenants,
        after=("servers", "hosts", "apiEndpoint", "gpuOperator", "hardware", "dra", "signIn"),
    ),
)
"""CellSpec's cross-field rules, in order (see :mod:`gpucell.spec._rules`). Tenant admission reads the whole cell
and runs only once the pools, hosts and API endpoint it relies on are sound."""


class StackSpec(SpecModel):
    """A stack's config: ``gpucell:regions`` (region name -> cell; each region becomes one independent cell) and
    ``gpucell:gpuModels`` (GPU models of its own, which every region may name)."""

    regions: dict[str, CellSpec] = Field(min_length=1)
    """Region name (DNS-1123 label, used in every resource name of the cell) -> cell spec."""
    gpu_models: dict[str, GpuModelSpec] = {}
    """GPU models besides the built-in ones, for every region (:mod:`gpucell.spec.gpu_models`)."""

    _gpu_catalog: Mapping[str, GpuModel] = PrivateAttr(default_factory=catalog_in_force)

    _region_names = field_validator("regions")(check_names)
    _model_names = field_validator("gpu_models")(check_gpu_models)

    @model_validator(mode="wrap")
    @classmethod
    def _across_regions(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> StackSpec:
        # The regions (and the stack itself) are validated against the built-ins plus the stack's own models.
        with stack_catalog(data):
            return validate_with_rules(cls, data, handler, _STACK_RULES)

    @property
    def gpu_catalog(self) -> Mapping[str, GpuModel]:
        """The built-in GPU models plus ``gpuModels``: catalog key -> :class:`GpuModel`."""
        return self._gpu_catalog

    def _check_machines(self) -> Iterator[SpecError]:
        """Pulumi reaches every host from one place: the same address and SSH port in two regions is one machine,
        and two cells would install k3s on it over each other."""
        seen: dict[tuple[IPv4Address, int], str] = {}
        for region, cell in self.regions.items():
            for pool_name, index, host in cell._all_hosts():
                machine = (host.address, cell.ssh_for(pool_name).port)
                first = seen.setdefault(machine, f"regions.{region}.nodePools.{pool_name}.hosts[{index}]")
                if not first.startswith(f"regions.{region}."):
                    yield SpecError(
                        ("regions", region, "nodePools", pool_name, "hosts", index, "address"),
                        f"{shown(str(host.address))} (SSH port {machine[1]}) is already a host of {first}; one "
                        "machine can be a node of one cell only",
                    )

    def _check_api_endpoints(self) -> Iterator[SpecError]:
        """A region's ``network.apiEndpoint`` is never a node of another region: every node of the region would
        join the other region's cluster (k3s ``server:``), one cell's agents running the other's workloads."""
        nodes = {
            str(host.address): f"regions.{region}.nodePools.{pool}.hosts[{index}]"
            for region, cell in self.regions.items()
            for pool, index, host in cell._all_hosts()
        }
        for region, cell in self.regions.items():
            endpoint = cell.network.api_endpoint
            owner = nodes.get(endpoint) if endpoint is not None else None
            if owner is not None and not owner.startswith(f"regions.{region}."):
                yield SpecError(
                    ("regions", region, "network", "apiEndpoint"),
                    f"{shown(endpoint)} is the address of {owner}, a node of another region; every node "
                    f"of {region} would join that region's cluster; give {region}'s own API VIP or name",
                )

    def cell_secrets(self) -> dict[str, str]:
        """Config key -> the cell field that names it, for every secret a cell owns: each region's SSH private key
        and etcd S3 credentials (the k3s token and the notebook tokens are generated, never config; OIDC takes no
        secret). A tenant's field may name none of them (docs/security.md, "Who owns a secret")."""
        owned: dict[str, str] = {}
        for region, cell in self.regions.items():
            owned.setdefault(cell.ssh.private_key_config_key, f"regions.{region}.ssh.privateKeyConfigKey")
            s3 = cell.etcd.snapshots.s3
            if s3 is not None:
                owned.setdefault(s3.credentials_config_key, f"regions.{region}.etcd.snapshots.s3.credentialsConfigKey")
            remote = cell.metrics.remote_write if cell.metrics.enabled else None
            if remote is not None and remote.credentials_config_key is not None:
                owned.setdefault(
                    remote.credentials_config_key, f"regions.{region}.metrics.remoteWrite.credentialsConfigKey"
                )
            if cell.backups is not None:
                for key, field in (
                    (cell.backups.storage.credentials_config_key, "backups.storage.credentialsConfigKey"),
                    (cell.backups.repository_password_config_key, "backups.repositoryPasswordConfigKey"),
                ):
                    if key is not None:
                        owned.setdefault(key, f"regions.{region}.{field}")
        return owned

    def tenant_secrets(self) -> Iterator[tuple[str, str, str, tuple[str | int, ...], str]]:
        """``(key, region, tenant, key path, what it holds)`` of every secret config key a tenant's field names: its
        endpoints' storage credentials and the values of their ``env`` entries with ``secretConfigKey``, in config
        order (docs/security.md, "Who owns a secret")."""
        for region, cell in self.regions.items():
            for tenant_name, tenant in cell.tenants.items():
                base: tuple[str | int, ...] = ("regions", region, "tenants", tenant_name)
                for name, endpoint in tenant.model_endpoints.items():
                    if endpoint.credentials_config_key is not None:
                        where = (*base, "modelEndpoints", name, "credentialsConfigKey")
                        yield (
                            endpoint.credentials_config_key,
                            region,
                            tenant_name,
                            where,
                            "this endpoint's storage credentials",
                        )
                    for index, var in enumerate(endpoint.env):
                        if var.secret_config_key is not None:
                            where = (*base, "modelEndpoints", name, "env", index, "secretConfigKey")
                            yield var.secret_config_key, region, tenant_name, where, f"the value of {var.name}"

    def _check_credentials(self) -> Iterator[SpecError]:
        """Every secret has one owner: the cell (:meth:`cell_secrets`) or one tenant. A credentials key's value
        becomes a Secret in its tenant's namespace, readable by that tenant: two tenants naming one key would read
        each other's credentials, and a cell secret would hand a tenant the nodes or the etcd backups."""
        ssh_keys = {cell.ssh.private_key_config_key: region for region, cell in self.regions.items()}
        cell_owned = self.cell_secrets()
        owner: dict[str, tuple[str, str]] = {}
        for key, region, tenant_name, where, holds in self.tenant_secrets():
            first = owner.setdefault(key, (tenant_name, f"regions.{region}.tenants.{tenant_name}"))
            if key in ssh_keys:
                yield SpecError(
                    where,
                    f"{shown(key)} is the SSH private key of region {ssh_keys[key]}; name a secret that holds only "
                    f"{holds}",
                )
            elif key in cell_owned:
                yield SpecError(
                    where,
                    f"{shown(key)} is a secret of the cell ({cell_owned[key]} names it), which the tenant's namespace "
                    f"would then hold; name a secret of tenant {tenant_name} that holds only {holds}",
                )
            elif first[0] != tenant_name:
                yield SpecError(
                    where,
                    f"{shown(key)} is already the credentials key of tenant {first[0]} ({first[1]}); each tenant "
                    "needs its own, its Secret is readable in the tenant's namespace",
                )

    def _check_backup_buckets(self) -> Iterator[SpecError]:
        """Two regions never write backups to the same place: each region's Velero syncs every backup it finds
        under its prefix into its own cell and garbage-collects the expired ones, the other region's included."""
        seen: dict[tuple[str | None, str, str | None], str] = {}
        for region, cell in self.regions.items():
            if cell.backups is None:
                continue
            storage = cell.backups.storage
            place = (storage.endpoint, storage.bucket, (storage.prefix or "").strip("/") or None)
            first = seen.setdefault(place, region)
            if first != region:
                yield SpecError(
                    ("regions", region, "backups", "storage", "prefix"),
                    f"{shown(storage.prefix or '')} in bucket {storage.bucket} is where region {first} keeps its "
                    "backups: each region's Velero would import and expire the other's; give each region its own "
                    "prefix (e.g. the region's name)",
                )


_STACK_RULES = (
    Rule("machines", ("regions",), StackSpec._check_machines, partial_maps=True),
    Rule("credentials", ("regions",), StackSpec._check_credentials, partial_maps=True),
    Rule("apiEndpoints", ("regions",), StackSpec._check_api_endpoints, partial_maps=True),
    Rule("backupBuckets", ("regions",), StackSpec._check_backup_buckets, partial_maps=True),
)
"""StackSpec's rules across regions; they run on the regions that validated."""
