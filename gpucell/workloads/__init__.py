"""Tenant workloads: GPU virtual machines, notebooks and model endpoints, one module each.

Names are imported on first use (PEP 562), as in :mod:`gpucell` and :mod:`gpucell.spec`, so importing one workload
module does not load the others (docs/decisions/0019-standalone-components.md). The helpers every tenant object
shares live in :mod:`gpucell.tenancy` (``_common``), below the workloads (decision 0033).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpucell.workloads.model_endpoint import ModelEndpoint, ModelEndpointArgs
    from gpucell.workloads.notebook import Notebook, NotebookArgs
    from gpucell.workloads.virtual_machine import GpuVirtualMachine, GpuVirtualMachineArgs

__all__ = [
    "GpuVirtualMachine",
    "GpuVirtualMachineArgs",
    "ModelEndpoint",
    "ModelEndpointArgs",
    "Notebook",
    "NotebookArgs",
]

_HOMES: dict[str, str] = {
    "GpuVirtualMachine": "gpucell.workloads.virtual_machine",
    "GpuVirtualMachineArgs": "gpucell.workloads.virtual_machine",
    "ModelEndpoint": "gpucell.workloads.model_endpoint",
    "ModelEndpointArgs": "gpucell.workloads.model_endpoint",
    "Notebook": "gpucell.workloads.notebook",
    "NotebookArgs": "gpucell.workloads.notebook",
}
"""Public name -> the module that defines it."""


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        value = getattr(importlib.import_module(_HOMES[name]), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'gpucell.workloads' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
