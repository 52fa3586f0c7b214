"""Tenants: who they are (groups), what they may use (quota, egress) and what they run (workloads)."""

from __future__ import annotations

import re
from enum import StrEnum
from ipaddress import IPv4Network

from pydantic import Field, StrictInt, field_validator, model_validator

from gpucell.errors import SpecError, shown
from gpucell.spec._base import SpecModel
from gpucell.spec._values import Ipv4Cidr, check_single_line
from gpucell.spec.identity import RESERVED_PREFIX
from gpucell.spec.lifecycle import RemovalPolicy
from gpucell.spec.network import check_host_name, check_service_names
from gpucell.spec.workloads import (
    MAX_POD_CPU_MILLICORES,
    MAX_POD_MEMORY_GIB,
    GpuVirtualMachineSpec,
    ModelEndpointSpec,
    NotebookSpec,
)

__all__ = [
    "LINK_LOCAL",
    "SYSTEM_NAMESPACES",
    "EgressClass",
    "TenantGroups",
    "TenantLimits",
    "TenantQuota",
    "TenantSpec",
    "namespace_of",
]

_RESOURCE = re.compile(r"nvidia\.com/[A-Za-z0-9][-A-Za-z0-9_.]{0,62}")
_DEVICE_CLASS = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
"""A DNS subdomain (used with ``fullmatch``: ``$`` would accept a trailing newline)."""
TENANT_NAMESPACE_PREFIX = "tenant-"
SYSTEM_NAMESPACES = frozenset({
    "default", "kube-system", "kube-public", "kube-node-lease",
    # the platform namespaces gpucell installs into (a test keeps this in step with the components)
    "kubevirt", "cdi", "gpu-operator", "longhorn-system", "cert-manager", "kserve", "dra-driver-nvidia-gpu",
    "monitoring", "keda",
})
"""Namespaces of Kubernetes and of the cell's platform components: never a tenant's image source."""
LINK_LOCAL = IPv4Network("169.254.0.0/16")
"""Link-local addresses, where clouds and some bare-metal stacks serve instance metadata (169.254.169.254)."""


def namespace_of(tenant: str) -> str:
    """The tenant's namespace: ``tenant-<name>`` (the prefix keeps tenants clear of platform namespaces)."""
    return f"{TENANT_NAMESPACE_PREFIX}{tenant}"


class EgressClass(StrEnum):
    """Where a tenant's pods and VMs may connect, beyond DNS and their own namespace."""

    NONE = "none"
    CLUSTER = "cluster"
    INTERNET = "internet"
    CUSTOM = "custom"


class TenantGroups(SpecModel):
    """Identity-provider groups bound to the tenant's roles (Kubernetes ``admin``/``edit``/``view``, which KubeVirt's
    and KServe's roles aggregate into)."""

    admins: list[str] = []
    """Groups with ``admin`` in the namespace (manage RBAC inside it too)."""
    members: list[str] = []
    """Groups with ``edit``: create and run workloads."""
    viewers: list[str] = []
    """Groups with ``view``: read-only."""

    @field_validator("admins", "members", "viewers")
    @classmethod
    def _groups(cls, groups: list[str]) -> list[str]:
        for index, group in enumerate(groups):
            try:
                check_single_line(group, "text")
            except ValueError as exc:
                raise SpecError((index,), f"{shown(group)} {exc}") from None
            if group.startswith(RESERVED_PREFIX):
                raise SpecError((index,), f"{shown(group)} is a Kubernetes group ({RESERVED_PREFIX}*: every "
                                "authenticated user, cluster admins, service accounts); bind a group of the "
                                "tenant's own")
        return groups


class TenantQuota(SpecModel):
    """The tenant namespace's ResourceQuota."""

    cpu_millicores: StrictInt = Field(ge=0)
    """CPU requests and limits across the tenant, millicores."""
    memory_gib: StrictInt = Field(ge=0)
    """Memory requests and limits across the tenant, GiB."""
    storage_gib: StrictInt = Field(ge=0)
    """PVC storage requests across the tenant, GiB."""
    gpus: dict[str, StrictInt] = {}
    """GPU resource name -> units (``nvidia.com/gpu``, ``nvidia.com/mig-1g.18gb``,
    ``nvidia.com/GH100_H100_SXM5_80GB``, ``nvidia.com/NVIDIA_L40S-12Q``). Every other GPU resource of the region
    gets 0."""
    device_classes: dict[str, StrictInt] = {}
    """DRA DeviceClass name -> devices the tenant's ResourceClaims may request from it (quota key
    ``<class>.deviceclass.resource.k8s.io/devices``): ``gpu.nvidia.com`` (GPUs of ``dra`` pools for containers) and
    ``vfio.gpu.nvidia.com`` (for VMs), one GPU each, drawn from the same GPUs. In a region with ``dra`` pools every
    other class of the DRA driver gets 0. Defaults to none."""
    pods: StrictInt = Field(default=100, ge=0)
    """Pods (each VM runs in one), count. Defaults to 100."""
    persistent_volume_claims: StrictInt = Field(default=50, ge=0)
    """PVCs, count. Defaults to 50."""
    services: StrictInt = Field(default=20, ge=0)
    """Services, count. Defaults to 20."""
    node_ports: StrictInt = Field(default=0, ge=0, le=2768)
    """Node ports (``services.nodeports``: each port of a NodePort Service), count: a NodePort opens a port on every
    node. Defaults to 0; a VM's ``sshService: {type: NodePort}`` needs 1. At most 2768, the size of the
    default NodePort range 30000-32767."""
    load_balancers: StrictInt = Field(default=0, ge=0, le=0)
    """Services of type LoadBalancer, count: 0, as a cell runs no load-balancer implementation yet."""

    @field_validator("device_classes")
    @classmethod
    def _class_names(cls, classes: dict[str, int]) -> dict[str, int]:
        for name, count in classes.items():
            if not _DEVICE_CLASS.fullmatch(name) or len(name) > 253:
                raise SpecError((name,), f"{name!r} is not a DeviceClass name (a DNS subdomain such as "
                                "vfio.gpu.nvidia.com)")
            if count < 0:
                raise SpecError((name,), f"{count} is negative")
        return classes

    @field_validator("gpus")
    @classmethod
    def _resource_names(cls, gpus: dict[str, int]) -> dict[str, int]:
        for name, count in gpus.items():
            if not _RESOURCE.fullmatch(name):
                raise SpecError((name,), f"{shown(name)} is not an NVIDIA extended resource name (nvidia.com/...)")
            if count < 0:
                raise SpecError((name,), f"{count} is negative")
        return gpus


class TenantLimits(SpecModel):
    """The tenant namespace's LimitRange: what a container gets when it does not say."""

    default_cpu_millicores: StrictInt = Field(default=500, ge=10, le=MAX_POD_CPU_MILLICORES)
    """Default CPU limit (and request), millicores. Defaults to 500."""
    default_memory_mib: StrictInt = Field(default=1024, ge=16, le=MAX_POD_MEMORY_GIB * 1024)
    """Default memory limit (and request), MiB. Defaults to 1024."""


class TenantSpec(SpecModel):
    """One tenant of a region: a namespace with quota, RBAC, default-deny networking and its workloads."""

    groups: TenantGroups = TenantGroups()
    """Groups bound to the tenant's roles."""
    quota: TenantQuota
    """ResourceQuota of the namespace."""
    limits: TenantLimits = TenantLimits()
    """LimitRange defaults."""
    egress: EgressClass = EgressClass.NONE
    """``none`` (DNS and the tenant only), ``cluster`` (plus platform services), ``internet`` (plus the world) or
    ``custom`` (plus ``egressCidrs``/``egressFqdns``). Defaults to ``none``."""
    egress_cidrs: list[Ipv4Cidr] = []
    """``custom`` egress: networks outside the cell the tenant may reach; never ``0.0.0.0/0`` (that is ``internet``),
    link-local ``169.254.0.0/16`` (instance metadata), the cell's node, pod or service CIDRs, or the API
    endpoint."""
    egress_fqdns: list[str] = []
    """``custom`` egress: DNS names the tenant may reach (Cilium ``toFQDNs``, ``*.`` wildcards allowed)."""
    virtual_machines: dict[str, GpuVirtualMachineSpec] = {}
    """VM name -> VM."""
    notebooks: dict[str, NotebookSpec] = {}
    """Notebook name -> notebook."""
    model_endpoints: dict[str, ModelEndpointSpec] = {}
    """Endpoint name -> InferenceService."""
    removal_policy: RemovalPolicy = RemovalPolicy.PROTECT
    """What removing the tenant from the config may do to its namespace (and every PVC in it) and its guard rails
    (quota, limits, RBAC, network policies): ``protect`` (default), ``retain`` or ``delete``. Also the default of
    its VMs and notebooks."""

    _names = field_validator("virtual_machines", "notebooks", "model_endpoints")(check_service_names)

    @field_validator("egress_cidrs")
    @classmethod
    def _cidrs(cls, networks: list[IPv4Network]) -> list[IPv4Network]:
        for index, net in enumerate(networks):
            if net.prefixlen == 0:
                raise SpecError((index,), f"{shown(str(net))} is the whole internet; use egress: internet, which "
                                "keeps the cell's own networks and instance metadata out")
            if net.overlaps(LINK_LOCAL):
                raise SpecError((index,), f"{shown(str(net))} overlaps link-local {LINK_LOCAL}, where instance "
                                "metadata (169.254.169.254) is served")
        return networks

    @field_validator("egress_fqdns")
    @classmethod
    def _fqdns(cls, names: list[str]) -> list[str]:
        for index, name in enumerate(names):
            try:
                check_host_name(name.removeprefix("**.").removeprefix("*."))
            except ValueError:
                raise SpecError((index,), f"{shown(name)} is not a DNS name (a leading *. or **. wildcard is allowed: "
                                "Cilium's *. matches one label, **. any number)") from None
        return names

    @model_validator(mode="after")
    def _egress_and_names(self) -> TenantSpec:
        custom = self.egress is EgressClass.CUSTOM
        if custom and not (self.egress_cidrs or self.egress_fqdns):
            raise SpecError(("egress",), "'custom' needs egressCidrs or egressFqdns")
        if not custom and (self.egress_cidrs or self.egress_fqdns):
            key = "egressCidrs" if self.egress_cidrs else "egressFqdns"
            raise SpecError((key,), f"only applies with egress: custom (egress is {self.egress.value})")
        seen: dict[str, str] = {}
        for kind, names in (("virtualMachines", self.virtual_machines), ("notebooks", self.notebooks),
                            ("modelEndpoints", self.model_endpoints)):
            for name in names:
                if name in seen:
                    raise SpecError((kind, name), f"{shown(name)} is already the name of {seen[name]}.{name} in this "
                                    "tenant; workload names share the namespace")
                seen[name] = kind
        return self
