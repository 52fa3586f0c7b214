"""GPU models of a stack's own (``gpucell:gpuModels``) or a Python program's, beside the built-in ones
(:data:`gpucell.catalog.gpu_catalog.CATALOG`), and the catalog a spec is validated against.

A user model carries the same facts as a built-in one (PCI identity, framebuffer, MIG layouts, vGPU types, SR-IOV
VF id, HGX board and NVSwitch chip, BAR1) and meets the same rules, which every built-in passes too
(``tests/test_gpu_models.py``): one ``gpuModels.<name>.<key>: ...`` line per mistake, before anything is deployed.

**The catalog in force.** Specs that name a model (``nodePools.<pool>.gpuModel``) resolve it in the catalog in
force while they are validated: the built-ins, or inside ``with gpu_catalog(catalog):`` the given one.
:class:`~gpucell.spec.StackSpec` puts its own ``gpuModels`` in force for its regions; a cell and each pool keep the
catalog they were validated with (:attr:`gpucell.spec.CellSpec.gpu_catalog`, :attr:`gpucell.spec.NodePool.model`),
so rendering never looks a model up again. The catalog in force is a :class:`contextvars.ContextVar`, set for the
``with`` block only: nothing global changes, and two stacks, regions or tests validated one after the other (or
at once, in other threads) never see each other's models.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any

import pydantic
from pydantic import ConfigDict, Field, StrictInt, field_validator, model_validator

from gpucell.catalog.gpu_catalog import (
    CATALOG,
    NVSWITCHES,
    GpuArchitecture,
    GpuModel,
    HgxBoard,
    NvSwitch,
    pci_resource_name,
)
from gpucell.errors import ConfigError, SpecError, shown
from gpucell.spec._base import SpecModel

__all__ = [
    "GpuCatalogSpec",
    "GpuModelSpec",
    "HgxBoardSpec",
    "NvSwitchSpec",
    "catalog_in_force",
    "check_gpu_models",
    "extend_catalog",
    "gpu_catalog",
    "stack_catalog",
    "unknown_model",
]

_PCI_ID = re.compile(r"[0-9a-f]{4}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
_MIG_PROFILE = re.compile(r"(?P<slices>[1-7])g\.(?P<gb>\d+)gb(?P<attributes>\+me|\+gfx|-me|\+me\.all)?")
_RESOURCE_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
"""The name part of an extended resource (a Kubernetes qualified name), which the device plugin registers."""
_VGPU_TYPE = re.compile(r"(?P<board>[A-Za-z0-9]+(-[A-Za-z][A-Za-z0-9]*)*)-(?P<gb>[1-9][0-9]{0,2})(?P<series>[ABCQ])")
"""A time-sliced vGPU type as NVIDIA names it: ``<board>-<framebuffer GB><series>`` (``L40S-12Q``, ``A10-4C``,
``RTX5000-Ada-8Q``); MIG-backed types (``A100-1-5C``) are not time-sliced and do not match."""
_MAX_VGPU_TYPE = 63 - len("NVIDIA_")
"""A vGPU type is advertised as ``nvidia.com/NVIDIA_<type>``, whose name part Kubernetes caps at 63."""
_MAX_MIG_SLICES = 7
"""Compute slices (GPCs available to MIG) of every MIG-capable board: NVIDIA MIG User Guide, "Supported GPUs"."""
_BALANCED = ({1: 2, 2: 1, 3: 1}, {1: 2, 2: 1})
"""``all-balanced`` as k8s-mig-manager v0.15.0 builds it from the GPU (``pkg/mig/builder/balanced.go``
``balancedFormula``): slices -> instances on a 7-slice GPU, and on a 4-slice one."""
_MIG_MANAGER_LAYOUTS = (
    "the GPU Operator v26.7.0 MIG manager (k8s-mig-manager v0.15.0) builds its layouts from the GPU: all-disabled, "
    "all-<profile> ('+' as '.') and all-balanced; gpucell renders no mig-parted config of its own"
)

_IN_FORCE: ContextVar[Mapping[str, GpuModel]] = ContextVar("gpucell_gpu_catalog", default=CATALOG)
_BROKEN: ContextVar[frozenset[str]] = ContextVar("gpucell_gpu_models_with_mistakes", default=frozenset())
"""Names of the stack's own models that have a mistake (left out of the catalog in force), so that a pool naming
one says where the problem is instead of calling the model unknown."""


def catalog_in_force() -> Mapping[str, GpuModel]:
    """The catalog specs are validated against now: :data:`~gpucell.catalog.gpu_catalog.CATALOG` outside any
    :func:`gpu_catalog` block."""
    return _IN_FORCE.get()


@contextlib.contextmanager
def gpu_catalog(
    catalog: Mapping[str, GpuModel], *, with_mistakes: frozenset[str] = frozenset()
) -> Iterator[Mapping[str, GpuModel]]:
    """Validate the specs built inside the block against ``catalog`` (:func:`extend_catalog`'s result), in this
    thread or task only; the previous catalog is back when the block ends, also on an exception. ``with_mistakes``
    names models of the stack left out of ``catalog`` for a mistake of their own.

    ``with gpu_catalog(extend_catalog({...})): cell = CellSpec.model_validate({...})``.
    """
    token, broken = _IN_FORCE.set(catalog), _BROKEN.set(with_mistakes)
    try:
        yield catalog
    finally:
        _BROKEN.reset(broken)
        _IN_FORCE.reset(token)


def unknown_model(name: str, catalog: Mapping[str, GpuModel]) -> str:
    """The message for a ``gpuModel`` that ``catalog`` lacks: a typo or a model removed from ``gpuModels``, or (while
    a stack is validated) one of its models with a mistake."""
    if name in _BROKEN.get():
        return f"{shown(name)} is a model of gpucell:gpuModels with a mistake (see its own line); fix it there"
    return f"{shown(name)} is not a known GPU model; known: {', '.join(catalog)} (add your own under gpucell:gpuModels)"


def _mig_slices(layout: Mapping[str, int]) -> int:
    """Compute slices a layout takes: the leading ``<n>g`` of each profile times its instances."""
    return sum(int(profile.split("g.", 1)[0]) * count for profile, count in layout.items())


def _check_pci_id(value: str | None) -> str | None:
    """``value`` when it is 4 lower-case hex digits. An upper-case id is refused, not lowered: the id is compared
    with what ``lspci -n`` and sysfs print (lower case), and the line names the spelling to write."""
    if value is not None and not _PCI_ID.fullmatch(value):
        if _PCI_ID.fullmatch(value.lower()):
            raise ValueError(
                f"is not a PCI device id as lspci and sysfs print it (lower-case hex); write {value.lower()!r}"
            )
        raise ValueError("is not a PCI device id; expected 4 lower-case hex digits like '2331'")
    return value


def _check_resource_name(pci_device_name: str) -> str:
    """A ``pci.ids`` name whose resource (:func:`gpucell.catalog.gpu_catalog.pci_resource_name`) the device plugin can
    register: an extended resource's name is a qualified name, alphanumeric at both ends, at most 63."""
    resource = pci_resource_name(pci_device_name)
    if not _RESOURCE_NAME.fullmatch(resource.removeprefix("nvidia.com/")):
        raise ValueError(
            f"becomes the resource {shown(resource)}, which Kubernetes refuses (an extended resource's name is at "
            "most 63 of [A-Za-z0-9_.-], alphanumeric at both ends); give the pci.ids name exactly as lspci prints it"
        )
    return pci_device_name


def _chip_or_object(schema: dict[str, Any]) -> None:
    """The JSON Schema of :class:`NvSwitchSpec`: a chip name of ``NVSWITCHES`` or the object."""
    described = dict(schema)
    schema.clear()
    schema["anyOf"] = [{"type": "string", "enum": list(NVSWITCHES)}, described]


class NvSwitchSpec(SpecModel):
    """An NVSwitch chip: a name of :data:`~gpucell.catalog.gpu_catalog.NVSWITCHES` (``GH100``) or its PCI identity."""

    model_config = ConfigDict(json_schema_extra=_chip_or_object)

    pci_device_id: str
    """PCI device ID, 4 lower-case hex digits (``lspci -nn`` on the host: ``[10de:22a3]``)."""
    pci_device_name: str = Field(min_length=1, max_length=120)
    """Device name as ``pci.ids`` (the sandbox device plugin's copy) spells it; the resource derives from it."""

    _pci_id = field_validator("pci_device_id")(_check_pci_id)
    _name = field_validator("pci_device_name")(_check_resource_name)

    @model_validator(mode="before")
    @classmethod
    def _known_chip(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        chip = NVSWITCHES.get(value)
        if chip is None:
            raise ValueError(
                f"is not a known NVSwitch chip; known: {', '.join(NVSWITCHES)}, or give {{pciDeviceId, pciDeviceName}}"
            )
        return {"pciDeviceId": chip.pci_device_id, "pciDeviceName": chip.pci_device_name}

    def to_chip(self) -> NvSwitch:
        """The :class:`NvSwitch` this spec describes (equal to the ``NVSWITCHES`` entry it names)."""
        return NvSwitch(self.pci_device_id, self.pci_device_name)


class HgxBoardSpec(SpecModel):
    """The HGX baseboard of an SXM model (:class:`gpucell.catalog.gpu_catalog.HgxBoard`)."""

    gpus: StrictInt = Field(ge=1, le=16)
    """GPUs on one board (count)."""
    nvswitch: NvSwitchSpec | None = None
    """The board's NVSwitch chip: an ``NVSWITCHES`` name (``GH100``, ``GA100``) or ``{pciDeviceId, pciDeviceName}``;
    none refuses whole-board VMs (their guests would wait for an NVLink fabric)."""
    nvswitches: StrictInt = Field(default=0, ge=0, le=16)
    """NVSwitch chips on one board (count): 6 on HGX A100, 4 on HGX H100/H200. At least 1 with ``nvswitch``."""

    @model_validator(mode="after")
    def _chips_counted(self) -> HgxBoardSpec:
        if self.nvswitch is not None and self.nvswitches == 0:
            raise SpecError(
                ("nvswitches",),
                "is 0 with an nvswitch chip named; give the chips on one board (6 on HGX A100, 4 on HGX H100)",
            )
        return self

    def to_board(self) -> HgxBoard:
        """The :class:`HgxBoard` this spec describes."""
        chip = None if self.nvswitch is None else self.nvswitch.to_chip()
        return HgxBoard(gpus=self.gpus, nvswitch=chip, nvswitches=self.nvswitches)


class GpuModelSpec(SpecModel):
    """One GPU model from stack config (``gpucell:gpuModels.<name>``) or Python, with :class:`GpuModel`'s facts.

    ``pciDeviceId``/``vfPciDeviceId``: 4 lower-case hex digits (vendor is ``10de``). ``pciDeviceName``: the
    ``pci.ids`` name exactly as ``lspci -nn`` prints it on the node; the passthrough resource derives from it
    (:func:`gpucell.catalog.gpu_catalog.pci_resource_name`). ``framebufferMib``: ``nvidia-smi``'s total, MiB.
    ``migConfigs``: ``nvidia.com/mig.config`` name -> profile -> instances, named as the MIG manager builds them
    from the GPU (``all-disabled: {}``, ``all-<profile>: {<profile>: <most instances>}``, ``all-balanced``).
    ``vgpuProfiles``: time-sliced vGPU type -> vGPUs per GPU, as the vGPU device manager config lists them.
    ``bar1Mib``: ``nvidia-smi -q`` "BAR1 Memory Usage: Total", MiB (default 256).
    """

    pci_device_id: str
    """PCI device ID, 4 lower-case hex digits (``2331``)."""
    pci_device_name: str = Field(min_length=1, max_length=120)
    """Device name as ``pci.ids`` spells it (``GH100 [H100 PCIe]``): the sandbox device plugin names the
    passthrough resource after it (``nvidia.com/GH100_H100_PCIE``)."""
    architecture: GpuArchitecture
    """Architecture generation (decides the vGPU framework and the DRA selector of container GPUs)."""
    framebuffer_mib: StrictInt = Field(ge=1024, le=4 * 1024 * 1024)
    """Framebuffer per GPU as ``nvidia-smi`` reports it, MiB."""
    mig_configs: dict[str, dict[str, StrictInt]] = Field(default_factory=dict)
    """``nvidia.com/mig.config`` name -> MIG profile -> instances per GPU. Empty: no MIG."""
    vgpu_profiles: dict[str, StrictInt] = Field(default_factory=dict)
    """vGPU type (``L40S-24Q``) -> vGPUs of it per GPU. Empty: no vGPU."""
    vf_pci_device_id: str | None = None
    """PCI device ID the board's SR-IOV VFs report, where observed; none refuses SR-IOV vGPU pools."""
    hgx: HgxBoardSpec | None = None
    """The HGX baseboard of an SXM model; none for PCIe boards."""
    bar1_mib: StrictInt = Field(default=256, ge=1, le=4 * 1024 * 1024)
    """BAR1 aperture per GPU, MiB; decides ``host-passthrough`` CPUs for multi-GPU VMs."""

    _pci_ids = field_validator("pci_device_id", "vf_pci_device_id")(_check_pci_id)
    _resource = field_validator("pci_device_name")(_check_resource_name)

    @model_validator(mode="after")
    def _fits_the_board(self) -> GpuModelSpec:
        for config, layout in self.mig_configs.items():
            for profile, count in layout.items():
                _check_profile(config, profile, count, self.framebuffer_mib)
            slices = _mig_slices(layout)
            if slices > _MAX_MIG_SLICES:
                raise SpecError(("migConfigs", config), f"needs {slices} compute slices; a GPU has {_MAX_MIG_SLICES}")
            _check_layout_name(config, layout)
        for profile, count in self.vgpu_profiles.items():
            _check_vgpu_type(profile, count, self.framebuffer_mib)
        return self

    def to_model(self, name: str) -> GpuModel:
        """The :class:`GpuModel` this spec describes, under catalog key ``name``."""
        return GpuModel(
            name=name,
            pci_device_id=self.pci_device_id,
            pci_device_name=self.pci_device_name,
            architecture=self.architecture,
            framebuffer_mib=self.framebuffer_mib,
            mig_configs=MappingProxyType({c: MappingProxyType(dict(lay)) for c, lay in self.mig_configs.items()}),
            vgpu_profiles=MappingProxyType(dict(self.vgpu_profiles)),
            vf_pci_device_id=self.vf_pci_device_id,
            hgx=None if self.hgx is None else self.hgx.to_board(),
            bar1_mib=self.bar1_mib,
        )


def _framebuffer_gb(framebuffer_mib: int) -> float:
    """The framebuffer in GB (1e9 bytes), the unit MIG profile and vGPU type names round to: an 81559 MiB H100 is
    85.5 GB, and its 7g.80gb fits."""
    return framebuffer_mib * 1024 * 1024 / 1e9


def _check_profile(config: str, profile: str, count: int, framebuffer_mib: int) -> None:
    """A MIG profile is ``<slices>g.<GB>gb`` (optionally ``+me``/``+gfx``/``-me``/``+me.all``) no larger than the
    framebuffer."""
    match = _MIG_PROFILE.fullmatch(profile)
    if match is None:
        raise SpecError(
            ("migConfigs", config, profile),
            f"{shown(profile)} is not a MIG profile; expected '<slices>g.<GB>gb' like '1g.10gb'",
        )
    if count < 1:
        raise SpecError(("migConfigs", config, profile), f"{count} instances; expected at least 1")
    if int(match["gb"]) > _framebuffer_gb(framebuffer_mib):
        raise SpecError(
            ("migConfigs", config, profile),
            f"{shown(profile)} needs {match['gb']} GB; the framebuffer is {framebuffer_mib} MiB",
        )


def _attributes(profile: str) -> str:
    """A valid profile's attributes (``+me``), empty for a base profile: the balanced layout uses base ones only."""
    match = _MIG_PROFILE.fullmatch(profile)
    return (match["attributes"] or "") if match else ""


def _check_layout_name(config: str, layout: Mapping[str, int]) -> None:
    """A layout is one the MIG manager builds from the GPU, under the name it gives it: the node's
    ``nvidia.com/mig.config`` label names it, and a name the manager lacks leaves the node's MIG state ``failed``."""
    profiles = list(layout)
    if config == "all-disabled":
        ok = not layout
    elif config == "all-balanced":
        slices = {int(p.split("g.", 1)[0]): n for p, n in layout.items()}
        ok = not any(_attributes(p) for p in profiles) and len(slices) == len(layout) and slices in _BALANCED
    else:
        ok = len(profiles) == 1 and config == "all-" + profiles[0].replace("+", ".")
    if not ok:
        expected = (
            "{}"
            if config == "all-disabled"
            else "2 x 1g, 1 x 2g and 1 x 3g (1 x 2g on a 4-slice GPU)"
            if config == "all-balanced"
            else f"one profile, named by the layout ({'all-' + profiles[0].replace('+', '.') if profiles else 'none'})"
        )
        raise SpecError(
            ("migConfigs", config),
            f"{shown(config)} with {dict(layout)} is not a layout the MIG manager offers; expected {expected}: "
            f"{_MIG_MANAGER_LAYOUTS}",
        )


def _check_vgpu_type(profile: str, count: int, framebuffer_mib: int) -> None:
    """A time-sliced vGPU type whose vGPUs fit the framebuffer together."""
    match = _VGPU_TYPE.fullmatch(profile) if len(profile) <= _MAX_VGPU_TYPE else None
    if match is None:
        raise SpecError(
            ("vgpuProfiles", profile),
            f"{shown(profile)} is not a time-sliced vGPU type; expected '<board>-<GB><A|B|C|Q>' like 'L40S-12Q'",
        )
    if count < 1:
        raise SpecError(("vgpuProfiles", profile), f"{count} vGPUs per GPU; expected at least 1")
    need = int(match["gb"]) * count
    if need > _framebuffer_gb(framebuffer_mib):
        raise SpecError(
            ("vgpuProfiles", profile),
            f"{count} vGPUs of {match['gb']} GB need {need} GB; the framebuffer is {framebuffer_mib} MiB",
        )


def check_gpu_models(models: dict[str, GpuModelSpec]) -> dict[str, GpuModelSpec]:
    """The rules across a ``gpuModels`` map and the built-ins: a catalog name (``[A-Za-z0-9][A-Za-z0-9._-]``, up to
    63) no built-in has, and a PCI device id and passthrough resource no other model has (two models on one
    resource would be one device plugin resource for two boards). Raises :class:`SpecError` below the map."""
    by_id = {m.pci_device_id: m.name for m in CATALOG.values()}
    by_resource = {m.passthrough_resource: m.name for m in CATALOG.values()}
    for name, spec in models.items():
        if not _NAME.fullmatch(name):
            raise SpecError(
                (name,), f"{shown(name)} is not a GPU model name; expected letters, digits, '.', '_' or '-', up to 63"
            )
        if name in CATALOG:
            raise SpecError((name,), f"{shown(name)} is a built-in GPU model; pick another name")
        if spec.pci_device_id in by_id:
            raise SpecError(
                (name, "pciDeviceId"),
                f"{shown(spec.pci_device_id)} is already GPU model {shown(by_id[spec.pci_device_id])}",
            )
        resource = pci_resource_name(spec.pci_device_name)
        if resource in by_resource:
            raise SpecError(
                (name, "pciDeviceName"),
                f"{shown(spec.pci_device_name)} is advertised as {resource}, already the resource of GPU model "
                f"{shown(by_resource[resource])}; one resource cannot stand for two boards",
            )
        by_id[spec.pci_device_id] = by_resource[resource] = name
    return models


class GpuCatalogSpec(SpecModel):
    """The ``gpuModels`` map (catalog key -> :class:`GpuModelSpec`), checked against the built-ins.

    Raises :class:`~gpucell.errors.ConfigError` as :func:`check_gpu_models` describes, with ``gpuModels.<name>``
    paths.
    """

    gpu_models: dict[str, GpuModelSpec] = Field(default_factory=dict)
    """Catalog key (``H100-NVL-94GB``) -> model."""

    _unique = field_validator("gpu_models")(check_gpu_models)

    def catalog(self) -> Mapping[str, GpuModel]:
        """The built-in catalog plus these models, built-ins first: catalog key -> :class:`GpuModel`."""
        return MappingProxyType({**CATALOG, **{n: s.to_model(n) for n, s in self.gpu_models.items()}})


def extend_catalog(models: Mapping[str, GpuModelSpec | Mapping[str, Any]]) -> Mapping[str, GpuModel]:
    """A new catalog: the built-ins plus ``models`` (catalog key -> :class:`GpuModelSpec` or its camelCase dict).
    :data:`~gpucell.catalog.gpu_catalog.CATALOG` itself never changes; use the result with :func:`gpu_catalog`.

    ``extend_catalog({"H800-PCIe-80GB": {"pciDeviceId": "2322", ...}})["H800-PCIe-80GB"].passthrough_resource``.
    Raises :class:`~gpucell.errors.ConfigError` with ``gpuModels.<name>.<key>: ...`` lines.
    """
    return GpuCatalogSpec.model_validate({"gpuModels": dict(models)}).catalog()


@contextlib.contextmanager
def stack_catalog(data: Any) -> Iterator[Mapping[str, GpuModel]]:
    """Validate a stack's regions inside the block against the built-ins plus every model of ``data``'s
    ``gpuModels`` (or ``gpu_models``) that is valid by itself (:func:`gpu_catalog`). A model with a mistake is left
    out, its own lines reported by the stack's validation, and a pool naming it is told so (:func:`unknown_model`)."""
    raw = data.get("gpuModels", data.get("gpu_models")) if isinstance(data, dict) else None
    models = raw if isinstance(raw, dict) else {}
    valid: dict[str, GpuModel] = dict(CATALOG)
    broken: set[str] = set()
    for name, entry in models.items():
        try:
            valid.update(GpuCatalogSpec.model_validate({"gpuModels": {name: entry}}).catalog())
        except (ConfigError, pydantic.ValidationError):
            broken.add(name)
    catalog = MappingProxyType(valid) if models else CATALOG
    with gpu_catalog(catalog, with_mistakes=frozenset(broken) - set(CATALOG)) as in_force:
        yield in_force
