"""This project's own tests, with gpucell's test kit: no Pulumi CLI, no cluster."""

from __future__ import annotations

import runpy
from pathlib import Path

import pulumi
import pytest

from gpu_stack import TRAIN_VM, deploy
from gpucell import ConfigError
from gpucell.testing import PlanResult, run_program

KUBECONFIG = "apiVersion: v1\nkind: Config\n"
VM = "kubernetes:kubevirt.io/v1:VirtualMachine"


def planned() -> PlanResult:
    return run_program(lambda: deploy(pulumi.Output.secret(KUBECONFIG), "1.33"))


def test_nothing_of_a_gpucell_cell_is_built() -> None:
    result = planned()
    types = {r.type for r in result.resources}
    assert not {"gpucell:index:K3sCluster", "gpucell:index:RegionalCell", "gpucell:index:Cilium"} & types
    assert not [t for t in types if t.startswith("command:")]  # nothing over SSH
    [provider] = result.of_type("pulumi:providers:kubernetes")
    assert (provider.name, provider.inputs["kubeconfig"], provider.inputs["clusterIdentifier"]) == (
        "lab-k8s",
        "[secret]",
        "lab",
    )
    in_cluster = [r for r in result.resources if r.type.startswith("kubernetes:")]
    assert len(in_cluster) > 10
    assert {r.provider for r in in_cluster} == {"lab-k8s"}


def test_the_gpu_operator_points_the_toolkit_at_the_clusters_containerd() -> None:
    release = planned().named("lab-gpu-operator-gpu-operator")
    values = release.inputs["values"]
    assert values["toolkit"]["env"] == [
        {"name": "CONTAINERD_CONFIG", "value": "/etc/containerd/config.toml"},
        {"name": "CONTAINERD_SOCKET", "value": "/run/containerd/containerd.sock"},
        {"name": "CONTAINERD_RUNTIME_CLASS", "value": "nvidia"},
    ]
    assert values["sandboxWorkloads"] == {"enabled": True, "mode": "kubevirt", "defaultWorkload": "container"}
    assert values["vfioManager"] == {"enabled": True, "env": [{"name": "BIND_NVSWITCHES", "value": "true"}]}


def test_kubevirt_permits_the_h100s_and_their_nvswitches() -> None:
    cr = planned().named("lab-kubevirt-kubevirt")
    devices = cr.inputs["spec"]["configuration"]["permittedHostDevices"]["pciHostDevices"]
    assert [d["resourceName"] for d in devices] == ["nvidia.com/GH100_H100_SXM5_80GB", "nvidia.com/GH100_H100_NVSWITCH"]


def test_the_tenant_vm_gets_the_whole_board_and_waits_for_the_platform() -> None:
    result = planned()
    namespace = result.named("lab-ml-namespace")
    assert namespace.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce-version"] == "v1.33"
    assert result.named("lab-kubevirt-kubevirt").urn in namespace.dependencies
    [vm] = result.of_type(VM)
    devices = vm.inputs["spec"]["template"]["spec"]["domain"]["devices"]
    assert [g["deviceName"] for g in devices["gpus"]] == ["nvidia.com/GH100_H100_SXM5_80GB"] * 8
    assert {d["deviceName"] for d in devices["hostDevices"]} == {"nvidia.com/GH100_H100_NVSWITCH"}
    for waits_for in ("lab-kubevirt-kubevirt", "lab-cdi-cdi", "lab-cdi-storage-profile", "lab-ml-quota"):
        assert result.named(waits_for).urn in vm.dependencies, waits_for
    assert vm.options["protect"] is True  # it owns the VM's disks


def test_a_vm_bigger_than_a_node_is_one_line_before_anything_of_the_tenant() -> None:
    with pytest.raises(ConfigError) as info:
        run_program(lambda: deploy(KUBECONFIG, "1.33", {**TRAIN_VM, "gpus": 16}))
    assert info.value.lines == [
        "tenants.ml.virtualMachines.train.gpus: 16 H100-SXM5-80GB GPUs do not fit one node: pool h100 has 8 per node",
    ]


def test_the_program_reads_the_kubeconfig_from_stack_config() -> None:
    main = Path(__file__).resolve().parent.parent / "__main__.py"
    result = run_program(
        lambda: runpy.run_path(str(main)),
        project="gpu-on-existing-cluster",
        config={"gpu-on-existing-cluster:kubeconfig": KUBECONFIG, "gpu-on-existing-cluster:kubernetesVersion": "1.33"},
        secret_keys=["gpu-on-existing-cluster:kubeconfig"],
    )
    assert result.named("lab-k8s").inputs["kubeconfig"] == "[secret]"
    assert result.outputs == {"mlNamespace": "tenant-ml", "trainVm": "train"}
