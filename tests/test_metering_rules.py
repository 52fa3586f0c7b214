"""The metering rules and GPU alerts, evaluated by a real Prometheus rule engine: ``promtool test rules`` on
synthetic series (Debian's ``prometheus`` package; ``.ci/run`` installs it). Under ``CI=true`` a missing promtool
fails the suite; elsewhere these tests are skipped with the way to get it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucell.gpu_alerts import health_group
from gpucell.inventory import GpuOffer, OfferKind
from gpucell.metering import ALLOCATED, ksm_sanitized, metering_group
from gpucell.spec import GpuMode

PROMTOOL = shutil.which("promtool")
if PROMTOOL is None and os.environ.get("CI") == "true":
    raise RuntimeError("promtool is missing under CI=true: .ci/run installs it (apt-get install -y prometheus)")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not found: apt-get install prometheus (Debian/Ubuntu) to run the rule tests"
)

OFFERS = [
    GpuOffer(
        "nvidia.com/GH100_H100_SXM5_80GB",
        "h100-vm",
        GpuMode.VM_PASSTHROUGH,
        "H100-SXM5-80GB",
        OfferKind.PASSTHROUGH,
        8,
        1,
    ),
    GpuOffer(
        "nvidia.com/mig-1g.18gb",
        "h200-mig",
        GpuMode.CONTAINER,
        "H200-SXM-141GB",
        OfferKind.MIG,
        16,
        1,
        mig_profile="1g.18gb",
    ),
    GpuOffer("nvidia.com/gpu", "h200", GpuMode.CONTAINER, "H200-SXM-141GB", OfferKind.GPU, 8, 2),
]


def _requests(ns: str, pod: str, resource: str, count: int) -> dict[str, str]:
    return {
        "series": f'kube_pod_container_resource_requests{{namespace="{ns}",pod="{pod}",container="c",'
        f'resource="{ksm_sanitized(resource)}",unit="integer"}}',
        "values": f"{count}x30",
    }


def _phase(ns: str, pod: str, phase: str) -> list[dict[str, str]]:
    return [
        {
            "series": f'kube_pod_status_phase{{namespace="{ns}",pod="{pod}",phase="{p}"}}',
            "values": f"{int(p == phase)}x30",
        }
        for p in ("Pending", "Running", "Succeeded")
    ]


def _quota(ns: str, classes: dict[str, tuple[int, int]]) -> list[dict[str, str]]:
    """``kube_resourcequota`` of quota ``tenant`` in ``ns``: per DeviceClass, its hard limit and use, with the
    ``count/resourceclaims.resource.k8s.io`` key the quota also lists (not a device count)."""
    rows = [(f"{c}.deviceclass.resource.k8s.io/devices", hard, used) for c, (hard, used) in classes.items()]
    rows.append(("count/resourceclaims.resource.k8s.io", 8, sum(used for _, used in classes.values())))
    return [
        {
            "series": f'kube_resourcequota{{namespace="{ns}",resourcequota="tenant",resource="{key}",type="{kind}"}}',
            "values": f"{value}x30",
        }
        for key, hard, used in rows
        for kind, value in (("hard", hard), ("used", used))
    ]


METERING_SERIES = [
    {"series": 'kube_namespace_labels{namespace="tenant-acme",label_gpucell_io_tenant="acme"}', "values": "1x30"},
    {"series": 'kube_namespace_labels{namespace="tenant-globex",label_gpucell_io_tenant="globex"}', "values": "1x30"},
    {"series": 'kube_namespace_labels{namespace="kube-system"}', "values": "1x30"},
    # acme: a MIG notebook, an 8-GPU passthrough VM (its virt-launcher pod), a Pending pod that holds nothing
    _requests("tenant-acme", "nb-alice-0", "nvidia.com/mig-1g.18gb", 1),
    *_phase("tenant-acme", "nb-alice-0", "Running"),
    _requests("tenant-acme", "virt-launcher-train-01-x", "nvidia.com/GH100_H100_SXM5_80GB", 8),
    *_phase("tenant-acme", "virt-launcher-train-01-x", "Running"),
    {
        "series": 'kube_pod_labels{namespace="tenant-acme",pod="virt-launcher-train-01-x",'
        'label_kubevirt_io="virt-launcher"}',
        "values": "1x30",
    },
    _requests("tenant-acme", "waiting-0", "nvidia.com/gpu", 2),
    *_phase("tenant-acme", "waiting-0", "Pending"),
    # globex: a 4-GPU endpoint replica; a GPU pod outside any tenant is not metered
    _requests("tenant-globex", "llama-70b-predictor-a", "nvidia.com/gpu", 4),
    *_phase("tenant-globex", "llama-70b-predictor-a", "Running"),
    _requests("kube-system", "gpu-burn", "nvidia.com/gpu", 1),
    *_phase("kube-system", "gpu-burn", "Running"),
    # DRA: the tenants' ResourceQuotas, kept by the API server from their claims: acme's VM holds a VFIO GPU, its
    # notebook two GPUs; globex has no claim; a quota outside any tenant is not metered
    *_quota("tenant-acme", {"vfio.gpu.nvidia.com": (4, 1), "gpu.nvidia.com": (2, 2), "mig.nvidia.com": (0, 0)}),
    *_quota("tenant-globex", {"vfio.gpu.nvidia.com": (0, 0), "gpu.nvidia.com": (4, 0), "mig.nvidia.com": (0, 0)}),
    *_quota("kube-system", {"gpu.nvidia.com": (8, 1)}),
]


def _sample(tenant: str, resource: str, kind: str, value: int) -> dict[str, Any]:
    return {"labels": f'{ALLOCATED}{{tenant="{tenant}",resource="{resource}",kind="{kind}"}}', "value": value}


def _promtool(tmp_path: Path, groups: list[dict[str, Any]], tests: list[dict[str, Any]]) -> str:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    (tmp_path / "test.yaml").write_text(
        yaml.safe_dump({"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": tests}, sort_keys=False)
    )
    assert PROMTOOL is not None
    done = subprocess.run(
        [PROMTOOL, "test", "rules", "test.yaml"], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@needs_promtool
def test_rules_pass_promtool_check(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(
        yaml.safe_dump({"groups": [metering_group(o.resource for o in OFFERS), health_group(OFFERS)]})
    )
    assert PROMTOOL is not None
    done = subprocess.run(
        [PROMTOOL, "check", "rules", "rules.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 20 rules found" in done.stdout


@needs_promtool
def test_tenant_gpus_counted_for_containers_vms_and_claims(tmp_path: Path) -> None:
    expected = [
        _sample("acme", "nvidia.com/mig-1g.18gb", "container", 1),
        _sample("acme", "nvidia.com/GH100_H100_SXM5_80GB", "vm", 8),
        _sample("acme", "vfio.gpu.nvidia.com", "vm", 1),
        _sample("acme", "gpu.nvidia.com", "container", 2),
        _sample("globex", "nvidia.com/gpu", "container", 4),
    ]
    output = _promtool(
        tmp_path,
        [metering_group(o.resource for o in OFFERS)],
        [
            {
                "interval": "1m",
                "input_series": METERING_SERIES,
                "promql_expr_test": [
                    {"expr": ALLOCATED, "eval_time": "10m", "exp_samples": expected},
                    # GPU-hours over 20 minutes of 1-minute samples: 8 GPUs x 20/60 h for the VM. 19m59s: the
                    # samples of (t-20m, t], whether the subquery range is closed (Prometheus 2) or left-open
                    # (Prometheus 3) at its start
                    {
                        "expr": f'sum_over_time({ALLOCATED}{{kind="vm",resource="nvidia.com/GH100_H100_SXM5_80GB"}}'
                        "[19m59s:1m]) / 60",
                        "eval_time": "20m",
                        "exp_samples": [
                            {
                                "labels": '{tenant="acme",resource="nvidia.com/GH100_H100_SXM5_80GB",kind="vm"}',
                                "value": 8 * 20 / 60,
                            }
                        ],
                    },
                ],
            }
        ],
    )
    assert "SUCCESS" in output


def _dropped(node: str, value: int) -> dict[str, Any]:
    labels = {"severity": "critical", "node": node, "pool": "h200", "resource": "nvidia.com/gpu"}
    summary = f"Node {node} advertises {value} nvidia.com/gpu, pool h200 gives it 8"
    return {
        "exp_labels": labels,
        "exp_annotations": {"summary": summary, "remediation": _remediation("GpuCountDropped")},
    }


def _remediation(name: str) -> str:
    rule = next(r for r in health_group(OFFERS)["rules"] if r.get("alert") == name)
    return str(rule["annotations"]["remediation"])


@needs_promtool
def test_gpu_health_alerts_name_the_node(tmp_path: Path) -> None:
    dcgm = 'DCGM_FI_DEV_XID_ERRORS{node="h200x-1",gpu="3",UUID="GPU-abc",modelName="NVIDIA H200"}'
    capacity = 'kube_node_status_capacity{{node="{node}",resource="nvidia_com_gpu",unit="integer"}}'
    series = [
        {"series": dcgm, "values": "0x5 79x25"},
        {"series": capacity.format(node="h200x-1"), "values": "8x5 7x25"},
        {"series": capacity.format(node="h200x-2"), "values": "8x5 6x25"},  # cordoned for maintenance
        {"series": 'kube_node_spec_unschedulable{node="h200x-1"}', "values": "0x30"},
        {"series": 'kube_node_spec_unschedulable{node="h200x-2"}', "values": "0x5 1x25"},
        *(
            {"series": f'kube_node_labels{{node="{node}",label_gpucell_io_pool="h200"}}', "values": "1x30"}
            for node in ("h200x-1", "h200x-2", "h200x-3")
        ),
        {"series": 'kube_node_spec_unschedulable{node="h200x-3"}', "values": "0x30"},  # its device plugin is gone
    ]
    labels = {"node": "h200x-1", "gpu": "3", "UUID": "GPU-abc"}
    off_the_bus = {
        "summary": "GPU 3 of node h200x-1 fell off the bus (XID 79)",
        "remediation": _remediation("GpuFellOffTheBus"),
    }
    output = _promtool(
        tmp_path,
        [health_group(OFFERS)],
        [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    {"eval_time": "4m", "alertname": "GpuFellOffTheBus", "exp_alerts": []},
                    {
                        "eval_time": "8m",
                        "alertname": "GpuFellOffTheBus",
                        "exp_alerts": [
                            {"exp_labels": {"severity": "critical", **labels}, "exp_annotations": off_the_bus}
                        ],
                    },
                    {
                        "eval_time": "8m",
                        "alertname": "GpuXidCritical",
                        "exp_alerts": [
                            {
                                "exp_labels": {"severity": "critical", **labels},
                                "exp_annotations": {
                                    "summary": "GPU 3 of node h200x-1 reported XID 79",
                                    "remediation": _remediation("GpuXidCritical").replace("{{ $value }}", "79"),
                                },
                            }
                        ],
                    },
                    # h200x-3 advertises no GPU at all from the start; h200x-1 one fewer after 5m (10m pending)
                    {"eval_time": "12m", "alertname": "GpuCountDropped", "exp_alerts": [_dropped("h200x-3", 0)]},
                    {
                        "eval_time": "20m",
                        "alertname": "GpuCountDropped",
                        "exp_alerts": [_dropped("h200x-1", 7), _dropped("h200x-3", 0)],
                    },
                ],
            }
        ],
    )
    assert "SUCCESS" in output
