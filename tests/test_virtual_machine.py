"""GpuVirtualMachine: the rendered VirtualMachine (GPUs, CPUs, memory, disks, placement), cloud-init Secret,
SSH Service and policy, dependency edges, and conformance of everything it renders."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pulumi
import pytest
import yaml
from pulumi.runtime.mocks import MockResourceArgs

from gpucell.catalog.gpu_catalog import CATALOG, needs_host_cpu_model
from gpucell.cell import RegionalCell, RegionalCellArgs
from gpucell.components.kubevirt import permitted_host_devices
from gpucell.engine.mock_engine import SECRET, PlanResult, Registration, run_program
from gpucell.spec import CellSpec
from gpucell.spec.tenancy import TenantSpec
from gpucell.spec.workloads import GpuVirtualMachineSpec
from gpucell.stacks.conformance.run import check_region
from gpucell.stacks.conformance.schemas import SchemaStore
from gpucell.tenancy._common import vm_placement
from gpucell.tenancy.tenant import Tenant, TenantArgs
from gpucell.workloads import GpuVirtualMachine, GpuVirtualMachineArgs
from gpucell.workloads.virtual_machine import (
    cloud_config,
    ssh_service_manifest,
    virtual_machine_manifest,
)
from tests.conftest import SCHEMA_CHECKERS, SECURITY, UPSTREAM, cell, minimal_cell_config
from tests.conftest import workload as component
from tests.conftest import workload_children as child

VM = "kubernetes:kubevirt.io/v1:VirtualMachine"
SECRET_TYPE = "kubernetes:core/v1:Secret"
SERVICE = "kubernetes:core/v1:Service"
CNP = "kubernetes:cilium.io/v2:CiliumNetworkPolicy"
COMPONENT = "gpucell:index:GpuVirtualMachine"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGpucell alice@example.net"
H100 = "nvidia.com/GH100_H100_SXM5_80GB"
L40S_24Q = "nvidia.com/NVIDIA_L40S-24Q"
LABELS = {
    "app.kubernetes.io/name": "train",
    "app.kubernetes.io/managed-by": "gpucell",
    "gpucell.io/tenant": "acme",
}
KUBECONFIG = "apiVersion: v1\nclusters:\n- cluster:\n    server: https://127.0.0.1:6443\n  name: d\n"


def region() -> CellSpec:
    """The minimal region plus an 8-GPU HGX H100 passthrough pool with a topology profile (2 x 112 CPUs, 2 x 960
    1 GiB hugepages) and a taint, and an L40S vGPU pool (SR-IOV with the branch-580 driver)."""
    config = minimal_cell_config()
    config["imageNamespaces"] = ["images"]  # the golden images the test VMs clone from
    config["storage"] = {"otherClasses": ["local-nvme"]}  # a data disk's class, installed outside gpucell
    pools = config["nodePools"]
    pools["h100-vm"] = {
        "role": "gpu",
        "gpuModel": "H100-SXM5-80GB",
        "gpusPerNode": 8,
        "gpuMode": "vm-passthrough",
        "hosts": [{"name": "h100-1", "address": "10.20.0.41"}],
        "topology": {"reservedCpus": "0-3", "cpusPerNuma": 112, "memoryPerNumaGib": 1000, "hugepages1GiPerNuma": 960},
        "taints": ["gpucell.io/dedicated=vm:NoSchedule", "gpucell.io/maintenance:NoExecute"],
    }
    pools["l40s-vgpu"] = {
        "role": "gpu",
        "gpuModel": "L40S",
        "gpusPerNode": 2,
        "gpuMode": "vm-vgpu",
        "vgpuProfile": "L40S-24Q",
        "hosts": [{"name": "l40s-v-1", "address": "10.20.0.61"}],
    }
    image = {"repository": "registry.example.com/nvidia", "version": "580.95.02"}
    config["gpuOperator"] = {"vgpuDriverImage": image}
    return cell(config)


def vm_spec(**fields: Any) -> GpuVirtualMachineSpec:
    base: dict[str, Any] = {
        "memoryGib": 16,
        "rootDisk": {"source": {"registry": "docker://quay.io/containerdisks/ubuntu:24.04"}, "sizeGib": 50},
        "sshKeys": [KEY],
    }
    return GpuVirtualMachineSpec.model_validate({**base, **fields})


PASSTHROUGH = vm_spec(
    gpuModel="H100-SXM5-80GB",
    gpus=8,
    cpu={"cores": 64, "sockets": 2, "threads": 1},
    memoryGib=1536,
    dedicatedCpus=True,
    hugepages="1Gi",
    numaPassthrough=True,
    user="alice",
    dataDisks=[
        {"source": {"http": "https://images.example.net/scratch.qcow2"}, "sizeGib": 2000, "storageClass": "local-nvme"}
    ],
    sshService={"type": "NodePort", "allowFromCidrs": ["203.0.113.0/24", "198.51.100.7/32"]},
)
VGPU = vm_spec(gpuModel="L40S", gpus=1, vgpuProfile="L40S-24Q", sshService={"type": "ClusterIP"})
CPU_ONLY = vm_spec(
    cpu={"cores": 4},
    memoryGib=8,
    runStrategy="Halted",
    rootDisk={"source": {"pvc": "images/ubuntu-24-04"}, "sizeGib": 30, "accessMode": "ReadWriteMany"},
)
ACME = TenantSpec.model_validate(
    {
        "quota": {
            "cpuMillicores": 200_000,
            "memoryGib": 4096,
            "storageGib": 10_000,
            "gpus": {H100: 8, L40S_24Q: 1},
            "nodePorts": 1,
        },
        "egress": "internet",  # CDI imports the registry and http disks from the tenant namespace
        "virtualMachines": {"train": PASSTHROUGH, "viz": VGPU, "bastion": CPU_ONLY},
    }
)


def computed(args: MockResourceArgs) -> dict[str, Any]:
    if args.typ == "command:remote:Command" and args.name.endswith("-kubeconfig"):
        return {"stdout": KUBECONFIG}
    return {}


def deploy(**vms: GpuVirtualMachineSpec) -> PlanResult:
    """A cell, its tenant ``acme`` and one GpuVirtualMachine per entry."""

    def program() -> None:
        lab = RegionalCell("lab", RegionalCellArgs(cell=region(), ssh_private_key=pulumi.Output.secret("k")))
        tenant = Tenant("lab-acme", TenantArgs.from_cell("acme", ACME, lab))
        for vm_name, vm in vms.items():
            component = GpuVirtualMachine(f"lab-acme-{vm_name}", GpuVirtualMachineArgs(vm_name, vm, tenant))
            pulumi.export(f"{vm_name}-namespace", component.namespace)
            pulumi.export(f"{vm_name}-name", component.vm_name)

    return run_program(program, computed=computed)


def rendered(name: str, vm: GpuVirtualMachineSpec, cell_spec: CellSpec | None = None) -> dict[str, Any]:
    """The VirtualMachine ``name`` of tenant ``acme`` in ``cell_spec`` (default :func:`region`), placed as the
    component places it."""
    cell_spec = region() if cell_spec is None else cell_spec
    return virtual_machine_manifest("acme", name, vm, cell_spec, vm_placement(name, vm, cell_spec))


def template_spec(manifest: dict[str, Any]) -> dict[str, Any]:
    return manifest["spec"]["template"]["spec"]


# -- the rendered VirtualMachine, by value ------------------------------------------------------------------


def test_passthrough_vm_gets_eight_gpus_dedicated_cpus_hugepages_and_guest_numa() -> None:
    manifest = rendered("train", PASSTHROUGH)
    assert manifest["apiVersion"] == "kubevirt.io/v1"
    assert manifest["kind"] == "VirtualMachine"
    assert manifest["metadata"] == {"name": "train", "namespace": "tenant-acme", "labels": LABELS}
    assert manifest["spec"]["runStrategy"] == "Always"
    assert manifest["spec"]["template"]["metadata"] == {"labels": {**LABELS, "gpucell.io/workload": "train"}}
    domain = template_spec(manifest)["domain"]
    assert domain["cpu"] == {
        "cores": 64,
        "sockets": 2,
        "threads": 1,
        "dedicatedCpuPlacement": True,
        "numa": {"guestMappingPassthrough": {}},
        "model": "host-passthrough",  # 8 x 128 GiB BAR1: the guest firmware's MMIO window must fit them
    }
    assert domain["memory"] == {"guest": "1536Gi", "hugepages": {"pageSize": "1Gi"}}
    # limits = requests: the tenant quota counts limits, and KubeVirt would default the memory limit to 2x
    assert domain["resources"] == {
        "requests": {"cpu": "128", "memory": "1536Gi"},
        "limits": {"cpu": "128", "memory": "1536Gi"},
    }
    assert domain["devices"]["gpus"] == [{"name": f"gpu{i}", "deviceName": H100} for i in range(8)]
    # The whole HGX board: its four NVSwitches too (the guest runs Fabric Manager)
    assert domain["devices"]["hostDevices"] == [
        {"name": f"nvswitch{i}", "deviceName": "nvidia.com/GH100_H100_NVSWITCH"} for i in range(4)
    ]
    assert domain["devices"]["disks"] == [
        {"name": "root", "disk": {"bus": "virtio"}, "bootOrder": 1},
        {"name": "data0", "disk": {"bus": "virtio"}},
        {"name": "cloudinitdisk", "disk": {"bus": "virtio"}},
    ]
    assert domain["devices"]["interfaces"] == [{"name": "default", "masquerade": {}}]
    assert template_spec(manifest)["networks"] == [{"name": "default", "pod": {}}]


def test_passthrough_vm_is_pinned_to_its_pool_and_mode_and_tolerates_the_pool_taints() -> None:
    spec = template_spec(rendered("train", PASSTHROUGH))
    assert spec["affinity"] == {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "gpucell.io/pool", "operator": "In", "values": ["h100-vm"]},
                            {"key": "nvidia.com/gpu.workload.config", "operator": "In", "values": ["vm-passthrough"]},
                        ]
                    }
                ],
            }
        }
    }
    assert spec["tolerations"] == [
        {"key": "gpucell.io/dedicated", "operator": "Equal", "value": "vm", "effect": "NoSchedule"},
        {"key": "gpucell.io/maintenance", "operator": "Exists", "effect": "NoExecute"},
    ]


def test_vgpu_vm_asks_for_the_vgpu_resource_on_the_vgpu_pool() -> None:
    manifest = rendered("viz", VGPU)
    spec = template_spec(manifest)
    assert spec["domain"]["devices"]["gpus"] == [{"name": "gpu0", "deviceName": L40S_24Q}]
    assert spec["domain"]["cpu"] == {"cores": 2, "sockets": 1, "threads": 1}
    assert spec["domain"]["memory"] == {"guest": "16Gi"}
    expressions = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ][0]["matchExpressions"]
    assert expressions == [
        {"key": "gpucell.io/pool", "operator": "In", "values": ["l40s-vgpu"]},
        {"key": "nvidia.com/gpu.workload.config", "operator": "In", "values": ["vm-vgpu"]},
    ]
    assert "tolerations" not in spec


def test_gpu_device_names_are_what_the_kubevirt_cr_permits() -> None:
    cell_spec = region()
    permitted = permitted_host_devices(cell_spec.node_pools, cell_spec.gpu_operator.vgpu_driver_image)
    pci = {d["resourceName"] for d in permitted["pciHostDevices"]}
    assert "mediatedDevices" not in permitted  # the L40S vGPUs are SR-IOV VFs, permitted as PCI devices
    for vm in (PASSTHROUGH, VGPU):
        devices = template_spec(rendered("vm", vm, cell_spec))["domain"]["devices"]
        names = {g["deviceName"] for g in devices["gpus"]} | {h["deviceName"] for h in devices.get("hostDevices", [])}
        assert names <= pci


def test_several_large_bar_gpus_get_the_hosts_cpu_model_as_kubevirt_names_it() -> None:
    four = vm_spec(gpuModel="H100-SXM5-80GB", gpus=4, memoryGib=256, hugepages="1Gi")
    one = vm_spec(gpuModel="H100-SXM5-80GB", gpus=1, memoryGib=64, hugepages="1Gi")
    assert template_spec(rendered("four", four))["domain"]["cpu"]["model"] == "host-passthrough"
    assert "model" not in template_spec(rendered("one", one))["domain"]["cpu"]  # one BAR fits KubeVirt's default
    assert (
        needs_host_cpu_model(CATALOG["L4"], 2),
        needs_host_cpu_model(CATALOG["L40S"], 2),
        needs_host_cpu_model(CATALOG["A100-SXM4-80GB"], 2),
        needs_host_cpu_model(CATALOG["T4"], 8),
    ) == (False, True, True, False)
    # the field and its special value as KubeVirt v1.9.0's API documents them
    cpu = json.loads((UPSTREAM / "kubevirt" / "swagger.json").read_text())["definitions"]["v1.CPU"]["properties"]
    assert cpu["model"]["type"] == "string"
    assert '"host-passthrough" to get the same CPU as the node' in cpu["model"]["description"]


def test_part_of_an_hgx_board_runs_with_nvlink_off() -> None:
    half = vm_spec(gpuModel="H100-SXM5-80GB", gpus=4, memoryGib=256, hugepages="1Gi")
    placement = vm_placement("half", half, region())
    assert (placement.nvlink_disabled, placement.nvswitch_resource, placement.nvswitch_count) == (True, None, 0)
    assert "hostDevices" not in template_spec(rendered("half", half))["domain"]["devices"]
    config = yaml.safe_load(cloud_config(half, nvlink_disabled=True).removeprefix("#cloud-config\n"))
    assert config["write_files"] == [
        {
            "path": "/etc/modprobe.d/gpucell-nvlink.conf",
            "permissions": "0644",
            "content": "# gpucell: this VM holds part of an HGX board and none of its NVSwitches; with NVLink on, the "
            "driver waits forever for the NVLink fabric.\noptions nvidia NVreg_NvLinkDisable=1\n",
        }
    ]
    whole = vm_placement("train", PASSTHROUGH, region())
    assert (whole.nvlink_disabled, whole.nvswitch_count) == (False, 4)
    assert "write_files" not in yaml.safe_load(cloud_config(PASSTHROUGH).removeprefix("#cloud-config\n"))


def test_the_cloud_init_secret_of_a_partial_board_vm_disables_nvlink() -> None:
    half = vm_spec(gpuModel="H100-SXM5-80GB", gpus=2, memoryGib=64, hugepages="1Gi")
    # each as the tenant's VM "train": beside the whole-board VM the tenant's 8 H100s of quota would not hold it
    for vm, expected in ((half, True), (PASSTHROUGH, False)):
        secret = deploy(train=vm).named("lab-acme-train-cloud-init")
        user_data = secret.raw_inputs["stringData"]["userdata"]
        assert ("options nvidia NVreg_NvLinkDisable=1" in user_data) is expected


def test_cpu_only_vm_lands_on_the_cpu_pool_without_gpus_or_pinning() -> None:
    manifest = rendered("bastion", CPU_ONLY)
    spec = template_spec(manifest)
    assert manifest["spec"]["runStrategy"] == "Halted"
    assert "gpus" not in spec["domain"]["devices"]
    assert spec["domain"]["cpu"] == {"cores": 4, "sockets": 1, "threads": 1}
    assert spec["domain"]["memory"] == {"guest": "8Gi"}
    assert spec["domain"]["resources"] == {
        "requests": {"cpu": "4", "memory": "8Gi"},
        "limits": {"cpu": "4", "memory": "8Gi"},
    }
    assert spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpucell.io/pool", "operator": "In", "values": ["cpu"]}]}]
    }
    assert "tolerations" not in spec


def test_data_volume_templates_one_per_disk_root_first() -> None:
    manifest = rendered("train", PASSTHROUGH)
    assert manifest["spec"]["dataVolumeTemplates"] == [
        {
            "metadata": {"name": "train-root", "labels": LABELS},
            "spec": {
                "source": {"registry": {"url": "docker://quay.io/containerdisks/ubuntu:24.04"}},
                "storage": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "50Gi"}}},
            },
        },
        {
            "metadata": {"name": "train-data0", "labels": LABELS},
            "spec": {
                "source": {"http": {"url": "https://images.example.net/scratch.qcow2"}},
                "storage": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "2000Gi"}},
                    "storageClassName": "local-nvme",
                },
            },
        },
    ]
    volumes = template_spec(manifest)["volumes"]
    assert volumes[:2] == [
        {"name": "root", "dataVolume": {"name": "train-root"}},
        {"name": "data0", "dataVolume": {"name": "train-data0"}},
    ]


def test_pvc_source_is_cloned_from_namespace_and_name() -> None:
    manifest = rendered("bastion", CPU_ONLY)
    (template,) = manifest["spec"]["dataVolumeTemplates"]
    assert template["spec"] == {
        "source": {"pvc": {"namespace": "images", "name": "ubuntu-24-04"}},
        "storage": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "30Gi"}}},
    }


def test_eviction_strategy_is_none_for_gpus_and_rwo_disks_and_live_migrates_otherwise() -> None:
    cell_spec = region()

    def eviction(vm: GpuVirtualMachineSpec) -> str:
        return template_spec(rendered("vm", vm, cell_spec))["evictionStrategy"]

    assert eviction(PASSTHROUGH) == "None"
    assert eviction(VGPU) == "None"
    assert eviction(vm_spec()) == "None"  # CPU-only, but its root disk is ReadWriteOnce
    # Only a GPU-less VM whose disks are all ReadWriteMany may live-migrate.
    assert eviction(CPU_ONLY) == "LiveMigrateIfPossible"


def test_vm_reads_its_cloud_init_from_the_secret() -> None:
    volumes = template_spec(rendered("train", PASSTHROUGH))["volumes"]
    assert volumes[-1] == {
        "name": "cloudinitdisk",
        "cloudInitNoCloud": {"secretRef": {"name": "train-cloud-init"}},
    }


def test_cloud_config_creates_the_user_with_the_keys() -> None:
    text = cloud_config(PASSTHROUGH)
    assert text.startswith("#cloud-config\n")
    assert yaml.safe_load(text) == {
        "users": [
            {
                "name": "alice",
                "lock_passwd": True,
                "shell": "/bin/bash",
                "sudo": "ALL=(ALL) NOPASSWD:ALL",
                "ssh_authorized_keys": [KEY],
            }
        ],
        "ssh_pwauth": False,
        "disable_root": True,
    }


def test_a_service_needs_a_name_starting_with_a_letter() -> None:
    with pytest.raises(ValueError, match=r"VM '9vm' has an sshService, so its name must start with a letter"):
        ssh_service_manifest("acme", "9vm", VGPU)


# -- the component: children, secrets, edges, conformance -------------------------------------------------


@pytest.fixture(scope="module")
def plan() -> PlanResult:
    return deploy(train=PASSTHROUGH, viz=VGPU, bastion=CPU_ONLY)


def test_children_are_named_after_the_component(plan: PlanResult) -> None:
    assert component(plan, "train").type == COMPONENT
    assert sorted(r.name for r in plan.children(component(plan, "train"))) == [
        "lab-acme-train-cloud-init",
        "lab-acme-train-ssh",
        "lab-acme-train-ssh-policy",
        "lab-acme-train-vm",
    ]
    assert sorted(r.name for r in plan.children(component(plan, "bastion"))) == [
        "lab-acme-bastion-cloud-init",
        "lab-acme-bastion-vm",
    ]


def test_registered_vm_is_the_rendered_manifest(plan: PlanResult) -> None:
    (vm,) = child(plan, "train", VM)
    expected = rendered("train", PASSTHROUGH)
    assert {k: vm.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")} == expected
    assert plan.outputs["train-namespace"] == "tenant-acme"
    assert plan.outputs["train-name"] == "train"


def test_cloud_init_secret_holds_the_user_data_as_a_secret(plan: PlanResult) -> None:
    (secret,) = child(plan, "train", SECRET_TYPE)
    assert secret.inputs["metadata"] == {
        "name": "train-cloud-init",
        "namespace": "tenant-acme",
        "labels": LABELS,
    }
    assert secret.inputs["type"] == "Opaque"
    # pulumi-kubernetes marks a Secret's whole stringData secret: the plan never prints the user data.
    assert secret.inputs["stringData"] == SECRET
    assert secret.raw_inputs["stringData"] == {"userdata": cloud_config(PASSTHROUGH)}
    assert KEY in secret.raw_inputs["stringData"]["userdata"]


def test_node_port_ssh_service_admits_only_its_client_networks(plan: PlanResult) -> None:
    (service,) = child(plan, "train", SERVICE)
    assert service.inputs["metadata"] == {"name": "train", "namespace": "tenant-acme", "labels": LABELS}
    assert service.inputs["spec"] == {
        "type": "NodePort",
        "selector": {"gpucell.io/workload": "train"},
        "ports": [{"name": "ssh", "protocol": "TCP", "port": 22, "targetPort": 22}],
        "externalTrafficPolicy": "Local",
    }
    (policy,) = child(plan, "train", CNP)
    assert policy.inputs["metadata"] == {"name": "train-ssh", "namespace": "tenant-acme", "labels": LABELS}
    assert policy.inputs["spec"] == {
        "endpointSelector": {"matchLabels": {"gpucell.io/workload": "train"}},
        "ingress": [
            {
                "fromCIDRSet": [{"cidr": "203.0.113.0/24"}, {"cidr": "198.51.100.7/32"}],
                "toPorts": [{"ports": [{"port": "22", "protocol": "TCP"}]}],
            }
        ],
    }


def test_cluster_ip_ssh_service_needs_no_policy_and_no_service_without_ssh(plan: PlanResult) -> None:
    (service,) = child(plan, "viz", SERVICE)
    assert service.inputs["spec"]["type"] == "ClusterIP"
    assert "externalTrafficPolicy" not in service.inputs["spec"]
    assert child(plan, "viz", CNP) == []
    assert child(plan, "bastion", SERVICE) == []


def test_every_child_waits_for_the_tenant_kubevirt_and_cdi(plan: PlanResult) -> None:
    tenant_ready = {r.urn for r in plan.children(plan.named("lab-acme"))}
    assert plan.named("lab-acme-namespace").urn in tenant_ready
    assert plan.named("lab-acme-quota").urn in tenant_ready
    assert plan.named("lab-acme-default-deny").urn in tenant_ready
    kubevirt_cr = plan.named("lab-kubevirt-kubevirt").urn
    cdi_cr = plan.named("lab-cdi-cdi").urn
    profile = plan.named("lab-cdi-storage-profile").urn
    for vm in ("train", "viz", "bastion"):
        children = plan.children(component(plan, vm))
        assert children
        for registration in children:
            edges = set(registration.dependencies)
            assert {*tenant_ready, kubevirt_cr, cdi_cr, profile} <= edges, registration.name
    (vm_reg,) = child(plan, "train", VM)
    (secret,) = child(plan, "train", SECRET_TYPE)
    assert secret.urn in vm_reg.dependencies


def test_children_use_the_cells_provider(plan: PlanResult) -> None:
    assert {r.provider for r in plan.children(component(plan, "train"))} == {"lab-k8s"}


def revealed(registrations: list[Registration]) -> list[Registration]:
    """The registrations with their inputs as rendered: a Secret's stringData is recorded as "[secret]" (a
    string where the schema wants an object), so conformance checks the revealed object; nothing leaves the
    test."""
    return [replace(r, inputs=r.raw_inputs) for r in registrations]


def test_rendered_objects_pass_conformance_with_zero_problems(plan: PlanResult) -> None:
    ours = [r for vm in ("train", "viz", "bastion") for r in plan.descendants(component(plan, vm))]
    assert {r.type for r in ours} == {VM, SECRET_TYPE, SERVICE, CNP}
    checked = [r for r in ours if r.type != CNP]  # the policy: see the next test
    report = check_region("lab", revealed(checked), region(), SchemaStore(UPSTREAM), checkers=SCHEMA_CHECKERS)
    assert report.problems == []


def test_rendered_objects_pass_checkov(plan: PlanResult, checkov: str) -> None:
    checked = [r for vm in ("train", "viz", "bastion") for r in plan.descendants(component(plan, vm)) if r.type != CNP]
    report = check_region("lab", revealed(checked), region(), SchemaStore(UPSTREAM), checkers=SECURITY)
    assert report.problems == []
    assert report.checkov_skipped == 0


def test_ssh_policy_passes_conformance(plan: PlanResult) -> None:
    policies = child(plan, "train", CNP)
    report = check_region("lab", revealed(policies), region(), SchemaStore(UPSTREAM), checkers=SCHEMA_CHECKERS)
    assert report.problems == []
