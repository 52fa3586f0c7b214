"""The spec of one regional cell, and of a stack (its regions), with the rules that span several sections.

A cell's parts are what the components take (docs/decisions/0019-standalone-components.md):
:meth:`gpucell.spec.nodes.K3sClusterSpec.from_cell` (the nodes, for :class:`gpucell.k3s.cluster.K3sCluster`),
:meth:`gpucell.admission.tenants.ClusterFacts.from_cell` (what tenants are admitted against and rendered from) and each
platform component's own section (``storage``, ``gpuOperator``...: see each component's ``*Args.from_cell``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from ipaddress import IPv4Address, IPv4Network
from typing import Any, Self
from urllib.parse import urlsplit

from pydantic import Field, PrivateAttr, ValidatorFunctionWrapHandler, field_validator, model_validator

from gpucell.admission.tenants import ClusterFacts, check_announced_vms, check_tenants
from gpucell.admission.vm_rules import VmPlatform, check_vm_platform
from gpucell.catalog.gpu_catalog import GpuModel
from gpucell.errors import SpecError, join_path, shown
from gpucell.spec._base import SpecModel
from gpucell.spec._rules import Rule, validate_with_rules
from gpucell.spec.backups import BackupsSpec, S3Place, check_backup_plugins
from gpucell.spec.dra import check_dra
from gpucell.spec.etcd import EtcdSpec
from gpucell.spec.gpu_models import GpuModelSpec, catalog_in_force, check_gpu_models, stack_catalog
from gpucell.spec.identity import OidcSpec, check_tenant_groups
from gpucell.spec.images import ImageCatalogSpec, check_catalog_namespaces
from gpucell.spec.k3s import K3sSpec
from gpucell.spec.kubevirt import KubeVirtSpec
from gpucell.spec.lifecycle import RemovalPolicy
from gpucell.spec.metrics import MetricsSpec
from gpucell.spec.network import Network, Ssh, as_address, check_names
from gpucell.spec.nodes import NodeViews
from gpucell.spec.platform import (
    CdiSpec,
    ChartSpec,
    CiliumSpec,
    DraDriverSpec,
    GpuOperatorSpec,
    ImageSpec,
    KServeSpec,
    MigStrategy,
    StorageBackend,
    StorageSpec,
    check_kserve_mode,
)
from gpucell.spec.pools import GpuMode, NodePool, NodeRole
from gpucell.spec.scheduling import PriorityClassSpec, check_priority_classes
from gpucell.spec.tenancy import TenantSpec, check_image_namespaces, check_tenant_names
from gpucell.spec.traffic import (
    AddressBlock,
    GatewaySpec,
    LoadBalancerSpec,
    check_traffic,
    gateway_domain_problem,
    pool_blocks,
)
from gpucell.spec.versions import DeploymentMode, Versions, kserve_deployment_modes, unpinned

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
"""The platform sections (``ChartSpec``... ``StorageSpec``) live in :mod:`gpucell.spec.platform` and are re-exported
here, where they were defined before."""


class CellSpec(NodeViews, SpecModel):
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
    kubevirt: KubeVirtSpec = KubeVirtSpec()
    """KubeVirt settings: cluster-wide instancetypes and preferences, the common ones, where persistent EFI and TPM
    state lives."""
    image_catalogs: dict[str, ImageCatalogSpec] = {}
    """Namespace (a DNS-1123 label, neither a tenant's nor a system one) -> a catalog of golden images, imported and
    kept current by CDI, that the catalog's tenants clone VM disks from (``source.image: <catalog>/<image>``).
    Defaults to none."""
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

    _tenant_names = field_validator("tenants")(check_tenant_names)
    _image_namespaces = field_validator("image_namespaces")(check_image_namespaces)
    _catalog_namespaces = field_validator("image_catalogs")(check_catalog_namespaces)

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

    @property
    def vm_platform(self) -> VmPlatform:
        """What the VM platform rules read (:mod:`gpucell.admission.vm_rules`): instancetypes, catalogs, classes,
        tenants."""
        return VmPlatform.of(self)

    @property
    def deployment_mode(self) -> DeploymentMode:
        """The KServe default deployment mode in force."""
        return self.kserve.deployment_mode or kserve_deployment_modes(self.versions.kserve)[0]

    def with_tenant(self, name: str, spec: TenantSpec) -> Self:
        """This cell with tenant ``name`` of ``spec`` (itself when it already holds that tenant as given), validated
        whole: the tenant is admitted as a tenant in stack config is. Raises :class:`~gpucell.errors.ConfigError`
        with ``tenants.<name>...`` key paths."""
        if self.tenants.get(name) == spec:
            return self
        fields = {key: getattr(self, key) for key in type(self).model_fields}
        return type(self).model_validate({**fields, "tenants": {**self.tenants, name: spec}})

    # -- rules (each yields every problem it finds; see _CELL_RULES) -------------------------------------------
    def _check_dra(self) -> Iterator[SpecError]:
        """The first ``dra`` pool the pinned versions cannot serve (:func:`gpucell.spec.dra.check_dra`)."""
        try:
            check_dra(self.node_pools, self.versions, self.dra_driver, self.gpu_operator)
        except SpecError as problem:
            yield problem

    def _check_kserve_mode(self) -> Iterator[SpecError]:
        yield from check_kserve_mode(self.kserve, self.versions.kserve)

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
        yield from self._check_oidc_version()
        yield from check_tenant_groups(self.oidc, self.tenants)

    def _check_traffic(self) -> Iterator[SpecError]:
        yield from check_traffic(self)
        yield from check_announced_vms(ClusterFacts.from_cell(self))

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

    def _check_vm_platform(self) -> Iterator[SpecError]:
        yield from check_vm_platform(self.vm_platform)

    def _check_tenants(self) -> Iterator[SpecError]:
        yield from check_tenants(ClusterFacts.from_cell(self), (self.ssh.private_key_config_key,))

    def _check_backups(self) -> Iterator[SpecError]:
        """Tenant backups need the cell's ``backups`` and no ``tenantClusters`` in the tenant; ``backups`` needs
        Longhorn (CSI snapshots), a pool whose nodes take pods without tolerations (Velero's data movers carry none),
        and plugins of its Velero line."""
        for name, tenant in self.tenants.items():
            if tenant.backup is not None and tenant.tenant_clusters:
                yield SpecError(
                    ("tenants", name, "backup"),
                    f"the tenant has tenantClusters ({', '.join(sorted(tenant.tenant_clusters))}): a namespace backup "
                    "would hold their Cluster API objects, machine VMs and the clusters' CA and etcd Secrets (object "
                    "manifests are not encrypted in the bucket), and gpucell does not restore a tenant cluster that "
                    "way; back up inside the tenant cluster, or keep backups to a tenant without tenant clusters",
                )
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
        yield from check_priority_classes(self.priority_classes, self.tenants)

    def own_names(self) -> list[tuple[str, str]]:
        """``(DNS name, key path below the region)`` of every name the cell's API and sign-in answer to: a DNS
        ``network.apiEndpoint``, the DNS names of ``network.tlsSans`` and the host of ``oidc.issuerUrl``."""
        network = self.network
        names = [(network.api_endpoint, "network.apiEndpoint")] if network.api_endpoint is not None else []
        names += [(san, f"network.tlsSans[{index}]") for index, san in enumerate(network.tls_sans)]
        if self.oidc is not None:
            names.append((urlsplit(self.oidc.issuer_url).hostname or "", "oidc.issuerUrl"))
        return [(name, where) for name, where in names if name and as_address(name) is None]

    def _check_gateway_domain(self) -> Iterator[SpecError]:
        """``gateway.domain`` holds neither the API's names nor the OIDC issuer's host
        (:func:`gpucell.spec.traffic.gateway_domain_problem`)."""
        problem = None if self.gateway is None else gateway_domain_problem(self.gateway.domain, self.own_names())
        if problem is not None:
            yield SpecError(("gateway", "domain"), problem)

    def store_hosts(self) -> list[tuple[tuple[str | int, ...], str, str, str]]:
        """``(key path below the region, value, host, what is sent there)`` of each store the cell itself sends data
        to, outside the cell: the etcd snapshots' S3 endpoint, the backups' S3 endpoint, the remote-write receiver."""
        stores: list[tuple[tuple[str | int, ...], str, str, str]] = []
        s3 = self.etcd.snapshots.s3
        if s3 is not None:
            host = s3.endpoint.rpartition(":")[0] if s3.endpoint.count(":") == 1 else s3.endpoint
            stores.append((("etcd", "snapshots", "s3", "endpoint"), s3.endpoint, host, "the etcd snapshots"))
        if self.backups is not None and self.backups.storage.endpoint is not None:
            url = self.backups.storage.endpoint
            stores.append((("backups", "storage", "endpoint"), url, urlsplit(url).hostname or "", "the backups"))
        remote = self.metrics.remote_write if self.metrics.enabled else None
        if remote is not None:
            url = remote.url
            stores.append((("metrics", "remoteWrite", "url"), url, urlsplit(url).hostname or "", "the samples"))
        return stores

    def _check_store_hosts(self) -> Iterator[SpecError]:
        """No store the cell sends data to is one of its own nodes (the data would stay in the failure domain it is
        kept against) or an address of its loadBalancer pools (a tenant's Service could take it and receive it)."""
        nodes = {host.address: f"node {host.name} (nodePools.{p}.hosts[{i}])" for p, i, host in self._all_hosts()}
        blocks = pool_blocks(self.load_balancer)
        for where, value, host, what in self.store_hosts():
            address = as_address(host)
            if address is None:
                continue
            if address in nodes:
                yield SpecError(
                    where,
                    f"{shown(value)} is at {address}, the address of {nodes[address]}: {what} would stay on the "
                    "cell they are sent away from (and be lost with it); give a store outside the cell",
                )
                continue
            pool = next((path for path, block in blocks if address in block), None)
            if pool is not None:
                yield SpecError(
                    where,
                    f"{shown(value)} is at {address}, inside {join_path(pool)}, whose addresses the cell hands to "
                    f"LoadBalancer Services: a tenant's Service could take it and receive {what}; give a store "
                    "outside the cell",
                )

    def _check_buckets(self) -> Iterator[SpecError]:
        """The backups' bucket and prefix lie apart from the etcd snapshots' (:meth:`S3Place.overlaps`)."""
        s3 = self.etcd.snapshots.s3
        if self.backups is None or s3 is None:
            return
        backups, snapshots = S3Place.of_backups(self.backups.storage), S3Place.of_etcd(s3)
        if backups.overlaps(snapshots):
            yield SpecError(("backups", "storage", "prefix"), _bucket_clash(backups, snapshots, "etcd.snapshots.s3"))


def _addresses_used(
    cell: CellSpec, blocks: list[tuple[tuple[str | int, ...], AddressBlock]]
) -> Iterator[tuple[str, str, AddressBlock | IPv4Network]]:
    """``(key path below the region, value, addresses)`` of what a cell's addresses are: its networks, then its
    loadBalancer blocks."""
    network = cell.network
    networks = (("nodeCidr", network.node_cidr), ("podCidr", network.pod_cidr), ("serviceCidr", network.service_cidr))
    for key, net in networks:
        yield f"network.{key}", str(net), net
    for path, block in blocks:
        yield join_path(path), block.text, block


def _bucket_clash(backups: S3Place, snapshots: S3Place, owner: str) -> str:
    """The line for backups at ``backups`` overlapping the etcd snapshots of ``owner`` at ``snapshots``."""
    return (
        f"{shown(backups.prefix)} in bucket {backups.bucket} ({backups.store}) overlaps {owner} (folder "
        f"{snapshots.shown}): Velero would meet k3s's objects under its prefix (a backup store holds Velero's "
        "directories only), and the snapshots, which hold every Secret of the cell, would lie where the backup "
        "location reads and deletes; give backups a bucket of their own, or a prefix apart from that folder"
    )


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
    Rule("gatewayDomain", ("gateway", "network", "oidc"), CellSpec._check_gateway_domain),
    Rule(
        "storeHosts",
        ("etcd", "backups", "metrics", "node_pools", "load_balancer"),
        CellSpec._check_store_hosts,
        after=("hosts",),
    ),
    Rule("buckets", ("etcd", "backups"), CellSpec._check_buckets),
    Rule(
        "vmPlatform",
        ("kubevirt", "image_catalogs", "tenants", "storage", "versions", "image_namespaces"),
        CellSpec._check_vm_platform,
    ),
    Rule(
        "tenants",
        tuple(CellSpec.model_fields),
        CellSpec._check_tenants,
        after=("servers", "hosts", "apiEndpoint", "gpuOperator", "hardware", "dra", "signIn", "vmPlatform"),
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
    production: bool = False
    """A production stack (docs/decisions/0034): one region, one cell, one failure domain (a stack listing several
    regions is refused), and every component version pinned in each region's ``versions`` (``gpucell pin-versions
    STACK`` writes them), so that a new gpucell release never moves a deployed region. Default ``false`` (a lab:
    several regions allowed, with a warning)."""
    other_cells: dict[str, list[IPv4Network]] = {}
    """Region -> the networks (CIDRs) of a cell of the fleet that another stack deploys: each cell's tenants are
    denied them as they are denied the networks of the stack's other regions (the cluster-wide deny,
    docs/decisions/0031). Written once for the fleet in ``Pulumi.yaml`` (project-level config); an entry naming a
    region of the stack is skipped. Default none."""

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

    def _check_production(self) -> Iterator[SpecError]:
        """A production stack holds one region, each of whose component versions is pinned in the stack file."""
        if not self.production:
            return
        if len(self.regions) > 1:
            yield SpecError(
                ("regions",),
                f"holds {', '.join(self.regions)}, but production: true stacks hold one region: one state, one "
                "run and one failure domain for all of them (a failed host in one stops the others' rollout); give "
                "each region a stack of its own (docs/operations.md, 'One stack per region')",
            )
        for region, cell in self.regions.items():
            loose = unpinned(cell.versions)
            if loose:
                yield SpecError(
                    ("regions", region, "versions"),
                    f"does not pin {', '.join(loose)}; a production: true stack pins every component version, so "
                    "that a new gpucell release never moves a deployed region: run `gpucell pin-versions STACK` to "
                    "write today's defaults into the stack file",
                )

    def _check_other_cells(self) -> Iterator[SpecError]:
        """No network of ``otherCells`` (of a region the stack does not hold) overlaps a node, pod or service CIDR of
        the stack's own regions: the cluster-wide deny would keep that region's tenants from their own cell (its
        load balancers, its API), and ``0.0.0.0/0`` from everything."""
        for region, networks in self.other_cells.items():
            if region in self.regions:
                continue  # skipped (the region's own networks count)
            for index, other in enumerate(networks):
                for name, cell in self.regions.items():
                    net = cell.network
                    own = (("nodeCidr", net.node_cidr), ("podCidr", net.pod_cidr), ("serviceCidr", net.service_cidr))
                    hit = next(((key, cidr) for key, cidr in own if other.overlaps(cidr)), None)
                    if hit is not None:
                        yield SpecError(
                            ("otherCells", region, index),
                            f"{other} overlaps region {name}'s {hit[0]} {hit[1]}: its tenants would be denied their "
                            f"own cell; list only the networks of region {region}'s cell",
                        )
                        break

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
        """Config key -> the cell field that names it, for every secret a cell owns: each region's SSH private key,
        etcd S3 credentials, metrics remote-write credentials, backup bucket credentials, backup repository password
        and golden images' import credentials (the k3s token and the notebook tokens are generated, never config;
        OIDC takes no secret). A tenant's field may name none of them (docs/security.md, "Who owns a secret")."""
        owned: dict[str, str] = {}
        for key, where in self._cell_secret_fields():
            owned.setdefault(key, join_path(where))
        return owned

    def _cell_secret_fields(self) -> Iterator[tuple[str, tuple[str | int, ...]]]:
        """``(key, key path)`` of every cell field naming a secret, each region's SSH private key first."""
        for region, cell in self.regions.items():
            base = ("regions", region)
            yield cell.ssh.private_key_config_key, (*base, "ssh", "privateKeyConfigKey")
            s3 = cell.etcd.snapshots.s3
            if s3 is not None:
                yield s3.credentials_config_key, (*base, "etcd", "snapshots", "s3", "credentialsConfigKey")
            remote = cell.metrics.remote_write if cell.metrics.enabled else None
            if remote is not None and remote.credentials_config_key is not None:
                yield remote.credentials_config_key, (*base, "metrics", "remoteWrite", "credentialsConfigKey")
            for catalog, spec in cell.image_catalogs.items():
                for image, entry in spec.images.items():
                    key = entry.source.credentials_config_key
                    if key is not None:
                        yield key, (*base, "imageCatalogs", catalog, "images", image, "source", "credentialsConfigKey")
            if cell.backups is not None:
                for key, field in (
                    (cell.backups.storage.credentials_config_key, ("storage", "credentialsConfigKey")),
                    (cell.backups.repository_password_config_key, ("repositoryPasswordConfigKey",)),
                ):
                    if key is not None:
                        yield key, (*base, "backups", *field)

    def tenant_secrets(self) -> Iterator[tuple[str, str, str, tuple[str | int, ...], str]]:
        """``(key, region, tenant, key path, what it holds)`` of every secret config key a tenant's field names: its
        endpoints' storage credentials and the values of their ``env`` entries with ``secretConfigKey``, its VMs' user
        data (``cloudInit.userDataConfigKey``) and disk import credentials (``source.credentialsConfigKey``), in config
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
                for name, vm in tenant.virtual_machines.items():
                    key = vm.cloud_init.user_data_config_key if vm.cloud_init else None
                    if key is not None:
                        where = (*base, "virtualMachines", name, "cloudInit", "userDataConfigKey")
                        yield key, region, tenant_name, where, "this VM's user data"
                    for index, disk in enumerate(vm.disks):
                        if disk.source.credentials_config_key is not None:
                            disk_key = ("rootDisk",) if index == 0 else ("dataDisks", index - 1)
                            where = (*base, "virtualMachines", name, *disk_key, "source", "credentialsConfigKey")
                            yield (
                                disk.source.credentials_config_key,
                                region,
                                tenant_name,
                                where,
                                "this disk's import credentials",
                            )

    def _check_credentials(self) -> Iterator[SpecError]:
        """Every secret has one owner: the cell (:meth:`cell_secrets`) or one tenant. A credentials key's value
        becomes a Secret in its tenant's namespace, readable by that tenant: two tenants naming one key would read
        each other's credentials, and a cell secret would hand a tenant the nodes or the etcd backups. A region's SSH
        private key is named by its ``ssh.privateKeyConfigKey`` and no other field."""
        ssh_keys = {cell.ssh.private_key_config_key: region for region, cell in self.regions.items()}
        for key, where in self._cell_secret_fields():
            if key in ssh_keys and where[2:] != ("ssh", "privateKeyConfigKey"):
                # As the backup repository password or a registry's credentials, root on every node would sit in a
                # Secret (and go to the registry); only some fields' format checks would stop it, and only at `up`.
                own = self.regions[str(where[1])].ssh.private_key_config_key == key
                yield SpecError(
                    where,
                    f"{shown(key)} is the SSH private key of region {where[1] if own else ssh_keys[key]}; name a "
                    "secret of its own",
                )
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
        """Two regions never write backups to overlapping places (:meth:`S3Place.overlaps`): each region's Velero
        syncs every backup it finds under its prefix into its own cell and garbage-collects the expired ones, the
        other region's included. Nor does a region's backup prefix overlap another region's etcd snapshots (its own
        are the cell's rule)."""
        storages = {r: c.backups.storage for r, c in self.regions.items() if c.backups is not None}
        backups = {region: S3Place.of_backups(storage) for region, storage in storages.items()}
        snapshots = {r: S3Place.of_etcd(s3) for r, c in self.regions.items() if (s3 := c.etcd.snapshots.s3)}
        for (first, a), (region, b) in itertools.combinations(backups.items(), 2):
            if b.overlaps(a):
                yield SpecError(
                    ("regions", region, "backups", "storage", "prefix"),
                    f"{shown(storages[region].prefix or '')} in bucket {b.bucket} is where region {first} keeps its "
                    "backups: each region's Velero would import and expire the other's; give each region its own "
                    "prefix (e.g. the region's name)",
                )
        for region, place in backups.items():
            for other, etcd in snapshots.items():
                if other != region and place.overlaps(etcd):
                    clash = _bucket_clash(place, etcd, f"regions.{other}.etcd.snapshots.s3")
                    yield SpecError(("regions", region, "backups", "storage", "prefix"), clash)

    def _check_pool_blocks(self) -> Iterator[SpecError]:
        """No loadBalancer address block of a region overlaps another region's networks or blocks (the later region's
        block is the one refused): the other cell would route the addresses to its own nodes, pods or Services, or
        hand them out too."""
        blocks = {region: pool_blocks(cell.load_balancer) for region, cell in self.regions.items()}
        for position, region in enumerate(self.regions):
            used = [
                (f"regions.{other}.{where}", text, addresses)
                for other_position, (other, cell) in enumerate(self.regions.items())
                if other != region
                for where, text, addresses in _addresses_used(cell, blocks[other] if other_position < position else [])
            ]
            for path, block in blocks[region]:
                clash = next(((w, text, a) for w, text, a in used if block.overlaps(a)), None)
                if clash is not None:
                    why = (
                        "both cells would hand out and announce the same addresses"
                        if isinstance(clash[2], AddressBlock)
                        else "that cell would route the addresses to its own nodes, pods or Services"
                    )
                    yield SpecError(
                        ("regions", region, *path),
                        f"{shown(block.text)} overlaps {clash[0]} {clash[1]}: {why}; give each cell's pools "
                        "addresses no other cell uses",
                    )

    def _check_gateway_domains(self) -> Iterator[SpecError]:
        """A region's ``gateway.domain`` holds no other region's API names or OIDC issuer host (its own are the cell's
        rule): the CA or ACME issuer of one cell would sign names another cell answers to."""
        for region, cell in self.regions.items():
            others = [
                (name, f"regions.{other}.{where}")
                for other, theirs in self.regions.items()
                if other != region
                for name, where in theirs.own_names()
            ]
            problem = None if cell.gateway is None else gateway_domain_problem(cell.gateway.domain, others)
            if problem is not None:
                yield SpecError(("regions", region, "gateway", "domain"), problem)


_STACK_RULES = (
    Rule("production", ("production", "regions"), StackSpec._check_production, partial_maps=True),
    Rule("otherCells", ("other_cells", "regions"), StackSpec._check_other_cells, partial_maps=True),
    Rule("machines", ("regions",), StackSpec._check_machines, partial_maps=True),
    Rule("credentials", ("regions",), StackSpec._check_credentials, partial_maps=True),
    Rule("apiEndpoints", ("regions",), StackSpec._check_api_endpoints, partial_maps=True),
    Rule("backupBuckets", ("regions",), StackSpec._check_backup_buckets, partial_maps=True),
    Rule("poolBlocks", ("regions",), StackSpec._check_pool_blocks, partial_maps=True),
    Rule("gatewayDomains", ("regions",), StackSpec._check_gateway_domains, partial_maps=True),
)
"""StackSpec's rules across regions; they run on the regions that validated."""
