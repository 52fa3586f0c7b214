"""The benchmark's baselines: the raw Pulumi SDK registering what a plan registered, or as many plain resources.

Both run under gpucell's mock engine (:func:`gpucell.engine.mock_engine.run_program`) with the same computed
outputs as the plan, so that the only difference to ``gpucell plan`` is gpucell's own work: reading and
validating config, rendering, building components, printing and writing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pulumi

from gpucell.engine.mock_engine import run_program
from gpucell.stacks.plan import make_plan

__all__ = ["floor", "record_registrations", "replay"]


def record_registrations(project: Path, stack: str, out: Path) -> None:
    """Plan ``stack`` and write what it registered, in order, as JSON (inputs unmasked: synthetic data only)."""
    plan = make_plan(project, stack)
    out.write_text(
        json.dumps(
            [
                {
                    "urn": r.urn,
                    "type": r.type,
                    "name": r.name,
                    "custom": r.custom,
                    "parent": r.parent,
                    "provider": r.provider,
                    "dependencies": r.dependencies,
                    "inputs": r.raw_inputs,
                    "secretPaths": r.secret_paths,
                    "options": r.options,
                }
                for r in plan.result.resources
            ]
        )
    )


def _with_secrets(inputs: dict[str, Any], paths: list[str]) -> dict[str, Any]:
    """``inputs`` with the value at each secret path wrapped in ``Output.secret``, as the program passed it."""
    for path in paths:
        parts = [int(p) if p.isdigit() else p for p in re.split(r"\.|\[(\d+)\]", path) if p]
        node: Any = inputs
        for part in parts[:-1]:
            node = node[part]
        node[parts[-1]] = pulumi.Output.secret(node[parts[-1]])
    return inputs


def _options(
    record: dict[str, Any], made: dict[str, pulumi.Resource], providers: dict[str, pulumi.ProviderResource]
) -> pulumi.ResourceOptions:
    options = record["options"]
    return pulumi.ResourceOptions(
        parent=made.get(record["parent"]),
        depends_on=[made[urn] for urn in record["dependencies"] if urn in made],
        provider=providers.get(record["provider"]) if record["custom"] else None,
        protect=options.get("protect"),
        retain_on_delete=options.get("retainOnDelete"),
        ignore_changes=options.get("ignoreChanges"),
        replace_on_changes=options.get("replaceOnChanges"),
        delete_before_replace=options.get("deleteBeforeReplace"),
        additional_secret_outputs=options.get("additionalSecretOutputs"),
    )


def replay(registrations: list[dict[str, Any]]) -> int:
    """Register ``registrations`` (from :func:`record_registrations`) with the raw SDK; returns how many."""

    def program() -> None:
        made: dict[str, pulumi.Resource] = {}
        providers: dict[str, pulumi.ProviderResource] = {}
        for record in registrations:
            opts = _options(record, made, providers)
            inputs = _with_secrets(record["inputs"], record["secretPaths"])
            kind = record["type"]
            if kind.startswith("pulumi:providers:"):
                resource: pulumi.Resource = pulumi.ProviderResource(kind.split(":")[2], record["name"], inputs, opts)
                providers[record["name"]] = resource  # type: ignore[assignment]
            elif record["custom"]:
                resource = pulumi.CustomResource(kind, record["name"], inputs, opts)
            else:
                component = pulumi.ComponentResource(kind, record["name"], None, opts)
                component.register_outputs({})
                resource = component
            made[record["urn"]] = resource

    return len(run_program(program, computed=_computed()).resources)


def floor(count: int) -> int:
    """Register ``count`` small ConfigMaps (no parent, no dependencies) with the raw SDK; returns how many."""

    def program() -> None:
        for index in range(count):
            name = f"cm-{index}"
            pulumi.CustomResource(
                "kubernetes:core/v1:ConfigMap",
                name,
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": name},
                    "data": {"key": "value"},
                },
            )

    return len(run_program(program).resources)


def _computed() -> Any:
    from gpucell.testing import provider_outputs  # noqa: PLC0415

    return provider_outputs()
