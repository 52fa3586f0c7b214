"""Host maintenance and tenant clusters: a tenant cluster's workers are replaced through Cluster API (their node
drained in the tenant cluster first), never stopped the way gpucell stops the tenant's own GPU VMs. The maintenance
scripts run for real by bash against the stubbed ``k3s kubectl`` of tests/test_maintenance.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.test_maintenance import MIG_NODE, Cluster, mig_state, node, pod, prepare, vm

CAPI = "cluster.x-k8s.io"


def capi_pod(name: str, role: str, *, gpu: bool) -> dict[str, Any]:
    """The virt-launcher pod of tenant cluster ml's VM ``name`` (CAPK labels it with the cluster and the role)."""
    launcher = pod(f"virt-launcher-{name}-x", owner=("VirtualMachineInstance", name), gpu=gpu)
    launcher["metadata"]["labels"] = {f"{CAPI}/cluster-name": "ml", f"{CAPI}/role": role}
    return launcher


def capi_objects(*names: str) -> dict[str, list[dict[str, Any]]]:
    """The VMIs of ``names`` (labelled by CAPK) and their KubevirtMachines, each owned by a Machine of its name."""
    return {
        "vmis": [
            {"metadata": {"namespace": "tenant-acme", "name": n, "labels": {f"{CAPI}/cluster-name": "ml"}}}
            for n in names
        ],
        "kubevirtmachines": [
            {
                "metadata": {
                    "namespace": "tenant-acme",
                    "name": n,
                    "ownerReferences": [{"kind": "Machine", "name": f"machine-{n}"}],
                }
            }
            for n in names
        ],
    }


def test_a_gpu_reconfiguration_replaces_tenant_cluster_gpu_workers_and_stops_the_tenants_own_vms(
    tmp_path: Path,
) -> None:
    labels = {**mig_state().labels, "nvidia.com/mig.config": "all-1g.18gb"}
    pods = [
        capi_pod("ml-gpu-7d9f-abcde", "worker", gpu=True),
        capi_pod("ml-cpu-5c4b-fghij", "worker", gpu=False),
        pod("virt-launcher-vm1-x", owner=("VirtualMachineInstance", "vm1")),
    ]
    cluster = Cluster(
        tmp_path,
        [node(labels=labels)],
        pods,
        vms=[vm("vm1", "Always")],
        **capi_objects("ml-gpu-7d9f-abcde", "ml-cpu-5c4b-fghij"),
    )
    run = cluster.run(prepare())
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        f"gpucell: taking {MIG_NODE} out of service: gpu-reconfiguration",
        f"node/{MIG_NODE} cordoned",
        f"gpucell: replacing tenant-cluster worker tenant-acme/ml-gpu-7d9f-abcde on {MIG_NODE} (pod "
        "virt-launcher-ml-gpu-7d9f-abcde-x): deleting its Machine machine-ml-gpu-7d9f-abcde (Cluster API drains the "
        "node in the tenant cluster first)",
        f"gpucell: stopping VM tenant-acme/vm1 on {MIG_NODE} (pod virt-launcher-vm1-x): a VM with GPUs cannot "
        "live-migrate",
        f"gpucell: no GPU workloads left on {MIG_NODE}",
        f"gpucell: {MIG_NODE} is ready for maintenance",
    ]
    assert cluster.state["deleted_machines"] == ["tenant-acme/machine-ml-gpu-7d9f-abcde"]  # the CPU worker stays
    # the tenant cluster's VM is neither halted nor has its VMI deleted by gpucell: Cluster API takes it down
    assert [c for c in cluster.calls() if "ml-gpu" in c] == [
        "-n tenant-acme delete machines.cluster.x-k8s.io machine-ml-gpu-7d9f-abcde --ignore-not-found --wait=false"
    ]
    assert cluster.state["vms"][0]["spec"]["runStrategy"] == "Halted"
    left = {p["metadata"]["name"] for p in cluster.state["pods"]}
    assert left == {"virt-launcher-ml-cpu-5c4b-fghij-x"}


def test_a_k3s_upgrade_replaces_every_worker_and_leaves_the_control_plane_to_capks_drain(tmp_path: Path) -> None:
    pods = [
        capi_pod("ml-cpu-5c4b-fghij", "worker", gpu=False),
        capi_pod("ml-control-plane-k2x9p", "control-plane", gpu=False),
    ]
    cluster = Cluster(
        tmp_path,
        [node(version="v1.33.6+k3s1")],
        pods,
        **capi_objects("ml-cpu-5c4b-fghij", "ml-control-plane-k2x9p"),
    )
    run = cluster.run(prepare())
    assert run.returncode == 0, run.stderr
    assert cluster.state["deleted_machines"] == ["tenant-acme/machine-ml-cpu-5c4b-fghij"]
    assert cluster.calls("drain") == [f"drain {MIG_NODE} --ignore-daemonsets --delete-emptydir-data --timeout=900s"]
    assert "virtualmachineinstances" not in " ".join(cluster.calls("-n"))  # no VMI of the cluster deleted by gpucell


def test_a_cell_without_tenant_clusters_asks_nothing_of_cluster_api(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, [node(version="v1.33.6+k3s1")], [pod("web", gpu=False)])
    assert cluster.run(prepare()).returncode == 0
    assert not [c for c in cluster.state["calls"] if "cluster.x-k8s.io" in c and not c.startswith("get pods")]


LEFT = (
    "gpucell: tenant-cluster VMs still on {node}: {vms} - Cluster API takes them down, each after draining its node "
    "in the tenant cluster (for at most the Machine's nodeDrainTimeoutSeconds): check its controllers (kubectl -n "
    "capi-system get pods; kubectl -n capk-system get pods) and the Machines (kubectl -n <namespace> get machines)"
)


def test_a_worker_cluster_api_does_not_take_down_is_named_with_the_way_out_and_the_next_run_resumes(
    tmp_path: Path,
) -> None:
    labels = {**mig_state().labels, "nvidia.com/mig.config": "all-1g.18gb"}
    cluster = Cluster(
        tmp_path,
        [node(labels=labels)],
        [capi_pod("ml-gpu-7d9f-abcde", "worker", gpu=True)],
        capi_down=True,  # the Machine is deleted but its controllers never act on it
        **capi_objects("ml-gpu-7d9f-abcde"),
    )
    run = cluster.run(prepare())
    assert run.returncode == 1
    assert run.stderr.splitlines()[-1] == LEFT.format(node=MIG_NODE, vms="tenant-acme/ml-gpu-7d9f-abcde")
    state = cluster.state
    state["capi_down"] = False  # the controllers are back
    cluster.path.write_text(json.dumps(state))
    again = cluster.run(prepare())
    assert again.returncode == 0, again.stderr
    assert cluster.state["deleted_machines"] == ["tenant-acme/machine-ml-gpu-7d9f-abcde"] * 2
    assert f"gpucell: {MIG_NODE} is ready for maintenance" in again.stdout


def test_a_control_plane_vm_capk_does_not_move_is_named_after_the_drain_fails(tmp_path: Path) -> None:
    cluster = Cluster(
        tmp_path,
        [node(version="v1.33.6+k3s1")],
        [capi_pod("ml-control-plane-k2x9p", "control-plane", gpu=False)],
        drain_fails="error when evicting pods/virt-launcher-ml-control-plane-k2x9p-x: Too Many Requests",
        **capi_objects("ml-control-plane-k2x9p"),
    )
    run = cluster.run(prepare())
    assert run.returncode == 1
    assert run.stderr.splitlines()[-1] == LEFT.format(node=MIG_NODE, vms="tenant-acme/ml-control-plane-k2x9p")


def test_no_tenant_cluster_vm_left_adds_no_line(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, [node(version="v1.33.6+k3s1")], [pod("web", gpu=False)], drain_fails="PDB")
    run = cluster.run(prepare())
    assert run.returncode == 1
    assert "tenant-cluster" not in run.stderr


def test_a_pod_labelled_as_a_worker_in_a_cell_without_cluster_api_does_not_stop_the_drain(tmp_path: Path) -> None:
    # a tenant may label its own pods; without CAPK's CRDs the KubevirtMachine lookup fails, which must not end the
    # script (set -e): the pod is drained as any other
    labelled = pod("web", gpu=False)
    labelled["metadata"]["labels"] = {f"{CAPI}/role": "worker"}
    cluster = Cluster(
        tmp_path,
        [node(version="v1.33.6+k3s1")],
        [labelled],
        missing_kinds=["kubevirtmachines.infrastructure.cluster.x-k8s.io"],
    )
    run = cluster.run(prepare())
    assert run.returncode == 0, run.stderr
    assert cluster.calls("drain") == [f"drain {MIG_NODE} --ignore-daemonsets --delete-emptydir-data --timeout=900s"]
    assert "deleted_machines" not in cluster.state
