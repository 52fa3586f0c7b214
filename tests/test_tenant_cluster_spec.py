"""Tenant clusters in stack config: one line per mistake (exit 2), the quota and capacity they take, and what a
change of them does to the running cell (fingerprint, guard, review)."""

from __future__ import annotations

import copy
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucell.admission.tenant_cluster_admission import rollout_surge, usage
from gpucell.day2.disruption import Change, compare, fingerprint, judge, refused_together
from gpucell.errors import ConfigError
from gpucell.spec import CellSpec, StackSpec
from gpucell.stacks import cli
from gpucell.stacks.plan import render_capacity
from tests.conftest import REPO, prod_regions
from tests.test_tenant_cluster import H100, region, region_config

Edit = Callable[[dict[str, Any]], None]


def _ml(config: dict[str, Any]) -> dict[str, Any]:
    cluster: dict[str, Any] = config["tenants"]["acme"]["tenantClusters"]["ml"]
    return cluster


def _gpu(config: dict[str, Any]) -> dict[str, Any]:
    pool: dict[str, Any] = _ml(config)["workerPools"]["gpu"]
    return pool


def lines(edit: Edit) -> list[str]:
    config = region_config()
    edit(config)
    with pytest.raises(ConfigError) as caught:
        CellSpec.model_validate(config)
    return caught.value.lines


ML = "tenants.acme.tenantClusters.ml"
CASES: list[tuple[str, Edit, str]] = [
    (
        "a GPU model no pool offers",
        lambda c: _gpu(c).update(gpuModel="A100-SXM4-80GB"),
        f"{ML}.workerPools.gpu.gpuModel: the region has no vm-passthrough pool with A100-SXM4-80GB",
    ),
    (
        "a Kubernetes release Cluster API v1.14 does not build",
        lambda c: _ml(c).update(
            kubernetesVersion="v1.30.2", image={"registry": "docker://quay.io/capk/ubuntu-2404-container-disk:v1.30.2"}
        ),
        f"{ML}.kubernetesVersion: 'v1.30.2' is outside what Cluster API v1.14.0 builds: v1.31 to v1.36",
    ),
    (
        "more GPUs than the quota",
        lambda c: _gpu(c).update(replicas=5),
        f"{ML}.workerPools.gpu: needs 10 {H100} (10 with the tenant's other workloads), tenant quota.gpus allows 8",
    ),
    (
        "more CPU than the quota, rollout included",
        lambda c: _gpu(c).update(cpu={"cores": 64}),
        f"{ML}: brings the tenant's declared CPU to 132000 millicores (a tenant cluster's VMs during a rolling "
        "update: one more control-plane VM and one more VM per CPU worker pool), quota.cpuMillicores allows 100000",
    ),
    (
        "vGPU workers",
        lambda c: _gpu(c).update(vgpuProfile="L40S-12Q"),
        f"{ML}.workerPools.gpu.vgpuProfile: 'L40S-12Q': a vGPU guest needs NVIDIA's licensed vGPU guest driver and an "
        "NLS license token, which gpucell does not carry into tenant clusters (the GPU Operator it installs there "
        "runs the data-center driver); use whole GPUs from a vm-passthrough pool",
    ),
    (
        "DRA workers",
        lambda c: _gpu(c).update(gpuAllocation="dra"),
        f"{ML}.workerPools.gpu.gpuAllocation: 'dra': CAPK's VM template could carry the claim, but gpucell keeps a dra "
        "GPU from being promised to a VM and a container at once only by ordering VM claims after the pool's "
        "container claims in one pulumi up (docs/decisions/0017), and Cluster API creates worker VMs whenever it "
        "scales, rolls out or remediates; use a vm-passthrough pool",
    ),
    (
        "a tenant without internet egress",
        lambda c: c["tenants"]["acme"].update(egress="cluster"),
        f"{ML}: needs the tenant's egress to be internet (it is cluster): the cluster's nodes pull their images "
        "(Cilium from quay.io, the GPU Operator and its driver from nvcr.io, Kubernetes' own from registry.k8s.io, "
        "whose blobs come from cloud buckets no allow-list can name) from the tenant's namespace",
    ),
    (
        "a node image of another release",
        lambda c: _ml(c).update(kubernetesVersion="v1.35.0"),
        f"{ML}.image.registry: 'docker://quay.io/capk/ubuntu-2404-container-disk:v1.34.1' is tagged v1.34.1, but "
        "kubernetesVersion is v1.35.0: the node image carries kubeadm and the kubelet of one release; use the image "
        "of v1.35.0",
    ),
    (
        "a node image from an image catalog (rendered without the class its DataSource is picked by)",
        lambda c: _ml(c).update(image={"image": "os-images/ubuntu-2404"}),
        f"{ML}.image.image: 'os-images/ubuntu-2404': a tenant cluster's node image is imported for each machine; "
        "give registry (docker://...) or http (https://...)",
    ),
    (
        "a node image with import credentials (no Secret is made for the machines' disks)",
        lambda c: _ml(c).update(
            image={
                "registry": "docker://quay.io/capk/ubuntu-2404-container-disk:v1.34.1",
                "credentialsConfigKey": "sshPrivateKey",
            }
        ),
        f"{ML}.image.credentialsConfigKey: 'sshPrivateKey': a tenant cluster's node image is imported without "
        "credentials or a CA bundle (no Secret or ConfigMap is made for its machines' disks, whose import would wait "
        "for them); serve the node image from a registry or https server that needs neither",
    ),
    (
        "a pod network over the cell's",
        lambda c: _ml(c).update(network={"podCidr": "10.42.0.0/16"}),
        f"{ML}.network.podCidr: '10.42.0.0/16' overlaps the cell's network.podCidr 10.42.0.0/16; the tenant cluster's "
        "networks must stay clear of the cell's, which its VMs reach",
    ),
    (
        "a LoadBalancer API over the quota",
        lambda c: c["tenants"]["acme"]["quota"].update(loadBalancers=0),
        f"{ML}.apiServer.type: 'LoadBalancer' brings the tenant's LoadBalancer Services to 1, quota.loadBalancers "
        "allows 0; raise quota.loadBalancers",
    ),
    (
        "an API address outside the pool",
        lambda c: _ml(c)["apiServer"].update(address="203.0.113.99"),
        f"{ML}.apiServer.address: '203.0.113.99' is outside loadBalancer.pools.acme-public (203.0.113.16/28)",
    ),
    (
        "a LoadBalancer API without an address",
        lambda c: _ml(c)["apiServer"].pop("address"),
        f"{ML}.apiServer.address: is required with type LoadBalancer: the API server's certificate must name the "
        "address clients use, so it cannot be one LB IPAM picks later",
    ),
    (
        "an even control plane",
        lambda c: _ml(c).update(controlPlane={"replicas": 2}),
        f"{ML}.controlPlane.replicas: 2 is even; etcd needs a majority of its members, so use 1, 3, 5 or 7",
    ),
    (
        "a control plane of one vCPU, which kubeadm's preflight refuses",
        lambda c: _ml(c).update(controlPlane={"cpu": {"cores": 1}}),
        f"{ML}.controlPlane.cpu: {{'cores': 1}} gives 1 vCPU; kubeadm's preflight refuses a control-plane node with "
        "fewer than 2 (NumCPU), so give it at least 2",
    ),
    (
        "a worker pool named as the control plane, whose objects it would take over",
        lambda c: _ml(c)["workerPools"].update({"control-plane": _ml(c)["workerPools"].pop("gpu")}),
        f"{ML}.workerPools.control-plane: 'control-plane' is the control plane's name part (<cluster>-control-plane, "
        "its KubeadmControlPlane and machine templates); give the worker pool another name",
    ),
    (
        "a control plane on the servers",
        lambda c: _ml(c).update(controlPlane={"pool": "servers"}),
        f"{ML}.controlPlane.pool: 'servers' is a server pool; VMs run on gpu or cpu pools: l40s, cpu, h100-vm",
    ),
    (
        "a Cluster API release gpucell has no facts for",
        lambda c: c.setdefault("versions", {}).update(clusterApi="v1.13.5"),
        "versions.clusterApi: 'v1.13.5': gpucell knows the Kubernetes versions Cluster API v1.14 supports "
        "(docs/book/src/reference/versions.md), not this release's; pin such a release, or add its row to "
        "gpucell.catalog.cluster_api_facts",
    ),
    (
        "a CAPK release whose schema gpucell did not check",
        lambda c: c.setdefault("versions", {}).update(capk="v0.10.5"),
        "versions.capk: 'v0.10.5': gpucell knows CAPK, whose KubevirtMachineTemplate schema gpucell checked, at v0.11 "
        "only; pin such a release, or add this one's facts to gpucell.catalog.cluster_api_facts",
    ),
    (
        "a cluster-api-operator chart whose provider objects gpucell did not check",
        lambda c: c.setdefault("versions", {}).update(capiOperator="0.9.0"),
        "versions.capiOperator: '0.9.0': gpucell knows the cluster-api-operator chart, whose provider objects "
        "gpucell renders, at v0.28 only; pin such a release, or add this one's facts to "
        "gpucell.catalog.cluster_api_facts",
    ),
    (
        "a name a VM already has",
        lambda c: c["tenants"]["acme"].update(
            virtualMachines={
                "ml": {
                    "memoryGib": 4,
                    "rootDisk": {"source": {"registry": "docker://x/y:1"}, "sizeGib": 10},
                    "noLogin": True,
                }
            }
        ),
        f"{ML}: 'ml' is already the name of virtualMachines.ml in this tenant; workload names share the namespace",
    ),
    (
        "a VM named as the cluster's control-plane Service, which CAPK would adopt as the cluster's endpoint",
        lambda c: c["tenants"]["acme"].update(
            virtualMachines={
                "ml-lb": {
                    "memoryGib": 4,
                    "rootDisk": {"source": {"registry": "docker://x/y:1"}, "sizeGib": 10},
                    "noLogin": True,
                }
            }
        ),
        "tenants.acme.virtualMachines.ml-lb: 'ml-lb' is taken by tenant cluster ml (its control-plane Service, which "
        "CAPK creates) in this tenant; workload names share the namespace",
    ),
    (
        "a notebook named as the cluster's API Service and policy",
        lambda c: c["tenants"]["acme"].update(
            notebooks={"ml-api": {"image": "quay.io/jupyter/base-notebook:2025-01-01", "memoryGib": 2}}
        ),
        "tenants.acme.notebooks.ml-api: 'ml-api' is taken by tenant cluster ml (its API's Service and policy) in this "
        "tenant; workload names share the namespace",
    ),
]


@pytest.mark.parametrize(("edit", "line"), [(e, line) for _, e, line in CASES], ids=[c[0] for c in CASES])
def test_a_mistake_is_one_line(edit: Edit, line: str) -> None:
    assert lines(edit) == [line]


def test_whole_boards_and_parts_of_boards_do_not_mix_in_one_cluster() -> None:
    def mixed(config: dict[str, Any]) -> None:  # a pool of whole boards, scaled to zero for now
        _ml(config)["workerPools"]["board"] = {"replicas": 0, "gpuModel": "H100-SXM5-80GB", "gpus": 8, "memoryGib": 64}

    assert lines(mixed) == [
        f"{ML}.workerPools.gpu.gpus: holds part of an HGX board (its guest driver runs with NVLink off) while pool "
        "board holds whole boards (NVLink on); the GPU Operator of a tenant cluster loads one driver configuration "
        "on every node: give both pools whole boards, or both part of one, or use two tenant clusters"
    ]


def test_an_unsupported_version_in_a_stack_file_stops_gpucell_plan_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(REPO / "Pulumi.yaml", tmp_path)
    stack = yaml.safe_load((REPO / "Pulumi.prod-iad1.yaml").read_text())
    ml = stack["config"]["gpucell:regions"]["iad1"]["tenants"]["globex"]["tenantClusters"]["ml"]
    ml["kubernetesVersion"] = "v1.37.0"
    ml["image"] = {"registry": "docker://quay.io/capk/ubuntu-2404-container-disk:v1.37.0"}
    (tmp_path / "Pulumi.prod-iad1.yaml").write_text(yaml.safe_dump(stack))
    assert cli.main(["plan", "prod-iad1", "--project-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        "regions.iad1.tenants.globex.tenantClusters.ml.kubernetesVersion: 'v1.37.0' is outside what Cluster API "
        "v1.14.0 builds: v1.31 to v1.36\n"
    )


# -- what it takes ----------------------------------------------------------------------------------------------


def test_usage_counts_the_rolling_update_surge() -> None:
    spec = region().tenants["acme"].tenant_clusters["ml"]
    assert rollout_surge(spec) == {"controlPlane": 1, "gpu": 0}
    # 2 control-plane VMs (1 + surge) of 2 vCPUs, 8 GiB, 50 GiB; 2 GPU workers of 16 vCPUs, 128 GiB, 200 GiB
    assert usage(spec) == (2 * 2000 + 2 * 16000, 2 * 8 + 2 * 128, 2 * 50 + 2 * 200)


def test_the_capacity_view_counts_the_workers_gpus() -> None:
    view = "\n".join(render_capacity(region()))
    (h100,) = [line for line in view.splitlines() if line.strip().startswith(H100)]
    assert h100.split()[-3:] == ["8", "8", "4"]  # capacity, reserved by the quota, used by the two workers


# -- day 2: removal and versions -----------------------------------------------------------------------------------


def _without_cluster() -> CellSpec:
    config = region_config()
    del config["tenants"]["acme"]["tenantClusters"]
    return CellSpec.model_validate(config)


def test_the_fingerprint_lists_each_tenant_cluster_only_where_there_are_some() -> None:
    assert fingerprint(region())["tenantClusters"] == {
        "tenant-acme/ml": {
            "owner": "tenants.acme.tenantClusters.ml",
            "removalPolicy": "protect",
            "kubernetesVersion": "v1.34.1",
            "apiAddress": "203.0.113.20",
        }
    }
    assert "tenantClusters" not in fingerprint(_without_cluster())


def test_removing_a_tenant_cluster_deletes_data_and_needs_an_acknowledgement() -> None:
    (change,) = compare(fingerprint(region()), fingerprint(_without_cluster()), "lab")
    assert (change.change, change.subject, change.key) == (
        Change.DATA_DELETED,
        "tenant-acme/ml",
        "regions.lab.tenants.acme.tenantClusters.ml",
    )
    assert change.refusal().startswith(
        "regions.lab.tenants.acme.tenantClusters.ml: tenant-acme/ml: tenant cluster tenant-acme/ml -> removed is a "
        "disruptive change (dataDeleted: the object is deleted with the data behind it"
    )
    assert change.acknowledgement() == '{change: dataDeleted, region: lab, subject: tenant-acme/ml, reason: "..."}'


def test_a_retained_tenant_cluster_leaves_without_a_word() -> None:
    retained = region(removalPolicy="retain")
    assert compare(fingerprint(retained), fingerprint(_without_cluster()), "lab") == []


@pytest.mark.parametrize(
    ("old", "new", "refused"),
    [("v1.34.1", "v1.35.0", False), ("v1.34.1", "v1.36.0", True), ("v1.35.2", "v1.34.1", True)],
)
def test_a_version_may_go_up_one_minor_at_a_time(old: str, new: str, refused: bool) -> None:
    before, after = fingerprint(region()), copy.deepcopy(fingerprint(region()))
    before["tenantClusters"]["tenant-acme/ml"]["kubernetesVersion"] = old
    after["tenantClusters"]["tenant-acme/ml"]["kubernetesVersion"] = new
    changes = compare(before, after, "lab")
    assert [c.change for c in changes] == ([Change.TENANT_CLUSTER_VERSION] if refused else [])
    if refused:
        (line,) = refused_together(changes)
        assert line.startswith(
            f"regions.lab.tenants.acme.tenantClusters.ml.kubernetesVersion: tenant-acme/ml: {old} -> {new} cannot be "
            "applied (Cluster API's KubeadmControlPlane upgrades a tenant cluster one minor version at a time"
        )
        assert judge(changes, [], ["lab"]).refused == []  # no acknowledgement to ask for


# -- the lines docs/workloads.md shows, for prod's iad1 -----------------------------------------------------------
PROD_ML = "regions.iad1.tenants.globex.tenantClusters.ml"


def prod_lines(edit: Edit) -> list[str]:
    regions = prod_regions()
    edit(regions["iad1"]["tenants"]["globex"]["tenantClusters"]["ml"])
    with pytest.raises(ConfigError) as caught:
        StackSpec.model_validate({"regions": regions})
    return caught.value.lines


def test_prods_cluster_with_a_gpu_model_iad1_lacks() -> None:
    assert prod_lines(lambda ml: ml["workerPools"]["gpu"].update(gpuModel="H200-SXM-141GB")) == [
        "regions.iad1.tenants.globex.tenantClusters.ml.workerPools.gpu.gpuModel: no vm-passthrough pool with "
        "H200-SXM-141GB; H200-SXM-141GB is only in h200 (container), h200-mig (container): "
        "a GPU VM needs a VM-mode pool"
    ]


def test_prods_cluster_on_a_kubernetes_release_cluster_api_does_not_build() -> None:
    def edit(ml: dict[str, Any]) -> None:
        ml["kubernetesVersion"] = "v1.30.14"
        ml["image"] = {"registry": "docker://quay.io/capk/ubuntu-2404-container-disk:v1.30.14"}

    assert prod_lines(edit) == [
        "regions.iad1.tenants.globex.tenantClusters.ml.kubernetesVersion: 'v1.30.14' is outside what Cluster API "
        "v1.14.0 builds: v1.31 to v1.36"
    ]


def test_prods_cluster_over_globexs_gpu_quota() -> None:
    assert prod_lines(lambda ml: ml["workerPools"]["gpu"].update(replicas=3)) == [
        "regions.iad1.tenants.globex.tenantClusters.ml.workerPools.gpu: needs 6 nvidia.com/GH100_H100_SXM5_80GB (10 "
        "with the tenant's other workloads), tenant quota.gpus allows 8"
    ]


def test_prods_cluster_skipping_a_minor_is_refused() -> None:
    regions = prod_regions()
    before = fingerprint(StackSpec.model_validate({"regions": regions}).regions["iad1"])
    after = copy.deepcopy(before)
    after["tenantClusters"]["tenant-globex/ml"]["kubernetesVersion"] = "v1.36.0"
    assert refused_together(compare(before, after, "iad1")) == [
        "regions.iad1.tenants.globex.tenantClusters.ml.kubernetesVersion: tenant-globex/ml: v1.34.1 -> v1.36.0 cannot "
        "be applied (Cluster API's KubeadmControlPlane upgrades a tenant cluster one minor version at a time (its "
        "webhook refuses 'cannot update Kubernetes version', controlplane/kubeadm/webhooks/admission) and kubeadm "
        "never downgrades; no acknowledgement makes it work)"
    ]


def test_a_tenant_with_a_tenant_cluster_cannot_have_a_namespace_backup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Velero would back up the Cluster API objects, the machine VMs and the clusters' CA and etcd Secrets (object
    manifests unencrypted in the bucket), and a restore of them is not something gpucell does: refused, not taken
    silently (found by review: prod's globex has a cluster, and adding backup planned)."""
    shutil.copy(REPO / "Pulumi.yaml", tmp_path)
    stack = yaml.safe_load((REPO / "Pulumi.prod-iad1.yaml").read_text())
    stack["config"]["gpucell:regions"]["iad1"]["tenants"]["globex"]["backup"] = {"schedule": "0 3 * * *"}
    (tmp_path / "Pulumi.prod-iad1.yaml").write_text(yaml.safe_dump(stack))
    assert cli.main(["plan", "prod-iad1", "--project-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        "regions.iad1.tenants.globex.backup: the tenant has tenantClusters (ml): a namespace backup would hold their "
        "Cluster API objects, machine VMs and the clusters' CA and etcd Secrets (object manifests are not encrypted "
        "in the bucket), and gpucell does not restore a tenant cluster that way; back up inside the tenant cluster, "
        "or keep backups to a tenant without tenant clusters\n"
    )
