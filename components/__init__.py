"""gpucell components: a regional GPU cell and its tenants' workloads as Pulumi ComponentResources.

    from components import RegionalCell, Tenant, GpuVirtualMachine, Notebook, ModelEndpoint

Names are imported on first use (PEP 562), so ``import components.spec`` stays free of Pulumi provider SDKs.
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
    "RegionalCell": "components.cell",
    "RegionalCellArgs": "components.cell",
    "Tenant": "components.tenancy",
    "TenantArgs": "components.tenancy",
    "GpuVirtualMachine": "components.workloads.virtual_machine",
    "GpuVirtualMachineArgs": "components.workloads.virtual_machine",
    "Notebook": "components.workloads.notebook",
    "NotebookArgs": "components.workloads.notebook",
    "ModelEndpoint": "components.workloads.model_endpoint",
    "ModelEndpointArgs": "components.workloads.model_endpoint",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'components' has no attribute {name!r}")
