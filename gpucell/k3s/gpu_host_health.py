"""Host-side GPU health where DCGM cannot see: ``vm-passthrough`` (GPUs bound to ``vfio-pci``), ``vm-vgpu`` and
``dra`` pools (decision 0038).

The DCGM exporter runs only on GPUs bound to the ``nvidia`` driver in a container node's driver container, so the
GPUs of VM and DRA pools are unseen by the GPU alerts of :mod:`gpucell.components.gpu_alerts`. On those hosts
gpucell installs a small systemd service (:func:`collector_script`, :func:`systemd_unit`) that every
:data:`INTERVAL_SECONDS` writes :data:`TEXTFILE` for node-exporter's textfile collector (kube-prometheus-stack's
``prometheus-node-exporter`` mounts the host's ``/`` at ``/host/root``, so it reads the file there with no extra
mount; :func:`gpucell.components.metrics.stack_values`). The hosts are those of pools whose
:attr:`gpucell.spec.pools.GpuMode.host_health` is true:

- ``gpucell_host_gpu_pci_device_up{bdf, device, driver}``: each NVIDIA GPU listed in ``/sys/bus/pci/devices``
  (vendor ``0x10de``, class ``0x0300xx``/``0x0302xx``, SR-IOV virtual functions left out), 1 when its config space,
  read live, starts with ``10de``, 0 when it reads all ones (a GPU that fell off the bus but is still listed);
  retried 1 s apart, since a GPU in a function-level reset does not answer for up to a second;
- ``gpucell_host_gpu_pci_devices``: how many answer (what ``GpuFellOffTheBus`` compares with the pool's
  ``gpusPerNode``);
- ``gpucell_host_gpu_pcie_aer_errors_total{bdf, severity}``: the ``TOTAL_ERR_COR``/``TOTAL_ERR_FATAL``/
  ``TOTAL_ERR_NONFATAL`` line of ``aer_dev_correctable``/``aer_dev_fatal``/``aer_dev_nonfatal`` (Linux 4.19+,
  ``Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats``), counted since boot;
- ``gpucell_host_gpu_vfio_error_lines_total{bdf}``: this boot's kernel log lines ``vfio-pci <bdf>: ...`` reporting
  a failure (``not ready``, ``giving up``, ``reset recovery``, ``failed``, ``timed out``, ``error``);
- ``gpucell_host_gpu_xid_lines{bdf, xid}``: this boot's kernel log lines ``NVRM: Xid (PCI:<domain:bus:dev>): <xid>,``
  per Xid (only where a driver is loaded on the host: ``vm-vgpu``'s vGPU Manager, ``dra`` pools); ``bdf`` is the
  printed address with function ``.0``, as the GPU's own;
- ``gpucell_host_gpu_kernel_log_readable``: 0 when ``journalctl -k -b 0`` failed (no Xid or vfio line was seen).

The collector is ``scripts/health/collector.sh``, installed by ``scripts/health/install.sh`` and removed from a
host that left such a pool by ``scripts/health/remove.sh`` (:mod:`gpucell.k3s._script_files`).
``$GPUCELL_SYSFS_ROOT``, ``$GPUCELL_TEXTFILE_DIR``, ``$GPUCELL_JOURNALCTL`` and ``$GPUCELL_PCI_TRIES`` let the
tests run it against a stub tree.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from gpucell.k3s._script_files import render
from gpucell.spec.metrics import HOST_HEALTH_TEXTFILE, HOST_HEALTH_TEXTFILE_DIR
from gpucell.spec.pools import GpuMode

__all__ = [
    "INTERVAL_SECONDS",
    "SCRIPT_PATH",
    "TEXTFILE",
    "TEXTFILE_DIR",
    "TEXTFILE_NAME",
    "UNIT_NAME",
    "UNIT_PATH",
    "collector_script",
    "install_fragment",
    "removal_fragment",
    "systemd_unit",
]

UNIT_NAME = "gpucell-gpu-health.service"
"""The systemd service running the collector."""
UNIT_PATH = f"/etc/systemd/system/{UNIT_NAME}"
SCRIPT_PATH = "/usr/local/sbin/gpucell-gpu-health"
"""Where the collector script is installed on the host."""
TEXTFILE_DIR = HOST_HEALTH_TEXTFILE_DIR
"""The host directory the collector writes to (node-exporter reads every ``*.prom`` file in it)."""
TEXTFILE = HOST_HEALTH_TEXTFILE
"""The file the collector writes whole each pass (a temporary name, then a rename)."""
TEXTFILE_NAME = PurePosixPath(TEXTFILE).name
"""The file's name (``gpucell-gpu-health.prom``): node-exporter's ``node_textfile_mtime_seconds{file}`` ends with it."""
INTERVAL_SECONDS = 60
"""How often the collector writes the file, seconds: a GPU off the bus shows within a minute and a scrape."""


def collector_script(pool_name: str, mode: GpuMode) -> str:
    """The bash collector installed at :data:`SCRIPT_PATH` for a host of ``pool_name`` (``mode``): writes
    :data:`TEXTFILE` every :data:`INTERVAL_SECONDS` (or once, with ``--once``); the series are listed in the module
    doc."""
    return render(
        "health/collector",
        mode=mode.value,
        pool=pool_name,
        interval=INTERVAL_SECONDS,
        textfile=TEXTFILE,
        textfile_dir=TEXTFILE_DIR,
        textfile_name=TEXTFILE_NAME,
        unit=UNIT_NAME,
    )


_UNIT = """[Unit]
Description=gpucell: host-side GPU health of pool {pool} for node-exporter's textfile collector
Documentation=https://github.com/prometheus/node_exporter#textfile-collector
After=local-fs.target

[Service]
Type=simple
ExecStart={path}
UMask=0022
Restart=always
RestartSec=10

[Install]
WantedBy=multi-user.target
"""


def systemd_unit(pool_name: str) -> str:
    """The ``gpucell-gpu-health.service`` unit: runs the collector, restarted by systemd whenever it stops, with
    ``UMask=0022``: node-exporter reads the file as user 65534 (the chart's ``securityContext.runAsUser``), so the
    directories it creates and the file must be readable by others."""
    return _UNIT.format(pool=pool_name, path=SCRIPT_PATH)


def install_fragment(pool_name: str, mode: GpuMode) -> str:
    """Bash for the node's install script (after its ``as_root`` helper): install or update the collector and its
    unit, enable the unit, and restart it only when either file changed."""
    return render(
        "health/install",
        pool=pool_name,
        mode=mode.value,
        interval=INTERVAL_SECONDS,
        script=collector_script(pool_name, mode),
        unit=systemd_unit(pool_name),
        path=SCRIPT_PATH,
        unit_path=UNIT_PATH,
        unit_name=UNIT_NAME,
    )


def removal_fragment() -> str:
    """Bash for the install script of a GPU node of a ``container`` pool: stop, disable and remove the collector, its
    unit and its textfile when an earlier pool installed them (DCGM watches these GPUs). Does nothing where they are
    absent."""
    return render("health/remove", unit_path=UNIT_PATH, unit_name=UNIT_NAME, path=SCRIPT_PATH, textfile=TEXTFILE)
