"""This project's own tests, with gpucell's test kit: no Pulumi CLI, no cluster."""

from __future__ import annotations

import runpy
from pathlib import Path

import pulumi
import pytest

import components
from components.platform import GpuPlatform, GpuPlatformArgs
from gpucell import CellSpec, ConfigError
from gpucell.testing import run_program

VM = "kubernetes:kubevirt.io/v1:VirtualMachine"


def program() -> None:
    GpuPlatform("fra1", GpuPlatformArgs(ssh_private_key=pulumi.Output.secret("not-a-real-key")))


def test_our_components_package_is_ours() -> None:
    assert components.__doc__ is not None
    assert "This project's own components" in components.__doc__


def test_the_platform_builds_a_cell_a_tenant_and_a_gpu_vm() -> None:
    result = run_program(program)
    vm = result.of_type(VM)[0]
    assert vm.inputs["metadata"] == {
        "name": "train",
        "namespace": "tenant-ml",
        "labels": {
            "app.kubernetes.io/name": "train",
            "app.kubernetes.io/managed-by": "gpucell",
            "gpucell.io/tenant": "ml",
        },
    }
    gpus = vm.inputs["spec"]["template"]["spec"]["domain"]["devices"]["gpus"]
    assert [g["deviceName"] for g in gpus] == ["nvidia.com/GH100_H100_SXM5_80GB"] * 2
    assert vm.provider == "fra1-k8s"  # the cell's own Kubernetes provider, fed by the kubeconfig it read
    assert result.named("fra1-k3s-kubeconfig").inputs["connection"] == "[secret]"  # it holds the SSH key
    assert result.outputs == {}  # this program exports nothing itself


def test_the_program_reads_its_ssh_key_from_stack_config() -> None:
    """__main__.py as `pulumi up` runs it: the SSH key comes from this project's secret config."""
    main = Path(__file__).resolve().parent.parent / "__main__.py"
    result = run_program(
        lambda: runpy.run_path(str(main)),
        project="gpu-platform",
        config={"gpu-platform:sshPrivateKey": "not-a-real-key"},
        secret_keys=["gpu-platform:sshPrivateKey"],
    )
    assert result.named("fra1-k3s-kubeconfig").inputs["connection"] == "[secret]"
    assert result.named("fra1-k8s").inputs["kubeconfig"] == "[secret]"
    assert result.outputs == {"apiServerUrl": "https://10.60.0.11:6443", "mlNamespace": "tenant-ml"}


def test_a_mistake_is_one_line_with_its_key_path() -> None:
    with pytest.raises(ConfigError) as info:
        CellSpec.model_validate(
            {
                "network": {"nodeCidr": "10.60.0.0/24"},
                "nodePools": {
                    "servers": {"role": "server", "hosts": [{"name": "s1", "address": "10.60.0.11"}]},
                    "h100": {
                        "role": "gpu",
                        "gpuModel": "H100-SXM5-80GB",
                        "gpusPerNode": 8,
                        "gpuMode": "passthrough",
                        "hosts": [{"name": "g1", "address": "10.60.0.21"}],
                    },
                },
            }
        )
    assert info.value.lines == [
        "nodePools.h100.gpuMode: 'passthrough' is not one of container, vm-passthrough, vm-vgpu, dra"
    ]
