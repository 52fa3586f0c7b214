"""How long ``pulumi up`` takes, from the plan's graph and the per-step estimates of gpucell.stacks.estimate."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucell.engine.mock_engine import Registration
from gpucell.stacks import cli
from gpucell.stacks.estimate import CHART_SECONDS, CREATE_SECONDS, UPDATE_SECONDS, estimate, human
from gpucell.stacks.plan import Plan
from tests.conftest import REPO, shared_plan


def planned(stack: str) -> Plan:
    return shared_plan(stack)


def reg(
    name: str, after: tuple[str, ...] = (), type_: str = "kubernetes:core/v1:ConfigMap", **inputs: Any
) -> Registration:
    return Registration(
        urn=f"urn:{name}",
        type=type_,
        name=name,
        parent="",
        provider="",
        dependencies=[f"urn:{a}" for a in after],
        custom=True,
        inputs=inputs,
        raw_inputs=inputs,
    )


def test_the_wall_time_is_the_longest_weighted_chain_not_the_sum() -> None:
    chart = "kubernetes:helm.sh/v3:Release"
    registrations = [
        reg("a"),
        reg("cilium", ("a",), chart, chart="cilium"),
        reg("longhorn", ("a",), chart, chart="longhorn"),
        reg("b", ("cilium", "longhorn")),
    ]
    found = estimate(registrations)
    assert found.seconds == CREATE_SECONDS["kubernetes"] * 2 + CHART_SECONDS["longhorn"]
    assert found.chain == ("a", "longhorn", "b")


def test_against_a_base_only_what_differs_takes_time() -> None:
    head = [reg("a", x=1), reg("b", ("a",), x=2), reg("c", ("b",), x=3)]
    base = {"urn:a": {"x": 1}, "urn:b": {"x": 1}}  # b changed, c is new, a is as it was
    found = estimate(head, base)
    assert found.seconds == UPDATE_SECONDS["kubernetes"] + CREATE_SECONDS["kubernetes"]
    assert found.chain == ("b", "c")
    assert estimate(head, {r.urn: r.inputs for r in head}).seconds == 0


def test_human_readable_times() -> None:
    assert [human(s) for s in (0, 20, 600, 18_600)] == [
        "nothing to do",
        "about 1 min",
        "about 10 min",
        "about 5 h 10 min",
    ]


def test_a_new_region_goes_through_its_servers_then_the_charts_not_through_its_agents() -> None:
    plan = planned("prod-fra1")
    found = estimate(plan.region_resources("fra1"))
    servers = [f"fra1-k3s-fra1-srv-{i}{step}" for i in (1, 2, 3) for step in ("-prepare", "", "-labels", "-settle")]
    assert [n for n in found.chain if n.startswith("fra1-k3s-fra1-srv")] == servers
    assert not any(n.startswith("fra1-k3s-fra1-") and "srv" not in n for n in found.chain)
    assert "fra1-cilium-cilium" in found.chain
    assert 10 * 60 < found.seconds < 30 * 60


def test_the_plan_prints_each_regions_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["plan", "dev", "--project-dir", str(REPO)]) == 0
    [line] = [x for x in capsys.readouterr().out.splitlines() if x.startswith("  estimate:")]
    found = estimate(planned("dev").region_resources("lab1"))
    assert line == (
        f"  estimate: {human(found.seconds)} for `pulumi up` of a new region (longest chain: "
        f"{len(found.chain)} timed steps, from lab1-k3s-lab1-srv-1-prepare to {found.chain[-1]}; "
        "per-step estimates in gpucell.stacks.estimate)"
    )


def test_a_k3s_upgrade_against_a_base_plan_goes_node_by_node_through_the_largest_pool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = tmp_path / "base.json"
    assert cli.main(["plan", "prod-fra1", "--project-dir", str(REPO), "--json", str(base)]) == 0
    head = tmp_path / "head"
    head.mkdir()
    shutil.copy(REPO / "Pulumi.yaml", head)
    stack = yaml.safe_load((REPO / "Pulumi.prod-fra1.yaml").read_text())
    for region in stack["config"]["gpucell:regions"].values():
        region.setdefault("versions", {})["k3s"] = "v1.34.3+k3s1"
        region.setdefault("k3s", {})["installerSha256"] = "0" * 64
    (head / "Pulumi.prod-fra1.yaml").write_text(yaml.safe_dump(stack))
    capsys.readouterr()
    assert (
        cli.main(["plan", "prod-fra1", "--project-dir", str(head), "--base-plan", str(base), "--region", "fra1"]) == 0
    )
    [line] = [x for x in capsys.readouterr().out.splitlines() if x.startswith("  estimate:")]
    # the base's nodes are registered: fra1's largest pool (h100-vm, 4 nodes, maxUnavailable 1) upgrades one by one
    # after the 3 servers: 7 nodes drained (240 s), upgraded (120 s a server, 90 s an agent), settled (90 s) in turn
    assert len(stack["config"]["gpucell:regions"]["fra1"]["nodePools"]["h100-vm"]["hosts"]) == 4
    assert line.startswith(
        "  estimate: about 50 min for `pulumi up` of the change against the base plan (longest "
        "chain: 21 timed steps, from fra1-k3s-fra1-srv-1-prepare to fra1-k3s-fra1-h100-4-settle"
    )
    assert set(json.loads(base.read_text())["outputs"]["fra1Fingerprint"]["nodes"]) >= {"fra1-h100-4"}


def test_a_tenant_cluster_counts_its_control_plane_wait_and_a_vm_one_api_call() -> None:
    """The Cluster waits for ControlPlaneInitialized (pulumi.com/waitFor); a VirtualMachine has no wait."""
    cluster = reg("ml", type_="kubernetes:cluster.x-k8s.io/v1beta2:Cluster")
    vm = reg("desk-01", ("ml",), "kubernetes:kubevirt.io/v1:VirtualMachine")
    assert estimate([cluster, vm]).seconds == 600 + 2
    assert estimate([cluster], {"urn:ml": {"changed": True}}).seconds == 2
