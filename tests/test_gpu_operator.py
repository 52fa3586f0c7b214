"""GpuOperator: values derived from the pools, the cluster's containerd wiring, and every key path against the chart."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest
import yaml

from gpucell.cluster import Cluster, ContainerRuntime, k3s_containerd_template
from gpucell.components.gpu_operator import (
    CHART,
    DAEMONSET_TOLERATIONS,
    DRIVER_MANAGER_HANDS_OFF,
    NAMESPACE,
    NFD_WORKER_TOLERATIONS,
    GpuOperator,
    GpuOperatorArgs,
)
from gpucell.engine.mock_engine import PlanResult, Registration, run_program
from gpucell.errors import ConfigError
from gpucell.spec import CellSpec, StackSpec
from gpucell.stacks.conformance.helm_values import leaf_paths, values_problems
from tests.conftest import STORE, UPSTREAM, at, cell, minimal_cell_config, operator_values, program_cluster

RELEASE = "kubernetes:helm.sh/v3:Release"
MIG_CONFIGMAP = UPSTREAM / "gpu-operator" / "state-mig-manager" / "0400_configmap.yaml"
VGPU_IMAGE = {"repository": "registry.example.com/nvidia", "version": "580.95.02-ubuntu24.04"}


def _vm_and_mig_config() -> dict[str, Any]:
    """The minimal region plus a vm-passthrough (HGX H100), an SR-IOV vm-vgpu (L40S on the branch-580 driver), an
    mdev vm-vgpu (T4) and a MIG container pool."""
    config = minimal_cell_config()
    pools = config["nodePools"]
    pools["h100-vm"] = {
        "role": "gpu",
        "gpuModel": "H100-SXM5-80GB",
        "gpusPerNode": 8,
        "gpuMode": "vm-passthrough",
        "hosts": [{"name": "lab-gpu-2", "address": "10.20.0.22"}],
    }
    pools["l40s-vgpu"] = {
        "role": "gpu",
        "gpuModel": "L40S",
        "gpusPerNode": 4,
        "gpuMode": "vm-vgpu",
        "vgpuProfile": "L40S-24Q",
        "hosts": [{"name": "lab-gpu-3", "address": "10.20.0.23"}],
    }
    pools["t4-vgpu"] = {
        "role": "gpu",
        "gpuModel": "T4",
        "gpusPerNode": 4,
        "gpuMode": "vm-vgpu",
        "vgpuProfile": "T4-8Q",
        "hosts": [{"name": "lab-gpu-5", "address": "10.20.0.25"}],
    }
    pools["h100-mig"] = {
        "role": "gpu",
        "gpuModel": "H100-SXM5-80GB",
        "gpusPerNode": 8,
        "gpuMode": "container",
        "migConfig": "all-1g.10gb",
        "hosts": [{"name": "lab-gpu-4", "address": "10.20.0.24"}],
    }
    config["gpuOperator"] = {"vgpuDriverImage": dict(VGPU_IMAGE)}
    return config


def _plan(spec: CellSpec) -> tuple[PlanResult, Registration]:
    def program() -> None:
        operator = GpuOperator("fra1-gpu-operator", GpuOperatorArgs.from_cell(spec, program_cluster(spec)))
        pulumi.export("namespace", operator.namespace)

    plan = run_program(program)
    (release,) = plan.of_type(RELEASE)
    return plan, release


def _values(spec: CellSpec) -> dict[str, Any]:
    return _plan(spec)[1].inputs["values"]


def _env(values: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e["value"] for e in values["toolkit"]["env"]}


def test_release_chart_namespace_parent_and_output() -> None:
    plan, release = _plan(cell(minimal_cell_config()))
    component = plan.named("fra1-gpu-operator")
    assert component.type == "gpucell:index:GpuOperator"
    assert release.name == "fra1-gpu-operator-gpu-operator"
    assert release.parent == component.urn
    assert release.inputs["chart"] == "gpu-operator"
    assert release.inputs["repositoryOpts"] == {"repo": "https://helm.ngc.nvidia.com/nvidia"}
    assert release.inputs["version"] == "v26.7.0"
    assert release.inputs["name"] == "gpu-operator"
    assert release.inputs["namespace"] == NAMESPACE == "gpu-operator"
    assert CHART.chart == "gpu-operator"
    assert plan.outputs["namespace"] == "gpu-operator"


def test_container_only_cell_turns_the_vm_operands_off() -> None:
    values = _values(cell(minimal_cell_config()))
    assert at(values, "sandboxWorkloads.enabled") is False
    assert at(values, "sandboxWorkloads.defaultWorkload") == "container"
    assert at(values, "vfioManager.enabled") is False
    assert at(values, "sandboxDevicePlugin.enabled") is False
    assert values["vgpuManager"] == {"enabled": False}
    assert at(values, "vgpuDeviceManager.enabled") is False
    assert at(values, "migManager.enabled") is False
    assert at(values, "mig.strategy") == "single"
    assert at(values, "dcgmExporter.enabled") is True
    assert at(values, "ccManager.enabled") is False


def test_vm_and_mig_pools_turn_their_operands_on() -> None:
    values = _values(cell(_vm_and_mig_config()))
    assert at(values, "sandboxWorkloads.enabled") is True
    assert at(values, "sandboxWorkloads.mode") == "kubevirt"
    # Nodes take their mode from the nvidia.com/gpu.workload.config label; unlabeled ones stay containers.
    assert at(values, "sandboxWorkloads.defaultWorkload") == "container"
    assert at(values, "vfioManager.enabled") is True
    assert at(values, "sandboxDevicePlugin.enabled") is True
    assert values["vgpuManager"] == {
        "enabled": True,
        "repository": "registry.example.com/nvidia",
        "image": "vgpu-manager",
        "version": "580.95.02-ubuntu24.04",
    }
    assert at(values, "vgpuDeviceManager.enabled") is True
    assert at(values, "migManager.enabled") is True
    assert at(values, "migManager.config.default") == "all-disabled"
    assert at(values, "mig.strategy") == "mixed"


def test_passthrough_without_vgpu_keeps_the_vgpu_operands_off() -> None:
    config = _vm_and_mig_config()
    del config["nodePools"]["l40s-vgpu"]
    del config["nodePools"]["t4-vgpu"]
    del config["gpuOperator"]
    values = _values(cell(config))
    assert at(values, "sandboxWorkloads.enabled") is True
    assert at(values, "vfioManager.enabled") is True
    assert at(values, "sandboxDevicePlugin.enabled") is True
    assert values["vgpuManager"] == {"enabled": False}
    assert at(values, "vgpuDeviceManager.enabled") is False


def test_mdev_vgpu_without_passthrough_needs_the_sandbox_plugin_but_not_vfio() -> None:
    # The kubevirt-gpu-device-plugin advertises vGPU mediated devices too (operator gpuStateLabels, vm-vgpu).
    config = _vm_and_mig_config()
    del config["nodePools"]["h100-vm"]
    del config["nodePools"]["l40s-vgpu"]
    values = _values(cell(config))
    assert at(values, "sandboxDevicePlugin.enabled") is True
    assert at(values, "vfioManager.enabled") is False
    assert at(values, "vgpuManager.enabled") is True
    assert at(values, "vgpuDeviceManager.enabled") is True


def test_sriov_vgpu_alone_needs_the_vgpu_manager_and_no_mdev_operand() -> None:
    # vgpu-device-manager v0.5.0 and kubevirt-gpu-device-plugin v1.6.0 handle mdevs only; KubeVirt advertises VFs.
    config = _vm_and_mig_config()
    del config["nodePools"]["h100-vm"]
    del config["nodePools"]["t4-vgpu"]
    values = _values(cell(config))
    assert at(values, "sandboxWorkloads.enabled") is True
    assert at(values, "vgpuManager.enabled") is True
    assert at(values, "vgpuDeviceManager.enabled") is False
    assert at(values, "sandboxDevicePlugin.enabled") is False
    assert at(values, "vfioManager.enabled") is False


def test_hgx_passthrough_binds_the_nvswitches() -> None:
    values = _values(cell(_vm_and_mig_config()))
    assert values["vfioManager"] == {"enabled": True, "env": [{"name": "BIND_NVSWITCHES", "value": "true"}]}
    config = minimal_cell_config()
    config["nodePools"]["b200-vm"] = {
        "role": "gpu",
        "gpuModel": "B200",
        "gpusPerNode": 8,
        "gpuMode": "vm-passthrough",
        "hosts": [{"name": "lab-gpu-2", "address": "10.20.0.22"}],
    }
    assert _values(cell(config))["vfioManager"] == {"enabled": True}  # no NVSwitch catalogued for HGX B200


def test_vfio_manager_env_merges_by_name() -> None:
    config = _vm_and_mig_config()
    config["gpuOperator"]["values"] = {"vfioManager": {"env": [{"name": "DRIVER_UNLOAD_TIMEOUT", "value": 600}]}}
    assert _values(cell(config))["vfioManager"]["env"] == [
        {"name": "BIND_NVSWITCHES", "value": "true"},
        {"name": "DRIVER_UNLOAD_TIMEOUT", "value": "600"},
    ]


def test_tainted_gpu_pools_keep_every_operand_and_nfd() -> None:
    config = _vm_and_mig_config()
    config["nodePools"]["h100-mig"]["taints"] = [
        "nvidia.com/gpu=present:NoSchedule",
        "gpucell.io/tenant=acme:NoExecute",
    ]
    config["nodePools"]["l40s"]["taints"] = ["nvidia.com/gpu:NoSchedule"]  # the chart's own default: not repeated
    config["nodePools"]["cpu"]["taints"] = ["cpu-only:NoSchedule"]  # no GPU operand runs there
    values = _values(cell(config))
    extra = [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
        {"key": "gpucell.io/tenant", "operator": "Equal", "value": "acme", "effect": "NoExecute"},
    ]
    # Then the acceptance taint a GPU node keeps until its acceptance run passes (docs/decisions/0037).
    extra.append({"key": "gpucell.io/acceptance", "operator": "Exists", "effect": "NoSchedule"})
    assert at(values, "daemonsets.tolerations") == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        *extra,
    ]
    assert at(values, "node-feature-discovery.worker.tolerations") == [
        {"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        *extra,
    ]


def test_tolerations_keep_the_chart_defaults_first() -> None:
    chart = yaml.safe_load((UPSTREAM / "gpu-operator" / "values.yaml").read_text())
    assert list(DAEMONSET_TOLERATIONS) == chart["daemonsets"]["tolerations"]
    assert list(NFD_WORKER_TOLERATIONS) == chart["node-feature-discovery"]["worker"]["tolerations"]
    values = _values(cell(minimal_cell_config()))
    assert at(values, "daemonsets.tolerations") == [
        *chart["daemonsets"]["tolerations"],
        {"key": "gpucell.io/acceptance", "operator": "Exists", "effect": "NoSchedule"},
    ]


def test_crds_follow_chart_upgrades() -> None:
    """The chart's pre-upgrade hook applies the new CRDs (operator.upgradeCRD), which needs Helm's
    --disable-openapi-validation (NVIDIA's upgrade guide; NVIDIA/gpu-operator#602)."""
    config = minimal_cell_config()
    config["versions"] = {"gpuOperator": "v26.3.3"}
    _, release = _plan(cell(config))
    assert at(release.inputs["values"], "operator.upgradeCRD") is True
    assert release.inputs["disableOpenapiValidation"] is True
    assert release.inputs["version"] == "v26.3.3"
    chart = yaml.safe_load((UPSTREAM / "gpu-operator" / "values.yaml").read_text())
    assert chart["operator"]["upgradeCRD"] is True  # the chart's default: kept explicit so it cannot drift off


def test_only_gpucells_maintenance_cordons_and_uncordons_gpu_nodes() -> None:
    """NVIDIA/gpu-operator#304 and #2820: k8s-driver-manager v0.12.0 (the pinned chart's ``driver.manager`` and
    ``vgpuManager.driverManager``) uncordons a node unconditionally whenever ENABLE_GPU_POD_EVICTION or
    ENABLE_AUTO_DRAIN is on (both default true, ``cmd/driver-manager/main.go``), also after a reboot where it never
    cordoned; the upgrade controller (``driver.upgradePolicy.autoUpgrade``, default true) cordons, drains and
    uncordons on its own schedule."""
    chart = yaml.safe_load((UPSTREAM / "gpu-operator" / "values.yaml").read_text())
    assert chart["driver"]["upgradePolicy"]["autoUpgrade"] is True  # what gpucell turns off
    hands_off = [{"name": "ENABLE_GPU_POD_EVICTION", "value": "false"}, {"name": "ENABLE_AUTO_DRAIN", "value": "false"}]
    assert list(DRIVER_MANAGER_HANDS_OFF) == hands_off
    for config in (minimal_cell_config(), _vm_and_mig_config()):
        values = _values(cell(config))
        assert at(values, "driver.upgradePolicy.autoUpgrade") is False
        assert at(values, "driver.manager.env") == hands_off
    # The vGPU Manager's driver manager has both "false" in the operator's own manifest (v26.7.0
    # assets/state-vgpu-manager/0500_daemonset.yaml): gpucell changes nothing there, since an env change would roll
    # the vGPU Manager and reload the host driver under running VMs.
    assert "driverManager" not in _values(cell(_vm_and_mig_config()))["vgpuManager"]


@pytest.mark.parametrize(
    ("values", "line"),
    [
        (
            {"driver": {"upgradePolicy": {"autoUpgrade": True}}},
            "regions.fra1.gpuOperator.values.driver.upgradePolicy.autoUpgrade: is fixed by gpucell: gpucell's "
            "maintenance owns node cordons; the upgrade controller would uncordon nodes gpucell holds cordoned "
            "(NVIDIA/gpu-operator#2820); remove it",
        ),
        (
            {"vgpuManager": {"driverManager": {"env": [{"name": "ENABLE_AUTO_DRAIN", "value": "true"}]}}},
            "regions.fra1.gpuOperator.values.vgpuManager.driverManager.env[0].name: 'ENABLE_AUTO_DRAIN' would let "
            "the driver manager cordon and uncordon nodes, which gpucell's maintenance owns "
            "(NVIDIA/gpu-operator#304); remove it",
        ),
    ],
)
def test_values_may_not_hand_cordons_back_to_the_operator(values: dict[str, Any], line: str) -> None:
    config = minimal_cell_config()
    config["gpuOperator"] = {"values": values}
    with pytest.raises(ConfigError) as info:
        StackSpec.model_validate({"regions": {"fra1": config}})
    assert info.value.lines == [line]


@pytest.mark.parametrize(("strategy", "expected"), [(None, "mixed"), ("single", "single"), ("mixed", "mixed")])
def test_mig_strategy(strategy: str | None, expected: str) -> None:
    config = _vm_and_mig_config()
    if strategy is not None:
        config["gpuOperator"]["migStrategy"] = strategy
    assert at(_values(cell(config)), "mig.strategy") == expected


def test_dcgm_exporter_follows_the_spec() -> None:
    config = minimal_cell_config()
    config["gpuOperator"] = {"dcgmExporter": False}
    assert at(_values(cell(config)), "dcgmExporter.enabled") is False


def test_mig_layouts_in_use_ship_with_the_operator() -> None:
    # Why no custom mig-parted ConfigMap is rendered: every layout a pool names is in the default one.
    configmap = yaml.safe_load(MIG_CONFIGMAP.read_text())
    shipped = yaml.safe_load(configmap["data"]["config.yaml"])["mig-configs"]
    spec = cell(_vm_and_mig_config())
    in_use = {pool.mig_config for pool in spec.gpu_pools().values() if pool.mig_config}
    assert in_use == {"all-1g.10gb"}
    assert in_use <= set(shipped)
    assert "all-disabled" in shipped
    assert at(operator_values(spec), "migManager.config") == {"default": "all-disabled"}


def test_toolkit_env_points_at_k3s_containerd_with_string_values() -> None:
    values = _values(cell(minimal_cell_config()))
    env_list = values["toolkit"]["env"]
    assert all(set(e) == {"name", "value"} for e in env_list)
    assert all(isinstance(e["value"], str) for e in env_list)
    assert _env(values) == {
        "CONTAINERD_CONFIG": "/var/lib/rancher/k3s/agent/etc/containerd/config-v3.toml.tmpl",
        "CONTAINERD_SOCKET": "/run/k3s/containerd/containerd.sock",
        "RUNTIME_CONFIG_SOURCE": "file=/var/lib/rancher/k3s/agent/etc/containerd/config.toml",
        "CONTAINERD_RUNTIME_CLASS": "nvidia",
    }


@pytest.mark.parametrize(
    ("k3s", "template"),
    [
        ("v1.34.2+k3s1", "config-v3.toml.tmpl"),
        ("v1.31.4+k3s1", "config-v3.toml.tmpl"),
        ("v1.30.6+k3s1", "config.toml.tmpl"),
        ("v1.29.10+k3s1", "config.toml.tmpl"),
    ],
)
def test_containerd_template_follows_the_kubernetes_minor(k3s: str, template: str) -> None:
    config = minimal_cell_config()
    config["versions"] = {"k3s": k3s}
    config["k3s"] = {"installerSha256": "0" * 64}  # other releases than the default need their installer pinned
    env = _env(_values(cell(config)))
    assert env["CONTAINERD_CONFIG"] == f"/var/lib/rancher/k3s/agent/etc/containerd/{template}"
    # The config the toolkit reads from stays k3s's rendered file whatever the template.
    assert env["RUNTIME_CONFIG_SOURCE"] == "file=/var/lib/rancher/k3s/agent/etc/containerd/config.toml"


def test_containerd_template_rejects_a_malformed_minor() -> None:
    with pytest.raises(ValueError, match="invalid literal"):
        k3s_containerd_template("one.thirty")


def test_on_a_cluster_with_packaged_containerd_the_toolkit_gets_its_paths_not_k3s() -> None:
    def program() -> None:
        cluster = Cluster.from_kubeconfig("rke2", "apiVersion: v1\nkind: Config\n", "1.33")
        GpuOperator("rke2-gpu-operator", GpuOperatorArgs(cluster))

    plan = run_program(program)
    (release,) = plan.of_type(RELEASE)
    assert _env(release.inputs["values"]) == {
        "CONTAINERD_CONFIG": "/etc/containerd/config.toml",
        "CONTAINERD_SOCKET": "/run/containerd/containerd.sock",
        "CONTAINERD_RUNTIME_CLASS": "nvidia",
    }
    assert "k3s" not in str(release.inputs["values"])
    assert release.provider == "rke2-k8s"
    assert release.inputs["version"] == "v26.7.0"


def test_a_given_runtime_reaches_the_toolkit() -> None:
    rke2 = ContainerRuntime.containerd(
        "/var/lib/rancher/rke2/agent/etc/containerd/config-v3.toml.tmpl", "/run/k3s/containerd/containerd.sock"
    )

    def program() -> None:
        cluster = Cluster.from_kubeconfig("rke2", "apiVersion: v1\nkind: Config\n", "1.33", rke2)
        GpuOperator("rke2-gpu-operator", GpuOperatorArgs(cluster))

    (release,) = run_program(program).of_type(RELEASE)
    assert _env(release.inputs["values"])["CONTAINERD_CONFIG"] == (
        "/var/lib/rancher/rke2/agent/etc/containerd/config-v3.toml.tmpl"
    )


@pytest.mark.parametrize("config_factory", [minimal_cell_config, _vm_and_mig_config])
def test_every_key_path_we_set_exists_in_the_pinned_chart(config_factory: Any) -> None:
    spec = cell(config_factory())
    values = operator_values(spec)
    paths = list(leaf_paths(values))
    assert ("toolkit", "env") in paths
    assert ("vgpuManager", "enabled") in paths
    assert values_problems(STORE, "gpu-operator", spec.versions.gpu_operator, values) == []
    # The checker does catch a missing key: operator.defaultRuntime is gone from the pinned chart, so we
    # do not set it.
    removed = {"operator": {"defaultRuntime": "containerd"}}
    assert values_problems(STORE, "gpu-operator", spec.versions.gpu_operator, removed) == [
        ("operator.defaultRuntime", "is not a value of chart gpu-operator v26.7.0 (renamed or removed upstream?)")
    ]
    assert values["operator"] == {"upgradeCRD": True}


def test_user_values_override_deep_merges_over_ours() -> None:
    config = _vm_and_mig_config()
    config["gpuOperator"]["values"] = {
        "driver": {"enabled": False},
        "dcgmExporter": {"serviceMonitor": {"enabled": False}},
        "toolkit": {
            "env": [
                {"name": "CONTAINERD_SET_AS_DEFAULT", "value": True},
                {"name": "CONTAINERD_SOCKET", "value": "/run/k3s/containerd/containerd.sock"},
            ]
        },
    }
    values = _values(cell(config))
    assert at(values, "driver.enabled") is False
    assert at(values, "dcgmExporter.serviceMonitor.enabled") is False
    assert at(values, "dcgmExporter.enabled") is True  # ours, beside the override
    assert at(values, "mig.strategy") == "mixed"
    assert at(values, "vfioManager.enabled") is True
    env = _env(values)
    # toolkit.env merges by name: ours stay, the user's win by name, new names are appended, all strings
    assert env["CONTAINERD_SOCKET"] == "/run/k3s/containerd/containerd.sock"
    assert env["CONTAINERD_RUNTIME_CLASS"] == "nvidia"
    assert env["CONTAINERD_SET_AS_DEFAULT"] == "true"
    assert all(isinstance(v, str) for v in env.values())


def test_values_may_not_override_what_typed_keys_set() -> None:
    config = _vm_and_mig_config()
    config["gpuOperator"]["values"] = {"mig": {"strategy": "single"}}
    with pytest.raises(ConfigError) as info:
        StackSpec.model_validate({"regions": {"fra1": config}})
    assert info.value.lines == [
        "regions.fra1.gpuOperator.values.mig.strategy: is set by gpucell from gpuOperator.migStrategy; set "
        "gpuOperator.migStrategy instead"
    ]


@pytest.mark.parametrize(
    ("values", "line"),
    [
        (
            {"operator": {"upgradeCRD": False}},
            "regions.fra1.gpuOperator.values.operator.upgradeCRD: is fixed by "
            "gpucell: the operator's CRDs must follow every chart upgrade (NVIDIA/gpu-operator#602); remove it",
        ),
        (
            {"daemonsets": {"tolerations": []}},
            "regions.fra1.gpuOperator.values.daemonsets.tolerations: is set by "
            "gpucell from nodePools.<pool>.taints; set nodePools.<pool>.taints instead",
        ),
    ],
)
def test_values_may_not_turn_off_crd_upgrades_or_tolerations(values: dict[str, Any], line: str) -> None:
    config = minimal_cell_config()
    config["gpuOperator"] = {"values": values}
    with pytest.raises(ConfigError) as info:
        StackSpec.model_validate({"regions": {"fra1": config}})
    assert info.value.lines == [line]
