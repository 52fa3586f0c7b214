"""gpucell components: a regional GPU cell and its tenants' workloads as Pulumi ComponentResources.

    from gpucell import RegionalCell, Tenant, GpuVirtualMachine, Notebook, ModelEndpoint

Names are imported on first use (PEP 562), so ``import gpucell.spec`` stays free of Pulumi provider SDKs.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "GpuVirtualMachine",
    "GpuVirtualMachineArgs",
    "ModelEndpoint",
    "ModelEndpointArgs",
    "Notebook",
    "NotebookArgs",
    "RegionalCell",
    "RegionalCellArgs",
    "Tenant",
    "TenantArgs",
]

_HOMES = {
    "RegionalCell": "gpucell.cell",
    "RegionalCellArgs": "gpucell.cell",
    "Tenant": "gpucell.tenancy",
    "TenantArgs": "gpucell.tenancy",
    "GpuVirtualMachine": "gpucell.workloads.virtual_machine",
    "GpuVirtualMachineArgs": "gpucell.workloads.virtual_machine",
    "Notebook": "gpucell.workloads.notebook",
    "NotebookArgs": "gpucell.workloads.notebook",
    "ModelEndpoint": "gpucell.workloads.model_endpoint",
    "ModelEndpointArgs": "gpucell.workloads.model_endpoint",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'components' has no attribute {name!r}")
