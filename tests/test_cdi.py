"""CDI: operator manifest, the CDI CR (scratch class, gates, upload proxy), StorageProfile patch, ordering."""

from __future__ import annotations

import copy
from typing import Any

import pulumi
import pytest
from pulumi_kubernetes.core.v1 import ConfigMap

from gpucell.components.cdi import Cdi, CdiArgs, VolumeClass
from gpucell.components.storage import Storage, StorageArgs
from gpucell.engine.mock_engine import PlanResult, Registration, run_program
from gpucell.errors import ConfigError
from gpucell.spec import AccessMode, CdiSpec, CellSpec, StackSpec, VolumeMode
from gpucell.stacks.conformance.objects import Violation
from tests.conftest import cell, minimal_cell_config, program_cluster, violations

CR = "kubernetes:cdi.kubevirt.io/v1beta1:CDI"
PROFILE = "kubernetes:cdi.kubevirt.io/v1beta1:StorageProfilePatch"
CONFIG_FILE = "kubernetes:yaml/v2:ConfigFile"


def longhorn_config() -> dict[str, Any]:
    config = minimal_cell_config()
    config["storage"] = {"backend": "longhorn", "replicas": 2}
    return config


def install(spec: CellSpec, *, after: bool = False, upload_proxy_url: str | None = None) -> PlanResult:
    if upload_proxy_url is not None:
        spec = spec.model_copy(update={"cdi": CdiSpec(upload_proxy_url=upload_proxy_url)})

    def program() -> None:
        deps = [ConfigMap("cilium-ready")] if after else []
        cluster = program_cluster(spec)
        storage = Storage("fra1-storage", StorageArgs.from_cell(spec, cluster))
        Cdi("fra1", CdiArgs.from_cell(spec, cluster, storage), opts=pulumi.ResourceOptions(depends_on=deps))
        pulumi.export("ready", [r.urn for r in storage.ready])

    return run_program(program)


def the(plan: PlanResult, type_token: str) -> Registration:
    (registration,) = plan.of_type(type_token)
    return registration


def test_operator_comes_from_the_pinned_release_manifest() -> None:
    operator = the(install(cell(minimal_cell_config())), CONFIG_FILE)
    assert operator.name == "fra1-operator"
    assert operator.inputs["file"] == (
        "https://github.com/kubevirt/containerized-data-importer/releases/download/v1.66.0/cdi-operator.yaml"
    )


def test_cr_is_the_cluster_scoped_cdi_and_waits_for_available() -> None:
    plan = install(cell(minimal_cell_config()))
    cr = the(plan, CR)
    assert cr.name == "fra1-cdi"
    assert cr.inputs["metadata"] == {"name": "cdi", "annotations": {"pulumi.com/waitFor": "condition=Available"}}
    assert cr.parent == the(plan, "gpucell:index:Cdi").urn


@pytest.mark.parametrize(
    ("config", "scratch"),
    [(minimal_cell_config(), "local-path"), (longhorn_config(), "longhorn")],
    ids=["local-path", "longhorn"],
)
def test_cr_config_uses_the_cells_class_for_scratch_space(config: dict[str, Any], scratch: str) -> None:
    spec = the(install(cell(config)), CR).inputs["spec"]
    assert spec["config"] == {"scratchSpaceStorageClass": scratch, "featureGates": ["HonorWaitForFirstConsumer"]}
    assert spec["imagePullPolicy"] == "IfNotPresent"
    assert spec["infra"] == {
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
    }
    assert spec["workload"] == {"nodeSelector": {"kubernetes.io/os": "linux"}}


def test_upload_proxy_url_is_set_only_when_given() -> None:
    url = "https://cdi-upload.fra1.example.net"
    spec = the(install(cell(minimal_cell_config()), upload_proxy_url=url), CR).inputs["spec"]
    assert spec["config"]["uploadProxyURLOverride"] == url
    default = the(install(cell(minimal_cell_config())), CR).inputs["spec"]
    assert "uploadProxyURLOverride" not in default["config"]


def test_upload_proxy_url_must_be_https() -> None:
    config = minimal_cell_config()
    config["cdi"] = {"uploadProxyUrl": "http://upload.example.net"}
    with pytest.raises(ConfigError) as info:
        StackSpec.model_validate({"regions": {"fra1": config}})
    assert info.value.lines == [
        "regions.fra1.cdi.uploadProxyUrl: 'http://upload.example.net' is not an https:// URL with a host, nor a "
        "bare host name (with a port, write https://host:port: virtctl reads host:port as a URL scheme)"
    ]


@pytest.mark.parametrize("config", [minimal_cell_config(), longhorn_config()], ids=["local-path", "longhorn"])
def test_cr_depends_on_its_operator_and_on_the_storage(config: dict[str, Any]) -> None:
    plan = install(cell(config))
    cr = the(plan, CR)
    (ready,) = plan.outputs["ready"]
    assert plan.named("fra1-operator").urn in cr.dependencies
    assert ready in cr.dependencies


FILESYSTEM = {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem"}


@pytest.mark.parametrize(
    ("config", "name", "claims"),
    [
        (minimal_cell_config(), "local-path", [FILESYSTEM]),
        # VM disks take the first set; KubeVirt's VM state PVCs (Filesystem) find the second and ask for RWO
        (longhorn_config(), "longhorn", [{"accessModes": ["ReadWriteOnce"], "volumeMode": "Block"}, FILESYSTEM]),
    ],
    ids=["local-path", "longhorn"],
)
def test_storage_profile_patch_fits_vm_disks_to_the_backend(
    config: dict[str, Any], name: str, claims: list[dict[str, Any]]
) -> None:
    plan = install(cell(config))
    profile = the(plan, PROFILE)
    assert profile.name == "fra1-storage-profile"
    assert profile.inputs["apiVersion"] == "cdi.kubevirt.io/v1beta1"
    assert profile.inputs["kind"] == "StorageProfile"
    assert profile.inputs["metadata"] == {"name": name, "annotations": {"pulumi.com/patchForce": "true"}}
    assert profile.inputs["spec"] == {"claimPropertySets": claims}
    assert the(plan, CR).urn in profile.dependencies


def test_claim_property_set_uses_valid_pvc_access_and_volume_modes() -> None:
    # StorageProfile is not in CDI's swagger; the check holds its ClaimPropertySet to the PVC modes' enums.
    for config in (minimal_cell_config(), longhorn_config()):
        profile = the(install(cell(config)), PROFILE).inputs
        for claim in profile["spec"]["claimPropertySets"]:
            assert set(claim) == {"accessModes", "volumeMode"}  # CDI requires both or neither
        assert violations(profile, partial=True) == []
    raw = copy.deepcopy(profile)
    raw["spec"]["claimPropertySets"][0]["volumeMode"] = "Raw"
    assert violations(raw, partial=True) == [
        Violation("spec.claimPropertySets[0].volumeMode", "'Raw' is not one of ['Filesystem', 'Block']")
    ]


def test_a_volume_class_with_a_mode_kubernetes_does_not_know_is_one_line_per_mode() -> None:
    """A typo in a VolumeClass built in Python would be applied to the StorageProfile (``--check`` catches it, a
    program's ``pulumi up`` would not): every VM disk's PVC of the class would be refused."""
    with pytest.raises(ConfigError) as info:
        VolumeClass("ceph-block", access_modes=("RWO", "ReadWriteMany"), volume_mode="Blok")
    assert info.value.lines == [
        "VolumeClass.access_modes[0]: 'RWO' is not one of ReadWriteOnce, ReadWriteMany, ReadWriteOncePod",
        "VolumeClass.volume_mode: 'Blok' is not one of Filesystem, Block",
    ]
    assert VolumeClass("ceph-block", (AccessMode.RWX,), VolumeMode.BLOCK).volume_mode == "Block"


def test_children_wait_for_the_components_dependencies() -> None:
    plan = install(cell(minimal_cell_config()), after=True)
    children = plan.children(the(plan, "gpucell:index:Cdi"))
    assert sorted(c.name for c in children) == ["fra1-cdi", "fra1-operator", "fra1-storage-profile"]
    for child in children:
        assert plan.named("cilium-ready").urn in child.dependencies


@pytest.mark.parametrize("upload_proxy_url", [None, "https://cdi-upload.fra1.example.net"])
def test_cr_matches_the_cdi_v1_66_swagger(upload_proxy_url: str | None) -> None:
    cr = the(install(cell(longhorn_config()), upload_proxy_url=upload_proxy_url), CR)
    assert violations(cr.inputs) == []


def test_swagger_check_rejects_unknown_fields() -> None:
    cr = copy.deepcopy(the(install(cell(minimal_cell_config())), CR).inputs)
    cr["spec"]["config"]["uploadProxyUrlOverride"] = "https://wrong.case.example.net"
    assert violations(cr) == [
        Violation("spec.config", "Additional properties are not allowed ('uploadProxyUrlOverride' was unexpected)")
    ]


def test_tainted_vm_pools_keep_cdi_importers_schedulable() -> None:
    config = minimal_cell_config()
    config["nodePools"]["cpu"]["taints"] = ["gpucell.io/vm=true:NoSchedule"]
    config["nodePools"]["l40s"]["taints"] = ["container-only:NoSchedule"]  # container mode: no VM disks there
    cr = the(install(cell(config)), CR)
    assert cr.inputs["spec"]["workload"] == {
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "gpucell.io/vm", "operator": "Equal", "value": "true", "effect": "NoSchedule"}],
    }
    assert violations(cr.inputs) == []
    untainted = the(install(cell(minimal_cell_config())), CR)
    assert untainted.inputs["spec"]["workload"] == {"nodeSelector": {"kubernetes.io/os": "linux"}}
