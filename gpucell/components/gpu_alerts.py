"""GPU health alerts (a PrometheusRule group), each naming the node and what to do.

DCGM fields come from the DCGM exporter the GPU Operator runs (:data:`DCGM_FIELDS`, the exporter's
``dcgm-metrics.csv`` when the metrics stack is on; the default list of GPU Operator v26.7.0,
``etc/dcp-metrics-included.csv`` of dcgm-exporter 4.6.0-4.8.3, lacks ECC, retired pages and power limit). The
GPU Operator's ServiceMonitor for the exporter copies the pod's node into label ``node``
(:data:`NODE_RELABELING`). Remediation follows NVIDIA's "XID errors" and "GPU memory error management" guides:
drain, reset or reboot, and replace the board when the counters say the memory cannot be repaired in place. A
node is taken out of service with ``kubectl cordon`` and ``kubectl drain`` (GPU VMs stop, they cannot migrate);
gpucell's own maintenance (docs/operations.md) does the same on a config change.

Where DCGM cannot see (GPUs of ``vm-passthrough``, ``vm-vgpu`` and ``dra`` pools), :func:`host_alerts` reads the
host-side GPU health node-exporter exports from the hosts' collector (:data:`NODE_EXPORTER_JOB`,
``gpucell/k3s/gpu_host_health.py``, decision 0038).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from gpucell.admission.inventory import GpuOffer
from gpucell.components.metering import KSM_JOB, ksm_sanitized
from gpucell.spec.metrics import HOST_HEALTH_TEXTFILE

__all__ = [
    "CRITICAL_XIDS",
    "DCGM_FIELDS",
    "DCGM_JOB",
    "GPU_TEMPERATURE_C",
    "HOST_SILENT_SECONDS",
    "MEMORY_TEMPERATURE_C",
    "NODE_EXPORTER_JOB",
    "NODE_RELABELING",
    "POWER_THROTTLED_NS_PER_S",
    "HostGpuPool",
    "dcgm_metrics_csv",
    "health_group",
    "host_alerts",
]

CRITICAL_XIDS = (48, 63, 64, 74, 79, 92, 94, 95, 119, 120)
"""XIDs that need the node drained (NVIDIA "XID Errors" catalogue): 48 double-bit ECC, 63/64 row remapping
(pending/failed), 74 NVLink, 79 fallen off the bus, 92 high single-bit ECC rate, 94/95 contained/uncontained ECC,
119/120 GSP errors."""
GPU_TEMPERATURE_C = 87
"""GPU core temperature (degrees C) held for 5 minutes that raises ``GpuTooHot``: above it data-center boards
throttle (slowdown temperatures of H100/H200/L40S/L4 are 87-92 C in ``nvidia-smi -q``)."""
MEMORY_TEMPERATURE_C = 95
"""HBM temperature (degrees C) that raises ``GpuMemoryTooHot`` (HBM3 throttles at 95 C)."""
DCGM_JOB = 'job="nvidia-dcgm-exporter"'
"""Matcher of the DCGM exporter's own series: the GPU Operator's ServiceMonitor ``nvidia-dcgm-exporter`` takes its
job from the Service's ``app`` label (``jobLabel: app``; Service ``nvidia-dcgm-exporter``, GPU Operator
``assets/state-dcgm-exporter/0500_service_monitor.yaml`` and ``0600_service.yaml``). Every alert on DCGM fields
selects it, so a ``DCGM_*`` series a tenant pod exports (any scraped job but this one) fires nothing."""
POWER_THROTTLED_NS_PER_S = 500_000_000
"""``GpuPowerThrottling`` threshold on ``rate(DCGM_FI_DEV_POWER_VIOLATION[10m])``: half of each second throttled.
The counter is in nanoseconds (DCGM ``dcgmlib/dcgm_fields.h``; dcgm-exporter's CSV help said microseconds until
NVIDIA/dcgm-exporter#589 corrected it to ``(in ns)``, as ``etc/default-counters.csv`` of dcgm-exporter
4.6.0-4.8.3, the GPU Operator v26.7.0 pin, reads), so half the time is 0.5 x 10^9 ns per second; 500000 (half a
second in microseconds) fired at 0.05 % throttled time."""
NODE_EXPORTER_JOB = 'job="node-exporter"'
"""Matcher of node-exporter's series, the host-side GPU health among them (:mod:`gpucell.k3s.gpu_host_health`): the
chart's ServiceMonitor takes its job from the Service's ``jobLabel`` label, ``node-exporter`` (kube-prometheus-stack
88.5.3 ``values.yaml``, ``prometheus-node-exporter.service.labels.jobLabel``)."""
HOST_SILENT_SECONDS = 600
"""Age (seconds) of the host-side GPU health file past which ``GpuHostHealthSilent`` fires: ten passes of the
collector (:data:`gpucell.k3s.gpu_host_health.INTERVAL_SECONDS`) missed."""
NODE_RELABELING = {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node", "action": "replace"}
"""Relabeling of the exporter's ServiceMonitor: the exporter pod's node as label ``node``."""
DCGM_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "gauge", "Power management limit (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_POWER_VIOLATION", "counter", "Throttling duration due to power constraints (in ns)."),
    ("DCGM_FI_DEV_THERMAL_VIOLATION", "counter", "Throttling duration due to thermal constraints (in ns)."),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
    ("DCGM_FI_DEV_RETIRED_SBE", "counter", "Total number of retired pages due to single-bit errors."),
    ("DCGM_FI_DEV_RETIRED_DBE", "counter", "Total number of retired pages due to double-bit errors."),
    ("DCGM_FI_DEV_RETIRED_PENDING", "counter", "Total number of pages pending retirement."),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors"),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "gauge", "Total number of NVLink bandwidth counters for all lanes."),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active."),
    ("DCGM_FI_DRIVER_VERSION", "label", "Driver Version"),
)
"""DCGM fields the exporter collects with the metrics stack on: the GPU Operator v26.7.0 default list plus ECC,
retired pages, the power limit and throttling, which the alerts read. Names as in DCGM's ``dcgm_fields.h``."""


def dcgm_metrics_csv() -> str:
    """:data:`DCGM_FIELDS` in the exporter's CSV format (``field, type, help`` per line)."""
    lines = [
        "# DCGM field, Prometheus metric type, help message (gpucell: gpucell.gpu_alerts.DCGM_FIELDS)"
    ]  # old path: kept, the ConfigMap would change (0033)
    lines += [f"{name}, {kind}, {text}" for name, kind, text in DCGM_FIELDS]
    return "\n".join(lines) + "\n"


def _alert(name: str, expr: str, severity: str, summary: str, remediation: str, *, for_: str = "0m") -> dict[str, Any]:
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": {"severity": severity},
        "annotations": {"summary": summary, "remediation": remediation},
    }


def _gpu_count_alerts(offers: Iterable[GpuOffer]) -> list[dict[str, Any]]:
    """One ``GpuCountDropped`` rule per (pool, resource): a node of the pool (node label ``gpucell.io/pool``, from
    kube-state-metrics' ``kube_node_labels``) advertises fewer units than the pool gives each node, or none at all.
    Cordoned nodes are left out (maintenance reconfigures them on purpose). The rules name pools, never hosts, so
    adding or removing a host leaves them as they are."""
    rules = []
    for offer in offers:
        in_pool = f'kube_node_labels{{{KSM_JOB},label_gpucell_io_pool="{offer.pool}"}}'
        capacity = (
            f'max by (node) (kube_node_status_capacity{{{KSM_JOB},resource="{ksm_sanitized(offer.resource)}"}} '
            f"* on (node) group_left () {in_pool})"
        )
        expr = (
            f"(({capacity}) or on (node) (0 * max by (node) ({in_pool}))) < {offer.per_node} "
            f"unless on (node) (kube_node_spec_unschedulable{{{KSM_JOB}}} == 1)"
        )
        alert = _alert(
            "GpuCountDropped",
            expr,
            "critical",
            f"Node {{{{ $labels.node }}}} advertises {{{{ $value }}}} {offer.resource}, pool {offer.pool} gives it "
            f"{offer.per_node}",
            "A GPU fell off the bus or its device plugin stopped: see the node's XID alerts and `kubectl -n "
            "gpu-operator logs` of its device plugin; cordon and drain the node, reboot it, and replace the board "
            "if the GPU does not come back.",
            for_="10m",
        )
        alert["labels"].update(pool=offer.pool, resource=offer.resource)
        rules.append(alert)
    return rules


@dataclass(frozen=True)
class HostGpuPool:
    """A GPU pool whose hosts run the host-side GPU health collector (``vm-passthrough``, ``vm-vgpu``, ``dra``)."""

    pool: str
    """The pool's name (node label ``gpucell.io/pool``)."""
    mode: str
    """Its ``gpuMode``."""
    gpus: int
    """``gpusPerNode``: the physical GPUs each host must show on its PCI bus."""


def host_alerts(pools: Sequence[HostGpuPool]) -> list[dict[str, Any]]:
    """The alerts on the host-side GPU health series (:mod:`gpucell.k3s.gpu_host_health`), read with
    :data:`NODE_EXPORTER_JOB`: one ``GpuFellOffTheBus`` per pool (fewer GPUs answer on a host's PCI bus than the pool
    declares), ``GpuHostXidCritical``, ``GpuPcieAerFatal``, ``GpuPcieAerNonFatal``, ``GpuVfioErrors`` and
    ``GpuHostHealthSilent`` (no fresh file from a host of these pools, or its kernel log unreadable). None without
    such pools."""
    if not pools:
        return []
    host = NODE_EXPORTER_JOB
    drain = "cordon and drain the node (`kubectl cordon`, `kubectl drain`; GPU VMs stop)"
    rules = []
    for entry in pools:
        in_pool = f'max by (node) (kube_node_labels{{{KSM_JOB},label_gpucell_io_pool="{entry.pool}"}})'
        alert = _alert(
            "GpuFellOffTheBus",
            f"(max by (node) (gpucell_host_gpu_pci_devices{{{host}}}) * on (node) group_left () {in_pool}) "
            f"< {entry.gpus}",
            "critical",
            f"Node {{{{ $labels.node }}}} has {{{{ $value }}}} of its {entry.gpus} GPUs answering on the PCI bus "
            f"(pool {entry.pool}, gpuMode {entry.mode})",
            "A GPU fell off the bus: `gpucell_host_gpu_pci_device_up == 0` on the node names it (listed but not "
            "answering), a missing address is gone from the bus; read the host's `journalctl -k` (AER, pciehp, Xid "
            f"79); {drain} and power-cycle it (a warm reboot rarely brings the GPU back); if it falls off again, "
            "check its power and PCIe seating and replace the board.",
        )
        alert["labels"].update(pool=entry.pool)
        rules.append(alert)
    critical = "|".join(str(x) for x in CRITICAL_XIDS)
    on_gpu = "GPU {{ $labels.bdf }} of node {{ $labels.node }}"
    textfile = HOST_HEALTH_TEXTFILE.rsplit("/", 1)[1]
    pools_re = "|".join(entry.pool for entry in pools)
    fresh = (
        f'(time() - max by (node) (node_textfile_mtime_seconds{{{host},file=~".*/{textfile}"}})) '
        f"< {HOST_SILENT_SECONDS}"
    )
    rules += [
        _alert(
            "GpuHostXidCritical",
            f'max by (node, bdf, xid) (gpucell_host_gpu_xid_lines{{{host},xid=~"{critical}"}}) > 0',
            "critical",
            f"{on_gpu} logged Xid {{{{ $labels.xid }}}} in the host's kernel log ({{{{ $value }}}} line(s) this boot)",
            f"Xid {{{{ $labels.xid }}}} needs the GPU reset: {drain}, then reboot it; Xid 48/63/64/94/95 again "
            "after the reboot, or Xid 79: replace the board.",
        ),
        _alert(
            "GpuPcieAerFatal",
            f'max by (node, bdf) (gpucell_host_gpu_pcie_aer_errors_total{{{host},severity="fatal"}}) > 0',
            "critical",
            f"{on_gpu} had {{{{ $value }}}} fatal PCIe AER error(s) since boot",
            f"The link was reset under the GPU and whatever used it: {drain} and reboot it; check the riser, slot "
            "and cabling if it repeats, then replace the board.",
        ),
        _alert(
            "GpuPcieAerNonFatal",
            f'max by (node, bdf) (increase(gpucell_host_gpu_pcie_aer_errors_total{{{host},severity="nonfatal"}}[10m])) '
            "> 0",
            "warning",
            f"{on_gpu} had uncorrectable (non-fatal) PCIe AER errors in the last 10 minutes",
            f"Transactions to the GPU were lost; read the host's `journalctl -k` for the AER lines; if they repeat, "
            f"{drain} and reseat or replace the board.",
        ),
        _alert(
            "GpuVfioErrors",
            f"max by (node, bdf) (increase(gpucell_host_gpu_vfio_error_lines_total{{{host}}}[10m])) > 0",
            "warning",
            f"vfio-pci reported errors for {on_gpu} in the last 10 minutes",
            "A reset or setup of the GPU for a VM failed (`journalctl -k | grep vfio-pci`); the VM on it may not "
            f"start; if it repeats, {drain} and reboot it.",
        ),
        _alert(
            "GpuHostHealthSilent",
            f'max by (node) (kube_node_labels{{{KSM_JOB},label_gpucell_io_pool=~"{pools_re}"}}) unless on (node) '
            f"({fresh}) or on (node) (max by (node) (gpucell_host_gpu_kernel_log_readable{{{host}}}) == 0)",
            "warning",
            "Node {{ $labels.node }} has no fresh host-side GPU health (its GPUs, AER and Xid lines go unseen)",
            "Check the host's `systemctl status gpucell-gpu-health` and `journalctl -u gpucell-gpu-health` (its "
            "install script installs it), and node-exporter's pod on the node.",
            for_="15m",
        ),
    ]
    return rules


def health_group(offers: Iterable[GpuOffer], host_pools: Sequence[HostGpuPool] = ()) -> dict[str, Any]:
    """The PrometheusRule group ``gpucell-gpu-health`` for the device-plugin offers of a cell and the GPU pools whose
    hosts run the host-side GPU health collector (:func:`host_alerts`)."""
    critical = "|".join(str(x) for x in CRITICAL_XIDS)
    on_node = "GPU {{ $labels.gpu }} of node {{ $labels.node }}"
    drain = "cordon and drain the node (`kubectl cordon`, `kubectl drain`; GPU VMs stop)"
    return {
        "name": "gpucell-gpu-health",
        "rules": [
            _alert(
                "GpuXidCritical",
                _critical_xid_expr(critical),
                "critical",
                f"{on_node} reported XID {{{{ $value }}}}",
                f"XID {{{{ $value }}}} needs the GPU reset: {drain}, then reboot it; XID 48/63/64/94/95 with "
                "rising remapped-row or retired-page counters, or XID 79 again after the reboot: replace the board.",
            ),
            _alert(
                "GpuXid",
                f"max by (node, gpu, UUID) (DCGM_FI_DEV_XID_ERRORS{{{DCGM_JOB}}}) > 0",
                "warning",
                f"{on_node} reported XID {{{{ $value }}}}",
                "Look the XID up in NVIDIA's XID catalogue; application XIDs (13, 31, 43, 45) are the workload's "
                f"own fault and clear themselves; if it repeats with no workload fault, {drain} and reboot it.",
            ),
            _alert(
                "GpuFellOffTheBus",
                f"max by (node, gpu, UUID) (DCGM_FI_DEV_XID_ERRORS{{{DCGM_JOB}}}) == 79",
                "critical",
                f"{on_node} fell off the bus (XID 79)",
                f"{drain} and power-cycle it (a warm reboot rarely brings the GPU back); if it falls off again, "
                "check its power and PCIe seating and replace the board.",
            ),
            _alert(
                "GpuDoubleBitEcc",
                f"increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{{DCGM_JOB}}}[10m]) > 0",
                "critical",
                f"{on_node} had uncorrectable (double-bit) ECC errors",
                f"Data on that GPU may be corrupt: {drain} and reset the GPU; the next boot retires or remaps the "
                "affected memory.",
            ),
            _alert(
                "GpuRetiredPagesPending",
                f"max by (node, gpu, UUID) (DCGM_FI_DEV_RETIRED_PENDING{{{DCGM_JOB}}}) > 0",
                "warning",
                f"{on_node} has memory pages waiting to be retired",
                f"Retirement takes effect on the next GPU reset: {drain} and reboot it at the next opportunity.",
            ),
            _alert(
                "GpuRetiredPagesHigh",
                f"max by (node, gpu, UUID) (DCGM_FI_DEV_RETIRED_DBE{{{DCGM_JOB}}} + "
                f"DCGM_FI_DEV_RETIRED_SBE{{{DCGM_JOB}}}) >= 60",
                "critical",
                f"{on_node} has retired {{{{ $value }}}} memory pages",
                "NVIDIA's RMA threshold is 60 retired pages (or 15 in 30 days): drain the node and replace the board.",
            ),
            _alert(
                "GpuRowRemapFailed",
                f"max by (node, gpu, UUID) (DCGM_FI_DEV_ROW_REMAP_FAILURE{{{DCGM_JOB}}}) > 0",
                "critical",
                f"{on_node} could not remap a memory row",
                "The GPU's memory cannot be repaired in place: drain the node and replace the board.",
            ),
            _alert(
                "GpuUncorrectableRowsRemapped",
                f"increase(DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS{{{DCGM_JOB}}}[1h]) > 0",
                "warning",
                f"{on_node} remapped a memory row after an uncorrectable error",
                f"The remap takes effect on the next GPU reset: {drain} and reboot it.",
            ),
            _alert(
                "GpuTooHot",
                f"max by (node, gpu, UUID) (DCGM_FI_DEV_GPU_TEMP{{{DCGM_JOB}}}) > {GPU_TEMPERATURE_C}",
                "warning",
                f"{on_node} is at {{{{ $value }}}} C",
                "Check the node's fans and airflow and the rack's inlet temperature; the GPU throttles until it cools.",
                for_="5m",
            ),
            _alert(
                "GpuMemoryTooHot",
                f"max by (node, gpu, UUID) (DCGM_FI_DEV_MEMORY_TEMP{{{DCGM_JOB}}}) > {MEMORY_TEMPERATURE_C}",
                "warning",
                f"{on_node} memory is at {{{{ $value }}}} C",
                "Check the node's cooling; HBM throttles above 95 C.",
                for_="5m",
            ),
            _alert(
                "GpuPowerOverLimit",
                f"max by (node, gpu, UUID) (DCGM_FI_DEV_POWER_USAGE{{{DCGM_JOB}}}) > 1.05 * max by (node, "
                f"gpu, UUID) (DCGM_FI_DEV_POWER_MGMT_LIMIT{{{DCGM_JOB}}})",
                "warning",
                f"{on_node} draws {{{{ $value }}}} W, more than 105% of its power limit",
                "Check the node's power supplies and the GPU's power limit (`nvidia-smi -q -d POWER`).",
                for_="5m",
            ),
            _alert(
                "GpuPowerThrottling",
                f"rate(DCGM_FI_DEV_POWER_VIOLATION{{{DCGM_JOB}}}[10m]) > {POWER_THROTTLED_NS_PER_S}",
                "info",
                f"{on_node} spends over half its time throttled by its power limit",
                "Expected under full load on boards run at a reduced limit; otherwise check the power supplies.",
                for_="30m",
            ),
            *_gpu_count_alerts(offers),
            *host_alerts(host_pools),
        ],
    }


def _critical_xid_expr(critical: str) -> str:
    """The last XID of a GPU is one of ``critical`` (``48|63|...``): ``max(...) == 48 or max(...) == 63 ...``."""
    gauge = f"max by (node, gpu, UUID) (DCGM_FI_DEV_XID_ERRORS{{{DCGM_JOB}}})"
    return " or ".join(f"{gauge} == {xid}" for xid in critical.split("|"))
