"""GPU models a stack or a Python program adds to the built-in catalog (:data:`gpucell.gpu_catalog.CATALOG`).

A user model carries the same facts as a built-in one (PCI identity, framebuffer, MIG layouts, vGPU types, SR-IOV
VF id, HGX board, BAR1) and is checked the same way before anything is deployed: a name or PCI device id that a
built-in model already has, a malformed PCI id, a MIG profile larger than the framebuffer or a layout needing more
than the GPU's 7 compute slices is refused, one ``gpuModels.<name>.<key>: ...`` line each.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pydantic import Field, StrictInt, field_validator, model_validator

from gpucell.errors import SpecError, shown
from gpucell.gpu_catalog import CATALOG, NVSWITCHES, GpuArchitecture, GpuModel, HgxBoard
from gpucell.spec._base import SpecModel

__all__ = ["GpuCatalogSpec", "GpuModelSpec", "HgxBoardSpec", "extend_catalog"]

_PCI_ID = re.compile(r"[0-9a-f]{4}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
_MIG_PROFILE = re.compile(r"(?P<slices>[1-7])g\.(?P<gb>\d+)gb(\+me|\+gfx|-me|\+me\.all)?")
_MAX_MIG_SLICES = 7
"""Compute slices (GPCs available to MIG) of every MIG-capable board: NVIDIA MIG User Guide, "Supported GPUs"."""


def _mig_slices(layout: Mapping[str, int]) -> int:
    """Compute slices a layout takes: the leading ``<n>g`` of each profile times its instances."""
    return sum(int(profile.split("g.", 1)[0]) * count for profile, count in layout.items())


class HgxBoardSpec(SpecModel):
    """The HGX baseboard of an SXM model (:class:`gpucell.gpu_catalog.HgxBoard`)."""

    gpus: StrictInt = Field(ge=1, le=16)
    """GPUs on one board (count)."""
    nvswitch: str | None = None
    """NVSwitch chip by its ``NVSWITCHES`` key (``GH100``, ``GA100``); ``None`` refuses whole-board VMs."""
    nvswitches: StrictInt = Field(default=0, ge=0, le=16)
    """NVSwitch chips on one board (count)."""

    @field_validator("nvswitch")
    @classmethod
    def _known_chip(cls, value: str | None) -> str | None:
        if value is not None and value not in NVSWITCHES:
            raise ValueError(f"is not a known NVSwitch chip; known: {', '.join(NVSWITCHES)}")
        return value


class GpuModelSpec(SpecModel):
    """One GPU model from stack config (``gpuModels.<name>``) or Python, with :class:`GpuModel`'s fields.

    ``pciDeviceId``/``vfPciDeviceId``: 4 lower-case hex digits (vendor is ``10de``). ``pciDeviceName``: the
    ``pci.ids`` name exactly as ``lspci -nn`` prints it on the node; the passthrough resource derives from it
    (:func:`gpucell.gpu_catalog.pci_resource_name`). ``framebufferMib``: ``nvidia-smi``'s total, MiB.
    ``migConfigs``: ``nvidia.com/mig.config`` name -> profile -> instances, as the mig-manager config you deploy
    lists them. ``vgpuProfiles``: vGPU type -> vGPUs per GPU, as the vGPU device manager config lists them.
    ``bar1Mib``: ``nvidia-smi -q`` "BAR1 Memory Usage: Total", MiB (default 256).
    """

    pci_device_id: str
    """PCI device ID, 4 lower-case hex digits (``2331``)."""
    pci_device_name: str = Field(min_length=1, max_length=120)
    """Device name as ``pci.ids`` spells it (``GH100 [H100 PCIe]``)."""
    architecture: GpuArchitecture
    """Architecture generation (decides the vGPU framework)."""
    framebuffer_mib: StrictInt = Field(ge=1024, le=4 * 1024 * 1024)
    """Framebuffer per GPU as ``nvidia-smi`` reports it, MiB."""
    mig_configs: dict[str, dict[str, StrictInt]] = Field(default_factory=dict)
    """``nvidia.com/mig.config`` name -> MIG profile -> instances per GPU. Empty: no MIG."""
    vgpu_profiles: dict[str, StrictInt] = Field(default_factory=dict)
    """vGPU type (``L40S-24Q``) -> vGPUs of it per GPU. Empty: no vGPU."""
    vf_pci_device_id: str | None = None
    """PCI device ID the board's SR-IOV VFs report, where observed; ``None`` refuses SR-IOV vGPU pools."""
    hgx: HgxBoardSpec | None = None
    """The HGX baseboard of an SXM model; ``None`` for PCIe boards."""
    bar1_mib: StrictInt = Field(default=256, ge=1)
    """BAR1 aperture per GPU, MiB."""

    @field_validator("pci_device_id", "vf_pci_device_id")
    @classmethod
    def _pci_id(cls, value: str | None) -> str | None:
        if value is not None and not _PCI_ID.fullmatch(value):
            raise ValueError("is not a PCI device id; expected 4 lower-case hex digits like '2331'")
        return value

    @field_validator("vgpu_profiles")
    @classmethod
    def _vgpu_counts(cls, value: dict[str, int]) -> dict[str, int]:
        for profile, count in value.items():
            if count < 1:
                raise ValueError(f"{shown(profile)} holds {count} vGPUs per GPU; expected at least 1")
        return value

    @model_validator(mode="after")
    def _mig_fits(self) -> GpuModelSpec:
        for config, layout in self.mig_configs.items():
            for profile, count in layout.items():
                _check_profile(config, profile, count, self.framebuffer_mib)
            slices = _mig_slices(layout)
            if slices > _MAX_MIG_SLICES:
                raise SpecError(("migConfigs", config), f"needs {slices} compute slices; a GPU has {_MAX_MIG_SLICES}")
        return self

    def to_model(self, name: str) -> GpuModel:
        """The :class:`GpuModel` this spec describes, under catalog key ``name``."""
        hgx = (
            None
            if self.hgx is None
            else HgxBoard(
                gpus=self.hgx.gpus, nvswitch=NVSWITCHES.get(self.hgx.nvswitch or ""), nvswitches=self.hgx.nvswitches
            )
        )
        return GpuModel(
            name=name,
            pci_device_id=self.pci_device_id,
            pci_device_name=self.pci_device_name,
            architecture=self.architecture,
            framebuffer_mib=self.framebuffer_mib,
            mig_configs=MappingProxyType({c: MappingProxyType(dict(lay)) for c, lay in self.mig_configs.items()}),
            vgpu_profiles=MappingProxyType(dict(self.vgpu_profiles)),
            vf_pci_device_id=self.vf_pci_device_id,
            hgx=hgx,
            bar1_mib=self.bar1_mib,
        )


def _check_profile(config: str, profile: str, count: int, framebuffer_mib: int) -> None:
    """A MIG profile is ``<slices>g.<GB>gb`` (optionally ``+me``/``+gfx``) no larger than the framebuffer."""
    match = _MIG_PROFILE.fullmatch(profile)
    if match is None:
        raise SpecError(
            ("migConfigs", config, profile),
            f"{shown(profile)} is not a MIG profile; expected '<slices>g.<GB>gb' like '1g.10gb'",
        )
    if count < 1:
        raise SpecError(("migConfigs", config, profile), f"{count} instances; expected at least 1")
    # Profile names round memory to whole GB (1e9 bytes): 7g.80gb on an 81559 MiB H100 (85.5 GB).
    framebuffer_gb = framebuffer_mib * 1024 * 1024 / 1e9
    if int(match["gb"]) > framebuffer_gb:
        raise SpecError(
            ("migConfigs", config, profile),
            f"{shown(profile)} needs {match['gb']} GB; the framebuffer is {framebuffer_mib} MiB",
        )


class GpuCatalogSpec(SpecModel):
    """The ``gpuModels`` map (catalog key -> :class:`GpuModelSpec`), checked against ``base`` (the built-ins).

    Raises :class:`~gpucell.errors.ConfigError` for a key that is not a catalog name (``[A-Za-z0-9][A-Za-z0-9._-]``,
    up to 63), a name or PCI device id a built-in model has, or two user models with one PCI device id.
    """

    gpu_models: dict[str, GpuModelSpec] = Field(default_factory=dict)
    """Catalog key (``H100-NVL-94GB``) -> model."""

    @model_validator(mode="after")
    def _unique(self) -> GpuCatalogSpec:
        by_id = {m.pci_device_id: m.name for m in CATALOG.values()}
        for name, spec in self.gpu_models.items():
            if not _NAME.fullmatch(name):
                raise SpecError(
                    ("gpuModels", name),
                    f"{shown(name)} is not a GPU model name; expected letters, digits, '.', '_' or '-', up to 63",
                )
            if name in CATALOG:
                raise SpecError(("gpuModels", name), f"{shown(name)} is a built-in GPU model; pick another name")
            if spec.pci_device_id in by_id:
                raise SpecError(
                    ("gpuModels", name, "pciDeviceId"),
                    f"{shown(spec.pci_device_id)} is already GPU model {shown(by_id[spec.pci_device_id])}",
                )
            by_id[spec.pci_device_id] = name
        return self

    def catalog(self) -> Mapping[str, GpuModel]:
        """The built-in catalog plus these models, built-ins first: catalog key -> :class:`GpuModel`."""
        return MappingProxyType({**CATALOG, **{n: s.to_model(n) for n, s in self.gpu_models.items()}})


def extend_catalog(models: Mapping[str, GpuModelSpec | Mapping[str, Any]]) -> Mapping[str, GpuModel]:
    """The built-in catalog plus ``models`` (catalog key -> :class:`GpuModelSpec` or its camelCase dict).

    ``extend_catalog({"H100-NVL-94GB": {"pciDeviceId": "2321", ...}})["H100-NVL-94GB"].passthrough_resource``.
    Raises :class:`~gpucell.errors.ConfigError` with ``gpuModels.<name>.<key>: ...`` lines.
    """
    return GpuCatalogSpec.model_validate({"gpuModels": dict(models)}).catalog()
