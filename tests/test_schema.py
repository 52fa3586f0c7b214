"""The editor JSON Schema of ``Pulumi.<stack>.yaml``: shipped, current, and it accepts what the program accepts."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest
import yaml

from gpucell.stacks import cli
from gpucell.stacks.schema import SCHEMA_FILE, render_schema
from tests.conftest import REPO

SCHEMA = json.loads((REPO / SCHEMA_FILE).read_text())


def errors(document: Any) -> list[tuple[str, str]]:
    validator = jsonschema.Draft202012Validator(SCHEMA)
    return sorted((".".join(str(p) for p in e.absolute_path), e.message) for e in validator.iter_errors(document))


def stack_file(stack: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((REPO / f"Pulumi.{stack}.yaml").read_text())
    return loaded


def test_shipped_schema_is_current() -> None:
    assert (REPO / SCHEMA_FILE).read_text() == render_schema(), (
        f"{SCHEMA_FILE} is stale: run `gpucell schema --out {SCHEMA_FILE}`"
    )


def test_schema_is_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("stack", ["dev", "prod-fra1", "prod-iad1"])
def test_schema_accepts_the_stack_files_with_their_secure_values(stack: str) -> None:
    document = stack_file(stack)
    assert any(isinstance(v, dict) and "secure" in v for v in document["config"].values())
    assert errors(document) == []


def test_schema_rejects_a_wrong_enum_an_unknown_key_and_a_plain_secret() -> None:
    document = stack_file("dev")
    wrong = copy.deepcopy(document)
    wrong["config"]["gpucell:regions"]["lab1"]["nodePools"]["l40s"]["gpuMode"] = "passthrough"
    assert errors(wrong) == [
        (
            "config.gpucell:regions.lab1.nodePools.l40s.gpuMode",
            "'passthrough' is not valid under any of the given schemas",
        )
    ]
    typo = copy.deepcopy(document)
    typo["config"]["gpucell:regions"]["lab1"]["network"]["podCIDR"] = "10.42.0.0/16"
    assert errors(typo) == [
        ("config.gpucell:regions.lab1.network", "Additional properties are not allowed ('podCIDR' was unexpected)")
    ]
    plain = copy.deepcopy(document)
    plain["config"]["gpucell:sshPrivateKey"] = "-----BEGIN OPENSSH PRIVATE KEY-----"
    assert errors(plain) == [
        ("config.gpucell:sshPrivateKey", "'-----BEGIN OPENSSH PRIVATE KEY-----' is not of type 'object'")
    ]


def test_schema_knows_acknowledgements() -> None:
    document = stack_file("dev")
    document["config"]["gpucell:acknowledge"] = [{"change": "podCidr", "region": "lab1", "reason": "CHG-1"}]
    assert errors(document) == []
    document["config"]["gpucell:acknowledge"] = [{"change": "podCIDR", "region": "lab1", "reason": "CHG-1"}]
    assert [path for path, _ in errors(document)] == ["config.gpucell:acknowledge.0.change"]


def test_schema_command_writes_the_file(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["schema", "--out", str(tmp_path / "s.json")]) == 0
    assert (tmp_path / "s.json").read_text() == render_schema()
    assert cli.main(["schema"]) == 0
    assert capsys.readouterr().out.endswith(render_schema())


def test_schema_knows_gpu_models() -> None:
    """docs/gpus.md's stack example is valid for the schema; a typo in a model's key and an unknown NVSwitch name are
    not."""
    body = (REPO / "docs" / "gpus.md").read_text().split("```yaml\n", 1)[1].split("```", 1)[0]
    document = stack_file("dev")
    document["config"].update(yaml.safe_load(body)["config"])
    assert errors(document) == []
    model = document["config"]["gpucell:gpuModels"]["H800-PCIe-80GB"]
    model["hgx"] = {"gpus": 8, "nvswitch": "GH100", "nvswitches": 4}
    assert errors(document) == []
    model["hgx"]["nvswitch"] = {"pciDeviceId": "22a4", "pciDeviceName": "GH100 [Next NVSwitch]"}
    assert errors(document) == []
    model["framebufferMiB"] = model.pop("framebufferMib")
    where = "config.gpucell:gpuModels.H800-PCIe-80GB"
    assert errors(document) == [
        (where, "'framebufferMib' is a required property"),
        (where, "Additional properties are not allowed ('framebufferMiB' was unexpected)"),
    ]
