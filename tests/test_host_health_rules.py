"""The host-side GPU alerts (gpucell.components.gpu_alerts.host_alerts), evaluated by ``promtool test rules`` on
synthetic node-exporter series, as the collector of gpucell/k3s/gpu_host_health.py writes them on the hosts of
``vm-passthrough``, ``vm-vgpu`` and ``dra`` pools, and kube-state-metrics' node labels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpucell.components.gpu_alerts import NODE_EXPORTER_JOB, HostGpuPool, health_group
from tests.test_metering_rules import OFFERS, PREDICTOR_JOB, _ksm, _promtool, needs_promtool

POOLS = [HostGpuPool("h100-vm", "vm-passthrough", 8), HostGpuPool("l40s-vgpu", "vm-vgpu", 2)]
"""A pool of H100s bound to vfio-pci for VMs and one of L40S vGPU hosts."""
NODES = {"h100vm-1": "h100-vm", "h100vm-2": "h100-vm", "l40s-1": "l40s-vgpu", "h200x-1": "h200"}
"""Hosts and their pools; ``h200`` is a ``container`` pool (DCGM watches it)."""


def _host(series: str, values: str) -> dict[str, str]:
    """``series`` as node-exporter's job exports it (the collector's textfile, with the node label)."""
    return {"series": series.replace("{", f"{{{NODE_EXPORTER_JOB},", 1), "values": values}


def _labels() -> list[dict[str, str]]:
    return [
        {"series": _ksm(f'kube_node_labels{{node="{node}",label_gpucell_io_pool="{pool}"}}'), "values": "1x40"}
        for node, pool in NODES.items()
    ]


def _rule(name: str, pool: str | None = None) -> dict[str, Any]:
    """The rule of alert ``name`` (of ``pool``, for a rule per pool)."""
    rules = health_group(OFFERS, POOLS)["rules"]
    return next(r for r in rules if r.get("alert") == name and r["labels"].get("pool") == pool)


def _alert(name: str, severity: str, value: int | None = None, **labels: str) -> dict[str, Any]:
    """The alert ``name`` promtool should see firing with ``labels``: its annotations filled in with them and
    ``value``."""

    def filled(text: str) -> str:
        for key, label in labels.items():
            text = text.replace(f"{{{{ $labels.{key} }}}}", label)
        return text.replace("{{ $value }}", str(value))

    annotations = {key: filled(text) for key, text in _rule(name)["annotations"].items()}
    return {"exp_labels": {"severity": severity, **labels}, "exp_annotations": annotations}


def _fresh(node: str) -> dict[str, str]:
    """The collector's file on ``node`` rewritten every minute: its mtime is the evaluation time."""
    file = "/host/root/var/lib/gpucell/node-exporter/gpucell-gpu-health.prom"
    return _host(f'node_textfile_mtime_seconds{{node="{node}",file="{file}"}}', "0+60x40")


@needs_promtool
def test_a_vfio_bound_gpu_missing_from_the_bus_fires_gpu_fell_off_the_bus(tmp_path: Path) -> None:
    series = [
        *_labels(),
        # h100vm-1: 8 GPUs answer, then one of its vfio-bound GPUs falls off the bus at 5m
        _host('gpucell_host_gpu_pci_devices{node="h100vm-1"}', "8x5 7x35"),
        _host('gpucell_host_gpu_pci_device_up{node="h100vm-1",bdf="0000:1a:00.0",driver="vfio-pci"}', "1x5 0x35"),
        _host('gpucell_host_gpu_pci_devices{node="h100vm-2"}', "8x40"),
        _host('gpucell_host_gpu_pci_devices{node="l40s-1"}', "2x40"),
        # a container pool's host with a collector left behind: DCGM's alerts cover it, this series fires nothing
        _host('gpucell_host_gpu_pci_devices{node="h200x-1"}', "0x40"),
        # a tenant pod's forged series (another job): read by no rule
        {"series": f'gpucell_host_gpu_pci_devices{{{PREDICTOR_JOB},node="h100vm-2"}}', "values": "0x40"},
        *(_fresh(node) for node in ("h100vm-1", "h100vm-2", "l40s-1")),
    ]
    rule = _rule("GpuFellOffTheBus", "h100-vm")
    assert rule["expr"] == (
        '(max by (node) (gpucell_host_gpu_pci_devices{job="node-exporter"}) * on (node) group_left () max by (node) '
        '(kube_node_labels{job="kube-state-metrics",label_gpucell_io_pool="h100-vm"})) < 8'
    )
    fired = {
        "exp_labels": {"severity": "critical", "node": "h100vm-1", "pool": "h100-vm"},
        "exp_annotations": {
            "summary": "Node h100vm-1 has 7 of its 8 GPUs answering on the PCI bus (pool h100-vm, gpuMode "
            "vm-passthrough)",
            "remediation": rule["annotations"]["remediation"],
        },
    }
    output = _promtool(
        tmp_path,
        [health_group(OFFERS, POOLS)],
        [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    {"eval_time": "4m", "alertname": "GpuFellOffTheBus", "exp_alerts": []},
                    {"eval_time": "6m", "alertname": "GpuFellOffTheBus", "exp_alerts": [fired]},
                    {"eval_time": "20m", "alertname": "GpuHostHealthSilent", "exp_alerts": []},
                ],
            }
        ],
    )
    assert "SUCCESS" in output


@needs_promtool
def test_xid_aer_and_vfio_lines_of_the_host_kernel_fire_by_severity(tmp_path: Path) -> None:
    gpu = 'node="l40s-1",bdf="0000:42:00.0"'
    series = [
        *_labels(),
        _host(f'gpucell_host_gpu_xid_lines{{{gpu},xid="79"}}', "_x5 1x5 2x25"),  # appears at 5m
        _host('gpucell_host_gpu_xid_lines{node="l40s-1",bdf="0000:43:00.0",xid="13"}', "_x5 3x30"),  # application
        _host(f'gpucell_host_gpu_pcie_aer_errors_total{{{gpu},severity="fatal"}}', "0x5 1x30"),
        _host(f'gpucell_host_gpu_pcie_aer_errors_total{{{gpu},severity="nonfatal"}}', "0x5 4x30"),
        _host(f'gpucell_host_gpu_pcie_aer_errors_total{{{gpu},severity="correctable"}}', "0+7x35"),
        _host(f"gpucell_host_gpu_vfio_error_lines_total{{{gpu}}}", "0x5 1x30"),
    ]
    labels = {"node": "l40s-1", "bdf": "0000:42:00.0"}
    output = _promtool(
        tmp_path,
        [health_group(OFFERS, POOLS)],
        [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    {"eval_time": "4m", "alertname": "GpuHostXidCritical", "exp_alerts": []},
                    {
                        "eval_time": "12m",
                        "alertname": "GpuHostXidCritical",
                        "exp_alerts": [
                            {
                                "exp_labels": {"severity": "critical", "xid": "79", **labels},
                                "exp_annotations": {
                                    "summary": "GPU 0000:42:00.0 of node l40s-1 logged Xid 79 in the host's kernel "
                                    "log (2 line(s) this boot)",
                                    "remediation": _rule("GpuHostXidCritical")["annotations"]["remediation"].replace(
                                        "{{ $labels.xid }}", "79"
                                    ),
                                },
                            }
                        ],
                    },
                    {
                        "eval_time": "7m",
                        "alertname": "GpuPcieAerFatal",
                        "exp_alerts": [_alert("GpuPcieAerFatal", "critical", 1, **labels)],
                    },
                    # counted since boot: still firing long after, until the host reboots
                    {
                        "eval_time": "30m",
                        "alertname": "GpuPcieAerFatal",
                        "exp_alerts": [_alert("GpuPcieAerFatal", "critical", 1, **labels)],
                    },
                    {
                        "eval_time": "7m",
                        "alertname": "GpuPcieAerNonFatal",
                        "exp_alerts": [_alert("GpuPcieAerNonFatal", "warning", **labels)],
                    },
                    # an increase over 10 minutes: quiet again once nothing new came
                    {"eval_time": "30m", "alertname": "GpuPcieAerNonFatal", "exp_alerts": []},
                    {
                        "eval_time": "7m",
                        "alertname": "GpuVfioErrors",
                        "exp_alerts": [_alert("GpuVfioErrors", "warning", **labels)],
                    },
                ],
            }
        ],
    )
    assert "SUCCESS" in output


@needs_promtool
def test_a_host_without_fresh_host_side_health_is_named(tmp_path: Path) -> None:
    file = "/host/root/var/lib/gpucell/node-exporter/gpucell-gpu-health.prom"
    series = [
        *_labels(),
        _fresh("h100vm-1"),
        # l40s-1's collector stopped at 0: its file is 600 s old at 10m
        _host(f'node_textfile_mtime_seconds{{node="l40s-1",file="{file}"}}', "0x40"),
        # h100vm-2 has no file at all (the collector never ran); h200x-1 is a container pool's host
        _host('gpucell_host_gpu_kernel_log_readable{node="h100vm-1"}', "1x40"),
    ]
    silent = [_alert("GpuHostHealthSilent", "warning", node=node) for node in ("h100vm-2", "l40s-1")]
    output = _promtool(
        tmp_path,
        [health_group(OFFERS, POOLS)],
        [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    {"eval_time": "16m", "alertname": "GpuHostHealthSilent", "exp_alerts": silent[:1]},
                    {"eval_time": "27m", "alertname": "GpuHostHealthSilent", "exp_alerts": silent},
                ],
            }
        ],
    )
    assert "SUCCESS" in output


def test_no_host_side_alert_without_such_pools() -> None:
    names = [r["alert"] for r in health_group(OFFERS, POOLS)["rules"]]
    assert names[-7:] == [
        "GpuFellOffTheBus",
        "GpuFellOffTheBus",
        "GpuHostXidCritical",
        "GpuPcieAerFatal",
        "GpuPcieAerNonFatal",
        "GpuVfioErrors",
        "GpuHostHealthSilent",
    ]
    assert len(health_group(OFFERS)["rules"]) == len(names) - 7


def test_every_host_side_alert_has_its_row_in_docs_metrics() -> None:
    from tests.conftest import REPO

    doc = (REPO / "docs" / "metrics.md").read_text()
    names = {r["alert"] for r in health_group(OFFERS, POOLS)["rules"][-7:]}
    assert {name for name in names if f"| `{name}` " not in doc} == set()
