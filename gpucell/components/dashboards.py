"""The cell's Grafana dashboards, as code: one ConfigMap each, found by the Grafana sidecar of
kube-prometheus-stack 88.5.3 (``grafana.sidecar.dashboards``: label ``grafana_dashboard: "1"``, every namespace).

Each dashboard is a few timeseries panels over the series gpucell's scrape targets and rules produce; Grafana's
dashboard JSON model (schemaVersion 39) is written out here, with the chart's default ``Prometheus`` datasource.
Panels select the job of what they read (kube-state-metrics', the DCGM exporter's; ``job=""`` for gpucell's recorded
series), as the rules do, so a series of the same name a tenant pod exports shows on none of them.
"""

from __future__ import annotations

import json
from typing import Any

from gpucell.components.gpu_alerts import DCGM_JOB
from gpucell.components.metering import ALLOCATED, KSM_JOB, RECORDED

__all__ = ["DASHBOARDS", "SIDECAR_LABEL", "dashboard", "dashboard_configmap"]

SIDECAR_LABEL = {"grafana_dashboard": "1"}
"""The label the chart's Grafana sidecar watches for (``grafana.sidecar.dashboards.label``/``labelValue``)."""

_GPU_NODE = (
    f'label_replace(kube_node_labels{{{KSM_JOB}}}, "mode", "$1", "label_nvidia_com_gpu_workload_config", "(.*)")'
)
_HELD = f"{ALLOCATED}{{{RECORDED}"

DASHBOARDS: dict[str, tuple[str, list[tuple[str, str, str]]]] = {
    "gpucell-gpus": (
        "GPUs per node and mode",
        [
            (
                "GPU units advertised per node",
                f'sum by (node, resource) (kube_node_status_capacity{{{KSM_JOB},resource=~"nvidia_com_.+"}})',
                "{{node}} {{resource}}",
            ),
            (
                "GPU units allocatable per node",
                f'sum by (node, resource) (kube_node_status_allocatable{{{KSM_JOB},resource=~"nvidia_com_.+"}})',
                "{{node}} {{resource}}",
            ),
            ("Nodes per GPU workload mode", f"count by (mode) ({_GPU_NODE})", "{{mode}}"),
            ("GPU utilisation", f"avg by (node, gpu) (DCGM_FI_DEV_GPU_UTIL{{{DCGM_JOB}}})", "{{node}} GPU {{gpu}}"),
            ("GPU temperature (C)", f"max by (node, gpu) (DCGM_FI_DEV_GPU_TEMP{{{DCGM_JOB}}})", "{{node}} GPU {{gpu}}"),
            ("GPU power (W)", f"max by (node, gpu) (DCGM_FI_DEV_POWER_USAGE{{{DCGM_JOB}}})", "{{node}} GPU {{gpu}}"),
            ("Last XID per GPU", f"max by (node, gpu) (DCGM_FI_DEV_XID_ERRORS{{{DCGM_JOB}}})", "{{node}} GPU {{gpu}}"),
        ],
    ),
    "gpucell-tenants": (
        "GPUs held per tenant (MIG, vGPU, passthrough, DRA)",
        [
            (
                "GPU units held per tenant, resource and GPU model",
                f"sum by (tenant, resource, gpu_model, kind) ({_HELD}}})",
                "{{tenant}} {{resource}} {{gpu_model}} {{kind}}",
            ),
            (
                "MIG slices held",
                f'sum by (tenant, resource, gpu_model) ({_HELD},resource=~"nvidia.com/mig-.+"}})',
                "{{tenant}} {{resource}}",
            ),
            (
                "vGPUs held",
                f'sum by (tenant, resource) ({_HELD},resource=~"nvidia.com/NVIDIA_.+"}})',
                "{{tenant}} {{resource}}",
            ),
            (
                "GPU-hours in the last 24 hours per GPU model",
                f"sum by (tenant, gpu_model) (sum_over_time({_HELD}}}[24h:1m])) / 60",
                "{{tenant}} {{gpu_model}}",
            ),
        ],
    ),
    "gpucell-vms": (
        "GPU virtual machines",
        [
            ("Running VMIs per namespace", 'sum by (namespace) (kubevirt_vmi_info{phase="running"})', "{{namespace}}"),
            (
                "GPUs held by VMs",
                f'sum by (tenant, resource, gpu_model) ({_HELD},kind="vm"}})',
                "{{tenant}} {{resource}}",
            ),
            (
                "VM vCPU use (cores)",
                "sum by (namespace, name) (rate(kubevirt_vmi_vcpu_seconds_total[5m]))",
                "{{namespace}}/{{name}}",
            ),
            (
                "VM memory in use (bytes)",
                "sum by (namespace, name) (kubevirt_vmi_memory_used_bytes)",
                "{{namespace}}/{{name}}",
            ),
        ],
    ),
    "gpucell-endpoints": (
        "Model endpoints: latency and queue (vLLM)",
        [
            (
                "Requests waiting",
                "sum by (namespace, model_name) (vllm:num_requests_waiting)",
                "{{namespace}} {{model_name}}",
            ),
            (
                "Requests running",
                "sum by (namespace, model_name) (vllm:num_requests_running)",
                "{{namespace}} {{model_name}}",
            ),
            (
                "Time to first token p90 (s)",
                "histogram_quantile(0.9, sum by (namespace, model_name, le) "
                "(rate(vllm:time_to_first_token_seconds_bucket[2m])))",
                "{{namespace}} {{model_name}}",
            ),
            (
                "End-to-end latency p90 (s)",
                "histogram_quantile(0.9, sum by (namespace, model_name, le) "
                "(rate(vllm:e2e_request_latency_seconds_bucket[2m])))",
                "{{namespace}} {{model_name}}",
            ),
            (
                "Replicas per endpoint",
                "sum by (namespace, deployment) (kube_deployment_status_replicas"
                f'{{{KSM_JOB},deployment=~".+-predictor"}})',
                "{{namespace}} {{deployment}}",
            ),
        ],
    ),
}
"""Dashboard uid -> (title, panels as (title, PromQL, legend))."""


def dashboard(uid: str) -> dict[str, Any]:
    """The Grafana dashboard JSON of :data:`DASHBOARDS` ``uid``: timeseries panels two to a row, 12x8 each."""
    title, panels = DASHBOARDS[uid]
    return {
        "uid": uid,
        "title": title,
        "tags": ["gpucell"],
        "schemaVersion": 39,
        "editable": False,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "1m",
        "panels": [
            {
                "id": index + 1,
                "type": "timeseries",
                "title": panel,
                "datasource": {"type": "prometheus", "uid": "prometheus"},
                "gridPos": {"h": 8, "w": 12, "x": 12 * (index % 2), "y": 8 * (index // 2)},
                "targets": [{"refId": "A", "expr": expr, "legendFormat": legend}],
            }
            for index, (panel, expr, legend) in enumerate(panels)
        ],
    }


def dashboard_configmap(uid: str, namespace: str) -> dict[str, Any]:
    """The ConfigMap ``<uid>-dashboard`` in ``namespace`` holding ``<uid>.json``, labelled for the sidecar."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"{uid}-dashboard",
            "namespace": namespace,
            "labels": {**SIDECAR_LABEL, "app.kubernetes.io/managed-by": "gpucell"},
        },
        "data": {f"{uid}.json": json.dumps(dashboard(uid), indent=1, sort_keys=True)},
    }
