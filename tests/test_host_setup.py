"""What node install scripts check and set up on the host, run for real by bash against stub /sys and /proc trees:
host memory and hugepages per NUMA node, the kernel for SR-IOV vGPU, and the service typing SR-IOV vGPU VFs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gpucell.catalog.gpu_catalog import CATALOG
from gpucell.k3s import gpu_host_health, vgpu_sriov
from gpucell.k3s._host_setup import (
    ISCSI_MODULES_LOAD,
    MULTIPATH_DROP_IN,
    host_setup,
    iscsi_setup,
    kernel_check,
    memory_check,
    multipath_blacklist,
)
from gpucell.spec.pools import GpuMode
from gpucell.stacks.conformance.node_files import shellcheck
from gpucell.stacks.conformance.run import embedded_scripts
from tests.conftest import cell, minimal_cell_config
from tests.test_k3s import _into, _sandbox, _stub, build, stub_numa

PREAMBLE = '#!/usr/bin/env bash\nset -euo pipefail\nas_root() { "$@"; }\n'
VGPU_DRIVER = {"repository": "registry.example.com/nvidia", "version": "580.95.02-ubuntu24.04"}
TOPOLOGY = {
    "reservedCpus": "0-3",
    "numaNodes": 2,
    "cpusPerNuma": 112,
    "memoryPerNumaGib": 1024,
    "reservedMemoryPerNumaMib": 4096,
    "hugepages1GiPerNuma": 960,
}


def run(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", script], env={**os.environ, **env}, capture_output=True, text=True, check=False
    )


def region() -> dict[str, Any]:
    config = minimal_cell_config()
    config["gpuOperator"] = {"vgpuDriverImage": dict(VGPU_DRIVER)}
    config["nodePools"]["h100-vm"] = {
        "role": "gpu",
        "gpuModel": "H100-SXM5-80GB",
        "gpusPerNode": 8,
        "gpuMode": "vm-passthrough",
        "topology": dict(TOPOLOGY),
        "hosts": [{"name": "lab-h100-1", "address": "10.20.0.41"}],
    }
    config["nodePools"]["l40s-vgpu"] = {
        "role": "gpu",
        "gpuModel": "L40S",
        "gpusPerNode": 2,
        "gpuMode": "vm-vgpu",
        "vgpuProfile": "L40S-12Q",
        "hosts": [{"name": "lab-l40s-1", "address": "10.20.0.51"}],
    }
    config["nodePools"]["t4-vgpu"] = {
        "role": "gpu",
        "gpuModel": "T4",
        "gpusPerNode": 2,
        "gpuMode": "vm-vgpu",
        "vgpuProfile": "T4-8Q",
        "hosts": [{"name": "lab-t4-1", "address": "10.20.0.61"}],
    }
    return config


def memory_fragment() -> str:
    spec = cell(region())
    topology = spec.node_pools["h100-vm"].topology
    assert topology is not None
    return PREAMBLE + memory_check("h100-vm", topology)


# -- host memory and hugepages -------------------------------------------------------------------------------
def test_memory_check_passes_on_the_declared_host(tmp_path: Path) -> None:
    stub_numa(tmp_path, nodes=2, cpus=112, mem_gib=1024, pages_1g=960)
    done = run(memory_fragment(), GPUCELL_SYSFS_ROOT=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "gpucell: host of pool h100-vm as declared: 2 NUMA nodes x 112 CPUs and 1024 GiB, "
        "hugepages 960 x 1Gi per node\n"
    )
    assert (tmp_path / "devices/system/node/node1/cpulist").read_text() == "56-111,168-223\n"


@pytest.mark.parametrize(
    ("host", "message"),
    [
        (
            {"nodes": 1, "cpus": 224, "mem_gib": 2048, "pages_1g": 960},
            "gpucell: pool h100-vm declares 2 NUMA nodes (topology.numaNodes), this host has 1 ({root}/devices/system/"
            "node)",
        ),
        (
            {"nodes": 2, "cpus": 96, "mem_gib": 1024, "pages_1g": 960},
            "gpucell: NUMA node 0 has 96 CPUs (cpulist), pool h100-vm declares topology.cpusPerNuma 112",
        ),
        (
            {"nodes": 2, "cpus": 112, "mem_gib": 1000, "pages_1g": 960},
            "gpucell: NUMA node 0 has 1000 GiB of memory (MemTotal), less than pool h100-vm declares "
            "(topology.memoryPerNumaGib 1024)",
        ),
        (
            {"nodes": 2, "cpus": 112, "mem_gib": 1024, "pages_1g": 0},
            "gpucell: NUMA node 0 has 0 1Gi hugepages, pool h100-vm declares topology.hugepages1GiPerNuma 960; reserve "
            "them on the kernel command line (hugepagesz=1G hugepages=0:960,1:960) and reboot",
        ),
        (
            {"nodes": 2, "cpus": 112, "mem_gib": 1024, "pages_1g": 960, "pages_2m": 512},
            "gpucell: NUMA node 0 has 512 2Mi hugepages, pool h100-vm declares topology.hugepages2MiPerNuma 0; reserve "
            "them on the kernel command line (hugepagesz=1G hugepages=0:960,1:960) and reboot",
        ),
    ],
    ids=["numa-nodes", "cpus", "memory", "1gi-pages-missing", "2mi-pages-extra"],
)
def test_memory_check_stops_with_what_the_kernel_reports(tmp_path: Path, host: dict[str, int], message: str) -> None:
    stub_numa(tmp_path, **host)
    done = run(memory_fragment(), GPUCELL_SYSFS_ROOT=str(tmp_path))
    assert done.returncode == 1
    assert done.stderr == message.format(root=tmp_path) + "\n"
    assert done.stdout == ""


def test_the_install_script_checks_the_host_before_touching_it(tmp_path: Path) -> None:
    """The whole install script of a topology node, on a host whose kernel reserved no hugepages: it stops first,
    before the token, the config or the installer."""
    _, cluster = build(region())
    root, env, script = _sandbox(tmp_path, cluster.node_files["lab-h100-1"].install_script)
    stub_numa(tmp_path / "sys", nodes=2, cpus=112, mem_gib=1024, pages_1g=0)
    done = subprocess.run(["bash", "-c", script], input="token", env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert done.stderr.startswith("gpucell: NUMA node 0 has 0 1Gi hugepages, pool h100-vm declares ")
    assert not (root / "etc").exists()
    assert not (root / "installs").exists()


# -- kernel --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("release", "ok"),
    [
        ("6.8.0-51-generic", True),
        ("6.11.0-1014-aws", True),
        ("7.0.2", True),
        ("6.5.0-45-generic", False),
        ("5.15.0-126", False),
    ],
)
def test_sriov_vgpu_needs_linux_6_8(tmp_path: Path, release: str, ok: bool) -> None:
    (tmp_path / "sys" / "kernel").mkdir(parents=True)
    (tmp_path / "sys" / "kernel" / "osrelease").write_text(release + "\n")
    done = run(PREAMBLE + kernel_check("l40s-vgpu", "L40S", 580), GPUCELL_PROCFS_ROOT=str(tmp_path))
    assert done.returncode == (0 if ok else 1)
    if not ok:
        assert done.stderr == (
            f"gpucell: kernel {release} is older than 6.8: pool l40s-vgpu runs L40S vGPUs as SR-IOV virtual "
            "functions (vGPU driver branch 580), which need Linux 6.8 or later; boot a newer kernel or use a vGPU "
            "driver older than branch 550\n"
        )


def test_only_topology_and_sriov_pools_get_a_host_fragment() -> None:
    spec = cell(region())
    pools = spec.node_pools
    assert host_setup(spec, "cpu", pools["cpu"]) == ""
    # mdev: the GPU Operator does everything; the VF-typing service goes if an earlier pool left it; the host-side
    # GPU health collector runs on every VM pool's host (decision 0038), and goes from a container pool's
    vgpu = GpuMode.VM_VGPU
    assert host_setup(spec, "t4-vgpu", pools["t4-vgpu"]) == vgpu_sriov.removal_fragment() + (
        gpu_host_health.install_fragment("t4-vgpu", vgpu)
    )
    topology = pools["h100-vm"].topology
    assert topology is not None
    assert host_setup(spec, "h100-vm", pools["h100-vm"]) == memory_check("h100-vm", topology) + (
        vgpu_sriov.removal_fragment() + gpu_host_health.install_fragment("h100-vm", GpuMode.VM_PASSTHROUGH)
    )
    sriov = host_setup(spec, "l40s-vgpu", pools["l40s-vgpu"])
    assert sriov == kernel_check("l40s-vgpu", "L40S", 580) + vgpu_sriov.install_fragment(
        CATALOG["L40S"], "L40S-12Q"
    ) + (gpu_host_health.install_fragment("l40s-vgpu", vgpu))
    assert host_setup(spec, "l40s", pools["l40s"]) == vgpu_sriov.removal_fragment() + (
        gpu_host_health.removal_fragment()
    )


# -- the SR-IOV vGPU typing service --------------------------------------------------------------------------
CREATABLE = "ID    : vGPU Name\n1155  : NVIDIA L40S-12Q\n1156  : NVIDIA L40S-24Q\n"


def stub_gpu(sysfs: Path, bdf: str, vfs: int, *, device: str = "0x26b9", typed: dict[int, str] | None = None) -> Path:
    """A physical function with ``vfs`` enabled VFs (each a ``virtfn<i>`` link to its own device dir), VFs listing
    :data:`CREATABLE` unless typed (a typed VF lists nothing creatable)."""
    devices = sysfs / "bus" / "pci" / "devices"
    pf = devices / bdf
    pf.mkdir(parents=True)
    for name, value in (("vendor", "0x10de"), ("device", device), ("sriov_totalvfs", "32"), ("sriov_numvfs", str(vfs))):
        (pf / name).write_text(value + "\n")
    for index in range(vfs):
        vf = devices / f"{bdf[:-1]}{index + 4}.vf{index}"
        (vf / "nvidia").mkdir(parents=True)
        (vf / "vendor").write_text("0x10de\n")
        (vf / "device").write_text(device + "\n")
        current = (typed or {}).get(index, "0")
        (vf / "nvidia" / "current_vgpu_type").write_text(current + "\n")
        (vf / "nvidia" / "creatable_vgpu_types").write_text("" if current != "0" else CREATABLE)
        (pf / f"virtfn{index}").symlink_to(vf)
    return pf


def current_types(pf: Path) -> list[str]:
    count = int((pf / "sriov_numvfs").read_text())
    return [(pf / f"virtfn{i}" / "nvidia" / "current_vgpu_type").read_text().strip() for i in range(count)]


def reconcile(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """One pass of the L40S-12Q reconciler (``--once``) over ``tmp_path/sys``, state in ``tmp_path/state``."""
    script = vgpu_sriov.reconciler_script(CATALOG["L40S"], "L40S-12Q")
    env = {**os.environ, "GPUCELL_SYSFS_ROOT": str(tmp_path / "sys"), "GPUCELL_STATE_DIR": str(tmp_path / "state")}
    return subprocess.run(
        ["bash", "-c", script, "reconciler", "--once"], capture_output=True, text=True, check=False, env=env
    )


def test_reconciler_types_as_many_vfs_per_gpu_as_the_operator_allows(tmp_path: Path) -> None:
    gpu0 = stub_gpu(tmp_path / "sys", "0000:41:00.0", 12)
    gpu1 = stub_gpu(tmp_path / "sys", "0000:c1:00.0", 12)
    other = stub_gpu(tmp_path / "sys", "0000:81:00.0", 4, device="0x2330")  # an H100: not this pool's model
    done = reconcile(tmp_path)
    assert done.returncode == 0, done.stderr
    assert current_types(gpu0) == ["1155"] * 4 + ["0"] * 8  # L40S-12Q: 4 per GPU
    assert current_types(gpu1) == ["1155"] * 4 + ["0"] * 8
    assert current_types(other) == ["0"] * 4
    assert (tmp_path / "state" / "vgpu-type").read_text() == "1155\tNVIDIA L40S-12Q\n"
    again = reconcile(tmp_path)  # typed VFs list nothing creatable: the id comes from the state file
    assert (again.returncode, again.stderr) == (0, "")
    assert current_types(gpu0) == ["1155"] * 4 + ["0"] * 8


def test_reconciler_replaces_an_earlier_type_and_reports_a_short_gpu(tmp_path: Path) -> None:
    gpu = stub_gpu(tmp_path / "sys", "0000:41:00.0", 3, typed={0: "1156", 1: "1156"})
    done = reconcile(tmp_path)
    assert done.returncode == 0
    assert current_types(gpu) == ["1155", "1155", "1155"]
    assert done.stderr.splitlines()[-1] == (
        "gpucell-vgpu-types: short of NVIDIA L40S-12Q vGPUs: 0000:41:00.0: 3 of 4 (3 VFs enabled); "
    )
    assert "cleared vGPU type 1156" in done.stderr


def test_reconciler_waits_quietly_for_the_driver(tmp_path: Path) -> None:
    (tmp_path / "sys" / "bus" / "pci" / "devices").mkdir(parents=True)  # no PF yet: the vGPU Manager is loading
    done = reconcile(tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_reconciler_and_unit_install_once_and_restart_on_change(tmp_path: Path) -> None:
    _, cluster = build(region())
    script = cluster.node_files["lab-l40s-1"].install_script
    paths = {
        vgpu_sriov.RECONCILER_PATH: str(tmp_path / "sbin-reconciler"),
        vgpu_sriov.UNIT_PATH: str(tmp_path / "unit.service"),
    }
    for real, fake in paths.items():
        script = script.replace(real, fake)
    root, env, script = _sandbox(tmp_path, script)
    _stub(tmp_path / "bin", "systemctl", f'echo "$*" >> {tmp_path}/systemctl.log\n[ "$1" = cat ] && exit 1\nexit 0\n')
    (tmp_path / "proc" / "sys" / "kernel").mkdir(parents=True)
    (tmp_path / "proc" / "sys" / "kernel" / "osrelease").write_text("6.8.0-51-generic\n")
    env["GPUCELL_PROCFS_ROOT"] = str(tmp_path / "proc")

    first = subprocess.run(["bash", "-c", script], input="token", env=env, capture_output=True, text=True, check=False)
    assert first.returncode == 0, first.stderr
    reconciler = _into(root, vgpu_sriov.reconciler_script(CATALOG["L40S"], "L40S-12Q"))  # the sandbox's paths
    assert Path(paths[vgpu_sriov.RECONCILER_PATH]).read_text() == reconciler
    unit = vgpu_sriov.systemd_unit(CATALOG["L40S"], "L40S-12Q")
    assert Path(paths[vgpu_sriov.UNIT_PATH]).read_text() == unit.replace(
        vgpu_sriov.RECONCILER_PATH, paths[vgpu_sriov.RECONCILER_PATH]
    )
    log = (tmp_path / "systemctl.log").read_text().splitlines()
    assert log[:3] == ["daemon-reload", "enable gpucell-vgpu-types.service", "restart gpucell-vgpu-types.service"]
    assert "gpucell: gpucell-vgpu-types.service (re)started: NVIDIA L40S-12Q, 4 per GPU" in first.stdout
    (tmp_path / "systemctl.log").unlink()
    again = subprocess.run(["bash", "-c", script], input="token", env=env, capture_output=True, text=True, check=False)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "systemctl.log").read_text().splitlines()[:2] == [
        "enable gpucell-vgpu-types.service",
        "start gpucell-vgpu-types.service",
    ]
    assert (root / "installs").exists()


def test_a_host_leaving_an_sriov_pool_loses_the_service(tmp_path: Path) -> None:
    _, cluster = build(region())
    script = cluster.node_files["lab-t4-1"].install_script
    unit, reconciler = tmp_path / "unit.service", tmp_path / "sbin-reconciler"
    script = script.replace(vgpu_sriov.UNIT_PATH, str(unit)).replace(vgpu_sriov.RECONCILER_PATH, str(reconciler))
    _, env, script = _sandbox(tmp_path, script)
    _stub(tmp_path / "bin", "systemctl", f'echo "$*" >> {tmp_path}/systemctl.log\n[ "$1" = cat ] && exit 1\nexit 0\n')
    unit.write_text("[Unit]\n")
    reconciler.write_text("#!/usr/bin/env bash\n")
    done = subprocess.run(["bash", "-c", script], input="token", env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert not unit.exists()
    assert not reconciler.exists()
    assert (tmp_path / "systemctl.log").read_text().splitlines()[:2] == [
        "disable --now gpucell-vgpu-types.service",
        "daemon-reload",
    ]
    assert "gpucell: removed gpucell-vgpu-types.service" in done.stdout


def test_host_scripts_pass_shellcheck() -> None:
    _, cluster = build(region())
    install = cluster.node_files["lab-l40s-1"].install_script
    embedded = embedded_scripts(install)
    assert embedded == {
        "GPUCELL_VGPU_RECONCILER": vgpu_sriov.reconciler_script(CATALOG["L40S"], "L40S-12Q"),
        "GPUCELL_GPU_HEALTH_COLLECTOR": gpu_host_health.collector_script("l40s-vgpu", GpuMode.VM_VGPU),
    }
    scripts = {
        "install-l40s": install,
        "install-h100": cluster.node_files["lab-h100-1"].install_script,
        "reconciler": embedded["GPUCELL_VGPU_RECONCILER"],
        "gpu-health": embedded["GPUCELL_GPU_HEALTH_COLLECTOR"],
    }
    assert shellcheck(scripts) == {name: [] for name in scripts}


def test_unit_runs_the_reconciler_forever() -> None:
    unit = vgpu_sriov.systemd_unit(CATALOG["L40S"], "L40S-12Q")
    assert "Description=gpucell: type SR-IOV vGPU virtual functions as NVIDIA L40S-12Q (4 per GPU)\n" in unit
    assert "Restart=always\n" in unit
    assert "WantedBy=multi-user.target\n" in unit


def reconcile_against(tmp_path: Path, cluster: Any, **env: str) -> subprocess.CompletedProcess[str]:
    """One reconciler pass that reports to the stub cluster ``cluster`` as node lab-l40s-1."""
    config = tmp_path / "config.yaml"
    config.write_text("node-name: lab-l40s-1\nnode-ip: 10.20.0.51\n")
    script = vgpu_sriov.reconciler_script(CATALOG["L40S"], "L40S-12Q")
    variables = {
        "GPUCELL_SYSFS_ROOT": str(tmp_path / "sys"),
        "GPUCELL_STATE_DIR": str(tmp_path / "state"),
        "GPUCELL_K3S_BIN": str(cluster.k3s),
        "GPUCELL_K3S_CONFIG": str(config),
        **env,
    }
    return subprocess.run(
        ["bash", "-c", script, "reconciler", "--once"],
        capture_output=True,
        text=True,
        check=False,
        env={**cluster.env, **variables},
    )


def test_reconciler_reports_on_its_node_what_settle_waits_for(tmp_path: Path) -> None:
    from tests.test_maintenance import Cluster, node

    cluster = Cluster(tmp_path, [node("lab-l40s-1", labels={}, allocatable={})])
    gpu = stub_gpu(tmp_path / "sys", "0000:41:00.0", 3)
    short = reconcile_against(tmp_path, cluster)
    assert short.returncode == 0, short.stderr
    annotations = cluster.node("lab-l40s-1")["metadata"]["annotations"]
    assert annotations["gpucell.io/vgpu-types"] == ("pending NVIDIA L40S-12Q: 0000:41:00.0: 3 of 4 (3 VFs enabled); ")
    failed = reconcile_against(tmp_path, cluster, GPUCELL_FAIL_AFTER="1")  # still short past the limit
    assert failed.returncode == 0
    assert cluster.node("lab-l40s-1")["metadata"]["annotations"]["gpucell.io/vgpu-types"].startswith(
        "failed NVIDIA L40S-12Q: 0000:41:00.0: 3 of 4"
    )
    (gpu / "sriov_numvfs").write_text("4\n")  # the fourth VF comes up (stub: a new virtfn link)
    vf = gpu.parent / "0000:41:00.7.vf3"
    (vf / "nvidia").mkdir(parents=True)
    (vf / "nvidia" / "current_vgpu_type").write_text("0\n")
    (vf / "nvidia" / "creatable_vgpu_types").write_text(CREATABLE)
    (gpu / "virtfn3").symlink_to(vf)
    done = reconcile_against(tmp_path, cluster)
    assert done.returncode == 0
    assert cluster.node("lab-l40s-1")["metadata"]["annotations"]["gpucell.io/vgpu-types"] == ("success NVIDIA L40S-12Q")
    writes = [c for c in cluster.calls("annotate") if "vgpu-types=" in c]
    assert len(writes) == 3  # written when it changes, not every pass
    assert reconcile_against(tmp_path, cluster).returncode == 0
    assert len([c for c in cluster.calls("annotate") if "vgpu-types=" in c]) == 3


def test_reconciler_starts_over_when_settle_re_triggers_it(tmp_path: Path) -> None:
    """A remembered type id that the driver no longer uses (a new vGPU driver numbers types anew) keeps every VF
    untyped; settle's re-trigger makes the service learn the id again."""
    from tests.test_maintenance import Cluster, node

    cluster = Cluster(
        tmp_path,
        [node("lab-l40s-1", labels={}, allocatable={}, annotations={"gpucell.io/vgpu-types-retrigger": "1700000000"})],
    )
    gpu = stub_gpu(tmp_path / "sys", "0000:41:00.0", 4)
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "vgpu-type").write_text("999\tNVIDIA L40S-12Q\n")  # stale
    (tmp_path / "state" / "vgpu-retrigger").write_text("1600000000\n")
    done = reconcile_against(tmp_path, cluster)
    assert done.returncode == 0
    assert done.stderr.splitlines()[0] == (
        "gpucell-vgpu-types: re-triggered (1700000000): learning the type id again and retyping"
    )
    assert current_types(gpu) == ["1155"] * 4
    assert (tmp_path / "state" / "vgpu-retrigger").read_text() == "1700000000\n"
    assert cluster.node("lab-l40s-1")["metadata"]["annotations"]["gpucell.io/vgpu-types"] == "success NVIDIA L40S-12Q"
    again = reconcile_against(tmp_path, cluster)  # the same value: nothing to start over
    assert "re-triggered" not in again.stderr


# -- Longhorn and multipathd --------------------------------------------------------------------------------------
def test_a_longhorn_cells_nodes_keep_multipathd_off_longhorns_disks(tmp_path: Path) -> None:
    """longhorn/longhorn#1210: multipathd claims the engine's iSCSI disk and the volume's mount fails."""
    config = region()
    config["storage"] = {"backend": "longhorn", "replicas": 1}
    spec = cell(config)
    assert host_setup(spec, "cpu", spec.node_pools["cpu"]) == multipath_blacklist() + iscsi_setup()
    assert host_setup(cell(region()), "cpu", cell(region()).node_pools["cpu"]) == ""  # local-path: none
    drop_in = tmp_path / "etc" / "multipath" / "conf.d" / "gpucell-longhorn.conf"
    script = PREAMBLE + multipath_blacklist().replace(MULTIPATH_DROP_IN, str(drop_in))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "systemctl.log"
    (bin_dir / "systemctl").write_text(f'#!/usr/bin/env bash\necho "$*" >> {log}\nexit 0\n')
    (bin_dir / "systemctl").chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    first = run(script, **env)
    assert first.returncode == 0, first.stderr
    assert drop_in.read_text() == 'blacklist {\n  device {\n    vendor "IET"\n    product "VIRTUAL-DISK"\n  }\n}\n'
    assert log.read_text().splitlines() == ["is-active --quiet multipathd", "reload multipathd"]
    assert first.stdout == (
        f"gpucell: multipathd leaves Longhorn's disks alone ({drop_in} written, multipathd reloaded)\n"
    )
    again = run(script, **env)
    assert again.returncode == 0, again.stderr
    assert again.stdout == ""
    assert log.read_text().count("reload") == 1  # written and reloaded once


def test_a_longhorn_cells_nodes_have_iscsi_ready_at_every_boot(tmp_path: Path) -> None:
    """longhorn/longhorn#1853: without iscsi_tcp a volume attaches and detaches in a loop; #2398: without iscsid,
    "can not connect to iSCSI daemon". The module is listed for every boot and loaded, iscsid enabled and started;
    a second run changes nothing; a host without open-iscsi stops the script naming the package."""
    config = region()
    config["storage"] = {"backend": "longhorn", "replicas": 1}
    spec = cell(config)
    assert iscsi_setup() in host_setup(spec, "h100-vm", spec.node_pools["h100-vm"])
    modules = tmp_path / "etc" / "modules-load.d" / "gpucell-longhorn.conf"
    sysfs = tmp_path / "sys"
    (sysfs / "module").mkdir(parents=True)
    script = PREAMBLE + iscsi_setup().replace(ISCSI_MODULES_LOAD, str(modules))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    (bin_dir / "iscsiadm").write_text("#!/usr/bin/env bash\nexit 0\n")
    # systemctl: iscsid is enabled and active once "enable --now" ran; modprobe makes the module appear in sysfs
    (bin_dir / "systemctl").write_text(
        f'#!/usr/bin/env bash\necho "systemctl $*" >> {log}\n'
        f'case "$*" in "enable --now iscsid") touch {tmp_path}/on ;; *) [ -e {tmp_path}/on ] ;; esac\n'
    )
    (bin_dir / "modprobe").write_text(f'#!/usr/bin/env bash\necho "modprobe $*" >> {log}\nmkdir -p {sysfs}/module/$1\n')
    for name in ("iscsiadm", "systemctl", "modprobe"):
        (bin_dir / name).chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "GPUCELL_SYSFS_ROOT": str(sysfs)}
    first = run(script, **env)
    assert first.returncode == 0, first.stderr
    assert modules.read_text() == "iscsi_tcp\n"
    assert log.read_text().splitlines() == [
        "modprobe iscsi_tcp",
        "systemctl is-enabled --quiet iscsid",
        "systemctl enable --now iscsid",
    ]
    assert first.stdout == (
        f"gpucell: iscsi_tcp is loaded at every boot ({modules} written)\n"
        "gpucell: iscsi_tcp loaded\n"
        "gpucell: iscsid is enabled and running\n"
    )
    again = run(script, **env)
    assert (again.returncode, again.stdout) == (0, "")
    assert log.read_text().count("enable --now") == 1
    (bin_dir / "iscsiadm").unlink()
    bare = run(script, PATH=f"{bin_dir}:/usr/bin:/bin", GPUCELL_SYSFS_ROOT=str(sysfs))
    assert bare.returncode == 1
    assert bare.stderr == (
        "gpucell: this host has no iscsiadm, and Longhorn attaches its volumes through open-iscsi "
        "(longhorn/longhorn#2398); install it (apt-get install open-iscsi), then run pulumi up again\n"
    )
