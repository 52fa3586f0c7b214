"""Every private Pulumi SDK internal gpucell relies on, in one place, for the mock engine only.

The offline plan and :mod:`gpucell.testing` run programs under ``pulumi.runtime.set_mocks`` (the SDK's documented
unit-testing hook) and need a few things the SDK does not export: running the program's coroutine to completion
outside the Pulumi CLI, reading the wire form of a secret, clearing process-wide state a failed program leaves
behind, and skipping the per-registration stack capture (decision 0016). Nothing on the ``pulumi up`` path imports
this module (tests/test_structure.py keeps it in the test-kit layer).

:func:`check_sdk` names each internal and the SDK version that was installed when one is missing or changed shape;
``tests/test_sdk_private.py`` calls it, so an SDK upgrade that moves one fails loudly in one test, not as a puzzling
error somewhere in a plan. Checked against pulumi 3.272 (``pulumi/runtime/{rpc,sync_await,stack,settings,
resource}.py``).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pulumi.runtime import resource as sdk_resource
from pulumi.runtime import rpc, settings, sync_await
from pulumi.runtime import stack as sdk_stack

__all__ = [
    "SECRET_SIG",
    "SIG_KEY",
    "TESTED_SDK",
    "check_sdk",
    "clear_pending_outputs",
    "run_program_function",
    "run_to_completion",
    "sdk_version",
    "stack_trace_hook",
]

T = TypeVar("T")

TESTED_SDK = "3.272"
"""The pulumi SDK minor these internals were read from (pyproject.toml pins ``pulumi>=3.272,<3.273``)."""

SIG_KEY: str = rpc._special_sig_key
"""Key of the signature that marks a special value on the wire (``"4dabf18193072939515e22adb298388d"``)."""
SECRET_SIG: str = rpc._special_secret_sig
"""Signature value of a secret on the wire (``{SIG_KEY: SECRET_SIG, "value": ...}``)."""


def sdk_version() -> str:
    """The installed pulumi SDK's version, e.g. ``"3.272.0"``."""
    return importlib.metadata.version("pulumi")


def run_to_completion(awaitable: Awaitable[T]) -> T:
    """Run ``awaitable`` on the SDK's event loop until it completes (the SDK's own ``_sync_await``)."""
    return sync_await._sync_await(awaitable)


def run_program_function(program: Callable[[], Awaitable[None]]) -> Awaitable[None]:
    """The SDK's wrapper that runs a program function and waits for every registration it started."""
    return sdk_stack.run_pulumi_func(program)


def clear_pending_outputs() -> None:
    """Drop the output tasks and RPCs a failed program left in the process-wide settings (``set_mocks`` keeps
    them, and they would fail the next run)."""
    settings.SETTINGS.outputs.clear()
    settings.SETTINGS.rpc_manager.clear()


class _StackTraceHook:
    """Get and set the SDK's per-registration stack capture function (``runtime/resource.py``)."""

    name = "_get_stack_trace"

    def get(self) -> Callable[[], Any] | None:
        return getattr(sdk_resource, self.name, None)

    def set(self, function: Callable[[], Any]) -> None:
        setattr(sdk_resource, self.name, function)


stack_trace_hook = _StackTraceHook()
"""The SDK's ``_get_stack_trace`` (``None`` from :meth:`get` on an SDK without it: the capture is then left alone)."""


def check_sdk() -> list[str]:
    """One line per internal above that the installed SDK no longer has in the shape read, naming its version.

    Empty when all are there. Each line says: ``pulumi <version> (gpucell was checked against <TESTED_SDK>):
    <internal> <what changed>; update gpucell/engine/_sdk_private.py``.
    """
    problems: list[tuple[str, str]] = []
    if not isinstance(getattr(rpc, "_special_sig_key", None), str):
        problems.append(("pulumi.runtime.rpc._special_sig_key", "is gone or not a string"))
    if not isinstance(getattr(rpc, "_special_secret_sig", None), str):
        problems.append(("pulumi.runtime.rpc._special_secret_sig", "is gone or not a string"))
    if not callable(getattr(sync_await, "_sync_await", None)):
        problems.append(("pulumi.runtime.sync_await._sync_await", "is gone"))
    if not callable(getattr(sdk_stack, "run_pulumi_func", None)):
        problems.append(("pulumi.runtime.stack.run_pulumi_func", "is gone"))
    for attribute in ("outputs", "rpc_manager"):
        if not callable(getattr(getattr(settings.SETTINGS, attribute, None), "clear", None)):
            problems.append((f"pulumi.runtime.settings.SETTINGS.{attribute}", "has no clear()"))
    if not callable(stack_trace_hook.get()):
        problems.append(("pulumi.runtime.resource._get_stack_trace", "is gone (the plan still works, slower)"))
    version = sdk_version()
    return [
        f"pulumi {version} (gpucell was checked against {TESTED_SDK}): {internal} {change}; update "
        "gpucell/engine/_sdk_private.py"
        for internal, change in problems
    ]
