"""The VM platform of issue 22: a VM's own cloud-init merged with gpucell's, instancetypes and preferences (the cell's,
a tenant's, KubeVirt's common ones), image catalogs, blank disks, import credentials, virtio-rng, EFI and TPM; the
exact lines bad input gets, what is rendered, and what the checks and the diff say about it."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any, cast

import pulumi
import pytest
import yaml
from pulumi.runtime.mocks import MockResourceArgs

from gpucell.admission.tenants import ClusterFacts
from gpucell.admission.vm_shape import resolve_vm
from gpucell.catalog.common_instancetypes import CommonPreference, common_instancetypes, common_preferences
from gpucell.cell import RegionalCell, RegionalCellArgs
from gpucell.components.cdi import storage_profile_spec
from gpucell.components.images import ImageCatalogArgs, catalog_objects, clone_rbac
from gpucell.components.instancetypes import InstancetypesArgs, instancetype_manifest, preference_manifest
from gpucell.components.kubevirt import VM_PERSISTENT_STATE_GATE, feature_gates, kubevirt_spec
from gpucell.day2.disruption import Change, compare, fingerprint
from gpucell.engine.mock_engine import SECRET, PlanResult, run_program
from gpucell.errors import ConfigError
from gpucell.spec import CellSpec, StackSpec
from gpucell.spec.cloud_init import (
    PLAN_STAND_IN_PREFIX,
    GpucellUserData,
    UserDataError,
    merge_user_data,
    parse_cloud_config,
    secret_user_data,
)
from gpucell.spec.instancetypes import InstancetypeSpec, PreferenceSpec
from gpucell.spec.workloads import GpuVirtualMachineSpec
from gpucell.stacks.conformance.admission import admission_violations
from gpucell.stacks.conformance.cloud_init import CLOUD_CONFIG_SCHEMA, NETWORK_CONFIG_SCHEMAS, cloud_init_report
from gpucell.stacks.conformance.run import check_region
from gpucell.stacks.conformance.schemas import UPSTREAM_FILES, SchemaStore
from gpucell.stacks.plan import PLACEHOLDER_PREFIX, render_capacity
from gpucell.stacks.plan_diff import diff_plans
from gpucell.tenancy._common import vm_placement
from gpucell.tenancy.tenant import Tenant, TenantArgs, image_clone_policy, namespace_labels
from gpucell.workloads import GpuVirtualMachine, GpuVirtualMachineArgs
from gpucell.workloads.virtual_machine import cloud_config, cloud_init_data, virtual_machine_manifest
from tests.conftest import SCHEMA_CHECKERS, UPSTREAM, minimal_cell_config, prod_regions

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGpucell alice@example.net"
UBUNTU = "docker://quay.io/containerdisks/ubuntu:24.04"
VM_BASE: str = (
    "regions.lab.tenants.acme.virtualMachines.vm"  # annotated: docs/workloads.md shows these lines for any VM
)
KUBECONFIG = "apiVersion: v1\nclusters:\n- cluster:\n    server: https://127.0.0.1:6443\n  name: d\n"
CA = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQx\n-----END CERTIFICATE-----\n"


def region(vm: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """The minimal region with an L40S vGPU pool, a catalog ``os-images`` (one registry image), tenants acme and
    globex, and ``vm`` (a VM spec in config form) as acme's VM ``vm``; ``extra`` keys are merged into the region."""
    config = minimal_cell_config()
    config["nodePools"]["l40s-vgpu"] = {
        "role": "gpu",
        "gpuModel": "L40S",
        "gpusPerNode": 2,
        "gpuMode": "vm-vgpu",
        "vgpuProfile": "L40S-24Q",
        "hosts": [{"name": "l40s-v-1", "address": "10.20.0.61"}],
    }
    config["gpuOperator"] = {"vgpuDriverImage": {"repository": "registry.example.com/nvidia", "version": "580.95.02"}}
    config["imageCatalogs"] = {
        "os-images": {"images": {"ubuntu-2404": {"source": {"registry": UBUNTU}, "sizeGib": 20}}}
    }
    quota = {"cpuMillicores": 64000, "memoryGib": 256, "storageGib": 2000, "gpus": {"nvidia.com/NVIDIA_L40S-24Q": 2}}
    tenants: dict[str, Any] = {"acme": {"quota": quota, "egress": "internet"}, "globex": {"quota": quota}}
    if vm is not None:
        tenants["acme"]["virtualMachines"] = {"vm": vm}
    config["tenants"] = tenants
    for key, value in extra.items():
        config[key] = value if not isinstance(value, dict) else {**config.get(key, {}), **value}
    return config


def vm(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"memoryGib": 8, "rootDisk": {"source": {"image": "os-images/ubuntu-2404"}, "sizeGib": 30}}
    base["sshKeys"] = [KEY]
    return {**base, **fields}


def problems(config: dict[str, Any]) -> list[str]:
    try:
        StackSpec.model_validate({"regions": {"lab": config}})
    except ConfigError as exc:
        return exc.lines
    return []


def spec(config: dict[str, Any]) -> CellSpec:
    return StackSpec.model_validate({"regions": {"lab": config}}).regions["lab"]


# -- 1. cloud-init of the user's, merged ---------------------------------------------------------------------------


def test_user_data_keeps_its_keys_and_gains_gpucells_user_and_logins_off() -> None:
    user_data = "#cloud-config\npackages: [nvtop]\nusers: [default]\nruncmd:\n- [touch, /done]\n"
    merged = merge_user_data(parse_cloud_config(user_data), GpucellUserData("ubuntu", [KEY]), where="vm")
    assert list(merged) == ["packages", "users", "runcmd", "ssh_pwauth", "disable_root"]
    assert merged["users"] == [
        "default",
        {
            "name": "ubuntu",
            "lock_passwd": True,
            "shell": "/bin/bash",
            "sudo": "ALL=(ALL) NOPASSWD:ALL",
            "ssh_authorized_keys": [KEY],
        },
    ]
    assert (merged["ssh_pwauth"], merged["disable_root"]) == (False, True)


def test_without_user_data_the_cloud_config_is_gpucells_own_byte_for_byte() -> None:
    # The cloud-init Secrets of VMs deployed before own user data existed must not change (a changed Secret is
    # replaced): the same keys in the same order as before.
    text = cloud_config(GpuVirtualMachineSpec.model_validate(vm(user="ubuntu")), nvlink_disabled=True)
    assert text.startswith("#cloud-config\nusers:\n- name: ubuntu\n  lock_passwd: true\n")
    assert list(yaml.safe_load(text)) == ["users", "ssh_pwauth", "disable_root", "write_files"]
    assert yaml.safe_load(text)["write_files"][0]["path"] == "/etc/modprobe.d/gpucell-nvlink.conf"


def test_a_user_without_keys_gets_no_empty_key_list() -> None:
    # cloud-init's schema wants at least one key in ssh_authorized_keys (minItems: 1)
    assert "ssh_authorized_keys" not in GpucellUserData("ubuntu", []).user_entry()


def test_user_data_that_is_not_cloud_config_is_one_line() -> None:
    assert problems(region(vm(cloudInit={"userData": "#!/bin/bash\necho hi\n"}))) == [
        f"{VM_BASE}.cloudInit.userData: is a shell script, not cloud-config; gpucell merges its users and SSH keys "
        "into cloud-config user data only; write it as #cloud-config (a script goes under runcmd)"
    ]
    assert problems(region(vm(cloudInit={"userData": "packages: [nvtop]\n"}))) == [
        f"{VM_BASE}.cloudInit.userData: is not cloud-config: its first line must be #cloud-config (it is "
        "'packages: [nvtop]')"
    ]
    assert problems(region(vm(cloudInit={"userData": "#cloud-config\n- a\n"}))) == [
        f"{VM_BASE}.cloudInit.userData: is not cloud-config: a YAML mapping of cloud-init modules, not a list"
    ]
    assert problems(region(vm(cloudInit={"userData": "#cloud-config\na: &x [1]\nb: *x\n"}))) == [
        f"{VM_BASE}.cloudInit.userData: holds a YAML alias (line 3); write the value out"
    ]


def test_a_conflict_with_gpucells_parts_names_both_keys() -> None:
    assert problems(region(vm(user="ubuntu", cloudInit={"userData": "#cloud-config\nusers: [{name: ubuntu}]\n"}))) == [
        f"{VM_BASE}.cloudInit.userData.users[0].name: names the VM's own user 'ubuntu' (virtualMachines.vm.user), "
        "whom gpucell creates with virtualMachines.vm.sshKeys; drop the entry, or set virtualMachines.vm.user to "
        "another name"
    ]
    assert problems(region(vm(cloudInit={"userData": "#cloud-config\nssh_pwauth: true\n"}))) == [
        f"{VM_BASE}.cloudInit.userData.ssh_pwauth: conflicts with gpucell's ssh_pwauth: false (virtualMachines.vm: "
        "password and root SSH logins stay off, the VM's user has a locked password and its sshKeys); remove it"
    ]
    files = "#cloud-config\nwrite_files: [{path: /etc/modprobe.d/gpucell-nvlink.conf, content: x}]\n"
    assert problems(region(vm(cloudInit={"userData": files}))) == [
        f"{VM_BASE}.cloudInit.userData.write_files[0].path: is /etc/modprobe.d/gpucell-nvlink.conf, which gpucell "
        "writes (virtualMachines.vm: NVLink off for part of an HGX board); use another path"
    ]


def test_a_key_twice_in_user_data_is_refused_not_dropped() -> None:
    # YAML (and cloud-init, which loads user data the same way) keeps the last runcmd: the first would be lost.
    twice = "#cloud-config\nruncmd: [[touch, /a]]\npackages: [nvtop]\nruncmd: [[touch, /b]]\n"
    assert problems(region(vm(cloudInit={"userData": twice}))) == [
        f"{VM_BASE}.cloudInit.userData: holds key 'runcmd' twice in one mapping (lines 2 and 4): YAML keeps only the "
        "last, so the first would be dropped; write it once"
    ]
    nested = "#cloud-config\nwrite_files:\n- {path: /etc/a, content: x, content: y}\n"
    assert problems(region(vm(cloudInit={"userData": nested})))[0].startswith(
        f"{VM_BASE}.cloudInit.userData: holds key 'content' twice in one mapping (lines 3 and 3)"
    )
    with pytest.raises(UserDataError) as caught:
        secret_user_data("#cloud-config\nhunter2: 1\nhunter2: 2\n")
    assert caught.value.message == (
        "holds a key twice in one mapping (lines 2 and 3): YAML keeps only the last, so the first would be dropped; "
        "write it once"
    )


def test_a_value_yaml_cannot_construct_is_one_line_not_a_traceback() -> None:
    # PyYAML raises the constructor's own ValueError for a date that does not exist or a tagged number that is none
    line = (
        "is not valid YAML: a value reads as a date or a tagged number that does not exist (2024-13-45, !!int abc); "
        "quote it to keep it a string"
    )
    for text in ("#cloud-config\nbootcmd: [[echo, 2024-13-45]]\nwhen: 2024-13-45\n", "#cloud-config\nn: !!int abc\n"):
        assert problems(region(vm(cloudInit={"userData": text}))) == [f"{VM_BASE}.cloudInit.userData: {line}"]
    assert problems(region(vm(cloudInit={"networkData": "version: 2\nwhen: 2024-13-45\n"}))) == [
        f"{VM_BASE}.cloudInit.networkData: {line}"
    ]
    with pytest.raises(UserDataError) as caught:
        secret_user_data("#cloud-config\nwhen: 2024-02-30\n")
    assert caught.value.message == line


def test_secret_user_data_is_refused_without_a_word_of_it() -> None:
    refusals = {
        "export TOKEN=hunter2\n": "is not cloud-config: its first line must be #cloud-config",
        "#cloud-config\nhunter2: [\n": "is not valid YAML (line 3)",
        "#cloud-config\n{hunter2: 1}: 2\n": "is not valid YAML (line 2)",
        "#cloud-config\n5: hunter2\n": "is not cloud-config: a key is not a string",
    }
    for text, message in refusals.items():
        with pytest.raises(UserDataError) as caught:
            secret_user_data(text)
        assert caught.value.message == message


def test_users_as_a_string_or_a_mapping_merge_as_cloud_init_reads_them() -> None:
    # cloud-init takes users as a list, a comma-separated string or a mapping (ug_util._normalize_users, 26.2)
    ours = GpucellUserData("ubuntu", [KEY])
    merged = merge_user_data(parse_cloud_config("#cloud-config\nusers: default, ops\n"), ours, where="vm")
    assert merged["users"][:1] == ["default, ops"]
    mapping = "#cloud-config\nusers: {ops: {groups: wheel}, ci: true, old: false}\n"
    merged = merge_user_data(parse_cloud_config(mapping), ours, where="vm")
    assert merged["users"][:2] == [{"name": "ops", "groups": "wheel"}, "ci"]
    assert merged["users"][2]["name"] == "ubuntu"
    for users, path in (
        ("users: default, ubuntu", "users"),
        ("users: [[default, ubuntu]]", "users[0]"),
        ("users: {ubuntu: {groups: wheel}}", "users.ubuntu"),
    ):
        assert problems(region(vm(user="ubuntu", cloudInit={"userData": f"#cloud-config\n{users}\n"}))) == [
            f"{VM_BASE}.cloudInit.userData.{path}: names the VM's own user 'ubuntu' (virtualMachines.vm.user), whom "
            "gpucell creates with virtualMachines.vm.sshKeys; drop the entry, or set virtualMachines.vm.user to "
            "another name"
        ]
    assert problems(region(vm(cloudInit={"userData": "#cloud-config\nusers: 5\n"}))) == [
        f"{VM_BASE}.cloudInit.userData.users: is a number; cloud-init takes a list, a mapping or a comma-separated "
        "string here"
    ]


def test_user_data_in_a_key_and_a_secret_at_once_is_refused() -> None:
    both = {"userData": "#cloud-config\n", "userDataConfigKey": "acmeUserData"}
    assert problems(region(vm(cloudInit=both))) == [
        f"{VM_BASE}.cloudInit.userDataConfigKey: and userData both give the user data; keep one (the config key for "
        "secrets)"
    ]


def test_network_data_is_a_network_config_of_version_1_or_2() -> None:
    assert problems(region(vm(cloudInit={"networkData": "version: 3\n"}))) == [
        f"{VM_BASE}.cloudInit.networkData.version: 3 is not a cloud-init network config version; use 1 or 2 "
        "(version 2 is netplan's format)"
    ]
    manifest = rendered(vm(cloudInit={"networkData": "version: 2\nethernets: {enp1s0: {dhcp4: true}}\n"}))
    volume = manifest["spec"]["template"]["spec"]["volumes"][-1]
    assert volume == {
        "name": "cloudinitdisk",
        "cloudInitNoCloud": {"secretRef": {"name": "vm-cloud-init"}, "networkDataSecretRef": {"name": "vm-cloud-init"}},
    }


def test_the_offline_plans_stand_in_for_secret_user_data_is_read_as_empty() -> None:
    # The plan decrypts nothing; pulumi up, which has the value, checks and merges it.
    assert PLAN_STAND_IN_PREFIX == PLACEHOLDER_PREFIX
    assert secret_user_data(f"{PLACEHOLDER_PREFIX}-acmeUserData-0123:{PLACEHOLDER_PREFIX}") == {}
    with pytest.raises(UserDataError, match="not cloud-config"):
        secret_user_data("echo hi")


# -- 2. instancetypes and preferences ------------------------------------------------------------------------------


def rendered(config_vm: dict[str, Any], config: dict[str, Any] | None = None) -> dict[str, Any]:
    cell_spec = spec(config or region(config_vm))
    tenant = cell_spec.tenants["acme"]
    shape = resolve_vm(cell_spec.kubevirt, cell_spec.versions.kubevirt, tenant, tenant.virtual_machines["vm"])
    placement = vm_placement("vm", shape.spec, cell_spec)
    return virtual_machine_manifest("acme", "vm", tenant.virtual_machines["vm"], cell_spec, placement, shape=shape)


def sized(**fields: Any) -> dict[str, Any]:
    config_vm = vm(**fields)
    config_vm.pop("memoryGib")
    return config_vm


def test_a_vm_by_instancetype_sets_no_size_of_its_own_and_names_it_as_kubevirt_does() -> None:
    types = {"instancetypes": {"vgpu.l40s-24q": {"cpus": 8, "memoryGib": 48, "gpuModel": "L40S", "gpus": 1,
                                                 "vgpuProfile": "L40S-24Q"}}}  # fmt: skip
    config = region(sized(instancetype={"name": "vgpu.l40s-24q"}, preference={"name": "ubuntu"}), kubevirt=types)
    manifest = rendered({}, config)
    assert manifest["spec"]["instancetype"] == {"kind": "VirtualMachineClusterInstancetype", "name": "vgpu.l40s-24q"}
    assert manifest["spec"]["preference"] == {"kind": "VirtualMachineClusterPreference", "name": "ubuntu"}
    domain = manifest["spec"]["template"]["spec"]["domain"]
    assert "cpu" not in domain
    assert "memory" not in domain
    assert "resources" not in domain
    assert "gpus" not in domain["devices"]  # the instancetype's
    # a preference decides the disk bus: none here
    assert domain["devices"]["disks"][0] == {"name": "root", "disk": {}, "bootOrder": 1}
    # ... but the VM still lands on the vGPU pool, by the instancetype's GPU
    terms = manifest["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    expressions = terms["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"]
    assert expressions[0] == {"key": "gpucell.io/pool", "operator": "In", "values": ["l40s-vgpu"]}
    assert instancetype_manifest("vgpu.l40s-24q", spec(config).kubevirt.instancetypes["vgpu.l40s-24q"])["spec"] == {
        "cpu": {"guest": 8},
        "memory": {"guest": "48Gi"},
        "gpus": [{"name": "gpu0", "deviceName": "nvidia.com/NVIDIA_L40S-24Q"}],
    }


def test_a_vm_by_instancetype_may_not_size_itself() -> None:
    assert problems(region(vm(instancetype={"name": "u1.large"}))) == [
        f"{VM_BASE}.memoryGib: conflicts with instancetype 'u1.large', which sizes the VM (KubeVirt refuses a VM that "
        "sets what its instancetype sets); drop it, or name an instancetype with it"
    ]
    assert problems(region(sized())) == [f"{VM_BASE}.memoryGib: is required without instancetype (guest memory, GiB)"]


def test_unknown_instancetypes_are_one_line_naming_what_is_accepted() -> None:
    assert problems(region(sized(instancetype={"name": "u1.huge"}))) == [
        f"{VM_BASE}.instancetype.name: 'u1.huge' is not a cluster instancetype of the cell; name one of "
        "kubevirt.instancetypes (none) or KubeVirt v1.9.0's common ones (common-instancetypes v1.7.0)"
    ]
    config = region(sized(instancetype={"name": "small"}))
    config["tenants"]["acme"]["instancetypes"] = {"small": {"cpus": 2, "memoryGib": 4}}
    assert problems(config) == [
        f"{VM_BASE}.instancetype.name: 'small' is not a cluster instancetype of the cell; name one of "
        "kubevirt.instancetypes (none) or KubeVirt v1.9.0's common ones (common-instancetypes v1.7.0); the tenant "
        "has an instancetype of that name: set kind: VirtualMachineInstancetype"
    ]
    config["tenants"]["acme"]["virtualMachines"]["vm"]["instancetype"]["kind"] = "VirtualMachineInstancetype"
    assert problems(config) == []
    config = region(sized(instancetype={"name": "u1.large"}), kubevirt={"commonInstancetypes": False})
    assert problems(config) == [
        f"{VM_BASE}.instancetype.name: 'u1.large' is not a cluster instancetype of the cell; name one of "
        "kubevirt.instancetypes (none)"
    ]


def test_kubevirts_common_ones_are_the_v1_9_bundle_and_gpucell_refuses_what_it_cannot_serve() -> None:
    table = common_instancetypes("v1.9.0")
    assert table is not None
    assert len(table) == 65
    assert (table["u1.large"].cpus, table["u1.large"].memory_mib) == (2, 8192)
    assert table["cx1.large"].isolate_emulator_thread
    assert table["cx1.large"].hugepages == "2Mi"
    assert common_instancetypes("v1.8.4") is None
    # Issue 30: v1.10 deploys the same common-instancetypes v1.7.0 bundles, so a minor upgrade keeps `ubuntu`.
    assert common_instancetypes("v1.10.0") == table
    assert common_preferences("v1.10.0") == common_preferences("v1.9.0")
    assert common_preferences("v1.10.0")["ubuntu"] == CommonPreference(min_cpus=1, min_memory_mib=2048)  # type: ignore[index]
    upgraded = region(sized(instancetype={"name": "u1.large"}, preference={"name": "ubuntu"}))
    upgraded["versions"] = {**upgraded.get("versions", {}), "kubevirt": "v1.10.0"}
    assert problems(upgraded) == []
    preferences = common_preferences("v1.9.0")
    assert preferences is not None
    assert len(preferences) == 54
    assert preferences["windows.11"].persistent_tpm
    assert preferences["windows.11"].min_cpus == 2
    assert problems(region(sized(instancetype={"name": "rt1.large"}))) == [
        f"{VM_BASE}.instancetype.name: 'rt1.large' is a real-time instancetype, which needs hosts tuned for real "
        "time (isolated CPUs, a real-time kernel) that gpucell does not set up; use a cx1 or n1 instancetype"
    ]
    assert problems(region(sized(instancetype={"name": "u1.large"}, preference={"name": "rhel.9.arm64"}))) == [
        f"{VM_BASE}.preference.name: 'rhel.9.arm64' is for arm64 guests; the cell's hosts are amd64: use rhel.9"
    ]
    assert problems(region(sized(instancetype={"name": "u1.small"}, preference={"name": "windows.11"}))) == [
        f"{VM_BASE}.preference.name: 'windows.11' requires at least 2 vCPUs and 4096 MiB of memory (its "
        "requirements); the VM has 1 vCPUs and 2048 MiB"
    ]
    assert problems(region(kubevirt={"instancetypes": {"u1.large": {"cpus": 2, "memoryGib": 8}}})) == [
        "regions.lab.kubevirt.instancetypes.u1.large: is one of KubeVirt's common instancetypes, which virt-operator "
        "deploys and owns; both would manage the same object: pick another name, or set "
        "kubevirt.commonInstancetypes: false"
    ]


def test_admission_and_quota_count_the_instancetypes_sizes() -> None:
    # cx1.8xlarge: 32 dedicated vCPUs and an isolated emulator thread, 64 GiB of 2Mi hugepages
    config = region(sized(instancetype={"name": "u1.8xlarge"}))
    config["tenants"]["acme"]["quota"]["memoryGib"] = 100
    assert problems(config) == [
        "regions.lab.tenants.acme.virtualMachines.vm: brings the tenant's declared memory to 128 GiB, "
        "quota.memoryGib allows 100"
    ]
    # a key the VM does not have is no place for its problem: the instancetype that sets it is
    config = region(sized(instancetype={"name": "cx1.8xlarge"}))
    assert problems(config) == [
        f"{VM_BASE}.instancetype.name: 'cx1.8xlarge' sets the VM's dedicatedCpus: dedicated CPUs, hugepages or NUMA "
        "passthrough need a pool with a topology profile, and none of the candidate pools has one; cpu pools take "
        "none: set pool to a gpu pool that has one (none in this region)"
    ]
    types = {"instancetypes": {"vgpu": {"cpus": 4, "memoryGib": 16, "gpuModel": "L40S", "gpus": 1,
                                        "vgpuProfile": "L40S-12Q"}}}  # fmt: skip
    assert problems(region(sized(instancetype={"name": "vgpu"}), kubevirt=types)) == [
        f"{VM_BASE}.instancetype.name: 'vgpu' sets the VM's vgpuProfile: no vm-vgpu pool with L40S (L40S-12Q); L40S "
        "is only in l40s (container), l40s-vgpu (vm-vgpu, nvidia.com/NVIDIA_L40S-24Q)"
    ]


def test_gpus_come_from_the_instancetype_or_the_vm_never_both() -> None:
    types = {"instancetypes": {"vgpu": {"cpus": 4, "memoryGib": 16, "gpuModel": "L40S", "gpus": 1,
                                        "vgpuProfile": "L40S-24Q"}}}  # fmt: skip
    config = region(
        sized(instancetype={"name": "vgpu"}, gpuModel="L40S", vgpuProfile="L40S-24Q", gpus=1), kubevirt=types
    )
    assert problems(config) == [
        f"{VM_BASE}.gpus: conflicts with instancetype 'vgpu', which gives the VM its GPUs (KubeVirt refuses both, "
        "pkg/instancetype/apply/gpu.go); drop gpuModel and gpus here"
    ]


def test_preferences_render_what_they_prefer() -> None:
    preference = PreferenceSpec.model_validate(
        {"cpuTopology": "cores", "diskBus": "sata", "efi": {"persistent": True}, "tpm": {"persistent": True}}
    )
    assert preference_manifest("windows-desktop", preference, "tenant-acme")["spec"] == {
        "cpu": {"preferredCPUTopology": "cores"},
        "devices": {"preferredDiskBus": "sata", "preferredTPM": {"persistent": True}},
        "firmware": {"preferredEfi": {"secureBoot": True, "persistent": True}},
        "features": {"preferredSmm": {}},
    }
    assert preference_manifest("p", preference, "tenant-acme")["kind"] == "VirtualMachinePreference"
    it = InstancetypeSpec(cpus=4, memory_gib=8, dedicated_cpus=True, hugepages="1Gi", numa_passthrough=True)
    assert instancetype_manifest("pinned", it)["spec"] == {
        "cpu": {"guest": 4, "dedicatedCPUPlacement": True, "numa": {"guestMappingPassthrough": {}}},
        "memory": {"guest": "8Gi", "hugepages": {"pageSize": "1Gi"}},
    }


# -- 3. image catalogs, blank disks, import credentials ------------------------------------------------------------


def test_a_disk_clones_the_catalog_image_of_its_class_and_a_blank_disk_is_blank() -> None:
    manifest = rendered(vm(dataDisks=[{"source": {"blank": True}, "sizeGib": 100}]))
    root, data = manifest["spec"]["dataVolumeTemplates"]
    assert root["spec"]["sourceRef"] == {
        "kind": "DataSource",
        "namespace": "os-images",
        "name": "ubuntu-2404-local-path",
    }
    assert "source" not in root["spec"]
    assert data["spec"]["source"] == {"blank": {}}


def test_a_blank_root_disk_is_refused_it_boots_nothing() -> None:
    assert problems(region(vm(rootDisk={"source": {"blank": True}, "sizeGib": 30}))) == [
        f"{VM_BASE}.rootDisk.source.blank: is an empty root disk, which boots nothing (a VM gets no installer ISO and "
        "no network boot); clone an image (source.image) or import one (registry, http), and keep blank disks for "
        "dataDisks"
    ]


def test_registry_and_http_sources_take_credentials_and_a_ca_bundle() -> None:
    source = {"http": "https://images.acme.example/base.qcow2", "credentialsConfigKey": "acmeImages", "caBundle": CA}
    manifest = rendered(vm(rootDisk={"source": source, "sizeGib": 30}))
    assert manifest["spec"]["dataVolumeTemplates"][0]["spec"]["source"] == {
        "http": {
            "url": "https://images.acme.example/base.qcow2",
            "secretRef": "vm-root-import",
            "certConfigMap": "vm-root-import-ca",
        }
    }
    assert problems(region(vm(rootDisk={"source": {"blank": True, "caBundle": CA}, "sizeGib": 30}))) == [
        f"{VM_BASE}.rootDisk.source.caBundle: only applies to a registry or http source (CDI imports with it)"
    ]
    assert problems(region(vm(rootDisk={"source": {"registry": UBUNTU, "caBundle": "nope"}, "sizeGib": 30}))) == [
        f"{VM_BASE}.rootDisk.source.caBundle: 'nope' is not PEM certificates: one or more -----BEGIN "
        "CERTIFICATE----- ... -----END CERTIFICATE----- blocks and nothing else (no private key)"
    ]
    assert problems(region(vm(rootDisk={"source": {"blank": True, "image": "os-images/ubuntu-2404"}, "sizeGib": 30})))[
        0
    ] == (f"{VM_BASE}.rootDisk.source: give exactly one of registry, http, pvc, image, blank (got image, blank)")


def test_a_datasource_no_tenant_may_use_and_other_catalog_mistakes_are_one_line_each() -> None:
    config = region(vm())
    config["imageCatalogs"]["os-images"]["tenants"] = ["globex"]
    assert problems(config) == [
        f"{VM_BASE}.rootDisk.source.image: 'os-images/ubuntu-2404' is a DataSource tenant acme may not use: "
        "imageCatalogs.os-images.tenants lists globex; add acme there, or import the image for this tenant"
    ]
    config["imageCatalogs"]["os-images"]["tenants"] = []
    assert problems(config) == [
        "regions.lab.imageCatalogs.os-images.tenants: [] lets no tenant clone the catalog's images; list tenants, "
        "or leave tenants out for all"
    ]
    assert problems(region(vm(rootDisk={"source": {"image": "os-images/debian"}, "sizeGib": 30}))) == [
        f"{VM_BASE}.rootDisk.source.image: 'os-images/debian': catalog os-images has no image debian; its images: "
        "ubuntu-2404"
    ]
    assert problems(region(vm(rootDisk={"source": {"image": "os-images/ubuntu-2404"}, "sizeGib": 10}))) == [
        f"{VM_BASE}.rootDisk.sizeGib: 10 is smaller than image os-images/ubuntu-2404 (20 GiB): a clone is at least "
        "as large as its source"
    ]
    other = region(vm(rootDisk={"source": {"image": "os-images/ubuntu-2404"}, "sizeGib": 30, "storageClass": "nfs"}))
    other["storage"] = {"otherClasses": ["nfs"]}
    assert problems(other) == [
        f"{VM_BASE}.rootDisk.storageClass: 'nfs': image os-images/ubuntu-2404 is imported into local-path only; "
        "clone it onto one of those, or add nfs to imageCatalogs.os-images.images.ubuntu-2404.storageClasses"
    ]
    cron = region()
    cron["imageCatalogs"] = {"tenant-acme": {"images": {"x": {"source": {"http": "https://a.example/x"}, "sizeGib": 1,
                                                             "schedule": "0 4 * * *"}}}}  # fmt: skip
    assert problems(cron) == [
        "regions.lab.imageCatalogs.tenant-acme.images.x.schedule: only applies to a registry source: CDI's "
        "DataImportCron polls registry digests; an http image is imported once, and again when its url or sizeGib "
        "changes"
    ]


def test_a_catalog_named_what_no_namespace_can_be_is_one_line() -> None:
    # the key is the catalog's Namespace: the API server would refuse it only at pulumi up
    config = region()
    config["imageCatalogs"] = {"Os_Images": config["imageCatalogs"]["os-images"]}
    assert problems(config) == [
        "regions.lab.imageCatalogs.Os_Images: 'Os_Images' is not a namespace name (a DNS-1123 label: lower-case "
        "letters, digits, '-')"
    ]


def test_catalog_objects_are_a_cron_per_registry_image_and_a_volume_and_source_per_http_image() -> None:
    catalog = spec(
        region(
            imageCatalogs={
                "os-images": {
                    "images": {
                        "ubuntu-2404": {
                            "source": {"registry": UBUNTU},
                            "sizeGib": 20,
                            "storageClasses": ["local-path"],
                        },
                        "win": {"source": {"http": "https://images.example/win.qcow2"}, "sizeGib": 60},
                    },
                    "tenants": ["acme"],
                }
            }
        )
    ).image_catalogs["os-images"]
    cron, volume, source = catalog_objects("os-images", catalog, "local-path")
    assert cron["kind"] == "DataImportCron"
    assert cron["spec"] == {
        "template": {
            "spec": {
                "source": {"registry": {"url": UBUNTU}},
                "storage": {"resources": {"requests": {"storage": "20Gi"}}, "storageClassName": "local-path"},
            }
        },
        "schedule": "0 4 * * *",
        "managedDataSource": "ubuntu-2404-local-path",
        "importsToKeep": 3,
        "garbageCollect": "Outdated",
        "retentionPolicy": "RetainAll",
    }
    assert volume["kind"] == "DataVolume"
    assert volume["metadata"]["name"].startswith("win-local-path-")
    assert len(volume["metadata"]["name"]) == 23
    assert volume["metadata"]["annotations"] == {"cdi.kubevirt.io/storage.bind.immediate.requested": "true"}
    assert source["spec"] == {"source": {"pvc": {"namespace": "os-images", "name": volume["metadata"]["name"]}}}
    role, binding = clone_rbac("os-images", {"acme": ["oidc:acme-ml"]})
    assert role["rules"][0] == {
        "apiGroups": ["cdi.kubevirt.io"],
        "resources": ["datavolumes/source"],
        "verbs": ["create"],
    }
    assert [s["name"] for s in binding["subjects"]] == ["system:serviceaccounts:tenant-acme", "oidc:acme-ml"]


# -- 4. devices and firmware ---------------------------------------------------------------------------------------


def test_virtio_rng_is_on_unless_a_vm_says_otherwise() -> None:
    assert rendered(vm())["spec"]["template"]["spec"]["domain"]["devices"]["rng"] == {}
    assert "rng" not in rendered(vm(rng=False))["spec"]["template"]["spec"]["domain"]["devices"]


def test_efi_with_secure_boot_gets_smm_and_a_persistent_tpm() -> None:
    domain = rendered(vm(efi={"persistent": True}, tpm={"persistent": True}))["spec"]["template"]["spec"]["domain"]
    assert domain["firmware"] == {"bootloader": {"efi": {"secureBoot": True, "persistent": True}}}
    assert domain["features"] == {"smm": {"enabled": True}}
    assert domain["devices"]["tpm"] == {"persistent": True}
    plain = rendered(vm(efi={"secureBoot": False}))["spec"]["template"]["spec"]["domain"]
    assert "features" not in plain


def test_an_efi_vm_whose_state_class_the_cell_lacks_is_refused() -> None:
    config = region(vm(efi={"persistent": True}), kubevirt={"vmStateStorageClass": "fast-block"})
    assert problems(config) == [
        f"{VM_BASE}.efi.persistent: keeps EFI NVRAM in a PVC of StorageClass 'fast-block' "
        "(kubevirt.vmStateStorageClass), which the cell does not have; name one of local-path there"
    ]
    assert problems(region(vm(), kubevirt={"vmStateStorageClass": "fast-block"})) == [
        "regions.lab.kubevirt.vmStateStorageClass: 'fast-block' is not a StorageClass of the cell (local-path): "
        "KubeVirt's VM state PVCs would never bind; name one, or list a class installed outside gpucell in "
        "storage.otherClasses"
    ]


def kubevirt_configuration(config: dict[str, Any]) -> dict[str, Any]:
    """The ``KubeVirt`` CR's ``spec.configuration`` the cell of ``config`` registers (KubeVirtArgs.from_cell)."""
    plan = deploy(config)
    cr = next(r for r in plan.resources if r.type == "kubernetes:kubevirt.io/v1:KubeVirt")
    return cast("dict[str, Any]", cr.inputs["spec"]["configuration"])


def test_the_kubevirt_cr_names_the_state_class_and_the_common_instancetypes() -> None:
    configuration = kubevirt_configuration(region(vm(efi={"persistent": True})))
    assert configuration["vmStateStorageClass"] == "local-path"
    assert configuration["commonInstancetypesDeployment"] == {"enabled": True}
    assert configuration["developerConfiguration"]["cpuAllocationRatio"] == 1
    assert VM_PERSISTENT_STATE_GATE not in configuration["developerConfiguration"].get("featureGates", [])  # GA, v1.6
    older = kubevirt_configuration(region(vm(efi={"persistent": True}), versions={"kubevirt": "v1.5.2"}))
    assert VM_PERSISTENT_STATE_GATE in older["developerConfiguration"]["featureGates"]
    assert VM_PERSISTENT_STATE_GATE not in feature_gates({}, version="v1.5.2", vm_persistent_state=False)
    # A KubeVirt installed on its own leaves the state class to KubeVirt.
    assert "vmStateStorageClass" not in kubevirt_spec({})["configuration"]


def test_longhorns_storage_profile_gets_a_filesystem_set_for_vm_state_after_its_block_one() -> None:
    class Longhorn:
        access_modes = ["ReadWriteOnce"]
        volume_mode = "Block"

    assert storage_profile_spec(Longhorn())["claimPropertySets"] == [  # type: ignore[arg-type]
        {"accessModes": ["ReadWriteOnce"], "volumeMode": "Block"},
        {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem"},
    ]


def test_tenant_namespaces_make_kubevirts_automatic_memory_limit_the_request() -> None:
    assert namespace_labels("acme", "1.34")["alpha.kubevirt.io/auto-memory-limits-ratio"] == "1.0"


# -- the components under the mock engine --------------------------------------------------------------------------


def computed(args: MockResourceArgs) -> dict[str, Any]:
    if args.typ == "command:remote:Command" and args.name.endswith("-kubeconfig"):
        return {"stdout": KUBECONFIG}
    return {}


def deploy(config: dict[str, Any], secrets: dict[str, str] | None = None) -> PlanResult:
    cell_spec = spec(config)

    def program() -> None:
        key = pulumi.Output.secret("k")
        values = {k: pulumi.Output.secret(v) for k, v in (secrets or {}).items()}
        lab = RegionalCell("lab", RegionalCellArgs(cell=cell_spec, ssh_private_key=key, image_credentials=values))
        for name, tenant_spec in cell_spec.tenants.items():
            tenant = Tenant(f"lab-{name}", TenantArgs.from_cell(name, tenant_spec, lab))
            for vm_name, vm_spec in tenant_spec.virtual_machines.items():
                GpuVirtualMachine(
                    f"lab-{name}-{vm_name}", GpuVirtualMachineArgs(vm_name, vm_spec, tenant, secrets=values)
                )

    return run_program(program, computed=computed)


def test_catalog_crons_are_replaced_never_updated_and_vms_wait_for_the_clone_rbac() -> None:
    plan = deploy(region(vm()))
    cron = next(r for r in plan.resources if r.type == "kubernetes:cdi.kubevirt.io/v1beta1:DataImportCron")
    assert cron.options["replaceOnChanges"] == ["spec"]
    assert cron.options["deleteBeforeReplace"]
    catalog = next(r for r in plan.resources if r.type == "gpucell:index:ImageCatalog")
    machine = next(r for r in plan.resources if r.type == "kubernetes:kubevirt.io/v1:VirtualMachine")
    assert catalog.urn in machine.dependencies or any(
        r.urn in machine.dependencies for r in plan.resources if r.parent == catalog.urn
    )


def test_a_private_registry_images_poller_finds_its_credentials_and_ca_in_cdis_namespace() -> None:
    # CDI runs a DataImportCron's digest poller in its own namespace and reads the cron's secretRef and certConfigMap
    # there by name (InitPollerPod, dataimportcron-controller.go v1.66.0); its imports read them in the catalog's.
    config = region(vm())
    source = {"registry": "docker://registry.acme.example/os/ubuntu:24.04", "credentialsConfigKey": "osPull"}
    config["imageCatalogs"]["os-images"]["images"]["ubuntu-2404"]["source"] = {**source, "caBundle": CA}
    plan = deploy(config, {"osPull": "robot:tok3n"})
    cron = next(r for r in plan.resources if r.type == "kubernetes:cdi.kubevirt.io/v1beta1:DataImportCron")
    registry = cron.inputs["spec"]["template"]["spec"]["source"]["registry"]
    assert (registry["secretRef"], registry["certConfigMap"]) == (
        "os-images-ubuntu-2404-import",
        "os-images-ubuntu-2404-import-ca",
    )
    secrets = {
        (r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]): r
        for r in plan.resources
        if r.type == "kubernetes:core/v1:Secret" and r.name.startswith("lab-images-")
    }
    assert set(secrets) == {("os-images", "os-images-ubuntu-2404-import"), ("cdi", "os-images-ubuntu-2404-import")}
    for secret in secrets.values():
        assert secret.inputs["stringData"] == SECRET
        assert secret.raw_inputs["stringData"] == {"accessKeyId": "robot", "secretKey": "tok3n"}
        assert secret.urn in cron.dependencies
    maps = {
        (r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]): r.inputs["data"]
        for r in plan.resources
        if r.type == "kubernetes:core/v1:ConfigMap" and r.name.startswith("lab-images-")
    }
    assert maps == {(ns, "os-images-ubuntu-2404-import-ca"): {"ca.pem": CA} for ns in ("os-images", "cdi")}


def test_secret_user_data_and_import_credentials_stay_secret_and_are_merged() -> None:
    source = {"registry": UBUNTU, "credentialsConfigKey": "acmePull"}
    config = region(vm(cloudInit={"userDataConfigKey": "acmeUserData"}, rootDisk={"source": source, "sizeGib": 30}))
    user_data = "#cloud-config\npackages: [htop]\n"
    plan = deploy(config, {"acmeUserData": user_data, "acmePull": "robot$acme:tok3n"})
    secrets = {r.name: r for r in plan.resources if r.type == "kubernetes:core/v1:Secret"}
    cloud = secrets["lab-acme-vm-cloud-init"]
    assert cloud.inputs["stringData"] == SECRET
    merged = yaml.safe_load(cloud.raw_inputs["stringData"]["userdata"])
    assert merged["packages"] == ["htop"]
    assert merged["users"][0]["ssh_authorized_keys"] == [KEY]
    pull = secrets["lab-acme-vm-root-import"]
    assert pull.inputs["stringData"] == SECRET
    assert pull.raw_inputs["stringData"] == {"accessKeyId": "robot$acme", "secretKey": "tok3n"}
    data = cloud_init_data(GpuVirtualMachineSpec.model_validate(vm()), False, {})
    assert set(data) == {"userdata"}  # type: ignore[arg-type]


def test_tenant_instancetypes_are_namespaced_objects_of_the_tenant() -> None:
    config = region(sized(instancetype={"name": "small", "kind": "VirtualMachineInstancetype"}))
    config["tenants"]["acme"]["instancetypes"] = {"small": {"cpus": 2, "memoryGib": 4}}
    plan = deploy(config)
    [obj] = [r for r in plan.resources if r.type.endswith(":VirtualMachineInstancetype")]
    assert obj.inputs["metadata"]["namespace"] == "tenant-acme"
    assert obj.inputs["spec"] == {"cpu": {"guest": 2}, "memory": {"guest": "4Gi"}}


def test_what_the_vm_platform_renders_passes_the_upstream_schemas() -> None:
    types = {"instancetypes": {"pinned": {"cpus": 2, "memoryGib": 4}}, "preferences": {"win": {"diskBus": "sata"}}}
    config = region(sized(instancetype={"name": "pinned"}, preference={"name": "win"}, efi={}, tpm={}), kubevirt=types)
    config["tenants"]["acme"]["virtualMachines"]["vm"]["dataDisks"] = [{"source": {"blank": True}, "sizeGib": 5}]
    plan = deploy(config)
    report = check_region("lab", plan.resources, spec(config), SchemaStore(UPSTREAM), checkers=SCHEMA_CHECKERS)
    assert [str(p) for p in report.problems] == []
    kinds = {r.type.rsplit(":", 1)[-1] for r in plan.resources}
    assert {"VirtualMachineClusterInstancetype", "VirtualMachineClusterPreference", "DataImportCron"} <= kinds


def test_the_checks_refuse_a_vm_that_sizes_itself_beside_its_instancetype_and_secure_boot_without_smm() -> None:
    vm_object = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "spec": {
            "instancetype": {"name": "u1.large"},
            "template": {"spec": {"domain": {"memory": {"guest": "4Gi"}, "firmware": {"bootloader": {"efi": {}}}}}},
        },
    }
    assert [(v.path, v.message) for v in admission_violations(vm_object)] == [
        ("spec.template.spec.domain.memory.guest", "conflicts with the instancetype the VM names"),
        (
            "spec.template.spec.domain.firmware.bootloader.efi",
            "has EFI SecureBoot enabled. SecureBoot requires SMM, which is currently disabled",
        ),
    ]


# -- cloud-init against cloud-init's schemas (--check) -------------------------------------------------------------


def test_cloud_init_schemas_are_required_in_the_schema_directory(tmp_path: Path) -> None:
    assert not UPSTREAM_FILES[CLOUD_CONFIG_SCHEMA].optional
    assert (
        UPSTREAM_FILES[CLOUD_CONFIG_SCHEMA]
        .url("26.2")
        .endswith("/canonical/cloud-init/26.2/cloudinit/config/schemas/schema-cloud-config-v1.json")
    )
    assert CLOUD_CONFIG_SCHEMA in SchemaStore(tmp_path).missing()  # --check names it (check_schema_dir)
    assert SchemaStore(UPSTREAM).version_of(CLOUD_CONFIG_SCHEMA) == "26.2"  # SOURCES.md's two-part tag, read
    # A store built by hand without them: the plan's own rules ran; the report says cloud-init's schemas did not.
    cell_spec = spec(region(vm(cloudInit={"userData": "#cloud-config\npackages: [nvtop]\n"})))
    found, notices = cloud_init_report("lab", cell_spec, SchemaStore(tmp_path))
    assert found == []
    assert "not checked against cloud-init's schemas" in notices[0].message


def test_user_data_as_rendered_is_checked_against_the_cloud_config_schema(tmp_path: Path) -> None:
    # A stand-in with the shape of cloud-init's own (unknown top-level keys refused); the real one is fetched.
    (tmp_path / "cloud-init").mkdir()
    schema = {"type": "object", "additionalProperties": False, "properties": {k: {} for k in
              ("packages", "users", "ssh_pwauth", "disable_root", "write_files")}}  # fmt: skip
    (tmp_path / CLOUD_CONFIG_SCHEMA).write_text(json.dumps(schema))
    for rel in NETWORK_CONFIG_SCHEMAS.values():
        (tmp_path / rel).write_text("{}")
    cell_spec = spec(region(vm(cloudInit={"userData": "#cloud-config\npackges: [nvtop]\n"})))
    found, notices = cloud_init_report("lab", cell_spec, SchemaStore(tmp_path))
    assert notices == []
    assert [(p.subject.name, p.path, p.message, p.checker) for p in found] == [
        (
            "vm-cloud-init",
            "userdata.-",
            "Additional properties are not allowed ('packges' was unexpected)",
            "cloud-init",
        )
    ]


# -- Day 2 -------------------------------------------------------------------------------------------------------


def test_resizing_an_instancetype_deployed_vms_use_is_a_disruptive_change() -> None:
    types = {"instancetypes": {"gpu.large": {"cpus": 4, "memoryGib": 16}}}
    before = fingerprint(spec(region(sized(instancetype={"name": "gpu.large"}), kubevirt=types)))
    assert before["instancetypes"]["VirtualMachineClusterInstancetype/gpu.large"]["vms"] == ["tenant-acme/vm"]
    bigger = copy.deepcopy(types)
    bigger["instancetypes"]["gpu.large"]["memoryGib"] = 32
    after = fingerprint(spec(region(sized(instancetype={"name": "gpu.large"}), kubevirt=bigger)))
    [change] = compare(before, after, "lab")
    assert change.change is Change.INSTANCETYPE_RESIZED
    assert change.key == "regions.lab.kubevirt.instancetypes.gpu.large"
    assert change.acknowledgement() == (
        "{change: instancetypeResized, region: lab, subject: VirtualMachineClusterInstancetype/gpu.large, "
        'reason: "..."}'
    )
    unused = fingerprint(spec(region(vm(), kubevirt=bigger)))
    assert "instancetypes" not in unused
    assert compare(before, unused, "lab") == []


def test_changing_a_deployed_vms_boot_firmware_or_dropping_its_state_is_a_disruptive_change() -> None:
    # A VM deployed before efi existed boots BIOS; at its next restart it would boot the same disk with OVMF.
    bios = fingerprint(spec(region(vm())))
    assert "vmFirmware" not in bios
    secure = fingerprint(spec(region(vm(efi={"persistent": True}, tpm={"persistent": True}))))
    assert secure["vmFirmware"] == {
        "tenant-acme/vm": {
            "boot": "efi-secure-boot",
            "efiPersistent": True,
            "tpm": "persistent",
            "key": "tenants.acme.virtualMachines.vm",
        }
    }
    [change] = compare(bios, secure, "lab")
    assert change.change is Change.VM_FIRMWARE
    assert (change.subject, change.key) == ("tenant-acme/vm", "regions.lab.tenants.acme.virtualMachines.vm")
    assert (change.old, change.new) == ("bios, TPM none", "efi-secure-boot, persistent NVRAM, TPM persistent")
    assert change.acknowledgement() == '{change: vmFirmware, region: lab, subject: tenant-acme/vm, reason: "..."}'
    # the TPM's sealed secrets go with its persistent state; Secure Boot off changes what boots
    ephemeral = fingerprint(spec(region(vm(efi={"persistent": True}, tpm={}))))
    assert [c.change for c in compare(secure, ephemeral, "lab")] == [Change.VM_FIRMWARE]
    plain = fingerprint(spec(region(vm(efi={"secureBoot": False, "persistent": True}, tpm={"persistent": True}))))
    assert [c.new for c in compare(secure, plain, "lab")] == ["efi, persistent NVRAM, TPM persistent"]
    # through the preference too; and nothing for a new VM, for state made persistent, or for a VM removed
    preferred = region(vm(preference={"name": "efi"}), kubevirt={"preferences": {"efi": {"efi": {}}}})
    assert [c.new for c in compare(bios, fingerprint(spec(preferred)), "lab")] == ["efi-secure-boot, TPM none"]
    kept = fingerprint(spec(region(vm(efi={"persistent": True}, tpm={"persistent": True}))))
    assert compare(fingerprint(spec(region(vm(efi={}, tpm={})))), kept, "lab") == []
    assert compare(fingerprint(spec(region())), secure, "lab") == []
    assert [c.change for c in compare(secure, fingerprint(spec(region())), "lab")] == [Change.DATA_DELETED]


def plan_json(config: dict[str, Any]) -> dict[str, Any]:
    plan = deploy(config)
    return {
        "resources": [
            {
                "urn": r.urn,
                "type": r.type,
                "name": r.name,
                "parent": r.parent,
                "inputs": r.masked_inputs(),
                "options": {},
            }
            for r in plan.resources
        ]
    }


def test_gpucell_diff_says_which_vm_changes_need_a_restart_and_which_never_reach_running_vms() -> None:
    types = {"instancetypes": {"small": {"cpus": 2, "memoryGib": 4}}}
    base = plan_json(region(sized(instancetype={"name": "small"}), kubevirt=types))
    bigger = {"instancetypes": {"small": {"cpus": 4, "memoryGib": 4}}}
    head = plan_json(region(sized(instancetype={"name": "small"}, rng=False, efi={}), kubevirt=bigger))
    diffs = {d.label: d for ds in diff_plans(base, head).regions.values() for d in ds}
    machine = diffs["VirtualMachine tenant-acme/vm"]
    assert [r.split(":")[0] for r in machine.restart] == ["`spec.template.spec.domain`"]
    assert "takes effect when the VM restarts" in machine.restart[0]
    assert any("not applied to existing VMs" in n for n in diffs["VirtualMachineClusterInstancetype small"].notes)


# -- the refusals docs/workloads.md shows, on the prod region ------------------------------------------------------

PROD: dict[str, Any] = prod_regions()


def prod_problems(change: Any) -> list[str]:
    fra1 = copy.deepcopy(PROD["fra1"])
    change(fra1)
    try:
        StackSpec.model_validate({"regions": {"fra1": fra1}})
    except ConfigError as exc:
        return exc.lines
    return []


def test_the_refusals_docs_workloads_md_shows_are_prods_own() -> None:
    acme = "regions.fra1.tenants.acme.virtualMachines"

    def vms(region: dict[str, Any]) -> dict[str, Any]:
        return dict(region["tenants"]["acme"]["virtualMachines"])

    def unknown(region: dict[str, Any]) -> None:
        region["tenants"]["acme"]["virtualMachines"]["desk-01"]["instancetype"] = {"name": "u1.huge"}

    assert prod_problems(unknown) == [
        f"{acme}.desk-01.instancetype.name: 'u1.huge' is not a cluster instancetype of the cell; name one of "
        "kubevirt.instancetypes (vgpu.l40s-12q) or KubeVirt v1.9.0's common ones (common-instancetypes v1.7.0)"
    ]

    def not_allowed(region: dict[str, Any]) -> None:
        region["imageCatalogs"]["os-images"]["tenants"] = ["globex"]
        for name in ("train-01", "cad-01"):
            del region["tenants"]["acme"]["virtualMachines"][name]

    assert prod_problems(not_allowed) == [
        f"{acme}.desk-01.rootDisk.source.image: 'os-images/ubuntu-2404' is a DataSource tenant acme may not use: "
        "imageCatalogs.os-images.tenants lists globex; add acme there, or import the image for this tenant"
    ]

    def script(region: dict[str, Any]) -> None:
        region["tenants"]["acme"]["virtualMachines"]["train-01"]["cloudInit"] = {"userData": "#!/bin/bash\nreboot\n"}

    assert prod_problems(script) == [
        f"{acme}.train-01.cloudInit.userData: is a shell script, not cloud-config; gpucell merges its users and SSH "
        "keys into cloud-config user data only; write it as #cloud-config (a script goes under runcmd)"
    ]

    def own_user(region: dict[str, Any]) -> None:
        user_data = "#cloud-config\nusers: [{name: ubuntu, groups: docker}]\n"
        region["tenants"]["acme"]["virtualMachines"]["train-01"]["cloudInit"] = {"userData": user_data}

    assert prod_problems(own_user) == [
        f"{acme}.train-01.cloudInit.userData.users[0].name: names the VM's own user 'ubuntu' "
        "(virtualMachines.train-01.user), whom gpucell creates with virtualMachines.train-01.sshKeys; drop the entry, "
        "or set virtualMachines.train-01.user to another name"
    ]

    def block_only(region: dict[str, Any]) -> None:
        region["kubevirt"]["vmStateStorageClass"] = "fast-block"

    assert prod_problems(block_only) == [
        "regions.fra1.tenants.globex.virtualMachines.build-01.efi.persistent: keeps EFI NVRAM in a PVC of "
        "StorageClass 'fast-block' (kubevirt.vmStateStorageClass), which the cell does not have; name one of longhorn "
        "there"
    ]
    assert vms(PROD["fra1"])  # the prod region itself is untouched


def test_the_capacity_view_counts_an_instancetypes_gpus() -> None:
    types = {"instancetypes": {"vgpu": {"cpus": 4, "memoryGib": 16, "gpuModel": "L40S", "gpus": 1,
                                        "vgpuProfile": "L40S-24Q"}}}  # fmt: skip
    lines = render_capacity(spec(region(sized(instancetype={"name": "vgpu"}), kubevirt=types)))
    [row] = [line for line in lines if "nvidia.com/NVIDIA_L40S-24Q" in line]
    assert row.split()[-3:] == ["4", "4", "1"]  # capacity (2 GPUs x 2 vGPUs), reserved by acme and globex, used


def test_host_assisted_clones_reach_the_tenants_upload_servers_through_its_default_deny() -> None:
    cell_spec = spec(region(vm()))
    policy = image_clone_policy("acme", cell_spec)
    assert policy is not None
    assert policy["metadata"]["name"] == "tenant-allow-image-clones"
    assert policy["spec"]["endpointSelector"] == {"matchLabels": {"cdi.kubevirt.io": "cdi-upload-server"}}
    assert policy["spec"]["ingress"] == [
        {
            "fromEndpoints": [
                {
                    "matchLabels": {
                        "k8s:io.kubernetes.pod.namespace": "os-images",
                        "k8s:cdi.kubevirt.io": "cdi-clone-source",
                    }
                }
            ],
            "toPorts": [{"ports": [{"port": "8443", "protocol": "TCP"}]}],
        }
    ]
    config = region(vm())
    config["imageCatalogs"]["os-images"]["tenants"] = ["acme"]
    assert image_clone_policy("globex", spec(config)) is None


def test_an_instancetypes_gpu_model_is_one_of_the_stacks_catalog() -> None:
    types = {"instancetypes": {"big": {"cpus": 4, "memoryGib": 16, "gpuModel": "H900", "gpus": 1}}}
    [line] = problems(region(kubevirt=types))
    assert line.startswith("regions.lab.kubevirt.instancetypes.big.gpuModel: 'H900' is not a known GPU model; known: ")
    assert line.endswith(" (add your own under gpucell:gpuModels)")
    vgpu = {
        "instancetypes": {"v": {"cpus": 4, "memoryGib": 16, "gpuModel": "L40S", "gpus": 1, "vgpuProfile": "L40S-99Q"}}
    }
    [line] = problems(region(kubevirt=vgpu))
    assert line.startswith(
        "regions.lab.kubevirt.instancetypes.v.vgpuProfile: 'L40S-99Q' is not a vGPU profile of L40S;"
    )


# -- on a cluster gpucell did not build (ClusterFacts, decision 0019) ------------------------------------------------


def test_cluster_facts_carry_the_vm_platform_and_refuse_what_a_cell_refuses() -> None:
    config = region(vm(instancetype={"name": "gpu.none"}))
    del config["tenants"]["acme"]["virtualMachines"]["vm"]["memoryGib"]
    keys = {field.alias for field in ClusterFacts.model_fields.values()}
    with pytest.raises(ConfigError) as info:
        ClusterFacts.model_validate({k: v for k, v in config.items() if k in keys})
    assert str(info.value) == (
        "tenants.acme.virtualMachines.vm.instancetype.name: 'gpu.none' is not a cluster instancetype of the cell; "
        "name one of kubevirt.instancetypes (none) or KubeVirt v1.9.0's common ones (common-instancetypes v1.7.0)"
    )
    facts = ClusterFacts.from_cell(spec(region(vm())))
    assert list(facts.image_catalogs) == ["os-images"]
    clones = image_clone_policy("globex", facts)
    assert clones is not None
    assert clones["metadata"]["name"] == "tenant-allow-image-clones"


def test_the_vm_platforms_components_take_a_cluster_handle_first_and_have_from_cell() -> None:
    for args in (InstancetypesArgs, ImageCatalogArgs):
        first = dataclasses.fields(args)[0]
        assert (first.name, first.type) == ("cluster", "Cluster")
        assert callable(getattr(args, "from_cell", None))
