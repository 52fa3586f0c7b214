"""Tenants: who they are (groups), what they may use (quota, egress) and what they run (workloads)."""

from __future__ import annotations

import re
from enum import StrEnum
from ipaddress import IPv4Network
from typing import Any

from pydantic import Field, StrictInt, ValidationInfo, field_validator, model_validator

from gpucell.errors import SpecError, shown
from gpucell.spec._base import SpecModel
from gpucell.spec._values import Ipv4Cidr, check_single_line
from gpucell.spec.backups import TenantBackupSpec
from gpucell.spec.identity import RESERVED_PREFIX
from gpucell.spec.instancetypes import InstancetypeSpec, PreferenceSpec, check_object_names
from gpucell.spec.isolation import TenantIsolation, check_isolated
from gpucell.spec.lifecycle import RemovalPolicy
from gpucell.spec.network import DNS_LABEL, check_host_name, check_names, check_service_names
from gpucell.spec.serving import ServingRuntimeSpec, no_vllm_metrics
from gpucell.spec.tenant_clusters import MAX_CLUSTER_NAME, TenantClusterSpec, namespace_names
from gpucell.spec.workloads import (
    BUILTIN_RUNTIME_FORMATS,
    MAX_POD_CPU_MILLICORES,
    MAX_POD_MEMORY_GIB,
    VLLM_RUNTIMES,
    GpuVirtualMachineSpec,
    ModelEndpointSpec,
    NotebookSpec,
)

__all__ = [
    "CLUSTER_API_NAMESPACES",
    "DNS_SELECTOR",
    "LINK_LOCAL",
    "NAMESPACE_KEY",
    "PRIVATE_RANGES",
    "SYSTEM_NAMESPACES",
    "TENANT_LABEL",
    "EgressClass",
    "TenantGroups",
    "TenantLimits",
    "TenantQuota",
    "TenantSpec",
    "check_image_namespaces",
    "check_tenant_names",
    "namespace_of",
]

_RESOURCE = re.compile(r"nvidia\.com/[A-Za-z0-9][-A-Za-z0-9_.]{0,62}")
_DEVICE_CLASS = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
"""A DNS subdomain (used with ``fullmatch``: ``$`` would accept a trailing newline)."""
TENANT_NAMESPACE_PREFIX = "tenant-"
CLUSTER_API_NAMESPACES = (
    "capi-operator-system",
    "capi-system",
    "capi-kubeadm-bootstrap-system",
    "capi-kubeadm-control-plane-system",
    "capk-system",
    "caaph-system",
)
"""Namespaces of the cluster-api-operator and the providers it installs (:mod:`gpucell.components.cluster_api`), with
tenant clusters. Their pods meet Pod Security ``restricted``, so they are not exempt from it."""
TENANT_LABEL = "gpucell.io/tenant"
"""Label naming the tenant on the namespace and on every object rendered for it."""
NAMESPACE_KEY = "k8s:io.kubernetes.pod.namespace"
"""Cilium's identity label for a pod's namespace (set by Cilium from the pod's real namespace)."""
DNS_SELECTOR = {NAMESPACE_KEY: "kube-system", "k8s:k8s-app": "kube-dns"}
"""The cluster DNS pods: k3s ships CoreDNS as ``kube-dns``-labelled pods in ``kube-system``."""
SYSTEM_NAMESPACES = frozenset(
    {
        "default",
        "kube-system",
        "kube-public",
        "kube-node-lease",
        # the platform namespaces gpucell installs into (a test keeps this in step with the components)
        "kubevirt",
        "cdi",
        "gpu-operator",
        "longhorn-system",
        "cert-manager",
        "kserve",
        "dra-driver-nvidia-gpu",
        "monitoring",
        "keda",
        *CLUSTER_API_NAMESPACES,
        "velero",
        "nvidia-network-operator",  # the SR-IOV config daemon and device plugin are privileged (decision 0039)
    }
)
"""Namespaces of Kubernetes and of the cell's platform components: never a tenant's image source."""
LINK_LOCAL = IPv4Network("169.254.0.0/16")
"""Link-local addresses, where clouds and some bare-metal stacks serve instance metadata (169.254.169.254)."""
PRIVATE_RANGES = tuple(IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"))
"""What ``internet`` never reaches unless the tenant lists a network of them in ``egressCidrs``: the RFC 1918
private networks and RFC 6598 shared address space (carrier-grade NAT), where every cell's nodes, pods and services
and the operator's own networks live."""


def namespace_of(tenant: str) -> str:
    """The tenant's namespace: ``tenant-<name>`` (the prefix keeps tenants clear of platform namespaces)."""
    return f"{TENANT_NAMESPACE_PREFIX}{tenant}"


class EgressClass(StrEnum):
    """Where a tenant's pods and VMs may connect, beyond DNS and their own namespace."""

    NONE = "none"
    CLUSTER = "cluster"
    INTERNET = "internet"
    CUSTOM = "custom"


_GROUP = re.compile(r"[A-Za-z0-9._@/:=+ -]{1,256}")
"""A group name a RoleBinding names: ASCII only, so that a reviewer reads what the binding binds (no bidi controls,
no Cyrillic a for a Latin a)."""


class TenantGroups(SpecModel):
    """Identity-provider groups bound to the tenant's roles, gpucell's own Roles ``tenant-admin``/``tenant-member``/
    ``tenant-viewer`` in the namespace (:mod:`gpucell.tenancy.tenant_roles`; docs/security.md "Tenant roles")."""

    admins: list[str] = []
    """Groups with ``tenant-admin``: what members may, and RoleBindings to the tenant roles."""
    members: list[str] = []
    """Groups with ``tenant-member``: create and run VMs, disks, notebooks, endpoints and workloads."""
    viewers: list[str] = []
    """Groups with ``tenant-viewer``: read-only, no Secrets, no console or exec."""

    @field_validator("admins", "members", "viewers")
    @classmethod
    def _groups(cls, groups: list[str]) -> list[str]:
        for index, group in enumerate(groups):
            try:
                check_single_line(group, "text")
            except ValueError as exc:
                raise SpecError((index,), f"{shown(group)} {exc}") from None
            if not _GROUP.fullmatch(group):
                raise SpecError(
                    (index,),
                    f"{shown(ascii(group)[1:-1])} is not a group name gpucell binds: ASCII "
                    "letters, digits, spaces and . _ @ / : = + - (no look-alike or direction-changing "
                    "characters), at most 256 characters",
                )
            if group.startswith(RESERVED_PREFIX):
                raise SpecError(
                    (index,),
                    f"{shown(group)} is a Kubernetes group ({RESERVED_PREFIX}*: every "
                    "authenticated user, cluster admins, service accounts); bind a group of the "
                    "tenant's own",
                )
        return groups


MAX_QUOTA_CPU_MILLICORES = 100_000_000
"""The largest ``quota.cpuMillicores``: 100,000 cores, more than any cell; a larger number is a typo (a unit off),
and a quota that bounds nothing."""
MAX_QUOTA_MEMORY_GIB = 2**20
"""The largest ``quota.memoryGib``: 1 PiB."""
MAX_QUOTA_STORAGE_GIB = 2**24
"""The largest ``quota.storageGib``: 16 PiB."""
MAX_QUOTA_COUNT = 100_000
"""The largest count a quota gives (pods, PVCs, Services, GPU units, DRA devices)."""


class TenantQuota(SpecModel):
    """The tenant namespace's ResourceQuota."""

    cpu_millicores: StrictInt = Field(ge=0, le=MAX_QUOTA_CPU_MILLICORES)
    """CPU requests and limits across the tenant, millicores; at most 100,000,000 (100,000 cores)."""
    memory_gib: StrictInt = Field(ge=0, le=MAX_QUOTA_MEMORY_GIB)
    """Memory requests and limits across the tenant, GiB; at most 1,048,576 (1 PiB)."""
    storage_gib: StrictInt = Field(ge=0, le=MAX_QUOTA_STORAGE_GIB)
    """PVC storage requests across the tenant, GiB; at most 16,777,216 (16 PiB)."""
    gpus: dict[str, StrictInt] = {}
    """GPU resource name -> units (``nvidia.com/gpu``, ``nvidia.com/mig-1g.18gb``,
    ``nvidia.com/GH100_H100_SXM5_80GB``, ``nvidia.com/NVIDIA_L40S-12Q``). Every other GPU resource of the region
    gets 0. At most 100,000 each."""
    device_classes: dict[str, StrictInt] = {}
    """DRA DeviceClass name -> devices the tenant's ResourceClaims may request from it (quota key
    ``<class>.deviceclass.resource.k8s.io/devices``): ``gpu.nvidia.com`` (GPUs of ``dra`` pools for containers) and
    ``vfio.gpu.nvidia.com`` (for VMs), one GPU each, drawn from the same GPUs. In a region with ``dra`` pools every
    other class of the DRA driver gets 0. Defaults to none; at most 100,000 each."""
    hugepages_gib: StrictInt | None = Field(default=None, ge=0, le=MAX_QUOTA_MEMORY_GIB)
    """Hugepages of each size (``requests.hugepages-1Gi``, ``requests.hugepages-2Mi``) across the tenant, GiB: a
    VM's ``hugepages`` memory is counted there, not in ``memoryGib``. Defaults to ``memoryGib``."""
    ephemeral_storage_gib: StrictInt = Field(default=1000, ge=1, le=MAX_QUOTA_STORAGE_GIB)
    """Node-local ephemeral storage (container writable layers, logs, ``emptyDir`` on disk) across the tenant, GiB,
    for requests and limits (``requests.ephemeral-storage``, ``limits.ephemeral-storage``); each container gets
    ``limits.defaultEphemeralStorageMib`` unless it says. Defaults to 1000."""
    pods: StrictInt = Field(default=100, ge=0, le=MAX_QUOTA_COUNT)
    """Pods (each VM runs in one), count. Defaults to 100; at most 100,000."""
    persistent_volume_claims: StrictInt = Field(default=50, ge=0, le=MAX_QUOTA_COUNT)
    """PVCs, count. Defaults to 50; at most 100,000."""
    services: StrictInt = Field(default=20, ge=0, le=MAX_QUOTA_COUNT)
    """Services, count. Defaults to 20; at most 100,000."""
    node_ports: StrictInt = Field(default=0, ge=0, le=2768)
    """Node ports (``services.nodeports``: each port of a NodePort Service), count: a NodePort opens a port on every
    node. Defaults to 0; a VM's ``sshService: {type: NodePort}`` needs 1. At most 2768, the size of the
    default NodePort range 30000-32767."""
    load_balancers: StrictInt = Field(default=0, ge=0, le=1024)
    """Services of type LoadBalancer (``services.loadbalancers``), count: each takes an address of the region's
    ``loadBalancer.pools``. Defaults to 0; a VM's ``sshService: {type: LoadBalancer}`` needs 1."""

    @field_validator("device_classes")
    @classmethod
    def _class_names(cls, classes: dict[str, int]) -> dict[str, int]:
        for name, count in classes.items():
            if not _DEVICE_CLASS.fullmatch(name) or len(name) > 253:
                raise SpecError(
                    (name,), f"{name!r} is not a DeviceClass name (a DNS subdomain such as vfio.gpu.nvidia.com)"
                )
            if not 0 <= count <= MAX_QUOTA_COUNT:
                raise SpecError((name,), f"{count} is not 0-{MAX_QUOTA_COUNT} devices")
        return classes

    @field_validator("gpus")
    @classmethod
    def _resource_names(cls, gpus: dict[str, int]) -> dict[str, int]:
        for name, count in gpus.items():
            if not _RESOURCE.fullmatch(name):
                raise SpecError((name,), f"{shown(name)} is not an NVIDIA extended resource name (nvidia.com/...)")
            if not 0 <= count <= MAX_QUOTA_COUNT:
                raise SpecError((name,), f"{count} is not 0-{MAX_QUOTA_COUNT} units")
        return gpus


class TenantLimits(SpecModel):
    """The tenant namespace's LimitRange: what a container gets when it does not say."""

    default_cpu_millicores: StrictInt = Field(default=500, ge=10, le=MAX_POD_CPU_MILLICORES)
    """Default CPU limit (and request), millicores. Defaults to 500."""
    default_memory_mib: StrictInt = Field(default=1024, ge=16, le=MAX_POD_MEMORY_GIB * 1024)
    """Default memory limit (and request), MiB. Defaults to 1024."""
    default_ephemeral_storage_mib: StrictInt = Field(default=8192, ge=64, le=MAX_POD_MEMORY_GIB * 1024)
    """Default ephemeral-storage limit, MiB (the kubelet evicts a pod that writes more); the default request is an
    eighth of it. Defaults to 8192."""


_DERIVED_NAMES: dict[str, tuple[int, str]] = {
    "virtual_machines": (59, "its SSH Service <name>-ssh is a DNS-1035 label of at most 63 characters"),
    "notebooks": (
        52,
        "its StatefulSet's pods carry the label controller-revision-hash: <name>-<10-character hash>, "
        "a label value of at most 63 characters, or they are never created (kubernetes/kubernetes#64023)",
    ),
    "tenant_clusters": (
        MAX_CLUSTER_NAME,
        "its worker pools' objects are named <cluster>-<pool>, a label value of at most 63 characters",
    ),
    "model_endpoints": (
        53,
        "KServe names its Deployment, Service and autoscaler <name>-predictor, and a Service name "
        "is a DNS-1035 label of at most 63 characters",
    ),
}
"""Workload kind -> the longest name whose derived objects all fit, and the derived object that sets it."""


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
    """``custom`` egress: networks outside the cell the tenant may reach; with ``internet``, the private networks
    (``10.0.0.0/8``, ``172.16.0.0/12``, ``192.168.0.0/16``, ``100.64.0.0/10``) it may reach besides the public
    ones. Never ``0.0.0.0/0`` (that is ``internet``),
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
    instancetypes: dict[str, InstancetypeSpec] = {}
    """Name -> a ``VirtualMachineInstancetype`` in the tenant's namespace, which its VMs name with ``instancetype:
    {name, kind: VirtualMachineInstancetype}``. Defaults to none."""
    preferences: dict[str, PreferenceSpec] = {}
    """Name -> a ``VirtualMachinePreference`` in the tenant's namespace (``preference: {name, kind:
    VirtualMachinePreference}``). Defaults to none."""
    tenant_clusters: dict[str, TenantClusterSpec] = {}
    """Cluster name -> a Kubernetes cluster of the tenant's own on KubeVirt VMs of its namespace, built by Cluster
    API (docs/decisions/0024). Needs ``egress: internet`` (its nodes pull images)."""
    removal_policy: RemovalPolicy = RemovalPolicy.PROTECT
    """What removing the tenant from the config may do to its namespace (and every PVC in it) and its guard rails
    (quota, limits, RBAC, network policies): ``protect`` (default), ``retain`` or ``delete``. Also the default of
    its VMs, notebooks and tenant clusters."""
    serving_runtimes: dict[str, ServingRuntimeSpec] = {}
    """Runtime name (a DNS-1123 label, not a built-in runtime's) -> the tenant's own ServingRuntime, which its
    endpoints name in ``runtime``."""
    isolation: TenantIsolation = TenantIsolation()
    """The default isolation of the tenant's notebooks and endpoints (``default``: ``container`` or ``vm``, the
    latter making the tenant isolated-only) and the guest image isolated ones boot (``guestImage``); see
    docs/decisions/0040. Defaults to ``container`` and no guest image."""
    backup: TenantBackupSpec | None = None
    """Scheduled backups of the tenant's namespace (every VM, disk and volume in it) to the cell's ``backups``
    bucket. Defaults to none."""
    fabric_vlan: StrictInt | None = Field(default=None, ge=2, le=4094)
    """The VLAN (802.1Q id) isolating the tenant on the region's RoCE fabric: every SR-IOV VF its VMs get carries it,
    set by the host on the VF (the guest cannot change it), unique among the region's tenants (docs/decisions/0039).
    Required for a VM with ``rdmaNics``; none by default."""

    @field_validator("serving_runtimes")
    @classmethod
    def _runtime_names(cls, runtimes: dict[str, ServingRuntimeSpec]) -> dict[str, ServingRuntimeSpec]:
        for name in runtimes:
            if not DNS_LABEL.fullmatch(name):
                raise SpecError((name,), f"{shown(name)} is not a ServingRuntime name (a DNS-1123 label)")
            if name in BUILTIN_RUNTIME_FORMATS:
                raise SpecError(
                    (name,),
                    f"{shown(name)} is a ClusterServingRuntime KServe installs; a tenant runtime of that name "
                    "would shadow it in the tenant's namespace: choose another name",
                )
        return runtimes

    _object_names = field_validator("instancetypes", "preferences")(check_object_names)

    _names = field_validator("virtual_machines", "notebooks", "model_endpoints", "tenant_clusters")(check_service_names)

    @field_validator("virtual_machines", "notebooks", "model_endpoints", "tenant_clusters")
    @classmethod
    def _derived_names(cls, names: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        longest, why = _DERIVED_NAMES[info.field_name or ""]
        for name in names:
            if len(name) > longest:
                raise SpecError((name,), f"{shown(name)} is {len(name)} characters; at most {longest}: {why}")
        return names

    @field_validator("egress_cidrs")
    @classmethod
    def _cidrs(cls, networks: list[IPv4Network]) -> list[IPv4Network]:
        for index, net in enumerate(networks):
            if net.prefixlen == 0:
                raise SpecError(
                    (index,),
                    f"{shown(str(net))} is the whole internet; use egress: internet, which "
                    "keeps the cell's own networks and instance metadata out",
                )
            if net.overlaps(LINK_LOCAL):
                raise SpecError(
                    (index,),
                    f"{shown(str(net))} overlaps link-local {LINK_LOCAL}, where instance "
                    "metadata (169.254.169.254) is served",
                )
        return networks

    @field_validator("egress_fqdns")
    @classmethod
    def _fqdns(cls, names: list[str]) -> list[str]:
        for index, name in enumerate(names):
            try:
                check_host_name(name.removeprefix("**.").removeprefix("*."))
            except ValueError:
                raise SpecError(
                    (index,),
                    f"{shown(name)} is not a DNS name (a leading *. or **. wildcard is allowed: "
                    "Cilium's *. matches one label, **. any number)",
                ) from None
        return names

    def _runtimes_admitted_together(self) -> None:
        """Raise :class:`SpecError` when KServe's webhook would deny one of the tenant's runtimes next to another:
        both auto-select a format at the same priority and share a protocol (``validateServingRuntimePriority``,
        v0.20.0 ``servingruntime_webhook.go``)."""
        names = list(self.serving_runtimes)
        for later_index, later in enumerate(names):
            for earlier in names[:later_index]:
                a, b = self.serving_runtimes[earlier], self.serving_runtimes[later]
                if not set(a.protocol_versions) & set(b.protocol_versions):
                    continue
                for entry in b.supported_model_formats:
                    clash = any(
                        e.auto_select
                        and entry.auto_select
                        and e.name == entry.name
                        and e.version == entry.version
                        and e.priority is not None
                        and e.priority == entry.priority
                        for e in a.supported_model_formats
                    )
                    if clash:
                        raise SpecError(
                            ("servingRuntimes", later, "supportedModelFormats"),
                            f"{entry.name!r} at priority {entry.priority} is already auto-selected by runtime "
                            f"{earlier} at that priority for the same protocol; KServe's webhook denies the second "
                            "runtime: give them different priorities",
                        )

    def _runtime_exports_vllm_metrics(self, name: str, endpoint: ModelEndpointSpec) -> None:
        """An endpoint scaled on a vLLM metric on a runtime that is not built in: the tenant's, running vLLM's
        OpenAI server (:attr:`ServingRuntimeSpec.runs_vllm`) without an argument that turns its metrics off."""
        metric, runtime = endpoint.scale_metric.value, str(endpoint.runtime)
        own = self.serving_runtimes.get(runtime)
        if own is None or not own.runs_vllm:
            raise SpecError(
                ("modelEndpoints", name, "scaleMetric"),
                f"{metric} is a vLLM metric, which {runtime} does not export; use cpu or memory, or a GPU endpoint "
                f"on {' or '.join(VLLM_RUNTIMES)} (modelFormat huggingface), or a servingRuntime whose container "
                "runs vLLM (command vllm serve or python3 -m vllm.entrypoints.openai.api_server, or image "
                "vllm/vllm-openai)",
            )
        found = no_vllm_metrics(own.args)
        if found is not None:
            index, why = found
            raise SpecError(
                ("servingRuntimes", runtime, "args", index),
                f"{shown(own.args[index])} {why}, so endpoint {name}'s scaleMetric {metric} finds no value and it "
                "never scales; drop the argument, or scale the endpoint on cpu or memory",
            )

    def _isolation(self) -> None:
        """Each notebook and endpoint against the tenant's isolation (:func:`gpucell.spec.isolation.check_isolated`)."""
        for kind, workloads in (("notebooks", self.notebooks), ("modelEndpoints", self.model_endpoints)):
            for name, workload in workloads.items():
                check_isolated(kind, name, workload, workload.isolation, self.isolation)

    @model_validator(mode="after")
    def _egress_and_names(self) -> TenantSpec:
        custom = self.egress is EgressClass.CUSTOM
        if custom and not (self.egress_cidrs or self.egress_fqdns):
            raise SpecError(("egress",), "'custom' needs egressCidrs or egressFqdns")
        internet = self.egress is EgressClass.INTERNET
        if not custom and (self.egress_fqdns or (self.egress_cidrs and not internet)):
            key = "egressFqdns" if self.egress_fqdns else "egressCidrs"
            accepted = "custom" if key == "egressFqdns" else "custom or internet"
            raise SpecError((key,), f"only applies with egress: {accepted} (egress is {self.egress.value})")
        self._runtimes_admitted_together()
        self._isolation()
        for name, endpoint in self.model_endpoints.items():
            runtime = endpoint.runtime
            known = runtime in BUILTIN_RUNTIME_FORMATS or runtime in self.serving_runtimes
            if endpoint.model_format is None and not known:
                raise SpecError(
                    ("modelEndpoints", name, "modelFormat"),
                    f"is required with runtime {shown(runtime)}, which is neither a built-in KServe runtime "
                    f"nor one of the tenant's servingRuntimes ({', '.join(self.serving_runtimes) or 'none'})",
                )
            if endpoint.scale_metric.is_vllm and runtime is not None and runtime not in BUILTIN_RUNTIME_FORMATS:
                self._runtime_exports_vllm_metrics(name, endpoint)
        seen: dict[str, str] = {}
        for kind, names in (
            ("virtualMachines", self.virtual_machines),
            ("notebooks", self.notebooks),
            ("modelEndpoints", self.model_endpoints),
            ("tenantClusters", self.tenant_clusters),
        ):
            for name in names:
                if name in seen:
                    raise SpecError(
                        (kind, name),
                        f"{shown(name)} is already the name of {seen[name]}.{name} in this "
                        "tenant; workload names share the namespace",
                    )
                seen[name] = kind
        for cluster in self.tenant_clusters:
            for name, what in namespace_names(cluster).items():
                taker = seen.get(name)
                if taker is not None and taker != "tenantClusters":
                    raise SpecError(
                        (taker, name),
                        f"{shown(name)} is taken by tenant cluster {cluster} (its {what}) in this tenant; "
                        "workload names share the namespace",
                    )
        return self


def check_tenant_names(tenants: dict[str, TenantSpec]) -> dict[str, TenantSpec]:
    """``tenants`` unchanged when every name is a DNS-1123 label short enough for its namespace ``tenant-<name>``
    (at most 63 characters); raises :class:`SpecError` (path: the name) otherwise."""
    check_names(tenants)
    for name in tenants:
        if len(TENANT_NAMESPACE_PREFIX + name) > 63:
            raise SpecError(
                (name,),
                f"{shown(name)} is too long: the namespace {TENANT_NAMESPACE_PREFIX}{name} would exceed 63 characters",
            )
    return tenants


def check_image_namespaces(names: list[str]) -> list[str]:
    """``names`` unchanged when each is a namespace every tenant may clone golden images from: a DNS-1123 label that
    is neither a tenant's namespace (``tenant-*``) nor a system or platform namespace (:data:`SYSTEM_NAMESPACES`);
    raises :class:`SpecError` (path: the index) otherwise."""
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
