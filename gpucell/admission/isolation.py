"""The VM an isolated notebook or model endpoint becomes (docs/decisions/0040).

An isolated workload (``isolation: vm``, :mod:`gpucell.spec.isolation`) is admitted, placed, counted against its
tenant's quota and rendered as the :class:`~gpucell.spec.workloads.GpuVirtualMachineSpec` :func:`guest_vm` derives
from it: the same placement (a ``vm-passthrough`` pool of its GPU model, or a ``dra`` pool's VFIO devices), the same
quota lines (vCPUs, guest memory, disks, the passthrough resource) and the same run-time fence as the tenant's own
VMs, so nothing about an isolated workload is checked twice in two ways.
"""

from __future__ import annotations

import math

from gpucell.spec.isolation import Isolation, TenantIsolation, effective_isolation
from gpucell.spec.workloads import (
    CpuTopology,
    DiskSource,
    GpuVirtualMachineSpec,
    ModelEndpointSpec,
    NotebookSpec,
    RunStrategy,
    VmDisk,
)

__all__ = ["guest_vm", "is_isolated"]


def is_isolated(spec: NotebookSpec | ModelEndpointSpec, tenant: TenantIsolation) -> bool:
    """True when ``spec`` runs behind a VM boundary (its own ``isolation``, else its tenant's default)."""
    return effective_isolation(spec.isolation, tenant) is Isolation.VM


def guest_vm(spec: NotebookSpec | ModelEndpointSpec, tenant: TenantIsolation) -> GpuVirtualMachineSpec:
    """The VM of isolated workload ``spec`` of a tenant whose isolation settings are ``tenant`` (checked by
    :func:`gpucell.spec.isolation.check_isolated`: a guest image, whole GPUs of one model).

    - vCPUs: ``cpuMillicores`` rounded up to whole cores (one socket); guest memory: ``memoryGib`` (the container's
      ``/dev/shm`` lives in it; the quota counts the VM's requests = limits as for any VM);
    - GPUs: ``gpu.count`` of ``gpu.model``, ``gpuAllocation`` the request's ``allocation`` (``device-plugin``: a
      ``vm-passthrough`` pool; ``dra``: VFIO devices of a ``dra`` pool);
    - root disk: a clone of ``isolation.guestImage`` of ``isolation.rootDiskGib``; a notebook's home is a blank data
      disk of ``homeGib`` in its ``storageClass`` (formatted by the guest on first boot);
    - ``noLogin`` (no SSH user: the workload's own port is its way in), ``runStrategy: Always``, the workload's
      ``priorityClassName`` and ``removalPolicy``.
    """
    gpu = spec.gpu
    assert tenant.guest_image is not None  # check_isolated requires it
    root = VmDisk(source=DiskSource(image=tenant.guest_image), size_gib=tenant.root_disk_gib)
    data: list[VmDisk] = []
    if isinstance(spec, NotebookSpec):
        data = [VmDisk(source=DiskSource(blank=True), size_gib=spec.home_gib, storage_class=spec.storage_class)]
    fields: dict[str, object] = {}
    if gpu is not None:
        fields = {"gpu_model": gpu.model, "gpus": gpu.count, "gpu_allocation": gpu.allocation}
    return GpuVirtualMachineSpec(
        **fields,  # type: ignore[arg-type]
        cpu=CpuTopology(cores=max(1, math.ceil(spec.cpu_millicores / 1000))),
        memory_gib=spec.memory_gib,
        root_disk=root,
        data_disks=data,
        no_login=True,
        run_strategy=RunStrategy.ALWAYS,
        priority_class_name=spec.priority_class_name,
        removal_policy=getattr(spec, "removal_policy", None),
    )
