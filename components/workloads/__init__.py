"""Tenant workloads: GPU virtual machines, notebooks and model endpoints, one module each."""

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
