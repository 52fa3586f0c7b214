"""The docs that are derived from code stay in step with it; the README keeps its two commands."""

from __future__ import annotations

from stacks import docgen
from tests.conftest import REPO


def test_config_reference_is_current() -> None:
    assert (REPO / "docs" / "config.md").read_text() == docgen.render(), (
        "docs/config.md is stale: run `python -m stacks.docgen > docs/config.md`"
    )


def test_config_reference_lists_every_key_in_camel_case() -> None:
    text = docgen.render()
    for key in ("`versions.k3s`", "`nodePools.*.gpuMode`", "`nodePools.*.hosts[].address`",
                "`gpuOperator.vgpuDriverImage.repository`", "`kserve.deploymentMode`", "`storage.backend`"):
        assert key in text


def test_readme_starts_with_the_two_commands_ci_runs() -> None:
    lines = (REPO / "README.md").read_text().splitlines()
    fence = lines.index("```sh")
    plan_command, test_command = lines[fence + 1], lines[fence + 2]
    assert plan_command == "python3 dev.py plan dev"
    assert test_command == "python3 dev.py test"
    assert test_command in (REPO / ".ci" / "run").read_text()
