"""Typed, validated specs of a cell: what a stack config says, checked before anything is deployed.

Names are imported on first use (PEP 562), as in :mod:`gpucell`: importing one part spec (``gpucell.spec.pools``)
runs this file first, and an eager import of :mod:`gpucell.spec.cell` here would load the whole cell spec and the
admission layer below it (:mod:`gpucell.admission.tenants`) under every part
(docs/decisions/0019-standalone-components.md).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpucell.spec.backups import BackupsSpec, BackupStorageSpec, TenantBackupSpec
    from gpucell.spec.cell import CellSpec, StackSpec
    from gpucell.spec.etcd import EtcdS3, EtcdSnapshots, EtcdSpec
    from gpucell.spec.gpu_models import GpuModelSpec, extend_catalog, gpu_catalog
    from gpucell.spec.lifecycle import HostRemovalPolicy, RemovalPolicy, Rollout
    from gpucell.spec.network import Host, Network, Ssh, SshOverride
    from gpucell.spec.nodes import K3sClusterSpec
    from gpucell.spec.platform import (
        CdiSpec,
        ChartSpec,
        CiliumSpec,
        DraDriverSpec,
        GpuOperatorSpec,
        ImageSpec,
        KServeSpec,
        MigStrategy,
        StorageBackend,
        StorageSpec,
    )
    from gpucell.spec.pools import GpuMode, NodePool, NodeRole, TopologyProfile
    from gpucell.spec.scheduling import PreemptionPolicy, PriorityClassSpec
    from gpucell.spec.serving import EnvVar, ModelFormat, ProtocolVersion, RuntimePort, SecretKeyRef, ServingRuntimeSpec
    from gpucell.spec.tenancy import (
        EgressClass,
        TenantGroups,
        TenantLimits,
        TenantQuota,
        TenantSpec,
        namespace_of,
    )
    from gpucell.spec.versions import DeploymentMode, Versions, kserve_deployment_modes
    from gpucell.spec.workloads import (
        AccessMode,
        CpuTopology,
        DiskSource,
        EvictionStrategy,
        Exposure,
        GpuAllocation,
        GpuRequest,
        GpuVirtualMachineSpec,
        ModelEndpointSpec,
        NotebookSpec,
        RunStrategy,
        ScaleMetric,
        ServiceType,
        SshService,
        VmDisk,
        VolumeMode,
    )

__all__ = [
    "AccessMode",
    "BackupStorageSpec",
    "BackupsSpec",
    "CdiSpec",
    "CellSpec",
    "ChartSpec",
    "CiliumSpec",
    "CpuTopology",
    "DeploymentMode",
    "DiskSource",
    "DraDriverSpec",
    "EgressClass",
    "EnvVar",
    "EtcdS3",
    "EtcdSnapshots",
    "EtcdSpec",
    "EvictionStrategy",
    "Exposure",
    "GpuAllocation",
    "GpuMode",
    "GpuModelSpec",
    "GpuOperatorSpec",
    "GpuRequest",
    "GpuVirtualMachineSpec",
    "Host",
    "HostRemovalPolicy",
    "ImageSpec",
    "K3sClusterSpec",
    "KServeSpec",
    "MigStrategy",
    "ModelEndpointSpec",
    "ModelFormat",
    "Network",
    "NodePool",
    "NodeRole",
    "NotebookSpec",
    "PreemptionPolicy",
    "PriorityClassSpec",
    "ProtocolVersion",
    "RemovalPolicy",
    "Rollout",
    "RunStrategy",
    "RuntimePort",
    "ScaleMetric",
    "SecretKeyRef",
    "ServiceType",
    "ServingRuntimeSpec",
    "Ssh",
    "SshOverride",
    "SshService",
    "StackSpec",
    "StorageBackend",
    "StorageSpec",
    "TenantBackupSpec",
    "TenantGroups",
    "TenantLimits",
    "TenantQuota",
    "TenantSpec",
    "TopologyProfile",
    "Versions",
    "VmDisk",
    "VolumeMode",
    "extend_catalog",
    "gpu_catalog",
    "kserve_deployment_modes",
    "namespace_of",
]

_HOMES: dict[str, str] = {
    "AccessMode": "gpucell.spec.workloads",
    "BackupStorageSpec": "gpucell.spec.backups",
    "BackupsSpec": "gpucell.spec.backups",
    "CdiSpec": "gpucell.spec.platform",
    "CellSpec": "gpucell.spec.cell",
    "ChartSpec": "gpucell.spec.platform",
    "CiliumSpec": "gpucell.spec.platform",
    "CpuTopology": "gpucell.spec.workloads",
    "DeploymentMode": "gpucell.spec.versions",
    "DiskSource": "gpucell.spec.workloads",
    "DraDriverSpec": "gpucell.spec.platform",
    "EgressClass": "gpucell.spec.tenancy",
    "EnvVar": "gpucell.spec.serving",
    "EtcdS3": "gpucell.spec.etcd",
    "EtcdSnapshots": "gpucell.spec.etcd",
    "EtcdSpec": "gpucell.spec.etcd",
    "EvictionStrategy": "gpucell.spec.workloads",
    "Exposure": "gpucell.spec.workloads",
    "GpuAllocation": "gpucell.spec.workloads",
    "GpuMode": "gpucell.spec.pools",
    "GpuModelSpec": "gpucell.spec.gpu_models",
    "GpuOperatorSpec": "gpucell.spec.platform",
    "GpuRequest": "gpucell.spec.workloads",
    "GpuVirtualMachineSpec": "gpucell.spec.workloads",
    "Host": "gpucell.spec.network",
    "K3sClusterSpec": "gpucell.spec.nodes",
    "ImageSpec": "gpucell.spec.platform",
    "KServeSpec": "gpucell.spec.platform",
    "MigStrategy": "gpucell.spec.platform",
    "ModelEndpointSpec": "gpucell.spec.workloads",
    "ModelFormat": "gpucell.spec.serving",
    "Network": "gpucell.spec.network",
    "NodePool": "gpucell.spec.pools",
    "NodeRole": "gpucell.spec.pools",
    "NotebookSpec": "gpucell.spec.workloads",
    "HostRemovalPolicy": "gpucell.spec.lifecycle",
    "PreemptionPolicy": "gpucell.spec.scheduling",
    "PriorityClassSpec": "gpucell.spec.scheduling",
    "ProtocolVersion": "gpucell.spec.serving",
    "RemovalPolicy": "gpucell.spec.lifecycle",
    "Rollout": "gpucell.spec.lifecycle",
    "RunStrategy": "gpucell.spec.workloads",
    "RuntimePort": "gpucell.spec.serving",
    "ScaleMetric": "gpucell.spec.workloads",
    "SecretKeyRef": "gpucell.spec.serving",
    "ServiceType": "gpucell.spec.workloads",
    "ServingRuntimeSpec": "gpucell.spec.serving",
    "Ssh": "gpucell.spec.network",
    "SshOverride": "gpucell.spec.network",
    "SshService": "gpucell.spec.workloads",
    "StackSpec": "gpucell.spec.cell",
    "TenantBackupSpec": "gpucell.spec.backups",
    "StorageBackend": "gpucell.spec.platform",
    "StorageSpec": "gpucell.spec.platform",
    "TenantGroups": "gpucell.spec.tenancy",
    "TenantLimits": "gpucell.spec.tenancy",
    "TenantQuota": "gpucell.spec.tenancy",
    "TenantSpec": "gpucell.spec.tenancy",
    "TopologyProfile": "gpucell.spec.pools",
    "Versions": "gpucell.spec.versions",
    "VmDisk": "gpucell.spec.workloads",
    "VolumeMode": "gpucell.spec.workloads",
    "extend_catalog": "gpucell.spec.gpu_models",
    "gpu_catalog": "gpucell.spec.gpu_models",
    "kserve_deployment_modes": "gpucell.spec.versions",
    "namespace_of": "gpucell.spec.tenancy",
}
"""Public name -> the module that defines it."""


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        value = getattr(importlib.import_module(_HOMES[name]), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'gpucell.spec' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
