"""The private Pulumi SDK internals the mock engine needs sit in one module, and an SDK upgrade that moves one fails
here, naming the installed SDK version (gpucell.engine._sdk_private)."""

from __future__ import annotations

import ast

import pytest
from pulumi.runtime import rpc

from gpucell.engine import _sdk_private as sdk
from tests.conftest import REPO


def test_every_internal_is_there_in_the_installed_sdk() -> None:
    assert sdk.check_sdk() == []
    assert sdk.sdk_version().startswith(f"{sdk.TESTED_SDK}.")


def test_a_moved_internal_is_one_line_naming_the_sdk_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(rpc, "_special_secret_sig")
    monkeypatch.setattr(sdk, "sdk_version", lambda: "3.299.1")
    assert sdk.check_sdk() == [
        "pulumi 3.299.1 (gpucell was checked against 3.272): pulumi.runtime.rpc._special_secret_sig is gone or not "
        "a string; update gpucell/engine/_sdk_private.py"
    ]


def _private_sdk_uses(tree: ast.AST) -> set[str]:
    """``pulumi...._name`` attributes and ``from pulumi... import _name`` in a module."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pulumi"):
            found |= {f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")}
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            base = ast.unparse(node.value)
            if base.split(".")[0] in {"pulumi", "rpc", "sync_await", "sdk_resource", "sdk_stack", "settings"}:
                found.add(f"{base}.{node.attr}")
    return found


def test_no_other_module_reaches_into_the_sdk() -> None:
    users = {}
    for path in sorted((REPO / "gpucell").rglob("*.py")):
        uses = _private_sdk_uses(ast.parse(path.read_text()))
        if uses:
            users[str(path.relative_to(REPO))] = uses
    assert set(users) == {"gpucell/engine/_sdk_private.py"}
    assert "sync_await._sync_await" in users["gpucell/engine/_sdk_private.py"]
