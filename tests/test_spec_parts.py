"""The parts of a cell's spec components take on their own: K3sClusterSpec (K3sCluster's) and ClusterFacts (a
tenant's), each checked by the cell's own rules with the cell's messages and key paths (decision 0019)."""

from __future__ import annotations

from typing import Any

import pytest

from gpucell.admission.tenants import ClusterFacts
from gpucell.errors import ConfigError
from gpucell.spec import CellSpec, K3sClusterSpec, TenantSpec
from gpucell.tenancy.tenant import admit, network_policy_manifests
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


EKS_FACTS: dict[str, Any] = {
    "network": {"nodeCidr": "10.0.0.0/16", "podCidr": "10.244.0.0/16", "serviceCidr": "172.20.0.0/16",
                "clusterDns": "172.20.0.10", "apiPort": 443},
    "nodePools": {
        "l40s": {"role": "gpu", "gpuModel": "L40S", "gpusPerNode": 4, "gpuMode": "container",
                 "hosts": [{"name": "ip-10-0-1-5.us-west-2.compute.internal", "address": "10.0.1.5"}]},
    },
}  # fmt: skip
"""An EKS cluster's facts: its Nodes are named after their private DNS names, as EKS names every node."""


def test_cluster_facts_take_the_node_names_of_any_cluster() -> None:
    facts = ClusterFacts.model_validate(EKS_FACTS)
    assert facts.node_pools["l40s"].hosts[0].name == "ip-10-0-1-5.us-west-2.compute.internal"
    assert lines(ClusterFacts, {**EKS_FACTS, "nodePools": {"l40s": {**EKS_FACTS["nodePools"]["l40s"], "hosts": [
        {"name": "GPU_1", "address": "10.0.1.5"}]}}}) == [
        "nodePools.l40s.hosts[0].name: 'GPU_1' is not a DNS-1123 label (lower-case letters, digits and '-', at "
        "most 63 characters)"
    ]  # fmt: skip


def test_a_cells_own_hosts_stay_single_labels() -> None:
    config = minimal_cell_config()
    config["nodePools"]["cpu"]["hosts"][0]["name"] = "lab-cpu-1.example.net"
    expected = [
        "nodePools.cpu.hosts[0].name: 'lab-cpu-1.example.net' is not a DNS-1123 label (lower-case letters, digits "
        "and '-', at most 63 characters): k3s names the node after it (node-name), and gpucell its resources"
    ]
    assert lines(CellSpec, config) == expected == lines(K3sClusterSpec, config)


def test_cluster_facts_count_a_node_once() -> None:
    """A Node listed in two pools would be counted twice: a tenant's quota admitted against GPUs that are not
    there."""
    pools = EKS_FACTS["nodePools"]
    twice = {**EKS_FACTS, "nodePools": {**pools, "l40s-b": pools["l40s"]}}
    assert lines(ClusterFacts, twice) == [
        "nodePools.l40s-b.hosts[0].name: 'ip-10-0-1-5.us-west-2.compute.internal' is already used by "
        "nodePools.l40s.hosts[0]"
    ]
    outside = {**pools["l40s"], "hosts": [{"name": "gpu-2", "address": "10.1.0.5"}]}
    assert lines(ClusterFacts, {**EKS_FACTS, "nodePools": {"l40s": outside}}) == [
        "nodePools.l40s.hosts[0].address: '10.1.0.5' is outside network.nodeCidr 10.0.0.0/16"
    ]


def test_cluster_egress_reaches_the_api_servers_on_the_port_they_listen_on() -> None:
    """EKS, AKS and GKE API servers listen on 443 (the ``kubernetes`` Service's endpoints): with ``apiPort: 443`` and
    no ``apiEndpoint`` a ``cluster`` tenant reaches them there; behind an endpoint they listen on 6443 (kubeadm,
    RKE2, k3s), whatever port the endpoint serves."""
    tenant = TenantSpec.model_validate({**TENANT, "egress": "cluster"})

    def api_ports(network: dict[str, Any]) -> list[str]:
        facts = ClusterFacts.model_validate({**EKS_FACTS, "network": {**EKS_FACTS["network"], **network}})
        policies = {p["metadata"]["name"]: p for p in network_policy_manifests("acme", tenant, facts)}
        egress = policies["tenant-allow-egress-cluster"]["spec"]["egress"]
        return [port["port"] for rule in egress if "toEntities" in rule for port in rule["toPorts"][0]["ports"]]

    assert api_ports({}) == ["443"]
    assert api_ports({"apiEndpoint": "10.0.0.10"}) == ["6443"]
