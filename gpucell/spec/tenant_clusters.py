"""Tenant clusters: Kubernetes of a tenant's own, on KubeVirt VMs of its namespace, built by Cluster API.

These are *specs*: plan-time values only. The rules that need the region (pools, quota, versions, networks) are in
:mod:`gpucell.admission.tenant_cluster_admission`; the objects are rendered by :mod:`gpucell.workloads.tenant_cluster`.
Decision: docs/decisions/0024-tenant-clusters.md.
"""

from __future__ import annotations

import re
from enum import StrEnum
from ipaddress import IPv4Address, IPv4Network

from pydantic import Field, StrictInt, field_validator, model_validator

from gpucell.errors import SpecError, shown
from gpucell.spec._base import SpecModel
from gpucell.spec._values import Ipv4Address, Ipv4Cidr, check_routable_cidr, unicast_problem
from gpucell.spec.lifecycle import RemovalPolicy
from gpucell.spec.network import DNS_SUBDOMAIN, check_names
from gpucell.spec.workloads import (
    AccessMode,
    CpuTopology,
    DiskSource,
    GpuAllocation,
    GpuVirtualMachineSpec,
    VmDisk,
)

__all__ = [
    "CONTROL_PLANE",
    "MAX_CLUSTER_NAME",
    "MAX_POOL_NAME",
    "MIN_CONTROL_PLANE_VCPUS",
    "ApiServerType",
    "ControlPlaneSpec",
    "TenantClusterApiServer",
    "TenantClusterNetwork",
    "TenantClusterSpec",
    "WorkerPoolSpec",
    "namespace_names",
]

MAX_CLUSTER_NAME = 30
"""Longest tenant-cluster name: its objects are named ``<cluster>-<pool>-<8 hex>`` (a worker pool's
KubevirtMachineTemplate) and ``<cluster>-<pool>`` (its MachineDeployment, also a label value of at most 63
characters, ``cluster.x-k8s.io/deployment-name``), with pool names of at most :data:`MAX_POOL_NAME`."""
MAX_POOL_NAME = 20
"""Longest worker-pool name (see :data:`MAX_CLUSTER_NAME`)."""
CONTROL_PLANE = "control-plane"
"""The control plane's name part: its KubeadmControlPlane ``<cluster>-control-plane`` and its machine templates
``<cluster>-control-plane-<hash>``, so no worker pool may take it. Also CAPK's ``cluster.x-k8s.io/role`` value of
control-plane VMs (``sigs.k8s.io/kind`` ``constants.ControlPlaneNodeRoleValue``)."""
MIN_CONTROL_PLANE_VCPUS = 2
"""vCPUs a control-plane VM needs: ``kubeadm init`` and ``kubeadm join --control-plane`` stop at the preflight
error ``NumCPU`` below it (kubernetes ``cmd/kubeadm/app/constants/constants.go`` ``ControlPlaneNumCPU = 2``;
Cluster API's KubeadmControlPlane ignores no preflight error by default)."""


def namespace_names(cluster: str) -> dict[str, str]:
    """The Services and network policies a tenant cluster puts in the tenant's namespace under names of its own,
    name -> what it is: ``<cluster>-lb`` (the control plane's Service CAPK creates, ``pkg/loadbalancer``),
    ``<cluster>-api`` (with a LoadBalancer API: its Service and policy), ``<cluster>-cluster-api`` (the policy
    admitting Cluster API's controllers). Another workload of the tenant named so would share the object (CAPK
    adopts an existing ``<cluster>-lb`` as the cluster's endpoint), so none may be."""
    return {
        f"{cluster}-lb": "control-plane Service, which CAPK creates",
        f"{cluster}-api": "API's Service and policy",
        f"{cluster}-cluster-api": "policy admitting Cluster API's controllers",
    }


_KUBERNETES_VERSION = re.compile(r"v(?P<major>\d+)\.(?P<minor>\d+)\.(?P<patch>\d+)")
_TAGGED_VERSION = re.compile(r":v?(?P<version>\d+\.\d+\.\d+)$")
"""An image reference whose tag is a Kubernetes release (image-builder tags its node images ``v1.34.1``)."""


class ApiServerType(StrEnum):
    """How a tenant cluster's API server is reached from outside the tenant's namespace."""

    CLUSTER_IP = "ClusterIP"
    LOAD_BALANCER = "LoadBalancer"


class TenantClusterApiServer(SpecModel):
    """Where the tenant cluster's API server (its control-plane VMs' port 6443) is reached.

    ``ClusterIP`` (default): the Service CAPK creates, ``<cluster>-lb``, inside the cell only: the workers, the
    tenant's own pods and VMs, and ``kubectl port-forward`` through the cell's API. ``LoadBalancer``: in addition a
    Service ``<cluster>-api`` with an address of the region's ``loadBalancer`` pools, reachable from
    ``allowFromCidrs``, and named in the API server's certificate (so the address is required).
    """

    type: ApiServerType = ApiServerType.CLUSTER_IP
    """``ClusterIP`` or ``LoadBalancer``. Defaults to ``ClusterIP``."""
    pool: str | None = None
    """``LoadBalancer``: the ``loadBalancer.pools`` entry the address is in; one that lists the tenant. Defaults to
    the first pool that lists the tenant."""
    address: Ipv4Address | None = None
    """``LoadBalancer``: the fixed address (required: the API server's certificate names it, and the kubeconfig
    gpucell exports points at it)."""
    allow_from_cidrs: list[Ipv4Cidr] = []
    """``LoadBalancer``: the client networks that may reach the API (required; ``0.0.0.0/0`` opens it to the world
    explicitly)."""

    @field_validator("address")
    @classmethod
    def _unicast(cls, value: IPv4Address | None) -> IPv4Address | None:
        problem = None if value is None else unicast_problem(value)
        if problem is not None:
            raise ValueError(f"{problem}; the API server's address is a unicast address of a loadBalancer pool")
        return value

    @model_validator(mode="after")
    def _exposure(self) -> TenantClusterApiServer:
        if self.type is ApiServerType.LOAD_BALANCER:
            if self.address is None:
                raise SpecError(
                    ("address",),
                    "is required with type LoadBalancer: the API server's certificate must name the address "
                    "clients use, so it cannot be one LB IPAM picks later",
                )
            if not self.allow_from_cidrs:
                raise SpecError(
                    ("allowFromCidrs",),
                    "is required with type LoadBalancer: list the client networks that may reach the API "
                    "(VPN, office), or 0.0.0.0/0 to open it to the world",
                )
            return self
        for key, value in (("pool", self.pool), ("address", self.address), ("allowFromCidrs", self.allow_from_cidrs)):
            if value:
                raise SpecError((key,), "only applies to type LoadBalancer (type is ClusterIP)")
        return self


def _hugepages(value: str | None) -> str | None:
    if value is not None and value not in ("1Gi", "2Mi"):
        raise ValueError("is not a hugepage size; use 1Gi or 2Mi")
    return value


class ControlPlaneSpec(SpecModel):
    """The control plane: a ``KubeadmControlPlane`` of KubeVirt VMs in the tenant's namespace (etcd on their disks)."""

    replicas: StrictInt = Field(default=1, ge=1, le=7)
    """Control-plane VMs, an odd count (1, 3, 5 or 7): etcd needs a majority. Defaults to 1 (no HA: the API is down
    while its VM restarts or moves)."""
    cpu: CpuTopology = CpuTopology(cores=2)
    """vCPUs of each control-plane VM, at least :data:`MIN_CONTROL_PLANE_VCPUS` (kubeadm's preflight). Defaults to 2
    cores."""
    memory_gib: StrictInt = Field(default=8, ge=2, le=512)
    """Memory of each control-plane VM, GiB. Defaults to 8."""
    disk_gib: StrictInt = Field(default=50, ge=20, le=4096)
    """Root disk of each control-plane VM (the node image, etcd's data), GiB. Defaults to 50."""
    pool: str | None = None
    """Node pool of the control-plane VMs; defaults to the region's cpu pools."""

    @field_validator("replicas")
    @classmethod
    def _odd(cls, value: int) -> int:
        if value % 2 == 0:
            raise ValueError("is even; etcd needs a majority of its members, so use 1, 3, 5 or 7")
        return value

    @field_validator("cpu")
    @classmethod
    def _kubeadm_cpus(cls, value: CpuTopology) -> CpuTopology:
        if value.vcpus < MIN_CONTROL_PLANE_VCPUS:
            raise ValueError(
                f"gives {value.vcpus} vCPU; kubeadm's preflight refuses a control-plane node with fewer than "
                f"{MIN_CONTROL_PLANE_VCPUS} (NumCPU), so give it at least {MIN_CONTROL_PLANE_VCPUS}"
            )
        return value


class WorkerPoolSpec(SpecModel):
    """One worker pool: a ``MachineDeployment`` of identical KubeVirt VMs, with whole GPUs passed through or none."""

    replicas: StrictInt = Field(ge=0, le=100)
    """Worker VMs (count); scaling converges (Cluster API creates or drains and deletes VMs)."""
    gpu_model: str | None = None
    """GPU catalog model passed through to each worker (``H100-SXM5-80GB``); none for CPU workers."""
    gpus: StrictInt = Field(default=0, ge=0, le=16)
    """Whole GPUs per worker (count). Defaults to 0."""
    vgpu_profile: str | None = None
    """Refused: a vGPU guest needs NVIDIA's licensed vGPU guest driver and a license token, which gpucell does not
    carry into tenant clusters; use whole GPUs from a ``vm-passthrough`` pool. Kept as a key so the refusal names it."""
    gpu_allocation: GpuAllocation = GpuAllocation.DEVICE_PLUGIN
    """``device-plugin`` only: ``dra`` is refused, because Cluster API creates worker VMs whenever it scales, rolls
    out or remediates, outside the one ``pulumi up`` that orders a ``dra`` pool's VM claims after its container
    claims (decision 0017)."""
    pool: str | None = None
    """Node pool of the workers; defaults to any pool of the right mode and model (cpu pools without GPUs)."""
    cpu: CpuTopology = CpuTopology(cores=4)
    """vCPUs of each worker. Defaults to 4 cores."""
    memory_gib: StrictInt = Field(default=16, ge=2, le=4096)
    """Memory of each worker, GiB. Defaults to 16."""
    dedicated_cpus: bool = False
    """Pin each worker's vCPUs to host CPUs (needs a pool with a topology profile). Defaults to false."""
    hugepages: str | None = None
    """Back each worker's memory with hugepages, ``1Gi`` or ``2Mi`` (needs a pool with a topology profile)."""
    numa_passthrough: bool = False
    """Mirror the host NUMA topology into each worker (needs dedicatedCpus and hugepages)."""
    rdma_nics: list[StrictInt] = Field(default=[], max_length=16)
    """Rails of the pool's ``fabric`` whose RDMA NICs each worker gets as SR-IOV VFs on the tenant's ``fabricVlan``,
    one per GPU beside it, as a VM's ``rdmaNics`` (docs/decisions/0039). Needs ``numaPassthrough``. Defaults to
    none."""
    disk_gib: StrictInt = Field(default=100, ge=20, le=65536)
    """Root disk of each worker (the node image, container images, emptyDir volumes), GiB. Defaults to 100."""

    _pages = field_validator("hugepages")(_hugepages)

    @model_validator(mode="after")
    def _gpus_a_guest_can_drive(self) -> WorkerPoolSpec:
        if self.gpus and self.gpu_model is None:
            raise SpecError(("gpuModel",), f"is required with gpus: {self.gpus}")
        if self.gpu_model is not None and not self.gpus:
            raise SpecError(("gpus",), f"must be at least 1 with gpuModel {shown(self.gpu_model)}")
        if self.vgpu_profile is not None:
            raise SpecError(
                ("vgpuProfile",),
                f"{shown(self.vgpu_profile)}: a vGPU guest needs NVIDIA's licensed vGPU guest driver and an NLS "
                "license token, which gpucell does not carry into tenant clusters (the GPU Operator it installs "
                "there runs the data-center driver); use whole GPUs from a vm-passthrough pool",
            )
        if self.gpu_allocation is GpuAllocation.DRA:
            raise SpecError(
                ("gpuAllocation",),
                "'dra': CAPK's VM template could carry the claim, but gpucell keeps a dra GPU from being promised "
                "to a VM and a container at once only by ordering VM claims after the pool's container claims in "
                "one pulumi up (docs/decisions/0017), and Cluster API creates worker VMs whenever it scales, rolls "
                "out or remediates; use a vm-passthrough pool",
            )
        if self.numa_passthrough and not (self.dedicated_cpus and self.hugepages):
            raise SpecError(("numaPassthrough",), "needs dedicatedCpus: true and hugepages (KubeVirt guest NUMA)")
        return self

    def vm_spec(self, image: DiskSource, storage_class: str | None) -> GpuVirtualMachineSpec:
        """One worker as the VM spec placement and admission take (:func:`gpucell.admission.placement.place_vm`): its
        GPUs, pool, CPU, memory, NUMA options and root disk (``image``, ``diskGib``, ``storage_class``), no login of
        gpucell's (CAPK injects its own SSH key, kubeadm's cloud-init does the rest)."""
        return GpuVirtualMachineSpec(
            gpu_model=self.gpu_model,
            gpus=self.gpus,
            pool=self.pool,
            cpu=self.cpu,
            memory_gib=self.memory_gib,
            dedicated_cpus=self.dedicated_cpus,
            hugepages=self.hugepages,
            numa_passthrough=self.numa_passthrough,
            rdma_nics=self.rdma_nics,
            root_disk=VmDisk(source=image, size_gib=self.disk_gib, storage_class=storage_class),
            no_login=True,
        )


class TenantClusterNetwork(SpecModel):
    """The tenant cluster's own pod and service networks (inside its VMs: Cilium tunnels between them); neither may
    overlap loopback, link-local, multicast or the other special ranges (RFC 6890)."""

    pod_cidr: Ipv4Cidr = IPv4Network("10.243.0.0/16")
    """Pod network of the tenant cluster (``Cluster.spec.clusterNetwork.pods``; kubeadm gives each node a /24 of
    it). At most a /22. Defaults to ``10.243.0.0/16`` (CAPK's own templates)."""
    service_cidr: Ipv4Cidr = IPv4Network("10.95.0.0/16")
    """Service network of the tenant cluster. Between a /12 and a /24. Defaults to ``10.95.0.0/16``."""

    _routable = field_validator("pod_cidr", "service_cidr")(check_routable_cidr)

    @model_validator(mode="after")
    def _sizes(self) -> TenantClusterNetwork:
        if self.pod_cidr.prefixlen > 22:
            raise SpecError(("podCidr",), f"{shown(str(self.pod_cidr))} is smaller than a /22: each node takes a /24")
        if not 12 <= self.service_cidr.prefixlen <= 24:
            raise SpecError(
                ("serviceCidr",),
                f"{shown(str(self.service_cidr))} is not a /12 to /24 (the API server refuses larger service ranges)",
            )
        if self.pod_cidr.overlaps(self.service_cidr):
            raise SpecError(("serviceCidr",), f"{shown(str(self.service_cidr))} overlaps podCidr {self.pod_cidr}")
        return self


class TenantClusterSpec(SpecModel):
    """A Kubernetes cluster of the tenant's own: a Cluster API ``Cluster`` whose control plane and workers are
    KubeVirt VMs in the tenant's namespace, with Cilium and the NVIDIA GPU Operator installed into it."""

    kubernetes_version: str
    """Kubernetes release of the tenant cluster, ``vMAJOR.MINOR.PATCH`` (``v1.34.1``); Cluster API v1.14 builds
    v1.31 to v1.36. A bump is a rolling upgrade (control plane first, then each worker pool), one minor at a time."""
    image: DiskSource
    """The node image every VM boots (a CDI source): an image-builder image with kubeadm, the kubelet and containerd
    of ``kubernetesVersion`` (``registry: docker://quay.io/capk/ubuntu-2404-container-disk:v1.34.1``). Its tag must
    name ``kubernetesVersion`` when it names a Kubernetes release. ``registry`` or ``http`` only, without
    ``credentialsConfigKey`` or ``caBundle`` (each machine's disk is imported from it)."""
    storage_class: str | None = None
    """StorageClass of every VM's root disk; defaults to the cell's default class."""
    control_plane: ControlPlaneSpec = ControlPlaneSpec()
    """The control-plane VMs."""
    worker_pools: dict[str, WorkerPoolSpec] = Field(min_length=1)
    """Pool name (a DNS-1123 label of at most 20 characters) -> worker pool."""
    network: TenantClusterNetwork = TenantClusterNetwork()
    """The tenant cluster's pod and service networks."""
    api_server: TenantClusterApiServer = TenantClusterApiServer()
    """How the API server is reached from outside the tenant's namespace."""
    removal_policy: RemovalPolicy | None = None
    """What removing the tenant cluster from the config may do to it (its ``Cluster``, whose deletion deletes every
    VM, disk and the cluster's etcd): ``protect``, ``retain`` or ``delete``. Defaults to the tenant's."""

    @field_validator("kubernetes_version")
    @classmethod
    def _version(cls, value: str) -> str:
        if not _KUBERNETES_VERSION.fullmatch(value):
            raise ValueError("is not a Kubernetes release; use the form v1.34.1")
        return value

    @field_validator("storage_class")
    @classmethod
    def _class(cls, value: str | None) -> str | None:
        if value is not None and not DNS_SUBDOMAIN.fullmatch(value):
            raise ValueError("is not a StorageClass name (a DNS-1123 subdomain: lower-case letters, digits, '-', '.')")
        return value

    @field_validator("worker_pools")
    @classmethod
    def _pool_names(cls, pools: dict[str, WorkerPoolSpec]) -> dict[str, WorkerPoolSpec]:
        check_names(pools)
        for name in pools:
            if name == CONTROL_PLANE:
                raise SpecError(
                    (name,),
                    f"{shown(name)} is the control plane's name part (<cluster>-control-plane, its KubeadmControlPlane "
                    "and machine templates); give the worker pool another name",
                )
            if len(name) > MAX_POOL_NAME:
                raise SpecError(
                    (name,),
                    f"{shown(name)} is {len(name)} characters; at most {MAX_POOL_NAME}: its MachineDeployment "
                    "<cluster>-<pool> is a label value of at most 63 characters",
                )
        return pools

    @field_validator("image")
    @classmethod
    def _imported_image(cls, image: DiskSource) -> DiskSource:
        # Each machine's root disk is a CDI import from the template CAPK copies (decision 0024: golden images for
        # machines are left for later). The renderer makes no import Secret or CA ConfigMap for it, and a catalog
        # image has no storage class to pick its DataSource by there.
        for key, given in (("pvc", image.pvc), ("image", image.image), ("blank", image.blank)):
            if given:
                raise SpecError(
                    (key,),
                    f"{shown(given)}: a tenant cluster's node image is imported for each machine; give registry "
                    "(docker://...) or http (https://...)",
                )
        for key, given in (("credentialsConfigKey", image.credentials_config_key), ("caBundle", image.ca_bundle)):
            if given is not None:
                raise SpecError(
                    (key,),
                    f"{shown(given)}: a tenant cluster's node image is imported without credentials or a CA bundle "
                    "(no Secret or ConfigMap is made for its machines' disks, whose import would wait for them); "
                    "serve the node image from a registry or https server that needs neither",
                )
        return image

    @model_validator(mode="after")
    def _image_of_the_version(self) -> TenantClusterSpec:
        tagged = _TAGGED_VERSION.search(self.image.registry or "")
        if tagged and f"v{tagged['version']}" != self.kubernetes_version:
            raise SpecError(
                ("image", "registry"),
                f"{shown(self.image.registry)} is tagged v{tagged['version']}, but kubernetesVersion is "
                f"{self.kubernetes_version}: the node image carries kubeadm and the kubelet of one release; use the "
                f"image of {self.kubernetes_version}",
            )
        return self

    @property
    def minor(self) -> tuple[int, int]:
        """``(major, minor)`` of ``kubernetesVersion``."""
        match = _KUBERNETES_VERSION.fullmatch(self.kubernetes_version)
        assert match is not None  # validated
        return int(match["major"]), int(match["minor"])

    def control_plane_vm(self) -> GpuVirtualMachineSpec:
        """One control-plane VM as the VM spec placement, admission and the renderer take: no GPUs, the control
        plane's pool, CPU, memory and root disk from the node image (on ``storageClass``, ReadWriteOnce)."""
        control_plane = self.control_plane
        return GpuVirtualMachineSpec(
            pool=control_plane.pool,
            cpu=control_plane.cpu,
            memory_gib=control_plane.memory_gib,
            root_disk=VmDisk(
                source=self.image,
                size_gib=control_plane.disk_gib,
                storage_class=self.storage_class,
                access_mode=AccessMode.RWO,
            ),
            no_login=True,
        )

    def worker_vm(self, pool: str) -> GpuVirtualMachineSpec:
        """One worker of ``pool`` as a VM spec (:meth:`WorkerPoolSpec.vm_spec` on the node image)."""
        return self.worker_pools[pool].vm_spec(self.image, self.storage_class)
