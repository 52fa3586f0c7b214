"""Plan-time admission: every declared workload must fit the region's GPU inventory and its tenant's quota.

A workload that would sit Pending forever (no pool of its mode and model, more GPUs than one node holds, a MIG
profile no layout offers) or be refused by a ResourceQuota is a config error here, before anything is deployed.

``dra`` pools are shared by containers and VMs: a GPU serves either, so the GPUs all tenants' declared DRA
workloads ask for (endpoints at ``maxReplicas``) may not exceed the GPUs of the pools they can land on
(:func:`check_dra_pools`), and tenants' ``quota.deviceClasses`` are reserved against the same GPUs.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from ipaddress import IPv4Network
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import PrivateAttr, ValidatorFunctionWrapHandler, field_validator, model_validator

from gpucell.admission.dra import GPU_CLASS, VFIO_CLASS
from gpucell.admission.fabric import check_fabric_names, nic_quota, rail_resource
from gpucell.admission.inventory import GpuOffer, capacity, dra_offers, gpu_offers
from gpucell.admission.isolation import guest_vm, is_isolated
from gpucell.admission.placement import Placement, PlacementError, place_container, place_vm
from gpucell.admission.tenant_cluster_admission import (
    check_cluster_api_versions,
    check_tenant_clusters,
    machine_placements,
    machines,
    usage,
)
from gpucell.admission.vm_rules import VmPlatform, check_vm_platform
from gpucell.admission.vm_shape import ShapeError, VmShape, resolve_vm
from gpucell.catalog.download_hosts import disk_source_hosts, refused_host, storage_uri_hosts
from gpucell.catalog.gpu_catalog import GpuModel
from gpucell.catalog.kserve_runtimes import (
    RUNTIMES,
    ClusterServingRuntime,
    GpuImage,
    RuntimeRefusedError,
    SupportedFormat,
    resolve_runtime,
    runtimes_of,
)
from gpucell.errors import SpecError, shown
from gpucell.spec._base import SpecModel
from gpucell.spec._rules import Rule, validate_with_rules
from gpucell.spec.gpu_models import catalog_in_force
from gpucell.spec.identity import OidcSpec, check_tenant_groups
from gpucell.spec.images import ImageCatalogSpec, check_catalog_namespaces
from gpucell.spec.isolation import ISOLATED_RUNTIME
from gpucell.spec.kubevirt import KubeVirtSpec
from gpucell.spec.network import Network, check_names
from gpucell.spec.nodes import check_hosts
from gpucell.spec.platform import (
    KServeSpec,
    MigStrategy,
    StorageSpec,
    check_kserve_mode,
    check_mig_strategy,
    effective_mig_strategy,
)
from gpucell.spec.pools import NodePool
from gpucell.spec.scheduling import PriorityClassSpec, check_priority_classes
from gpucell.spec.tenancy import EgressClass, TenantSpec, check_image_namespaces, check_tenant_names, namespace_of
from gpucell.spec.tenant_clusters import ApiServerType
from gpucell.spec.traffic import GatewaySpec, LoadBalancerSpec, check_traffic, tenant_pools, vm_pool
from gpucell.spec.versions import DeploymentMode, Versions, kserve_deployment_modes
from gpucell.spec.workloads import ModelEndpointSpec, NotebookSpec, ServiceType, multi_gpu_shm_gib

if TYPE_CHECKING:
    from gpucell.spec.cell import CellSpec
    from gpucell.spec.serving import ServingRuntimeSpec
    from gpucell.spec.workloads import GpuVirtualMachineSpec

__all__ = [
    "ClusterFacts",
    "DraDemand",
    "check_announced_vms",
    "check_dra_pools",
    "check_tenants",
    "isolated_vms",
    "placements",
    "shaped_vm",
    "tenant_runtimes",
]


class ClusterFacts(SpecModel):
    """The facts of a cluster that its tenants and their workloads are admitted against and rendered from: its GPU
    inventory, address plan, sign-in, storage classes, golden-image namespaces, KServe release, LoadBalancer pools,
    and the tenants it already holds. Nothing here is read from the cluster: these are the facts a plan needs and
    the Kubernetes API cannot tell it (docs/decisions/0019-standalone-components.md).

    Each field is the cell spec's field of the same name and key path, so every admission message reads the same
    for a cell and for a cluster gpucell did not build. :meth:`from_cell` takes them from a validated
    :class:`~gpucell.spec.cell.CellSpec`; built on its own (``ClusterFacts.model_validate({...})``, camelCase or
    snake_case keys) the tenants it lists are admitted as a cell's are, and a mistake raises
    :class:`~gpucell.errors.ConfigError`, one ``key.path: message`` line per problem.

    On a cluster gpucell did not build, ``nodePools`` describe its GPU (and CPU) nodes: each pool's ``hosts`` name
    its Nodes as the API shows them (``ip-10-0-1-5.ec2.internal`` on EKS; each Node once, in one pool: the
    inventory counts them), and those Nodes carry the labels gpucell's placement selects (``gpucell.io/pool:
    <pool>``, and the GPU Operator's ``nvidia.com/gpu.workload.config: <gpuMode>``; more for MIG, vGPU and ``dra``
    pools, docs/examples/existing-cluster/README.md) and the pool's ``taints``; gpucell sets none of them there.
    """

    versions: Versions = Versions()
    """Pinned releases; ``versions.kserve`` decides the serving runtimes and formats an endpoint may name. Defaults
    to gpucell's pins (those :class:`gpucell.components.kserve.KServe` installs by default)."""
    oidc: OidcSpec | None = None
    """The OpenID Connect issuer the API server trusts: tenant groups become ``<groupsPrefix><group>`` in RoleBindings.
    None: group names are used as given."""
    network: Network
    """The address plan: ``nodeCidr`` (every host's address is in it), ``podCidr`` and ``serviceCidr`` (what
    ``internet`` egress leaves out and ``egressCidrs`` may not overlap), ``apiEndpoint`` and ``apiPort`` (what
    ``cluster`` egress reaches). The pod and service CIDRs and ``clusterDns`` default to k3s's; give a cluster's own.
    ``cluster`` egress reaches the API servers (Cilium's ``kube-apiserver`` entity) on the port they listen on:
    ``apiPort`` when no ``apiEndpoint`` is given, else 6443 (kubeadm's, RKE2's and k3s's) behind the endpoint's
    ``apiPort``. EKS, AKS and GKE API servers listen on 443: there give ``apiPort: 443`` and no ``apiEndpoint``."""
    node_pools: dict[str, NodePool] = {}
    """Pool name -> pool: the GPU inventory workloads are placed on and quotas are checked against, and each pool's
    taints (tolerated by the workloads placed there). Defaults to none (no GPU workload fits)."""
    mig_strategy: MigStrategy | None = None
    """The GPU Operator's ``mig.strategy`` (what MIG nodes advertise): ``single`` or ``mixed``; defaults to ``mixed``
    when a pool uses MIG, else ``single`` (as :class:`gpucell.components.gpu_operator.GpuOperator` installs it)."""
    storage: StorageSpec = StorageSpec()
    """The StorageClasses a VM disk or a notebook may name: the backend's (``local-path`` or ``longhorn``) and
    ``otherClasses``; only these keys are read."""
    kserve: KServeSpec = KServeSpec()
    """KServe's default ``deploymentMode`` (``Standard``); only this key is read."""
    tenants: dict[str, TenantSpec] = {}
    """The tenants the cluster already holds (name -> spec): a new tenant's GPU quota and DRA demands are checked
    together with theirs."""
    allow_gpu_overcommit: bool = False
    """Let the tenants' GPU quotas add up to more than the pools hold. Defaults to false."""
    image_namespaces: list[str] = []
    """Namespaces holding golden VM images every tenant may clone. Defaults to none."""
    load_balancer: LoadBalancerSpec | None = None
    """The cluster's LoadBalancer pools per tenant (Cilium LB IPAM), which VMs' ``LoadBalancer`` Services draw from;
    none: such Services are refused."""
    gateway: GatewaySpec | None = None
    """The Gateway exposed model endpoints are served from; none: ``expose`` is refused."""
    kubevirt: KubeVirtSpec = KubeVirtSpec()
    """The cluster-wide instancetypes and preferences VMs may name (``VirtualMachineClusterInstancetype``/``...
    Preference``), whether KubeVirt's common ones are deployed (``commonInstancetypes``) and ``vmStateStorageClass``.
    Defaults to none of gpucell's own, the common ones on."""
    image_catalogs: dict[str, ImageCatalogSpec] = {}
    """Namespace -> a catalog of golden images the catalog's tenants clone VM disks from (``source.image:
    <catalog>/<image>``): a tenant a catalog lists gets the network policy CDI's host-assisted clones need.
    Defaults to none."""
    priority_classes: dict[str, PriorityClassSpec] = {}
    """The PriorityClasses workloads may name (``priorityClassName``) and the tenants each is open to; every
    tenant's namespace refuses pods naming another (its ``tenant-priority-classes`` quota). Defaults to none."""

    _gpu_catalog: Mapping[str, GpuModel] = PrivateAttr(default_factory=catalog_in_force)
    """The GPU catalog the facts were validated against: the built-ins, or its stack's ``gpuModels`` with them."""

    _pool_names = field_validator("node_pools")(check_names)
    _tenant_names = field_validator("tenants")(check_tenant_names)
    _image_namespaces = field_validator("image_namespaces")(check_image_namespaces)
    _catalog_namespaces = field_validator("image_catalogs")(check_catalog_namespaces)

    @model_validator(mode="wrap")
    @classmethod
    def _cross_checks(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> ClusterFacts:
        return validate_with_rules(cls, data, handler, _FACTS_RULES)

    @classmethod
    def from_cell(cls, cell: CellSpec) -> ClusterFacts:
        """The facts of an already validated cell spec (its sections as they are, not validated again)."""
        shared = {name: getattr(cell, name) for name in cls.model_fields if name != "mig_strategy"}
        facts = cls.model_construct(**shared, mig_strategy=cell.gpu_operator.mig_strategy)
        facts._gpu_catalog = cell.gpu_catalog
        return facts

    @property
    def gpu_catalog(self) -> Mapping[str, GpuModel]:
        """The GPU models its pools and workloads may name: catalog key ->
        :class:`~gpucell.catalog.gpu_catalog.GpuModel` (the cell's, for :meth:`from_cell`; else the catalog in force
        when the facts were validated:
        :func:`gpucell.spec.gpu_models.catalog_in_force`)."""
        return self._gpu_catalog

    @property
    def vm_platform(self) -> VmPlatform:
        """What the VM platform rules read (:mod:`gpucell.admission.vm_rules`): instancetypes, catalogs, classes,
        tenants."""
        return VmPlatform.of(self)

    @property
    def effective_mig_strategy(self) -> MigStrategy:
        """:attr:`mig_strategy`, or ``mixed`` when any pool uses MIG and ``single`` otherwise."""
        return effective_mig_strategy(self.mig_strategy, self.node_pools)

    @property
    def deployment_mode(self) -> DeploymentMode:
        """The KServe default deployment mode in force."""
        return self.kserve.deployment_mode or kserve_deployment_modes(self.versions.kserve)[0]

    def _check_hosts(self) -> Iterator[SpecError]:
        yield from check_hosts(self.network, self.node_pools)

    def _check_mig_strategy(self) -> Iterator[SpecError]:
        yield from check_mig_strategy(self.mig_strategy, self.node_pools, "migStrategy")

    def _check_kserve_mode(self) -> Iterator[SpecError]:
        yield from check_kserve_mode(self.kserve, self.versions.kserve)

    def _check_groups(self) -> Iterator[SpecError]:
        yield from check_tenant_groups(self.oidc, self.tenants)

    def _check_traffic(self) -> Iterator[SpecError]:
        yield from check_traffic(self)
        yield from check_announced_vms(self)

    def _check_vm_platform(self) -> Iterator[SpecError]:
        yield from check_vm_platform(self.vm_platform)

    def _check_tenants(self) -> Iterator[SpecError]:
        yield from check_tenants(self)

    def _check_priority_classes(self) -> Iterator[SpecError]:
        yield from check_priority_classes(self.priority_classes, self.tenants)


MAX_DRA_POOL_SETS = 12
"""Up to this many ``dra`` pools, :func:`check_dra_pools` checks every set of them (Hall's condition: the
workloads confined to a set of pools fit its GPUs); beyond, only each workload's own candidates and all pools."""


def placements(facts: ClusterFacts, tenant: TenantSpec) -> Iterator[tuple[tuple[str, ...], Placement, int]]:
    """``(key path below the tenant, placement, units)`` of every workload of ``tenant``; units count every replica.
    The path of a VM, notebook or endpoint is ``(kind key, name)``; a tenant cluster's worker pools and control plane
    follow (:func:`gpucell.admission.tenant_cluster_admission.machines`: ``("tenantClusters", name, "workerPools",
    pool)``, units = replicas x GPUs).

    Raises :class:`SpecError` (path relative to the tenant) when a workload fits nowhere.
    """
    offers = gpu_offers(facts.node_pools, facts.effective_mig_strategy.value)
    strategy = facts.effective_mig_strategy.value
    catalog = facts.gpu_catalog
    for name, vm in tenant.virtual_machines.items():
        shape = shaped_vm(facts, tenant, name, vm)
        try:
            placement = place_vm(name, shape.spec, facts.node_pools, offers, catalog=catalog)
        except PlacementError as exc:
            path, message = _sized_by_instancetype(vm, shape, exc.rel_path, exc.message)
            raise SpecError(("virtualMachines", name, *path), message) from None
        yield ("virtualMachines", name), placement, placement.count
    for kind, name, guest in isolated_vms(tenant):
        placement = _placed((kind, name), functools.partial(_place_guest, name, guest, facts, offers))
        units = placement.count * (tenant.model_endpoints[name].max_replicas if kind == "modelEndpoints" else 1)
        yield (kind, name), placement, units
    for name, notebook in _containers(tenant.notebooks, tenant):
        placement = _placed(
            ("notebooks", name),
            functools.partial(
                place_container, notebook.gpu, facts.node_pools, offers, strategy, "a GPU notebook", catalog=catalog
            ),
        )
        yield ("notebooks", name), placement, placement.count
    for name, endpoint in _containers(tenant.model_endpoints, tenant):
        placement = _placed(
            ("modelEndpoints", name),
            functools.partial(
                place_container,
                endpoint.gpu,
                facts.node_pools,
                offers,
                strategy,
                "a GPU model endpoint",
                catalog=catalog,
            ),
        )
        yield ("modelEndpoints", name), placement, placement.count * endpoint.max_replicas
    yield from machines(tenant, facts.node_pools, offers, catalog=catalog)


_W = TypeVar("_W", NotebookSpec, ModelEndpointSpec)
_ISOLATED_IMAGE = RUNTIMES[(0, 20)][ISOLATED_RUNTIME].image
"""The image an isolated endpoint's guest pulls (its registry is what egress must allow)."""

_GUEST_KEYS: dict[str, tuple[str, ...]] = {
    "gpuModel": ("gpu", "model"),
    "gpus": ("gpu", "count"),
    "gpuAllocation": ("gpu", "allocation"),
    "memoryGib": ("memoryGib",),
    "cpu": ("cpuMillicores",),
}
"""A key of an isolated workload's VM (:func:`gpucell.admission.isolation.guest_vm`) -> the workload's key it comes
from, so that a placement problem names what the tenant wrote."""


def isolated_vms(tenant: TenantSpec) -> Iterator[tuple[str, str, GpuVirtualMachineSpec]]:
    """``(kind key, name, VM)`` of every isolated notebook and model endpoint of ``tenant``, in config order."""
    for kind, workloads in (("notebooks", tenant.notebooks), ("modelEndpoints", tenant.model_endpoints)):
        for name, spec in workloads.items():
            if is_isolated(spec, tenant.isolation):
                yield kind, name, guest_vm(spec, tenant.isolation)


def _containers(workloads: Mapping[str, _W], tenant: TenantSpec) -> Iterator[tuple[str, _W]]:
    """The workloads of ``workloads`` that run as containers (not isolated)."""
    return ((name, spec) for name, spec in workloads.items() if not is_isolated(spec, tenant.isolation))


def _place_guest(name: str, guest: GpuVirtualMachineSpec, facts: ClusterFacts, offers: list[GpuOffer]) -> Placement:
    """:func:`place_vm` of an isolated workload's VM, its problems moved to the workload's own keys."""
    try:
        return place_vm(name, guest, facts.node_pools, offers, catalog=facts.gpu_catalog)
    except PlacementError as exc:
        path = _GUEST_KEYS.get(exc.rel_path[0], ("isolation",)) if exc.rel_path else ("isolation",)
        raise PlacementError(path, exc.message) from None


def shaped_vm(facts: ClusterFacts, tenant: TenantSpec, name: str, vm: GpuVirtualMachineSpec) -> VmShape:
    """:func:`gpucell.admission.vm_shape.resolve_vm` of VM ``name``; raises :class:`SpecError` (path relative to the
    tenant) when its instancetype or preference cannot be resolved."""
    try:
        return resolve_vm(facts.kubevirt, facts.versions.kubevirt, tenant, vm)
    except ShapeError as exc:
        raise SpecError(("virtualMachines", name, *exc.rel_path), exc.message) from None


_SIZE_KEYS = ("cpu", "memoryGib", "dedicatedCpus", "hugepages", "numaPassthrough")
"""The keys of a VM an instancetype sets instead (:func:`gpucell.admission.vm_shape.resolve_vm`), as placement names
them."""
_GPU_KEYS = ("gpuModel", "gpus", "vgpuProfile")


def _sized_by_instancetype(
    vm: GpuVirtualMachineSpec, shape: VmShape, path: tuple[str, ...], message: str
) -> tuple[tuple[str, ...], str]:
    """A placement problem's key path and message, moved to ``instancetype.name`` when the key it names is one the
    VM's instancetype sets (the VM itself does not have it)."""
    from_instancetype = _SIZE_KEYS + (_GPU_KEYS if shape.gpus_from_instancetype else ())
    if vm.instancetype is None or not path or path[0] not in from_instancetype:
        return path, message
    return ("instancetype", "name"), f"{shown(vm.instancetype.name)} sets the VM's {path[0]}: {message}"


def _placed(where: tuple[str, str], place: Callable[[], Placement]) -> Placement:
    try:
        return place()
    except PlacementError as exc:
        raise SpecError((*where, *exc.rel_path), exc.message) from None


def _offered(offers: list[GpuOffer]) -> str:
    return ", ".join(sorted({o.resource for o in offers})) or "none"


def _disk_key(index: int) -> tuple[str | int, ...]:
    """The key path of a VM's disk ``index`` (0 is the root disk): ``rootDisk`` or ``dataDisks[<i>]``."""
    return ("rootDisk",) if index == 0 else ("dataDisks", index - 1)


def _downloads(tenant: TenantSpec) -> Iterator[tuple[tuple[str | int, ...], str, tuple[str, ...]]]:
    """Every download the tenant's namespace makes, as (key path, what, hosts contacted).

    CDI's importer pods (registry and http disk sources) and KServe's storage initializer run in the tenant's
    namespace, under the tenant's network policies (:mod:`gpucell.catalog.download_hosts`); so do the guests of
    isolated workloads, which pull the workload's image themselves (docs/decisions/0040).
    """
    for name, vm in tenant.virtual_machines.items():
        for index, disk in enumerate(vm.disks):
            source = disk.source.registry or disk.source.http
            if source:
                hosts = disk_source_hosts(disk.source.registry, disk.source.http)
                yield ("virtualMachines", name, *_disk_key(index), "source"), f"CDI imports {source}", hosts
    for name, endpoint in tenant.model_endpoints.items():
        hosts = storage_uri_hosts(endpoint.storage_uri, endpoint.s3_endpoint, endpoint.s3_region)
        if hosts:
            yield ("modelEndpoints", name, "storageUri"), f"KServe downloads {endpoint.storage_uri}", hosts
    for kind, name, _ in isolated_vms(tenant):
        image = tenant.notebooks[name].image if kind == "notebooks" else _ISOLATED_IMAGE
        hosts = disk_source_hosts(f"docker://{image}", None)
        yield (kind, name, "isolation"), f"the guest of an isolated workload pulls {image}", hosts


def _check_egress(tenant_name: str, tenant: TenantSpec) -> Iterator[SpecError]:
    """Downloads need egress: refused under ``none``/``cluster``; under ``custom`` every host must be allowed."""
    base = ("tenants", tenant_name)
    for path, what, hosts in _downloads(tenant):
        if tenant.egress in (EgressClass.NONE, EgressClass.CLUSTER):
            yield SpecError(
                (*base, *path),
                f"{what} from the tenant's namespace, but its egress is {shown(tenant.egress.value)}; use egress "
                "internet, or custom with those hosts in egressFqdns",
            )
            return  # one line: the class refuses every download alike
        if tenant.egress is not EgressClass.CUSTOM:
            continue
        host = refused_host(hosts, tenant.egress_fqdns, tenant.egress_cidrs)
        if host is None:
            continue
        if any(c.isalpha() for c in host):
            labels = host.split(".")
            wildcard = f" (or a wildcard such as '**.{'.'.join(labels[-2:])}')" if len(labels) > 2 else ""
            fix = f"add it{wildcard} to tenants.{tenant_name}.egressFqdns"
        else:
            fix = f"add a network holding it to tenants.{tenant_name}.egressCidrs"
        yield SpecError((*base, *path), f"{what} from {host}, which the tenant's custom egress does not allow; {fix}")
        return  # one line per tenant: the first download its egress refuses


def _load_balancer_types(tenant: TenantSpec) -> Iterator[tuple[str, ...]]:
    """The key path (below the tenant) of the ``type`` of every LoadBalancer Service the tenant declares: a VM's
    ``sshService``, a tenant cluster's ``apiServer``. Their pools and addresses are checked by
    :mod:`gpucell.spec.traffic`."""
    for name, vm in tenant.virtual_machines.items():
        if vm.ssh_service is not None and vm.ssh_service.type is ServiceType.LOAD_BALANCER:
            yield "virtualMachines", name, "sshService", "type"
    for name, cluster in tenant.tenant_clusters.items():
        if cluster.api_server.type is ApiServerType.LOAD_BALANCER:
            yield "tenantClusters", name, "apiServer", "type"


def _check_services_and_sources(
    facts: ClusterFacts, tenant_name: str, tenant: TenantSpec, cell_secrets: Collection[str]
) -> Iterator[SpecError]:
    base = ("tenants", tenant_name)
    own = namespace_of(tenant_name)
    node_ports = 0
    for load_balancers, path in enumerate(_load_balancer_types(tenant), start=1):
        if load_balancers > tenant.quota.load_balancers:
            yield SpecError(
                (*base, *path),
                f"'LoadBalancer' brings the tenant's LoadBalancer Services to {load_balancers}, "
                f"quota.loadBalancers allows {tenant.quota.load_balancers}; raise quota.loadBalancers",
            )
    for name, vm in tenant.virtual_machines.items():
        if vm.ssh_service is not None and vm.ssh_service.type is ServiceType.NODE_PORT:
            node_ports += 1
            if node_ports > tenant.quota.node_ports:
                yield SpecError(
                    (*base, "virtualMachines", name, "sshService", "type"),
                    f"'NodePort' brings the tenant's node ports to {node_ports}, quota.nodePorts allows "
                    f"{tenant.quota.node_ports}; raise quota.nodePorts (each NodePort opens a port on every node)",
                )
        for index, disk in enumerate(vm.disks):
            if disk.source.pvc is not None:
                namespace = disk.source.pvc.split("/", 1)[0]
                if namespace != own and namespace not in facts.image_namespaces:
                    yield SpecError(
                        (*base, "virtualMachines", name, *_disk_key(index), "source", "pvc"),
                        f"{shown(disk.source.pvc)} clones from namespace {shown(namespace)}; a tenant may clone from "
                        f"its own namespace {own} or from imageNamespaces "
                        f"({', '.join(facts.image_namespaces) or 'none'})",
                    )
    for name, endpoint in tenant.model_endpoints.items():
        if endpoint.credentials_config_key in {*cell_secrets, "regions", "acknowledge"}:
            yield SpecError(
                (*base, "modelEndpoints", name, "credentialsConfigKey"),
                f"{shown(endpoint.credentials_config_key)} is the region's SSH key (or its config); name a secret "
                "that holds only this endpoint's storage credentials",
            )


def _check_logins_and_classes(facts: ClusterFacts, tenant_name: str, tenant: TenantSpec) -> Iterator[SpecError]:
    """Every VM has a way in (``sshKeys``, or ``noLogin`` said out loud), and every ``storageClass`` is one the
    cell has (:attr:`gpucell.spec.platform.StorageSpec.classes`): a PVC of another class stays Pending."""
    base = ("tenants", tenant_name)
    classes = facts.storage.classes
    for name, vm in tenant.virtual_machines.items():
        if not vm.ssh_keys and not vm.no_login:
            yield SpecError(
                (*base, "virtualMachines", name, "sshKeys"),
                f"is empty, so nobody can log into VM {name} (cloud-init sets no password, so the "
                "serial console has no login either); add an SSH public key, or set noLogin: true",
            )
        if vm.ssh_keys and vm.no_login:
            yield SpecError(
                (*base, "virtualMachines", name, "noLogin"), "is true, but sshKeys gives a login; drop one of them"
            )
        for index, disk in enumerate(vm.disks):
            if disk.storage_class is not None and disk.storage_class not in classes:
                yield SpecError(
                    (*base, "virtualMachines", name, *_disk_key(index), "storageClass"),
                    f"{shown(disk.storage_class)} is not a StorageClass of the cell "
                    f"({', '.join(classes)}); name one, or list a class installed outside gpucell in "
                    "storage.otherClasses",
                )
    for name, notebook in tenant.notebooks.items():
        if notebook.storage_class is not None and notebook.storage_class not in classes:
            yield SpecError(
                (*base, "notebooks", name, "storageClass"),
                f"{shown(notebook.storage_class)} is not a StorageClass of the cell "
                f"({', '.join(classes)}); name one, or list a class installed outside gpucell in "
                "storage.otherClasses",
            )


def tenant_runtimes(runtimes: Mapping[str, ServingRuntimeSpec]) -> dict[str, ClusterServingRuntime]:
    """A tenant's own ServingRuntimes (``servingRuntimes``) as :func:`gpucell.catalog.kserve_runtimes.resolve_runtime`
    weighs them: their formats (priority 0 when unset), protocols and image (tag or digest), a CUDA image with
    ``gpuImage``."""
    found: dict[str, ClusterServingRuntime] = {}
    for name, spec in runtimes.items():
        repository, _, digest = spec.image.partition("@")
        head, _, tag = repository.rpartition(":") if ":" in repository.rsplit("/", 1)[-1] else (repository, "", "")
        found[name] = ClusterServingRuntime(
            name,
            head,
            tag or digest,
            tuple(
                SupportedFormat(f.name, f.version or "", f.auto_select, f.priority or 0)
                for f in spec.supported_model_formats
            ),
            tuple(p.value for p in spec.protocol_versions),
            GpuImage.CUDA if spec.gpu_image else GpuImage.CPU,
            namespaced=True,
        )
    return found


def _check_runtimes(facts: ClusterFacts, tenant_name: str, tenant: TenantSpec) -> Iterator[SpecError]:
    """Every endpoint names a runtime and format the pinned KServe installs, and a GPU endpoint a GPU image
    (:func:`gpucell.catalog.kserve_runtimes.resolve_runtime`)."""
    if not tenant.model_endpoints:
        return
    version = facts.versions.kserve
    runtimes = runtimes_of(version)
    if runtimes is None:
        known = ", ".join(f"v{major}.{minor}" for major, minor in RUNTIMES)
        yield SpecError(
            ("versions", "kserve"),
            f"{shown(version)}: gpucell checks model endpoints against the "
            f"ClusterServingRuntimes KServe installs, which it knows for {known} only; pin such a release, "
            "or add this one's runtimes to gpucell.catalog.kserve_runtimes",
        )
        return
    own = tenant_runtimes(tenant.serving_runtimes)
    for name, endpoint in tenant.model_endpoints.items():
        try:
            resolve_runtime(
                runtimes,
                version,
                runtime=endpoint.runtime,
                model_format=endpoint.model_format,
                runtime_version=endpoint.runtime_version,
                gpus=endpoint.gpu is not None,
                protocol=endpoint.protocol_version.value if endpoint.protocol_version is not None else None,
                tenant_runtimes=own,
            )
        except RuntimeRefusedError as exc:
            yield SpecError(("tenants", tenant_name, "modelEndpoints", name, *exc.rel_path), exc.message)


def _check_egress_cidrs(facts: ClusterFacts, tenant_name: str, tenant: TenantSpec) -> Iterator[SpecError]:
    """``egressCidrs`` reach outside the cell only: never its node, pod or service networks, nor the API endpoint
    (``custom`` does not include the ``cluster`` class, which is the one that reaches the API)."""
    net = facts.network
    ranges = [("nodeCidr", net.node_cidr), ("podCidr", net.pod_cidr), ("serviceCidr", net.service_cidr)]
    api = net.api_address
    if api is not None and not any(api in r for _, r in ranges):
        ranges.append(("apiEndpoint", IPv4Network(api)))
    for index, cidr in enumerate(tenant.egress_cidrs):
        for key, cell_range in ranges:
            if cidr.overlaps(cell_range):
                yield SpecError(
                    ("tenants", tenant_name, "egressCidrs", index),
                    f"{shown(str(cidr))} overlaps network.{key} {cell_range}: egressCidrs reach outside the cell; "
                    "use egress cluster for the cell's own services",
                )
                break


def _check_resource_quota(facts: ClusterFacts, tenant_name: str, tenant: TenantSpec) -> Iterator[SpecError]:
    """Declared workloads (endpoints at max replicas, tenant clusters during a rolling update,
    :func:`gpucell.admission.tenant_cluster_admission.usage`) must fit the tenant's CPU, memory and storage quota; the
    memory of a multi-GPU notebook or endpoint includes its ``/dev/shm``
    (:func:`gpucell.spec.workloads.multi_gpu_shm_gib`). A VM sized by an instancetype counts the instancetype's vCPUs
    (plus the host CPU an isolated emulator thread pins) and memory (:func:`gpucell.admission.vm_shape.resolve_vm`)."""
    cpu = memory = storage = 0
    for name, vm in tenant.virtual_machines.items():
        shape = shaped_vm(facts, tenant, name, vm)
        vcpus = shape.spec.cpu.vcpus + shape.emulator_cpus
        cpu, memory = cpu + vcpus * 1000, memory + shape.spec.guest_memory_gib
        storage += sum(d.size_gib for d in vm.disks)
        yield from _within(tenant_name, tenant, ("virtualMachines", name), cpu=cpu, memory=memory, storage=storage)
    for kind, name, guest in isolated_vms(tenant):
        cpu, memory = cpu + guest.cpu.vcpus * 1000, memory + guest.guest_memory_gib
        storage += sum(d.size_gib for d in guest.disks)
        yield from _within(tenant_name, tenant, (kind, name), cpu=cpu, memory=memory, storage=storage)
    for name, notebook in _containers(tenant.notebooks, tenant):
        cpu, memory = cpu + notebook.cpu_millicores, memory + notebook.memory_gib + multi_gpu_shm_gib(notebook.gpu)
        storage += notebook.home_gib
        yield from _within(tenant_name, tenant, ("notebooks", name), cpu=cpu, memory=memory, storage=storage)
    for name, endpoint in _containers(tenant.model_endpoints, tenant):
        cpu += endpoint.cpu_millicores * endpoint.max_replicas
        memory += (endpoint.memory_gib + multi_gpu_shm_gib(endpoint.gpu)) * endpoint.max_replicas
        yield from _within(tenant_name, tenant, ("modelEndpoints", name), cpu=cpu, memory=memory, storage=storage)
    for name, cluster in tenant.tenant_clusters.items():
        vm_cpu, vm_memory, vm_disks = usage(cluster)  # its VMs during a rolling update
        cpu, memory, storage = cpu + vm_cpu, memory + vm_memory, storage + vm_disks
        yield from _within(
            tenant_name,
            tenant,
            ("tenantClusters", name),
            cpu=cpu,
            memory=memory,
            storage=storage,
            note=" (a tenant cluster's VMs during a rolling update: one more control-plane VM and one more VM "
            "per CPU worker pool)",
        )


def _within(
    tenant_name: str,
    tenant: TenantSpec,
    where: tuple[str, str],
    *,
    cpu: int,
    memory: int,
    storage: int,
    note: str = "",
) -> Iterator[SpecError]:
    quota = tenant.quota
    for what, used, allowed, unit in (
        ("CPU", cpu, quota.cpu_millicores, "millicores"),
        ("memory", memory, quota.memory_gib, "GiB"),
        ("storage", storage, quota.storage_gib, "GiB"),
    ):
        if used > allowed:
            key = {"CPU": "cpuMillicores", "memory": "memoryGib", "storage": "storageGib"}[what]
            yield SpecError(
                ("tenants", tenant_name, *where),
                f"brings the tenant's declared {what} to {used} {unit}{note}, quota.{key} allows {allowed}",
            )
            return  # one line per workload: the first resource it overruns


@dataclass(frozen=True)
class DraDemand:
    """GPUs one declared workload takes from ``dra`` pools."""

    path: tuple[str, ...]
    """Key path below the region (``("tenants", "acme", "notebooks", "nb-carol", "gpu")``)."""
    pools: frozenset[str]
    """The ``dra`` pools it may land on."""
    device_class: str
    """``gpu.nvidia.com`` (a container) or ``vfio.gpu.nvidia.com`` (a VM)."""
    units: int
    """GPUs, every replica counted (count)."""


def _reserve_device_classes(facts: ClusterFacts, tenant_name: str, tenant: TenantSpec, reserved: int) -> int:
    """Check the tenant's ``quota.deviceClasses`` against the region's ``dra`` GPUs; return ``reserved`` plus them.

    Both classes draw on the same GPUs, so the tenants' reservations of either add up against one total."""
    dra = dra_offers(facts.node_pools)
    offered = sorted({GPU_CLASS, VFIO_CLASS}) if dra else []
    total = sum(o.total for o in dra)
    for device_class, count in tenant.quota.device_classes.items():
        where = ("tenants", tenant_name, "quota", "deviceClasses", device_class)
        if device_class not in offered:
            raise SpecError(
                where,
                f"is offered by no pool of the region; offered: "
                f"{', '.join(offered) or 'none (no pool has gpuMode dra)'}",
            )
        reserved += count
        if reserved > total and not facts.allow_gpu_overcommit:
            raise SpecError(
                where,
                f"tenants reserve {reserved} devices of the dra pools in all ({GPU_CLASS} and "
                f"{VFIO_CLASS} draw on the same GPUs), the region has {total}; lower the quotas or set "
                "allowGpuOvercommit: true",
            )
    return reserved


def _pool_sets(pools: list[str], demands: list[DraDemand]) -> list[frozenset[str]]:
    """The sets of ``dra`` pools to check, smallest first (see :data:`MAX_DRA_POOL_SETS`)."""
    if len(pools) <= MAX_DRA_POOL_SETS:
        return [frozenset(c) for size in range(1, len(pools) + 1) for c in itertools.combinations(pools, size)]
    return sorted({d.pools for d in demands} | {frozenset(pools)}, key=len)


def check_dra_pools(facts: ClusterFacts, demands: list[DraDemand]) -> None:
    """Raise :class:`SpecError` at the first demand (in config order) after which the workloads confined to some set
    of ``dra`` pools ask for more GPUs than those pools hold: a GPU serves one container or one VM at a time, and
    the DRA driver publishes each GPU twice (as ``gpu.nvidia.com`` and ``vfio.gpu.nvidia.com``), so the scheduler
    alone would not stop a pool from being promised twice (docs/decisions/0017). Per-node packing beyond "fits one
    node" is the scheduler's."""
    offers = {o.pool: o for o in dra_offers(facts.node_pools)}
    sets = _pool_sets(list(offers), demands)
    for index, demand in enumerate(demands):
        seen = demands[: index + 1]
        for pools in sets:
            if not demand.pools <= pools:
                continue
            confined = [d for d in seen if d.pools <= pools]
            asked = sum(d.units for d in confined)
            held = sum(offers[p].total for p in pools)
            if asked <= held:
                continue
            containers = sum(d.units for d in confined if d.device_class == GPU_CLASS)
            names = ", ".join(sorted(pools))
            sizes = "; ".join(
                f"{p}: {offers[p].nodes} nodes x {offers[p].per_node} {offers[p].model}" for p in sorted(pools)
            )
            raise SpecError(
                demand.path,
                f"brings the GPUs declared on dra pool{'s' if len(pools) > 1 else ''} "
                f"{names} to {asked} (containers {containers}, VMs {asked - containers}, all tenants, "
                f"endpoints at maxReplicas), which hold {held} ({sizes}); a GPU serves one container or "
                "one VM at a time: lower the GPUs or add hosts",
            )


def _check_gpu_quota(
    facts: ClusterFacts, tenant_name: str, tenant: TenantSpec, demands: list[DraDemand]
) -> Iterator[SpecError]:
    """Every workload fits somewhere, and the tenant's GPU workloads fit its quota (``quota.gpus`` per extended
    resource, ``quota.deviceClasses`` per DeviceClass); the DRA ones are appended to ``demands``."""
    base = ("tenants", tenant_name)
    used: dict[str, int] = {}
    try:
        for path, placement, units in placements(facts, tenant):
            if placement.device_class is not None:
                key = "gpus" if path[0] == "virtualMachines" else "gpu"
                demands.append(
                    DraDemand((*base, *path, key), frozenset(placement.pools), placement.device_class, units)
                )
                used[placement.device_class] = used.get(placement.device_class, 0) + units
                allowed = tenant.quota.device_classes.get(placement.device_class, 0)
                if used[placement.device_class] > allowed:
                    yield SpecError(
                        (*base, *path),
                        f"needs {units} {placement.device_class} devices "
                        f"({used[placement.device_class]} with the tenant's other workloads), tenant "
                        f"quota.deviceClasses allows {allowed}",
                    )
                continue
            if placement.resource is None:
                continue
            used[placement.resource] = used.get(placement.resource, 0) + units
            allowed = tenant.quota.gpus.get(placement.resource, 0)
            if used[placement.resource] > allowed:
                yield SpecError(
                    (*base, *path),
                    f"needs {units} {placement.resource} ({used[placement.resource]} with the tenant's other "
                    f"workloads), tenant quota.gpus allows {allowed}",
                )
    except SpecError as exc:
        yield SpecError((*base, *exc.rel_path), exc.message)


def check_tenants(facts: ClusterFacts, cell_secrets: Collection[str] = ()) -> Iterator[SpecError]:
    """Every workload or quota of ``facts.tenants`` that does not fit, as :class:`SpecError` (paths below the region,
    or below the facts). ``cell_secrets`` are config keys of the cell's own secrets (its SSH key), which no endpoint's
    ``credentialsConfigKey`` may name."""
    offers = gpu_offers(facts.node_pools, facts.effective_mig_strategy.value)
    totals = capacity(offers)
    reserved: dict[str, int] = {}
    reserved_dra = 0
    demands: list[DraDemand] = []
    vlans: dict[int, str] = {}
    if any(tenant.tenant_clusters for tenant in facts.tenants.values()):
        yield from check_cluster_api_versions(facts.versions)
    yield from check_fabric_names(facts.node_pools, [t for t, spec in facts.tenants.items() if spec.fabric_vlan])
    for tenant_name, tenant in facts.tenants.items():
        base = ("tenants", tenant_name)
        for resource, count in tenant.quota.gpus.items():
            where = (*base, "quota", "gpus", resource)
            if resource not in totals:
                yield SpecError(where, f"is offered by no pool of the region; offered: {_offered(offers)}")
                continue
            reserved[resource] = reserved.get(resource, 0) + count
            if reserved[resource] > totals[resource] and not facts.allow_gpu_overcommit:
                yield SpecError(
                    where,
                    f"tenants reserve {reserved[resource]} {resource} in all, the region has "
                    f"{totals[resource]}; lower the quotas or set allowGpuOvercommit: true",
                )
        try:
            reserved_dra = _reserve_device_classes(facts, tenant_name, tenant, reserved_dra)
        except SpecError as problem:
            yield problem
        yield from _check_services_and_sources(facts, tenant_name, tenant, cell_secrets)
        yield from _check_logins_and_classes(facts, tenant_name, tenant)
        yield from _check_egress_cidrs(facts, tenant_name, tenant)
        try:
            yield from _check_resource_quota(facts, tenant_name, tenant)
        except SpecError as exc:
            yield SpecError((*base, *exc.rel_path), exc.message)
        yield from _check_runtimes(facts, tenant_name, tenant)
        yield from _check_gpu_quota(facts, tenant_name, tenant, demands)
        yield from _check_egress(tenant_name, tenant)
        yield from _check_fabric(facts, tenant_name, tenant, vlans)
        yield from check_tenant_clusters(
            tenant_name,
            tenant,
            versions=facts.versions,
            network=facts.network,
            storage_classes=facts.storage.classes,
            node_pools=facts.node_pools,
            offers=offers,
            catalog=facts.gpu_catalog,
        )
    try:
        check_dra_pools(facts, demands)
    except SpecError as problem:
        yield problem


def _check_fabric(
    facts: ClusterFacts, tenant_name: str, tenant: TenantSpec, vlans: dict[int, str]
) -> Iterator[SpecError]:
    """The tenant's ``fabricVlan`` is its own (``vlans``: VLAN -> the tenant that took it first, filled in here), a VM
    or tenant-cluster worker pool with ``rdmaNics`` has one to put its VFs on, and the VFs they take of each rail fit
    the quota (:func:`gpucell.admission.fabric.nic_quota`). Workloads that fit nowhere are reported elsewhere."""
    base = ("tenants", tenant_name)
    vlan = tenant.fabric_vlan
    if vlan is not None and vlans.setdefault(vlan, tenant_name) != tenant_name:
        yield SpecError(
            (*base, "fabricVlan"),
            f"{vlan} is already tenant {vlans[vlan]}'s: a VLAN isolates one tenant on the fabric; pick another",
        )
    quota = nic_quota(tenant.quota.gpus, vlan, facts.node_pools)
    used: dict[str, int] = {}
    for path, vm, copies in _rdma_machines(facts, tenant):
        if vlan is None:
            yield SpecError(
                (*base, *path, "rdmaNics"),
                f"needs the tenant's fabricVlan (tenants.{tenant_name}.fabricVlan), the VLAN its NICs' VFs are put "
                "on; give the tenant a VLAN of the fabric no other tenant has",
            )
            continue
        try:
            offers = gpu_offers(facts.node_pools, facts.effective_mig_strategy.value)
            placement = place_vm(path[-1], vm, facts.node_pools, offers, catalog=facts.gpu_catalog)
        except (PlacementError, ShapeError, SpecError):
            continue
        for rail in placement.rails:
            resource = rail_resource(placement.pools[0], rail)
            used[resource] = used.get(resource, 0) + copies
            if used[resource] > quota.get(resource, 0):
                yield SpecError(
                    (*base, *path, "rdmaNics"),
                    f"takes VF {used[resource]} of {resource}, the tenant's quota allows {quota.get(resource, 0)} "
                    "(one per host its GPU quota of the pool covers, decision 0039); raise quota.gpus",
                )
                return


def _rdma_machines(
    facts: ClusterFacts, tenant: TenantSpec
) -> Iterator[tuple[tuple[str, ...], GpuVirtualMachineSpec, int]]:
    """``(key path below the tenant, VM spec, copies)`` of the tenant's VMs and tenant-cluster worker pools with
    ``rdmaNics`` (a worker pool's copies: its replicas)."""
    for name, vm in tenant.virtual_machines.items():
        if vm.rdma_nics:
            try:
                yield ("virtualMachines", name), shaped_vm(facts, tenant, name, vm).spec, 1
            except SpecError:
                continue
    for cluster_name, cluster in tenant.tenant_clusters.items():
        for pool_name, pool in cluster.worker_pools.items():
            if pool.rdma_nics:
                path = ("tenantClusters", cluster_name, "workerPools", pool_name)
                yield path, cluster.worker_vm(pool_name), pool.replicas


def check_announced_vms(facts: ClusterFacts) -> Iterator[SpecError]:
    """With ``loadBalancer.<l2|bgp>.nodePools`` limiting the announcement, every pool a ``LoadBalancer`` VM may run
    on must announce: with ``externalTrafficPolicy: Local`` only the node running the VM announces its address.
    VMs whose ``sshService`` the traffic rules refuse (no pool of the tenant) and VMs that fit no pool (reported by
    :func:`check_tenants`) are left out. Paths below the region."""
    lb = facts.load_balancer
    announcer = None if lb is None else (lb.l2 if lb.l2 is not None else lb.bgp)
    if (
        lb is None
        or announcer is None
        or not announcer.node_pools
        or not set(announcer.node_pools) <= set(facts.node_pools)
    ):
        return  # no limit, or one that names unknown pools (reported on its own)
    offers = gpu_offers(facts.node_pools, facts.effective_mig_strategy.value)
    for tenant, spec in facts.tenants.items():
        for name, vm in spec.virtual_machines.items():
            service = vm.ssh_service
            if service is None or service.type is not ServiceType.LOAD_BALANCER:
                continue
            pool = vm_pool(lb, tenant, service.pool)
            if pool is None or pool not in tenant_pools(lb, tenant):
                continue  # refused by the traffic rules
            try:
                shaped = resolve_vm(facts.kubevirt, facts.versions.kubevirt, spec, vm).spec
                pools = place_vm(name, shaped, facts.node_pools, offers, catalog=facts.gpu_catalog).pools
            except (PlacementError, ShapeError):
                continue
            silent = [p for p in pools if p not in announcer.node_pools]
            if silent:
                yield SpecError(
                    ("tenants", tenant, "virtualMachines", name, "sshService", "type"),
                    f"'LoadBalancer': the VM may run on pool {silent[0]}, whose nodes do not "
                    f"announce (loadBalancer.{lb.announce.value}.nodePools: {', '.join(announcer.node_pools)}); "
                    "only the node running the VM announces its address, so add the pool there",
                )
        for name, cluster in spec.tenant_clusters.items():
            if cluster.api_server.type is not ApiServerType.LOAD_BALANCER:
                continue
            try:
                pools = machine_placements(name, cluster, facts.node_pools, offers, catalog=facts.gpu_catalog)[0].pools
            except SpecError:
                continue  # reported by the placement checks
            silent = [p for p in pools if p not in announcer.node_pools]
            if silent:
                yield SpecError(
                    ("tenants", tenant, "tenantClusters", name, "apiServer", "type"),
                    f"'LoadBalancer': its control-plane VMs may run on pool {silent[0]}, whose nodes do not "
                    f"announce (loadBalancer.{lb.announce.value}.nodePools: {', '.join(announcer.node_pools)}); "
                    "only a node running one announces the address, so add the pool there",
                )


_FACTS_RULES = (
    Rule("hosts", ("node_pools", "network"), ClusterFacts._check_hosts),
    Rule("migStrategy", ("mig_strategy", "node_pools"), ClusterFacts._check_mig_strategy),
    Rule("kserve", ("kserve", "versions"), ClusterFacts._check_kserve_mode),
    Rule("signIn", ("oidc", "tenants"), ClusterFacts._check_groups),
    Rule(
        "traffic",
        ("load_balancer", "gateway", "network", "node_pools", "tenants"),
        ClusterFacts._check_traffic,
        after=("hosts",),
    ),
    Rule("priorityClasses", ("priority_classes", "tenants"), ClusterFacts._check_priority_classes),
    Rule(
        "vmPlatform",
        ("kubevirt", "image_catalogs", "tenants", "storage", "versions", "image_namespaces"),
        ClusterFacts._check_vm_platform,
    ),
    Rule(
        "tenants",
        tuple(ClusterFacts.model_fields),
        ClusterFacts._check_tenants,
        after=("hosts", "migStrategy", "signIn", "vmPlatform"),
    ),
)
"""ClusterFacts' cross-field rules, in the order the cell spec runs the same ones."""
