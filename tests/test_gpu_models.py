"""User-defined GPU models (``gpucell.spec.gpu_models``): the facts a built-in has, checked the same way, and one
``gpuModels.<name>.<key>: ...`` line for each mistake."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpucell.errors import ConfigError
from gpucell.gpu_catalog import CATALOG, NVSWITCHES, GpuArchitecture, VgpuFramework
from gpucell.spec.gpu_models import GpuModelSpec, extend_catalog

H100_NVL: dict[str, Any] = {
    "pciDeviceId": "2321",
    "pciDeviceName": "GH100 [H100 NVL]",
    "architecture": "Hopper",
    "framebufferMib": 95830,
    "migConfigs": {
        "all-disabled": {},
        "all-1g.12gb": {"1g.12gb": 7},
        "all-7g.94gb": {"7g.94gb": 1},
        "all-balanced": {"1g.12gb": 2, "2g.24gb": 1, "3g.47gb": 1},
    },
    "bar1Mib": 131072,
}


def test_a_user_model_joins_the_built_ins() -> None:
    catalog = extend_catalog({"H100-NVL-94GB": H100_NVL})
    model = catalog["H100-NVL-94GB"]
    assert list(catalog)[: len(CATALOG)] == list(CATALOG)
    assert (model.passthrough_resource, model.pci_selector, model.memory_gib) == (
        "nvidia.com/GH100_H100_NVL",
        "10DE:2321",
        93,
    )
    assert dict(model.mig_configs["all-balanced"]) == {"1g.12gb": 2, "2g.24gb": 1, "3g.47gb": 1}
    assert model.supports_mig
    assert model.architecture is GpuArchitecture.HOPPER
    assert model.vgpu_framework(580) is VgpuFramework.SRIOV
    assert (model.hgx, model.vf_pci_selector, model.bar1_mib) == (None, None, 131072)


def test_an_hgx_user_model_names_its_nvswitch_chip() -> None:
    spec = {
        **H100_NVL,
        "pciDeviceId": "2324",
        "pciDeviceName": "GH100 [H800]",
        "hgx": {"gpus": 8, "nvswitch": "GH100", "nvswitches": 4},
    }
    hgx = extend_catalog({"H800-SXM5-80GB": spec})["H800-SXM5-80GB"].hgx
    assert hgx is not None
    assert (hgx.gpus, hgx.nvswitch, hgx.nvswitches) == (8, NVSWITCHES["GH100"], 4)


def test_vgpu_profiles_and_vf_id() -> None:
    spec = {
        "pciDeviceId": "26b5",
        "pciDeviceName": "AD102GL [L40]",
        "architecture": "Ada Lovelace",
        "framebufferMib": 46068,
        "vgpuProfiles": {"L40-24Q": 2, "L40-48Q": 1},
        "vfPciDeviceId": "26b5",
    }
    model = extend_catalog({"L40": spec})["L40"]
    assert model.vgpus_per_gpu("L40-24Q") == 2
    assert model.vf_pci_selector == "10DE:26B5"
    assert model.vgpu_resource("L40-48Q") == "nvidia.com/NVIDIA_L40-48Q"


@pytest.mark.parametrize(
    ("models", "line"),
    [
        (
            {"H100-NVL-94GB": {**H100_NVL, "pciDeviceId": "2331"}},
            "gpuModels.H100-NVL-94GB.pciDeviceId: '2331' is already GPU model 'H100-PCIe-80GB'",
        ),
        ({"L4": H100_NVL}, "gpuModels.L4: 'L4' is a built-in GPU model; pick another name"),
        ({"a": H100_NVL, "b": H100_NVL}, "gpuModels.b.pciDeviceId: '2321' is already GPU model 'a'"),
        (
            {"x": {**H100_NVL, "pciDeviceId": "0x2321"}},
            "gpuModels.x.pciDeviceId: '0x2321' is not a PCI device id; expected 4 lower-case hex digits like '2331'",
        ),
        (
            {"x": {**H100_NVL, "vfPciDeviceId": "23A1"}},
            "gpuModels.x.vfPciDeviceId: '23A1' is not a PCI device id; expected 4 lower-case hex digits like '2331'",
        ),
        (
            {"x": {**H100_NVL, "migConfigs": {"all-7g.141gb": {"7g.141gb": 1}}}},
            "gpuModels.x.migConfigs.all-7g.141gb.7g.141gb: '7g.141gb' needs 141 GB; the framebuffer is 95830 MiB",
        ),
        (
            {"x": {**H100_NVL, "migConfigs": {"mine": {"3g.47gb": 2, "1g.12gb": 2}}}},
            "gpuModels.x.migConfigs.mine: needs 8 compute slices; a GPU has 7",
        ),
        (
            {"x": {**H100_NVL, "migConfigs": {"mine": {"half": 2}}}},
            "gpuModels.x.migConfigs.mine.half: 'half' is not a MIG profile; expected '<slices>g.<GB>gb' like '1g.10gb'",
        ),
        (
            {"x": {**H100_NVL, "migConfigs": {"mine": {"1g.12gb": 0}}}},
            "gpuModels.x.migConfigs.mine.1g.12gb: 0 instances; expected at least 1",
        ),
        (
            {"x": {**H100_NVL, "hgx": {"gpus": 8, "nvswitch": "GB100"}}},
            "gpuModels.x.hgx.nvswitch: 'GB100' is not a known NVSwitch chip; known: GA100, GH100",
        ),
        (
            {"x": {**H100_NVL, "architecture": "Volta"}},
            "gpuModels.x.architecture: 'Volta' is not one of Turing, Ampere, Ada Lovelace, Hopper, Blackwell",
        ),
        (
            {"x y": H100_NVL},
            "gpuModels['x y']: 'x y' is not a GPU model name; expected letters, digits, '.', '_' or '-', up to 63",
        ),
    ],
)
def test_mistakes_are_one_line_with_the_key_path(models: dict[str, Any], line: str) -> None:
    with pytest.raises(ConfigError) as caught:
        extend_catalog(models)
    assert caught.value.lines == [line]


def test_a_missing_fact_is_named() -> None:
    spec = {k: v for k, v in H100_NVL.items() if k != "framebufferMib"}
    with pytest.raises(ConfigError) as caught:
        extend_catalog({"x": spec})
    assert [line.split(":")[0] for line in caught.value.lines] == ["gpuModels.x.framebufferMib"]


def test_the_docs_example_runs() -> None:
    """docs/gpus.md's Python example is what ``extend_catalog`` accepts (its assert is the check)."""
    text = (Path(__file__).parent.parent / "docs" / "gpus.md").read_text()
    example = text.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {}
    exec(compile(example, "docs/gpus.md", "exec"), namespace)
    assert namespace["catalog"]["H100-NVL-94GB"].memory_gib == 93


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
