"""The guard in ``pulumi up``: the program reads its last deployment with the engine's ``readStackOutputs`` invoke
for itself and refuses unacknowledged disruptive changes before registering anything (mocked previous
deployments)."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pulumi
import pytest
from pulumi.runtime.mocks import MockCallArgs, MockResourceArgs

from gpucell.day2.disruption import fingerprint
from gpucell.engine.mock_engine import PlanResult, run_program
from gpucell.errors import ConfigError
from gpucell.stacks.guard import integral_numbers
from gpucell.stacks.plan import make_plan
from gpucell.stacks.program import build_cells
from gpucell.stacks.program import main as program_main
from gpucell.testing import fake_kubeconfig
from tests.conftest import REPO, cell, minimal_cell_config, shared_plan

READ_STACK_OUTPUTS = "pulumi:pulumi:readStackOutputs"
POD_CIDR_REFUSAL = (
    "regions.lab.network.podCidr: 10.42.0.0/16 -> 10.52.0.0/16 is a disruptive change (podCidr: every pod and VM "
    "keeps its address from the old range until it is recreated, and gpucell does not migrate the pod ranges "
    "Cilium already gave the nodes; plan a restart of every workload, and update network policies and firewalls "
    'written for the old range); to apply it, add {change: podCidr, region: lab, reason: "..."} to '
    "gpucell:acknowledge"
)


class Deployment:
    """A mocked previous deployment: what the engine's ``readStackOutputs`` returns, and every registration seen."""

    def __init__(self, outputs: dict[str, Any] | None) -> None:
        self.outputs = outputs
        self.reads: list[MockCallArgs] = []
        self.registered: list[str] = []

    def invoke(self, args: MockCallArgs) -> dict[str, Any]:
        assert args.token == READ_STACK_OUTPUTS
        self.reads.append(args)
        name = args.args["name"]
        return (
            {"name": name, "outputs": {}, "secretOutputNames": []}
            if self.outputs is None
            else {"name": name, "outputs": self.outputs, "secretOutputNames": []}
        )

    def __call__(self, args: MockResourceArgs) -> dict[str, Any]:
        self.registered.append(args.name)
        if args.typ == "command:remote:Command" and args.name.endswith("-kubeconfig"):
            return {"stdout": fake_kubeconfig(6443)}
        return {}


def run(
    regions: dict[str, Any], deployment: Deployment, acknowledge: list[Any] | None = None, stack: str = "prod"
) -> PlanResult:
    config: dict[str, Any] = {"gpucell:regions": regions, "gpucell:sshPrivateKey": "key"}
    if acknowledge is not None:
        config["gpucell:acknowledge"] = acknowledge
    return run_program(
        build_cells,
        stack=stack,
        config=config,
        secret_keys=["gpucell:sshPrivateKey"],
        computed=deployment,
        invoked=deployment.invoke,
    )


def deployed_lab() -> dict[str, Any]:
    """Outputs of a deployment of the minimal region as ``lab``."""
    return {
        "lab": {"apiServerUrl": "https://10.20.0.11:6443"},
        "labKubeconfig": "kubeconfig",
        "labFingerprint": fingerprint(cell(minimal_cell_config())),
    }


def moved_pods() -> dict[str, Any]:
    config = minimal_cell_config()
    config["network"]["podCidr"] = "10.52.0.0/16"
    return {"lab": config}


def test_first_deploy_reads_the_same_stack_and_refuses_nothing() -> None:
    deployment = Deployment(None)
    result = run(moved_pods(), deployment)
    [read] = deployment.reads
    assert read.args == {"name": "organization/gpucell/prod"}
    assert not any(r.type == "pulumi:pulumi:StackReference" for r in result.resources)  # a read, not a resource
    assert result.outputs["labFingerprint"]["network"]["podCidr"] == "10.52.0.0/16"
    assert "lab-k3s-lab-srv-1" in deployment.registered


def test_unacknowledged_disruptive_change_is_refused_before_anything_is_registered() -> None:
    deployment = Deployment(deployed_lab())
    with pytest.raises(ConfigError) as info:
        run(moved_pods(), deployment)
    assert info.value.lines == [POD_CIDR_REFUSAL]
    assert deployment.registered == []


def test_under_pulumi_up_the_refusal_is_one_run_error_line() -> None:
    deployment = Deployment(deployed_lab())
    with pytest.raises(pulumi.RunError) as info:
        run_program(
            program_main,
            config={"gpucell:regions": moved_pods(), "gpucell:sshPrivateKey": "key"},
            secret_keys=["gpucell:sshPrivateKey"],
            computed=deployment,
            invoked=deployment.invoke,
        )
    assert str(info.value) == POD_CIDR_REFUSAL


def test_acknowledged_change_is_applied() -> None:
    deployment = Deployment(deployed_lab())
    result = run(
        moved_pods(),
        deployment,
        acknowledge=[{"change": "podCidr", "region": "lab", "reason": "maintenance window CHG-1234"}],
    )
    cilium = result.named("lab-cilium-cilium")
    assert cilium.inputs["values"]["ipam"]["operator"]["clusterPoolIPv4PodCIDRList"] == ["10.52.0.0/16"]


def test_stale_acknowledgement_is_an_error() -> None:
    deployment = Deployment(deployed_lab())
    with pytest.raises(ConfigError) as info:
        run(
            {"lab": minimal_cell_config()},
            deployment,
            acknowledge=[{"change": "gpuMode", "region": "lab", "subject": "lab-gpu-1", "reason": "CHG-1"}],
        )
    assert info.value.lines == [
        "acknowledge[0]: {change: gpuMode, region: lab, subject: lab-gpu-1} matches no disruptive change against "
        "the last deployment of lab; remove it (it was applied, or the change it names is no longer planned)"
    ]
    assert deployment.registered == []


def test_acknowledgement_of_a_region_never_deployed_waits() -> None:
    deployment = Deployment(None)
    run(
        {"lab": minimal_cell_config()},
        deployment,
        acknowledge=[{"change": "podCidr", "region": "lab", "reason": "kept for the first real run"}],
    )
    assert deployment.registered


def test_acknowledgement_must_name_a_region_of_the_stack() -> None:
    with pytest.raises(ConfigError) as info:
        run(
            {"lab": minimal_cell_config()},
            Deployment(None),
            acknowledge=[{"change": "podCidr", "region": "lab2", "reason": "x"}],
        )
    assert info.value.lines == ["acknowledge[0].region: 'lab2' is not a region of this stack; regions: lab"]


def test_acknowledge_must_be_a_list() -> None:
    with pytest.raises(ConfigError) as info:
        run({"lab": minimal_cell_config()}, Deployment(None), acknowledge={"change": "podCidr"})  # type: ignore[arg-type]
    assert info.value.lines == [
        "acknowledge: must be a list of {change, region, reason} entries, e.g. [{change: podCidr, region: fra1, "
        'reason: "maintenance window CHG-1234"}]'
    ]


def test_removing_a_deployed_region_is_refused() -> None:
    outputs = {**deployed_lab(), "oldFingerprint": fingerprint(cell(minimal_cell_config()))}
    deployment = Deployment(outputs)
    with pytest.raises(ConfigError) as info:
        run({"lab": minimal_cell_config()}, deployment)
    assert info.value.lines == [
        "regions.old: region old removed is a disruptive change (regionRemoved: the whole cell is destroyed: every "
        "workload of the region stops and k3s is uninstalled from every node (protected resources stop the run)); "
        'to apply it, add {change: regionRemoved, region: old, reason: "..."} to gpucell:acknowledge'
    ]
    run(
        {"lab": minimal_cell_config()},
        Deployment(outputs),
        acknowledge=[{"change": "regionRemoved", "region": "old", "reason": "decommissioned, CHG-9"}],
    )


def test_a_preview_with_unknown_outputs_plans_as_a_first_deploy() -> None:
    deployment = Deployment(None)
    run_program(
        build_cells,
        config={"gpucell:regions": moved_pods(), "gpucell:sshPrivateKey": "key"},
        secret_keys=["gpucell:sshPrivateKey"],
        computed=deployment,
        invoked=deployment.invoke,
        preview=True,
    )
    assert deployment.registered


def test_dev_stack_pod_cidr_change_is_refused_under_a_mocked_previous_deployment(tmp_path: Path) -> None:
    """Done-when: the dev stack as deployed, then its pod CIDR changed, without an acknowledgement."""
    deployed = shared_plan("dev").result.outputs["lab1Fingerprint"]
    shutil.copy(REPO / "Pulumi.yaml", tmp_path)
    text = (REPO / "Pulumi.dev.yaml").read_text()
    assert "podCidr: 10.42.0.0/16" in text
    (tmp_path / "Pulumi.dev.yaml").write_text(text.replace("podCidr: 10.42.0.0/16", "podCidr: 10.52.0.0/16"))

    def invoked(args: MockCallArgs) -> dict[str, Any]:
        assert args.token == READ_STACK_OUTPUTS
        return {"name": args.args["name"], "outputs": {"lab1Fingerprint": copy.deepcopy(deployed)}}

    with pytest.raises(ConfigError) as info:
        make_plan(tmp_path, "dev", invoked=invoked)
    assert info.value.lines == [
        POD_CIDR_REFUSAL.replace("regions.lab.", "regions.lab1.").replace("region: lab,", "region: lab1,")
    ]


def test_acknowledge_is_not_a_secret_key_name() -> None:
    config = minimal_cell_config()
    config["ssh"] = {"privateKeyConfigKey": "acknowledge"}
    with pytest.raises(ConfigError) as info:
        run({"lab": config}, Deployment(None))
    assert info.value.lines == [
        "acknowledge: names a gpucell config key, not a secret (region lab uses it for SSH, see "
        "regions.lab.ssh.privateKeyConfigKey)"
    ]


def test_registered_hosts_come_from_the_last_deployed_fingerprint() -> None:
    from gpucell.stacks.program import registered_hosts

    assert registered_hosts(None) == frozenset()  # a region never deployed: every agent is a first join
    assert registered_hosts({"nodes": {"fra1-srv-1": {}, "fra1-cpu-1": {}}}) == {"fra1-srv-1", "fra1-cpu-1"}
    assert registered_hosts({"cidrs": {}}) is None  # deployed, nodes not listed: all taken as registered (safe)


def test_an_upgrade_that_skips_a_minor_release_is_refused_even_when_acknowledged() -> None:
    """cilium/cilium#46608: a Cilium upgrade across minor releases; pulumi up stops before anything runs."""
    outputs = deployed_lab()
    outputs["labFingerprint"]["versions"]["charts"]["cilium"] = "1.18.4"
    deployment = Deployment(outputs)
    acknowledged = [{"change": "chartMajor", "region": "lab", "reason": "CHG-1"}]
    with pytest.raises(ConfigError) as info:
        run({"lab": minimal_cell_config()}, deployment, acknowledged)
    assert info.value.lines[0] == (
        "regions.lab.versions.cilium: 1.18.4 -> 1.20.0 skips Cilium 1.19: its upgrade guide tests consecutive minor "
        "releases only; cilium/cilium#46608: after 1.16 -> 1.19 the agent no longer started on new nodes; set "
        "versions.cilium to the latest 1.19 release first, pulumi up, then 1.20.0"
    )
    assert deployment.registered == []


def test_a_metrics_storage_shrink_is_refused_with_the_fingerprint_as_the_engine_returns_it() -> None:
    """pulumi/pulumi#8459: outputs come back through a protobuf Struct, so the deployed ``storageGib`` is ``200.0``;
    the mock engine's invoke passes the answer through the same Struct, as the real read path does."""
    config = minimal_cell_config()
    config["metrics"] = {"enabled": True, "storageGib": 200}
    outputs = deployed_lab()
    outputs["labFingerprint"] = fingerprint(cell(config))
    config["metrics"]["storageGib"] = 100
    deployment = Deployment(outputs)
    with pytest.raises(ConfigError) as info:
        run({"lab": config}, deployment)
    assert info.value.lines == [
        "regions.lab.metrics.storageGib: 200 GiB -> 100 GiB is a disruptive change (metricsStorage: a "
        "PersistentVolumeClaim cannot shrink: Prometheus keeps its volume at the old size, and getting the smaller "
        "one means deleting the volume and with it every sample not yet sent by remote write (the GPU metering "
        "history of metrics.retentionDays); run gpucell usage for the open billing period first); to apply it, add "
        '{change: metricsStorage, region: lab, reason: "..."} to gpucell:acknowledge'
    ]
    assert deployment.registered == []


def test_whole_numbers_read_back_from_stack_outputs_are_ints_again() -> None:
    read = integral_numbers({"network": {"podCidrMaskSize": 24.0}, "metrics": {"storageGib": 200.0}, "x": [1.0, 0.5]})
    assert read == {"network": {"podCidrMaskSize": 24}, "metrics": {"storageGib": 200}, "x": [1, 0.5]}
    assert type(read["network"]["podCidrMaskSize"]) is int
