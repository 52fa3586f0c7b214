"""Tenant attack catalogue, RBAC layer: what a tenant's people could try with ``kubectl`` and their rights, refused.

Rights are computed from every Role, ClusterRole and binding of the prod plan's region ``fra1``, the Helm releases'
rendered objects included and aggregation resolved (:mod:`tests.rbac_rights`). Each attack is data: an id, who
tries it (a group of tenant ``acme``), the request (a verb and an object, or a subresource of one) and the layer
that refuses it. The lead aggregates catalogues of every layer by these entries. :data:`NEEDED` lists what tenants
need and must keep.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from gpucell.stacks.plan import Plan
from tests.conftest import UPSTREAM, prod_plan_of, shared_plan
from tests.rbac_rights import Request, Rights, Subject, plan_rights

NAMESPACE = "tenant-acme"
GROUPS = {"admins": "oidc:acme-platform", "members": "oidc:acme-ml", "viewers": "oidc:acme-finance"}
"""Tenant acme's groups in Pulumi.prod-fra1.yaml, with the cell's OIDC groupsPrefix."""


def obj(api_version: str, kind: str, name: str, namespace: str | None = NAMESPACE, **body: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name} if namespace is None else {"name": name, "namespace": namespace}
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, **body}


def binding_to(kind: str, role: str, group: str = "oidc:acme-ml") -> dict[str, Any]:
    return obj(
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        f"escalate-{role}",
        roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
        subjects=[{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": group}],
    )


@dataclass(frozen=True)
class Attack:
    """One request a tenant's group makes, and the layer expected to refuse it (``layer``)."""

    id: str
    who: str
    """``admins``, ``members`` or ``viewers`` of tenant acme."""
    verb: str
    object: dict[str, Any]
    subresource: str = ""
    layer: str = "RBAC"
    note: str = field(default="", compare=False)


NETWORK_POLICY = obj(
    "networking.k8s.io/v1", "NetworkPolicy", "open", spec={"podSelector": {}, "egress": [{}], "policyTypes": ["Egress"]}
)
ATTACKS: tuple[Attack, ...] = (
    Attack("netpol-allow-all-egress", "members", "create", NETWORK_POLICY, note="Cilium adds its allows"),
    Attack("netpol-allow-all-egress-admin", "admins", "create", NETWORK_POLICY),
    Attack(
        "cilium-policy-to-world",
        "members",
        "create",
        obj(
            "cilium.io/v2",
            "CiliumNetworkPolicy",
            "out",
            spec={"endpointSelector": {}, "egress": [{"toEntities": ["world"]}]},
        ),
    ),
    Attack(
        "cilium-policy-to-kube-apiserver",
        "admins",
        "create",
        obj(
            "cilium.io/v2",
            "CiliumNetworkPolicy",
            "api",
            spec={"endpointSelector": {}, "egress": [{"toEntities": ["kube-apiserver"]}]},
        ),
    ),
    Attack(
        "cilium-edit-default-deny",
        "admins",
        "delete",
        obj("cilium.io/v2", "CiliumNetworkPolicy", "tenant-default-deny"),
    ),
    Attack(
        "cilium-clusterwide-policy",
        "admins",
        "create",
        obj("cilium.io/v2", "CiliumClusterwideNetworkPolicy", "all", None, spec={"endpointSelector": {}}),
    ),
    Attack(
        "certificate-for-another-tenants-host",
        "members",
        "create",
        obj(
            "cert-manager.io/v1",
            "Certificate",
            "steal",
            spec={"dnsNames": ["fraud-detector.globex.example"], "issuerRef": {"kind": "ClusterIssuer", "name": "ca"}},
        ),
    ),
    Attack("certificate-request", "admins", "create", obj("cert-manager.io/v1", "CertificateRequest", "csr")),
    Attack("issuer", "admins", "create", obj("cert-manager.io/v1", "Issuer", "ca", spec={"ca": {"secretName": "x"}})),
    Attack("acme-order", "admins", "create", obj("acme.cert-manager.io/v1", "Order", "order")),
    Attack("podmonitor", "members", "create", obj("monitoring.coreos.com/v1", "PodMonitor", "forge")),
    Attack("servicemonitor", "admins", "create", obj("monitoring.coreos.com/v1", "ServiceMonitor", "forge")),
    Attack("prometheusrule", "admins", "create", obj("monitoring.coreos.com/v1", "PrometheusRule", "forge")),
    Attack("rolebinding-to-cluster-admin", "admins", "create", binding_to("ClusterRole", "cluster-admin")),
    Attack("rolebinding-to-admin", "admins", "create", binding_to("ClusterRole", "admin"), note="escalation check"),
    Attack("rolebinding-to-edit", "admins", "create", binding_to("ClusterRole", "edit")),
    Attack("rolebinding-to-view", "admins", "create", binding_to("ClusterRole", "view"), note="cert-manager's view"),
    Attack("member-binds-itself-admin", "members", "create", binding_to("Role", "tenant-admin")),
    Attack(
        "widen-the-tenant-role",
        "admins",
        "update",
        obj(
            "rbac.authorization.k8s.io/v1",
            "Role",
            "tenant-member",
            rules=[{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}],
        ),
    ),
    Attack("own-role", "admins", "create", obj("rbac.authorization.k8s.io/v1", "Role", "mine")),
    Attack(
        "clusterrolebinding", "admins", "create", obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "x", None)
    ),
    Attack(
        "namespace-labels",
        "admins",
        "patch",
        obj(
            "v1",
            "Namespace",
            NAMESPACE,
            None,
            metadata={
                "name": NAMESPACE,
                "labels": {"pod-security.kubernetes.io/enforce": "privileged", "gpucell.io/platform-services": "true"},
            },
        ),
    ),
    Attack("edit-the-quota", "admins", "update", obj("v1", "ResourceQuota", "tenant-quota")),
    Attack("drop-the-priority-fence", "admins", "delete", obj("v1", "ResourceQuota", "tenant-priority-classes")),
    Attack("drop-the-limit-range", "admins", "delete", obj("v1", "LimitRange", "tenant-defaults")),
    Attack("evict-a-vm-launcher", "members", "create", obj("v1", "Pod", "virt-launcher-train-01-x"), "eviction"),
    Attack("create-a-node", "admins", "create", obj("v1", "Node", "lab-gpu-9", None)),
    Attack("bind-a-pod-to-a-server", "admins", "create", obj("v1", "Pod", "p"), "binding"),
    Attack("debug-container", "members", "patch", obj("v1", "Pod", "p"), "ephemeralcontainers"),
    Attack("api-server-proxy", "members", "get", obj("v1", "Service", "s"), "proxy"),
    Attack("endpoints-to-anywhere", "members", "create", obj("v1", "Endpoints", "s")),
    Attack("impersonate-a-serviceaccount", "members", "impersonate", obj("v1", "ServiceAccount", "default")),
    Attack("daemonset-on-cordoned-nodes", "members", "create", obj("apps/v1", "DaemonSet", "everywhere")),
    Attack("pdb-blocking-drains", "members", "create", obj("policy/v1", "PodDisruptionBudget", "never")),
    Attack("migrate-a-vm", "members", "update", obj("kubevirt.io/v1", "VirtualMachine", "train-01"), "migrate"),
    Attack(
        "own-instancetype",
        "members",
        "create",
        obj("instancetype.kubevirt.io/v1beta1", "VirtualMachineInstancetype", "gpus"),
    ),
    Attack("ingress-for-another-host", "members", "create", obj("networking.k8s.io/v1", "Ingress", "steal")),
    Attack("httproute-on-the-gateway", "members", "create", obj("gateway.networking.k8s.io/v1", "HTTPRoute", "steal")),
    Attack(
        "helmchartproxy-fetch", "admins", "create", obj("addons.cluster.x-k8s.io/v1alpha1", "HelmChartProxy", "ssrf")
    ),
    Attack(
        "scale-the-tenant-cluster", "admins", "patch", obj("cluster.x-k8s.io/v1beta2", "MachineDeployment", "ml-gpu")
    ),
    Attack("keda-trigger", "members", "create", obj("keda.sh/v1alpha1", "ScaledObject", "ssrf")),
    Attack("velero-restore", "admins", "create", obj("velero.io/v1", "Restore", "r", "velero")),
    Attack("read-another-tenants-secrets", "admins", "list", obj("v1", "Secret", "", "tenant-globex")),
    Attack("read-kube-system-secrets", "admins", "get", obj("v1", "Secret", "k3s-serving", "kube-system")),
    Attack("read-every-secret", "admins", "list", obj("v1", "Secret", "", None)),
    Attack("viewer-reads-secrets", "viewers", "get", obj("v1", "Secret", "nb-alice-token")),
    Attack("viewer-execs", "viewers", "create", obj("v1", "Pod", "p"), "exec"),
    Attack(
        "viewer-vm-console", "viewers", "get", obj("kubevirt.io/v1", "VirtualMachineInstance", "train-01"), "console"
    ),
    # the GPU fabric (decision 0039): a tenant's networks carry its VLAN, set by the platform only
    Attack(
        "retag-the-fabric-network",
        "admins",
        "patch",
        obj("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition", "acme-h100-vm-rail0"),
    ),
    Attack(
        "own-fabric-network", "admins", "create", obj("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition", "untagged")
    ),
    Attack(
        "change-the-fabric-vlan",
        "admins",
        "patch",
        obj("sriovnetwork.openshift.io/v1", "SriovNetwork", "acme-h100-vm-rail0", "nvidia-network-operator"),
    ),
    Attack(
        "fabric-network-in-own-namespace",
        "admins",
        "create",
        obj("sriovnetwork.openshift.io/v1", "SriovNetwork", "mine"),
    ),
)
"""The attacks, each refused by its ``layer`` (all RBAC here)."""

NEEDED: tuple[Attack, ...] = (
    Attack("create-vm", "members", "create", obj("kubevirt.io/v1", "VirtualMachine", "vm")),
    Attack("start-vm", "members", "update", obj("kubevirt.io/v1", "VirtualMachine", "vm"), "start"),
    Attack("restart-vm", "members", "update", obj("kubevirt.io/v1", "VirtualMachine", "vm"), "restart"),
    Attack("vm-console", "members", "get", obj("kubevirt.io/v1", "VirtualMachineInstance", "vm"), "console"),
    Attack("vm-vnc", "members", "get", obj("kubevirt.io/v1", "VirtualMachineInstance", "vm"), "vnc"),
    Attack("vm-portforward", "members", "get", obj("kubevirt.io/v1", "VirtualMachineInstance", "vm"), "portforward"),
    Attack("datavolume", "members", "create", obj("cdi.kubevirt.io/v1beta1", "DataVolume", "disk")),
    Attack("upload", "members", "create", obj("upload.cdi.kubevirt.io/v1beta1", "UploadTokenRequest", "disk")),
    Attack("pvc", "members", "create", obj("v1", "PersistentVolumeClaim", "data")),
    Attack("vm-snapshot", "members", "create", obj("snapshot.kubevirt.io/v1beta1", "VirtualMachineSnapshot", "s")),
    Attack("volume-snapshot", "members", "create", obj("snapshot.storage.k8s.io/v1", "VolumeSnapshot", "s")),
    Attack("inference-service", "members", "create", obj("serving.kserve.io/v1beta1", "InferenceService", "llm")),
    Attack("notebook-statefulset", "members", "create", obj("apps/v1", "StatefulSet", "nb")),
    Attack("notebook-token", "members", "get", obj("v1", "Secret", "nb-alice-token")),
    Attack("tenant-cluster-kubeconfig", "members", "get", obj("v1", "Secret", "ml-kubeconfig")),
    Attack("tenant-cluster", "viewers", "get", obj("cluster.x-k8s.io/v1beta2", "Cluster", "ml")),
    Attack("dra-claim", "members", "create", obj("resource.k8s.io/v1", "ResourceClaim", "gpus")),
    Attack("pod", "members", "create", obj("v1", "Pod", "p")),
    Attack("exec", "members", "create", obj("v1", "Pod", "p"), "exec"),
    Attack("port-forward", "members", "create", obj("v1", "Pod", "p"), "portforward"),
    Attack("logs", "viewers", "get", obj("v1", "Pod", "p"), "log"),
    Attack("list-vms", "viewers", "list", obj("kubevirt.io/v1", "VirtualMachine", "")),
    Attack("see-the-fence", "viewers", "list", obj("cilium.io/v2", "CiliumNetworkPolicy", "")),
    Attack("share-the-namespace", "admins", "create", binding_to("Role", "tenant-member", "oidc:acme-contractors")),
    Attack("add-an-admin", "admins", "create", binding_to("Role", "tenant-admin", "oidc:acme-oncall")),
)
"""What tenants need and must keep: the same requests, each allowed by RBAC."""

PLURALS = {
    "NetworkPolicy": "networkpolicies",
    "Ingress": "ingresses",
    "CiliumNetworkPolicy": "ciliumnetworkpolicies",
    "CiliumClusterwideNetworkPolicy": "ciliumclusterwidenetworkpolicies",
    "Certificate": "certificates",
    "CertificateRequest": "certificaterequests",
    "Issuer": "issuers",
    "Order": "orders",
    "PodMonitor": "podmonitors",
    "ServiceMonitor": "servicemonitors",
    "PrometheusRule": "prometheusrules",
    "RoleBinding": "rolebindings",
    "Role": "roles",
    "ClusterRoleBinding": "clusterrolebindings",
    "Namespace": "namespaces",
    "ResourceQuota": "resourcequotas",
    "LimitRange": "limitranges",
    "Pod": "pods",
    "Node": "nodes",
    "Service": "services",
    "Endpoints": "endpoints",
    "ServiceAccount": "serviceaccounts",
    "DaemonSet": "daemonsets",
    "StatefulSet": "statefulsets",
    "PodDisruptionBudget": "poddisruptionbudgets",
    "VirtualMachine": "virtualmachines",
    "VirtualMachineInstance": "virtualmachineinstances",
    "VirtualMachineInstancetype": "virtualmachineinstancetypes",
    "VirtualMachineSnapshot": "virtualmachinesnapshots",
    "HTTPRoute": "httproutes",
    "HelmChartProxy": "helmchartproxies",
    "MachineDeployment": "machinedeployments",
    "Cluster": "clusters",
    "ScaledObject": "scaledobjects",
    "Restore": "restores",
    "Secret": "secrets",
    "DataVolume": "datavolumes",
    "UploadTokenRequest": "uploadtokenrequests",
    "PersistentVolumeClaim": "persistentvolumeclaims",
    "VolumeSnapshot": "volumesnapshots",
    "InferenceService": "inferenceservices",
    "ResourceClaim": "resourceclaims",
    "NetworkAttachmentDefinition": "network-attachment-definitions",
    "SriovNetwork": "sriovnetworks",
}
"""Kind -> the resource RBAC names (the API's plural), for every kind of the catalogue."""


def request(attack: Attack) -> Request:
    """The RBAC request of an attack: its object's group and resource, its namespace and name. KubeVirt serves a VM's
    subresources (start, console, vnc...) from its own API group, ``subresources.kubevirt.io`` (``virtctl``'s
    requests, and the group of ``kubevirt.io:edit``'s rules for them)."""
    api_version, kind = attack.object["apiVersion"], attack.object["kind"]
    group = api_version.rpartition("/")[0]
    resource = PLURALS[kind]
    if attack.subresource:
        resource = f"{resource}/{attack.subresource}"
        if group == "kubevirt.io":
            group = "subresources.kubevirt.io"
    meta = attack.object["metadata"]
    return Request(attack.verb, group, resource, meta.get("namespace"), meta.get("name", ""))


def allowed(rights: Rights, attack: Attack) -> bool:
    """Whether RBAC lets the attack's group do it (a RoleBinding's create through the escalation check)."""
    subject = Subject(f"{attack.who}@acme.example", (GROUPS[attack.who],))
    if attack.object["kind"] == "RoleBinding" and attack.verb in ("create", "update"):
        return rights.may_bind(subject, NAMESPACE, attack.object["roleRef"])
    return rights.allows(subject, request(attack))


def prod() -> Plan:
    return shared_plan("prod-fra1")


@pytest.fixture
def rights(helm: str) -> Rights:
    del helm  # the charts are rendered
    return plan_rights(prod(), "fra1", UPSTREAM)


def test_the_catalogue_is_data_with_unique_ids_and_a_layer_each() -> None:
    ids = [a.id for a in (*ATTACKS, *NEEDED)]
    assert len(ids) == len(set(ids))
    assert len(ATTACKS) >= 8
    assert {a.layer for a in ATTACKS} == {"RBAC"}
    assert {a.who for a in ATTACKS} == set(GROUPS)


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.id for a in ATTACKS])
def test_rbac_refuses_the_attack(attack: Attack, rights: Rights) -> None:
    assert not allowed(rights, attack)


@pytest.mark.parametrize("attack", NEEDED, ids=[a.id for a in NEEDED])
def test_rbac_allows_what_tenants_need(attack: Attack, rights: Rights) -> None:
    assert allowed(rights, attack)


def test_the_evaluator_sees_chart_aggregation_and_what_edit_would_have_granted(rights: Rights) -> None:
    # cert-manager's chart aggregates into edit: a binding to edit, as gpucell had, grants Certificates and
    # NetworkPolicies; the evaluator must see it, or its refusals above prove nothing
    old = Rights(
        [
            *(dict(c) for c in rights.cluster_roles.values()),
            binding_to("ClusterRole", "edit", "oidc:acme-ml"),
        ]
    )
    member = Subject("m", ("oidc:acme-ml",))
    assert old.allows(member, Request("create", "cert-manager.io", "certificates", NAMESPACE))
    assert old.allows(member, Request("create", "networking.k8s.io", "networkpolicies", NAMESPACE))
    assert "cert-manager-edit" in rights.cluster_roles


FORBIDDEN_WRITES = {
    "networking.k8s.io": ("networkpolicies",),
    "cilium.io": (
        "ciliumnetworkpolicies",
        "ciliumclusterwidenetworkpolicies",
        "ciliumloadbalancerippools",
        "ciliumcidrgroups",
        "ciliumendpoints",
    ),
    "cert-manager.io": ("certificates", "certificaterequests", "issuers", "clusterissuers"),
    "acme.cert-manager.io": ("orders", "challenges"),
    "monitoring.coreos.com": (
        "podmonitors",
        "servicemonitors",
        "prometheusrules",
        "probes",
        "scrapeconfigs",
        "alertmanagerconfigs",
        "prometheuses",
        "alertmanagers",
        "prometheusagents",
    ),
}
"""The writes issue 35 says no tenant binding may grant: network policies, cert-manager and monitoring objects."""


@pytest.mark.parametrize("region", ["fra1", "iad1"])
def test_no_tenant_binding_of_prod_grants_network_policy_cert_manager_or_monitoring_writes(
    region: str, helm: str
) -> None:
    del helm
    plan = prod_plan_of(region)
    rights = plan_rights(plan, region, UPSTREAM)
    tenant_bindings = [
        b
        for b in rights.bindings
        if (b.get("metadata") or {}).get("namespace", "").startswith("tenant-")
        and b["metadata"]["name"] in ("tenant-admins", "tenant-members", "tenant-viewers")
    ]
    groups = {s["name"] for b in tenant_bindings for s in b["subjects"]}
    tenant_namespaces = {b["metadata"]["namespace"] for b in tenant_bindings}
    assert {"oidc:acme-platform", "oidc:acme-ml", "oidc:globex-ops"} <= groups
    # a ServiceAccount of a tenant namespace holds what a tenant admin may bind to it, and its namespace's group
    subjects = [Subject("u", (g,)) for g in sorted(groups)] + [
        Subject(f"system:serviceaccount:{ns}:default", ("system:serviceaccounts", f"system:serviceaccounts:{ns}"))
        for ns in sorted(tenant_namespaces)
    ]
    namespaces = [None, *sorted({(b.get("metadata") or {}).get("namespace") or "default" for b in rights.bindings})]
    granted = [
        (subject.groups[0], namespace, verb, group, resource)
        for subject in subjects
        for namespace in namespaces
        for group, resources in FORBIDDEN_WRITES.items()
        for resource in resources
        for verb in ("create", "update", "patch", "delete")
        if rights.allows(subject, Request(verb, group, resource, namespace))
    ]
    assert granted == []
    for subject in subjects[: len(groups)]:
        for role in ("cluster-admin", "admin", "edit", "view"):
            for namespace in tenant_namespaces:
                assert not rights.may_bind(subject, namespace, {"kind": "ClusterRole", "name": role})
