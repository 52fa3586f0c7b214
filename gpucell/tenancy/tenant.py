"""Tenant: one tenant's slice of a regional cell, fenced in by quota, RBAC and default-deny networking.

What is rendered, per tenant and region (namespace ``tenant-<tenant>``, see
:func:`gpucell.spec.tenancy.namespace_of`):

- the ``Namespace``, with Pod Security Admission labels (below);
- a ``ResourceQuota`` ``tenant-quota``: CPU, memory, storage, object counts and every GPU resource of the
  region by name (:func:`quota_hard`);
- a ``ResourceQuota`` ``tenant-priority-classes`` refusing pods that name a PriorityClass the tenant may not use
  (:func:`priority_quota_manifest`);
- a ``LimitRange`` ``tenant-defaults``: what a container gets when it does not say
  (:func:`limit_range_manifest`);
- the ``Role`` objects ``tenant-admin``, ``tenant-member`` and ``tenant-viewer``, gpucell's own, stated rule by rule
  (:mod:`gpucell.tenancy.tenant_roles`), and ``RoleBinding`` objects from the tenant's groups (prefixed with the cell's
  OIDC ``groupsPrefix``) to them (:func:`rbac_manifests`);
- ``CiliumNetworkPolicy`` objects (allow lists inside the cell's cluster-wide deny rules,
  :mod:`gpucell.components.cluster_deny`), one per purpose so that a reviewer reads each on its own:
  ``tenant-default-deny``, ``tenant-deny-link-local``, ``tenant-allow-dns``, ``tenant-allow-intra-tenant`` and
  the egress class's
  ``tenant-allow-egress-*`` (:func:`network_policy_manifests`).
- cluster-scoped ``ValidatingAdmissionPolicy`` objects ``gpucell-tenant-<tenant>-pods``, ``-vms``, ``-services``,
  ``-access``, ``-secrets`` and ``-platform`` with their bindings, bound to the namespace: run-time admission of what
  a tenant member writes with ``kubectl`` (tolerations, node names and selectors, GPU resources and host devices,
  runtime and priority classes, LoadBalancer addresses, the ``kubevirt.io`` pod label, RoleBinding subjects, legacy
  service account tokens, Cluster API's Secrets and gpucell's RoleBindings; :mod:`gpucell.tenancy.tenant_admission`).

Pod Security Admission: ``restricted`` for every tenant, VMs included
---------------------------------------------------------------------
``enforce``, ``warn`` and ``audit`` are ``restricted`` for every tenant namespace, each pinned to the cell's
Kubernetes minor (``v1.34``) so that a k3s upgrade does not silently change what is enforced. VMs pass because
the cell's ``KubeVirt`` CR sets ``configuration.seccompConfiguration.virtualMachineInstanceProfile.customProfile.
runtimeDefaultProfile: true`` (:func:`gpucell.components.kubevirt.kubevirt_spec`). The evidence, read with ``git show
v1.9.0:<path>`` in kubevirt/kubevirt (tag v1.9.0, 79d34c1762169e5b0370ec491cef5ca12e6b504c):

- ``pkg/virt-controller/services/template.go``: the launcher pod's ``seccompProfile`` comes only from
  ``seccompConfiguration`` (``RuntimeDefault`` for ``runtimeDefaultProfile``, ``Localhost`` for
  ``localhostProfile``) and is set at pod level by ``computePodSecurityContext``, covering every container.
  Without it the pod has no profile and ``restricted`` rejects it ("Defaults to none", ``swagger.json``).
- The launcher runs non-root: the VMI mutator marks every VMI non-root unless the ``Root`` gate (Alpha, never
  enabled by gpucell, see :func:`gpucell.components.kubevirt.feature_gates`) is on (``vmi-mutator.go``
  ``markAsNonroot``, ``RuntimeUser = 107``). ``computePodSecurityContext`` then sets ``runAsUser``/``runAsGroup`` 107,
  ``runAsNonRoot: true``, ``fsGroup: 107``.
- Containers (``rendercontainer.go`` ``securityContext``): non-root, ``allowPrivilegeEscalation: false``; the
  compute container drops ``ALL`` and adds only ``NET_BIND_SERVICE`` (``requiredCapabilities``; ``SYS_NICE``
  only for a root launcher), which ``restricted`` allows. The container-disk, hook-sidecar, virtiofs and
  guest-console-log containers are non-root with ``ALL`` dropped. None is privileged or uses host namespaces,
  host ports or sysctls. CPU pinning is done by the kubelet's static CPU manager and virt-handler, not the pod.
- Volumes (``rendervolumes.go``): ``emptyDir`` (hugepages as medium ``HugePages``), PVCs, Secrets, ConfigMaps,
  downward API and ``image`` volumes (container disks; allowed by ``restricted`` since Kubernetes 1.33,
  kubernetes/kubernetes#130394). ``hostPath`` appears only for ``hostDisk`` volumes (the Alpha ``HostDisk``
  gate), which gpucell never enables. GPUs arrive through the device plugin as extended resources, or on ``dra``
  pools as CDI devices of the pod's ResourceClaim.
- What ``restricted`` still rejects, honestly: the trigger pod KubeVirt starts to hotplug a **block-mode** PVC
  into a running VM sets pod ``runAsUser: 0`` (``RenderHotplugAttachmentTriggerPodTemplate``, called from
  ``pkg/virt-controller/watch/vmi/volume-hotplug.go``), so ``virtctl addvolume`` of a block volume fails in a
  tenant namespace (filesystem-mode volumes and every disk gpucell renders are unaffected). So would a
  ``selinuxLauncherType`` outside ``container_t``/``container_kvm_t`` and the ``Root`` gate; gpucell sets neither.
- CDI's importer, uploader and cloner pods in the tenant namespace are restricted by CDI itself
  (``SetRestrictedSecurityContext`` in kubevirt/containerized-data-importer v1.66.0
  ``pkg/controller/common/util.go``).
- KubeVirt's ``PSA`` gate (GA) once made virt-controller relabel a VM's namespace ``enforce: privileged``
  (kubevirt/kubevirt#8436); no code at v1.9.0 labels namespaces (the only ``pod-security.kubernetes.io`` label
  in the tree is the ``kubevirt`` namespace's own, in the release manifest). Should a release do it, Pulumi shows
  the label drift at the next ``pulumi preview``.

The cell-wide default (the k3s CIS profile's ``PodSecurityConfiguration``, :mod:`gpucell.k3s.hardening`) is
``restricted`` too, so a namespace a tenant's admin cannot create anyway would not be looser either.

Notebooks and KServe predictors are rendered ``restricted`` by their modules (pod
``seccompProfile: RuntimeDefault``, non-root, no privilege escalation, capabilities dropped). KServe's
storage-initializer container is ``runAsNonRoot``, drops ``ALL`` and forbids escalation by default
(``storageInitializer.containerSecurityContext`` in the kserve-resources v0.20.0 values); the pod-level
seccomp profile covers it. CDI's importer/cloner pods in the tenant namespace are made restricted by CDI
itself (``SetRestrictedSecurityContext`` in kubevirt/containerized-data-importer).

Networking
----------
Cilium puts an endpoint into default-deny for a direction as soon as a policy selecting it has a rule in that
direction ("Policy Enforcement Modes", docs.cilium.io). ``tenant-default-deny`` selects every endpoint of the
namespace (``endpointSelector: {}``) and says so twice: ``enableDefaultDeny`` ``{ingress: true, egress:
true}`` (the ``cilium.io/v2`` field; Cilium's ``Rule.Sanitize`` fills it from the rule sections when absent)
and one empty rule per direction (``ingress: [{}]``, ``egress: [{}]``, as in Cilium's own
``examples/policies/l3/egress-default-deny``): a rule without peers or ports allows nothing, and the CRD
refuses a policy with none of ``ingress``/``ingressDeny``/``egress``/``egressDeny``. It uses no
``ingressDeny``/``egressDeny``, because deny rules win over every allow, including the ones a workload adds
to expose itself. The one deny is ``tenant-deny-link-local``: ``egressDeny`` to ``169.254.0.0/16``, where
clouds and bare-metal stacks serve instance metadata (``169.254.169.254``), so no allow can ever reach it
(Cilium: "Any rule inserted here will be denied regardless of the allowed egress rules"). Allow policies then
add up:

- ``tenant-allow-dns``: UDP and TCP 53 to ``kube-dns`` in ``kube-system``, with ``rules.dns`` ``matchPattern:
  "*"`` so that the DNS proxy sees every lookup and ``toFQDNs`` rules can match;
- ``tenant-allow-intra-tenant``: ingress from and egress to endpoints of the tenant namespace;
- ``tenant-allow-image-clones``, for a tenant an image catalog lists: ingress to the tenant's CDI upload servers
  from the catalogs' clone source pods, on 8443 (:func:`image_clone_policy`);
- the egress class: ``none`` adds nothing; ``cluster`` adds the Kubernetes API server (entity
  ``kube-apiserver``, and the API endpoint's address on the API port when ``apiEndpoint`` is an address; every
  request is still authenticated and authorised by RBAC) and endpoints in namespaces labelled
  ``gpucell.io/platform-services: "true"``; ``internet`` adds what ``cluster`` does plus ``0.0.0.0/0``
  *except* link-local ``169.254.0.0/16`` and the cell's node, pod and service CIDRs (``toCIDRSet`` with
  ``except``). Cilium's ``world`` entity is "identical to allowing to CIDR 0.0.0.0/0": it includes the
  metadata address, the API VIP and every non-node host on the node network (BMCs, switches, storage), which is
  why ``internet`` is not ``toEntities: [world]``. ``custom`` adds ``toCIDRSet`` ``egressCidrs`` (refused at plan
  time when they overlap link-local, the cell's networks or the API endpoint) and ``toFQDNs`` ``egressFqdns``
  (``*.`` names as ``matchPattern``), as two policies because ``toFQDNs`` cannot share a rule with other ``to*``
  peers. IPv6 is out of scope: the cell is IPv4-only.

Those allow lists are not the fence: Cilium also adds the allows of any other policy selecting a tenant's pods (a
``NetworkPolicy`` with ``egress: [{}]``, a ``CiliumNetworkPolicy`` to ``world``). What a tenant must never reach is
denied cluster-wide by :class:`gpucell.components.cluster_deny.ClusterDeny` (the platform's
``CiliumClusterwideNetworkPolicy`` objects, which the tenant's policies come after): every node but on the API servers'
port, the cell's node, pod and service networks, the other cells, the private ranges but the tenant's ``egressCidrs``,
and every pod of the platform namespaces but CoreDNS, whatever allow exists (docs/decisions/0031-cluster-wide-deny.md).
A platform namespace labelled ``gpucell.io/platform-services`` therefore stays closed; the label opens namespaces of the
operator's own.

Platform services are an explicit label rather than a namespace list because the obvious candidate,
``kube-system``, also serves Hubble Relay (enabled by :mod:`gpucell.components.cilium`), which would let a tenant read
every other tenant's flows. Namespace labels cannot be set by a tenant (no tenant role may update the Namespace
object), and Cilium ignores pod labels that imitate namespace labels since
1.14.2 (CVE-2023-39347). No other tenant is reachable in any class: tenant namespaces never carry the platform
label, and CIDR rules only match addresses outside the cluster (Cilium's default ``policyCIDRMatchMode``).
Ingress from outside the tenant (an ingress controller, a NodePort, an SSH LoadBalancer) is what each workload
declares and renders itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal, Protocol

import pulumi
from pulumi_kubernetes.admissionregistration.v1 import ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding
from pulumi_kubernetes.core.v1 import LimitRange, Namespace, ResourceQuota
from pulumi_kubernetes.rbac.v1 import Role, RoleBinding

from gpucell._component import CellComponent
from gpucell.admission.dra import CLAIMS_QUOTA_KEY, DEVICE_CLASSES, quota_key
from gpucell.admission.fabric import nic_quota
from gpucell.admission.inventory import capacity, dra_offers, gpu_offers, nvswitch_quota
from gpucell.admission.tenants import ClusterFacts
from gpucell.admission.vm_rules import catalog_tenants
from gpucell.cluster import Cluster, listen_port
from gpucell.components.instancetypes import Instancetypes, InstancetypesArgs
from gpucell.errors import ConfigError
from gpucell.platform import Platform
from gpucell.spec.gpu_models import gpu_catalog
from gpucell.spec.identity import OidcSpec
from gpucell.spec.isolation import Isolation
from gpucell.spec.lifecycle import RemovalPolicy, removal_options
from gpucell.spec.scheduling import allowed_classes
from gpucell.spec.tenancy import LINK_LOCAL, PRIVATE_RANGES, EgressClass, TenantSpec, namespace_of
from gpucell.tenancy._common import (
    DNS_SELECTOR,
    MANAGED_BY,
    NAMESPACE_KEY,
    TENANT_LABEL,
    cilium_network_policy,
    common_labels,
    custom_resource,
    object_meta,
)
from gpucell.tenancy.tenant_admission import admission_manifests
from gpucell.tenancy.tenant_roles import TENANT_ROLES, role_manifest

if TYPE_CHECKING:
    from gpucell.cell import RegionalCell
    from gpucell.spec.tenant_clusters import TenantClusterSpec
    from gpucell.spec.workloads import GpuVirtualMachineSpec, ModelEndpointSpec, NotebookSpec

__all__ = [
    "AUTO_MEMORY_LIMITS_RATIO",
    "DNS_SELECTOR",
    "MANAGED_BY",
    "PLATFORM_SERVICES_LABEL",
    "POD_SECURITY_PREFIX",
    "PRIORITY_QUOTA",
    "PRIVATE_RANGES",
    "TENANT_LABEL",
    "TENANT_POD_SECURITY",
    "PodSecurityLevel",
    "Tenant",
    "TenantArgs",
    "TenantRef",
    "TenantView",
    "admit",
    "admit_workload",
    "common_labels",
    "egress_policy_names",
    "gpu_resources",
    "image_clone_policy",
    "internet_exceptions",
    "limit_range_manifest",
    "namespace_labels",
    "namespace_manifest",
    "network_policy_manifests",
    "priority_quota_manifest",
    "quota_hard",
    "rbac_manifests",
    "resource_quota_manifest",
]

POD_SECURITY_PREFIX = "pod-security.kubernetes.io/"
"""Prefix of the Pod Security Admission namespace labels (``enforce``, ``enforce-version``, ``warn``...)."""
PLATFORM_SERVICES_LABEL = "gpucell.io/platform-services"
"""Namespace label (value ``"true"``) marking the shared services ``cluster`` egress may reach."""
RBAC_GROUP = "rbac.authorization.k8s.io"


class PodSecurityLevel(StrEnum):
    """Pod Security Standards levels (kubernetes.io/docs/concepts/security/pod-security-standards)."""

    PRIVILEGED = "privileged"
    BASELINE = "baseline"
    RESTRICTED = "restricted"


@dataclass(frozen=True)
class TenantArgs:
    """Inputs of :class:`Tenant`: the tenant, the cluster it lives on, that cluster's facts and its platform.

    On a gpucell cell use :meth:`from_cell`; on a cluster gpucell did not build, give the handle
    (:meth:`gpucell.cluster.Cluster.from_kubeconfig`), its :class:`~gpucell.admission.tenants.ClusterFacts` and the
    platform components this program installs there (:class:`~gpucell.platform.Platform`).
    """

    name: str
    """Tenant key in the config (``acme``); the namespace is ``tenant-<name>``."""
    spec: TenantSpec
    """The tenant, validated: quota, limits, groups, egress, removal policy (and the workloads it declares, admitted
    with it)."""
    cluster: Cluster
    """The cluster the tenant lives on: every object of the tenant and its workloads goes to its provider, after its
    ``ready``; its Kubernetes minor pins the namespace's Pod Security labels."""
    facts: ClusterFacts
    """What the tenant is admitted against (GPU inventory, the other tenants' quotas, networks, classes...) and its
    objects are rendered from (GPU resources, egress exceptions, OIDC group names, placement)."""
    platform: Platform = field(default_factory=Platform)
    """The platform components its objects wait for (KubeVirt, CDI, Cilium, the GPU Operator...). Defaults to none."""

    @classmethod
    def from_cell(cls, name: str, spec: TenantSpec, cell: RegionalCell) -> TenantArgs:
        """Tenant ``name`` of ``spec`` on a gpucell cell: admitted against the cell's whole spec as a tenant in stack
        config is (:meth:`gpucell.spec.cell.CellSpec.with_tenant`; raises :class:`~gpucell.errors.ConfigError` with
        ``tenants.<name>...`` key paths), on the cell's provider and Kubernetes minor, with the cell's facts and
        platform. The cell orders tenants through its platform (KubeVirt, Cilium), not through ``cell.cluster.ready``.
        """
        admitted = cell.spec.with_tenant(name, spec)
        for endpoint, declared in spec.model_endpoints.items():
            if declared.scale_metric.is_vllm and cell.keda is None:
                raise ConfigError.at(
                    ("tenants", name, "modelEndpoints", endpoint, "scaleMetric"),
                    f"{declared.scale_metric.value} needs KEDA, which the cell installs only when its own spec has "
                    "an endpoint scaled on a vLLM metric; declare the tenant in the cell's spec, or scale on cpu or "
                    "memory",
                )
        return cls(
            name, spec, dataclasses.replace(cell.cluster, ready=()), ClusterFacts.from_cell(admitted), cell.platform
        )


class TenantView(Protocol):
    """What a workload reads of its tenant: a :class:`Tenant`, or a :class:`TenantRef` to one built elsewhere."""

    @property
    def name(self) -> str:
        """Tenant key (``acme``): the namespace is ``tenant-<name>``."""

    @property
    def cluster(self) -> Cluster | None:
        """The cluster the tenant lives on; ``None``: the workload's provider comes from its own ``opts``."""

    @property
    def facts(self) -> ClusterFacts:
        """What the workload is placed on and rendered with (GPU inventory, taints, KServe release...)."""

    @property
    def platform(self) -> Platform:
        """The platform components the workload waits for."""

    @property
    def ready(self) -> Sequence[pulumi.Resource]:
        """What the workload's objects come after (the namespace, quota, RBAC, policies)."""

    @property
    def removal_policy(self) -> RemovalPolicy:
        """The default ``removalPolicy`` of the tenant's VMs and notebooks."""


@dataclass(frozen=True)
class TenantRef:
    """A tenant built elsewhere (another program, another stack, the component package's ``Tenant``) as its workloads
    see it; nothing of it is registered. Give the workloads ``depends_on`` its objects, or list them in
    :attr:`ready`."""

    name: str
    """Tenant key (``acme``): its namespace ``tenant-acme`` must exist."""
    facts: ClusterFacts
    """The cluster's facts, the tenant among its ``tenants``."""
    cluster: Cluster | None = None
    """The cluster; ``None`` (default): each workload's provider comes from its own ``opts``."""
    platform: Platform = field(default_factory=Platform)
    """The platform components the workloads wait for. Defaults to none."""
    ready: Sequence[pulumi.Resource] = ()
    """What the workloads' objects come after. Defaults to nothing."""
    removal_policy: RemovalPolicy = RemovalPolicy.PROTECT
    """The default ``removalPolicy`` of its VMs and notebooks: ``protect`` unless said otherwise."""


TENANT_POD_SECURITY = PodSecurityLevel.RESTRICTED
"""What every tenant namespace enforces, warns about and audits, VMs included (see the module doc)."""


AUTO_MEMORY_LIMITS_RATIO = {"alpha.kubevirt.io/auto-memory-limits-ratio": "1.0"}
"""Namespace label making the memory limit KubeVirt sets on a VM's launcher pod equal its request (default: twice;
KubeVirt v1.9.0 ``AutoMemoryLimitsRatioLabel``, ``getMemoryLimitsRatio`` in ``pkg/virt-controller/services/
renderresources.go``). KubeVirt sets that limit when the namespace's ResourceQuota has ``limits.memory`` and the VM
gives none, as a VM sized by an instancetype must (KubeVirt refuses its own ``resources``): the quota then counts
its memory once, as admission does."""


def namespace_labels(tenant: str, kubernetes_minor: str) -> dict[str, str]:
    """Labels of the tenant namespace: common labels, :data:`AUTO_MEMORY_LIMITS_RATIO`, and the PSA modes
    ``enforce``, ``warn`` and ``audit``, each :data:`TENANT_POD_SECURITY` (``restricted``) pinned to
    ``v<kubernetes_minor>`` (``v1.34``)."""
    version = f"v{kubernetes_minor}"
    labels = {**common_labels(tenant), **AUTO_MEMORY_LIMITS_RATIO}
    for mode in ("enforce", "warn", "audit"):
        labels[f"{POD_SECURITY_PREFIX}{mode}"] = TENANT_POD_SECURITY.value
        labels[f"{POD_SECURITY_PREFIX}{mode}-version"] = version
    return labels


def namespace_manifest(tenant: str, kubernetes_minor: str) -> dict[str, Any]:
    """The ``v1`` ``Namespace`` ``tenant-<tenant>`` with :func:`namespace_labels` (Pod Security pinned to
    ``v<kubernetes_minor>``)."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": namespace_of(tenant),
            "labels": namespace_labels(tenant, kubernetes_minor),
        },
    }


def gpu_resources(spec: TenantSpec, facts: ClusterFacts) -> list[str]:
    """Every GPU extended resource the cluster's pools advertise, plus any the quota names, sorted."""
    offered = capacity(gpu_offers(facts.node_pools, facts.effective_mig_strategy.value))
    return sorted({*offered, *spec.quota.gpus})


def quota_hard(spec: TenantSpec, facts: ClusterFacts) -> dict[str, str]:
    """``spec.hard`` of the tenant's ResourceQuota; every quantity a string.

    CPU as millicores (``"16000m"``) and memory as GiB (``"64Gi"``), each for requests and limits;
    ``requests.storage``, ``requests.``/``limits.ephemeral-storage`` and ``requests.hugepages-1Gi``/``-2Mi``
    (``hugepagesGib``, else ``memoryGib``) in GiB; counts of pods, PVCs, Services, node ports
    (``services.nodeports``: every port of a NodePort Service, Kubernetes
    ``pkg/quota/v1/evaluator/core/services.go``) and LoadBalancer Services; and
    ``requests.<resource>`` for every GPU resource of :func:`gpu_resources`, the quota's units or ``"0"``: a
    resource the quota does not list would otherwise be unlimited, so an ungranted GPU kind is pinned to zero.
    HGX NVSwitches (``requests.nvidia.com/GH100_H100_NVSWITCH``) are derived, not declared: the NVSwitches of as many
    whole boards as the quota's passthrough GPUs of that model cover
    (:func:`gpucell.admission.inventory.nvswitch_quota`); so are the RDMA NICs' VFs of each fabric rail
    (``requests.nvidia.com/<pool>_rail<i>``, :func:`gpucell.admission.fabric.nic_quota`: one per host the quota's GPUs
    of that pool cover, 0 without ``fabricVlan``). Extended resources only take the ``requests.`` prefix in a
    quota (Kubernetes "Resource Quotas").

    In a region with ``dra`` pools: ``<class>.deviceclass.resource.k8s.io/devices`` for every DeviceClass of the DRA
    driver (:data:`gpucell.admission.dra.DEVICE_CLASSES`), ``quota.deviceClasses``' devices or ``"0"``, and
    ``count/resourceclaims.resource.k8s.io``, the sum of those devices (each claim holds at least one device; 0
    claims for a tenant without DRA quota, whatever class a claim names). KEP-4381 "ResourceQuota".
    """
    quota = spec.quota
    hugepages = quota.memory_gib if quota.hugepages_gib is None else quota.hugepages_gib
    hard = {
        "requests.cpu": f"{quota.cpu_millicores}m",
        "limits.cpu": f"{quota.cpu_millicores}m",
        "requests.memory": f"{quota.memory_gib}Gi",
        "limits.memory": f"{quota.memory_gib}Gi",
        "requests.storage": f"{quota.storage_gib}Gi",
        "requests.ephemeral-storage": f"{quota.ephemeral_storage_gib}Gi",
        "limits.ephemeral-storage": f"{quota.ephemeral_storage_gib}Gi",
        "requests.hugepages-1Gi": f"{hugepages}Gi",
        "requests.hugepages-2Mi": f"{hugepages}Gi",
        "pods": str(quota.pods),
        "persistentvolumeclaims": str(quota.persistent_volume_claims),
        "services": str(quota.services),
        "services.nodeports": str(quota.node_ports),
        "services.loadbalancers": str(quota.load_balancers),
    }
    for resource in gpu_resources(spec, facts):
        hard[f"requests.{resource}"] = str(quota.gpus.get(resource, 0))
    for resource, units in nvswitch_quota(quota.gpus, facts.node_pools).items():
        hard[f"requests.{resource}"] = str(units)
    for resource, units in nic_quota(quota.gpus, spec.fabric_vlan, facts.node_pools).items():
        hard[f"requests.{resource}"] = str(units)
    if dra_offers(facts.node_pools):
        for device_class in sorted({*DEVICE_CLASSES, *quota.device_classes}):
            hard[quota_key(device_class)] = str(quota.device_classes.get(device_class, 0))
        hard[CLAIMS_QUOTA_KEY] = str(sum(quota.device_classes.values()))
    return hard


def resource_quota_manifest(tenant: str, spec: TenantSpec, facts: ClusterFacts) -> dict[str, Any]:
    """The ``ResourceQuota`` ``tenant-quota`` with :func:`quota_hard`.

    With ``limits.cpu``/``limits.memory`` in the quota, KubeVirt sets the launcher pod's limits itself when a
    VM gives none (``AutoResourceLimitsGate``, GA since v1.5: memory limit = 2 x requests, per-namespace label
    ``alpha.kubevirt.io/auto-memory-limits-ratio``).
    """
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": object_meta(tenant, "tenant-quota"),
        "spec": {"hard": quota_hard(spec, facts)},
    }


PRIORITY_QUOTA = "tenant-priority-classes"
"""The ResourceQuota fencing the tenant's pods off the PriorityClasses it may not name."""


def priority_quota_manifest(tenant: str, allowed: Sequence[str]) -> dict[str, Any]:
    """The ``ResourceQuota`` :data:`PRIORITY_QUOTA`: ``pods: "0"`` for the pods that name a PriorityClass other than
    ``allowed`` (scope selector ``PriorityClass Exists`` and, with ``allowed``, ``PriorityClass NotIn allowed``: the
    expressions are ANDed), so the API server refuses such a pod in the tenant's namespace ("exceeded quota"),
    ``system-node-critical`` and ``system-cluster-critical`` included (Kubernetes "Resource Quotas", "Quota scopes"
    and "Limit Priority Class consumption by default"). Pods naming no class are not matched."""
    expressions: list[dict[str, Any]] = [{"scopeName": "PriorityClass", "operator": "Exists"}]
    if allowed:
        expressions.append({"scopeName": "PriorityClass", "operator": "NotIn", "values": list(allowed)})
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": object_meta(tenant, PRIORITY_QUOTA),
        "spec": {"hard": {"pods": "0"}, "scopeSelector": {"matchExpressions": expressions}},
    }


def limit_range_manifest(tenant: str, spec: TenantSpec) -> dict[str, Any]:
    """The ``LimitRange`` ``tenant-defaults``: container ``default`` (limits) and ``defaultRequest``.

    The quota counts limits, so a container without them would be refused; these defaults fill them in
    (CPU in millicores, memory and ephemeral storage in MiB; ephemeral storage is requested at an eighth of its
    limit).
    """
    limits = spec.limits
    default = {"cpu": f"{limits.default_cpu_millicores}m", "memory": f"{limits.default_memory_mib}Mi"}
    ephemeral = limits.default_ephemeral_storage_mib
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": object_meta(tenant, "tenant-defaults"),
        "spec": {
            "limits": [
                {
                    "type": "Container",
                    "default": {**default, "ephemeral-storage": f"{ephemeral}Mi"},
                    "defaultRequest": {**default, "ephemeral-storage": f"{ephemeral // 8}Mi"},
                },
            ]
        },
    }


def _groups(groups: Sequence[str], oidc: OidcSpec | None) -> list[dict[str, str]]:
    return [{"kind": "Group", "apiGroup": RBAC_GROUP, "name": oidc.group(g) if oidc else g} for g in groups]


def _binding(
    tenant: str, name: str, role_kind: str, role: str, groups: Sequence[str], *, oidc: OidcSpec | None
) -> dict[str, Any]:
    return {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": "RoleBinding",
        "metadata": object_meta(tenant, name),
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": role_kind, "name": role},
        "subjects": _groups(groups, oidc),
    }


def rbac_manifests(tenant: str, spec: TenantSpec, oidc: OidcSpec | None = None) -> list[dict[str, Any]]:
    """The tenant's Roles and RoleBindings: the ``Role`` objects ``tenant-admin``, ``tenant-member`` and
    ``tenant-viewer`` (:func:`gpucell.tenancy.tenant_roles.role_manifest`, always: a tenant admin may bind them), then
    the RoleBindings ``tenant-admins``/``tenant-members``/``tenant-viewers`` from ``groups.admins``/``members``/
    ``viewers`` to them (:data:`gpucell.tenancy.tenant_roles.TENANT_ROLES`), subjects ``kind: Group``; a binding without
    groups is left out. An isolated-only tenant's (``isolation.default: vm``) Roles have no ``pods/exec`` nor
    ``pods/attach`` (:attr:`gpucell.tenancy.tenant_roles.Right.isolated_tenants`).

    With ``oidc`` (the cell's identity provider), each group is the name the API server gives the token's group:
    ``<groupsPrefix><group>`` (``oidc:acme-ml``), so only tokens of that issuer match.
    """
    isolated_only = spec.isolation.default is Isolation.VM
    out = [role_manifest(tenant, role, isolated_only=isolated_only) for role in TENANT_ROLES.values()]
    for key, role in TENANT_ROLES.items():
        members: list[str] = getattr(spec.groups, key)
        if members:
            out.append(_binding(tenant, f"tenant-{key}", "Role", role, members, oidc=oidc))
    return out


def _policy(tenant: str, name: str, description: str, rules: dict[str, Any]) -> dict[str, Any]:
    """A policy of the tenant selecting every endpoint of its namespace."""
    return cilium_network_policy(object_meta(tenant, name), rules, description=description)


def _egress_cluster(facts: ClusterFacts) -> list[dict[str, Any]]:
    platform = {f"k8s:io.cilium.k8s.namespace.labels.{PLATFORM_SERVICES_LABEL}": "true"}
    # the API server's own port only: on k3s the kube-apiserver entity is the server nodes, whose SSH, etcd and
    # kubelet ports an entity rule without toPorts would open too (the Service's 443 is translated to it first)
    rules: list[dict[str, Any]] = [
        {
            "toEntities": ["kube-apiserver"],
            "toPorts": [{"ports": [{"port": str(listen_port(facts.network)), "protocol": "TCP"}]}],
        }
    ]
    api = facts.network.api_address
    if api is not None:  # the VIP or load balancer address, on the API port only
        rules.append(
            {
                "toCIDRSet": [{"cidr": f"{api}/32"}],
                "toPorts": [{"ports": [{"port": str(facts.network.api_port), "protocol": "TCP"}]}],
            }
        )
    return [*rules, {"toEndpoints": [{"matchLabels": platform}]}]


def internet_exceptions(facts: ClusterFacts) -> list[str]:
    """What ``internet`` egress leaves out of ``0.0.0.0/0``: link-local (instance metadata), the private ranges
    (:data:`PRIVATE_RANGES`: other regions' cells and the operator's networks), and the cell's node, pod and
    service CIDRs where they are outside those (the node network holds the API VIP, BMCs and storage; in-cluster
    pods and nodes are Cilium identities, never CIDR matches, so listing their networks only keeps addresses
    Cilium does not know about out too). ``egressCidrs`` of an ``internet`` tenant reopen private networks in a
    policy of their own (Cilium allows what any policy allows)."""
    net = facts.network
    private = [LINK_LOCAL, *PRIVATE_RANGES]
    own = [n for n in (net.node_cidr, net.pod_cidr, net.service_cidr) if not any(n.subnet_of(p) for p in private)]
    return [str(n) for n in (*private, *own)]


def egress_policy_names(spec: TenantSpec) -> list[str]:
    """Names of the egress-class policies :func:`network_policy_manifests` renders for ``spec.egress``."""
    match spec.egress:
        case EgressClass.NONE:
            return []
        case EgressClass.CLUSTER:
            return ["tenant-allow-egress-cluster"]
        case EgressClass.INTERNET:
            reopened = ["tenant-allow-egress-cidrs"] if spec.egress_cidrs else []
            return ["tenant-allow-egress-cluster", "tenant-allow-egress-internet", *reopened]
        case EgressClass.CUSTOM:
            return [
                name
                for name, given in (
                    ("tenant-allow-egress-cidrs", spec.egress_cidrs),
                    ("tenant-allow-egress-fqdns", spec.egress_fqdns),
                )
                if given
            ]


def network_policy_manifests(tenant: str, spec: TenantSpec, facts: ClusterFacts) -> list[dict[str, Any]]:
    """The tenant's ``cilium.io/v2`` ``CiliumNetworkPolicy`` objects, in order (semantics in the module doc).

    ``tenant-default-deny``, ``tenant-deny-link-local``, ``tenant-allow-dns``, ``tenant-allow-intra-tenant``,
    then :func:`egress_policy_names` of the egress class. Every policy selects all endpoints of the namespace;
    ``facts`` give the networks ``internet`` leaves out and the API endpoint ``cluster`` reaches.
    """
    own = {"matchLabels": {NAMESPACE_KEY: namespace_of(tenant)}}
    policies = [
        _policy(
            tenant,
            "tenant-default-deny",
            "Default deny: nothing in or out unless a policy allows it",
            {"enableDefaultDeny": {"ingress": True, "egress": True}, "ingress": [{}], "egress": [{}]},
        ),
        _policy(
            tenant,
            "tenant-deny-link-local",
            "Never link-local addresses (instance metadata at 169.254.169.254), whatever another policy allows",
            {"egressDeny": [{"toCIDRSet": [{"cidr": str(LINK_LOCAL)}]}]},
        ),
        _policy(
            tenant,
            "tenant-allow-dns",
            "DNS to kube-dns, through the DNS proxy so toFQDNs rules match",
            {
                "egress": [
                    {
                        "toEndpoints": [{"matchLabels": dict(DNS_SELECTOR)}],
                        "toPorts": [
                            {
                                "ports": [{"port": "53", "protocol": "UDP"}, {"port": "53", "protocol": "TCP"}],
                                "rules": {"dns": [{"matchPattern": "*"}]},
                            }
                        ],
                    }
                ],
            },
        ),
        _policy(
            tenant,
            "tenant-allow-intra-tenant",
            "Traffic between the tenant's own pods and VMs",
            {"ingress": [{"fromEndpoints": [own]}], "egress": [{"toEndpoints": [own]}]},
        ),
    ]
    bodies: dict[str, tuple[str, list[dict[str, Any]]]] = {
        "tenant-allow-egress-cluster": (
            f"Egress class cluster: the Kubernetes API and namespaces labelled {PLATFORM_SERVICES_LABEL}",
            _egress_cluster(facts),
        ),
        "tenant-allow-egress-internet": (
            "Egress class internet: outside the cell, never link-local or the cell's node, pod and service networks",
            [{"toCIDRSet": [{"cidr": "0.0.0.0/0", "except": internet_exceptions(facts)}]}],
        ),
        "tenant-allow-egress-cidrs": (
            f"Egress class {spec.egress.value}: the tenant's egressCidrs",
            [{"toCIDRSet": [{"cidr": str(net)} for net in spec.egress_cidrs]}],
        ),
        "tenant-allow-egress-fqdns": (
            "Egress class custom: the tenant's egressFqdns",
            [
                {
                    "toFQDNs": [
                        {"matchPattern": fqdn} if fqdn.startswith(("*.", "**.")) else {"matchName": fqdn}
                        for fqdn in spec.egress_fqdns
                    ]
                }
            ],
        ),
    }
    for name in egress_policy_names(spec):
        description, egress = bodies[name]
        policies.append(_policy(tenant, name, description, {"egress": egress}))
    clones = image_clone_policy(tenant, facts)
    return policies if clones is None else [*policies, clones]


CDI_COMPONENT_LABEL = "cdi.kubevirt.io"
"""The label CDI puts on its pods, naming the part (kubevirt/containerized-data-importer v1.66.0
``pkg/common/common.go`` ``CDIComponentLabel``): ``cdi-upload-server`` on the upload server a host-assisted clone writes
into, ``cdi-clone-source`` on the pod that reads the source (``UploadServerCDILabel``, ``ClonerSourcePodName``)."""
CDI_UPLOAD_PORT = 8443
"""The upload server's port (``UploadServerPort``)."""


def image_clone_policy(tenant: str, facts: ClusterFacts) -> dict[str, Any] | None:
    """``tenant-allow-image-clones``: ingress to the tenant's CDI upload server pods on 8443 from the clone source pods
    of each image catalog that lists the tenant; ``None`` when none does.

    A clone CDI cannot do inside the storage (a CSI clone or snapshot of the same class; always on ``local-path``) is
    host-assisted: a ``cdi-clone-source`` pod in the catalog's namespace streams the image to a
    ``cdi-upload-server`` pod in the tenant's, which the tenant's default deny would drop
    (``clone-controller.go``: ``GetUploadServerURL(targetPvc.Namespace, ...)``).
    """
    platform = facts.vm_platform
    catalogs = [name for name in facts.image_catalogs if tenant in catalog_tenants(platform, name)]
    if not catalogs:
        return None
    sources = [
        {"matchLabels": {NAMESPACE_KEY: catalog, f"k8s:{CDI_COMPONENT_LABEL}": "cdi-clone-source"}}
        for catalog in catalogs
    ]
    ports = [{"ports": [{"port": str(CDI_UPLOAD_PORT), "protocol": "TCP"}]}]
    return cilium_network_policy(
        object_meta(tenant, "tenant-allow-image-clones"),
        {"ingress": [{"fromEndpoints": sources, "toPorts": ports}]},
        match_labels={CDI_COMPONENT_LABEL: "cdi-upload-server"},
        description="Host-assisted clones of the image catalogs' golden images into the tenant's CDI upload servers",
    )


def _child_name(component: str, obj: dict[str, Any]) -> str:
    """Pulumi name of a rendered object: ``<component>-<metadata.name without tenant->``."""
    return f"{component}-{obj['metadata']['name'].removeprefix('tenant-')}"


def admit(tenant: str, spec: TenantSpec, facts: ClusterFacts) -> ClusterFacts:
    """Run the admission rules on ``spec`` as tenant ``tenant`` of the cluster ``facts`` describe; return the facts
    with the tenant.

    Stack config is admitted when it is validated; a tenant built from Python with a spec the facts do not already
    hold gets the same checks here (placement, quotas against the cluster's pools and its other tenants, egress,
    LoadBalancer pools and addresses, group names). Raises :class:`gpucell.errors.ConfigError` with
    ``tenants.<tenant>...`` key paths.
    """
    if facts.tenants.get(tenant) == spec:
        return facts
    return _with_tenant(facts, tenant, spec)


WorkloadKind = Literal["virtual_machines", "notebooks", "model_endpoints", "tenant_clusters"]
"""The :class:`~gpucell.spec.tenancy.TenantSpec` field a workload is declared in."""


def admit_workload(
    tenant: TenantView,
    kind: WorkloadKind,
    name: str,
    spec: GpuVirtualMachineSpec | NotebookSpec | ModelEndpointSpec | TenantClusterSpec,
) -> ClusterFacts:
    """The facts a workload is placed and rendered with: ``tenant.facts`` when its tenant's spec already declares it
    as given (stack config, admitted with the cell), else those facts with the workload added to its tenant's
    spec and admitted as stack config is (placement, the tenant's quota with its other workloads, DRA pools...).

    Raises :class:`gpucell.errors.ConfigError` with ``tenants.<tenant>.<kind>.<name>...`` key paths, also when the
    facts do not hold the tenant.
    """
    facts = tenant.facts
    own = facts.tenants.get(tenant.name)
    if own is None:
        raise ConfigError.at(
            ("tenants", tenant.name),
            "is not a tenant of the cluster's facts; build its Tenant first, or list it in ClusterFacts.tenants",
        )
    declared: dict[str, Any] = getattr(own, kind)
    if declared.get(name) == spec:
        return facts
    fields = {key: getattr(own, key) for key in TenantSpec.model_fields}
    return _with_tenant(facts, tenant.name, {**fields, kind: {**declared, name: spec}})


def _with_tenant(facts: ClusterFacts, tenant: str, spec: TenantSpec | dict[str, Any]) -> ClusterFacts:
    """``facts`` with ``tenant`` of ``spec`` among its tenants, validated (raises ConfigError)."""
    fields = {key: getattr(facts, key) for key in ClusterFacts.model_fields}
    with gpu_catalog(facts.gpu_catalog):  # the models the facts were validated with, the stack's own among them
        return ClusterFacts.model_validate({**fields, "tenants": {**facts.tenants, tenant: spec}})


def _check_backup_scheduled(args: TenantArgs) -> None:
    """Raise :class:`ConfigError` when the tenant asks for ``backup`` and no :class:`gpucell.components.backups.Backups`
    of its platform renders its ``Schedule``: the tenant would believe it is backed up and is not."""
    if args.spec.backup is None:
        return
    backups = args.platform.backups
    if backups is None or args.name not in backups.scheduled:
        raise ConfigError(
            [
                f"tenants.{args.name}.backup: no Backups component of this cluster schedules it "
                f"({'Platform.backups is None' if backups is None else 'not in its BackupsArgs.tenants'}), so the "
                "tenant would have no backups; pass Backups(..., BackupsArgs(tenants={...})) holding it as "
                "Platform(backups=...), or drop backup"
            ]
        )


class Tenant(CellComponent):
    """One tenant on one cluster: namespace, quota, limit defaults, RBAC and Cilium policies.

    Children (Pulumi names from the component name ``name``): ``{name}-namespace``, ``{name}-quota``,
    ``{name}-priority-quota``,
    ``{name}-limits``, ``{name}-admin-role``/``-member-role``/``-viewer-role`` (the Roles),
    ``{name}-admins``/``-members``/``-viewers`` (their bindings), and ``{name}-default-deny``,
    ``{name}-allow-dns``... (the policy names without ``tenant-``), ``{name}-admission-pods``/``-vms``/``-services``/
    ``-access``/``-secrets``/``-platform`` and their ``-binding``. They use the provider of ``args.cluster``
    (merged into ``opts``, after its ``ready``); the namespace depends on the platform's ``KubeVirt`` CR (its seccomp
    profile lets VM launchers pass ``restricted``), every namespaced child on the namespace, and the Cilium policies
    also on the platform's Cilium (which installs their CRD). Workloads depend on :attr:`ready`. Every child but the
    Roles and RoleBindings takes the tenant's ``removalPolicy`` (``protect`` by default): removing a protected tenant
    from the config is refused before anything of it is deleted (Pulumi refuses the whole deletion phase). The Roles
    and bindings are never protected: they hold no data, and deleting one only takes rights away.

    The spec is admitted against ``args.facts`` before anything is registered (:func:`admit`); raises
    :class:`~gpucell.errors.ConfigError` with ``tenants.<name>...`` key paths. The cluster must run Cilium (the
    tenant's isolation is ``CiliumNetworkPolicy`` objects) and, for VMs, KubeVirt with
    ``seccompConfiguration`` as :func:`gpucell.components.kubevirt.kubevirt_spec` renders it.
    """

    namespace: pulumi.Output[str]
    """The tenant namespace (``tenant-<name>``), known once the Namespace is registered."""

    def __init__(self, name: str, args: TenantArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        facts = admit(args.name, args.spec, args.facts)  # before anything is registered
        _check_backup_scheduled(args)
        super().__init__("Tenant", name, opts, args.cluster)
        spec, tenant, platform = args.spec, args.name, args.platform
        self.name = tenant
        """Tenant key (``acme``)."""
        self.namespace_name = namespace_of(tenant)
        """Namespace name (``tenant-acme``), as a plain string."""
        self.cluster = args.cluster
        """The cluster the tenant lives on (its workloads go there too)."""
        self.facts = facts
        """The cluster's facts, this tenant admitted: what its workloads are placed and rendered with."""
        self.platform = platform
        """The platform components its workloads wait for."""
        self.removal_policy = spec.removal_policy
        """The tenant's ``removalPolicy``: its own children's, and the default of its VMs and notebooks."""

        # The namespace holds every PVC of the tenant (VM disks, notebook homes): deleting it deletes them. The guard
        # rails share its policy, so that a refused removal leaves the tenant fenced in as it was.
        lifecycle = removal_options(spec.removal_policy)
        ns = namespace_manifest(tenant, args.cluster.kubernetes_version)
        # After the KubeVirt CR: the namespace enforces restricted, which VM launcher pods pass only once the CR
        # gives them a seccomp profile (on a live cell too, where this orders the label change after the CR's).
        kubevirt = [platform.kubevirt.cr] if platform.kubevirt is not None else []
        self.namespace_resource = Namespace(
            f"{name}-namespace",
            metadata=ns["metadata"],
            opts=self.child(depends_on=kubevirt, **lifecycle),
        )
        inside = self.child(depends_on=[self.namespace_resource], **lifecycle)
        quota = resource_quota_manifest(tenant, spec, facts)
        self.quota = ResourceQuota(f"{name}-quota", metadata=quota["metadata"], spec=quota["spec"], opts=inside)
        fence = priority_quota_manifest(tenant, allowed_classes(facts.priority_classes, tenant))
        # After the platform's classes: the quota names them, and every workload (after tenant.ready) may name one.
        classes = [platform.priority_classes] if platform.priority_classes is not None else []
        self.priority_quota = ResourceQuota(
            f"{name}-priority-quota",
            metadata=fence["metadata"],
            spec=fence["spec"],
            opts=self.child(depends_on=[self.namespace_resource, *classes], **lifecycle),
        )
        limits = limit_range_manifest(tenant, spec)
        self.limit_range = LimitRange(f"{name}-limits", metadata=limits["metadata"], spec=limits["spec"], opts=inside)
        # Roles and bindings hold no data and deleting one only takes rights away, so they never take the tenant's
        # protection: a refused removal still leaves the tenant fenced in, and a binding's new roleRef (immutable, a
        # replacement) goes through in one `pulumi up` (Pulumi replaces a resource whose new goal is unprotected,
        # pulumi/pulumi#8873) instead of needing `pulumi state unprotect` on every cell.
        grants = self.child(depends_on=[self.namespace_resource], protect=False)
        self.rbac: list[pulumi.CustomResource] = []
        for obj in rbac_manifests(tenant, spec, facts.oidc):
            child = _child_name(name, obj)
            if obj["kind"] == "Role":
                self.rbac.append(Role(f"{child}-role", metadata=obj["metadata"], rules=obj["rules"], opts=grants))
            else:
                self.rbac.append(
                    RoleBinding(
                        child, metadata=obj["metadata"], role_ref=obj["roleRef"], subjects=obj["subjects"], opts=grants
                    )
                )
        cilium = [c for c in (platform.cilium, platform.cluster_deny) if c is not None]
        after_cilium = self.child(depends_on=[self.namespace_resource, *cilium], **lifecycle)
        self.policies = [
            custom_resource(_child_name(name, obj), obj, after_cilium)
            for obj in network_policy_manifests(tenant, spec, facts)
        ]
        self.admission = self._admission(name, facts, lifecycle)
        """The tenant's ValidatingAdmissionPolicies and their bindings (:mod:`gpucell.tenancy.tenant_admission`)."""
        self.instancetypes: Instancetypes | None = None
        """The tenant's ``VirtualMachineInstancetype``/``VirtualMachinePreference`` objects, when it defines any."""
        if spec.instancetypes or spec.preferences:
            self.instancetypes = Instancetypes(
                f"{name}-instancetypes",
                InstancetypesArgs(
                    args.cluster,
                    spec.instancetypes,
                    spec.preferences,
                    self.namespace_name,
                    common_labels(tenant),
                    gpu_catalog=facts.gpu_catalog,
                ),
                opts=self.child(depends_on=[self.namespace_resource, *kubevirt]),
            )
        self.ready: list[pulumi.Resource] = [
            self.namespace_resource,
            self.quota,
            self.priority_quota,
            self.limit_range,
            *self.rbac,
            *self.policies,
            *self.admission,
            *([self.instancetypes] if self.instancetypes is not None else []),
        ]
        """What a workload must come after: namespace, quota, limit range, RBAC and network policies."""

        # The name is known (tenant-<name>); derived from the URN so that users of it wait for the Namespace.
        namespace_name = self.namespace_name
        self.namespace = self.namespace_resource.urn.apply(lambda _: namespace_name)
        self.register_outputs({"namespace": self.namespace})

    def _admission(self, name: str, facts: ClusterFacts, lifecycle: dict[str, Any]) -> list[pulumi.CustomResource]:
        """Register :func:`gpucell.tenancy.tenant_admission.admission_manifests`: ``{name}-admission-<part>`` and
        ``{name}-admission-<part>-binding`` (part ``pods``, ``vms``, ``services``, ``access``, ``secrets``,
        ``platform``), each binding after its policy."""
        out: list[pulumi.CustomResource] = []
        prefix = f"gpucell-tenant-{self.name}-"
        for obj in admission_manifests(self.name, facts):
            part = obj["metadata"]["name"].removeprefix(prefix)
            if obj["kind"] == "ValidatingAdmissionPolicy":
                policy = ValidatingAdmissionPolicy(
                    f"{name}-admission-{part}", metadata=obj["metadata"], spec=obj["spec"], opts=self.child(**lifecycle)
                )
                out.append(policy)
            else:
                out.append(
                    ValidatingAdmissionPolicyBinding(
                        f"{name}-admission-{part}-binding",
                        metadata=obj["metadata"],
                        spec=obj["spec"],
                        opts=self.child(depends_on=[policy], **lifecycle),
                    )
                )
        return out
