"""Cilium: the values we own, checked against the chart's values.yaml and schema, overrides and ordering."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import jsonschema
import pulumi
import pytest
import yaml
from pulumi_kubernetes.core.v1 import ConfigMap

from components._chart import deep_merge
from components.cilium import Cilium, CiliumArgs, cilium_values
from components.spec import CellSpec
from stacks.mock_engine import PlanResult, Registration, run_program
from tests.conftest import UPSTREAM, cell, minimal_cell_config

VALUES_YAML = UPSTREAM / "cilium" / "values.yaml"
SCHEMA = UPSTREAM / "cilium" / "values.schema.json"
COMMENTED_DEFAULTS = {("socketLB", "hostNamespaceOnly")}
"""Keys values.yaml documents only as a commented-out default (the chart reads them with ``hasKey``)."""


def ha_config() -> dict[str, Any]:
    config = minimal_cell_config()
    config["network"].update(
        {"apiEndpoint": "k8s.fra1.example.net", "apiPort": 443, "podCidr": "10.100.0.0/14",
         "podCidrMaskSize": 25}
    )
    config["nodePools"]["servers"]["hosts"] = [
        {"name": f"lab-srv-{i}", "address": f"10.20.0.1{i}"} for i in (1, 2, 3)
    ]
    return config


def install(spec: CellSpec) -> tuple[PlanResult, Registration]:
    def program() -> None:
        component = Cilium("fra1", CiliumArgs(spec))
        pulumi.export("releaseName", component.release_name)

    plan = run_program(program)
    (release,) = plan.of_type("kubernetes:helm.sh/v3:Release")
    return plan, release


def leaf_paths(values: dict[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for key, value in values.items():
        if isinstance(value, dict) and value:
            yield from leaf_paths(value, (*prefix, key))
        else:
            yield (*prefix, key)


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
        Cilium("fra1", CiliumArgs(spec), opts=pulumi.ResourceOptions(depends_on=[servers_ready]))

    plan = run_program(program)
    (release,) = plan.of_type("kubernetes:helm.sh/v3:Release")
    assert plan.named("servers-ready").urn in release.dependencies


def commented_default(text: str, parent: str, key: str) -> bool:
    """True when top-level ``parent``'s block in values.yaml has a commented ``# key:`` default line."""
    lines = text.split(f"\n{parent}:\n", 1)[1].splitlines()
    block = itertools.takewhile(lambda line: not line or line.startswith(" "), lines)
    return any(line.strip().startswith(f"# {key}:") for line in block)


def test_commented_default_lookup_is_scoped_to_the_parent_block() -> None:
    text = VALUES_YAML.read_text()
    assert commented_default(text, "socketLB", "hostNamespaceOnly")
    assert not commented_default(text, "socketLB", "noSuchKey")
    assert not commented_default(text, "cni", "hostNamespaceOnly")


@pytest.mark.parametrize("config", [minimal_cell_config(), ha_config()], ids=["single", "ha"])
def test_every_key_we_set_exists_in_the_charts_values_yaml(config: dict[str, Any]) -> None:
    defaults = yaml.safe_load(VALUES_YAML.read_text())
    text = VALUES_YAML.read_text()
    for path in leaf_paths(cilium_values(cell(config))):
        if path in COMMENTED_DEFAULTS:
            assert commented_default(text, *path), f"{'.'.join(path)} is not documented in cilium values.yaml"
            continue
        node: Any = defaults
        for key in path:
            assert isinstance(node, dict), f"{'.'.join(path)}: a parent is not a map in cilium values.yaml"
            assert key in node, f"{'.'.join(path)} is not a key of cilium values.yaml"
            node = node[key]


def test_our_values_validate_against_the_charts_schema() -> None:
    schema = json.loads(SCHEMA.read_text())
    defaults = yaml.safe_load(VALUES_YAML.read_text())
    for config in (minimal_cell_config(), ha_config()):
        ours = cilium_values(cell(config))
        jsonschema.validate(ours, schema)
        jsonschema.validate(deep_merge(defaults, ours), schema)  # what `helm install` checks


def test_schema_check_catches_a_wrong_type() -> None:
    schema = json.loads(SCHEMA.read_text())
    bad = deep_merge(cilium_values(cell(minimal_cell_config())), {"operator": {"replicas": "two"}})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
