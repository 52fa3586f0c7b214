"""Tenant: one tenant's slice of a regional cell, fenced in by quota, RBAC and default-deny networking.

What is rendered, per tenant and region (namespace ``tenant-<tenant>``, see
:func:`gpucell.spec.tenancy.namespace_of`):

- the ``Namespace``, with Pod Security Admission labels (below);
- a ``ResourceQuota`` ``tenant-quota``: CPU, memory, storage, object counts and every GPU resource of the
  region by name (:func:`quota_hard`);
- a ``LimitRange`` ``tenant-defaults``: what a container gets when it does not say
  (:func:`limit_range_manifest`);
- ``RoleBinding`` objects from the tenant's groups to the built-in ``admin``/``edit``/``view`` ClusterRoles,
  and namespaced ``Role`` objects for KServe, whose chart does not aggregate into those
  (:func:`rbac_manifests`);
- ``CiliumNetworkPolicy`` objects, one per purpose so that a reviewer reads each on its own:
  ``tenant-default-deny``, ``tenant-allow-dns``, ``tenant-allow-intra-tenant`` and the egress class's
  ``tenant-allow-egress-*`` (:func:`network_policy_manifests`).

Pod Security Admission: the strictest level the tenant's workloads run under
---------------------------------------------------------------------------
``warn`` and ``audit`` are always ``restricted``; ``enforce`` is ``restricted`` for tenants without VMs and
``baseline`` for tenants with VMs. Every mode is pinned to the cell's Kubernetes minor (``v1.34``) so that a
k3s upgrade does not silently change what is enforced. The evidence, from kubevirt/kubevirt (``main`` near
v1.9, read through the source index; the v1.9.0 tag itself was not in it):

- The launcher runs non-root: ``NonRoot`` is a GA gate and ``Root`` an Alpha opt-in
  (``pkg/virt-config/featuregate/legacy/non_root.go``, ``root.go``); the cell's ``KubeVirt`` CR enables only
  ``HostDevices`` and ``CPUManager`` (:func:`gpucell.kubevirt.feature_gates`). For a non-root VMI,
  ``pkg/virt-controller/services/template.go`` (``computePodSecurityContext``) sets ``runAsUser`` and
  ``runAsGroup`` 107, ``runAsNonRoot: true``, ``fsGroup: 107``; ``rendercontainer.go`` (``securityContext``)
  sets ``allowPrivilegeEscalation: false`` and the compute container drops ``ALL`` and adds only
  ``NET_BIND_SERVICE`` (``requiredCapabilities``). ``SYS_NICE`` is added **only for a root launcher**
  (``if !vmitrait.IsNonRoot(vmi)``), so dedicated CPUs, hugepages and NUMA passthrough need no capability
  beyond baseline: CPU pinning is done by the kubelet's static CPU manager and virt-handler, not by the pod.
- Volumes are ``emptyDir`` (hugepages as ``emptyDir`` with medium ``HugePages``), PVCs, Secrets, ConfigMaps
  and downward API (``rendervolumes.go``); ``hostPath`` appears only for ``hostDisk`` volumes, which gpucell
  never renders. GPUs arrive through the device plugin (extended resources), or on ``dra`` pools as CDI devices of
  the pod's ResourceClaim, not as host mounts.
- What fails ``restricted`` is seccomp: the pod's ``seccompProfile`` comes only from the ``KubeVirt`` CR's
  ``configuration.seccompConfiguration.virtualMachineInstanceProfile`` ("Defaults to none" in v1.9.0
  ``swagger.json``), and no container sets one, so ``restricted`` rejects the launcher pod ("seccompProfile
  ... must set securityContext.seccompProfile.type to RuntimeDefault or Localhost"). ``baseline`` only forbids
  an explicit ``Unconfined``. Hotplug attachment pods for block volumes also run as root (pod
  ``runAsUser: 0``, ``RenderHotplugAttachmentTriggerPodTemplate``), which ``baseline`` allows and
  ``restricted`` does not.
- So ``baseline`` is the strictest level a gpucell VM runs under today. The way to ``restricted`` for VM
  tenants is to set that seccomp profile in the ``KubeVirt`` CR (kubevirt/kubevirt#8649 "Run VMs as
  'restricted' PSA pods", #8917 "Seccomp"); until the cell does, tenants with VMs enforce ``baseline`` and
  still get ``restricted`` warnings and audit entries.
- KubeVirt's ``PSA`` gate (GA in ``legacy/psa.go``) once made virt-controller relabel a VM's namespace
  ``enforce: privileged`` (kubevirt/kubevirt#8436, ``pkg/psa/psa.go`` ``EscalateNamespace``). The VMI and
  migration controllers read for this (``pkg/virt-controller/watch/vmi/vmi.go``,
  ``pkg/virt-controller/watch/migration/migration.go``) hold no namespace store and never call it. If a later
  release did, Pulumi would show the label drift at the next ``pulumi preview``.

Tenants without VMs run notebooks and KServe predictors, which their renderers make ``restricted`` (pod
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
to expose itself. Allow policies then add up:

- ``tenant-allow-dns``: UDP and TCP 53 to ``kube-dns`` in ``kube-system``, with ``rules.dns`` ``matchPattern:
  "*"`` so that the DNS proxy sees every lookup and ``toFQDNs`` rules can match;
- ``tenant-allow-intra-tenant``: ingress from and egress to endpoints of the tenant namespace;
- the egress class: ``none`` adds nothing; ``cluster`` adds the Kubernetes API server (entity
  ``kube-apiserver``; every request is still authenticated and authorised by RBAC) and endpoints in
  namespaces labelled ``gpucell.io/platform-services: "true"``; ``internet`` adds what ``cluster`` does plus
  the entity ``world`` (outside the cluster only); ``custom`` adds ``toCIDR`` ``egressCidrs`` and ``toFQDNs``
  ``egressFqdns`` (``*.`` names as ``matchPattern``), as two policies because ``toFQDNs`` cannot share a rule
  with other ``to*`` peers.

Platform services are an explicit label rather than a namespace list because the obvious candidate,
``kube-system``, also serves Hubble Relay (enabled by :mod:`gpucell.cilium`), which would let a tenant read
every other tenant's flows. Namespace labels cannot be set by a tenant (``admin`` in a namespace does not
include updating the Namespace object), and Cilium ignores pod labels that imitate namespace labels since
1.14.2 (CVE-2023-39347). No other tenant is reachable in any class: tenant namespaces never carry the platform
label, and ``world``/``toCIDR`` only match addresses outside the cluster. Ingress from outside the tenant (an
ingress controller, a NodePort, an SSH LoadBalancer) is what each workload declares and renders itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi_kubernetes.core.v1 import LimitRange, Namespace, ResourceQuota
from pulumi_kubernetes.rbac.v1 import Role, RoleBinding

from gpucell._component import CellComponent
from gpucell.dra import CLAIMS_QUOTA_KEY, DEVICE_CLASSES, quota_key
from gpucell.inventory import capacity, dra_offers, gpu_offers, nvswitch_quota
from gpucell.spec.tenancy import EgressClass, TenantSpec, namespace_of
from gpucell.workloads._common import (
    MANAGED_BY,
    TENANT_LABEL,
    cilium_network_policy,
    common_labels,
    custom_resource,
    in_cell,
    object_meta,
)

if TYPE_CHECKING:
    from gpucell.cell import RegionalCell
    from gpucell.spec.cell import CellSpec

__all__ = [
    "BUILTIN_ROLES",
    "DNS_SELECTOR",
    "KSERVE_RESOURCES",
    "MANAGED_BY",
    "PLATFORM_SERVICES_LABEL",
    "POD_SECURITY_PREFIX",
    "TENANT_LABEL",
    "PodSecurityLevel",
    "Tenant",
    "TenantArgs",
    "common_labels",
    "egress_policy_names",
    "gpu_resources",
    "limit_range_manifest",
    "namespace_labels",
    "namespace_manifest",
    "network_policy_manifests",
    "pod_security_level",
    "quota_hard",
    "rbac_manifests",
    "resource_quota_manifest",
]

POD_SECURITY_PREFIX = "pod-security.kubernetes.io/"
"""Prefix of the Pod Security Admission namespace labels (``enforce``, ``enforce-version``, ``warn``...)."""
PLATFORM_SERVICES_LABEL = "gpucell.io/platform-services"
"""Namespace label (value ``"true"``) marking the shared services ``cluster`` egress may reach."""
RBAC_GROUP = "rbac.authorization.k8s.io"
NAMESPACE_KEY = "k8s:io.kubernetes.pod.namespace"
"""Cilium's identity label for a pod's namespace (set by Cilium from the pod's real namespace)."""
DNS_SELECTOR = {NAMESPACE_KEY: "kube-system", "k8s:k8s-app": "kube-dns"}
"""The cluster DNS pods: k3s ships CoreDNS as ``kube-dns``-labelled pods in ``kube-system``."""
BUILTIN_ROLES = (("admins", "admin"), ("members", "edit"), ("viewers", "view"))
"""Tenant group key -> built-in ClusterRole. KubeVirt's ``kubevirt.io:admin/edit/view`` (virt-operator
``pkg/virt-operator/resource/generate/rbac/cluster.go``) and CDI's ``cdi.kubevirt.io:admin/edit/view``
(``createAggregateClusterRoles``) carry ``rbac.authorization.k8s.io/aggregate-to-<role>`` labels, so these
roles cover VMs and DataVolumes."""
KSERVE_RESOURCES = ("inferenceservices", "servingruntimes", "inferencegraphs", "trainedmodels")
"""``serving.kserve.io`` resources tenants work with. KServe's ``kserve-resources`` chart ships no ClusterRole
aggregating into ``admin``/``edit``/``view`` (only Kubeflow's manifests do), so the tenant gets namespaced
Roles for them."""
_READ = ["get", "list", "watch"]
_WRITE = [*_READ, "create", "update", "patch", "delete"]


class PodSecurityLevel(StrEnum):
    """Pod Security Standards levels (kubernetes.io/docs/concepts/security/pod-security-standards)."""

    PRIVILEGED = "privileged"
    BASELINE = "baseline"
    RESTRICTED = "restricted"


@dataclass(frozen=True)
class TenantArgs:
    """Inputs of :class:`Tenant`."""

    name: str
    """Tenant key in the config (``acme``); the namespace is ``tenant-<name>``."""
    spec: TenantSpec
    """The tenant's validated spec."""
    cell: RegionalCell
    """The region: its provider, its spec (GPU inventory, Kubernetes minor) and its Cilium (policy CRDs)."""


def pod_security_level(spec: TenantSpec) -> PodSecurityLevel:
    """What the tenant namespace enforces: ``baseline`` with VMs, else ``restricted`` (see the module doc)."""
    return PodSecurityLevel.BASELINE if spec.virtual_machines else PodSecurityLevel.RESTRICTED


def namespace_labels(tenant: str, spec: TenantSpec, kubernetes_minor: str) -> dict[str, str]:
    """Labels of the tenant namespace: common labels and the PSA modes, each pinned to ``v<minor>``.

    ``kubernetes_minor`` is ``MAJOR.MINOR`` (``1.34``); ``enforce`` is :func:`pod_security_level`, ``warn``
    and ``audit`` are always ``restricted``.
    """
    version = f"v{kubernetes_minor}"
    labels = common_labels(tenant)
    modes = {
        "enforce": pod_security_level(spec),
        "warn": PodSecurityLevel.RESTRICTED,
        "audit": PodSecurityLevel.RESTRICTED,
    }
    for mode, level in modes.items():
        labels[f"{POD_SECURITY_PREFIX}{mode}"] = level.value
        labels[f"{POD_SECURITY_PREFIX}{mode}-version"] = version
    return labels


def namespace_manifest(tenant: str, spec: TenantSpec, cell: CellSpec) -> dict[str, Any]:
    """The ``v1`` ``Namespace`` ``tenant-<tenant>`` with :func:`namespace_labels`."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": namespace_of(tenant),
            "labels": namespace_labels(tenant, spec, cell.versions.kubernetes_minor),
        },
    }


def gpu_resources(spec: TenantSpec, cell: CellSpec) -> list[str]:
    """Every GPU extended resource the region's pools advertise, plus any the quota names, sorted."""
    offered = capacity(gpu_offers(cell.node_pools, cell.effective_mig_strategy.value))
    return sorted({*offered, *spec.quota.gpus})


def quota_hard(spec: TenantSpec, cell: CellSpec) -> dict[str, str]:
    """``spec.hard`` of the tenant's ResourceQuota; every quantity a string.

    CPU as millicores (``"16000m"``) and memory as GiB (``"64Gi"``), each for requests and limits;
    ``requests.storage`` in GiB; counts of pods, PVCs, Services and LoadBalancer Services; and
    ``requests.<resource>`` for every GPU resource of :func:`gpu_resources`, the quota's units or ``"0"``: a
    resource the quota does not list would otherwise be unlimited, so an ungranted GPU kind is pinned to zero.
    HGX NVSwitches (``requests.nvidia.com/GH100_H100_NVSWITCH``) are derived, not declared: the NVSwitches of as many
    whole boards as the quota's passthrough GPUs of that model cover (:func:`gpucell.inventory.nvswitch_quota`).
    Extended resources only take the ``requests.`` prefix in a quota (Kubernetes "Resource Quotas").

    In a region with ``dra`` pools: ``<class>.deviceclass.resource.k8s.io/devices`` for every DeviceClass of the DRA
    driver (:data:`gpucell.dra.DEVICE_CLASSES`), ``quota.deviceClasses``' devices or ``"0"``, and
    ``count/resourceclaims.resource.k8s.io``, the sum of those devices (each claim holds at least one device; 0
    claims for a tenant without DRA quota, whatever class a claim names). KEP-4381 "ResourceQuota".
    """
    quota = spec.quota
    hard = {
        "requests.cpu": f"{quota.cpu_millicores}m",
        "limits.cpu": f"{quota.cpu_millicores}m",
        "requests.memory": f"{quota.memory_gib}Gi",
        "limits.memory": f"{quota.memory_gib}Gi",
        "requests.storage": f"{quota.storage_gib}Gi",
        "pods": str(quota.pods),
        "persistentvolumeclaims": str(quota.persistent_volume_claims),
        "services": str(quota.services),
        "services.loadbalancers": str(quota.load_balancers),
    }
    for resource in gpu_resources(spec, cell):
        hard[f"requests.{resource}"] = str(quota.gpus.get(resource, 0))
    for resource, units in nvswitch_quota(quota.gpus, cell.node_pools).items():
        hard[f"requests.{resource}"] = str(units)
    if dra_offers(cell.node_pools):
        for device_class in sorted({*DEVICE_CLASSES, *quota.device_classes}):
            hard[quota_key(device_class)] = str(quota.device_classes.get(device_class, 0))
        hard[CLAIMS_QUOTA_KEY] = str(sum(quota.device_classes.values()))
    return hard


def resource_quota_manifest(tenant: str, spec: TenantSpec, cell: CellSpec) -> dict[str, Any]:
    """The ``ResourceQuota`` ``tenant-quota`` with :func:`quota_hard`.

    With ``limits.cpu``/``limits.memory`` in the quota, KubeVirt sets the launcher pod's limits itself when a
    VM gives none (``AutoResourceLimitsGate``, GA since v1.5: memory limit = 2 x requests, per-namespace label
    ``alpha.kubevirt.io/auto-memory-limits-ratio``).
    """
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": object_meta(tenant, "tenant-quota"),
        "spec": {"hard": quota_hard(spec, cell)},
    }


def limit_range_manifest(tenant: str, spec: TenantSpec) -> dict[str, Any]:
    """The ``LimitRange`` ``tenant-defaults``: container ``default`` (limits) and ``defaultRequest``.

    The quota counts limits, so a container without them would be refused; these defaults fill them in
    (CPU in millicores, memory in MiB).
    """
    limits = spec.limits
    default = {"cpu": f"{limits.default_cpu_millicores}m", "memory": f"{limits.default_memory_mib}Mi"}
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": object_meta(tenant, "tenant-defaults"),
        "spec": {"limits": [
            {"type": "Container", "default": dict(default), "defaultRequest": dict(default)},
        ]},
    }


def _groups(groups: Sequence[str]) -> list[dict[str, str]]:
    return [{"kind": "Group", "apiGroup": RBAC_GROUP, "name": group} for group in groups]


def _binding(tenant: str, name: str, role_kind: str, role: str, groups: Sequence[str]) -> dict[str, Any]:
    return {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": "RoleBinding",
        "metadata": object_meta(tenant, name),
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": role_kind, "name": role},
        "subjects": _groups(groups),
    }


def _kserve_role(tenant: str, name: str, verbs: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": "Role",
        "metadata": object_meta(tenant, name),
        "rules": [
            {"apiGroups": ["serving.kserve.io"], "resources": list(KSERVE_RESOURCES), "verbs": list(verbs)},
            {"apiGroups": ["serving.kserve.io"], "resources": ["inferenceservices/status"], "verbs": ["get"]},
        ],
    }


def rbac_manifests(tenant: str, spec: TenantSpec) -> list[dict[str, Any]]:
    """Roles and RoleBindings of the tenant; a binding without groups (and its Role) is left out.

    - ``tenant-admins``/``tenant-members``/``tenant-viewers``: RoleBindings to the ClusterRoles ``admin``/
      ``edit``/``view`` (:data:`BUILTIN_ROLES`), subjects ``kind: Group``.
    - ``tenant-kserve-edit`` (admins and members) and ``tenant-kserve-view`` (viewers): a Role on
      :data:`KSERVE_RESOURCES` and its RoleBinding of the same name.
    """
    groups = spec.groups
    out: list[dict[str, Any]] = []
    for key, role in BUILTIN_ROLES:
        members: list[str] = getattr(groups, key)
        if members:
            out.append(_binding(tenant, f"tenant-{key}", "ClusterRole", role, members))
    for name, verbs, members in (
        ("tenant-kserve-edit", _WRITE, [*groups.admins, *groups.members]),
        ("tenant-kserve-view", _READ, list(groups.viewers)),
    ):
        if members:
            out.append(_kserve_role(tenant, name, verbs))
            out.append(_binding(tenant, name, "Role", name, members))
    return out


def _policy(tenant: str, name: str, description: str, rules: dict[str, Any]) -> dict[str, Any]:
    """A policy of the tenant selecting every endpoint of its namespace."""
    return cilium_network_policy(object_meta(tenant, name), rules, description=description)


def _egress_cluster() -> list[dict[str, Any]]:
    platform = {f"k8s:io.cilium.k8s.namespace.labels.{PLATFORM_SERVICES_LABEL}": "true"}
    return [{"toEntities": ["kube-apiserver"]}, {"toEndpoints": [{"matchLabels": platform}]}]


def egress_policy_names(spec: TenantSpec) -> list[str]:
    """Names of the egress-class policies :func:`network_policy_manifests` renders for ``spec.egress``."""
    match spec.egress:
        case EgressClass.NONE:
            return []
        case EgressClass.CLUSTER:
            return ["tenant-allow-egress-cluster"]
        case EgressClass.INTERNET:
            return ["tenant-allow-egress-cluster", "tenant-allow-egress-internet"]
        case EgressClass.CUSTOM:
            return [name for name, given in (("tenant-allow-egress-cidrs", spec.egress_cidrs),
                                             ("tenant-allow-egress-fqdns", spec.egress_fqdns)) if given]


def network_policy_manifests(tenant: str, spec: TenantSpec) -> list[dict[str, Any]]:
    """The tenant's ``cilium.io/v2`` ``CiliumNetworkPolicy`` objects, in order (semantics in the module doc).

    ``tenant-default-deny``, ``tenant-allow-dns``, ``tenant-allow-intra-tenant``, then
    :func:`egress_policy_names` of the egress class. Every policy selects all endpoints of the namespace.
    """
    own = {"matchLabels": {NAMESPACE_KEY: namespace_of(tenant)}}
    policies = [
        _policy(tenant, "tenant-default-deny", "Default deny: nothing in or out unless a policy allows it",
                {"enableDefaultDeny": {"ingress": True, "egress": True}, "ingress": [{}], "egress": [{}]}),
        _policy(tenant, "tenant-allow-dns", "DNS to kube-dns, through the DNS proxy so toFQDNs rules match", {
            "egress": [{
                "toEndpoints": [{"matchLabels": dict(DNS_SELECTOR)}],
                "toPorts": [{
                    "ports": [{"port": "53", "protocol": "UDP"}, {"port": "53", "protocol": "TCP"}],
                    "rules": {"dns": [{"matchPattern": "*"}]},
                }],
            }],
        }),
        _policy(tenant, "tenant-allow-intra-tenant", "Traffic between the tenant's own pods and VMs",
                {"ingress": [{"fromEndpoints": [own]}], "egress": [{"toEndpoints": [own]}]}),
    ]
    bodies: dict[str, tuple[str, list[dict[str, Any]]]] = {
        "tenant-allow-egress-cluster": (
            f"Egress class cluster: the Kubernetes API and namespaces labelled {PLATFORM_SERVICES_LABEL}",
            _egress_cluster(),
        ),
        "tenant-allow-egress-internet": ("Egress class internet: anywhere outside the cluster",
                                         [{"toEntities": ["world"]}]),
        "tenant-allow-egress-cidrs": ("Egress class custom: the tenant's egressCidrs",
                                      [{"toCIDR": [str(net) for net in spec.egress_cidrs]}]),
        "tenant-allow-egress-fqdns": ("Egress class custom: the tenant's egressFqdns", [{"toFQDNs": [
            {"matchPattern": fqdn} if fqdn.startswith(("*.", "**.")) else {"matchName": fqdn}
            for fqdn in spec.egress_fqdns
        ]}]),
    }
    for name in egress_policy_names(spec):
        description, egress = bodies[name]
        policies.append(_policy(tenant, name, description, {"egress": egress}))
    return policies


def _child_name(component: str, obj: dict[str, Any]) -> str:
    """Pulumi name of a rendered object: ``<component>-<metadata.name without tenant->``."""
    return f"{component}-{obj['metadata']['name'].removeprefix('tenant-')}"


def admit(tenant: str, spec: TenantSpec, cell: CellSpec) -> None:
    """Run the region's admission rules on ``spec`` as tenant ``tenant`` of ``cell``.

    Stack config is admitted when it is validated; a tenant built from Python with a spec the cell does not
    already hold gets the same checks here (placement, quotas against the region and its other tenants, egress).
    Raises :class:`gpucell.errors.ConfigError` with ``tenants.<tenant>...`` key paths.
    """
    if cell.tenants.get(tenant) == spec:
        return
    fields = {key: getattr(cell, key) for key in type(cell).model_fields}
    type(cell).model_validate({**fields, "tenants": {**cell.tenants, tenant: spec}})  # raises ConfigError


class Tenant(CellComponent):
    """One tenant in one region: namespace, quota, limit defaults, RBAC and Cilium policies.

    Children (Pulumi names from the component name ``name``): ``{name}-namespace``, ``{name}-quota``,
    ``{name}-limits``, ``{name}-admins``/``-members``/``-viewers``, ``{name}-kserve-edit`` (binding) and
    ``{name}-kserve-edit-role`` (likewise ``kserve-view``), and ``{name}-default-deny``,
    ``{name}-allow-dns``... (the policy names without ``tenant-``). They use the cell's Kubernetes provider
    (merged into ``opts``); every namespaced child depends on the namespace, and the Cilium policies also on
    the cell's Cilium (which installs their CRD). Workloads depend on :attr:`ready`.
    """

    namespace: pulumi.Output[str]
    """The tenant namespace (``tenant-<name>``), known once the Namespace is registered."""

    def __init__(self, name: str, args: TenantArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        admit(args.name, args.spec, args.cell.spec)  # before anything is registered
        super().__init__("Tenant", name, in_cell(args.cell, opts))
        cell, spec, tenant = args.cell.spec, args.spec, args.name
        self.name = tenant
        """Tenant key (``acme``)."""
        self.namespace_name = namespace_of(tenant)
        """Namespace name (``tenant-acme``), as a plain string."""
        self.cell = args.cell
        """The region the tenant lives in."""

        ns = namespace_manifest(tenant, spec, cell)
        self.namespace_resource = Namespace(f"{name}-namespace", metadata=ns["metadata"], opts=self.child())
        inside = self.child(depends_on=[self.namespace_resource])
        quota = resource_quota_manifest(tenant, spec, cell)
        self.quota = ResourceQuota(f"{name}-quota", metadata=quota["metadata"], spec=quota["spec"],
                                   opts=inside)
        limits = limit_range_manifest(tenant, spec)
        self.limit_range = LimitRange(f"{name}-limits", metadata=limits["metadata"], spec=limits["spec"],
                                      opts=inside)
        self.rbac: list[pulumi.CustomResource] = []
        for obj in rbac_manifests(tenant, spec):
            child = _child_name(name, obj)
            if obj["kind"] == "Role":
                self.rbac.append(Role(f"{child}-role", metadata=obj["metadata"], rules=obj["rules"],
                                      opts=inside))
            else:
                self.rbac.append(RoleBinding(child, metadata=obj["metadata"], role_ref=obj["roleRef"],
                                             subjects=obj["subjects"], opts=inside))
        after_cilium = self.child(depends_on=[self.namespace_resource, args.cell.cilium])
        self.policies = [
            custom_resource(_child_name(name, obj), obj, after_cilium)
            for obj in network_policy_manifests(tenant, spec)
        ]
        self.ready: list[pulumi.Resource] = [
            self.namespace_resource, self.quota, self.limit_range, *self.rbac, *self.policies,
        ]
        """What a workload must come after: namespace, quota, limit range, RBAC and network policies."""

        # The name is known (tenant-<name>); derived from the URN so that users of it wait for the Namespace.
        namespace_name = self.namespace_name
        self.namespace = self.namespace_resource.urn.apply(lambda _: namespace_name)
        self.register_outputs({"namespace": self.namespace})
