"""gpucell: a regional cell of a GPU cloud, and its tenants' workloads, as Pulumi ComponentResources.

    from gpucell import CellSpec, RegionalCell, RegionalCellArgs, Tenant, TenantArgs

- the cell: :class:`RegionalCell` and the platform components it is made of (:class:`K3sCluster`,
  :class:`Cilium`, :class:`Storage`, :class:`KubeVirt`, :class:`Cdi`, :class:`GpuOperator`, :class:`DraDriver`,
  :class:`CertManager`, :class:`KServe`, :class:`Metrics`, :class:`Keda`, :class:`PriorityClasses`,
  :class:`CsiSnapshots`, :class:`Backups`, :class:`ClusterApi`, :class:`ClusterDeny`, :class:`NetworkOperator`),
  each ``(name, args, opts)`` with its ``*Args``: only what it uses and the :class:`Cluster` it deploys onto,
  ``*Args.from_cell`` from a cell spec;
- tenants and workloads: :class:`Tenant`, :class:`GpuVirtualMachine`, :class:`Notebook`, :class:`ModelEndpoint`,
  :class:`ServingRuntime` (a tenant's own KServe runtime), :class:`TenantCluster`, on a :class:`Cluster`, its
  :class:`ClusterFacts` and :class:`Platform` (any cluster, not only a gpucell cell);
- the specs they take (:class:`CellSpec`, :class:`TenantSpec`, ...), validated with the same one-line
  :class:`ConfigError` a stack file gets; the GPU :data:`CATALOG`;
- :mod:`gpucell.testing`: Pulumi mocks for testing programs built on these components.

Names are imported on first use (PEP 562), so ``import gpucell`` (and ``import gpucell.spec``) stays free of the
Pulumi provider SDKs until a component is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpucell.admission.tenants import ClusterFacts
    from gpucell.catalog.gpu_catalog import CATALOG, GpuModel
    from gpucell.cell import RegionalCell, RegionalCellArgs
    from gpucell.cluster import Cluster, ContainerRuntime
    from gpucell.components.backups import Backups, BackupsArgs
    from gpucell.components.cdi import Cdi, CdiArgs, VolumeClass
    from gpucell.components.cert_manager import CertManager, CertManagerArgs
    from gpucell.components.cilium import Cilium, CiliumArgs
    from gpucell.components.cluster_api import ClusterApi, ClusterApiArgs
    from gpucell.components.cluster_deny import ClusterDeny, ClusterDenyArgs
    from gpucell.components.csi_snapshots import CsiSnapshots, CsiSnapshotsArgs
    from gpucell.components.dra_driver import DraDriver, DraDriverArgs
    from gpucell.components.gpu_operator import GpuOperator, GpuOperatorArgs
    from gpucell.components.keda import Keda, KedaArgs
    from gpucell.components.kserve import KServe, KServeArgs
    from gpucell.components.kubevirt import KubeVirt, KubeVirtArgs
    from gpucell.components.metrics import Metrics, MetricsArgs
    from gpucell.components.network_operator import NetworkOperator, NetworkOperatorArgs
    from gpucell.components.priority_classes import PriorityClasses, PriorityClassesArgs
    from gpucell.components.storage import Storage, StorageArgs
    from gpucell.errors import ConfigError
    from gpucell.k3s.cluster import K3sCluster, K3sClusterArgs
    from gpucell.platform import Platform
    from gpucell.spec import (
        AccessMode,
        CdiSpec,
        CellSpec,
        ChartSpec,
        CiliumSpec,
        CpuTopology,
        DeploymentMode,
        DiskSource,
        DraDriverSpec,
        EgressClass,
        EvictionStrategy,
        Exposure,
        GpuAllocation,
        GpuMode,
        GpuOperatorSpec,
        GpuRequest,
        GpuVirtualMachineSpec,
        Host,
        ImageSpec,
        K3sClusterSpec,
        KServeSpec,
        MigStrategy,
        ModelEndpointSpec,
        Network,
        NodePool,
        NodeRole,
        NotebookSpec,
        RunStrategy,
        ScaleMetric,
        ServiceType,
        Ssh,
        SshOverride,
        SshService,
        StackSpec,
        StorageBackend,
        StorageSpec,
        TenantGroups,
        TenantLimits,
        TenantQuota,
        TenantSpec,
        TopologyProfile,
        Versions,
        VmDisk,
        VolumeMode,
    )
    from gpucell.spec.tenant_clusters import TenantClusterSpec
    from gpucell.tenancy.dra_ordering import DraClaimOrder
    from gpucell.tenancy.tenant import Tenant, TenantArgs, TenantRef
    from gpucell.workloads.model_endpoint import ModelEndpoint, ModelEndpointArgs
    from gpucell.workloads.notebook import Notebook, NotebookArgs
    from gpucell.workloads.serving_runtime import ServingRuntime, ServingRuntimeArgs
    from gpucell.workloads.tenant_cluster import TenantCluster, TenantClusterArgs
    from gpucell.workloads.virtual_machine import GpuVirtualMachine, GpuVirtualMachineArgs

__all__ = [
    "CATALOG",
    "AccessMode",
    "Backups",
    "BackupsArgs",
    "Cdi",
    "CdiArgs",
    "CdiSpec",
    "CellSpec",
    "CertManager",
    "CertManagerArgs",
    "ChartSpec",
    "Cilium",
    "CiliumArgs",
    "CiliumSpec",
    "Cluster",
    "ClusterApi",
    "ClusterApiArgs",
    "ClusterDeny",
    "ClusterDenyArgs",
    "ClusterFacts",
    "ConfigError",
    "ContainerRuntime",
    "CpuTopology",
    "CsiSnapshots",
    "CsiSnapshotsArgs",
    "DeploymentMode",
    "DiskSource",
    "DraClaimOrder",
    "DraDriver",
    "DraDriverArgs",
    "DraDriverSpec",
    "EgressClass",
    "EvictionStrategy",
    "Exposure",
    "GpuAllocation",
    "GpuMode",
    "GpuModel",
    "GpuOperator",
    "GpuOperatorArgs",
    "GpuOperatorSpec",
    "GpuRequest",
    "GpuVirtualMachine",
    "GpuVirtualMachineArgs",
    "GpuVirtualMachineSpec",
    "Host",
    "ImageSpec",
    "K3sCluster",
    "K3sClusterArgs",
    "K3sClusterSpec",
    "KServe",
    "KServeArgs",
    "KServeSpec",
    "Keda",
    "KedaArgs",
    "KubeVirt",
    "KubeVirtArgs",
    "Metrics",
    "MetricsArgs",
    "MigStrategy",
    "ModelEndpoint",
    "ModelEndpointArgs",
    "ModelEndpointSpec",
    "Network",
    "NetworkOperator",
    "NetworkOperatorArgs",
    "NodePool",
    "NodeRole",
    "Notebook",
    "NotebookArgs",
    "NotebookSpec",
    "Platform",
    "PriorityClasses",
    "PriorityClassesArgs",
    "RegionalCell",
    "RegionalCellArgs",
    "RunStrategy",
    "ScaleMetric",
    "ServiceType",
    "ServingRuntime",
    "ServingRuntimeArgs",
    "Ssh",
    "SshOverride",
    "SshService",
    "StackSpec",
    "Storage",
    "StorageArgs",
    "StorageBackend",
    "StorageSpec",
    "Tenant",
    "TenantArgs",
    "TenantCluster",
    "TenantClusterArgs",
    "TenantClusterSpec",
    "TenantGroups",
    "TenantLimits",
    "TenantQuota",
    "TenantRef",
    "TenantSpec",
    "TopologyProfile",
    "Versions",
    "VmDisk",
    "VolumeClass",
    "VolumeMode",
]

_HOMES: dict[str, str] = {
    "AccessMode": "gpucell.spec",
    "CATALOG": "gpucell.catalog.gpu_catalog",
    "Backups": "gpucell.components.backups",
    "BackupsArgs": "gpucell.components.backups",
    "Cdi": "gpucell.components.cdi",
    "CdiArgs": "gpucell.components.cdi",
    "CdiSpec": "gpucell.spec",
    "CellSpec": "gpucell.spec",
    "CertManager": "gpucell.components.cert_manager",
    "CertManagerArgs": "gpucell.components.cert_manager",
    "ChartSpec": "gpucell.spec",
    "Cilium": "gpucell.components.cilium",
    "CiliumArgs": "gpucell.components.cilium",
    "CiliumSpec": "gpucell.spec",
    "Cluster": "gpucell.cluster",
    "ClusterApi": "gpucell.components.cluster_api",
    "ClusterApiArgs": "gpucell.components.cluster_api",
    "ClusterDeny": "gpucell.components.cluster_deny",
    "ClusterDenyArgs": "gpucell.components.cluster_deny",
    "ClusterFacts": "gpucell.admission.tenants",
    "ConfigError": "gpucell.errors",
    "ContainerRuntime": "gpucell.cluster",
    "CpuTopology": "gpucell.spec",
    "CsiSnapshots": "gpucell.components.csi_snapshots",
    "CsiSnapshotsArgs": "gpucell.components.csi_snapshots",
    "DeploymentMode": "gpucell.spec",
    "DiskSource": "gpucell.spec",
    "DraClaimOrder": "gpucell.tenancy.dra_ordering",
    "DraDriver": "gpucell.components.dra_driver",
    "DraDriverArgs": "gpucell.components.dra_driver",
    "DraDriverSpec": "gpucell.spec",
    "EgressClass": "gpucell.spec",
    "EvictionStrategy": "gpucell.spec",
    "Exposure": "gpucell.spec",
    "GpuAllocation": "gpucell.spec",
    "GpuMode": "gpucell.spec",
    "GpuModel": "gpucell.catalog.gpu_catalog",
    "GpuOperator": "gpucell.components.gpu_operator",
    "GpuOperatorArgs": "gpucell.components.gpu_operator",
    "GpuOperatorSpec": "gpucell.spec",
    "GpuRequest": "gpucell.spec",
    "GpuVirtualMachine": "gpucell.workloads.virtual_machine",
    "GpuVirtualMachineArgs": "gpucell.workloads.virtual_machine",
    "GpuVirtualMachineSpec": "gpucell.spec",
    "Host": "gpucell.spec",
    "ImageSpec": "gpucell.spec",
    "K3sCluster": "gpucell.k3s.cluster",
    "K3sClusterArgs": "gpucell.k3s.cluster",
    "K3sClusterSpec": "gpucell.spec",
    "KServe": "gpucell.components.kserve",
    "KServeArgs": "gpucell.components.kserve",
    "KServeSpec": "gpucell.spec",
    "Keda": "gpucell.components.keda",
    "KedaArgs": "gpucell.components.keda",
    "KubeVirt": "gpucell.components.kubevirt",
    "KubeVirtArgs": "gpucell.components.kubevirt",
    "Metrics": "gpucell.components.metrics",
    "MetricsArgs": "gpucell.components.metrics",
    "MigStrategy": "gpucell.spec",
    "ModelEndpoint": "gpucell.workloads.model_endpoint",
    "ModelEndpointArgs": "gpucell.workloads.model_endpoint",
    "ModelEndpointSpec": "gpucell.spec",
    "Network": "gpucell.spec",
    "NetworkOperator": "gpucell.components.network_operator",
    "NetworkOperatorArgs": "gpucell.components.network_operator",
    "NodePool": "gpucell.spec",
    "NodeRole": "gpucell.spec",
    "Notebook": "gpucell.workloads.notebook",
    "NotebookArgs": "gpucell.workloads.notebook",
    "NotebookSpec": "gpucell.spec",
    "PriorityClasses": "gpucell.components.priority_classes",
    "PriorityClassesArgs": "gpucell.components.priority_classes",
    "Platform": "gpucell.platform",
    "RegionalCell": "gpucell.cell",
    "RegionalCellArgs": "gpucell.cell",
    "RunStrategy": "gpucell.spec",
    "ScaleMetric": "gpucell.spec",
    "ServiceType": "gpucell.spec",
    "ServingRuntime": "gpucell.workloads.serving_runtime",
    "ServingRuntimeArgs": "gpucell.workloads.serving_runtime",
    "Ssh": "gpucell.spec",
    "SshOverride": "gpucell.spec",
    "SshService": "gpucell.spec",
    "StackSpec": "gpucell.spec",
    "Storage": "gpucell.components.storage",
    "StorageArgs": "gpucell.components.storage",
    "StorageBackend": "gpucell.spec",
    "StorageSpec": "gpucell.spec",
    "Tenant": "gpucell.tenancy.tenant",
    "TenantArgs": "gpucell.tenancy.tenant",
    "TenantCluster": "gpucell.workloads.tenant_cluster",
    "TenantClusterArgs": "gpucell.workloads.tenant_cluster",
    "TenantClusterSpec": "gpucell.spec.tenant_clusters",
    "TenantGroups": "gpucell.spec",
    "TenantLimits": "gpucell.spec",
    "TenantQuota": "gpucell.spec",
    "TenantRef": "gpucell.tenancy.tenant",
    "TenantSpec": "gpucell.spec",
    "TopologyProfile": "gpucell.spec",
    "Versions": "gpucell.spec",
    "VmDisk": "gpucell.spec",
    "VolumeClass": "gpucell.components.cdi",
    "VolumeMode": "gpucell.spec",
}
"""Public name -> the module that defines it."""


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        value = getattr(importlib.import_module(_HOMES[name]), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'gpucell' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
