"""Tenant attacks refused at admission: what a member of tenant ``acme`` in prod's iad1 could apply with ``kubectl``,
each refused by its layer with the exact message: gpucell's ValidatingAdmissionPolicies (their CEL evaluated with a
CEL library, :mod:`tests.admission_policies`) or Pod Security ``restricted`` (:mod:`tests.pod_security`). And no
false refusal: every object gpucell renders in a tenant namespace of the prod plan, written by the operator, and what
the controllers derive from them (virt-launcher pods, KServe predictor Deployments, CAPK's VMs, StatefulSet pods,
Cluster API's Secrets), written by each controller's ServiceAccount, passes the same policies.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from typing import Any

import pytest

from gpucell.admission.tenants import ClusterFacts
from gpucell.tenancy import tenant_admission
from gpucell.tenancy.tenant_admission import VIRT_CONTROLLER, admission_manifests
from tests.admission_policies import OPERATOR, RESOURCES, TENANT_MEMBER, User, controller, evaluate, refusals
from tests.conftest import ProdPlans
from tests.pod_security import refusal

NS = "tenant-acme"
VAP = "ValidatingAdmissionPolicy"
PSA = "Pod Security"
RESTRICTED = {
    "allowPrivilegeEscalation": False,
    "runAsNonRoot": True,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
TOLERATIONS = (
    "tolerations: tenant acme may not tolerate the servers' or gpucell's taints "
    "(node-role.kubernetes.io/control-plane, gpucell.io/quarantine, gpucell.io/acceptance), a cordon "
    "(node.kubernetes.io/unschedulable; only "
    "a DaemonSet's pods may) or every taint (a toleration without a key); its workloads get the tolerations of their "
    "pools from gpucell"
)
NODE_NAME = (
    "nodeName: tenant acme's pods never name a server or a quarantined host (iad1-srv-1, iad1-srv-2, iad1-srv-3); "
    "nodeName skips the scheduler, taints and cordons"
)
SELECTION = (
    "nodeSelector/affinity: tenant acme's workloads never select the servers (iad1-srv-1, iad1-srv-2, iad1-srv-3: "
    "their names, pools servers, role label or node-role.kubernetes.io/control-plane, node-role.kubernetes.io/master, "
    "node-role.kubernetes.io/etcd)"
)
GRANTED = (
    "nvidia.com/GH100_H100_NVSWITCH, nvidia.com/GH100_H100_SXM5_80GB, nvidia.com/NVIDIA_L40S-12Q, nvidia.com/gpu, "
    + "".join(f"nvidia.com/h100vm_rail{rail}, " for rail in range(8))  # acme's fabricVlan: its rails (decision 0039)
    + "nvidia.com/mig-1g.18gb, nvidia.com/mig-3g.71gb"
)
RUNTIME = (
    "runtimeClassName: tenant acme's pods may name nvidia only, and only with a GPU request (the NVIDIA runtime would "
    "hand a pod without one the node's GPUs)"
)
PRIORITY = "priorityClassName: tenant acme may name only the PriorityClasses open to it: inference-high, batch"
ADDRESS = (
    "LoadBalancer address: tenant acme's Services may ask only for addresses of its pools (10.120.3.200-10.120.3.239), "
    "never a fixed address of another workload (10.120.3.210 (globex's ml-api); a tenant's own is its named Service's)"
)


LABEL = (
    "labels: the kubevirt.io label marks KubeVirt's own pods (a VM's virt-launcher, whose GPUs are metered as kind=vm) "
    "and is virt-controller's alone; tenant acme's pods and pod templates may not set or change it"
)
SUBJECTS = (
    "subjects: tenant acme's RoleBindings name only its groups (oidc:acme-platform, oidc:acme-ml, oidc:acme-finance), "
    "users of the cell's identity provider (oidc:...) and ServiceAccounts of tenant-acme"
)
TOKEN = (
    "type: tenant acme may not create Secrets of type kubernetes.io/service-account-token (a token that never expires "
    "for a ServiceAccount of the namespace); ask for a bounded one (kubectl create token)"
)
CAPI_SECRETS = (
    "Secrets: tenant acme may not create, change or delete Cluster API's Secrets (type cluster.x-k8s.io/secret, label "
    "cluster.x-k8s.io/cluster-name, or named <cluster>-kubeconfig): Cluster API's controllers and CAAPH connect to a "
    "tenant cluster with them from the platform's namespaces"
)
BINDINGS = (
    "RoleBindings: tenant-admins, tenant-members, tenant-viewers are gpucell's, from tenant acme's groups in config; "
    "the tenant may add RoleBindings of its own"
)
VIRT_CONTROLLER_SA = controller("kubevirt", "kubevirt-controller")


@dataclass(frozen=True)
class Write:
    """A write other than a tenant member's creation: ``operation`` of ``obj`` (``None``: DELETE) replacing ``old``
    (``None``: CREATE), by ``user``."""

    operation: str
    obj: dict[str, Any] | None
    old: dict[str, Any] | None = None
    user: User = TENANT_MEMBER


def pod(name: str, **spec: Any) -> dict[str, Any]:
    """A restricted pod of ``acme`` (it passes Pod Security), with ``spec`` merged into its spec."""
    container = {"name": "main", "image": "busybox:1.37", "securityContext": dict(RESTRICTED)}
    body = {"containers": [container], **spec}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": body}


def deployment(name: str, **spec: Any) -> dict[str, Any]:
    template = {"metadata": {"labels": {"app": name}}, "spec": pod(name, **spec)["spec"]}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"selector": {"matchLabels": {"app": name}}, "template": template},
    }


def vm(name: str, **devices: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"runStrategy": "Always", "template": {"spec": {"domain": {"devices": devices}}}},
    }


def service(name: str, annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if annotations:
        meta["annotations"] = annotations
    body = {"type": "LoadBalancer", "ports": [{"port": 22}], **spec}
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": body}


def gpu_pod(name: str, resource: str, **spec: Any) -> dict[str, Any]:
    obj = pod(name, **spec)
    obj["spec"]["containers"][0]["resources"] = {"limits": {resource: 1}}
    return obj


def role_binding(name: str, *subjects: dict[str, str], role: str = "tenant-member") -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": NS},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
        "subjects": list(subjects),
    }


def group(name: str) -> dict[str, str]:
    return {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": name}


def user(name: str) -> dict[str, str]:
    return {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name}


def account(name: str, namespace: str | None = NS) -> dict[str, str]:
    subject = {"kind": "ServiceAccount", "name": name}
    return {**subject, "namespace": namespace} if namespace is not None else subject


def secret(name: str, type_: str = "Opaque", **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": NS, **meta},
        "type": type_,
        "data": {"value": "eA=="},
    }


def capi_secret(cluster: str, purpose: str) -> dict[str, Any]:
    """A Secret as Cluster API v1.14 writes it for ``cluster`` (``util/secret``, ``util/kubeconfig``)."""
    return secret(f"{cluster}-{purpose}", "cluster.x-k8s.io/secret", labels={"cluster.x-k8s.io/cluster-name": cluster})


def labelled(obj: dict[str, Any], value: str = "virt-launcher") -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"].setdefault("labels", {})["kubevirt.io"] = value
    return out


def gpus(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj``, a Pod, holding an H100 (what a tenant would bill as a VM's)."""
    out = copy.deepcopy(obj)
    out["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/GH100_H100_SXM5_80GB": 1}}
    return out


PRIVILEGED = pod("root-shell")
PRIVILEGED["spec"]["containers"][0]["securityContext"] = {
    "privileged": True,
    "runAsNonRoot": True,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}

OTHERS_FABRIC = vm("on-globex-vlan", interfaces=[{"name": "rail0", "sriov": {}}])
OTHERS_FABRIC["spec"]["template"]["spec"]["networks"] = [
    {"name": "rail0", "multus": {"networkName": "tenant-globex/globex-h100-vm-rail0"}}
]
FABRIC_POD = pod("on-a-vlan")
FABRIC_POD["metadata"]["annotations"] = {"k8s.v1.cni.cncf.io/networks": "tenant-acme/acme-h100-vm-rail0"}

FABRIC_PODS = (
    "metadata.annotations: tenant acme's pods may neither set a Multus annotation (k8s.v1.cni.cncf.io/networks, "
    "v1.multus-cni.io/default-network) nor request a fabric rail's VFs; the GPU fabric reaches VMs only, through their "
    "own namespace's networks (a bare VF would carry no VLAN)"
)
# virt-controller copies a VMI's annotations onto its launcher pod and writes the networks annotation only for a VM
# with Multus networks: without the policy, this VM's launcher pod would get a VF of acme's rail on globex's VLAN
ANNOTATED_VM = vm("vf-on-globex-vlan", hostDevices=[{"name": "vf", "deviceName": "nvidia.com/h100vm_rail0"}])
ANNOTATED_VM["spec"]["template"]["metadata"] = {
    "annotations": {"k8s.v1.cni.cncf.io/networks": "tenant-globex/globex-h100-vm-rail0"}
}
DEFAULT_NETWORK_VMI = {
    "apiVersion": "kubevirt.io/v1",
    "kind": "VirtualMachineInstance",
    "metadata": {
        "name": "off-cilium",
        "namespace": NS,
        "annotations": {"v1.multus-cni.io/default-network": "tenant-globex/globex-h100-vm-rail0"},
    },
    "spec": {"domain": {"devices": {}}},
}
DEFAULT_NETWORK_POD = pod("off-cilium")
DEFAULT_NETWORK_POD["metadata"]["annotations"] = {"v1.multus-cni.io/default-network": "tenant-acme/acme-h100-vm-rail0"}
# what KServe writes from an InferenceService whose predictor carries the Multus annotation and a rail's VF
# (spec.predictor.annotations and resources): a tenant's model server with a VF on globex's VLAN
KSERVE_ON_GLOBEX = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "relay-predictor", "namespace": NS},
    "spec": {
        "template": {
            "metadata": {"annotations": {"k8s.v1.cni.cncf.io/networks": "tenant-globex/globex-h100-vm-rail0"}},
            "spec": {
                "containers": [{"name": "kserve-container", "resources": {"limits": {"nvidia.com/h100vm_rail0": 1}}}]
            },
        }
    },
}
# a rail's VF without a network: no CNI tags it, and it sends any 802.1Q tag onto the fabric (VGT)
RAIL = "nvidia.com/h100vm_rail0"
BARE_VF_VM = vm("vgt")
BARE_VF_VM["spec"]["template"]["spec"]["domain"]["resources"] = {"limits": {RAIL: 1}}
BARE_VF = (
    "domain.devices: tenant acme's VMs get a fabric rail's VFs only as rdmaNics (sriov interfaces on the tenant's own "
    "networks), never as a host device or resource: such a VF would carry no VLAN"
)
VM_ANNOTATIONS = (
    "metadata.annotations: tenant acme's VMs may not set k8s.v1.cni.cncf.io/networks, v1.multus-cni.io/default-network "
    "(virt-controller copies them onto the VM's launcher pod); name the VM's networks in spec.networks"
)

ATTACKS: list[tuple[str, dict[str, Any] | Write, str, str]] = [
    (
        "vm-on-another-tenants-fabric-network",
        OTHERS_FABRIC,
        VAP,
        "networks.multus.networkName: tenant acme's VMs may attach only to networks of their own namespace "
        "(tenant-acme); another namespace's network is another tenant's fabric",
    ),
    ("pod-with-a-multus-network", FABRIC_POD, VAP, FABRIC_PODS),
    ("pod-with-a-multus-default-network", DEFAULT_NETWORK_POD, VAP, FABRIC_PODS),
    (
        "inference-service-with-another-tenants-network",
        Write("CREATE", KSERVE_ON_GLOBEX, user=controller("kserve", "kserve-controller-manager")),
        VAP,
        FABRIC_PODS,
    ),
    ("vm-template-with-another-tenants-network-annotation", ANNOTATED_VM, VAP, VM_ANNOTATIONS),
    ("vmi-with-a-multus-default-network-annotation", DEFAULT_NETWORK_VMI, VAP, VM_ANNOTATIONS),
    ("vm-with-a-bare-vf-as-a-host-device", vm("vgt", hostDevices=[{"name": "vf", "deviceName": RAIL}]), VAP, BARE_VF),
    ("vm-with-a-bare-vf-as-a-resource", BARE_VF_VM, VAP, BARE_VF),
    ("pod-with-a-bare-vf-of-a-rail", gpu_pod("bare-vf", "nvidia.com/h100vm_rail0"), VAP, FABRIC_PODS),
    (
        "toleration-of-the-server-taint",
        pod("on-etcd", tolerations=[{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]),
        VAP,
        TOLERATIONS,
    ),
    (
        "toleration-of-the-quarantine-taint",
        pod(
            "on-broken-gpu",
            tolerations=[{"key": "gpucell.io/quarantine", "operator": "Exists", "effect": "NoSchedule"}],
        ),
        VAP,
        TOLERATIONS,
    ),
    ("toleration-of-every-taint", pod("anywhere", tolerations=[{"operator": "Exists"}]), VAP, TOLERATIONS),
    (
        "toleration-of-a-cordon",
        pod("on-maintenance", tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]),
        VAP,
        TOLERATIONS,
    ),
    ("node-name-of-a-server", pod("pinned", nodeName="iad1-srv-1"), VAP, NODE_NAME),
    (
        "node-selector-to-a-server",
        pod("selected", nodeSelector={"kubernetes.io/hostname": "iad1-srv-2"}),
        VAP,
        SELECTION,
    ),
    (
        "node-affinity-to-the-control-plane",
        deployment(
            "affine",
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}
                                ]
                            }
                        ]
                    }
                }
            },
        ),
        VAP,
        SELECTION,
    ),
    (
        "deployment-tolerating-the-server-taint",
        deployment("fleet", tolerations=[{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]),
        VAP,
        TOLERATIONS,
    ),
    (
        "vm-with-a-host-device-not-offered",
        vm("stolen-gpu", hostDevices=[{"name": "gpu", "deviceName": "nvidia.com/mig-2g.35gb"}]),
        VAP,
        f"domain.devices: tenant acme's VMs may use these host devices and GPU resources only (its quota): {GRANTED}",
    ),
    (
        "vm-with-a-gpu-of-another-tenant",
        vm("globex-gpu", gpus=[{"name": "gpu0", "deviceName": "nvidia.com/mig-2g.35gb"}]),
        VAP,
        f"domain.devices: tenant acme's VMs may use these host devices and GPU resources only (its quota): {GRANTED}",
    ),
    # ResourceQuota pins the resource at "0" for acme too ("exceeded quota"); the policy runs first and says why
    (
        "pod-with-a-gpu-resource-not-granted",
        gpu_pod("slice", "nvidia.com/mig-2g.35gb"),
        VAP,
        f"resources: tenant acme's quota grants these GPU resources only: {GRANTED}",
    ),
    ("runtime-class-not-allowed", pod("sandbox", runtimeClassName="kata"), VAP, RUNTIME),
    ("nvidia-runtime-without-a-gpu", pod("all-gpus", runtimeClassName="nvidia"), VAP, RUNTIME),
    # the tenant-priority-classes ResourceQuota refuses the pod too; the policy also covers templates and VMs
    ("priority-class-not-open", pod("preempt-all", priorityClassName="system-node-critical"), VAP, PRIORITY),
    ("priority-class-of-another-tenant-in-a-vm", _vm := vm("vip"), VAP, PRIORITY),
    ("service-with-a-reserved-address", service("squat", loadBalancerIP="10.120.3.210"), VAP, ADDRESS),
    (
        "service-annotated-with-another-tenants-address",
        service("squat2", {"lbipam.cilium.io/ips": "10.120.3.201, 10.120.3.210"}),
        VAP,
        ADDRESS,
    ),
    ("service-outside-the-tenants-pools", service("far", {"io.cilium/lb-ipam-ips": "203.0.113.20"}), VAP, ADDRESS),
    (
        "service-sharing-across-namespaces",
        service("share", {"lbipam.cilium.io/sharing-key": "k", "lbipam.cilium.io/sharing-cross-namespace": "*"}),
        VAP,
        "annotations: tenant acme's Services never share an address with another namespace "
        "(lbipam.cilium.io/sharing-cross-namespace, io.cilium/lb-ipam-sharing-cross-namespace)",
    ),
    # -- round 2: RoleBinding subjects, legacy tokens, the platform's Secrets and bindings, the metering label ----
    (
        "role-binding-to-every-authenticated-user",
        role_binding("everyone", group("system:authenticated")),
        VAP,
        SUBJECTS,
    ),
    ("role-binding-to-anonymous", role_binding("anonymous", group("system:unauthenticated")), VAP, SUBJECTS),
    (
        "role-binding-to-every-service-account",
        role_binding("robots", group("system:serviceaccounts")),
        VAP,
        SUBJECTS,
    ),
    (
        "role-binding-to-the-namespaces-service-accounts-group",
        role_binding("own-robots", group("system:serviceaccounts:tenant-acme")),
        VAP,
        SUBJECTS,
    ),
    ("role-binding-to-system-masters", role_binding("masters", group("system:masters")), VAP, SUBJECTS),
    (
        "role-binding-to-another-tenants-group",
        role_binding("globex-in", group("oidc:globex-ops"), role="tenant-admin"),
        VAP,
        SUBJECTS,
    ),
    (
        "role-binding-to-a-platform-service-account",
        role_binding("kserve-in", account("kserve-controller-manager", "kserve")),
        VAP,
        SUBJECTS,
    ),
    ("role-binding-to-a-user-outside-the-issuer", role_binding("local", user("admin")), VAP, SUBJECTS),
    (
        "legacy-token-of-the-default-service-account",
        secret(
            "forever",
            "kubernetes.io/service-account-token",
            annotations={"kubernetes.io/service-account.name": "default"},
        ),
        VAP,
        TOKEN,
    ),
    (
        "legacy-token-of-an-endpoints-storage-service-account",
        secret(
            "storage-forever",
            "kubernetes.io/service-account-token",
            annotations={"kubernetes.io/service-account.name": "llama-8b-storage"},
        ),
        VAP,
        TOKEN,
    ),
    (
        "kubeconfig-planted-for-a-future-tenant-cluster",
        secret("ml2-kubeconfig", stringData={"value": "users: [{user: {tokenFile: /var/run/secrets/token}}]"}),
        VAP,
        CAPI_SECRETS,
    ),
    (
        "rewrite-of-a-tenant-clusters-kubeconfig",
        Write("UPDATE", secret("ml-kubeconfig", "cluster.x-k8s.io/secret"), capi_secret("ml", "kubeconfig")),
        VAP,
        CAPI_SECRETS,
    ),
    ("delete-of-a-tenant-clusters-ca", Write("DELETE", None, capi_secret("ml", "ca")), VAP, CAPI_SECRETS),
    (
        "rewrite-of-the-tenant-admins-binding",
        Write(
            "UPDATE",
            role_binding("tenant-admins", group("oidc:acme-ml"), role="tenant-admin"),
            role_binding("tenant-admins", group("oidc:acme-platform"), role="tenant-admin"),
        ),
        VAP,
        BINDINGS,
    ),
    (
        "delete-of-the-tenant-viewers-binding",
        Write("DELETE", None, role_binding("tenant-viewers", group("oidc:acme-finance"), role="tenant-viewer")),
        VAP,
        BINDINGS,
    ),
    ("gpu-pod-labelled-as-a-vms-launcher", labelled(gpus(pod("cheap-h100"))), VAP, LABEL),
    ("deployment-of-launcher-labelled-pods", _fleet := deployment("cheap-fleet"), VAP, LABEL),
    (
        "launcher-label-added-to-a-running-pod",
        Write("UPDATE", labelled(gpus(pod("relabel"))), gpus(pod("relabel"))),
        VAP,
        LABEL,
    ),
    (
        "privileged-pod",
        PRIVILEGED,
        PSA,
        'pods "root-shell" is forbidden: violates PodSecurity "restricted:v1.34": allowPrivilegeEscalation != false '
        '(container "main" must set securityContext.allowPrivilegeEscalation=false), privileged (container "main" '
        "must not set securityContext.privileged=true)",
    ),
    (
        "host-path-and-host-network-pod",
        pod("node-fs", hostNetwork=True, volumes=[{"name": "root", "hostPath": {"path": "/"}}]),
        PSA,
        'pods "node-fs" is forbidden: violates PodSecurity "restricted:v1.34": host namespaces (hostNetwork=true), '
        'hostPath volumes (volume "root"), restricted volume types (volume "root" uses restricted volume type '
        '"hostPath")',
    ),
]
"""``(id, object, refusing layer, exact message)``: at least the issue's ten, in tenant ``acme`` of prod's iad1."""
_vm["spec"]["template"]["spec"]["priorityClassName"] = "globex-only"
_fleet["spec"]["template"]["metadata"]["labels"]["kubevirt.io"] = "virt-launcher"


@functools.cache
def planned() -> ProdPlans:
    return ProdPlans()


@functools.cache
def policies(region: str, tenant: str) -> list[dict[str, Any]]:
    """The tenant's rendered policies and bindings, as the prod plan registers them."""
    return [
        {**r.inputs}
        for r in planned().region_resources(region)
        if r.type.startswith("kubernetes:admissionregistration.k8s.io/v1:")
        and r.inputs["metadata"]["labels"]["gpucell.io/tenant"] == tenant
    ]


PARTS = ("pods", "vms", "services", "access", "secrets", "platform")


def test_the_prod_plan_binds_six_policies_to_every_tenant_namespace() -> None:
    facts = ClusterFacts.from_cell(planned().cells["iad1"].spec)
    for region in planned().cells:
        for tenant in ("acme", "globex"):
            rendered = policies(region, tenant)
            kinds = sorted((o["kind"], o["metadata"]["name"]) for o in rendered)
            assert kinds == sorted(
                (kind, f"gpucell-tenant-{tenant}-{part}")
                for part in PARTS
                for kind in (VAP, "ValidatingAdmissionPolicyBinding")
            )
            for obj in rendered:
                selector = obj["spec"].get("matchResources") or obj["spec"]["matchConstraints"]
                assert selector["namespaceSelector"] == {
                    "matchLabels": {"kubernetes.io/metadata.name": f"tenant-{tenant}"}
                }
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in policies("iad1", "acme")}
    assert by_name == {(o["kind"], o["metadata"]["name"]): o for o in admission_manifests("acme", facts)}


def verdict(attempt: dict[str, Any] | Write) -> tuple[str, str] | None:
    """``(layer, message)`` of the first layer refusing ``attempt`` (an object a tenant member creates, or a
    :class:`Write`) in ``tenant-acme`` of iad1, or ``None``."""
    write = attempt if isinstance(attempt, Write) else Write("CREATE", attempt)
    refused = refusals(policies("iad1", "acme"), write.obj, NS, write.operation, old=write.old, user=write.user)
    if refused:
        return VAP, refused[0].message
    obj = write.obj
    if obj is not None and write.operation == "CREATE" and obj["kind"] == "Pod":
        message = refusal(obj)
        if message is not None:
            return PSA, message
    return None


@pytest.mark.parametrize(("attack", "obj", "layer", "message"), ATTACKS, ids=[a[0] for a in ATTACKS])
def test_each_attack_is_refused_by_its_layer(
    attack: str, obj: dict[str, Any] | Write, layer: str, message: str
) -> None:
    assert verdict(obj) == (layer, message)


def test_the_catalogue_has_the_issues_attacks() -> None:
    assert len(ATTACKS) >= 10
    assert {layer for _, _, layer, _ in ATTACKS} == {VAP, PSA}


def test_the_same_objects_without_the_attack_pass() -> None:
    """The policies refuse the attack, not the kind: each harmless twin is admitted."""
    for obj in (
        pod("ok", tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]),
        pod("ok", nodeSelector={"gpucell.io/pool": "l40s"}, priorityClassName="batch"),
        gpu_pod("ok", "nvidia.com/mig-1g.18gb", runtimeClassName="nvidia"),
        vm("ok", gpus=[{"name": "gpu0", "deviceName": "nvidia.com/GH100_H100_SXM5_80GB"}]),
        service("ok", {"lbipam.cilium.io/ips": "10.120.3.201"}),
        service("ok", loadBalancerIP="10.120.3.239"),
        # round 2: the tenant's own sharing, Secrets and pods
        role_binding(
            "ci", group("oidc:acme-finance"), user("oidc:carol@partner.example"), account("ci"), account("x", None)
        ),
        secret("db-password"),
        secret("app-ca", "kubernetes.io/tls"),
        secret("pull", "kubernetes.io/dockerconfigjson"),
        Write("UPDATE", secret("train-01-cloud-init"), secret("train-01-cloud-init")),  # its own VM's business
        Write("DELETE", None, role_binding("ci", account("ci"))),
        {**pod("x"), "metadata": {"name": "x", "namespace": NS, "labels": {"app": "virt-launcher"}}},
        # a launcher pod annotated by the tenant keeps virt-controller's label as it was
        Write("UPDATE", _annotated, labelled(gpus(pod("launcher")))),
        # round 2 review: a VM's own annotations, and a VMI without any
        _vm_annotated,
        {**DEFAULT_NETWORK_VMI, "metadata": {"name": "ok", "namespace": NS}},
        # a CronJob's job template without metadata (round 1's Multus check read it and failed: a false refusal)
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {"name": "nightly", "namespace": NS},
            "spec": {"schedule": "0 1 * * *", "jobTemplate": {"spec": {"template": {"spec": pod("x")["spec"]}}}},
        },
    ):
        assert verdict(obj) is None, obj


_annotated = labelled(gpus(pod("launcher")))
_annotated["metadata"]["annotations"] = {"note": "mine"}
_vm_annotated = vm("ok")
_vm_annotated["spec"]["template"]["metadata"] = {"annotations": {"note": "mine"}}


def test_the_platform_writes_what_tenants_may_not() -> None:
    """The operator and the controllers write the platform's Secrets and bindings and the launcher label."""
    capk = controller("capi-kubeadm-control-plane-system", "capi-kubeadm-control-plane-manager")
    for write in (
        Write("CREATE", capi_secret("ml", "kubeconfig"), user=capk),
        Write("UPDATE", capi_secret("ml", "kubeconfig"), capi_secret("ml", "kubeconfig"), user=capk),
        Write("DELETE", None, capi_secret("ml", "ca"), user=controller("kube-system", "generic-garbage-collector")),
        Write("DELETE", None, role_binding("tenant-viewers", group("oidc:acme-finance")), user=OPERATOR),
        Write("CREATE", labelled(gpus(pod("virt-launcher-x"))), user=VIRT_CONTROLLER_SA),
    ):
        assert verdict(write) is None, write
    assert VIRT_CONTROLLER_SA.username == VIRT_CONTROLLER
    # a tenant namespace's ServiceAccount is a tenant identity; another namespace's token is never the operator's
    robot = controller(NS, "ci")
    assert verdict(Write("UPDATE", capi_secret("ml", "kubeconfig"), capi_secret("ml", "kubeconfig"), user=robot)) == (
        VAP,
        CAPI_SECRETS,
    )


def test_gpucells_taints_are_one_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 31's acceptance taint is one entry of ``GPUCELL_TAINTS``: every tenant's policies refuse it, and would
    refuse a further entry the same way."""
    facts = ClusterFacts.from_cell(planned().cells["iad1"].spec)
    acceptance = [{"key": "gpucell.io/acceptance", "operator": "Exists", "effect": "NoSchedule"}]
    refused = refusals(admission_manifests("acme", facts), pod("early", tolerations=acceptance), NS)
    assert [v.message for v in refused] == [TOLERATIONS]
    later = [{"key": "gpucell.io/later", "operator": "Exists", "effect": "NoSchedule"}]
    assert refusals(admission_manifests("acme", facts), pod("early", tolerations=later), NS) == []
    monkeypatch.setattr(tenant_admission, "GPUCELL_TAINTS", (*tenant_admission.GPUCELL_TAINTS, "gpucell.io/later"))
    refused = refusals(admission_manifests("acme", facts), pod("early", tolerations=later), NS)
    assert [v.message for v in refused] == [TOLERATIONS.replace("acceptance)", "acceptance, gpucell.io/later)")]


def test_a_tenants_own_fixed_address_is_its_named_services_only() -> None:
    own = policies("iad1", "globex")
    taken = service("ml-api", {"lbipam.cilium.io/ips": "10.120.3.210"})
    taken["metadata"]["namespace"] = "tenant-globex"
    assert refusals(own, taken, "tenant-globex") == []
    taken["metadata"]["name"] = "squat"
    assert [v.policy for v in refusals(own, taken, "tenant-globex")] == ["gpucell-tenant-globex-services"]


def test_a_daemonsets_pods_may_tolerate_the_cordon_its_controller_adds() -> None:
    cordon = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
    owned = pod("agent-x", tolerations=cordon)
    owned["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "u", "controller": True}
    ]
    daemon_set_controller = controller("kube-system", "daemon-set-controller")
    assert verdict(Write("CREATE", owned, user=daemon_set_controller)) is None
    assert verdict(pod("agent-y", tolerations=cordon)) == (VAP, TOLERATIONS)
    # the same owner written by a tenant member (found by the new-user run): a forged owner lands on no cordoned node
    assert verdict(owned) == (VAP, TOLERATIONS)


def test_another_tenants_policies_leave_acme_alone_and_deleted_objects_pass() -> None:
    attack = pod("pinned", nodeName="iad1-srv-1")
    assert refusals(policies("iad1", "globex"), attack, NS) == []
    leaving = copy.deepcopy(attack)
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert refusals(policies("iad1", "acme"), leaving, NS, "UPDATE") == []


# -- no false refusal ------------------------------------------------------------------------------------------------


def _owned(obj: dict[str, Any], kind: str, name: str) -> dict[str, Any]:
    obj["metadata"]["ownerReferences"] = [{"kind": kind, "name": name, "controller": True}]
    return obj


def launcher_pod(vmi: dict[str, Any], namespace: str, name: str) -> dict[str, Any]:
    """What virt-controller renders from a VMI spec for its virt-launcher pod, as far as the policies read it
    (kubevirt/kubevirt v1.9.0 ``pkg/virt-controller/services/template.go``): the ``kubevirt.io: virt-launcher`` label,
    the VMI's tolerations, affinity and priority class, its node selector plus ``kubevirt.io/schedulable``, and the
    compute container's resources with each GPU and host device's ``deviceName`` as an extended resource."""
    devices = vmi.get("domain", {}).get("devices", {})
    limits: dict[str, int] = {"devices.kubevirt.io/kvm": 1}
    for device in [*devices.get("gpus", []), *devices.get("hostDevices", [])]:
        if "deviceName" in device:
            limits[device["deviceName"]] = limits.get(device["deviceName"], 0) + 1
    spec: dict[str, Any] = {
        "nodeSelector": {**vmi.get("nodeSelector", {}), "kubevirt.io/schedulable": "true"},
        "containers": [{"name": "compute", "resources": {"requests": dict(limits), "limits": dict(limits)}}],
    }
    for key in ("tolerations", "affinity", "priorityClassName"):
        if key in vmi:
            spec[key] = vmi[key]
    meta = {"name": f"virt-launcher-{name}-x", "namespace": namespace, "labels": {"kubevirt.io": "virt-launcher"}}
    return _owned({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}, "VirtualMachineInstance", name)


def predictor_deployment(isvc: dict[str, Any]) -> dict[str, Any]:
    """KServe's predictor Deployment of an InferenceService (Standard mode; kserve/kserve v0.20.0
    ``pkg/controller/v1beta1/inferenceservice/components/predictor.go``): the predictor's pod fields and the model
    container's resources."""
    predictor = isvc["spec"]["predictor"]
    spec = {
        k: predictor[k]
        for k in ("nodeSelector", "tolerations", "affinity", "runtimeClassName", "priorityClassName")
        if k in predictor
    }
    spec["containers"] = [{"name": "kserve-container", "resources": predictor["model"].get("resources", {})}]
    meta = {"name": f"{isvc['metadata']['name']}-predictor", "namespace": isvc["metadata"]["namespace"]}
    template = {"metadata": {}, "spec": spec}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": {"template": template}}


def capk_vm(template: dict[str, Any]) -> dict[str, Any]:
    """The VirtualMachine CAPK creates from a KubevirtMachineTemplate (its ``virtualMachineTemplate``)."""
    vm_template = template["spec"]["template"]["spec"]["virtualMachineTemplate"]
    meta = {"name": f"{template['metadata']['name']}-x", "namespace": template["metadata"]["namespace"]}
    return {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": meta, "spec": vm_template["spec"]}


KSERVE = controller("kserve", "kserve-controller-manager")
REPLICASET = controller("kube-system", "replicaset-controller")
STATEFULSET = controller("kube-system", "statefulset-controller")
CAPK = controller("capk-system", "capk-controller-manager")
KCP = controller("capi-kubeadm-control-plane-system", "capi-kubeadm-control-plane-manager")
CAPI_PURPOSES = ("kubeconfig", "ca", "etcd", "sa", "proxy")
"""The Secrets KubeadmControlPlane writes for a cluster (Cluster API v1.14.0 ``util/secret/consts.go``)."""


def derived(obj: dict[str, Any]) -> list[tuple[dict[str, Any], User]]:
    """``(object, writer)`` of what the controllers create in the tenant namespace from ``obj``, as far as the
    policies read them."""
    kind, meta = obj["kind"], obj["metadata"]
    if kind == "VirtualMachine":
        return [(launcher_pod(obj["spec"]["template"]["spec"], meta["namespace"], meta["name"]), VIRT_CONTROLLER_SA)]
    if kind == "InferenceService":
        deployment_ = predictor_deployment(obj)
        pod_ = {"apiVersion": "v1", "kind": "Pod", "metadata": dict(deployment_["metadata"])}
        owned = _owned({**pod_, "spec": deployment_["spec"]["template"]["spec"]}, "ReplicaSet", "r")
        return [(deployment_, KSERVE), (owned, REPLICASET)]
    if kind == "KubevirtMachineTemplate":
        machine = capk_vm(obj)
        return [(machine, CAPK), *derived(machine)]
    if kind == "StatefulSet":
        pod_ = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{meta['name']}-0", "namespace": meta["namespace"]},
        }
        return [(_owned({**pod_, "spec": obj["spec"]["template"]["spec"]}, "StatefulSet", meta["name"]), STATEFULSET)]
    if kind == "Cluster":
        out = []
        for purpose in CAPI_PURPOSES:
            made = capi_secret(meta["name"], purpose)
            made["metadata"]["namespace"] = meta["namespace"]
            out.append((made, KCP))
        return out
    return []


def tenant_objects() -> list[tuple[str, str, dict[str, Any], User]]:
    """``(region, tenant, object, writer)`` of everything the prod plan renders in a tenant namespace (written by the
    operator), and what the controllers derive from it."""
    out = []
    for region in planned().cells:
        for r in planned().region_resources(region):
            metadata = (r.inputs or {}).get("metadata") or {}
            namespace = metadata.get("namespace") if isinstance(metadata, dict) else None
            if isinstance(namespace, str) and namespace.startswith("tenant-") and r.inputs.get("kind"):
                for obj, writer in ((r.inputs, OPERATOR), *derived(r.inputs)):
                    out.append((region, namespace.removeprefix("tenant-"), obj, writer))
    return out


def test_nothing_gpucell_renders_in_a_tenant_namespace_or_a_controller_derives_from_it_is_refused() -> None:
    checked: dict[str, int] = {}
    for region, tenant, obj, writer in tenant_objects():
        namespace = obj["metadata"]["namespace"]
        for policy in policies(region, tenant):
            if policy["kind"] != VAP or obj["kind"] not in RESOURCES:
                continue
            for operation, old in (("CREATE", None), ("UPDATE", obj)):
                verdict_ = evaluate(policy, obj, namespace, operation, old=old, user=writer)
                if verdict_ is not None:
                    assert verdict_.allowed, (region, operation, obj["kind"], obj["metadata"]["name"], verdict_.message)
                    key = f"{obj['kind']} {operation}"
                    checked[key] = checked.get(key, 0) + 1
    # every kind the policies read was met, created and updated: VMs and their launchers, CAPK's VMs, predictors,
    # notebooks, Services: 8 VMs + 2 CAPK machines + fra1 globex's isolated notebook and endpoint (issue 33); their
    # 12 launchers, 9 predictor pods and 5 notebook pods; the 10 RoleBindings gpucell renders; 19 Secrets gpucell
    # renders (the isolated ones' token, guest and two cloud-init Secrets among them) and the 10 of globex's cluster
    # ml (5 per region) at creation. The operator and the controllers are no tenant identity: the -platform policy
    # never applies.
    pairs = {"VirtualMachine": 12, "Pod": 26, "StatefulSet": 5, "Service": 13, "Deployment": 9, "RoleBinding": 10}
    assert checked == {
        **{f"{kind} {op}": n for kind, n in pairs.items() for op in ("CREATE", "UPDATE")},
        "Secret CREATE": 29,
    }
