"""Dynamic Resource Allocation of NVIDIA GPUs: what the NVIDIA DRA driver publishes, and the ResourceClaimTemplates
gpucell renders for workloads on ``gpuMode: dra`` pools.

Kubernetes 1.34 serves ``resource.k8s.io/v1`` (GA). The NVIDIA DRA driver for GPUs (kubernetes-sigs/
dra-driver-nvidia-gpu, chart ``dra-driver-nvidia-gpu``; :mod:`gpucell.components.dra_driver` installs it) publishes
every GPU of a node in a ResourceSlice of driver ``gpu.nvidia.com``. With its ``PassthroughSupport`` gate a GPU without
MIG is published twice: as ``gpu-<minor>`` (attribute ``type`` ``gpu``, for containers) and as ``gpu-vfio-<index>``
(type ``vfio``, bound to ``vfio-pci`` when a claim for it is prepared); once one is prepared, the driver withdraws the
other from the slice and gives it back on unprepare (v0.4.1 ``cmd/gpu-kubelet-plugin/device_state.go``
``RemoveSiblingDevices``, ``nvlib.go`` ``enumerateAllPossibleDevices``). So each GPU serves a container or a VM, as
the claims scheduled onto it ask. Facts, all at v0.4.1 (tag commit 764900e7):

- DeviceClasses the chart renders with ``resources.gpus.enabled`` (``templates/deviceclass-*.yaml``):
  :data:`DEVICE_CLASSES`, selecting the driver and the ``type`` attribute.
- Attributes (``cmd/gpu-kubelet-plugin/deviceinfo.go``), read in CEL as ``device.attributes['gpu.nvidia.com'].<name>``
  like the chart's own classes do: container GPUs carry ``type``, ``uuid``, ``productName`` (NVML's name),
  ``brand``, ``architecture`` (go-nvlib ``GetArchitectureAsString``: ``Turing``, ``Ampere``, ``Ada Lovelace``,
  ``Hopper``, ``Blackwell``), versions and the PCI bus id; VFIO devices carry ``type``, ``deviceID`` and
  ``vendorID`` (``fmt.Sprintf("0x%04x", ...)`` of the PCI ids, ``nvlib.go``), ``productName`` (the PCI name),
  ``numa``, ``iommuFDEnabled``. gpucell selects a VM's GPU model by its PCI ids (:func:`vfio_selector`, exact and
  catalogued) and a container GPU's by architecture (:func:`gpu_selector`; the NVML product name is not
  catalogued), the pool's node affinity doing the rest.
- ``VfioDeviceConfig`` (``api/nvidia.com/resource/v1beta1/vfiodeviceconfig.go``): ``iommu.enableAPIDevice``
  defaults to false, and KubeVirt needs the VFIO API device (kubevirt/user-guide ``docs/compute/dra_gpu.md``: "The
  NVIDIA driver does not inject the VFIO API device by default"): :data:`VFIO_DEVICE_CONFIG`, as the driver's
  ``demo/specs/quickstart/v1/gpu-test-vfio-config.yaml`` writes it.
- KubeVirt v1.9.0 attaches exactly one device per request (``pkg/dra/utils.go`` ``resolveDevice``: "KubeVirt only
  supports exactly one device per request (count > 1 is not supported)"), so a VM's template has one request of
  count 1 per GPU, and ``gpus[i]`` names request ``gpu<i>`` of claim :data:`POD_CLAIM` (flat ``claimName`` and
  ``requestName`` keys: the inline ``ClaimRequest`` of ``v1.GPU`` in the v1.9.0 swagger).
- Quota (KEP-4381 "ResourceQuota"): ``<class>.deviceclass.resource.k8s.io/devices`` caps the devices a namespace's
  claims request from a class; ``count/resourceclaims.resource.k8s.io`` caps the claim objects.

A ResourceClaimTemplate's ``spec`` is immutable (``ValidateResourceClaimTemplateUpdate`` in kubernetes
``pkg/apis/resource/validation``), so its name carries a hash of its content (:func:`claim_template_name`): a change
is a new template, which the workload's pod spec then names (a notebook or endpoint rolls; a VM takes it at its next
restart, KubeVirt's ``RestartRequired``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from gpucell.catalog.gpu_catalog import NVIDIA_PCI_VENDOR, GpuModel

__all__ = [
    "CLAIMS_QUOTA_KEY",
    "DEVICE_CLASSES",
    "DRIVER",
    "GPU_CLASS",
    "MIG_CLASS",
    "POD_CLAIM",
    "RESOURCE_API_VERSION",
    "VFIO_CLASS",
    "VFIO_DEVICE_CONFIG",
    "claim_template_name",
    "container_claim_template",
    "container_claims",
    "device_class_manifest",
    "gpu_selector",
    "pod_resource_claims",
    "quota_key",
    "vfio_selector",
    "vm_claim_template",
    "vm_gpus",
]

DRIVER = "gpu.nvidia.com"
"""The DRA driver's name: ResourceSlices' ``driver``, the attribute domain, and the opaque config's ``driver``."""
RESOURCE_API_VERSION = "resource.k8s.io/v1"
"""The DRA API gpucell renders (GA in Kubernetes 1.34) and sets as the chart's ``resourceApiVersion``."""
GPU_CLASS = "gpu.nvidia.com"
"""DeviceClass of whole GPUs for containers."""
VFIO_CLASS = "vfio.gpu.nvidia.com"
"""DeviceClass of whole GPUs bound to ``vfio-pci`` for VMs (``PassthroughSupport``)."""
MIG_CLASS = "mig.nvidia.com"
"""DeviceClass of MIG devices; ``dra`` pools run no MIG, so tenants get 0 of it."""
DEVICE_CLASSES: Mapping[str, str] = MappingProxyType(
    {
        GPU_CLASS: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
        MIG_CLASS: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
        VFIO_CLASS: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'vfio'",
    }
)
"""The DeviceClasses chart ``dra-driver-nvidia-gpu`` 0.4.1 renders with ``resources.gpus.enabled`` -> their CEL
selector, verbatim (``templates/deviceclass-gpu.yaml``, ``deviceclass-mig.yaml``, ``deviceclass-vfio-gpu.yaml``)."""
POD_CLAIM = "gpus"
"""``resourceClaims[].name`` of a workload's pod (or VMI) for its GPU claim; containers list it in
``resources.claims``, a VM's ``gpus[].claimName`` names it."""
CLAIMS_QUOTA_KEY = "count/resourceclaims.resource.k8s.io"
"""ResourceQuota key capping a namespace's ResourceClaim objects."""
VFIO_DEVICE_CONFIG: Mapping[str, Any] = MappingProxyType(
    {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "VfioDeviceConfig",
        "iommu": {"backendPolicy": "LegacyOnly", "enableAPIDevice": True},
    }
)
"""Opaque parameters of a VM's VFIO requests: the legacy VFIO container backend (the driver's default) with the
VFIO API device (``/dev/vfio/vfio``) injected, which virt-launcher needs."""


def quota_key(device_class: str) -> str:
    """The ResourceQuota key of ``device_class``: ``vfio.gpu.nvidia.com.deviceclass.resource.k8s.io/devices``."""
    return f"{device_class}.deviceclass.resource.k8s.io/devices"


def device_class_manifest(name: str) -> dict[str, Any]:
    """The ``DeviceClass`` ``name`` as chart 0.4.1 renders it with ``resourceApiVersion: resource.k8s.io/v1`` (the
    chart's, not gpucell's: what the claims rely on). ``gpu.nvidia.com`` also carries ``extendedResourceName:
    nvidia.com/gpu`` there, an alpha field that Kubernetes 1.34 ignores unless ``DRAExtendedResource`` is on (it is
    not on a cell). Raises ``KeyError`` for a class the chart does not render."""
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": DEVICE_CLASSES[name]}}]}
    if name == GPU_CLASS:
        spec["extendedResourceName"] = "nvidia.com/gpu"
    return {"apiVersion": RESOURCE_API_VERSION, "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def vfio_selector(model: GpuModel) -> str:
    """CEL matching the VFIO devices of ``model`` by the PCI ids the driver publishes (lower-case ``0x%04x``):
    ``device.attributes['gpu.nvidia.com'].vendorID == '0x10de' && ...deviceID == '0x26b9'`` for the L40S."""
    attrs = f"device.attributes['{DRIVER}']"
    return f"{attrs}.vendorID == '0x{NVIDIA_PCI_VENDOR}' && {attrs}.deviceID == '0x{model.pci_device_id}'"


def gpu_selector(model: GpuModel) -> str:
    """CEL matching container GPUs of ``model``'s architecture (the driver publishes no PCI device id for them):
    ``device.attributes['gpu.nvidia.com'].architecture == 'Ada Lovelace'``."""
    return f"device.attributes['{DRIVER}'].architecture == '{model.architecture.value}'"


def claim_template_name(workload: str, spec: Mapping[str, Any]) -> str:
    """``<workload>-gpus-<8 hex>``: the first 8 hex digits of the SHA-256 of the template's ``spec`` as sorted JSON,
    so that a changed (immutable) spec gets a new template."""
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return f"{workload}-gpus-{digest[:8]}"


def _template(metadata: Mapping[str, Any], workload: str, spec: dict[str, Any]) -> dict[str, Any]:
    meta = {**metadata, "name": claim_template_name(workload, spec)}
    return {"apiVersion": RESOURCE_API_VERSION, "kind": "ResourceClaimTemplate", "metadata": meta, "spec": spec}


def vm_claim_template(metadata: Mapping[str, Any], vm: str, model: GpuModel, count: int) -> dict[str, Any]:
    """The ``ResourceClaimTemplate`` of a VM's ``count`` GPUs of ``model``: requests ``gpu0``..``gpu<count-1>``, each
    ``exactly`` one ``vfio.gpu.nvidia.com`` device (``allocationMode: ExactCount``, ``count: 1``) selected by
    :func:`vfio_selector`, and one ``config`` entry giving all of them :data:`VFIO_DEVICE_CONFIG` (``opaque``,
    driver ``gpu.nvidia.com``). ``metadata`` holds namespace and labels; the name is :func:`claim_template_name`."""
    names = [f"gpu{i}" for i in range(count)]
    exactly = {
        "deviceClassName": VFIO_CLASS,
        "allocationMode": "ExactCount",
        "count": 1,
        "selectors": [{"cel": {"expression": vfio_selector(model)}}],
    }
    devices = {
        "requests": [{"name": name, "exactly": dict(exactly)} for name in names],
        "config": [{"requests": names, "opaque": {"driver": DRIVER, "parameters": dict(VFIO_DEVICE_CONFIG)}}],
    }
    return _template(metadata, vm, {"spec": {"devices": devices}})


def container_claim_template(
    metadata: Mapping[str, Any], workload: str, model: GpuModel | None, count: int
) -> dict[str, Any]:
    """The ``ResourceClaimTemplate`` of a container workload's ``count`` GPUs: one request ``gpus`` for ``exactly``
    ``count`` ``gpu.nvidia.com`` devices (``allocationMode: ExactCount``), with :func:`gpu_selector` when a ``model``
    is asked for. Every container listing the claim sees all of its GPUs (the driver's CDI spec)."""
    exactly: dict[str, Any] = {"deviceClassName": GPU_CLASS, "allocationMode": "ExactCount", "count": count}
    if model is not None:
        exactly["selectors"] = [{"cel": {"expression": gpu_selector(model)}}]
    return _template(metadata, workload, {"spec": {"devices": {"requests": [{"name": POD_CLAIM, "exactly": exactly}]}}})


def pod_resource_claims(template: Mapping[str, Any]) -> list[dict[str, str]]:
    """A pod spec's (or VMI spec's) ``resourceClaims``: :data:`POD_CLAIM` from ``template`` (a rendered
    ResourceClaimTemplate); Kubernetes creates one claim per pod from it and deletes it with the pod."""
    return [{"name": POD_CLAIM, "resourceClaimTemplateName": template["metadata"]["name"]}]


def container_claims() -> list[dict[str, str]]:
    """A container's ``resources.claims``: the pod's :data:`POD_CLAIM`."""
    return [{"name": POD_CLAIM}]


def vm_gpus(count: int) -> list[dict[str, str]]:
    """A VM's ``domain.devices.gpus``: ``gpu<i>`` taking request ``gpu<i>`` of claim :data:`POD_CLAIM`."""
    return [{"name": f"gpu{i}", "claimName": POD_CLAIM, "requestName": f"gpu{i}"} for i in range(count)]
