"""Notebook: the rendered StatefulSet (GPUs, MIG, CPU, security, home PVC, token file), Service, Ingress and
policy, the token as a secret, dependency edges, and conformance of everything it renders."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest
from pulumi.runtime.mocks import MockResourceArgs

from gpucell.cell import RegionalCell, RegionalCellArgs
from gpucell.engine.mock_engine import SECRET, PlanResult, run_program
from gpucell.spec import CellSpec
from gpucell.spec.workloads import NotebookSpec
from gpucell.stacks.conformance.run import check_region
from gpucell.stacks.conformance.schemas import SchemaStore
from gpucell.tenancy._common import container_placement
from gpucell.tenancy.tenant import Tenant, TenantArgs
from gpucell.workloads.notebook import (
    Notebook,
    NotebookArgs,
    ingress_manifest,
    ingress_policy_manifest,
    service_manifest,
    statefulset_manifest,
)
from tests.conftest import SCHEMA_CHECKERS, SECURITY, UPSTREAM, cell, minimal_cell_config, tainted_mig_pool
from tests.conftest import workload as component
from tests.conftest import workload_children as child

STATEFULSET = "kubernetes:apps/v1:StatefulSet"
SECRET_TYPE = "kubernetes:core/v1:Secret"
SERVICE = "kubernetes:core/v1:Service"
INGRESS = "kubernetes:networking.k8s.io/v1:Ingress"
CNP = "kubernetes:cilium.io/v2:CiliumNetworkPolicy"
PASSWORD = "random:index/randomPassword:RandomPassword"
COMPONENT = "gpucell:index:Notebook"
TOKEN = "NOTEBOOK-TOKEN-SENTINEL-4b1d"
KUBECONFIG = "apiVersion: v1\nclusters:\n- cluster:\n    server: https://127.0.0.1:6443\n  name: d\n"
LABELS = {
    "app.kubernetes.io/name": "nb-gpu",
    "app.kubernetes.io/managed-by": "gpucell",
    "gpucell.io/tenant": "acme",
    "app.kubernetes.io/component": "notebook",
}
IMAGE = "quay.io/jupyter/pytorch-notebook:cuda12-2025-11-24"
EXPOSE = {
    "host": "nb-gpu.acme.lab.example.net",
    "ingressClass": "nginx",
    "tlsSecret": "nb-gpu-tls",
    "allowFromCidrs": ["10.8.0.0/16"],
}
NOTEBOOKS: dict[str, dict[str, Any]] = {
    "nb-gpu": {"gpu": {"count": 2}, "cpuMillicores": 4000, "memoryGib": 32, "homeGib": 100, "expose": EXPOSE},
    "nb-mig": {
        "gpu": {"migProfile": "1g.18gb", "count": 2},
        "storageClass": "local-nvme",
        "readOnlyRoot": False,
    },
    "nb-cpu": {
        "cpuMillicores": 500,
        "memoryGib": 1,
        "image": "quay.io/jupyter/scipy-notebook@sha256:" + "0" * 64,
    },
}


def region() -> CellSpec:
    """The minimal region (2x L40S, container mode) plus a tainted H200 pool in MIG ``all-balanced``, and
    tenant ``acme`` with the :data:`NOTEBOOKS` (so admission checks them too)."""
    config = minimal_cell_config()
    config["nodePools"]["h200-mig"] = tainted_mig_pool()
    config["storage"] = {"otherClasses": ["local-nvme"]}  # the nb-mig home's class, installed outside gpucell
    quota = {
        "cpuMillicores": 64000,
        "memoryGib": 256,
        "storageGib": 1000,
        "gpus": {"nvidia.com/gpu": 2, "nvidia.com/mig-1g.18gb": 2},
    }
    config["tenants"] = {"acme": {"quota": quota, "notebooks": NOTEBOOKS}}
    return cell(config)


def notebook(name: str) -> NotebookSpec:
    return region().tenants["acme"].notebooks[name]


def rendered(name: str) -> dict[str, Any]:
    """The StatefulSet of notebook ``name``, placed as the component places it."""
    spec, cell_spec = notebook(name), region()
    placement = container_placement(spec.gpu, cell_spec, "a GPU notebook")
    return statefulset_manifest("acme", name, spec, cell_spec, placement)


def pod(name: str) -> dict[str, Any]:
    return rendered(name)["spec"]["template"]["spec"]


def container(name: str) -> dict[str, Any]:
    (only,) = pod(name)["containers"]
    return only


# -- the rendered StatefulSet, by value ----------------------------------------------------------------------
def test_gpu_notebook_gets_whole_gpus_the_nvidia_runtime_and_its_pool() -> None:
    spec = pod("nb-gpu")
    # 32 GiB declared + 2 GiB of /dev/shm for NCCL across its two GPUs (counted against the memory limit)
    amounts = {"cpu": "4000m", "memory": "34Gi", "nvidia.com/gpu": 2}
    assert container("nb-gpu")["resources"] == {"requests": amounts, "limits": amounts}
    assert spec["runtimeClassName"] == "nvidia"
    assert spec["affinity"] == {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "gpucell.io/pool", "operator": "In", "values": ["l40s"]}]}
                ]
            }
        }
    }
    assert "tolerations" not in spec


def test_mig_notebook_asks_for_the_mig_resource_on_the_mig_pool_and_tolerates_its_taint() -> None:
    spec = pod("nb-mig")
    assert container("nb-mig")["resources"]["limits"] == {
        "cpu": "2000m",
        "memory": "10Gi",  # 8 + 2 GiB of /dev/shm: two MIG instances are two CUDA devices for NCCL too
        "nvidia.com/mig-1g.18gb": 2,
    }
    shm = next(v for v in spec["volumes"] if v["name"] == "shm")
    assert shm == {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "6Gi"}}
    assert container("nb-mig")["resources"]["requests"] == container("nb-mig")["resources"]["limits"]
    assert spec["runtimeClassName"] == "nvidia"
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "gpucell.io/pool", "operator": "In", "values": ["h200-mig"]}]}]
    assert spec["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
    ]


def test_cpu_notebook_has_no_gpu_no_nvidia_runtime_and_lands_on_cpu_pools() -> None:
    spec = pod("nb-cpu")
    amounts = {"cpu": "500m", "memory": "1Gi"}
    assert container("nb-cpu")["resources"] == {"requests": amounts, "limits": amounts}
    assert "runtimeClassName" not in spec
    # off the GPU nodes: a CPU notebook must not take CPUs from NUMA-pinned GPU VMs
    terms = [{"matchExpressions": [{"key": "gpucell.io/pool", "operator": "In", "values": ["cpu"]}]}]
    assert spec["affinity"] == {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
    }
    assert "tolerations" not in spec


def test_pod_runs_restricted_as_jovyan_without_a_service_account_token() -> None:
    spec = pod("nb-gpu")
    assert spec["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "runAsGroup": 100,
        "fsGroup": 100,
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert spec["automountServiceAccountToken"] is False
    assert spec["enableServiceLinks"] is False
    assert container("nb-gpu")["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "runAsGroup": 100,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert container("nb-mig")["securityContext"]["readOnlyRootFilesystem"] is False


def test_writable_paths_are_home_tmp_and_shm_and_the_token_is_a_read_only_file() -> None:
    assert container("nb-gpu")["volumeMounts"] == [
        {"name": "home", "mountPath": "/home/jovyan"},
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "shm", "mountPath": "/dev/shm"},
        {"name": "token", "mountPath": "/etc/gpucell/jupyter", "readOnly": True},
    ]
    assert pod("nb-gpu")["volumes"] == [
        {"name": "tmp", "emptyDir": {"sizeLimit": "10Gi"}},
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "18Gi"}},
        {
            "name": "token",
            "secret": {
                "secretName": "nb-gpu-token",
                "defaultMode": 0o440,
                "items": [{"key": "token", "path": "token"}],
            },
        },
    ]
    assert container("nb-gpu")["env"] == [{"name": "JUPYTER_TOKEN_FILE", "value": "/etc/gpucell/jupyter/token"}]
    assert pod("nb-cpu")["volumes"][1]["emptyDir"]["sizeLimit"] == "1Gi"  # never below 1 GiB


def test_container_runs_the_image_on_8888_with_probes_on_the_api() -> None:
    main = container("nb-gpu")
    assert main["image"] == IMAGE
    assert main["imagePullPolicy"] == "Always"
    assert "command" not in main  # the image's own: tini -g -- start.sh
    assert "args" not in main  # start-notebook.py, i.e. jupyter lab
    assert main["ports"] == [{"name": "http", "containerPort": 8888, "protocol": "TCP"}]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert main[probe]["httpGet"] == {"path": "/api", "port": "http"}
    assert main["startupProbe"]["periodSeconds"] * main["startupProbe"]["failureThreshold"] == 300


def test_home_is_a_retained_claim_template_with_the_declared_size_and_class() -> None:
    spec = rendered("nb-gpu")["spec"]
    assert spec["replicas"] == 1
    assert spec["serviceName"] == "nb-gpu"
    assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    assert spec["volumeClaimTemplates"] == [
        {
            "metadata": {"name": "home", "labels": LABELS},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "100Gi"}}},
        }
    ]
    mig_claim = rendered("nb-mig")["spec"]["volumeClaimTemplates"][0]["spec"]
    assert mig_claim["storageClassName"] == "local-nvme"
    assert mig_claim["resources"] == {"requests": {"storage": "50Gi"}}


def test_selector_matches_the_pod_labels() -> None:
    spec = rendered("nb-gpu")["spec"]
    assert spec["selector"] == {
        "matchLabels": {"app.kubernetes.io/name": "nb-gpu", "app.kubernetes.io/component": "notebook"}
    }
    assert spec["template"]["metadata"]["labels"] == LABELS
    assert rendered("nb-gpu")["metadata"]["namespace"] == "tenant-acme"


def test_checkov_skips_say_why_and_only_where_a_check_cannot_hold() -> None:
    def skipped(name: str) -> list[str]:
        return [value.split("=", 1)[0] for value in rendered(name)["metadata"]["annotations"].values()]

    assert skipped("nb-gpu") == ["CKV_K8S_40", "CKV2_K8S_6", "CKV_K8S_43"]
    assert skipped("nb-mig") == ["CKV_K8S_40", "CKV2_K8S_6", "CKV_K8S_43", "CKV_K8S_22"]
    assert skipped("nb-cpu") == ["CKV_K8S_40", "CKV2_K8S_6"]  # pinned by digest, read-only root
    annotations = rendered("nb-gpu")["metadata"]["annotations"]
    assert sorted(annotations) == ["checkov.io/skip1", "checkov.io/skip2", "checkov.io/skip3"]
    assert all(len(value.split("=", 1)[1]) > 20 for value in annotations.values())


# -- Service, Ingress, policy --------------------------------------------------------------------------------
def test_service_is_cluster_ip_on_8888() -> None:
    assert service_manifest("acme", "nb-gpu")["spec"] == {
        "type": "ClusterIP",
        "selector": {"app.kubernetes.io/name": "nb-gpu", "app.kubernetes.io/component": "notebook"},
        "ports": [{"name": "http", "protocol": "TCP", "port": 8888, "targetPort": "http"}],
    }


def test_ingress_routes_the_host_to_the_service_with_tls() -> None:
    ingress = ingress_manifest("acme", "nb-gpu", notebook("nb-gpu"))
    assert ingress is not None
    assert ingress["metadata"] == {"name": "nb-gpu", "namespace": "tenant-acme", "labels": LABELS}
    assert ingress["spec"] == {
        "ingressClassName": "nginx",
        "rules": [
            {
                "host": "nb-gpu.acme.lab.example.net",
                "http": {
                    "paths": [
                        {
                            "path": "/",
                            "pathType": "Prefix",
                            "backend": {"service": {"name": "nb-gpu", "port": {"number": 8888}}},
                        }
                    ]
                },
            }
        ],
        "tls": [{"hosts": ["nb-gpu.acme.lab.example.net"], "secretName": "nb-gpu-tls"}],
    }
    plain = NotebookSpec.model_validate(  # plain HTTP only when asked for explicitly
        {"expose": {"host": "nb.example.net", "ingressClass": "cilium", "allowPlainHttp": True}}
    )
    plain_ingress = ingress_manifest("acme", "nb", plain)
    assert plain_ingress is not None
    assert "tls" not in plain_ingress["spec"]
    assert ingress_manifest("acme", "nb-cpu", notebook("nb-cpu")) is None


def test_policy_admits_the_ingress_controller_and_the_declared_networks_on_8888_only() -> None:
    policy = ingress_policy_manifest("acme", "nb-gpu", notebook("nb-gpu"))
    assert policy is not None
    port = [{"ports": [{"port": "8888", "protocol": "TCP"}]}]
    assert policy["metadata"]["name"] == "nb-gpu-ingress"
    assert policy["spec"] == {
        "endpointSelector": {
            "matchLabels": {"app.kubernetes.io/name": "nb-gpu", "app.kubernetes.io/component": "notebook"}
        },
        "ingress": [
            {"fromEntities": ["ingress"], "toPorts": port},
            {
                "fromEndpoints": [
                    {"matchLabels": {"k8s:io.cilium.k8s.namespace.labels.gpucell.io/ingress-class": "nginx"}}
                ],
                "toPorts": port,
            },
            {"fromCIDRSet": [{"cidr": "10.8.0.0/16"}], "toPorts": port},
        ],
    }
    no_cidrs = NotebookSpec.model_validate(
        {"expose": {"host": "nb.example.net", "ingressClass": "cilium", "tlsSecret": "nb-tls"}}
    )
    only_controller = ingress_policy_manifest("acme", "nb", no_cidrs)
    assert only_controller is not None
    assert [next(iter(rule)) for rule in only_controller["spec"]["ingress"]] == [
        "fromEntities",
        "fromEndpoints",
    ]
    assert ingress_policy_manifest("acme", "nb-cpu", notebook("nb-cpu")) is None


# -- the component: children, the token, edges, conformance --------------------------------------------------
def computed(args: MockResourceArgs) -> dict[str, Any]:
    if args.typ == "command:remote:Command" and args.name.endswith("-kubeconfig"):
        return {"stdout": KUBECONFIG}
    if args.typ == PASSWORD:
        return {"result": TOKEN}
    return {}


def deploy() -> PlanResult:
    """A cell, the real tenant ``acme`` and one Notebook per entry of :data:`NOTEBOOKS` under it, as
    ``gpucell.stacks.program`` builds them."""

    def program() -> None:
        spec = region()
        lab = RegionalCell("lab", RegionalCellArgs(cell=spec, ssh_private_key=pulumi.Output.secret("k")))
        tenant = Tenant("lab-acme", TenantArgs.from_cell("acme", spec.tenants["acme"], lab))
        for name, declared in spec.tenants["acme"].notebooks.items():
            component = Notebook(
                f"lab-acme-{name}",
                NotebookArgs(name, declared, tenant),
                opts=pulumi.ResourceOptions(parent=tenant),
            )
            pulumi.export(f"{name}-url", component.url)
            pulumi.export(f"{name}-namespace", component.namespace)
            pulumi.export(f"{name}-service", component.service_name)
            pulumi.export(f"{name}-token", component.token)

    return run_program(program, computed=computed)


@pytest.fixture(scope="module")
def plan() -> PlanResult:
    return deploy()


def test_children_are_named_after_the_component(plan: PlanResult) -> None:
    assert component(plan, "nb-gpu").type == COMPONENT
    assert component(plan, "nb-gpu").parent == plan.named("lab-acme").urn
    assert sorted(r.name for r in plan.children(component(plan, "nb-gpu"))) == [
        "lab-acme-nb-gpu-ingress",
        "lab-acme-nb-gpu-ingress-policy",
        "lab-acme-nb-gpu-service",
        "lab-acme-nb-gpu-statefulset",
        "lab-acme-nb-gpu-token",
        "lab-acme-nb-gpu-token-secret",
    ]
    assert sorted(r.name for r in plan.children(component(plan, "nb-cpu"))) == [
        "lab-acme-nb-cpu-service",
        "lab-acme-nb-cpu-statefulset",
        "lab-acme-nb-cpu-token",
        "lab-acme-nb-cpu-token-secret",
    ]


def test_registered_objects_are_the_rendered_manifests(plan: PlanResult) -> None:
    for name in NOTEBOOKS:
        (statefulset,) = child(plan, name, STATEFULSET)
        expected = rendered(name)
        assert {k: statefulset.inputs[k] for k in ("metadata", "spec")} == {
            k: expected[k] for k in ("metadata", "spec")
        }
    (service,) = child(plan, "nb-gpu", SERVICE)
    assert service.inputs["spec"] == service_manifest("acme", "nb-gpu")["spec"]
    (ingress,) = child(plan, "nb-gpu", INGRESS)
    expected_ingress = ingress_manifest("acme", "nb-gpu", notebook("nb-gpu"))
    assert expected_ingress is not None
    assert ingress.inputs["spec"] == expected_ingress["spec"]
    (policy,) = child(plan, "nb-gpu", CNP)
    expected_policy = ingress_policy_manifest("acme", "nb-gpu", notebook("nb-gpu"))
    assert expected_policy is not None
    assert policy.inputs["spec"] == expected_policy["spec"]


def test_outputs(plan: PlanResult) -> None:
    assert plan.outputs["nb-gpu-url"] == "https://nb-gpu.acme.lab.example.net/"
    assert plan.outputs["nb-cpu-url"] == "http://nb-cpu.tenant-acme.svc:8888/"
    assert plan.outputs["nb-gpu-namespace"] == "tenant-acme"
    assert plan.outputs["nb-gpu-service"] == "nb-gpu"
    assert plan.outputs["nb-gpu-token"] == SECRET


def test_token_is_random_and_only_ever_a_secret(plan: PlanResult) -> None:
    (password,) = child(plan, "nb-gpu", PASSWORD)
    assert password.inputs["length"] == 48
    assert password.inputs["special"] is False  # it goes into ?token= URLs
    (secret,) = child(plan, "nb-gpu", SECRET_TYPE)
    assert secret.inputs["metadata"] == {"name": "nb-gpu-token", "namespace": "tenant-acme", "labels": LABELS}
    assert secret.inputs["type"] == "Opaque"
    assert "stringData" in secret.secret_paths
    assert secret.inputs["stringData"] == SECRET
    assert secret.raw_inputs["stringData"] == {"token": TOKEN}
    for registration in plan.resources:
        assert TOKEN not in json.dumps(registration.inputs), registration.name


def test_every_child_waits_for_the_tenant_and_gpu_pods_for_the_gpu_operator(plan: PlanResult) -> None:
    ready = {r.urn for r in plan.children(plan.named("lab-acme")) if r.type.startswith("kubernetes:")}
    # Tenant.ready is every Kubernetes child of the tenant: namespace, quota, limits, RBAC, policies.
    named = ("namespace", "quota", "limits", "default-deny")
    assert {plan.named(f"lab-acme-{n}").urn for n in named} <= ready
    operator = plan.named("lab-gpu-operator-gpu-operator").urn
    for name in NOTEBOOKS:
        for registration in plan.children(component(plan, name)):
            assert ready <= set(registration.dependencies), registration.name
        (statefulset,) = child(plan, name, STATEFULSET)
        (secret,) = child(plan, name, SECRET_TYPE)
        assert secret.urn in statefulset.dependencies
        assert (operator in statefulset.dependencies) == (name != "nb-cpu")


def test_kubernetes_children_use_the_cells_provider(plan: PlanResult) -> None:
    children = plan.children(component(plan, "nb-gpu"))
    assert {r.provider for r in children if r.type.startswith("kubernetes:")} == {"lab-k8s"}


def test_rendered_objects_pass_conformance_with_zero_problems(plan: PlanResult) -> None:
    ours = [r for name in NOTEBOOKS for r in plan.descendants(component(plan, name))]
    assert {r.type for r in ours} == {STATEFULSET, SECRET_TYPE, SERVICE, INGRESS, CNP, PASSWORD}
    report = check_region("lab", ours, region(), SchemaStore(UPSTREAM), checkers=SCHEMA_CHECKERS)
    assert [str(p) for p in report.problems] == []


def test_rendered_objects_pass_checkov(plan: PlanResult, checkov: str) -> None:
    ours = [r for name in NOTEBOOKS for r in plan.descendants(component(plan, name))]
    report = check_region("lab", ours, region(), SchemaStore(UPSTREAM), checkers=SECURITY)
    assert [str(p) for p in report.problems] == []
    assert report.checkov_skipped == 3 + 4 + 2  # nb-gpu, nb-mig, nb-cpu: the annotated skips, nothing else
