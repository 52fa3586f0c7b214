"""The GPU catalog against the GPU Operator's own MIG layouts and vGPU configs, its memory rule, and the resource
names it derives."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gpucell.catalog.gpu_catalog import (
    CATALOG,
    NVSWITCHES,
    GpuModel,
    VgpuFramework,
    mig_resource_name,
    pci_resource_name,
)
from tests.conftest import UPSTREAM

MIG_CONFIGMAP = UPSTREAM / "gpu-operator" / "state-mig-manager" / "0400_configmap.yaml"
VGPU_CONFIGMAP = UPSTREAM / "gpu-operator" / "state-vgpu-device-manager" / "0500_configmap.yaml"


def _upstream_mig_configs() -> dict[str, list[dict[str, Any]]]:
    configmap = yaml.safe_load(MIG_CONFIGMAP.read_text())
    return yaml.safe_load(configmap["data"]["config.yaml"])["mig-configs"]


def _entry_for(entries: list[dict[str, Any]], model: GpuModel) -> dict[str, Any] | None:
    """The layout mig-parted applies to this device: the entry whose device-filter names it, or an unfiltered one."""
    device = f"0x{model.pci_device_id.upper()}10DE"
    for entry in entries:
        device_filter = entry.get("device-filter")
        if device_filter is None:
            return entry
        filters = [device_filter] if isinstance(device_filter, str) else device_filter
        if device in (f.upper().replace("0X", "0x") for f in filters):
            return entry
    return None


MIG_CASES = [(m.name, name) for m in CATALOG.values() for name in m.mig_configs]


@pytest.mark.parametrize(("model_name", "config_name"), MIG_CASES)
def test_mig_layouts_match_gpu_operator(model_name: str, config_name: str) -> None:
    model = CATALOG[model_name]
    entries = _upstream_mig_configs()[config_name]
    entry = _entry_for(entries, model)
    assert entry is not None, f"{config_name} does not apply to {model.pci_selector}"
    expected = entry.get("mig-devices") or {} if entry["mig-enabled"] else {}
    assert dict(model.mig_configs[config_name]) == expected


def test_catalog_covers_the_current_datacenter_boards() -> None:
    assert list(CATALOG) == [
        "T4",
        "A100-SXM4-40GB",
        "A100-SXM4-80GB",
        "A100-PCIe-40GB",
        "A100-PCIe-80GB",
        "H100-SXM5-80GB",
        "H100-PCIe-80GB",
        "H100-NVL-94GB",
        "GH200-96GB",
        "H200-SXM-141GB",
        "A10",
        "L4",
        "L40",
        "L40S",
        "B200",
    ]
    assert len(MIG_CASES) == 10 * 8  # 10 MIG boards, 8 layouts each
    assert len({m.pci_device_id for m in CATALOG.values()}) == len(CATALOG)
    assert len({m.passthrough_resource for m in CATALOG.values()}) == len(CATALOG)


@pytest.mark.parametrize(
    ("model_name", "resource", "selector"),
    [
        ("T4", "nvidia.com/TU104GL_TESLA_T4", "10DE:1EB8"),
        ("H100-SXM5-80GB", "nvidia.com/GH100_H100_SXM5_80GB", "10DE:2330"),
        ("H100-PCIe-80GB", "nvidia.com/GH100_H100_PCIE", "10DE:2331"),
        ("H100-NVL-94GB", "nvidia.com/GH100_H100L_94GB", "10DE:2321"),
        ("GH200-96GB", "nvidia.com/GH100_GH200_120GB___480GB", "10DE:2342"),
        ("A100-PCIe-40GB", "nvidia.com/GA100_A100_PCIE_40GB", "10DE:20B1"),
        ("A100-PCIe-80GB", "nvidia.com/GA100_A100_PCIE_80GB", "10DE:20B5"),
        ("A10", "nvidia.com/GA102GL_A10", "10DE:2236"),
        ("L40", "nvidia.com/AD102GL_L40", "10DE:26B5"),
        ("H200-SXM-141GB", "nvidia.com/GH100_H200_SXM_141GB", "10DE:2335"),
        ("L40S", "nvidia.com/AD102GL_L40S", "10DE:26B9"),
        ("B200", "nvidia.com/GB100_B200", "10DE:2901"),
    ],
)
def test_passthrough_resource_names(model_name: str, resource: str, selector: str) -> None:
    model = CATALOG[model_name]
    assert model.passthrough_resource == resource
    assert model.pci_selector == selector


def test_mig_and_vgpu_names() -> None:
    assert mig_resource_name("1g.10gb") == "nvidia.com/mig-1g.10gb"
    l40s = CATALOG["L40S"]
    assert l40s.vgpu_resource("L40S-24Q") == "nvidia.com/NVIDIA_L40S-24Q"
    assert l40s.vgpu_type_name("L40S-24Q") == "NVIDIA L40S-24Q"
    assert l40s.vgpus_per_gpu("L40S-12Q") == 4
    assert not l40s.supports_mig
    assert CATALOG["H100-SXM5-80GB"].supports_mig


def _upstream_vgpu_configs() -> dict[str, list[dict[str, Any]]]:
    configmap = yaml.safe_load(VGPU_CONFIGMAP.read_text())
    return yaml.safe_load(configmap["data"]["config.yaml"])["vgpu-configs"]


VGPU_CASES = [(m.name, profile) for m in CATALOG.values() for profile in m.vgpu_profiles]


@pytest.mark.parametrize(("model_name", "profile"), VGPU_CASES)
def test_vgpu_counts_match_the_gpu_operator(model_name: str, profile: str) -> None:
    """Each catalogued type is a valid ``nvidia.com/vgpu.config`` of the operator, with its vGPUs per GPU."""
    entries = _upstream_vgpu_configs()[profile]
    assert entries == [{"devices": "all", "vgpu-devices": {profile: CATALOG[model_name].vgpus_per_gpu(profile)}}]


def test_vgpu_cases_cover_the_boards() -> None:
    assert len(VGPU_CASES) == 8 + 13 + 17 + 17  # T4, L4, L40, L40S
    assert CATALOG["L40S"].vgpus_per_gpu("L40S-1Q") == 32  # not 48 / 1: the operator caps the board at 32 vGPUs
    assert CATALOG["L40S"].vgpus_per_gpu("L40S-2Q") == 24


@pytest.mark.parametrize(
    ("model_name", "framebuffer_mib", "memory_gib"),
    [
        ("T4", 15360, 15),
        ("A100-SXM4-40GB", 40537, 39),
        ("A100-SXM4-80GB", 81920, 80),
        ("A100-PCIe-40GB", 40960, 40),
        ("A100-PCIe-80GB", 81920, 80),
        ("H100-NVL-94GB", 95830, 93),
        ("GH200-96GB", 97871, 95),
        ("A10", 23028, 22),
        ("L40", 46068, 44),
        ("H100-SXM5-80GB", 81559, 79),
        ("H100-PCIe-80GB", 81559, 79),
        ("H200-SXM-141GB", 143771, 140),
        ("L4", 23034, 22),
        ("L40S", 46068, 44),
        ("B200", 183359, 179),
    ],
)
def test_memory_is_the_nvidia_smi_framebuffer_rounded_down(
    model_name: str, framebuffer_mib: int, memory_gib: int
) -> None:
    model = CATALOG[model_name]
    assert (model.framebuffer_mib, model.memory_gib) == (framebuffer_mib, memory_gib)


def test_h200_mig_profiles_are_the_ones_nvidia_smi_lists() -> None:
    """nvidia-smi mig -lgip on an H200 (580.159.04): 1g.18gb x7, 1g.18gb+me x1, 1g.35gb x4, 2g.35gb x3, 3g.71gb
    x2, 4g.71gb x1, 7g.141gb x1; the catalog's uniform layouts are those counts (``+me`` is not a layout)."""
    configs = CATALOG["H200-SXM-141GB"].mig_configs
    uniform = {
        name.removeprefix("all-"): dict(layout)
        for name, layout in configs.items()
        if name not in ("all-disabled", "all-balanced")
    }
    assert uniform == {
        "1g.18gb": {"1g.18gb": 7},
        "1g.35gb": {"1g.35gb": 4},
        "2g.35gb": {"2g.35gb": 3},
        "3g.71gb": {"3g.71gb": 2},
        "4g.71gb": {"4g.71gb": 1},
        "7g.141gb": {"7g.141gb": 1},
    }


@pytest.mark.parametrize(
    ("model_name", "driver_branch", "framework"),
    [
        ("T4", 580, VgpuFramework.MDEV),
        ("L40S", 535, VgpuFramework.MDEV),
        ("L40S", 550, VgpuFramework.SRIOV),
        ("L4", 580, VgpuFramework.SRIOV),
        ("H200-SXM-141GB", 595, VgpuFramework.SRIOV),
    ],
)
def test_vgpu_framework_follows_architecture_and_driver(
    model_name: str, driver_branch: int, framework: VgpuFramework
) -> None:
    assert CATALOG[model_name].vgpu_framework(driver_branch) is framework


def test_vf_selector_only_where_observed() -> None:
    assert CATALOG["L40S"].vf_pci_selector == "10DE:26B9"
    assert [m.name for m in CATALOG.values() if m.vf_pci_selector is not None] == ["L40S"]


def test_no_ampere_or_hopper_vgpu_type_is_catalogued() -> None:
    """vgpu_framework's reason: sources disagree on Ampere's framework on Linux 6.8; no Hopper VF id is observed."""
    assert [m.name for m in CATALOG.values() if m.vgpu_profiles] == ["T4", "L4", "L40", "L40S"]


@pytest.mark.parametrize(
    ("chip", "resource", "selector"),
    [
        ("GH100", "nvidia.com/GH100_H100_NVSWITCH", "10DE:22A3"),
        ("GA100", "nvidia.com/GA100_A100_NVSWITCH", "10DE:1AF1"),
    ],
)
def test_nvswitch_names(chip: str, resource: str, selector: str) -> None:
    assert NVSWITCHES[chip].passthrough_resource == resource
    assert NVSWITCHES[chip].pci_selector == selector


def test_hgx_boards() -> None:
    h100, h200, a100, b200 = (CATALOG[n].hgx for n in ("H100-SXM5-80GB", "H200-SXM-141GB", "A100-SXM4-80GB", "B200"))
    assert h100 is not None
    assert h200 is not None
    assert a100 is not None
    assert b200 is not None
    assert (h100.gpus, h100.nvswitch, h100.nvswitches) == (8, NVSWITCHES["GH100"], 4)
    assert h200 == h100
    assert (a100.nvswitch, a100.nvswitches) == (NVSWITCHES["GA100"], 6)
    assert b200.nvswitch is None
    assert CATALOG["L40S"].hgx is None
    for pcie in ("H100-PCIe-80GB", "H100-NVL-94GB", "A100-PCIe-40GB", "A100-PCIe-80GB", "GH200-96GB", "A10", "L40"):
        assert CATALOG[pcie].hgx is None  # no HGX baseboard, no NVSwitch


def test_pci_resource_name_follows_the_plugin_rule() -> None:
    assert pci_resource_name("GA102GL [A10]") == "nvidia.com/GA102GL_A10"
    assert pci_resource_name("GH100 [H100 PCIe]") == "nvidia.com/GH100_H100_PCIE"
    assert pci_resource_name("GA100 [A100 SXM4 40GB/80GB]") == "nvidia.com/GA100_A100_SXM4_40GB_80GB"
    assert pci_resource_name("AD102 [GeForce RTX 4090 D.]") == "nvidia.com/AD102_GEFORCE_RTX_4090_D_"
