"""Tenant: PSA labels, quota per GPU resource, limit defaults, RBAC, Cilium policies, wiring, conformance."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pulumi
import pytest
from pulumi.runtime.mocks import MockResourceArgs

from gpucell.admission.tenants import ClusterFacts
from gpucell.cell import RegionalCell, RegionalCellArgs
from gpucell.components.kubevirt import kubevirt_spec
from gpucell.engine.mock_engine import PlanResult, Registration, run_program
from gpucell.errors import ConfigError
from gpucell.spec import CellSpec
from gpucell.spec.identity import OidcSpec
from gpucell.spec.tenancy import TenantSpec
from gpucell.stacks.conformance.run import check_region
from gpucell.stacks.conformance.schemas import SchemaStore
from gpucell.tenancy.tenant import (
    TENANT_POD_SECURITY,
    PodSecurityLevel,
    Tenant,
    TenantArgs,
    admit,
    gpu_resources,
    limit_range_manifest,
    namespace_labels,
    network_policy_manifests,
    quota_hard,
    rbac_manifests,
)
from gpucell.tenancy.tenant_roles import ADMIN_ONLY, CHANGE, READ, REFUSED, RIGHTS, TENANT_ROLES, WRITE, role_rules
from tests.conftest import REPO, SCHEMA_CHECKERS, SECURITY, UPSTREAM, cell, minimal_cell_config

CNP = "kubernetes:cilium.io/v2:CiliumNetworkPolicy"
NAMESPACE = "kubernetes:core/v1:Namespace"
QUOTA = "kubernetes:core/v1:ResourceQuota"
LIMIT_RANGE = "kubernetes:core/v1:LimitRange"
ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
ROLE = "kubernetes:rbac.authorization.k8s.io/v1:Role"
VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
VAP_BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
KUBECONFIG = "apiVersion: v1\nclusters:\n- cluster:\n    server: https://127.0.0.1:6443\n  name: d\n"
GPU_RESOURCES = [
    "nvidia.com/GH100_H100_SXM5_80GB",
    "nvidia.com/NVIDIA_L40S-24Q",
    "nvidia.com/gpu",
    "nvidia.com/mig-1g.10gb",
]
# A PVC clone source: a registry or http import would need egress (admission rejects it under none/cluster).
VM = {"memoryGib": 4, "noLogin": True, "rootDisk": {"source": {"pvc": "images/ubuntu-24-04"}, "sizeGib": 20}}


def computed(args: MockResourceArgs) -> dict[str, Any]:
    """The kubeconfig the first k3s server prints (the cell's provider is built from it)."""
    if args.typ == "command:remote:Command" and args.name.endswith("-kubeconfig"):
        return {"stdout": KUBECONFIG}
    return {}


def tenant_config(**fields: Any) -> dict[str, Any]:
    """A tenant with 16 CPUs, 64 GiB, 500 GiB, two L40S GPUs and 8 MIG slices; ``fields`` override."""
    config = {
        "groups": {"admins": ["acme-admins"], "members": ["acme-devs", "acme-ml"], "viewers": ["acme-audit"]},
        "quota": {
            "cpuMillicores": 16000,
            "memoryGib": 64,
            "storageGib": 500,
            "gpus": {"nvidia.com/gpu": 2, "nvidia.com/mig-1g.10gb": 8},
        },
    }
    config.update(fields)
    return config


def region_config(tenants: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The minimal region plus vm-passthrough, vm-vgpu and MIG pools, with ``tenants``."""
    config = minimal_cell_config()
    config["imageNamespaces"] = ["images"]
    pools = config["nodePools"]
    h100 = {"role": "gpu", "gpuModel": "H100-SXM5-80GB", "gpusPerNode": 8}
    pools["h100-vm"] = {**h100, "gpuMode": "vm-passthrough", "hosts": [{"name": "lab-gpu-2", "address": "10.20.0.22"}]}
    pools["l40s-vgpu"] = {
        "role": "gpu",
        "gpuModel": "L40S",
        "gpusPerNode": 4,
        "gpuMode": "vm-vgpu",
        "vgpuProfile": "L40S-24Q",
        "hosts": [{"name": "lab-gpu-3", "address": "10.20.0.23"}],
    }
    pools["h100-mig"] = {
        **h100,
        "gpuMode": "container",
        "migConfig": "all-1g.10gb",
        "hosts": [{"name": "lab-gpu-4", "address": "10.20.0.24"}],
    }
    config["gpuOperator"] = {
        "vgpuDriverImage": {"repository": "registry.example.com/nvidia", "version": "580.95.02-ubuntu24.04"}
    }
    config["tenants"] = tenants
    config["allowGpuOvercommit"] = True  # several tenants share the two L40S; capacity is not what is tested
    return config


def region(**tenants: dict[str, Any]) -> CellSpec:
    return cell(region_config(tenants))


def plan_tenants(spec: CellSpec) -> PlanResult:
    """A RegionalCell ``lab`` and a Tenant ``lab-<tenant>`` for each tenant of ``spec``."""

    def program() -> None:
        regional = RegionalCell("lab", RegionalCellArgs(cell=spec, ssh_private_key=pulumi.Output.secret("k")))
        for tenant in spec.tenants:
            component = Tenant(f"lab-{tenant}", TenantArgs.from_cell(tenant, spec.tenants[tenant], regional))
            pulumi.export(f"{tenant}-namespace", component.namespace)
            pulumi.export(f"{tenant}-ready", [r.urn for r in component.ready])

    return run_program(program, computed=computed)


def tenant_objects(plan: PlanResult, tenant: str) -> list[Registration]:
    (root,) = [r for r in plan.of_type("gpucell:index:Tenant") if r.name == f"lab-{tenant}"]
    return list(plan.descendants(root))


# -- namespace and Pod Security Admission --------------------------------------------------------------------


RESTRICTED_LABELS = {
    "app.kubernetes.io/managed-by": "gpucell",
    "gpucell.io/tenant": "acme",
    # KubeVirt's automatic memory limit of a VM without its own (one sized by an instancetype) = its request
    "alpha.kubevirt.io/auto-memory-limits-ratio": "1.0",
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "v1.34",
    "pod-security.kubernetes.io/warn": "restricted",
    "pod-security.kubernetes.io/warn-version": "v1.34",
    "pod-security.kubernetes.io/audit": "restricted",
    "pod-security.kubernetes.io/audit-version": "v1.34",
}


def test_every_tenant_enforces_restricted_pinned_to_the_kubernetes_minor() -> None:
    spec = region(acme=tenant_config())
    assert TENANT_POD_SECURITY is PodSecurityLevel.RESTRICTED
    assert namespace_labels("acme", spec.versions.kubernetes_minor) == RESTRICTED_LABELS


def test_a_tenant_with_vms_enforces_restricted_because_launchers_get_a_seccomp_profile() -> None:
    """The KubeVirt CR gives every virt-launcher pod RuntimeDefault; without it restricted would reject them."""
    spec = region(acme=tenant_config(virtualMachines={"box": VM}))
    plan = plan_tenants(spec)
    namespace = plan.named("lab-acme-namespace")
    assert namespace.inputs["metadata"]["labels"] == RESTRICTED_LABELS
    assert kubevirt_spec(spec.node_pools, spec.gpu_operator.vgpu_driver_image)["configuration"][
        "seccompConfiguration"
    ] == {"virtualMachineInstanceProfile": {"customProfile": {"runtimeDefaultProfile": True}}}
    # ... and the label waits for the CR that sets it (so a VM restarted in between is not rejected)
    assert plan.named("lab-kubevirt-kubevirt").urn in namespace.dependencies


def test_psa_versions_follow_the_cells_kubernetes_minor() -> None:
    labels = namespace_labels("acme", "1.33")
    versions = {k: v for k, v in labels.items() if k.endswith("-version")}
    assert versions == dict.fromkeys(
        (
            "pod-security.kubernetes.io/enforce-version",
            "pod-security.kubernetes.io/warn-version",
            "pod-security.kubernetes.io/audit-version",
        ),
        "v1.33",
    )


# -- quota and limit defaults --------------------------------------------------------------------------------


def test_quota_pins_every_gpu_resource_of_the_region_and_zero_for_ungranted_ones() -> None:
    spec = region(acme=tenant_config())
    tenant = spec.tenants["acme"]
    assert gpu_resources(tenant, spec) == GPU_RESOURCES
    assert quota_hard(tenant, spec) == {
        "requests.cpu": "16000m",
        "limits.cpu": "16000m",
        "requests.memory": "64Gi",
        "limits.memory": "64Gi",
        "requests.storage": "500Gi",
        "requests.ephemeral-storage": "1000Gi",  # the default; container writable layers, logs, emptyDir
        "limits.ephemeral-storage": "1000Gi",
        "requests.hugepages-1Gi": "64Gi",  # memoryGib: hugepages are not counted in requests.memory
        "requests.hugepages-2Mi": "64Gi",
        "pods": "100",
        "persistentvolumeclaims": "50",
        "services": "20",
        "services.nodeports": "0",
        "services.loadbalancers": "0",
        "requests.nvidia.com/GH100_H100_SXM5_80GB": "0",
        "requests.nvidia.com/NVIDIA_L40S-24Q": "0",
        "requests.nvidia.com/gpu": "2",
        "requests.nvidia.com/mig-1g.10gb": "8",
        # derived: the NVSwitches of the whole HGX boards the passthrough GPU quota covers (none here)
        "requests.nvidia.com/GH100_H100_NVSWITCH": "0",
    }


def test_quota_counts_come_from_the_spec() -> None:
    spec = region(
        acme=tenant_config(
            quota={
                "cpuMillicores": 500,
                "memoryGib": 1,
                "storageGib": 10,
                "pods": 7,
                "persistentVolumeClaims": 3,
                "services": 2,
                "nodePorts": 3,
                "gpus": {"nvidia.com/GH100_H100_SXM5_80GB": 8},
            }
        )
    )
    hard = quota_hard(spec.tenants["acme"], spec)
    counts = ("pods", "persistentvolumeclaims", "services", "services.nodeports", "services.loadbalancers")
    assert {k: hard[k] for k in counts} == {
        "pods": "7",
        "persistentvolumeclaims": "3",
        "services": "2",
        "services.nodeports": "3",
        "services.loadbalancers": "0",
    }
    assert hard["requests.nvidia.com/GH100_H100_SXM5_80GB"] == "8"
    assert hard["requests.nvidia.com/gpu"] == "0"
    assert hard["requests.nvidia.com/GH100_H100_NVSWITCH"] == "4"  # one whole board: its 4 NVSwitches


def test_limit_range_defaults_every_container_from_the_spec() -> None:
    limits = {"defaultCpuMillicores": 250, "defaultMemoryMib": 512}
    tenant = TenantSpec.model_validate(tenant_config(limits=limits))
    manifest = limit_range_manifest("acme", tenant)
    assert manifest["metadata"]["namespace"] == "tenant-acme"
    assert manifest["spec"] == {
        "limits": [
            {
                "type": "Container",
                "default": {"cpu": "250m", "memory": "512Mi", "ephemeral-storage": "8192Mi"},
                "defaultRequest": {"cpu": "250m", "memory": "512Mi", "ephemeral-storage": "1024Mi"},
            }
        ]
    }


def test_quota_bounds_hugepages_and_ephemeral_storage_as_declared() -> None:
    tenant = TenantSpec.model_validate(
        tenant_config(
            quota={
                "cpuMillicores": 1000,
                "memoryGib": 64,
                "storageGib": 10,
                "hugepagesGib": 32,
                "ephemeralStorageGib": 50,
            }
        )
    )
    hard = quota_hard(tenant, cell(region_config({})))
    assert {k: v for k, v in hard.items() if "hugepages" in k or "ephemeral" in k} == {
        "requests.ephemeral-storage": "50Gi",
        "limits.ephemeral-storage": "50Gi",
        "requests.hugepages-1Gi": "32Gi",
        "requests.hugepages-2Mi": "32Gi",
    }


# -- RBAC ----------------------------------------------------------------------------------------------------


def test_groups_are_bound_to_gpucells_own_tenant_roles() -> None:
    objects = {
        (o["kind"], o["metadata"]["name"]): o
        for o in rbac_manifests("acme", TenantSpec.model_validate(tenant_config()))
    }
    group = "rbac.authorization.k8s.io"

    def subjects(*names: str) -> list[dict[str, str]]:
        return [{"kind": "Group", "apiGroup": group, "name": n} for n in names]

    for name, role, members in (
        ("tenant-admins", "tenant-admin", ["acme-admins"]),
        ("tenant-members", "tenant-member", ["acme-devs", "acme-ml"]),
        ("tenant-viewers", "tenant-viewer", ["acme-audit"]),
    ):
        binding = objects["RoleBinding", name]
        assert binding["metadata"]["namespace"] == "tenant-acme"
        assert binding["roleRef"] == {"apiGroup": group, "kind": "Role", "name": role}
        assert binding["subjects"] == subjects(*members)
        assert objects["Role", role]["metadata"]["namespace"] == "tenant-acme"
        assert objects["Role", role]["rules"] == role_rules(role)
    assert {
        "apiGroups": ["serving.kserve.io"],
        "resources": ["inferenceservices", "servingruntimes", "inferencegraphs", "trainedmodels"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"],
    } in objects["Role", "tenant-member"]["rules"]
    assert {
        "apiGroups": [group],
        "resources": ["roles"],
        "verbs": ["bind"],
        "resourceNames": ["tenant-admin", "tenant-member", "tenant-viewer"],
    } in objects["Role", "tenant-admin"]["rules"]


def test_no_tenant_role_aggregates_or_can_be_widened_by_a_label() -> None:
    for obj in rbac_manifests("acme", TenantSpec.model_validate(tenant_config())):
        assert "aggregationRule" not in obj
        assert not any(k.startswith("rbac.authorization.k8s.io/") for k in obj["metadata"]["labels"])
        assert obj["kind"] in ("Role", "RoleBinding")  # namespaced: nothing cluster-wide


def test_no_tenant_role_has_a_refused_verb() -> None:
    for refusal in REFUSED:
        for right in RIGHTS:
            if right.group != refusal.group or right.resource_names:
                continue
            if "*" not in refusal.resources and not set(right.resources) & set(refusal.resources):
                continue
            for role in TENANT_ROLES.values():
                assert not set(right.verbs(role)) & set(refusal.verbs), (role, right, refusal)


def test_the_member_is_the_admin_less_the_namespaces_access_and_the_viewer_reads_less() -> None:
    for right in RIGHTS:
        assert set(right.member) <= set(right.admin), right
        assert set(right.viewer) <= set(right.member), right
        if set(right.resources) & set(ADMIN_ONLY):
            assert right.member == () or set(right.member) <= set(READ), right
    viewer = {(r.group, res) for r in RIGHTS if r.viewer for res in r.resources}
    assert ("", "secrets") not in viewer
    assert ("", "pods/exec") not in viewer
    assert ("subresources.kubevirt.io", "virtualmachineinstances/console") not in viewer


def test_an_isolated_only_tenants_roles_have_no_exec_nor_attach_but_keep_port_forward() -> None:
    spec = TenantSpec.model_validate(tenant_config(isolation={"default": "vm", "guestImage": "guests/gpu"}))
    roles = {o["metadata"]["name"]: o for o in rbac_manifests("acme", spec) if o["kind"] == "Role"}
    for name in ("tenant-admin", "tenant-member"):
        rules = roles[name]["rules"]
        granted = {r for rule in rules if rule["apiGroups"] == [""] for r in rule["resources"]}
        assert not granted & {"pods/exec", "pods/attach", "pods/ephemeralcontainers"}, name
        assert {"apiGroups": [""], "resources": ["pods/portforward"], "verbs": ["get", "create"]} in rules
        assert rules == [r for r in role_rules(name) if r["resources"] != ["pods/exec", "pods/attach"]]
    plain = {o["metadata"]["name"]: o for o in rbac_manifests("acme", TenantSpec.model_validate(tenant_config()))}
    assert {"apiGroups": [""], "resources": ["pods/exec", "pods/attach"], "verbs": ["get", "create"]} in plain[
        "tenant-member"
    ]["rules"]
    assert [r.resources for r in RIGHTS if not r.isolated_tenants] == [("pods/exec", "pods/attach")]


def _verbs(verbs: tuple[str, ...]) -> str:
    if verbs == WRITE:
        return "read, write"
    if verbs == READ:
        return "read"
    return ", ".join(verbs) if verbs else "-"


def test_docs_security_md_shows_every_right_and_every_refusal() -> None:
    text = (REPO / "docs" / "security.md").read_text()
    section = text[text.index("## Tenant roles") :]
    for right in RIGHTS:
        resources = ", ".join(f"`{r}`" for r in right.resources)
        if right.resource_names:
            resources += f" (named {', '.join(f'`{n}`' for n in right.resource_names)})"
        row = (
            f"| `{right.group or 'core'}` | {resources} | {_verbs(right.admin)} | {_verbs(right.member)} | "
            f"{_verbs(right.viewer)} |"
        )
        assert row in section, row
        if not right.isolated_tenants:  # the For column says an isolated-only tenant's roles lack it
            assert f"{row} {right.why} |" in section, row
            assert "not for an isolated-only tenant" in right.why, row
    for refusal in REFUSED:
        resources = ", ".join(f"`{r}`" for r in refusal.resources)
        verbs = "write" if refusal.verbs == CHANGE else ", ".join(refusal.verbs)
        row = f"| `{refusal.group or 'core'}` | {resources} | {verbs} | {refusal.why} |"
        assert row in section, row


def test_with_oidc_bindings_name_the_prefixed_groups_a_token_carries() -> None:
    oidc = OidcSpec.model_validate(
        {"issuerUrl": "https://idp.example.net/realms/gpucell", "clientId": "kubernetes", "groupsPrefix": "idp:"}
    )
    objects = rbac_manifests("acme", TenantSpec.model_validate(tenant_config()), oidc)
    names = {
        o["metadata"]["name"]: [s["name"] for s in o.get("subjects", [])] for o in objects if o["kind"] == "RoleBinding"
    }
    assert names["tenant-members"] == ["idp:acme-devs", "idp:acme-ml"]
    assert names["tenant-admins"] == ["idp:acme-admins"]


def test_a_role_without_groups_gets_no_binding_and_the_roles_are_always_there() -> None:
    roles = [("Role", "tenant-admin"), ("Role", "tenant-member"), ("Role", "tenant-viewer")]
    objects = rbac_manifests("acme", TenantSpec.model_validate(tenant_config(groups={"members": ["devs"]})))
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [*roles, ("RoleBinding", "tenant-members")]
    objects = rbac_manifests("acme", TenantSpec.model_validate(tenant_config(groups={})))
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == roles


# -- Cilium policies -----------------------------------------------------------------------------------------


def policies(**fields: Any) -> dict[str, dict[str, Any]]:
    tenant = TenantSpec.model_validate(tenant_config(**fields))
    objects = network_policy_manifests("acme", tenant, region())
    assert {o["metadata"]["namespace"] for o in objects} == {"tenant-acme"}
    assert all(o["spec"]["endpointSelector"] == {} for o in objects)
    return {o["metadata"]["name"]: o["spec"] for o in objects}


def without_description(spec: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in spec.items() if k != "description"}


def test_default_deny_selects_every_endpoint_in_both_directions_and_allows_nothing() -> None:
    spec = policies()["tenant-default-deny"]
    assert without_description(spec) == {
        "endpointSelector": {},
        "enableDefaultDeny": {"ingress": True, "egress": True},
        "ingress": [{}],
        "egress": [{}],
    }


def test_link_local_metadata_is_denied_to_every_tenant_whatever_else_allows() -> None:
    for egress in ("none", "cluster", "internet"):
        assert without_description(policies(egress=egress)["tenant-deny-link-local"]) == {
            "endpointSelector": {},
            "egressDeny": [{"toCIDRSet": [{"cidr": "169.254.0.0/16"}]}],
        }


def test_dns_goes_to_kube_dns_through_the_dns_proxy() -> None:
    assert without_description(policies()["tenant-allow-dns"]) == {
        "endpointSelector": {},
        "egress": [
            {
                "toEndpoints": [
                    {"matchLabels": {"k8s:io.kubernetes.pod.namespace": "kube-system", "k8s:k8s-app": "kube-dns"}}
                ],
                "toPorts": [
                    {
                        "ports": [{"port": "53", "protocol": "UDP"}, {"port": "53", "protocol": "TCP"}],
                        "rules": {"dns": [{"matchPattern": "*"}]},
                    }
                ],
            }
        ],
    }


def test_traffic_within_the_tenant_is_allowed_both_ways() -> None:
    own = [{"matchLabels": {"k8s:io.kubernetes.pod.namespace": "tenant-acme"}}]
    assert without_description(policies()["tenant-allow-intra-tenant"]) == {
        "endpointSelector": {},
        "ingress": [{"fromEndpoints": own}],
        "egress": [{"toEndpoints": own}],
    }


PLATFORM = "k8s:io.cilium.k8s.namespace.labels.gpucell.io/platform-services"
BASE = ["tenant-default-deny", "tenant-deny-link-local", "tenant-allow-dns", "tenant-allow-intra-tenant"]
CLUSTER_EGRESS = [
    # the API server's port only: on k3s the entity is the server nodes (SSH, etcd, kubelet)
    {"toEntities": ["kube-apiserver"], "toPorts": [{"ports": [{"port": "6443", "protocol": "TCP"}]}]},
    {"toEndpoints": [{"matchLabels": {PLATFORM: "true"}}]},
]
INTERNET_EGRESS = [
    {
        "toCIDRSet": [
            {
                "cidr": "0.0.0.0/0",
                # metadata, then every private range, which holds the region's node, pod and service networks
                # (minimal_cell_config's defaults), every other cell's and the operator's
                "except": ["169.254.0.0/16", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"],
            }
        ]
    }
]


def test_egress_none_adds_no_policy() -> None:
    assert list(policies(egress="none")) == BASE


def test_egress_cluster_reaches_the_api_server_and_labelled_platform_namespaces_only() -> None:
    rendered = policies(egress="cluster")
    assert list(rendered) == [*BASE, "tenant-allow-egress-cluster"]
    assert rendered["tenant-allow-egress-cluster"]["egress"] == CLUSTER_EGRESS
    assert "ingress" not in rendered["tenant-allow-egress-cluster"]


def test_egress_internet_is_outside_the_cell_but_never_metadata_or_the_cells_networks() -> None:
    rendered = policies(egress="internet")
    assert list(rendered) == [*BASE, "tenant-allow-egress-cluster", "tenant-allow-egress-internet"]
    assert rendered["tenant-allow-egress-cluster"]["egress"] == CLUSTER_EGRESS
    assert rendered["tenant-allow-egress-internet"]["egress"] == INTERNET_EGRESS
    assert "toEntities" not in str(rendered["tenant-allow-egress-internet"])  # world would include 169.254.169.254


def test_egress_cluster_reaches_an_api_vip_on_the_api_port_only() -> None:
    config = region_config({})
    config["network"]["apiEndpoint"] = "10.20.0.5"
    tenant = TenantSpec.model_validate(tenant_config(egress="internet"))
    rendered = {o["metadata"]["name"]: o["spec"] for o in network_policy_manifests("acme", tenant, cell(config))}
    assert rendered["tenant-allow-egress-cluster"]["egress"] == [
        CLUSTER_EGRESS[0],
        {"toCIDRSet": [{"cidr": "10.20.0.5/32"}], "toPorts": [{"ports": [{"port": "6443", "protocol": "TCP"}]}]},
        CLUSTER_EGRESS[1],
    ]
    # the VIP is in the node network, which internet egress leaves out: the API is reached on its port only
    assert "10.0.0.0/8" in rendered["tenant-allow-egress-internet"]["egress"][0]["toCIDRSet"][0]["except"]


def test_egress_internet_leaves_out_a_cells_public_networks_and_reopens_listed_private_ones() -> None:
    config = region_config({})
    config["network"]["podCidr"] = "198.18.0.0/16"
    tenant = TenantSpec.model_validate(tenant_config(egress="internet", egressCidrs=["10.200.0.0/16"]))
    rendered = {o["metadata"]["name"]: o["spec"] for o in network_policy_manifests("acme", tenant, cell(config))}
    assert rendered["tenant-allow-egress-internet"]["egress"][0]["toCIDRSet"][0]["except"] == [
        "169.254.0.0/16",
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "100.64.0.0/10",
        "198.18.0.0/16",
    ]
    assert rendered["tenant-allow-egress-cidrs"]["egress"] == [{"toCIDRSet": [{"cidr": "10.200.0.0/16"}]}]
    assert list(rendered)[-3:] == [
        "tenant-allow-egress-cluster",
        "tenant-allow-egress-internet",
        "tenant-allow-egress-cidrs",
    ]


def test_egress_custom_lists_cidrs_and_fqdns_in_separate_policies() -> None:
    rendered = policies(
        egress="custom", egressCidrs=["203.0.113.0/24", "198.51.100.7/32"], egressFqdns=["huggingface.co", "*.hf.co"]
    )
    assert list(rendered) == [*BASE, "tenant-allow-egress-cidrs", "tenant-allow-egress-fqdns"]
    assert rendered["tenant-allow-egress-cidrs"]["egress"] == [
        {"toCIDRSet": [{"cidr": "203.0.113.0/24"}, {"cidr": "198.51.100.7/32"}]}
    ]
    assert rendered["tenant-allow-egress-fqdns"]["egress"] == [
        {"toFQDNs": [{"matchName": "huggingface.co"}, {"matchPattern": "*.hf.co"}]}
    ]


def test_egress_custom_with_fqdns_only_renders_no_cidr_policy() -> None:
    rendered = policies(egress="custom", egressFqdns=["pypi.org"])
    assert list(rendered)[len(BASE) :] == ["tenant-allow-egress-fqdns"]


# -- the component -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_tenants() -> tuple[CellSpec, PlanResult]:
    spec = region(
        acme=tenant_config(virtualMachines={"box": VM}, egress="internet"),
        globex=tenant_config(egress="custom", egressCidrs=["203.0.113.0/24"], groups={}),
    )
    return spec, plan_tenants(spec)


Plan = tuple[CellSpec, PlanResult]


def test_children_use_the_cells_provider_and_the_tenant_as_parent(two_tenants: Plan) -> None:
    _, plan = two_tenants
    (root,) = [r for r in plan.of_type("gpucell:index:Tenant") if r.name == "lab-acme"]
    children = plan.children(root)
    assert children == tenant_objects(plan, "acme")  # every object is a direct child of the Tenant
    # the admission policies and their bindings are cluster-scoped, children of the Tenant too
    assert {c.type for c in children} == {NAMESPACE, QUOTA, LIMIT_RANGE, ROLE_BINDING, ROLE, CNP, VAP, VAP_BINDING}
    assert {c.provider for c in children} == {"lab-k8s"}  # the cell's provider, not passed by the caller


def test_roles_and_bindings_are_never_protected_and_every_other_child_is(two_tenants: Plan) -> None:
    """A refused removal keeps the fence (namespace, quota, policies); a binding's new roleRef is a replacement that
    Pulumi allows only when the new goal is unprotected (pulumi/pulumi#8873), and deleting a grant takes rights away."""
    _, plan = two_tenants
    children = tenant_objects(plan, "acme")
    grants = {c.name: c.options.get("protect", False) for c in children if c.type in (ROLE, ROLE_BINDING)}
    assert grants == {
        "lab-acme-admin-role": False,
        "lab-acme-member-role": False,
        "lab-acme-viewer-role": False,
        "lab-acme-admins": False,
        "lab-acme-members": False,
        "lab-acme-viewers": False,
    }
    assert {c.options.get("protect", False) for c in children if c.type not in (ROLE, ROLE_BINDING)} == {True}


def test_ready_lists_namespace_quota_limits_rbac_and_policies(two_tenants: Plan) -> None:
    _, plan = two_tenants
    children = {r.urn: r for r in tenant_objects(plan, "acme")}
    ready = plan.outputs["acme-ready"]
    assert set(ready) == set(children)
    assert [children[urn].name for urn in ready] == [
        "lab-acme-namespace",
        "lab-acme-quota",
        "lab-acme-priority-quota",
        "lab-acme-limits",
        "lab-acme-admin-role",
        "lab-acme-member-role",
        "lab-acme-viewer-role",
        "lab-acme-admins",
        "lab-acme-members",
        "lab-acme-viewers",
        "lab-acme-default-deny",
        "lab-acme-deny-link-local",
        "lab-acme-allow-dns",
        "lab-acme-allow-intra-tenant",
        "lab-acme-allow-egress-cluster",
        "lab-acme-allow-egress-internet",
        "lab-acme-admission-pods",
        "lab-acme-admission-pods-binding",
        "lab-acme-admission-vms",
        "lab-acme-admission-vms-binding",
        "lab-acme-admission-services",
        "lab-acme-admission-services-binding",
        "lab-acme-admission-access",
        "lab-acme-admission-access-binding",
        "lab-acme-admission-secrets",
        "lab-acme-admission-secrets-binding",
        "lab-acme-admission-platform",
        "lab-acme-admission-platform-binding",
    ]
    assert plan.outputs["acme-namespace"] == "tenant-acme"


def test_namespaced_objects_come_after_the_namespace_and_policies_after_cilium(two_tenants: Plan) -> None:
    _, plan = two_tenants
    namespace = plan.named("lab-acme-namespace")
    cilium_release = plan.named("lab-cilium-cilium")  # depending on the Cilium component means on its Release
    assert cilium_release.parent == plan.named("lab-cilium").urn
    for reg in tenant_objects(plan, "acme"):
        if reg is namespace:
            assert reg.dependencies == [plan.named("lab-kubevirt-kubevirt").urn]
            continue
        if reg.type == VAP:  # cluster-scoped, in force before the namespace holds anything
            assert reg.dependencies == [], reg.name
            continue
        if reg.type == VAP_BINDING:  # after its policy only
            assert reg.dependencies == [plan.named(reg.name.removesuffix("-binding")).urn], reg.name
            continue
        assert namespace.urn in reg.dependencies, reg.name
        assert (cilium_release.urn in reg.dependencies) == (reg.type == CNP), reg.name


def test_rendered_namespace_quota_and_policy_reach_the_registrations(two_tenants: Plan) -> None:
    spec, plan = two_tenants
    namespace = plan.named("lab-acme-namespace")
    assert namespace.inputs["metadata"]["name"] == "tenant-acme"
    for tenant in ("acme", "globex"):  # acme runs a VM, globex does not: both restricted
        assert (
            plan.named(f"lab-{tenant}-namespace").inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
            == "restricted"
        )
    assert plan.named("lab-acme-quota").inputs["spec"]["hard"] == quota_hard(spec.tenants["acme"], spec)
    cidrs = plan.named("lab-globex-allow-egress-cidrs")
    assert cidrs.inputs["spec"]["egress"] == [{"toCIDRSet": [{"cidr": "203.0.113.0/24"}]}]
    assert cidrs.inputs["metadata"]["namespace"] == "tenant-globex"


def test_two_tenants_in_one_region_do_not_collide(two_tenants: Plan) -> None:
    _, plan = two_tenants
    acme, globex = tenant_objects(plan, "acme"), tenant_objects(plan, "globex")
    assert not {r.name for r in acme} & {r.name for r in globex}
    assert len({r.name for r in plan.resources}) == len(plan.resources)

    def identity(reg: Registration) -> tuple[str, str, str]:
        meta = reg.inputs["metadata"]
        return reg.type, meta.get("namespace", ""), meta["name"]

    assert not {identity(r) for r in acme} & {identity(r) for r in globex}
    assert {r.inputs["metadata"].get("namespace") for r in globex} == {None, "tenant-globex"}
    assert not [r for r in globex if r.type == ROLE_BINDING]  # globex has no groups
    assert sorted(r.inputs["metadata"]["name"] for r in globex if r.type == ROLE) == [
        "tenant-admin",
        "tenant-member",
        "tenant-viewer",
    ]  # the tenant roles are always there, in each tenant's own namespace


@pytest.fixture(scope="module")
def every_kind() -> tuple[CellSpec, list[Registration]]:
    """Every egress class, a VM tenant and RBAC, rendered in one program."""
    tenants = {
        "none": tenant_config(),
        "vms": tenant_config(virtualMachines={"box": VM}, egress="cluster"),
        "web": tenant_config(egress="internet"),
        "lists": tenant_config(
            egress="custom", egressCidrs=["203.0.113.0/24"], egressFqdns=["huggingface.co", "*.hf.co"]
        ),
    }
    spec = cell(region_config(tenants))
    plan = plan_tenants(spec)
    rendered = [r for name in tenants for r in tenant_objects(plan, name)]
    assert {r.type for r in rendered} == {NAMESPACE, QUOTA, LIMIT_RANGE, ROLE_BINDING, ROLE, CNP, VAP, VAP_BINDING}
    return spec, rendered


Rendered = tuple[CellSpec, list[Registration]]


def test_every_rendered_object_passes_the_conformance_checks(every_kind: Rendered) -> None:
    """Strict upstream schemas (core kinds and the cilium.io/v2 CRD), with zero problems."""
    spec, rendered = every_kind
    assert len([r for r in rendered if r.type == CNP]) == 4 * 4 + 1 + 2 + 2  # base, cluster, internet, custom
    report = check_region("lab", rendered, spec, SchemaStore(UPSTREAM), checkers=SCHEMA_CHECKERS)
    assert report.problems == []


def test_every_rendered_object_passes_checkov(every_kind: Rendered, checkov: str) -> None:
    spec, rendered = every_kind
    report = check_region("lab", rendered, spec, SchemaStore(UPSTREAM), checkers=SECURITY)
    assert report.problems == []
    assert report.checkov_skipped == 0


def test_the_crd_refuses_a_default_deny_without_rule_sections(every_kind: Rendered) -> None:
    """Why ``tenant-default-deny`` carries ``ingress: [{}]``/``egress: [{}]`` beside ``enableDefaultDeny``."""
    spec, rendered = every_kind
    (deny,) = [r for r in rendered if r.name == "lab-none-default-deny"]
    inputs = copy.deepcopy(deny.raw_inputs)
    del inputs["spec"]["ingress"], inputs["spec"]["egress"]
    broken = replace(deny, inputs=inputs, raw_inputs=inputs)
    report = check_region("lab", [broken], spec, SchemaStore(UPSTREAM), checkers=("custom-resource",))
    assert [(p.subject.name, p.path) for p in report.problems] == [("tenant-default-deny", "spec")]


def test_multi_label_fqdn_wildcards_become_match_patterns() -> None:
    rendered = policies(egress="custom", egressFqdns=["**.hf.co", "*.huggingface.co", "pypi.org"])
    assert rendered["tenant-allow-egress-fqdns"]["egress"] == [
        {"toFQDNs": [{"matchPattern": "**.hf.co"}, {"matchPattern": "*.huggingface.co"}, {"matchName": "pypi.org"}]}
    ]


def test_a_tenant_built_from_python_is_admitted_like_stack_config() -> None:
    """A TenantSpec the cell does not hold gets the region's admission rules before anything is registered."""
    spec = region()  # no tenants in the cell's own spec
    greedy = TenantSpec.model_validate(
        {"quota": {"cpuMillicores": 1000, "memoryGib": 4, "storageGib": 10, "gpus": {"nvidia.com/mig-7g.80gb": 1}}}
    )
    registered: list[str] = []

    def program() -> None:
        regional = RegionalCell("lab", RegionalCellArgs(cell=spec, ssh_private_key=pulumi.Output.secret("k")))
        registered.extend(["cell"])
        Tenant("lab-acme", TenantArgs.from_cell("acme", greedy, regional))
        registered.append("tenant")

    with pytest.raises(ConfigError) as info:
        run_program(program, computed=computed)
    assert len(info.value.lines) == 1
    assert info.value.lines[0].startswith(
        "tenants.acme.quota.gpus.nvidia.com/mig-7g.80gb: is offered by no pool of the region; offered: "
    )
    assert registered == ["cell"]
    fitting = greedy.model_copy(
        update={"quota": greedy.quota.model_copy(update={"gpus": {"nvidia.com/mig-1g.10gb": 1}})}
    )
    admit("acme", fitting, ClusterFacts.from_cell(spec))  # no error
