"""Tenant workloads: GPU virtual machines, notebooks and model endpoints, one module each."""

from components.workloads.model_endpoint import ModelEndpoint, ModelEndpointArgs
from components.workloads.notebook import Notebook, NotebookArgs
from components.workloads.virtual_machine import GpuVirtualMachine, GpuVirtualMachineArgs

__all__ = [
    "GpuVirtualMachine",
    "GpuVirtualMachineArgs",
    "ModelEndpoint",
    "ModelEndpointArgs",
    "Notebook",
    "NotebookArgs",
]
