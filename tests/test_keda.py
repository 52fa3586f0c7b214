"""Endpoints that scale on LLM load: KEDA's release, KServe's KEDA integration in the InferenceService, bad input."""

from __future__ import annotations

from typing import Any

import pytest

from gpucell.engine.mock_engine import PlanResult
from gpucell.errors import ConfigError
from tests.conftest import cell, minimal_cell_config, shared_plan, violations

ISVC = "kubernetes:serving.kserve.io/v1beta1:InferenceService"


@pytest.fixture(scope="module")
def prod() -> PlanResult:
    return shared_plan("prod-fra1").result


def test_prod_installs_keda_and_scales_llama_on_vllm_queue(prod: PlanResult) -> None:
    keda = prod.named("fra1-keda-keda")
    assert (keda.inputs["chart"], keda.inputs["version"], keda.inputs["namespace"]) == ("keda", "2.20.2", "keda")
    isvc = prod.named("fra1-acme-llama-8b-isvc")
    assert isvc.inputs["metadata"]["annotations"]["serving.kserve.io/autoscalerClass"] == "keda"
    predictor = isvc.inputs["spec"]["predictor"]
    assert "scaleMetric" not in predictor
    assert "scaleTarget" not in predictor
    assert predictor["autoScaling"] == {
        "metrics": [
            {
                "type": "External",
                "external": {
                    "metric": {
                        "backend": "prometheus",
                        "serverAddress": "http://prometheus-operated.monitoring.svc:9090",
                        "query": 'sum(vllm:num_requests_waiting{namespace="tenant-acme",pod=~"llama-8b-predictor-.*"})',
                    },
                    "target": {"type": "Value", "value": "5"},
                },
            }
        ]
    }
    assert keda.urn in isvc.dependencies
    assert violations(isvc.masked_inputs()) == []
    # CPU scaling stays for runtimes without such a metric
    fraud = prod.named("fra1-globex-fraud-detector-isvc")
    assert fraud.inputs["metadata"]["annotations"]["serving.kserve.io/autoscalerClass"] == "hpa"
    assert (fraud.inputs["spec"]["predictor"]["scaleMetric"], fraud.inputs["spec"]["predictor"]["scaleTarget"]) == (
        "cpu",
        60,
    )


def test_no_inference_service_has_an_external_target_without_value(prod: PlanResult) -> None:
    """KServe v0.20.0's webhook refuses a KEDA ``External`` metric whose target has no ``value`` ("the target
    threshold value should not be empty", pkg/apis/serving/v1beta1/inference_service_validation.go lines 608-609) and
    its KEDA reconciler reads the trigger's ``threshold`` from ``value`` alone (pkg/controller/v1beta1/
    inferenceservice/reconcilers/keda/keda_reconciler.go line 125); KEDA v2.20.2 applies ``AverageValue`` to a trigger
    without ``metricType`` (pkg/scalers/scaler.go lines 99-101), so ``value`` stays per replica."""
    targets = [
        metric["external"]["target"]
        for plan in (prod, shared_plan("prod-iad1").result)  # llama-8b scales on vLLM's queue in both regions
        for isvc in plan.of_type(ISVC)
        for metric in isvc.inputs["spec"]["predictor"].get("autoScaling", {}).get("metrics", [])
        if metric["type"] == "External"
    ]
    assert len(targets) == 2
    assert all(target["type"] == "Value" and "averageValue" not in target for target in targets)
    assert sorted(target["value"] for target in targets) == ["5", "5"]


def test_prometheus_may_scrape_the_predictors(prod: PlanResult) -> None:
    policy = prod.named("fra1-acme-llama-8b-allow-metrics")
    assert policy.inputs["spec"]["endpointSelector"] == {
        "matchLabels": {"serving.kserve.io/inferenceservice": "llama-8b"}
    }
    assert policy.inputs["spec"]["ingress"] == [
        {
            "fromEndpoints": [
                {
                    "matchLabels": {
                        "k8s:io.kubernetes.pod.namespace": "monitoring",
                        "app.kubernetes.io/name": "prometheus",
                    }
                }
            ],
            "toPorts": [{"ports": [{"port": "8080", "protocol": "TCP"}]}],
        }
    ]
    assert violations(policy.masked_inputs()) == []


def _endpoint(**fields: Any) -> dict[str, Any]:
    config = minimal_cell_config()
    config["metrics"] = {"enabled": True}
    config["tenants"] = {
        "acme": {
            "egress": "internet",
            "quota": {"cpuMillicores": 64000, "memoryGib": 512, "storageGib": 100, "gpus": {"nvidia.com/gpu": 2}},
            "modelEndpoints": {
                "chat": {"modelFormat": "huggingface", "storageUri": "hf://org/model", "gpu": {"count": 1}, **fields}
            },
        }
    }
    return config


def test_scale_to_zero_and_ttft_render() -> None:
    from gpucell.workloads.model_endpoint import autoscaling

    spec = cell(_endpoint(minReplicas=0, maxReplicas=2, scaleMetric="vllm-ttft", scaleTarget=500))
    endpoint = spec.tenants["acme"].model_endpoints["chat"]
    external = autoscaling("acme", "chat", endpoint)["autoScaling"]["metrics"][0]["external"]
    assert external["target"] == {"type": "Value", "value": "0.5"}
    assert external["metric"]["query"] == (
        "histogram_quantile(0.9, sum by (le) (rate(vllm:time_to_first_token_"
        'seconds_bucket{namespace="tenant-acme",pod=~"chat-predictor-.*"}[2m])))'
    )


@pytest.mark.parametrize(
    ("fields", "metrics", "line"),
    [
        (
            {"minReplicas": 0},
            True,
            "regions.lab.tenants.acme.modelEndpoints.chat.minReplicas: 0 needs KEDA, which scales only on a vLLM "
            "metric; set scaleMetric to vllm-queue, vllm-running or vllm-ttft (not cpu), or use 1",
        ),
        (
            {"scaleMetric": "vllm-queue", "scaleTarget": 4, "gpu": None},
            True,
            "regions.lab.tenants.acme.modelEndpoints.chat.scaleMetric: vllm-queue is a vLLM metric, which "
            "modelFormat huggingface without gpu does not export; use cpu or memory, or a GPU endpoint on "
            "kserve-huggingfaceserver or kserve-vllmserver (modelFormat huggingface)",
        ),
        (
            {"scaleMetric": "vllm-queue", "scaleTarget": 4},
            False,
            "regions.lab.tenants.acme.modelEndpoints.chat.scaleMetric: vllm-queue is read from the cell's Prometheus, "
            "which is not installed; set metrics.enabled: true, or scale on cpu or memory",
        ),
        (
            {"scaleMetric": "cpu", "scaleTarget": 500},
            True,
            "regions.lab.tenants.acme.modelEndpoints.chat.scaleTarget: 500 is out of range for scaleMetric cpu: 1-100 "
            "(percent utilization)",
        ),
    ],
)
def test_bad_scaling_is_one_line(fields: dict[str, Any], metrics: bool, line: str) -> None:
    from gpucell.spec import StackSpec

    config = _endpoint(**{k: v for k, v in fields.items() if v is not None})
    if fields.get("gpu", 1) is None:
        del config["tenants"]["acme"]["modelEndpoints"]["chat"]["gpu"]
    if not metrics:
        del config["metrics"]
    with pytest.raises(ConfigError) as caught:
        StackSpec.model_validate({"regions": {"lab": config}})
    assert caught.value.lines == [line]
