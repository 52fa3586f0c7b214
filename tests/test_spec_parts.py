"""The parts of a cell's spec components take on their own: K3sClusterSpec (K3sCluster's) and ClusterFacts (a
tenant's), each checked by the cell's own rules with the cell's messages and key paths (decision 0019)."""

from __future__ import annotations

from typing import Any

import pytest

from gpucell.admission import ClusterFacts
from gpucell.errors import ConfigError
from gpucell.spec import CellSpec, K3sClusterSpec, TenantSpec
from gpucell.tenancy import admit
from tests.conftest import cell, minimal_cell_config

TENANT = {"quota": {"cpuMillicores": 8000, "memoryGib": 64, "storageGib": 100, "gpus": {"nvidia.com/gpu": 2}}}


def two_servers_without_an_endpoint() -> dict[str, Any]:
    config = minimal_cell_config()
    config["nodePools"]["servers"]["hosts"].append({"name": "lab-srv-2", "address": "10.20.0.12"})
    config["etcd"] = {"initServer": "lab-srv-1"}
    return config


def lines(model: type[CellSpec | K3sClusterSpec | ClusterFacts], config: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        model.model_validate(config)
    return info.value.lines


def test_k3s_cluster_spec_from_a_cell_holds_the_cells_own_sections() -> None:
    spec = cell(minimal_cell_config())
    nodes = K3sClusterSpec.from_cell(spec)
    assert nodes.node_pools is spec.node_pools
    assert nodes.servers == spec.servers
    assert nodes.api_endpoint == spec.api_endpoint == "10.20.0.11"
    assert nodes.effective_mig_strategy is spec.effective_mig_strategy


def test_k3s_cluster_spec_on_its_own_is_refused_as_the_cell_is() -> None:
    config = two_servers_without_an_endpoint()
    expected = ["network.apiEndpoint: is required with 2 servers: a VIP or load-balanced name in front of all of them"]
    assert lines(K3sClusterSpec, config) == expected == lines(CellSpec, config)


def test_k3s_cluster_spec_takes_no_tenant() -> None:
    assert lines(K3sClusterSpec, {**minimal_cell_config(), "tenants": {"acme": TENANT}}) == [
        "tenants: unknown key; accepted keys are versions, k3s, oidc, network, ssh, nodePools, storage, "
        "gpuOperator, etcd, removalPolicy"
    ]


def test_cluster_facts_admit_a_tenant_as_the_cell_does() -> None:
    spec = cell(minimal_cell_config())
    facts = ClusterFacts.from_cell(spec)
    greedy = TenantSpec.model_validate({**TENANT, "quota": {**TENANT["quota"], "gpus": {"nvidia.com/gpu": 3}}})
    with pytest.raises(ConfigError) as by_facts:
        admit("acme", greedy, facts)
    with pytest.raises(ConfigError) as by_cell:
        spec.with_tenant("acme", greedy)
    assert (
        by_facts.value.lines
        == by_cell.value.lines
        == [
            "tenants.acme.quota.gpus.nvidia.com/gpu: tenants reserve 3 nvidia.com/gpu in all, the region has 2; lower "
            "the quotas or set allowGpuOvercommit: true"
        ]
    )
    admitted = admit("acme", TenantSpec.model_validate(TENANT), facts)
    assert list(admitted.tenants) == ["acme"]


def test_cluster_facts_built_by_hand_check_their_own_fields() -> None:
    facts = {
        "network": {"nodeCidr": "10.30.0.0/24", "podCidr": "10.30.0.0/16"},
        "imageNamespaces": ["tenant-acme"],
        "migStrategy": "single",
    }
    assert lines(ClusterFacts, facts) == [
        "network.podCidr: '10.30.0.0/16' overlaps network.nodeCidr 10.30.0.0/24",
        "imageNamespaces[0]: 'tenant-acme' is a tenant's namespace (tenant-*): every tenant could clone that "
        "tenant's disks; put shared images in a namespace of their own",
    ]
