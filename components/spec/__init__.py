"""Typed, validated specs of a cell: what a stack config says, checked before anything is deployed."""

from components.spec.cell import (
    CdiSpec,
    CellSpec,
    ChartSpec,
    CiliumSpec,
    GpuOperatorSpec,
    ImageSpec,
    KServeSpec,
    MigStrategy,
    StackSpec,
    StorageBackend,
    StorageSpec,
)
from components.spec.network import Host, Network, Ssh, SshOverride
from components.spec.pools import GpuMode, NodePool, NodeRole, TopologyProfile
from components.spec.versions import DeploymentMode, Versions, kserve_deployment_modes

__all__ = [
    "CdiSpec",
    "CellSpec",
    "ChartSpec",
    "CiliumSpec",
    "DeploymentMode",
    "GpuMode",
    "GpuOperatorSpec",
    "Host",
    "ImageSpec",
    "KServeSpec",
    "MigStrategy",
    "Network",
    "NodePool",
    "NodeRole",
    "Ssh",
    "SshOverride",
    "StackSpec",
    "StorageBackend",
    "StorageSpec",
    "TopologyProfile",
    "Versions",
    "kserve_deployment_modes",
]
