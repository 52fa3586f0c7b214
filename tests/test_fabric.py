"""The GPU fabric (issue 32, decision 0039): a pool's PCIe topology and RDMA NICs, checked in the spec and on the
host by bash against a stub sysfs."""

from __future__ import annotations

import copy
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gpucell.errors import ConfigError
from gpucell.k3s._host_setup import fabric_check, host_setup
from tests.conftest import cell, minimal_cell_config

PREAMBLE = '#!/usr/bin/env bash\nset -euo pipefail\nas_root() { "$@"; }\n'
TOPOLOGY = {
    "reservedCpus": "0-3",
    "numaNodes": 2,
    "cpusPerNuma": 112,
    "memoryPerNumaGib": 1024,
    "reservedMemoryPerNumaMib": 4096,
    "hugepages1GiPerNuma": 960,
}
FABRIC = {
    "linkType": "ethernet",
    "nvswitches": ["0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0"],
    "switches": [
        {"numaNode": 0, "gpus": ["0000:18:00.0", "0000:2a:00.0"], "nics": ["0000:17:00.0", "0000:29:00.0"]},
        {"numaNode": 0, "gpus": ["0000:3a:00.0", "0000:5d:00.0"], "nics": ["0000:39:00.0", "0000:5c:00.0"]},
        {"numaNode": 1, "gpus": ["0000:9a:00.0", "0000:ab:00.0"], "nics": ["0000:99:00.0", "0000:aa:00.0"]},
        {"numaNode": 1, "gpus": ["0000:ba:00.0", "0000:db:00.0"], "nics": ["0000:b9:00.0", "0000:da:00.0"]},
    ],
}


def fabric_region(fabric: dict[str, Any] | None = None) -> dict[str, Any]:
    """A region with an 8-GPU H100 vm-passthrough pool whose hosts declare 8 ConnectX-7 NICs, 4 per NUMA node."""
    config = minimal_cell_config()
    config["nodePools"]["h100-vm"] = {
        "role": "gpu",
        "gpuModel": "H100-SXM5-80GB",
        "gpusPerNode": 8,
        "gpuMode": "vm-passthrough",
        "topology": dict(TOPOLOGY),
        "fabric": copy.deepcopy(fabric or FABRIC),
        "hosts": [
            {"name": "lab-h100-1", "address": "10.20.0.41"},
            {"name": "lab-h100-2", "address": "10.20.0.42"},
        ],
    }
    return config


def refusal(config: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as raised:
        cell(config)
    return str(raised.value)


# -- the spec -----------------------------------------------------------------------------------------------------
def test_rails_pair_each_gpu_with_the_nic_on_its_switch() -> None:
    fabric = cell(fabric_region()).node_pools["h100-vm"].fabric
    assert fabric is not None
    assert [(r.index, r.nic, r.gpu, r.numa_node, r.switch) for r in fabric.rails[:3]] == [
        (0, "0000:17:00.0", "0000:18:00.0", 0, 0),
        (1, "0000:29:00.0", "0000:2a:00.0", 0, 0),
        (2, "0000:39:00.0", "0000:3a:00.0", 0, 1),
    ]
    assert fabric.rails_of(1) == [4, 5, 6, 7]


def test_a_switch_with_fewer_nics_than_gpus_is_refused() -> None:
    fabric = copy.deepcopy(FABRIC)
    fabric["switches"][1]["nics"] = ["0000:39:00.0"]
    assert refusal(fabric_region(fabric)).endswith(
        "nodePools.h100-vm.fabric.switches[1].nics: 1 NICs for 2 GPUs: each GPU pairs with the NIC on its own switch "
        "(a rail); list one NIC per GPU, in the same order"
    )


def test_gpus_spread_unevenly_over_numa_nodes_are_refused() -> None:
    fabric = copy.deepcopy(FABRIC)
    fabric["switches"][2]["numaNode"] = 0
    assert refusal(fabric_region(fabric)).endswith(
        "nodePools.h100-vm.fabric.switches: spread the GPUs unevenly over the NUMA nodes (node 0: 6, node 1: 2); "
        "gpucell hands VMs whole NUMA nodes of GPUs and NICs, so every NUMA node must hold as many"
    )


def test_a_fabric_needs_a_passthrough_pool_with_a_topology() -> None:
    config = fabric_region()
    del config["nodePools"]["h100-vm"]["topology"]
    assert refusal(config).endswith(
        "nodePools.h100-vm.fabric: needs a vm-passthrough pool with a topology profile (its VMs get each GPU's NIC "
        "as an SR-IOV VF, aligned by NUMA node; this pool has none)"
    )


def test_an_address_listed_twice_is_refused() -> None:
    fabric = copy.deepcopy(FABRIC)
    fabric["switches"][3]["nics"][1] = "0000:17:00.0"
    assert refusal(fabric_region(fabric)).endswith(
        "nodePools.h100-vm.fabric.switches[3].nics[1]: '0000:17:00.0' is already listed at fabric.switches[0].nics[0]"
    )


# -- the host check ------------------------------------------------------------------------------------------------
def stub_pci(sysfs: Path, devices: dict[str, tuple[str, str, int]]) -> None:
    """``/sys/bus/pci/devices/<bdf>/{vendor,device,numa_node}`` as the kernel writes them (``0x15b3``)."""
    for bdf, (vendor, device, numa) in devices.items():
        base = sysfs / "bus" / "pci" / "devices" / bdf
        base.mkdir(parents=True)
        (base / "vendor").write_text(f"0x{vendor}\n")
        (base / "device").write_text(f"0x{device}\n")
        (base / "numa_node").write_text(f"{numa}\n")


def declared_host(**moved: int) -> dict[str, tuple[str, str, int]]:
    """The PCI devices of a host as FABRIC declares them; ``moved`` puts a device (``_`` for ``:`` and ``.``,
    ``d0000_17_00_0=1``) on another NUMA node."""
    devices: dict[str, tuple[str, str, int]] = {}
    for switch in FABRIC["switches"]:
        devices |= dict.fromkeys(switch["gpus"], ("10de", "2330", switch["numaNode"]))
        devices |= dict.fromkeys(switch["nics"], ("15b3", "1021", switch["numaNode"]))
    devices |= dict.fromkeys(FABRIC["nvswitches"], ("10de", "22a3", -1))
    for key, numa in moved.items():
        bdf = f"{key[1:5]}:{key[6:8]}:{key[9:11]}.{key[12]}"
        vendor, device, _ = devices[bdf]
        devices[bdf] = (vendor, device, numa)
    return devices


def run_check(sysfs: Path) -> subprocess.CompletedProcess[str]:
    pool = cell(fabric_region()).node_pools["h100-vm"]
    script = PREAMBLE + fabric_check("h100-vm", pool)
    env = {**os.environ, "GPUCELL_SYSFS_ROOT": str(sysfs)}
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, check=False)


def test_the_host_check_passes_on_the_declared_host(tmp_path: Path) -> None:
    stub_pci(tmp_path, declared_host())
    done = run_check(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "gpucell: PCIe topology of pool h100-vm as declared: 8 GPUs and 8 ConnectX-7 NICs (NUMA node 0: rails 0-3, "
        "NUMA node 1: rails 4-7)\n"
    )


def test_the_host_check_stops_on_a_nic_on_the_wrong_numa_node(tmp_path: Path) -> None:
    stub_pci(tmp_path, declared_host(d0000_39_00_0=1))
    done = run_check(tmp_path)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == (
        "gpucell: NIC 0000:39:00.0 sits on NUMA node 1 (numa_node), pool h100-vm declares it on NUMA node 0 "
        "(fabric.switches[1].nics[0]); correct nodePools.h100-vm.fabric from this host (lspci -Dnn; numa_node in "
        f"{tmp_path}/bus/pci/devices/<address>)\n"
    )


def test_the_host_check_stops_on_a_missing_or_other_device(tmp_path: Path) -> None:
    devices = declared_host()
    devices["0000:da:00.0"] = ("8086", "159b", 1)  # an Intel E810 where the pool declares a ConnectX-7
    del devices["0000:05:00.0"]
    stub_pci(tmp_path, devices)
    done = run_check(tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith(
        "gpucell: 0000:da:00.0 (fabric.switches[3].nics[1]) is PCI device 8086:159b, not the NIC the pool declares "
        "(15b3:1021); correct nodePools.h100-vm.fabric"
    )
    devices["0000:da:00.0"] = ("15b3", "1021", 1)
    (tmp_path / "bus").rename(tmp_path / "old")
    stub_pci(tmp_path, devices)
    assert run_check(tmp_path).stderr.startswith(
        "gpucell: NVSwitch 0000:05:00.0 (fabric.nvswitches[0]) is not a PCI device of this host;"
    )


def test_the_install_fragment_checks_the_fabric_after_memory() -> None:
    spec = cell(fabric_region())
    pool = spec.node_pools["h100-vm"]
    fragment = host_setup(spec, "h100-vm", pool)
    assert fabric_check("h100-vm", pool) in fragment
    assert fragment.index("topology.numaNodes") < fragment.index("PCIe topology of pool h100-vm")


# -- tenants, VMs and admission ------------------------------------------------------------------------------------
DISK = {"source": {"registry": "docker://quay.io/containerdisks/ubuntu:24.04"}, "sizeGib": 50}


def training_vm(gpus: int, rails: list[int], **extra: Any) -> dict[str, Any]:
    return {
        "gpuModel": "H100-SXM5-80GB",
        "gpus": gpus,
        "cpu": {"cores": 16},
        "memoryGib": 64,
        "dedicatedCpus": True,
        "hugepages": "1Gi",
        "numaPassthrough": True,
        "rdmaNics": rails,
        "rootDisk": DISK,
        "noLogin": True,
        **extra,
    }


def tenant_region(vms: dict[str, dict[str, Any]], *, vlan: int | None = 101, gpus: int = 8) -> dict[str, Any]:
    config = fabric_region()
    tenant: dict[str, Any] = {
        "quota": {
            "cpuMillicores": 64000,
            "memoryGib": 512,
            "storageGib": 1000,
            "gpus": {"nvidia.com/GH100_H100_SXM5_80GB": gpus},
        },
        "egress": "internet",
        "virtualMachines": vms,
    }
    if vlan is not None:
        tenant["fabricVlan"] = vlan
    config["tenants"] = {"acme": tenant}
    return config


def test_an_eight_gpu_vm_gets_every_rail_as_a_sriov_interface_on_its_tenants_network() -> None:
    from gpucell.tenancy._common import vm_placement
    from gpucell.workloads.virtual_machine import virtual_machine_manifest

    spec = cell(tenant_region({"train": training_vm(8, list(range(8)))}))
    vm = spec.tenants["acme"].virtual_machines["train"]
    placement = vm_placement("train", vm, spec)
    assert (placement.pools, placement.rails, placement.count) == (("h100-vm",), tuple(range(8)), 8)
    template = virtual_machine_manifest("acme", "train", vm, spec, placement)["spec"]["template"]["spec"]
    assert template["domain"]["cpu"]["numa"] == {"guestMappingPassthrough": {}}
    assert template["domain"]["cpu"]["dedicatedCpuPlacement"] is True
    assert template["domain"]["devices"]["interfaces"][1:3] == [
        {"name": "rail0", "sriov": {}},
        {"name": "rail1", "sriov": {}},
    ]
    assert template["networks"][-1] == {"name": "rail7", "multus": {"networkName": "acme-h100-vm-rail7"}}
    assert len(template["domain"]["devices"]["gpus"]) == len(template["networks"]) - 1 == 8


def test_a_half_node_vm_gets_the_rails_of_one_numa_node() -> None:
    from gpucell.tenancy._common import vm_placement

    spec = cell(tenant_region({"half": training_vm(4, [4, 5, 6, 7])}))
    assert vm_placement("half", spec.tenants["acme"].virtual_machines["half"], spec).rails == (4, 5, 6, 7)


def test_a_vm_with_a_nic_from_the_other_socket_is_refused_with_one_line() -> None:
    assert refusal(tenant_region({"half": training_vm(4, [0, 1, 2, 7])})).endswith(
        "tenants.acme.virtualMachines.half.rdmaNics: [0, 1, 2, 7] takes NICs from NUMA nodes 0 and 1 of pool "
        "h100-vm, and 4 GPUs come from 1 whole NUMA node with the NICs beside them; name exactly the rails of the "
        "GPUs' NUMA nodes (NUMA node 0: rails 0-3, NUMA node 1: rails 4-7)"
    )


def test_a_vm_smaller_than_a_numa_node_is_refused_with_the_way_out() -> None:
    assert refusal(tenant_region({"pair": training_vm(2, [0, 1])})).endswith(
        "tenants.acme.virtualMachines.pair.gpus: 2 GPUs with rdmaNics: pool h100-vm pairs GPUs with NICs by whole "
        "NUMA nodes of 4 GPUs (NUMA node 0: rails 0-3, NUMA node 1: rails 4-7); give the VM a multiple of 4 GPUs, "
        "or drop rdmaNics"
    )


def test_rdma_nics_need_numa_passthrough_and_one_nic_per_gpu() -> None:
    vm = training_vm(4, [0, 1, 2, 3])
    vm["numaPassthrough"] = False
    assert refusal(tenant_region({"x": vm})).endswith(
        "tenants.acme.virtualMachines.x.numaPassthrough: is required with rdmaNics: the guest must see which NUMA "
        "node each GPU and NIC sits on to pair them"
    )
    assert refusal(tenant_region({"x": training_vm(4, [0, 1])})).endswith(
        "tenants.acme.virtualMachines.x.rdmaNics: 2 NICs for 4 whole GPUs: a VM gets one RDMA NIC per passthrough "
        "GPU, the one beside it"
    )


def test_a_tenant_needs_its_own_vlan_for_rdma_nics() -> None:
    assert refusal(tenant_region({"x": training_vm(4, [0, 1, 2, 3])}, vlan=None)).endswith(
        "tenants.acme.virtualMachines.x.rdmaNics: needs the tenant's fabricVlan (tenants.acme.fabricVlan), the VLAN "
        "its NICs' VFs are put on; give the tenant a VLAN of the fabric no other tenant has"
    )
    config = tenant_region({})
    config["tenants"]["globex"] = copy.deepcopy(config["tenants"]["acme"])
    config["tenants"]["acme"]["quota"]["gpus"] = {"nvidia.com/GH100_H100_SXM5_80GB": 4}
    config["tenants"]["globex"]["quota"]["gpus"] = {"nvidia.com/GH100_H100_SXM5_80GB": 4}
    assert refusal(config).endswith(
        "tenants.globex.fabricVlan: 101 is already tenant acme's: a VLAN isolates one tenant on the fabric; pick "
        "another"
    )


def test_two_vms_on_the_same_rails_exceed_a_one_host_quota() -> None:
    vms = {"a": training_vm(4, [0, 1, 2, 3]), "b": training_vm(4, [0, 1, 2, 3])}
    assert refusal(tenant_region(vms)).endswith(
        "tenants.acme.virtualMachines.b.rdmaNics: takes VF 2 of nvidia.com/h100vm_rail0, the tenant's quota allows "
        "1 (one per host its GPU quota of the pool covers, decision 0039); raise quota.gpus"
    )


def test_the_tenant_quota_counts_each_rails_vfs() -> None:
    from gpucell.tenancy.tenant import quota_hard

    spec = cell(tenant_region({}, gpus=16))
    hard = quota_hard(spec.tenants["acme"], spec)
    rails = {key: value for key, value in hard.items() if "_rail" in key}
    assert rails == {f"requests.nvidia.com/h100vm_rail{i}": "2" for i in range(8)}
    bare = cell(tenant_region({}, vlan=None, gpus=16))
    assert {v for k, v in quota_hard(bare.tenants["acme"], bare).items() if "_rail" in k} == {"0"}


# -- the platform --------------------------------------------------------------------------------------------------
def test_the_kubevirt_cr_turns_the_pci_numa_gate_on_with_a_fabric() -> None:
    from gpucell.components.kubevirt import feature_gates

    assert feature_gates(cell(fabric_region()).node_pools) == ["HostDevices", "CPUManager", "PCINUMAAwareTopology"]
    assert "PCINUMAAwareTopology" not in feature_gates(cell(minimal_cell_config()).node_pools)


def test_the_network_operator_objects_by_value() -> None:
    from gpucell.components.cilium import CiliumArgs
    from gpucell.components.network_operator import nic_cluster_policy, node_policies, tenant_networks

    pools = cell(fabric_region()).node_pools
    first, *rest = node_policies(pools)
    assert first == {
        "apiVersion": "sriovnetwork.openshift.io/v1",
        "kind": "SriovNetworkNodePolicy",
        "metadata": {
            "name": "h100-vm-rail0",
            "namespace": "nvidia-network-operator",
            "labels": {"app.kubernetes.io/managed-by": "gpucell"},
        },
        "spec": {
            "resourceName": "h100vm_rail0",
            "nodeSelector": {"gpucell.io/pool": "h100-vm"},
            "numVfs": 1,
            "nicSelector": {"vendor": "15b3", "deviceID": "1021", "rootDevices": ["0000:17:00.0"]},
            "deviceType": "vfio-pci",
            "linkType": "eth",
        },
    }
    assert [p["spec"]["nicSelector"]["rootDevices"] for p in rest][-1] == ["0000:da:00.0"]
    networks = tenant_networks(pools, {"acme": 101})
    assert len(networks) == 8
    assert networks[3]["metadata"]["name"] == "acme-h100-vm-rail3"
    assert networks[3]["spec"] == {
        "resourceName": "h100vm_rail3",
        "networkNamespace": "tenant-acme",
        "vlan": 101,
        "spoofChk": "on",
        "trust": "off",
        "linkState": "enable",
    }
    policy = nic_cluster_policy(pools)["spec"]
    term = policy["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    assert term == {"matchExpressions": [{"key": "gpucell.io/pool", "operator": "In", "values": ["h100-vm"]}]}
    assert policy["ofedDriver"]["version"] == "doca3.4.1-26.04-1.1.0.0-1"
    assert "cni" not in CiliumArgs.from_cell(cell(minimal_cell_config()), None).values()  # type: ignore[arg-type]
    assert CiliumArgs.from_cell(cell(fabric_region()), None).values()["cni"] == {"exclusive": False}  # type: ignore[arg-type]


def test_the_network_operators_daemonsets_tolerate_the_fabric_pools_taints_and_acceptance() -> None:
    from gpucell.components.network_operator import nic_cluster_policy

    acceptance = {"key": "gpucell.io/acceptance", "operator": "Exists", "effect": "NoSchedule"}
    region = fabric_region()
    assert nic_cluster_policy(cell(region).node_pools)["spec"]["tolerations"] == [acceptance]
    region["nodePools"]["h100-vm"]["taints"] = ["gpucell.io/fabric=h100:NoSchedule", "nvidia.com/gpu:NoExecute"]
    assert nic_cluster_policy(cell(region).node_pools)["spec"]["tolerations"] == [
        {"key": "gpucell.io/fabric", "operator": "Equal", "value": "h100", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"},
        acceptance,
    ]
    region["nodePools"]["h100-vm"]["acceptance"] = {"skip": True}
    region["nodePools"]["h100-vm"]["taints"] = []
    assert "tolerations" not in nic_cluster_policy(cell(region).node_pools)["spec"]
    # a tainted pool without a fabric does not widen the Network Operator's DaemonSets
    region = fabric_region()
    region["nodePools"]["gpu"] = {
        "role": "gpu",
        "gpuModel": "L40S",
        "gpusPerNode": 2,
        "gpuMode": "container",
        "taints": ["l40s:NoSchedule"],
        "hosts": [{"name": "lab-l40s-1", "address": "10.20.0.51"}],
    }
    assert nic_cluster_policy(cell(region).node_pools)["spec"]["tolerations"] == [acceptance]


def test_a_pools_fabric_change_is_disruptive_for_each_of_its_hosts() -> None:
    from gpucell.day2.disruption import Change, compare, fingerprint

    before = cell(fabric_region())
    changed = copy.deepcopy(FABRIC)
    changed["vfsPerNic"] = 2
    after = cell(fabric_region(changed))
    change, other = compare(fingerprint(before), fingerprint(after), "lab")
    assert (change.change, change.subject, change.key, other.subject) == (
        Change.FABRIC,
        "lab-h100-1",
        "regions.lab.nodePools.h100-vm.fabric",
        "lab-h100-2",
    )
    assert change.old.startswith("ethernet, 8 x ConnectX-7, 1 VF each, topology ")
    assert change.new.startswith("ethernet, 8 x ConnectX-7, 2 VF each, topology ")
    assert compare(fingerprint(before), fingerprint(cell(fabric_region())), "lab") == []


def test_a_tenants_vlan_change_is_disruptive_its_first_vlan_is_not() -> None:
    """Review of round 1: a running VM keeps its VFs' VLAN until restarted, so a changed (or swapped) VLAN was
    applied with no word in the review."""
    from gpucell.day2.disruption import Change, compare, fingerprint

    config = tenant_region({"train": training_vm(8, list(range(8)))})
    before = fingerprint(cell(config))
    config["tenants"]["acme"]["fabricVlan"] = 102
    (change,) = compare(before, fingerprint(cell(config)), "lab")
    assert (change.change, change.subject, change.key, change.old, change.new) == (
        Change.FABRIC_VLAN,
        "acme",
        "regions.lab.tenants.acme.fabricVlan",
        "101",
        "102",
    )
    assert change.acknowledgement() == '{change: fabricVlan, region: lab, subject: acme, reason: "..."}'
    first = fingerprint(cell(tenant_region({}, vlan=None)))
    assert compare(first, fingerprint(cell(tenant_region({}))), "lab") == []


# -- tenant clusters -----------------------------------------------------------------------------------------------
def fabric_cluster_region(rails: list[int], gpus: int = 4) -> dict[str, Any]:
    """tests/test_tenant_cluster.py's region, its H100 pool with FABRIC and acme's workers with ``gpus`` GPUs and the
    rails ``rails``."""
    from tests.test_tenant_cluster import region_config

    config = region_config()
    config["nodePools"]["h100-vm"]["fabric"] = copy.deepcopy(FABRIC)
    config["tenants"]["acme"]["fabricVlan"] = 101
    workers = config["tenants"]["acme"]["tenantClusters"]["ml"]["workerPools"]["gpu"]
    workers.update({"replicas": 1, "gpus": gpus, "dedicatedCpus": True, "numaPassthrough": True, "rdmaNics": rails})
    return config


def test_a_tenant_clusters_gpu_workers_get_their_gpus_nics_the_same_way() -> None:
    from tests.test_tenant_cluster import machine_template

    template = machine_template(cell(fabric_cluster_region([4, 5, 6, 7])))["spec"]["template"]["spec"]
    assert template["domain"]["devices"]["interfaces"][1:] == [{"name": f"rail{r}", "sriov": {}} for r in (4, 5, 6, 7)]
    assert template["networks"][1] == {"name": "rail4", "multus": {"networkName": "acme-h100-vm-rail4"}}
    assert template["domain"]["cpu"]["numa"] == {"guestMappingPassthrough": {}}
    assert refusal(fabric_cluster_region([3, 4, 5, 6])).endswith(
        "tenants.acme.tenantClusters.ml.workerPools.gpu.rdmaNics: [3, 4, 5, 6] takes NICs from NUMA nodes 0 and 1 of "
        "pool h100-vm, and 4 GPUs come from 1 whole NUMA node with the NICs beside them; name exactly the rails of the "
        "GPUs' NUMA nodes (NUMA node 0: rails 0-3, NUMA node 1: rails 4-7)"
    )


def test_the_capacity_view_counts_each_rails_vfs_beside_the_gpus() -> None:
    from gpucell.stacks.plan import capacity_table

    table = capacity_table(cell(tenant_region({"train": training_vm(8, list(range(8)))})))
    assert table["nvidia.com/GH100_H100_SXM5_80GB"] == (16, 8, 8)
    assert {k: v for k, v in table.items() if "_rail" in k} == {
        f"nvidia.com/h100vm_rail{i}": (2, 1, 1) for i in range(8)
    }


def _second_fabric_pool(config: dict[str, Any], name: str) -> dict[str, Any]:
    pool = copy.deepcopy(config["nodePools"]["h100-vm"])
    pool["hosts"] = [{"name": "lab-h100-9", "address": "10.20.0.49"}]
    config["nodePools"][name] = pool
    return config


def test_two_fabric_pools_whose_resources_would_be_one_are_refused() -> None:
    """Review of round 1: ``h100vm`` and ``h100-vm`` both advertised nvidia.com/h100vm_rail0 and were planned."""
    assert refusal(_second_fabric_pool(fabric_region(), "h100vm")).endswith(
        "nodePools.h100vm: its rails' resources would be pool h100-vm's (nvidia.com/h100vm_rail0, ...: a resource "
        "name keeps a pool name's letters and digits only), one resource on both pools' hosts; rename one of the two "
        "fabric pools"
    )


def test_two_tenants_whose_fabric_networks_would_be_one_are_refused() -> None:
    """Review of round 1: tenant acme on pool h100-vm and tenant acme-h100 on pool vm both rendered SriovNetwork
    acme-h100-vm-rail0 (with two VLANs) and were planned."""
    config = _second_fabric_pool(tenant_region({}), "vm")
    config["tenants"]["acme-h100"] = {**copy.deepcopy(config["tenants"]["acme"]), "fabricVlan": 102}
    assert refusal(config).endswith(
        "tenants.acme-h100.fabricVlan: the fabric network of tenant acme-h100 on pool vm would be named as tenant "
        "acme's on pool h100-vm (acme-h100-vm-rail0, ...: <tenant>-<pool>-rail<i>, one SriovNetwork with one VLAN); "
        "rename the tenant or the pool"
    )
    del config["tenants"]["acme-h100"]["fabricVlan"]
    assert cell(config).tenants["acme-h100"].fabric_vlan is None  # no network of its own: nothing to clash


def test_the_nic_cluster_policy_tolerates_a_tainted_fabric_pool() -> None:
    """Mellanox/network-operator#435: the Network Operator's DaemonSets (DOCA driver, Multus, CNI plugins) tolerate
    no pool taint of their own, so a fabric pool tainted (also later, on a live cell) loses its RDMA NICs; the
    NicClusterPolicy's tolerations ("Tolerations to inject to the DaemonSets objects that are managed by the
    operator", the 26.4.1 CRD) carry the fabric pools' taints, and only theirs, then the acceptance taint's."""
    import yaml

    from gpucell.components.network_operator import nic_cluster_policy
    from tests.conftest import UPSTREAM

    crd = yaml.safe_load(
        (UPSTREAM / "charts" / "network-operator-26.4.1" / "crds" / "mellanox.com_nicclusterpolicies.yaml").read_text()
    )
    field = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["tolerations"]
    assert field["description"] == "Tolerations to inject to the DaemonSets objects that are managed by the operator"
    acceptance = {"key": "gpucell.io/acceptance", "operator": "Exists", "effect": "NoSchedule"}
    # a new GPU node keeps the acceptance taint until its run passed (the run does not need the fabric, its VMs do)
    assert nic_cluster_policy(cell(fabric_region()).node_pools)["spec"]["tolerations"] == [acceptance]
    assert "tolerations" not in nic_cluster_policy(cell(minimal_cell_config()).node_pools)["spec"]
    config = fabric_region()
    config["nodePools"]["h100-vm"]["taints"] = ["nvidia.com/gpu=present:NoSchedule", "gpucell.io/dedicated:NoExecute"]
    config["nodePools"]["cpu"]["taints"] = ["gpucell.io/cpu:NoSchedule"]  # not a fabric pool
    assert nic_cluster_policy(cell(config).node_pools)["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
        {"key": "gpucell.io/dedicated", "operator": "Exists", "effect": "NoExecute"},
        acceptance,
    ]
