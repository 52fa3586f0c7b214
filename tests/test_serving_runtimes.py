"""Endpoints as users write them: a tenant's own ServingRuntime, environment variables (plain, from the tenant's
secrets, from its own Secrets), the inference protocol, admission against the tenant's runtimes, and day 2."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from gpucell.engine.mock_engine import PlanResult, run_program
from gpucell.errors import ConfigError
from gpucell.spec import CellSpec
from gpucell.spec.serving import ProtocolVersion
from gpucell.stacks.plan_diff import diff_plans
from gpucell.stacks.program import build_cells
from gpucell.testing import provider_outputs
from gpucell.workloads.serving_runtime import serving_runtime_manifest
from tests.conftest import minimal_cell_config, plan_document, region_refusals, violations

API_KEY = "VLLM-API-KEY-SENTINEL-3f1a"
ISVC = "kubernetes:serving.kserve.io/v1beta1:InferenceService"
RUNTIME = {
    "image": "vllm/vllm-openai:v0.11.0",
    "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
    "args": ["--port=8000", "--served-model-name={{.Name}}", "--model=/mnt/models"],
    "ports": [{"containerPort": 8000, "name": "http"}],
    "env": [
        {"name": "HF_HOME", "value": "/tmp"},
        {"name": "HF_TOKEN", "secretKeyRef": {"name": "acme-hub", "key": "token"}},
    ],
    "supportedModelFormats": [{"name": "vLLM", "version": "1"}],
    "gpuImage": True,
    "runAsUser": 1000,
}
ENDPOINT = {
    "runtime": "vllm-pinned",
    "storageUri": "hf://Qwen/Qwen2.5-1.5B-Instruct",
    "gpu": {"count": 1},
    "memoryGib": 16,
    "env": [
        {"name": "VLLM_API_KEY", "secretConfigKey": "vllmKeyAcme"},
        {"name": "VLLM_LOGGING_LEVEL", "value": "INFO"},
        {"name": "EXTRA_TOKEN", "secretKeyRef": {"name": "acme-extra", "key": "token"}},
    ],
}


def lab_region() -> dict[str, Any]:
    region = minimal_cell_config()
    region["tenants"] = {
        "acme": {
            "egress": "internet",
            "quota": {"cpuMillicores": 64000, "memoryGib": 512, "storageGib": 1000, "gpus": {"nvidia.com/gpu": 2}},
            "servingRuntimes": {"vllm-pinned": copy.deepcopy(RUNTIME)},
            "modelEndpoints": {"qwen": copy.deepcopy(ENDPOINT)},
        }
    }
    return region


def deploy(region: dict[str, Any] | None = None, key: str = API_KEY) -> PlanResult:
    config = {
        "gpucell:regions": {"lab": region if region is not None else lab_region()},
        "gpucell:sshPrivateKey": "key",
        "gpucell:vllmKeyAcme": key,
    }
    secrets = ["gpucell:sshPrivateKey", "gpucell:vllmKeyAcme"]
    return run_program(build_cells, config=config, secret_keys=secrets, computed=provider_outputs())


@pytest.fixture(scope="module")
def plan() -> PlanResult:
    return deploy()


def test_the_tenants_runtime_is_a_namespaced_serving_runtime(plan: PlanResult) -> None:
    runtime = plan.named("lab-acme-vllm-pinned-runtime")
    assert runtime.type == "kubernetes:serving.kserve.io/v1alpha1:ServingRuntime"
    assert runtime.inputs["metadata"]["namespace"] == "tenant-acme"
    assert runtime.inputs["spec"] == {
        "supportedModelFormats": [{"name": "vLLM", "autoSelect": False, "version": "1"}],
        "containers": [
            {
                "name": "kserve-container",
                "image": "vllm/vllm-openai:v0.11.0",
                "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
                "args": ["--port=8000", "--served-model-name={{.Name}}", "--model=/mnt/models"],
                "ports": [{"containerPort": 8000, "protocol": "TCP", "name": "http"}],
                "env": [
                    {"name": "HF_HOME", "value": "/tmp"},
                    {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "acme-hub", "key": "token"}}},
                ],
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "privileged": False,
                    "capabilities": {"drop": ["ALL"]},
                    "runAsNonRoot": True,
                    "seccompProfile": {"type": "RuntimeDefault"},
                    "runAsUser": 1000,
                },
            }
        ],
    }
    assert violations(runtime.masked_inputs()) == []
    assert plan.named("lab-kserve-resources").urn in runtime.dependencies
    assert plan.named("lab-acme-namespace").urn in runtime.dependencies


def test_the_endpoint_names_its_runtime_and_carries_its_env(plan: PlanResult) -> None:
    (isvc,) = [r for r in plan.children(plan.named("lab-acme-qwen")) if r.type == ISVC]
    model = isvc.inputs["spec"]["predictor"]["model"]
    assert (model["runtime"], model["modelFormat"]) == ("vllm-pinned", {"name": "vLLM"})
    assert "runtimeVersion" not in model
    assert model["env"] == [
        {"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": {"name": "qwen-env", "key": "VLLM_API_KEY"}}},
        {"name": "VLLM_LOGGING_LEVEL", "value": "INFO"},
        {"name": "EXTRA_TOKEN", "valueFrom": {"secretKeyRef": {"name": "acme-extra", "key": "token"}}},
    ]
    assert isvc.inputs["spec"]["predictor"]["annotations"] == {"gpucell.io/env-secret-uid": ""}
    assert plan.named("lab-acme-vllm-pinned-runtime").urn in isvc.dependencies
    assert plan.named("lab-acme-qwen-env").urn in isvc.dependencies
    assert violations(isvc.masked_inputs()) == []


def test_env_from_the_tenants_secret_key_lives_only_in_a_secret(plan: PlanResult) -> None:
    secret = plan.named("lab-acme-qwen-env")
    assert secret.inputs["metadata"]["name"] == "qwen-env"
    assert secret.inputs["stringData"] == "[secret]"
    assert secret.raw_inputs["stringData"] == {"VLLM_API_KEY": API_KEY}
    for registration in plan.resources:
        assert API_KEY not in json.dumps(registration.inputs), registration.name


def test_the_gateway_reaches_the_runtimes_own_port() -> None:
    region = lab_region()
    region["loadBalancer"] = {
        "announce": "l2",
        "l2": {"interfaces": ["^eth0$"]},
        "pools": {"p": {"blocks": ["10.20.0.200/30"]}},
    }
    region["gateway"] = {"domain": "models.lab.example", "pool": "p", "issuer": {"ca": {"secretName": "lab-ca"}}}
    region["tenants"]["acme"]["modelEndpoints"]["qwen"]["expose"] = {}
    policy = deploy(region).named("lab-acme-qwen-gateway-policy")
    assert policy.inputs["spec"]["ingress"][0]["toPorts"] == [{"ports": [{"port": "8000", "protocol": "TCP"}]}]


def test_manifest_of_a_runtime_speaking_named_protocols() -> None:
    spec = CellSpec.model_validate(lab_region()).tenants["acme"].serving_runtimes["vllm-pinned"]
    spec = spec.model_copy(
        update={"protocol_versions": [ProtocolVersion.V2, ProtocolVersion.GRPC_V2], "ports": [], "env": []}
    )
    manifest = serving_runtime_manifest("acme", "vllm-pinned", spec)
    assert manifest["spec"]["protocolVersions"] == ["v2", "grpc-v2"]
    assert "ports" not in manifest["spec"]["containers"][0]
    assert violations(manifest) == []


# -- admission: the tenant's runtimes weigh as KServe weighs them ------------------------------------------------
R = "regions.fra1"
"""The key path of the region the refusals are for (docs/workloads.md shows them for prod's fra1)."""


def endpoint(region: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = region["tenants"]["acme"]["modelEndpoints"]["qwen"]
    return result


def runtime(region: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = region["tenants"]["acme"]["servingRuntimes"]["vllm-pinned"]
    return result


def _tie(region: dict[str, Any]) -> None:
    runtime(region)["supportedModelFormats"] = [{"name": "vLLM", "autoSelect": True}]
    region["tenants"]["acme"]["servingRuntimes"]["other"] = copy.deepcopy(runtime(region))
    del endpoint(region)["runtime"]
    endpoint(region)["modelFormat"] = "vLLM"


def _webhook(region: dict[str, Any]) -> None:
    formats = [{"name": "vLLM", "autoSelect": True, "priority": 2}]
    runtime(region).update(supportedModelFormats=formats, protocolVersions=["v2"])
    region["tenants"]["acme"]["servingRuntimes"]["other"] = copy.deepcopy(runtime(region))


@pytest.mark.parametrize(
    ("change", "line"),
    [
        (
            lambda r: endpoint(r).update(runtime="nope"),
            f"{R}.tenants.acme.modelEndpoints.qwen.modelFormat: is required with runtime 'nope', which is neither a "
            "built-in KServe runtime nor one of the tenant's servingRuntimes (vllm-pinned)",
        ),
        (
            lambda r: endpoint(r).update(modelFormat="onnx"),
            f"{R}.tenants.acme.modelEndpoints.qwen.modelFormat: 'onnx' is not a model format of vllm-pinned; it "
            "serves vLLM",
        ),
        (
            lambda r: (runtime(r).update(protocolVersions=["v2"]), endpoint(r).update(protocolVersion="grpc-v2")),
            f"{R}.tenants.acme.modelEndpoints.qwen.protocolVersion: 'grpc-v2' is not a protocol of vllm-pinned, which "
            "speaks v2; KServe refuses the endpoint (NoSupportingRuntime)",
        ),
        (
            lambda r: endpoint(r).update(protocolVersion="v3"),
            f"{R}.tenants.acme.modelEndpoints.qwen.protocolVersion: 'v3' is not one of v1, v2, grpc-v1, grpc-v2",
        ),
        (
            lambda r: runtime(r).update(gpuImage=False),
            f"{R}.tenants.acme.modelEndpoints.qwen.gpu: vllm-pinned runs vllm/vllm-openai:v0.11.0, which the "
            "tenant did "
            "not declare a GPU build (servingRuntimes.vllm-pinned.gpuImage); set gpuImage: true if it runs on GPUs, "
            "or drop gpu",
        ),
        (
            lambda r: runtime(r).update(image="vllm/vllm-openai:latest"),
            f"{R}.tenants.acme.servingRuntimes.vllm-pinned.image: 'vllm/vllm-openai:latest' has no pinned tag "
            "(latest or "
            "none); give a release tag or a digest",
        ),
        (
            lambda r: r["tenants"]["acme"]["servingRuntimes"].update({"kserve-vllmserver": RUNTIME}),
            f"{R}.tenants.acme.servingRuntimes.kserve-vllmserver: 'kserve-vllmserver' is a "
            "ClusterServingRuntime KServe "
            "installs; a tenant runtime of that name would shadow it in the tenant's namespace: choose another name",
        ),
        (
            lambda r: runtime(r).update(env=[{"name": "K", "secretConfigKey": "vllmKeyAcme"}]),
            f"{R}.tenants.acme.servingRuntimes.vllm-pinned.env[0].secretConfigKey: only applies to an endpoint's env "
            "(gpucell keeps the value in the endpoint's Secret); use secretKeyRef to a Secret of the tenant",
        ),
        (
            lambda r: endpoint(r)["env"].append({"name": "VLLM_LOGGING_LEVEL", "value": "DEBUG"}),
            f"{R}.tenants.acme.modelEndpoints.qwen.env[3].name: 'VLLM_LOGGING_LEVEL' is already env[1]",
        ),
        (
            lambda r: endpoint(r)["env"].append({"name": "B", "value": "2", "secretConfigKey": "x"}),
            f"{R}.tenants.acme.modelEndpoints.qwen.env[3]: give exactly one of value, secretConfigKey, "
            "secretKeyRef (got "
            "value, secretConfigKey)",
        ),
        (
            lambda r: endpoint(r)["env"].append({"name": "2FAST", "value": "x"}),
            f"{R}.tenants.acme.modelEndpoints.qwen.env[3].name: '2FAST' is not an environment variable name (letters, "
            "digits, '_', '-', '.', not starting with a digit)",
        ),
        (
            lambda r: endpoint(r).update(
                storageUri="hf://org/m", credentialsConfigKey="hfAcme", env=[{"name": "HF_TOKEN", "value": "x"}]
            ),
            f"{R}.tenants.acme.modelEndpoints.qwen.env[0].name: 'HF_TOKEN' is set from credentialsConfigKey "
            "'hfAcme' (the "
            "Hugging Face token of hf:// storage); drop one of the two",
        ),
        (
            _tie,
            f"{R}.tenants.acme.modelEndpoints.qwen.runtime: is required: the tenant's runtimes other and "
            "vllm-pinned both "
            "auto-select 'vLLM' at the same priority, and KServe would pick by creation time; name one",
        ),
        (
            _webhook,
            f"{R}.tenants.acme.servingRuntimes.other.supportedModelFormats: 'vLLM' at priority 2 is already "
            "auto-selected "
            "by runtime vllm-pinned at that priority for the same protocol; KServe's webhook denies the second "
            "runtime: give them different priorities",
        ),
        (
            lambda r: runtime(r).update(
                supportedModelFormats=[
                    {"name": "vLLM", "autoSelect": True, "priority": 1},
                    {"name": "vLLM", "version": "2", "autoSelect": True, "priority": 2},
                ]
            ),
            f"{R}.tenants.acme.servingRuntimes.vllm-pinned.supportedModelFormats[1].priority: 2 differs from "
            "the priority "
            "1 this runtime already gives 'vLLM'; KServe's webhook refuses the runtime",
        ),
        (
            lambda r: (
                endpoint(r).update(scaleMetric="vllm-queue", scaleTarget=5),
                runtime(r).update(command=["python3", "-m", "sglang.launch_server"]),
            ),
            f"{R}.tenants.acme.modelEndpoints.qwen.scaleMetric: vllm-queue is a vLLM metric, which vllm-pinned "
            "does not export; use cpu or memory, or a GPU endpoint on kserve-huggingfaceserver or kserve-vllmserver "
            "(modelFormat huggingface), or a servingRuntime whose container runs vLLM (command vllm serve or python3 "
            "-m vllm.entrypoints.openai.api_server, or image vllm/vllm-openai)",
        ),
    ],
)
def test_bad_endpoint_config_is_one_line(change: Any, line: str) -> None:
    region = lab_region()
    change(region)
    assert region_refusals(region) == [line]


def test_a_tenant_runtime_that_auto_selects_wins_over_the_clusters() -> None:
    region = lab_region()
    runtime(region)["supportedModelFormats"] = [{"name": "huggingface", "autoSelect": True}]
    del endpoint(region)["runtime"]
    endpoint(region)["modelFormat"] = "huggingface"
    assert region_refusals(region) == []  # KServe picks the namespace's runtime before kserve-huggingfaceserver


def test_a_runtime_of_another_tenant_is_not_this_ones() -> None:
    region = lab_region()
    region["tenants"]["globex"] = {
        "egress": "internet",
        "quota": {"cpuMillicores": 8000, "memoryGib": 64, "storageGib": 10},
        "modelEndpoints": {"e": {"runtime": "vllm-pinned", "modelFormat": "vLLM", "storageUri": "pvc://m/x"}},
    }
    assert region_refusals(region) == [
        "regions.fra1.tenants.globex.modelEndpoints.e.runtime: 'vllm-pinned' is not a ClusterServingRuntime KServe "
        "v0.20.0 installs nor a servingRuntime of the tenant; installed: kserve-autogluonserver, "
        "kserve-huggingfaceserver, kserve-huggingfaceserver-multinode, kserve-lgbserver, kserve-mlserver, "
        "kserve-paddleserver, kserve-pmmlserver, kserve-predictiveserver, kserve-sklearnserver, "
        "kserve-tensorflow-serving, kserve-torchserve, kserve-tritonserver, kserve-vllmserver, kserve-xgbserver"
    ]


def test_an_env_secret_belongs_to_one_tenant() -> None:
    region = lab_region()
    region["tenants"]["globex"] = {
        "egress": "internet",
        "quota": {"cpuMillicores": 8000, "memoryGib": 64, "storageGib": 10},
        "modelEndpoints": {
            "e": {
                "modelFormat": "sklearn",
                "storageUri": "pvc://m/x",
                "env": [{"name": "KEY", "secretConfigKey": "vllmKeyAcme"}],
            }
        },
    }
    assert region_refusals(region) == [
        "regions.fra1.tenants.globex.modelEndpoints.e.env[0].secretConfigKey: 'vllmKeyAcme' is already the "
        "credentials key of tenant acme (regions.fra1.tenants.acme); each tenant needs its own, its Secret is "
        "readable in the tenant's namespace"
    ]
    endpoint(region)["env"][0]["secretConfigKey"] = "sshPrivateKey"
    del region["tenants"]["globex"]
    assert region_refusals(region) == [
        "regions.fra1.tenants.acme.modelEndpoints.qwen.env[0].secretConfigKey: 'sshPrivateKey' is the SSH private "
        "key of region fra1; name a secret that holds only the value of VLLM_API_KEY"
    ]


def test_an_env_secret_missing_from_the_stack_is_one_line() -> None:
    config = {"gpucell:regions": {"lab": lab_region()}, "gpucell:sshPrivateKey": "key"}
    with pytest.raises(ConfigError) as exc:
        run_program(build_cells, config=config, secret_keys=["gpucell:sshPrivateKey"], computed=provider_outputs())
    assert exc.value.lines == [
        "vllmKeyAcme: secret is missing (regions.lab.tenants.acme.modelEndpoints.qwen.env[0].secretConfigKey names "
        "it); set it with `pulumi config set --secret vllmKeyAcme -- <value of VLLM_API_KEY>`"
    ]


# -- day 2 -------------------------------------------------------------------------------------------------------
def test_an_env_change_rolls_the_endpoint_and_says_so(plan: PlanResult) -> None:
    region = lab_region()
    endpoint(region)["env"][1]["value"] = "DEBUG"
    (found,) = diff_plans(plan_document(plan), plan_document(deploy(region))).regions["lab"]
    assert (found.action, found.label) == ("update", "InferenceService tenant-acme/qwen")
    assert [c.path for c in found.changes] == ["spec.predictor.model.env[name=VLLM_LOGGING_LEVEL].value"]
    assert found.notes == [
        "KServe rolls the predictor's Deployment: each replica is replaced in turn (GPU endpoints take no surge "
        "replica, so one fewer serves meanwhile; with one replica the endpoint is down until the new one is ready)"
    ]


def test_a_new_secret_value_replaces_the_env_secret_and_a_scaling_change_rolls_nothing(plan: PlanResult) -> None:
    found = diff_plans(plan_document(plan), plan_document(deploy(key="ROTATED-SENTINEL"))).regions["lab"]
    assert [(d.action, d.label) for d in found] == [("replace", "Secret tenant-acme/qwen-env")]
    region = lab_region()
    endpoint(region)["maxReplicas"] = 2
    (scaled,) = diff_plans(plan_document(plan), plan_document(deploy(region))).regions["lab"]
    assert ([c.path for c in scaled.changes], scaled.notes) == (["spec.predictor.maxReplicas"], [])
