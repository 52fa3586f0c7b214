"""The docs that are derived from code stay in step with it; the README keeps its two commands; the tenant config
snippets of docs/workloads.md validate and its error lines are the ones the tests assert."""

from __future__ import annotations

import ast
import copy
import os
import re
import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucell.errors import ConfigError
from gpucell.spec import StackSpec
from tests.conftest import REPO, prod_regions
from tools import component_pages, docgen


def test_config_reference_is_current() -> None:
    assert (REPO / "docs" / "config.md").read_text() == docgen.render(), (
        "docs/config.md is stale: run `python -m tools.docgen > docs/config.md`"
    )


def test_config_reference_lists_every_key_in_camel_case() -> None:
    text = docgen.render()
    for key in (
        "`versions.k3s`",
        "`nodePools.*.gpuMode`",
        "`nodePools.*.hosts[].address`",
        "`gpuOperator.vgpuDriverImage.repository`",
        "`kserve.deploymentMode`",
        "`storage.backend`",
    ):
        assert key in text


def test_config_reference_shows_no_generator_internals() -> None:
    text = docgen.render()
    assert not re.findall(r":(?:class|meth|func|data|attr|mod):`", text), "a Sphinx role reached docs/config.md"
    assert "<class " not in text
    assert "typing." not in text
    assert "| `metrics.values` | map of string to any |" in text
    assert "in the `ClusterFacts` of a cluster gpucell did not build" in text


def test_sphinx_roles_become_code_and_private_ones_go() -> None:
    assert docgen.plain_markdown("see :class:`~gpucell.spec.Quarantine` (:data:`SERVER_TAINT`)") == (
        "see `Quarantine` (`SERVER_TAINT`)"
    )
    assert docgen.plain_markdown("Refused: see :meth:`_rule`. Kept.") == "Refused. Kept."
    assert docgen.plain_markdown(":meth:`Spec.from_cell <gpucell.spec.Spec.from_cell>`") == "`Spec.from_cell`"
    assert docgen.plain_markdown("``dra`` is refused (see :meth:`Spec._rule`)") == "`dra` is refused"


def test_nested_defaults_are_those_of_the_key_that_holds_them() -> None:
    """A tenant cluster's workers default to ``cpu: {cores: 4}``, a VM's CPU topology to 2 cores: the reference
    gives each key its own default, not the nested model's."""
    from gpucell.spec.tenant_clusters import WorkerPoolSpec
    from gpucell.spec.workloads import CpuTopology

    assert WorkerPoolSpec(replicas=1).cpu.cores == 4
    assert CpuTopology().cores == 2
    rows = {
        line.split(" | ")[0]: line.split(" | ")[3] for line in docgen.render().splitlines() if line.startswith("| `")
    }
    assert rows["| `tenants.*.tenantClusters.*.workerPools.*.cpu.cores`"] == "`4`"
    assert rows["| `tenants.*.tenantClusters.*.controlPlane.cpu.cores`"] == "`2`"
    assert rows["| `tenants.*.virtualMachines.*.cpu.cores`"] == "`2`"


def test_readme_starts_with_the_two_commands_plan_first() -> None:
    lines = (REPO / "README.md").read_text().splitlines()
    fence = lines.index("```sh")
    assert lines[fence + 1 : fence + 4] == ["python3 dev.py plan dev", "python3 dev.py test", "```"]


def test_ci_runs_the_readme_commands_in_order(tmp_path: Path) -> None:
    """``.ci/run`` for real under bash, with ``python3`` stubbed to record what it is asked to run."""
    (tmp_path / ".ci").mkdir()
    shutil.copy(REPO / ".ci" / "run", tmp_path / ".ci" / "run")
    shutil.copy(REPO / "README.md", tmp_path / "README.md")
    stubs = tmp_path / "bin"
    stubs.mkdir()
    log = tmp_path / "calls.log"
    (stubs / "python3").write_text(f'#!/usr/bin/env bash\necho "$PWD $*" >> {log}\n')
    (stubs / "python3").chmod(0o755)
    done = subprocess.run(
        ["bash", str(tmp_path / ".ci" / "run")],
        env={**os.environ, "PATH": f"{stubs}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert log.read_text().splitlines() == [f"{tmp_path} dev.py plan dev", f"{tmp_path} dev.py test"]


def test_ci_installs_promtool_when_missing(tmp_path: Path) -> None:
    """Without promtool, ``.ci/run`` installs Debian's prometheus package before the README's commands."""
    (tmp_path / ".ci").mkdir()
    shutil.copy(REPO / ".ci" / "run", tmp_path / ".ci" / "run")
    shutil.copy(REPO / "README.md", tmp_path / "README.md")
    stubs = tmp_path / "bin"
    stubs.mkdir()
    log = tmp_path / "calls.log"
    for program in ("python3", "apt-get", "sudo"):
        body = 'exec "$@"' if program == "sudo" else f'echo "{program} $*" >> {log}'
        (stubs / program).write_text(f"#!/usr/bin/env bash\n{body}\n")
        (stubs / program).chmod(0o755)
    env = {**os.environ, "PATH": f"{stubs}:/usr/bin:/bin", "GPUCELL_CI_PROMTOOL": "promtool-not-installed"}
    done = subprocess.run(["bash", str(tmp_path / ".ci" / "run")], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert log.read_text().splitlines() == [
        "apt-get update -qq",
        "apt-get install -y -qq --no-install-recommends prometheus",
        "python3 dev.py plan dev",
        "python3 dev.py test",
    ]


# -- docs/workloads.md: the tenant config snippets validate, the error lines are the ones the tests assert -------

WORKLOADS_DOC = (REPO / "docs" / "workloads.md").read_text()
PROD_REGIONS: dict[str, Any] = prod_regions()
SNIPPET_HEADER = re.compile(
    r"# (?P<source>[^\n]+?), under gpucell:regions\.(?P<region>[a-z0-9-]+)\.(?P<path>tenants(?:\.[a-z0-9-]+)*)"
)
"""First line of a tenant config snippet: ``# Pulumi.prod-fra1.yaml, under gpucell:regions.fra1.tenants.acme`` (then
the snippet is part of that file) or ``# <anything else>, under ...`` (an example that must still validate)."""
TENANT_KEYS = {"groups", "quota", "egressCidrs", "egressFqdns", "virtualMachines", "notebooks", "modelEndpoints"}
"""Keys that mark a mapping as tenant config (TenantSpec keys that rendered Kubernetes objects do not use)."""


def fenced(language: str) -> list[str]:
    """The bodies of the ```<language> blocks of docs/workloads.md (indented list-item fences included)."""
    return [
        textwrap.dedent(body)
        for _indent, body in re.findall(rf"^( *)```{language}\n(.*?)^\1```", WORKLOADS_DOC, re.MULTILINE | re.DOTALL)
    ]


def tenant_snippets() -> list[tuple[re.Match[str], Any]]:
    return [
        (header, yaml.safe_load(block))
        for block in fenced("yaml")
        if (header := SNIPPET_HEADER.match(block)) is not None
    ]


SNIPPETS = tenant_snippets()
SNIPPET_IDS = [f"{h['region']}.{h['path']}:{','.join(snippet)}" for h, snippet in SNIPPETS]


def test_the_tenant_snippets_are_found() -> None:
    paths = {header["path"] for header, _ in SNIPPETS}
    assert "tenants" in paths, "no whole-tenant snippet (# Pulumi.prod-fra1.yaml, under gpucell:regions.fra1.tenants)"
    for kind in ("virtualMachines", "notebooks", "modelEndpoints"):
        assert any(kind in snippet for _, snippet in SNIPPETS), f"no marked snippet declares {kind}"


def test_every_yaml_block_that_is_tenant_config_is_marked() -> None:
    for block in fenced("yaml"):
        if SNIPPET_HEADER.match(block):
            continue
        for document in yaml.safe_load_all(block):
            if not isinstance(document, dict):
                continue
            nested = [v for v in document.values() if isinstance(v, dict)]
            assert not any(TENANT_KEYS & m.keys() for m in (document, *nested)), (
                f"tenant config without a '# ..., under gpucell:regions.<region>.tenants...' first line:\n{block}"
            )


@pytest.mark.parametrize(("header", "snippet"), SNIPPETS, ids=SNIPPET_IDS)
def test_tenant_snippet_validates_in_its_prod_region(header: re.Match[str], snippet: dict[str, Any]) -> None:
    region = copy.deepcopy(PROD_REGIONS[header["region"]])
    node = region
    for key in header["path"].split("."):
        node = node.setdefault(key, {})
    node.update(copy.deepcopy(snippet))
    problems: list[str] = []
    try:
        StackSpec.model_validate({"regions": {header["region"]: region}})
    except ConfigError as exc:
        problems = exc.lines
    assert not problems, "\n".join(problems)


def is_part_of(snippet: Any, actual: Any, where: str) -> None:
    """Assert ``snippet`` is ``actual`` with mapping keys left out (the doc trims with ``# ...``)."""
    if isinstance(snippet, dict) and isinstance(actual, dict):
        for key, value in snippet.items():
            assert key in actual, f"{where}.{key} is not in its prod stack file"
            is_part_of(value, actual[key], f"{where}.{key}")
    else:
        assert snippet == actual, f"{where}: the doc says {snippet!r}, the stack file {actual!r}"


@pytest.mark.parametrize(
    ("header", "snippet"),
    [
        pytest.param(h, snippet, id=i)
        for (h, snippet), i in zip(SNIPPETS, SNIPPET_IDS, strict=True)
        if h["source"] == f"Pulumi.prod-{h['region']}.yaml"
    ],
)
def test_snippets_taken_from_prod_match_it(header: re.Match[str], snippet: dict[str, Any]) -> None:
    actual: Any = PROD_REGIONS[header["region"]]
    for key in header["path"].split("."):
        actual = actual[key]
    is_part_of(snippet, actual, f"regions.{header['region']}.{header['path']}")


def asserted_messages() -> tuple[set[str], list[re.Pattern[str]]]:
    """The strings of tests/test_admission.py, tests/test_spec.py, tests/test_hardening_rules.py,
    tests/test_dra_spec.py, tests/test_traffic_spec.py, tests/test_tenant_cluster_spec.py and the backup, runtime
    and PriorityClass tests (adjacent literals joined, as Python does):
    plain ones as they are, f-strings as patterns in which a module constant (``A``) is its value and any other
    value (a parameter, a loop variable) is one of the files' strings or a token without spaces."""
    plain: set[str] = set()
    patterns: list[re.Pattern[str]] = []
    for name in (
        "test_admission.py",
        "test_spec.py",
        "test_hardening_rules.py",
        "test_dra_spec.py",
        "test_traffic_spec.py",
        "test_vm_platform.py",
        "test_tenant_cluster_spec.py",
        "test_backups.py",
        "test_serving_runtimes.py",
        "test_priority_classes.py",
    ):
        tree = ast.parse((REPO / "tests" / name).read_text())
        constants = {
            target.id: node.value.value
            for node in tree.body
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        strings = {
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value
        }
        plain |= strings
        hole = "(?:" + "|".join(map(re.escape, sorted(strings, key=len, reverse=True))) + r"|\S+)"
        for node in ast.walk(tree):
            if not isinstance(node, ast.JoinedStr):
                continue
            parts = []
            for part in node.values:
                if isinstance(part, ast.Constant):
                    parts.append(re.escape(str(part.value)))
                elif (
                    isinstance(part, ast.FormattedValue)
                    and isinstance(part.value, ast.Name)
                    and part.value.id in constants
                ):
                    parts.append(re.escape(constants[part.value.id]))
                else:
                    parts.append(hole)
            patterns.append(re.compile("".join(parts)))
    return plain, patterns


def test_error_lines_are_the_ones_the_tests_assert() -> None:
    text_lines = [line for block in fenced("text") for line in block.splitlines() if line.strip()]
    assert len(text_lines) >= 20, "the Rules section keeps its error lines in ```text blocks"
    not_errors = [line for line in text_lines if not line.startswith("regions.")]
    assert not not_errors, "```text lines that are not error lines (regions.<region>...: message):\n" + "\n".join(
        not_errors
    )
    error_lines = {line.strip() for line in WORKLOADS_DOC.splitlines() if line.strip().startswith("regions.")}
    plain, patterns = asserted_messages()
    unasserted = [
        line for line in sorted(error_lines) if line not in plain and not any(p.fullmatch(line) for p in patterns)
    ]
    assert not unasserted, (
        "docs/workloads.md shows error lines that tests/test_admission.py, tests/test_spec.py and "
        "tests/test_dra_spec.py do not assert:\n" + "\n".join(unasserted)
    )


# -- docs/operations.md: its config snippets validate, its warning is the one the program prints ---------------------
OPERATIONS_DOC = (REPO / "docs" / "operations.md").read_text()


def test_operations_config_snippets_validate_in_the_prod_region() -> None:
    from gpucell.components._chart import deep_merge
    from gpucell.spec import CellSpec

    region = prod_regions()["fra1"]
    snippets = [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", OPERATIONS_DOC, re.DOTALL)]
    assert len(snippets) == 5
    for snippet in snippets:
        CellSpec.model_validate(deep_merge(region, snippet))  # raises ConfigError on drift


def test_operations_shows_the_warning_the_program_prints() -> None:
    from gpucell.k3s.cluster import even_server_warning

    assert f"warning: {even_server_warning(2)}\n" in OPERATIONS_DOC


# -- docs/components/: a page per platform component, its generated parts current, its example run -----------------


@pytest.mark.parametrize("page", component_pages.PAGES, ids=[p.slug for p in component_pages.PAGES])
def test_component_page_is_current(page: component_pages.Page) -> None:
    """The pins, the Args tables and what the example renders (which runs the example under the mock engine)."""
    assert component_pages.render_page(page) == page.path.read_text(), (
        f"docs/components/{page.slug}.md is stale: run `python -m tools.component_pages`"
    )


def test_every_platform_component_has_a_page() -> None:
    """Each component of ``gpucell.__all__`` that deploys platform pieces (not the cell, the tenant or a workload)
    and each component of ``gpucell.components`` is described by a page; every page file is listed in ``PAGES``."""
    import importlib
    import inspect
    import pkgutil

    import gpucell
    import gpucell.components
    from gpucell._component import CellComponent

    public = {
        name
        for name in gpucell.__all__
        if inspect.isclass(value := getattr(gpucell, name))
        and issubclass(value, CellComponent)
        and value.__module__.startswith(("gpucell.components.", "gpucell.k3s."))
    }
    in_components = {
        name
        for info in pkgutil.iter_modules(gpucell.components.__path__, "gpucell.components.")
        for name, value in vars(importlib.import_module(info.name)).items()
        if inspect.isclass(value) and issubclass(value, CellComponent) and value.__module__ == info.name
    }
    paged = {spec.split(":")[1] for page in component_pages.PAGES for spec in page.components}
    assert {"Cilium", "K3sCluster", "ClusterDeny", "Backups"} <= public
    assert public | in_components == paged
    files = {p.stem for p in (REPO / "docs" / "components").glob("*.md")} - {"README"}
    assert files == {page.slug for page in component_pages.PAGES}


def test_component_pages_are_linked_from_the_readme_and_the_index() -> None:
    assert "- `docs/components/`: a page per platform component" in (REPO / "README.md").read_text()
    assert "(components/README.md)" in (REPO / "docs" / "component-package.md").read_text()
    index = (REPO / "docs" / "components" / "README.md").read_text()
    for page in component_pages.PAGES:
        assert f"]({page.slug}.md)" in index, f"docs/components/README.md does not link {page.slug}.md"


def anchors(markdown: str) -> set[str]:
    """GitHub's anchors of ``markdown``'s headings: lower case, punctuation but ``-`` dropped, spaces as ``-``."""
    return {
        re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        for heading in re.findall(r"^#+ (.+)$", markdown, re.MULTILINE)
    }


def test_component_pages_link_what_exists() -> None:
    """Every relative link of a page names a file that exists and, with ``#``, one of its headings."""
    for page in (REPO / "docs" / "components").glob("*.md"):
        for target in re.findall(r"\]\(([^)#:]+\.md)(?:#([^)]+))?\)", page.read_text()):
            path = (page.parent / target[0]).resolve()
            assert path.is_file(), f"{page.name}: {target[0]} does not exist"
            if target[1]:
                assert target[1] in anchors(path.read_text()), f"{page.name}: {target[0]} has no #{target[1]}"
