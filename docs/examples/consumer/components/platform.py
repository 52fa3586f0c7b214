"""GpuPlatform: this team's region, built from gpucell's RegionalCell plus a Tenant with one GPU VM."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from gpucell import (
    CellSpec,
    GpuVirtualMachine,
    GpuVirtualMachineArgs,
    GpuVirtualMachineSpec,
    RegionalCell,
    RegionalCellArgs,
    Tenant,
    TenantArgs,
    TenantSpec,
)

REGION: dict[str, Any] = {
    "network": {"nodeCidr": "10.60.0.0/24"},
    "nodePools": {
        "servers": {"role": "server", "hosts": [{"name": "fra1-srv-1", "address": "10.60.0.11"}]},
        "h100": {
            "role": "gpu",
            "gpuModel": "H100-SXM5-80GB",
            "gpusPerNode": 8,
            "gpuMode": "vm-passthrough",
            "hosts": [{"name": "fra1-h100-1", "address": "10.60.0.21"}],
        },
        "cpu": {"role": "cpu", "hosts": [{"name": "fra1-cpu-1", "address": "10.60.0.31"}]},
    },
}
"""The region, in the camelCase shape of a gpucell stack config."""

ML_TENANT: dict[str, Any] = {
    "quota": {
        "cpuMillicores": 64000,
        "memoryGib": 512,
        "storageGib": 2048,
        "gpus": {"nvidia.com/GH100_H100_SXM5_80GB": 2},
    },
    "egress": "internet",
}


@dataclass(frozen=True)
class GpuPlatformArgs:
    """Inputs of :class:`GpuPlatform`."""

    ssh_private_key: pulumi.Input[str]
    """SSH key of the region's nodes (a Pulumi secret)."""


class GpuPlatform(pulumi.ComponentResource):
    """The region (``RegionalCell``), the ``ml`` tenant and its 2-GPU training VM."""

    api_server_url: pulumi.Output[str]
    ml_namespace: pulumi.Output[str]

    def __init__(self, name: str, args: GpuPlatformArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-platform:index:GpuPlatform", name, None, opts)
        spec = CellSpec.model_validate(REGION)
        self.cell = RegionalCell(
            name,
            RegionalCellArgs(cell=spec, ssh_private_key=args.ssh_private_key),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.tenant = Tenant(
            f"{name}-ml",
            TenantArgs.from_cell("ml", TenantSpec.model_validate(ML_TENANT), self.cell),
            opts=pulumi.ResourceOptions(parent=self),
        )
        vm = {
            "gpuModel": "H100-SXM5-80GB",
            "gpus": 2,
            "memoryGib": 64,
            "cpu": {"cores": 16},
            "rootDisk": {"source": {"registry": "docker://quay.io/containerdisks/ubuntu:24.04"}, "sizeGib": 100},
            "sshKeys": [
                "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHq0Zi1KGzcvBMcpPg4ZOgSjpQ0wUuvD9mGMyW2SGhbQ ml@example.com"
            ],
        }
        self.train = GpuVirtualMachine(
            f"{name}-ml-train",
            GpuVirtualMachineArgs("train", GpuVirtualMachineSpec.model_validate(vm), self.tenant),
            opts=pulumi.ResourceOptions(parent=self.tenant),
        )
        self.api_server_url = self.cell.api_server_url
        self.ml_namespace = self.tenant.namespace
        self.register_outputs({"apiServerUrl": self.api_server_url, "mlNamespace": self.ml_namespace})
