"""Tenant clusters: the Cluster API objects by value, their machines' VM templates, the engine in the cell, the
kubeconfig, day-2 changes and conformance against the upstream CRDs."""

from __future__ import annotations

import base64
import copy
import inspect
import json
from ipaddress import IPv4Network
from typing import Any, cast

import pulumi
import pytest
import yaml
from pulumi.runtime.mocks import MockResourceArgs

from gpucell.admission.inventory import gpu_offers
from gpucell.admission.tenant_cluster_admission import machine_placements
from gpucell.catalog import cluster_api_facts
from gpucell.cell import RegionalCell, RegionalCellArgs
from gpucell.cluster import Cluster
from gpucell.components import cluster_api
from gpucell.engine.mock_engine import SECRET, UNKNOWN, PlanResult, run_program
from gpucell.errors import ConfigError
from gpucell.spec import CellSpec
from gpucell.spec.tenant_clusters import TenantClusterSpec, namespace_names
from gpucell.spec.versions import Versions
from gpucell.stacks.conformance.objects import strict_schema
from gpucell.stacks.conformance.run import check_region
from gpucell.stacks.conformance.schemas import SchemaStore
from gpucell.stacks.program import build_cells
from gpucell.tenancy.tenant import Tenant, TenantArgs
from gpucell.testing import fake_cluster_api_kubeconfig, provider_outputs
from gpucell.workloads import tenant_cluster as tc
from tests.conftest import SCHEMA_CHECKERS, UPSTREAM, minimal_cell_config, violations
from tests.test_day2 import computed
from tests.test_gpu_models import H800
from tests.test_gpu_models import RESOURCE as H800_RESOURCE

H100 = "nvidia.com/GH100_H100_SXM5_80GB"
IMAGE = "docker://quay.io/capk/ubuntu-2404-container-disk:v1.34.1"
CAPI = "cluster.x-k8s.io"
TYPES = {
    kind: f"kubernetes:{group}:{kind}"
    for group, kind in (
        ("cluster.x-k8s.io/v1beta2", "Cluster"),
        ("cluster.x-k8s.io/v1beta2", "MachineDeployment"),
        ("cluster.x-k8s.io/v1beta2", "MachineHealthCheck"),
        ("controlplane.cluster.x-k8s.io/v1beta2", "KubeadmControlPlane"),
        ("bootstrap.cluster.x-k8s.io/v1beta2", "KubeadmConfigTemplate"),
        ("infrastructure.cluster.x-k8s.io/v1alpha1", "KubevirtCluster"),
        ("infrastructure.cluster.x-k8s.io/v1alpha1", "KubevirtMachineTemplate"),
        ("addons.cluster.x-k8s.io/v1alpha1", "HelmChartProxy"),
        ("cilium.io/v2", "CiliumNetworkPolicy"),
    )
}


def cluster_spec(**changes: Any) -> dict[str, Any]:
    """Tenant cluster ``ml``: one control-plane VM, two workers with 2 H100s each (part of an HGX board), the API on
    a LoadBalancer address."""
    spec: dict[str, Any] = {
        "kubernetesVersion": "v1.34.1",
        "image": {"registry": IMAGE},
        "workerPools": {
            "gpu": {
                "replicas": 2,
                "gpuModel": "H100-SXM5-80GB",
                "gpus": 2,
                "cpu": {"cores": 16},
                "memoryGib": 128,
                "hugepages": "1Gi",
                "diskGib": 200,
            }
        },
        "apiServer": {"type": "LoadBalancer", "address": "203.0.113.20", "allowFromCidrs": ["198.51.100.0/24"]},
    }
    spec.update(changes)
    return spec


def region_config(**cluster: Any) -> dict[str, Any]:
    """The minimal region plus an HGX H100 passthrough pool, a LoadBalancer pool of tenant acme, and acme with
    tenant cluster ``ml`` (:func:`cluster_spec`)."""
    config = minimal_cell_config()
    config["nodePools"]["h100-vm"] = {
        "role": "gpu",
        "gpuModel": "H100-SXM5-80GB",
        "gpusPerNode": 8,
        "gpuMode": "vm-passthrough",
        "hosts": [{"name": "h100-1", "address": "10.20.0.41"}],
        "topology": {"reservedCpus": "0-3", "cpusPerNuma": 112, "memoryPerNumaGib": 1000, "hugepages1GiPerNuma": 960},
        "taints": ["gpucell.io/dedicated=vm:NoSchedule"],
    }
    config["loadBalancer"] = {
        "announce": "l2",
        "l2": {"interfaces": ["^eth0$"]},
        "pools": {"acme-public": {"blocks": ["203.0.113.16/28"], "tenants": ["acme"]}},
    }
    config["tenants"] = {
        "acme": {
            "groups": {"members": ["acme-ml"]},
            "quota": {
                "cpuMillicores": 100_000,
                "memoryGib": 1024,
                "storageGib": 2000,
                "gpus": {H100: 8},
                "loadBalancers": 1,
            },
            "egress": "internet",
            "tenantClusters": {"ml": cluster_spec(**cluster)},
        }
    }
    return config


def region(**cluster: Any) -> CellSpec:
    return CellSpec.model_validate(region_config(**cluster))


def refusal(config: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        CellSpec.model_validate(config)
    return caught.value.lines


def deploy(cell_spec: CellSpec | None = None, *, preview: bool = False) -> PlanResult:
    """The cell, tenant acme and its tenant cluster ml, as the program builds them."""
    cell_spec = cell_spec or region()

    def program() -> None:
        lab = RegionalCell("lab", RegionalCellArgs(cell=cell_spec, ssh_private_key=pulumi.Output.secret("k")))
        tenant = Tenant("lab-acme", TenantArgs.from_cell("acme", cell_spec.tenants["acme"], lab))
        assert lab.cluster_api is not None
        spec = cell_spec.tenants["acme"].tenant_clusters["ml"]
        built = tc.TenantCluster(
            "lab-acme-ml",
            tc.TenantClusterArgs.from_tenant("ml", spec, tenant, lab.cluster_api),
            opts=pulumi.ResourceOptions(parent=tenant),
        )
        pulumi.export("kubeconfig", built.kubeconfig)
        pulumi.export("kubeconfigText", pulumi.Output.unsecret(built.kubeconfig))

    computed = None if preview else provider_outputs([cell_spec])
    return run_program(program, computed=computed, preview=preview)


def objects(plan: PlanResult, kind: str) -> list[dict[str, Any]]:
    return [r.masked_inputs() for r in plan.of_type(TYPES[kind])]


def the(plan: PlanResult, kind: str) -> dict[str, Any]:
    (found,) = objects(plan, kind)
    return found


@pytest.fixture(scope="module")
def plan() -> PlanResult:
    return deploy()


def machine_template(spec: CellSpec, pool: str | None = "gpu") -> dict[str, Any]:
    cluster = spec.tenants["acme"].tenant_clusters["ml"]
    offers = gpu_offers(spec.node_pools, spec.effective_mig_strategy.value)
    control_plane, workers = machine_placements("ml", cluster, spec.node_pools, offers, catalog=spec.gpu_catalog)
    if pool is None:
        return tc.machine_vm_template("acme", "ml", cluster.control_plane_vm(), control_plane, spec.node_pools)
    vm = cluster.worker_vm(pool)
    return tc.machine_vm_template("acme", "ml", vm, workers[pool], spec.node_pools, pool=pool)


def test_a_worker_pool_takes_a_gpu_model_of_the_stacks_own() -> None:
    """``gpucell:gpuModels`` (decision 0028): workers are placed and rendered with the stack's catalog, through the
    program."""
    config = region_config()
    config["nodePools"]["h100-vm"].update(gpuModel="H800-PCIe-80GB", gpusPerNode=2)
    config["tenants"]["acme"]["quota"]["gpus"] = {H800_RESOURCE: 2}
    config["tenants"]["acme"]["tenantClusters"]["ml"]["workerPools"]["gpu"].update(
        gpuModel="H800-PCIe-80GB", replicas=1
    )
    stack = {
        "gpucell:regions": {"lab": config},
        "gpucell:gpuModels": {"H800-PCIe-80GB": H800},
        "gpucell:sshPrivateKey": "key",
    }
    plan = run_program(build_cells, config=stack, secret_keys=["gpucell:sshPrivateKey"], computed=computed)
    (worker,) = [t for t in objects(plan, "KubevirtMachineTemplate") if "gpu" in t["metadata"]["name"]]
    vm = worker["spec"]["template"]["spec"]["virtualMachineTemplate"]["spec"]["template"]["spec"]
    assert vm["domain"]["devices"]["gpus"] == [{"name": f"gpu{i}", "deviceName": H800_RESOURCE} for i in range(2)]
    assert vm["domain"]["cpu"]["model"] == "host-passthrough"  # 2 x bar1Mib 131072 > the 64 GiB firmware window
    # the program exports every tenant cluster's kubeconfig of the region as one secret output
    assert plan.outputs["labTenantClusterKubeconfigs"] == SECRET


# -- the objects, by value ---------------------------------------------------------------------------------------


def test_the_cluster_refers_to_its_control_plane_and_infrastructure_and_waits_for_its_control_plane(
    plan: PlanResult,
) -> None:
    cluster = the(plan, "Cluster")
    assert cluster["metadata"]["name"] == "ml"
    assert cluster["metadata"]["namespace"] == "tenant-acme"
    assert cluster["metadata"]["labels"]["gpucell.io/tenant-cluster"] == "ml"
    assert cluster["metadata"]["annotations"] == {"pulumi.com/waitFor": "condition=ControlPlaneInitialized"}
    assert cluster["spec"] == {
        "clusterNetwork": {"pods": {"cidrBlocks": ["10.243.0.0/16"]}, "services": {"cidrBlocks": ["10.95.0.0/16"]}},
        "controlPlaneRef": {
            "apiGroup": "controlplane.cluster.x-k8s.io",
            "kind": "KubeadmControlPlane",
            "name": "ml-control-plane",
        },
        "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "KubevirtCluster", "name": "ml"},
    }
    assert the(plan, "KubevirtCluster")["spec"] == {"controlPlaneServiceTemplate": {"spec": {"type": "ClusterIP"}}}


def test_the_control_plane_runs_kubeadm_at_the_version_with_the_api_address_in_its_certificate(
    plan: PlanResult,
) -> None:
    kcp = the(plan, "KubeadmControlPlane")["spec"]
    assert kcp["replicas"] == 1
    assert kcp["version"] == "v1.34.1"
    # as before the ClusterIP fix: a changed kubeadmConfigSpec would roll every live control-plane VM
    assert kcp["kubeadmConfigSpec"] == {"clusterConfiguration": {"apiServer": {"certSANs": ["203.0.113.20"]}}}
    assert kcp["rollout"] == {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}
    assert kcp["machineTemplate"]["spec"]["deletion"] == {"nodeDrainTimeoutSeconds": 600}
    template = kcp["machineTemplate"]["spec"]["infrastructureRef"]
    names = {t["metadata"]["name"] for t in objects(plan, "KubevirtMachineTemplate")}
    assert template["kind"] == "KubevirtMachineTemplate"
    assert template["name"] in names
    assert template["name"].startswith("ml-control-plane-")


def test_a_gpu_pool_is_a_machine_deployment_that_replaces_in_place(plan: PlanResult) -> None:
    deployment = the(plan, "MachineDeployment")
    assert deployment["metadata"]["name"] == "ml-gpu"
    spec = deployment["spec"]
    assert spec["clusterName"] == "ml"
    assert spec["replicas"] == 2
    # no surge: a third worker would need two more H100s
    assert spec["rollout"] == {
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
    }
    assert spec["selector"] == {"matchLabels": {f"{CAPI}/cluster-name": "ml", "gpucell.io/worker-pool": "gpu"}}
    assert spec["template"]["metadata"]["labels"] == spec["selector"]["matchLabels"]
    template = spec["template"]["spec"]
    assert template["version"] == "v1.34.1"
    bootstrap = the(plan, "KubeadmConfigTemplate")
    assert template["bootstrap"]["configRef"] == {
        "apiGroup": "bootstrap.cluster.x-k8s.io",
        "kind": "KubeadmConfigTemplate",
        "name": bootstrap["metadata"]["name"],
    }
    assert bootstrap["spec"]["template"]["spec"]["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"] == [
        {"name": "node-labels", "value": "gpucell.io/worker-pool=gpu"}
    ]
    assert template["infrastructureRef"]["name"].startswith("ml-gpu-")
    health = the(plan, "MachineHealthCheck")["spec"]
    assert health["selector"] == spec["selector"]
    assert health["checks"] == {
        "nodeStartupTimeoutSeconds": 1800,
        "unhealthyNodeConditions": [
            {"type": "Ready", "status": "Unknown", "timeoutSeconds": 300},
            {"type": "Ready", "status": "False", "timeoutSeconds": 300},
        ],
    }


def test_a_cpu_pool_surges_by_one() -> None:
    pool = {"replicas": 3, "cpu": {"cores": 4}, "memoryGib": 16}
    spec = region(workerPools={"cpu": pool}).tenants["acme"].tenant_clusters["ml"]
    manifest = tc.machine_deployment_manifest(
        "acme", "ml", "cpu", spec.worker_pools["cpu"], spec, machine_template="m", bootstrap_template="b"
    )
    assert manifest["spec"]["rollout"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}


def test_a_worker_vm_carries_its_gpus_on_the_pod_network_by_bridge_and_waits_for_capk_on_a_drain() -> None:
    template = machine_template(region())
    assert template["metadata"]["namespace"] == "tenant-acme"
    assert template["metadata"]["labels"]["gpucell.io/worker-pool"] == "gpu"
    spec = template["spec"]
    assert spec["runStrategy"] == "Always"
    assert spec["dataVolumeTemplates"][0]["metadata"]["name"] == "root"
    assert spec["dataVolumeTemplates"][0]["spec"] == {
        "source": {"registry": {"url": IMAGE}},
        "storage": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "200Gi"}}},
    }
    vm = spec["template"]["spec"]
    assert vm["evictionStrategy"] == "External"
    assert vm["volumes"] == [{"name": "root", "dataVolume": {"name": "root"}}]
    assert vm["networks"] == [{"name": "default", "pod": {}}]
    devices = vm["domain"]["devices"]
    assert devices["gpus"] == [{"name": "gpu0", "deviceName": H100}, {"name": "gpu1", "deviceName": H100}]
    assert "hostDevices" not in devices  # part of an HGX board: no NVSwitch
    assert devices["interfaces"] == [{"name": "default", "bridge": {}}]
    assert devices["networkInterfaceMultiqueue"] is True
    assert devices["disks"] == [{"name": "root", "disk": {"bus": "virtio"}, "bootOrder": 1}]  # CAPK adds cloud-init
    assert vm["domain"]["memory"] == {"guest": "128Gi", "hugepages": {"pageSize": "1Gi"}}
    assert vm["domain"]["resources"]["limits"] == {"cpu": "16", "memory": "128Gi"}
    terms = vm["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"] == [
        {"key": "gpucell.io/pool", "operator": "In", "values": ["h100-vm"]},
        {"key": "nvidia.com/gpu.workload.config", "operator": "In", "values": ["vm-passthrough"]},
    ]
    assert vm["tolerations"] == [
        {"key": "gpucell.io/dedicated", "operator": "Equal", "value": "vm", "effect": "NoSchedule"}
    ]


def test_a_control_plane_vm_runs_on_the_cpu_pools_without_gpus() -> None:
    vm = machine_template(region(), pool=None)["spec"]["template"]["spec"]
    assert "gpus" not in vm["domain"]["devices"]
    assert vm["domain"]["cpu"] == {"cores": 2, "sockets": 1, "threads": 1}
    assert vm["domain"]["memory"] == {"guest": "8Gi"}
    terms = vm["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "gpucell.io/pool", "operator": "In", "values": ["cpu"]}]}]


def test_cilium_and_the_gpu_operator_go_in_through_caaph_with_nvlink_off_for_part_of_a_board(plan: PlanResult) -> None:
    proxies = {p["metadata"]["name"]: p["spec"] for p in objects(plan, "HelmChartProxy")}
    assert set(proxies) == {"ml-cilium", "ml-gpu-operator"}
    cilium, operator = proxies["ml-cilium"], proxies["ml-gpu-operator"]
    assert cilium["clusterSelector"] == {"matchLabels": {"gpucell.io/tenant-cluster": "ml"}}
    assert (cilium["repoURL"], cilium["chartName"], cilium["version"], cilium["namespace"]) == (
        "https://helm.cilium.io/",
        "cilium",
        "1.20.0",
        "kube-system",
    )
    assert yaml.safe_load(cilium["valuesTemplate"]) == {"ipam": {"mode": "kubernetes"}}
    assert (operator["repoURL"], operator["chartName"], operator["version"]) == (
        "https://helm.ngc.nvidia.com/nvidia",
        "gpu-operator",
        "v26.7.0",
    )
    values = yaml.safe_load(operator["valuesTemplate"])
    assert values["driver"] == {"kernelModuleConfig": {"name": tc.NVLINK_CONFIG_MAP}}
    assert values["extraObjects"][0]["data"] == {"nvidia.conf": "NVreg_NvLinkDisable=1\n"}
    assert {"name": "CONTAINERD_SOCKET", "value": "/run/containerd/containerd.sock"} in values["toolkit"]["env"]
    assert all(p["reconcileStrategy"] == "Continuous" and "{{" not in p["valuesTemplate"] for p in proxies.values())


def test_a_cluster_without_gpus_gets_no_gpu_operator() -> None:
    proxies = tc.addon_manifests("acme", "ml", cilium="1.20.0", gpu_operator=None)
    assert [p["metadata"]["name"] for p in proxies] == ["ml-cilium"]


def test_the_api_is_exposed_at_its_address_to_the_allowed_clients_only(plan: PlanResult) -> None:
    (service,) = [s for s in plan.of_type("kubernetes:core/v1:Service") if s.name == "lab-acme-ml-api"]
    inputs = service.inputs
    assert inputs["metadata"]["labels"]["gpucell.io/lb-pool"] == "acme-public"
    assert inputs["metadata"]["annotations"] == {"lbipam.cilium.io/ips": "203.0.113.20"}
    assert inputs["spec"] == {
        "type": "LoadBalancer",
        "selector": {f"{CAPI}/cluster-name": "ml", f"{CAPI}/role": "control-plane"},
        "ports": [{"name": "https", "protocol": "TCP", "port": 6443, "targetPort": 6443}],
        "externalTrafficPolicy": "Local",
        "allocateLoadBalancerNodePorts": False,
        "loadBalancerSourceRanges": ["198.51.100.0/24"],
    }
    policies = {p["metadata"]["name"]: p["spec"] for p in objects(plan, "CiliumNetworkPolicy")}
    assert policies["ml-api"]["ingress"] == [
        {"fromCIDRSet": [{"cidr": "198.51.100.0/24"}], "toPorts": [{"ports": [{"port": "6443", "protocol": "TCP"}]}]}
    ]
    controllers = policies["ml-cluster-api"]
    assert controllers["endpointSelector"] == {"matchLabels": {f"{CAPI}/cluster-name": "ml"}}
    api, ssh = controllers["ingress"]
    assert api["fromEndpoints"][0]["matchExpressions"][0]["values"] == list(cluster_api.PROVIDER_NAMESPACES)
    assert api["toPorts"] == [{"ports": [{"port": "6443", "protocol": "TCP"}]}]
    assert ssh["fromEndpoints"][0]["matchExpressions"][0]["values"] == ["capk-system"]
    assert ssh["toPorts"] == [{"ports": [{"port": "22", "protocol": "TCP"}]}]


def test_the_services_and_policies_of_a_cluster_are_the_names_its_tenant_reserves_for_it(plan: PlanResult) -> None:
    rendered = {
        o["metadata"]["name"]
        for o in [
            *objects(plan, "CiliumNetworkPolicy"),
            *(r.inputs for r in plan.of_type("kubernetes:core/v1:Service")),
        ]
        if o["metadata"]["labels"].get("gpucell.io/tenant-cluster") == "ml"
    }
    # CAPK creates ml-lb itself; the others are gpucell's
    assert rendered | {"ml-lb"} == set(namespace_names("ml")) == {"ml-lb", "ml-api", "ml-cluster-api"}


def test_a_cluster_ip_api_has_no_service_or_policy_of_its_own() -> None:
    spec = region(apiServer={}).tenants["acme"].tenant_clusters["ml"]
    assert tc.api_service_manifest("acme", "ml", spec, None) is None
    assert tc.api_policy_manifest("acme", "ml", spec) is None
    registration = {"nodeRegistration": {"criSocket": "unix:///var/run/containerd/containerd.sock"}}
    assert tc.control_plane_manifest("acme", "ml", spec, "t")["spec"]["kubeadmConfigSpec"] == {
        "initConfiguration": registration,
        "joinConfiguration": registration,
    }


# -- the component: wiring, lifecycle, kubeconfig -----------------------------------------------------------------


def test_the_cluster_its_infrastructure_and_control_plane_are_protected_the_rest_converges(plan: PlanResult) -> None:
    protected = {r.name for r in plan.resources if r.options.get("protect")}
    assert {"lab-acme-ml-cluster", "lab-acme-ml-infra", "lab-acme-ml-control-plane"} <= protected
    for name in (
        "lab-acme-ml-gpu",
        "lab-acme-ml-gpu-machines",
        "lab-acme-ml-control-plane-machines",
        "lab-acme-ml-cilium",
    ):
        assert name not in protected
    assert plan.named("lab-acme-ml-cluster").options["customTimeouts"] == {"create": "40m", "delete": "30m"}


OWNED = (  # what Cluster API sets the Cluster as the owner of, and deletes with it
    "lab-acme-ml-infra",
    "lab-acme-ml-control-plane",
    "lab-acme-ml-control-plane-machines",
    "lab-acme-ml-gpu",
    "lab-acme-ml-gpu-machines",
    "lab-acme-ml-gpu-bootstrap",
    "lab-acme-ml-gpu-health",
)
UNOWNED = ("lab-acme-ml-cilium", "lab-acme-ml-gpu-operator", "lab-acme-ml-cluster-api-policy")


def test_removing_a_protected_cluster_deletes_none_of_its_parts(plan: PlanResult) -> None:
    cluster = plan.named("lab-acme-ml-cluster")
    # Cluster API's objects go with the Cluster, so Pulumi never deletes a MachineDeployment (its workers) or the
    # KubevirtCluster (the API's Service) on its own while a protected Cluster stays
    assert {name: plan.named(name).options.get("deletedWith") for name in OWNED} == dict.fromkeys(OWNED, cluster.urn)
    # the add-ons and the policy admitting Cluster API are the Cluster's dependencies: deleted after it (never, when
    # it is protected), so CAAPH uninstalls no Cilium and Cluster API keeps reaching the API while the Cluster goes
    unowned = {plan.named(name).urn for name in UNOWNED}
    assert unowned <= set(cluster.dependencies)
    assert not any(plan.named(name).options for name in UNOWNED)
    # the API's Service comes once the control plane is up (its await wants an endpoint) and stays with the Cluster
    for name in ("lab-acme-ml-api", "lab-acme-ml-api-policy"):
        assert cluster.urn in plan.named(name).dependencies
        assert plan.named(name).options == {"deletedWith": cluster.urn}


def test_a_retained_cluster_keeps_its_add_ons_and_policies_and_a_deleted_one_releases_its_address() -> None:
    retained = deploy(region(removalPolicy="retain"))
    assert retained.named("lab-acme-ml-cluster").options["retainOnDelete"] is True
    assert {retained.named(name).options.get("retainOnDelete") for name in UNOWNED} == {True}
    deleted = deploy(region(removalPolicy="delete"))
    assert deleted.named("lab-acme-ml-api").options == {}  # the LoadBalancer address goes with the cluster
    assert deleted.named("lab-acme-ml-gpu").options == {"deletedWith": deleted.named("lab-acme-ml-cluster").urn}


def test_every_object_comes_after_the_tenant_and_the_providers(plan: PlanResult) -> None:
    providers = {r.urn for r in plan.resources if r.type.startswith("kubernetes:operator.cluster.x-k8s.io")}
    assert len(providers) == 5
    namespace = plan.named("lab-acme-namespace").urn
    kubevirt = plan.named("lab-kubevirt-kubevirt").urn
    component = plan.named("lab-acme-ml")
    assert component.type == "gpucell:index:TenantCluster"
    assert component.parent == plan.named("lab-acme").urn
    for child in plan.children(component):
        assert providers <= set(child.dependencies), child.name
        assert {namespace, kubevirt} <= set(child.dependencies), child.name
    deployment = plan.named("lab-acme-ml-gpu")
    assert {plan.named("lab-acme-ml-gpu-machines").urn, plan.named("lab-acme-ml-gpu-bootstrap").urn} <= set(
        deployment.dependencies
    )


def test_the_kubeconfig_is_a_secret_pointing_at_the_api_address(plan: PlanResult) -> None:
    assert plan.outputs["kubeconfig"] == SECRET
    raw = plan.outputs["kubeconfigText"]
    assert yaml.safe_load(raw)["clusters"][0]["cluster"]["server"] == "https://203.0.113.20:6443"


def test_a_read_of_the_kubeconfig_secret_is_answered_as_cluster_api_writes_it() -> None:
    outputs = provider_outputs()
    read = MockResourceArgs(
        typ="kubernetes:core/v1:Secret", name="x", inputs={}, provider=None, resource_id="tenant-acme/ml-kubeconfig"
    )
    text = base64.b64decode(outputs(read)["data"]["value"]).decode()
    assert text == fake_cluster_api_kubeconfig("ml")
    loaded = yaml.safe_load(text)
    assert loaded["users"] == [
        {"name": "ml-admin", "user": {"client-certificate-data": "RkFLRS1DRVJU", "client-key-data": "RkFLRS1LRVk="}}
    ]
    assert loaded["clusters"][0]["cluster"]["server"] == "https://10.43.0.100:6443"


def _encoded(text: str) -> dict[str, str]:
    return {"value": base64.b64encode(text.encode()).decode()}


SECRET_NAME = "tenant-acme/ml-kubeconfig"
EXPOSED = tc.KubeconfigRead("ml", "tenant-acme", "203.0.113.20", IPv4Network("10.43.0.0/16"))
INTERNAL = tc.KubeconfigRead("ml", "tenant-acme", None, IPv4Network("10.43.0.0/16"))
EMPTIED = (
    "; the stack output leaves this cluster's kubeconfig empty until Cluster API writes one again (delete the "
    "Secret and its KubeadmControlPlane recreates it)"
)
DROPPED = (
    "; the stack output holds only its server, CA data and client certificate and key (Cluster API writes nothing "
    "else: a tenant member rewrote the Secret, or delete it and its KubeadmControlPlane recreates it)"
)


@pytest.fixture
def warned(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    lines: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *_, **__: lines.append(message))
    return lines


def forged(**changes: Any) -> str:
    """Cluster API's kubeconfig of ``ml`` with ``changes`` (``user``, ``cluster``, ``top``: keys to merge there)."""
    loaded = yaml.safe_load(fake_cluster_api_kubeconfig("ml"))
    loaded["users"][0]["user"].update(changes.get("user", {}))
    loaded["clusters"][0]["cluster"].update(changes.get("cluster", {}))
    loaded.update(changes.get("top", {}))
    return str(yaml.safe_dump(loaded))


def test_a_clean_kubeconfig_is_exported_as_cluster_api_wrote_it_without_a_warning(warned: list[str]) -> None:
    clean = fake_cluster_api_kubeconfig("ml")
    assert INTERNAL.exported(_encoded(clean)) == clean
    exposed = yaml.safe_load(EXPOSED.exported(_encoded(clean)))
    wanted = yaml.safe_load(clean)
    wanted["clusters"][0]["cluster"]["server"] = "https://203.0.113.20:6443"
    assert exposed == wanted
    assert warned == []


@pytest.mark.parametrize(
    ("changes", "dropped"),
    [
        ({"user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "sh"}}}, "users[0].user.exec"),
        (
            {"user": {"auth-provider": {"name": "oidc", "config": {"cmd-path": "/tmp/x"}}}},
            "users[0].user.auth-provider",
        ),
        ({"user": {"tokenFile": "/home/operator/.ssh/id_ed25519"}}, "users[0].user.tokenFile"),
        ({"user": {"token": "abc"}}, "users[0].user.token"),
        ({"user": {"client-certificate": "/etc/passwd"}}, "users[0].user.client-certificate"),
        ({"user": {"as": "system:admin"}}, "users[0].user.as"),
        ({"cluster": {"insecure-skip-tls-verify": True}}, "clusters[0].cluster.insecure-skip-tls-verify"),
        ({"cluster": {"proxy-url": "socks5://203.0.113.9:1080"}}, "clusters[0].cluster.proxy-url"),
        ({"cluster": {"tls-server-name": "evil.example"}}, "clusters[0].cluster.tls-server-name"),
        ({"cluster": {"certificate-authority": "/tmp/ca"}}, "clusters[0].cluster.certificate-authority"),
        ({"top": {"extensions": [{"name": "x", "extension": {}}]}}, "extensions"),
        # a key client-go does not know is named as such: the tenant's text never reaches the operator's log
        ({"user": {"=cmd|' /C calc'!A0\nforged line": 1}}, "users[0].user.<unknown key>"),
    ],
)
def test_a_forged_kubeconfig_is_exported_without_what_can_run_code_or_redirect(
    changes: dict[str, Any], dropped: str, warned: list[str]
) -> None:
    """A tenant member may rewrite <c>-kubeconfig: what the operator's kubectl would run or follow is dropped, the
    rest is Cluster API's kubeconfig as written."""
    exported = INTERNAL.exported(_encoded(forged(**changes)))
    assert exported == fake_cluster_api_kubeconfig("ml")
    assert warned == [f"tenant cluster kubeconfig Secret {SECRET_NAME}: dropped {dropped}{DROPPED}"]


def test_every_forged_part_is_named_in_one_warning_line(warned: list[str]) -> None:
    text = forged(
        user={"exec": {"command": "sh"}, "auth-provider": {"name": "gcp"}, "tokenFile": "/x"},
        cluster={"insecure-skip-tls-verify": True, "server": "https://evil.example:6443"},
    )
    exported = yaml.safe_load(EXPOSED.exported(_encoded(text)))
    assert exported["users"][0]["user"] == {
        "client-certificate-data": "RkFLRS1DRVJU",
        "client-key-data": "RkFLRS1LRVk=",
    }
    assert exported["clusters"][0]["cluster"] == {
        "certificate-authority-data": "RkFLRS1DQQ==",
        "server": "https://203.0.113.20:6443",  # gpucell's address, whatever the Secret says
    }
    assert warned == [
        f"tenant cluster kubeconfig Secret {SECRET_NAME}: dropped clusters[0].cluster.insecure-skip-tls-verify, "
        f"users[0].user.auth-provider, users[0].user.exec, users[0].user.tokenFile{DROPPED}"
    ]


def test_a_kubeconfig_with_nothing_safe_to_export_empties_the_output(warned: list[str]) -> None:
    only_exec = yaml.safe_load(forged(user={"exec": {"command": "sh"}}))
    only_exec["users"][0]["user"] = {"exec": {"command": "sh"}}
    assert INTERNAL.exported(_encoded(yaml.safe_dump(only_exec))) == ""
    assert warned == [
        f"tenant cluster kubeconfig Secret {SECRET_NAME}: it has no client-certificate-data and client-key-data, the "
        f"only credentials gpucell exports (Cluster API writes them); it held users[0].user.exec{EMPTIED}"
    ]


@pytest.mark.parametrize(
    "server",
    [
        "https://evil.example:6443",  # a host of the tenant's choosing, resolved on the operator's machine
        "https://10.44.0.1:6443",  # outside the cell's service range
        "https://10.43.0.100:443",
        "http://10.43.0.100:6443",
        "https://user:pass@10.43.0.100:6443",
        "https://10.43.0.100:6443/api?x=1",
        "https://[fd00::1]:6443",
        7,
    ],
)
def test_a_clusterip_api_kubeconfig_naming_another_server_is_not_exported(server: Any, warned: list[str]) -> None:
    """Without an exposed address gpucell cannot set the server (the <c>-lb ClusterIP is CAPK's): the Secret's must
    be a ClusterIP of the cell, or the operator's kubectl would follow the tenant anywhere."""
    assert INTERNAL.exported(_encoded(forged(cluster={"server": server}))) == ""
    assert warned == [
        f"tenant cluster kubeconfig Secret {SECRET_NAME}: its server is not https://<a ClusterIP in "
        f"10.43.0.0/16>:6443, where Cluster API points it (the ml-lb Service){EMPTIED}"
    ]


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({}, "it has no 'value' key (Cluster API writes it there)"),
        ({"value": "not base64!"}, "its 'value' is not base64 of a text"),
        # YAML whose parser error would quote the key line: the warning must not
        (_encoded("users:\n- user:\n    client-key-data: TOPSECRET\n   x: [\n"), "its 'value' is not YAML"),
        (_encoded("[" * 5000 + "]" * 5000), "its 'value' is not YAML"),  # nested past the parser's recursion limit
        (_encoded("clusters: []\n"), "its 'value' is not a kubeconfig with one cluster"),
        (
            _encoded(forged(top={"users": []})),
            "its 'value' is not a kubeconfig with one user",
        ),
        (
            _encoded(forged(cluster={"certificate-authority-data": "not base64!"})),
            "it has no certificate-authority-data (Cluster API writes it)",
        ),
    ],
)
def test_a_secret_without_a_kubeconfig_empties_the_output_with_a_warning_and_no_byte_of_it(
    data: dict[str, str], problem: str, warned: list[str]
) -> None:
    """Tenants may write their namespace's Secrets: a broken <c>-kubeconfig must not stop the cell's pulumi up."""
    assert EXPOSED.exported(data) == ""
    assert warned == [f"tenant cluster kubeconfig Secret {SECRET_NAME}: {problem}{EMPTIED}"]


def test_the_stack_output_drops_an_exec_plugin_of_the_secret_the_cluster_answers(
    warned: list[str],
) -> None:
    """Through the program: the Secret read answers a forged kubeconfig, the exported one has no exec stanza."""
    cell_spec = region()
    answer = provider_outputs([cell_spec])
    text = forged(user={"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "curl"}})

    def computed(args: MockResourceArgs) -> dict[str, Any]:
        if args.typ == "kubernetes:core/v1:Secret" and str(args.resource_id).endswith("/ml-kubeconfig"):
            return {"data": _encoded(text)}
        return answer(args)

    def program() -> None:
        build_cells()

    stack = {"gpucell:regions": {"lab": region_config()}, "gpucell:sshPrivateKey": "key"}
    plan = run_program(program, config=stack, secret_keys=["gpucell:sshPrivateKey"], computed=computed)
    assert plan.outputs["labTenantClusterKubeconfigs"] == SECRET
    assert warned == [f"tenant cluster kubeconfig Secret {SECRET_NAME}: dropped users[0].user.exec{DROPPED}"]


def test_a_first_preview_plans_everything_without_reading_the_kubeconfig() -> None:
    plan = deploy(preview=True)
    assert len(objects(plan, "KubevirtMachineTemplate")) == 2
    assert plan.outputs["kubeconfig"] == UNKNOWN  # the engine skips a read whose ID is not known yet


def deploy_more(name: str, spec: dict[str, Any]) -> PlanResult:
    """:func:`deploy`'s cell and tenant, plus tenant cluster ``name`` built from Python (not in acme's spec)."""
    cell_spec = region()

    def program() -> None:
        lab = RegionalCell("lab", RegionalCellArgs(cell=cell_spec, ssh_private_key=pulumi.Output.secret("k")))
        tenant = Tenant("lab-acme", TenantArgs.from_cell("acme", cell_spec.tenants["acme"], lab))
        assert lab.cluster_api is not None
        more = TenantClusterSpec.model_validate(spec)
        tc.TenantCluster(f"lab-acme-{name}", tc.TenantClusterArgs.from_tenant(name, more, tenant, lab.cluster_api))

    return run_program(program, computed=provider_outputs([cell_spec]))


def test_a_cluster_its_tenants_spec_does_not_declare_is_admitted_with_the_tenant() -> None:
    cpu_only = cluster_spec(apiServer={"type": "ClusterIP"}, workerPools={"cpu": {"replicas": 1}})
    plan = deploy_more("small", cpu_only)
    assert plan.named("lab-acme-small-cluster").inputs["metadata"]["namespace"] == "tenant-acme"
    waits = set(plan.named("lab-acme-small-cluster").dependencies)
    assert {plan.named("lab-acme-namespace").urn, plan.named("lab-cluster-api-coreprovider").urn} <= waits
    big = cluster_spec(apiServer={"type": "ClusterIP"})
    big["workerPools"]["gpu"]["replicas"] = 3  # 3 x 2 H100s beside ml's 2 x 2: 10, quota 8
    with pytest.raises(ConfigError) as caught:
        deploy_more("big", big)
    assert caught.value.lines == [
        "tenants.acme.tenantClusters.big.workerPools.gpu: needs 6 nvidia.com/GH100_H100_SXM5_80GB (10 with the "
        "tenant's other workloads), tenant quota.gpus allows 8"
    ]


def test_the_cell_installs_cluster_api_only_with_tenant_clusters() -> None:
    plan = deploy()
    assert plan.named("lab-cluster-api").type == "gpucell:index:ClusterApi"
    config = region_config()
    del config["tenants"]["acme"]["tenantClusters"]
    spec = CellSpec.model_validate(config)

    def program() -> None:
        RegionalCell("lab", RegionalCellArgs(cell=spec, ssh_private_key=pulumi.Output.secret("k")))

    bare = run_program(program, computed=provider_outputs([spec]))
    assert not [r for r in bare.resources if r.type == "gpucell:index:ClusterApi"]


# -- the engine ------------------------------------------------------------------------------------------------


def test_the_providers_are_pinned_and_waited_for(plan: PlanResult) -> None:
    found = {r.inputs["kind"]: r.masked_inputs() for r in plan.resources if r.type.startswith("kubernetes:operator.")}
    assert {
        kind: (o["metadata"]["namespace"], o["metadata"]["name"], o["spec"]["version"]) for kind, o in found.items()
    } == {
        "CoreProvider": ("capi-system", "cluster-api", "v1.14.0"),
        "BootstrapProvider": ("capi-kubeadm-bootstrap-system", "kubeadm", "v1.14.0"),
        "ControlPlaneProvider": ("capi-kubeadm-control-plane-system", "kubeadm", "v1.14.0"),
        "InfrastructureProvider": ("capk-system", "kubevirt", "v0.11.2"),
        "AddonProvider": ("caaph-system", "helm", "v0.6.4"),
    }
    assert all(o["metadata"]["annotations"] == {"pulumi.com/waitFor": "condition=Ready"} for o in found.values())
    patch = yaml.safe_load(found["InfrastructureProvider"]["spec"]["patches"][0]["patch"])
    pod = patch["spec"]["template"]["spec"]
    assert pod["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    assert pod["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    core = plan.named("lab-cluster-api-coreprovider").urn
    assert core in plan.named("lab-cluster-api-infrastructureprovider").dependencies
    release = plan.named("lab-cluster-api-operator")
    assert release.inputs["namespace"] == "capi-operator-system"
    assert release.inputs["values"]["image"]["manager"] == {
        "repository": "registry.k8s.io/capi-operator/cluster-api-operator",
        "tag": "v0.28.0",
    }
    assert plan.named("lab-cert-manager-cert-manager").urn in release.dependencies  # its webhook issues certificates
    assert release.options.get("protect") is True


def test_a_release_pinned_without_its_v_is_installed_by_its_release_tag() -> None:
    versions = Versions(clusterApi="1.14.0", capk="0.11.2", caaph="0.6.4")
    args = cluster_api.ClusterApiArgs.from_versions(cast(Cluster, None), versions)
    assert [cluster_api.provider_manifest(p, args.version_of(p))["spec"]["version"] for p in cluster_api.PROVIDERS] == [
        "v1.14.0",
        "v1.14.0",
        "v1.14.0",
        "v0.11.2",
        "v0.6.4",
    ]


def test_the_provider_namespaces_are_platform_namespaces_not_exempt_from_pod_security() -> None:
    from gpucell.k3s.hardening import POD_SECURITY_EXEMPT_NAMESPACES
    from gpucell.spec.tenancy import CLUSTER_API_NAMESPACES, SYSTEM_NAMESPACES

    assert {*cluster_api.PROVIDER_NAMESPACES, cluster_api.OPERATOR_NAMESPACE} == set(CLUSTER_API_NAMESPACES)
    assert set(CLUSTER_API_NAMESPACES) <= SYSTEM_NAMESPACES
    assert not set(CLUSTER_API_NAMESPACES) & set(POD_SECURITY_EXEMPT_NAMESPACES)


# -- day 2 ------------------------------------------------------------------------------------------------------


def _workers(spec: CellSpec) -> tuple[str, dict[str, Any]]:
    plan = deploy(spec)
    deployment = the(plan, "MachineDeployment")
    return deployment["spec"]["template"]["spec"]["infrastructureRef"]["name"], deployment


def test_scaling_a_pool_changes_its_replicas_and_nothing_else() -> None:
    name, before = _workers(region())
    scaled = copy.deepcopy(cluster_spec())
    scaled["workerPools"]["gpu"]["replicas"] = 3
    config = region_config(**scaled)
    config["tenants"]["acme"]["quota"]["gpus"] = {H100: 8}
    config["tenants"]["acme"]["quota"]["cpuMillicores"] = 100_000
    again, after = _workers(CellSpec.model_validate(config))
    assert again == name
    assert after["spec"]["replicas"] == 3
    assert {**after["spec"], "replicas": 2} == before["spec"]


def test_other_gpus_are_a_new_machine_template_the_deployment_rolls_to() -> None:
    name, _ = _workers(region())
    changed = cluster_spec()
    changed["workerPools"]["gpu"]["gpus"] = 4
    config = region_config(**changed)
    config["tenants"]["acme"]["quota"]["gpus"] = {H100: 8}
    other, deployment = _workers(CellSpec.model_validate(config))
    assert other != name
    assert other.startswith("ml-gpu-")
    plan = deploy(CellSpec.model_validate(config))
    template = the(plan, "MachineDeployment")["spec"]["template"]["spec"]["infrastructureRef"]["name"]
    assert template == other
    assert deployment["spec"]["replicas"] == 2


def test_a_version_bump_upgrades_the_control_plane_and_each_pool_onto_new_templates() -> None:
    old = deploy()
    bumped = deploy(region(kubernetesVersion="v1.35.0", image={"registry": IMAGE.replace("v1.34.1", "v1.35.0")}))
    assert the(bumped, "KubeadmControlPlane")["spec"]["version"] == "v1.35.0"
    assert the(bumped, "MachineDeployment")["spec"]["template"]["spec"]["version"] == "v1.35.0"
    names = {t["metadata"]["name"] for t in objects(old, "KubevirtMachineTemplate")}
    assert not names & {t["metadata"]["name"] for t in objects(bumped, "KubevirtMachineTemplate")}
    # same Pulumi names: the templates are replaced, the KubeadmControlPlane and MachineDeployment updated
    assert {r.name for r in old.resources} == {r.name for r in bumped.resources}


# -- CAPK's schema: what survives ----------------------------------------------------------------------------------


def _capk_vm_spec_schema() -> dict[str, Any]:
    crd = yaml.safe_load(
        (
            UPSTREAM / "cluster-api-provider-kubevirt" / "infrastructure.cluster.x-k8s.io_kubevirtmachinetemplates.yaml"
        ).read_text()
    )
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec["properties"]["template"]["properties"]["spec"]["properties"]["virtualMachineTemplate"]["properties"][
        "spec"
    ]


@pytest.mark.parametrize("pool", ["gpu", None])
def test_the_rendered_vm_template_validates_strictly_against_capks_kubevirt_v1_7_schema(pool: str | None) -> None:
    import jsonschema

    schema = strict_schema(_capk_vm_spec_schema())
    template = machine_template(region(), pool)
    errors = [e.message for e in jsonschema.Draft4Validator(schema).iter_errors(template["spec"])]
    assert errors == []
    broken = copy.deepcopy(template["spec"])
    broken["template"]["spec"]["domain"]["rebootPolicy"] = "Terminate"  # a KubeVirt v1.9 field
    errors = [e.message for e in jsonschema.Draft4Validator(schema).iter_errors(broken)]
    assert errors == ["Additional properties are not allowed ('rebootPolicy' was unexpected)"]


def _kubevirt_v1_9_minus_capk() -> set[str]:
    definitions = json.loads((UPSTREAM / "kubevirt" / "swagger.json").read_text())["definitions"]

    def resolve(node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            node = definitions[node["$ref"].rsplit("/", 1)[-1]]
        return node

    missing: set[str] = set()

    def walk(theirs: dict[str, Any], ours: dict[str, Any], path: str, depth: int) -> None:
        theirs = resolve(theirs)
        if depth > 12 or ours.get("x-kubernetes-preserve-unknown-fields"):
            return
        for key, sub in (theirs.get("properties") or {}).items():
            if key not in (ours.get("properties") or {}):
                missing.add(f"{path}.{key}")
                continue
            found, mine = resolve(sub), ours["properties"][key]
            if "items" in found and "items" in mine:
                walk(found["items"], mine["items"], f"{path}.{key}[]", depth + 1)
            else:
                walk(found, mine, f"{path}.{key}", depth + 1)

    walk({"$ref": "#/definitions/v1.VirtualMachineSpec"}, _capk_vm_spec_schema(), "spec", 0)
    return missing


def test_the_fields_capk_drops_are_exactly_kubevirt_v1_9s_that_its_crd_lacks() -> None:
    assert _kubevirt_v1_9_minus_capk() == set(cluster_api_facts.CAPK_DROPPED_VM_FIELDS)
    assert cluster_api_facts.capk_dropped_fields(machine_template(region())["spec"]) == []


def test_the_release_facts_cite_the_commits_their_tags_point_at() -> None:
    """``git rev-parse <tag>^{commit}`` in each repository: kubernetes-sigs/cluster-api-provider-kubevirt v0.11.2,
    kubernetes-sigs/cluster-api-operator v0.28.0, kubernetes-sigs/cluster-api-addon-provider-helm v0.6.4 (annotated
    tag object e268739e, commit "Merge pull request #544", 2026-04-27; 8c581411, cited before, is a later commit of
    main, "Restrict Helm repository URL schemes (#585)", in no tag)."""
    source = " ".join(inspect.getsource(cluster_api_facts).split())
    for tag, commit in (
        ("v0.11.2", "2c2bb5beb8ef7265d2a0694e9fa75b73354b9484"),
        ("v0.28.0", "d32c1c2a0bd227e2a49e8c3db9c7ef6b131ec11f"),
        ("v0.6.4", "825662962a26dc339f3871184c91ed4bd2f83a4f"),
    ):
        assert f"{tag} ({commit[:8]})" in source
    assert "8c581411" not in source


def test_a_template_that_needs_a_field_capk_drops_is_refused_before_anything_is_registered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = tc._domain

    def domain_with_reboot_policy(*args: Any) -> dict[str, Any]:
        return {**real(*args), "rebootPolicy": "Terminate"}

    monkeypatch.setattr(tc, "_domain", domain_with_reboot_policy)
    with pytest.raises(ConfigError) as caught:
        deploy()
    assert caught.value.lines == [
        "tenants.acme.tenantClusters.ml.controlPlane: its VMs would set spec.template.spec.domain.rebootPolicy, which "
        "CAPK's KubevirtMachineTemplate (KubeVirt v1.7.0 API) does not carry: the API server would drop it without a "
        "word; leave it out or pin a CAPK release built against a newer KubeVirt API"
    ]


# -- conformance -----------------------------------------------------------------------------------------------


def test_every_object_passes_the_upstream_crds(plan: PlanResult) -> None:
    for kind in TYPES:
        for obj in objects(plan, kind):
            assert violations(obj) == [], (kind, obj["metadata"]["name"])


def test_the_default_cluster_ip_api_server_plans_a_valid_control_plane() -> None:
    """The default API server (``ClusterIP``) once rendered ``kubeadmConfigSpec: {}``, which Cluster API v1.14.0's
    v1beta2 schema refuses (``minProperties: 1``, controlplane.cluster.x-k8s.io_kubeadmcontrolplanes.yaml) and
    which only ``--check`` reported (issue 34)."""
    plan = deploy(region(apiServer={}))
    kcp = the(plan, "KubeadmControlPlane")
    assert set(kcp["spec"]["kubeadmConfigSpec"]) == {"initConfiguration", "joinConfiguration"}
    for kind in TYPES:
        for obj in objects(plan, kind):
            assert violations(obj) == [], (kind, obj["metadata"]["name"])
            if obj["apiVersion"].endswith(".x-k8s.io/v1beta2"):
                assert cluster_api_facts.empty_structs(obj["spec"]) == [], (kind, obj["metadata"]["name"])
    assert [v.message for v in violations({**kcp, "spec": {**kcp["spec"], "kubeadmConfigSpec": {}}})] == [
        "{} should be non-empty"
    ]


def test_an_empty_struct_cluster_api_refuses_is_refused_by_the_plain_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    real = tc.control_plane_manifest

    def empty_kubeadm(*args: Any) -> dict[str, Any]:
        manifest = real(*args)
        manifest["spec"]["kubeadmConfigSpec"] = {}
        return manifest

    monkeypatch.setattr(tc, "control_plane_manifest", empty_kubeadm)
    with pytest.raises(ConfigError) as caught:
        deploy(region(apiServer={}))
    assert caught.value.lines == [
        "tenants.acme.tenantClusters.ml: gpucell would render KubeadmControlPlane ml-control-plane with "
        "spec.kubeadmConfigSpec empty, which Cluster API v1beta2 refuses (minProperties: 1); nothing was deployed: "
        "report it as a gpucell bug"
    ]


def _may_be_empty(schema: dict[str, Any], key: str = "") -> list[str]:
    """The keys under ``schema`` whose value the schema lets be ``{}``: maps, and structs with neither
    ``minProperties`` nor required fields."""
    found: list[str] = []
    if schema.get("type") == "object":
        if key and not schema.get("minProperties") and not schema.get("required"):
            found.append(key)
        for name, sub in schema.get("properties", {}).items():
            found += _may_be_empty(sub, name)
    if schema.get("type") == "array" and "items" in schema:
        found += _may_be_empty(schema["items"])
    return found


def test_the_keys_that_may_be_empty_are_the_cluster_api_crds_own() -> None:
    """Cluster API v1.14.0's v1beta2 CRDs of the kinds gpucell renders: every object but
    :data:`gpucell.catalog.cluster_api_facts.EMPTY_MAP_KEYS` refuses ``{}``."""
    may_be_empty: set[str] = set()
    for name in (
        "cluster.x-k8s.io_clusters.yaml",
        "cluster.x-k8s.io_machinedeployments.yaml",
        "cluster.x-k8s.io_machinehealthchecks.yaml",
        "controlplane.cluster.x-k8s.io_kubeadmcontrolplanes.yaml",
        "bootstrap.cluster.x-k8s.io_kubeadmconfigtemplates.yaml",
    ):
        crd = yaml.safe_load((UPSTREAM / "cluster-api" / name).read_text())
        (served,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta2"]
        spec = served["schema"]["openAPIV3Schema"]["properties"]["spec"]
        may_be_empty.update(_may_be_empty(spec))
    assert may_be_empty == cluster_api_facts.EMPTY_MAP_KEYS


def test_check_finds_no_problem_and_checks_the_helm_chart_proxy_values_against_their_charts(plan: PlanResult) -> None:
    report = check_region("lab", plan.resources, region(), SchemaStore(UPSTREAM), checkers=SCHEMA_CHECKERS)
    assert report.problems == []
    assert any("HelmChartProxy" in n.message for n in report.notices)  # shared/upstream lacks CAAPH's CRD
    broken = copy.deepcopy(plan.resources)
    for registration in broken:
        if registration.type == TYPES["HelmChartProxy"] and registration.name.endswith("-cilium"):
            registration.raw_inputs["spec"]["valuesTemplate"] = "ipam: {mod: kubernetes}\n"
    report = check_region("lab", broken, region(), SchemaStore(UPSTREAM), checkers=("helm-values",))
    assert [(p.path, p.message) for p in report.problems] == [
        ("spec.valuesTemplate.ipam.mod", "is not a value of chart cilium 1.20.0 (renamed or removed upstream?)")
    ]


def test_the_helm_chart_proxy_hand_schema_refuses_unknown_fields() -> None:
    proxy = tc.addon_manifests("acme", "ml", cilium="1.20.0", gpu_operator=None)[0]
    proxy["spec"]["valueTemplate"] = "typo"
    assert [v.path for v in violations(proxy)] == ["spec"]
