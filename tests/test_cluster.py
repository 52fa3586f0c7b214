"""The cluster handle: what K3sCluster returns, and one built from a kubeconfig for a cluster gpucell did not build."""

from __future__ import annotations

from typing import Any, cast

import pytest

from gpucell.cell import RegionalCell, RegionalCellArgs
from gpucell.cluster import Cluster, ContainerRuntime
from gpucell.engine.mock_engine import run_program
from gpucell.errors import ConfigError
from gpucell.testing import CellMocks
from tests.conftest import cell, minimal_cell_config


def test_k3s_runtime_renders_the_toolkit_env_for_k3s_containerd() -> None:
    spec = cell(minimal_cell_config())
    assert ContainerRuntime.k3s(spec.versions.kubernetes_minor).toolkit_env() == [
        {"name": "CONTAINERD_CONFIG", "value": "/var/lib/rancher/k3s/agent/etc/containerd/config-v3.toml.tmpl"},
        {"name": "CONTAINERD_SOCKET", "value": "/run/k3s/containerd/containerd.sock"},
        {"name": "RUNTIME_CONFIG_SOURCE", "value": "file=/var/lib/rancher/k3s/agent/etc/containerd/config.toml"},
        {"name": "CONTAINERD_RUNTIME_CLASS", "value": "nvidia"},
    ]
    assert ContainerRuntime.k3s("1.30").config == "/var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl"


def test_containerd_defaults_and_given_paths() -> None:
    assert ContainerRuntime.containerd().toolkit_env() == [
        {"name": "CONTAINERD_CONFIG", "value": "/etc/containerd/config.toml"},
        {"name": "CONTAINERD_SOCKET", "value": "/run/containerd/containerd.sock"},
        {"name": "CONTAINERD_RUNTIME_CLASS", "value": "nvidia"},
    ]
    rke2 = ContainerRuntime.containerd(
        "/var/lib/rancher/rke2/agent/etc/containerd/config-v3.toml.tmpl", "/run/k3s/containerd/containerd.sock"
    )
    assert rke2.socket == "/run/k3s/containerd/containerd.sock"


def test_the_cell_hands_out_a_k3s_handle_ready_after_the_servers_and_cilium() -> None:
    built: dict[str, Any] = {}

    def program() -> None:
        built["cell"] = RegionalCell("lab", RegionalCellArgs(cell(minimal_cell_config()), "key"))

    run_program(program, computed=lambda args: CellMocks().new_resource(args)[1])
    regional = built["cell"]
    assert regional.k3s.cluster.provider is regional.provider
    assert regional.k3s.cluster.kubernetes_version == "1.34"
    assert regional.k3s.cluster.ready == (regional.k3s.servers_ready,)
    assert regional.cluster.ready == (regional.k3s.servers_ready, regional.cilium)
    assert regional.cluster.runtime == ContainerRuntime.k3s("1.34")


def test_a_handle_from_a_kubeconfig_registers_one_secret_provider() -> None:
    built: dict[str, Cluster] = {}

    def program() -> None:
        built["c"] = Cluster.from_kubeconfig("rke2-fra", "apiVersion: v1\nkind: Config\n", "1.33")

    result = run_program(program)
    [provider] = result.resources
    assert (provider.type, provider.name) == ("pulumi:providers:kubernetes", "rke2-fra-k8s")
    assert provider.inputs["kubeconfig"] == "[secret]"
    assert provider.inputs["clusterIdentifier"] == "rke2-fra"
    assert built["c"].runtime == ContainerRuntime.containerd()
    assert built["c"].options().depends_on == []


def test_a_kubernetes_version_that_is_not_major_minor_is_one_config_error_line() -> None:
    for version in ("v1.33", "1.33.2"):
        with pytest.raises(ConfigError) as info:
            Cluster.from_kubeconfig("x", "k", version)
        assert info.value.lines == [f"kubernetes_version: '{version}' is not MAJOR.MINOR, e.g. '1.34'"]


_FAILING_CELL = """
import sys
from pathlib import Path

import gpucell.k3s._script_files as files
from gpucell.stacks.plan import make_plan

def missing(name):
    raise FileNotFoundError(f"scripts/{name}.sh")

files.text = missing  # every node script fails to render, after the cell made its resources_later() Outputs
try:
    make_plan(Path(sys.argv[1]), "dev")
except FileNotFoundError as error:
    print("failed:", error)
"""


def test_a_cell_whose_construction_fails_fails_the_plan_instead_of_hanging(tmp_path: Any) -> None:
    """A node script that cannot be rendered raised inside K3sCluster, after the cell made the Outputs its
    reconfigured hosts wait for: the SDK then waited for them forever (a hang of the plan and of `pulumi up`)."""
    import subprocess
    import sys

    from tests.conftest import REPO

    done = subprocess.run(
        [sys.executable, "-c", _FAILING_CELL, str(REPO)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.stdout.strip() == "failed: scripts/k3s/encryption-guard.sh", done.stderr[-2000:]


def test_a_resources_later_output_never_resolved_fails_naming_the_block() -> None:
    """Run on an event loop of its own, not under the mocks: a program that fails on purpose leaves tasks on the
    SDK's loop that a later run in the same process would meet."""
    import asyncio

    from gpucell._component import resolved_or_failed, resources_later

    async def scenario() -> None:
        with resolved_or_failed("RegionalCell fra1"):
            later, _resolve = resources_later()
        await later.future()

    async def resolved_one() -> list[Any]:
        with resolved_or_failed("RegionalCell fra1"):
            later, resolve = resources_later()
            resolve([])
        return cast("list[Any]", await later.future())

    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(RuntimeError, match=r"^RegionalCell fra1: a resources_later\(\) Output was never resolved$"):
            loop.run_until_complete(scenario())
        assert loop.run_until_complete(resolved_one()) == []
    finally:
        loop.close()
