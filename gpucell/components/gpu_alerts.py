"""GPU health alerts (a PrometheusRule group), each naming the node and what to do.

DCGM fields come from the DCGM exporter the GPU Operator runs (:data:`DCGM_FIELDS`, the exporter's
``dcgm-metrics.csv`` when the metrics stack is on; the default list of GPU Operator v26.7.0,
``etc/dcp-metrics-included.csv`` of dcgm-exporter 4.6.0-4.8.3, lacks ECC, retired pages and power limit). The
GPU Operator's ServiceMonitor for the exporter copies the pod's node into label ``node``
(:data:`NODE_RELABELING`). Remediation follows NVIDIA's "XID errors" and "GPU memory error management" guides:
drain, reset or reboot, and replace the board when the counters say the memory cannot be repaired in place. A
node is taken out of service with ``kubectl cordon`` and ``kubectl drain`` (GPU VMs stop, they cannot migrate);
gpucell's own maintenance (docs/operations.md) does the same on a config change.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gpucell.admission.inventory import GpuOffer
from gpucell.components.metering import KSM_JOB, ksm_sanitized

__all__ = [
    "CRITICAL_XIDS",
    "DCGM_FIELDS",
    "DCGM_JOB",
    "GPU_TEMPERATURE_C",
    "MEMORY_TEMPERATURE_C",
    "NODE_RELABELING",
    "POWER_THROTTLED_NS_PER_S",
    "dcgm_metrics_csv",
    "health_group",
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


def health_group(offers: Iterable[GpuOffer]) -> dict[str, Any]:
    """The PrometheusRule group ``gpucell-gpu-health`` for the device-plugin offers of a cell."""
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
        ],
    }


def _critical_xid_expr(critical: str) -> str:
    """The last XID of a GPU is one of ``critical`` (``48|63|...``): ``max(...) == 48 or max(...) == 63 ...``."""
    gauge = f"max by (node, gpu, UUID) (DCGM_FI_DEV_XID_ERRORS{{{DCGM_JOB}}})"
    return " or ".join(f"{gauge} == {xid}" for xid in critical.split("|"))
