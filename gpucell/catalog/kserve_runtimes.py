"""The ClusterServingRuntimes the pinned KServe installs: names, model formats, images, and what runs on GPUs.

gpucell installs KServe's ``kserve-runtime-configs`` chart with ``kserve.servingruntime.enabled: true``
(:func:`gpucell.components.kserve.kserve_runtime_values`); an InferenceService names one of its runtimes or a model
format one of them serves by auto-selection. The table below is KServe v0.20.0 (kserve/kserve ``1fb7810``):

- names, ``supportedModelFormats`` (name, version, ``autoSelect``, ``priority``) and ``protocolVersions`` from
  ``charts/kserve-runtime-configs/files/runtimes/resources.yaml``;
- images from ``charts/kserve-runtime-configs/values.yaml`` (``kserve.servingruntime.<runtime>.image``/``tag``; an
  empty tag is ``kserve.version``) and the patch template ``files/runtimes/clusterservingruntimes-patch.yaml``
  (the multi-node Hugging Face runtime appends ``-gpu``).

Which images run on GPUs (:class:`GpuImage`):

- CUDA images as they are: ``nvcr.io/nvidia/tritonserver``, ``vllm/vllm-openai``, and ``kserve/huggingfaceserver``
  (kserve/kserve ``python/huggingface_server.Dockerfile`` builds on ``nvidia/cuda``);
- ``tensorflow/serving``: a CPU build whose GPU build is the ``-gpu`` tag, which an InferenceService selects with
  ``runtimeVersion`` (kserve/kserve v0.20.0 ``docs/samples/accelerators/tensorflow-gpu.yaml``; kserve/website
  v0.20 ``kpa-autoscaler.md``: ``runtimeVersion: "2.6.2-gpu"``);
- every other image is a CPU build with no GPU build gpucell knows of: a GPU endpoint on it must name one with
  ``runtimeVersion`` or is refused.

Another KServe release may ship other runtimes: endpoints on a KServe minor without a table here are refused at
plan time (add the release's table, checked against its chart, to support it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from gpucell.catalog.releases import release

__all__ = [
    "INFERENCE_PROTOCOL",
    "RUNTIMES",
    "ClusterServingRuntime",
    "EndpointRuntime",
    "GpuImage",
    "RuntimeRefusedError",
    "SupportedFormat",
    "auto_selected",
    "resolve_runtime",
    "runtimes_of",
]

_NONE: Mapping[str, ClusterServingRuntime] = MappingProxyType({})

INFERENCE_PROTOCOL = "v1"
"""An InferenceService's ``protocolVersion`` when it names none (KServe ``GetProtocol``); auto-selection only
considers runtimes that speak it."""


class GpuImage(StrEnum):
    """Whether a runtime's image runs on GPUs."""

    CUDA = "cuda"
    """The image as pinned is a CUDA build."""
    GPU_TAG = "gpu-tag"
    """The image's GPU build is its tag with ``-gpu`` (gpucell renders that ``runtimeVersion`` for GPU endpoints)."""
    CPU = "cpu"
    """A CPU build: a GPU endpoint must name a GPU build with ``runtimeVersion``."""


@dataclass(frozen=True)
class SupportedFormat:
    """One ``supportedModelFormats`` entry of a runtime."""

    name: str
    version: str
    auto_select: bool
    priority: int = 0


@dataclass(frozen=True)
class ClusterServingRuntime:
    """One ClusterServingRuntime of the chart."""

    name: str
    image: str
    tag: str
    formats: tuple[SupportedFormat, ...]
    protocols: tuple[str, ...]
    gpu_image: GpuImage
    multi_node: bool = False
    """Serves one model across nodes (``workerSpec``), which gpucell does not render."""
    default: str | None = None
    """The format an endpoint naming only this runtime gets, when not its first ``supportedModelFormats`` entry."""
    namespaced: bool = False
    """A tenant's own ``ServingRuntime`` in its namespace, which KServe looks up before the cluster's runtimes
    (``GetServingRuntime``, ``GetSupportingRuntimes`` at v0.20.0)."""

    @property
    def default_format(self) -> str:
        """The format an endpoint naming only this runtime gets (``modelFormat`` is required by KServe, and an empty
        one matches no runtime): :attr:`default`, else its first ``supportedModelFormats`` entry."""
        return self.default or self.formats[0].name

    @property
    def pinned(self) -> bool:
        """False for a floating tag (``latest``): then an endpoint must pin ``runtimeVersion``."""
        return self.tag != "latest"

    def serves(self, model_format: str) -> bool:
        """True when ``model_format`` is one of the runtime's ``supportedModelFormats`` (KServe compares names)."""
        return any(f.name == model_format for f in self.formats)


def _formats(*entries: tuple[str, str, bool, int]) -> tuple[SupportedFormat, ...]:
    return tuple(SupportedFormat(*entry) for entry in entries)


_V = "v0.20.0"
_V0_20: tuple[ClusterServingRuntime, ...] = (
    ClusterServingRuntime(
        "kserve-autogluonserver",
        "kserve/autogluonserver",
        _V,
        _formats(("autogluon", "1", True, 1)),
        ("v1", "v2"),
        GpuImage.CPU,
    ),
    ClusterServingRuntime(
        "kserve-huggingfaceserver",
        "kserve/huggingfaceserver",
        _V,
        _formats(("huggingface", "1", True, 1)),
        ("v2", "v1"),
        GpuImage.CUDA,
    ),
    ClusterServingRuntime(
        "kserve-huggingfaceserver-multinode",
        "kserve/huggingfaceserver",
        f"{_V}-gpu",
        _formats(("huggingface", "1", True, 2)),
        ("v2", "v1"),
        GpuImage.CUDA,
        multi_node=True,
    ),
    ClusterServingRuntime(
        "kserve-lgbserver", "kserve/lgbserver", _V, _formats(("lightgbm", "4", True, 1)), ("v1", "v2"), GpuImage.CPU
    ),
    ClusterServingRuntime(
        "kserve-mlserver",
        "docker.io/seldonio/mlserver",
        "1.5.0",
        _formats(
            ("sklearn", "0", True, 2),
            ("sklearn", "1", True, 2),
            ("xgboost", "1", True, 2),
            ("xgboost", "2", True, 2),
            ("lightgbm", "3", True, 2),
            ("lightgbm", "4", True, 2),
            ("mlflow", "1", True, 1),
            ("mlflow", "2", True, 1),
        ),
        ("v2",),
        GpuImage.CPU,
    ),
    ClusterServingRuntime(
        "kserve-paddleserver", "kserve/paddleserver", _V, _formats(("paddle", "2", True, 1)), ("v1", "v2"), GpuImage.CPU
    ),
    ClusterServingRuntime(
        "kserve-pmmlserver",
        "kserve/pmmlserver",
        _V,
        _formats(("pmml", "3", True, 1), ("pmml", "4", True, 1)),
        ("v1", "v2"),
        GpuImage.CPU,
    ),
    ClusterServingRuntime(
        "kserve-predictiveserver",
        "kserve/predictiveserver",
        _V,
        _formats(("sklearn", "1", False, 3), ("xgboost", "2", False, 3), ("lightgbm", "4", False, 3)),
        ("v1", "v2"),
        GpuImage.CPU,
    ),
    ClusterServingRuntime(
        "kserve-sklearnserver",
        "kserve/sklearnserver",
        _V,
        _formats(("sklearn", "1", True, 1)),
        ("v1", "v2"),
        GpuImage.CPU,
    ),
    ClusterServingRuntime(
        "kserve-tensorflow-serving",
        "tensorflow/serving",
        "2.6.2",
        _formats(("tensorflow", "1", True, 2), ("tensorflow", "2", True, 2)),
        ("v1", "grpc-v1"),
        GpuImage.GPU_TAG,
    ),
    ClusterServingRuntime(
        "kserve-torchserve",
        "pytorch/torchserve-kfs",
        "0.9.0",
        _formats(("pytorch", "1", True, 2)),
        ("v1", "v2", "grpc-v2"),
        GpuImage.CPU,
    ),
    ClusterServingRuntime(
        "kserve-tritonserver",
        "nvcr.io/nvidia/tritonserver",
        "23.05-py3",
        _formats(
            ("tensorrt", "8", True, 1),
            ("tensorflow", "1", True, 1),
            ("tensorflow", "2", True, 1),
            ("onnx", "1", True, 1),
            ("pytorch", "1", False, 0),
            ("triton", "2", True, 1),
        ),
        ("v2", "grpc-v2"),
        GpuImage.CUDA,
        default="triton",
    ),
    ClusterServingRuntime(
        "kserve-vllmserver", "vllm/vllm-openai", "latest", _formats(("vLLM", "1", True, 1)), (), GpuImage.CUDA
    ),
    ClusterServingRuntime(
        "kserve-xgbserver", "kserve/xgbserver", _V, _formats(("xgboost", "2", True, 1)), ("v1", "v2"), GpuImage.CPU
    ),
)

RUNTIMES: Mapping[tuple[int, int], Mapping[str, ClusterServingRuntime]] = MappingProxyType(
    {
        (0, 20): MappingProxyType({r.name: r for r in _V0_20}),
    }
)
"""KServe ``(major, minor)`` -> runtime name -> runtime. Tags follow the minor's ``.0`` release; a patch release
that changed images would need its own entry."""


def runtimes_of(kserve_version: str) -> Mapping[str, ClusterServingRuntime] | None:
    """The runtimes KServe ``kserve_version`` installs, or ``None`` when gpucell has no table for its minor."""
    return RUNTIMES.get(release(kserve_version))


def _candidates(
    runtimes: Mapping[str, ClusterServingRuntime], model_format: str, protocol: str
) -> list[tuple[int, str, ClusterServingRuntime]]:
    """``(-priority, name, runtime)`` of the single-node runtimes that auto-select ``model_format`` and speak
    ``protocol`` (a runtime listing no protocol speaks any: ``IsProtocolVersionSupported``), best first."""
    found = []
    for runtime in runtimes.values():
        if runtime.multi_node or (runtime.protocols and protocol not in runtime.protocols):
            continue
        priorities = [f.priority for f in runtime.formats if f.name == model_format and f.auto_select]
        if priorities:
            found.append((-max(priorities), runtime.name, runtime))
    return sorted(found, key=lambda c: (c[0], c[1]))


def auto_selected(
    runtimes: Mapping[str, ClusterServingRuntime], model_format: str, protocol: str = INFERENCE_PROTOCOL
) -> ClusterServingRuntime | None:
    """The runtime KServe picks for an InferenceService naming only ``model_format``: among single-node runtimes
    serving it with ``autoSelect`` and speaking ``protocol`` (default :data:`INFERENCE_PROTOCOL`; a runtime listing
    no protocol is taken to speak it), the highest ``priority``, then the name; ``None`` when there is none."""
    candidates = _candidates(runtimes, model_format, protocol)
    return candidates[0][2] if candidates else None


class RuntimeRefusedError(Exception):
    """An endpoint the pinned runtimes cannot serve as declared. ``rel_path`` is the key below the endpoint."""

    def __init__(self, rel_path: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.rel_path = rel_path
        self.message = message


@dataclass(frozen=True)
class EndpointRuntime:
    """How an endpoint's runtime is rendered."""

    runtime: ClusterServingRuntime
    """The runtime serving it: the declared one, or the one KServe auto-selects for its format."""
    runtime_version: str | None
    """``predictor.model.runtimeVersion`` to render, or ``None`` for the runtime's own tag."""
    name_runtime: bool
    """Render ``runtime`` even when the endpoint named only a format: gpucell relied on the auto-selection (for the
    GPU build's tag), so it pins that choice."""


def resolve_runtime(
    runtimes: Mapping[str, ClusterServingRuntime],
    kserve_version: str,
    *,
    runtime: str | None,
    model_format: str | None,
    runtime_version: str | None,
    gpus: bool,
    protocol: str | None = None,
    tenant_runtimes: Mapping[str, ClusterServingRuntime] = _NONE,
) -> EndpointRuntime:
    """Check an endpoint's ``runtime``/``modelFormat``/``runtimeVersion``/``protocolVersion`` against ``runtimes``
    (the cluster's) and ``tenant_runtimes`` (the tenant's namespaced ones, looked up first, as KServe does) and
    decide its image.

    Raises :class:`RuntimeRefusedError` when the runtime is not installed or serves one model across nodes, the format
    is not one it serves (or none auto-selects it, or two of the tenant's tie for it), it does not speak
    ``protocol``, its image tag floats (``latest``) and ``runtimeVersion`` does not pin it, or a GPU endpoint would
    run a CPU build (see :class:`GpuImage`).
    """
    chosen = _chosen(
        runtimes, tenant_runtimes, kserve_version, runtime=runtime, model_format=model_format, protocol=protocol
    )
    image = f"{chosen.image}:{chosen.tag}"
    if not chosen.pinned and runtime_version is None:
        raise RuntimeRefusedError(
            ("runtimeVersion",),
            f"is required with {chosen.name}, whose image is {image}: pin a release tag of {chosen.image}",
        )
    if not gpus or chosen.gpu_image is GpuImage.CUDA:
        return EndpointRuntime(chosen, runtime_version, name_runtime=False)
    if chosen.gpu_image is GpuImage.CPU:
        if runtime_version is None and chosen.namespaced:
            raise RuntimeRefusedError(
                ("gpu",),
                f"{chosen.name} runs {image}, which the tenant did not declare a GPU build (servingRuntimes."
                f"{chosen.name}.gpuImage); set gpuImage: true if it runs on GPUs, or drop gpu",
            )
        if runtime_version is None:
            raise RuntimeRefusedError(
                ("gpu",),
                f"{chosen.name} runs {image}, a CPU build; a GPU endpoint needs a GPU "
                "build of that image in runtimeVersion, or no gpu",
            )
        return EndpointRuntime(chosen, runtime_version, name_runtime=False)
    if runtime_version is not None and not runtime_version.endswith("-gpu"):
        raise RuntimeRefusedError(
            ("runtimeVersion",),
            f"{runtime_version!r} is a CPU build of {chosen.image}; a GPU "
            f"endpoint needs its -gpu build, e.g. {chosen.tag}-gpu (or leave runtimeVersion out)",
        )
    return EndpointRuntime(chosen, runtime_version or f"{chosen.tag}-gpu", name_runtime=runtime is None)


def _chosen(
    runtimes: Mapping[str, ClusterServingRuntime],
    tenant_runtimes: Mapping[str, ClusterServingRuntime],
    kserve_version: str,
    *,
    runtime: str | None,
    model_format: str | None,
    protocol: str | None,
) -> ClusterServingRuntime:
    if runtime is not None:
        return _named(
            runtimes, tenant_runtimes, kserve_version, runtime=runtime, model_format=model_format, protocol=protocol
        )
    assert model_format is not None  # the spec requires modelFormat or runtime
    wanted = protocol or INFERENCE_PROTOCOL
    own = _candidates(tenant_runtimes, model_format, wanted)
    if len(own) > 1 and own[0][0] == own[1][0]:
        raise RuntimeRefusedError(
            ("runtime",),
            f"is required: the tenant's runtimes {own[0][1]} and {own[1][1]} both auto-select {model_format!r} at "
            "the same priority, and KServe would pick by creation time; name one",
        )
    selected = own[0][2] if own else auto_selected(runtimes, model_format, wanted)
    if selected is None:
        names = {f.name for r in runtimes.values() for f in r.formats}
        formats = sorted(name for name in names if auto_selected(runtimes, name, wanted) is not None)
        raise RuntimeRefusedError(
            ("modelFormat",),
            f"{model_format!r}: no ClusterServingRuntime of KServe "
            f"{kserve_version} is auto-selected for it under protocol {wanted} (formats: "
            f"{', '.join(formats)}); name a runtime that serves it",
        )
    return selected


def _named(
    runtimes: Mapping[str, ClusterServingRuntime],
    tenant_runtimes: Mapping[str, ClusterServingRuntime],
    kserve_version: str,
    *,
    runtime: str,
    model_format: str | None,
    protocol: str | None,
) -> ClusterServingRuntime:
    """The runtime an endpoint names: the tenant's of that name, else the cluster's."""
    chosen = tenant_runtimes.get(runtime) or runtimes.get(runtime)
    if chosen is None:
        own = f"; the tenant's: {', '.join(sorted(tenant_runtimes))}" if tenant_runtimes else ""
        raise RuntimeRefusedError(
            ("runtime",),
            f"{runtime!r} is not a ClusterServingRuntime KServe "
            f"{kserve_version} installs nor a servingRuntime of the tenant; installed: "
            f"{', '.join(sorted(runtimes))}{own}",
        )
    if chosen.multi_node:
        raise RuntimeRefusedError(
            ("runtime",),
            f"{runtime!r} serves one model across nodes "
            "(predictor.workerSpec), which gpucell does not render; use "
            "kserve-huggingfaceserver with tensor parallelism within one node",
        )
    if model_format is not None and not chosen.serves(model_format):
        served = ", ".join(dict.fromkeys(f.name for f in chosen.formats))
        raise RuntimeRefusedError(
            ("modelFormat",), f"{model_format!r} is not a model format of {runtime}; it serves {served}"
        )
    if protocol is not None and chosen.protocols and protocol not in chosen.protocols:
        raise RuntimeRefusedError(
            ("protocolVersion",),
            f"{protocol!r} is not a protocol of {runtime}, which speaks {', '.join(chosen.protocols)}; KServe "
            "refuses the endpoint (NoSupportingRuntime)",
        )
    return chosen
