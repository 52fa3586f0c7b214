"""The installed package: one import package `gpucell`, its public names, the test kit, and consumers' projects.

The slow test builds the wheel, installs it into a fresh virtual environment (no test extras), runs the README's
plan command there and the examples' own tests: docs/examples/consumer (a cell, with a `components` package of its
own) and docs/examples/existing-cluster (the platform and a tenant on a cluster gpucell did not build).
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path
from typing import Any

import pulumi
import pytest

import gpucell
from gpucell import CellSpec, ConfigError, NodePool, RegionalCell, RegionalCellArgs
from gpucell.testing import FAKE_PASSWORD, CellMocks, fake_kubeconfig, run_program
from tests.conftest import REPO, minimal_cell_config

PLATFORM_COMPONENTS = (
    "K3sCluster",
    "Cilium",
    "Storage",
    "KubeVirt",
    "Cdi",
    "GpuOperator",
    "CertManager",
    "KServe",
    "ClusterApi",
    "NetworkOperator",
)
WORKLOADS = ("RegionalCell", "Tenant", "GpuVirtualMachine", "Notebook", "ModelEndpoint", "TenantCluster")


# -- the public names ---------------------------------------------------------------------------------------------
def test_all_is_sorted_and_every_name_imports_from_its_home() -> None:
    # sorted as ruff's RUF022 keeps it: constants, then classes, then functions
    assert gpucell.__all__ == sorted(set(gpucell.__all__), key=lambda name: (not name.isupper(), name))
    for name in gpucell.__all__:
        home = importlib.import_module(gpucell._HOMES[name])
        assert getattr(gpucell, name) is getattr(home, name), name
    assert set(gpucell.__all__) <= set(dir(gpucell))


def test_components_their_args_specs_and_config_error_are_public() -> None:
    expected = {
        *PLATFORM_COMPONENTS,
        *WORKLOADS,
        "ConfigError",
        "CellSpec",
        "TenantSpec",
        "NodePool",
        "GpuVirtualMachineSpec",
        "NotebookSpec",
        "ModelEndpointSpec",
        "TenantClusterSpec",
        "StackSpec",
        "CATALOG",
    }
    expected |= {f"{name}Args" for name in (*PLATFORM_COMPONENTS, *WORKLOADS)}
    assert expected <= set(gpucell.__all__)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'gpucell' has no attribute 'Nope'"):
        gpucell.Nope  # type: ignore[attr-defined]  # noqa: B018


def test_import_gpucell_loads_no_provider_sdk() -> None:
    code = "import gpucell, gpucell.spec, sys; print(sorted(m for m in sys.modules if m.startswith('pulumi')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# -- specs built from Python fail like stack config does ----------------------------------------------------------
def test_model_validate_raises_config_error_with_key_paths() -> None:
    config = minimal_cell_config()
    config["nodePools"]["l40s"]["gpuMode"] = "passthrough"
    with pytest.raises(ConfigError) as info:
        CellSpec.model_validate(config)
    assert info.value.lines == [
        "nodePools.l40s.gpuMode: 'passthrough' is not one of container, vm-passthrough, vm-vgpu, dra"
    ]


def test_constructor_raises_config_error_with_key_paths() -> None:
    with pytest.raises(ConfigError) as info:
        NodePool(
            role="gpu",
            hosts=[{"name": "g1", "address": "10.20.0.21"}],
            gpu_model="L40S",  # type: ignore[list-item]
            gpus_per_node=2,
            gpu_mode="container",
            mig_config="all-1g.10gb",
        )  # type: ignore[arg-type]
    assert info.value.lines == [
        "migConfig: 'all-1g.10gb' is not a MIG config of L40S; accepted: none: the model has no MIG"
    ]


def test_a_nested_mistake_keeps_its_full_path() -> None:
    config = minimal_cell_config()
    config["nodePools"]["cpu"]["hosts"][0]["name"] = "Not_A_Label"
    with pytest.raises(ConfigError) as info:
        CellSpec(**config)
    assert info.value.lines == [
        "nodePools.cpu.hosts[0].name: 'Not_A_Label' is not a DNS-1123 label (lower-case letters, digits and '-', "
        "at most 63 characters)"
    ]


# -- the test kit -------------------------------------------------------------------------------------------------
def test_run_program_gives_a_cell_its_kubeconfig_and_passwords() -> None:
    spec = CellSpec.model_validate(minimal_cell_config())

    def program() -> None:
        RegionalCell("lab", RegionalCellArgs(cell=spec, ssh_private_key=pulumi.Output.secret("k")))

    result = run_program(program, cells=[spec])
    provider = result.named("lab-k8s")
    assert provider.inputs["kubeconfig"] == "[secret]"
    assert "server: https://10.20.0.11:6443" in provider.raw_inputs["kubeconfig"]
    assert result.named("lab-k3s-lab-srv-1").raw_inputs["stdin"] == FAKE_PASSWORD


def test_fake_kubeconfig_is_what_k3s_writes() -> None:
    text = fake_kubeconfig(7443)
    assert "\n    server: https://127.0.0.1:7443\n" in text
    assert "current-context: default" in text


def _with_cell_mocks() -> Any:
    pulumi.runtime.set_mocks(CellMocks(), preview=False)
    spec = CellSpec.model_validate(minimal_cell_config())
    return RegionalCell("lab", RegionalCellArgs(cell=spec, ssh_private_key=pulumi.Output.secret("k")))


@pulumi.runtime.test
def test_cell_mocks_work_with_pulumis_own_test_idiom() -> Any:
    cell = _with_cell_mocks()

    def check(args: list[Any]) -> None:
        url, kubeconfig = args
        assert url == "https://10.20.0.11:6443"
        assert "server: https://10.20.0.11:6443" in kubeconfig

    return pulumi.Output.all(cell.api_server_url, cell.kubeconfig).apply(check)


def _on_port(port: int) -> CellSpec:
    config = minimal_cell_config()
    config["network"]["apiPort"] = port
    return CellSpec.model_validate(config)


def test_run_program_without_cells_reads_the_port_a_single_server_listens_on() -> None:
    spec = _on_port(7443)

    def program() -> None:
        RegionalCell("lab", RegionalCellArgs(cell=spec, ssh_private_key=pulumi.Output.secret("k")))

    result = run_program(program)
    assert "https-listen-port: 7443\n" in result.named("lab-k3s-lab-srv-1").inputs["create"]
    assert "server: https://10.20.0.11:7443\n" in result.named("lab-k8s").raw_inputs["kubeconfig"]


@pulumi.runtime.test
def test_cell_mocks_without_cells_fit_a_single_server_on_another_api_port() -> Any:
    pulumi.runtime.set_mocks(CellMocks(), preview=False)
    cell = RegionalCell("lab", RegionalCellArgs(cell=_on_port(7443), ssh_private_key=pulumi.Output.secret("k")))

    def check(args: list[Any]) -> None:
        url, kubeconfig = args
        assert url == "https://10.20.0.11:7443"
        assert "    server: https://10.20.0.11:7443\n" in kubeconfig

    return pulumi.Output.all(cell.api_server_url, cell.kubeconfig).apply(check)


README = (REPO / "README.md").read_text()
REGION = {
    "network": {"nodeCidr": "10.60.0.0/24"},
    "nodePools": {
        "servers": {
            "role": "server",
            "allowWorkloads": True,
            "hosts": [{"name": "fra1-srv-1", "address": "10.60.0.11"}],
        }
    },
}


def _test_kit_block() -> str:
    section = README.split("Test your program with the kit in `gpucell.testing`", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readme_test_kit_example_runs_as_written() -> None:
    """The README's example, run as printed: a program reading its SSH key secret from stack config."""
    block = _test_kit_block()
    assert 'config.require_secret("sshPrivateKey")' in block
    assert "secret_keys=" in block
    namespace: dict[str, Any] = {"region_config": REGION}
    exec(compile(block, "README.md", "exec"), namespace)  # its own assert runs too
    result = namespace["result"]
    assert result.named("fra1-k8s").inputs["kubeconfig"] == "[secret]"
    assert result.named("fra1-k3s-kubeconfig").inputs["connection"] == "[secret]"  # the key from config


def test_the_test_kit_docstring_asserts_on_inputs_the_plan_registers() -> None:
    import gpucell.testing

    doc = gpucell.testing.__doc__ or ""
    named = re.findall(r'result\.named\("([^"]+)"\)\.inputs\["([^"]+)"\] == "([^"]+)"', doc + _test_kit_block())
    assert named == [("fra1-k8s", "kubeconfig", "[secret]")] * 2
    spec = CellSpec.model_validate(REGION)
    result = run_program(
        lambda: RegionalCell("fra1", RegionalCellArgs(cell=spec, ssh_private_key=pulumi.Output.secret("k")))
    )
    for name, key, value in named:
        assert result.named(name).inputs[key] == value


# -- the wheel, in a fresh environment, and a consumer's project ---------------------------------------------------
@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
        check=True,
        capture_output=True,
        text=True,
    )
    return next(out.glob("gpucell-*.whl"))


def test_the_wheel_holds_one_import_package_with_py_typed(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {"gpucell", wheel.name.split("-py3")[0] + ".dist-info"}
    assert "gpucell/py.typed" in names
    assert {"gpucell/stacks/cli.py", "gpucell/testing.py", "gpucell/spec/cell.py"} <= set(names)
    scripts = sorted(str(path.relative_to(REPO)) for path in (REPO / "gpucell" / "k3s" / "scripts").rglob("*.sh"))
    assert scripts
    assert sorted(name for name in names if name.endswith(".sh")) == scripts  # the node scripts' bash
    entry_points = zipfile.ZipFile(wheel).read(f"{wheel.name.split('-py3')[0]}.dist-info/entry_points.txt")
    assert b"gpucell = gpucell.stacks.cli:main" in entry_points


def outside() -> dict[str, str]:
    """The environment for programs of the fresh environment: without ``PYTHONPATH``, which would show them this
    checkout (and make pip take its ``gpucell.egg-info`` for an installed gpucell) instead of the wheel."""
    return {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}


@pytest.fixture(scope="module")
def fresh_env(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment with the wheel (no extras) and what the examples' requirements-dev.txt files name
    for their tests, pinned by constraints.txt. Nothing is byte-compiled at install (a third of pip's time): what
    the tests import is compiled as it is imported."""
    env = tmp_path_factory.mktemp("env") / "venv"
    venv.create(env, with_pip=True)
    subprocess.run(
        [
            str(env / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-compile",
            "-c",
            str(REPO / "constraints.txt"),
            str(wheel),
            "-r",
            str(REPO / "docs" / "examples" / "consumer" / "requirements-dev.txt"),
            "-r",
            str(REPO / "docs" / "examples" / "existing-cluster" / "requirements-dev.txt"),
        ],
        check=True,
        capture_output=True,
        text=True,
        env=outside(),
    )
    return env


def test_a_plain_install_plans_and_says_what_check_needs(fresh_env: Path) -> None:
    gpucell_cli = str(fresh_env / "bin" / "gpucell")
    plan = subprocess.run(
        [gpucell_cli, "plan", "dev", "--project-dir", str(REPO)],
        capture_output=True,
        text=True,
        check=False,
        env=outside(),
    )
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.startswith("stack dev: 1 region(s)\n")
    checked = subprocess.run(
        [
            gpucell_cli,
            "plan",
            "dev",
            "--project-dir",
            str(REPO),
            "--check",
            "--schemas",
            str(REPO.parent / "shared" / "upstream"),
        ],
        capture_output=True,
        text=True,
        check=False,
        env=outside(),
    )
    assert (checked.returncode, checked.stdout) == (1, "")  # said before planning
    assert checked.stderr.endswith(
        "error: gpucell plan --check needs the Python package kubernetes-validate: pip install 'gpucell[check]'\n"
    )


def test_nothing_but_gpucell_lands_at_the_top_of_site_packages(fresh_env: Path) -> None:
    site = next((fresh_env / "lib").glob("python3*/site-packages"))
    record = next(site.glob("gpucell-*.dist-info")) / "RECORD"
    tops = {line.split(",")[0].split("/")[0] for line in record.read_text().splitlines()}
    assert {t for t in tops if not t.endswith(".dist-info") and t != ".."} == {"gpucell"}


def run_example_tests(fresh_env: Path, tmp_path: Path, example: str) -> str:
    """Run docs/examples/<example>'s own tests in the fresh environment, from a copy; their summary line."""
    project = tmp_path / example
    shutil.copytree(REPO / "docs" / "examples" / example, project)
    done = subprocess.run(
        [str(fresh_env / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
        env=outside(),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_the_consumer_example_passes_its_own_tests(fresh_env: Path, tmp_path: Path) -> None:
    assert run_example_tests(fresh_env, tmp_path, "consumer").startswith("4 passed")


def test_the_existing_cluster_example_passes_its_own_tests(fresh_env: Path, tmp_path: Path) -> None:
    """GPU Operator, KubeVirt, CDI and a tenant's GPU VM on a cluster given by its kubeconfig: no K3sCluster,
    RegionalCell or CellSpec (docs/examples/existing-cluster)."""
    example = REPO / "docs" / "examples" / "existing-cluster"
    used: set[str] = set()
    for module in ("gpu_stack.py", "__main__.py"):
        for node in ast.walk(ast.parse((example / module).read_text())):
            used |= {node.id} if isinstance(node, ast.Name) else set()
            used |= {alias.name for alias in node.names} if isinstance(node, ast.ImportFrom) else set()
    assert {"Cluster", "GpuOperator", "KubeVirt", "Tenant", "GpuVirtualMachine"} <= used
    assert not {"K3sCluster", "RegionalCell", "CellSpec"} & used
    assert run_example_tests(fresh_env, tmp_path, "existing-cluster").startswith("6 passed")
