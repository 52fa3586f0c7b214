"""GPU models of a stack's own (``gpucell:gpuModels``) or a Python program's: the facts a built-in has, checked by
the same rules, one ``gpuModels.<name>.<key>: ...`` line per mistake, and a model that reaches pools, placement,
KubeVirt, the MIG manager, DRA selectors, quotas and VMs exactly as a built-in one does."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

import pytest
import yaml

from gpucell.admission.inventory import capacity, gpu_offers
from gpucell.catalog.gpu_catalog import CATALOG, NVSWITCHES, GpuArchitecture, GpuModel, NvSwitch, VgpuFramework
from gpucell.day2.disruption import compare, fingerprint
from gpucell.engine.mock_engine import PlanResult, run_program
from gpucell.errors import ConfigError, shown
from gpucell.spec import CellSpec, StackSpec
from gpucell.spec.gpu_models import GpuModelSpec, catalog_in_force, extend_catalog, gpu_catalog
from gpucell.stacks.plan import render_capacity
from gpucell.stacks.program import build_cells
from tests.conftest import REPO, minimal_cell_config
from tests.test_day2 import computed, diff, script_of

GPUS_DOC = (REPO / "docs" / "gpus.md").read_text()
H800: dict[str, Any] = {
    "pciDeviceId": "2322",
    "pciDeviceName": "GH100 [H800 PCIe]",
    "architecture": "Hopper",
    "framebufferMib": 81559,
    "migConfigs": {
        "all-disabled": {},
        "all-1g.10gb": {"1g.10gb": 7},
        "all-balanced": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    },
    "bar1Mib": 131072,
}
"""A board that is not built in (``pci.ids``: ``2322  GH100 [H800 PCIe]``; the MIG manager's default config lists
0x232210DE with the H100 80GB's layouts)."""
L20: dict[str, Any] = {
    "pciDeviceId": "26ba",
    "pciDeviceName": "AD102GL [L20]",
    "architecture": "Ada Lovelace",
    "framebufferMib": 46068,
    "vgpuProfiles": {"L20-24Q": 2, "L20-48Q": 1},
    "vfPciDeviceId": "26ba",
}
RESOURCE = "nvidia.com/GH100_H800_PCIE"
DISK = {"source": {"registry": "docker://quay.io/containerdisks/ubuntu:24.04"}, "sizeGib": 50}
KUBEVIRT = "kubernetes:kubevirt.io/v1:KubeVirt"
VM = "kubernetes:kubevirt.io/v1:VirtualMachine"


# -- the catalog a spec is validated against ---------------------------------------------------------------------
def test_a_user_model_joins_the_built_ins() -> None:
    catalog = extend_catalog({"H800-PCIe-80GB": H800})
    model = catalog["H800-PCIe-80GB"]
    assert list(catalog) == [*CATALOG, "H800-PCIe-80GB"]
    assert (model.passthrough_resource, model.pci_selector, model.memory_gib) == (RESOURCE, "10DE:2322", 79)
    assert dict(model.mig_configs["all-balanced"]) == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    assert model.supports_mig
    assert model.architecture is GpuArchitecture.HOPPER
    assert model.vgpu_framework(580) is VgpuFramework.SRIOV
    assert (model.hgx, model.vf_pci_selector, model.bar1_mib) == (None, None, 131072)


def test_the_built_in_catalog_never_changes_and_a_catalog_is_in_force_only_in_its_block() -> None:
    built_ins = dict(CATALOG)
    catalog = extend_catalog({"H800-PCIe-80GB": H800})
    assert dict(CATALOG) == built_ins
    assert catalog_in_force() is CATALOG

    def fail_inside(inner: Mapping[str, GpuModel]) -> None:
        with gpu_catalog(inner):
            assert "L20" in catalog_in_force()
            raise RuntimeError("a failed validation")

    with gpu_catalog(catalog):
        assert catalog_in_force() is catalog
        with pytest.raises(RuntimeError):
            fail_inside(extend_catalog({"L20": L20}))
        assert catalog_in_force() is catalog  # the inner block's catalog is gone, also after an exception
    assert catalog_in_force() is CATALOG


def test_two_stacks_validated_one_after_the_other_do_not_see_each_others_models() -> None:
    region = minimal_cell_config()
    region["nodePools"]["h800"] = _pool("vm-passthrough", "lab-h800-1", "10.20.0.51")
    own = StackSpec.model_validate({"regions": {"lab": region}, "gpuModels": {"H800-PCIe-80GB": H800}})
    assert own.regions["lab"].node_pools["h800"].model is own.gpu_catalog["H800-PCIe-80GB"]
    assert own.regions["lab"].gpu_catalog is own.gpu_catalog
    with pytest.raises(ConfigError) as caught:
        StackSpec.model_validate({"regions": {"lab": region}})
    assert caught.value.lines[0].startswith(
        "regions.lab.nodePools.h800.gpuModel: 'H800-PCIe-80GB' is not a known GPU model; known: T4, "
    )
    with pytest.raises(ConfigError):
        CellSpec.model_validate(region)  # a cell alone sees the built-ins
    assert own.regions["lab"].node_pools["h800"].model.passthrough_resource == RESOURCE  # kept by the pool


def test_an_hgx_user_model_names_a_known_nvswitch_chip_or_its_own() -> None:
    known = {**H800, "pciDeviceId": "2324", "pciDeviceName": "GH100 [H800]"}
    known["hgx"] = {"gpus": 8, "nvswitch": "GH100", "nvswitches": 4}
    own = {**known, "pciDeviceId": "2338", "pciDeviceName": "GH100 [H100 SXM5 96GB]"}
    own["hgx"] = {
        "gpus": 8,
        "nvswitch": {"pciDeviceId": "22a4", "pciDeviceName": "GH100 [Next NVSwitch]"},
        "nvswitches": 4,
    }
    catalog = extend_catalog({"H800-SXM5-80GB": known, "H100-SXM5-96GB": own})
    board = catalog["H800-SXM5-80GB"].hgx
    assert board is not None
    assert (board.gpus, board.nvswitch, board.nvswitches) == (8, NVSWITCHES["GH100"], 4)
    board = catalog["H100-SXM5-96GB"].hgx
    assert board is not None
    assert board.nvswitch == NvSwitch("22a4", "GH100 [Next NVSwitch]")
    assert (board.nvswitch.pci_selector, board.nvswitch.passthrough_resource) == (
        "10DE:22A4",
        "nvidia.com/GH100_NEXT_NVSWITCH",
    )


def test_vgpu_profiles_and_vf_id() -> None:
    model = extend_catalog({"L20": L20})["L20"]
    assert model.vgpus_per_gpu("L20-24Q") == 2
    assert model.vf_pci_selector == "10DE:26BA"
    assert model.vgpu_resource("L20-48Q") == "nvidia.com/NVIDIA_L20-48Q"


def _with(change: dict[str, Any], base: dict[str, Any] = H800) -> dict[str, Any]:
    return {**copy.deepcopy(base), **change}


MIG_MANAGER = (
    "the GPU Operator v26.7.0 MIG manager (k8s-mig-manager v0.15.0) builds its layouts from the GPU: all-disabled, "
    "all-<profile> ('+' as '.') and all-balanced; gpucell renders no mig-parted config of its own"
)
MISTAKES = [
    (
        {"H800-PCIe-80GB": _with({"pciDeviceId": "2331"})},
        "gpuModels.H800-PCIe-80GB.pciDeviceId: '2331' is already GPU model 'H100-PCIe-80GB'",
    ),
    ({"L4": H800}, "gpuModels.L4: 'L4' is a built-in GPU model; pick another name"),
    ({"a": H800, "b": H800}, "gpuModels.b.pciDeviceId: '2322' is already GPU model 'a'"),
    (
        {"x": _with({"pciDeviceId": "2323", "pciDeviceName": "GH100 [H100 PCIe]"})},
        "gpuModels.x.pciDeviceName: 'GH100 [H100 PCIe]' is advertised as nvidia.com/GH100_H100_PCIE, already the "
        "resource of GPU model 'H100-PCIe-80GB'; one resource cannot stand for two boards",
    ),
    (
        {"x": _with({"pciDeviceName": "AD102 [GeForce RTX 4090 D.]"})},
        "gpuModels.x.pciDeviceName: 'AD102 [GeForce RTX 4090 D.]' becomes the resource "
        "'nvidia.com/AD102_GEFORCE_RTX_4090_D_', which Kubernetes refuses (an extended resource's name is at most 63 "
        "of [A-Za-z0-9_.-], alphanumeric at both ends); give the pci.ids name exactly as lspci prints it",
    ),
    (
        {"x": _with({"pciDeviceId": "0x2322"})},
        "gpuModels.x.pciDeviceId: '0x2322' is not a PCI device id; expected 4 lower-case hex digits like '2331'",
    ),
    (
        {"x": _with({"vfPciDeviceId": "23A1"})},
        "gpuModels.x.vfPciDeviceId: '23A1' is not a PCI device id as lspci and sysfs print it (lower-case hex); "
        "write '23a1'",
    ),
    (
        {"x": _with({"pciDeviceId": "233F"})},
        "gpuModels.x.pciDeviceId: '233F' is not a PCI device id as lspci and sysfs print it (lower-case hex); "
        "write '233f'",
    ),
    (
        {"x": _with({"migConfigs": {"all-7g.141gb": {"7g.141gb": 1}}})},
        "gpuModels.x.migConfigs.all-7g.141gb.7g.141gb: '7g.141gb' needs 141 GB; the framebuffer is 81559 MiB",
    ),
    (
        {"x": _with({"migConfigs": {"all-balanced": {"3g.40gb": 2, "1g.10gb": 2}}})},
        "gpuModels.x.migConfigs.all-balanced: needs 8 compute slices; a GPU has 7",
    ),
    (
        {"x": _with({"migConfigs": {"mine": {"half": 2}}})},
        "gpuModels.x.migConfigs.mine.half: 'half' is not a MIG profile; expected '<slices>g.<GB>gb' like '1g.10gb'",
    ),
    (
        {"x": _with({"migConfigs": {"all-1g.10gb": {"1g.10gb": 0}}})},
        "gpuModels.x.migConfigs.all-1g.10gb.1g.10gb: 0 instances; expected at least 1",
    ),
    (
        {"x": _with({"migConfigs": {"mine": {"3g.40gb": 2}}})},
        "gpuModels.x.migConfigs.mine: 'mine' with {'3g.40gb': 2} is not a layout the MIG manager offers; expected "
        f"one profile, named by the layout (all-3g.40gb): {MIG_MANAGER}",
    ),
    (
        {"x": _with({"migConfigs": {"all-1g.10gb": {"1g.20gb": 4}}})},
        "gpuModels.x.migConfigs.all-1g.10gb: 'all-1g.10gb' with {'1g.20gb': 4} is not a layout the MIG manager "
        f"offers; expected one profile, named by the layout (all-1g.20gb): {MIG_MANAGER}",
    ),
    (
        {"x": _with({"migConfigs": {"all-balanced": {"1g.10gb": 3, "2g.20gb": 1}}})},
        "gpuModels.x.migConfigs.all-balanced: 'all-balanced' with {'1g.10gb': 3, '2g.20gb': 1} is not a layout the "
        f"MIG manager offers; expected 2 x 1g, 1 x 2g and 1 x 3g (1 x 2g on a 4-slice GPU): {MIG_MANAGER}",
    ),
    (
        {"x": _with({"migConfigs": {"all-disabled": {"1g.10gb": 1}}})},
        "gpuModels.x.migConfigs.all-disabled: 'all-disabled' with {'1g.10gb': 1} is not a layout the MIG manager "
        f"offers; expected {{}}: {MIG_MANAGER}",
    ),
    (
        {"x": _with({"vgpuProfiles": {"H800-1-10C": 7}})},
        "gpuModels.x.vgpuProfiles.H800-1-10C: 'H800-1-10C' is not a time-sliced vGPU type; expected "
        "'<board>-<GB><A|B|C|Q>' like 'L40S-12Q'",
    ),
    (
        {"x": _with({"vgpuProfiles": {"H" * 57 + "-8C": 1}})},
        f"gpuModels.x.vgpuProfiles.{'H' * 57}-8C: {shown('H' * 57 + '-8C')} is not a time-sliced vGPU type; expected "
        "'<board>-<GB><A|B|C|Q>' like 'L40S-12Q'",
    ),
    (
        {"x": _with({"vgpuProfiles": {"H800-96C": 1}})},
        "gpuModels.x.vgpuProfiles.H800-96C: 1 vGPUs of 96 GB need 96 GB; the framebuffer is 81559 MiB",
    ),
    (
        {"x": _with({"vgpuProfiles": {"H800-20C": 5}})},
        "gpuModels.x.vgpuProfiles.H800-20C: 5 vGPUs of 20 GB need 100 GB; the framebuffer is 81559 MiB",
    ),
    (
        {"x": _with({"vgpuProfiles": {"H800-20C": 0}})},
        "gpuModels.x.vgpuProfiles.H800-20C: 0 vGPUs per GPU; expected at least 1",
    ),
    (
        {"x": _with({"hgx": {"gpus": 8, "nvswitch": "GB100"}})},
        "gpuModels.x.hgx.nvswitch: 'GB100' is not a known NVSwitch chip; known: GA100, GH100, or give "
        "{pciDeviceId, pciDeviceName}",
    ),
    (
        {"x": _with({"hgx": {"gpus": 8, "nvswitch": "GH100"}})},
        "gpuModels.x.hgx.nvswitches: is 0 with an nvswitch chip named; give the chips on one board (6 on HGX A100, "
        "4 on HGX H100)",
    ),
    (
        {"x": _with({"hgx": {"gpus": 8, "nvswitch": {"pciDeviceId": "22A4", "pciDeviceName": "X"}, "nvswitches": 4}})},
        "gpuModels.x.hgx.nvswitch.pciDeviceId: '22A4' is not a PCI device id as lspci and sysfs print it (lower-case "
        "hex); write '22a4'",
    ),
    (
        {"x": _with({"architecture": "Kepler"})},
        "gpuModels.x.architecture: 'Kepler' is not one of Pascal, Volta, Turing, Ampere, Ada Lovelace, Hopper, "
        "Blackwell",
    ),
    (
        {"x y": H800},
        "gpuModels['x y']: 'x y' is not a GPU model name; expected letters, digits, '.', '_' or '-', up to 63",
    ),
]


@pytest.mark.parametrize(("models", "line"), MISTAKES, ids=[line.split(":")[0] for _, line in MISTAKES])
def test_mistakes_are_one_line_with_the_key_path(models: dict[str, Any], line: str) -> None:
    with pytest.raises(ConfigError) as caught:
        extend_catalog(models)
    assert caught.value.lines == [line]


@pytest.mark.parametrize(("models", "line"), MISTAKES[:6], ids=[line.split(":")[0] for _, line in MISTAKES[:6]])
def test_the_stack_reports_the_same_lines(models: dict[str, Any], line: str) -> None:
    with pytest.raises(ConfigError) as caught:
        StackSpec.model_validate({"regions": {"lab": minimal_cell_config()}, "gpuModels": models})
    assert caught.value.lines == [line]


def test_a_missing_fact_is_named() -> None:
    spec = {k: v for k, v in H800.items() if k != "framebufferMib"}
    with pytest.raises(ConfigError) as caught:
        extend_catalog({"x": spec})
    assert caught.value.lines == ["gpuModels.x.framebufferMib: required key is missing"]


@pytest.mark.parametrize("name", list(CATALOG))
def test_every_built_in_passes_the_user_model_checks(name: str) -> None:
    """The rules a user model meets hold for the built-ins: each built-in, written as a spec, is itself again."""
    model = CATALOG[name]
    hgx = model.hgx
    spec = GpuModelSpec.model_validate(
        {
            "pciDeviceId": model.pci_device_id,
            "pciDeviceName": model.pci_device_name,
            "architecture": model.architecture.value,
            "framebufferMib": model.framebuffer_mib,
            "migConfigs": {config: dict(layout) for config, layout in model.mig_configs.items()},
            "vgpuProfiles": dict(model.vgpu_profiles),
            "vfPciDeviceId": model.vf_pci_device_id,
            "hgx": None
            if hgx is None
            else {
                "gpus": hgx.gpus,
                "nvswitch": next((chip for chip, s in NVSWITCHES.items() if s == hgx.nvswitch), None),
                "nvswitches": hgx.nvswitches,
            },
            "bar1Mib": model.bar1_mib,
        }
    )
    assert spec.to_model(name) == model
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}", name)  # a name a user model could have


# -- from stack config to the rendered cell ------------------------------------------------------------------------
def _pool(mode: str, host: str, address: str, **more: Any) -> dict[str, Any]:
    pool = {"role": "gpu", "gpuModel": "H800-PCIe-80GB", "gpusPerNode": 2, "gpuMode": mode}
    return {**pool, "hosts": [{"name": host, "address": address}], **more}


def h800_region() -> dict[str, Any]:
    """The minimal region with an H800 VM pool, MIG pool and dra pool, and a tenant with a VM on each VM kind."""
    region = minimal_cell_config()
    region["nodePools"]["h800-vm"] = _pool("vm-passthrough", "lab-h800-1", "10.20.0.51")
    region["nodePools"]["h800-mig"] = _pool("container", "lab-h800-2", "10.20.0.52", migConfig="all-1g.10gb")
    region["nodePools"]["h800-dra"] = _pool("dra", "lab-h800-3", "10.20.0.53")
    vm = {"gpuModel": "H800-PCIe-80GB", "memoryGib": 64, "rootDisk": DISK, "noLogin": True}
    region["tenants"] = {
        "acme": {
            "quota": {
                "cpuMillicores": 64000,
                "memoryGib": 512,
                "storageGib": 1000,
                "gpus": {RESOURCE: 2, "nvidia.com/mig-1g.10gb": 14},
                "deviceClasses": {"vfio.gpu.nvidia.com": 2},
            },
            "egress": "internet",
            "virtualMachines": {"train": {**vm, "gpus": 2}, "cad": {**vm, "gpus": 1, "gpuAllocation": "dra"}},
            "notebooks": {"nb": {"gpu": {"count": 2, "migProfile": "1g.10gb", "model": "H800-PCIe-80GB"}}},
        }
    }
    return region


def plan_lab(models: dict[str, Any] | None = None, region: dict[str, Any] | None = None) -> PlanResult:
    """The lab stack through the real program, ``gpucell:gpuModels`` = ``models`` (H800 by default)."""
    config = {
        "gpucell:regions": {"lab": region or h800_region()},
        "gpucell:gpuModels": models if models is not None else {"H800-PCIe-80GB": H800},
        "gpucell:sshPrivateKey": "key",
    }
    return run_program(build_cells, config=config, secret_keys=["gpucell:sshPrivateKey"], computed=computed)


@pytest.fixture(scope="module")
def lab() -> PlanResult:
    return plan_lab()


def _vm(plan: PlanResult, name: str) -> dict[str, Any]:
    (found,) = [r.inputs for r in plan.of_type(VM) if r.inputs["metadata"]["name"] == name]
    return found


def test_a_stack_model_reaches_the_pools_node_labels_and_the_gpu_operator(lab: PlanResult) -> None:
    labels = lab.named("lab-k3s-lab-h800-2-labels").inputs["metadata"]["labels"]
    assert (labels["nvidia.com/gpu.workload.config"], labels["nvidia.com/mig.config"]) == ("container", "all-1g.10gb")
    labels = lab.named("lab-k3s-lab-h800-1-labels").inputs["metadata"]["labels"]
    assert labels["nvidia.com/gpu.workload.config"] == "vm-passthrough"
    assert "nvidia.com/mig.config" not in labels
    values = lab.named("lab-gpu-operator-gpu-operator").inputs["values"]
    assert values["migManager"] == {"enabled": True, "config": {"default": "all-disabled"}}
    assert values["mig"] == {"strategy": "mixed"}
    settle = script_of(lab.named("lab-k3s-lab-h800-2-settle"))
    assert "\nreadonly RESOURCES=(nvidia.com/mig-1g.10gb)\n" in settle
    assert "\nreadonly RESOURCE_COUNTS=(14)\n" in settle  # 7 instances x 2 GPUs


def test_a_stack_model_reaches_permitted_host_devices_and_the_vms(lab: PlanResult) -> None:
    (kubevirt,) = lab.of_type(KUBEVIRT)
    assert kubevirt.inputs["spec"]["configuration"]["permittedHostDevices"] == {
        "pciHostDevices": [
            {"pciVendorSelector": "10DE:2322", "resourceName": RESOURCE, "externalResourceProvider": True}
        ]
    }
    domain = _vm(lab, "train")["spec"]["template"]["spec"]["domain"]
    assert domain["devices"]["gpus"] == [{"name": f"gpu{i}", "deviceName": RESOURCE} for i in range(2)]
    assert domain["cpu"]["model"] == "host-passthrough"  # 2 x bar1Mib 131072 > the 64 GiB firmware window
    (template,) = [
        r
        for r in lab.of_type("kubernetes:resource.k8s.io/v1:ResourceClaimTemplate")
        if r.inputs["metadata"]["name"].startswith("cad-gpus-")
    ]
    selector = template.inputs["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"][0]["cel"]
    assert selector["expression"] == (
        "device.attributes['gpu.nvidia.com'].vendorID == '0x10de' && "
        "device.attributes['gpu.nvidia.com'].deviceID == '0x2322'"
    )
    quota = lab.named("lab-acme-quota").inputs["spec"]["hard"]
    assert (quota[f"requests.{RESOURCE}"], quota["requests.nvidia.com/mig-1g.10gb"]) == ("2", "14")


def test_a_stack_model_is_in_the_capacity_view() -> None:
    spec = StackSpec.model_validate({"regions": {"lab": h800_region()}, "gpuModels": {"H800-PCIe-80GB": H800}})
    cell = spec.regions["lab"]
    assert capacity(gpu_offers(cell.node_pools, "mixed")) == {
        RESOURCE: 2,
        "nvidia.com/gpu": 2,
        "nvidia.com/mig-1g.10gb": 14,
    }
    lines = render_capacity(cell)
    (line,) = [line for line in lines if RESOURCE in line]
    assert line.split() == [RESOURCE, "vm-passthrough", "H800-PCIe-80GB", "(h800-vm)", "2", "2", "2"]
    (dra,) = [line for line in lines if "gpu.nvidia.com+vfio" in line]
    assert "H800-PCIe-80GB (h800-dra)" in dra


# -- day 2 ---------------------------------------------------------------------------------------------------------
def test_a_changed_resource_name_needs_the_quotas_then_converges(lab: PlanResult) -> None:
    renamed = _with({"pciDeviceName": "GH100 [H800 PCIe 80GB]"})
    with pytest.raises(ConfigError) as caught:
        StackSpec.model_validate({"regions": {"lab": h800_region()}, "gpuModels": {"H800-PCIe-80GB": renamed}})
    assert caught.value.lines[0] == (
        f"regions.lab.tenants.acme.quota.gpus.{RESOURCE}: is offered by no pool of the region; offered: "
        "nvidia.com/GH100_H800_PCIE_80GB, nvidia.com/gpu, nvidia.com/mig-1g.10gb"
    )
    region = h800_region()
    quota = region["tenants"]["acme"]["quota"]["gpus"]
    quota["nvidia.com/GH100_H800_PCIE_80GB"] = quota.pop(RESOURCE)
    after = plan_lab({"H800-PCIe-80GB": renamed}, region)
    difference = diff(lab, after)
    assert (difference.added, difference.removed) == (set(), set())
    assert difference.changed == {
        "lab-kubevirt-kubevirt": {"spec"},
        "lab-acme-quota": {"spec"},
        "lab-acme-admission-pods": {"spec"},  # the policies admit what the quota grants, and come before workloads
        "lab-acme-admission-vms": {"spec"},
        "lab-acme-train-vm": {"spec"},
        "lab-k3s-lab-h800-1-prepare": {"create", "update"},
        "lab-k3s-lab-h800-1-settle": {"create", "update"},
    }
    prepare = script_of(after.named("lab-k3s-lab-h800-1-prepare"))
    assert "readonly WANT_GPU=mode=vm-passthrough\n" in prepare  # unchanged: a settled node is not drained
    before = StackSpec.model_validate({"regions": {"lab": h800_region()}, "gpuModels": {"H800-PCIe-80GB": H800}})
    now = StackSpec.model_validate({"regions": {"lab": region}, "gpuModels": {"H800-PCIe-80GB": renamed}})
    assert compare(fingerprint(before.regions["lab"]), fingerprint(now.regions["lab"]), "lab") == []


def test_a_renamed_model_key_changes_nothing_on_the_cell(lab: PlanResult) -> None:
    region = h800_region()
    for pool in region["nodePools"].values():
        if pool.get("gpuModel") == "H800-PCIe-80GB":
            pool["gpuModel"] = "H800"
    tenant = region["tenants"]["acme"]
    for vm in tenant["virtualMachines"].values():
        vm["gpuModel"] = "H800"
    tenant["notebooks"]["nb"]["gpu"]["model"] = "H800"
    difference = diff(lab, plan_lab({"H800": H800}, region))
    assert (difference.added, difference.removed, difference.changed) == (set(), set(), {})


def l20_vgpu_region(model: str = "L20") -> dict[str, Any]:
    """The minimal region with a vm-vgpu pool of ``model`` (an Ada L20 by default: SR-IOV vGPUs with the 580
    driver)."""
    region = minimal_cell_config()
    region["nodePools"]["l20"] = {
        "role": "gpu",
        "gpuModel": model,
        "gpusPerNode": 2,
        "gpuMode": "vm-vgpu",
        "vgpuProfile": "L20-24Q",
        "hosts": [{"name": "lab-l20-1", "address": "10.20.0.61"}],
    }
    region["gpuOperator"] = {
        "vgpuDriverImage": {"repository": "registry.example.com/nvidia", "version": "580.95.02-ubuntu24.04"}
    }
    return region


def test_an_architecture_that_switches_the_vgpu_framework_reconfigures_the_pools_nodes() -> None:
    """An Ada board's vGPUs are SR-IOV VFs with a branch >= 550 driver, a Turing board's are mdevs: the node's GPU
    configuration changes, so its prepare step takes it through a GPU reconfiguration (the maintenance rollout)."""
    before = plan_lab({"L20": L20}, l20_vgpu_region())
    after = plan_lab({"L20": {**L20, "architecture": "Turing"}}, l20_vgpu_region())
    difference = diff(before, after)
    assert set(difference.changed) == {
        "lab-gpu-operator-gpu-operator",
        "lab-kubevirt-kubevirt",
        *(f"lab-k3s-lab-l20-1{step}" for step in ("", "-labels", "-prepare", "-settle")),
    }
    assert "readonly WANT_GPU=mode=vm-vgpu,vgpu=L20-24Q,vgpu-framework=sriov\n" in script_of(
        before.named("lab-k3s-lab-l20-1-prepare")
    )
    assert "readonly WANT_GPU=mode=vm-vgpu,vgpu=L20-24Q,vgpu-framework=mdev\n" in script_of(
        after.named("lab-k3s-lab-l20-1-prepare")
    )
    devices = after.of_type(KUBEVIRT)[0].inputs["spec"]["configuration"]["permittedHostDevices"]
    assert devices["mediatedDevices"][0]["mdevNameSelector"] == "NVIDIA L20-24Q"


def test_a_renamed_model_key_on_an_sriov_vgpu_pool_reruns_only_the_install() -> None:
    before = plan_lab({"L20": L20}, l20_vgpu_region())
    after = plan_lab({"L20-48GB": L20}, l20_vgpu_region("L20-48GB"))
    difference = diff(before, after)
    # Not -prepare, which carries the k3s restart digest (WANT_CONFIG): the install re-runs, k3s does not restart.
    assert (difference.added, difference.removed, set(difference.changed)) == (set(), set(), {"lab-k3s-lab-l20-1"})
    new = script_of(after.named("lab-k3s-lab-l20-1"))
    assert "# SR-IOV vGPU: the service that types this host's L20-48GB VFs as NVIDIA L20-24Q" in new


def test_removing_a_model_a_pool_uses_is_one_line_per_pool() -> None:
    region = minimal_cell_config()
    region["nodePools"]["h800-vm"] = _pool("vm-passthrough", "lab-h800-1", "10.20.0.51")
    with pytest.raises(ConfigError) as caught:
        StackSpec.model_validate({"regions": {"lab": region}})
    assert caught.value.lines == [
        "regions.lab.nodePools.h800-vm.gpuModel: 'H800-PCIe-80GB' is not a known GPU model; known: "
        f"{', '.join(CATALOG)} (add your own under gpucell:gpuModels)"
    ]


def test_a_layout_a_pool_uses_cannot_leave_its_model() -> None:
    fewer = _with({"migConfigs": {"all-disabled": {}, "all-balanced": H800["migConfigs"]["all-balanced"]}})
    with pytest.raises(ConfigError) as caught:
        StackSpec.model_validate({"regions": {"lab": h800_region()}, "gpuModels": {"H800-PCIe-80GB": fewer}})
    assert caught.value.lines == [
        "regions.lab.nodePools.h800-mig.migConfig: 'all-1g.10gb' is not a MIG config of H800-PCIe-80GB; accepted: "
        "all-disabled, all-balanced"
    ]


def test_a_pool_naming_a_model_with_a_mistake_points_at_it() -> None:
    region = minimal_cell_config()
    region["nodePools"]["h800-vm"] = _pool("vm-passthrough", "lab-h800-1", "10.20.0.51")
    broken = _with({"framebufferMib": "80GB"})
    with pytest.raises(ConfigError) as caught:
        StackSpec.model_validate({"regions": {"lab": region}, "gpuModels": {"H800-PCIe-80GB": broken}})
    assert caught.value.lines == [
        "regions.lab.nodePools.h800-vm.gpuModel: 'H800-PCIe-80GB' is a model of gpucell:gpuModels with a mistake "
        "(see its own line); fix it there",
        "gpuModels.H800-PCIe-80GB.framebufferMib: '80GB' is not a whole number",
    ]


@pytest.mark.parametrize(
    ("value", "line"),
    [
        (["H800-PCIe-80GB"], "gpuModels: ['H800-PCIe-80GB'] is not a mapping of keys"),
        ({"H800-PCIe-80GB": "GH100"}, "gpuModels.H800-PCIe-80GB: 'GH100' is not a mapping of keys"),
    ],
)
def test_gpu_models_of_the_wrong_shape_are_one_line(value: Any, line: str) -> None:
    with pytest.raises(ConfigError) as caught:
        plan_lab(value, minimal_cell_config())
    assert caught.value.lines == [line]


def test_gpu_models_as_a_secret_that_is_not_json_is_one_line_without_its_text() -> None:
    config = {
        "gpucell:regions": {"lab": minimal_cell_config()},
        "gpucell:gpuModels": "SENTINEL-not-json",
        "gpucell:sshPrivateKey": "key",
    }
    with pytest.raises(ConfigError) as caught:
        run_program(build_cells, config=config, secret_keys=["gpucell:sshPrivateKey", "gpucell:gpuModels"])
    assert caught.value.lines == [
        "gpuModels: is a secure: value that does not decrypt to a YAML/JSON object (its text is not shown); store it "
        "as plain YAML in the stack file, or encrypt JSON text"
    ]


# -- docs/gpus.md ----------------------------------------------------------------------------------------------------
def _block(language: str) -> str:
    (body,) = re.findall(rf"^```{language}\n(.*?)^```", GPUS_DOC, re.MULTILINE | re.DOTALL)
    return str(body)


def test_the_docs_stack_example_plans() -> None:
    config = yaml.safe_load(_block("yaml"))["config"]
    result = run_program(
        build_cells,
        config={**config, "gpucell:sshPrivateKey": "key"},
        secret_keys=["gpucell:sshPrivateKey"],
        computed=computed,
    )
    (kubevirt,) = result.of_type(KUBEVIRT)
    assert kubevirt.inputs["spec"]["configuration"]["permittedHostDevices"]["pciHostDevices"][0] == {
        "pciVendorSelector": "10DE:2322",
        "resourceName": RESOURCE,
        "externalResourceProvider": True,
    }
    spec = StackSpec.model_validate({"regions": config["gpucell:regions"], "gpuModels": config["gpucell:gpuModels"]})
    resources = capacity(gpu_offers(spec.regions["lab1"].node_pools, "mixed"))
    assert resources == {RESOURCE: 2, "nvidia.com/mig-1g.10gb": 14}


def test_the_docs_error_lines_are_what_the_docs_example_gets() -> None:
    config = yaml.safe_load(_block("yaml"))["config"]
    model = config["gpucell:gpuModels"]["H800-PCIe-80GB"]
    mistakes = [
        {"pciDeviceId": "2331"},
        {"migConfigs": {**model["migConfigs"], "mine": {"3g.40gb": 2}}},
        {"vgpuProfiles": {"H800-96C": 1}},
    ]
    got: list[str] = []
    for change in mistakes:
        with pytest.raises(ConfigError) as caught:
            StackSpec.model_validate(
                {"regions": config["gpucell:regions"], "gpuModels": {"H800-PCIe-80GB": {**model, **change}}}
            )
        got += caught.value.lines
    shown = _block("text").splitlines()
    assert set(shown) <= set(got)
    assert [line for line in shown if line.startswith("gpuModels.")] == [
        line for line in got if line.startswith("gpuModels.")
    ]


def test_the_docs_python_example_runs() -> None:
    namespace: dict[str, Any] = {}
    exec(compile(_block("python"), "docs/gpus.md", "exec"), namespace)
    assert namespace["cell"].node_pools["h800"].model.pci_selector == "10DE:2322"
    assert catalog_in_force() is CATALOG


def test_the_docs_name_every_config_key_of_a_model() -> None:
    keys = {field.alias for field in GpuModelSpec.model_fields.values()}
    assert keys == {
        "pciDeviceId",
        "pciDeviceName",
        "architecture",
        "framebufferMib",
        "migConfigs",
        "vgpuProfiles",
        "vfPciDeviceId",
        "hgx",
        "bar1Mib",
    }
    assert all(f"`{key}`" in GPUS_DOC or f"{key}:" in GPUS_DOC for key in keys)
    config_md = (REPO / "docs" / "config.md").read_text()
    assert all(f"| `gpuModels.*.{key}` |" in config_md for key in keys)
