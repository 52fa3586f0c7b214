"""ModelEndpoint: the rendered InferenceService (model, GPUs, MIG, replicas, autoscaling, security,
placement), credentials through a Secret and ServiceAccount only, dependency edges, and conformance."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest
from pulumi.runtime.mocks import MockResourceArgs

from gpucell.cell import RegionalCell, RegionalCellArgs
from gpucell.engine.mock_engine import SECRET, PlanResult, run_program
from gpucell.errors import ConfigError
from gpucell.spec import CellSpec
from gpucell.spec.tenancy import TenantSpec
from gpucell.spec.workloads import GpuRequest, ModelEndpointSpec, multi_gpu_shm_gib
from gpucell.stacks.conformance.run import check_region
from gpucell.stacks.conformance.schemas import SchemaStore
from gpucell.tenancy._common import container_placement
from gpucell.tenancy.tenant import Tenant, TenantArgs
from gpucell.workloads.model_endpoint import (
    BUILTIN_RUNTIME_FORMATS,
    ModelEndpoint,
    ModelEndpointArgs,
    credentials_secret_data,
    inference_service_manifest,
    model_format,
    service_account_manifest,
)
from tests.conftest import SCHEMA_CHECKERS, SECURITY, UPSTREAM, cell, minimal_cell_config, tainted_mig_pool
from tests.conftest import workload as component
from tests.conftest import workload_children as child

ISVC = "kubernetes:serving.kserve.io/v1beta1:InferenceService"
SECRET_TYPE = "kubernetes:core/v1:Secret"
ACCOUNT = "kubernetes:core/v1:ServiceAccount"
COMPONENT = "gpucell:index:ModelEndpoint"
KUBECONFIG = "apiVersion: v1\nclusters:\n- cluster:\n    server: https://127.0.0.1:6443\n  name: d\n"
HF_TOKEN = "hf_SENTINEL_8c2e"
S3_KEY_ID = "AKIASENTINEL"
S3_SECRET = "S3-SECRET-SENTINEL-91f0"
CREDENTIALS = {"hfTokenAcme": HF_TOKEN, "s3Acme": f"{S3_KEY_ID}:{S3_SECRET}"}
SENTINELS = (HF_TOKEN, S3_KEY_ID, S3_SECRET)
ENDPOINTS: dict[str, dict[str, Any]] = {
    "llama": {
        "modelFormat": "huggingface",
        "storageUri": "hf://meta-llama/Llama-3.1-8B-Instruct",
        "args": ["--max-model-len=8192"],
        "gpu": {"migProfile": "3g.71gb"},
        "cpuMillicores": 8000,
        "memoryGib": 64,
        "minReplicas": 1,
        "maxReplicas": 4,
        "credentialsConfigKey": "hfTokenAcme",
    },
    "fraud": {
        "modelFormat": "sklearn",
        "storageUri": "s3://acme-models/fraud/v3",
        "cpuMillicores": 2000,
        "memoryGib": 8,
        "minReplicas": 2,
        "maxReplicas": 6,
        "scaleMetric": "cpu",
        "scaleTarget": 60,
        "credentialsConfigKey": "s3Acme",
    },
    "embedder": {
        "runtime": "kserve-huggingfaceserver",
        "storageUri": "hf://BAAI/bge-large-en-v1.5",
        "gpu": {"count": 1},
        "memoryGib": 16,
        "maxReplicas": 2,
        "scaleMetric": "memory",
        "scaleTarget": 80,
    },
}
LABELS = {
    "app.kubernetes.io/name": "llama",
    "app.kubernetes.io/managed-by": "gpucell",
    "gpucell.io/tenant": "acme",
    "app.kubernetes.io/component": "model-endpoint",
}
RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "privileged": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def pinned_back(kserve: str) -> CellSpec:
    """:func:`region` with KServe ``kserve`` pinned *after* validation: admission refuses endpoints on a KServe
    without a runtime table (:mod:`gpucell.catalog.kserve_runtimes`), and these tests look only at its chart layout."""
    spec = region()
    return spec.model_copy(update={"versions": spec.versions.model_copy(update={"kserve": kserve})})


def region(kserve: str | None = None) -> CellSpec:
    """The minimal region (2x L40S, container mode) plus a tainted H200 pool in MIG ``all-balanced``, and
    tenant ``acme`` with the :data:`ENDPOINTS` (so admission checks them too); ``kserve`` pins another
    KServe."""
    config = minimal_cell_config()
    config["nodePools"]["h200-mig"] = tainted_mig_pool()
    if kserve is not None:
        config["versions"] = {"kserve": kserve}
    quota = {
        "cpuMillicores": 200000,
        "memoryGib": 1024,
        "storageGib": 1000,
        "gpus": {"nvidia.com/gpu": 2, "nvidia.com/mig-3g.71gb": 4},
    }
    # KServe's storage initializer downloads from the Hub and S3 in the tenant namespace: it needs egress.
    config["tenants"] = {"acme": {"quota": quota, "egress": "internet", "modelEndpoints": ENDPOINTS}}
    return cell(config)


def endpoint(name: str) -> ModelEndpointSpec:
    return region().tenants["acme"].model_endpoints[name]


def rendered(name: str, *, credentials: bool | None = None, kserve: str | None = None) -> dict[str, Any]:
    """The InferenceService of endpoint ``name`` (in a region with KServe ``kserve``), placed as the component
    places it; with credentials when it declares a ``credentialsConfigKey`` unless ``credentials`` says."""
    spec, cell_spec = endpoint(name), (region() if kserve is None else pinned_back(kserve))
    with_credentials = spec.credentials_config_key is not None if credentials is None else credentials
    placement = container_placement(spec.gpu, cell_spec, "a GPU model endpoint")
    return inference_service_manifest("acme", name, spec, cell_spec, placement, credentials=with_credentials)


def predictor(name: str, **kwargs: Any) -> dict[str, Any]:
    return rendered(name, **kwargs)["spec"]["predictor"]


# -- the rendered InferenceService, by value -----------------------------------------------------------------
def test_tensor_parallel_endpoint_gets_a_memory_backed_dev_shm_counted_in_its_memory() -> None:
    """kserve/kserve#3791: NCCL across the pod's GPUs fails in the runtime's 64 MiB /dev/shm."""
    spec = ModelEndpointSpec.model_validate(
        {
            "modelFormat": "huggingface",
            "storageUri": "hf://meta-llama/Llama-3.1-70B-Instruct",
            "args": ["--tensor-parallel-size=2"],
            "gpu": {"count": 2},
            "memoryGib": 64,
        }
    )
    cell_spec = region()
    placement = container_placement(spec.gpu, cell_spec, "a GPU model endpoint")
    tp = inference_service_manifest("acme", "tp", spec, cell_spec, placement)["spec"]["predictor"]
    assert tp["volumes"] == [{"name": "devshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}}]
    assert tp["model"]["volumeMounts"] == [{"name": "devshm", "mountPath": "/dev/shm"}]
    amounts = {"cpu": "4000m", "memory": "66Gi", "nvidia.com/gpu": 2}
    assert tp["model"]["resources"] == {"requests": amounts, "limits": amounts}
    assert "volumes" not in predictor("embedder")  # one GPU: the runtime's own /dev/shm does
    assert "volumeMounts" not in predictor("embedder")["model"]


@pytest.mark.parametrize(
    ("declared", "model"),
    [
        (
            {"modelFormat": "tensorflow"},  # TensorFlow Serving's GPU build, pinned to the auto-selected runtime
            {
                "modelFormat": {"name": "tensorflow"},
                "runtime": "kserve-tensorflow-serving",
                "runtimeVersion": "2.6.2-gpu",
            },
        ),
        (
            {"modelFormat": "tensorflow", "runtime": "kserve-tensorflow-serving", "runtimeVersion": "2.19.0-gpu"},
            {
                "modelFormat": {"name": "tensorflow"},
                "runtime": "kserve-tensorflow-serving",
                "runtimeVersion": "2.19.0-gpu",
            },
        ),
        (
            {"runtime": "kserve-vllmserver", "runtimeVersion": "v0.11.0"},
            {"modelFormat": {"name": "vLLM"}, "runtime": "kserve-vllmserver", "runtimeVersion": "v0.11.0"},
        ),
        ({"modelFormat": "huggingface"}, {"modelFormat": {"name": "huggingface"}}),  # a CUDA image as it is
    ],
    ids=["tensorflow-auto", "tensorflow-declared", "vllm-pinned", "huggingface"],
)
def test_gpu_endpoints_get_a_gpu_image(declared: dict[str, Any], model: dict[str, Any]) -> None:
    spec = ModelEndpointSpec.model_validate({"storageUri": "pvc://models/m", "gpu": {"count": 1}, **declared})
    cell_spec = region()
    placement = container_placement(spec.gpu, cell_spec, "a GPU model endpoint")
    rendered_model = inference_service_manifest("acme", "m", spec, cell_spec, placement)["spec"]["predictor"]["model"]
    assert {k: rendered_model[k] for k in ("modelFormat", "runtime", "runtimeVersion") if k in rendered_model} == model


def test_cpu_tensorflow_endpoint_keeps_the_runtimes_own_tag() -> None:
    spec = ModelEndpointSpec.model_validate({"storageUri": "pvc://models/m", "modelFormat": "tensorflow"})
    model = inference_service_manifest("acme", "m", spec, region(), container_placement(None, region(), "x"))
    assert set(model["spec"]["predictor"]["model"]) >= {"modelFormat", "storageUri"}
    assert "runtimeVersion" not in model["spec"]["predictor"]["model"]
    assert "runtime" not in model["spec"]["predictor"]["model"]


@pytest.mark.parametrize(("count", "shm"), [(1, 0), (2, 2), (4, 4), (8, 8), (16, 8)])
def test_dev_shm_grows_with_the_gpus_within_bounds(count: int, shm: int) -> None:
    assert multi_gpu_shm_gib(GpuRequest(count=count)) == shm
    assert multi_gpu_shm_gib(None) == 0


def test_mig_endpoint_asks_for_the_mig_resource_per_replica_on_the_mig_pool() -> None:
    spec = predictor("llama")
    amounts = {"cpu": "8000m", "memory": "64Gi", "nvidia.com/mig-3g.71gb": 1}
    assert spec["model"]["resources"] == {"requests": amounts, "limits": amounts}
    assert spec["runtimeClassName"] == "nvidia"
    assert spec["affinity"] == {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "gpucell.io/pool", "operator": "In", "values": ["h200-mig"]}]}
                ]
            }
        }
    }
    assert spec["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
    ]
    assert (spec["minReplicas"], spec["maxReplicas"]) == (1, 4)
    # A surge replica would need a GPU beyond gpus x maxReplicas, which admission and the quota reserve.
    assert spec["deploymentStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
    }


def test_model_is_format_storage_uri_and_args() -> None:
    model = predictor("llama")["model"]
    assert model["modelFormat"] == {"name": "huggingface"}
    assert "runtime" not in model
    assert model["storageUri"] == "hf://meta-llama/Llama-3.1-8B-Instruct"
    assert model["args"] == ["--max-model-len=8192"]
    assert "args" not in predictor("fraud")["model"]


def test_cpu_endpoint_scales_on_cpu_between_its_replica_bounds_without_gpu_settings() -> None:
    spec = predictor("fraud")
    assert (spec["minReplicas"], spec["maxReplicas"]) == (2, 6)
    assert (spec["scaleMetric"], spec["scaleTarget"]) == ("cpu", 60)
    amounts = {"cpu": "2000m", "memory": "8Gi"}
    assert spec["model"]["resources"] == {"requests": amounts, "limits": amounts}
    for gpu_only in ("runtimeClassName", "tolerations", "deploymentStrategy"):
        assert gpu_only not in spec, gpu_only
    # CPU replicas go to the cpu pools, off the GPU nodes
    assert spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "gpucell.io/pool", "operator": "In", "values": ["cpu"]}]}
    ]


def test_runtime_only_endpoint_gets_the_runtimes_format_and_a_whole_gpu() -> None:
    spec = predictor("embedder")
    assert spec["model"]["runtime"] == "kserve-huggingfaceserver"
    assert spec["model"]["modelFormat"] == {"name": "huggingface"}
    assert spec["model"]["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchExpressions"
    ][0]["values"] == ["l40s"]
    assert (spec["scaleMetric"], spec["scaleTarget"]) == ("memory", 80)
    assert (spec["minReplicas"], spec["maxReplicas"]) == (1, 2)


def test_a_custom_runtime_needs_a_model_format() -> None:
    quota = {"cpuMillicores": 16000, "memoryGib": 64, "storageGib": 100}
    endpoint = {"runtime": "acme-vllm", "storageUri": "pvc://models/llama"}
    with pytest.raises(ConfigError) as refused:
        TenantSpec.model_validate({"quota": quota, "modelEndpoints": {"e": endpoint}})
    assert refused.value.lines == [
        "modelEndpoints.e.modelFormat: is required with runtime 'acme-vllm', which is neither a built-in KServe "
        "runtime nor one of the tenant's servingRuntimes (none)"
    ]
    with pytest.raises(ValueError, match=r"^runtime 'acme-vllm' is neither a built-in KServe runtime nor the "):
        model_format(ModelEndpointSpec.model_validate(endpoint))
    both = ModelEndpointSpec.model_validate(
        {"runtime": "acme-vllm", "modelFormat": "vllm", "storageUri": "pvc://models/llama"}
    )
    assert model_format(both) == "vllm"
    assert BUILTIN_RUNTIME_FORMATS["kserve-tritonserver"] == "triton"


def test_annotations_pick_raw_mode_hpa_and_wait_for_ready() -> None:
    metadata = rendered("llama")["metadata"]
    assert metadata["name"] == "llama"
    assert metadata["namespace"] == "tenant-acme"
    assert metadata["labels"] == LABELS
    assert metadata["annotations"] == {
        "serving.kserve.io/deploymentMode": "Standard",
        "serving.kserve.io/autoscalerClass": "hpa",
        "pulumi.com/waitFor": "condition=Ready",
    }
    old = rendered("fraud", credentials=False, kserve="v0.15.2")
    assert old["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] == "RawDeployment"


def test_pods_run_restricted_without_a_token() -> None:
    spec = predictor("llama")
    assert spec["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    assert spec["automountServiceAccountToken"] is False
    assert spec["model"]["securityContext"] == RESTRICTED_CONTAINER


def test_credentials_are_only_referenced_hf_token_also_reaches_the_model() -> None:
    hf = predictor("llama")
    assert hf["serviceAccountName"] == "llama-storage"
    assert hf["model"]["env"] == [
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "llama-storage", "key": "HF_TOKEN"}}},
    ]
    s3 = predictor("fraud")
    assert s3["serviceAccountName"] == "fraud-storage"
    assert "env" not in s3["model"]  # the storage initializer gets AWS_* from the ServiceAccount's Secret
    none = predictor("embedder")
    assert "serviceAccountName" not in none
    assert "env" not in none["model"]


def test_credentials_secret_data_per_scheme() -> None:
    assert credentials_secret_data("hf", "hf_abc\n") == {"HF_TOKEN": "hf_abc"}
    assert credentials_secret_data("s3", "AKIA1:se:cret") == {
        "AWS_ACCESS_KEY_ID": "AKIA1",
        "AWS_SECRET_ACCESS_KEY": "se:cret",
    }
    with pytest.raises(ValueError, match=r"^s3 credentials must be '<AWS_ACCESS_KEY_ID>:<AWS_SECRET_ACCESS_KEY>'$"):
        credentials_secret_data("s3", "no-colon-here")
    with pytest.raises(ValueError, match=r"^gs:// storage takes no credentials here \(only s3, hf\)$"):
        credentials_secret_data("gs", "x")
    # What the component raises inside the Secret's apply when the deployment reads a malformed value.
    where = "model endpoint 'fraud' (credentialsConfigKey 's3Acme'): "
    expected = r"^model endpoint 'fraud' \(credentialsConfigKey 's3Acme'\): s3 credentials must be "
    with pytest.raises(ValueError, match=expected) as raised:
        credentials_secret_data("s3", "S3-NO-COLON-SENTINEL", where=where)
    assert "S3-NO-COLON-SENTINEL" not in str(raised.value)


def test_service_account_lists_the_secret_and_mounts_no_token() -> None:
    assert service_account_manifest("acme", "llama") == {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "llama-storage", "namespace": "tenant-acme", "labels": LABELS},
        "automountServiceAccountToken": False,
        "secrets": [{"name": "llama-storage"}],
    }


# -- the component: children, credentials, edges, conformance ------------------------------------------------
def computed(args: MockResourceArgs) -> dict[str, Any]:
    if args.typ == "command:remote:Command" and args.name.endswith("-kubeconfig"):
        return {"stdout": KUBECONFIG}
    return {}


def deploy(spec: CellSpec, credentials: dict[str, str] | None = None) -> PlanResult:
    """A cell, the real tenant ``acme`` and its endpoints under it, as ``gpucell.stacks.program`` builds them; each
    endpoint's credentials are a secret Output (from ``credentials``, default :data:`CREDENTIALS`)."""
    given = CREDENTIALS if credentials is None else credentials

    def program() -> None:
        lab = RegionalCell("lab", RegionalCellArgs(cell=spec, ssh_private_key=pulumi.Output.secret("k")))
        tenant = Tenant("lab-acme", TenantArgs.from_cell("acme", spec.tenants["acme"], lab))
        for name, declared in spec.tenants["acme"].model_endpoints.items():
            key = declared.credentials_config_key
            secret = pulumi.Output.secret(given[key]) if key is not None else None
            component = ModelEndpoint(
                f"lab-acme-{name}",
                ModelEndpointArgs(name, declared, tenant, secret),
                opts=pulumi.ResourceOptions(parent=tenant),
            )
            pulumi.export(f"{name}-url", component.url)
            pulumi.export(f"{name}-namespace", component.namespace)

    return run_program(program, computed=computed)


@pytest.fixture(scope="module")
def plan() -> PlanResult:
    return deploy(region())


def test_children_are_named_after_the_component(plan: PlanResult) -> None:
    assert component(plan, "llama").type == COMPONENT
    assert component(plan, "llama").parent == plan.named("lab-acme").urn
    assert sorted(r.name for r in plan.children(component(plan, "llama"))) == [
        "lab-acme-llama-credentials",
        "lab-acme-llama-isvc",
        "lab-acme-llama-service-account",
    ]
    assert [r.name for r in plan.children(component(plan, "embedder"))] == ["lab-acme-embedder-isvc"]


def test_registered_inference_service_is_the_rendered_manifest(plan: PlanResult) -> None:
    for name in ENDPOINTS:
        (isvc,) = child(plan, name, ISVC)
        assert {k: isvc.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")} == rendered(name)
    assert plan.outputs["llama-url"] == "http://llama-predictor.tenant-acme.svc"
    assert plan.outputs["llama-namespace"] == "tenant-acme"


def test_credentials_live_only_in_secrets(plan: PlanResult) -> None:
    (hf,) = child(plan, "llama", SECRET_TYPE)
    assert hf.inputs["metadata"] == {"name": "llama-storage", "namespace": "tenant-acme", "labels": LABELS}
    assert hf.inputs["type"] == "Opaque"
    assert "stringData" in hf.secret_paths
    assert hf.inputs["stringData"] == SECRET
    assert hf.raw_inputs["stringData"] == {"HF_TOKEN": HF_TOKEN}
    (s3,) = child(plan, "fraud", SECRET_TYPE)
    assert "stringData" in s3.secret_paths
    assert s3.raw_inputs["stringData"] == {"AWS_ACCESS_KEY_ID": S3_KEY_ID, "AWS_SECRET_ACCESS_KEY": S3_SECRET}
    for registration in plan.resources:
        shown = json.dumps(registration.inputs)
        assert not any(sentinel in shown for sentinel in SENTINELS), registration.name


def test_service_account_is_registered_as_rendered(plan: PlanResult) -> None:
    (account,) = child(plan, "fraud", ACCOUNT)
    expected = service_account_manifest("acme", "fraud")
    assert account.inputs["metadata"] == expected["metadata"]
    assert account.inputs["secrets"] == [{"name": "fraud-storage"}]
    assert account.inputs["automountServiceAccountToken"] is False


def test_every_child_waits_for_the_tenant_and_the_isvc_for_kserve_gpus_and_its_credentials(
    plan: PlanResult,
) -> None:
    ready = {r.urn for r in plan.children(plan.named("lab-acme")) if r.type.startswith("kubernetes:")}
    # Tenant.ready is every Kubernetes child of the tenant: namespace, quota, limits, RBAC, policies.
    named = ("namespace", "quota", "limits", "default-deny")
    assert {plan.named(f"lab-acme-{n}").urn for n in named} <= ready
    runtimes = plan.named("lab-kserve-runtimes").urn
    operator = plan.named("lab-gpu-operator-gpu-operator").urn
    for name in ENDPOINTS:
        for registration in plan.children(component(plan, name)):
            assert ready <= set(registration.dependencies), registration.name
        (isvc,) = child(plan, name, ISVC)
        assert runtimes in isvc.dependencies
        assert (operator in isvc.dependencies) == (name != "fraud")
    (isvc,) = child(plan, "fraud", ISVC)
    (secret,) = child(plan, "fraud", SECRET_TYPE)
    (account,) = child(plan, "fraud", ACCOUNT)
    assert {secret.urn, account.urn} <= set(isvc.dependencies)
    assert secret.urn in account.dependencies


def test_before_kserve_0_17_the_isvc_waits_for_the_controller_release_that_carries_the_runtimes() -> None:
    old = deploy(pinned_back("v0.15.2"))
    (isvc,) = [r for r in old.children(old.named("lab-acme-fraud")) if r.type == ISVC]
    assert old.named("lab-kserve-resources").urn in isvc.dependencies
    assert isvc.inputs["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] == "RawDeployment"


def test_kubernetes_children_use_the_cells_provider(plan: PlanResult) -> None:
    assert {r.provider for r in plan.children(component(plan, "llama"))} == {"lab-k8s"}


def test_rendered_objects_pass_conformance_with_zero_problems(plan: PlanResult) -> None:
    ours = [r for name in ENDPOINTS for r in plan.descendants(component(plan, name))]
    assert {r.type for r in ours} == {ISVC, SECRET_TYPE, ACCOUNT}
    report = check_region("lab", ours, region(), SchemaStore(UPSTREAM), checkers=SCHEMA_CHECKERS)
    assert [str(p) for p in report.problems] == []


def test_rendered_objects_pass_checkov(plan: PlanResult, checkov: str) -> None:
    ours = [r for name in ENDPOINTS for r in plan.descendants(component(plan, name))]
    report = check_region("lab", ours, region(), SchemaStore(UPSTREAM), checkers=SECURITY)
    assert [str(p) for p in report.problems] == []
    assert report.checkov_skipped == 0


# -- refusals: nothing is registered -------------------------------------------------------------------------
def test_a_credentials_key_without_credentials_is_refused_before_registering() -> None:
    config_key_only = ModelEndpointSpec.model_validate(
        {"modelFormat": "sklearn", "storageUri": "s3://b/m", "credentialsConfigKey": "s3Missing"}
    )
    registered: list[str] = []

    def program() -> None:
        spec = region()
        lab = RegionalCell("lab", RegionalCellArgs(cell=spec, ssh_private_key=pulumi.Output.secret("k")))
        tenant = Tenant("lab-acme", TenantArgs.from_cell("acme", spec.tenants["acme"], lab))
        try:
            ModelEndpoint("lab-acme-bad", ModelEndpointArgs("bad", config_key_only, tenant))
        except ValueError as exc:
            registered.append(str(exc))
        try:
            on_pvc = ModelEndpointSpec.model_validate({"modelFormat": "sklearn", "storageUri": "pvc://models/m"})
            ModelEndpoint("lab-acme-pvc", ModelEndpointArgs("pvc", on_pvc, tenant, pulumi.Output.secret("x")))
        except ValueError as exc:
            registered.append(str(exc))

    result = run_program(program, computed=computed)
    assert registered == [
        "model endpoint 'bad': credentialsConfigKey 's3Missing' is set but no credentials were passed",
        "model endpoint 'pvc': pvc:// storage takes no credentials here (only s3://, hf://)",
    ]
    assert not [r for r in result.resources if r.name.startswith(("lab-acme-bad", "lab-acme-pvc"))]
