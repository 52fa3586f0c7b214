"""Tenant workloads rendered into a cell: GPU virtual machines, notebooks and model endpoints."""

from components.workloads.virtual_machine import GpuVirtualMachine, GpuVirtualMachineArgs

__all__ = ["GpuVirtualMachine", "GpuVirtualMachineArgs"]
