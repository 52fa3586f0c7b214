"""What gpucell accepts works, and what it refuses upstream refuses too (issue 34 item 6): upstream examples
expressed in gpucell, each either refused with one line naming the key, the value and what is accepted, or accepted
and rendered as upstream takes it."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucell.errors import ConfigError
from gpucell.spec import CellSpec, StackSpec
from gpucell.stacks.plan import read_stack_files
from gpucell.workloads.model_endpoint import autoscaling
from tests.conftest import REPO, minimal_cell_config, region_refusals
from tests.test_serving_runtimes import lab_region

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGpucell alice@example.net"
R = "regions.fra1"


def stack_refusals(region: dict[str, Any], **stack: Any) -> list[str]:
    try:
        StackSpec.model_validate({"regions": {"fra1": region}, **stack})
    except ConfigError as exc:
        return exc.lines
    return []


def fra1(region: dict[str, Any], **stack: Any) -> CellSpec:
    return StackSpec.model_validate({"regions": {"fra1": region}, **stack}).regions["fra1"]


# -- KEDA on vLLM metrics: only where a vLLM metric exists --------------------------------------------------------
def keda_region(**endpoint: Any) -> dict[str, Any]:
    region = minimal_cell_config()
    region["metrics"] = {"enabled": True}
    region["tenants"] = {
        "acme": {
            "egress": "internet",
            "quota": {"cpuMillicores": 64000, "memoryGib": 512, "storageGib": 100, "gpus": {"nvidia.com/gpu": 2}},
            "modelEndpoints": {
                "chat": {
                    "modelFormat": "huggingface",
                    "storageUri": "hf://org/model",
                    "gpu": {"count": 1},
                    "scaleMetric": "vllm-queue",
                    "scaleTarget": 5,
                    **endpoint,
                }
            },
        }
    }
    return region


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--max-model-len=8192", "--backend=huggingface"],
            f"{R}.tenants.acme.modelEndpoints.chat.args[1]: '--backend=huggingface' serves with transformers, not "
            "vLLM, so scaleMetric vllm-queue finds no value and the endpoint never scales; drop the argument, or "
            "scale on cpu or memory",
        ),
        (
            ["--backend", "huggingface"],
            f"{R}.tenants.acme.modelEndpoints.chat.args[0]: '--backend' serves with transformers, not vLLM, so "
            "scaleMetric vllm-queue finds no value and the endpoint never scales; drop the argument, or scale on cpu "
            "or memory",
        ),
    ],
)
def test_keda_is_refused_for_an_endpoint_served_by_transformers(args: list[str], line: str) -> None:
    assert region_refusals(keda_region(args=args)) == [line]


def test_keda_is_refused_when_vllm_logs_no_stats_and_says_it_would_stay_at_zero() -> None:
    region = keda_region(args=["--disable-log-stats"], minReplicas=0, maxReplicas=2)
    assert region_refusals(region) == [
        f"{R}.tenants.acme.modelEndpoints.chat.args[0]: '--disable-log-stats' makes vLLM create no stat loggers "
        "(its Prometheus metrics among them), so scaleMetric vllm-queue finds no value and the endpoint never "
        "scales (it stays at zero); drop the argument, or scale on cpu or memory"
    ]


def test_those_args_are_accepted_on_an_endpoint_scaled_on_cpu() -> None:
    assert region_refusals(keda_region(args=["--backend=huggingface"], scaleMetric="cpu", scaleTarget=70)) == []


def vllm_runtime_region(**runtime: Any) -> dict[str, Any]:
    region = lab_region()
    region["metrics"] = {"enabled": True}
    region["tenants"]["acme"]["servingRuntimes"]["vllm-pinned"].update(runtime)
    region["tenants"]["acme"]["modelEndpoints"]["qwen"].update(scaleMetric="vllm-running", scaleTarget=8)
    return region


@pytest.mark.parametrize(
    "runtime",
    [
        {},  # python3 -m vllm.entrypoints.openai.api_server
        {"command": ["vllm", "serve"], "args": ["/mnt/models", "--port=8000"]},
        {"command": [], "image": "docker.io/vllm/vllm-openai:v0.11.0"},  # the image's entrypoint: vllm serve
    ],
    ids=["module", "vllm-serve", "image-entrypoint"],
)
def test_keda_on_a_tenants_own_vllm_runtime_is_accepted_and_queries_its_pods(runtime: dict[str, Any]) -> None:
    spec = fra1(vllm_runtime_region(**runtime))
    endpoint = spec.tenants["acme"].model_endpoints["qwen"]
    external = autoscaling("acme", "qwen", endpoint)["autoScaling"]["metrics"][0]["external"]
    assert (
        external["metric"]["query"]
        == 'sum(vllm:num_requests_running{namespace="tenant-acme",pod=~"qwen-predictor-.*"})'
    )
    assert external["target"] == {"type": "Value", "value": "8"}


def test_keda_on_a_tenant_runtime_whose_vllm_logs_no_stats_is_refused() -> None:
    args = ["--port=8000", "--disable-log-stats", "--model=/mnt/models"]
    assert region_refusals(vllm_runtime_region(args=args)) == [
        f"{R}.tenants.acme.servingRuntimes.vllm-pinned.args[1]: '--disable-log-stats' makes vLLM create no stat "
        "loggers (its Prometheus metrics among them), so endpoint qwen's scaleMetric vllm-running finds no value and "
        "it never scales; drop the argument, or scale the endpoint on cpu or memory"
    ]


# -- a VM's own cloud-config: keys that would do nothing, or unlock gpucell's user -----------------------------------
def vm_region(user_data: str) -> dict[str, Any]:
    region = minimal_cell_config()
    region["tenants"] = {
        "acme": {
            "egress": "internet",
            "quota": {"cpuMillicores": 64000, "memoryGib": 512, "storageGib": 1000},
            "virtualMachines": {
                "vm": {
                    "memoryGib": 8,
                    "rootDisk": {"source": {"registry": "docker://quay.io/containerdisks/ubuntu:24.04"}, "sizeGib": 30},
                    "sshKeys": [KEY],
                    "cloudInit": {"userData": "#cloud-config\n" + user_data},
                }
            },
        }
    }
    return region


VM = f"{R}.tenants.acme.virtualMachines.vm.cloudInit.userData"


@pytest.mark.parametrize(
    ("user_data", "line"),
    [
        (
            "password: hunter2\n",
            f"{VM}.password: sets the password of cloud-init's default user, which this VM does not have "
            "(virtualMachines.vm: its users are the tenant's entries and gpucell's, and no entry is 'default'); "
            "remove it (gpucell's user logs in with its sshKeys), or set hashed_passwd on a users entry of your own",
        ),
        (
            f"ssh_authorized_keys: ['{KEY}']\n",
            f"{VM}.ssh_authorized_keys: go to cloud-init's default user, which this VM does not have "
            "(virtualMachines.vm: no users entry is 'default'), and to root behind disable_root's refusal: they let "
            "nobody in; put the keys in virtualMachines.vm.sshKeys (gpucell's user) or in a users entry's "
            "ssh_authorized_keys",
        ),
        (
            "chpasswd: {expire: false, users: [{name: ops, password: x}, {name: cloud-user, password: hunter2}]}\n",
            f"{VM}.chpasswd.users[1].name: sets a password for the VM's own user 'cloud-user' "
            "(virtualMachines.vm.user), whose password gpucell keeps locked (it logs in with "
            "virtualMachines.vm.sshKeys); drop the entry, or set virtualMachines.vm.user to another name",
        ),
        (
            "chpasswd: {list: 'cloud-user:hunter2'}\n",
            f"{VM}.chpasswd.list[0]: sets a password for the VM's own user 'cloud-user' (virtualMachines.vm.user), "
            "whose password gpucell keeps locked (it logs in with virtualMachines.vm.sshKeys); drop the entry, or "
            "set virtualMachines.vm.user to another name",
        ),
    ],
    ids=["password", "ssh_authorized_keys", "chpasswd.users", "chpasswd.list"],
)
def test_user_data_that_would_do_nothing_or_unlock_the_user_is_one_line(user_data: str, line: str) -> None:
    assert region_refusals(vm_region(user_data)) == [line]
    assert "hunter2" not in line


def test_password_and_top_level_keys_work_beside_a_default_user_and_chpasswd_for_another_user() -> None:
    user_data = f"users: [default]\npassword: x\nssh_authorized_keys: ['{KEY}']\nchpasswd: {{users: [{{name: ops}}]}}\n"
    assert region_refusals(vm_region(user_data)) == []


# -- free-form GPU Operator values that change what nodes advertise or accept ---------------------------------------
TIME_SLICING = {"name": "time-slicing-config", "default": "any"}


@pytest.mark.parametrize(
    ("values", "line"),
    [
        (
            {"devicePlugin": {"config": TIME_SLICING}},
            f"{R}.gpuOperator.values.devicePlugin.config: is fixed by gpucell: a device plugin config (time-slicing, "
            "MPS) multiplies the nvidia.com/gpu nodes advertise while capacity, quotas and metering count whole GPUs; "
            "share GPUs with MIG (nodePools.<pool>.migConfig) or vGPU pools; remove it",
        ),
        (
            {"migManager": {"config": {"name": "custom-mig-parted-config"}}},
            f"{R}.gpuOperator.values.migManager.config: is set by gpucell from nodePools.<pool>.migConfig; set "
            "nodePools.<pool>.migConfig instead",
        ),
        (
            {"sandboxWorkloads": {"enabled": False}},
            f"{R}.gpuOperator.values.sandboxWorkloads.enabled: is set by gpucell from nodePools.<pool>.gpuMode; set "
            "nodePools.<pool>.gpuMode instead",
        ),
        (
            {"operator": {"runtimeClass": "nvidia-cdi"}},
            f"{R}.gpuOperator.values.operator.runtimeClass: 'nvidia-cdi' renames the RuntimeClass, which gpucell's "
            "GPU workloads name as runtimeClassName nvidia; remove it (or set nvidia)",
        ),
    ],
    ids=["time-slicing", "mig-parted-config", "sandbox-workloads-off", "runtime-class-renamed"],
)
def test_gpu_operator_values_around_the_typed_model_are_one_line(values: dict[str, Any], line: str) -> None:
    region = minimal_cell_config()
    region["gpuOperator"] = {"values": values}
    assert region_refusals(region) == [line]


def test_gpucells_own_runtime_class_is_accepted_in_gpu_operator_values() -> None:
    region = minimal_cell_config()
    region["gpuOperator"] = {"values": {"operator": {"runtimeClass": "nvidia", "priorityClassName": "x"}}}
    assert region_refusals(region) == []


# -- CDI's upload proxy: a bare host, as virtctl takes it -----------------------------------------------------------
def test_a_bare_upload_proxy_host_is_accepted_and_kept_for_virtctl() -> None:
    from gpucell.components.cdi import cdi_spec

    region = minimal_cell_config()
    region["cdi"] = {"uploadProxyUrl": "cdi-upload.fra1.example.net"}
    url = fra1(region).cdi.upload_proxy_url
    assert url == "cdi-upload.fra1.example.net"
    assert cdi_spec("local-path", url, [])["config"]["uploadProxyURLOverride"] == "cdi-upload.fra1.example.net"


def test_a_bare_host_with_a_port_is_refused_as_virtctl_would_misread_it() -> None:
    region = minimal_cell_config()
    region["cdi"] = {"uploadProxyUrl": "cdi-upload.fra1.example.net:8443"}
    assert region_refusals(region) == [
        f"{R}.cdi.uploadProxyUrl: 'cdi-upload.fra1.example.net:8443' is not an https:// URL with a host, nor a bare "
        "host name (with a port, write https://host:port: virtctl reads host:port as a URL scheme)"
    ]


# -- Pascal and Volta boards: passthrough only --------------------------------------------------------------------
V100: dict[str, Any] = {
    "pciDeviceId": "1db6",
    "pciDeviceName": "GV100GL [Tesla V100 PCIe 32GB]",
    "architecture": "Volta",
    "framebufferMib": 32768,
}
"""``pci.ids``: ``1db6  GV100GL [Tesla V100 PCIe 32GB]``."""
P100: dict[str, Any] = {
    "pciDeviceId": "15f8",
    "pciDeviceName": "GP100GL [Tesla P100 PCIe 16GB]",
    "architecture": "Pascal",
    "framebufferMib": 16384,
}
"""``pci.ids``: ``15f8  GP100GL [Tesla P100 PCIe 16GB]``."""


def old_board_region(model: str, mode: str) -> dict[str, Any]:
    region = minimal_cell_config()
    region["nodePools"]["old"] = {
        "role": "gpu",
        "gpuModel": model,
        "gpusPerNode": 4,
        "gpuMode": mode,
        "hosts": [{"name": "old-1", "address": "10.20.0.41"}],
    }
    return region


@pytest.mark.parametrize(("model", "spec"), [("V100-PCIe-32GB", V100), ("P100-PCIe-16GB", P100)])
def test_pascal_and_volta_boards_serve_passthrough_pools(model: str, spec: dict[str, Any]) -> None:
    cell = fra1(old_board_region(model, "vm-passthrough"), gpuModels={model: spec})
    assert cell.gpu_catalog[model].passthrough_resource == (
        "nvidia.com/GV100GL_TESLA_V100_PCIE_32GB"
        if model.startswith("V")
        else "nvidia.com/GP100GL_TESLA_P100_PCIE_16GB"
    )


def test_a_volta_board_in_a_container_pool_is_one_line() -> None:
    region = old_board_region("V100-PCIe-32GB", "container")
    assert stack_refusals(region, gpuModels={"V100-PCIe-32GB": V100}) == [
        f"{R}.nodePools.old.gpuMode: container needs the host's NVIDIA driver, and 'V100-PCIe-32GB' is a Volta GPU, "
        "which the GPU Operator's driver (595) no longer supports (R580 was the last branch); use vm-passthrough, "
        "where the guest brings its own driver"
    ]


# -- a topology profile on a CPU pool ------------------------------------------------------------------------------
TOPOLOGY = {"reservedCpus": "0-1", "numaNodes": 2, "cpusPerNuma": 32, "memoryPerNumaGib": 256}


def test_a_topology_profile_on_a_cpu_pool_says_where_a_cpu_only_numa_vm_goes() -> None:
    region = minimal_cell_config()
    region["nodePools"]["cpu"]["topology"] = copy.deepcopy(TOPOLOGY)
    assert region_refusals(region) == [
        f"{R}.nodePools.cpu.topology: is only valid on vm-passthrough, vm-vgpu and dra pools (this pool's role is "
        "cpu); a CPU-only VM with dedicatedCpus, hugepages or numaPassthrough runs on a gpu pool with a topology "
        "profile: name that pool in the VM's pool"
    ]


# -- YAML merge keys in a stack file --------------------------------------------------------------------------------
def test_yaml_merge_keys_in_a_stack_file_are_read_as_the_pulumi_cli_reads_them(tmp_path: Path) -> None:
    shutil.copy(REPO / "Pulumi.yaml", tmp_path)
    (tmp_path / "Pulumi.merge.yaml").write_text(
        "config:\n"
        "  gpucell:base: &host {role: cpu, taints: []}\n"
        "  gpucell:pool:\n"
        "    <<: *host\n"
        "    role: gpu\n"
        "  gpucell:pools:\n"
        "    <<: [*host, {labels: {a: b}}]\n"
    )
    config = read_stack_files(tmp_path, "merge").config
    assert config["gpucell:pool"] == {"role": "gpu", "taints": []}
    assert config["gpucell:pools"] == {"role": "cpu", "taints": [], "labels": {"a": "b"}}
    assert yaml.safe_load((tmp_path / "Pulumi.merge.yaml").read_text())["config"]["gpucell:pool"] == {
        "role": "gpu",
        "taints": [],
    }


def test_a_key_written_twice_beside_a_merge_is_still_refused(tmp_path: Path) -> None:
    shutil.copy(REPO / "Pulumi.yaml", tmp_path)
    (tmp_path / "Pulumi.twice.yaml").write_text(
        "config:\n  gpucell:base: &b {x: 1}\n  gpucell:pool:\n    <<: *b\n    y: 1\n    y: 2\n"
    )
    with pytest.raises(ConfigError) as caught:
        read_stack_files(tmp_path, "twice")
    assert caught.value.lines[0].startswith("Pulumi.twice.yaml: is not valid YAML: duplicate key 'y'")


def test_a_cpu_only_numa_vm_pinned_to_a_gpu_pool_with_a_topology_profile_is_accepted() -> None:
    region = vm_region("packages: [numactl]\n")
    region["nodePools"]["h100"] = {
        "role": "gpu",
        "gpuModel": "H100-SXM5-80GB",
        "gpusPerNode": 8,
        "gpuMode": "vm-passthrough",
        "topology": {**TOPOLOGY, "cpusPerNuma": 112, "memoryPerNumaGib": 1000, "hugepages1GiPerNuma": 960},
        "hosts": [{"name": "h100-1", "address": "10.20.0.51"}],
    }
    region["tenants"]["acme"]["virtualMachines"]["vm"].update(cpu={"cores": 4}, dedicatedCpus=True, pool="h100")
    assert region_refusals(region) == []
    region["tenants"]["acme"]["virtualMachines"]["vm"].pop("pool")
    assert region_refusals(region) == [
        f"{R}.tenants.acme.virtualMachines.vm.dedicatedCpus: dedicated CPUs, hugepages or NUMA passthrough need a "
        "pool with a topology profile, and none of the candidate pools has one; cpu pools take none: set pool to a "
        "gpu pool that has one (h100)"
    ]
