"""The GPU catalog against the GPU Operator's own MIG layouts, and the resource names it derives."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gpucell.gpu_catalog import CATALOG, GpuModel, mig_resource_name
from tests.conftest import UPSTREAM

MIG_CONFIGMAP = UPSTREAM / "gpu-operator" / "state-mig-manager" / "0400_configmap.yaml"


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


def test_catalog_covers_the_required_models() -> None:
    assert {"T4", "A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM-141GB", "L4", "L40S", "B200"} <= set(CATALOG)
    assert len(MIG_CASES) > 30


@pytest.mark.parametrize(
    ("model_name", "resource", "selector"),
    [
        ("T4", "nvidia.com/TU104GL_TESLA_T4", "10DE:1EB8"),
        ("H100-SXM5-80GB", "nvidia.com/GH100_H100_SXM5_80GB", "10DE:2330"),
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
    assert l40s.vgpu_mdev_name("L40S-24Q") == "NVIDIA L40S-24Q"
    assert l40s.vgpus_per_gpu("L40S-12Q") == 4
    assert not l40s.supports_mig
    assert CATALOG["H100-SXM5-80GB"].supports_mig
