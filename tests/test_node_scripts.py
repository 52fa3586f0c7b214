"""The node scripts' bash as files (gpucell/k3s/scripts/, issue 28 step 3): shellcheck reads them as they are in the
repository, every file is rendered by a module, and no Python module of gpucell/k3s/ holds bash in a format string."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpucell.k3s import _maintenance_scripts as maintenance
from gpucell.k3s import _scripts
from gpucell.k3s._script_files import render, text
from tests.conftest import REPO

SCRIPTS = REPO / "gpucell" / "k3s" / "scripts"
FILES = sorted(SCRIPTS.rglob("*.sh"))
SHELLCHECK = Path(sys.executable).parent / "shellcheck"


def test_every_script_file_passes_shellcheck_as_it_is_in_the_repository() -> None:
    # No --shell: each file says it is bash (its shebang, or the directive that starts a fragment).
    assert len(FILES) > 50
    run = subprocess.run([str(SHELLCHECK), *map(str, FILES)], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize("path", FILES, ids=lambda path: str(path.relative_to(SCRIPTS)))
def test_a_script_file_is_a_whole_script_or_a_fragment_with_a_header(path: Path) -> None:
    raw = path.read_text()
    if raw.startswith("#!"):
        assert raw.startswith("#!/usr/bin/env bash\n")
        return
    header, _ = raw.split("\n\n", 1)
    assert header.startswith("# shellcheck shell=bash\n")
    assert all(line.startswith("#") for line in header.splitlines())
    assert "\n# A fragment of the node scripts, rendered by gpucell/k3s/" in header


def test_every_script_file_is_rendered_by_a_module_and_every_name_has_a_file() -> None:
    sources = "\n".join(path.read_text() for path in (REPO / "gpucell" / "k3s").glob("*.py"))
    named = set(re.findall(r'(?:render|text)\(\s*"([a-z0-9_/-]+)"', sources))
    # The maintenance scripts' functions are rendered by name, each into the scripts that call it.
    functions = set(re.findall(r'"([a-z_]+)"', (REPO / "gpucell" / "k3s" / "_maintenance_scripts.py").read_text()))
    named |= {f"maintenance/functions/{name}" for name in functions}
    files = {str(path.relative_to(SCRIPTS))[: -len(".sh")] for path in FILES}
    assert "maintenance/functions/hold_peers" in files & named
    assert files - named == set()
    assert {name for name in named - files if "/" in name and not name.startswith("maintenance/functions/")} == set()


def test_no_python_module_of_k3s_holds_bash_in_a_format_string() -> None:
    found = []
    for path in sorted((REPO / "gpucell" / "k3s").glob("*.py")):
        source = path.read_text()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                segment = ast.get_source_segment(source, node) or ""
                if "{{" in segment or "}}" in segment:
                    found.append(f"{path.name}:{node.lineno}")
    assert found == []


def test_the_heredoc_delimiter_of_the_files_is_the_one_the_config_is_checked_against() -> None:
    assert f"<<'{_scripts._HEREDOC}'\n@@CONFIG@@\n{_scripts._HEREDOC}\n" in text("k3s/install")
    assert f"<<'{_scripts._HEREDOC}'\n@@MANIFEST@@\n{_scripts._HEREDOC}\n" in text("k3s/write-vip")


def test_render_fills_inline_and_block_placeholders_once() -> None:
    # A value's own text is never read as a placeholder (a label or a config file could hold @@...@@).
    assert render("k3s/kubeconfig", path="/x/@@PATH@@") == "as_root cat /x/@@PATH@@\n"
    body = render("k3s/uninstall", path="/usr/local/bin/k3s-uninstall.sh")
    assert body.startswith("readonly UNINSTALL=/usr/local/bin/k3s-uninstall.sh\nif [ -x")
    guard = render("k3s/renamed-guard", read_node_name="have_name=x\n", node_name="n1")
    assert "only the old Node object goes (its -prepare delete).\nhave_name=x\nreadonly OLD_NAME=n1\n" in guard
    assert "its -prepare delete).\nreadonly OLD_NAME=n1\n" in render(
        "k3s/renamed-guard", read_node_name="", node_name="n1"
    )


def test_render_refuses_a_missing_value_and_a_block_without_its_line_end() -> None:
    with pytest.raises(KeyError, match=r"scripts/k3s/uninstall.sh: no value for @@PATH@@"):
        render("k3s/uninstall")
    with pytest.raises(ValueError, match=r"scripts/k3s/renamed-guard.sh: the block @@READ_NODE_NAME@@ must be empty"):
        render("k3s/renamed-guard", read_node_name="have_name=x", node_name="n1")


def test_the_rendered_part_of_a_fragment_leaves_its_header_out() -> None:
    raw = (SCRIPTS / "k3s" / "cilium-cleanup.sh").read_text()
    assert raw.startswith("# shellcheck shell=bash\n# A fragment of the node scripts")
    assert "k3s-io/k3s#8347" in raw
    assert text("k3s/cilium-cleanup").startswith("readonly KILLALL=@@KILLALL@@\n\ncleanup_cilium() {\n")
    assert "shellcheck" not in text("k3s/cilium-cleanup")


def _header_and_body(script: str) -> tuple[list[str], str]:
    lines = script.splitlines(keepends=True)
    return [line for line in lines if line.startswith("readonly ")], "".join(
        line for line in lines if not line.startswith("readonly ")
    )


def test_a_gpu_nodes_labels_resources_and_re_triggers_are_header_values_not_code() -> None:
    from tests.test_maintenance import DIGEST, VERSION, mig_state, sriov_state

    mig, sriov = mig_state(), sriov_state()
    header, body = _header_and_body(maintenance.settle_script(mig, VERSION, DIGEST))
    assert "readonly STATE_LABELS=(nvidia.com/mig.config.state)\n" in header
    assert "readonly STATE_LABEL_PATHS=('nvidia\\.com/mig\\.config\\.state')\n" in header
    assert "readonly RETRIGGER_DO=(restart_pods)\n" in header
    assert sum(line.startswith("readonly RESOURCES=(nvidia.com/mig-") for line in header) == 1
    # The SR-IOV node re-triggers its VF typing too, and waits for it: more values, the same loops.
    sriov_header, sriov_body = _header_and_body(maintenance.settle_script(sriov, VERSION, DIGEST))
    assert "readonly WANT_VF_TYPES='success NVIDIA L40S-12Q'\n" in sriov_header
    assert "readonly RETRIGGER_DO=(retype_vfs)\n" in sriov_header
    for text_ in (body, sriov_body):
        assert text_.count('grep -qF "$what is \'failed" <<<"$problems"') == 2
        assert text_.count('for i in "${!STATE_LABELS[@]}"; do') == 1
        assert "restarted_0" not in text_
        assert "mig.config.state" not in text_  # a label is a value, never code
    prepare_header, prepare_body = _header_and_body(maintenance.prepare_script(mig, VERSION, DIGEST))
    assert "readonly GPU_LABEL_PATHS=('nvidia\\.com/gpu\\.workload\\.config' 'nvidia\\.com/mig\\.config')\n" in (
        prepare_header
    )
    assert "nvidia\\.com/mig" not in prepare_body


def test_the_script_headers_name_the_modules_that_render_them() -> None:
    from tests.test_maintenance import mig_state

    state = mig_state()
    assert "# Rendered by gpucell (gpucell/k3s/_maintenance_scripts.py);" in maintenance.forget_script(state.name)
    assert "# Rendered by gpucell (gpucell/k3s/_scripts.py);" in _scripts.kubeconfig_script()
    assert "# Rendered by gpucell (gpucell/k3s/vgpu_sriov.py);" in text("vgpu/reconciler")


def test_the_review_reads_a_prepare_rendered_before_and_after_the_header_arrays_alike() -> None:
    """``gpucell diff`` of this change itself: the base's prepare checks each label in code, the head's loops over the
    header; the same GPU configuration must not read as a reconfiguration (every GPU VM would be named stopped)."""
    from gpucell.stacks import maintenance_review as review
    from tests.test_maintenance import DIGEST, VERSION, cpu_state, mig_state

    head = maintenance.prepare_script(mig_state(), VERSION, DIGEST)
    base = (  # the lines of the same node's prepare as gpucell rendered them before
        "readonly WANT_GPU=mode=container,mig=all-balanced\n"
        '  if [ "$(field_of "$1" \'{.metadata.labels.nvidia\\.com/gpu\\.workload\\.config}\')" != container ]; then\n'
        '  if [ "$(field_of "$1" \'{.metadata.labels.nvidia\\.com/mig\\.config}\')" != all-balanced ]; then\n'
        + "".join(
            f'  if [ -z "$have" ] && [ -z "$(field_of "$1" \'{{.status.allocatable.{name}}}\')" ]; then\n'
            for name in review._resources(head)
        )
    )
    assert review._gpu_part(head) == review._gpu_part(base)
    assert review._gpu_part(head)[1] == [
        ("nvidia\\.com/gpu\\.workload\\.config", "container"),
        ("nvidia\\.com/mig\\.config", "all-balanced"),
    ]
    assert (
        review._resources(head)
        == review._resources(base)
        == {
            "nvidia\\.com/mig-1g\\.18gb",
            "nvidia\\.com/mig-2g\\.35gb",
            "nvidia\\.com/mig-3g\\.71gb",
        }
    )
    # A node without GPUs: no WANT_GPU line before, an empty one now.
    cpu = maintenance.prepare_script(cpu_state(), VERSION, DIGEST)
    assert "\nreadonly WANT_GPU=''\nreadonly GPU_LABEL_PATHS=()\n" in cpu
    assert review._gpu_part(cpu) == review._gpu_part("readonly QUARANTINE=''\n") == ("", [])
