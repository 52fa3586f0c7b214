"""Day 2 on the production regions, fra1 and iad1 in one lab stack (:func:`tests.conftest.prod_lab_config`): each
change is planned before and after, and the difference is what the issue asks.

``diff(before, after)`` compares two runs of the same program resource by resource (URN): added, removed, and
changed inputs (unwrapped, so a new secret value counts) or options.
"""

from __future__ import annotations

import copy
import json
import shlex
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from pulumi.runtime.mocks import MockCallArgs, MockResourceArgs

from gpucell.engine.mock_engine import PlanResult, Registration, run_program
from gpucell.errors import ConfigError
from gpucell.k3s import _scripts as scripts
from gpucell.spec import StackSpec
from gpucell.stacks.plan import read_stack_files
from gpucell.stacks.program import build_cells, shared_failure_domain
from gpucell.testing import read_outputs
from tests.conftest import REPO, minimal_cell_config, prod_regions, tainted_mig_pool, write_prod_lab

COMMAND = "command:remote:Command"
NODE_PATCH = "kubernetes:core/v1:NodePatch"
KUBECONFIG = "apiVersion: v1\nclusters:\n- cluster:\n    server: https://127.0.0.1:6443\n  name: default\n"
S3_SECRET = "AKIA-SENTINEL:S3-SECRET-SENTINEL"


def computed(args: MockResourceArgs) -> dict[str, Any]:
    if args.typ == "random:index/randomPassword:RandomPassword":
        return {"result": f"password-of-{args.name}"}
    if args.typ == COMMAND and args.name.endswith("-kubeconfig"):
        return {"stdout": KUBECONFIG}
    return read_outputs(args)


def prod_config(stack: str = "prod") -> tuple[dict[str, Any], list[str]]:
    """The config of ``stack`` as ``pulumi up`` hands it to the program, with placeholder secrets: ``prod`` is
    :func:`tests.conftest.prod_lab_config` (both production regions in one lab stack), else a stack of the
    repository (``prod-fra1``)."""
    with tempfile.TemporaryDirectory(prefix="gpucell-day2-") as tmp:
        files = read_stack_files(write_prod_lab(Path(tmp)) if stack == "prod" else REPO, stack)
    config = copy.deepcopy(files.config)
    config["gpucell:etcdS3CredentialsFra1"] = S3_SECRET
    return config, files.secret_keys


def plan(
    change: Callable[[dict[str, Any]], None] | None = None,
    *,
    preview: bool = False,
    last_deployment: dict[str, Any] | None = None,
) -> PlanResult:
    """The prod plan after ``change`` edits the config (full keys, ``gpucell:regions`` as an object); with
    ``last_deployment``, the stack outputs the program reads as its last deployment (else none: a first deploy)."""
    config, secret_keys = prod_config()
    if change is not None:
        change(config)

    def invoked(args: MockCallArgs) -> dict[str, Any]:
        return {"outputs": last_deployment or {}} if args.token == "pulumi:pulumi:readStackOutputs" else {}

    return run_program(
        build_cells,
        project="gpucell",
        stack="prod",
        config=config,
        secret_keys=secret_keys,
        preview=preview,
        computed=None if preview else computed,
        invoked=invoked,
    )


LAB_WARNING = shared_failure_domain("prod", StackSpec.model_validate({"regions": prod_regions()}))
"""The warning every plan of the lab stack holding both regions carries."""


def fra1(config: dict[str, Any]) -> dict[str, Any]:
    regions: dict[str, Any] = config["gpucell:regions"]
    return regions["fra1"]


@dataclass
class Diff:
    added: set[str]
    removed: set[str]
    changed: dict[str, set[str]]
    """Name -> the top-level input keys (and ``options``) that differ."""


def diff(before: PlanResult, after: PlanResult) -> Diff:
    old = {r.urn: r for r in before.resources}
    new = {r.urn: r for r in after.resources}
    changed: dict[str, set[str]] = {}
    for urn in old.keys() & new.keys():
        a, b = old[urn], new[urn]
        keys = {k for k in a.raw_inputs.keys() | b.raw_inputs.keys() if a.raw_inputs.get(k) != b.raw_inputs.get(k)}
        if a.options != b.options:
            keys.add("options")
        if keys:
            changed[b.name] = keys
    return Diff(
        added={new[u].name for u in new.keys() - old.keys()},
        removed={old[u].name for u in old.keys() - new.keys()},
        changed=changed,
    )


@pytest.fixture(scope="module")
def baseline() -> PlanResult:
    return plan()


@pytest.fixture(scope="module")
def preview_baseline() -> PlanResult:
    return plan(preview=True)


def in_cluster(result: PlanResult, name: str) -> bool:
    registration = result.named(name)
    return registration.type.startswith("kubernetes:") or registration.type == "pulumi:providers:kubernetes"


# -- the "done when" ----------------------------------------------------------------------------------------
def test_every_gpu_host_has_a_node_patch_with_its_workload_mode(baseline: PlanResult) -> None:
    config, _ = prod_config()
    for region, cell in config["gpucell:regions"].items():
        for pool in cell["nodePools"].values():
            if pool["role"] != "gpu":
                continue
            for host in pool["hosts"]:
                patch = baseline.named(f"{region}-k3s-{host['name']}-labels")
                assert patch.type == NODE_PATCH
                assert patch.provider == f"{region}-k8s"
                assert patch.inputs["metadata"]["name"] == host["name"]
                # dra pools run the GPU Operator's container stack (driver, toolkit) beside the DRA driver
                mode = "container" if pool["gpuMode"] == "dra" else pool["gpuMode"]
                assert patch.inputs["metadata"]["labels"]["nvidia.com/gpu.workload.config"] == mode
                assert patch.inputs["metadata"]["annotations"] == {
                    "pulumi.com/patchFieldManager": "gpucell",
                    "pulumi.com/patchForce": "true",
                }
    mig = baseline.named("fra1-k3s-fra1-h200-1-labels").inputs["metadata"]["labels"]
    assert mig["nvidia.com/mig.config"] == "all-balanced"
    assert baseline.named("fra1-k3s-fra1-h200x-1-labels").inputs["metadata"]["labels"]["nvidia.com/mig.config"] == (
        "all-disabled"  # MIG-capable H200 without a layout: MIG explicitly off
    )
    # The L40S pool runs SR-IOV vGPUs (decision 0011): no vgpu.config (its device manager is off there) but the
    # GPU Operator's three mdev-only operands turned off; gpucell sets no other nvidia.com/gpu.deploy.* label.
    vgpu = baseline.named("fra1-k3s-fra1-l40s-1-labels").inputs["metadata"]["labels"]
    assert "nvidia.com/vgpu.config" not in vgpu
    sriov_off = {
        "nvidia.com/gpu.deploy.sandbox-device-plugin",
        "nvidia.com/gpu.deploy.sandbox-validator",
        "nvidia.com/gpu.deploy.vgpu-device-manager",
    }
    deploy = {k: v for k, v in vgpu.items() if k.startswith("nvidia.com/gpu.deploy.")}
    assert deploy == dict.fromkeys(sriov_off, "false")
    # dra nodes keep the operator's device plugin and DCGM off (the DRA driver serves their GPUs, decision 0017)
    dra = baseline.named("fra1-k3s-fra1-l4-1-labels").inputs["metadata"]["labels"]
    assert {k: v for k, v in dra.items() if k.startswith("nvidia.com/gpu.deploy.")} == dict.fromkeys(
        ("nvidia.com/gpu.deploy.device-plugin", "nvidia.com/gpu.deploy.dcgm", "nvidia.com/gpu.deploy.dcgm-exporter"),
        "false",
    )
    assert not any(
        key.startswith("nvidia.com/gpu.deploy.")
        for r in baseline.of_type(NODE_PATCH)
        if "-l40s-" not in r.name and "-l4-" not in r.name
        for key in r.inputs["metadata"]["labels"]
    )


def test_the_provider_has_a_stable_cluster_identifier(baseline: PlanResult, preview_baseline: PlanResult) -> None:
    assert preview_baseline.named("fra1-k8s").inputs["clusterIdentifier"] == "gpucell-fra1"
    assert baseline.named("fra1-k8s").inputs["clusterIdentifier"] == "gpucell-fra1"
    assert baseline.named("iad1-k8s").inputs["clusterIdentifier"] == "gpucell-iad1"
    assert baseline.named("fra1-k8s").options == {}  # no replaceOnChanges, no ignoreChanges: a plain provider


def test_tenant_namespaces_and_vm_disks_are_protected(baseline: PlanResult) -> None:
    for region in ("fra1", "iad1"):
        for tenant in ("acme", "globex"):
            assert baseline.named(f"{region}-{tenant}-namespace").options == {"protect": True}
        for vm in ("acme-train-01", "acme-desk-01", "globex-sim-01"):
            registration = baseline.named(f"{region}-{vm}-vm")
            assert registration.options == {"protect": True}
            assert registration.inputs["spec"]["dataVolumeTemplates"]  # the disks the VirtualMachine owns


def test_stateful_platform_is_protected_and_the_rest_is_not(baseline: PlanResult) -> None:
    protected = {r.name for r in baseline.resources if r.options.get("protect")}
    fra1_protected = {n for n in protected if n.startswith("fra1-")}
    assert {
        "fra1-k3s-token",
        "fra1-storage-longhorn",
        "fra1-kubevirt-operator",
        "fra1-kubevirt-kubevirt",
        "fra1-cdi-operator",
        "fra1-cdi-cdi",
        "fra1-acme-nb-alice-statefulset",
        "fra1-acme-quota",
        "fra1-acme-default-deny",
    } <= fra1_protected
    for host in ("fra1-srv-1", "fra1-srv-2", "fra1-srv-3"):
        assert {f"fra1-k3s-{host}{s}" for s in ("", "-prepare", "-labels", "-settle")} <= fra1_protected
    # Agents of a Longhorn region hold no volume data: removing one drains it and deletes it.
    assert not fra1_protected & {"fra1-k3s-fra1-h100-1", "fra1-k3s-fra1-cpu-1-settle"}
    # Stateless things are never protected: endpoints, the cloud-init Secret, Helm charts without state.
    for name in (
        "fra1-acme-llama-8b-isvc",
        "fra1-acme-train-01-cloud-init",
        "fra1-cilium-cilium",
        "fra1-gpu-operator-gpu-operator",
        "fra1-k8s",
    ):
        assert name not in protected, name


# -- SSH rotation touches only the SSH commands ---------------------------------------------------------------
def _rotate_key(config: dict[str, Any]) -> None:
    config["gpucell:sshPrivateKey"] = "-----BEGIN OPENSSH PRIVATE KEY-----\nrotated\n-----END OPENSSH PRIVATE KEY-----"


def _change_user(config: dict[str, Any]) -> None:
    fra1(config)["ssh"] = {"user": "gpucell"}


def _change_port(config: dict[str, Any]) -> None:
    fra1(config)["ssh"] = {"user": "ubuntu", "port": 2222}


@pytest.mark.parametrize("preview", [False, True], ids=["up", "preview"])
@pytest.mark.parametrize("change", [_rotate_key, _change_user, _change_port], ids=["key", "user", "port"])
def test_ssh_changes_touch_only_the_ssh_commands(
    change: Callable[[dict[str, Any]], None], preview: bool, baseline: PlanResult, preview_baseline: PlanResult
) -> None:
    before, after = preview_baseline if preview else baseline, plan(change, preview=preview)
    difference = diff(before, after)
    assert not difference.added
    assert not difference.removed
    assert difference.changed  # every command in fra1 (and, with the key, in iad1)
    for name, keys in difference.changed.items():
        assert after.named(name).type == COMMAND, name
        assert keys == {"connection"}, name  # scripts, stdin, options: unchanged
        assert not in_cluster(after, name)
    # Nothing in the cluster changes, the provider included; the kubeconfig read ignores its connection.
    assert before.named("fra1-k8s").raw_inputs == after.named("fra1-k8s").raw_inputs
    assert after.named("fra1-k3s-kubeconfig").options["ignoreChanges"] == ["connection"]


# -- GPU reconfiguration --------------------------------------------------------------------------------------
def test_adding_a_gpu_host_adds_its_node_and_changes_nothing_else(baseline: PlanResult) -> None:
    def add(config: dict[str, Any]) -> None:
        fra1(config)["nodePools"]["h200-mig"]["hosts"].append({"name": "fra1-h200-3", "address": "10.110.0.43"})

    difference = diff(baseline, plan(add))
    assert difference.added == {f"fra1-k3s-fra1-h200-3{s}" for s in ("", "-prepare", "-labels", "-settle")}
    assert not difference.removed
    assert difference.changed == {}


def lab_plan(change: Callable[[dict[str, Any]], None] | None = None) -> PlanResult:
    """A lab region without tenants: one server, an L40S container pool, an H200 MIG pool of two hosts and an
    H200 container pool."""
    region = minimal_cell_config()
    region["nodePools"]["h200-mig"] = {
        **tainted_mig_pool(),
        "hosts": [{"name": "h200-1", "address": "10.20.0.51"}, {"name": "h200-2", "address": "10.20.0.52"}],
    }
    region["nodePools"]["h200"] = {
        "role": "gpu",
        "gpuModel": "H200-SXM-141GB",
        "gpusPerNode": 8,
        "gpuMode": "container",
        "hosts": [{"name": "h200x-1", "address": "10.20.0.61"}],
    }
    if change is not None:
        change(region)
    config = {"gpucell:regions": {"lab": region}, "gpucell:sshPrivateKey": "key"}
    return run_program(build_cells, config=config, secret_keys=["gpucell:sshPrivateKey"], computed=computed)


def test_a_new_mig_layout_changes_only_that_pools_nodes() -> None:
    def relayout(region: dict[str, Any]) -> None:
        region["nodePools"]["h200-mig"]["migConfig"] = "all-1g.18gb"

    before, after = lab_plan(), lab_plan(relayout)
    difference = diff(before, after)
    mig_nodes = {f"lab-k3s-{h}{s}" for h in ("h200-1", "h200-2") for s in ("", "-prepare", "-labels", "-settle")}
    assert set(difference.changed) == mig_nodes
    for host in ("h200-1", "h200-2"):
        labels = after.named(f"lab-k3s-{host}-labels").inputs["metadata"]["labels"]
        assert labels["nvidia.com/mig.config"] == "all-1g.18gb"
        prepare = script_of(after.named(f"lab-k3s-{host}-prepare"))
        # the GPU label check that takes the node out of service
        assert "\nreadonly GPU_LABEL_VALUES=(container all-1g.18gb)\n" in prepare
        settle = script_of(after.named(f"lab-k3s-{host}-settle"))
        assert "\nreadonly RESOURCES=(nvidia.com/mig-1g.18gb)\n" in settle
        assert "\nreadonly RESOURCE_COUNTS=(56)\n" in settle
        # The install command only records the label (registration-only: no k3s restart, same digest).
        old_prepare = script_of(before.named(f"lab-k3s-{host}-prepare"))
        assert _digest_of(prepare) == _digest_of(old_prepare)
    # Nothing else: the other GPU pools, the GPU Operator (MIG strategy and manager unchanged), KubeVirt.
    assert "lab-gpu-operator-gpu-operator" not in difference.changed


def test_a_new_gpu_mode_reconfigures_the_pool_and_what_serves_it() -> None:
    def to_passthrough(region: dict[str, Any]) -> None:
        pool = region["nodePools"]["h200"]
        pool["gpuMode"] = "vm-passthrough"

    before, after = lab_plan(), lab_plan(to_passthrough)
    difference = diff(before, after)
    nodes = {n for n in difference.changed if n.startswith("lab-k3s-")}
    assert nodes == {f"lab-k3s-h200x-1{s}" for s in ("", "-prepare", "-labels", "-settle")}
    labels = after.named("lab-k3s-h200x-1-labels").inputs["metadata"]["labels"]
    assert labels["nvidia.com/gpu.workload.config"] == "vm-passthrough"
    assert "nvidia.com/mig.config" not in labels
    settle = script_of(after.named("lab-k3s-h200x-1-settle"))
    assert "\nreadonly RESOURCES=(nvidia.com/GH100_H200_SXM_141GB)\n" in settle
    assert "\nreadonly RESOURCE_COUNTS=(8)\n" in settle
    # The GPU Operator (vfio-manager, sandbox device plugin) and KubeVirt (permitted device) follow.
    assert {"lab-gpu-operator-gpu-operator", "lab-kubevirt-kubevirt"} <= set(difference.changed)


def _digest_of(script: str) -> str:
    line = next(line for line in script.splitlines() if line.startswith("readonly WANT_CONFIG="))
    return line.removeprefix("readonly WANT_CONFIG=")


def test_taints_and_labels_of_a_pool_reach_its_registered_nodes(baseline: PlanResult) -> None:
    def taint(config: dict[str, Any]) -> None:
        pool = fra1(config)["nodePools"]["l40s-vgpu"]
        pool["taints"] = ["nvidia.com/gpu=present:NoSchedule"]
        pool["labels"] = {"example.com/rack": "r12"}

    after = plan(taint)
    difference = diff(baseline, after)
    for host in ("fra1-l40s-1", "fra1-l40s-2"):
        patch = after.named(f"fra1-k3s-{host}-labels")
        assert patch.inputs["spec"] == {
            "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
        }
        assert patch.inputs["metadata"]["labels"]["example.com/rack"] == "r12"
        assert difference.changed[f"fra1-k3s-{host}-labels"] == {"metadata", "spec"}
        # The k3s config records them for a re-registration, which does not restart k3s (registration-only).
        assert difference.changed[f"fra1-k3s-{host}"] == {"create", "update"}
    # Tolerations follow: the VM that runs there now tolerates the taint.
    assert "fra1-acme-desk-01-vm" in difference.changed
    assert not {n for n in difference.changed if n.startswith(("fra1-k3s-fra1-h", "fra1-k3s-fra1-srv", "iad1-"))}


# -- servers --------------------------------------------------------------------------------------------------
def _without(host: str) -> Callable[[dict[str, Any]], None]:
    def change(config: dict[str, Any]) -> None:
        servers = fra1(config)["nodePools"]["servers"]
        servers["hosts"] = [h for h in servers["hosts"] if h["name"] != host]

    return change


def test_removing_one_of_three_servers_plans_with_a_warning(baseline: PlanResult) -> None:
    after = plan(_without("fra1-srv-3"))
    difference = diff(baseline, after)
    assert difference.removed == {f"fra1-k3s-fra1-srv-3{s}" for s in ("", "-prepare", "-labels", "-settle")}
    assert not difference.added
    # The remaining servers keep their identity: not a byte of their config or scripts changes.
    for host in ("fra1-srv-1", "fra1-srv-2"):
        for suffix in ("", "-prepare", "-labels", "-settle"):
            assert f"fra1-k3s-{host}{suffix}" not in difference.changed
    assert after.warnings == [
        LAB_WARNING,
        "2 servers: an even number of etcd members tolerates no more failures than 1 (0: quorum is 2 of 2); use it "
        "only as a step to 1 or 3 servers",
    ]
    assert baseline.warnings == [LAB_WARNING]
    # The removed server's group is protected: pulumi up stops before draining it until removalPolicy says so.
    assert baseline.named("fra1-k3s-fra1-srv-3-settle").options["protect"] is True


def test_removing_the_init_server_gives_no_other_server_cluster_init(baseline: PlanResult) -> None:
    def removed(config: dict[str, Any]) -> None:
        _without("fra1-srv-1")(config)
        fra1(config)["etcd"]["initServerRemoved"] = True

    after = plan(removed)
    difference = diff(baseline, after)
    assert difference.removed == {f"fra1-k3s-fra1-srv-1{s}" for s in ("", "-prepare", "-labels", "-settle")}
    for host in ("fra1-srv-2", "fra1-srv-3"):
        assert f"fra1-k3s-{host}" not in difference.changed  # its config (server: <endpoint>) stays as it was
        assert "cluster-init" not in yaml.safe_load(_config_of(after.named(f"fra1-k3s-{host}")))
    # The control server is now fra1-srv-2: the kubectl commands connect there, nothing else about them changes;
    # the kubeconfig read ignores its new connection (it is not read again).
    # The tenants' admission policies name the servers (no pod or VM lands on one): fra1-srv-1 leaves them.
    admission = {name for name in difference.changed if name.endswith(("-admission-pods", "-admission-vms"))}
    assert admission == {f"fra1-{t}-admission-{p}" for t in ("acme", "globex") for p in ("pods", "vms")}
    for name in admission:
        assert difference.changed[name] == {"spec"}, name
        assert "fra1-srv-1" not in json.dumps(after.named(name).inputs["spec"]), name
    for name, keys in difference.changed.items():
        if name in admission:
            continue
        assert name.endswith(("-prepare", "-settle")) or name == "fra1-k3s-kubeconfig", name
        assert keys == {"connection"}, name
    assert after.named("fra1-k3s-kubeconfig").options["ignoreChanges"] == ["connection"]
    assert "etcd.initServer 'fra1-srv-1' is not a server of the region" in after.warnings[-1]


def test_a_new_server_joins_the_existing_cluster(baseline: PlanResult) -> None:
    def add(config: dict[str, Any]) -> None:
        fra1(config)["nodePools"]["servers"]["hosts"].insert(0, {"name": "fra1-srv-0", "address": "10.110.0.14"})

    after = plan(add)
    joined = yaml.safe_load(_config_of(after.named("fra1-k3s-fra1-srv-0")))
    assert joined["server"] == "https://10.110.0.10:6443"
    assert "cluster-init" not in joined
    assert (
        after.named("fra1-k3s-fra1-srv-1").raw_inputs["create"]
        == baseline.named("fra1-k3s-fra1-srv-1").raw_inputs["create"]
    )


def script_of(command: Registration, key: str = "create") -> str:
    """The bash script a command runs (its input is ``bash -c '<script>'``)."""
    return shlex.split(command.raw_inputs[key])[2]


def _config_of(command: Registration) -> str:
    script = script_of(command)
    start = script.index("<<'GPUCELL_K3S_CONFIG'\n") + len("<<'GPUCELL_K3S_CONFIG'\n")
    return str(script[start : script.index("GPUCELL_K3S_CONFIG\n", start)])


# -- upgrades -------------------------------------------------------------------------------------------------
def test_a_k3s_upgrade_reaches_every_node_and_nothing_in_the_cluster(baseline: PlanResult) -> None:
    def upgrade(config: dict[str, Any]) -> None:
        fra1(config)["versions"] = {"k3s": "v1.34.3+k3s1"}
        fra1(config).setdefault("k3s", {})["installerSha256"] = "0" * 64  # a reviewed installer of that release

    difference = diff(baseline, plan(upgrade))
    fra1_nodes = [r.name for r in baseline.of_type(COMMAND) if r.name.startswith("fra1-k3s-fra1-")]
    assert set(difference.changed) == set(fra1_nodes)
    for name in fra1_nodes:
        assert difference.changed[name] == {"create", "update"}, name  # delete scripts and connections unchanged


# -- removal policies -----------------------------------------------------------------------------------------
def test_a_tenant_removed_on_purpose_takes_its_vms_and_notebooks_along(baseline: PlanResult) -> None:
    def opt_out(config: dict[str, Any]) -> None:
        fra1(config)["tenants"]["acme"]["removalPolicy"] = "delete"
        fra1(config)["tenants"]["acme"]["virtualMachines"]["train-01"]["removalPolicy"] = "retain"

    after = plan(opt_out)
    difference = diff(baseline, after)
    assert {name for name, keys in difference.changed.items() if keys != {"options"}} == set()
    assert after.named("fra1-acme-namespace").options == {}
    assert after.named("fra1-acme-quota").options == {}
    assert after.named("fra1-acme-desk-01-vm").options == {}
    assert after.named("fra1-acme-train-01-vm").options == {"retainOnDelete": True}
    assert after.named("fra1-globex-namespace").options == {"protect": True}


def test_the_region_policy_covers_the_platform_and_a_host_can_differ(baseline: PlanResult) -> None:
    def opt_out(config: dict[str, Any]) -> None:
        fra1(config)["removalPolicy"] = "retain"
        fra1(config)["nodePools"]["cpu"]["hosts"][0]["removalPolicy"] = "protect"

    after = plan(opt_out)
    for name in ("fra1-k3s-token", "fra1-storage-longhorn", "fra1-kubevirt-operator", "fra1-cdi-cdi"):
        assert after.named(name).options.get("retainOnDelete") is True, name
        assert "protect" not in after.named(name).options
    assert after.named("fra1-k3s-fra1-srv-1").options.get("retainOnDelete") is True
    assert after.named("fra1-k3s-fra1-cpu-1").options.get("protect") is True
    assert "protect" not in after.named("fra1-k3s-fra1-cpu-2").options


# -- etcd snapshots -------------------------------------------------------------------------------------------
def test_etcd_snapshots_go_to_s3_through_a_secret(baseline: PlanResult) -> None:
    config = yaml.safe_load(_config_of(baseline.named("fra1-k3s-fra1-srv-2")))
    assert {k: v for k, v in config.items() if k.startswith("etcd")} == {
        "etcd-snapshot-schedule-cron": "0 */6 * * *",
        "etcd-snapshot-retention": 28,
        "etcd-s3": True,
        "etcd-s3-config-secret": "gpucell-etcd-s3",
    }
    secret = baseline.named("fra1-k3s-etcd-s3")
    assert secret.type == "kubernetes:core/v1:Secret"
    assert secret.inputs["type"] == "etcd.k3s.cattle.io/s3-config-secret"
    assert secret.inputs["metadata"]["namespace"] == "kube-system"
    assert secret.inputs["stringData"] == "[secret]"
    assert "stringData" in secret.secret_paths
    assert secret.raw_inputs["stringData"] == {
        "etcd-s3-endpoint": "s3.fra1.gpucell.example",
        "etcd-s3-bucket": "gpucell-etcd-fra1",
        "etcd-s3-region": "eu-central-1",
        "etcd-s3-folder": "fra1",
        "etcd-s3-access-key": "AKIA-SENTINEL",
        "etcd-s3-secret-key": "S3-SECRET-SENTINEL",
        "etcd-s3-insecure": "false",
        "etcd-s3-skip-ssl-verify": "false",
    }
    shown = json.dumps([r.inputs for r in baseline.resources]) + json.dumps(baseline.outputs)
    assert "SENTINEL" not in shown
    for host in ("fra1-srv-1", "fra1-srv-2", "fra1-srv-3"):
        assert "SENTINEL" not in _config_of(baseline.named(f"fra1-k3s-{host}"))


def test_snapshot_defaults_leave_the_server_config_alone() -> None:
    from gpucell.spec import CellSpec

    assert scripts.etcd_snapshot_options(CellSpec.model_validate(minimal_cell_config())) == {}


def test_etcd_s3_credentials_must_be_a_secret() -> None:
    def plain(config: dict[str, Any]) -> None:
        del config["gpucell:etcdS3CredentialsFra1"]

    with pytest.raises(ConfigError) as raised:
        plan(plain)
    assert str(raised.value) == (
        "etcdS3CredentialsFra1: secret is missing (regions.fra1.etcd.snapshots.s3.credentialsConfigKey names it); "
        "set it with `pulumi config set --secret etcdS3CredentialsFra1 -- '<access key id>:<secret access key>'`"
    )


def _sriov_type_24q(config: dict[str, Any]) -> None:
    """l40s-vgpu from L40S-12Q to L40S-24Q, with the tenants' quotas and VM that use the type; the cell's instancetype
    of that type gets a new name for the new size (vgpu.l40s-24q, its VM moved to it), as the guard asks of a resize."""
    regions = json.dumps(config["gpucell:regions"])
    config["gpucell:regions"] = json.loads(regions.replace("L40S-12Q", "L40S-24Q").replace("l40s-12q", "l40s-24q"))


def _dra_to_container(config: dict[str, Any]) -> None:
    """l4-dra to gpuMode container, with the tenant's DRA quota, VM and notebook gone."""
    region = fra1(config)
    region["nodePools"]["l4-dra"]["gpuMode"] = "container"
    acme = region["tenants"]["acme"]
    del acme["quota"]["deviceClasses"]
    del acme["virtualMachines"]["cad-01"]
    del acme["notebooks"]["nb-carol"]


@pytest.mark.parametrize(
    ("pool", "change", "want"),
    [
        ("l40s-vgpu", _sriov_type_24q, "mode=vm-vgpu,vgpu=L40S-24Q,vgpu-framework=sriov"),
        ("l4-dra", _dra_to_container, "mode=container"),
    ],
    ids=["sriov-vgpu-type", "dra-to-container"],
)
def test_a_reconfiguration_the_labels_do_not_show_reaches_every_nodes_prepare(
    baseline: PlanResult, pool: str, change: Callable[[dict[str, Any]], None], want: str
) -> None:
    """Issue 18: an SR-IOV pool has no vgpu.config label, and dra nodes share workload.config=container."""
    after = plan(change)
    config, _ = prod_config()
    for host in [h["name"] for h in fra1(config)["nodePools"][pool]["hosts"]]:
        old = script_of(baseline.named(f"fra1-k3s-{host}-prepare"))
        new = script_of(after.named(f"fra1-k3s-{host}-prepare"))
        assert old != new
        assert f"readonly WANT_GPU={shlex.quote(want)}\n" in new
        assert f"readonly WANT_GPU={shlex.quote(want)}\n" in script_of(after.named(f"fra1-k3s-{host}-settle"))


def _forget(host: str) -> Callable[[dict[str, Any]], None]:
    def change(config: dict[str, Any]) -> None:
        for entry in fra1(config)["nodePools"]["servers"]["hosts"]:
            if entry["name"] == host:
                entry["removalPolicy"] = "forget"

    return change


def test_a_dead_first_server_is_forgotten_from_a_healthy_one_then_removed(baseline: PlanResult) -> None:
    """Issue 18: removalPolicy: forget runs nothing on the host; its Node (and so its etcd member) is deleted from
    the next server, which also takes over every node's maintenance steps."""
    forgotten = plan(_forget("fra1-srv-1"))
    install = forgotten.named("fra1-k3s-fra1-srv-1")
    assert install.options["retainOnDelete"] is True
    assert sorted(install.options["ignoreChanges"]) == ["connection", "create", "delete", "logging", "stdin", "update"]
    prepare = forgotten.named("fra1-k3s-fra1-srv-1-prepare")
    assert "protect" not in prepare.options  # the default, False: its removal may run
    delete = shlex.split(prepare.inputs["delete"])[2]
    assert 'kc delete node "$NODE" --ignore-not-found --wait=false' in delete
    assert "its k3s still runs, so removalPolicy: forget cannot remove it" in delete
    assert "nothing to do until it is removed" in shlex.split(prepare.inputs["create"])[2]
    # Every control-server step now runs on fra1-srv-2.
    srv2 = baseline.named("fra1-k3s-fra1-srv-2").raw_inputs["connection"]["host"]
    for name in ("fra1-k3s-fra1-h100-1-prepare", "fra1-k3s-fra1-srv-1-prepare", "fra1-k3s-fra1-cpu-1-settle"):
        assert baseline.named(name).raw_inputs["connection"]["host"] != srv2, name
        assert forgotten.named(name).raw_inputs["connection"]["host"] == srv2, name
    # The kubeconfig is not read again (its connection is ignored).
    assert forgotten.named("fra1-k3s-kubeconfig").options["ignoreChanges"] == ["connection"]

    def remove(config: dict[str, Any]) -> None:
        _forget("fra1-srv-1")(config)
        _without("fra1-srv-1")(config)
        fra1(config)["etcd"]["initServerRemoved"] = True  # it initialised etcd (issue 17: the name is kept)

    removed = plan(remove)
    assert not any(r.name.startswith("fra1-k3s-fra1-srv-1") for r in removed.resources)
    assert removed.named("fra1-k3s-fra1-cpu-1-settle").raw_inputs["connection"]["host"] == srv2
