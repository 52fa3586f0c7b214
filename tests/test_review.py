"""``gpucell diff``: the review of two plans (exact Markdown), replacement rules, exit codes, and ``--base REF``."""

from __future__ import annotations

import copy
import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gpucell.k3s import _maintenance_scripts as maintenance
from gpucell.k3s._scripts import uninstall_script
from gpucell.spec import NodeRole
from gpucell.stacks import cli
from gpucell.stacks.base_ref import plan_head
from gpucell.stacks.plan import make_plan, to_json
from gpucell.stacks.plan_diff import MISSING, InputChange, diff_plans, diff_values, force_new
from gpucell.stacks.review import exit_code, focus, render, review, show
from tests.conftest import REPO, shared_plan, write_prod_lab

POD_CIDR_REVIEW = """<!-- gpucell-diff -->
## gpucell diff: stack `dev`

**⚠️ 1 disruptive change(s)**, 1 not acknowledged · 5 resource(s) change: 0 to create · 5 to update · 0 to replace · 0 \
to delete

### ⚠️ Disruptive changes (1)

1. **`podCidr`** in `lab1`: `regions.lab1.network.podCidr` `10.42.0.0/16` → `10.52.0.0/16`
   - Every pod and VM keeps its address from the old range until it is recreated, and gpucell does not migrate the pod \
ranges Cilium already gave the nodes; plan a restart of every workload, and update network policies and firewalls \
written for the old range.
   - ❌ Not acknowledged: `pulumi up` refuses it until `gpucell:acknowledge` has `{change: podCidr, region: lab1, \
reason: "..."}`.

### What running workloads go through

- `lab1`: 1 node(s) cordoned and drained one by one (pods evicted through the Eviction API, GPU VMs stopped): \
`lab1-srv-1`

### Region `lab1`: 0 to create · 5 to update · 0 to replace · 0 to delete

| action | resource | what changes |
|---|---|---|
| 🟡 update | CiliumClusterwideNetworkPolicy gpucell-tenants-deny-networks | `spec.egressDeny[0].toCIDRSet[1].cidr`: \
`10.42.0.0/16` → `10.52.0.0/16` |
| 🟡 update | Helm release cilium (kube-system) | `values.ipam.operator.clusterPoolIPv4PodCIDRList[0]`: `10.42.0.0/16` \
→ `10.52.0.0/16` |
| 🟡 update | command lab1-k3s-lab1-srv-1-prepare | `commands/lab1-k3s-lab1-srv-1-prepare/create.sh`: see the diff \
below |
| 🟡 update | command lab1-k3s-lab1-srv-1-settle | `commands/lab1-k3s-lab1-srv-1-settle/create.sh`: see the diff below |
| 🟡 update | node lab1-srv-1 | `nodes/lab1-srv-1/config.yaml`: see the diff below |

<details><summary>commands/lab1-k3s-lab1-srv-1-prepare/create.sh (update command lab1-k3s-lab1-srv-1-prepare)</summary>

```diff
--- a/commands/lab1-k3s-lab1-srv-1-prepare/create.sh
+++ b/commands/lab1-k3s-lab1-srv-1-prepare/create.sh
@@ -259,7 +259,7 @@
 }
\x20
 readonly WANT_VERSION=v1.34.2+k3s1
-readonly WANT_CONFIG=6c4365895542ebb7
+readonly WANT_CONFIG=33b4d7bffe342540
 readonly DRAIN_TIMEOUT=900
 readonly DRAIN_ATTEMPTS=180
 readonly QUARANTINE=''
```

</details>

<details><summary>commands/lab1-k3s-lab1-srv-1-settle/create.sh (update command lab1-k3s-lab1-srv-1-settle)</summary>

```diff
--- a/commands/lab1-k3s-lab1-srv-1-settle/create.sh
+++ b/commands/lab1-k3s-lab1-srv-1-settle/create.sh
@@ -127,7 +127,7 @@
 }
\x20
 readonly WANT_VERSION=v1.34.2+k3s1
-readonly WANT_CONFIG=6c4365895542ebb7
+readonly WANT_CONFIG=33b4d7bffe342540
 readonly READY_ATTEMPTS=60
 readonly WANT_LABELS=gpucell.io/pool,gpucell.io/role
 readonly WANT_GPU=''
```

</details>

<details><summary>nodes/lab1-srv-1/config.yaml (update node lab1-srv-1)</summary>

```diff
--- a/nodes/lab1-srv-1/config.yaml
+++ b/nodes/lab1-srv-1/config.yaml
@@ -14,7 +14,7 @@
 tls-san:
 - 10.20.0.11
 - api.lab1.gpucell.internal
-cluster-cidr: 10.42.0.0/16
+cluster-cidr: 10.52.0.0/16
 service-cidr: 10.43.0.0/16
 cluster-dns: 10.43.0.10
 flannel-backend: none
```

</details>
"""


def project(tmp_path: Path, name: str, edit: Any = None) -> Path:
    """A project directory with the dev stack file, edited by ``edit(text) -> text``."""
    folder = tmp_path / name
    folder.mkdir()
    shutil.copy(REPO / "Pulumi.yaml", folder)
    text = (REPO / "Pulumi.dev.yaml").read_text()
    (folder / "Pulumi.dev.yaml").write_text(edit(text) if edit else text)
    return folder


def plan_json(folder: Path) -> dict[str, Any]:
    plan = make_plan(folder, "dev")
    return to_json(plan, list(plan.cells))


@pytest.fixture(scope="module")
def dev_json() -> dict[str, Any]:
    plan = shared_plan("dev")
    return to_json(plan, list(plan.cells))


def pod_cidr(text: str) -> str:
    assert "podCidr: 10.42.0.0/16" in text
    return text.replace("podCidr: 10.42.0.0/16", "podCidr: 10.52.0.0/16")


def test_dev_pod_cidr_change_is_flagged_disruptive(
    tmp_path: Path, dev_json: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    base, head = tmp_path / "base.json", tmp_path / "head.json"
    base.write_text(json.dumps(dev_json))
    head.write_text(json.dumps(plan_json(project(tmp_path, "head", pod_cidr))))
    assert cli.main(["diff", str(base), str(head), "--out", str(tmp_path / "review.md")]) == 4
    assert capsys.readouterr().out == POD_CIDR_REVIEW
    assert (tmp_path / "review.md").read_text() == POD_CIDR_REVIEW


def test_no_change_exits_0_and_a_plain_change_3(tmp_path: Path, dev_json: dict[str, Any]) -> None:
    same = review(dev_json, dev_json)
    assert (
        render([same]) == "<!-- gpucell-diff -->\n## gpucell diff: stack `dev`\n\nno changes · 0 resource(s) "
        "change: 0 to create · 0 to update · 0 to replace · 0 to delete\n"
    )
    base = tmp_path / "base.json"
    base.write_text(json.dumps(dev_json))
    assert cli.main(["diff", str(base), str(base)]) == 0
    quota = plan_json(project(tmp_path, "quota", lambda t: t.replace("memoryGib: 256", "memoryGib: 384")))
    head = tmp_path / "head.json"
    head.write_text(json.dumps(quota))
    assert cli.main(["diff", str(base), str(head)]) == 3
    markdown = render([review(dev_json, quota)])
    assert "no disruptive change · 1 resource(s) change: 0 to create · 1 to update" in markdown
    assert (
        '| 🟡 update | ResourceQuota tenant-research/tenant-quota | `spec.hard["limits.memory"]`: `256Gi` → '
        '`384Gi`<br>`spec.hard["requests.hugepages-1Gi"]`: `256Gi` → `384Gi`<br>`spec.hard["requests.hugepages-'
        '2Mi"]`: `256Gi` → `384Gi`<br>`spec.hard["requests.memory"]`: `256Gi` → `384Gi` |'
    ) in markdown


def test_acknowledged_and_stale_entries_are_shown(dev_json: dict[str, Any], tmp_path: Path) -> None:
    head = plan_json(project(tmp_path, "head", pod_cidr))
    head["acknowledge"] = [
        {"change": "podCidr", "region": "lab1", "reason": "maintenance window CHG-1234"},
        {"change": "gpuMode", "region": "lab1", "reason": "left over"},
    ]
    item = review(dev_json, head)
    markdown = render([item])
    assert "**⚠️ 1 disruptive change(s)**, all acknowledged" in markdown
    assert "   - ✅ Acknowledged: maintenance window CHG-1234\n" in markdown
    assert (
        "**⚠️ 1 disruptive change(s)**, all acknowledged · 1 acknowledgement(s) match no disruptive change · "
        "5 resource(s) change" in markdown
    )
    assert (
        "### Acknowledgements that match no disruptive change\n\n- `acknowledge[1]` `{change: gpuMode, region: "
        "lab1}`: matches no disruptive change between the two plans; `pulumi up` stops on it only if it also "
        "matches nothing against the deployed state.\n"
    ) in markdown
    assert "remove it" not in markdown  # the base may not be deployed yet


def acknowledging(plan: dict[str, Any], *entries: dict[str, str]) -> dict[str, Any]:
    return {**plan, "acknowledge": list(entries)}


POD_CIDR_ACK = {"change": "podCidr", "region": "lab1", "reason": "CHG-1"}


def test_an_acknowledgement_the_base_still_needs_is_carried_over_not_removed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """PR 1 (podCidr, acknowledged) is merged but not deployed; PR 2 changes a quota and keeps PR 1's entry."""
    pr1 = acknowledging(plan_json(project(tmp_path, "pr1", pod_cidr)), POD_CIDR_ACK)
    pr2 = acknowledging(
        plan_json(project(tmp_path, "pr2", lambda t: pod_cidr(t).replace("memoryGib: 256", "memoryGib: 512"))),
        POD_CIDR_ACK,
    )
    base, head = tmp_path / "base.json", tmp_path / "head.json"
    base.write_text(json.dumps(pr1))
    head.write_text(json.dumps(pr2))
    assert cli.main(["diff", str(base), str(head)]) == 3
    out = capsys.readouterr().out
    assert out.splitlines()[3] == (
        "no disruptive change · 1 acknowledgement(s) match no disruptive change · 1 "
        "resource(s) change: 0 to create · 1 to update · 0 to replace · 0 to delete"
    )
    assert (
        "- `acknowledge[0]` `{change: podCidr, region: lab1}`: matches no disruptive change between the two "
        "plans; `pulumi up` stops on it only if it also matches nothing against the deployed state. It is in "
        "the base's `gpucell:acknowledge` too: remove it once the base is deployed.\n"
    ) in out


def test_a_stale_acknowledgement_alone_is_a_change_not_no_changes(
    tmp_path: Path, dev_json: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    head = acknowledging(dev_json, {"change": "gpuMode", "region": "lab1", "subject": "lab1-gpu-1", "reason": "x"})
    base_file, head_file = tmp_path / "base.json", tmp_path / "head.json"
    base_file.write_text(json.dumps(dev_json))
    head_file.write_text(json.dumps(head))
    assert cli.main(["diff", str(base_file), str(head_file)]) == 3
    assert capsys.readouterr().out.splitlines()[3] == (
        "no disruptive change · 1 acknowledgement(s) match no disruptive change · 0 resource(s) change: 0 to create "
        "· 0 to update · 0 to replace · 0 to delete"
    )
    # taking an entry out again (after its pulumi up) is a change of the stack config too
    removed = review(acknowledging(dev_json, POD_CIDR_ACK), dev_json)
    assert (removed.changed, removed.judgement.stale) == (True, [])
    assert render([removed]).splitlines()[3] == (
        "no disruptive change · `gpucell:acknowledge` changes · 0 resource(s) change: 0 to create · 0 to update · "
        "0 to replace · 0 to delete"
    )


def test_plan_without_fingerprints_is_an_error(
    tmp_path: Path, dev_json: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    old = copy.deepcopy(dev_json)
    del old["outputs"]["lab1Fingerprint"]
    base, head = tmp_path / "base.json", tmp_path / "head.json"
    base.write_text(json.dumps(old))
    head.write_text(json.dumps(dev_json))
    assert cli.main(["diff", str(base), str(head)]) == 1
    assert capsys.readouterr().err == (
        "BASE: has no fingerprint for region(s) lab1: it was planned by a gpucell without `gpucell diff`; plan it "
        "again with this version\n"
    )
    assert cli.main(["diff", str(base)]) == 2  # a wrong command line, as argparse's own errors
    assert capsys.readouterr().err == (
        "gpucell diff: takes BASE.json HEAD.json, or --base REF [STACK ...]; got 1 argument\n"
    )
    assert cli.main(["diff", str(base), str(head), "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"--out: {str(tmp_path)!r} is a directory; --out takes the path of a file to write\n"
    )


def test_a_plan_with_a_urn_twice_is_refused(
    tmp_path: Path, dev_json: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    doubled = copy.deepcopy(dev_json)
    doubled["resources"].append(copy.deepcopy(doubled["resources"][3]))
    urn = doubled["resources"][3]["urn"]
    base, head = tmp_path / "base.json", tmp_path / "head.json"
    base.write_text(json.dumps(dev_json))
    head.write_text(json.dumps(doubled))
    assert cli.main(["diff", str(base), str(head)]) == 1
    assert capsys.readouterr().err == (
        f"{head}: resources[{len(doubled['resources']) - 1}] has the urn of resources[3] ({urn}); a plan registers "
        "each URN once; not a `gpucell plan --json` file (each resource has urn, type, name and inputs)\n"
    )


NOT_A_PLAN = "not a `gpucell plan --json` file (each resource has urn, type, name and inputs)"


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ([1], "is a JSON list, not an object"),
        ({"stack": "dev"}, "has no resources"),
        ({"resources": 5}, "resources is a JSON number, not a list"),
        ({"resources": [1]}, "resources[0] is a JSON number, not an object"),
        ({"resources": [{}]}, "resources[0] has no urn"),
        ({"resources": [{"urn": "u", "type": "t", "name": "n"}]}, "resources[0] has no inputs"),
        (
            {"resources": [{"urn": "u", "type": 3, "name": "n", "inputs": {}}]},
            "resources[0].type is a JSON number, not a string",
        ),
        (
            {"resources": [{"urn": "u", "type": "t", "name": "n", "inputs": []}]},
            "resources[0].inputs is a JSON list, not an object",
        ),
        (
            {"resources": [{"urn": "u", "type": "t", "name": "n", "inputs": {}, "options": None}]},
            "resources[0].options is a JSON null, not an object",
        ),
        ({"resources": [], "outputs": []}, "outputs is a JSON list, not an object"),
        ({"resources": [], "acknowledge": {}}, "acknowledge is a JSON object, not a list"),
    ],
)
def test_a_file_of_another_shape_is_one_line_naming_it(
    tmp_path: Path, dev_json: dict[str, Any], document: Any, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bad, good = tmp_path / "bad.json", tmp_path / "good.json"
    bad.write_text(json.dumps(document))
    good.write_text(json.dumps(dev_json))
    assert cli.main(["diff", str(bad), str(good)]) == 1
    assert capsys.readouterr().err == f"{bad}: {problem}; {NOT_A_PLAN}\n"


@pytest.fixture(scope="module")
def prod_lab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project whose stack ``prod`` holds both production regions (:func:`tests.conftest.write_prod_lab`)."""
    return write_prod_lab(tmp_path_factory.mktemp("prod-lab"))


@pytest.fixture(scope="module")
def prod_json(prod_lab: Path) -> dict[str, Any]:
    plan = make_plan(prod_lab, "prod")
    return to_json(plan, list(plan.cells))


def test_plans_of_two_stacks_need_cross_stack(
    tmp_path: Path, dev_json: dict[str, Any], prod_json: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    dev, prod = tmp_path / "dev.json", tmp_path / "prod.json"
    dev.write_text(json.dumps(dev_json))
    prod.write_text(json.dumps(prod_json))
    assert cli.main(["diff", str(dev), str(prod)]) == 1
    assert capsys.readouterr().err == (
        f"gpucell diff: {dev} is a plan of stack dev and {prod} of stack prod; pass "
        "--cross-stack to compare plans of two stacks\n"
    )
    assert cli.main(["diff", str(prod), str(prod), "--cross-stack"]) == 0
    capsys.readouterr()
    # with the stack name set aside, the same plan under another stack's name matches resource by resource
    renamed = copy.deepcopy(prod_json)
    renamed["stack"] = "staging"
    for resource in renamed["resources"]:
        for key in ("urn", "parent"):
            resource[key] = resource[key].replace("urn:pulumi:prod::", "urn:pulumi:staging::")
        resource["dependencies"] = [
            d.replace("urn:pulumi:prod::", "urn:pulumi:staging::") for d in resource["dependencies"]
        ]
    staging = tmp_path / "staging.json"
    staging.write_text(json.dumps(renamed))
    assert cli.main(["diff", str(staging), str(prod), "--cross-stack"]) == 0
    assert capsys.readouterr().out.splitlines()[3:6] == [
        "no changes · 0 resource(s) change: 0 to create · 0 to update · 0 to replace · 0 to delete",
        "",
        "> stack `staging` (BASE) compared with stack `prod` (HEAD): resources matched by URN with the stack name "
        "set aside",
    ]


def test_a_one_region_plan_is_compared_on_the_regions_both_hold(
    tmp_path: Path, prod_lab: Path, prod_json: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    full, fra1 = tmp_path / "full.json", tmp_path / "fra1.json"
    full.write_text(json.dumps(prod_json))
    assert cli.main(["plan", "prod", "--project-dir", str(prod_lab), "--region", "fra1", "--json", str(fra1)]) == 0
    capsys.readouterr()
    written = json.loads(fra1.read_text())
    assert (written["regions"], written["regionFilter"]) == (["fra1"], "fra1")
    assert (prod_json["regions"], prod_json["regionFilter"]) == (["fra1", "iad1"], None)
    assert cli.main(["diff", str(full), str(fra1)]) == 0  # no regionRemoved iad1
    assert capsys.readouterr().out.splitlines()[3:6] == [
        "no changes · 0 resource(s) change: 0 to create · 0 to update · 0 to replace · 0 to delete",
        "",
        "> HEAD with `--region fra1`: only the region(s) both plans hold are compared (fra1); regions missing from "
        "one of them are not taken as removed",
    ]
    # two full plans: a region missing from the head is removed
    without_iad1 = {**prod_json, "regions": ["fra1"], "resources": written["resources"], "outputs": written["outputs"]}
    assert [c.change.value for c in review(prod_json, without_iad1).disruptive] == ["regionRemoved"]


# -- resource rules on small plans --------------------------------------------------------------------------------
STACK_URN = "urn:pulumi:dev::gpucell::"
CELL = f"{STACK_URN}gpucell:index:RegionalCell::lab"


def res(rtype: str, name: str, inputs: dict[str, Any], options: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "urn": f"{STACK_URN}gpucell:index:RegionalCell${rtype}::{name}",
        "type": rtype,
        "name": name,
        "parent": CELL,
        "provider": "",
        "dependencies": [],
        "options": options or {},
        "inputs": inputs,
    }


def plan(*resources: dict[str, Any]) -> dict[str, Any]:
    cell = {
        "urn": CELL,
        "type": "gpucell:index:RegionalCell",
        "name": "lab",
        "parent": "",
        "provider": "",
        "dependencies": [],
        "options": {},
        "inputs": {},
    }
    return {"stack": "dev", "resources": [cell, *resources], "outputs": {"labFingerprint": {}}, "acknowledge": []}


SSH_COMMANDS = [
    f"command lab1-k3s-lab1-{host}-{step}" for host in ("cpu-1", "gpu-1", "srv-1") for step in ("prepare", "settle")
] + ["node lab1-cpu-1", "node lab1-gpu-1", "node lab1-srv-1"]


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda t: t.replace("ssh: {user: ubuntu}", "ssh: {user: admin, port: 2222}"), id="user-and-port"),
        pytest.param(
            lambda t: t.replace(
                "gpucell:sshPrivateKey: {secure: 'v1:placeholder-set-me-with-pulumi-config-set-secret'}",
                "gpucell:sshPrivateKey: {secure: 'v1:rotated'}",
            ),
            id="key",
        ),
    ],
)
def test_an_ssh_change_shows_every_ssh_command_and_not_the_kubeconfig_read(
    tmp_path: Path, dev_json: dict[str, Any], edit: Any
) -> None:
    head = plan_json(project(tmp_path, "head", edit))
    assert head != dev_json
    diffs = diff_plans(dev_json, head).regions["lab1"]
    assert [(d.action, d.label, d.changes) for d in diffs] == [
        ("update", label, [InputChange("connection", "[secret]", "[secret, changed]")]) for label in SSH_COMMANDS
    ]
    assert "| 🟡 update | node lab1-srv-1 | `connection`: `[secret]` → `[secret, changed]` |" in render(
        [review(dev_json, head)]
    )


def test_the_plan_records_digests_of_secret_inputs_not_their_values(dev_json: dict[str, Any]) -> None:
    by_name = {r["name"]: r for r in dev_json["resources"]}
    node_secrets = by_name["lab1-k3s-lab1-srv-1"]["secrets"]
    assert set(node_secrets) == {"connection", "stdin"}
    assert all(re.fullmatch(r"sha256:[0-9a-f]{16}", digest) for digest in node_secrets.values())
    assert "secrets" not in by_name["lab1-cilium"]
    assert "PLACEHOLDER" not in json.dumps(dev_json)


def test_an_ignored_change_is_not_an_update() -> None:
    read = res(
        "command:remote:Command",
        "kubeconfig",
        {"create": "cat", "connection": "[secret]"},
        {"ignoreChanges": ["connection"]},
    )
    read["secrets"] = {"connection": "sha256:0000000000000000"}
    rotated = copy.deepcopy(read)
    rotated["secrets"] = {"connection": "sha256:1111111111111111"}
    assert not diff_plans(plan(read), plan(rotated)).changed
    rotated["inputs"]["create"] = "cat -v"
    assert only(plan(read), plan(rotated)).notes == ["not applied, in `ignoreChanges`: `connection`"]


def pvc(name: str, storage_class: str, **options: Any) -> dict[str, Any]:
    return res(
        "kubernetes:core/v1:PersistentVolumeClaim",
        name,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "tenant-acme"},
            "spec": {"storageClassName": storage_class, "resources": {"requests": {"storage": "10Gi"}}},
        },
        options,
    )


def only(base: dict[str, Any], head: dict[str, Any]) -> Any:
    [found] = diff_plans(base, head).regions["lab"]
    return found


def test_immutable_kubernetes_fields_replace_and_protected_ones_stop() -> None:
    found = only(plan(pvc("data", "local-path", protect=True)), plan(pvc("data", "longhorn", protect=True)))
    assert (found.action, found.replaced_by, found.protected) == (
        "replace",
        ["`spec.storageClassName` changed (spec.storageClassName cannot change in place)"],
        True,
    )
    assert found.notes == ["deleted, then created again under the same name: it is gone in between"]
    row = render([review(plan(pvc("data", "local-path", protect=True)), plan(pvc("data", "longhorn", protect=True)))])
    assert (
        "| 🔴 replace ⛔ | PersistentVolumeClaim tenant-acme/data | ⛔ **protected**: `pulumi up` stops here "
        "until it is unprotected on purpose (`pulumi state unprotect`)<br>**replaced**: `spec.storageClassName` "
        "changed (spec.storageClassName cannot change in place)<br>`spec.storageClassName`: `local-path` → "
        "`longhorn`<br>deleted, then created again under the same name: it is gone in between |"
    ) in row


def test_protected_and_retained_deletions() -> None:
    diffs = diff_plans(plan(pvc("a", "x", protect=True), pvc("b", "x", retainOnDelete=True)), plan()).regions["lab"]
    assert [(d.action, d.label, d.protected, d.notes) for d in diffs] == [
        ("delete", "PersistentVolumeClaim tenant-acme/a", True, []),
        (
            "delete",
            "PersistentVolumeClaim tenant-acme/b",
            False,
            ["`retainOnDelete`: Pulumi forgets it, the object stays in the cluster"],
        ),
    ]


def test_deleted_node_commands_say_what_their_delete_really_does() -> None:
    """Issue 30: every deleted command said "runs its delete script (the k3s uninstall)", also where none runs."""

    def command(name: str, script: str, **options: Any) -> dict[str, Any]:
        return res("command:remote:Command", name, {"create": "true", "delete": f"bash -c {shlex.quote(script)}"},
                   options)  # fmt: skip

    uninstall = uninstall_script(NodeRole.CPU, "lab-cpu-1")
    base = plan(
        command("k3s-lab-cpu-1", uninstall),
        command("k3s-lab-cpu-1-prepare", maintenance.forget_script("lab-cpu-1")),
        command("k3s-lab-gpu-1", uninstall_script(NodeRole.CPU, "lab-gpu-1"), retainOnDelete=True),
        command("k3s-lab-gpu-2-prepare", maintenance.forget_script("lab-gpu-2"), retainOnDelete=True),
    )
    notes = {d.label.split()[-1]: d.notes for d in diff_plans(base, plan()).regions["lab"]}
    assert notes == {
        "k3s-lab-cpu-1": ["runs its delete script: uninstall k3s-agent from lab-cpu-1"],
        "k3s-lab-cpu-1-prepare": ["runs its delete script: delete node lab-cpu-1 from the cell"],
        "k3s-lab-gpu-1": [
            "`retainOnDelete`: Pulumi forgets it; its delete script does not run: k3s stays installed on the host"
        ],
        "k3s-lab-gpu-2-prepare": ["`retainOnDelete`: Pulumi forgets it; its delete script does not run"],
    }


def test_replace_on_changes_option_and_metadata_name() -> None:
    command = res(
        "command:remote:Command", "c", {"create": "true", "triggers": ["a"]}, {"replaceOnChanges": ["triggers[*]"]}
    )
    changed = copy.deepcopy(command)
    changed["inputs"]["triggers"] = ["b"]
    assert only(plan(command), plan(changed)).replaced_by == [
        "`triggers[0]` changed (triggers[*] cannot change in place)"
    ]
    renamed = pvc("data", "x")
    renamed["inputs"]["metadata"]["name"] = "data2"
    found = only(plan(pvc("data", "x")), plan(renamed))
    assert found.replaced_by == ["`metadata.name` changed (metadata.name cannot change in place)"]
    # pulumi-kubernetes deletes first only an object that keeps its name (a tenant cluster's hashed templates do not)
    assert found.notes == ["created under its new name first; the old object is deleted at the end of the run"]


def k8s(api_version: str, kind: str, spec: dict[str, Any], rtype: str | None = None) -> dict[str, Any]:
    group, _, version = api_version.rpartition("/")
    return res(
        rtype or f"kubernetes:{group or 'core'}/{version}:{kind}",
        "obj",
        {"apiVersion": api_version, "kind": kind, "metadata": {"name": "obj", "namespace": "t"}, "spec": spec},
    )


@pytest.mark.parametrize(
    ("api_version", "kind", "old", "new", "replaced"),
    [
        # diff.go v4.32.0: a PVC forces on accessModes, selector, storageClassName, volumeName only
        (
            "v1",
            "PersistentVolumeClaim",
            {"resources": {"requests": {"storage": "1Gi"}}},
            {"resources": {"requests": {"storage": "2Gi"}}},
            False,
        ),
        ("v1", "PersistentVolumeClaim", {"accessModes": ["ReadWriteOnce"]}, {"accessModes": ["ReadWriteMany"]}, True),
        (
            "apps/v1",
            "DaemonSet",
            {"selector": {"matchLabels": {"a": "1"}}},
            {"selector": {"matchLabels": {"a": "2"}}},
            True,
        ),
        (
            "v1",
            "Pod",
            {"containers": [{"name": "c", "image": "a"}]},
            {"containers": [{"name": "c", "image": "b"}]},
            True,
        ),
        ("v1", "Pod", {"activeDeadlineSeconds": 1}, {"activeDeadlineSeconds": 2}, False),
        ("v1", "PersistentVolume", {"nfs": {"path": "/a"}}, {"nfs": {"path": "/b"}}, True),
        ("v1", "PersistentVolume", {"capacity": {"storage": "1Gi"}}, {"capacity": {"storage": "2Gi"}}, False),
        ("policy/v1beta1", "PodDisruptionBudget", {"minAvailable": 1}, {"minAvailable": 2}, True),
        ("policy/v1", "PodDisruptionBudget", {"minAvailable": 1}, {"minAvailable": 2}, False),  # not in upstream's list
        ("example.com/v1", "Job", {"completions": 1}, {"completions": 2}, False),  # only batch Jobs
        ("batch/v1", "Job", {"completions": 1}, {"completions": 2}, True),
    ],
)
def test_replacements_follow_pulumi_kubernetes_diff_go(
    api_version: str, kind: str, old: dict[str, Any], new: dict[str, Any], replaced: bool
) -> None:
    found = only(plan(k8s(api_version, kind, old)), plan(k8s(api_version, kind, new)))
    assert (found.action == "replace") is replaced, found.replaced_by


def test_a_patch_is_replaced_only_when_its_identity_changes() -> None:
    def selector(value: str) -> dict[str, Any]:
        return k8s(
            "apps/v1", "DaemonSet", {"selector": {"matchLabels": {"a": value}}}, "kubernetes:apps/v1:DaemonSetPatch"
        )

    assert only(plan(selector("1")), plan(selector("2"))).action == "update"
    assert force_new("apps/v1", "DaemonSet", patch=True) == ("metadata.name", "metadata.namespace")
    assert force_new("v1", "Secret") == ("metadata.name", "metadata.namespace", "type", "stringData", "data")
    assert force_new("v1", "ConfigMap") == ("metadata.name", "metadata.namespace", "binaryData", "data")


def test_vm_disk_template_changes_are_marked_immutable() -> None:
    def vm(url: str) -> dict[str, Any]:
        return res(
            "kubernetes:kubevirt.io/v1:VirtualMachine",
            "vm",
            {
                "apiVersion": "kubevirt.io/v1",
                "kind": "VirtualMachine",
                "metadata": {"name": "vm", "namespace": "t"},
                "spec": {
                    "dataVolumeTemplates": [
                        {"metadata": {"name": "vm-root"}, "spec": {"source": {"http": {"url": url}}}}
                    ]
                },
            },
        )

    found = only(plan(vm("https://a/1.img")), plan(vm("https://a/2.img")))
    assert (found.action, found.immutable) == (
        "update",
        [
            "`spec.dataVolumeTemplates[name=vm-root].spec.source.http.url`: not applied to an existing disk: KubeVirt "
            "creates a VM's DataVolume from its template only when it is missing"
        ],
    )


def test_alias_is_a_move_not_a_replacement() -> None:
    old = pvc("old-name", "x")
    new = pvc("new-name", "x")
    new["inputs"]["metadata"]["name"] = "old-name"
    new["options"] = {"aliases": [{"name": "old-name"}]}
    found = only(plan(old), plan(new))
    assert (found.action, found.notes) == ("update", [f"moved from `{old['urn']}` (alias: no replacement)"])


def node(name: str, host: str, ip: str, role: str = "agent") -> dict[str, Any]:
    script = (
        f"#!/usr/bin/env bash\nreadonly K3S_EXEC={role}\ncat >\"$work/config.yaml\" <<'EOF_CONFIG'\n"
        f"node-name: {host}\nnode-ip: {ip}\nEOF_CONFIG\necho done\n"
    )
    line = f"bash -c {shlex.quote(script)}"
    return res("command:remote:Command", name, {"create": line, "update": line, "delete": "bash -c 'k3s-uninstall.sh'"})


def test_node_renamed_on_the_same_address_is_a_replacement() -> None:
    found = only(plan(node("lab-k3s-a", "a", "10.0.0.1")), plan(node("lab-k3s-b", "b", "10.0.0.1")))
    assert (found.action, found.label, found.replaced_by, found.notes) == (
        "replace",
        "node b",
        ["node identity: `node-name` a → b on 10.0.0.1"],
        ["k3s joins again as b first; then a's delete keeps k3s on the host (it now runs as b) and deletes the Node a"],
    )
    assert [t.name for t in found.texts] == ["nodes/b/config.yaml"]
    assert "-node-name: a\n+node-name: b\n" in found.texts[0].diff


def test_a_server_renamed_on_the_same_address_is_refused_at_install() -> None:
    def server(name: str, host: str) -> dict[str, Any]:
        return node(name, host, "10.0.0.1", role="server")

    old, new = server("lab-k3s-a", "a"), server("lab-k3s-b", "b")
    assert only(plan(old), plan(new)).notes == [
        "a server cannot be renamed in place: its install stops `pulumi up` before anything changes; remove a in one "
        "`pulumi up` and add b in the next"
    ]


def test_values_are_folded_and_secrets_stay_secret() -> None:
    assert show("x" * 100) == f"`{'x' * 60}… (100 chars)`"
    assert show("[secret]") == "`[secret]`"
    assert show(MISSING) == "*(absent)*"
    assert show("a|b") == "`a\\|b`"
    assert (
        diff_values(
            {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
            {"env": [{"name": "B", "value": "3"}, {"name": "A", "value": "1"}]},
        )[0].path
        == "env[name=B].value"
    )


# -- --base REF ---------------------------------------------------------------------------------------------------
def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git repository holding this project's tracked files as its one commit."""
    folder = tmp_path_factory.mktemp("repo")
    for name in git(REPO, "ls-files").splitlines():
        if (REPO / name).is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(REPO / name, folder / name)
    git(folder, "init", "-q")
    git(folder, "add", "-A")
    git(folder, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "base")
    return folder


def test_base_ref_plans_the_refs_files_with_its_own_code(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    original = (repo / "Pulumi.dev.yaml").read_text()
    try:
        (repo / "Pulumi.dev.yaml").write_text(pod_cidr(original))
        code = cli.main(["diff", "--base", "HEAD", "dev", "--project-dir", str(repo)])
        out = capsys.readouterr().out
        assert code == 4
        assert out == POD_CIDR_REVIEW.replace(
            "change: 0 to create · 0 to update · 0 to replace · 0 to delete\n\n###",
            "change: 0 to create · 0 to update · 0 to replace · 0 to delete\n\n###",
        ).replace("· 0 to delete\n\n### ⚠️", "· 0 to delete\n\n> base: stack files and code at `HEAD`\n\n### ⚠️")
        assert cli.main(["diff", "--base", "HEAD", "dev", "--base-code", "worktree", "--project-dir", str(repo)]) == 4
        assert "> base: `Pulumi.dev.yaml` at `HEAD` planned with the working tree's code\n" in capsys.readouterr().out
    finally:
        (repo / "Pulumi.dev.yaml").write_text(original)


def test_base_ref_code_is_imported_from_the_ref_wherever_the_diff_runs(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # run from a checkout's root, whose gpucell/ is not the ref's: the ref's plan must not import it
    (tmp_path / "gpucell").mkdir()
    (tmp_path / "gpucell" / "__init__.py").write_text("raise ImportError('not the ref gpucell')\n")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["diff", "--base", "HEAD", "dev", "--project-dir", str(repo)]) == 0
    assert "> base: stack files and code at `HEAD`\n" in capsys.readouterr().out


def test_base_ref_new_stack_and_bad_ref(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "Pulumi.lab.yaml").write_text((repo / "Pulumi.dev.yaml").read_text())
    try:
        assert cli.main(["diff", "--base", "HEAD", "lab", "--project-dir", str(repo)]) == 3
        out = capsys.readouterr().out
        assert "> `Pulumi.lab.yaml` does not exist at `HEAD`: every resource is new\n" in out
        count = len(
            [r for r in make_plan(repo, "lab").region_resources("lab1") if not r.type.startswith("gpucell:index:")]
        )
        assert f"no disruptive change · {count} resource(s) change: {count} to create · 0 to update" in out
    finally:
        (repo / "Pulumi.lab.yaml").unlink()
    assert cli.main(["diff", "--base", "no-such-ref", "--project-dir", str(repo)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("--base: 'no-such-ref' cannot be read from ")


def test_base_ref_with_a_stack_that_exists_nowhere_or_plan_files(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["diff", "--base", "HEAD", "Dev", "--project-dir", str(repo)]) == 1
    assert capsys.readouterr() == (
        "",
        f"gpucell diff: no stack Dev: neither 'HEAD' nor the working tree ({repo}) has "
        "Pulumi.Dev.yaml; stacks: dev, prod-fra1, prod-iad1\n",
    )
    assert cli.main(["diff", "--base", "HEAD", "a.json", "b.json", "--project-dir", str(repo)]) == 1
    assert capsys.readouterr() == (
        "",
        "gpucell diff: a.json, b.json: with --base REF the arguments are stack names "
        "(stacks: dev, prod-fra1, prod-iad1); to compare two plan files, leave out --base: gpucell "
        "diff BASE.json HEAD.json\n",
    )


def test_a_wrong_command_line_is_exit_2_as_documented(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["diff", "--base-code", "foo"])
    assert info.value.code == 2
    assert capsys.readouterr().err.endswith(
        "gpucell diff: error: argument --base-code: invalid choice: 'foo' (choose from 'ref', 'worktree')\n"
    )
    readme = " ".join((REPO / "README.md").read_text().split())
    doc = " ".join((REPO / "docs" / "reviewing-changes.md").read_text().split())
    assert "2 a change `pulumi up` refuses whatever is acknowledged" in readme
    assert "or a wrong command line (argparse's usage message)" in readme
    assert "or a wrong command line (argparse prints the usage)" in doc


# -- docs/reviewing-changes.md -------------------------------------------------------------------------------------
def sample_change(text: str) -> str:
    """The docs' sample: a container L40S host added (new pool), the first L40S pool switched to vm-passthrough,
    the tenant's GPU quota raised."""
    old_pool = "          gpuMode: container\n          hosts:\n          - {name: lab1-gpu-1, address: 10.20.0.21}\n"
    assert old_pool in text
    assert "gpus: {nvidia.com/gpu: 3}" in text
    new_pool = (
        "          gpuMode: vm-passthrough\n          hosts:\n"
        "          - {name: lab1-gpu-1, address: 10.20.0.21}\n"
        "        l40s-ct:\n          role: gpu\n          gpuModel: L40S\n          gpusPerNode: 4\n"
        "          gpuMode: container\n          hosts:\n          - {name: lab1-gpu-2, address: 10.20.0.22}\n"
    )
    return text.replace(old_pool, new_pool).replace(
        "gpus: {nvidia.com/gpu: 3}", "gpus: {nvidia.com/gpu: 4, nvidia.com/AD102GL_L40S: 2}"
    )


def test_the_docs_sample_comment_is_what_gpucell_diff_prints(tmp_path: Path, dev_json: dict[str, Any]) -> None:
    doc = (REPO / "docs" / "reviewing-changes.md").read_text()
    shown = doc.split("<!-- sample-comment -->\n````markdown\n", 1)[1].split("````\n<!-- /sample-comment -->", 1)[0]
    assert "`gpucell diff --base origin/main dev` posts:" in doc
    notes = ["base: stack files and code at `origin/main`"]  # what --base origin/main adds (gpucell.stacks.base_ref)
    head = plan_head(project(tmp_path, "head", sample_change), "dev", dev_json)  # after the base, as --base plans it
    assert shown == render([review(dev_json, head, notes=notes)])


def test_the_docs_table_lists_every_change_with_its_effect() -> None:
    from gpucell.day2.disruption import EFFECTS, Change

    doc = (REPO / "docs" / "reviewing-changes.md").read_text()
    for change in Change:
        effect = EFFECTS[change]
        assert f"| `{change.value}` |" in doc, change
        assert f"{effect[0].upper()}{effect[1:]}. |" in doc, change


def test_deleting_a_notebook_and_its_home_volume_exits_4(tmp_path: Path, dev_json: dict[str, Any]) -> None:
    """Issue 18: deleting data is disruptive, so the workflow labels the pull request."""

    def drop_notebook(text: str) -> str:
        block = (
            "          notebooks:\n            alice:\n              gpu: {count: 1}\n"
            "              cpuMillicores: 4000\n              memoryGib: 32\n              homeGib: 100\n"
        )
        assert block in text
        return text.replace(block, "")

    item = review(dev_json, plan_json(project(tmp_path, "head", drop_notebook)))
    assert [(c.change.value, c.subject, c.key) for c in item.disruptive] == [
        ("dataDeleted", "tenant-research/home-alice-0", "regions.lab1.tenants.research.notebooks.alice")
    ]
    assert exit_code([item]) == 4


def test_a_k3s_patch_upgrade_says_which_nodes_are_drained_and_which_gpu_vms_stop(tmp_path: Path) -> None:
    """Issue 18: on prod-fra1 a patch upgrade is no disruptive change, but every node is drained and the
    tenants' GPU VMs stop."""

    def upgrade(text: str) -> str:
        anchor, pin = "  gpucell:regions:\n    fra1:\n", "        k3s: v1.34.2+k3s1\n"
        assert anchor in text
        assert text.count(pin) == 1
        text = text.replace(pin, "        k3s: v1.34.3+k3s1\n")
        return text.replace(anchor, anchor + "      k3s: {installerSha256: '" + "0" * 64 + "'}\n")

    item = review(prod_json_of(tmp_path / "base"), prod_json_of(tmp_path / "head", upgrade))
    assert item.disruptive == []
    work = item.maintenance["fra1"]
    assert {"fra1-srv-1", "fra1-srv-2", "fra1-srv-3", "fra1-h100-1", "fra1-l4-1", "fra1-cpu-1"} <= set(work.drained)
    assert work.reconfigured == []
    assert set(work.gpu_vms["tenant-acme"]) == {"cad-01", "desk-01", "train-01"}
    text = render([item]).splitlines()
    assert any(
        line.startswith(f"- `fra1`: {len(work.drained)} node(s) cordoned and drained one by one") for line in text
    )
    assert any(
        line.startswith("  - GPU VMs of `tenant-acme` stopped while their node is in maintenance") for line in text
    )
    assert work.gpu_workers == {}  # fra1 has no tenant cluster
    # Issue 30: the tenant clusters' GPU workers on the H100 hosts are named too (globex's ml cluster, prod-iad1).

    def upgrade_iad1(text: str) -> str:
        return upgrade(text.replace("    iad1:\n", "    fra1:\n", 1)).replace("    fra1:\n", "    iad1:\n", 1)

    iad1 = review(
        prod_json_of(tmp_path / "iad1-base", stack="prod-iad1"),
        prod_json_of(tmp_path / "iad1-head", upgrade_iad1, stack="prod-iad1"),
    )
    assert iad1.maintenance["iad1"].gpu_workers == {"tenant-globex": ["ml/gpu"]}
    assert (
        "  - tenant-cluster GPU workers of `tenant-globex` on such a node replaced by Cluster API (each drained in its "
        "tenant cluster first, then recreated on another node): `ml/gpu`"
    ) in render([iad1]).splitlines()


def test_a_tenant_cluster_version_no_acknowledgement_allows_is_not_called_acknowledged(
    dev_json: dict[str, Any],
) -> None:
    def with_cluster(version: str) -> dict[str, Any]:
        plan = copy.deepcopy(dev_json)
        plan["outputs"]["lab1Fingerprint"]["tenantClusters"] = {
            "tenant-research/ml": {
                "owner": "tenants.research.tenantClusters.ml",
                "removalPolicy": "protect",
                "kubernetesVersion": version,
            }
        }
        return plan

    item = review(with_cluster("v1.34.1"), with_cluster("v1.36.0"))
    markdown = render([item])
    assert "**⚠️ 1 disruptive change(s)**, 1 refused whatever is acknowledged · " in markdown
    assert "all acknowledged" not in markdown
    assert "   - ⛔ No acknowledgement allows it: `pulumi up` refuses it.\n" in markdown
    assert exit_code([item]) == 2


def prod_json_of(folder: Path, edit: Any = None, region: str | None = None, stack: str = "prod-fra1") -> dict[str, Any]:
    """The plan JSON of ``stack``'s stack file (prod-fra1's by default), edited by ``edit(text) -> text``, in a project
    folder of its own."""
    folder.mkdir()
    shutil.copy(REPO / "Pulumi.yaml", folder)
    text = (REPO / f"Pulumi.{stack}.yaml").read_text()
    (folder / f"Pulumi.{stack}.yaml").write_text(edit(text) if edit else text)
    plan = make_plan(folder, stack, region=region)
    return to_json(plan, [region] if region else list(plan.cells), region_filter=region)


# -- folded values show what changed (issue 18) ------------------------------------------------------------------
RELEASE = "https://github.com/kubevirt/kubevirt/releases/download/{}/kubevirt-operator.yaml"


def test_a_long_url_shows_the_version_that_changed() -> None:
    base = plan(res("kubernetes:yaml/v2:ConfigFile", "lab-kubevirt-operator", {"file": RELEASE.format("v1.9.0")}))
    head = plan(res("kubernetes:yaml/v2:ConfigFile", "lab-kubevirt-operator", {"file": RELEASE.format("v1.9.1")}))
    text = render([review(base, head)])
    row = next(line for line in text.splitlines() if "manifest https://" in line)
    assert row.endswith(
        "| `file`: `…evirt/releases/download/v1.9.0/kubevirt-operator.yaml` → "
        "`…evirt/releases/download/v1.9.1/kubevirt-operator.yaml` |"
    )


def test_a_permitted_devices_change_lists_the_entries_added_and_removed() -> None:
    h100 = {
        "externalResourceProvider": True,
        "pciVendorSelector": "10DE:2330",
        "resourceName": "nvidia.com/GH100_H100_SXM5_80GB",
    }
    switch = {
        "externalResourceProvider": True,
        "pciVendorSelector": "10DE:22A3",
        "resourceName": "nvidia.com/GH100_H100_NVSWITCH",
    }
    l40s = {"pciVendorSelector": "10DE:26B9", "resourceName": "nvidia.com/NVIDIA_L40S-12Q"}
    h200 = {
        "externalResourceProvider": True,
        "pciVendorSelector": "10DE:2335",
        "resourceName": "nvidia.com/GH100_H200_SXM_141GB",
    }

    def kubevirt(devices: list[dict[str, Any]]) -> dict[str, Any]:
        spec = {"configuration": {"permittedHostDevices": {"pciHostDevices": devices}}}
        return k8s("kubevirt.io/v1", "KubeVirt", spec, "kubernetes:kubevirt.io/v1:KubeVirt")

    base, head = plan(kubevirt([h100, switch, l40s])), plan(kubevirt([l40s, h200]))
    changed = only(base, head)
    line = next(c for c in render([review(base, head)]).splitlines() if "pciHostDevices" in c)
    assert changed.changes[0].path == "spec.configuration.permittedHostDevices.pciHostDevices"
    assert (
        "`spec.configuration.permittedHostDevices.pciHostDevices`: 2 entries removed, 1 added: removed "
        '`{"externalResourceProvider": true, "pciVendorSelector": "10DE:2330", "resourceName": '
        '"nvidia.com/GH100_H100_SXM5_80GB"}`; removed `{"externalResourceProvider": true, "pciVendorSelector": '
        '"10DE:22A3", "resourceName": "nvidia.com/GH100_H100_NVSWITCH"}`; added `{"externalResourceProvider": true, '
        '"pciVendorSelector": "10DE:2335", "resourceName": "nvidia.com/GH100_H200_SXM_141GB"}`'
    ) in line
    assert "chars)" not in line


def test_focus_keeps_short_values_whole_and_cuts_long_ones_around_the_change() -> None:
    assert focus("container", "vm-passthrough") == ("container", "vm-passthrough")
    old = "a" * 50 + "/pool-alpha/" + "b" * 50
    new = "a" * 50 + "/pool-beta/" + "b" * 50
    assert focus(old, new) == (
        "…" + "a" * 23 + "/pool-alpha/" + "b" * 23 + "…",
        "…" + "a" * 23 + "/pool-beta/" + "b" * 23 + "…",
    )


def test_a_forgotten_host_is_not_said_to_be_drained(tmp_path: Path) -> None:
    """Marking a dead server forget changes its steps to do nothing: the review says so, not "drained"."""

    def forget(text: str) -> str:
        host = "- {name: fra1-srv-1, address: 10.110.0.11}"
        assert text.count(host) == 1
        return text.replace(host, "- {name: fra1-srv-1, address: 10.110.0.11, removalPolicy: forget}")

    item = review(prod_json_of(tmp_path / "base", region="fra1"), prod_json_of(tmp_path / "head", forget, "fra1"))
    work = item.maintenance["fra1"]
    assert (work.forgotten, work.drained, work.reconfigured) == (["fra1-srv-1"], [], [])
    assert (
        "- `fra1`: `removalPolicy: forget` on `fra1-srv-1`: nothing runs on it over SSH any more (its steps do "
        "nothing); remove it from the config next to delete its Node"
    ) in render([item]).splitlines()
