"""KServe after cert-manager: three charts in order, raw deployment mode per version, user overrides."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from gpucell.components.cert_manager import CertManager, CertManagerArgs, cert_manager_values
from gpucell.components.kserve import KServe, KServeArgs, kserve_resources_values, kserve_runtime_values
from gpucell.engine.mock_engine import PlanResult, run_program
from gpucell.spec import CellSpec
from gpucell.stacks.conformance.helm_values import leaf_paths, values_problems
from tests.conftest import STORE, at, cell, minimal_cell_config, program_cluster

RELEASE = "kubernetes:helm.sh/v3:Release"


def _plan(spec: CellSpec) -> PlanResult:
    """cert-manager, then KServe depending on it, as RegionalCell wires them."""

    def program() -> None:
        cluster = program_cluster(spec)
        cert_manager = CertManager("fra1-cert-manager", CertManagerArgs.from_cell(spec, cluster))
        after_cert_manager = pulumi.ResourceOptions(depends_on=[cert_manager])
        kserve = KServe("fra1-kserve", KServeArgs.from_cell(spec, cluster), opts=after_cert_manager)
        pulumi.export("kserveNamespace", kserve.namespace)
        pulumi.export("certManagerNamespace", cert_manager.namespace)

    return run_program(program)


def _config(**sections: Any) -> dict[str, Any]:
    config = minimal_cell_config()
    config.update(sections)
    return config


# -- cert-manager --------------------------------------------------------------------------------
def test_cert_manager_release() -> None:
    plan = _plan(cell(minimal_cell_config()))
    component = plan.named("fra1-cert-manager")
    release = plan.named("fra1-cert-manager-cert-manager")
    assert component.type == "gpucell:index:CertManager"
    assert release.type == RELEASE
    assert release.parent == component.urn
    assert release.inputs["chart"] == "cert-manager"
    assert release.inputs["repositoryOpts"] == {"repo": "https://charts.jetstack.io"}
    assert release.inputs["version"] == "v1.21.1"
    assert release.inputs["namespace"] == "cert-manager"
    # Helm must wait (webhook Deployment ready, startupapicheck hook done) before KServe starts.
    assert release.inputs["skipAwait"] is False
    assert release.inputs["values"]["crds"] == {"enabled": True, "keep": True}
    assert "installCRDs" not in release.inputs["values"]
    assert plan.outputs["certManagerNamespace"] == "cert-manager"


def test_cert_manager_key_paths_exist_and_crds_key_is_the_current_one() -> None:
    spec = cell(minimal_cell_config())
    version = spec.versions.cert_manager
    assert values_problems(STORE, "cert-manager", version, cert_manager_values()) == []
    assert values_problems(STORE, "cert-manager", version, cert_manager_values(gateway_api=True)) == []
    assert STORE.load("cert-manager/values.yaml")["crds"]["enabled"] is False  # the default we flip
    assert values_problems(STORE, "cert-manager", version, {"crds": {"install": True}}) == [
        ("crds.install", "is not a value of chart cert-manager v1.21.1 (renamed or removed upstream?)")
    ]


def test_cert_manager_user_values_deep_merge() -> None:
    plan = _plan(cell(_config(certManager={"values": {"crds": {"keep": False}, "replicaCount": 2}})))
    values = plan.named("fra1-cert-manager-cert-manager").inputs["values"]
    assert values["crds"] == {"enabled": True, "keep": False}
    assert values["replicaCount"] == 2


# -- KServe chain --------------------------------------------------------------------------------
def test_kserve_charts_versions_and_parents() -> None:
    plan = _plan(cell(minimal_cell_config()))
    component = plan.named("fra1-kserve")
    assert component.type == "gpucell:index:KServe"
    children = plan.children(component)
    assert [c.name for c in children] == ["fra1-kserve-crd", "fra1-kserve-resources", "fra1-kserve-runtimes"]
    assert [c.inputs["chart"] for c in children] == [
        "oci://ghcr.io/kserve/charts/kserve-crd",
        "oci://ghcr.io/kserve/charts/kserve-resources",
        "oci://ghcr.io/kserve/charts/kserve-runtime-configs",
    ]
    names = ["kserve-crd", "kserve-resources", "kserve-runtime-configs"]
    assert [c.inputs["name"] for c in children] == names
    for child in children:
        assert child.type == RELEASE
        assert child.inputs["version"] == "v0.20.0"
        assert child.inputs["namespace"] == "kserve"
        assert "repositoryOpts" not in child.inputs  # OCI references carry their registry
    assert plan.outputs["kserveNamespace"] == "kserve"


def test_kserve_chain_edges_and_cert_manager_edge() -> None:
    plan = _plan(cell(minimal_cell_config()))
    cert_manager_release = plan.named("fra1-cert-manager-cert-manager").urn
    crd = plan.named("fra1-kserve-crd")
    resources = plan.named("fra1-kserve-resources")
    runtimes = plan.named("fra1-kserve-runtimes")
    assert plan.children(plan.named("fra1-kserve"))[0] is crd
    assert cert_manager_release in crd.dependencies
    assert crd.urn in resources.dependencies
    assert resources.urn in runtimes.dependencies
    assert cert_manager_release in resources.dependencies
    assert cert_manager_release in runtimes.dependencies
    # The edges point one way only.
    assert resources.urn not in crd.dependencies
    assert runtimes.urn not in resources.dependencies


def test_raw_mode_values_on_the_pinned_version() -> None:
    plan = _plan(cell(minimal_cell_config()))
    values = plan.named("fra1-kserve-resources").inputs["values"]
    assert at(values, "kserve.controller.deploymentMode") == "Standard"
    assert at(values, "kserve.controller.gateway.ingressGateway.enableGatewayApi") is False
    assert at(values, "kserve.controller.gateway.disableIngressCreation") is True
    assert at(values, "kserve.certManager.enabled") is True
    runtimes = plan.named("fra1-kserve-runtimes").inputs["values"]
    assert runtimes == {"kserve": {"servingruntime": {"enabled": True}}}
    assert plan.named("fra1-kserve-crd").inputs["values"] == {}


@pytest.mark.parametrize(
    ("version", "mode"),
    [("v0.20.0", "Standard"), ("v0.17.1", "Standard"), ("v0.16.0", "Standard"), ("v0.15.2", "RawDeployment")],
)
def test_default_deployment_mode_per_kserve_version(version: str, mode: str) -> None:
    spec = cell(_config(versions={"kserve": version}))
    plan = _plan(spec)
    values = plan.named("fra1-kserve-resources").inputs["values"]
    assert at(values, "kserve.controller.deploymentMode") == mode
    assert plan.named("fra1-kserve-resources").inputs["version"] == version


def test_charts_before_the_split_are_kserve_crd_and_kserve() -> None:
    plan = _plan(cell(_config(versions={"kserve": "v0.16.0"})))
    children = plan.children(plan.named("fra1-kserve"))
    assert [c.inputs["chart"] for c in children] == [
        "oci://ghcr.io/kserve/charts/kserve-crd",
        "oci://ghcr.io/kserve/charts/kserve",
    ]
    resources = plan.named("fra1-kserve-resources")
    assert resources.inputs["name"] == "kserve"
    assert children[0].urn in resources.dependencies
    # The all-in-one chart has no certManager switch (it always renders the Certificate).
    assert "certManager" not in resources.inputs["values"]["kserve"]


def test_kserve_key_paths_exist_in_the_pinned_charts() -> None:
    spec = cell(minimal_cell_config())
    version = spec.versions.kserve
    resources = kserve_resources_values(version, spec.deployment_mode)
    assert len(list(leaf_paths(resources))) == 4
    assert values_problems(STORE, "kserve-resources", version, resources) == []
    assert values_problems(STORE, "kserve-runtime-configs", version, kserve_runtime_values()) == []
    # What we flip away from the chart defaults.
    assert at(STORE.load("kserve/kserve-resources/values.yaml"), "kserve.controller.deploymentMode") == "Knative"
    assert at(STORE.load("kserve/kserve-runtime-configs/values.yaml"), "kserve.servingruntime.enabled") is False


def test_kserve_user_values_reach_resources_only_and_deep_merge() -> None:
    override = {"kserve": {"controller": {"resources": {"limits": {"memory": "1Gi"}}}}}
    plan = _plan(cell(_config(kserve={"values": override})))
    values = plan.named("fra1-kserve-resources").inputs["values"]
    assert at(values, "kserve.controller.resources.limits.memory") == "1Gi"
    assert at(values, "kserve.controller.deploymentMode") == "Standard"
    assert at(values, "kserve.controller.gateway.disableIngressCreation") is True
    runtimes = plan.named("fra1-kserve-runtimes").inputs["values"]
    assert runtimes == {"kserve": {"servingruntime": {"enabled": True}}}


def test_kserve_user_values_can_turn_ingress_back_on() -> None:
    override = {"kserve": {"controller": {"gateway": {"disableIngressCreation": False}}}}
    plan = _plan(cell(_config(kserve={"values": override})))
    values = plan.named("fra1-kserve-resources").inputs["values"]
    assert at(values, "kserve.controller.gateway.disableIngressCreation") is False
    assert at(values, "kserve.controller.gateway.ingressGateway.enableGatewayApi") is False
