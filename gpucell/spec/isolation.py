"""Isolation: whether a notebook or model endpoint runs as a container on the host's kernel or behind a VM boundary.

``isolation: vm`` on a notebook or model endpoint (or ``isolation.default: vm`` on its tenant) runs the workload's
container image inside a KubeVirt VM of its own, with its GPUs passed through, instead of a pod on the host kernel
(docs/decisions/0040-a-vm-boundary-for-notebooks-and-endpoints.md). The guest boots a catalog golden image carrying
podman and the NVIDIA driver and container toolkit (``isolation.guestImage``), and cloud-init runs the workload's
image in it with the GPU. What the isolated form supports and refuses is checked here, at the edge, per workload of
a tenant (:func:`check_isolated`); the VM it becomes is :mod:`gpucell.admission.isolation`'s.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field, StrictInt, field_validator

from gpucell.errors import SpecError, shown
from gpucell.spec._base import SpecModel
from gpucell.spec.network import DNS_LABEL

__all__ = [
    "ISOLATED_RUNTIME",
    "Isolation",
    "TenantIsolation",
    "check_isolated",
    "effective_isolation",
]

ISOLATED_RUNTIME = "kserve-huggingfaceserver"
"""The one KServe v0.20 runtime an isolated endpoint runs in its guest: its image downloads an ``hf://`` model itself
(``--model_id``), which no other built-in runtime does without KServe's storage initializer."""


class Isolation(StrEnum):
    """Where a notebook's or model endpoint's code runs.

    - ``container``: a pod on the host's kernel (the NVIDIA container toolkit injects the GPU), as before.
    - ``vm``: a KubeVirt VM of its own (its GPUs passed through or handed over by DRA as VFIO devices), the guest
      running the workload's image; a container escape ends in the guest's kernel, not the host's.
    """

    CONTAINER = "container"
    VM = "vm"


class TenantIsolation(SpecModel):
    """A tenant's isolation default and the guest its isolated workloads boot."""

    default: Isolation = Isolation.CONTAINER
    """The isolation of the tenant's notebooks and endpoints that do not say; ``vm`` also refuses any that say
    ``container`` (in config, and plain pods in its namespace at run time): the tenant runs isolated workloads
    only. Defaults to ``container``."""
    guest_image: str | None = None
    """``<catalog>/<image>`` of the region's ``imageCatalogs``: the golden image an isolated workload's VM boots,
    carrying podman (with Quadlet, podman 4.4 or later), the NVIDIA driver and the NVIDIA Container Toolkit's CDI
    spec (``nvidia.com/gpu=all``), and cloud-init. Required once a workload of the tenant is isolated."""
    root_disk_gib: StrictInt = Field(default=100, ge=20, le=65536)
    """Size of an isolated workload's root disk (the guest image's clone, where podman keeps the workload's image and
    an endpoint's model cache), GiB; at least the guest image's size. Defaults to 100."""

    @field_validator("guest_image")
    @classmethod
    def _image(cls, value: str | None) -> str | None:
        if value is not None and (value.count("/") != 1 or not all(DNS_LABEL.fullmatch(p) for p in value.split("/"))):
            raise ValueError("is not <catalog>/<image> (an imageCatalogs key and an image of it)")
        return value


def effective_isolation(declared: Isolation | None, tenant: TenantIsolation) -> Isolation:
    """A workload's isolation: its own ``isolation``, else its tenant's ``isolation.default``."""
    return declared if declared is not None else tenant.default


# The workload specs are typed Any here: gpucell.spec.workloads imports this module for the Isolation enum, and
# an import back, even for annotations only, would be a cycle (tests/test_structure.py).


def _check_gpu(gpu: Any) -> None:
    """An isolated workload's GPUs are whole GPUs of one model (a VM's passthrough or VFIO devices)."""
    if gpu is None:
        return
    if gpu.mig_profile is not None:
        raise SpecError(
            ("gpu", "migProfile"),
            f"{shown(gpu.mig_profile)}: a MIG slice is a container's device, a VM gets whole GPUs (passthrough or "
            "DRA VFIO); drop migProfile for a whole GPU, or set isolation: container",
        )
    if gpu.model is None:
        raise SpecError(
            ("gpu", "model"),
            "is required with isolation vm: the VM takes whole GPUs of one model from a vm-passthrough pool (or a "
            "dra pool with allocation: dra); name the model, e.g. H100-SXM5-80GB",
        )


def _check_endpoint(spec: Any) -> None:
    """What an isolated endpoint refuses: an autoscaler, storage other than ``hf://``, another runtime."""
    if spec.min_replicas != 1 or spec.max_replicas != 1:
        raise SpecError(
            ("maxReplicas" if spec.max_replicas != 1 else "minReplicas",),
            f"minReplicas {spec.min_replicas}, maxReplicas {spec.max_replicas}: an isolated endpoint is one VM behind "
            "the endpoint's Service, which no autoscaler scales (KServe scales pods, and Kata pods with GPUs need the "
            "GPU Operator's cluster-wide Kata mode); set minReplicas: 1 and maxReplicas: 1, or isolation: container",
        )
    if "scale_metric" in spec.model_fields_set or spec.scale_target is not None:
        raise SpecError(
            ("scaleMetric" if "scale_metric" in spec.model_fields_set else "scaleTarget",),
            "only applies to an autoscaled endpoint; an isolated endpoint is one VM: drop it, or set isolation: "
            "container",
        )
    for index, var in enumerate(spec.env):
        if var.secret_key_ref is not None:
            raise SpecError(
                ("env", index, "secretKeyRef"),
                "an isolated endpoint's guest gets its secrets from gpucell's own Secret, not from one of the "
                "namespace; use secretConfigKey, or isolation: container",
            )
    scheme = spec.storage_uri.split("://", 1)[0]
    if scheme != "hf":
        raise SpecError(
            ("storageUri",),
            f"{scheme}:// storage: an isolated endpoint's guest downloads its model from the Hugging Face Hub itself "
            "(KServe's storage initializer runs in no guest); use an hf:// URI, or isolation: container",
        )
    runtime = spec.runtime or ("" if spec.model_format == "huggingface" else None)
    if runtime not in ("", ISOLATED_RUNTIME):
        key = "runtime" if spec.runtime is not None else "modelFormat"
        value = spec.runtime if spec.runtime is not None else spec.model_format
        raise SpecError(
            (key,),
            f"{shown(value)}: an isolated endpoint runs {ISOLATED_RUNTIME} (modelFormat huggingface) in its guest; "
            "use that, or isolation: container",
        )


def check_isolated(kind: str, name: str, spec: Any, declared: Isolation | None, tenant: TenantIsolation) -> None:
    """Check workload ``name`` of ``kind`` (``notebooks``, ``modelEndpoints``; ``spec`` its
    :class:`~gpucell.spec.workloads.NotebookSpec` or :class:`~gpucell.spec.workloads.ModelEndpointSpec`) of a tenant
    whose isolation settings are ``tenant``; ``declared`` is the workload's own ``isolation``.

    Raises :class:`SpecError` (path below the tenant) for a ``container`` workload of an isolated-only tenant, an
    isolated one without ``isolation.guestImage``, and what the isolated form does not support (:func:`_check_gpu`,
    and for an endpoint :func:`_check_endpoint`)."""
    if tenant.default is Isolation.VM and declared is Isolation.CONTAINER:
        raise SpecError(
            (kind, name, "isolation"),
            "'container' is refused: the tenant's isolation.default is vm (it runs isolated workloads only); "
            "drop isolation here, or change the tenant's isolation.default",
        )
    if effective_isolation(declared, tenant) is not Isolation.VM:
        return
    if tenant.guest_image is None:
        raise SpecError(
            ("isolation", "guestImage"),
            f"is required: {kind}.{name} runs behind a VM boundary, whose guest boots this image; name a catalog "
            "image carrying podman and the NVIDIA driver (<catalog>/<image>)",
        )
    try:
        _check_gpu(spec.gpu)
        if kind == "modelEndpoints":
            _check_endpoint(spec)
    except SpecError as exc:
        raise SpecError((kind, name, *exc.rel_path), exc.message) from None
