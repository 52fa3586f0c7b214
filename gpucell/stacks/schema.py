"""An editor JSON Schema for ``Pulumi.<stack>.yaml``, generated from the spec models.

Editors that speak JSON Schema (VS Code with Red Hat's YAML extension, JetBrains IDEs) then complete keys, show each
key's docstring and flag a wrong key or value while typing; ``docs/config.md`` says how to wire it. The schema
(JSON Schema 2020-12, what pydantic emits) covers:

- ``config.gpucell:regions``: every region's :class:`~gpucell.spec.CellSpec`, with enums, ranges and unknown keys
  rejected as the models do (cross-field rules, such as a MIG layout the GPU model lacks, are only checked by
  ``gpucell plan``);
- ``config.gpucell:gpuModels``: :class:`~gpucell.spec.gpu_models.GpuModelSpec` entries (the rules across models
  and the built-ins are ``gpucell plan``'s);
- ``config.gpucell:acknowledge``: :class:`~gpucell.day2.disruption.Acknowledgement` entries;
- any other ``config.gpucell:*`` key: a secret, ``{secure: <ciphertext>}`` (the SSH keys and credentials gpucell
  reads must be encrypted);
- keys of other namespaces and the stack file's own keys (``secretsprovider``, ``encryptedkey``...) are left to
  Pulumi.

Run ``gpucell schema --out schema/gpucell-stack.schema.json`` after a spec change; a test fails when the shipped
file is stale.
"""

from __future__ import annotations

import json
from ipaddress import IPv4Network
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gpucell.day2.disruption import Acknowledgement
from gpucell.spec import CellSpec
from gpucell.spec.gpu_models import GpuModelSpec
from gpucell.stacks.config import PROJECT

__all__ = ["SCHEMA_FILE", "render_schema", "stack_file_schema"]

SCHEMA_FILE = "schema/gpucell-stack.schema.json"
"""Where the schema is shipped, relative to the repository root."""


class _GpucellConfig(BaseModel):
    """The ``gpucell`` keys of a stack file's ``config``."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, use_attribute_docstrings=True)

    regions: dict[str, CellSpec] = Field(alias=f"{PROJECT}:regions", title="Regions", min_length=1)
    """Region name (a DNS-1123 label) -> the region's cell. See docs/config.md."""
    gpu_models: dict[str, GpuModelSpec] = Field(default={}, alias=f"{PROJECT}:gpuModels", title="GPU models")
    """GPU models of your own, beside the built-in ones, for every region: catalog name -> facts (docs/gpus.md)."""
    production: bool = Field(default=False, alias=f"{PROJECT}:production", title="Production")
    """One region, every component version pinned (docs/decisions/0034); default false (Pulumi.yaml declares it)."""
    other_cells: dict[str, list[IPv4Network]] = Field(default={}, alias=f"{PROJECT}:otherCells", title="Other cells")
    """Region -> networks of the fleet's cells other stacks deploy, denied to tenants; written once in Pulumi.yaml."""
    acknowledge: list[Acknowledgement] = Field(default=[], alias=f"{PROJECT}:acknowledge", title="Acknowledgements")
    """Disruptive changes the next `pulumi up` may apply (see docs/reviewing-changes.md)."""


_SECURE = {
    "type": "object",
    "description": "An encrypted value, as `pulumi config set --secret KEY` writes it.",
    "properties": {"secure": {"type": "string", "minLength": 1}},
    "required": ["secure"],
    "additionalProperties": False,
}


def stack_file_schema() -> dict[str, Any]:
    """The JSON Schema of a ``Pulumi.<stack>.yaml`` file as a dict."""
    config = _GpucellConfig.model_json_schema(by_alias=True, mode="validation")
    definitions = config.pop("$defs", {})
    definitions["Secure"] = _SECURE
    config.pop("title", None)
    config["description"] = (
        "Stack config. gpucell reads gpucell:regions, gpucell:gpuModels, gpucell:production, gpucell:otherCells, "
        "gpucell:acknowledge and the secret "
        "keys they name (gpucell:sshPrivateKey by default); other gpucell:* keys must be secrets."
    )
    config["required"] = [f"{PROJECT}:regions"]
    config["patternProperties"] = {
        f"^{PROJECT}:(?!regions$|gpuModels$|production$|otherCells$|acknowledge$)": {"$ref": "#/$defs/Secure"}
    }
    config["additionalProperties"] = True
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "gpucell stack file (Pulumi.<stack>.yaml)",
        "description": "Generated from gpucell's spec models by `gpucell schema`; do not edit by hand.",
        "type": "object",
        "properties": {
            "config": config,
            "secretsprovider": {"type": "string"},
            "encryptedkey": {"type": "string"},
            "encryptionsalt": {"type": "string"},
            "environment": {},
        },
        "required": ["config"],
        "$defs": dict(sorted(definitions.items())),
    }


def render_schema() -> str:
    """The schema file's text: 2-space indented JSON with a final newline."""
    return json.dumps(stack_file_schema(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    print(render_schema(), end="")
