"""A GPU pool's PCIe topology and RDMA fabric: which GPUs and ConnectX NICs sit behind which PCIe switch on which NUMA
node, the link the NICs run and how many SR-IOV VFs each gets (docs/decisions/0039-gpu-fabric-rdma-nics.md).

Hosts of a pool are identical (HGX baseboards put the same parts at the same PCI addresses), so the pool declares one
topology; each node's install script checks it against sysfs (:func:`gpucell.k3s._host_setup.fabric_check`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from pydantic import Field, StrictInt, field_validator, model_validator

from gpucell.errors import SpecError, shown
from gpucell.spec._base import SpecModel

__all__ = [
    "MELLANOX_PCI_VENDOR",
    "NIC_MODELS",
    "FabricSpec",
    "LinkType",
    "PcieSwitch",
    "Rail",
    "rail_resource_name",
]

MELLANOX_PCI_VENDOR = "15b3"
"""PCI vendor id of NVIDIA networking (Mellanox), lower-case hex (``pci.ids``)."""
NIC_MODELS = {"ConnectX-6": "101b", "ConnectX-6-Dx": "101d", "ConnectX-7": "1021", "ConnectX-8": "1023"}
"""ConnectX model -> PCI device id of its physical function, lower-case hex (pciutils ``pci.ids``, vendor ``15b3``:
``101b`` MT28908 Family [ConnectX-6], ``101d`` MT2892 Family [ConnectX-6 Dx], ``1021`` MT2910 Family [ConnectX-7],
``1023`` CX8 Family [ConnectX-8])."""
_BDF = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")


class LinkType(StrEnum):
    """What the NICs' ports run: ``ethernet`` (RoCE; tenants isolated by VLAN) or ``infiniband`` (partition keys)."""

    ETHERNET = "ethernet"
    INFINIBAND = "infiniband"

    @property
    def sriov(self) -> str:
        """The SR-IOV Network Operator's ``linkType`` (``eth`` or ``ib``, ``SriovNetworkNodePolicy`` v1 CRD enum)."""
        return "eth" if self is LinkType.ETHERNET else "ib"


def _bdfs(values: list[str]) -> list[str]:
    for index, value in enumerate(values):
        if not _BDF.fullmatch(value):
            raise SpecError(
                (index,),
                f"{shown(value)} is not a PCI address; use domain:bus:device.function as lspci -D prints it, "
                "lower-case (0000:18:00.0)",
            )
    return values


class PcieSwitch(SpecModel):
    """One PCIe switch (or root port) of a host: its NUMA node and the GPUs and NICs behind it, by PCI address."""

    numa_node: StrictInt = Field(ge=0, le=15)
    """The NUMA node the switch hangs off (``/sys/bus/pci/devices/<bdf>/numa_node`` of its devices)."""
    gpus: list[str] = Field(min_length=1, max_length=16)
    """PCI addresses of its GPUs (``0000:18:00.0``)."""
    nics: list[str] = Field(min_length=1, max_length=16)
    """PCI addresses of its NICs' physical functions, one per GPU: the GPU at position i pairs with the NIC at i."""

    _addresses = field_validator("gpus", "nics")(_bdfs)


@dataclass(frozen=True)
class Rail:
    """One NIC of a host and the GPU it serves (a rail: the i-th NIC of the pool, in declaration order)."""

    index: int
    """Rail number, from 0, in the order the pool's ``fabric.switches`` list the NICs."""
    nic: str
    """The NIC's PCI address."""
    gpu: str
    """The GPU on the same switch it pairs with."""
    numa_node: int
    """The NUMA node of both."""
    switch: int
    """Index of the switch in ``fabric.switches``."""


def rail_resource_name(pool: str, rail: int) -> str:
    """The SR-IOV device plugin resource (without the ``nvidia.com/`` prefix) of rail ``rail`` of ``pool``:
    ``h100vm_rail0`` (letters, digits and ``_`` only: the device plugin's resource name rule)."""
    return f"{re.sub(r'[^A-Za-z0-9]', '', pool)}_rail{rail}"


class FabricSpec(SpecModel):
    """The PCIe topology and RDMA fabric of a pool's hosts (``nodePools.<p>.fabric``): only ``vm-passthrough`` pools
    with a ``topology`` profile; see docs/decisions/0039-gpu-fabric-rdma-nics.md."""

    link_type: LinkType
    """``ethernet`` (RoCE) or ``infiniband``: what the SR-IOV Network Operator sets the ports to."""
    nic_model: str = "ConnectX-7"
    """The NICs' model, one of :data:`NIC_MODELS`. Defaults to ``ConnectX-7``."""
    vfs_per_nic: StrictInt = Field(default=1, ge=1, le=127)
    """SR-IOV virtual functions created on each NIC (``numVfs``): VMs on one host that can share a rail (count).
    Defaults to 1 (a host's VMs take whole NUMA nodes, so no two share a NIC)."""
    mtu: StrictInt | None = Field(default=None, ge=1280, le=9216)
    """The physical functions' MTU (``SriovNetworkNodePolicy.mtu``); none: the NIC's own."""
    nvswitches: list[str] = []
    """PCI addresses of the HGX board's NVSwitches (``10de`` devices); none: not checked."""
    switches: list[PcieSwitch] = Field(min_length=1, max_length=16)
    """The host's PCIe switches with their GPUs and NICs, in the order the rails are numbered."""

    _nvswitches = field_validator("nvswitches")(_bdfs)

    @field_validator("nic_model")
    @classmethod
    def _known_nic(cls, value: str) -> str:
        if value not in NIC_MODELS:
            raise ValueError(f"is not a catalogued NIC; accepted: {', '.join(NIC_MODELS)}")
        return value

    @model_validator(mode="after")
    def _one_nic_per_gpu(self) -> FabricSpec:
        seen: dict[str, tuple[str | int, ...]] = {}
        for index, switch in enumerate(self.switches):
            if len(switch.nics) != len(switch.gpus):
                raise SpecError(
                    ("switches", index, "nics"),
                    f"{len(switch.nics)} NICs for {len(switch.gpus)} GPUs: each GPU pairs with the NIC on its own "
                    "switch (a rail); list one NIC per GPU, in the same order",
                )
            for key in ("gpus", "nics"):
                for position, address in enumerate(getattr(switch, key)):
                    where = ("switches", index, key, position)
                    if address in seen:
                        raise SpecError(where, f"{shown(address)} is already listed at {_path(seen[address])}")
                    seen[address] = where
        for position, address in enumerate(self.nvswitches):
            if address in seen:
                raise SpecError(
                    ("nvswitches", position), f"{shown(address)} is already listed at {_path(seen[address])}"
                )
            seen[address] = ("nvswitches", position)
        return self

    @property
    def nic_device_id(self) -> str:
        """The NICs' PCI device id, lower-case hex (:data:`NIC_MODELS`)."""
        return NIC_MODELS[self.nic_model]

    @property
    def rails(self) -> list[Rail]:
        """Every NIC of a host with its GPU, numbered in declaration order."""
        rails: list[Rail] = []
        for index, switch in enumerate(self.switches):
            for gpu, nic in zip(switch.gpus, switch.nics, strict=True):
                rails.append(Rail(len(rails), nic, gpu, switch.numa_node, index))
        return rails

    @property
    def gpu_count(self) -> int:
        """GPUs the switches hold (count)."""
        return sum(len(switch.gpus) for switch in self.switches)

    def rails_of(self, numa_node: int) -> list[int]:
        """The rail numbers on ``numa_node``, in order."""
        return [rail.index for rail in self.rails if rail.numa_node == numa_node]

    @property
    def numa_nodes(self) -> list[int]:
        """The NUMA nodes holding GPUs, ascending."""
        return sorted({switch.numa_node for switch in self.switches})


def _path(where: tuple[str | int, ...]) -> str:
    """``fabric.switches[0].nics[1]`` for ``("switches", 0, "nics", 1)``."""
    return "fabric" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in where)
