"""Run-time admission in a tenant namespace: ValidatingAdmissionPolicies that refuse, for what a tenant member writes
with ``kubectl``, what ``gpucell plan`` refuses in config (docs/decisions/0030-run-time-admission.md).

Per tenant, cluster-scoped (``admissionregistration.k8s.io/v1``, GA since Kubernetes 1.30), the tenant's values baked
into the CEL as literals, so the :class:`~gpucell.tenancy.tenant.Tenant` component brings its fence alone on any
cluster:

- ``gpucell-tenant-<tenant>-pods``: Pods and the pod templates of Deployments, ReplicaSets, StatefulSets, DaemonSets,
  Jobs, CronJobs and ReplicationControllers (:func:`pod_rules`);
- ``gpucell-tenant-<tenant>-vms``: KubeVirt VirtualMachines, VirtualMachineInstances and their ReplicaSets
  (``spec.template.spec``, or the VMI's ``spec``; :func:`vm_rules`);
- ``gpucell-tenant-<tenant>-services``: Services (LoadBalancer addresses, :func:`service_rules`);
- ``gpucell-tenant-<tenant>-access``: RoleBindings (their subjects, :func:`access_rules`);
- ``gpucell-tenant-<tenant>-secrets``: Secrets created (no legacy service account token, :func:`secret_rules`);
- ``gpucell-tenant-<tenant>-platform``: Secrets and RoleBindings the platform owns in the namespace, which a tenant
  identity may not create, change or delete (:func:`platform_rules`, :data:`TENANT_IDENTITY`);
- only for a tenant that runs isolated workloads only (``isolation.default: vm``, docs/decisions/0040):
  ``gpucell-tenant-<tenant>-isolated``: no pod but KubeVirt's and CDI's, and no ephemeral container in any
  (:func:`isolated_rules`);

each with a ``ValidatingAdmissionPolicyBinding`` of the same name, ``validationActions: [Deny]``. Policy and binding
select the namespace by ``kubernetes.io/metadata.name`` (the API server sets that label from the name; nobody can
forge it). All but ``-platform`` match every writer, controllers included: virt-launcher pods derived from a VM,
KServe's predictor Deployments, CAPK's VMs pass the same rules as what a tenant writes itself, so a field a
controller copies from a tenant's object (an InferenceService's ``nodeName``, an instancetype's ``nodeSelector``) is
refused where it lands; the one rule that depends on the writer is the ``kubevirt.io`` pod label
(:data:`LAUNCHER_LABEL`, virt-controller's alone). Objects being deleted are let through, except by ``-platform``
(a refused finalizer removal would keep them forever; the platform's own objects are the platform's to finalize).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from ipaddress import IPv4Address
from typing import TYPE_CHECKING, Any

from gpucell._component import MANAGED_BY
from gpucell.admission.fabric import nic_quota
from gpucell.admission.inventory import nvswitch_quota
from gpucell.components.cdi import NAMESPACE as CDI_NAMESPACE
from gpucell.components.kubevirt import NAMESPACE as KUBEVIRT_NAMESPACE
from gpucell.k3s._acceptance import ACCEPTANCE_TAINT
from gpucell.k3s._node_state import QUARANTINE_TAINT
from gpucell.spec.isolation import Isolation
from gpucell.spec.pools import POOL_LABEL, ROLE_LABEL, SERVER_TAINT, NodeRole
from gpucell.spec.scheduling import allowed_classes
from gpucell.spec.tenancy import TENANT_NAMESPACE_PREFIX, namespace_of
from gpucell.spec.tenant_clusters import ApiServerType
from gpucell.spec.traffic import ADDRESS_ANNOTATION, tenant_pools
from gpucell.spec.workloads import ServiceType
from gpucell.tenancy._common import NVIDIA_RUNTIME_CLASS

if TYPE_CHECKING:
    from gpucell.admission.tenants import ClusterFacts

__all__ = [
    "ADDRESS_ANNOTATIONS",
    "CDI_CONTROLLER",
    "CDI_VDDK_CONTAINER",
    "CLUSTER_API_SECRET_LABEL",
    "CLUSTER_API_SECRET_TYPE",
    "DAEMONSET_ONLY_TAINTS",
    "GPUCELL_TAINTS",
    "GPU_RESOURCE_PREFIX",
    "KUBECONFIG_SUFFIX",
    "LAUNCHER_LABEL",
    "MULTUS_ANNOTATIONS",
    "MULTUS_NETWORKS_ANNOTATION",
    "NAMESPACE_NAME_LABEL",
    "PLATFORM_ROLE_BINDINGS",
    "RAIL_RESOURCE_PATTERN",
    "SERVER_NODE_LABELS",
    "SERVICE_ACCOUNT_TOKEN",
    "SHARING_CROSS_NAMESPACE_ANNOTATIONS",
    "TENANT_IDENTITY",
    "VIRT_CONTROLLER",
    "TenantFence",
    "access_rules",
    "admission_manifests",
    "fence_of",
    "isolated_rules",
    "platform_rules",
    "pod_rules",
    "secret_rules",
    "service_rules",
    "vm_rules",
]

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""The namespace label the API server sets to the namespace's name (Kubernetes 1.22+, ``NamespaceDefaultLabelName``):
what the policies select the tenant namespace by."""
SERVER_NODE_LABELS = (
    "node-role.kubernetes.io/control-plane",
    "node-role.kubernetes.io/master",
    "node-role.kubernetes.io/etcd",
)
"""Node labels k3s sets on every server (``true``), which a tenant's selector may not name."""
DAEMONSET_ONLY_TAINTS = ("node.kubernetes.io/unschedulable",)
"""Taint keys only DaemonSets and their pods may tolerate: the cordon of a node under maintenance (``kubectl
cordon`` sets ``spec.unschedulable``, the node lifecycle controller taints it). The DaemonSet controller adds the
toleration to every pod it creates (``AddOrUpdateDaemonPodTolerations``), so refusing it there would break a
tenant's DaemonSets."""
GPUCELL_TAINTS = (QUARANTINE_TAINT, ACCEPTANCE_TAINT)
"""gpucell's own node taints, which no tenant workload may tolerate (with the servers' taints, :func:`fence_of`):
``gpucell.io/quarantine`` (a host taken out of service, :mod:`gpucell.k3s._node_state`) and ``gpucell.io/acceptance``
(a GPU node whose acceptance run has not passed, :mod:`gpucell.k3s._acceptance`). The one table of them: every
tenant's pods and VMs policies refuse them."""
GPU_RESOURCE_PREFIX = "nvidia.com/"
"""Extended resources of the GPU Operator's device plugins (GPUs, MIG slices, vGPU and passthrough devices,
NVSwitches): a tenant may request only those its quota grants."""
ADDRESS_ANNOTATIONS = (ADDRESS_ANNOTATION, "io.cilium/lb-ipam-ips")
"""Service annotations asking Cilium LB IPAM for addresses (comma-separated; Cilium 1.20 "LB IPAM", "Requesting
IPs": ``lbipam.cilium.io/ips``, and the older ``io.cilium/lb-ipam-ips`` it still reads). ``spec.loadBalancerIP``
is read too."""
SHARING_CROSS_NAMESPACE_ANNOTATIONS = (
    "lbipam.cilium.io/sharing-cross-namespace",
    "io.cilium/lb-ipam-sharing-cross-namespace",
)
"""Annotations letting a Service share its address with Services of other namespaces (Cilium LB IPAM "Sharing
Keys"): refused, one tenant's ports never sit on another's address."""
LAUNCHER_LABEL = "kubevirt.io"
"""The pod label KubeVirt marks its own pods with (v1.9.0 ``AppLabel``, ``staging/src/kubevirt.io/api/core/v1/
types.go``: ``virt-launcher`` on a VM's launcher pod, ``hotplug-disk``, ``virt-exporter``;
``pkg/virt-controller/services/template.go``), which metering reads to bill a pod's GPUs as ``kind="vm"``
(:mod:`gpucell.components.metering`). Only :data:`VIRT_CONTROLLER` may set or change it on a pod; no pod template
carries it."""
VIRT_CONTROLLER = f"system:serviceaccount:{KUBEVIRT_NAMESPACE}:kubevirt-controller"
"""virt-controller's identity: the ServiceAccount ``kubevirt-controller`` (KubeVirt v1.9.0
``pkg/virt-operator/resource/generate/components/serviceaccountnames.go``, ``ControllerServiceAccountName``) in
gpucell's KubeVirt namespace. It creates every pod of a tenant namespace that carries :data:`LAUNCHER_LABEL`."""
CDI_CONTROLLER = f"system:serviceaccount:{CDI_NAMESPACE}:cdi-sa"
"""CDI's controller identity: the ServiceAccount ``cdi-sa`` (kubevirt/containerized-data-importer v1.66.0
``pkg/operator/resources/cluster/controller.go``, whose ClusterRole creates pods) in gpucell's CDI namespace. It
creates the importer, upload and clone pods that fill a VM's DataVolumes in the tenant's namespace."""
CDI_VDDK_CONTAINER = "vddk-side-car"
"""The init container CDI's importer pod runs for a VDDK (VMware) source, from the image the DataVolume's
``source.vddk.initImageURL`` names, with that image's own entrypoint (kubevirt/containerized-data-importer
``pkg/controller/import-controller.go``, ``makeImporterInitContainersSpec``)."""
SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"
"""The Secret type the token controller fills with a token that never expires for the ServiceAccount its annotation
``kubernetes.io/service-account.name`` names: refused at creation in a tenant namespace (tenants ask for a bounded
token, ``kubectl create token``). No controller of the cell creates one there at the pinned versions."""
CLUSTER_API_SECRET_TYPE = "cluster.x-k8s.io/secret"
"""The type of the Secrets Cluster API writes for a cluster (v1.14.0 ``ClusterSecretType``): its CAs, bootstrap
data and kubeconfig."""
CLUSTER_API_SECRET_LABEL = "cluster.x-k8s.io/cluster-name"
"""The label Cluster API puts on those Secrets (and caches Secrets by)."""
KUBECONFIG_SUFFIX = "-kubeconfig"
"""``<cluster>-kubeconfig``: the Secret Cluster API's controllers (v1.14.0 ``util/secret``, purpose ``kubeconfig``)
and CAAPH connect to a tenant cluster with, read by name; a Secret of that name that is not of
:data:`CLUSTER_API_SECRET_TYPE` is kept as "user-provided" (KCP ``adoptKubeconfigSecret``)."""
PLATFORM_ROLE_BINDINGS = ("tenant-admins", "tenant-members", "tenant-viewers")
"""gpucell's RoleBindings in a tenant namespace: who has access is config's."""
TENANT_IDENTITY = (
    "!(has(request.userInfo.groups) && 'system:masters' in request.userInfo.groups) && "
    "(!request.userInfo.username.startsWith('system:') || "
    f"request.userInfo.username.startsWith('system:serviceaccount:{TENANT_NAMESPACE_PREFIX}'))"
)
"""CEL: the request comes from a tenant identity: anyone but members of ``system:masters`` (the operator: k3s's
admin) and Kubernetes' and the platform's own ``system:`` identities (controllers, nodes, ServiceAccounts of
platform namespaces), ServiceAccounts of tenant namespaces included. Tenant people are never ``system:``: OIDC
names carry ``usernamePrefix``/``groupsPrefix`` and ``system:`` claims are refused (docs/security.md)."""
_OPERATIONS = ["CREATE", "UPDATE"]
_IPV4 = r"^[0-9]{1,3}[.][0-9]{1,3}[.][0-9]{1,3}[.][0-9]{1,3}$"


@dataclass(frozen=True)
class TenantFence:
    """What one tenant's pods, VMs and Services may name, as :func:`fence_of` reads it from the cluster's facts."""

    tenant: str
    """Tenant key (``acme``)."""
    forbidden_taints: tuple[str, ...]
    """Taint keys no toleration may name: the servers' (:data:`~gpucell.spec.pools.SERVER_TAINT` and every server
    pool's own) and gpucell's quarantine taint."""
    servers: tuple[str, ...]
    """Node names of the servers (pools of role ``server`` that do not ``allowWorkloads``)."""
    server_pools: tuple[str, ...]
    """Those pools' names (node label ``gpucell.io/pool``)."""
    pinned_nodes: tuple[str, ...]
    """Node names ``spec.nodeName`` may not name: the servers and every quarantined host (``nodeName`` skips the
    scheduler, so taints and cordons with it)."""
    gpu_resources: tuple[str, ...]
    """The GPU resources the tenant's quota grants (``quota.gpus`` above 0, and the NVSwitches of the HGX boards
    they cover)."""
    runtime_classes: tuple[str, ...]
    """RuntimeClasses its pods may name (with a GPU request): ``nvidia``, the class gpucell's GPU pods use."""
    priority_classes: tuple[str, ...]
    """PriorityClasses open to the tenant (``priorityClasses.<name>.tenants``)."""
    address_ranges: tuple[tuple[int, int], ...]
    """``(first, last)`` of every block of the LoadBalancer pools listing the tenant, as 32-bit integers."""
    reserved: tuple[tuple[str, str], ...]
    """``(address, holder)`` of every fixed LoadBalancer address of another tenant's workload or of the Gateway."""
    own_reserved: tuple[tuple[str, str], ...]
    """``(address, Service name)`` of the tenant's own fixed addresses: only that Service may ask for it."""
    groups: tuple[str, ...] = ()
    """The tenant's groups as its RoleBindings name them (``<groupsPrefix><group>`` with OIDC): admins, members,
    viewers."""
    user_prefix: str = ""
    """The cell's OIDC ``usernamePrefix`` (``oidc:``); empty without OIDC (then no ``User`` may be bound)."""
    isolated_only: bool = False
    """The tenant's ``isolation.default`` is ``vm``: its namespace runs VMs only (:func:`isolated_rules`)."""

    @property
    def namespace(self) -> str:
        """``tenant-<tenant>``."""
        return namespace_of(self.tenant)


def _fixed_addresses(facts: ClusterFacts) -> list[tuple[str, str, str]]:
    """``(address, tenant or "", Service name or holder)`` of every fixed LoadBalancer address the config gives."""
    out: list[tuple[str, str, str]] = []
    if facts.gateway is not None and facts.gateway.address is not None:
        out.append((str(facts.gateway.address), "", "the Gateway (gateway.address)"))
    for tenant, spec in facts.tenants.items():
        for name, vm in spec.virtual_machines.items():
            ssh = vm.ssh_service
            if ssh is not None and ssh.type is ServiceType.LOAD_BALANCER and ssh.address is not None:
                out.append((str(ssh.address), tenant, name))
        for name, cluster in spec.tenant_clusters.items():
            api = cluster.api_server
            if api.type is ApiServerType.LOAD_BALANCER and api.address is not None:
                out.append((str(api.address), tenant, f"{name}-api"))
    return out


def fence_of(tenant: str, facts: ClusterFacts) -> TenantFence:
    """The :class:`TenantFence` of ``tenant`` (a tenant of ``facts``) on the cluster ``facts`` describe."""
    spec = facts.tenants[tenant]
    pools = facts.node_pools
    servers = {n: p for n, p in pools.items() if p.role is NodeRole.SERVER and not p.allow_workloads}
    taints = [SERVER_TAINT.split(":")[0], *(t.split(":")[0].split("=")[0] for p in servers.values() for t in p.taints)]
    quarantined = [h.name for p in pools.values() for h in p.hosts if h.quarantine is not None]
    server_hosts = [h.name for p in servers.values() for h in p.hosts]
    granted = {r for r, n in spec.quota.gpus.items() if n > 0}
    granted |= {r for r, n in nvswitch_quota(spec.quota.gpus, pools).items() if n > 0}
    granted |= {r for r, n in nic_quota(spec.quota.gpus, spec.fabric_vlan, pools).items() if n > 0}
    lb = facts.load_balancer
    ranges = (
        [(int(block.first), int(block.last)) for pool in tenant_pools(lb, tenant) for block in lb.pools[pool].parsed]
        if lb is not None
        else []
    )
    fixed = _fixed_addresses(facts)
    return TenantFence(
        tenant=tenant,
        forbidden_taints=tuple(dict.fromkeys([*taints, *GPUCELL_TAINTS])),
        servers=tuple(server_hosts),
        server_pools=tuple(servers),
        pinned_nodes=tuple(dict.fromkeys([*server_hosts, *quarantined])),
        gpu_resources=tuple(sorted(granted)),
        runtime_classes=(NVIDIA_RUNTIME_CLASS,),
        priority_classes=tuple(allowed_classes(facts.priority_classes, tenant)),
        address_ranges=tuple(ranges),
        reserved=tuple(
            (address, holder if not owner else f"{owner}'s {holder}")
            for address, owner, holder in fixed
            if owner != tenant
        ),
        own_reserved=tuple((address, holder) for address, owner, holder in fixed if owner == tenant),
        groups=tuple(
            dict.fromkeys(
                facts.oidc.group(g) if facts.oidc else g
                for g in (*spec.groups.admins, *spec.groups.members, *spec.groups.viewers)
            )
        ),
        user_prefix=facts.oidc.username_prefix if facts.oidc else "",
        isolated_only=spec.isolation.default is Isolation.VM,
    )


# -- CEL -----------------------------------------------------------------------------------------------------------


def _lit(value: Any) -> str:
    """``value`` as a CEL literal (a JSON string, list or int is one)."""
    return json.dumps(list(value) if isinstance(value, tuple) else value)


def _listed(items: tuple[str, ...]) -> str:
    return ", ".join(items) or "none"


def _tolerations(fence: TenantFence, spec: str, *, daemonset: str) -> tuple[str, str]:
    """A toleration needs a key (an empty key with ``Exists`` tolerates every taint), never a forbidden one, and a
    DaemonSet-only key only where ``daemonset`` (a CEL bool) holds."""
    expression = (
        f"!has({spec}.tolerations) || {spec}.tolerations.all(t, has(t.key) && t.key != '' && "
        f"!(t.key in {_lit(fence.forbidden_taints)}) && ({daemonset} || !(t.key in {_lit(DAEMONSET_ONLY_TAINTS)})))"
    )
    message = (
        f"tolerations: tenant {fence.tenant} may not tolerate the servers' or gpucell's taints "
        f"({_listed(fence.forbidden_taints)}), a cordon ({', '.join(DAEMONSET_ONLY_TAINTS)}; only a DaemonSet's pods "
        "may) or every taint (a toleration without a key); its workloads get the tolerations of their pools from "
        "gpucell"
    )
    return expression, message


def _selects_server(fence: TenantFence, key: str, value: str) -> str:
    """CEL: label ``key`` = ``value`` picks a server (a server-role label, its pool, its role or its host name)."""
    return (
        f"{key} in {_lit(SERVER_NODE_LABELS)} || ({key} == '{POOL_LABEL}' && {value} in {_lit(fence.server_pools)}) "
        f"|| ({key} == '{ROLE_LABEL}' && {value} == '{NodeRole.SERVER.value}') "
        f"|| ({key} == 'kubernetes.io/hostname' && {value} in {_lit(fence.servers)})"
    )


def _node_selection(fence: TenantFence, spec: str) -> tuple[str, str]:
    """``nodeSelector`` and required or preferred node affinity never pick a server (``In``/``Exists`` terms;
    ``NotIn``/``DoesNotExist`` keep away from them)."""
    picks = _selects_server(fence, "k", f"{spec}.nodeSelector[k]")
    selector = f"!has({spec}.nodeSelector) || {spec}.nodeSelector.all(k, !({picks}))"
    expression_ok = (
        f"e.operator in ['NotIn', 'DoesNotExist', 'Gt', 'Lt'] || (!(e.key in {_lit(SERVER_NODE_LABELS)}) && "
        f"(!has(e.values) || e.values.all(v, !({_selects_server(fence, 'e.key', 'v')}))))"
    )
    field_ok = f"f.operator == 'NotIn' || !has(f.values) || f.values.all(v, !(v in {_lit(fence.servers)}))"
    term_ok = (
        f"(!has(term.matchExpressions) || term.matchExpressions.all(e, {expression_ok})) && "
        f"(!has(term.matchFields) || term.matchFields.all(f, {field_ok}))"
    )
    node = f"{spec}.affinity.nodeAffinity"
    required = f"{node}.requiredDuringSchedulingIgnoredDuringExecution"
    preferred = f"{node}.preferredDuringSchedulingIgnoredDuringExecution"
    affinity = (
        f"!has({spec}.affinity) || !has({node}) || "
        f"((!has({required}) || !has({required}.nodeSelectorTerms) || "
        f"{required}.nodeSelectorTerms.all(term, {term_ok})) && "
        f"(!has({preferred}) || {preferred}.all(p, [p.preference].all(term, {term_ok}))))"
    )
    message = (
        f"nodeSelector/affinity: tenant {fence.tenant}'s workloads never select the servers "
        f"({_listed(fence.servers)}: their names, pools {_listed(fence.server_pools)}, role label or "
        f"{', '.join(SERVER_NODE_LABELS)})"
    )
    return f"({selector}) && ({affinity})", message


def _gpu_requests(fence: TenantFence, resources: str) -> str:
    """CEL: the ``requests`` and ``limits`` of ``resources`` name no GPU resource outside the tenant's quota."""
    granted = _lit(fence.gpu_resources)
    return " && ".join(
        f"(!has({resources}.{part}) || "
        f"{resources}.{part}.all(r, !r.startsWith('{GPU_RESOURCE_PREFIX}') || r in {granted}))"
        for part in ("requests", "limits")
    )


def _containers(spec: str) -> list[str]:
    return [f"{spec}.containers", f"{spec}.initContainers"]


def _asks_gpu(spec: str) -> str:
    """CEL: a container of pod spec ``spec`` requests or limits a GPU resource."""
    return " || ".join(
        f"(has({c}) && {c}.exists(c, has(c.resources) && "
        f"((has(c.resources.requests) && c.resources.requests.exists(r, r.startsWith('{GPU_RESOURCE_PREFIX}'))) || "
        f"(has(c.resources.limits) && c.resources.limits.exists(r, r.startsWith('{GPU_RESOURCE_PREFIX}'))))))"
        for c in _containers(spec)
    )


def _priority(fence: TenantFence, spec: str) -> tuple[str, str]:
    expression = f"!has({spec}.priorityClassName) || {spec}.priorityClassName in {_lit(fence.priority_classes)}"
    message = (
        f"priorityClassName: tenant {fence.tenant} may name only the PriorityClasses open to it: "
        f"{_listed(fence.priority_classes)}"
    )
    return expression, message


def _validation(expression: str, message: str) -> dict[str, str]:
    return {"expression": expression, "message": message}


def pod_rules(fence: TenantFence) -> list[dict[str, str]]:
    """The validations of ``gpucell-tenant-<tenant>-pods``, on ``variables.spec`` (the pod spec):

    tolerations (:data:`TenantFence.forbidden_taints`, none without a key, :data:`DAEMONSET_ONLY_TAINTS` on
    DaemonSets and on pods a DaemonSet controls that a platform identity writes); ``nodeName`` not a server or
    quarantined host; node selection never onto a server; GPU resources only the quota's; ``runtimeClassName``
    only ``nvidia`` and only with a GPU request (the NVIDIA runtime hands a container every GPU of the node its
    image's ``NVIDIA_VISIBLE_DEVICES=all`` asks for when no device plugin set that variable); ``priorityClassName``
    only one open to the tenant; no Multus networks annotation written by the tenant (:func:`_pod_networks`).
    """
    spec = "variables.spec"
    # A pod's ownerReferences are the writer's to set: only a pod a platform identity (the DaemonSet controller)
    # writes counts as a DaemonSet's, so a tenant cannot forge an owner to land on a cordoned node.
    daemonset = (
        "object.kind == 'DaemonSet' || (object.kind == 'Pod' && !(" + TENANT_IDENTITY + ") && "
        "has(object.metadata.ownerReferences) && "
        "object.metadata.ownerReferences.exists(o, o.kind == 'DaemonSet' && has(o.controller) && o.controller))"
    )
    gpus = " && ".join(
        f"(!has({c}) || {c}.all(c, !has(c.resources) || ({_gpu_requests(fence, 'c.resources')})))"
        for c in _containers(spec)
    )
    runtime = (
        f"!has({spec}.runtimeClassName) || ({spec}.runtimeClassName in {_lit(fence.runtime_classes)} && "
        f"({_asks_gpu(spec)}))"
    )
    return [
        _validation(*_tolerations(fence, spec, daemonset=daemonset)),
        _validation(
            f"!has({spec}.nodeName) || !({spec}.nodeName in {_lit(fence.pinned_nodes)})",
            f"nodeName: tenant {fence.tenant}'s pods never name a server or a quarantined host "
            f"({_listed(fence.pinned_nodes)}); nodeName skips the scheduler, taints and cordons",
        ),
        _validation(*_node_selection(fence, spec)),
        _validation(
            gpus,
            f"resources: tenant {fence.tenant}'s quota grants these GPU resources only: {_listed(fence.gpu_resources)}",
        ),
        _validation(
            runtime,
            f"runtimeClassName: tenant {fence.tenant}'s pods may name {_listed(fence.runtime_classes)} only, and "
            "only with a GPU request (the NVIDIA runtime would hand a pod without one the node's GPUs)",
        ),
        _validation(*_priority(fence, spec)),
        _validation(*_launcher_label(fence)),
        _validation(*_pod_networks(fence)),
    ]


def _has_label(obj: str) -> str:
    """CEL: object ``obj`` (a Pod or a pod template) carries :data:`LAUNCHER_LABEL`."""
    return f"(has({obj}.metadata) && has({obj}.metadata.labels) && '{LAUNCHER_LABEL}' in {obj}.metadata.labels)"


def _launcher_label(fence: TenantFence) -> tuple[str, str]:
    """A Pod's :data:`LAUNCHER_LABEL` is set or changed by :data:`VIRT_CONTROLLER` only (any other writer keeps it as
    it was: absent at creation, unchanged on update); a pod template never carries it (its pods would be the
    ReplicaSet or Job controller's, refused anyway)."""
    label = f"['{LAUNCHER_LABEL}']"
    unchanged = (
        f"{_has_label('object')} == {_has_label('oldObject')} && "
        f"(!{_has_label('object')} || object.metadata.labels{label} == oldObject.metadata.labels{label})"
    )
    pod = (
        f"object.kind == 'Pod' && (request.userInfo.username == '{VIRT_CONTROLLER}' || "
        f"(request.operation == 'UPDATE' ? ({unchanged}) : !{_has_label('object')}))"
    )
    expression = (
        f"({pod}) || (object.kind == 'CronJob' && !{_has_label('object.spec.jobTemplate.spec.template')}) || "
        f"(object.kind != 'Pod' && object.kind != 'CronJob' && !{_has_label('object.spec.template')})"
    )
    message = (
        f"labels: the {LAUNCHER_LABEL} label marks KubeVirt's own pods (a VM's virt-launcher, whose GPUs are metered "
        f"as kind=vm) and is virt-controller's alone; tenant {fence.tenant}'s pods and pod templates may not set or "
        "change it"
    )
    return expression, message


def vm_rules(fence: TenantFence) -> list[dict[str, str]]:
    """The validations of ``gpucell-tenant-<tenant>-vms``, on ``variables.spec`` (the VMI spec): tolerations and
    node selection as for pods, ``priorityClassName``, and every ``domain.devices.gpus``/``hostDevices``
    ``deviceName`` (and GPU resource of ``domain.resources``) one the tenant's quota grants (DRA GPUs name a claim,
    no ``deviceName``), and Multus networks of the VM's own namespace only (:func:`_own_networks`), named in its
    ``networks`` and never in an annotation (:func:`_vm_annotations`)."""
    spec = "variables.spec"
    devices = f"{spec}.domain.devices"
    names = " && ".join(
        f"(!has({devices}.{kind}) || {devices}.{kind}.all(d, !has(d.deviceName) || d.deviceName in "
        f"{_lit(fence.gpu_resources)}))"
        for kind in ("gpus", "hostDevices")
    )
    resources = f"{spec}.domain.resources"
    return [
        _validation(*_tolerations(fence, spec, daemonset="false")),
        _validation(*_node_selection(fence, spec)),
        _validation(
            f"!has({spec}.domain) || ((!has({devices}) || ({names})) && "
            f"(!has({resources}) || ({_gpu_requests(fence, resources)})))",
            f"domain.devices: tenant {fence.tenant}'s VMs may use these host devices and GPU resources only "
            f"(its quota): {_listed(fence.gpu_resources)}",
        ),
        _validation(*_priority(fence, spec)),
        _validation(*_own_networks(fence, spec)),
        _validation(*_vm_annotations(fence)),
        _validation(*_no_bare_vf(fence, spec)),
    ]


def isolated_rules(fence: TenantFence) -> list[dict[str, str]]:
    """The validation of ``gpucell-tenant-<tenant>-isolated`` (an isolated-only tenant): a pod is created only by
    :data:`VIRT_CONTROLLER` (a VM's ``virt-launcher``, hotplug and export pods) or :data:`CDI_CONTROLLER` (its disks'
    importer, upload and clone pods), never by a tenant identity, nor by the ReplicaSet, Job or StatefulSet controllers
    on behalf of a tenant's Deployment; and nobody adds an ephemeral container (``kubectl debug``) to a pod there, which
    would run a container on the host's kernel next to the VM. A tenant member's code then runs in a guest only."""
    writers = (VIRT_CONTROLLER, CDI_CONTROLLER)
    init = "object.spec.initContainers"
    return [
        _validation(
            f"request.subResource == '' && request.userInfo.username in {_lit(writers)}",
            f"tenant {fence.tenant} runs isolated workloads only (isolation.default: vm): the pods of its namespace "
            "are KubeVirt's and CDI's (a VM's launcher, a disk import), and none gets an ephemeral container; run "
            "the code in a VirtualMachine, or a notebook or model endpoint (isolated)",
        ),
        # CDI runs a VDDK import's init container from an image the DataVolume names (spec.source.vddk.initImageURL
        # or the PVC annotation cdi.kubevirt.io/storage.pod.vddk.initimageurl): the tenant's code, on the host kernel
        _validation(
            f"request.subResource != '' || !has({init}) || {init}.all(c, c.name != '{CDI_VDDK_CONTAINER}')",
            f"tenant {fence.tenant} runs isolated workloads only (isolation.default: vm): a disk import from VMware "
            f"(vddk) runs its {CDI_VDDK_CONTAINER} container from an image of the tenant's choosing on the host's "
            "kernel; import the disk over http or from a registry instead",
        ),
    ]


def _own_networks(fence: TenantFence, spec: str) -> tuple[str, str]:
    """A VM's Multus networks are its own namespace's: a ``networkName`` of ``<namespace>/<name>`` names another
    namespace's NetworkAttachmentDefinition, which Multus would attach (another tenant's fabric VLAN, decision
    0039)."""
    own = f"{namespace_of(fence.tenant)}/"
    expression = (
        f"!has({spec}.networks) || {spec}.networks.all(n, !has(n.multus) || "
        f"!n.multus.networkName.contains('/') || n.multus.networkName.startsWith('{own}'))"
    )
    message = (
        f"networks.multus.networkName: tenant {fence.tenant}'s VMs may attach only to networks of their own namespace "
        f"({namespace_of(fence.tenant)}); another namespace's network is another tenant's fabric"
    )
    return expression, message


def _no_multus_annotation(metadata: str) -> str:
    """CEL: ``metadata`` (an object's metadata) carries none of :data:`MULTUS_ANNOTATIONS`."""
    return f"(!has({metadata}.annotations) || !{_lit(MULTUS_ANNOTATIONS)}.exists(a, a in {metadata}.annotations))"


def _no_bare_vf(fence: TenantFence, spec: str) -> tuple[str, str]:
    """A VM gets a fabric rail's VF only as an ``sriov`` interface on one of its networks (the rail is in the quota
    for those, as virt-controller requests it on the launcher pod): named as a host device or in
    ``domain.resources``, the VF reaches the launcher pod with no network, so no CNI ever puts it on a VLAN and it
    sends whatever 802.1Q tags it likes onto the fabric."""
    devices, resources = f"{spec}.domain.devices", f"{spec}.domain.resources"
    rail = f"matches('{RAIL_RESOURCE_PATTERN}')"
    named = " && ".join(
        f"(!has({devices}.{kind}) || {devices}.{kind}.all(d, !has(d.deviceName) || !d.deviceName.{rail}))"
        for kind in ("gpus", "hostDevices")
    )
    asked = " && ".join(
        f"(!has({resources}.{part}) || {resources}.{part}.all(r, !r.{rail}))" for part in ("requests", "limits")
    )
    expression = f"!has({spec}.domain) || ((!has({devices}) || ({named})) && (!has({resources}) || ({asked})))"
    message = (
        f"domain.devices: tenant {fence.tenant}'s VMs get a fabric rail's VFs only as rdmaNics (sriov interfaces on "
        "the tenant's own networks), never as a host device or resource: such a VF would carry no VLAN"
    )
    return expression, message


def _vm_annotations(fence: TenantFence) -> tuple[str, str]:
    """A VMI (or a VM's or replica set's template) carries no Multus annotation: virt-controller copies a VMI's
    annotations onto its ``virt-launcher`` pod (kubevirt/kubevirt v1.9.0 ``pkg/virt-controller/services/
    template.go``, ``filterVMIAnnotationsForPod``) and writes its own networks annotation only for a VM with Multus
    networks, so a VM without them would hand Multus ``<other namespace>/<network>`` past :func:`_own_networks`
    (with a rail's VF requested as a host device: a VF on another tenant's VLAN in the launcher pod)."""
    template = "object.spec.template"
    expression = (
        f"object.kind == 'VirtualMachineInstance' ? {_no_multus_annotation('object.metadata')} : "
        f"(!has({template}.metadata) || {_no_multus_annotation(f'{template}.metadata')})"
    )
    message = (
        f"metadata.annotations: tenant {fence.tenant}'s VMs may not set {', '.join(MULTUS_ANNOTATIONS)} (virt-"
        "controller copies them onto the VM's launcher pod); name the VM's networks in spec.networks"
    )
    return expression, message


def _pod_networks(fence: TenantFence) -> tuple[str, str]:
    """A pod (or pod template) in the tenant's namespace carries no Multus annotation (:data:`MULTUS_ANNOTATIONS`) and
    requests no fabric rail's VFs, whoever writes it (a tenant member, or a controller from a tenant's object: KServe
    from an InferenceService's ``annotations`` and ``resources``): only KubeVirt's virt-controller writes a launcher
    pod with both, from the VM's own (checked) networks."""
    # a template's metadata is optional (a CronJob's job template has none unless written): absent, it has no
    # annotation, where reading it would fail the expression and refuse the object
    pod = (
        "(object.kind == 'Pod' ? object : object.kind == 'CronJob' ? object.spec.jobTemplate.spec.template : "
        "object.spec.template)"
    )
    spec = "variables.spec"
    rails = " && ".join(
        f"(!has({c}) || {c}.all(c, !has(c.resources) || "
        + " && ".join(
            f"(!has(c.resources.{part}) || c.resources.{part}.all(r, !r.matches('{RAIL_RESOURCE_PATTERN}')))"
            for part in ("requests", "limits")
        )
        + "))"
        for c in _containers(spec)
    )
    annotations = f"(!has({pod}.metadata) || {_no_multus_annotation(f'{pod}.metadata')})"
    # every writer but virt-controller: KServe's controller writes a tenant's InferenceService's annotations and
    # resources into its predictor's pod template, so a check of tenant identities only would let them through
    expression = f"request.userInfo.username == '{VIRT_CONTROLLER}' || ({annotations} && ({rails}))"
    message = (
        f"metadata.annotations: tenant {fence.tenant}'s pods may neither set a Multus annotation "
        f"({', '.join(MULTUS_ANNOTATIONS)}) nor request a fabric rail's VFs; the GPU fabric reaches VMs only, through "
        "their own namespace's networks (a bare VF would carry no VLAN)"
    )
    return expression, message


def _address_allowed(fence: TenantFence, address: str) -> str:
    """CEL: ``address`` (a string) is an IPv4 address in the tenant's pools, not another's fixed address, and one of
    the tenant's own fixed addresses only for the Service gpucell renders with it."""
    octets = f"[{address}.split('.')].all(o, [int(o[0]) * 16777216 + int(o[1]) * 65536 + int(o[2]) * 256 + int(o[3])]"
    in_pools = " || ".join(f"(n >= {first} && n <= {last})" for first, last in fence.address_ranges) or "false"
    own = " && ".join(
        f"({address} != '{addr}' || object.metadata.name == '{name}')" for addr, name in fence.own_reserved
    )
    reserved = _lit([addr for addr, _ in fence.reserved])
    return f"{address}.matches('{_IPV4}') && {octets}.all(n, {in_pools})) && !({address} in {reserved})" + (
        f" && {own}" if own else ""
    )


def _addresses_message(fence: TenantFence) -> str:
    blocks = ", ".join(f"{IPv4Address(a)}-{IPv4Address(b)}" for a, b in fence.address_ranges) or "none"
    held = ", ".join(f"{addr} ({holder})" for addr, holder in (*fence.reserved, *fence.own_reserved)) or "none"
    return (
        f"LoadBalancer address: tenant {fence.tenant}'s Services may ask only for addresses of its pools ({blocks}), "
        f"never a fixed address of another workload ({held}; a tenant's own is its named Service's)"
    )


def service_rules(fence: TenantFence) -> list[dict[str, str]]:
    """The validations of ``gpucell-tenant-<tenant>-services``: ``spec.loadBalancerIP`` and the addresses of
    :data:`ADDRESS_ANNOTATIONS` (comma-separated, Cilium's parsing trims spaces) in the tenant's pools and not held
    for another workload; no :data:`SHARING_CROSS_NAMESPACE_ANNOTATIONS`; no ``spec.externalIPs`` (CVE-2020-8554,
    on a cluster without the ``DenyServiceExternalIPs`` plugin too)."""
    annotations = "object.metadata.annotations"
    listed = " && ".join(
        f"(!('{key}' in {annotations}) || {annotations}['{key}'].split(',').all(a, "
        f"[a.trim()].all(ip, {_address_allowed(fence, 'ip')})))"
        for key in ADDRESS_ANNOTATIONS
    )
    sharing = " && ".join(f"!('{key}' in {annotations})" for key in SHARING_CROSS_NAMESPACE_ANNOTATIONS)
    return [
        _validation(
            f"(!has(object.spec.loadBalancerIP) || object.spec.loadBalancerIP == '' || "
            f"[object.spec.loadBalancerIP].all(ip, {_address_allowed(fence, 'ip')})) && "
            f"(!has({annotations}) || ({listed}))",
            _addresses_message(fence),
        ),
        _validation(
            f"!has({annotations}) || ({sharing})",
            f"annotations: tenant {fence.tenant}'s Services never share an address with another namespace "
            f"({', '.join(SHARING_CROSS_NAMESPACE_ANNOTATIONS)})",
        ),
        _validation(
            "!has(object.spec.externalIPs) || size(object.spec.externalIPs) == 0",
            f"spec.externalIPs: tenant {fence.tenant}'s Services may not claim external IPs (CVE-2020-8554)",
        ),
    ]


def access_rules(fence: TenantFence) -> list[dict[str, str]]:
    """The validation of ``gpucell-tenant-<tenant>-access``: every subject of a RoleBinding is one of the tenant's
    groups as rendered (:data:`TenantFence.groups`), a ``User`` of the cell's identity provider (its
    ``usernamePrefix``; none without OIDC) or a ServiceAccount of the tenant's namespace (no ``namespace``: the
    binding's). So no ``system:authenticated``, ``system:unauthenticated``, ``system:serviceaccounts[:<ns>]``,
    ``system:masters``, other tenants' groups or other namespaces' ServiceAccounts."""
    users = (
        f"(s.kind == 'User' && s.name.startsWith('{fence.user_prefix}') && size(s.name) > {len(fence.user_prefix)})"
        if fence.user_prefix
        else "false"
    )
    accounts = f"(s.kind == 'ServiceAccount' && (!has(s.namespace) || s.namespace in ['', '{fence.namespace}']))"
    expression = (
        f"!has(object.subjects) || object.subjects.all(s, (s.kind == 'Group' && s.name in {_lit(fence.groups)}) || "
        f"{users} || {accounts})"
    )
    named_users = f"users of the cell's identity provider ({fence.user_prefix}...)" if fence.user_prefix else "no user"
    message = (
        f"subjects: tenant {fence.tenant}'s RoleBindings name only its groups ({_listed(fence.groups)}), "
        f"{named_users} and ServiceAccounts of {fence.namespace}"
    )
    return [_validation(expression, message)]


def secret_rules(fence: TenantFence) -> list[dict[str, str]]:
    """The validation of ``gpucell-tenant-<tenant>-secrets`` (on creation): no Secret of type
    :data:`SERVICE_ACCOUNT_TOKEN`, whichever ServiceAccount it names."""
    return [
        _validation(
            f"!has(object.type) || object.type != '{SERVICE_ACCOUNT_TOKEN}'",
            f"type: tenant {fence.tenant} may not create Secrets of type {SERVICE_ACCOUNT_TOKEN} (a token that never "
            "expires for a ServiceAccount of the namespace); ask for a bounded one (kubectl create token)",
        )
    ]


def _platform_secret(obj: str) -> str:
    """CEL: ``obj`` is a Secret Cluster API owns or reads: of :data:`CLUSTER_API_SECRET_TYPE`, labelled
    :data:`CLUSTER_API_SECRET_LABEL` or named ``*``:data:`KUBECONFIG_SUFFIX`."""
    return (
        f"({obj}.kind == 'Secret' && ((has({obj}.metadata.name) && {obj}.metadata.name.endsWith('{KUBECONFIG_SUFFIX}'))"
        f" || (has({obj}.type) && {obj}.type == '{CLUSTER_API_SECRET_TYPE}') || (has({obj}.metadata.labels) && "
        f"'{CLUSTER_API_SECRET_LABEL}' in {obj}.metadata.labels)))"
    )


def _platform_binding(obj: str) -> str:
    return (
        f"({obj}.kind == 'RoleBinding' && has({obj}.metadata.name) && "
        f"{obj}.metadata.name in {_lit(PLATFORM_ROLE_BINDINGS)})"
    )


def platform_rules(fence: TenantFence) -> list[dict[str, str]]:
    """The validations of ``gpucell-tenant-<tenant>-platform``, for requests of a :data:`TENANT_IDENTITY` (create,
    update, delete; the object before and after the request): no Secret Cluster API owns or reads
    (:func:`_platform_secret`: its controllers, KCP and CAAPH connect to the tenant cluster with its kubeconfig, from
    the platform's namespaces), no RoleBinding of :data:`PLATFORM_ROLE_BINDINGS`."""

    def neither(test: Callable[[str], str]) -> str:
        """CEL: neither the object written (unless deleted) nor the one it replaces (unless created) passes ``test``."""
        after, before = test("object"), test("oldObject")
        return f"!(request.operation != 'DELETE' && {after}) && !(request.operation != 'CREATE' && {before})"

    return [
        _validation(
            neither(_platform_secret),
            f"Secrets: tenant {fence.tenant} may not create, change or delete Cluster API's Secrets (type "
            f"{CLUSTER_API_SECRET_TYPE}, label {CLUSTER_API_SECRET_LABEL}, or named <cluster>{KUBECONFIG_SUFFIX}): "
            "Cluster API's controllers and CAAPH connect to a tenant cluster with them from the platform's namespaces",
        ),
        _validation(
            neither(_platform_binding),
            f"RoleBindings: {', '.join(PLATFORM_ROLE_BINDINGS)} are gpucell's, from tenant {fence.tenant}'s groups in "
            "config; the tenant may add RoleBindings of its own",
        ),
    ]


MULTUS_NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
"""The pod annotation Multus reads a pod's secondary networks from (``<namespace>/<name>`` or JSON with
``namespace``), which KubeVirt's virt-controller writes on a launcher pod from the VM's ``networks``."""
MULTUS_ANNOTATIONS = (MULTUS_NETWORKS_ANNOTATION, "v1.multus-cni.io/default-network")
"""Every pod annotation Multus attaches networks from: the secondary networks and the one that replaces the pod's
cluster network (``v1.multus-cni.io/default-network``, k8snetworkplumbingwg/multus-cni ``pkg/types``
``DefaultNetworkAnnot``), both ``<namespace>/<name>`` of any namespace."""
RAIL_RESOURCE_PATTERN = r"^nvidia\\.com/[A-Za-z0-9]+_rail[0-9]+$"
"""CEL regular expression of a fabric rail's SR-IOV resource (:func:`gpucell.admission.fabric.rail_resource`)."""
_POD_RESOURCES = [
    {"apiGroups": [""], "resources": ["pods", "replicationcontrollers"]},
    {"apiGroups": ["apps"], "resources": ["deployments", "replicasets", "statefulsets", "daemonsets"]},
    {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"]},
]
_POD_SPEC = (
    "object.kind == 'Pod' ? object.spec : object.kind == 'CronJob' ? object.spec.jobTemplate.spec.template.spec "
    ": object.spec.template.spec"
)
_VM_RESOURCES = [
    {
        "apiGroups": ["kubevirt.io"],
        "resources": ["virtualmachines", "virtualmachineinstances", "virtualmachineinstancereplicasets"],
    }
]
_VM_SPEC = "object.kind == 'VirtualMachineInstance' ? object.spec : object.spec.template.spec"


_RBAC_RESOURCES = [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["rolebindings"]}]
_SECRET_RESOURCES = [{"apiGroups": [""], "resources": ["secrets"]}]
_NOT_BEING_DELETED = {"name": "not-being-deleted", "expression": "!has(object.metadata.deletionTimestamp)"}


def _policy(
    fence: TenantFence,
    part: str,
    rules: list[dict[str, Any]],
    spec: str | None,
    validations: list[dict[str, str]],
    *,
    operations: tuple[str, ...] = tuple(_OPERATIONS),
    conditions: tuple[dict[str, str], ...] = (_NOT_BEING_DELETED,),
) -> dict[str, Any]:
    selector = {"matchLabels": {NAMESPACE_NAME_LABEL: fence.namespace}}
    body: dict[str, Any] = {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "namespaceSelector": selector,
            "resourceRules": [{**rule, "apiVersions": ["*"], "operations": list(operations)} for rule in rules],
        },
        "matchConditions": [dict(c) for c in conditions],
    }
    if spec is not None:
        body["variables"] = [{"name": "spec", "expression": spec}]
    body["validations"] = validations
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": f"gpucell-tenant-{fence.tenant}-{part}", "labels": _labels(fence)},
        "spec": body,
    }


def _labels(fence: TenantFence) -> dict[str, str]:
    return {**MANAGED_BY, "gpucell.io/tenant": fence.tenant}


def _binding(policy: dict[str, Any], fence: TenantFence) -> dict[str, Any]:
    name = policy["metadata"]["name"]
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": _labels(fence)},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: fence.namespace}}},
        },
    }


def admission_manifests(tenant: str, facts: ClusterFacts) -> list[dict[str, Any]]:
    """The tenant's policies and bindings, each policy followed by its binding: ``...-pods``, ``...-vms``,
    ``...-services``, ``...-access``, ``...-secrets``, ``...-platform`` and, for an isolated-only tenant,
    ``...-isolated`` (see the module doc)."""
    fence = fence_of(tenant, facts)
    tenant_identity = {"name": "tenant-identity", "expression": TENANT_IDENTITY}
    policies = [
        _policy(fence, "pods", _POD_RESOURCES, _POD_SPEC, pod_rules(fence)),
        _policy(fence, "vms", _VM_RESOURCES, _VM_SPEC, vm_rules(fence)),
        _policy(fence, "services", [{"apiGroups": [""], "resources": ["services"]}], None, service_rules(fence)),
        _policy(fence, "access", _RBAC_RESOURCES, None, access_rules(fence)),
        _policy(fence, "secrets", _SECRET_RESOURCES, None, secret_rules(fence), operations=("CREATE",)),
        _policy(
            fence,
            "platform",
            [*_SECRET_RESOURCES, *_RBAC_RESOURCES],
            None,
            platform_rules(fence),
            operations=("CREATE", "UPDATE", "DELETE"),
            conditions=(tenant_identity,),
        ),
    ]
    if fence.isolated_only:
        isolated = _policy(fence, "isolated", [{"apiGroups": [""], "resources": ["pods"]}], None, isolated_rules(fence))
        rules = isolated["spec"]["matchConstraints"]["resourceRules"]
        rules[0]["operations"] = ["CREATE"]
        rules.append({"apiGroups": [""], "resources": ["pods/ephemeralcontainers"], "apiVersions": ["*"]})
        rules[1]["operations"] = ["UPDATE"]
        policies.append(isolated)
    return [obj for policy in policies for obj in (policy, _binding(policy, fence))]
