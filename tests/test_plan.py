"""The offline plan end to end: the dev and prod stacks (prod-fra1, prod-iad1), exit codes, JSON, written files,
secrets, preview."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml
from pulumi.runtime.mocks import MockResourceArgs

from gpucell.engine.mock_engine import run_program
from gpucell.stacks import cli
from gpucell.stacks.plan import PLACEHOLDER_PREFIX, Plan, make_plan, to_json, write_out
from gpucell.stacks.program import main as program_main
from gpucell.testing import read_outputs
from tests.conftest import REPO, shared_plan

TOKEN = "TOKEN-SENTINEL-7f3a"
KUBECONFIG = (
    "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: KUBECONFIG-SENTINEL-CA\n"
    "    server: https://127.0.0.1:6443\n  name: default\nusers:\n- name: default\n  user:\n"
    "    client-key-data: KUBECONFIG-SENTINEL-KEY\n"
)
RELEASE = "kubernetes:helm.sh/v3:Release"
SENTINELS = (TOKEN, "KUBECONFIG-SENTINEL", PLACEHOLDER_PREFIX)


def computed(args: MockResourceArgs) -> dict[str, Any]:
    """What real providers compute: the random token and the kubeconfig the first server prints."""
    if args.typ == "random:index/randomPassword:RandomPassword":
        return {"result": TOKEN}
    if args.typ == "command:remote:Command" and args.name.endswith("-kubeconfig"):
        return {"stdout": KUBECONFIG}
    return read_outputs(args)


@pytest.fixture(scope="module")
def prod_plan() -> Plan:
    return make_plan(REPO, "prod-fra1", computed=computed)


@pytest.fixture(scope="module")
def iad1_plan() -> Plan:
    return make_plan(REPO, "prod-iad1", computed=computed)


@pytest.fixture(scope="module")
def dev_plan() -> Plan:
    return make_plan(REPO, "dev", computed=computed)


def test_dev_plan_has_one_cell_with_every_component(dev_plan: Plan) -> None:
    assert list(dev_plan.cells) == ["lab1"]
    root = dev_plan.region_root("lab1")
    components = {r.type.removeprefix("gpucell:index:") for r in dev_plan.result.children(root) if not r.custom}
    assert components == {
        "K3sCluster",
        "Cilium",
        "ClusterDeny",
        "Storage",
        "KubeVirt",
        "Cdi",
        "GpuOperator",
        "CertManager",
        "KServe",
        "Tenant",
    }
    tenant = dev_plan.result.named("lab1-research")
    workloads = {
        (r.type.removeprefix("gpucell:index:"), r.name) for r in dev_plan.result.children(tenant) if not r.custom
    }
    assert workloads == {
        ("GpuVirtualMachine", "lab1-research-bastion"),
        ("Notebook", "lab1-research-alice"),
        ("ModelEndpoint", "lab1-research-qwen"),
    }


def test_each_prod_stack_is_one_cell(prod_plan: Plan, iad1_plan: Plan) -> None:
    assert list(prod_plan.cells) == ["fra1"]
    assert list(iad1_plan.cells) == ["iad1"]
    for plan, region in ((prod_plan, "fra1"), (iad1_plan, "iad1")):
        cell = plan.region_resources(region)
        assert {r.urn for r in plan.result.resources if r.type != "pulumi:pulumi:Stack"} == {r.urn for r in cell}
        assert all(r.urn.startswith(f"urn:pulumi:prod-{region}::gpucell::") for r in cell)
        for r in cell:
            assert r.provider in ("", *[o.name for o in cell])


def test_in_cluster_resources_use_their_cells_provider(prod_plan: Plan, iad1_plan: Plan) -> None:
    for plan, region in ((prod_plan, "fra1"), (iad1_plan, "iad1")):
        k8s = [
            r
            for r in plan.region_resources(region)
            if r.custom and r.type.startswith("kubernetes:") and not r.type.startswith("pulumi:providers:")
        ]
        assert k8s
        assert {r.provider for r in k8s} == {f"{region}-k8s"}


def test_provider_is_fed_by_the_secret_kubeconfig(prod_plan: Plan) -> None:
    provider = prod_plan.result.named("fra1-k8s")
    assert provider.type == "pulumi:providers:kubernetes"
    assert provider.inputs["kubeconfig"] == "[secret]"
    assert "server: https://10.110.0.10:6443" in provider.raw_inputs["kubeconfig"]
    assert "127.0.0.1" not in provider.raw_inputs["kubeconfig"]


def test_cilium_installs_after_the_servers_answer(prod_plan: Plan) -> None:
    last_server = prod_plan.result.named("fra1-k3s-fra1-srv-3-settle")
    release = next(r for r in prod_plan.result.of_type(RELEASE) if r.name.startswith("fra1-cilium"))
    assert last_server.urn in release.dependencies


def test_everything_in_cluster_comes_after_cilium(prod_plan: Plan) -> None:
    cilium = next(r for r in prod_plan.result.resources if r.name == "fra1-cilium" and not r.custom)
    cilium_children = {r.urn for r in prod_plan.result.descendants(cilium)}
    for name in ("fra1-storage", "fra1-kubevirt", "fra1-cdi", "fra1-gpu-operator", "fra1-cert-manager"):
        component = next(r for r in prod_plan.result.resources if r.name == name and not r.custom)
        for child in prod_plan.result.children(component):
            if child.custom:
                assert cilium_children <= set(child.dependencies) or cilium.urn in child.dependencies, child.name


def test_kserve_comes_after_cert_manager(prod_plan: Plan) -> None:
    cert = next(r for r in prod_plan.result.of_type(RELEASE) if r.name.startswith("fra1-cert-manager"))
    kserve = [r for r in prod_plan.result.of_type(RELEASE) if r.name.startswith("fra1-kserve")]
    assert kserve
    assert all(
        cert.urn in r.dependencies or any(cert.urn in prod_plan.result.by_urn(d).dependencies for d in r.dependencies)
        for r in kserve
    )


def test_json_has_the_documented_shape_and_no_secret(prod_plan: Plan, iad1_plan: Plan) -> None:
    document = to_json(prod_plan, ["fra1"])
    assert list(document) == ["stack", "regions", "regionFilter", "resources", "outputs", "acknowledge", "capacity"]
    assert (document["stack"], document["regions"], document["regionFilter"]) == ("prod-fra1", ["fra1"], None)
    keys = ["urn", "type", "name", "parent", "provider", "dependencies", "options", "inputs"]
    assert all(list(r) in (keys, [*keys, "secrets"]) for r in document["resources"])
    by_name = {r["name"]: r for r in document["resources"]}
    assert by_name["fra1-k3s-fra1-srv-1"]["inputs"]["connection"] == "[secret]"
    assert set(by_name["fra1-k3s-fra1-srv-1"]["secrets"]) == {"connection", "stdin"}
    assert "secrets" not in by_name["fra1-cilium"]
    assert [r["urn"] for r in document["resources"]] == sorted(r["urn"] for r in document["resources"])
    assert {r["type"] for r in document["resources"] if r["name"] == "fra1"} == {"gpucell:index:RegionalCell"}
    assert document["outputs"]["fra1"] == {"apiServerUrl": "https://10.110.0.10:6443", "storageClassName": "longhorn"}
    assert document["outputs"]["fra1Kubeconfig"] == "[secret]"
    # every region output the program exports: iad1's tenant cluster kubeconfigs too (they were left out)
    iad1 = to_json(iad1_plan, ["iad1"])
    assert sorted(iad1["outputs"]) == [
        "iad1",
        "iad1Fingerprint",
        "iad1GpuNodes",
        "iad1Kubeconfig",
        "iad1TenantClusterKubeconfigs",
    ]
    assert iad1["outputs"]["iad1TenantClusterKubeconfigs"] == "[secret]"
    text = json.dumps([document, iad1])
    for sentinel in SENTINELS:
        assert sentinel not in text


def test_written_files_have_no_secret(prod_plan: Plan, tmp_path: Path) -> None:
    files = write_out(prod_plan, ["fra1"], tmp_path)
    names = {p.relative_to(tmp_path).as_posix() for p in files}
    assert "fra1/nodes/fra1-srv-1/config.yaml" in names
    assert "fra1/nodes/fra1-h100-1/install.sh" in names
    assert "fra1/helm/cilium.values.yaml" in names
    assert "fra1/manifests/KubeVirt_kubevirt_kubevirt.yaml" in names
    for path in files:
        text = path.read_text()
        for sentinel in SENTINELS:
            assert sentinel not in text, path
    kubevirt = yaml.safe_load((tmp_path / "fra1/manifests/KubeVirt_kubevirt_kubevirt.yaml").read_text())
    assert kubevirt["kind"] == "KubeVirt"


def test_preview_with_unknown_kubeconfig_registers_everything(prod_plan: Plan) -> None:
    unknown = make_plan(REPO, "prod-fra1", preview=True)
    assert sorted(r.urn for r in unknown.result.resources) == sorted(r.urn for r in prod_plan.result.resources)
    assert unknown.result.named("fra1-k8s").inputs["kubeconfig"] == "[unknown]"
    assert prod_plan.result.named("fra1-k8s").inputs["kubeconfig"] == "[secret]"
    assert unknown.result.outputs["fra1Kubeconfig"] == "[unknown]"


def test_bad_config_becomes_run_error_before_any_resource() -> None:
    config = {
        "gpucell:regions": {
            "fra1": {
                "network": {"nodeCidr": "10.0.0.0/24"},
                "nodePools": {
                    "s": {"role": "server", "hosts": [{"name": "s1", "address": "10.0.0.1"}]},
                    "h100-vm": {
                        "role": "gpu",
                        "gpuModel": "H100-SXM5-80GB",
                        "gpusPerNode": 8,
                        "gpuMode": "passthrough",
                        "hosts": [{"name": "g1", "address": "10.0.0.2"}],
                    },
                },
            }
        },
        "gpucell:sshPrivateKey": "key",
    }
    registered: list[str] = []
    with pytest.raises(pulumi.RunError) as info:
        registered.extend(
            r.name for r in run_program(program_main, config=config, secret_keys=["gpucell:sshPrivateKey"]).resources
        )
    assert str(info.value) == (
        "regions.fra1.nodePools.h100-vm.gpuMode: 'passthrough' is not one of container, vm-passthrough, vm-vgpu, dra"
    )
    assert registered == []


def test_missing_ssh_key_is_a_config_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(REPO / "Pulumi.yaml", tmp_path)
    stack = yaml.safe_load((REPO / "Pulumi.dev.yaml").read_text())
    del stack["config"]["gpucell:sshPrivateKey"]
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump(stack))
    assert cli.main(["plan", "dev", "--project-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        "sshPrivateKey: secret is missing (region lab1 uses it for SSH, see regions.lab1.ssh.privateKeyConfigKey); "
        "set it with `pulumi config set --secret sshPrivateKey < ~/.ssh/id_ed25519`\n"
    )


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(REPO / "Pulumi.yaml", tmp_path)
    stack = yaml.safe_load((REPO / "Pulumi.dev.yaml").read_text())
    stack["config"]["gpucell:regions"]["lab1"]["nodePools"]["l40s"]["gpuMode"] = "passthrough"
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump(stack))
    assert cli.main(["plan", "dev", "--project-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        "regions.lab1.nodePools.l40s.gpuMode: 'passthrough' is not one of container, vm-passthrough, vm-vgpu, dra\n"
    )
    assert cli.main(["plan", "nope", "--project-dir", str(tmp_path)]) == 2
    assert "Pulumi.nope.yaml: not found" in capsys.readouterr().err
    assert cli.main(["plan", "dev", "--project-dir", str(REPO), "--region", "mars"]) == 2
    assert capsys.readouterr().err == "--region: 'mars' is not a region of stack dev; regions: lab1\n"


def test_cli_plan_prod_writes_out_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, json_file = tmp_path / "prod", tmp_path / "prod.json"
    code = cli.main(["plan", "prod-iad1", "--project-dir", str(REPO), "--out", str(out), "--json", str(json_file)])
    printed = capsys.readouterr().out
    assert code == 0
    assert "region iad1:" in printed
    assert "region fra1:" not in printed
    assert "K3sCluster iad1-k3s" in printed
    assert "total:" in printed
    assert (out / "iad1" / "nodes" / "iad1-srv-3" / "config.yaml").is_file()
    assert json.loads(json_file.read_text())["stack"] == "prod-iad1"


def test_output_paths_of_the_wrong_kind_are_one_line_before_planning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_file, a_dir = tmp_path / "file", tmp_path / "dir"
    a_file.write_text("x")
    a_dir.mkdir()
    assert cli.main(["plan", "dev", "--project-dir", str(REPO), "--out", str(a_file)]) == 2
    assert capsys.readouterr() == (
        "",
        f"--out: {str(a_file)!r} is a file; --out takes a directory (it writes DIR/<region>/...)\n",
    )
    assert cli.main(["plan", "dev", "--project-dir", str(REPO), "--json", str(a_dir)]) == 2
    assert capsys.readouterr() == (
        "",
        f"--json: {str(a_dir)!r} is a directory; --json takes the path of a file to write\n",
    )
    assert cli.main(["plan", "dev", "--project-dir", str(REPO), "--json", str(a_file / "plan.json")]) == 2
    assert capsys.readouterr() == (
        "",
        f"--json: {str(a_file / 'plan.json')!r} cannot be created: {str(a_file)!r} is a file\n",
    )


def test_a_reader_that_stops_early_ends_the_plan_quietly() -> None:
    """``gpucell plan dev | head``: the reader is gone before the tree is printed."""
    with subprocess.Popen(
        [sys.executable, "-m", "gpucell.stacks.cli", "plan", "dev"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stderr is not None
        proc.stdout.close()
        err = proc.stderr.read()
    assert (proc.returncode, err) == (1, b"")


def test_console_script_runs_from_repo_root() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gpucell.stacks.cli", "plan", "dev"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("stack dev: 1 region(s)")


def _scratch_project(tmp_path: Path, edit: Any = None, text: str | None = None) -> Path:
    shutil.copy(REPO / "Pulumi.yaml", tmp_path)
    if text is None:
        stack = yaml.safe_load((REPO / "Pulumi.dev.yaml").read_text())
        if edit is not None:
            edit(stack["config"])
        text = yaml.safe_dump(stack)
    (tmp_path / "Pulumi.dev.yaml").write_text(text)
    return tmp_path


def _plan_errors(project: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main(["plan", "dev", "--project-dir", str(project)])
    return code, capsys.readouterr().err


def test_plain_text_ssh_key_is_rejected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def plain(config: dict[str, Any]) -> None:
        config["gpucell:sshPrivateKey"] = "-----BEGIN OPENSSH PRIVATE KEY-----"

    assert _plan_errors(_scratch_project(tmp_path, plain), capsys) == (
        2,
        (
            "sshPrivateKey: is stored in plain text in the stack file; store it encrypted with "
            "`pulumi config set --secret sshPrivateKey < ~/.ssh/id_ed25519`\n"
        ),
    )


def test_unknown_top_level_key_is_rejected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def typo(config: dict[str, Any]) -> None:
        config["gpucell:region"] = {}

    assert _plan_errors(_scratch_project(tmp_path, typo), capsys) == (
        2,
        "region: unknown key in the gpucell namespace; accepted keys are acknowledge, gpuModels, hfTokenResearch, "
        "otherCells, production, regions, sshPrivateKey\n",
    )


def test_duplicate_yaml_key_is_rejected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (
        (REPO / "Pulumi.dev.yaml")
        .read_text()
        .replace("        cpu:\n", "        cpu:\n          role: cpu\n          hosts: []\n        cpu:\n", 1)
    )
    code, err = _plan_errors(_scratch_project(tmp_path, text=text), capsys)
    assert code == 2
    assert err.startswith("Pulumi.dev.yaml: is not valid YAML: ")
    assert "duplicate key 'cpu'" in err
    assert f"{tmp_path / 'Pulumi.dev.yaml'}" in err


def test_out_dir_is_rewritten_not_accumulated(prod_plan: Plan, tmp_path: Path) -> None:
    stale = tmp_path / "fra1" / "nodes" / "renamed-host" / "config.yaml"
    stale.parent.mkdir(parents=True)
    stale.write_text("old")
    files = write_out(prod_plan, ["fra1"], tmp_path)
    assert not stale.exists()
    names = {p.relative_to(tmp_path).as_posix() for p in files}
    assert "fra1/manifests/StorageProfile_longhorn.patch.yaml" in names
    remote = (tmp_path / "fra1" / "manifests" / "remote-manifests.txt").read_text()
    assert "https://github.com/kubevirt/kubevirt/releases/download/v1.9.0/kubevirt-operator.yaml" in remote


def test_plan_prints_the_gpu_capacity_view(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["plan", "prod-fra1", "--project-dir", str(REPO), "--region", "fra1"]) == 0
    rows = {
        line.split()[0]: line.split()[-3:]
        for line in capsys.readouterr().out.splitlines()
        if line.strip().startswith("nvidia.com/")
    }
    # capacity, reserved by the tenants' quotas, used by their declared workloads (globex's isolated notebook and
    # endpoint hold one passed-through H100 each, issue 33)
    assert rows["nvidia.com/GH100_H100_SXM5_80GB"] == ["32", "24", "14"]
    assert rows["nvidia.com/mig-3g.71gb"] == ["16", "4", "4"]
    # 2 hosts x 8 L40S x 4 L40S-12Q (the operator's vGPU config), as SR-IOV VFs KubeVirt advertises
    assert rows["nvidia.com/NVIDIA_L40S-12Q"] == ["64", "24", "1"]
    # 8 + 4 H200s: nb-bob's one and llama-70b's four
    assert rows["nvidia.com/gpu"] == ["16", "12", "5"]
    # 4 hosts x 4 NVSwitches; acme's 16 and globex's 8 H100s reserve 3 whole boards; train-01 holds one
    assert rows["nvidia.com/GH100_H100_NVSWITCH"] == ["16", "12", "4"]


def test_missing_endpoint_credentials_are_a_config_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def drop(config: dict[str, Any]) -> None:
        del config["gpucell:hfTokenResearch"]

    assert _plan_errors(_scratch_project(tmp_path, drop), capsys) == (
        2,
        (
            "hfTokenResearch: secret is missing "
            "(regions.lab1.tenants.research.modelEndpoints.qwen.credentialsConfigKey "
            "names it); set it with `pulumi config set --secret hfTokenResearch -- <token>`\n"
        ),
    )


def test_prod_plan_lists_every_kind(prod_plan: Plan) -> None:
    types = {r.type for r in prod_plan.result.resources}
    for kind in (
        "gpucell:index:Tenant",
        "gpucell:index:GpuVirtualMachine",
        "gpucell:index:Notebook",
        "gpucell:index:ModelEndpoint",
        "kubernetes:kubevirt.io/v1:VirtualMachine",
        "kubernetes:serving.kserve.io/v1beta1:InferenceService",
        "kubernetes:apps/v1:StatefulSet",
        "kubernetes:cilium.io/v2:CiliumNetworkPolicy",
        "kubernetes:core/v1:ResourceQuota",
    ):
        assert kind in types, kind
    train = prod_plan.result.named("fra1-acme-train-01-vm")
    gpus = train.inputs["spec"]["template"]["spec"]["domain"]["devices"]["gpus"]
    assert [g["deviceName"] for g in gpus] == ["nvidia.com/GH100_H100_SXM5_80GB"] * 8
    llama = prod_plan.result.named("fra1-acme-llama-8b-isvc")
    limits = llama.inputs["spec"]["predictor"]["model"]["resources"]["limits"]
    assert limits["nvidia.com/mig-3g.71gb"] == 1


def test_written_secrets_keep_their_shape(prod_plan: Plan, tmp_path: Path) -> None:
    write_out(shared_plan("prod-fra1"), ["fra1"], tmp_path)
    token = yaml.safe_load((tmp_path / "fra1/manifests/Secret_tenant-acme_nb-alice-token.yaml").read_text())
    assert token["stringData"] == {"token": "[secret]"}


def test_resource_options_are_recorded_and_in_the_json() -> None:
    """Lifecycle options reach the plan as the engine would get them: non-default ones only."""
    from pulumi_random import RandomPassword

    def program() -> None:
        first = RandomPassword("first", length=8)
        RandomPassword(
            "second",
            length=8,
            opts=pulumi.ResourceOptions(
                protect=True,
                retain_on_delete=True,
                ignore_changes=["length"],
                replace_on_changes=["special"],
                delete_before_replace=True,
                aliases=[pulumi.Alias(name="old-second")],
                custom_timeouts=pulumi.CustomTimeouts(create="30m", delete="5m"),
                deleted_with=first,
            ),
        )

    result = run_program(program)
    assert result.named("first").options == {"additionalSecretOutputs": ["bcryptHash", "result"]}
    second = result.named("second")
    assert second.options == {
        "protect": True,
        "retainOnDelete": True,
        "deleteBeforeReplace": True,
        "ignoreChanges": ["length"],
        "replaceOnChanges": ["special"],
        "additionalSecretOutputs": ["bcryptHash", "result"],
        "aliases": [{"name": "old-second"}],
        "customTimeouts": {"create": "30m", "delete": "5m"},
        "deletedWith": result.named("first").urn,
    }


def test_plan_json_carries_options(dev_plan: Plan) -> None:
    resources = {r["name"]: r for r in to_json(dev_plan, ["lab1"])["resources"]}
    # pulumi-command's SDK adds replaceOnChanges on triggers and a secret connection to every command
    command = {"additionalSecretOutputs": ["connection"], "replaceOnChanges": ["triggers[*]"]}
    assert resources["lab1-k3s-kubeconfig"]["options"] == {
        **command,
        "additionalSecretOutputs": ["connection", "stdout"],
        "ignoreChanges": ["connection"],
    }
    # The single server is protected (the region's removalPolicy); with local-path the agents hold volumes too.
    for name in ("lab1-k3s-lab1-srv-1", "lab1-k3s-lab1-gpu-1", "lab1-k3s-lab1-cpu-1"):
        for suffix in ("-prepare", "-settle"):
            assert resources[name + suffix]["options"] == {**command, "protect": True}, name + suffix
        # a replace (pulumi up --replace of a re-imaged host) uninstalls the old before it installs (decision 0036)
        assert resources[name]["options"] == {**command, "protect": True, "deleteBeforeReplace": True}, name
        assert resources[name + "-labels"]["options"] == {"protect": True, "retainOnDelete": True}


def test_plan_json_shows_protection_and_the_cluster_identifier(prod_plan: Plan, iad1_plan: Plan) -> None:
    """The issue's "done when", read from the JSON a reviewer gets."""
    resources = {r["name"]: r for plan in (prod_plan, iad1_plan) for r in to_json(plan, list(plan.cells))["resources"]}
    for region in ("fra1", "iad1"):
        assert resources[f"{region}-k8s"]["inputs"]["clusterIdentifier"] == f"gpucell-{region}"
        for tenant in ("acme", "globex"):
            assert resources[f"{region}-{tenant}-namespace"]["options"] == {"protect": True}
        for vm in ("acme-train-01", "acme-desk-01", "globex-sim-01"):
            assert resources[f"{region}-{vm}-vm"]["options"] == {"protect": True}
    gpu_hosts = [
        n.removesuffix("-labels")
        for n, r in resources.items()
        if r["type"] == "kubernetes:core/v1:NodePatch"
        and "nvidia.com/gpu.workload.config" in r["inputs"]["metadata"]["labels"]
    ]
    assert len(gpu_hosts) == 2 * 10 + 2  # h100-vm 4, h200-mig 2, h200 2, l40s-vgpu 2 per region; fra1 l4-dra 2
