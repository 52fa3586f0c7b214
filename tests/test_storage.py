"""Storage: exactly one default StorageClass per backend, Longhorn values, the VM disk shape, ordering."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest
import yaml
from pulumi_kubernetes.core.v1 import ConfigMap

from gpucell.components.storage import Storage, StorageArgs, longhorn_values
from gpucell.engine.mock_engine import PlanResult, run_program
from gpucell.errors import ConfigError
from gpucell.k3s import _scripts as k3s
from gpucell.spec import CellSpec, NodeRole
from tests.conftest import UPSTREAM, cell, minimal_cell_config, program_cluster

LONGHORN_VALUES = UPSTREAM / "longhorn" / "values.yaml"
PATCH = "kubernetes:storage.k8s.io/v1:StorageClassPatch"
RELEASE = "kubernetes:helm.sh/v3:Release"


def longhorn_config(replicas: int = 2, values: dict[str, Any] | None = None) -> dict[str, Any]:
    config = minimal_cell_config()
    config["storage"] = {"backend": "longhorn", "replicas": replicas}
    if values:
        config["storage"]["values"] = values
    return config


def build(spec: CellSpec, *, after: bool = False) -> tuple[PlanResult, dict[str, Any]]:
    """Run a Storage component; ``attrs`` holds its python attributes as seen after construction."""
    attrs: dict[str, Any] = {}

    def program() -> None:
        deps = [ConfigMap("cilium-ready")] if after else []
        storage = Storage(
            "fra1", StorageArgs.from_cell(spec, program_cluster(spec)), opts=pulumi.ResourceOptions(depends_on=deps)
        )
        attrs.update(
            ready=storage.ready,
            access_modes=storage.access_modes,
            volume_mode=storage.volume_mode,
            release=storage.release,
        )
        pulumi.export("storageClassName", storage.storage_class_name)
        pulumi.export("ready", [r.urn for r in storage.ready])
        # A consumer that only uses the class name must still wait for the storage to be ready.
        ConfigMap("consumer", data={"storageClass": storage.storage_class_name})

    return run_program(program), attrs


def first_server_config(spec: CellSpec) -> dict[str, Any]:
    pool_name, pool = next(iter(spec.pools(NodeRole.SERVER).items()))
    return k3s.node_config(spec, pool_name, pool, pool.hosts[0])


# -- local-path ----------------------------------------------------------------------------------------------
def test_local_path_is_asserted_default_by_a_server_side_patch() -> None:
    plan, attrs = build(cell(minimal_cell_config()))
    (patch,) = plan.of_type(PATCH)
    assert patch.name == "fra1-local-path-default"
    assert patch.inputs["metadata"] == {
        "name": "local-path",
        "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
    }
    assert plan.of_type(RELEASE) == []
    assert plan.outputs["storageClassName"] == "local-path"
    assert plan.outputs["ready"] == [patch.urn]
    assert attrs["release"] is None


def test_local_path_vm_disks_are_filesystem_rwo() -> None:
    _, attrs = build(cell(minimal_cell_config()))
    assert attrs["access_modes"] == ["ReadWriteOnce"]
    assert attrs["volume_mode"] == "Filesystem"


def test_local_path_keeps_k3s_local_storage_enabled() -> None:
    assert "local-storage" not in first_server_config(cell(minimal_cell_config()))["disable"]


# -- longhorn ------------------------------------------------------------------------------------------------
def test_longhorn_release_is_the_pinned_chart_in_longhorn_system() -> None:
    plan, attrs = build(cell(longhorn_config()))
    (release,) = plan.of_type(RELEASE)
    assert release.name == "fra1-longhorn"
    assert release.inputs["chart"] == "longhorn"
    assert release.inputs["repositoryOpts"] == {"repo": "https://charts.longhorn.io"}
    assert release.inputs["version"] == "1.12.1"
    assert release.inputs["namespace"] == "longhorn-system"
    assert release.inputs["name"] == "longhorn"
    assert plan.of_type(PATCH) == []
    assert plan.outputs["storageClassName"] == "longhorn"
    assert plan.outputs["ready"] == [release.urn]
    assert attrs["release"] is not None
    (component,) = plan.of_type("gpucell:index:Storage")
    assert release.parent == component.urn


def test_longhorn_class_is_default_with_the_spec_replica_count() -> None:
    plan, _ = build(cell(longhorn_config(replicas=2)))
    values = plan.of_type(RELEASE)[0].inputs["values"]
    assert values["persistence"] == {"defaultClass": True, "defaultClassReplicaCount": 2}
    setting = values["defaultSettings"]["defaultReplicaCount"]
    assert isinstance(setting, str)  # the chart fails on anything but a string
    assert json.loads(setting) == {"v1": "2", "v2": "2"}


def test_longhorn_vm_disks_are_block_rwo() -> None:
    _, attrs = build(cell(longhorn_config()))
    assert attrs["access_modes"] == ["ReadWriteOnce"]
    assert attrs["volume_mode"] == "Block"


def test_longhorn_cell_has_exactly_one_default_class() -> None:
    # k3s re-applies local-path as default on every restart, so the only way to one default is not to run it.
    spec = cell(longhorn_config())
    assert "local-storage" in first_server_config(spec)["disable"]
    plan, _ = build(spec)
    assert plan.of_type(PATCH) == []
    assert plan.of_type(RELEASE)[0].inputs["values"]["persistence"]["defaultClass"] is True


def test_user_values_are_deep_merged_into_the_longhorn_release() -> None:
    overrides = {"persistence": {"reclaimPolicy": "Retain"}, "defaultSettings": {"defaultDataPath": "/data/lh/"}}
    plan, _ = build(cell(longhorn_config(replicas=3, values=overrides)))
    values = plan.of_type(RELEASE)[0].inputs["values"]
    assert values["persistence"] == {"defaultClass": True, "defaultClassReplicaCount": 3, "reclaimPolicy": "Retain"}
    assert values["defaultSettings"] == {
        "defaultReplicaCount": '{"v1":"3","v2":"3"}',
        "nodeDrainPolicy": "block-for-eviction-if-contains-last-replica",
        "nodeDownPodDeletionPolicy": "delete-both-statefulset-and-deployment-pod",
        "concurrentAutomaticEngineUpgradePerNodeLimit": 1,
        "defaultDataPath": "/data/lh/",
    }


def test_every_longhorn_key_we_set_exists_in_the_charts_values_yaml() -> None:
    defaults = yaml.safe_load(LONGHORN_VALUES.read_text())
    config = longhorn_config()
    config["nodePools"]["l40s"]["taints"] = ["gpucell.io/gpu:NoSchedule"]
    spec = cell(config)
    ours = longhorn_values(spec.storage, spec.node_pools)
    assert set(ours) == {"persistence", "defaultSettings", "longhornManager", "longhornDriver"}
    for section, keys in ours.items():
        assert section in defaults
        for key in keys:
            assert key in defaults[section], f"{section}.{key} is not a key of longhorn values.yaml"
    # The per-engine setting has the shape of the chart's documented default.
    assert '"{"v1":"3","v2":"3"}"' in LONGHORN_VALUES.read_text()


# -- ordering ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("config", [minimal_cell_config(), longhorn_config()], ids=["local-path", "longhorn"])
def test_children_wait_for_the_components_dependencies(config: dict[str, Any]) -> None:
    plan, _ = build(cell(config), after=True)
    (component,) = plan.of_type("gpucell:index:Storage")
    children = plan.children(component)
    assert children
    for child in children:
        assert plan.named("cilium-ready").urn in child.dependencies


@pytest.mark.parametrize("config", [minimal_cell_config(), longhorn_config()], ids=["local-path", "longhorn"])
def test_using_the_class_name_waits_for_the_storage(config: dict[str, Any]) -> None:
    plan, _ = build(cell(config))
    (ready,) = plan.outputs["ready"]
    assert plan.named("consumer").dependencies == [ready]


# -- tainted pools -------------------------------------------------------------------------------------------
def test_tainted_worker_pools_keep_longhorn_on_them() -> None:
    """longhorn/longhorn#5306: a tainted node without tolerations gets no Longhorn driver or instance manager."""
    config = longhorn_config()
    config["nodePools"]["l40s"]["taints"] = ["nvidia.com/gpu=present:NoSchedule", "gpucell.io/dedicated:NoExecute"]
    config["nodePools"]["cpu"]["taints"] = ["gpucell.io/dedicated:NoExecute"]
    config["nodePools"]["servers"]["taints"] = ["CriticalAddonsOnly=true:NoExecute"]  # no tenant pod runs there
    plan, _ = build(cell(config))
    values = plan.of_type(RELEASE)[0].inputs["values"]
    tolerations = [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
        {"key": "gpucell.io/dedicated", "operator": "Exists", "effect": "NoExecute"},
    ]
    assert values["longhornManager"] == {"tolerations": tolerations}
    assert values["longhornDriver"] == {"tolerations": tolerations}
    assert values["defaultSettings"]["taintToleration"] == (
        "nvidia.com/gpu=present:NoSchedule;gpucell.io/dedicated:NoExecute"
    )
    defaults = yaml.safe_load(LONGHORN_VALUES.read_text())
    assert defaults["longhornManager"]["tolerations"] == []
    assert defaults["defaultSettings"]["taintToleration"] is None


def test_untainted_cell_sets_no_longhorn_tolerations() -> None:
    spec = cell(longhorn_config())
    values = longhorn_values(spec.storage, spec.node_pools)
    assert set(values) == {"persistence", "defaultSettings"}
    assert "taintToleration" not in values["defaultSettings"]


def test_longhorn_tolerations_are_owned_by_the_pools() -> None:
    config = longhorn_config(values={"defaultSettings": {"taintToleration": "x:NoSchedule"}})
    with pytest.raises(ConfigError) as info:
        cell(config)
    assert info.value.lines == [
        "storage.values.defaultSettings.taintToleration: is set by gpucell from nodePools.<pool>.taints; set "
        "nodePools.<pool>.taints instead"
    ]


def test_longhorn_engines_follow_each_upgrade_so_the_next_is_not_refused() -> None:
    """longhorn/longhorn#5842, #2152: with the chart's default 0, volume engines stay on the old engine image and a
    later Longhorn upgrade is refused by its pre-upgrade check; 1.12.1's own question says 0 means never."""
    questions = yaml.safe_load((UPSTREAM / "charts" / "longhorn-1.12.1" / "questions.yaml").read_text())["questions"]
    flat = [*questions, *(sub for q in questions for sub in q.get("subquestions", []))]
    (question,) = [q for q in flat if q["variable"] == "defaultSettings.concurrentAutomaticEngineUpgradePerNodeLimit"]
    assert (question["type"], question["default"]) == ("int", 0)
    assert "does not automatically upgrade volume engines" in question["description"]
    spec = cell(longhorn_config())
    settings = longhorn_values(spec.storage, spec.node_pools)["defaultSettings"]
    assert settings["concurrentAutomaticEngineUpgradePerNodeLimit"] == 1


def test_longhorn_evicts_a_last_replica_on_drain_and_lets_a_dead_nodes_pods_go() -> None:
    """longhorn/longhorn#2639: a drain waits for good on a node holding a volume's last healthy replica;
    longhorn/longhorn#1179: a volume stays attached to a dead node. Both values are options of the chart's own."""
    questions = yaml.safe_load((UPSTREAM / "charts" / "longhorn-1.12.1" / "questions.yaml").read_text())["questions"]
    flat = [*questions, *(sub for q in questions for sub in q.get("subquestions", []))]
    options = {q["variable"]: q.get("options", []) for q in flat}
    spec = cell(longhorn_config())
    settings = longhorn_values(spec.storage, spec.node_pools)["defaultSettings"]
    assert settings["nodeDrainPolicy"] == "block-for-eviction-if-contains-last-replica"
    assert settings["nodeDownPodDeletionPolicy"] == "delete-both-statefulset-and-deployment-pod"
    assert settings["nodeDrainPolicy"] in options["defaultSettings.nodeDrainPolicy"]
    assert settings["nodeDownPodDeletionPolicy"] in options["defaultSettings.nodeDownPodDeletionPolicy"]
