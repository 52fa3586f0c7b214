"""Cilium: the values we own, checked against the chart's values.yaml and schema, overrides and ordering."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest
from pulumi_kubernetes.core.v1 import ConfigMap

from gpucell.components._chart import deep_merge
from gpucell.components.cilium import Cilium, CiliumArgs
from gpucell.engine.mock_engine import PlanResult, Registration, run_program
from gpucell.spec import CellSpec
from gpucell.stacks.conformance.helm_values import commented_keys, values_problems
from tests.conftest import STORE, cell, cell_cilium_values, minimal_cell_config, program_cluster


def ha_config() -> dict[str, Any]:
    config = minimal_cell_config()
    config["network"].update(
        {"apiEndpoint": "k8s.fra1.example.net", "apiPort": 443, "podCidr": "10.100.0.0/14", "podCidrMaskSize": 25}
    )
    config["nodePools"]["servers"]["hosts"] = [{"name": f"lab-srv-{i}", "address": f"10.20.0.1{i}"} for i in (1, 2, 3)]
    config["etcd"] = {"initServer": "lab-srv-1"}
    return config


def install(spec: CellSpec) -> tuple[PlanResult, Registration]:
    def program() -> None:
        component = Cilium("fra1", CiliumArgs.from_cell(spec, program_cluster(spec)))
        pulumi.export("releaseName", component.release_name)

    plan = run_program(program)
    (release,) = plan.of_type("kubernetes:helm.sh/v3:Release")
    return plan, release


def test_release_installs_the_pinned_chart_in_kube_system() -> None:
    plan, release = install(cell(minimal_cell_config()))
    assert release.name == "fra1-cilium"
    assert release.inputs["chart"] == "cilium"
    assert release.inputs["repositoryOpts"] == {"repo": "https://helm.cilium.io/"}
    assert release.inputs["version"] == "1.20.0"
    assert release.inputs["namespace"] == "kube-system"
    assert release.inputs["name"] == "cilium"
    assert plan.outputs["releaseName"] == "cilium"
    (component,) = plan.of_type("gpucell:index:Cilium")
    assert release.parent == component.urn


def test_single_server_cell_values() -> None:
    _, release = install(cell(minimal_cell_config()))
    values = release.inputs["values"]
    assert values["kubeProxyReplacement"] is True
    assert values["k8sServiceHost"] == "10.20.0.11"
    assert values["k8sServicePort"] == 6443
    assert values["ipam"] == {
        "mode": "cluster-pool",
        "operator": {"clusterPoolIPv4PodCIDRList": ["10.42.0.0/16"], "clusterPoolIPv4MaskSize": 24},
    }
    assert values["hubble"] == {"enabled": True, "relay": {"enabled": True}}
    assert values["operator"] == {"replicas": 1, "rollOutPods": True}
    assert values["rollOutCiliumPods"] is True
    assert values["socketLB"] == {"hostNamespaceOnly": True}


def test_ha_cell_uses_the_api_endpoint_its_pod_cidr_and_two_operators() -> None:
    _, release = install(cell(ha_config()))
    values = release.inputs["values"]
    assert values["k8sServiceHost"] == "k8s.fra1.example.net"
    assert values["k8sServicePort"] == 443
    assert values["ipam"]["operator"] == {
        "clusterPoolIPv4PodCIDRList": ["10.100.0.0/14"],
        "clusterPoolIPv4MaskSize": 25,
    }
    assert values["operator"]["replicas"] == 2


def test_user_values_are_deep_merged_over_ours() -> None:
    config = minimal_cell_config()
    config["cilium"] = {"values": {"hubble": {"ui": {"enabled": True}}, "operator": {"replicas": 3}}}
    _, release = install(cell(config))
    values = release.inputs["values"]
    assert values["hubble"] == {"enabled": True, "relay": {"enabled": True}, "ui": {"enabled": True}}
    assert values["operator"] == {"replicas": 3, "rollOutPods": True}
    assert values["kubeProxyReplacement"] is True


def test_children_wait_for_the_components_dependencies() -> None:
    spec = cell(minimal_cell_config())

    def program() -> None:
        servers_ready = ConfigMap("servers-ready")
        Cilium(
            "fra1",
            CiliumArgs.from_cell(spec, program_cluster(spec)),
            opts=pulumi.ResourceOptions(depends_on=[servers_ready]),
        )

    plan = run_program(program)
    (release,) = plan.of_type("kubernetes:helm.sh/v3:Release")
    assert plan.named("servers-ready").urn in release.dependencies


def test_socket_lb_host_namespace_only_is_a_commented_default_of_its_own_block() -> None:
    # The chart reads it with `hasKey`, so values.yaml documents it only as `  # hostNamespaceOnly: false`.
    assert "hostNamespaceOnly" not in STORE.load("cilium/values.yaml")["socketLB"]
    documented = commented_keys(STORE.text("cilium/values.yaml"))
    assert ("socketLB", "hostNamespaceOnly") in documented
    assert ("socketLB", "noSuchKey") not in documented
    assert ("cni", "hostNamespaceOnly") not in documented


@pytest.mark.parametrize("config", [minimal_cell_config(), ha_config()], ids=["single", "ha"])
def test_our_values_fit_the_charts_values_yaml_and_schema(config: dict[str, Any]) -> None:
    spec = cell(config)
    assert values_problems(STORE, "cilium", spec.versions.cilium, cell_cilium_values(spec)) == []


def test_chart_check_catches_an_unknown_key_and_a_wrong_type() -> None:
    spec = cell(minimal_cell_config())
    bad = deep_merge(cell_cilium_values(spec), {"socketLB": {"noSuchKey": True}, "operator": {"replicas": "two"}})
    assert values_problems(STORE, "cilium", spec.versions.cilium, bad) == [
        ("socketLB.noSuchKey", "is not a value of chart cilium 1.20.0 (renamed or removed upstream?)"),
        ("operator.replicas", "'two' is not of type 'integer' (chart cilium 1.20.0 values.schema.json)"),
    ]
