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

from gpucell.admission.inventory import GpuOffer, OfferKind
from gpucell.components.gpu_alerts import DCGM_JOB, POWER_THROTTLED_NS_PER_S, health_group
from gpucell.components.metering import ALLOCATED, KSM_JOB, RECORDED, ksm_sanitized, metering_group
from gpucell.spec import GpuMode
from tests.conftest import UPSTREAM

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


POOL_MODELS = {**{o.pool: o.model for o in OFFERS}, "l4": "L4", "dra-l4": "L4"}
"""The GPU pools' models: the three offers' pools, an L4 container pool and an L4 ``dra`` pool."""
PREDICTOR_JOB = 'job="monitoring/kserve-predictors"'
"""The job of what the ``kserve-predictors`` PodMonitor scrapes (Prometheus Operator: ``<namespace>/<name>``)."""


def _ksm(series: str) -> str:
    """``series`` as kube-state-metrics' job exports it."""
    return series.replace("{", f"{{{KSM_JOB},", 1)


def _requests(ns: str, pod: str, resource: str, count: int, node: str = "") -> dict[str, str]:
    return {
        "series": f'kube_pod_container_resource_requests{{namespace="{ns}",pod="{pod}",container="c",node="{node}",'
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


_NODES = {"h100-1": "h100-vm", "h200m-1": "h200-mig", "h200-1": "h200", "l4-1": "l4", "l4-2": "dra-l4", "cpu-1": "cpu"}
_SERIES = [
    *(
        {"series": f'kube_node_labels{{node="{node}",label_gpucell_io_pool="{pool}"}}', "values": "1x30"}
        for node, pool in _NODES.items()
    ),
    {"series": 'kube_namespace_labels{namespace="tenant-acme",label_gpucell_io_tenant="acme"}', "values": "1x30"},
    {"series": 'kube_namespace_labels{namespace="tenant-globex",label_gpucell_io_tenant="globex"}', "values": "1x30"},
    {"series": 'kube_namespace_labels{namespace="kube-system"}', "values": "1x30"},
    # acme: a MIG notebook, an 8-GPU passthrough VM (its virt-launcher pod), a Pending pod that holds nothing
    _requests("tenant-acme", "nb-alice-0", "nvidia.com/mig-1g.18gb", 1, "h200m-1"),
    *_phase("tenant-acme", "nb-alice-0", "Running"),
    _requests("tenant-acme", "virt-launcher-train-01-x", "nvidia.com/GH100_H100_SXM5_80GB", 8, "h100-1"),
    *_phase("tenant-acme", "virt-launcher-train-01-x", "Running"),
    {
        "series": 'kube_pod_labels{namespace="tenant-acme",pod="virt-launcher-train-01-x",'
        'label_kubevirt_io="virt-launcher"}',
        "values": "1x30",
    },
    _requests("tenant-acme", "waiting-0", "nvidia.com/gpu", 2),
    *_phase("tenant-acme", "waiting-0", "Pending"),
    # globex: a 4-GPU endpoint replica on an H200 and a 2-GPU one on an L4 (both nvidia.com/gpu, billed apart); a GPU
    # pod outside any tenant is not metered
    _requests("tenant-globex", "llama-70b-predictor-a", "nvidia.com/gpu", 4, "h200-1"),
    *_phase("tenant-globex", "llama-70b-predictor-a", "Running"),
    _requests("tenant-globex", "whisper-predictor-b", "nvidia.com/gpu", 2, "l4-1"),
    *_phase("tenant-globex", "whisper-predictor-b", "Running"),
    _requests("kube-system", "gpu-burn", "nvidia.com/gpu", 1, "h200-1"),
    *_phase("kube-system", "gpu-burn", "Running"),
    # DRA: the tenants' ResourceQuotas, kept by the API server from their claims: acme's VM holds a VFIO GPU, its
    # notebook two GPUs; globex has no claim; a quota outside any tenant is not metered
    *_quota("tenant-acme", {"vfio.gpu.nvidia.com": (4, 1), "gpu.nvidia.com": (2, 2), "mig.nvidia.com": (0, 0)}),
    *_quota("tenant-globex", {"vfio.gpu.nvidia.com": (0, 0), "gpu.nvidia.com": (4, 0), "mig.nvidia.com": (0, 0)}),
    *_quota("kube-system", {"gpu.nvidia.com": (8, 1)}),
]
METERING_SERIES = [{**entry, "series": _ksm(entry["series"])} for entry in _SERIES]
"""The inputs, as kube-state-metrics exports them (its job)."""


def _sample(tenant: str, resource: str, model: str, kind: str, value: int) -> dict[str, Any]:
    labels = f'tenant="{tenant}",resource="{resource}",gpu_model="{model}",kind="{kind}"'
    return {"labels": f"{ALLOCATED}{{{labels}}}", "value": value}


EXPECTED = [
    _sample("acme", "nvidia.com/mig-1g.18gb", "H200-SXM-141GB", "container", 1),
    _sample("acme", "nvidia.com/GH100_H100_SXM5_80GB", "H100-SXM5-80GB", "vm", 8),
    _sample("acme", "vfio.gpu.nvidia.com", "L4", "vm", 1),
    _sample("acme", "gpu.nvidia.com", "L4", "container", 2),
    _sample("globex", "nvidia.com/gpu", "H200-SXM-141GB", "container", 4),
    _sample("globex", "nvidia.com/gpu", "L4", "container", 2),
]
"""What the tenants hold in :data:`METERING_SERIES`: 8 H100s in a VM, an H200 MIG slice, L4s through DRA (the model
of the one ``dra`` pool: the quota counts claimed devices per namespace, not per node), and globex's
``nvidia.com/gpu`` split into H200 and L4 GPUs."""


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
        yaml.safe_dump({"groups": [metering_group((o.resource for o in OFFERS), POOL_MODELS), health_group(OFFERS)]})
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
    assert "SUCCESS: 21 rules found" in done.stdout


@needs_promtool
def test_tenant_gpus_counted_for_containers_vms_and_claims_by_gpu_model(tmp_path: Path) -> None:
    output = _promtool(
        tmp_path,
        [metering_group((o.resource for o in OFFERS), POOL_MODELS, "L4")],
        [
            {
                "interval": "1m",
                "input_series": METERING_SERIES,
                "promql_expr_test": [
                    {"expr": ALLOCATED, "eval_time": "10m", "exp_samples": EXPECTED},
                    # GPU-hours over 20 minutes of 1-minute samples: 8 GPUs x 20/60 h for the VM. 19m59s: the
                    # samples of (t-20m, t], whether the subquery range is closed (Prometheus 2) or left-open
                    # (Prometheus 3) at its start
                    {
                        "expr": f'sum_over_time({ALLOCATED}{{kind="vm",resource="nvidia.com/GH100_H100_SXM5_80GB"}}'
                        "[19m59s:1m]) / 60",
                        "eval_time": "20m",
                        "exp_samples": [
                            {
                                "labels": '{tenant="acme",resource="nvidia.com/GH100_H100_SXM5_80GB",'
                                'gpu_model="H100-SXM5-80GB",kind="vm"}',
                                "value": 8 * 20 / 60,
                            }
                        ],
                    },
                ],
            }
        ],
    )
    assert "SUCCESS" in output


_CAPACITY = 'kube_node_status_capacity{{node="{node}",resource="nvidia_com_gpu",unit="integer"}}'
_NODE_SERIES = [
    {"series": _CAPACITY.format(node="h200x-1"), "values": "8x5 7x25"},
    {"series": _CAPACITY.format(node="h200x-2"), "values": "8x5 6x25"},  # cordoned for maintenance
    {"series": 'kube_node_spec_unschedulable{node="h200x-1"}', "values": "0x30"},
    {"series": 'kube_node_spec_unschedulable{node="h200x-2"}', "values": "0x5 1x25"},
    *(
        {"series": f'kube_node_labels{{node="{node}",label_gpucell_io_pool="h200"}}', "values": "1x30"}
        for node in ("h200x-1", "h200x-2", "h200x-3")
    ),
    {"series": 'kube_node_spec_unschedulable{node="h200x-3"}', "values": "0x30"},  # its device plugin is gone
]
"""kube-state-metrics' node series of the ``GpuCountDropped`` test (without their job)."""


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
    dcgm = f'DCGM_FI_DEV_XID_ERRORS{{{DCGM_JOB},node="h200x-1",gpu="3",UUID="GPU-abc",modelName="NVIDIA H200"}}'
    series = [{"series": dcgm, "values": "0x5 79x25"}, *({**s, "series": _ksm(s["series"])} for s in _NODE_SERIES)]
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


def _forged(series: str, value: str = "1x60") -> dict[str, str]:
    """``series`` as a tenant pod scraped by the ``kserve-predictors`` PodMonitor could make it at worst: every label
    as the pod wrote it (``namespace``, ``node``, ``tenant``, ...) but ``job``, which the target sets under
    ``honorLabels: false``."""
    return {"series": series.replace("{", f"{{{PREDICTOR_JOB},", 1), "values": value}


FORGED = [
    # billed: 1000 H200s for globex, directly and through the intermediate records
    _forged(
        f'{ALLOCATED}{{tenant="globex",resource="nvidia.com/gpu",gpu_model="H200-SXM-141GB",kind="container"}}',
        "1000x30",
    ),
    _forged(
        'gpucell:pod_gpu_requests:sum{namespace="tenant-globex",pod="x",node="h200-1",resource="nvidia.com/gpu"}',
        "1000x30",
    ),
    _forged(
        'kube_pod_container_resource_requests{namespace="tenant-globex",pod="x",node="h200-1",resource="nvidia_com_gpu"}',
        "1000x30",
    ),
    _forged('kube_pod_status_phase{namespace="tenant-globex",pod="x",phase="Running"}'),
    # metering stops for everyone (a duplicate namespace -> tenant match), or globex's GPUs billed to acme
    _forged('kube_namespace_labels{namespace="tenant-globex",label_gpucell_io_tenant="acme"}'),
    _forged('gpucell:namespace_tenant:info{namespace="tenant-globex",tenant="acme"}'),
    # an H200 node taken for an L4 one; globex's endpoint pod taken for a VM
    _forged('kube_node_labels{node="h200-1",label_gpucell_io_pool="l4"}'),
    _forged('gpucell:node_gpu_model:info{node="h200-1",gpu_model="L4"}'),
    _forged('kube_pod_labels{namespace="tenant-globex",pod="llama-70b-predictor-a",label_kubevirt_io="virt-launcher"}'),
    # alerts telling operators to drain nodes
    _forged('DCGM_FI_DEV_XID_ERRORS{node="h200x-1",gpu="0",UUID="GPU-forged"}', "79x60"),
    _forged('DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{node="h200x-1",gpu="0",UUID="GPU-forged"}', "0+1x60"),
    _forged('DCGM_FI_DEV_POWER_VIOLATION{node="h200x-1",gpu="0",UUID="GPU-forged"}', "0+60000000000x60"),
    _forged('kube_node_labels{node="h200x-9",label_gpucell_io_pool="h200"}'),
    _forged('kube_node_status_capacity{node="h200x-1",resource="nvidia_com_gpu",unit="integer"}', "0x60"),
]
"""What a tenant pod labelled ``component: predictor`` could export if the PodMonitor kept every series: each
would change the metering or fire an alert if the rules read it."""


@needs_promtool
def test_forged_series_from_a_predictor_change_no_metering_and_fire_no_alert(tmp_path: Path) -> None:
    quiet = [
        "GpuXidCritical",
        "GpuXid",
        "GpuFellOffTheBus",
        "GpuDoubleBitEcc",
        "GpuPowerThrottling",
        "GpuCountDropped",
    ]
    output = _promtool(
        tmp_path,
        [metering_group((o.resource for o in OFFERS), POOL_MODELS, "L4"), health_group(OFFERS)],
        [
            {
                "interval": "1m",
                "input_series": [*METERING_SERIES, *FORGED],
                # what `gpucell usage` and the dashboards read: the recorded series (no job), unchanged
                "promql_expr_test": [
                    {"expr": f"{ALLOCATED}{{{RECORDED}}}", "eval_time": "10m", "exp_samples": EXPECTED}
                ],
                "alert_rule_test": [{"eval_time": "45m", "alertname": name, "exp_alerts": []} for name in quiet],
            }
        ],
    )
    assert "SUCCESS" in output


def test_power_throttling_threshold_is_half_of_each_second_in_nanoseconds() -> None:
    # DCGM_FI_DEV_POWER_VIOLATION counts nanoseconds (NVIDIA/dcgm-exporter#589; the exporter's default-counters.csv
    # at 4.6.0-4.8.3 says "(in ns)"), so half the time throttled is 0.5 s = 5e8 ns per second of rate()
    upstream = (UPSTREAM / "dcgm-exporter" / "default-counters.csv").read_text()
    assert (
        "DCGM_FI_DEV_POWER_VIOLATION,       counter, Throttling duration due to power constraints (in ns)." in upstream
    )
    assert POWER_THROTTLED_NS_PER_S == 0.5 * 1_000_000_000
    rule = next(r for r in health_group(OFFERS)["rules"] if r["alert"] == "GpuPowerThrottling")
    assert rule["expr"] == 'rate(DCGM_FI_DEV_POWER_VIOLATION{job="nvidia-dcgm-exporter"}[10m]) > 500000000'


@needs_promtool
def test_power_throttling_fires_over_half_the_time_only(tmp_path: Path) -> None:
    gpu = 'DCGM_FI_DEV_POWER_VIOLATION{{{job},node="h100-1",gpu="{gpu}",UUID="GPU-{gpu}"}}'
    # per minute: 24e9 ns throttled (40 % of the time) on GPU 0, 36e9 ns (60 %) on GPU 1
    series = [
        {"series": gpu.format(job=DCGM_JOB, gpu=0), "values": "0+24000000000x60"},
        {"series": gpu.format(job=DCGM_JOB, gpu=1), "values": "0+36000000000x60"},
    ]
    labels = {"severity": "info", "job": "nvidia-dcgm-exporter", "node": "h100-1", "gpu": "1", "UUID": "GPU-1"}
    annotations = {
        "summary": "GPU 1 of node h100-1 spends over half its time throttled by its power limit",
        "remediation": _remediation("GpuPowerThrottling"),
    }
    output = _promtool(
        tmp_path,
        [health_group(OFFERS)],
        [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    {"eval_time": "20m", "alertname": "GpuPowerThrottling", "exp_alerts": []},  # pending 30m
                    {
                        "eval_time": "45m",
                        "alertname": "GpuPowerThrottling",
                        "exp_alerts": [{"exp_labels": labels, "exp_annotations": annotations}],
                    },
                ],
            }
        ],
    )
    assert "SUCCESS" in output
