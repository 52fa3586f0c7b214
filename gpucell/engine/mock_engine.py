"""Run a Pulumi program in-process under Pulumi's mock engine and record every registration.

This is Pulumi's documented unit-testing mechanism (``pulumi.runtime.set_mocks``) with a monitor that keeps what
the engine would have received: type token, name, parent, provider, explicit dependencies and inputs, with secret
inputs still marked. The offline plan and the tests both run programs through :func:`run_program`.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pulumi
from pulumi.runtime import mocks, rpc
from pulumi.runtime.proto import resource_pb2, source_pb2

from gpucell.engine import _sdk_private as sdk

__all__ = [
    "ORGANIZATION",
    "SECRET",
    "SECRET_DIGEST_SALT",
    "UNKNOWN",
    "PlanResult",
    "Registration",
    "resource_options",
    "run_program",
    "secret_digest",
]

SECRET = "[secret]"
"""What every secret value is replaced by in recorded inputs and outputs."""
UNKNOWN = "[unknown]"
"""What a value unknown at preview time is replaced by."""
ORGANIZATION = "organization"
"""``pulumi.get_organization()`` under the mocks: what the Pulumi CLI passes on a DIY backend."""

_SECRET_SIG = sdk.SECRET_SIG
_SIG_KEY = sdk.SIG_KEY


@dataclass
class Registration:
    """One registered resource as the engine would have seen it."""

    urn: str
    type: str
    name: str
    parent: str
    provider: str
    dependencies: list[str]
    custom: bool
    inputs: dict[str, Any]
    """Inputs with each secret replaced by ``"[secret]"`` (what plans and rendered files show)."""
    raw_inputs: dict[str, Any] = field(repr=False)
    """Inputs with secrets unwrapped: for tests that must check a secret's *value* reached the right place."""
    secret_paths: list[str] = field(default_factory=list)
    """Dotted paths of the inputs that were secret."""
    secret_digests: dict[str, str] = field(default_factory=dict)
    """Secret path -> :func:`secret_digest` of its value: lets ``gpucell diff`` say that a secret input changed
    without showing it."""
    options: dict[str, Any] = field(default_factory=dict)
    """The resource options the engine received that differ from Pulumi's defaults (see :func:`resource_options`):
    ``protect``, ``retainOnDelete``, ``ignoreChanges``, ``replaceOnChanges``, ``deleteBeforeReplace``,
    ``aliases``, ``customTimeouts``, ``deletedWith``, ``additionalSecretOutputs``."""

    def masked_inputs(self) -> dict[str, Any]:
        """Inputs in their real shape with every string under a secret path replaced by ``"[secret]"``.

        What schema checks read: a Secret's ``stringData`` stays a map (``inputs`` has the string ``"[secret]"``
        there), yet no secret text can reach a message.
        """
        masked = copy.deepcopy(self.raw_inputs)
        for path in self.secret_paths:
            parts = [int(p) if p.isdigit() else p for p in re.split(r"\.|\[(\d+)\]", path) if p]
            parent: Any = masked
            for part in parts[:-1]:
                parent = parent[part]
            parent[parts[-1]] = _mask(parent[parts[-1]])
        return masked


@dataclass
class PlanResult:
    """Everything one program run registered, in registration order, and the stack outputs.

    Lookups by URN, name and parent go through indexes built on first use (a plan of thousands of resources is
    walked many times when it is printed and written), so ``resources`` must not change afterwards.
    """

    resources: list[Registration]
    outputs: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    """What the program logged at warning level or above (``pulumi.log.warn``), in order: what ``pulumi preview``
    prints as warnings."""

    @cached_property
    def _by_urn(self) -> dict[str, Registration]:
        return {r.urn: r for r in self.resources}

    @cached_property
    def _by_name(self) -> dict[str, list[Registration]]:
        index: dict[str, list[Registration]] = {}
        for r in self.resources:
            index.setdefault(r.name, []).append(r)
        return index

    @cached_property
    def _children(self) -> dict[str, list[Registration]]:
        index: dict[str, list[Registration]] = {}
        for r in self.resources:
            index.setdefault(r.parent, []).append(r)
        return index

    def of_type(self, type_token: str) -> list[Registration]:
        """Registrations whose Pulumi type token is ``type_token``."""
        return [r for r in self.resources if r.type == type_token]

    def named(self, name: str) -> Registration:
        """The first registration called ``name``. Raises ``KeyError`` when there is none."""
        found = self._by_name.get(name)
        if not found:
            raise KeyError(f"no resource named {name!r}; have {[r.name for r in self.resources]}")
        return found[0]

    def by_urn(self, urn: str) -> Registration:
        """The registration with ``urn``. Raises ``KeyError`` when there is none."""
        return self._by_urn[urn]

    def children(self, parent: Registration) -> list[Registration]:
        """Direct children of ``parent``, in registration order."""
        return list(self._children.get(parent.urn, ()))

    def descendants(self, root: Registration) -> Iterator[Registration]:
        """Every registration below ``root`` in the component tree, depth first (no recursion limit)."""
        stack = list(reversed(self._children.get(root.urn, ())))
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(self._children.get(node.urn, ())))


def resource_options(request: Any) -> dict[str, Any]:
    """The lifecycle options of a ``RegisterResourceRequest`` that differ from Pulumi's defaults, by their
    ``ResourceOptions`` names in camelCase, in a fixed order.

    ``aliases`` lists each alias as the engine got it: a URN string, or ``{"name", "type", "parentUrn", "project",
    "stack", "noParent"}`` with only the parts the alias sets. ``customTimeouts`` holds the set ones of
    ``create``/``update``/``delete`` (Go duration strings such as ``"30m"``).
    """
    options: dict[str, Any] = {}
    if request.protect:
        options["protect"] = True
    if request.retainOnDelete:
        options["retainOnDelete"] = True
    if request.deleteBeforeReplace:
        options["deleteBeforeReplace"] = True
    for key, values in (
        ("ignoreChanges", request.ignoreChanges),
        ("replaceOnChanges", request.replaceOnChanges),
        ("additionalSecretOutputs", request.additionalSecretOutputs),
    ):
        if values:
            options[key] = sorted(set(values))
    aliases = [*request.aliasURNs, *(_alias(a) for a in request.aliases)]
    if aliases:
        options["aliases"] = aliases
    timeouts = {
        k: getattr(request.customTimeouts, k)
        for k in ("create", "update", "delete")
        if request.HasField("customTimeouts") and getattr(request.customTimeouts, k)
    }
    if timeouts:
        options["customTimeouts"] = timeouts
    if request.deletedWith:
        options["deletedWith"] = request.deletedWith
    return options


def _alias(alias: Any) -> str | dict[str, Any]:
    if alias.HasField("urn"):
        return str(alias.urn)
    spec = alias.spec
    out: dict[str, Any] = {k: getattr(spec, k) for k in ("name", "type", "project", "stack") if getattr(spec, k)}
    if spec.HasField("parentUrn") and spec.parentUrn:
        out["parentUrn"] = spec.parentUrn
    if spec.HasField("noParent") and spec.noParent:
        out["noParent"] = True
    return out


def _mask(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _mask(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v) for v in value]
    return SECRET if isinstance(value, str) else value


def _is_secret(value: Any) -> bool:
    return isinstance(value, dict) and value.get(_SIG_KEY) == _SECRET_SIG


SECRET_DIGEST_SALT = b"gpucell plan secret digest v1\0"
"""Prefixed to every digested value, so that a digest matches no other tool's hash of the same text."""


def secret_digest(value: Any) -> str:
    """``sha256:<16 hex digits>`` of a secret input's value (canonical JSON, :data:`SECRET_DIGEST_SALT` first).

    Only for the offline plan, whose secret values are never real secrets: ``secure:`` config values are
    placeholders derived from their ciphertext (:func:`gpucell.stacks.plan.placeholder`), mock outputs are fakes,
    and the rest is plain stack config made secret by a provider's schema (an SSH ``connection``'s host, user
    and port). So two plans' digests differ exactly when the secret input changed, and reveal nothing the stack
    files do not.
    """
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(SECRET_DIGEST_SALT + text.encode()).hexdigest()[:16]


def _scrub(value: Any, path: str, secret_paths: list[str], reveal: bool, digests: dict[str, str] | None = None) -> Any:
    """Replace secrets (or unwrap them when ``reveal``) and unknowns, recursively; with ``digests``, record the
    :func:`secret_digest` of each known secret by its path."""
    if _is_secret(value):
        secret_paths.append(path)
        inner = value["value"]
        if isinstance(inner, pulumi.output.Unknown):
            return UNKNOWN  # a preview shows that the value is not known yet, secret or not
        if reveal:
            return _scrub(inner, path, [], reveal)
        if digests is not None:
            digests[path] = secret_digest(_scrub(inner, path, [], reveal=True))
        return SECRET
    if isinstance(value, pulumi.output.Unknown):
        return UNKNOWN
    if isinstance(value, dict):
        return {k: _scrub(v, f"{path}.{k}" if path else k, secret_paths, reveal, digests) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, f"{path}[{i}]", secret_paths, reveal, digests) for i, v in enumerate(value)]
    if isinstance(value, pulumi.Resource):
        return "[resource]"
    if isinstance(value, float) and value.is_integer():
        return int(value)  # the wire carries every number as a double
    return value


class _RecordingMonitor(mocks.MockMonitor):
    def __init__(self, mocks_: mocks.Mocks) -> None:
        super().__init__(mocks_)
        self.registrations: list[Registration] = []
        self.root_urn = ""

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 - gRPC method name
        if request.type == "pulumi:pulumi:Stack":
            response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
            self.root_urn = response.urn
            return response
        urn = self.make_urn(request.parent, request.type, request.name)
        inputs = rpc.deserialize_properties(request.object, keep_unknowns=True)
        id_, state = self.mocks.new_resource(
            mocks.MockResourceArgs(
                typ=request.type,
                name=request.name,
                inputs=rpc.deserialize_properties(request.object),
                provider=request.provider,
                resource_id=request.importId,
                custom=request.custom or False,
            )
        )
        # The engine marks a provider's declared secret outputs (``additionalSecretOutputs``) as secret; so do we.
        for key in request.additionalSecretOutputs:
            if key in state and not _is_secret(state[key]):
                state[key] = rpc.wrap_rpc_secret(state[key])
        self.resources[urn] = mocks.MockMonitor.ResourceRegistration(urn, id_ or "", state)
        self._record(urn, request, inputs)
        obj = sdk.run_to_completion(rpc.serialize_properties(state, {}))
        return resource_pb2.RegisterResourceResponse(urn=urn, id=id_ or "", object=obj)

    def _record(self, urn: str, request: Any, inputs: dict[str, Any]) -> None:
        secret_paths: list[str] = []
        digests: dict[str, str] = {}
        shown = _scrub(inputs, "", secret_paths, reveal=False, digests=digests)
        self.registrations.append(
            Registration(
                urn=urn,
                type=request.type,
                name=request.name,
                parent=request.parent,
                provider=request.provider.split("::")[-2] if request.provider else "",
                dependencies=sorted(set(request.dependencies)),
                custom=request.custom,
                inputs=shown,
                raw_inputs=_scrub(inputs, "", [], reveal=True),
                secret_paths=secret_paths,
                secret_digests=digests,
                options=resource_options(request),
            )
        )


class _PlanMocks(mocks.Mocks):
    """Echo inputs back as state; outputs a real provider computes come from ``computed``."""

    def __init__(
        self,
        computed: Callable[[mocks.MockResourceArgs], dict[str, Any]] | None,
        invoked: Callable[[mocks.MockCallArgs], dict[str, Any]] | None = None,
    ) -> None:
        self._computed = computed
        self._invoked = invoked

    def new_resource(self, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        state = dict(args.inputs)
        if self._computed is not None:
            state.update(self._computed(args))
        return f"{args.name}-id", state

    def call(self, args: mocks.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        # An empty failure list, not None: the SDK's MockMonitor iterates it (pulumi 3.272 runtime/mocks.py Invoke).
        return (self._invoked(args) if self._invoked is not None else {}), []


def run_program(
    program: Callable[[], Any],
    *,
    project: str = "gpucell",
    stack: str = "test",
    config: Mapping[str, Any] | None = None,
    secret_keys: list[str] | None = None,
    preview: bool = False,
    computed: Callable[[mocks.MockResourceArgs], dict[str, Any]] | None = None,
    invoked: Callable[[mocks.MockCallArgs], dict[str, Any]] | None = None,
) -> PlanResult:
    """Run ``program`` under fresh mocks and return what it registered.

    ``config`` maps full config keys (``gpucell:regions``) to values (objects are JSON-encoded as the Pulumi CLI
    passes them); ``secret_keys`` lists the keys that are secret. With ``preview=True`` outputs the engine would
    compute are unknown, as in the first ``pulumi preview`` of a new region. ``computed`` returns extra state
    for a registration (what a real provider would compute, e.g. a command's ``stdout``); ``invoked`` answers an
    invoke (``args.token``, ``args.args``), ``{}`` without it (the guard's ``pulumi:pulumi:readStackOutputs``
    then reads no previous deployment).
    Exceptions raised by ``program`` propagate unchanged.
    """
    # A program that failed leaves its pending output tasks in the process-wide settings; set_mocks does not
    # clear them, and they would fail the next run.
    sdk.clear_pending_outputs()
    pulumi.runtime.set_all_config(
        {k: v if isinstance(v, str) else json.dumps(v) for k, v in (config or {}).items()},
        secret_keys or [],
    )
    monitor = _RecordingMonitor(_PlanMocks(computed, invoked))
    outputs: dict[str, Any] = {}
    warnings = _WarningRecorder()
    logger = logging.getLogger("gpucell.plan")
    logger.addHandler(warnings)
    mocks.set_mocks(
        monitor.mocks,
        project=project,
        stack=stack,
        preview=preview,
        monitor=monitor,
        logger=logger,
        organization=ORGANIZATION,
    )
    try:
        with _no_stack_traces():
            sdk.run_to_completion(sdk.run_program_function(lambda: _run_in_stack(program, outputs)))
    finally:
        pulumi.runtime.set_all_config({}, [])
        logger.removeHandler(warnings)
    # A copy: a resource built after the program ended (outside any run, e.g. by a test) still reaches the last
    # mocks' monitor, and must not join a plan already returned.
    return PlanResult(resources=list(monitor.registrations), outputs=outputs, warnings=list(warnings.messages))


@contextmanager
def _no_stack_traces() -> Iterator[None]:
    """Skip the SDK's stack capture per registration while a program runs under this engine.

    For every resource the SDK walks the whole Python stack (``traceback.extract_stack``, reading each frame's
    source line) and turns every frame below the constructor into a file URI, for the engine's ``sourcePosition``
    and ``stackTrace`` fields (pulumi 3.272 ``pulumi/runtime/resource.py`` ``_get_stack_trace``), which the Pulumi
    service shows and this engine never reads. A component-built cell registers from deep stacks, so this was
    about a tenth of a plan. The original function is put back afterwards; an SDK without it is left as it is.
    """
    original = sdk.stack_trace_hook.get()
    if original is None:
        yield
        return
    sdk.stack_trace_hook.set(source_pb2.StackTrace)
    try:
        yield
    finally:
        sdk.stack_trace_hook.set(original)


class _WarningRecorder(logging.Handler):
    """Keeps the messages the mock engine logs at warning level or above (``pulumi.log.warn``/``error``)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


async def _run_in_stack(program: Callable[[], Any], into: dict[str, Any]) -> None:
    """Run ``program``, then resolve what it exported, replacing secrets and unknowns as plans show them."""
    program()
    stack = pulumi.runtime.get_root_resource()
    for key, value in getattr(stack, "outputs", {}).items():
        output = pulumi.Output.from_input(value)
        known, secret = await output.is_known(), await output.is_secret()
        resolved = await output.future(with_unknowns=True)
        into[key] = UNKNOWN if not known else SECRET if secret else _scrub(resolved, key, [], reveal=True)
