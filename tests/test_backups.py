"""Backups: Velero with KubeVirt's plugin, CSI snapshots of Longhorn volumes, per-tenant Schedules, the cell's
secrets, protection, the rendered Restore, the chart check, bad input and day 2."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucell.admission.tenants import ClusterFacts
from gpucell.cluster import Cluster
from gpucell.components.backups import bucket_credentials_file, restore_manifest, schedule_manifest
from gpucell.components.csi_snapshots import controller_deployment, controller_rbac, crd_url, snapshot_class
from gpucell.engine.mock_engine import PlanResult, run_program
from gpucell.errors import ConfigError
from gpucell.platform import Platform
from gpucell.spec import CellSpec, StackSpec
from gpucell.spec.backups import TenantBackupSpec
from gpucell.spec.tenancy import TenantGroups, TenantSpec
from gpucell.stacks import cli
from gpucell.stacks.conformance.charts import render_releases, velero_facts
from gpucell.stacks.conformance.helm_values import values_problems
from gpucell.stacks.conformance.run import check_region
from gpucell.stacks.plan_diff import diff_plans
from gpucell.stacks.program import build_cells
from gpucell.tenancy.tenant import Tenant, TenantArgs, rbac_manifests
from gpucell.testing import provider_outputs
from tests.conftest import (
    REPO,
    SECURITY,
    STORE,
    UPSTREAM,
    minimal_cell_config,
    plan_document,
    region_refusals,
    violations,
)
from tests.test_gpu_models import H800

BUCKET_KEY_ID = "AKIA-BACKUP-SENTINEL"
BUCKET_SECRET = "BUCKET-SECRET-SENTINEL-7d21"
PASSWORD = "REPOSITORY-PASSWORD-SENTINEL-0c9e"
RELEASE = "kubernetes:helm.sh/v3:Release"


def lab_region() -> dict[str, Any]:
    """A small Longhorn region with backups, tenant acme (a VM, backed up nightly) and globex (no backup)."""
    region = minimal_cell_config()
    region["storage"] = {"backend": "longhorn", "replicas": 1}
    region["backups"] = {
        "storage": {
            "endpoint": "https://s3.lab.example",
            "bucket": "lab-backups",
            "region": "eu-central-1",
            "prefix": "lab",
            "forcePathStyle": True,
            "credentialsConfigKey": "backupS3Lab",
        },
        "repositoryPasswordConfigKey": "backupRepoLab",
        "volumeTimeoutHours": 12,
    }
    quota = {"cpuMillicores": 64000, "memoryGib": 256, "storageGib": 1000}
    vm = {
        "memoryGib": 8,
        "rootDisk": {"source": {"registry": "docker://quay.io/containerdisks/ubuntu:24.04"}, "sizeGib": 20},
        "noLogin": True,
    }
    region["tenants"] = {
        "acme": {
            "egress": "internet",
            "quota": quota,
            "backup": {"schedule": "0 2 * * *", "retentionDays": 14},
            "virtualMachines": {"vm1": vm},
        },
        "globex": {"egress": "internet", "quota": quota},
    }
    return region


def deploy(region: dict[str, Any] | None = None) -> PlanResult:
    """The program for one region ``lab`` with the backup secrets set (as `pulumi up` hands them over)."""
    region = region if region is not None else lab_region()
    config = {"gpucell:regions": {"lab": region}, "gpucell:sshPrivateKey": "key"}
    if "backups" in region:
        config.update({"gpucell:backupS3Lab": f"{BUCKET_KEY_ID}:{BUCKET_SECRET}", "gpucell:backupRepoLab": PASSWORD})
    secrets = [key for key in config if key != "gpucell:regions"]
    return run_program(build_cells, config=config, secret_keys=secrets, computed=provider_outputs())


@pytest.fixture(scope="module")
def plan() -> PlanResult:
    return deploy()


# -- what is registered ------------------------------------------------------------------------------------------
def test_velero_namespace_is_baseline_and_protected(plan: PlanResult) -> None:
    namespace = plan.named("lab-backups-namespace")
    assert namespace.inputs["metadata"] == {
        "name": "velero",
        "labels": {
            "app.kubernetes.io/managed-by": "gpucell",
            "pod-security.kubernetes.io/enforce": "baseline",
            "pod-security.kubernetes.io/audit": "baseline",
            "pod-security.kubernetes.io/warn": "baseline",
        },
    }
    assert namespace.options == {"protect": True}
    assert plan.named("lab-backups").parent == plan.named("lab").urn


def test_release_values_are_the_cells_bucket_plugins_and_timeouts(plan: PlanResult) -> None:
    release = plan.named("lab-backups-velero")
    assert (release.inputs["chart"], release.inputs["version"], release.inputs["namespace"]) == (
        "velero",
        "12.1.0",
        "velero",
    )
    assert release.inputs["repositoryOpts"] == {"repo": "https://vmware-tanzu.github.io/helm-charts"}
    assert release.options == {"protect": True}
    values = release.inputs["values"]
    assert values["configuration"] == {
        "backupStorageLocation": [
            {
                "name": "default",
                "provider": "aws",
                "bucket": "lab-backups",
                "default": True,
                "accessMode": "ReadWrite",
                "config": {"region": "eu-central-1", "s3Url": "https://s3.lab.example", "s3ForcePathStyle": "true"},
                "prefix": "lab",
            }
        ],
        "features": "EnableCSI",
        "dataMoverPrepareTimeout": "12h",
        "defaultItemOperationTimeout": "12h",
    }
    assert values["credentials"] == {"useSecret": True, "existingSecret": "velero-bucket-credentials"}
    assert [c["image"] for c in values["initContainers"]] == [
        "velero/velero-plugin-for-aws:v1.14.2",
        "quay.io/kubevirt/kubevirt-velero-plugin:v0.9.0",
    ]
    assert (values["deployNodeAgent"], values["nodeAgent"], values["snapshotsEnabled"]) == (
        True,
        {"disableHostPath": True},
        False,
    )
    assert (values["upgradeCRDs"], values["cleanUpCRDs"]) == (True, False)
    after = (
        "lab-backups-namespace",
        "lab-backups-bucket",
        "lab-backups-repository",
        "lab-csi-snapshots-longhorn-class",
    )
    for name in after:
        assert plan.named(name).urn in release.dependencies, name
    assert {r.urn for r in plan.descendants(plan.named("lab-kubevirt"))} <= set(release.dependencies)


def test_values_are_values_of_the_pinned_chart(plan: PlanResult) -> None:
    values = plan.named("lab-backups-velero").inputs["values"]
    assert values_problems(STORE, "velero", "12.1.0", values) == []


def test_secrets_are_pulumi_secrets_and_never_shown(plan: PlanResult) -> None:
    bucket = plan.named("lab-backups-bucket")
    assert bucket.inputs["metadata"]["name"] == "velero-bucket-credentials"
    assert bucket.inputs["stringData"] == "[secret]"
    assert bucket.raw_inputs["stringData"] == {
        "cloud": f"[default]\naws_access_key_id={BUCKET_KEY_ID}\naws_secret_access_key={BUCKET_SECRET}\n"
    }
    assert "protect" not in bucket.options  # rotated credentials replace it; the backups do not depend on it
    repository = plan.named("lab-backups-repository")
    assert repository.inputs["metadata"]["name"] == "velero-repo-credentials"
    assert repository.raw_inputs["stringData"] == {"repository-password": PASSWORD}
    assert repository.options["protect"] is True  # a new password would orphan every backup
    for registration in plan.resources:
        shown = json.dumps(registration.inputs)
        assert not any(s in shown for s in (BUCKET_KEY_ID, BUCKET_SECRET, PASSWORD)), registration.name


def test_a_schedule_per_tenant_with_a_backup_keeps_its_backups_when_removed(plan: PlanResult) -> None:
    schedules = [r for r in plan.resources if r.type == "kubernetes:velero.io/v1:Schedule"]
    assert [s.name for s in schedules] == ["lab-backups-schedule-acme"]
    (schedule,) = schedules
    assert {k: schedule.inputs[k] for k in ("metadata", "spec")} == {
        "metadata": {
            "name": "tenant-acme",
            "namespace": "velero",
            "labels": {"app.kubernetes.io/managed-by": "gpucell", "gpucell.io/tenant": "acme"},
        },
        "spec": {
            "schedule": "0 2 * * *",
            "paused": False,
            "useOwnerReferencesInBackup": False,
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/managed-by": "gpucell", "gpucell.io/tenant": "acme"}},
                "includedNamespaces": ["tenant-acme"],
                "storageLocation": "default",
                "ttl": "336h0m0s",
                "snapshotMoveData": True,
                "defaultVolumesToFsBackup": False,
                "itemOperationTimeout": "12h0m0s",
            },
        },
    }
    assert plan.named("lab-backups-velero").urn in schedule.dependencies
    assert schedule.options == {}
    assert violations(schedule.masked_inputs()) == []


def test_csi_snapshot_crds_controller_and_longhorn_class(plan: PlanResult) -> None:
    crds = [r for r in plan.resources if r.name.startswith("lab-csi-snapshots-crd-")]
    assert [(r.inputs["file"], r.options) for r in crds] == [
        (
            "https://raw.githubusercontent.com/kubernetes-csi/external-snapshotter/v8.6.0/client/config/crd/"
            f"snapshot.storage.k8s.io_{plural}.yaml",
            {"retainOnDelete": True},
        )
        for plural in ("volumesnapshotclasses", "volumesnapshotcontents", "volumesnapshots")
    ]
    assert crd_url("8.6.0", "volumesnapshots") == crds[2].inputs["file"]
    controller = plan.named("lab-csi-snapshots-controller")
    container = controller.inputs["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.k8s.io/sig-storage/snapshot-controller:v8.6.0"
    assert container["args"] == ["--leader-election=true", "--http-endpoint=:8080"]
    assert controller.inputs["metadata"]["namespace"] == "kube-system"
    assert {c.urn for c in crds} <= set(controller.dependencies)
    snapshot_class_ = plan.named("lab-csi-snapshots-longhorn-class")
    assert snapshot_class_.type == "kubernetes:snapshot.storage.k8s.io/v1:VolumeSnapshotClass"
    assert {k: snapshot_class_.inputs[k] for k in ("driver", "deletionPolicy", "parameters")} == {
        "driver": "driver.longhorn.io",
        "deletionPolicy": "Delete",
        "parameters": {"type": "snap"},
    }
    assert snapshot_class_.inputs["metadata"]["labels"]["velero.io/csi-volumesnapshot-class"] == "true"
    assert plan.named("lab-storage-longhorn").urn in snapshot_class_.dependencies
    for obj in [*controller_rbac(), controller_deployment("v8.6.0"), snapshot_class()]:
        assert violations(obj) == [], obj["kind"]


def test_objects_pass_the_schema_checks_and_checkov(plan: PlanResult, checkov: str) -> None:
    ours = [
        *plan.descendants(plan.named("lab-backups")),
        *plan.descendants(plan.named("lab-csi-snapshots")),
    ]
    cell = CellSpec.model_validate(lab_region())
    report = check_region("lab", ours, cell, STORE, checkers=("kubernetes", "custom-resource"))
    assert [str(p) for p in report.problems] == []
    report = check_region("lab", ours, cell, STORE, checkers=SECURITY)
    assert [str(p) for p in report.problems] == []
    assert report.checkov_skipped == 3  # the snapshot-controller's digest, token and NetworkPolicy skips


def test_the_chart_renders_the_facts_gpucell_relies_on(plan: PlanResult, helm: str) -> None:
    release = plan.named("lab-backups-velero")
    (rendered,) = render_releases([(release.masked_inputs(), "v1.34.2")], UPSTREAM)
    assert rendered.error is None
    cell = CellSpec.model_validate(lab_region())
    assert velero_facts(list(rendered.objects), release.inputs["values"], cell) == []
    kinds = {o["kind"] for o in rendered.objects}
    assert {"BackupStorageLocation", "DaemonSet", "Deployment", "CustomResourceDefinition"} <= kinds
    assert "VolumeSnapshotLocation" not in kinds
    assert not any(o.get("metadata", {}).get("name") == "velero-cleanup-crds" for o in rendered.objects)


def test_tenants_get_no_role_on_velero_objects() -> None:
    cell = CellSpec.model_validate(lab_region())
    groups = TenantGroups(admins=["a"], members=["m"], viewers=["v"])
    spec = cell.tenants["acme"].model_copy(update={"groups": groups})
    rules = [rule for obj in rbac_manifests("acme", spec) for rule in obj.get("rules", [])]
    assert rules  # the tenant roles
    assert not any("velero.io" in rule["apiGroups"] or "*" in rule["apiGroups"] for rule in rules)
    # the tenants' RoleBindings are in their own namespace; Velero's objects are in "velero"
    assert all(obj["metadata"]["namespace"] == "tenant-acme" for obj in rbac_manifests("acme", spec))


# -- the Restore -------------------------------------------------------------------------------------------------
def test_restore_manifest_fits_velero_s_crd() -> None:
    whole = restore_manifest("acme", "tenant-acme-20261201020000")
    assert whole == {
        "apiVersion": "velero.io/v1",
        "kind": "Restore",
        "metadata": {
            "name": "tenant-acme-20261201020000-restore",
            "namespace": "velero",
            "labels": {"app.kubernetes.io/managed-by": "gpucell", "gpucell.io/tenant": "acme"},
        },
        "spec": {
            "backupName": "tenant-acme-20261201020000",
            "includedNamespaces": ["tenant-acme"],
            "restorePVs": True,
            "existingResourcePolicy": "none",
            "itemOperationTimeout": "24h0m0s",
        },
    }
    one = restore_manifest("acme", "b1", workload="vm1", run_strategy="Halted", name="vm1-back")
    assert one["metadata"]["labels"]["velero.kubevirt.io/restore-run-strategy"] == "Halted"
    assert one["spec"]["labelSelector"] == {"matchLabels": {"app.kubernetes.io/name": "vm1"}}
    for obj in (whole, one):
        assert violations(obj) == []


def test_gpucell_restore_prints_a_restore_of_the_prod_stack(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["restore", "prod-fra1", "--region", "fra1", "--tenant", "acme", "--backup", "tenant-acme-20261201020000"]
    assert cli.main([*argv, "--workload", "train-01", "--project-dir", str(REPO)]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed == restore_manifest("acme", "tenant-acme-20261201020000", workload="train-01")
    assert violations(printed) == []


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--tenant", "globex"], "--tenant: globex has no backup in fra1 (tenants.globex.backup)"),
        (["--tenant", "nobody"], "--tenant: 'nobody' is not a tenant of fra1: acme, globex"),
        (
            ["--workload", "nope"],
            "--workload: 'nope' is not a workload of tenant acme: train-01, desk-01, cad-01, "
            "nb-alice, nb-carol, llama-8b, qwen-small, llama-70b",
        ),
        (["--run-strategy", "Off"], "--run-strategy: 'Off' is not one of Always, RerunOnFailure, Manual, Halted, Once"),
        (["--name", "Bad_Name"], "--name: 'Bad_Name' is not an object name (a DNS-1123 name, at most 63)"),
    ],
)
def test_gpucell_restore_refuses_what_it_cannot_restore_in_one_line(
    args: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["restore", "prod-fra1", "--region", "fra1", "--tenant", "acme", "--backup", "tenant-acme-1"]
    assert cli.main([*base, *args, "--project-dir", str(REPO)]) == 2
    assert capsys.readouterr().err.splitlines() == [line]


# -- bad input: one line each ------------------------------------------------------------------------------------
R = "regions.fra1"
"""The key path of the region the refusals are for (docs/workloads.md shows them for prod's fra1)."""


def _tainted(region: dict[str, Any]) -> None:
    for name, pool in region["nodePools"].items():
        if name != "servers":
            pool["taints"] = ["dedicated=x:NoSchedule"]


def _nfs(region: dict[str, Any]) -> None:
    region["storage"]["otherClasses"] = ["nfs"]
    region["tenants"]["acme"]["virtualMachines"]["vm1"]["rootDisk"]["storageClass"] = "nfs"


@pytest.mark.parametrize(
    ("change", "line"),
    [
        (
            lambda r: r["backups"]["storage"].pop("credentialsConfigKey"),
            f"{R}.backups.storage.credentialsConfigKey: is required: name a secret config key holding the bucket's "
            "'<access key id>:<secret access key>' (pulumi config set --secret <key> -- 'AKIA...:...')",
        ),
        (
            lambda r: r["backups"].pop("repositoryPasswordConfigKey"),
            f"{R}.backups.repositoryPasswordConfigKey: is required: name a secret config key holding the password that "
            'encrypts the backed-up volumes (pulumi config set --secret <key> -- "$(openssl rand -base64 32)"); '
            "Velero's default is the same static password in every cluster",
        ),
        (
            lambda r: r.pop("backups"),
            f"{R}.tenants.acme.backup: needs the cell's backups (the bucket and its secrets); add a backups "
            "section, or "
            "remove it",
        ),
        (
            lambda r: r.pop("storage"),
            f"{R}.backups: needs storage.backend longhorn: volumes are backed up through CSI snapshots, which "
            "local-path cannot take",
        ),
        (
            lambda r: r["tenants"]["acme"]["backup"].update(schedule="daily"),
            f"{R}.tenants.acme.backup.schedule: 'daily' is not a five-field cron schedule such as '0 */6 * * *' "
            "(minute "
            "hour day month weekday)",
        ),
        (
            lambda r: r["tenants"]["acme"]["backup"].update(schedule="0 24 * * *"),
            f"{R}.tenants.acme.backup.schedule: '0 24 * * *' has '24' in its hour field, which takes 0-23 (a range as "
            "low-high)",
        ),
        (
            lambda r: r["tenants"]["acme"]["backup"].update(retentionDays=0),
            f"{R}.tenants.acme.backup.retentionDays: 0 is invalid: Input should be greater than or equal to 1",
        ),
        (
            lambda r: r["backups"]["storage"].update(endpoint="http://minio.lab:9000"),
            f"{R}.backups.storage.endpoint: 'http://minio.lab:9000' is not an https:// URL with a host (backups hold "
            "tenants' disks and Secrets: they travel over TLS)",
        ),
        (
            lambda r: r["backups"].update(values={"cleanUpCRDs": True}),
            f"{R}.backups.values.cleanUpCRDs: is fixed by gpucell: its pre-delete job deletes every Backup, "
            "Restore and "
            "BackupStorageLocation; remove it",
        ),
        (
            lambda r: r["backups"].update(values={"schedules": {"x": {}}}),
            f"{R}.backups.values.schedules: is set by gpucell from tenants.<tenant>.backup; set "
            "tenants.<tenant>.backup "
            "instead",
        ),
        (
            lambda r: r["backups"]["storage"].update(disableChecksum=True),
            f"{R}.backups.storage.disableChecksum: true with versions.veleroPluginForAws v1.14.2 breaks the "
            "bucket: that "
            "release still checksums the uploads and v1.14.2 writes the checksum envelope into every object "
            "(velero-io/velero#9804, #9951); pin a v1.14 release with velero-io/velero-plugin-for-aws#313, or leave "
            "disableChecksum off",
        ),
        (
            lambda r: r.update(versions={"kubevirtVeleroPlugin": "v0.8.1"}),
            f"{R}.versions.kubevirtVeleroPlugin: 'v0.8.1' is not tested with Velero v1.18.1 (chart 12.1.0); the "
            "kubevirt-velero-plugin README pairs it with v0.9.x",
        ),
        (
            lambda r: r.update(versions={"velero": "12.2.0"}),
            f"{R}.versions.velero: '12.2.0' is a Velero chart gpucell does not know the Velero release of (it knows "
            "12.1.0 = Velero v1.18.1); pin one of those, or add the chart to gpucell.spec.backups.VELERO_CHARTS "
            "with the plugin lines its release is tested with",
        ),
        (
            lambda r: r["backups"].update(repositoryPasswordConfigKey="backupS3Lab"),
            f"{R}.backups.repositoryPasswordConfigKey: 'backupS3Lab' is already "
            "backups.storage.credentialsConfigKey; the "
            "repository password is a secret of its own",
        ),
        (
            _tainted,
            f"{R}.backups: needs a node pool without taints: Velero's data mover pods carry no tolerations and would "
            "never be scheduled; leave one cpu or gpu pool untainted",
        ),
        (
            _nfs,
            f"{R}.tenants.acme.virtualMachines.vm1.rootDisk.storageClass: 'nfs' cannot be snapshotted by the cell's "
            "backups (only longhorn volumes are); the tenant has a backup: move the volume to longhorn, or back it "
            "up outside gpucell",
        ),
    ],
)
def test_bad_backup_config_is_one_line(change: Any, line: str) -> None:
    region = lab_region()
    change(region)
    assert region_refusals(region) == [line]


def test_two_regions_never_share_a_bucket_prefix() -> None:
    lab = lab_region()
    other = copy.deepcopy(lab)
    for pool in other["nodePools"].values():
        for host in pool["hosts"]:
            host["address"] = host["address"].replace("10.20.0.", "10.30.0.")
            host["name"] = f"o-{host['name']}"
    other["network"] = {"nodeCidr": "10.30.0.0/24"}
    other["backups"]["storage"]["prefix"] = "lab/"
    with pytest.raises(ConfigError) as exc:
        StackSpec.model_validate({"regions": {"lab": lab, "other": other}})
    assert exc.value.lines == [
        "regions.other.backups.storage.prefix: 'lab/' in bucket lab-backups is where region lab keeps its backups: "
        "each region's Velero would import and expire the other's; give each region its own prefix (e.g. the "
        "region's name)"
    ]
    other["backups"]["storage"]["prefix"] = "other"
    assert StackSpec.model_validate({"regions": {"lab": lab, "other": other}}).regions["other"].backups is not None


def test_the_backup_secrets_are_the_cells_no_tenant_names_them() -> None:
    region = lab_region()
    region["tenants"]["acme"]["modelEndpoints"] = {
        "e": {"modelFormat": "sklearn", "storageUri": "s3://b/m", "credentialsConfigKey": "backupS3Lab"}
    }
    with pytest.raises(ConfigError) as exc:
        StackSpec.model_validate({"regions": {"lab": region}})
    assert exc.value.lines == [
        "regions.lab.tenants.acme.modelEndpoints.e.credentialsConfigKey: 'backupS3Lab' is a secret of the cell "
        "(regions.lab.backups.storage.credentialsConfigKey names it), which the tenant's namespace would then hold; "
        "name a secret of tenant acme that holds only this endpoint's storage credentials"
    ]


def test_cell_secrets_list_both_backup_keys() -> None:
    owned = StackSpec.model_validate({"regions": {"lab": lab_region()}}).cell_secrets()
    assert owned["backupS3Lab"] == "regions.lab.backups.storage.credentialsConfigKey"
    assert owned["backupRepoLab"] == "regions.lab.backups.repositoryPasswordConfigKey"


@pytest.mark.parametrize(
    ("config", "line"),
    [
        (
            {"gpucell:backupS3Lab": "no-colon"},
            "backupS3Lab: is not '<access key id>:<secret access key>' (regions.lab.backups.storage."
            "credentialsConfigKey names it; the value is not shown); set it with `pulumi config set --secret "
            "backupS3Lab -- '<access key id>:<secret access key>'`",
        ),
        (
            {"gpucell:backupRepoLab": "short"},
            "backupRepoLab: is not a password of at least 16 characters (regions.lab.backups."
            "repositoryPasswordConfigKey names it; the value is not shown); set it with `pulumi config set --secret "
            'backupRepoLab -- "$(openssl rand -base64 32)"`',
        ),
        (
            {"gpucell:backupRepoLab": None},
            "backupRepoLab: secret is missing (regions.lab.backups.repositoryPasswordConfigKey names it); set it with "
            '`pulumi config set --secret backupRepoLab -- "$(openssl rand -base64 32)"`',
        ),
    ],
)
def test_backup_secrets_are_checked_before_anything_is_registered(config: dict[str, Any], line: str) -> None:
    stack = {
        "gpucell:regions": {"lab": lab_region()},
        "gpucell:sshPrivateKey": "key",
        "gpucell:backupS3Lab": f"{BUCKET_KEY_ID}:{BUCKET_SECRET}",
        "gpucell:backupRepoLab": PASSWORD,
    }
    stack.update(config)
    stack = {k: v for k, v in stack.items() if v is not None}
    secrets = [k for k in stack if k != "gpucell:regions"]
    with pytest.raises(ConfigError) as exc:
        run_program(build_cells, config=stack, secret_keys=secrets, computed=provider_outputs())
    assert exc.value.lines == [line]
    assert not any(s in line for s in ("no-colon", "short"))


def test_backups_args_from_a_cell_without_backups_is_a_value_error() -> None:
    from gpucell.cluster import Cluster
    from gpucell.components.backups import BackupCredentials, BackupsArgs

    cell = CellSpec.model_validate(minimal_cell_config())
    cluster = Cluster.__new__(Cluster)  # from_cell refuses before it uses the handle
    with pytest.raises(ValueError, match=r"^the cell has no backups section: Backups needs one$"):
        BackupsArgs.from_cell(cell, cluster, BackupCredentials("a:b", "p" * 16))


def test_bucket_credentials_file_never_shows_the_value() -> None:
    assert bucket_credentials_file("id:se:cret") == "[default]\naws_access_key_id=id\naws_secret_access_key=se:cret\n"
    with pytest.raises(
        ValueError, match=r"^backups.storage credentials must be '<access key id>:<secret access key>'$"
    ):
        bucket_credentials_file("SENTINEL-without-colon")


# -- day 2 -------------------------------------------------------------------------------------------------------
def _diff(before: PlanResult, region: dict[str, Any]) -> list[Any]:
    return diff_plans(plan_document(before), plan_document(deploy(region))).regions["lab"]


def test_a_new_schedule_and_retention_update_the_schedule_in_place(plan: PlanResult) -> None:
    region = lab_region()
    region["tenants"]["acme"]["backup"] = {"schedule": "30 1 * * 0", "retentionDays": 60}
    (found,) = _diff(plan, region)
    assert (found.action, found.label) == ("update", "Schedule velero/tenant-acme")
    assert [c.path for c in found.changes] == ["spec.schedule", "spec.template.ttl"]
    assert found.notes == [
        "applies to backups taken from now on; existing backups keep their expiry",
        "the next backup follows the new schedule; existing backups are kept",
    ]


def test_removing_a_tenants_backup_deletes_only_its_schedule(plan: PlanResult) -> None:
    region = lab_region()
    del region["tenants"]["acme"]["backup"]
    (found,) = _diff(plan, region)
    assert (found.action, found.label, found.protected) == ("delete", "Schedule velero/tenant-acme", False)
    assert (
        schedule_manifest("acme", TenantBackupSpec(schedule="0 2 * * *"), 24)["spec"]["useOwnerReferencesInBackup"]
        is False
    )


def test_removing_backups_is_stopped_by_protection(plan: PlanResult) -> None:
    region = lab_region()
    del region["backups"], region["tenants"]["acme"]["backup"]
    deleted = {d.label: d.protected for d in _diff(plan, region) if d.action == "delete"}
    assert deleted["Namespace velero"] is True
    assert deleted["Helm release velero (velero)"] is True
    assert deleted["Secret velero/velero-repo-credentials"] is True
    assert deleted["Schedule velero/tenant-acme"] is False


def test_a_tenant_with_backup_that_no_backups_component_schedules_is_refused() -> None:
    """On a cluster gpucell did not build (a Tenant with ClusterFacts and a Platform without Backups), a tenant's
    ``backup`` was accepted and nothing rendered its Schedule: the tenant had no backups and no one said so."""
    facts = ClusterFacts.model_validate(
        {"network": {"nodeCidr": "10.0.0.0/16", "podCidr": "10.244.0.0/16", "serviceCidr": "172.20.0.0/16",
                     "clusterDns": "172.20.0.10", "apiPort": 443}}
    )  # fmt: skip
    spec = TenantSpec.model_validate(
        {
            "groups": {"admins": ["ml-admins"]},
            "quota": {"cpuMillicores": 4000, "memoryGib": 16, "storageGib": 100},
            "backup": {"schedule": "0 2 * * *"},
        }
    )
    refused: list[str] = []

    def program() -> None:
        cluster = Cluster.from_kubeconfig("eks", "apiVersion: v1\nkind: Config\n", "1.34")
        try:
            Tenant("ml", TenantArgs("ml", spec, cluster, facts, Platform()))
        except ConfigError as exc:
            refused.extend(exc.lines)

    result = run_program(program)
    assert refused == [
        "tenants.ml.backup: no Backups component of this cluster schedules it (Platform.backups is None), so the "
        "tenant would have no backups; pass Backups(..., BackupsArgs(tenants={...})) holding it as "
        "Platform(backups=...), or drop backup"
    ]
    assert not [r for r in result.resources if r.type.startswith("kubernetes:") and r.name.startswith("ml")]


def test_gpucell_restore_reads_the_stacks_own_gpu_models(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 30: a stack whose pools name a model of its own (gpucell:gpuModels) could not render a Restore."""
    config = yaml.safe_load((REPO / "Pulumi.prod-fra1.yaml").read_text())
    config["config"]["gpucell:gpuModels"] = {"H800-PCIe-80GB": H800}
    config["config"]["gpucell:regions"]["fra1"]["nodePools"]["h800"] = {
        "role": "gpu",
        "gpuModel": "H800-PCIe-80GB",
        "gpusPerNode": 2,
        "gpuMode": "container",
        "hosts": [{"name": "fra1-h800-1", "address": "10.110.0.91"}],
    }
    (tmp_path / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text())
    (tmp_path / "Pulumi.own.yaml").write_text(yaml.safe_dump(config))
    argv = ["restore", "own", "--region", "fra1", "--tenant", "acme", "--backup", "tenant-acme-20261201020000"]
    assert cli.main([*argv, "--project-dir", str(tmp_path)]) == 0, capsys.readouterr().err
    assert yaml.safe_load(capsys.readouterr().out) == restore_manifest("acme", "tenant-acme-20261201020000")
