"""Tenant roles: what a tenant's admins, members and viewers may do in its namespace, stated rule by rule.

Three namespaced ``Role`` objects per tenant namespace, ``tenant-admin``, ``tenant-member`` and ``tenant-viewer``
(:data:`TENANT_ROLES`), built from one table, :data:`RIGHTS`: per API group and resources, the verbs of each
role. Nothing else is granted: no ``aggregationRule``, no aggregation label, no ClusterRole, so no chart or
operator installed later widens them (decision docs/decisions/0029-tenant-roles.md). What a tenant is refused, and
why, is :data:`REFUSED`; docs/security.md ("Tenant roles") shows both tables.

Why not Kubernetes' ``admin``/``edit``/``view``: they are aggregated ClusterRoles (``aggregationRule`` selecting
``rbac.authorization.k8s.io/aggregate-to-<role>: "true"``, Kubernetes v1.34
``plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go``), so every chart with such a label widens every tenant
(cert-manager v1.21.1's chart aggregates ``cert-manager.io`` writes into ``admin``/``edit``), and the bootstrap
``system:aggregate-to-edit`` itself grants ``networking.k8s.io`` ``networkpolicies`` writes (which Cilium adds to
gpucell's CiliumNetworkPolicies as allows), ``serviceaccounts`` ``impersonate``, ``pods/eviction`` and
``poddisruptionbudgets`` writes.

The VM rights follow KubeVirt's own ``kubevirt.io:edit``/``kubevirt.io:view``/``kubevirt.io:admin`` at v1.9.0
(kubevirt/kubevirt ``pkg/virt-operator/resource/generate/rbac/cluster.go``, tag v1.9.0,
79d34c1762169e5b0370ec491cef5ca12e6b504c: ``newEditClusterRole``, ``newViewClusterRole``, ``newAdminClusterRole``),
resource for resource, less what :data:`REFUSED` says; the disk rights follow CDI's ``cdi.kubevirt.io:edit``/
``:view`` at v1.66.0 (kubevirt/containerized-data-importer ``pkg/operator/resources/cluster/rbac.go``,
``getEditPolicyRules``/``getViewPolicyRules``, 938af7c54b2491321156bad2daa707b54bbdb214). Cluster-scoped resources
of those roles (cluster instancetypes, migration policies) are left out: a RoleBinding never grants them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpucell.tenancy._common import object_meta

__all__ = [
    "ADMIN_ONLY",
    "CHANGE",
    "READ",
    "REFUSED",
    "RIGHTS",
    "TENANT_ROLES",
    "WRITE",
    "Refusal",
    "Right",
    "role_manifest",
    "role_rules",
]

RBAC_GROUP = "rbac.authorization.k8s.io"
READ = ("get", "list", "watch")
"""Reading a resource."""
CHANGE = ("create", "update", "patch", "delete", "deletecollection")
"""Writing a resource."""
WRITE = (*READ, *CHANGE)
"""Reading and writing a resource."""
TENANT_ROLES = {"admins": "tenant-admin", "members": "tenant-member", "viewers": "tenant-viewer"}
"""Tenant group key (:class:`gpucell.spec.tenancy.TenantGroups`) -> the Role its RoleBinding names."""


@dataclass(frozen=True)
class Right:
    """One row of :data:`RIGHTS`: the verbs each tenant role has on ``resources`` of ``group``."""

    group: str
    """API group (``""``: the core group)."""
    resources: tuple[str, ...]
    """Resources, subresources as ``resource/subresource`` (RBAC's form)."""
    admin: tuple[str, ...]
    member: tuple[str, ...]
    viewer: tuple[str, ...]
    why: str = ""
    """What it is for, where that is not obvious."""
    resource_names: tuple[str, ...] = ()
    """RBAC ``resourceNames``; empty: every object."""
    isolated_tenants: bool = True
    """Whether the roles of an isolated-only tenant (``isolation.default: vm``, docs/decisions/0040) have the row
    too; ``False`` for what would put a tenant's code next to a VM's QEMU on the host's kernel."""

    def verbs(self, role: str) -> tuple[str, ...]:
        """The verbs of ``role`` (``tenant-admin``, ``tenant-member`` or ``tenant-viewer``)."""
        return {"tenant-admin": self.admin, "tenant-member": self.member, "tenant-viewer": self.viewer}[role]


_VM_GET = (
    "virtualmachineinstances/guestosinfo",
    "virtualmachineinstances/filesystemlist",
    "virtualmachineinstances/userlist",
    "virtualmachineinstances/sev/fetchcertchain",
    "virtualmachineinstances/sev/querylaunchmeasurement",
    "virtualmachines/objectgraph",
    "virtualmachineinstances/objectgraph",
    "virtualmachines/expand-spec",
)
"""``subresources.kubevirt.io`` reads ``kubevirt.io:view`` has (``get``)."""
_VM_ACCESS = (
    "virtualmachineinstances/console",
    "virtualmachineinstances/vnc",
    "virtualmachineinstances/portforward",
    "virtualmachineinstances/usbredir",
    "virtualmachines/portforward",
)
"""``subresources.kubevirt.io`` that reach into a VM (``virtctl console|vnc|port-forward|ssh|usbredir``, ``get``):
``kubevirt.io:edit``'s, not ``:view``'s."""
_VM_ACTIONS = (
    "virtualmachines/start",
    "virtualmachines/stop",
    "virtualmachines/restart",
    "virtualmachines/addvolume",
    "virtualmachines/removevolume",
    "virtualmachines/memorydump",
    "virtualmachines/evacuate/cancel",
    "virtualmachineinstances/pause",
    "virtualmachineinstances/unpause",
    "virtualmachineinstances/addvolume",
    "virtualmachineinstances/removevolume",
    "virtualmachineinstances/freeze",
    "virtualmachineinstances/unfreeze",
    "virtualmachineinstances/softreboot",
    "virtualmachineinstances/reset",
    "virtualmachineinstances/sev/setupsession",
    "virtualmachineinstances/sev/injectlaunchsecret",
    "virtualmachineinstances/evacuate/cancel",
)
"""``subresources.kubevirt.io`` actions of ``kubevirt.io:edit`` (``update``; ``virtctl start|stop|restart|pause|
addvolume|memory-dump...``). ``virtualmachines/migrate`` is not among them (KubeVirt's separate
``kubevirt.io:migrate``)."""
_NONE: tuple[str, ...] = ()
_USE = ("get", "create")
_NOT_ISOLATED = (
    "not for an isolated-only tenant (`isolation.default: vm`): its pods are VMs' `virt-launcher` pods, whose "
    "`compute` container runs QEMU on the host's kernel, outside the VM boundary"
)

RIGHTS: tuple[Right, ...] = (
    # -- core ---------------------------------------------------------------------------------------------------
    Right("", ("namespaces",), ("get",), ("get",), ("get",), "its own namespace only (the binding's)"),
    Right(
        "",
        ("pods", "persistentvolumeclaims", "services", "configmaps", "serviceaccounts"),
        WRITE,
        WRITE,
        READ,
        "workloads, disks, Services (LoadBalancer and NodePort counted by the quota)",
    ),
    Right(
        "", ("secrets",), WRITE, WRITE, _NONE, "its workloads' credentials, notebook tokens, tenant-cluster kubeconfigs"
    ),
    Right(
        "",
        (
            "pods/log",
            "pods/status",
            "persistentvolumeclaims/status",
            "services/status",
            "events",
            "endpoints",
            "resourcequotas",
            "limitranges",
        ),
        READ,
        READ,
        READ,
    ),
    Right(
        "",
        ("pods/exec", "pods/attach"),
        _USE,
        _USE,
        _NONE,
        f"kubectl exec, attach; {_NOT_ISOLATED}",
        isolated_tenants=False,
    ),
    Right(
        "",
        ("pods/portforward",),
        _USE,
        _USE,
        _NONE,
        "kubectl port-forward (an isolated notebook without `expose` is reached so: the kubelet forwards to a port "
        "of the pod's network namespace, which KubeVirt's masquerade binding forwards to the guest; nothing runs in "
        "the pod's containers)",
    ),
    Right(
        "",
        ("serviceaccounts/token",),
        ("create",),
        ("create",),
        _NONE,
        "tokens of the namespace's ServiceAccounts, which hold tenant roles only (a pod mounting one gets its token "
        "anyway)",
    ),
    Right("discovery.k8s.io", ("endpointslices",), READ, READ, READ),
    # -- workloads ----------------------------------------------------------------------------------------------
    Right(
        "apps",
        (
            "deployments",
            "deployments/scale",
            "statefulsets",
            "statefulsets/scale",
            "replicasets",
            "replicasets/scale",
        ),
        WRITE,
        WRITE,
        READ,
    ),
    Right("apps", ("daemonsets", "controllerrevisions"), READ, READ, READ),
    Right("batch", ("jobs", "cronjobs"), WRITE, WRITE, READ),
    Right("autoscaling", ("horizontalpodautoscalers",), WRITE, WRITE, READ),
    Right("coordination.k8s.io", ("leases",), WRITE, WRITE, READ, "leader election of its own applications"),
    Right("policy", ("poddisruptionbudgets",), READ, READ, READ),
    Right(
        "resource.k8s.io",
        ("resourceclaims", "resourceclaimtemplates"),
        WRITE,
        WRITE,
        READ,
        "GPUs of dra pools (counted by the quota per DeviceClass)",
    ),
    Right("resource.k8s.io", ("resourceclaims/status",), READ, READ, READ),
    Right("snapshot.storage.k8s.io", ("volumesnapshots",), WRITE, WRITE, READ, "snapshots of its own PVCs"),
    # -- what gpucell renders from config: read only -------------------------------------------------------------
    Right("networking.k8s.io", ("networkpolicies", "ingresses"), READ, READ, READ),
    Right("gateway.networking.k8s.io", ("httproutes",), READ, READ, READ),
    Right("cilium.io", ("ciliumnetworkpolicies",), READ, READ, READ, "the tenant sees its fence"),
    # -- VMs: KubeVirt v1.9.0 ------------------------------------------------------------------------------------
    Right(
        "kubevirt.io",
        (
            "virtualmachines",
            "virtualmachineinstances",
            "virtualmachineinstancepresets",
            "virtualmachineinstancereplicasets",
        ),
        WRITE,
        WRITE,
        READ,
    ),
    Right("kubevirt.io", ("virtualmachineinstancemigrations",), READ, READ, READ),
    Right("subresources.kubevirt.io", _VM_GET, ("get",), ("get",), ("get",), "virtctl guestosinfo, fslist, userlist"),
    Right("subresources.kubevirt.io", ("expand-vm-spec",), ("update",), ("update",), ("update",)),
    Right("subresources.kubevirt.io", _VM_ACCESS, ("get",), ("get",), _NONE, "virtctl console, vnc, ssh, port-forward"),
    Right(
        "subresources.kubevirt.io",
        ("virtualmachineinstances/vnc/screenshot",),
        ("get",),
        _NONE,
        _NONE,
        "kubevirt.io:admin's only",
    ),
    Right("subresources.kubevirt.io", _VM_ACTIONS, ("update",), ("update",), _NONE, "virtctl start, stop, restart..."),
    Right(
        "snapshot.kubevirt.io",
        ("virtualmachinesnapshots", "virtualmachinesnapshotcontents", "virtualmachinerestores"),
        WRITE,
        WRITE,
        READ,
    ),
    Right("export.kubevirt.io", ("virtualmachineexports",), WRITE, WRITE, READ),
    Right("clone.kubevirt.io", ("virtualmachineclones",), WRITE, WRITE, READ),
    Right("pool.kubevirt.io", ("virtualmachinepools",), WRITE, WRITE, READ),
    Right("backup.kubevirt.io", ("virtualmachinebackups", "virtualmachinebackuptrackers"), READ, READ, READ),
    Right(
        "instancetype.kubevirt.io",
        ("virtualmachineinstancetypes", "virtualmachinepreferences"),
        READ,
        READ,
        READ,
    ),
    # -- disks: CDI v1.66.0 ----------------------------------------------------------------------------------------
    Right(
        "cdi.kubevirt.io",
        (
            "datavolumes",
            "datasources",
            "dataimportcrons",
            "volumeimportsources",
            "volumeuploadsources",
            "volumeclonesources",
        ),
        WRITE,
        WRITE,
        READ,
    ),
    Right("cdi.kubevirt.io", ("datavolumes/source",), ("create",), ("create",), _NONE, "clones from its own PVCs"),
    Right("upload.cdi.kubevirt.io", ("uploadtokenrequests",), ("create",), ("create",), _NONE, "virtctl image-upload"),
    # -- endpoints: KServe v0.20.0 ---------------------------------------------------------------------------------
    Right(
        "serving.kserve.io",
        ("inferenceservices", "servingruntimes", "inferencegraphs", "trainedmodels"),
        WRITE,
        WRITE,
        READ,
        "KServe's chart ships no role for tenants",
    ),
    Right("serving.kserve.io", ("inferenceservices/status",), READ, READ, READ),
    # -- tenant clusters: Cluster API v1.14.0, CAPK v0.11.2, CAAPH v0.6.4 ----------------------------------------
    Right(
        "cluster.x-k8s.io",
        ("clusters", "machinedeployments", "machinesets", "machines", "machinehealthchecks", "machinepools"),
        READ,
        READ,
        READ,
    ),
    Right("controlplane.cluster.x-k8s.io", ("kubeadmcontrolplanes",), READ, READ, READ),
    Right("bootstrap.cluster.x-k8s.io", ("kubeadmconfigs", "kubeadmconfigtemplates"), READ, READ, READ),
    Right(
        "infrastructure.cluster.x-k8s.io",
        ("kubevirtclusters", "kubevirtmachines", "kubevirtmachinetemplates"),
        READ,
        READ,
        READ,
    ),
    Right("addons.cluster.x-k8s.io", ("helmchartproxies", "helmreleaseproxies"), READ, READ, READ),
    # -- the namespace's own access ------------------------------------------------------------------------------
    Right(RBAC_GROUP, ("rolebindings", "roles"), READ, READ, READ),
    Right(
        RBAC_GROUP, ("rolebindings",), ("create", "update", "patch", "delete"), _NONE, _NONE, "sharing the namespace"
    ),
    Right(
        RBAC_GROUP,
        ("roles",),
        ("bind",),
        _NONE,
        _NONE,
        "RoleBindings to the tenant roles only",
        resource_names=tuple(TENANT_ROLES.values()),
    ),
    Right("authorization.k8s.io", ("localsubjectaccessreviews",), ("create",), _NONE, _NONE, "kubectl auth can-i --as"),
)
"""Every right a tenant role has, row by row (verbs of ``tenant-admin``, ``tenant-member``, ``tenant-viewer``)."""

ADMIN_ONLY = ("rolebindings", "roles", "localsubjectaccessreviews", "virtualmachineinstances/vnc/screenshot")
"""What ``tenant-admin`` has beyond ``tenant-member``: the namespace's RoleBindings, binding the tenant roles,
access reviews, VNC screenshots (KubeVirt's admin-only subresource)."""


@dataclass(frozen=True)
class Refusal:
    """One row of :data:`REFUSED`: verbs no tenant role has on ``resources`` of ``group``, and why."""

    group: str
    resources: tuple[str, ...]
    """Resources (``*``: every resource of the group)."""
    why: str
    verbs: tuple[str, ...] = CHANGE
    """The verbs refused; :data:`CHANGE` (every write) unless said otherwise."""


REFUSED: tuple[Refusal, ...] = (
    Refusal(
        "networking.k8s.io",
        ("networkpolicies",),
        "Cilium adds a NetworkPolicy's allows to gpucell's CiliumNetworkPolicies: `egress: [{}]` would reopen the "
        "servers, the other cells and every private range",
    ),
    Refusal("cilium.io", ("*",), "the tenant's fence; only deny rules outrank an allow, and a tenant policy may allow"),
    Refusal(
        "cert-manager.io",
        ("*",),
        "a cell's ClusterIssuer signs any name asked for: another tenant's endpoint host, the API or OIDC name, a CA",
    ),
    Refusal("acme.cert-manager.io", ("*",), "orders and challenges are cert-manager's"),
    Refusal(
        "monitoring.coreos.com",
        ("*",),
        "a PodMonitor or rule of the tenant's would feed series into the cell's Prometheus: metering and alerts",
    ),
    Refusal(
        "networking.k8s.io",
        ("ingresses",),
        "a host name on the shared ingress controller is admitted by gpucell (one owner per name); a tenant's Ingress "
        "could claim another's",
    ),
    Refusal("gateway.networking.k8s.io", ("*",), "routes on the cell's Gateway: as Ingresses"),
    Refusal(
        RBAC_GROUP,
        ("roles", "clusterroles", "clusterrolebindings"),
        "a tenant's access is its namespace's RoleBindings to the tenant roles",
        (*CHANGE, "escalate"),
    ),
    Refusal(
        RBAC_GROUP,
        ("clusterroles",),
        "`bind` of the tenant roles only, by name; RBAC refuses a binding to any other role unless the binder holds "
        "every right of it",
        ("bind",),
    ),
    Refusal("", ("resourcequotas", "limitranges"), "the tenant's quota and defaults are the platform's"),
    Refusal("", ("namespaces",), "its labels carry Pod Security and the platform-services mark"),
    Refusal(
        "", ("nodes", "pods/binding", "bindings"), "nothing of a tenant names a node", ("create", "update", "patch")
    ),
    Refusal(
        "",
        ("pods/eviction",),
        "evicting a VM's launcher pod starts a live migration, which KubeVirt keeps for its migrate role; a pod of "
        "its own the tenant deletes",
        ("create",),
    ),
    Refusal(
        "",
        ("pods/ephemeralcontainers", "pods/proxy", "services/proxy"),
        "kubectl debug adds containers past the pod admission the tenant's pods get; the API server's proxy is a "
        "client on the servers' own network",
        ("get", "create", "update", "patch"),
    ),
    Refusal(
        "",
        ("serviceaccounts", "users", "groups"),
        "`impersonate` (edit has it for ServiceAccounts): requests in another's name",
        ("impersonate",),
    ),
    Refusal("", ("endpoints",), "an Endpoints object can point a Service at any address (CVE-2021-25740)"),
    Refusal(
        "apps",
        ("daemonsets",),
        "DaemonSet pods tolerate node.kubernetes.io/unschedulable: they run on cordoned nodes under maintenance",
    ),
    Refusal("policy", ("poddisruptionbudgets",), "a budget of 0 disruptions stops every drain of its nodes"),
    Refusal(
        "instancetype.kubevirt.io",
        ("*",),
        "gpucell renders the tenant's instancetypes from config: GPUs and host devices of a VM stay on the VM",
    ),
    Refusal("backup.kubevirt.io", ("*",), "backups are the platform's (Velero)"),
    Refusal("subresources.kubevirt.io", ("virtualmachines/migrate",), "live migration is the operator's", ("update",)),
    Refusal(
        "cluster.x-k8s.io",
        ("*",),
        "tenant clusters are declared in config and admitted there; Cluster API acts with the platform's rights",
    ),
    Refusal(
        "addons.cluster.x-k8s.io",
        ("*",),
        "CAAPH fetches a HelmChartProxy's chart from its repository URL, from the platform's namespace",
    ),
    Refusal("keda.sh", ("*",), "KEDA queries a trigger's server from the platform's namespace"),
    Refusal(
        "k8s.cni.cncf.io",
        ("*",),
        "NetworkAttachmentDefinitions: the Network Operator renders the tenant's fabric networks, each with the "
        "tenant's VLAN (decision 0039); one of the tenant's own could name another VLAN or another tenant's",
    ),
    Refusal("sriovnetwork.openshift.io", ("*",), "the fabric's VFs and networks are the platform's (decision 0039)"),
    Refusal("velero.io", ("*",), "backups and restores are the platform's"),
)
"""What no tenant role grants (a row's verbs on its group's resources; ``*``: the whole group), with the reason."""


def role_rules(role: str, *, isolated_only: bool = False) -> list[dict[str, Any]]:
    """The RBAC ``rules`` of ``role`` (a value of :data:`TENANT_ROLES`): one rule per :data:`RIGHTS` row the role
    has verbs in, in table order; for an ``isolated_only`` tenant (``isolation.default: vm``) without the rows
    that are not :attr:`Right.isolated_tenants` (``pods/exec``, ``pods/attach``)."""
    rules: list[dict[str, Any]] = []
    for right in RIGHTS:
        verbs = right.verbs(role)
        if not verbs or (isolated_only and not right.isolated_tenants):
            continue
        rule: dict[str, Any] = {"apiGroups": [right.group], "resources": list(right.resources), "verbs": list(verbs)}
        if right.resource_names:
            rule["resourceNames"] = list(right.resource_names)
        rules.append(rule)
    return rules


def role_manifest(tenant: str, role: str, *, isolated_only: bool = False) -> dict[str, Any]:
    """The ``Role`` ``role`` (``tenant-admin``, ``tenant-member`` or ``tenant-viewer``) in the tenant's namespace,
    with :func:`role_rules` (``isolated_only``: of a tenant whose ``isolation.default`` is ``vm``) and gpucell's
    common labels (never an aggregation label)."""
    return {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": "Role",
        "metadata": object_meta(tenant, role),
        "rules": role_rules(role, isolated_only=isolated_only),
    }
