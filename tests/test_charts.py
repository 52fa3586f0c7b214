"""The ``chart`` checker: every Helm release rendered by a real helm with its pinned chart, then checked."""

from __future__ import annotations

import copy
import functools
import http.server
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pulumi_kubernetes.helm.v3 import Release

from gpucell.cluster import ContainerRuntime
from gpucell.engine.mock_engine import run_program
from gpucell.stacks.conformance import charts
from gpucell.stacks.conformance.helm import fetch_charts
from gpucell.stacks.conformance.objects import checker_for
from gpucell.stacks.conformance.problems import MissingToolError
from gpucell.stacks.conformance.run import Report, check_region
from gpucell.stacks.plan import Plan, check
from tests.conftest import (
    CHART,
    KUBERNETES_MINOR,
    STORE,
    UPSTREAM,
    cell,
    cell_cilium_values,
    minimal_cell_config,
    shared_plan,
)


def planned(stack: str) -> Plan:
    return shared_plan(stack)


def lines(report: Report) -> list[str]:
    return [str(p) for p in report.problems]


def check_release(**release: Any) -> Report:
    """The chart checker over one Release registered as a component would, in the minimal lab cell."""
    registrations = run_program(lambda: Release("rel", **release)).resources
    return check_region("lab", registrations, cell(minimal_cell_config()), STORE, checkers=CHART)


# -- finding the chart -------------------------------------------------------------------------------------------
def test_chart_path_takes_the_name_from_any_reference_and_the_version_with_or_without_v(tmp_path: Path) -> None:
    (tmp_path / "charts" / "gpu-operator-v26.7.0").mkdir(parents=True)
    (tmp_path / "charts" / "cilium-1.20.0.tgz").write_bytes(b"")
    assert charts.chart_path(tmp_path, "gpu-operator", "26.7.0") == tmp_path / "charts" / "gpu-operator-v26.7.0"
    assert charts.chart_path(tmp_path, "oci://example.net/charts/cilium", "v1.20.0") == (
        tmp_path / "charts" / "cilium-1.20.0.tgz"
    )
    assert charts.chart_path(tmp_path, "cilium", "1.19.0") is None


def test_kube_version_is_the_k3s_release_without_its_suffix() -> None:
    assert charts.kube_version(cell(minimal_cell_config())) == "v1.34.2"


# -- the stacks' releases render and hold ------------------------------------------------------------------------
# prod-iad1 has the cluster-api-operator, prod-fra1 the DRA driver
@pytest.mark.parametrize(("stack", "releases"), [("dev", 6), ("prod-fra1", 11), ("prod-iad1", 11)])
def test_every_release_of_the_stacks_renders_and_passes(stack: str, releases: int, helm: str) -> None:
    plan = planned(stack)
    report = check(plan, list(plan.cells), UPSTREAM, checkers=CHART)
    assert lines(report) == []
    assert report.not_run == {}
    rendered = [
        r for region in plan.cells for r in plan.region_resources(region) if r.type == "kubernetes:helm.sh/v3:Release"
    ]
    assert len(rendered) == releases


def test_the_prod_cluster_policy_is_rendered_with_the_k3s_toolkit_paths(helm: str) -> None:
    plan = planned("prod-fra1")
    release = next(r for r in plan.region_resources("fra1") if r.name == "fra1-gpu-operator-gpu-operator")
    [result] = charts.render_releases([(release.masked_inputs(), "v1.34.2")], UPSTREAM)
    [policy] = [o for o in result.objects if o["kind"] == "ClusterPolicy"]
    assert (
        policy["spec"]["toolkit"]["env"][:2]
        == ContainerRuntime.k3s(plan.cells["fra1"].spec.versions.kubernetes_minor).toolkit_env()[:2]
    )
    assert policy["spec"]["sandboxWorkloads"]["enabled"] is True
    assert charts.gpu_operator_facts(list(result.objects), release.inputs["values"], plan.cells["fra1"].spec) == []


# -- what it finds -----------------------------------------------------------------------------------------------
def test_an_override_that_moves_ciliums_api_host_is_a_problem_in_the_agent(helm: str) -> None:
    values = cell_cilium_values(cell(minimal_cell_config()))
    values["k8sServiceHost"] = "10.9.9.9"
    report = check_release(chart="cilium", version="1.20.0", namespace="kube-system", name="cilium", values=values)
    assert lines(report) == [
        "lab/DaemonSet/kube-system/cilium: spec.template.spec.containers.cilium-agent.env.KUBERNETES_SERVICE_HOST: "
        "is '10.9.9.9'; without kube-proxy the agent must reach the API at '10.20.0.11' (chart cilium 1.20.0)"
    ]


def test_cilium_with_kube_proxy_is_a_problem_in_cilium_config(helm: str) -> None:
    values = {**cell_cilium_values(cell(minimal_cell_config())), "kubeProxyReplacement": False}
    report = check_release(chart="cilium", version="1.20.0", namespace="kube-system", name="cilium", values=values)
    assert lines(report) == [
        "lab/ConfigMap/kube-system/cilium-config: data.kube-proxy-replacement: is 'false'; gpucell runs k3s without "
        "kube-proxy, so Cilium must replace it ('true') (chart cilium 1.20.0)"
    ]


def test_a_toolkit_env_override_that_drops_the_k3s_socket_is_a_problem_in_the_cluster_policy(helm: str) -> None:
    spec = cell(minimal_cell_config())
    env = [
        e
        for e in ContainerRuntime.k3s(spec.versions.kubernetes_minor).toolkit_env()
        if e["name"] != "CONTAINERD_SOCKET"
    ]
    report = check_release(
        chart="gpu-operator",
        version="v26.7.0",
        namespace="gpu-operator",
        name="gpu-operator",
        values={"toolkit": {"env": env}},
    )
    assert lines(report) == [
        "lab/ClusterPolicy/-/cluster-policy: spec.toolkit.env.CONTAINERD_SOCKET: is None; the toolkit must use k3s's "
        "'/run/k3s/containerd/containerd.sock' (chart gpu-operator v26.7.0)"
    ]


def test_a_chart_that_fails_to_render_is_one_line_with_helms_error(helm: str) -> None:
    # the DRA driver's validation.yaml refuses the default namespace
    report = check_release(
        chart="oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu",
        version="0.4.1",
        namespace="default",
        name="dra",
        values={},
    )
    [line] = lines(report)
    assert line.startswith("lab/HelmRelease/default/dra: -: helm template failed: ")


def test_a_chart_missing_from_the_schema_directory_is_one_line_with_the_way_out(helm: str) -> None:
    report = check_release(chart="keda", version="9.9.9", namespace="keda", name="keda", values={})
    assert lines(report) == [
        f"lab/HelmRelease/keda/keda: -: chart keda 9.9.9 is not in {UPSTREAM / 'charts'} (as keda-9.9.9 or "
        "keda-9.9.9.tgz); run `gpucell schemas fetch STACK` or add it there"
    ]


def test_a_rendered_object_with_an_unknown_field_is_a_problem() -> None:
    checker = checker_for(UPSTREAM, KUBERNETES_MINOR)
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "dta": {}}
    assert [(v.path, v.message) for v in charts.validate_rendered(config, checker, {})] == [
        ("-", "Additional properties are not allowed ('dta' was unexpected)")
    ]


def test_a_custom_resource_is_checked_against_the_crd_another_release_renders() -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "spec": {
            "group": "cert-manager.io",
            "names": {"kind": "Issuer"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": {"type": "object", "properties": {"selfSigned": {"type": "object"}}},
                            },
                        }
                    },
                }
            ],
        },
    }
    crds = charts.rendered_crds([charts.RenderedRelease("cm", "cm", "cert-manager", "v1", (crd,))])
    issuer = {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Issuer",
        "metadata": {"name": "i"},
        "spec": {"selfSigend": {}},
    }
    checker = checker_for(UPSTREAM, KUBERNETES_MINOR)
    assert [(v.path, v.message) for v in charts.validate_rendered(issuer, checker, crds)] == [
        ("spec", "Additional properties are not allowed ('selfSigend' was unexpected)")
    ]
    # CertificateRequest: neither in shared/upstream (gpucell checks only the Certificate and ClusterIssuer it
    # renders) nor among the rendered CRDs above.
    unknown = {**copy.deepcopy(issuer), "kind": "CertificateRequest"}
    assert [v.message for v in charts.validate_rendered(unknown, checker, crds)] == [
        f"no upstream schema for cert-manager.io/v1 CertificateRequest in {UPSTREAM} nor a CRD any release of the "
        "region renders"
    ]


# -- without helm ------------------------------------------------------------------------------------------------
def test_without_helm_the_chart_checker_does_not_run_and_says_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPUCELL_HELM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    registrations = run_program(lambda: Release("rel", chart="cilium", version="1.20.0", name="cilium")).resources
    report = check_region("lab", registrations, cell(minimal_cell_config()), STORE, checkers=CHART)
    assert report.failed
    assert "chart not run" in report.summary()
    assert report.not_run == {
        "chart": (
            f"helm not found on PATH: install Helm {charts.HELM_VERSION} or set GPUCELL_HELM to its path (`python3 "
            "dev.py plan STACK --check` and `python3 dev.py test` set up .tools/helm)"
        )
    }


def test_a_gpucell_helm_that_points_at_nothing_is_not_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUCELL_HELM", str(tmp_path / "no-helm"))
    with pytest.raises(MissingToolError, match=r"GPUCELL_HELM points at .*no-helm, which does not exist"):
        charts.helm_binary()


# -- schemas fetch pulls the charts ------------------------------------------------------------------------------
@pytest.fixture
def chart_repo(tmp_path: Path, helm: str) -> Iterator[str]:
    """A classic Helm repository on localhost serving one small chart, ``demo`` 0.1.0."""
    chart = tmp_path / "src" / "demo"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: demo\nversion: 0.1.0\n")
    (chart / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\ndata:\n  greeting: {{ .Values.greeting | quote }}\n"
    )
    (chart / "values.yaml").write_text("greeting: hello\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run([helm, "package", str(chart), "--destination", str(repo)], check=True, capture_output=True)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(repo))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    subprocess.run([helm, "repo", "index", str(repo), "--url", url], check=True, capture_output=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield url
    server.shutdown()
    thread.join()
    server.server_close()


def test_fetch_pulls_each_releases_chart_where_the_checker_finds_it(chart_repo: str, tmp_path: Path) -> None:
    release = {
        "chart": "demo",
        "version": "0.1.0",
        "repositoryOpts": {"repo": chart_repo},
        "name": "demo",
        "namespace": "demo",
        "values": {"greeting": "hi"},
    }
    dest = tmp_path / "schemas"
    assert fetch_charts([release, dict(release)], dest) == ["demo 0.1.0"]  # pulled once
    assert charts.chart_path(dest, "demo", "0.1.0") == dest / "charts" / "demo-0.1.0.tgz"
    [rendered] = charts.render_releases([(release, "v1.34.2")], dest)
    assert [o["data"] for o in rendered.objects] == [{"greeting": "hi"}]


def test_a_chart_that_cannot_be_pulled_names_it(chart_repo: str, tmp_path: Path) -> None:
    release = {"chart": "demo", "version": "9.9.9", "repositoryOpts": {"repo": chart_repo}}
    with pytest.raises(OSError, match=rf"^could not pull chart demo 9\.9\.9 from {chart_repo}: "):
        fetch_charts([release], tmp_path)
