"""`gpucell plan --check`: the dev and prod stacks' plans conform, and each checker catches what it exists for."""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pulumi_kubernetes.apiextensions import CustomResource
from pulumi_kubernetes.helm.v3 import Release

from gpucell.engine.mock_engine import Registration, run_program
from gpucell.k3s.cluster import Command  # pulumi_command.remote.Command, imported without its deprecation noise
from gpucell.stacks import cli
from gpucell.stacks.conformance.helm_values import commented_keys, leaf_paths
from gpucell.stacks.conformance.run import Report, check_region
from gpucell.stacks.conformance.schemas import UPSTREAM_FILES, SchemaStore, fetch
from gpucell.stacks.plan import Plan, check
from tests.conftest import REPO, SCHEMA_CHECKERS, SECURITY, UPSTREAM, cell, minimal_cell_config, shared_plan

STORE = SchemaStore(UPSTREAM)


def planned(stack: str) -> Plan:
    return shared_plan(stack)


def lines(report: Report) -> list[str]:
    return [str(p) for p in report.problems]


def register(*objects: dict[str, Any], extra: Any = None) -> list[Registration]:
    """Register Kubernetes objects (and whatever ``extra`` registers) as a plan would."""

    def program() -> None:
        for index, obj in enumerate(objects):
            CustomResource(f"obj-{index}", **obj)
        if extra is not None:
            extra()

    return run_program(program).resources


def check_objects(*objects: dict[str, Any], extra: Any = None, checkers: tuple[str, ...] = SCHEMA_CHECKERS) -> Report:
    return check_region("lab", register(*objects, extra=extra), cell(minimal_cell_config()), STORE, checkers=checkers)


# -- the stacks conform -------------------------------------------------------------------------------------------
CEL_RULES = {
    # the tenants' CiliumNetworkPolicies and the cluster deny's CiliumClusterwideNetworkPolicies: "spec or specs"
    "dev": "CEL rules: 2 of 2 evaluated 12 times, 0 on unset fields, 0 transition rules skipped on create, 0 not "
    "evaluated",
    # Gateway API (89 of HTTPRoute's), Cilium BGP, cert-manager's ClusterIssuer: every rule compiles and calls only
    # functions gpucell's CEL has
    "prod-fra1": "CEL rules: 38 of 114 evaluated 87 times, 76 on unset fields, 0 transition rules skipped on create, "
    "0 not evaluated",
    # Gateway API, Cluster API and its operator's providers (iad1's tenant cluster), cert-manager's ClusterIssuer
    "prod-iad1": "CEL rules: 37 of 137 evaluated 95 times, 100 on unset fields, 0 transition rules skipped on "
    "create, 0 not evaluated",
}
CILIUM_CRDS = {
    "dev": [],
    "prod-fra1": [
        "ciliumloadbalancerippools",
        "ciliumbgpclusterconfigs",
        "ciliumbgppeerconfigs",
        "ciliumbgpadvertisements",
    ],
    "prod-iad1": ["ciliumloadbalancerippools", "ciliuml2announcementpolicies"],
}
"""The Cilium CRDs each stack's objects are checked against besides the tenants' and the cluster deny's policies:
LB IPAM pools, BGP (fra1) and L2 announcements (iad1)."""


@pytest.mark.parametrize("stack", ["dev", "prod-fra1", "prod-iad1"])
def test_stack_plans_pass_every_schema_check(stack: str) -> None:
    plan = planned(stack)
    report = check(plan, list(plan.cells), UPSTREAM, checkers=SCHEMA_CHECKERS)
    assert lines(report) == []
    assert report.cel.summary() == CEL_RULES[stack]
    # the Cilium CRDs in the schema directory are from main between 1.20 pre-releases, and the check says so
    crds = ["ciliumnetworkpolicies", "ciliumclusterwidenetworkpolicies", *CILIUM_CRDS[stack]]
    notices = [
        f"note: cilium/{crd}.yaml does not state its release; checked against it as if it were 1.20.0" for crd in crds
    ]
    if stack == "prod-iad1":  # iad1's tenant cluster: CAAPH's CRD is not in shared/upstream (decision 0024)
        notices.insert(
            1,
            f"note: {UPSTREAM} has no CRD of addons.cluster.x-k8s.io/v1alpha1 HelmChartProxy; checked against "
            "gpucell's transcription of its Go types (gpucell.stacks.conformance.objects)",
        )
    assert [str(n) for n in report.notices] == notices


# prod-fra1: 3 notebooks x 3, prod-iad1: 2 x 3, and the snapshot-controller of each region's backups x 3
@pytest.mark.parametrize(("stack", "skipped"), [("dev", 3), ("prod-fra1", 12), ("prod-iad1", 9)])
def test_stack_plans_pass_checkov(stack: str, skipped: int, checkov: str) -> None:
    plan = planned(stack)
    report = check(plan, list(plan.cells), UPSTREAM, checkers=SECURITY)
    assert lines(report) == []
    assert report.checkov_skipped == skipped


def test_cli_check_passes_and_prints_a_summary(capsys: pytest.CaptureFixture[str], checkov: str, helm: str) -> None:
    code = cli.main(["plan", "dev", "--project-dir", str(REPO), "--check", "--schemas", str(UPSTREAM)])
    out = capsys.readouterr().out
    assert code == 0
    assert out.rstrip().endswith(
        "check: 0 problem(s) (kubernetes 0 of 33, custom-resource 0 of 17 (CEL rules: 2 of 2 evaluated 12 times, 0 on "
        "unset fields, 0 transition rules skipped on create, 0 not evaluated), cloud-init nothing checked, "
        "helm-values 0 of 5, chart 0 of 158, script 0 of 28, node-config 0 of 3, security 0 of 45); 3 checkov "
        "check(s) skipped by annotation"
    )


def test_the_summary_says_what_each_checker_checked_and_which_checked_nothing() -> None:
    config_map = {"api_version": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"}}
    report = check_objects(config_map, vm(cpus={"cores": 4}), vm(cpu={"cores": 4}))
    assert report.summary() == (
        "1 problem(s) (kubernetes 0 of 1, custom-resource 1 of 2, cloud-init not selected, helm-values nothing "
        "checked, chart not selected, script nothing checked, node-config nothing checked, security not selected)"
    )


def test_cli_check_fails_on_a_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(REPO / "Pulumi.yaml", tmp_path)
    stack = yaml.safe_load((REPO / "Pulumi.dev.yaml").read_text())
    stack["config"]["gpucell:regions"]["lab1"]["cilium"] = {"values": {"hubble": {"relay": {"replicaz": 2}}}}
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump(stack))
    code = cli.main(["plan", "dev", "--project-dir", str(tmp_path), "--check", "--schemas", str(UPSTREAM)])
    out = capsys.readouterr().out
    assert code == 1
    assert (
        "lab1/HelmValues/kube-system/cilium: hubble.relay.replicaz: is not a value of chart cilium 1.20.0 "
        "(renamed or removed upstream?)"
    ) in out.splitlines()


def test_cli_check_without_checkov_reports_every_other_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, helm: str
) -> None:
    monkeypatch.delenv("GPUCELL_CHECKOV", raising=False)
    monkeypatch.setenv("GPUCELL_HELM", helm)  # helm stays: only checkov is missing
    monkeypatch.setenv("PATH", str(tmp_path))
    code = cli.main(["plan", "dev", "--project-dir", str(REPO), "--check", "--schemas", str(UPSTREAM)])
    captured = capsys.readouterr()
    assert code == 1
    assert captured.out.rstrip().endswith(
        "check: 0 problem(s) (kubernetes 0 of 33, custom-resource 0 of 17 (CEL rules: 2 of 2 evaluated 12 times, 0 on "
        "unset fields, 0 transition rules skipped on create, 0 not evaluated), cloud-init nothing checked, "
        "helm-values 0 of 5, chart 0 of 158, script 0 of 28, node-config 0 of 3, security not run)"
    )
    assert captured.err == (
        "error: checkov not found on PATH: `pipx install checkov==3.3.30` or set GPUCELL_CHECKOV to its path "
        "(`python3 dev.py plan STACK --check` and `python3 dev.py test` set up .venv-checkov)\n"
    )


def test_cli_check_names_a_gpucell_checkov_that_points_at_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, checkov: str, helm: str
) -> None:
    missing = tmp_path / "no-checkov"
    monkeypatch.setenv("GPUCELL_CHECKOV", str(missing))
    monkeypatch.setenv("GPUCELL_HELM", helm)
    monkeypatch.setenv("PATH", f"{Path(checkov).parent}:{os.environ['PATH']}")  # a checkov on PATH is not taken
    code = cli.main(["plan", "dev", "--project-dir", str(REPO), "--check", "--schemas", str(UPSTREAM)])
    captured = capsys.readouterr()
    assert code == 1
    assert captured.out.rstrip().endswith("security not run)")
    assert captured.err == (
        f"error: GPUCELL_CHECKOV points at {missing}, which does not exist; point it at a checkov program (`python3 "
        "dev.py plan STACK --check` sets up .venv-checkov/bin/checkov) or unset it to use checkov from PATH\n"
    )


def test_cli_check_says_a_missing_library_first_before_schemas_and_planning(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # as in an install without the check extra: kubernetes-validate cannot be imported
    for name in [m for m in sys.modules if m.startswith(("gpucell.stacks.conformance.", "kubernetes_validate"))]:
        if name not in ("gpucell.stacks.conformance.problems", "gpucell.stacks.conformance.schemas"):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "kubernetes_validate", None)
    code = cli.main(["plan", "dev", "--project-dir", str(REPO), "--check", "--schemas", "/nonexistent"])
    assert code == 1
    assert capsys.readouterr() == (
        "",
        "error: gpucell plan --check needs the Python package kubernetes-validate: pip install 'gpucell[check]'\n",
    )


def test_cli_check_without_schemas_says_how_to_get_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope"
    code = cli.main(["plan", "dev", "--project-dir", str(REPO), "--check", "--schemas", str(missing)])
    assert code == 2
    assert capsys.readouterr().err == (
        f"--schemas: {str(missing)!r} is not a directory; run `gpucell schemas fetch dev` or pass --schemas DIR "
        "(e.g. ../shared/upstream beside a clone)\n"
    )


# -- one negative case per checker --------------------------------------------------------------------------------
def vm(**domain_extra: Any) -> dict[str, Any]:
    return {
        "api_version": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": "gpu-vm", "namespace": "tenant-a"},
        "spec": {
            "runStrategy": "Always",
            "template": {"spec": {"domain": {"devices": {}, "memory": {"guest": "16Gi"}, **domain_extra}}},
        },
    }


def test_virtual_machine_with_a_misspelled_field() -> None:
    assert lines(check_objects(vm(cpus={"cores": 4}))) == [
        "lab/VirtualMachine/tenant-a/gpu-vm: spec.template.spec.domain: Additional properties are not allowed "
        "('cpus' was unexpected)"
    ]
    assert lines(check_objects(vm(cpu={"cores": 4}))) == []


def test_data_volume_without_a_size() -> None:
    data_volume = {
        "api_version": "cdi.kubevirt.io/v1beta1",
        "kind": "DataVolume",
        "metadata": {"name": "root-disk", "namespace": "tenant-a"},
        "spec": {"source": {"registry": {"url": "docker://quay.io/containerdisks/ubuntu:24.04"}}, "storage": {}},
    }
    assert lines(check_objects(data_volume)) == [
        "lab/DataVolume/tenant-a/root-disk: spec.storage.resources.requests.storage: is required: CDI cannot size "
        "this DataVolume (only PVC or snapshot clones may omit it)"
    ]
    data_volume["spec"]["storage"] = {"resources": {"requests": {"storage": "50Gi"}}}
    assert lines(check_objects(data_volume)) == []


def test_inference_service_with_an_unknown_key() -> None:
    isvc = {
        "api_version": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "llama", "namespace": "tenant-a"},
        "spec": {
            "predictor": {"model": {"modelFormat": {"name": "huggingface"}, "storageUri": "hf://x/y"}, "minReplica": 1}
        },
    }
    assert lines(check_objects(isvc)) == [
        "lab/InferenceService/tenant-a/llama: spec.predictor: Additional properties are not allowed ('minReplica' "
        "was unexpected)"
    ]


def test_core_kind_with_an_unknown_field() -> None:
    namespace = {"api_version": "v1", "kind": "Namespace", "metadata": {"name": "tenant-a", "lables": {}}}
    assert lines(check_objects(namespace)) == [
        "lab/Namespace/-/tenant-a: metadata: Additional properties are not allowed ('lables' was unexpected)"
    ]


def cilium_release(values: dict[str, Any]) -> Any:
    return lambda: Release(
        "cilium", chart="cilium", version="1.20.0", namespace="kube-system", name="cilium", values=values
    )


def test_cilium_value_path_that_1_20_does_not_have() -> None:
    report = check_objects(extra=cilium_release({"kubeProxyReplacement": True, "hostServices": {"enabled": True}}))
    assert lines(report) == [
        "lab/HelmValues/kube-system/cilium: hostServices.enabled: is not a value of chart cilium 1.20.0 (renamed or "
        "removed upstream?)"
    ]


def test_cilium_value_of_the_wrong_type() -> None:
    report = check_objects(extra=cilium_release({"operator": {"replicas": "two"}}))
    assert lines(report) == [
        "lab/HelmValues/kube-system/cilium: operator.replicas: 'two' is not of type 'integer' (chart cilium 1.20.0 "
        "values.schema.json)"
    ]


def test_script_with_an_unquoted_variable() -> None:
    def command() -> None:
        Command("lab-srv-1", connection={"host": "10.0.0.1"}, create="bash -c 'rm -rf $TARGET/cache'")

    assert lines(check_objects(extra=command)) == [
        "lab/NodeScript/-/lab-srv-1: create line 1: SC2086: Double quote to prevent globbing and word splitting."
    ]


def test_notebook_running_as_root(checkov: str) -> None:
    notebook = {
        "api_version": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "notebook", "namespace": "tenant-a"},
        "spec": {
            "serviceName": "notebook",
            "selector": {"matchLabels": {"app": "notebook"}},
            "template": {
                "metadata": {"labels": {"app": "notebook"}},
                "spec": {
                    "securityContext": {"runAsUser": 0},
                    "containers": [{"name": "jupyter", "image": "quay.io/jupyter/base-notebook:2025-01-01"}],
                },
            },
        },
    }
    report = check_objects(notebook, checkers=SECURITY)
    assert "lab/StatefulSet/tenant-a/notebook: CKV_K8S_23: Minimize the admission of root containers" in lines(report)
    assert {p.checker for p in report.problems} == {"security"}


def test_skips_are_annotations_on_the_object_and_are_counted(checkov: str) -> None:
    pod = {
        "api_version": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "t", "annotations": {"checkov.io/skip1": "CKV_K8S_23=test reason"}},
        "spec": {"securityContext": {"runAsUser": 0}, "containers": [{"name": "c", "image": "busybox:1.37"}]},
    }
    report = check_objects(pod, checkers=SECURITY)
    assert "CKV_K8S_23" not in " ".join(lines(report))
    assert report.checkov_skipped == 1


def test_k3s_config_with_an_unknown_option() -> None:
    spec = cell(minimal_cell_config())
    configs = {"lab-srv-1": "cluster-init: true\nflannel-backend: none\n", "lab-cpu-1": "cluster-cidr: 10.0.0.0/8\n"}
    report = check_region("lab", [], spec, STORE, configs)
    assert lines(report) == [
        "lab/NodeConfig/-/lab-cpu-1: cluster-cidr: is not a k3s agent option (see docs.k3s.io/cli/agent)"
    ]


def test_schema_of_another_version_is_said(tmp_path: Path) -> None:
    shutil.copytree(UPSTREAM / "kubevirt", tmp_path / "kubevirt")
    (tmp_path / "versions.json").write_text(json.dumps({"kubevirt/swagger.json": "v1.8.0"}))
    report = check_region("lab", register(vm()), cell(minimal_cell_config()), SchemaStore(tmp_path))
    assert [str(n) for n in report.notices] == [
        "note: kubevirt/swagger.json is from v1.8.0 but v1.9.0 is pinned; checked against v1.8.0"
    ]


def test_commented_defaults_are_scoped_to_their_parent() -> None:
    text = "socketLB:\n  enabled: false\n  # hostNamespaceOnly: false\ncni:\n  # chainingMode: none\n"
    assert commented_keys(text) == {("socketLB", "hostNamespaceOnly"), ("cni", "chainingMode")}
    assert list(leaf_paths({"a": {"b": 1, "c": []}, "d": {}})) == [("a", "b"), ("a", "c"), ("d",)]


# -- gpucell schemas fetch ----------------------------------------------------------------------------------------
STAND_IN = b'{"$comment": "a stand-in for an optional upstream file the shared copies lack"}\n'
"""What the local server answers for an optional file (CAAPH's CRD) that ``shared/upstream`` does
not hold."""


def served(rel: str) -> bytes:
    """The bytes the local server answers for ``rel``: the shared copy, or :data:`STAND_IN` for an optional file."""
    return STORE.path(rel).read_bytes() if STORE.has(rel) or not UPSTREAM_FILES[rel].optional else STAND_IN


@pytest.fixture
def upstream_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A local HTTP server that answers like GitHub's raw host, from the shared upstream files."""
    stand_ins = tmp_path_factory.mktemp("stand-ins")
    pinned = cell(minimal_cell_config()).versions.model_dump()
    routes: dict[str, Path] = {}
    for rel, source in UPSTREAM_FILES.items():
        version = STORE.versions.get(rel) or source.release or pinned[source.component]
        path = STORE.path(rel)
        if not path.is_file() and source.optional:
            path = stand_ins / rel.replace("/", "_")
            path.write_bytes(STAND_IN)
        routes[f"/{source.repo}/{source.tag(version)}/{source.path}"] = path

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = routes.get(self.path)
            if path is None:
                self.send_error(404)
                return
            body = path.read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_fetch_downloads_every_file_for_the_pinned_versions(
    upstream_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPUCELL_HELM", raising=False)  # no helm: the charts (tests/test_charts.py) are left out
    monkeypatch.setenv("PATH", str(tmp_path))
    dest = tmp_path / "schemas"
    code = cli.main(
        ["schemas", "fetch", "dev", "--project-dir", str(REPO), "--dest", str(dest), "--base-url", upstream_server]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert (
        "note: charts not fetched (`plan --check` will name each release's missing chart): helm not found on PATH"
    ) in out
    for rel in UPSTREAM_FILES:
        assert (dest / rel).read_bytes() == served(rel)
    versions = json.loads((dest / "versions.json").read_text())
    assert versions["kubevirt/swagger.json"] == "v1.9.0"
    assert versions["cloud-init/schema-cloud-config-v1.json"] == "26.2"  # cloud-init's tags have no "v"
    assert versions["cilium/values.yaml"] == "v1.20.0"
    plan = planned("dev")
    assert lines(check(plan, ["lab1"], dest, checkers=SCHEMA_CHECKERS)) == []


def test_fetch_names_the_url_that_failed(upstream_server: str, tmp_path: Path) -> None:
    spec = cell({**minimal_cell_config(), "versions": {"kubevirt": "v9.9.9"}})
    with pytest.raises(OSError, match=r"could not download .*/kubevirt/kubevirt/v9.9.9/api/openapi-spec/swagger.json"):
        fetch({"lab": spec}, tmp_path, upstream_server)


def test_cidr_formats_are_enforced_like_the_api_server() -> None:
    policy = {
        "api_version": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": "p", "namespace": "tenant-a"},
        "spec": {"endpointSelector": {}, "egress": [{"toCIDR": ["vpn"]}]},
    }
    assert lines(check_objects(policy)) == [
        "lab/CiliumNetworkPolicy/tenant-a/p: spec.egress[0].toCIDR[0]: 'vpn' is not a 'cidr'"
    ]
    policy["spec"]["egress"] = [{"toCIDR": ["10.0.0.0/8"]}]
    assert lines(check_objects(policy)) == []


def test_core_schemas_of_another_minor_are_said() -> None:
    spec = cell({**minimal_cell_config(), "versions": {"k3s": "v1.40.1+k3s1"}, "k3s": {"installerSha256": "0" * 64}})
    namespace = {"api_version": "v1", "kind": "Namespace", "metadata": {"name": "tenant-a"}}
    report = check_region("lab", register(namespace), spec, STORE, checkers=SCHEMA_CHECKERS)
    assert "note: kubernetes-validate has no schemas for Kubernetes 1.40; core kinds checked against 1.37" in [
        str(n) for n in report.notices
    ]


def test_fetch_urls_match_where_the_upstream_files_came_from() -> None:
    """The repository paths `schemas fetch` downloads are the ones SOURCES.md records for the shared copies."""
    recorded: dict[str, tuple[str, str]] = {}
    for line in (UPSTREAM / "SOURCES.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 5 and cells[1].startswith("`"):
            # "<repo> (copy of <upstream>)" and "<path> (upstream: <path>)": the first is where the file was taken from
            recorded[cells[1].strip("`")] = (cells[2].split(" (")[0], cells[3].strip("`").split(" (")[0])
    checked = 0
    for rel, source in UPSTREAM_FILES.items():
        if source.optional:  # not among the shared copies: CAAPH's CRD
            assert rel not in recorded, rel
            assert source.repo == "kubernetes-sigs/cluster-api-addon-provider-helm", rel
            continue
        if source.also is not None:  # inside a chart directory SOURCES.md records as a whole
            assert any(p.startswith(re.split(r"-v?\*/", source.also)[0]) for p in recorded), rel
            continue
        repo, path = recorded[rel]
        if "→" in path or repo.startswith("metio/"):
            continue  # Cilium: copied from the packed chart or a CRD mirror; we fetch the same files from cilium/cilium
        assert (source.repo, source.path) == (repo, path), rel
        checked += 1
    assert checked == 39  # 24, 12 of Cluster API, CAPK and the operator (tenant clusters), 3 of cloud-init
