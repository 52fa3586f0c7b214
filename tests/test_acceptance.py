"""A GPU node's acceptance run (issue 31, docs/decisions/0037): the spec, the Job, and the settle that runs it, for
real by bash against the stubbed ``k3s kubectl`` (tests/kubectl_stub.py)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucell.errors import ConfigError
from gpucell.k3s import _maintenance_scripts as maintenance
from gpucell.k3s._acceptance import AcceptancePlan, acceptance_plan, job_manifest, job_name
from gpucell.k3s._node_state import NodeState, node_state
from gpucell.spec import CellSpec
from gpucell.spec.versions import Versions
from gpucell.stacks.plan_diff import unwrap_script
from gpucell.tenancy.tenant_admission import GPUCELL_TAINTS
from tests.conftest import UPSTREAM, minimal_cell_config, shared_plan, violations
from tests.test_maintenance import DIGEST, VERSION, Cluster, operator_pods

NODE = "h100-1"
MACHINE = "4f1c0ffee0d94b5c8e0e1a2b3c4d5e6f"
TAINT = {"key": "gpucell.io/acceptance", "effect": "NoSchedule"}
POOL_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def h100_pool(**acceptance: Any) -> dict[str, Any]:
    return {
        "role": "gpu",
        "gpuModel": "H100-SXM5-80GB",
        "gpusPerNode": 8,
        "gpuMode": "container",
        "hosts": [{"name": NODE, "address": "10.20.0.61"}],
        "taints": ["nvidia.com/gpu=present:NoSchedule"],
        **({"acceptance": acceptance} if acceptance else {}),
    }


def spec_with(pool: dict[str, Any]) -> CellSpec:
    config = minimal_cell_config()
    config["nodePools"]["h100"] = pool
    return CellSpec.model_validate(config)


def state_and_plan(pool: dict[str, Any] | None = None) -> tuple[NodeState, AcceptancePlan | None]:
    spec = spec_with(pool or h100_pool())
    found = spec.node_pools["h100"]
    return node_state(spec, "h100", found, NODE), acceptance_plan(found, spec.versions)


def settle(pool: dict[str, Any] | None = None) -> str:
    state, plan = state_and_plan(pool)
    return maintenance.settle_script(state, VERSION, DIGEST, acceptance=plan)


def h100_node(*, annotations: dict[str, str] | None = None, unschedulable: bool = False) -> dict[str, Any]:
    state, _ = state_and_plan()
    return {
        "metadata": {
            "name": NODE,
            "labels": {**state.labels, "nvidia.com/mig.config.state": "success"},
            "annotations": annotations or {},
        },
        "spec": {"taints": [POOL_TAINT], **({"unschedulable": True} if unschedulable else {})},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "nodeInfo": {"kubeletVersion": VERSION, "machineID": MACHINE},
            "allocatable": {"cpu": "224", "nvidia.com/gpu": "8"},
        },
    }


def pods() -> list[dict[str, Any]]:
    return [{**p, "spec": {**p["spec"], "nodeName": NODE}} for p in operator_pods()]


PASS_LOGS = (
    "... dcgmi diag output ...\n"
    "gpucell-acceptance: PASS dcgmi diag -r 2\n"
    "gpucell-acceptance: PASS all-reduce bus bandwidth 478.21 GB/s across 8 GPUs (at least 225)\n"
)
FAIL_LOGS = (
    "gpucell-acceptance: PASS dcgmi diag -r 2\n"
    "gpucell-acceptance: FAIL all-reduce bus bandwidth 21.40 GB/s across 8 GPUs is below 225 GB/s (an NVLink, "
    "NVSwitch or Fabric Manager fault, or a PCIe link trained down)\n"
)


# -- the settle -------------------------------------------------------------------------------------------------
def test_a_node_that_joins_is_kept_from_tenants_until_its_run_passes(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, [h100_node()], pods(), job_outcome="Complete", job_logs=PASS_LOGS)
    run = cluster.run(settle())
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "gpucell: h100-1 keeps the taint gpucell.io/acceptance (no tenant workload) until its acceptance run passes, "
        "after joining the cell",
        "gpucell: the GPU Operator reports h100-1 in its new GPU state",
        "gpucell: running the acceptance Job gpu-operator/gpucell-acceptance-h100-1 on h100-1 (about 6 min, at most "
        "12 min)",
        "gpucell: h100-1 passed its acceptance run (after joining the cell); the taint gpucell.io/acceptance is lifted",
        "  PASS dcgmi diag -r 2",
        "  PASS all-reduce bus bandwidth 478.21 GB/s across 8 GPUs (at least 225)",
        "gpucell: h100-1 is back in service",
    ]
    # The taint went on before the run and came off after it; the pool's own taint stays.
    calls = cluster.calls("taint", "apply")
    assert calls[0] == "taint node h100-1 gpucell.io/acceptance:NoSchedule --overwrite"
    assert calls[1].startswith("apply -f ")
    assert calls[2] == "taint node h100-1 gpucell.io/acceptance:NoSchedule-"
    assert cluster.node(NODE)["spec"]["taints"] == [POOL_TAINT]
    annotations = cluster.node(NODE)["metadata"]["annotations"]
    assert annotations["gpucell.io/acceptance"] == "passed"
    assert annotations["gpucell.io/acceptance-machine"] == MACHINE
    assert "gpucell.io/acceptance-result" not in annotations
    assert cluster.state["jobs"] == {}  # deleted once passed
    job = cluster.state["applied"][0]
    assert job == json.loads(
        json.dumps(
            job_manifest(state_and_plan()[1], NODE, ["nvidia.com/gpu=present:NoSchedule"]) | {"status": job["status"]}
        )
    )


def test_a_failed_run_leaves_the_node_out_of_service_with_its_reason(tmp_path: Path) -> None:
    reconfigured = h100_node(
        annotations={"gpucell.io/maintenance": "gpu-reconfiguration", "gpucell.io/k3s-config": DIGEST},
        unschedulable=True,
    )
    cluster = Cluster(tmp_path, [reconfigured], pods(), job_outcome="Failed", job_logs=FAIL_LOGS)
    run = cluster.run(settle())
    assert run.returncode == 1
    reason = (
        "all-reduce bus bandwidth 21.40 GB/s across 8 GPUs is below 225 GB/s (an NVLink, NVSwitch or Fabric Manager "
        "fault, or a PCIe link trained down)"
    )
    assert run.stderr.splitlines() == [
        f"gpucell: h100-1 failed its acceptance run (after a GPU reconfiguration): {reason}",
        "it stays out of service (taint gpucell.io/acceptance, the reason in its annotation "
        "gpucell.io/acceptance-result); see kubectl -n gpu-operator logs job/gpucell-acceptance-h100-1 "
        "--all-containers; repair or replace the GPU (or quarantine the host: quarantine: {reason: ...} on it), then "
        "run pulumi up again, which runs acceptance again",
    ]
    after = cluster.node(NODE)
    assert after["spec"]["taints"] == [POOL_TAINT, TAINT]
    assert after["spec"]["unschedulable"] is True  # still cordoned, still in maintenance
    assert after["metadata"]["annotations"]["gpucell.io/acceptance"] == "failed"
    assert after["metadata"]["annotations"]["gpucell.io/acceptance-result"] == reason
    assert after["metadata"]["annotations"]["gpucell.io/maintenance"] == "gpu-reconfiguration"
    assert cluster.calls("uncordon") == []
    # The Job stays for its logs; the next settle runs it again and a pass takes the node back.
    assert list(cluster.state["jobs"]) == ["gpu-operator/gpucell-acceptance-h100-1"]
    state = cluster.state
    state.update(job_outcome="Complete", job_logs=PASS_LOGS)
    cluster.path.write_text(json.dumps(state))
    again = cluster.run(settle())
    assert again.returncode == 0, again.stderr
    assert (
        "gpucell: h100-1 passed its acceptance run (after a GPU reconfiguration); the taint gpucell.io/"
        "acceptance is lifted" in again.stdout.splitlines()
    )
    after = cluster.node(NODE)
    assert after["spec"] == {"taints": [POOL_TAINT], "unschedulable": False}
    assert "gpucell.io/acceptance-result" not in after["metadata"]["annotations"]


def test_a_run_that_does_not_finish_fails_at_its_timeout(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, [h100_node()], pods(), job_logs="")
    run = cluster.run(settle(h100_pool(dcgmLevel=1, allReduce=False, timeoutMinutes=3)))  # the shortest run: 3 min
    assert run.returncode == 1
    assert run.stderr.splitlines()[0] == (
        "gpucell: h100-1 failed its acceptance run (after joining the cell): the acceptance Job did not finish within "
        "180 s"
    )
    assert cluster.node(NODE)["spec"]["taints"] == [POOL_TAINT, TAINT]


@pytest.mark.parametrize(
    ("annotations", "machine", "why"),
    [
        ({"gpucell.io/acceptance": "passed"}, "0ld0", "a re-image (machine ID " + MACHINE + ")"),
        ({"gpucell.io/maintenance": "quarantine-lifted"}, MACHINE, "a lifted quarantine"),
        ({"gpucell.io/acceptance": "running"}, MACHINE, "an acceptance run that was interrupted"),
    ],
    ids=["re-image", "quarantine-lifted", "interrupted"],
)
def test_a_node_coming_back_runs_acceptance_again(
    tmp_path: Path, annotations: dict[str, str], machine: str, why: str
) -> None:
    back = h100_node(
        annotations={**annotations, "gpucell.io/k3s-config": DIGEST, "gpucell.io/acceptance-machine": machine}
    )
    cluster = Cluster(tmp_path, [back], pods(), job_outcome="Complete", job_logs=PASS_LOGS)
    run = cluster.run(settle())
    assert run.returncode == 0, run.stderr
    assert f"gpucell: h100-1 passed its acceptance run (after {why}); the taint gpucell.io/acceptance is lifted" in (
        run.stdout.splitlines()
    )


def test_a_node_in_service_before_acceptance_is_adopted_and_a_passed_one_is_left_alone(tmp_path: Path) -> None:
    in_service = h100_node(annotations={"gpucell.io/k3s-config": DIGEST})
    cluster = Cluster(tmp_path, [in_service], pods())
    run = cluster.run(settle())
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1] == "gpucell: h100-1 was not taken out of service; nothing to settle"
    annotations = cluster.node(NODE)["metadata"]["annotations"]
    assert (annotations["gpucell.io/acceptance"], annotations["gpucell.io/acceptance-machine"]) == ("adopted", MACHINE)
    assert cluster.calls("taint", "apply") == []
    again = cluster.run(settle())
    assert again.returncode == 0, again.stderr
    assert cluster.calls("taint", "apply", "annotate node h100-1 --overwrite gpucell.io/acceptance") == [
        f"annotate node h100-1 --overwrite gpucell.io/acceptance=adopted gpucell.io/acceptance-machine={MACHINE}"
    ]


def test_a_quarantined_host_runs_no_acceptance(tmp_path: Path) -> None:
    pool = h100_pool()
    pool["hosts"] = [{"name": NODE, "address": "10.20.0.61", "quarantine": {"reason": "gpu-3-xid-79"}}]
    quarantined = h100_node(annotations={"gpucell.io/maintenance": "quarantine"}, unschedulable=True)
    cluster = Cluster(tmp_path, [quarantined], pods(), job_outcome="Complete")
    run = cluster.run(settle(pool))
    assert run.returncode == 0, run.stderr
    assert cluster.calls("taint", "apply") == []


def test_a_pool_that_skips_acceptance_has_no_run_in_its_settle() -> None:
    _, plan = state_and_plan(h100_pool(skip=True))
    assert plan is None
    assert "acceptance" not in settle(h100_pool(skip=True))


# -- what runs ------------------------------------------------------------------------------------------------------
def test_the_nvidia_run_is_dcgm_then_the_all_reduce_pinned_to_the_node() -> None:
    _, plan = state_and_plan()
    assert plan is not None
    job = job_manifest(plan, NODE, ["nvidia.com/gpu=present:NoSchedule"])
    pod = job["spec"]["template"]["spec"]
    assert job["metadata"] == {
        "name": "gpucell-acceptance-h100-1",
        "namespace": "gpu-operator",
        "labels": {"app.kubernetes.io/managed-by": "gpucell", "app.kubernetes.io/name": "gpucell-acceptance"},
    }
    assert (job["spec"]["backoffLimit"], job["spec"]["activeDeadlineSeconds"]) == (0, 720)
    assert pod["nodeSelector"] == {"kubernetes.io/hostname": NODE}
    assert pod["tolerations"] == [
        {"key": "gpucell.io/acceptance", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
    ]
    assert pod["runtimeClassName"] == "nvidia"
    (dcgm,) = pod["initContainers"]
    (reduce,) = pod["containers"]
    assert dcgm["image"] == "nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04"
    assert "readonly LEVEL=2\n" in dcgm["command"][2]
    assert reduce["image"] == "ghcr.io/coreweave/nccl-tests:12.9.1-devel-ubuntu24.04-nccl2.29.2-1-d73ec07"
    assert "readonly GPUS=8\nreadonly MIN_BUSBW=225\n" in reduce["command"][2]
    assert plan.seconds == 360  # images 120 + DCGM level 2 120 + all-reduce 120


def test_a_mig_pool_runs_dcgm_only_and_a_vm_pool_checks_from_the_host() -> None:
    mig = h100_pool()
    mig["migConfig"] = "all-1g.10gb"
    _, plan = state_and_plan(mig)
    assert plan is not None
    assert (plan.all_reduce, plan.dcgm_level) == (False, 2)
    vm = {**h100_pool(), "gpuMode": "vm-passthrough"}
    _, host = state_and_plan(vm)
    assert host is not None
    assert (host.kind, host.driver, host.pci_device_id, host.seconds, host.timeout_seconds) == (
        "host", "vfio-pci", "2330", 120, 600,
    )  # fmt: skip
    pod = job_manifest(host, NODE, [])["spec"]["template"]["spec"]
    assert "runtimeClassName" not in pod
    (check,) = pod["containers"]
    assert check["securityContext"]["runAsNonRoot"] is True
    assert "readonly GPUS=8\nreadonly DEVICE=2330\nreadonly DRIVER=vfio-pci\n" in check["command"][2]


def test_both_jobs_are_valid_batch_v1_jobs() -> None:
    """The Job is applied by the settle over SSH, not rendered as a Pulumi object, so --check does not see it."""
    _, plan = state_and_plan()
    _, host = state_and_plan({**h100_pool(), "gpuMode": "vm-passthrough"})
    assert plan is not None
    assert host is not None
    assert violations(job_manifest(plan, NODE, ["nvidia.com/gpu=present:NoSchedule"])) == []
    assert violations(job_manifest(host, NODE, [])) == []
    wrong = job_manifest(host, NODE, [])
    wrong["spec"]["backoffLimits"] = 0
    assert violations(wrong) != []  # the checker does read Jobs


def test_a_long_node_name_gives_a_job_name_within_63_characters() -> None:
    name = job_name("gpu-node-" + "x" * 60)
    assert len(name) <= 63
    assert name.startswith("gpucell-acceptance-gpu-node-x")


# -- the spec ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pool", "message"),
    [
        (
            {**h100_pool(), "gpuMode": "vm-passthrough", "acceptance": {"allReduce": False}},
            "nodePools.h100.acceptance.allReduce: does not apply to vm-passthrough pools: their GPUs are bound to "
            "vfio-pci or serve vGPUs, so acceptance checks them from the host (PCI bus, link, AER; "
            "docs/decisions/0037); remove it",
        ),
        (
            h100_pool(dcgmLevel=5),
            "nodePools.h100.acceptance.dcgmLevel: 5 is invalid: Input should be less than or equal to 4",
        ),
        (
            {"role": "cpu", "hosts": [{"name": "c", "address": "10.0.0.9"}], "acceptance": {}},
            "nodePools.h100.acceptance: set is only valid on gpu pools (this pool's role is cpu)",
        ),
        (  # the new-user trial: level 3 takes about 19 min here, so every node would fail at 5
            h100_pool(dcgmLevel=3, timeoutMinutes=5),
            "nodePools.h100.acceptance.timeoutMinutes: 5 is shorter than the run itself, about 19 min on this pool "
            "(image pulls, DCGM's level, the all-reduce; docs/decisions/0037): every node would fail acceptance "
            "and stay out of service; give at least 19, or leave it unset (twice the estimate)",
        ),
        (
            h100_pool(skip=True, dcgmLevel=3),
            "nodePools.h100.acceptance.dcgmLevel: is set beside skip: true, which runs no acceptance; remove one of "
            "them",
        ),
        (
            {**h100_pool(allReduce=True), "migConfig": "all-1g.10gb"},
            "nodePools.h100.acceptance.allReduce: true does not run on a MIG pool (NVLink is off in MIG mode, so its "
            "nodes run DCGM's diagnostics only; docs/decisions/0037); remove it",
        ),
    ],
    ids=[
        "vm-pool-all-reduce",
        "level-5",
        "cpu-pool",
        "timeout-below-the-run",
        "skip-beside-settings",
        "mig-all-reduce",
    ],
)
def test_bad_acceptance_settings_are_one_line(pool: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        spec_with(pool)
    assert message in str(raised.value).splitlines()


def test_an_hgx_model_without_a_bandwidth_figure_needs_one() -> None:
    b200 = {**h100_pool(), "gpuModel": "B200"}
    with pytest.raises(ConfigError) as raised:
        spec_with(b200)
    assert str(raised.value) == (
        "nodePools.h100.acceptance.minBusBandwidthGbps: is required: gpucell has no all-reduce bus bandwidth for "
        "'B200', an HGX model; give the least GB/s all_reduce_perf must reach on a healthy node, or allReduce: false"
    )
    _, plan = state_and_plan({**b200, "acceptance": {"minBusBandwidthGbps": 400}})
    assert plan is not None
    assert plan.min_bus_bandwidth_gbps == 400.0


def test_a_timeout_as_long_as_the_run_is_accepted() -> None:
    _, plan = state_and_plan(h100_pool(dcgmLevel=3, timeoutMinutes=19))
    assert plan is not None
    assert (plan.seconds, plan.timeout_seconds) == (1140, 1140)


def test_tenants_can_never_tolerate_the_acceptance_taint() -> None:
    assert "gpucell.io/acceptance" in GPUCELL_TAINTS


# -- images -------------------------------------------------------------------------------------------------------
def test_the_dcgm_image_is_the_one_the_gpu_operator_pins() -> None:
    values = yaml.safe_load((UPSTREAM / "gpu-operator" / "values.yaml").read_text())
    assert f"{values['dcgm']['repository']}/{values['dcgm']['image']}" == "nvcr.io/nvidia/cloud-native/dcgm"
    assert Versions().dcgm == values["dcgm"]["version"]


@pytest.mark.parametrize("key", ["dcgm", "ncclTests"])
def test_acceptance_images_are_pinned(key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        Versions.model_validate({key: "latest"})
    assert re.search(rf"^{key}: .*is not a pinned release", str(raised.value))


# -- the prod stack -------------------------------------------------------------------------------------------------
def test_every_gpu_node_of_prod_runs_acceptance_before_tenants() -> None:
    """Every GPU node's -settle in both prod regions taints it and runs its acceptance Job (the nvidia run on
    container and dra pools, host-side checks on VM pools); the GPU Operator's operands tolerate the taint."""
    kinds: dict[str, str] = {}
    for region in ("fra1", "iad1"):
        plan = shared_plan(f"prod-{region}")
        resources = plan.region_resources(region)
        patches = [r for r in resources if r.type == "kubernetes:core/v1:NodePatch"]
        gpu_nodes = {
            p.inputs["metadata"]["name"]: p.inputs["metadata"]["labels"]["nvidia.com/gpu.workload.config"]
            for p in patches
            if "nvidia.com/gpu.workload.config" in p.inputs["metadata"]["labels"]
        }
        assert gpu_nodes
        for node, mode in gpu_nodes.items():
            script = unwrap_script(plan.result.named(f"{region}-k3s-{node}-settle").inputs["create"]) or ""
            assert 'run_acceptance "$accept" || exit 1' in script, node
            job = json.loads(first_word(script.split("\nreadonly ACCEPT_JOB=", 1)[1]))
            containers = [c["name"] for c in job["spec"]["template"]["spec"].get("initContainers", [])]
            containers += [c["name"] for c in job["spec"]["template"]["spec"]["containers"]]
            kinds[f"{region}/{node}"] = f"{mode}: {' '.join(containers)}"
        operator = next(r for r in resources if r.name.endswith("-gpu-operator-gpu-operator"))
        assert TAINT | {"operator": "Exists"} in operator.inputs["values"]["daemonsets"]["tolerations"]
    assert set(kinds.values()) == {
        "vm-passthrough: host-checks",
        "vm-vgpu: host-checks",
        "container: dcgm-diag all-reduce",  # the H200 pool without MIG, and fra1's L4 dra pool
        "container: dcgm-diag",  # the MIG pool: NVLink is off in MIG mode
    }
    assert kinds["fra1/fra1-h200-1"] == "container: dcgm-diag"


def first_word(text: str) -> str:
    """The first shell word of ``text``, unquoted."""
    lexer = shlex.shlex(text, posix=True)
    lexer.whitespace_split = True
    return str(lexer.get_token())
