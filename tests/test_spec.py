"""Every config rule with its exact one-line message, and what valid config turns into."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from gpucell.catalog.gpu_catalog import VgpuFramework
from gpucell.errors import ConfigError
from gpucell.spec import CellSpec, GpuMode, MigStrategy, StackSpec
from tests.conftest import cell, minimal_cell_config


def errors_of(region: dict[str, Any], name: str = "fra1") -> list[str]:
    try:
        StackSpec.model_validate({"regions": {name: region}})
    except ConfigError as exc:
        return exc.lines
    pytest.fail("config was accepted")


def gpu_pool(**fields: Any) -> dict[str, Any]:
    pool = {
        "role": "gpu",
        "gpuModel": "H100-SXM5-80GB",
        "gpusPerNode": 8,
        "gpuMode": "vm-passthrough",
        "hosts": [{"name": "fra1-h100-1", "address": "10.20.0.41"}],
    }
    return {**pool, **fields}


def test_minimal_region_is_valid_and_defaults_are_pinned() -> None:
    spec = cell(minimal_cell_config())
    assert spec.versions.k3s == "v1.34.2+k3s1"
    assert spec.versions.kubernetes_minor == "1.34"
    assert spec.api_endpoint == "10.20.0.11"
    assert spec.effective_mig_strategy is MigStrategy.SINGLE
    assert spec.deployment_mode.value == "Standard"


def test_bad_gpu_mode_names_key_value_and_accepted(cell_config: dict[str, Any]) -> None:
    cell_config["nodePools"]["h100-vm"] = gpu_pool(gpuMode="passthrough")
    assert errors_of(cell_config) == [
        "regions.fra1.nodePools.h100-vm.gpuMode: 'passthrough' is not one of container, vm-passthrough, vm-vgpu, dra"
    ]


def test_unknown_key_lists_accepted_keys(cell_config: dict[str, Any]) -> None:
    cell_config["network"]["podCIDR"] = "10.42.0.0/16"
    assert errors_of(cell_config) == [
        "regions.fra1.network.podCIDR: unknown key; accepted keys are nodeCidr, podCidr, podCidrMaskSize, "
        "serviceCidr, clusterDns, apiEndpoint, apiPort, apiVip, tlsSans"
    ]


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "podCidr",
            "10.20.0.0/16",
            "regions.fra1.network.podCidr: '10.20.0.0/16' overlaps network.nodeCidr 10.20.0.0/24",
        ),
        (
            "serviceCidr",
            "10.42.128.0/17",
            "regions.fra1.network.serviceCidr: '10.42.128.0/17' overlaps network.podCidr 10.42.0.0/16",
        ),
        (
            "clusterDns",
            "10.99.0.10",
            "regions.fra1.network.clusterDns: '10.99.0.10' is outside network.serviceCidr 10.43.0.0/16",
        ),
    ],
)
def test_address_plan_rules(cell_config: dict[str, Any], key: str, value: str, message: str) -> None:
    cell_config["network"][key] = value
    assert errors_of(cell_config) == [message]


def test_host_names_unique(cell_config: dict[str, Any]) -> None:
    cell_config["nodePools"]["cpu"]["hosts"][0]["name"] = "lab-srv-1"
    assert errors_of(cell_config) == [
        "regions.fra1.nodePools.cpu.hosts[0].name: 'lab-srv-1' is already used by nodePools.servers.hosts[0]"
    ]


def test_host_addresses_unique(cell_config: dict[str, Any]) -> None:
    cell_config["nodePools"]["cpu"]["hosts"][0]["address"] = "10.20.0.21"
    assert errors_of(cell_config) == [
        "regions.fra1.nodePools.cpu.hosts[0].address: '10.20.0.21' is already used by nodePools.l40s.hosts[0]"
    ]


def test_host_outside_node_network(cell_config: dict[str, Any]) -> None:
    cell_config["nodePools"]["cpu"]["hosts"][0]["address"] = "10.21.0.5"
    assert errors_of(cell_config) == [
        "regions.fra1.nodePools.cpu.hosts[0].address: '10.21.0.5' is outside network.nodeCidr 10.20.0.0/24"
    ]


def test_exactly_one_mode_per_node(cell_config: dict[str, Any]) -> None:
    cell_config["nodePools"]["l40s-vm"] = gpu_pool(
        gpuModel="L40S", hosts=[{"name": "lab-gpu-1", "address": "10.20.0.21"}]
    )
    assert errors_of(cell_config) == [
        "regions.fra1.nodePools.l40s-vm.hosts[0]: host 'lab-gpu-1' is in pools l40s (container) and l40s-vm "
        "(vm-passthrough); a node runs exactly one GPU mode"
    ]


@pytest.mark.parametrize("count", [2, 4])
def test_even_server_count_is_accepted_as_a_step(cell_config: dict[str, Any], count: int) -> None:
    # 3 -> 2 (or 5 -> 4) is how servers leave one per run; K3sCluster warns about it (see test_day2.py).
    cell_config["network"]["apiEndpoint"] = "10.20.0.10"
    cell_config["etcd"] = {"initServer": "srv-0"}
    cell_config["nodePools"]["servers"]["hosts"] = [
        {"name": f"srv-{i}", "address": f"10.20.0.{100 + i}"} for i in range(count)
    ]
    assert len(StackSpec.model_validate({"regions": {"fra1": cell_config}}).regions["fra1"].servers) == count


def test_no_server_rejected(cell_config: dict[str, Any]) -> None:
    del cell_config["nodePools"]["servers"]
    assert errors_of(cell_config) == [
        "regions.fra1.nodePools: no pool has role server; a cell needs 1 or an odd number >= 3 of servers"
    ]


def test_ha_servers_need_api_endpoint(cell_config: dict[str, Any]) -> None:
    cell_config["etcd"] = {"initServer": "srv-0"}
    cell_config["nodePools"]["servers"]["hosts"] = [
        {"name": f"srv-{i}", "address": f"10.20.0.{100 + i}"} for i in range(3)
    ]
    assert errors_of(cell_config) == [
        "regions.fra1.network.apiEndpoint: is required with 3 servers: a VIP or load-balanced name in front of "
        "all of them"
    ]


def test_unknown_gpu_model(cell_config: dict[str, Any]) -> None:
    cell_config["nodePools"]["x"] = gpu_pool(gpuModel="X100")
    assert errors_of(cell_config) == [
        "regions.fra1.nodePools.x.gpuModel: 'X100' is not a known GPU model; known: T4, A100-SXM4-40GB, "
        "A100-SXM4-80GB, A100-PCIe-40GB, A100-PCIe-80GB, H100-SXM5-80GB, H100-PCIe-80GB, H100-NVL-94GB, GH200-96GB, "
        "H200-SXM-141GB, A10, L4, L40, L40S, B200 (add your own under gpucell:gpuModels)"
    ]


def test_mig_only_on_container_pools(cell_config: dict[str, Any]) -> None:
    cell_config["nodePools"]["h100-vm"] = gpu_pool(migConfig="all-1g.10gb")
    assert errors_of(cell_config) == [
        "regions.fra1.nodePools.h100-vm.migConfig: 'all-1g.10gb' needs a container-mode pool; this pool is "
        "vm-passthrough"
    ]


def test_mig_profile_must_fit_model(cell_config: dict[str, Any]) -> None:
    cell_config["nodePools"]["h100"] = gpu_pool(gpuMode="container", migConfig="all-1g.5gb")
    assert errors_of(cell_config) == [
        "regions.fra1.nodePools.h100.migConfig: 'all-1g.5gb' is not a MIG config of H100-SXM5-80GB; accepted: "
        "all-disabled, all-1g.10gb, all-1g.20gb, all-2g.20gb, all-3g.40gb, all-4g.40gb, all-7g.80gb, all-balanced"
    ]


def test_mig_on_model_without_mig(cell_config: dict[str, Any]) -> None:
    cell_config["nodePools"]["l40s"]["migConfig"] = "all-1g.10gb"
    assert errors_of(cell_config) == [
        "regions.fra1.nodePools.l40s.migConfig: 'all-1g.10gb' is not a MIG config of L40S; accepted: none: "
        "the model has no MIG"
    ]


def test_vgpu_pool_needs_profile_and_driver_image(cell_config: dict[str, Any]) -> None:
    cell_config["nodePools"]["l40s-vgpu"] = gpu_pool(gpuModel="L40S", gpuMode="vm-vgpu")
    assert errors_of(cell_config) == ["regions.fra1.nodePools.l40s-vgpu.vgpuProfile: is required on a vm-vgpu pool"]
    cell_config["nodePools"]["l40s-vgpu"]["vgpuProfile"] = "L40S-24Q"
    assert errors_of(cell_config) == [
        "regions.fra1.gpuOperator.vgpuDriverImage: is required because pool l40s-vgpu runs vm-vgpu; give the "
        "repository and version of your NVIDIA vGPU Manager image"
    ]


def test_vgpu_profile_must_fit_model(cell_config: dict[str, Any]) -> None:
    cell_config["nodePools"]["l40s-vgpu"] = gpu_pool(gpuModel="L40S", gpuMode="vm-vgpu", vgpuProfile="A100-4C")
    assert errors_of(cell_config) == [
        "regions.fra1.nodePools.l40s-vgpu.vgpuProfile: 'A100-4C' is not a vGPU profile of L40S; accepted: "
        "L40S-1Q, L40S-2Q, L40S-3Q, L40S-4C, L40S-4Q, L40S-6C, L40S-6Q, L40S-8C, L40S-8Q, L40S-12C, L40S-12Q, "
        "L40S-16C, L40S-16Q, L40S-24C, L40S-24Q, L40S-48C, L40S-48Q"
    ]


def test_gpu_fields_on_cpu_pool(cell_config: dict[str, Any]) -> None:
    cell_config["nodePools"]["cpu"]["gpuModel"] = "L4"
    assert errors_of(cell_config) == [
        "regions.fra1.nodePools.cpu.gpuModel: 'L4' is only valid on gpu pools (this pool's role is cpu)"
    ]


def test_gpu_pool_needs_mode(cell_config: dict[str, Any]) -> None:
    del cell_config["nodePools"]["l40s"]["gpuMode"]
    assert errors_of(cell_config) == ["regions.fra1.nodePools.l40s.gpuMode: is required on a gpu pool"]


def test_topology_only_on_vm_pools(cell_config: dict[str, Any]) -> None:
    cell_config["nodePools"]["l40s"]["topology"] = {"reservedCpus": "0-3", "cpusPerNuma": 32, "memoryPerNumaGib": 256}
    assert errors_of(cell_config) == [
        "regions.fra1.nodePools.l40s.topology: is only valid on vm-passthrough, vm-vgpu and dra pools "
        "(this pool is container)"
    ]


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "k3s",
            "latest",
            "regions.fra1.versions.k3s: 'latest' is not a pinned k3s release; use the form "
            "v1.34.2+k3s1 (no latest, stable or channels)",
        ),
        (
            "cilium",
            "1.20",
            "regions.fra1.versions.cilium: '1.20' is not a pinned release; use an exact version "
            "such as v1.2.3 (no latest, stable or ranges)",
        ),
        (
            "gpuOperator",
            "stable",
            "regions.fra1.versions.gpuOperator: 'stable' is not a pinned release; use an "
            "exact version such as v1.2.3 (no latest, stable or ranges)",
        ),
    ],
)
def test_versions_must_be_pinned(cell_config: dict[str, Any], key: str, value: str, message: str) -> None:
    cell_config["versions"] = {key: value}
    assert errors_of(cell_config) == [message]


def test_a_version_is_written_as_its_project_writes_its_releases() -> None:
    """The new-user trial: ``cilium: v1.20.0`` changed the Helm release's version (to the same release) and made
    `gpucell fleet` report a skew beside a stack pinning ``1.20.0``."""
    from gpucell.spec.versions import Versions

    versions = Versions.model_validate({"cilium": "v1.20.0", "kubevirt": "1.9.0", "keda": "2.20.2"})
    assert (versions.cilium, versions.kubevirt, versions.keda) == ("1.20.0", "v1.9.0", "2.20.2")


@pytest.mark.parametrize(
    ("version", "mode", "message"),
    [
        (
            "v0.20.0",
            "RawDeployment",
            "regions.fra1.kserve.deploymentMode: 'RawDeployment' is not a deployment mode "
            "of KServe v0.20.0; accepted: Standard, Knative",
        ),
        (
            "v0.15.2",
            "Standard",
            "regions.fra1.kserve.deploymentMode: 'Standard' is not a deployment mode of "
            "KServe v0.15.2; accepted: RawDeployment, Serverless",
        ),
    ],
)
def test_kserve_mode_fits_version(cell_config: dict[str, Any], version: str, mode: str, message: str) -> None:
    cell_config["versions"] = {"kserve": version}
    cell_config["kserve"] = {"deploymentMode": mode}
    assert errors_of(cell_config) == [message]


def test_kserve_default_mode_follows_version(cell_config: dict[str, Any]) -> None:
    cell_config["versions"] = {"kserve": "v0.15.2"}
    assert cell(cell_config).deployment_mode.value == "RawDeployment"


def test_single_mig_strategy_rejects_mixed_layout(cell_config: dict[str, Any]) -> None:
    cell_config["nodePools"]["h100"] = gpu_pool(gpuMode="container", migConfig="all-balanced")
    cell_config["gpuOperator"] = {"migStrategy": "single"}
    assert errors_of(cell_config) == [
        "regions.fra1.nodePools.h100.migConfig: 'all-balanced' mixes MIG profiles, which gpuOperator.migStrategy "
        "single cannot advertise; use a uniform all-<profile> layout or migStrategy mixed"
    ]


def test_mig_strategy_defaults_to_mixed_with_mig(cell_config: dict[str, Any]) -> None:
    cell_config["nodePools"]["h100"] = gpu_pool(gpuMode="container", migConfig="all-1g.10gb")
    spec = cell(cell_config)
    assert spec.effective_mig_strategy is MigStrategy.MIXED
    assert spec.node_pools["h100"].mig_layout == {"1g.10gb": 7}
    assert spec.gpu_pools(GpuMode.CONTAINER).keys() == {"l40s", "h100"}


def test_names_must_be_dns_labels(cell_config: dict[str, Any]) -> None:
    cell_config["nodePools"]["GPU_pool"] = cell_config["nodePools"].pop("cpu")
    assert errors_of(cell_config) == [
        "regions.fra1.nodePools.GPU_pool: 'GPU_pool' is not a DNS-1123 label (lower-case letters, digits and '-', "
        "at most 63 characters)"
    ]
    assert errors_of(minimal_cell_config(), name="Fra1") == [
        "regions.Fra1: 'Fra1' is not a DNS-1123 label (lower-case letters, digits and '-', at most 63 characters)"
    ]


def test_topology_reserved_memory_must_cover_eviction(cell_config: dict[str, Any]) -> None:
    cell_config["nodePools"]["h100-vm"] = gpu_pool(
        topology={
            "reservedCpus": "0-3",
            "numaNodes": 1,
            "reservedMemoryPerNumaMib": 400,
            "cpusPerNuma": 32,
            "memoryPerNumaGib": 512,
        }
    )
    assert errors_of(cell_config) == [
        "regions.fra1.nodePools.h100-vm.topology.reservedMemoryPerNumaMib: 400 MiB x 1 NUMA nodes must exceed the "
        "500 MiB hard-eviction threshold"
    ]


def test_topology_kubelet_args() -> None:
    config = minimal_cell_config()
    config["nodePools"]["h100-vm"] = gpu_pool(
        topology={
            "reservedCpus": "0-3,112-115",
            "reservedMemoryPerNumaMib": 4096,
            "cpusPerNuma": 112,
            "memoryPerNumaGib": 1024,
        }
    )
    topology = cell(config).node_pools["h100-vm"].topology
    assert topology is not None
    assert topology.kubelet_args() == [
        "cpu-manager-policy=static",
        "reserved-cpus=0-3,112-115",
        "memory-manager-policy=Static",
        "reserved-memory=0:memory=4096Mi;1:memory=4096Mi",
        "system-reserved=memory=7692Mi",
        "eviction-hard=memory.available<500Mi,nodefs.available<10%,imagefs.available<15%,nodefs.inodesFree<5%",
        "topology-manager-policy=restricted",
        "topology-manager-scope=pod",
    ]


def test_pool_ssh_override(cell_config: dict[str, Any]) -> None:
    cell_config["ssh"] = {"user": "ubuntu", "port": 2222}
    cell_config["nodePools"]["cpu"]["ssh"] = {"port": 22}
    spec = cell(cell_config)
    assert (spec.ssh_for("cpu").user, spec.ssh_for("cpu").port) == ("ubuntu", 22)
    assert spec.ssh_for("servers").port == 2222


def test_config_error_at_joins_paths() -> None:
    assert str(ConfigError.at(("regions", "fra1", "hosts", 0, "name"), "bad")) == "regions.fra1.hosts[0].name: bad"


def test_cell_spec_is_frozen() -> None:
    spec = CellSpec.model_validate(minimal_cell_config())
    with pytest.raises(pydantic.ValidationError):
        spec.network = spec.network  # type: ignore[misc]


def test_pool_label_may_not_override_a_managed_label(cell_config: dict[str, Any]) -> None:
    cell_config["nodePools"]["cpu"]["labels"] = {"gpucell.io/pool": "other"}
    assert errors_of(cell_config) == [
        "regions.fra1.nodePools.cpu.labels.gpucell.io/pool: is set by gpucell from the pool spec; remove it "
        "from the pool's labels"
    ]


def test_storage_values_need_longhorn(cell_config: dict[str, Any]) -> None:
    cell_config["storage"] = {"backend": "local-path", "values": {"persistence": {}}}
    assert errors_of(cell_config) == [
        "regions.fra1.storage.values: only applies to the longhorn backend (local-path is built into k3s and has "
        "no chart values)"
    ]


def test_longhorn_replicas_need_as_many_nodes(cell_config: dict[str, Any]) -> None:
    cell_config["storage"] = {"backend": "longhorn", "replicas": 4}
    assert errors_of(cell_config) == [
        "regions.fra1.storage.replicas: 4 replicas need as many nodes, the region has 3; Longhorn keeps each "
        "replica of a volume on a different node"
    ]


@pytest.mark.parametrize(
    ("version", "mode", "raw"), [("v0.20.0", "Knative", "Standard"), ("v0.15.2", "Serverless", "RawDeployment")]
)
def test_knative_modes_are_rejected(cell_config: dict[str, Any], version: str, mode: str, raw: str) -> None:
    cell_config["versions"] = {"kserve": version}
    cell_config["kserve"] = {"deploymentMode": mode}
    assert errors_of(cell_config) == [
        f"regions.fra1.kserve.deploymentMode: '{mode}' needs Knative Serving, which gpucell does not install; use {raw}"
    ]


@pytest.mark.parametrize("endpoint", ["", "https://api:6443", "api.fra1.example.net:6443", "API.example"])
def test_api_endpoint_is_a_bare_address_or_name(cell_config: dict[str, Any], endpoint: str) -> None:
    cell_config["network"]["apiEndpoint"] = endpoint
    assert errors_of(cell_config) == [
        f"regions.fra1.network.apiEndpoint: {endpoint!r} is neither an IP address nor a DNS name; give a bare "
        "address or name such as 10.0.0.10 or api.fra1.example.net (no https://, no :port)"
    ]


def test_tls_sans_are_addresses_or_names(cell_config: dict[str, Any]) -> None:
    cell_config["network"]["tlsSans"] = ["api.example.net", "*bad*"]
    assert errors_of(cell_config) == [
        "regions.fra1.network.tlsSans[1]: '*bad*' is neither an IP address nor a DNS name; give a bare address "
        "or name such as 10.0.0.10 or api.fra1.example.net (no https://, no :port)"
    ]


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        (
            {"bad key": "x"},
            "regions.fra1.nodePools.cpu.labels['bad key']: 'bad key' is not a label key; use "
            "[dns-prefix/]name, name at most 63 of [A-Za-z0-9-_.]",
        ),
        (
            {"example.com/rack": "r 7"},
            "regions.fra1.nodePools.cpu.labels.example.com/rack: 'r 7' is not a label "
            "value; at most 63 of [A-Za-z0-9-_.], alphanumeric at both ends",
        ),
    ],
)
def test_labels_use_kubernetes_syntax(cell_config: dict[str, Any], labels: dict[str, str], message: str) -> None:
    cell_config["nodePools"]["cpu"]["labels"] = labels
    assert errors_of(cell_config) == [message]


def test_taints_use_kubernetes_syntax(cell_config: dict[str, Any]) -> None:
    cell_config["nodePools"]["cpu"]["taints"] = ["dedicated=vm:NoSchedule", "NoSchedule"]
    assert errors_of(cell_config) == [
        "regions.fra1.nodePools.cpu.taints[1]: 'NoSchedule' is not a taint; use "
        "key[=value]:NoSchedule|PreferNoSchedule|NoExecute"
    ]
    cell_config["nodePools"]["cpu"]["taints"] = ["dedicated=vm:NoSchedule"]
    assert cell(cell_config).node_pools["cpu"].taints == ["dedicated=vm:NoSchedule"]


@pytest.mark.parametrize("value", [True, "eight", 8.5])
def test_counts_are_strict_integers(cell_config: dict[str, Any], value: object) -> None:
    cell_config["nodePools"]["l40s"]["gpusPerNode"] = value
    written = "true" if value is True else repr(value)  # as the stack file (YAML) writes it
    assert errors_of(cell_config) == [f"regions.fra1.nodePools.l40s.gpusPerNode: {written} is not a whole number"]


def test_cluster_dns_is_a_host_address(cell_config: dict[str, Any]) -> None:
    cell_config["network"]["clusterDns"] = "10.43.0.0"
    assert errors_of(cell_config) == [
        "regions.fra1.network.clusterDns: '10.43.0.0' is the network or broadcast address of 10.43.0.0/16; use a "
        "host address such as the .10"
    ]


@pytest.mark.parametrize(
    ("section", "values", "message"),
    [
        (
            "cilium",
            {"k8sServiceHost": "10.0.0.1"},
            "regions.fra1.cilium.values.k8sServiceHost: is set by gpucell from network.apiEndpoint; set "
            "network.apiEndpoint instead",
        ),
        (
            "kserve",
            {"kserve": {"controller": {"deploymentMode": "Knative"}}},
            "regions.fra1.kserve.values.kserve.controller.deploymentMode: is set by gpucell from "
            "kserve.deploymentMode; set kserve.deploymentMode instead",
        ),
    ],
)
def test_values_may_not_override_typed_keys(
    cell_config: dict[str, Any], section: str, values: dict[str, Any], message: str
) -> None:
    cell_config[section] = {"values": values}
    assert errors_of(cell_config) == [message]


# -- hardware: host memory, vGPU frameworks, HGX boards, Longhorn taints ------------------------------------------

VGPU_DRIVER = {"repository": "registry.example.com/nvidia", "version": "580.95.02-ubuntu24.04"}


def test_topology_declares_host_memory(cell_config: dict[str, Any]) -> None:
    cell_config["nodePools"]["h100-vm"] = gpu_pool(topology={"reservedCpus": "0-3", "cpusPerNuma": 112})
    assert errors_of(cell_config) == [
        "regions.fra1.nodePools.h100-vm.topology.memoryPerNumaGib: required key is missing"
    ]


def test_topology_reserved_cpus_exist_and_count(cell_config: dict[str, Any]) -> None:
    cell_config["nodePools"]["h100-vm"] = gpu_pool(
        topology={"reservedCpus": "0-3,112-115", "cpusPerNuma": 56, "memoryPerNumaGib": 1024}
    )
    assert errors_of(cell_config) == [
        "regions.fra1.nodePools.h100-vm.topology.reservedCpus: '0-3,112-115' names CPU 115, the host has 112 (2 NUMA "
        "nodes x cpusPerNuma 56)"
    ]
    cell_config["nodePools"]["h100-vm"]["topology"]["cpusPerNuma"] = 112
    topology = cell(cell_config).node_pools["h100-vm"].topology
    assert topology is not None
    assert (topology.cpus, topology.allocatable_cpus) == (224, 216)


def test_topology_hugepages_must_fit_the_numa_node(cell_config: dict[str, Any]) -> None:
    cell_config["nodePools"]["h100-vm"] = gpu_pool(
        topology={
            "reservedCpus": "0-3",
            "cpusPerNuma": 112,
            "memoryPerNumaGib": 1024,
            "reservedMemoryPerNumaMib": 4096,
            "hugepages1GiPerNuma": 1020,
            "hugepages2MiPerNuma": 512,
        }
    )
    assert errors_of(cell_config) == [
        "regions.fra1.nodePools.h100-vm.topology.hugepages1GiPerNuma: 1020 x 1Gi and 512 x 2Mi hugepages plus "
        "reservedMemoryPerNumaMib 4096 exceed memoryPerNumaGib 1024 per NUMA node"
    ]
    cell_config["nodePools"]["h100-vm"]["topology"]["hugepages1GiPerNuma"] = 1018
    topology = cell(cell_config).node_pools["h100-vm"].topology
    assert topology is not None
    assert topology.regular_memory_per_numa_mib == 1024 * 1024 - 1018 * 1024 - 1024 - 4096
    assert (topology.hugepages_per_numa("1Gi"), topology.hugepages_mib_per_numa("2Mi")) == (1018, 1024)


def test_vgpu_driver_tag_must_carry_the_driver_version(cell_config: dict[str, Any]) -> None:
    cell_config["nodePools"]["l40s-vgpu"] = gpu_pool(gpuModel="L40S", gpuMode="vm-vgpu", vgpuProfile="L40S-12Q")
    cell_config["gpuOperator"] = {"vgpuDriverImage": {"repository": "registry.example.com/nvidia", "version": "latest"}}
    assert errors_of(cell_config) == [
        "regions.fra1.gpuOperator.vgpuDriverImage.version: 'latest' does not start with the vGPU host driver "
        "version (e.g. 580.95.02-ubuntu24.04): gpucell reads the driver branch from it to tell mediated-device "
        "vGPUs from SR-IOV ones; tag the image so"
    ]


def test_sriov_vgpu_needs_a_catalogued_vf_id(cell_config: dict[str, Any]) -> None:
    cell_config["nodePools"]["l4-vgpu"] = gpu_pool(gpuModel="L4", gpuMode="vm-vgpu", vgpuProfile="L4-12Q")
    cell_config["gpuOperator"] = {"vgpuDriverImage": VGPU_DRIVER}
    assert errors_of(cell_config) == [
        "regions.fra1.nodePools.l4-vgpu.gpuModel: 'L4': with vGPU driver branch 580 its vGPUs are SR-IOV virtual "
        "functions, and the PCI id those report is not catalogued (KubeVirt permits VFs by vendor:device id); run "
        "L4 in vm-passthrough or container mode"
    ]
    cell_config["gpuOperator"]["vgpuDriverImage"] = {**VGPU_DRIVER, "version": "535.216.01"}  # vGPU 16: mdev
    assert cell(cell_config).vgpu_pools(VgpuFramework.MDEV) == {"l4-vgpu": cell(cell_config).node_pools["l4-vgpu"]}


def test_sriov_vgpu_one_type_per_model(cell_config: dict[str, Any]) -> None:
    cell_config["gpuOperator"] = {"vgpuDriverImage": VGPU_DRIVER}
    cell_config["nodePools"]["l40s-a"] = gpu_pool(gpuModel="L40S", gpuMode="vm-vgpu", vgpuProfile="L40S-12Q")
    cell_config["nodePools"]["l40s-b"] = gpu_pool(
        gpuModel="L40S",
        gpuMode="vm-vgpu",
        vgpuProfile="L40S-24Q",
        hosts=[{"name": "fra1-l40s-2", "address": "10.20.0.42"}],
    )
    assert errors_of(cell_config) == [
        "regions.fra1.nodePools.l40s-b.vgpuProfile: 'L40S-24Q': pool l40s-a already runs L40S SR-IOV vGPUs as "
        "L40S-12Q, and KubeVirt advertises every VF of one PCI id (10DE:26B9) under one resource; use one "
        "vgpuProfile per GPU model"
    ]
    cell_config["nodePools"]["l40s-b"]["vgpuProfile"] = "L40S-12Q"
    assert list(cell(cell_config).vgpu_pools(VgpuFramework.SRIOV)) == ["l40s-a", "l40s-b"]


def test_sriov_vgpu_and_passthrough_of_one_model(cell_config: dict[str, Any]) -> None:
    cell_config["gpuOperator"] = {"vgpuDriverImage": VGPU_DRIVER}
    cell_config["nodePools"]["l40s-pt"] = gpu_pool(gpuModel="L40S")
    cell_config["nodePools"]["l40s-vgpu"] = gpu_pool(
        gpuModel="L40S",
        gpuMode="vm-vgpu",
        vgpuProfile="L40S-12Q",
        hosts=[{"name": "fra1-l40s-2", "address": "10.20.0.42"}],
    )
    assert errors_of(cell_config) == [
        "regions.fra1.nodePools.l40s-vgpu.gpuModel: 'L40S': pool l40s-pt passes L40S through whole (10DE:26B9 on "
        "vfio-pci), which KubeVirt's device plugin for this pool's VFs would also advertise as "
        "nvidia.com/NVIDIA_L40S-12Q; give L40S one VM mode per region"
    ]


def test_mdev_vgpu_on_turing_with_a_current_driver(cell_config: dict[str, Any]) -> None:
    cell_config["gpuOperator"] = {"vgpuDriverImage": VGPU_DRIVER}
    cell_config["nodePools"]["t4-vgpu"] = gpu_pool(gpuModel="T4", gpusPerNode=4, gpuMode="vm-vgpu", vgpuProfile="T4-4Q")
    spec = cell(cell_config)
    assert list(spec.vgpu_pools(VgpuFramework.MDEV)) == ["t4-vgpu"]
    assert spec.vgpu_pools(VgpuFramework.SRIOV) == {}


def test_hgx_passthrough_pools_hold_whole_boards(cell_config: dict[str, Any]) -> None:
    cell_config["nodePools"]["h100-vm"] = gpu_pool(gpusPerNode=4)
    assert errors_of(cell_config) == [
        "regions.fra1.nodePools.h100-vm.gpusPerNode: 4 H100-SXM5-80GB GPUs per node: gpucell models SXM GPUs on "
        "8-GPU HGX boards, whose NVLinks run through NVSwitches; vm-passthrough pools of H100-SXM5-80GB need "
        "gpusPerNode 8 (other baseboards: use container mode)"
    ]
    cell_config["nodePools"]["h100-vm"]["gpuMode"] = "container"
    assert cell(cell_config).node_pools["h100-vm"].gpus_per_node == 4


def test_longhorn_taint_keys_outside_kubernetes_io(cell_config: dict[str, Any]) -> None:
    cell_config["storage"] = {"backend": "longhorn", "replicas": 1}
    cell_config["nodePools"]["l40s"]["taints"] = ["gpucell.io/gpu:NoSchedule", "node-role.kubernetes.io/gpu:NoSchedule"]
    assert errors_of(cell_config) == [
        "regions.fra1.nodePools.l40s.taints[1]: 'node-role.kubernetes.io/gpu:NoSchedule': Longhorn's "
        "taint-toleration setting refuses keys containing kubernetes.io, so its instance managers and CSI plugin "
        "could not run on this pool; use a key such as gpucell.io/gpu"
    ]
    cell_config["storage"] = {"backend": "local-path"}
    assert cell(cell_config).node_pools["l40s"].taints[1] == "node-role.kubernetes.io/gpu:NoSchedule"


def test_pool_labels_may_not_turn_operands_back_on(cell_config: dict[str, Any]) -> None:
    cell_config["nodePools"]["l40s"]["labels"] = {"nvidia.com/gpu.deploy.sandbox-validator": "true"}
    assert errors_of(cell_config) == [
        "regions.fra1.nodePools.l40s.labels.nvidia.com/gpu.deploy.sandbox-validator: is set by gpucell from the "
        "pool spec; remove it from the pool's labels"
    ]
