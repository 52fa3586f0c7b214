"""The host-side GPU health collector (gpucell/k3s/gpu_host_health.py), run for real by bash against a stub
``/sys/bus/pci/devices`` tree and a stub ``journalctl``, and its install and removal by the node install scripts."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from gpucell.k3s import gpu_host_health
from gpucell.spec.pools import GpuMode
from gpucell.stacks.conformance.node_files import shellcheck
from tests.test_k3s import _into, _sandbox, _stub, build, ha_config

NVIDIA = b"\xde\x10"  # a config space's first two bytes, little-endian: vendor 0x10de
GONE = b"\xff\xff"  # what a device that no longer answers reads
KERNEL_LOG = """\
pci 0000:41:00.0: [10de:2330] type 00 class 0x030200 PCIe Endpoint
NVRM: Xid (PCI:0000:42:00): 79, pid=0, name=, GPU has fallen off the bus.
NVRM: GPU 0000:42:00.0: GPU has fallen off the bus.
NVRM: Xid (PCI:0000:42:00): 79, pid=0, name=, GPU has fallen off the bus.
NVRM: Xid (PCI:0000:41:00): 13, pid=4242, name=python, Graphics Exception
vfio-pci 0000:41:00.0: not ready 65535ms after FLR; giving up
vfio-pci 0000:41:00.0: enabling device (0000 -> 0003)
"""
"""This boot's kernel log as ``journalctl -k -o cat`` prints it: Xid 79 twice on one GPU, an application Xid on
another, a vfio-pci reset that gave up and a harmless vfio-pci line."""


def stub_device(
    sysfs: Path,
    bdf: str,
    *,
    pci_class: str = "0x030200",
    config: bytes = NVIDIA,
    driver: str | None = "vfio-pci",
    aer: tuple[int, int, int] | None = (0, 0, 0),
    vf_of: str | None = None,
) -> None:
    """A PCI function of NVIDIA's as the kernel lists it: ``vendor``, ``device``, ``class``, ``config`` (read live),
    its ``driver`` link, the AER counters (correctable, fatal, nonfatal) and, for an SR-IOV VF, ``physfn``."""
    dev = sysfs / "bus" / "pci" / "devices" / bdf
    dev.mkdir(parents=True)
    for name, value in (("vendor", "0x10de"), ("device", "0x2330"), ("class", pci_class)):
        (dev / name).write_text(value + "\n")
    (dev / "config").write_bytes(config + bytes(62))
    if driver is not None:
        target = sysfs / "bus" / "pci" / "drivers" / driver
        target.mkdir(parents=True, exist_ok=True)
        (dev / "driver").symlink_to(target)
    if aer is not None:
        for name, total, count in zip(
            ("correctable", "fatal", "nonfatal"), ("COR", "FATAL", "NONFATAL"), aer, strict=True
        ):
            (dev / f"aer_dev_{name}").write_text(f"Undefined 0\nDLP {count}\nTOTAL_ERR_{total} {count}\n")
    if vf_of is not None:
        (dev / "physfn").symlink_to(sysfs / "bus" / "pci" / "devices" / vf_of)


def collect(tmp_path: Path, log: str | None = KERNEL_LOG) -> tuple[subprocess.CompletedProcess[str], Path]:
    """One pass of the collector of a ``vm-passthrough`` pool against ``tmp_path/sys``; ``log`` is what the stub
    ``journalctl`` prints (``None``: it fails)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    body = "cat <<'LOG'\n" + log + "LOG\n" if log is not None else "echo 'No journal files were found.' >&2\nexit 1\n"
    _stub(bin_dir, "journalctl", body)
    _stub(bin_dir, "sleep", f'echo "$1" >> {tmp_path}/slept\n')
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "GPUCELL_SYSFS_ROOT": str(tmp_path / "sys"),
        "GPUCELL_TEXTFILE_DIR": str(tmp_path / "textfile"),
    }
    script = gpu_host_health.collector_script("h100-vm", GpuMode.VM_PASSTHROUGH)
    done = subprocess.run(
        ["bash", "-c", script, "collector", "--once"], env=env, capture_output=True, text=True, check=False
    )
    return done, tmp_path / "textfile" / gpu_host_health.TEXTFILE_NAME


def samples(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith("#")]


def test_a_gpu_that_stops_answering_is_counted_out_with_its_xid_aer_and_vfio_lines(tmp_path: Path) -> None:
    sysfs = tmp_path / "sys"
    stub_device(sysfs, "0000:41:00.0", aer=(3, 0, 1))
    stub_device(sysfs, "0000:42:00.0", config=GONE, aer=(0, 2, 0))  # listed, but reads all ones: fell off the bus
    stub_device(sysfs, "0000:43:00.0", pci_class="0x030000", driver=None, aer=None)  # VGA class, no driver, no AER
    stub_device(sysfs, "0000:41:00.1", pci_class="0x040300", aer=None)  # the board's audio function
    stub_device(sysfs, "0000:05:00.0", pci_class="0x068000", driver="nvidia-nvswitch", aer=None)  # an NVSwitch
    stub_device(sysfs, "0000:41:00.4", aer=None, vf_of="0000:41:00.0")  # an SR-IOV VF: its board is counted
    done, textfile = collect(tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    # the GPU that does not answer is read three times, 1 s apart (a GPU in a reset answers within a second)
    assert (tmp_path / "slept").read_text() == "1\n1\n"
    assert samples(textfile.read_text()) == [
        'gpucell_host_gpu_pci_device_up{bdf="0000:41:00.0",device="0x2330",driver="vfio-pci"} 1',
        'gpucell_host_gpu_pci_device_up{bdf="0000:42:00.0",device="0x2330",driver="vfio-pci"} 0',
        'gpucell_host_gpu_pci_device_up{bdf="0000:43:00.0",device="0x2330",driver="none"} 1',
        "gpucell_host_gpu_pci_devices 2",
        'gpucell_host_gpu_pcie_aer_errors_total{bdf="0000:41:00.0",severity="correctable"} 3',
        'gpucell_host_gpu_pcie_aer_errors_total{bdf="0000:41:00.0",severity="fatal"} 0',
        'gpucell_host_gpu_pcie_aer_errors_total{bdf="0000:41:00.0",severity="nonfatal"} 1',
        'gpucell_host_gpu_pcie_aer_errors_total{bdf="0000:42:00.0",severity="correctable"} 0',
        'gpucell_host_gpu_pcie_aer_errors_total{bdf="0000:42:00.0",severity="fatal"} 2',
        'gpucell_host_gpu_pcie_aer_errors_total{bdf="0000:42:00.0",severity="nonfatal"} 0',
        'gpucell_host_gpu_vfio_error_lines_total{bdf="0000:41:00.0"} 1',
        'gpucell_host_gpu_vfio_error_lines_total{bdf="0000:42:00.0"} 0',
        'gpucell_host_gpu_vfio_error_lines_total{bdf="0000:43:00.0"} 0',
        'gpucell_host_gpu_xid_lines{bdf="0000:41:00.0",xid="13"} 1',
        'gpucell_host_gpu_xid_lines{bdf="0000:42:00.0",xid="79"} 2',
        "gpucell_host_gpu_kernel_log_readable 1",
    ]
    # written whole: no temporary file left for the textfile collector to skip or read
    assert sorted(p.name for p in textfile.parent.iterdir()) == [gpu_host_health.TEXTFILE_NAME]
    assert oct(textfile.stat().st_mode & 0o777) == "0o644"


def test_a_host_with_every_gpu_and_no_journal_says_the_log_went_unread(tmp_path: Path) -> None:
    for index in range(8):
        stub_device(tmp_path / "sys", f"0000:{0x18 + index:02x}:00.0")
    done, textfile = collect(tmp_path, log=None)
    assert done.returncode == 0, done.stderr
    lines = samples(textfile.read_text())
    assert "gpucell_host_gpu_pci_devices 8" in lines
    assert lines[-1] == "gpucell_host_gpu_kernel_log_readable 0"
    assert not [line for line in lines if line.startswith("gpucell_host_gpu_xid_lines")]


def test_no_gpu_on_the_bus_is_zero_not_silence_and_its_xid_lines_still_count(tmp_path: Path) -> None:
    (tmp_path / "sys" / "bus" / "pci" / "devices").mkdir(parents=True)  # every GPU gone from the bus
    done, textfile = collect(tmp_path)
    assert done.returncode == 0, done.stderr
    assert samples(textfile.read_text()) == [
        "gpucell_host_gpu_pci_devices 0",
        'gpucell_host_gpu_xid_lines{bdf="0000:41:00.0",xid="13"} 1',
        'gpucell_host_gpu_xid_lines{bdf="0000:42:00.0",xid="79"} 2',
        "gpucell_host_gpu_kernel_log_readable 1",
    ]


def test_the_collector_and_the_install_script_pass_shellcheck() -> None:
    _, cluster = build(ha_config())
    scripts = {
        "collector": gpu_host_health.collector_script("l40s-vm", GpuMode.VM_PASSTHROUGH),
        "install-vm": cluster.node_files["lab-vm-1"].install_script,
        "install-h100": cluster.node_files["lab-h100-1"].install_script,
    }
    assert shellcheck(scripts) == {name: [] for name in scripts}


def test_every_pool_dcgm_cannot_see_runs_the_collector() -> None:
    assert [mode.value for mode in GpuMode if mode.host_health] == ["vm-passthrough", "vm-vgpu", "dra"]


def test_the_install_script_installs_the_collector_once_and_restarts_it_on_change(tmp_path: Path) -> None:
    _, cluster = build(ha_config())
    root, env, script = _sandbox(tmp_path, cluster.node_files["lab-vm-1"].install_script)
    log = tmp_path / "systemctl.log"
    _stub(tmp_path / "bin", "systemctl", f'echo "$*" >> {log}\n[ "$1" = cat ] && exit 1\nexit 0\n')
    first = subprocess.run(["bash", "-c", script], input="token", env=env, capture_output=True, text=True, check=False)
    assert first.returncode == 0, first.stderr
    collector = root / "gpucell-gpu-health"
    assert collector.read_text() == _into(root, gpu_host_health.collector_script("l40s-vm", GpuMode.VM_PASSTHROUGH))
    assert oct(collector.stat().st_mode & 0o777) == "0o755"
    unit = (root / "systemd" / gpu_host_health.UNIT_NAME).read_text()
    assert f"ExecStart={collector}\n" in unit
    assert "Restart=always\n" in unit
    assert "UMask=0022\n" in unit  # node-exporter reads the file as user 65534
    assert "gpucell: gpucell-gpu-health.service (re)started: GPU health of pool l40s-vm every 60 s" in first.stdout
    calls = log.read_text().splitlines()
    assert calls[calls.index("enable gpucell-gpu-health.service") - 1 :][:3] == [
        "daemon-reload",
        "enable gpucell-gpu-health.service",
        "restart gpucell-gpu-health.service",
    ]
    log.unlink()
    again = subprocess.run(["bash", "-c", script], input="token", env=env, capture_output=True, text=True, check=False)
    assert again.returncode == 0, again.stderr
    calls = log.read_text().splitlines()
    assert "restart gpucell-gpu-health.service" not in calls
    assert "start gpucell-gpu-health.service" in calls


def test_a_host_of_a_container_pool_loses_the_collector(tmp_path: Path) -> None:
    _, cluster = build(ha_config())
    root, env, script = _sandbox(tmp_path, cluster.node_files["lab-h100-1"].install_script)
    log = tmp_path / "systemctl.log"
    _stub(tmp_path / "bin", "systemctl", f'echo "$*" >> {log}\n[ "$1" = cat ] && exit 1\nexit 0\n')
    left = [
        root / "systemd" / gpu_host_health.UNIT_NAME,
        root / "gpucell-gpu-health",
        root / "textfile" / gpu_host_health.TEXTFILE_NAME,
    ]
    for path in left:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("left by an earlier pool\n")
    done = subprocess.run(["bash", "-c", script], input="token", env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert [path.exists() for path in left] == [False, False, False]
    assert "gpucell: removed gpucell-gpu-health.service" in done.stdout
    assert log.read_text().splitlines()[:2] == ["disable --now gpucell-gpu-health.service", "daemon-reload"]
