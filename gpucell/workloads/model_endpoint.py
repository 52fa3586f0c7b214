"""ModelEndpoint: a tenant's autoscaled model server, a KServe ``InferenceService`` in raw deployment mode.

What is rendered, in the tenant's namespace (``tenant-<tenant>``):

- a ``serving.kserve.io/v1beta1`` ``InferenceService`` named after the endpoint (checked against the v0.20.0
  CRD ``config/crd/full/serving.kserve.io_inferenceservices.yaml``). In raw mode the KServe controller turns
  it into a Deployment, a Service ``<endpoint>-predictor`` (port 80) and a HorizontalPodAutoscaler;
- with credentials: a ``Secret`` ``<endpoint>-storage`` holding them and a ``ServiceAccount``
  ``<endpoint>-storage`` listing that Secret in ``secrets``, which the predictor runs as;
- with ``expose``: a ``gateway.networking.k8s.io/v1`` ``HTTPRoute`` ``<endpoint>`` from its listener of the cell's
  Gateway to ``<endpoint>-predictor`` (:func:`http_route_manifest`) and a ``CiliumNetworkPolicy``
  ``<endpoint>-gateway`` admitting the Gateway to the predictor (:func:`gateway_policy_manifest`); its certificate
  and listener are the Gateway's (:mod:`gpucell.components.gateway`);
- with ``gpu.allocation: dra``: a ``resource.k8s.io/v1`` ``ResourceClaimTemplate`` ``<endpoint>-gpus-<hash>``; the
  predictor's pod-level ``resourceClaims`` name it (the v0.20.0 CRD's predictor carries the whole PodSpec, and
  KServe's ``MergePodSpec`` copies it into the Deployment), so every replica gets its own claim.

Credentials never appear in plain values. KServe's credential builder (``pkg/credentials/
service_account_credentials.go``, ``mountSecretCredential``) walks the predictor ServiceAccount's ``secrets``
and, by the keys each Secret holds, gives the storage-initializer container env vars *referencing* the Secret:

- ``s3://``: a Secret with the key the ``inferenceservice-config`` names ``s3SecretAccessKeyName`` -> env
  ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` from the Secret's keys (``pkg/credentials/s3/s3_secret.go``
  ``BuildSecretEnvs``). The pinned ``kserve-resources`` chart sets both key names to ``AWS_ACCESS_KEY_ID`` and
  ``AWS_SECRET_ACCESS_KEY`` (values ``kserve.storage.s3.accessKeyIdName``/``secretAccessKeyName``), so those
  are the keys rendered. The credential is ``"<access key id>:<secret access key>"``.
- ``hf://``: a Secret with key ``HF_TOKEN`` -> env ``HF_TOKEN`` (``pkg/credentials/hf/hf_secret.go``). The
  model container gets ``HF_TOKEN`` from the same Secret too, for runtimes that fetch from the Hub themselves.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi_kubernetes.core.v1 import Secret, Service, ServiceAccount
from pulumi_kubernetes.resource.v1 import ResourceClaimTemplate

from gpucell._component import CellComponent
from gpucell.admission.dra import pod_resource_claims
from gpucell.admission.isolation import guest_vm, is_isolated
from gpucell.admission.placement import Placement
from gpucell.admission.tenants import tenant_runtimes
from gpucell.catalog.kserve_runtimes import EndpointRuntime, resolve_runtime, runtimes_of
from gpucell.components.metrics import NAMESPACE as METRICS_NAMESPACE
from gpucell.components.metrics import PROMETHEUS_URL
from gpucell.spec.lifecycle import RemovalPolicy, removal_options
from gpucell.spec.serving import ServingRuntimeSpec
from gpucell.spec.tenancy import namespace_of
from gpucell.spec.traffic import GATEWAY_NAMESPACE
from gpucell.spec.workloads import BUILTIN_RUNTIME_FORMATS, ModelEndpointSpec, ScaleMetric, multi_gpu_shm_gib
from gpucell.tenancy._common import (
    NVIDIA_RUNTIME_CLASS,
    cilium_network_policy,
    container_claim_template_manifest,
    container_placement,
    container_resources,
    custom_resource,
    gpu_dependencies,
    object_meta,
    opaque_secret,
    scheduling,
    vm_placement,
    workload_labels,
)
from gpucell.tenancy.tenant import admit_workload
from gpucell.workloads import isolated_endpoint
from gpucell.workloads.serving_runtime import RESTRICTED_CONTAINER, env_entry
from gpucell.workloads.virtual_machine import claim_template_manifest as vm_claim_template_manifest
from gpucell.workloads.virtual_machine import cloud_init_secret_name, vm_platform_ready

if TYPE_CHECKING:
    from gpucell.admission.tenants import ClusterFacts
    from gpucell.components.gateway import EndpointRoute
    from gpucell.platform import Platform
    from gpucell.spec.workloads import GpuVirtualMachineSpec
    from gpucell.tenancy.tenant import TenantView

__all__ = [
    "BUILTIN_RUNTIME_FORMATS",
    "CREDENTIAL_KEYS",
    "DEPLOYMENT_MODE_ANNOTATION",
    "DEVSHM_VOLUME",
    "ENV_SECRET_ANNOTATION",
    "HF_TOKEN_KEY",
    "PREDICTOR_LABEL",
    "PREDICTOR_PORT",
    "ModelEndpoint",
    "ModelEndpointArgs",
    "autoscaling",
    "claim_template_manifest",
    "credentials_secret_data",
    "credentials_secret_name",
    "endpoint_runtime",
    "env_secret_name",
    "gateway_policy_manifest",
    "http_route_manifest",
    "inference_service_manifest",
    "metrics_policy_manifest",
    "model_format",
    "service_account_manifest",
    "serving_port",
    "storage_scheme",
    "vllm_query",
]

DEPLOYMENT_MODE_ANNOTATION = "serving.kserve.io/deploymentMode"
"""Per-InferenceService deployment mode; set to the cell's raw mode (``Standard`` since v0.16)."""
HF_TOKEN_KEY = "HF_TOKEN"
"""Key of a Hugging Face token in a credentials Secret (KServe ``hf.HFTokenKey``)."""
CREDENTIAL_KEYS: dict[str, tuple[str, ...]] = {
    "s3": ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"),
    "hf": (HF_TOKEN_KEY,),
}
"""Storage URI scheme -> keys of its credentials Secret; other schemes take no credentials here."""
DEVSHM_VOLUME = "devshm"
"""Name of the ``/dev/shm`` volume: the name KServe v0.20.0's huggingfaceserver and vllmserver runtimes give theirs
(``charts/kserve-runtime-configs/files/runtimes/resources.yaml``), so KServe's strategic merge of the predictor over
the runtime (``MergePodSpec``: volumes by name, mounts by path) gives the one volume our ``sizeLimit``."""
_COMPONENT = "model-endpoint"
_NAMESPACE_KEY = "k8s:io.kubernetes.pod.namespace"
"""Cilium's label of an endpoint's namespace (as :mod:`gpucell.tenancy.tenant` selects it)."""
_WAIT_TIMEOUT = "30m"


@dataclass(frozen=True)
class ModelEndpointArgs:
    """Inputs of :class:`ModelEndpoint`."""

    name: str
    """The workload name: ``metadata.name`` of the InferenceService (DNS-1123 label, unique in the tenant)."""
    spec: ModelEndpointSpec
    """What the tenant declared."""
    tenant: TenantView
    """Wiring: the tenant's namespace and readiness, its cluster (provider), its cluster's facts (placement,
    deployment mode, KServe release) and platform (the KServe, KEDA and GPU Operator releases to wait for)."""
    credentials: pulumi.Input[str] | None = None
    """The secret named by ``spec.credentialsConfigKey``: a Hugging Face token for ``hf://``, or
    ``"<AWS_ACCESS_KEY_ID>:<AWS_SECRET_ACCESS_KEY>"`` for ``s3://``. Treated as a Pulumi secret."""
    route: EndpointRoute | None = None
    """With ``expose``: its host and Gateway listener (:func:`gpucell.components.gateway.exposed_endpoints`)."""
    gateway: pulumi.Resource | None = None
    """With ``route``: the ``Gateway`` it attaches to, which the HTTPRoute waits for."""
    env_secrets: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    """Config key -> secret value, for every ``env`` entry of the spec with ``secretConfigKey``. Treated as Pulumi
    secrets."""
    runtime: pulumi.Resource | None = None
    """The tenant's own ServingRuntime the endpoint names (:class:`gpucell.workloads.serving_runtime.ServingRuntime`),
    which the InferenceService waits for."""


def storage_scheme(storage_uri: str) -> str:
    """The scheme of a KServe storage URI: ``"hf"`` for ``hf://org/model``."""
    return storage_uri.split("://", 1)[0]


def credentials_secret_name(endpoint: str) -> str:
    """Name of the credentials Secret and of the ServiceAccount listing it: ``<endpoint>-storage``."""
    return f"{endpoint}-storage"


def credentials_secret_data(scheme: str, credentials: str, *, where: str = "") -> dict[str, str]:
    """The credentials Secret's ``stringData`` for storage ``scheme`` (keys per :data:`CREDENTIAL_KEYS`).

    ``s3``: ``"<id>:<secret>"`` split at the first colon (AWS access key IDs have none). ``hf``: the token.
    Raises ``ValueError`` for an ``s3`` value without a colon, an empty ``hf`` token or a scheme that takes no
    credentials; the
    message starts with ``where`` (``"model endpoint 'x' (credentialsConfigKey 'k'): "``) and never includes
    the credential.
    """
    if scheme == "s3":
        key_id, sep, secret = credentials.partition(":")
        if not (sep and key_id and secret):
            raise ValueError(f"{where}s3 credentials must be '<AWS_ACCESS_KEY_ID>:<AWS_SECRET_ACCESS_KEY>'")
        return {"AWS_ACCESS_KEY_ID": key_id, "AWS_SECRET_ACCESS_KEY": secret}
    if scheme == "hf":
        if not credentials.strip():
            raise ValueError(f"{where}the Hugging Face token is empty")
        return {HF_TOKEN_KEY: credentials.strip()}
    schemes = ", ".join(CREDENTIAL_KEYS)
    raise ValueError(f"{where}{scheme}:// storage takes no credentials here (only {schemes})")


def model_format(spec: ModelEndpointSpec, runtimes: Mapping[str, ServingRuntimeSpec] | None = None) -> str:
    """The ``modelFormat.name`` rendered: the declared one, or the first format of the named runtime: one of the
    tenant's ``runtimes``, else a built-in one.

    Raises ``ValueError`` for a runtime neither the tenant's nor in :data:`BUILTIN_RUNTIME_FORMATS` without a
    ``modelFormat``.
    """
    if spec.model_format is not None:
        return spec.model_format
    assert spec.runtime is not None  # the spec requires one of the two
    own = (runtimes or {}).get(spec.runtime)
    if own is not None:
        return own.supported_model_formats[0].name
    if spec.runtime not in BUILTIN_RUNTIME_FORMATS:
        raise ValueError(
            f"runtime {spec.runtime!r} is neither a built-in KServe runtime nor the tenant's, so its model format "
            f"is unknown; built-in: {', '.join(BUILTIN_RUNTIME_FORMATS)}"
        )
    return BUILTIN_RUNTIME_FORMATS[spec.runtime]


def endpoint_runtime(
    spec: ModelEndpointSpec, cell: ClusterFacts, runtimes: Mapping[str, ServingRuntimeSpec] | None = None
) -> EndpointRuntime | None:
    """The runtime serving ``spec`` in ``cell`` (the tenant's own ``runtimes`` first) and its image tag
    (:func:`gpucell.catalog.kserve_runtimes.resolve_runtime`), ``None`` for a KServe release gpucell has no runtime
    table for (admission refuses endpoints there).

    Raises :class:`gpucell.catalog.kserve_runtimes.RuntimeRefusedError` for a spec admission would have refused.
    """
    cluster = runtimes_of(cell.versions.kserve)
    if cluster is None:
        return None
    return resolve_runtime(
        cluster,
        cell.versions.kserve,
        runtime=spec.runtime,
        model_format=spec.model_format,
        runtime_version=spec.runtime_version,
        gpus=spec.gpu is not None,
        protocol=spec.protocol_version.value if spec.protocol_version is not None else None,
        tenant_runtimes=tenant_runtimes(runtimes or {}),
    )


def env_secret_name(endpoint: str) -> str:
    """The Secret holding the values of an endpoint's ``env`` entries with ``secretConfigKey``: ``<endpoint>-env``
    (one key per variable name)."""
    return f"{endpoint}-env"


ENV_SECRET_ANNOTATION = "gpucell.io/env-secret-uid"
"""Predictor pod annotation carrying the ``uid`` of the endpoint's env Secret. A new secret value replaces the Secret
(its ``stringData`` cannot change in place, gpucell's providers keep ``enableSecretMutable`` off), the new Secret has
a new uid, so the pod template changes and KServe rolls the replicas: a Secret's new content reaches no running
container by itself. The uid says nothing about the value."""


def serving_port(spec: ModelEndpointSpec, runtimes: Mapping[str, ServingRuntimeSpec] | None = None) -> int:
    """The port of the predictor container the endpoint's Service (port 80) reaches: its tenant runtime's first
    port, else KServe's :data:`PREDICTOR_PORT`."""
    own = (runtimes or {}).get(spec.runtime or "")
    return own.serving_port if own is not None else PREDICTOR_PORT


def claim_template_manifest(
    tenant: str, name: str, spec: ModelEndpointSpec, placement: Placement
) -> dict[str, Any] | None:
    """The endpoint's ``ResourceClaimTemplate`` with ``gpu.allocation: dra`` (one claim per replica), else ``None``."""
    return container_claim_template_manifest(tenant, name, spec.gpu, placement, _COMPONENT)


def service_account_manifest(tenant: str, endpoint: str) -> dict[str, Any]:
    """The ``ServiceAccount`` ``<endpoint>-storage``: ``secrets`` lists the credentials Secret (what KServe's
    credential builder reads); ``automountServiceAccountToken: false`` (the model needs no API access)."""
    name = credentials_secret_name(endpoint)
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": object_meta(tenant, name, workload=endpoint, component=_COMPONENT),
        "automountServiceAccountToken": False,
        "secrets": [{"name": name}],
    }


PREDICTOR_PORT = 8080
"""The port KServe's predictor container serves on (KServe v0.20.0 ``constants.InferenceServiceDefaultHttpPort``; the
raw-mode Service ``<endpoint>-predictor`` maps port 80 to it)."""
PREDICTOR_LABEL = "serving.kserve.io/inferenceservice"
"""Label KServe puts on every predictor pod, valued the InferenceService's name."""


def http_route_manifest(tenant: str, name: str, route: EndpointRoute) -> dict[str, Any]:
    """The ``gateway.networking.k8s.io/v1`` ``HTTPRoute`` ``<endpoint>`` in the tenant namespace: ``hostnames`` the
    endpoint's host, ``parentRefs`` its listener (``sectionName``) of the Gateway in ``gpucell-gateway`` (which admits
    routes of this namespace only), every path to the predictor Service ``<endpoint>-predictor`` port 80."""
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": object_meta(tenant, name, workload=name, component=_COMPONENT),
        "spec": {
            "parentRefs": [
                {
                    "group": "gateway.networking.k8s.io",
                    "kind": "Gateway",
                    "name": route.gateway,
                    "namespace": GATEWAY_NAMESPACE,
                    "sectionName": route.listener,
                }
            ],
            "hostnames": [route.host],
            "rules": [{"backendRefs": [{"name": f"{name}-predictor", "port": 80}]}],
        },
    }


def gateway_policy_manifest(tenant: str, name: str, port: int = 8080) -> dict[str, Any]:
    """A ``CiliumNetworkPolicy`` ``<endpoint>-gateway`` admitting the cell's Gateway (Cilium's ``ingress`` entity:
    the Envoy proxy that terminates TLS, Cilium 1.20 "Ingress and Gateway API network policy") to the predictor pods'
    ``port`` (:func:`serving_port`); the tenant's default-deny would drop it otherwise."""
    return cilium_network_policy(
        object_meta(tenant, f"{name}-gateway", workload=name, component=_COMPONENT),
        {
            "ingress": [
                {
                    "fromEntities": ["ingress"],
                    "toPorts": [{"ports": [{"port": str(port), "protocol": "TCP"}]}],
                }
            ]
        },
        match_labels={PREDICTOR_LABEL: name},
    )


def vllm_query(tenant: str, name: str, metric: ScaleMetric) -> str:
    """The PromQL of a ``vllm-*`` ``scaleMetric`` over the endpoint's predictor pods (``<endpoint>-predictor-*`` in
    the tenant's namespace): the sum of ``vllm:num_requests_waiting``/``vllm:num_requests_running``, or the 90th
    percentile of ``vllm:time_to_first_token_seconds`` over 2 minutes (vLLM's metric names, ``docs/design/
    metrics.md``)."""
    selector = f'namespace="{namespace_of(tenant)}",pod=~"{name}-predictor-.*"'
    if metric is ScaleMetric.VLLM_TTFT:
        return f"histogram_quantile(0.9, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{{{selector}}}[2m])))"
    gauge = "vllm:num_requests_waiting" if metric is ScaleMetric.VLLM_QUEUE else "vllm:num_requests_running"
    return f"sum({gauge}{{{selector}}})"


def autoscaling(tenant: str, name: str, spec: ModelEndpointSpec) -> dict[str, Any]:
    """The predictor's scaling fields.

    - ``cpu``/``memory``: ``scaleMetric``/``scaleTarget`` (percent), which KServe's HPA reconciler turns into one
      ``Resource`` metric (``reconcilers/hpa/hpa_reconciler.go`` ``getHPAMetrics``).
    - ``vllm-*``: ``autoScaling.metrics`` with one ``External`` metric, backend ``prometheus`` at
      :data:`gpucell.components.metrics.PROMETHEUS_URL`, query :func:`vllm_query`, target ``{type: Value, value: ...}``:
      ``scaleTarget`` requests for the queue and running requests, ``scaleTarget``/1000 seconds for the time to
      first token. KServe v0.20.0's webhook refuses an ``External`` target without ``value`` ("the target threshold
      value should not be empty", ``pkg/apis/serving/v1beta1/inference_service_validation.go`` lines 608-609), and
      its KEDA reconciler reads that ``value`` alone, as the ``prometheus`` trigger's ``threshold``
      (``pkg/controller/v1beta1/inferenceservice/reconcilers/keda/keda_reconciler.go`` line 125), setting no
      ``metricType``; KEDA v2.20.2 then uses ``AverageValue`` (``pkg/scalers/scaler.go`` lines 99-101), so the HPA
      aims at ``value`` per replica whatever ``type`` says.
    """
    if not spec.scale_metric.is_vllm:
        return {"scaleMetric": spec.scale_metric.value, "scaleTarget": spec.effective_scale_target}
    if spec.scale_metric is ScaleMetric.VLLM_TTFT:
        threshold = f"{spec.effective_scale_target / 1000:g}"
    else:
        threshold = str(spec.effective_scale_target)
    target = {"type": "Value", "value": threshold}
    metric = {
        "backend": "prometheus",
        "serverAddress": PROMETHEUS_URL,
        "query": vllm_query(tenant, name, spec.scale_metric),
    }
    return {"autoScaling": {"metrics": [{"type": "External", "external": {"metric": metric, "target": target}}]}}


def metrics_policy_manifest(tenant: str, name: str) -> dict[str, Any]:
    """``CiliumNetworkPolicy`` ``<endpoint>-allow-metrics``: ingress to the predictor pods on TCP 8080 (``/metrics``)
    from Prometheus (``app.kubernetes.io/name: prometheus`` in namespace ``monitoring``), which the tenant's
    default-deny otherwise drops. Rendered when the cell runs the metrics stack."""
    prometheus = {"matchLabels": {_NAMESPACE_KEY: METRICS_NAMESPACE, "app.kubernetes.io/name": "prometheus"}}
    return cilium_network_policy(
        object_meta(tenant, f"{name}-allow-metrics", workload=name, component=_COMPONENT),
        {"ingress": [{"fromEndpoints": [prometheus], "toPorts": [{"ports": [{"port": "8080", "protocol": "TCP"}]}]}]},
        match_labels={"serving.kserve.io/inferenceservice": name},
        description="Prometheus scrapes the model server's /metrics",
    )


def _model(
    name: str,
    spec: ModelEndpointSpec,
    cell: ClusterFacts,
    *,
    credentials: bool,
    runtimes: Mapping[str, ServingRuntimeSpec] | None,
) -> dict[str, Any]:
    """``predictor.model`` up to its resources: format, runtime and its version, storage URI, args, protocol, env
    (see :func:`inference_service_manifest`)."""
    model: dict[str, Any] = {"modelFormat": {"name": model_format(spec, runtimes)}}
    runtime = endpoint_runtime(spec, cell, runtimes)
    if spec.runtime is not None:
        model["runtime"] = spec.runtime
    elif runtime is not None and runtime.name_runtime:
        model["runtime"] = runtime.runtime.name
    if runtime is not None and runtime.runtime_version is not None:
        model["runtimeVersion"] = runtime.runtime_version
    model["storageUri"] = spec.storage_uri
    if spec.args:
        model["args"] = list(spec.args)
    if spec.protocol_version is not None:
        model["protocolVersion"] = spec.protocol_version.value
    env = [env_entry(var, env_secret_name(name)) for var in spec.env]
    if credentials and storage_scheme(spec.storage_uri) == "hf":
        secret_ref = {"name": credentials_secret_name(name), "key": HF_TOKEN_KEY}
        env.insert(0, {"name": HF_TOKEN_KEY, "valueFrom": {"secretKeyRef": secret_ref}})
    if env:
        model["env"] = env
    return model


def inference_service_manifest(
    tenant: str,
    name: str,
    spec: ModelEndpointSpec,
    cell: ClusterFacts,
    placement: Placement,
    *,
    credentials: bool = False,
    runtimes: Mapping[str, ServingRuntimeSpec] | None = None,
) -> dict[str, Any]:
    """The ``serving.kserve.io/v1beta1`` ``InferenceService`` of ``spec`` in the tenant namespace, as a dict;
    ``runtimes`` are the tenant's own ServingRuntimes (an endpoint naming one gets its first format).

    - Annotations: ``serving.kserve.io/deploymentMode`` = ``cell.deployment_mode`` (raw Deployments),
      ``serving.kserve.io/autoscalerClass: hpa``, and ``pulumi.com/waitFor: condition=Ready`` so that
      ``pulumi up`` reports an endpoint whose model does not load.
    - ``predictor.model``: ``modelFormat.name`` (:func:`model_format`), ``runtime`` when declared (or when gpucell
      picked a GPU build of the auto-selected runtime, which it then names), ``runtimeVersion`` when declared or a
      GPU endpoint on TensorFlow Serving (``2.6.2-gpu``, :func:`endpoint_runtime`), ``storageUri``, ``args``;
      requests = limits: ``cpu`` ``"<cpuMillicores>m"``, ``memory`` ``"<memoryGib>Gi"`` and the placement's GPU
      resource x count; container security context
      ``allowPrivilegeEscalation: false``, ``capabilities.drop: [ALL]``, ``runAsNonRoot``, seccomp
      ``RuntimeDefault`` (merged over the runtime's own, which keeps e.g. Triton's ``runAsUser: 1000``). A
      read-only root is not set: the model servers write caches outside any volume.
    - Two or more GPUs per replica (tensor parallelism): ``predictor.volumes`` ``devshm`` (``emptyDir`` ``medium:
      Memory``, ``sizeLimit`` :func:`gpucell.spec.workloads.multi_gpu_shm_gib`) mounted at ``/dev/shm``, and that
      many GiB added to the memory request and limit (kserve/kserve#3791: NCCL fails in the runtime's 64 MiB).
    - ``predictor.minReplicas``/``maxReplicas``, ``scaleMetric``/``scaleTarget``: in raw mode, without
      ``autoScaling``, the controller's HPA reconciler turns these into one ``Resource`` metric with
      ``Utilization`` target ``scaleTarget`` percent (``reconcilers/hpa/hpa_reconciler.go``
      ``getHPAMetrics``); documented in KServe's "Autoscaling with Kubernetes HPA".
    - Pod: ``automountServiceAccountToken: false``; ``securityContext`` ``runAsNonRoot`` and seccomp
      ``RuntimeDefault`` (also covering KServe's injected storage-initializer, which runs as UID 1000);
      ``serviceAccountName`` ``<endpoint>-storage`` with ``credentials``.
    - GPUs (``placement``: :func:`gpucell.tenancy._common.container_placement` of ``spec.gpu`` in
      ``cell``): ``runtimeClassName: nvidia`` (with DRA instead: ``predictor.resourceClaims`` ``gpus`` from
      :func:`claim_template_manifest`, the model container's ``resources.claims`` and the default runtime), required
      node affinity to the placement's pools, tolerations
      for their taints (from ``cell``), and ``deploymentStrategy`` RollingUpdate with ``maxSurge: 0``/
      ``maxUnavailable: 1``: a surge replica would need a GPU beyond what admission (``gpus x maxReplicas``)
      and the quota reserve.
    - With ``credentials`` and an ``hf://`` URI: env ``HF_TOKEN`` from the credentials Secret; then ``env`` in
      order (:func:`gpucell.workloads.serving_runtime.env_entry`; ``secretConfigKey`` ones from
      :func:`env_secret_name`).
    - ``protocolVersion`` and the predictor's ``priorityClassName`` when declared.

    Raises ``ValueError`` for an unknown runtime without ``modelFormat``.
    """
    model = _model(name, spec, cell, credentials=credentials, runtimes=runtimes)
    shm = multi_gpu_shm_gib(spec.gpu)
    model["resources"] = container_resources(spec.cpu_millicores, spec.memory_gib + shm, placement)
    if shm:
        model["volumeMounts"] = [{"name": DEVSHM_VOLUME, "mountPath": "/dev/shm"}]
    model["securityContext"] = copy.deepcopy(RESTRICTED_CONTAINER)
    predictor: dict[str, Any] = {
        "minReplicas": spec.min_replicas,
        "maxReplicas": spec.max_replicas,
        **autoscaling(tenant, name, spec),
        "automountServiceAccountToken": False,
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "model": model,
    }
    if shm:
        predictor["volumes"] = [{"name": DEVSHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": f"{shm}Gi"}}]
    if credentials:
        predictor["serviceAccountName"] = credentials_secret_name(name)
    template = claim_template_manifest(tenant, name, spec, placement)
    if template is not None:
        predictor["resourceClaims"] = pod_resource_claims(template)
    if spec.priority_class_name is not None:
        predictor["priorityClassName"] = spec.priority_class_name
    if placement.resource is not None:
        predictor["runtimeClassName"] = NVIDIA_RUNTIME_CLASS
    if placement.has_gpus:
        predictor["deploymentStrategy"] = {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
        }
    predictor.update(scheduling(placement, cell.node_pools))
    metadata = object_meta(tenant, name, workload=name, component=_COMPONENT)
    metadata["annotations"] = {
        DEPLOYMENT_MODE_ANNOTATION: cell.deployment_mode.value,
        "serving.kserve.io/autoscalerClass": "keda" if spec.scale_metric.is_vllm else "hpa",
        "pulumi.com/waitFor": "condition=Ready",
    }
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": metadata,
        "spec": {"predictor": predictor},
    }


class ModelEndpoint(CellComponent):
    """A tenant's model endpoint (``gpucell:index:ModelEndpoint``) in its cell, with the cell's provider.

    Children (``name`` is the component name, e.g. ``fra1-acme-llama-8b``):

    - with credentials: ``f"{name}-credentials"`` (the ``Secret``, a Pulumi secret) and
      ``f"{name}-service-account"`` (:func:`service_account_manifest`);
    - with DRA GPUs: ``f"{name}-gpu-claim"``, the ``ResourceClaimTemplate`` (:func:`claim_template_manifest`);
    - ``f"{name}-isvc"``: the ``InferenceService`` (:func:`inference_service_manifest`), after all of them. Pulumi
      waits up to 30 minutes for it to become Ready (model download and load).

    An isolated endpoint (``isolation: vm``, its own or its tenant's default) has instead
    ``f"{name}-guest"`` (its secrets as an environment file, with credentials or secret ``env``),
    ``f"{name}-cloud-init"``, ``f"{name}-predictor"`` (the Service KServe would make) and ``f"{name}-vm"``
    (:mod:`gpucell.workloads.isolated_endpoint`), plus the route, gateway and metrics policies as above.

    Every child depends on ``tenant.ready``; the InferenceService also on KServe's runtimes Release (or the
    controller Release for KServe before v0.17, whose chart carries the runtimes) and, with GPUs, on the GPU
    Operator's Release (the DRA driver's with DRA GPUs).

    Raises ``ValueError`` when ``spec.credentialsConfigKey`` is set but no ``credentials`` are given, when
    credentials come with a storage URI other than ``hf://``/``s3://``, and (at deployment, inside the
    Secret's value) for ``s3`` credentials without a colon.
    """

    namespace: pulumi.Output[str]
    """The tenant namespace the endpoint lives in (``tenant-<tenant>``)."""
    url: pulumi.Output[str]
    """In-cluster URL of the predictor: ``http://<endpoint>-predictor.<namespace>.svc`` (KServe's raw-mode
    Service, port 80)."""

    def __init__(self, name: str, args: ModelEndpointArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        tenant = args.tenant
        endpoint, spec = args.name, args.spec
        _check_args(args)
        facts, platform = admit_workload(tenant, "model_endpoints", endpoint, spec), tenant.platform
        isolation = facts.tenants[tenant.name].isolation
        if is_isolated(spec, isolation):
            self._isolated(name, args, facts, guest_vm(spec, isolation), opts)
            return
        with_credentials = args.credentials is not None
        placement = container_placement(spec.gpu, facts, "a GPU model endpoint")
        runtimes = _tenant_runtimes(tenant)
        manifest = inference_service_manifest(
            tenant.name, endpoint, spec, facts, placement, credentials=with_credentials, runtimes=runtimes
        )
        # Everything that can raise is above: a bad spec registers nothing.
        super().__init__("ModelEndpoint", name, opts, tenant.cluster)
        self.placement = placement
        """Pools the replicas may run on and the GPU resource each requests."""
        self.metrics_policy: pulumi.Resource | None = None
        """The ``CiliumNetworkPolicy`` letting Prometheus scrape the predictors, with the platform's metrics stack."""
        after: list[pulumi.Resource] = list(tenant.ready)
        kserve = _kserve_ready(platform)
        gpu_after = gpu_dependencies(platform, placement)
        self.claim_template: ResourceClaimTemplate | None = None
        """The ``ResourceClaimTemplate`` of its DRA GPUs, when ``gpu.allocation`` is ``dra``."""
        template = claim_template_manifest(tenant.name, endpoint, spec, placement)
        if template is not None:
            self.claim_template = ResourceClaimTemplate(
                f"{name}-gpu-claim",
                metadata=template["metadata"],
                spec=template["spec"],
                opts=self.child(depends_on=[*after, *gpu_after]),
            )
            gpu_after = [*gpu_after, self.claim_template]

        storage = self._credentials(name, args, after)
        storage += self._env_secret(name, args, manifest, after)
        if args.runtime is not None:
            storage.append(args.runtime)
        scaling = self._scaling(name, tenant, spec, endpoint, after)
        self.inference_service = custom_resource(
            f"{name}-isvc",
            manifest,
            self.child(
                depends_on=[*after, *kserve, *gpu_after, *storage, *scaling],
                custom_timeouts=pulumi.CustomTimeouts(create=_WAIT_TIMEOUT, update=_WAIT_TIMEOUT),
            ),
        )
        """The ``InferenceService``."""
        self.workload: pulumi.Resource = self.inference_service
        """What is ready when the endpoint is: its InferenceService, or its VirtualMachine when isolated."""
        self.http_route, self.gateway_policy = self._expose(name, args, after)
        self._outputs(tenant.name, endpoint)

    def _outputs(self, tenant: str, endpoint: str) -> None:
        namespace = namespace_of(tenant)
        address = f"http://{endpoint}-predictor.{namespace}.svc"
        self.namespace = self.workload.urn.apply(lambda _: namespace)
        self.url = self.workload.urn.apply(lambda _: address)
        self.register_outputs({"namespace": self.namespace, "url": self.url})

    def _isolated(
        self,
        name: str,
        args: ModelEndpointArgs,
        facts: ClusterFacts,
        guest: GpuVirtualMachineSpec,
        opts: pulumi.ResourceOptions | None,
    ) -> None:
        """An isolated endpoint (:mod:`gpucell.workloads.isolated_endpoint`): the guest Secret (credentials and
        secret ``env`` as an environment file), the cloud-init Secret, the ``VirtualMachine`` and the Service
        ``<endpoint>-predictor``; with ``expose``, the HTTPRoute and gateway policy as for a container endpoint; with
        the metrics stack, the metrics policy. Everything that can raise runs before the first registration."""
        tenant, endpoint, spec = args.tenant, args.name, args.spec
        placement = vm_placement(endpoint, guest, facts)
        runtime = endpoint_runtime(spec, facts, _tenant_runtimes(tenant))
        keyed: dict[str, pulumi.Input[str]] = {}
        if args.credentials is not None:
            keyed[HF_TOKEN_KEY] = args.credentials
        keyed.update({v.name: args.env_secrets[v.secret_config_key] for v in spec.env if v.secret_config_key})
        pod_labels = {**workload_labels(tenant.name, endpoint, _COMPONENT), PREDICTOR_LABEL: endpoint}
        unit = isolated_endpoint.guest_unit_of(endpoint, spec, runtime, secrets=bool(keyed))
        manifest = isolated_endpoint.isolated_manifest(
            tenant.name, endpoint, guest, facts, placement, pod_labels=pod_labels, secrets=bool(keyed), unit=unit
        )
        cloud_init_data = isolated_endpoint.guest_data(
            endpoint, spec, runtime, secrets=bool(keyed), nvlink_disabled=placement.nvlink_disabled
        )
        super().__init__("ModelEndpoint", name, opts, tenant.cluster)
        self.placement = placement
        """Pools the endpoint may run on and the GPU resource it requests (its VM's, when isolated)."""
        after: list[pulumi.Resource] = list(tenant.ready)
        self.guest_secret: Secret | None = None
        """The isolated endpoint's guest ``Secret`` (its environment file), with credentials or secret ``env``."""
        secrets: list[pulumi.Resource] = []
        if keyed:
            where = f"model endpoint {endpoint!r}: "
            data = pulumi.Output.all(**keyed).apply(
                lambda values: {isolated_endpoint.ENV_FILE_KEY: isolated_endpoint.guest_env_file(values, where=where)}
            )
            meta = object_meta(
                tenant.name, isolated_endpoint.guest_secret_name(endpoint), workload=endpoint, component=_COMPONENT
            )
            self.guest_secret = opaque_secret(f"{name}-guest", meta, data, self.child(depends_on=after))
            secrets.append(self.guest_secret)
        self.cloud_init = opaque_secret(
            f"{name}-cloud-init",
            object_meta(tenant.name, cloud_init_secret_name(endpoint), workload=endpoint),
            cloud_init_data,
            self.child(depends_on=after),
        )
        """The cloud-init ``Secret`` (user data and the guest's unit, also its unit disk; no secret value in it)."""
        service = isolated_endpoint.predictor_service_manifest(
            object_meta(tenant.name, f"{endpoint}-predictor", workload=endpoint, component=_COMPONENT),
            {PREDICTOR_LABEL: endpoint},
        )
        self.service = Service(
            f"{name}-predictor",
            metadata=service["metadata"],
            spec=service["spec"],
            opts=self.child(depends_on=after),
        )
        """The Service ``<endpoint>-predictor``, KServe's name and port, in front of the VM."""
        vm_after = [*after, *vm_platform_ready(tenant.platform, guest), *gpu_dependencies(tenant.platform, placement)]
        self.claim_template = None
        template = vm_claim_template_manifest(tenant.name, endpoint, guest, placement)
        if template is not None:  # DRA VFIO GPUs (gpu.allocation: dra)
            self.claim_template = ResourceClaimTemplate(
                f"{name}-gpu-claim",
                metadata=template["metadata"],
                spec=template["spec"],
                opts=self.child(depends_on=vm_after),
            )
            vm_after.append(self.claim_template)
        self.vm = custom_resource(
            f"{name}-vm",
            manifest,
            self.child(
                depends_on=[*vm_after, *secrets, self.cloud_init],
                # Its disk holds the image and the model cache only: removable as an InferenceService is.
                **removal_options(RemovalPolicy.DELETE),
            ),
        )
        """The ``VirtualMachine`` the endpoint runs in."""
        self.workload = self.vm
        self.http_route, self.gateway_policy = self._expose(name, args, after)
        self.metrics_policy = None
        if tenant.platform.metrics is not None:
            policy = metrics_policy_manifest(tenant.name, endpoint)
            self.metrics_policy = custom_resource(f"{name}-allow-metrics", policy, self.child(depends_on=after))
        self._outputs(tenant.name, endpoint)

    def _credentials(self, name: str, args: ModelEndpointArgs, after: list[pulumi.Resource]) -> list[pulumi.Resource]:
        """With credentials: the Secret :func:`credentials_secret_name` (checked inside its value, the message never
        naming it) and the ServiceAccount listing it; returns them for the InferenceService to wait for."""
        tenant, endpoint, spec = args.tenant, args.name, args.spec
        scheme = storage_scheme(spec.storage_uri)
        self.credentials: Secret | None = None
        """The credentials ``Secret``, when credentials are given."""
        self.service_account: ServiceAccount | None = None
        """The ``ServiceAccount`` listing the credentials Secret, when credentials are given."""
        if args.credentials is None:
            return []
        where = f"model endpoint {endpoint!r} (credentialsConfigKey {spec.credentials_config_key!r}): "
        # Checked inside apply: only the deployment knows the value (the message never includes it).
        data = pulumi.Output.secret(args.credentials).apply(
            lambda value: credentials_secret_data(scheme, value, where=where)
        )
        metadata = object_meta(tenant.name, credentials_secret_name(endpoint), workload=endpoint, component=_COMPONENT)
        s3 = {"serving.kserve.io/s3-endpoint": spec.s3_endpoint, "serving.kserve.io/s3-region": spec.s3_region}
        if any(s3.values()):  # KServe's storage initializer reads these annotations of the Secret
            metadata["annotations"] = {k: v for k, v in s3.items() if v is not None}
        self.credentials = opaque_secret(f"{name}-credentials", metadata, data, self.child(depends_on=after))
        account = service_account_manifest(tenant.name, endpoint)
        self.service_account = ServiceAccount(
            f"{name}-service-account",
            metadata=account["metadata"],
            automount_service_account_token=account["automountServiceAccountToken"],
            secrets=account["secrets"],
            opts=self.child(depends_on=[*after, self.credentials]),
        )
        return [self.credentials, self.service_account]

    def _env_secret(
        self, name: str, args: ModelEndpointArgs, manifest: dict[str, Any], after: list[pulumi.Resource]
    ) -> list[pulumi.Resource]:
        """With ``env`` entries from secret config keys: the Secret :func:`env_secret_name` (a Pulumi secret, one key
        per variable) and, on the predictor's pods, :data:`ENV_SECRET_ANNOTATION`, so that a new value rolls the
        replicas. Returns what the InferenceService waits for."""
        keyed = {v.name: args.env_secrets[v.secret_config_key] for v in args.spec.env if v.secret_config_key}
        self.env_secret: Secret | None = None
        """The ``<endpoint>-env`` Secret, with secret ``env`` entries."""
        if not keyed:
            return []
        meta = object_meta(args.tenant.name, env_secret_name(args.name), workload=args.name, component=_COMPONENT)
        self.env_secret = opaque_secret(f"{name}-env", meta, pulumi.Output.all(**keyed), self.child(depends_on=after))
        uid = self.env_secret.metadata.apply(lambda m: getattr(m, "uid", None) or "")
        predictor = manifest["spec"]["predictor"]
        predictor["annotations"] = {**predictor.get("annotations", {}), ENV_SECRET_ANNOTATION: uid}
        return [self.env_secret]

    def _expose(
        self, name: str, args: ModelEndpointArgs, after: list[pulumi.Resource]
    ) -> tuple[pulumi.CustomResource | None, pulumi.CustomResource | None]:
        """With ``args.route``: the ``HTTPRoute`` from the Gateway's listener to the predictor (after the Gateway)
        and the ``CiliumNetworkPolicy`` admitting the Gateway to the predictor pods; else ``(None, None)``."""
        if args.route is None:
            return None, None
        tenant = args.tenant.name
        gateway = [args.gateway] if args.gateway is not None else []
        route = custom_resource(
            f"{name}-route",
            http_route_manifest(tenant, args.name, args.route),
            self.child(depends_on=[*after, *gateway]),
        )
        port = serving_port(args.spec, _tenant_runtimes(args.tenant))
        policy = custom_resource(
            f"{name}-gateway-policy", gateway_policy_manifest(tenant, args.name, port), self.child(depends_on=after)
        )
        return route, policy

    def _scaling(
        self, name: str, tenant: TenantView, spec: ModelEndpointSpec, endpoint: str, after: list[pulumi.Resource]
    ) -> list[pulumi.Resource]:
        """What the InferenceService waits for to scale: KEDA's Release for a ``vllm-*`` metric (its ScaledObject
        needs KEDA's CRDs), and, with the cell's metrics stack, the policy letting Prometheus scrape the pods."""
        platform = tenant.platform
        scaling: list[pulumi.Resource] = []
        if spec.scale_metric.is_vllm and platform.keda is not None:
            scaling.append(platform.keda.release)
        if platform.metrics is not None:
            policy = metrics_policy_manifest(tenant.name, endpoint)
            self.metrics_policy = custom_resource(f"{name}-allow-metrics", policy, self.child(depends_on=after))
            scaling.append(self.metrics_policy)
        return scaling


def _check_args(args: ModelEndpointArgs) -> str:
    """The storage scheme of ``args``, once its credentials fit it and every ``env`` secret was passed; raises
    ``ValueError`` otherwise."""
    endpoint, spec = args.name, args.spec
    scheme = storage_scheme(spec.storage_uri)
    if spec.credentials_config_key is not None and args.credentials is None:
        raise ValueError(
            f"model endpoint {endpoint!r}: credentialsConfigKey {spec.credentials_config_key!r} "
            "is set but no credentials were passed"
        )
    if args.credentials is not None and scheme not in CREDENTIAL_KEYS:
        raise ValueError(
            f"model endpoint {endpoint!r}: {scheme}:// storage takes no credentials here "
            f"(only {', '.join(f'{s}://' for s in CREDENTIAL_KEYS)})"
        )
    missing = [
        v.secret_config_key for v in spec.env if v.secret_config_key and v.secret_config_key not in args.env_secrets
    ]
    if missing:
        raise ValueError(f"model endpoint {endpoint!r}: env secretConfigKey {missing[0]!r} was not passed")
    return scheme


def _tenant_runtimes(tenant: TenantView) -> Mapping[str, ServingRuntimeSpec]:
    """The tenant's own ServingRuntimes, as its facts hold its spec (none for a tenant they do not hold)."""
    own = tenant.facts.tenants.get(tenant.name)
    return own.serving_runtimes if own is not None else {}


def _kserve_ready(platform: Platform) -> list[pulumi.Resource]:
    """What an InferenceService waits for of ``platform``'s KServe: its runtimes' Release (the controller's before
    KServe v0.17, whose chart carries the runtimes); nothing without KServe on the platform."""
    if platform.kserve is None:
        return []
    runtimes = platform.kserve.runtimes
    return [runtimes if runtimes is not None else platform.kserve.resources]
