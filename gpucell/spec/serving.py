"""What a model endpoint runs besides KServe's built-in runtimes: a tenant's own ServingRuntimes, environment
variables, and the inference protocol.

- :class:`ServingRuntimeSpec` (``tenants.<tenant>.servingRuntimes.<name>``): a namespaced ``ServingRuntime``
  (``serving.kserve.io/v1alpha1``, checked against the v0.20.0 CRD ``config/crd/full/
  serving.kserve.io_servingruntimes.yaml``) in the tenant's namespace; admission treats it as it treats a built-in
  ClusterServingRuntime (:func:`gpucell.catalog.kserve_runtimes.resolve_runtime`).
- :class:`EnvVar`: a plain value, a secret stack config key of the tenant (gpucell keeps it in a Secret of the
  endpoint), or a key of a Secret the tenant keeps in its namespace.
- :class:`ProtocolVersion`: KServe v0.20.0's ``InferenceServiceProtocol`` values (``pkg/constants/constants.go``).
"""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import Field, StrictInt, field_validator, model_validator

from gpucell.errors import SpecError, shown
from gpucell.spec._base import SpecModel
from gpucell.spec._values import check_config_key, check_image_reference
from gpucell.spec.network import DNS_LABEL, DNS_SUBDOMAIN

__all__ = [
    "ENV_NAME",
    "EnvVar",
    "ModelFormat",
    "ProtocolVersion",
    "RuntimePort",
    "SecretKeyRef",
    "ServingRuntimeSpec",
    "check_env",
    "no_vllm_metrics",
]

ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
"""An environment variable name as Kubernetes validates it without ``RelaxedEnvironmentVariableValidation``
(``IsEnvVarName``): what every container runtime and shell handles."""
_SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]{1,253}")
"""A key of a Secret's ``data`` (Kubernetes ``IsConfigMapKey``)."""
_MODEL_FORMAT = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")
_VLLM_IMAGES = ("vllm/vllm-openai",)
"""Image repositories whose entrypoint is vLLM's OpenAI server (``vllm serve``; vllm-project/vllm ``docker/Dockerfile``
``vllm-openai`` stage)."""
_VLLM_COMMANDS = ("vllm.entrypoints.openai.api_server", "vllm")
"""A container command running vLLM's OpenAI server: ``python3 -m vllm.entrypoints.openai.api_server`` or
``vllm serve``."""


def _option(args: list[str], index: int) -> tuple[str, str | None]:
    """``args[index]`` as ``(--name, value)``, underscores read as dashes (vLLM's ``FlexibleArgumentParser`` and
    argparse prefixes aside): ``--backend=huggingface`` and ``--backend huggingface`` give the same."""
    name, eq, value = args[index].partition("=")
    name = "--" + name.removeprefix("--").replace("_", "-") if name.startswith("--") else name
    if eq:
        return name, value
    following = args[index + 1] if index + 1 < len(args) else None
    return name, following if following is not None and not following.startswith("-") else None


def no_vllm_metrics(args: list[str]) -> tuple[int, str] | None:
    """``(index, why)`` of the first of a model server's ``args`` that means no ``vllm:*`` metric exists, or None.

    - ``--disable-log-stats``: vLLM then creates no stat loggers, its Prometheus logger among them
      (vllm-project/vllm ``vllm/v1/engine/async_llm.py``: ``log_stats = not disable_log_stats``).
    - ``--backend huggingface``: KServe's huggingfaceserver then serves with transformers, not vLLM (kserve v0.20.0
      ``python/huggingfaceserver/huggingfaceserver/__main__.py`` lines 60-64 and 135).
    """
    for index in range(len(args)):
        name, value = _option(args, index)
        if name == "--disable-log-stats" and value in (None, "true", "True"):
            return index, "makes vLLM create no stat loggers (its Prometheus metrics among them)"
        if name == "--backend" and value == "huggingface":
            return index, "serves with transformers, not vLLM"
    return None


class ProtocolVersion(StrEnum):
    """KServe's inference protocols (``predictor.model.protocolVersion``; ServingRuntime ``protocolVersions``)."""

    V1 = "v1"
    V2 = "v2"
    GRPC_V1 = "grpc-v1"
    GRPC_V2 = "grpc-v2"


class SecretKeyRef(SpecModel):
    """A key of a Secret the tenant keeps in its own namespace (a container can read no other namespace's)."""

    name: str
    """The Secret's name (a DNS-1123 subdomain)."""
    key: str
    """The key in its ``data``."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not DNS_SUBDOMAIN.fullmatch(value):
            raise ValueError("is not a Secret name (a DNS-1123 subdomain)")
        return value

    @field_validator("key")
    @classmethod
    def _key(cls, value: str) -> str:
        if not _SECRET_KEY.fullmatch(value):
            raise ValueError("is not a Secret key (letters, digits, '-', '_', '.'; at most 253)")
        return value


class EnvVar(SpecModel):
    """One environment variable of the model container: exactly one of ``value``, ``secretConfigKey`` and
    ``secretKeyRef``."""

    name: str
    """Variable name (``HF_HUB_OFFLINE``, ``VLLM_ATTENTION_BACKEND``)."""
    value: str | None = None
    """A plain value; it is visible in the plan and the InferenceService: never a credential."""
    secret_config_key: str | None = None
    """Secret stack config key of this tenant holding the value (docs/security.md, "Who owns a secret"): gpucell
    keeps it in the Secret ``<endpoint>-env`` and the container reads it from there. Endpoints only."""
    secret_key_ref: SecretKeyRef | None = None
    """A key of a Secret the tenant keeps in its namespace (made outside gpucell); the pod does not start until it
    exists."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not ENV_NAME.fullmatch(value) or len(value) > 253:
            raise ValueError(
                "is not an environment variable name (letters, digits, '_', '-', '.', not starting with a digit)"
            )
        return value

    @field_validator("value")
    @classmethod
    def _value(cls, value: str | None) -> str | None:
        if value is not None and ("\x00" in value or len(value) > 32768):
            raise ValueError("holds a NUL character or is longer than 32768 characters")
        return value

    @field_validator("secret_config_key")
    @classmethod
    def _key(cls, value: str | None) -> str | None:
        return None if value is None else check_config_key(value)

    @model_validator(mode="after")
    def _exactly_one(self) -> EnvVar:
        given = [
            key
            for key, set_ in (
                ("value", self.value is not None),
                ("secretConfigKey", self.secret_config_key is not None),
                ("secretKeyRef", self.secret_key_ref is not None),
            )
            if set_
        ]
        if len(given) != 1:
            raise SpecError(
                (), f"give exactly one of value, secretConfigKey, secretKeyRef (got {', '.join(given) or 'none'})"
            )
        return self


def check_env(env: list[EnvVar], *, config_keys: bool = True) -> list[EnvVar]:
    """``env`` unless a name repeats (Kubernetes keeps the last, silently) or, without ``config_keys``, an entry
    names a ``secretConfigKey``. Raises :class:`SpecError` at the entry's index."""
    seen: dict[str, int] = {}
    for index, var in enumerate(env):
        if var.name in seen:
            raise SpecError((index, "name"), f"{shown(var.name)} is already env[{seen[var.name]}]")
        seen[var.name] = index
        if var.secret_config_key is not None and not config_keys:
            raise SpecError(
                (index, "secretConfigKey"),
                "only applies to an endpoint's env (gpucell keeps the value in the endpoint's Secret); "
                "use secretKeyRef to a Secret of the tenant",
            )
    return env


def _runtime_env(env: list[EnvVar]) -> list[EnvVar]:
    return check_env(env, config_keys=False)


class RuntimePort(SpecModel):
    """A port of the runtime's container."""

    container_port: StrictInt = Field(ge=1, le=65535)
    """Port number."""
    name: str | None = None
    """Port name (a DNS-1123 label of at most 15 characters); KServe serves a name with ``grpc`` or ``h2c`` as
    HTTP/2."""
    protocol: str = "TCP"
    """``TCP``. Defaults to ``TCP``."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and (len(value) > 15 or not DNS_LABEL.fullmatch(value)):
            raise ValueError("is not a port name (a DNS-1123 label of at most 15 characters)")
        return value

    @field_validator("protocol")
    @classmethod
    def _tcp(cls, value: str) -> str:
        if value != "TCP":
            raise ValueError("is not TCP; model servers are reached over TCP")
        return value


class ModelFormat(SpecModel):
    """One ``supportedModelFormats`` entry."""

    name: str
    """Format name, as endpoints name it in ``modelFormat`` (``huggingface``, ``onnx``)."""
    version: str | None = None
    """Format version (``"1"``)."""
    auto_select: bool = False
    """KServe picks this runtime for an endpoint naming only the format (KServe's default: false). The tenant's
    runtimes come before the cluster's in that choice (``GetSupportingRuntimes``)."""
    priority: StrictInt | None = Field(default=None, ge=1, le=2_147_483_647)
    """Among runtimes that auto-select the format, the highest wins."""

    @field_validator("name")
    @classmethod
    def _format(cls, value: str) -> str:
        if not _MODEL_FORMAT.fullmatch(value):
            raise ValueError("is not a model format name (letters, digits, '.', '_', '-'; e.g. huggingface)")
        return value

    @model_validator(mode="after")
    def _priority_needs_auto(self) -> ModelFormat:
        if self.priority is not None and not self.auto_select:
            raise SpecError(
                ("priority",), "only applies with autoSelect: true: KServe ranks auto-selected runtimes by it"
            )
        return self


class ServingRuntimeSpec(SpecModel):
    """A tenant's own model server, a namespaced ``ServingRuntime`` in its namespace with one container
    ``kserve-container``. Its endpoints name it in ``runtime`` (or KServe picks it for a format it auto-selects)."""

    image: str
    """Container image, pinned: a tag other than ``latest``, or a digest."""
    command: list[str] = []
    """Container command; defaults to the image's entrypoint."""
    args: list[str] = []
    """Container arguments; KServe replaces ``{{.Name}}`` with the endpoint's name."""
    ports: list[RuntimePort] = []
    """Container ports; the first is the one the endpoint's Service (port 80) sends to. Defaults to none: KServe's
    8080."""
    env: list[EnvVar] = []
    """Environment of the container: plain values or ``secretKeyRef`` (an endpoint adds its own)."""
    supported_model_formats: list[ModelFormat] = Field(min_length=1)
    """The formats it serves; an endpoint naming only the runtime gets the first."""
    protocol_versions: list[ProtocolVersion] = []
    """The protocols it speaks; empty: KServe takes it to speak any."""
    gpu_image: bool = False
    """The image runs on GPUs (a CUDA build): GPU endpoints may use it. Defaults to false (a GPU endpoint on it is
    refused unless it names a GPU build in ``runtimeVersion``)."""
    run_as_user: StrictInt | None = Field(default=None, ge=1, le=2_147_483_647)
    """UID the container runs as (``securityContext.runAsUser``), for an image whose own user is root but which
    runs as any user (vLLM's, with ``HF_HOME`` on a writable path): the tenant's namespace enforces Pod Security
    ``restricted``, which refuses root. Defaults to the image's user, which must then not be root."""

    @field_validator("image")
    @classmethod
    def _image(cls, value: str) -> str:
        check_image_reference(value)
        tag = value.rsplit("/", 1)[-1].partition("@")[0].partition(":")[2]
        if "@" not in value and tag in ("", "latest"):
            raise ValueError("has no pinned tag (latest or none); give a release tag or a digest")
        return value

    @field_validator("command", "args")
    @classmethod
    def _one_line(cls, values: list[str]) -> list[str]:
        for index, value in enumerate(values):
            if "\x00" in value:
                raise SpecError((index,), f"{shown(value)} holds a NUL character")
        return values

    _env = field_validator("env")(_runtime_env)

    @model_validator(mode="after")
    def _one_priority_per_format(self) -> ServingRuntimeSpec:
        """KServe's ServingRuntime webhook denies a runtime listing one auto-selected format with two priorities
        (``validateModelFormatPrioritySame``, v0.20.0 ``servingruntime_webhook.go``)."""
        seen: dict[str, int | None] = {}
        for index, entry in enumerate(self.supported_model_formats):
            if not entry.auto_select:
                continue
            first = seen.setdefault(entry.name, entry.priority)
            if first is not None and entry.priority is not None and first != entry.priority:
                raise SpecError(
                    ("supportedModelFormats", index, "priority"),
                    f"{entry.priority} differs from the priority {first} this runtime already gives {entry.name!r}; "
                    "KServe's webhook refuses the runtime",
                )
        return self

    @model_validator(mode="after")
    def _unique_ports(self) -> ServingRuntimeSpec:
        seen: set[int] = set()
        for index, port in enumerate(self.ports):
            if port.container_port in seen:
                raise SpecError(("ports", index, "containerPort"), f"{port.container_port} is already a port")
            seen.add(port.container_port)
        return self

    @property
    def runs_vllm(self) -> bool:
        """The container runs vLLM's OpenAI server (so exports ``vllm:*`` metrics unless its args say otherwise): its
        ``command`` is ``python3 -m vllm.entrypoints.openai.api_server`` or ``vllm serve``, or, with no command, its
        image is ``vllm/vllm-openai`` (whose entrypoint is ``vllm serve``)."""
        if self.command:
            argv = [*self.command, *self.args]
            module = argv[argv.index("-m") + 1] if "-m" in argv[:-1] else None
            program = argv[0].rsplit("/", 1)[-1]
            return module == _VLLM_COMMANDS[0] or (program == _VLLM_COMMANDS[1] and argv[1:2] == ["serve"])
        name = self.image.partition("@")[0]
        slash = name.rfind("/")
        repository = name[: slash + 1] + name[slash + 1 :].partition(":")[0]
        return repository.removeprefix("docker.io/") in _VLLM_IMAGES

    @property
    def serving_port(self) -> int:
        """The port the endpoint's Service sends to: the first of ``ports``, else KServe's 8080
        (``service_reconciler.go`` ``createDefaultSvc`` at v0.20.0)."""
        return self.ports[0].container_port if self.ports else 8080
