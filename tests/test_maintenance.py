"""The maintenance scripts, run for real by bash against a stubbed ``k3s kubectl`` (tests/kubectl_stub.py).

Each test sets up the cluster as the control server would see it (Nodes and Pods in a JSON file), runs one
script and asserts the exit code, the message and what the script did to the cluster, call by call.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpucell.errors import ConfigError
from gpucell.k3s import _maintenance_scripts as maintenance
from gpucell.k3s._node_state import NodeState, node_state
from gpucell.spec import CellSpec, NodeRole
from tests.conftest import REPO, minimal_cell_config, tainted_mig_pool

VERSION = "v1.34.2+k3s1"
DIGEST = "0123456789abcdef"
MIG_NODE = "h200-1"
MIG_RESOURCES = {"nvidia.com/mig-1g.18gb": "16", "nvidia.com/mig-2g.35gb": "8", "nvidia.com/mig-3g.71gb": "8"}


def mig_state(**rollout: int) -> NodeState:
    config = minimal_cell_config()
    config["nodePools"]["h200"] = {**tainted_mig_pool(), "rollout": rollout} if rollout else tainted_mig_pool()
    spec = CellSpec.model_validate(config)
    return node_state(spec, "h200", spec.node_pools["h200"], MIG_NODE)


def cpu_state() -> NodeState:
    spec = CellSpec.model_validate(minimal_cell_config())
    return node_state(spec, "cpu", spec.node_pools["cpu"], "lab-cpu-1")


def node(
    name: str = MIG_NODE,
    *,
    version: str = VERSION,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    ready: str = "True",
    unschedulable: bool = False,
    allocatable: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Node as the API returns it; by default the converged MIG node of :func:`mig_state`."""
    if labels is None:
        labels = {**mig_state().labels, "nvidia.com/mig.config.state": "success"}
    return {
        "metadata": {"name": name, "labels": labels, "annotations": annotations or {}},
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {
            "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": ready}],
            "nodeInfo": {"kubeletVersion": version},
            "allocatable": {"cpu": "224", **(MIG_RESOURCES if allocatable is None else allocatable)},
        },
    }


def pod(
    name: str,
    *,
    namespace: str = "tenant-acme",
    on: str = MIG_NODE,
    owner: tuple[str, str] = ("ReplicaSet", "rs"),
    gpu: bool = True,
    phase: str = "Running",
    ready: bool = True,
) -> dict[str, Any]:
    limits = {"cpu": "2", **({"nvidia.com/mig-1g.18gb": "1"} if gpu else {})}
    return {
        "metadata": {"namespace": namespace, "name": name, "ownerReferences": [{"kind": owner[0], "name": owner[1]}]},
        "spec": {"nodeName": on, "containers": [{"name": "main", "resources": {"limits": limits}}]},
        "status": {"phase": phase, "containerStatuses": [{"ready": ready}]},
    }


def operator_pods(*, ready: bool = True) -> list[dict[str, Any]]:
    return [
        pod(
            "nvidia-device-plugin-daemonset-x",
            namespace="gpu-operator",
            owner=("DaemonSet", "dp"),
            gpu=False,
            ready=ready,
        ),
        pod("nvidia-cuda-validator-y", namespace="gpu-operator", owner=("", ""), gpu=False, phase="Succeeded"),
    ]


class Cluster:
    """The stubbed cluster: its JSON state, and a runner for scripts that talk to it."""

    def __init__(
        self, tmp_path: Path, nodes: list[dict[str, Any]], pods: list[dict[str, Any]] | None = None, **switches: Any
    ) -> None:
        tmp_path = Path(tempfile.mkdtemp(dir=tmp_path))  # several clusters may share a test's tmp_path
        self.path = tmp_path / "cluster.json"
        self.path.write_text(
            json.dumps({"nodes": {n["metadata"]["name"]: n for n in nodes}, "pods": pods or [], **switches})
        )
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        self.k3s = self.bin / "k3s"
        stub = REPO / "tests" / "kubectl_stub.py"
        _executable(self.k3s, f'exec {sys.executable} -S -E {stub} {self.path} "$@"\n')  # -S: starts faster
        _executable(self.bin / "sudo", '[ "$1" = -n ] && shift\nexec "$@"\n')
        _executable(self.bin / "sleep", "exit 0\n")  # every wait runs at once
        self.env = {**os.environ, "PATH": f"{self.bin}:{os.environ['PATH']}"}

    @property
    def state(self) -> dict[str, Any]:
        return dict(json.loads(self.path.read_text()))

    def node(self, name: str = MIG_NODE) -> dict[str, Any]:
        return dict(self.state["nodes"][name])

    def calls(self, *verbs: str) -> list[str]:
        """The calls made, those starting with one of ``verbs`` when given (reads are left out by default)."""
        calls: list[str] = self.state.get("calls", [])
        wanted = verbs or ("annotate", "label", "cordon", "uncordon", "drain", "delete", "create", "-n")
        return [c for c in calls if c.startswith(wanted) and not (not verbs and c.split()[2:3] == ["get"])]

    def run(self, script: str, *, k3s_installed: bool = True) -> subprocess.CompletedProcess[str]:
        k3s = str(self.k3s) if k3s_installed else str(self.bin / "no-k3s-here")
        script = script.replace("readonly K3S_BIN=/usr/local/bin/k3s", f"readonly K3S_BIN={k3s}")
        return subprocess.run(["bash", "-c", script], env=self.env, capture_output=True, text=True, check=False)


def _executable(path: Path, body: str) -> None:
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def prepare(state: NodeState | None = None) -> str:
    return maintenance.prepare_script(state or mig_state(), VERSION, DIGEST)


def settle(state: NodeState | None = None) -> str:
    return maintenance.settle_script(state or mig_state(), VERSION, DIGEST)


EVICT = "create --raw /api/v1/namespaces/{}/pods/{}/eviction -f -"


# -- prepare ----------------------------------------------------------------------------------------------------
def test_prepare_on_a_new_cell_does_nothing(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, [])
    run = cluster.run(prepare(), k3s_installed=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "gpucell: k3s is not installed on this server yet (a new cell): nothing to prepare on h200-1\n"
    assert "calls" not in cluster.state


def test_prepare_of_a_node_not_registered_yet_does_nothing(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, [])
    run = cluster.run(prepare())
    assert run.returncode == 0, run.stderr
    assert run.stdout == "gpucell: h200-1 is not registered yet: nothing to prepare\n"
    assert cluster.calls() == []


def test_prepare_of_a_converged_node_changes_nothing(tmp_path: Path) -> None:
    # Also what a run caused by a new SSH key or a new control server finds: the node already runs what is wanted.
    cluster = Cluster(tmp_path, [node(annotations={"gpucell.io/k3s-config": DIGEST})], [pod("training")])
    run = cluster.run(prepare())
    assert run.returncode == 0, run.stderr
    assert run.stdout == (
        "gpucell: h200-1 already runs k3s v1.34.2+k3s1 with its config and GPU configuration; nothing to prepare\n"
    )
    assert cluster.calls() == []
    # Without a recorded config (the first run after upgrading gpucell) the node counts as converged too.
    first = Cluster(tmp_path, [node()])
    assert first.run(prepare()).stdout.endswith("nothing to prepare\n")
    assert first.calls() == []


def test_a_gpu_reconfiguration_evicts_only_gpu_workloads_and_stops_gpu_vms(tmp_path: Path) -> None:
    labels = {**mig_state().labels, "nvidia.com/mig.config": "all-1g.18gb"}  # the layout the node has now
    pods = [
        pod("training"),
        pod("web", gpu=False),
        pod("virt-launcher-vm1-abcde", owner=("VirtualMachineInstance", "vm1")),
        pod("nvidia-dcgm-exporter-z", namespace="gpu-operator", owner=("DaemonSet", "dcgm"), gpu=False),
        pod("done", phase="Succeeded"),
    ]
    cluster = Cluster(tmp_path, [node(labels=labels)], pods)
    run = cluster.run(prepare())
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "gpucell: taking h200-1 out of service: gpu-reconfiguration",
        "node/h200-1 cordoned",
        "gpucell: stopping VM tenant-acme/vm1 on h200-1 (pod virt-launcher-vm1-abcde): a VM with GPUs cannot "
        "live-migrate",
        "gpucell: no GPU workloads left on h200-1",
        "gpucell: h200-1 is ready for maintenance",
    ]
    assert cluster.calls() == [
        "annotate node h200-1 --overwrite gpucell.io/maintenance=gpu-reconfiguration",
        "cordon h200-1",
        "-n tenant-acme delete virtualmachineinstances.kubevirt.io vm1 --ignore-not-found --wait=false",
        EVICT.format("tenant-acme", "training"),
    ]
    left = {p["metadata"]["name"] for p in cluster.state["pods"]}
    assert left == {"web", "nvidia-dcgm-exporter-z", "done"}
    assert cluster.node()["spec"]["unschedulable"] is True


def test_a_pod_disruption_budget_holds_the_eviction_until_the_timeout(tmp_path: Path) -> None:
    labels = {**mig_state().labels, "nvidia.com/mig.config": "all-1g.18gb"}
    cluster = Cluster(tmp_path, [node(labels=labels)], [pod("serving-0"), pod("serving-1")], pdb_blocked=["serving-1"])
    run = cluster.run(prepare(mig_state(drainTimeoutMinutes=1)))
    assert run.returncode == 1
    assert run.stderr == (
        "gpucell: GPU workloads still on h200-1 after 60 s (a PodDisruptionBudget may forbid evicting them): "
        "tenant-acme/serving-1 - h200-1 stays cordoned; move or stop them, then run pulumi up again\n"
    )
    evictions = cluster.calls("create")
    assert evictions.count(EVICT.format("tenant-acme", "serving-1")) == 12  # retried every 5 s for 60 s
    assert cluster.node()["spec"]["unschedulable"] is True
    assert cluster.node()["metadata"]["annotations"]["gpucell.io/maintenance"] == "gpu-reconfiguration"

    # The budget allows it later; the next pulumi up resumes (the reason is on the node) and finishes.
    state = cluster.state
    state["pdb_blocked"] = []
    cluster.path.write_text(json.dumps(state))
    again = cluster.run(prepare())
    assert again.returncode == 0, again.stderr
    assert "taking h200-1 out of service: gpu-reconfiguration" in again.stdout
    assert cluster.state["pods"] == []


def test_a_k3s_upgrade_drains_the_node_after_stopping_its_gpu_vms(tmp_path: Path) -> None:
    pods = [pod("virt-launcher-vm1-abcde", owner=("VirtualMachineInstance", "vm1")), pod("web", gpu=False)]
    cluster = Cluster(tmp_path, [node(version="v1.33.6+k3s1")], pods)
    run = cluster.run(prepare())
    assert run.returncode == 0, run.stderr
    assert cluster.calls() == [
        "annotate node h200-1 --overwrite gpucell.io/maintenance=k3s-upgrade",
        "cordon h200-1",
        "-n tenant-acme delete virtualmachineinstances.kubevirt.io vm1 --ignore-not-found --wait=false",
        "drain h200-1 --ignore-daemonsets --delete-emptydir-data --timeout=900s",
    ]
    assert cluster.state["pods"] == []


def test_a_changed_config_restarts_k3s_and_so_drains(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, [node(annotations={"gpucell.io/k3s-config": "fedcba9876543210"})])
    run = cluster.run(prepare())
    assert run.returncode == 0, run.stderr
    assert cluster.calls("annotate", "drain") == [
        "annotate node h200-1 --overwrite gpucell.io/maintenance=k3s-restart",
        "drain h200-1 --ignore-daemonsets --delete-emptydir-data --timeout=900s",
    ]


def test_a_node_cordoned_by_someone_else_stays_cordoned(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, [node(version="v1.33.6+k3s1", unschedulable=True)])
    assert cluster.run(prepare()).returncode == 0
    assert cluster.node()["metadata"]["annotations"] == {
        "gpucell.io/keep-cordoned": "true",
        "gpucell.io/maintenance": "k3s-upgrade",
    }
    upgraded = node(unschedulable=True, annotations=cluster.node()["metadata"]["annotations"])
    done = Cluster(tmp_path, [upgraded], operator_pods())
    run = done.run(settle())
    assert run.returncode == 0, run.stderr
    assert "gpucell: h200-1 was cordoned before its maintenance; it stays cordoned" in run.stdout
    assert done.node()["spec"]["unschedulable"] is True
    assert done.node()["metadata"]["annotations"] == {
        "gpucell.io/k3s-config": DIGEST,
        "gpucell.io/labels": LABEL_KEYS,
        "gpucell.io/gpu-config": "mode=container,mig=all-balanced",
    }


def test_a_failed_drain_stops_the_run_with_the_node_cordoned(tmp_path: Path) -> None:
    cluster = Cluster(
        tmp_path,
        [node(version="v1.33.6+k3s1")],
        [pod("web", gpu=False)],
        drain_fails="error: cannot delete Pods that declare no controller (use --force to override): tenant-acme/web",
    )
    run = cluster.run(prepare())
    assert run.returncode == 1
    assert run.stderr == (
        "error: cannot delete Pods that declare no controller (use --force to override): tenant-acme/web\n"
        "gpucell: kubectl drain h200-1 failed before its 900 s timeout (see its message above); h200-1 stays "
        "cordoned; resolve it, then run pulumi up again\n"
    )  # issue 30: a drain refused at once blames neither its timeout nor a PodDisruptionBudget
    assert cluster.node()["spec"]["unschedulable"] is True


def test_a_drain_that_runs_out_its_timeout_names_a_pod_disruption_budget(tmp_path: Path) -> None:
    cluster = Cluster(
        tmp_path,
        [node(version="v1.33.6+k3s1")],
        [pod("web", gpu=False)],
        drain_fails='error: unable to drain node "h200-1": global timeout reached: 3s',
        drain_seconds=1.2,
    )
    run = cluster.run(prepare().replace("readonly DRAIN_TIMEOUT=900", "readonly DRAIN_TIMEOUT=3"))
    assert run.returncode == 1
    assert run.stderr.splitlines()[-1] == (
        "gpucell: could not drain h200-1 within 3 s (see kubectl's message above: a PodDisruptionBudget that forbids "
        "an eviction, or a pod that does not terminate); h200-1 stays cordoned; resolve it, then run pulumi up again"
    )


def test_a_host_that_dies_mid_drain_is_named_with_the_way_out(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, [node(version="v1.33.6+k3s1")], [pod("web", gpu=False)], drain_kills_node=True)
    run = cluster.run(prepare())
    assert run.returncode == 1
    assert run.stderr.splitlines()[1:] == [
        "gpucell: h200-1 stopped answering during its drain (it is not Ready: its host is down or its kubelet "
        "stopped), so its pods cannot be confirmed gone",
        "gpucell: h200-1 stays cordoned (k3s-upgrade). If the host is down for good, set removalPolicy: forget on it "
        "and remove it from the config (see docs/operations.md, 'A host died'); if it comes back, run pulumi up again",
    ]
    assert "PodDisruptionBudget" not in run.stderr


def test_prepare_fails_when_the_api_does_not_answer(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, [node()], api_down=True)
    run = cluster.run(prepare())
    assert run.returncode == 1
    assert run.stderr == "gpucell: the API server on this server does not answer; cannot prepare h200-1\n"


# -- settle -----------------------------------------------------------------------------------------------------
LABEL_KEYS = "gpucell.io/pool,gpucell.io/role,nvidia.com/gpu.workload.config,nvidia.com/mig.config"
GPU_CONFIG = "mode=container,mig=all-balanced"


def test_settle_without_maintenance_only_records_the_config(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, [node()])
    run = cluster.run(settle())
    assert run.returncode == 0, run.stderr
    assert run.stdout == "gpucell: h200-1 was not taken out of service; nothing to settle\n"
    assert cluster.calls() == [
        f"annotate node h200-1 --overwrite gpucell.io/labels={LABEL_KEYS}",
        f"annotate node h200-1 --overwrite gpucell.io/k3s-config={DIGEST}",
        f"annotate node h200-1 --overwrite gpucell.io/gpu-config={GPU_CONFIG}",
    ]
    assert cluster.run(settle()).returncode == 0
    assert len(cluster.calls()) == 3  # recorded once


def test_settle_removes_the_labels_gpucell_no_longer_keeps(tmp_path: Path) -> None:
    labels = {**mig_state().labels, "example.com/rack": "r7", "topology.kubernetes.io/zone": "a"}
    annotations = {
        "gpucell.io/labels": LABEL_KEYS + ",example.com/rack",
        "gpucell.io/k3s-config": DIGEST,
        "gpucell.io/gpu-config": GPU_CONFIG,
    }
    cluster = Cluster(tmp_path, [node(labels=labels, annotations=annotations)])
    run = cluster.run(settle())
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0] == "gpucell: removed label example.com/rack from h200-1"
    assert cluster.calls() == [
        "label node h200-1 example.com/rack-",
        f"annotate node h200-1 --overwrite gpucell.io/labels={LABEL_KEYS}",
    ]
    # Labels gpucell never set (the zone) stay.
    assert cluster.node()["metadata"]["labels"] == {**mig_state().labels, "topology.kubernetes.io/zone": "a"}


def test_settle_waits_for_the_gpu_operator_then_uncordons(tmp_path: Path) -> None:
    reconfigured = node(unschedulable=True, annotations={"gpucell.io/maintenance": "gpu-reconfiguration"})
    cluster = Cluster(tmp_path, [reconfigured], operator_pods())
    run = cluster.run(settle())
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "gpucell: the GPU Operator reports h200-1 in its new GPU state",
        "node/h200-1 uncordoned",
        "gpucell: h200-1 is back in service",
    ]
    assert cluster.node()["spec"]["unschedulable"] is False
    assert cluster.node()["metadata"]["annotations"] == {
        "gpucell.io/k3s-config": DIGEST,
        "gpucell.io/labels": LABEL_KEYS,
        "gpucell.io/gpu-config": GPU_CONFIG,
    }


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            {"labels": {**mig_state().labels, "nvidia.com/mig.config.state": "pending"}},
            "nvidia.com/mig.config.state is 'pending', not 'success'",
        ),
        (
            {"allocatable": {**MIG_RESOURCES, "nvidia.com/mig-1g.18gb": "14"}},
            "allocatable nvidia.com/mig-1g.18gb is '14', expected 16",
        ),
        ({"allocatable": {"nvidia.com/gpu": "8"}}, "allocatable nvidia.com/mig-3g.71gb is '0', expected 8"),
    ],
    ids=["state-pending", "one-gpu-short", "old-layout"],
)
def test_settle_times_out_naming_what_is_missing(tmp_path: Path, change: dict[str, Any], problem: str) -> None:
    stuck = node(unschedulable=True, annotations={"gpucell.io/maintenance": "gpu-reconfiguration"}, **change)
    cluster = Cluster(tmp_path, [stuck], operator_pods())
    run = cluster.run(settle(mig_state(gpuStateTimeoutMinutes=1)))
    assert run.returncode == 1
    lines = run.stderr.splitlines()
    assert lines[0] == "gpucell: h200-1 did not reach its GPU state within 60 s; it stays cordoned:"
    assert problem in lines
    assert lines[-1] == (
        "see kubectl describe node h200-1 and the GPU Operator's pods there (kubectl -n gpu-operator "
        "get pods -o wide), then run pulumi up again (it re-triggers them first)"
    )
    assert cluster.node()["spec"]["unschedulable"] is True
    assert cluster.calls("uncordon") == []
    # The wait that ran out is recorded on the node, for the next settle to re-trigger at once.
    assert cluster.node()["metadata"]["annotations"]["gpucell.io/gpu-state-wait"] == lines[1]


def dra_state() -> NodeState:
    config = minimal_cell_config()
    config["nodePools"]["l4"] = {
        "role": "gpu",
        "gpuModel": "L4",
        "gpusPerNode": 4,
        "gpuMode": "dra",
        "hosts": [{"name": "l4-1", "address": "10.20.0.61"}],
    }
    spec = CellSpec.model_validate(config)
    return node_state(spec, "l4", spec.node_pools["l4"], "l4-1")


def test_a_dra_node_waits_for_the_dra_plugin_but_not_the_operators_validator(tmp_path: Path) -> None:
    """On dra nodes the GPU Operator's validator never gets ready (its plugin check waits for nvidia.com/gpu);
    the DRA driver's kubelet plugin must be (docs/decisions/0017)."""
    from gpucell.components import dra_driver
    from gpucell.k3s._node_state import DRA_DRIVER_NAMESPACE

    assert dra_driver.NAMESPACE == DRA_DRIVER_NAMESPACE
    state = dra_state()
    assert (state.state_labels, state.resources) == ((), {})
    reconfigured = node(
        "l4-1",
        labels=dict(state.labels),
        allocatable={},
        unschedulable=True,
        annotations={"gpucell.io/maintenance": "k3s-upgrade"},
    )
    validator = pod(
        "nvidia-operator-validator-z",
        namespace="gpu-operator",
        on="l4-1",
        owner=("DaemonSet", "v"),
        gpu=False,
        phase="Running",
        ready=False,
    )
    toolkit = pod(
        "nvidia-container-toolkit-daemonset-t", namespace="gpu-operator", on="l4-1", owner=("DaemonSet", "t"), gpu=False
    )
    plugin = pod(
        "dra-driver-nvidia-gpu-kubelet-plugin-p",
        namespace=DRA_DRIVER_NAMESPACE,
        on="l4-1",
        owner=("DaemonSet", "k"),
        gpu=False,
        ready=False,
    )
    cluster = Cluster(tmp_path, [reconfigured], [validator, toolkit, plugin])
    stuck = cluster.run(settle(state).replace("readonly GPU_ATTEMPTS=360", "readonly GPU_ATTEMPTS=2"))
    assert stuck.returncode == 1
    assert (
        "pod dra-driver-nvidia-gpu/dra-driver-nvidia-gpu-kubelet-plugin-p is not ready (Running)"
        in stuck.stderr.splitlines()
    )
    assert "nvidia-operator-validator" not in stuck.stderr
    plugin["status"]["containerStatuses"] = [{"ready": True}]
    ready = Cluster(tmp_path, [reconfigured], [validator, toolkit, plugin]).run(settle(state))
    assert ready.returncode == 0, ready.stderr
    assert ready.stdout.splitlines()[-1] == "gpucell: l4-1 is back in service"


def test_a_failed_mig_state_restarts_the_mig_manager_then_ends_the_wait(tmp_path: Path) -> None:
    """NVIDIA/gpu-operator#2833: after 'failed' the MIG manager waits for a label change that never comes."""
    failed = node(
        unschedulable=True,
        annotations={"gpucell.io/maintenance": "gpu-reconfiguration"},
        labels={**mig_state().labels, "nvidia.com/mig.config.state": "failed"},
    )
    cluster = Cluster(tmp_path, [failed], operator_pods(ready=False))
    run = cluster.run(settle(mig_state(gpuStateTimeoutMinutes=30)))
    assert run.returncode == 1
    assert cluster.state["restarted"] == ["gpu-operator app=nvidia-mig-manager h200-1"]
    assert (
        "gpucell: restarting app=nvidia-mig-manager pods in gpu-operator on h200-1: nvidia.com/mig.config.state "
        "is 'failed' (NVIDIA/gpu-operator#2833)"
    ) in run.stdout.splitlines()
    assert run.stderr.splitlines()[1:3] == [
        "nvidia.com/mig.config.state is 'failed', not 'success'",
        "pod gpu-operator/nvidia-device-plugin-daemonset-x is not ready (Running)",
    ]
    # Still failed a minute (12 polls) after the restart: the wait ends long before its 30 minutes, and says so.
    reads = [c for c in cluster.state["calls"] if "mig\\.config\\.state" in c]
    assert len(reads) == 13
    assert run.stderr.splitlines()[0] == (
        "gpucell: h200-1 did not reach its GPU state; the wait ended after 65 s of at most 1800 s: "
        "nvidia.com/mig.config.state is still 'failed' 60 s after the restart; it stays cordoned:"
    )


def test_a_restarted_mig_manager_that_succeeds_settles_the_node(tmp_path: Path) -> None:
    failed = node(
        unschedulable=True,
        annotations={"gpucell.io/maintenance": "gpu-reconfiguration"},
        labels={**mig_state().labels, "nvidia.com/mig.config.state": "failed"},
    )
    cluster = Cluster(
        tmp_path,
        [failed],
        operator_pods(),
        restart_fixes={"app=nvidia-mig-manager": {"labels": {"nvidia.com/mig.config.state": "success"}}},
    )
    run = cluster.run(settle())
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1] == "gpucell: h200-1 is back in service"
    assert cluster.node()["spec"]["unschedulable"] is False


def test_a_device_plugin_that_does_not_see_the_new_devices_is_restarted(tmp_path: Path) -> None:
    """kubevirt/kubevirt#7084: a started device plugin does not re-read the host's devices."""
    stale = node(
        unschedulable=True,
        annotations={"gpucell.io/maintenance": "gpu-reconfiguration"},
        allocatable={"nvidia.com/gpu": "8"},
    )
    cluster = Cluster(
        tmp_path,
        [stale],
        operator_pods(),
        restart_fixes={"app=nvidia-device-plugin-daemonset": {"allocatable": MIG_RESOURCES}},
    )
    run = cluster.run(settle())
    assert run.returncode == 0, run.stderr
    assert cluster.state["restarted"] == ["gpu-operator app=nvidia-device-plugin-daemonset h200-1"]


def test_a_gpu_off_the_bus_ends_the_wait_naming_the_missing_count_and_the_quarantine(tmp_path: Path) -> None:
    """Issue 30: Xid 79 leaves the node short of one GPU's resources; no restart of the device plugin finds it."""
    short = {"nvidia.com/mig-1g.18gb": "14", "nvidia.com/mig-2g.35gb": "7", "nvidia.com/mig-3g.71gb": "7"}
    lost = node(unschedulable=True, annotations={"gpucell.io/maintenance": "k3s-upgrade"}, allocatable=short)
    cluster = Cluster(tmp_path, [lost], operator_pods())
    run = cluster.run(settle(mig_state(gpuStateTimeoutMinutes=30)))
    assert run.returncode == 1
    assert cluster.state["restarted"] == ["gpu-operator app=nvidia-device-plugin-daemonset h200-1"] * 2
    assert run.stderr.splitlines() == [
        "gpucell: h200-1 did not reach its GPU state; the wait ended after 180 s of at most 1800 s: 2 restarts of "
        "the device plugin did not bring the GPU resources back; it stays cordoned:",
        "allocatable nvidia.com/mig-1g.18gb is '14', expected 16",
        "allocatable nvidia.com/mig-2g.35gb is '7', expected 8",
        "allocatable nvidia.com/mig-3g.71gb is '7', expected 8",
        "gpucell: h200-1 is missing 2 of its 16 nvidia.com/mig-1g.18gb, 1 of its 8 nvidia.com/mig-2g.35gb, 1 of its 8 "
        "nvidia.com/mig-3g.71gb: a GPU its device plugin no longer finds is off the bus or failed (Xid 79 or "
        "48/74/94/95: see nvidia-smi and the kernel log on the host), which no restart brings back. Quarantine the "
        "host: quarantine: {reason: ...} on it under nodePools.h200.hosts in the stack config (its Node gets the "
        "taint gpucell.io/quarantine; docs/operations.md, 'Quarantine a host'), then run pulumi up again",
    ]
    assert cluster.node()["spec"]["unschedulable"] is True


def test_settle_survives_api_calls_that_fail_once(tmp_path: Path) -> None:
    reconfigured = node(unschedulable=True, annotations={"gpucell.io/maintenance": "gpu-reconfiguration"})
    flaky = [
        "get node h200-1 -o jsonpath={.status.conditions",
        "annotate node h200-1 --overwrite gpucell.io/k3s",
        "uncordon h200-1",
        "get node h200-1 -o jsonpath={.metadata.labels.nvidia",
    ]
    cluster = Cluster(tmp_path, [reconfigured], operator_pods(), flaky=flaky)
    run = cluster.run(settle())
    assert run.returncode == 0, run.stderr
    assert cluster.state["flaky"] == []  # each failed once
    assert "gpucell: kubectl uncordon failed (attempt 1 of 13); retrying in 5 s" in run.stderr.splitlines()
    assert cluster.node()["spec"]["unschedulable"] is False


def test_an_api_down_for_20_s_is_waited_out_and_one_down_for_good_names_the_way_out(tmp_path: Path) -> None:
    """Issue 30: 3 tries 5 s apart failed a step on an API server that restarted in about 20 s."""
    annotate = "annotate node h200-1 --overwrite gpucell.io/k3s"
    restarting = Cluster(tmp_path, [node()], operator_pods(), flaky=[annotate] * 5)
    run = restarting.run(settle())
    assert run.returncode == 0, run.stderr
    assert run.stderr.splitlines()[-1] == "gpucell: kubectl annotate failed (attempt 5 of 13); retrying in 5 s"
    down = Cluster(tmp_path, [node()], operator_pods(), flaky=[annotate] * 13)
    run = down.run(settle())
    assert run.returncode == 1
    assert run.stderr.splitlines()[-1] == (
        f"gpucell: kubectl {annotate}-config={DIGEST} could not reach the API for 60 s (13 attempts): longer than a "
        "restart of an API server takes; check the servers (sudo k3s kubectl get --raw=/readyz, journalctl -u k3s on "
        "each), then run pulumi up again: every step resumes from the node's state"
    )


def test_an_answer_of_the_api_is_not_retried(tmp_path: Path) -> None:
    """A kind whose CRD is missing answers at once and the same way every time."""
    cluster = Cluster(tmp_path, [node()], missing_kinds=["virtualmachineinstances.kubevirt.io"])
    script = settle().split("\nprune_labels\n")[0]  # its functions and first checks, then one call of kc
    run = cluster.run(script + "\nkc -n a get virtualmachineinstances.kubevirt.io b\n")
    assert run.returncode == 1
    assert run.stderr == 'error: the server doesn\'t have a resource type "virtualmachineinstances"\n'
    asked = [c for c in cluster.state["calls"] if "virtualmachineinstances" in c]
    assert asked == ["-n a get virtualmachineinstances.kubevirt.io b"]  # once: not retried


def test_prepare_survives_api_calls_that_fail_once(tmp_path: Path) -> None:
    cluster = Cluster(
        tmp_path,
        [node(version="v1.33.6+k3s1")],
        [pod("train-1")],
        flaky=["get node h200-1 -o jsonpath={.status.nodeInfo", "cordon h200-1"],
    )
    run = cluster.run(prepare())
    assert run.returncode == 0, run.stderr
    assert cluster.node()["spec"]["unschedulable"] is True
    assert cluster.calls("drain") == ["drain h200-1 --ignore-daemonsets --delete-emptydir-data --timeout=900s"]


def test_settle_fails_when_the_node_is_not_ready_on_the_new_version(tmp_path: Path) -> None:
    cluster = Cluster(
        tmp_path,
        [node(version="v1.33.6+k3s1", annotations={"gpucell.io/maintenance": "k3s-upgrade"}, unschedulable=True)],
    )
    run = cluster.run(settle())
    assert run.returncode == 1
    assert run.stderr == (
        "gpucell: h200-1 is not Ready on v1.34.2+k3s1 within 300 s (it reports 'True v1.33.6+k3s1'); "
        "it stays cordoned; see kubectl describe node h200-1 and the k3s service's journal on the "
        "host, then run pulumi up again\n"
    )


def test_a_cpu_node_does_not_wait_for_the_gpu_operator(tmp_path: Path) -> None:
    cpu = node(
        "lab-cpu-1",
        labels=cpu_state().labels,
        allocatable={},
        unschedulable=True,
        annotations={"gpucell.io/maintenance": "k3s-upgrade"},
    )
    cluster = Cluster(tmp_path, [cpu])
    script = settle(cpu_state())
    assert "gpu_state_problems" not in script
    run = cluster.run(script)
    assert run.returncode == 0, run.stderr
    assert cluster.node("lab-cpu-1")["spec"]["unschedulable"] is False


# -- removal ----------------------------------------------------------------------------------------------------
def test_removal_drains_a_ready_node(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, [node()], [pod("virt-launcher-vm1-x", owner=("VirtualMachineInstance", "vm1"))])
    run = cluster.run(maintenance.removal_drain_script(mig_state()))
    assert run.returncode == 0, run.stderr
    assert cluster.calls() == [
        "cordon h200-1",
        "-n tenant-acme delete virtualmachineinstances.kubevirt.io vm1 --ignore-not-found --wait=false",
        "drain h200-1 --ignore-daemonsets --delete-emptydir-data --timeout=900s",
    ]
    assert run.stdout.endswith("gpucell: h200-1 is drained and cordoned for removal\n")


def test_removal_does_not_wait_on_a_dead_node(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, [node(ready="Unknown")], [pod("training")])
    run = cluster.run(maintenance.removal_drain_script(mig_state()))
    assert run.returncode == 0, run.stderr
    assert cluster.calls() == ["cordon h200-1"]
    assert "not Ready (its kubelet is gone): not draining" in run.stdout


def test_removal_of_an_unregistered_node_and_the_last_step(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, [node()])
    assert cluster.run(maintenance.removal_drain_script(cpu_state())).stdout == (
        "gpucell: lab-cpu-1 is not registered: nothing to drain\n"
    )
    run = cluster.run(maintenance.forget_script(MIG_NODE))
    assert run.returncode == 0, run.stderr
    assert run.stdout == "gpucell: node h200-1 removed from the cell\n"
    assert cluster.calls() == [
        "delete node h200-1 --ignore-not-found --wait=false",
        "-n kube-system delete secret h200-1.node-password.k3s --ignore-not-found",
    ]
    assert cluster.state["nodes"] == {}
    assert cluster.run(maintenance.forget_script(MIG_NODE)).returncode == 0  # already gone: fine


def test_forget_without_k3s_on_the_control_server_succeeds(tmp_path: Path) -> None:
    run = Cluster(tmp_path, []).run(maintenance.forget_script(MIG_NODE), k3s_installed=False)
    assert run.returncode == 0
    assert run.stdout == "gpucell: k3s is not installed on this server: nothing to forget about h200-1\n"


# -- the whole GPU configuration --------------------------------------------------------------------------------
def test_a_changed_gpu_configuration_the_labels_do_not_show_takes_the_node_out(tmp_path: Path) -> None:
    """dra -> container (both workload.config=container) and an SR-IOV vGPU type (no vgpu.config label) show only
    in gpucell.io/gpu-config, which the last settle recorded."""
    state = mig_state()
    was_dra = node(annotations={"gpucell.io/gpu-config": "mode=dra"})
    cluster = Cluster(tmp_path, [was_dra], [pod("train-1")])
    run = cluster.run(prepare(state))
    assert run.returncode == 0, run.stderr
    assert "gpucell: taking h200-1 out of service: gpu-reconfiguration" in run.stdout.splitlines()
    assert cluster.node()["spec"]["unschedulable"] is True
    same = Cluster(tmp_path, [node(annotations={"gpucell.io/gpu-config": GPU_CONFIG})])
    assert same.run(prepare(state)).stdout.endswith("nothing to prepare\n")


def test_a_node_without_the_record_that_lacks_its_resources_is_reconfigured(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, [node(allocatable={"nvidia.com/gpu": "8"})])
    run = cluster.run(prepare())
    assert "gpucell: taking h200-1 out of service: gpu-reconfiguration" in run.stdout.splitlines()


def test_prepare_of_a_not_ready_node_fails_at_once_naming_the_way_out(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, [node(version="v1.33.6+k3s1", ready="Unknown")], [pod("train-1")])
    run = cluster.run(prepare())
    assert run.returncode == 1
    assert run.stderr == (
        "gpucell: h200-1 is not Ready (its kubelet does not answer), so it cannot be drained for: k3s-upgrade. If "
        "the host is down for good, set removalPolicy: forget on it and remove it from the config (see "
        "docs/operations.md, 'A host died'); if it was re-imaged, remove it in one pulumi up and add it back in the "
        "next ('A re-imaged host'); if it comes back, run pulumi up again\n"
    )
    assert cluster.calls() == []  # neither cordoned nor drained
    resumed = Cluster(
        tmp_path,
        [
            node(
                version="v1.33.6+k3s1",
                ready="Unknown",
                unschedulable=True,
                annotations={"gpucell.io/maintenance": "k3s-upgrade"},
            )
        ],
    )
    run = resumed.run(prepare())
    assert run.returncode == 0, run.stderr
    assert run.stdout == (
        "gpucell: h200-1 is not Ready but already out of service (k3s-upgrade): continuing its maintenance\n"
    )


# -- removalPolicy: forget --------------------------------------------------------------------------------------
def test_forgetting_a_dead_server_deletes_its_node_from_a_healthy_one(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, [node("fra1-srv-1", ready="Unknown")])
    run = cluster.run(maintenance.forget_script("fra1-srv-1", forgotten=True))
    assert run.returncode == 0, run.stderr
    assert run.stdout == "gpucell: node fra1-srv-1 removed from the cell\n"
    assert cluster.calls("delete") == ["delete node fra1-srv-1 --ignore-not-found --wait=false"]


def test_forgetting_a_host_whose_k3s_still_runs_is_refused(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, [node("fra1-srv-1")])
    run = cluster.run(maintenance.forget_script("fra1-srv-1", forgotten=True))
    assert run.returncode == 1
    assert run.stderr == (
        "gpucell: fra1-srv-1 is Ready: its k3s still runs, so removalPolicy: forget cannot remove it (its kubelet "
        "would register it again); set removalPolicy: delete on it to uninstall k3s over SSH, or stop k3s on it "
        "first\n"
    )
    assert cluster.calls("delete") == []


def test_a_forgotten_hosts_steps_do_nothing(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, [node("fra1-srv-1", ready="Unknown")])
    run = cluster.run(maintenance.forgotten_script("fra1-srv-1"))
    assert (run.returncode, run.stdout) == (
        0,
        "gpucell: fra1-srv-1 is removalPolicy: forget: nothing to do until it is removed from the config\n",
    )
    assert "calls" not in cluster.state


def test_shellcheck_passes_on_the_forget_and_retrigger_variants(tmp_path: Path) -> None:
    shellcheck = Path(sys.executable).parent / "shellcheck"
    scripts = {
        "forget": maintenance.forget_script("fra1-srv-1", forgotten=True),
        "forgotten": maintenance.forgotten_script("fra1-srv-1"),
        "settle-mig": settle(),
        "prepare-mig": prepare(),
        "settle-dra": settle(dra_state()),
        "settle-bake": settle(mig_state(bakeMinutes=10)),
        "prepare-window": maintenance.prepare_script(mig_state(), VERSION, DIGEST, next_in_line=("h200-2", "h200-3")),
        "prepare-sriov": maintenance.prepare_script(sriov_state(), VERSION, DIGEST, next_in_line=("lab-l40s-2",)),
        "settle-cpu-bake": maintenance.settle_script(
            replace(cpu_state(), rollout=mig_state(bakeMinutes=1).rollout), VERSION, DIGEST
        ),
    }
    paths = []
    for name, text in scripts.items():
        path = tmp_path / f"{name}.sh"
        path.write_text(text)
        paths.append(str(path))
    run = subprocess.run([str(shellcheck), "--shell=bash", *paths], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr


def test_pods_with_gpus_in_init_containers_or_dra_claims_are_evicted_too(tmp_path: Path) -> None:
    init = pod("prep-1", gpu=False)
    init["spec"]["initContainers"] = [{"name": "warm", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
    claim = pod("dra-1", gpu=False)
    claim["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "dra-1-gpu"}]
    dra_vm = pod("virt-launcher-cad-01-x", gpu=False, owner=("VirtualMachineInstance", "cad-01"))
    dra_vm["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "cad-01-gpu"}]
    plain = pod("web-1", gpu=False)
    cluster = Cluster(tmp_path, [node(annotations={"gpucell.io/gpu-config": "mode=dra"})], [init, claim, dra_vm, plain])
    run = cluster.run(prepare())
    assert run.returncode == 0, run.stderr
    assert [c for c in cluster.calls("create", "-n") if " get " not in c] == [
        "-n tenant-acme delete virtualmachineinstances.kubevirt.io cad-01 --ignore-not-found --wait=false",
        EVICT.format("tenant-acme", "prep-1"),
        EVICT.format("tenant-acme", "dra-1"),
    ]
    assert [p["metadata"]["name"] for p in cluster.state["pods"]] == ["web-1"]


# -- workloads given back ---------------------------------------------------------------------------------------
def vm(name: str, strategy: str, namespace: str = "tenant-acme") -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name, "annotations": {}}, "spec": {"runStrategy": strategy}}


@pytest.mark.parametrize("strategy", ["Always", "RerunOnFailure", "Manual"])
def test_a_gpu_vm_stopped_by_maintenance_is_started_again_after_its_node_settles(tmp_path: Path, strategy: str) -> None:
    launcher = pod("virt-launcher-desk-01-x", owner=("VirtualMachineInstance", "desk-01"))
    cluster = Cluster(
        tmp_path,
        [node(annotations={"gpucell.io/gpu-config": "mode=dra"})],
        [launcher],
        vms=[vm("desk-01", strategy), vm("other", "Always")],
    )
    assert cluster.run(prepare()).returncode == 0
    stopped = cluster.state["vms"][0]
    assert stopped["spec"]["runStrategy"] == "Halted"  # an Always VM does not start on the next node meanwhile
    assert stopped["metadata"]["annotations"] == {
        "gpucell.io/stopped-by-maintenance": MIG_NODE,
        "gpucell.io/run-strategy": strategy,
    }
    assert cluster.state["vms"][1]["spec"]["runStrategy"] == "Always"
    back = cluster.node()
    back["metadata"]["labels"] = {**mig_state().labels, "nvidia.com/mig.config.state": "success"}
    settled = Cluster(tmp_path, [back], operator_pods(), vms=cluster.state["vms"])
    run = settled.run(settle())
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-2:] == [
        f"gpucell: started VM tenant-acme/desk-01 again (runStrategy {strategy}), stopped for the maintenance of "
        "h200-1",
        "gpucell: h200-1 is back in service",
    ]
    given_back = settled.state["vms"][0]
    assert given_back["spec"]["runStrategy"] == strategy
    assert given_back["metadata"]["annotations"] == {}
    assert settled.state.get("started", []) == (["tenant-acme/desk-01"] if strategy == "Manual" else [])


def _halted(name: str, strategy: str, on: str = MIG_NODE) -> dict[str, Any]:
    """A VM a drain of ``on`` stopped: Halted, its own runStrategy recorded."""
    stopped = vm(name, "Halted")
    stopped["metadata"]["annotations"] = {
        "gpucell.io/stopped-by-maintenance": on,
        "gpucell.io/run-strategy": strategy,
    }
    return stopped


@pytest.mark.parametrize("strategy", ["Always", "RerunOnFailure"])
def test_a_removed_hosts_gpu_vms_get_their_run_strategy_back_and_start_elsewhere(tmp_path: Path, strategy: str) -> None:
    """Issue 30: the removal drain halts them, and no settle of that node runs again to give them back."""
    launcher = pod("virt-launcher-desk-01-x", owner=("VirtualMachineInstance", "desk-01"))
    cluster = Cluster(tmp_path, [node()], [launcher], vms=[vm("desk-01", strategy)])
    run = cluster.run(maintenance.removal_drain_script(mig_state()))
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-2:] == [
        f"gpucell: started VM tenant-acme/desk-01 again (runStrategy {strategy}), stopped for the maintenance of "
        "h200-1",
        "gpucell: h200-1 is drained and cordoned for removal",
    ]
    assert cluster.state["vms"][0] == vm("desk-01", strategy)
    assert cluster.node()["spec"]["unschedulable"] is True  # so it starts on another node


def test_gpu_vms_halted_by_a_drain_the_host_died_in_are_given_back(tmp_path: Path) -> None:
    """The host died mid-drain: this run finds it NotReady (no drain), or dies during its own drain."""
    dead = Cluster(tmp_path, [node(ready="Unknown")], [], vms=[_halted("desk-01", "Always"), vm("other", "Halted")])
    run = dead.run(maintenance.removal_drain_script(mig_state()))
    assert run.returncode == 0, run.stderr
    assert [v["spec"]["runStrategy"] for v in dead.state["vms"]] == ["Always", "Halted"]
    launcher = pod("virt-launcher-desk-01-x", owner=("VirtualMachineInstance", "desk-01"))
    dying = Cluster(
        tmp_path, [node()], [launcher, pod("web", gpu=False)], vms=[vm("desk-01", "Always")], drain_kills_node=True
    )
    run = dying.run(maintenance.removal_drain_script(mig_state()))
    assert run.returncode == 0, run.stderr
    assert (
        run.stdout.splitlines()[-1] == "gpucell: h200-1 is removed without its drain; its pods go with its Node object"
    )
    assert "PodDisruptionBudget" not in run.stderr
    assert dying.state["vms"][0] == vm("desk-01", "Always")


def test_a_failed_removal_drain_and_the_last_step_give_halted_vms_back(tmp_path: Path) -> None:
    launcher = pod("virt-launcher-desk-01-x", owner=("VirtualMachineInstance", "desk-01"))
    failing = Cluster(
        tmp_path,
        [node()],
        [launcher, pod("web", gpu=False)],
        vms=[vm("desk-01", "RerunOnFailure")],
        drain_fails="error: cannot delete Pods that declare no controller: tenant-acme/web",
    )
    assert failing.run(maintenance.removal_drain_script(mig_state())).returncode == 1
    assert failing.state["vms"][0] == vm("desk-01", "RerunOnFailure")
    forgotten = Cluster(tmp_path, [node(ready="Unknown")], [], vms=[_halted("desk-01", "Always", on="h200-1")])
    run = forgotten.run(maintenance.forget_script(MIG_NODE, forgotten=True))
    assert run.returncode == 0, run.stderr
    assert forgotten.state["vms"][0] == vm("desk-01", "Always")


# -- a GPU pool's rollout holds its next window of nodes still waiting (issues 18, 29) ----------------------------
OLD = "v1.33.6+k3s1"


def peer_state(name: str, **rollout: int) -> NodeState:
    """:func:`mig_state` for another node of the same pool."""
    return replace(mig_state(**rollout), name=name)


def held(cluster: Cluster) -> dict[str, str]:
    """Node -> the node that holds it."""
    nodes = cluster.state["nodes"].values()
    return {
        n["metadata"]["name"]: n["metadata"]["annotations"]["gpucell.io/held"]
        for n in nodes
        if "gpucell.io/held" in n["metadata"]["annotations"]
    }


def test_a_gpu_rollout_holds_only_its_next_window_and_they_take_over(tmp_path: Path) -> None:
    """Issue 18: VMs (and GPU pods) moved by the rollout must not land on a node that is next in line; issue 29: only
    the next window (rollout.maxUnavailable) is held, the rest of the pool keeps serving."""
    nodes = [
        node(MIG_NODE, version=OLD),
        node("h200-2", version=OLD),  # next in line, waits for the same upgrade: held
        node("h200-3"),  # next in line, already on the pinned version: left alone
        node("h200-4", version=OLD),  # beyond the window: keeps serving
        node("h200-5", version=OLD, unschedulable=True),  # cordoned by someone: left as it is
        node("cpu-1", version=OLD, labels={"gpucell.io/pool": "cpu"}),  # another pool
    ]
    cluster = Cluster(tmp_path, nodes, [pod("train-1")])
    script = maintenance.prepare_script(mig_state(maxUnavailable=2), VERSION, DIGEST, next_in_line=("h200-2", "h200-3"))
    run = cluster.run(script)
    assert run.returncode == 0, run.stderr
    assert (
        "gpucell: holding h200-2 (cordoned) until its own maintenance (k3s-upgrade): nothing this rollout moves "
        "lands there"
    ) in run.stdout.splitlines()
    assert held(cluster) == {"h200-2": MIG_NODE}
    assert cluster.node("h200-2")["spec"]["unschedulable"] is True
    for name in ("h200-3", "h200-4", "cpu-1"):
        assert cluster.node(name)["spec"] == {}, name
    assert cluster.node("h200-5")["metadata"]["annotations"] == {}
    # Beyond the window a node is not even looked at (a 39-node pool costs no 39 x reasons_of).
    assert not [c for c in cluster.calls("get") if c.startswith(("get node h200-4 ", "get node h200-5 "))]
    # Held before this node is drained, so the pods it evicts cannot go there.
    calls = cluster.calls("annotate", "cordon", "drain")
    assert calls.index("cordon h200-2") < calls.index(
        "drain h200-1 --ignore-daemonsets --delete-emptydir-data --timeout=900s"
    )

    # h200-2's own prepare takes it over: it is not "cordoned by someone else", so its settle will uncordon it.
    own = cluster.run(maintenance.prepare_script(peer_state("h200-2"), VERSION, DIGEST))
    assert own.returncode == 0, own.stderr
    assert cluster.node("h200-2")["metadata"]["annotations"] == {"gpucell.io/maintenance": "k3s-upgrade"}


def test_a_rollout_holds_at_most_its_next_window(tmp_path: Path) -> None:
    """A whole pool of 6 rolls a k3s upgrade 2 at a time in the order the cluster chains it (node i's prepare after
    node i - 2's settle; the install, on the host, moves the node to the new version): after every step at most
    maxUnavailable nodes are held and at most 2 x maxUnavailable are out of service, and none is left so."""
    names = [MIG_NODE, *(f"h200-{i}" for i in range(2, 7))]
    window = 2
    cluster = Cluster(
        tmp_path,
        [node(name, version=OLD) for name in names],
        [p for name in names for p in operator_pods_on(name)],
    )

    def out_of_service() -> tuple[int, int]:
        nodes = cluster.state["nodes"].values()
        return len(held(cluster)), sum(bool(n["spec"].get("unschedulable")) for n in nodes)

    def prepare_of(index: int) -> None:
        state = peer_state(names[index], maxUnavailable=window)
        script = maintenance.prepare_script(state, VERSION, DIGEST, next_in_line=tuple(names[index + 1 : index + 3]))
        run = cluster.run(script)
        assert run.returncode == 0, run.stderr
        state_now = cluster.state
        state_now["nodes"][names[index]]["status"]["nodeInfo"]["kubeletVersion"] = VERSION  # the install
        cluster.path.write_text(json.dumps(state_now))

    def settle_of(index: int) -> None:
        run = cluster.run(maintenance.settle_script(peer_state(names[index], maxUnavailable=window), VERSION, DIGEST))
        assert run.returncode == 0, run.stderr

    seen = []
    prepare_of(0)
    seen.append(out_of_service())
    prepare_of(1)
    seen.append(out_of_service())
    for index in range(len(names)):
        settle_of(index)
        if index + window < len(names):
            prepare_of(index + window)
        seen.append(out_of_service())
    assert max(h for h, _ in seen) == window
    assert max(o for _, o in seen) == 2 * window
    assert seen[-1] == (0, 0)
    assert seen[0] == (2, 3)  # h200-1 in maintenance, h200-2 and h200-3 held (h200-2 taken over next)


def operator_pods_on(name: str) -> list[dict[str, Any]]:
    """The GPU Operator's ready pods on node ``name``."""
    return [
        pod(f"nvidia-device-plugin-{name}", namespace="gpu-operator", on=name, owner=("DaemonSet", "dp"), gpu=False)
    ]


def test_a_failed_prepare_releases_the_peers_it_held_and_the_next_run_resumes(tmp_path: Path) -> None:
    nodes = [node(MIG_NODE, version=OLD), node("h200-2", version=OLD), node("h200-3", version=OLD)]
    cluster = Cluster(
        tmp_path,
        nodes,
        [pod("web", gpu=False)],
        drain_fails="error: cannot delete Pods that declare no controller (use --force to override): tenant-acme/web",
    )
    script = maintenance.prepare_script(mig_state(maxUnavailable=2), VERSION, DIGEST, next_in_line=("h200-2", "h200-3"))
    run = cluster.run(script)
    assert run.returncode == 1
    assert run.stdout.splitlines()[-2:] == [
        "gpucell: released h200-2 (held for the maintenance of h200-1, which failed)",
        "gpucell: released h200-3 (held for the maintenance of h200-1, which failed)",
    ]
    # issue 30: a drain refused at once says so, not that its timeout ran out
    assert run.stderr.splitlines()[-1].startswith("gpucell: kubectl drain h200-1 failed before its 900 s timeout")
    assert held(cluster) == {}
    for name in ("h200-2", "h200-3"):
        assert cluster.node(name)["spec"]["unschedulable"] is False, name
    # The node itself stays out of service, its reasons recorded for the next run.
    assert cluster.node()["spec"]["unschedulable"] is True
    assert cluster.node()["metadata"]["annotations"]["gpucell.io/maintenance"] == "k3s-upgrade"

    state = cluster.state
    del state["drain_fails"]
    cluster.path.write_text(json.dumps(state))
    again = cluster.run(script)
    assert again.returncode == 0, again.stderr
    assert held(cluster) == {"h200-2": MIG_NODE, "h200-3": MIG_NODE}


def test_a_failed_settle_releases_the_peers_held_for_it(tmp_path: Path) -> None:
    nodes = [
        node(MIG_NODE, version=OLD, unschedulable=True, annotations={"gpucell.io/maintenance": "k3s-upgrade"}),
        node("h200-2", version=OLD, unschedulable=True, annotations={"gpucell.io/held": MIG_NODE}),
        node("h200-3", version=OLD, unschedulable=True, annotations={"gpucell.io/held": "h200-9"}),  # not its own
    ]
    cluster = Cluster(tmp_path, nodes, operator_pods())
    run = cluster.run(settle())
    assert run.returncode == 1
    assert run.stderr.startswith(f"gpucell: h200-1 is not Ready on {VERSION} within 300 s")
    assert run.stdout.splitlines()[-1] == "gpucell: released h200-2 (held for the maintenance of h200-1, which failed)"
    assert held(cluster) == {"h200-3": "h200-9"}
    assert cluster.node("h200-2")["spec"]["unschedulable"] is False
    assert cluster.node()["spec"]["unschedulable"] is True


def test_the_release_survives_an_api_call_that_fails_once(tmp_path: Path) -> None:
    """An API server restarting under the rollout: the release retries (kc) rather than leaving a peer held."""
    nodes = [
        node(MIG_NODE, version=OLD, unschedulable=True, annotations={"gpucell.io/maintenance": "k3s-upgrade"}),
        node("h200-2", version=OLD, unschedulable=True, annotations={"gpucell.io/held": MIG_NODE}),
    ]
    cluster = Cluster(tmp_path, nodes, operator_pods(), flaky=["uncordon h200-2", "get nodes -l gpucell.io/pool=h200"])
    run = cluster.run(settle())
    assert run.returncode == 1
    assert "gpucell: kubectl uncordon failed (attempt 1 of 13); retrying in 5 s" in run.stderr.splitlines()
    assert held(cluster) == {}
    assert cluster.node("h200-2")["spec"]["unschedulable"] is False


def test_a_successful_step_releases_nothing(tmp_path: Path) -> None:
    nodes = [
        node(MIG_NODE, unschedulable=True, annotations={"gpucell.io/maintenance": "k3s-upgrade"}),
        node("h200-2", version=OLD, unschedulable=True, annotations={"gpucell.io/held": MIG_NODE}),
    ]
    cluster = Cluster(tmp_path, nodes, operator_pods())
    run = cluster.run(settle())
    assert run.returncode == 0, run.stderr
    assert held(cluster) == {"h200-2": MIG_NODE}  # its own prepare, next, takes it over


def test_an_sriov_retype_holds_every_node_still_typed_the_old_way(tmp_path: Path) -> None:
    """KubeVirt serves every vGPU type of a model under one resource name: beyond the window too."""
    state = sriov_state()
    old = {"gpucell.io/gpu-config": "mode=vm-vgpu,vgpu=L40S-24Q,vgpu-framework=sriov"}
    assert old["gpucell.io/gpu-config"] != state.gpu_profile
    names = ["lab-l40s-1", "lab-l40s-2", "lab-l40s-3", "lab-l40s-4"]
    nodes = [node(n, labels=dict(state.labels), annotations=dict(old), allocatable={}) for n in names]
    nodes[3]["status"]["nodeInfo"]["kubeletVersion"] = OLD
    nodes[3]["metadata"]["annotations"] = {"gpucell.io/gpu-config": state.gpu_profile}  # only k3s: not beyond
    cluster = Cluster(tmp_path, nodes)
    run = cluster.run(maintenance.prepare_script(state, VERSION, DIGEST, next_in_line=("lab-l40s-2",)))
    assert run.returncode == 0, run.stderr
    assert held(cluster) == {"lab-l40s-2": "lab-l40s-1", "lab-l40s-3": "lab-l40s-1"}


# -- the bake between windows (rollout.bakeMinutes) -----------------------------------------------------------------
def test_settle_bakes_the_node_back_in_service_before_the_next_one(tmp_path: Path) -> None:
    state = mig_state(bakeMinutes=1)
    cluster = Cluster(
        tmp_path, [node(unschedulable=True, annotations={"gpucell.io/maintenance": "k3s-upgrade"})], operator_pods()
    )
    run = cluster.run(maintenance.settle_script(state, VERSION, DIGEST))
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-2:] == [
        "gpucell: h200-1 is back in service",
        f"gpucell: h200-1 stayed Ready on {VERSION} through its bake (60 s)",
    ]
    calls = cluster.calls("annotate", "uncordon", "get node h200-1 -o jsonpath={.status.conditions")
    assert calls[-14:] == [
        f"annotate node h200-1 --overwrite gpucell.io/baking={VERSION}",
        *[
            'get node h200-1 -o jsonpath={.status.conditions[?(@.type=="Ready")].status} '
            "{.status.nodeInfo.kubeletVersion}"
        ]
        * 12,
        "annotate node h200-1 gpucell.io/baking-",
    ]
    assert "gpucell.io/baking" not in cluster.node()["metadata"]["annotations"]
    assert "bake" not in settle()  # bakeMinutes 0 (the default): nothing rendered


def test_a_failed_bake_stops_the_rollout_and_the_next_run_bakes_again(tmp_path: Path) -> None:
    baking = node(ready="False", annotations={"gpucell.io/baking": VERSION, "gpucell.io/k3s-config": DIGEST})
    cluster = Cluster(tmp_path, [baking], operator_pods())
    run = cluster.run(maintenance.settle_script(mig_state(bakeMinutes=1), VERSION, DIGEST))
    assert run.returncode == 1
    assert run.stdout.splitlines()[0] == "gpucell: h200-1's bake did not finish in the last run: baking it again"
    assert run.stderr == (
        "gpucell: h200-1 failed its bake after 5 s of 60 s: it reports 'False v1.34.2+k3s1'; the pool's rollout "
        "stops here; see kubectl describe node h200-1, then run pulumi up again\n"
    )
    assert cluster.node()["metadata"]["annotations"]["gpucell.io/baking"] == VERSION


def test_bake_minutes_are_bounded() -> None:
    with pytest.raises(ConfigError) as raised:
        mig_state(bakeMinutes=121)
    assert str(raised.value) == (
        "nodePools.h200.rollout.bakeMinutes: 121 is invalid: Input should be less than or equal to 120"
    )


def test_a_held_node_that_needs_nothing_is_released(tmp_path: Path) -> None:
    held = node("h200-2", unschedulable=True, annotations={"gpucell.io/held": MIG_NODE})
    cluster = Cluster(tmp_path, [held])
    run = cluster.run(maintenance.prepare_script(peer_state("h200-2"), VERSION, DIGEST))
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0] == (
        "gpucell: h200-2 needs no maintenance: released (it was held for the rollout begun on h200-1)"
    )
    assert cluster.node("h200-2")["spec"]["unschedulable"] is False
    assert cluster.node("h200-2")["metadata"]["annotations"] == {}


# -- the control server's API down: the cell's API endpoint ------------------------------------------------------
ENDPOINT = "https://10.20.0.5:6443"


def test_steps_use_the_api_endpoint_when_this_servers_api_does_not_answer(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, [node(version="v1.33.6+k3s1")], apis_down=["local"])
    run = cluster.run(maintenance.prepare_script(mig_state(), VERSION, DIGEST, api_endpoint=ENDPOINT))
    assert run.returncode == 0, run.stderr
    assert run.stderr.splitlines()[0] == (
        f"gpucell: the API on this server (127.0.0.1) does not answer; trying the cell's API endpoint {ENDPOINT}"
    )
    assert run.stdout.splitlines()[0] == f"gpucell: using the API at {ENDPOINT}: this server's own does not answer"
    assert cluster.node()["spec"]["unschedulable"] is True  # the maintenance went on through the endpoint


def test_steps_name_every_api_they_tried(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, [node()], apis_down=["local", ENDPOINT])
    run = cluster.run(maintenance.settle_script(mig_state(), VERSION, DIGEST, api_endpoint=ENDPOINT))
    assert run.returncode == 1
    assert run.stderr.splitlines()[-2:] == [
        f"gpucell: neither this server's API nor {ENDPOINT} answered within 120 s",
        "gpucell: the API server on this server does not answer; cannot settle h200-1",
    ]
    readyz = [c for c in cluster.state["calls"] if c == "get --raw=/readyz"]
    assert len(readyz) == 48  # 24 rounds of both


# -- quarantine --------------------------------------------------------------------------------------------------
def quarantined_state(reason: str = "gpu-3-xid-79") -> NodeState:
    return replace(mig_state(), quarantine=reason)


def test_a_quarantined_host_is_drained_its_vms_start_elsewhere_and_it_stays_cordoned(tmp_path: Path) -> None:
    launcher = pod("virt-launcher-desk-01-x", owner=("VirtualMachineInstance", "desk-01"))
    cluster = Cluster(
        tmp_path,
        [node(annotations={"gpucell.io/gpu-config": GPU_CONFIG, "gpucell.io/k3s-config": DIGEST})],
        [launcher, pod("web", gpu=False)],
        vms=[vm("desk-01", "Always")],
    )
    run = cluster.run(prepare(quarantined_state()))
    assert run.returncode == 0, run.stderr
    assert "gpucell: taking h200-1 out of service: quarantine" in run.stdout.splitlines()
    assert cluster.calls("drain") == ["drain h200-1 --ignore-daemonsets --delete-emptydir-data --timeout=900s"]
    assert cluster.state["vms"][0]["spec"]["runStrategy"] == "Halted"
    assert cluster.state["pods"] == []

    settled = Cluster(tmp_path, [cluster.node()], operator_pods(ready=False), vms=cluster.state["vms"])
    done = settled.run(settle(quarantined_state()))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == [
        "gpucell: started VM tenant-acme/desk-01 again (runStrategy Always), stopped for the maintenance of h200-1",
        "gpucell: h200-1 stays cordoned: quarantined (gpu-3-xid-79); its GPU VMs start again elsewhere",
    ]
    assert settled.node()["spec"]["unschedulable"] is True
    assert settled.node()["metadata"]["annotations"]["gpucell.io/maintenance"] == "quarantine"
    assert settled.calls("uncordon") == []
    assert not [c for c in settled.state["calls"] if "mig\\.config\\.state" in c]  # its GPU state is not waited for

    # Lifted: prepare does not drain again, settle waits for the GPU state and gives the host back.
    lifted_cluster = Cluster(tmp_path, [settled.node()], operator_pods())
    lifting = lifted_cluster.run(prepare())
    assert lifting.returncode == 0, lifting.stderr
    assert "gpucell: taking h200-1 out of service: quarantine-lifted" in lifting.stdout.splitlines()
    assert lifted_cluster.calls("drain", "create") == []
    assert lifted_cluster.node()["metadata"]["annotations"]["gpucell.io/maintenance"] == "quarantine-lifted"
    back = lifted_cluster.run(settle())
    assert back.returncode == 0, back.stderr
    assert back.stdout.splitlines()[-1] == "gpucell: h200-1 is back in service"
    assert lifted_cluster.node()["spec"]["unschedulable"] is False
    assert "gpucell.io/maintenance" not in lifted_cluster.node()["metadata"]["annotations"]


def test_a_dead_host_is_quarantined_without_a_drain(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, [node(ready="Unknown")], [pod("train-1")])
    run = cluster.run(prepare(quarantined_state()))
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1] == (
        "gpucell: h200-1 is not Ready: quarantined without a drain (its kubelet cannot confirm evictions; its pods go "
        "once it is back, or with its Node when it is removed)"
    )
    assert cluster.calls() == ["annotate node h200-1 --overwrite gpucell.io/maintenance=quarantine", "cordon h200-1"]


# -- stuck and failed GPU states ---------------------------------------------------------------------------------
def test_a_state_stuck_pending_restarts_its_manager_once_and_the_next_run_at_once(tmp_path: Path) -> None:
    stuck = node(
        unschedulable=True,
        annotations={"gpucell.io/maintenance": "gpu-reconfiguration"},
        labels={**mig_state().labels, "nvidia.com/mig.config.state": "pending"},
    )
    cluster = Cluster(tmp_path, [stuck], operator_pods())
    run = cluster.run(settle(mig_state(gpuStateTimeoutMinutes=10)))
    assert run.returncode == 1
    assert cluster.state["restarted"] == ["gpu-operator app=nvidia-mig-manager h200-1"]  # once in 10 minutes
    assert (
        "gpucell: restarting app=nvidia-mig-manager pods in gpu-operator on h200-1: nvidia.com/mig.config.state has "
        "not reached 'success' after 295 s (NVIDIA/gpu-operator#2833)"
    ) in run.stdout.splitlines()
    left = cluster.node()["metadata"]["annotations"]["gpucell.io/gpu-state-wait"]
    assert left == "nvidia.com/mig.config.state is 'pending', not 'success'"

    # The next pulumi up re-triggers before it waits: the restarted manager applies the layout this time.
    state = cluster.state
    state["restart_fixes"] = {"app=nvidia-mig-manager": {"labels": {"nvidia.com/mig.config.state": "success"}}}
    state["restarted"] = []
    cluster.path.write_text(json.dumps(state))
    again = cluster.run(settle(mig_state(gpuStateTimeoutMinutes=10)))
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[:2] == [
        f"gpucell: the last wait for h200-1's GPU state ran out ({left}): re-triggering what must act first",
        "gpucell: restarting app=nvidia-mig-manager pods in gpu-operator on h200-1: nvidia.com/mig.config.state has "
        "not reached 'success' after 0 s (NVIDIA/gpu-operator#2833)",
    ]
    assert "gpucell.io/gpu-state-wait" not in cluster.node()["metadata"]["annotations"]


def sriov_state() -> NodeState:
    from tests.test_host_setup import region

    spec = CellSpec.model_validate(region())
    return node_state(spec, "l40s-vgpu", spec.node_pools["l40s-vgpu"], "lab-l40s-1")


def test_failed_sriov_vgpu_typing_is_re_triggered_through_the_node(tmp_path: Path) -> None:
    """The VF-typing service runs on the host; settle re-triggers it through an annotation it reads every pass."""
    state = sriov_state()
    assert state.vf_type == "NVIDIA L40S-12Q"
    failed = node(
        "lab-l40s-1",
        labels=dict(state.labels),
        allocatable={},
        unschedulable=True,
        annotations={
            "gpucell.io/maintenance": "gpu-reconfiguration",
            "gpucell.io/vgpu-types": "failed NVIDIA L40S-12Q: 0000:41:00.0: 0 of 4 (4 VFs enabled); ",
        },
    )
    plugin = pod("virt-handler-x", namespace="kubevirt", on="lab-l40s-1", owner=("DaemonSet", "vh"), gpu=False)
    operator = pod("nvidia-vgpu-manager-x", namespace="gpu-operator", on="lab-l40s-1", owner=("DaemonSet", "m"))
    operator["spec"]["containers"][0]["resources"]["limits"] = {}
    cluster = Cluster(
        tmp_path,
        [failed],
        [plugin, operator],
        on_annotate={
            "gpucell.io/vgpu-types-retrigger": {
                "annotations": {"gpucell.io/vgpu-types": "success NVIDIA L40S-12Q"},
                "allocatable": {"nvidia.com/NVIDIA_L40S-12Q": "8"},
            }
        },
    )
    run = cluster.run(settle(state))
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0] == (
        "gpucell: re-triggering the SR-IOV vGPU typing on lab-l40s-1: SR-IOV vGPU typing is 'failed' "
        "(gpucell-vgpu-types.service on the host)"
    )
    assert [c.split("=")[0] for c in cluster.calls("annotate") if "retrigger" in c] == [
        "annotate node lab-l40s-1 --overwrite gpucell.io/vgpu-types-retrigger"
    ]
    assert cluster.node("lab-l40s-1")["spec"]["unschedulable"] is False


def test_a_failed_mdev_vgpu_state_restarts_the_vgpu_device_manager(tmp_path: Path) -> None:
    from tests.test_host_setup import region

    spec = CellSpec.model_validate(region())
    state = node_state(spec, "t4-vgpu", spec.node_pools["t4-vgpu"], "lab-t4-1")
    paused = {
        "nvidia.com/gpu.deploy.sandbox-validator": "paused-for-vgpu-change",
        "nvidia.com/gpu.deploy.sandbox-device-plugin": "paused-for-vgpu-change",
    }
    failed = node(
        "lab-t4-1",
        labels={**state.labels, "nvidia.com/vgpu.config.state": "failed", **paused},
        allocatable={"nvidia.com/NVIDIA_T4-8Q": "4"},
        unschedulable=True,
        annotations={"gpucell.io/maintenance": "gpu-reconfiguration"},
    )
    cluster = Cluster(
        tmp_path,
        [failed],
        [
            pod(
                "nvidia-sandbox-validator-x",
                namespace="gpu-operator",
                on="lab-t4-1",
                owner=("DaemonSet", "v"),
                gpu=False,
            )
        ],
        restart_fixes={"app=nvidia-vgpu-device-manager": {"labels": {"nvidia.com/vgpu.config.state": "success"}}},
    )
    run = cluster.run(settle(state))
    assert run.returncode == 0, run.stderr
    assert cluster.state["restarted"] == ["gpu-operator app=nvidia-vgpu-device-manager lab-t4-1"]
    # NVIDIA/gpu-operator#2845: the operands it left paused come back first, or its init container waits forever.
    assert run.stdout.splitlines()[:2] == [
        "gpucell: nvidia.com/gpu.deploy.sandbox-validator on lab-t4-1 was left paused-for-vgpu-change "
        "(NVIDIA/gpu-operator#2845): set back to true",
        "gpucell: nvidia.com/gpu.deploy.sandbox-device-plugin on lab-t4-1 was left paused-for-vgpu-change "
        "(NVIDIA/gpu-operator#2845): set back to true",
    ]
    labels = cluster.node("lab-t4-1")["metadata"]["labels"]
    assert {key: labels[key] for key in paused} == dict.fromkeys(paused, "true")


# -- upstream failure modes the removal steps prevent -----------------------------------------------------------
def test_a_removed_nodes_k3s_password_goes_with_it(tmp_path: Path) -> None:
    """k3s-io/k3s#6054: a host rebuilt under a removed node's name cannot join while its node password is kept."""
    cluster = Cluster(tmp_path, [node(ready="Unknown")])
    run = cluster.run(maintenance.forget_script(MIG_NODE))
    assert run.returncode == 0, run.stderr
    assert cluster.state["deleted_secrets"] == ["kube-system/h200-1.node-password.k3s"]
    assert cluster.calls("delete", "-n") == [
        "delete node h200-1 --ignore-not-found --wait=false",
        "-n kube-system delete secret h200-1.node-password.k3s --ignore-not-found",
    ]


def server_state() -> NodeState:
    return replace(mig_state(), name="srv-3", role=NodeRole.SERVER)


def etcd_node(name: str, ready: str = "True") -> dict[str, Any]:
    return node(name, ready=ready, labels={"node-role.kubernetes.io/etcd": "true"}, allocatable={})


def test_a_server_is_not_removed_while_another_server_is_down(tmp_path: Path) -> None:
    """k3s-io/k3s#3513: removing a server while another is down leaves etcd without quorum."""
    nodes = [etcd_node("srv-1"), etcd_node("srv-2", ready="Unknown"), etcd_node("srv-3")]
    cluster = Cluster(tmp_path, nodes)
    run = cluster.run(maintenance.removal_drain_script(server_state()))
    assert run.returncode == 1
    assert run.stderr == (
        "gpucell: not removing server srv-3 while srv-2 is not Ready: etcd would be left with too few members "
        "answering to keep its quorum (k3s-io/k3s#3513). Bring it back, or remove it first (removalPolicy: forget, "
        "docs/operations.md 'A host died'), then run pulumi up again\n"
    )
    assert cluster.calls() == []  # not even cordoned
    healthy = Cluster(tmp_path, [etcd_node("srv-1"), etcd_node("srv-2"), etcd_node("srv-3")])
    assert healthy.run(maintenance.removal_drain_script(server_state())).returncode == 0
    assert healthy.calls("cordon", "drain")[0] == "cordon srv-3"


def longhorn_objects(*replicas_on: str) -> dict[str, list[dict[str, Any]]]:
    return {
        "nodes.longhorn.io": [{"metadata": {"name": MIG_NODE, "namespace": "longhorn-system"}, "spec": {}}],
        "replicas.longhorn.io": [
            {
                "metadata": {
                    "name": f"pvc-{index}-r-{host}",
                    "namespace": "longhorn-system",
                    "labels": {"longhorn.io/node": host},
                }
            }
            for index, host in enumerate(replicas_on)
        ],
    }


def test_longhorn_rebuilds_a_removed_nodes_replicas_before_it_goes(tmp_path: Path) -> None:
    """longhorn/longhorn#1631: a node deleted with replicas on it leaves their volumes stuck."""
    cluster = Cluster(tmp_path, [node()], objects=longhorn_objects(MIG_NODE, MIG_NODE, "h200-2"))
    run = cluster.run(maintenance.removal_drain_script(mig_state(), longhorn=True))
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-2:] == [
        "gpucell: Longhorn rebuilt every replica of h200-1 on other nodes",
        "gpucell: h200-1 is drained and cordoned for removal",
    ]
    assert cluster.state["objects"]["nodes.longhorn.io"][0]["spec"] == {
        "allowScheduling": False,
        "evictionRequested": True,
    }
    assert [r["metadata"]["name"] for r in cluster.state["objects"]["replicas.longhorn.io"]] == ["pvc-2-r-h200-2"]

    stuck = Cluster(tmp_path, [node()], objects=longhorn_objects(MIG_NODE), longhorn_evicts=False)
    run = stuck.run(maintenance.removal_drain_script(mig_state(drainTimeoutMinutes=1), longhorn=True))
    assert run.returncode == 1
    assert run.stderr == (
        "gpucell: Longhorn replicas still on h200-1 after 60 s: replicas.longhorn.io/pvc-0-r-h200-1 - their volumes "
        "have nowhere else to go (storage.replicas above the nodes left, or too little disk); h200-1 stays cordoned; "
        "see kubectl -n longhorn-system get volumes.longhorn.io, then run pulumi up again\n"
    )
