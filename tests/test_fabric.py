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
        "hosts": [{"name": "lab-h100-1", "address": "10.20.0.41"}],
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
