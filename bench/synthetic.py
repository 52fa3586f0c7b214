"""Synthetic stacks for the fleet-scale benchmark, built from the real config models so they pass admission.

``stack_config(Size(regions=1, nodes=200, workloads=1000))`` returns the ``config:`` mapping of a
``Pulumi.<stack>.yaml``: every region has 3 servers, GPU pools in each mode (H100 passthrough VMs on NUMA-aligned
nodes, H200 whole-GPU containers, H200 MIG containers, L40S vGPU VMs) and CPU workers, and tenants of 50 workloads
each in a fixed mix: GPU VMs in both VM modes, MIG and whole-GPU notebooks and endpoints, CPU notebooks and CPU VMs.
Each tenant's quota is exactly what its workloads use, so the region's capacity is never overcommitted; a size
whose workloads do not fit its nodes raises ``ValueError`` before anything is planned.
"""

from __future__ import annotations

import copy
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpucell.admission.inventory import WHOLE_GPU
from gpucell.catalog.gpu_catalog import CATALOG, mig_resource_name
from gpucell.spec import StackSpec

__all__ = ["MIX", "Size", "stack_config", "write_stack"]

WORKLOADS_PER_TENANT = 50
SECURE = {"secure": "v1:placeholder"}
PASSTHROUGH = CATALOG["H100-SXM5-80GB"].passthrough_resource
VGPU_PROFILE = "L40S-12Q"
VGPU = CATALOG["L40S"].vgpu_resource(VGPU_PROFILE)
MIG_PROFILE = "1g.18gb"
MIG = mig_resource_name(MIG_PROFILE)

MIX: tuple[tuple[str, float], ...] = (
    ("vm-passthrough", 0.15),
    ("vm-vgpu", 0.10),
    ("notebook-mig", 0.20),
    ("notebook-gpu", 0.10),
    ("endpoint-gpu", 0.15),
    ("endpoint-mig", 0.10),
    ("notebook-cpu", 0.10),
    ("vm-cpu", 0.10),
)
"""Workload kind -> share of a region's workloads."""

# Share of a region's worker nodes per pool (the rest are CPU workers); each pool has at least one node.
_POOL_SHARES = (("h100-vm", 0.2), ("h200", 0.2), ("h200-mig", 0.2), ("l40s-vgpu", 0.1))


@dataclass(frozen=True)
class Size:
    """A benchmark size: regions, nodes per region (servers included) and workloads per region."""

    regions: int
    nodes: int
    workloads: int

    def __str__(self) -> str:
        return f"{self.regions}r/{self.nodes}n/{self.workloads}w"


def _pools(region: int, nodes: int) -> dict[str, Any]:
    workers = nodes - 3
    if workers < len(_POOL_SHARES) + 1:
        raise ValueError(f"{nodes} nodes leave {workers} workers; a synthetic region needs at least 8 nodes")
    counts = {name: max(1, math.floor(workers * share)) for name, share in _POOL_SHARES}
    counts["cpu"] = workers - sum(counts.values())
    addresses = (f"10.{100 + region}.{i // 250}.{1 + i % 250}" for i in range(nodes))

    def members(prefix: str, count: int) -> list[dict[str, str]]:
        return [{"name": f"r{region}-{prefix}-{i}", "address": next(addresses)} for i in range(count)]

    topology = {
        "reservedCpus": "0-3,112-115",
        "numaNodes": 2,
        "cpusPerNuma": 112,
        "memoryPerNumaGib": 1000,
        "reservedMemoryPerNumaMib": 4096,
    }
    return {
        "servers": {"role": "server", "hosts": members("srv", 3)},
        "h100-vm": {
            "role": "gpu",
            "gpuModel": "H100-SXM5-80GB",
            "gpusPerNode": 8,
            "gpuMode": "vm-passthrough",
            "topology": topology,
            "hosts": members("h100", counts["h100-vm"]),
        },
        "h200": {
            "role": "gpu",
            "gpuModel": "H200-SXM-141GB",
            "gpusPerNode": 8,
            "gpuMode": "container",
            "hosts": members("h200", counts["h200"]),
        },
        "h200-mig": {
            "role": "gpu",
            "gpuModel": "H200-SXM-141GB",
            "gpusPerNode": 8,
            "gpuMode": "container",
            "migConfig": "all-balanced",
            "hosts": members("h200mig", counts["h200-mig"]),
        },
        "l40s-vgpu": {
            "role": "gpu",
            "gpuModel": "L40S",
            "gpusPerNode": 8,
            "gpuMode": "vm-vgpu",
            "vgpuProfile": VGPU_PROFILE,
            "hosts": members("l40s", counts["l40s-vgpu"]),
        },
        "cpu": {"role": "cpu", "hosts": members("cpu", counts["cpu"])},
    }


def _kinds(workloads: int) -> list[str]:
    """``workloads`` kinds in the :data:`MIX` proportions, interleaved so every tenant gets a slice of each."""
    counts = {kind: math.floor(workloads * share) for kind, share in MIX}
    for kind, _ in MIX:  # rounding leftovers go to the kinds in order
        if sum(counts.values()) == workloads:
            break
        counts[kind] += 1
    out: list[str] = []
    while len(out) < workloads:
        for kind, _ in MIX:
            if counts[kind]:
                counts[kind] -= 1
                out.append(kind)
    return out


_DISK = {"source": {"registry": "docker://quay.io/containerdisks/ubuntu:24.04"}, "sizeGib": 20}
_SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGpucGvbGpP3rZ1ffYbV1Sm2eSwe0RhXj8fkZ4bQ1r7n bench"
"""Every VM has a login (a VM without one is refused)."""


def _workload(kind: str) -> tuple[str, dict[str, Any], Counter[str], tuple[int, int, int]]:
    """(section, spec, GPU units by resource, (cpu millicores, memory GiB, storage GiB)) of one workload."""
    if kind.startswith("vm-"):
        vm: dict[str, Any] = {
            "cpu": {"cores": 4},
            "memoryGib": 16,
            "rootDisk": copy.deepcopy(_DISK),
            "sshKeys": [_SSH_KEY],
        }
        units: Counter[str] = Counter()
        if kind == "vm-passthrough":
            vm.update(gpuModel="H100-SXM5-80GB", gpus=1)
            units[PASSTHROUGH] = 1
        elif kind == "vm-vgpu":
            vm.update(gpuModel="L40S", gpus=1, vgpuProfile=VGPU_PROFILE)
            units[VGPU] = 1
        return "virtualMachines", vm, units, (4000, 16, 20)
    if kind.startswith("notebook-"):
        notebook: dict[str, Any] = {"cpuMillicores": 2000, "memoryGib": 8, "homeGib": 20}
        units = Counter()
        if kind == "notebook-mig":
            notebook["gpu"] = {"count": 1, "migProfile": MIG_PROFILE}
            units[MIG] = 1
        elif kind == "notebook-gpu":
            notebook["gpu"] = {"count": 1, "model": "H200-SXM-141GB"}
            units[WHOLE_GPU] = 1
        return "notebooks", notebook, units, (2000, 8, 20)
    endpoint: dict[str, Any] = {
        "modelFormat": "huggingface",
        "storageUri": "hf://Qwen/Qwen2.5-7B-Instruct",
        "cpuMillicores": 4000,
        "memoryGib": 32,
    }
    if kind == "endpoint-mig":
        endpoint["gpu"] = {"count": 1, "migProfile": MIG_PROFILE}
        return "modelEndpoints", endpoint, Counter({MIG: 1}), (4000, 32, 0)
    endpoint["gpu"] = {"count": 1, "model": "H200-SXM-141GB"}
    return "modelEndpoints", endpoint, Counter({WHOLE_GPU: 1}), (4000, 32, 0)


def _tenants(workloads: int) -> dict[str, Any]:
    tenants: dict[str, Any] = {}
    for index, kind in enumerate(_kinds(workloads)):
        name = f"t{index // WORKLOADS_PER_TENANT}"
        tenant = tenants.setdefault(
            name,
            {
                "groups": {"members": [f"{name}-ml"]},
                "egress": "internet",
                "quota": {
                    "cpuMillicores": 0,
                    "memoryGib": 0,
                    "storageGib": 0,
                    "gpus": {},
                    "pods": 0,
                    "persistentVolumeClaims": 0,
                },
            },
        )
        section, spec, units, (cpu, memory, storage) = _workload(kind)
        tenant.setdefault(section, {})[f"w{index}"] = spec
        quota = tenant["quota"]
        quota["cpuMillicores"] += cpu
        quota["memoryGib"] += memory
        quota["storageGib"] += storage
        quota["pods"] += 1
        quota["persistentVolumeClaims"] += 1 if storage else 0
        for resource, count in units.items():
            quota["gpus"][resource] = quota["gpus"].get(resource, 0) + count
    return tenants


def region_config(region: int, nodes: int, workloads: int) -> dict[str, Any]:
    """One synthetic region (index ``region`` picks its addresses) with ``nodes`` hosts and ``workloads``."""
    return {
        "network": {"nodeCidr": f"10.{100 + region}.0.0/16", "apiEndpoint": f"10.{100 + region}.255.250"},
        "etcd": {"initServer": f"r{region}-srv-0"},
        "ssh": {"user": "ubuntu"},
        "storage": {"backend": "longhorn", "replicas": 3},
        "gpuOperator": {
            "vgpuDriverImage": {"repository": "registry.example.net/nvidia", "version": "580.95.02-ubuntu24.04"}
        },
        "nodePools": _pools(region, nodes),
        "tenants": _tenants(workloads),
    }


def stack_config(size: Size) -> dict[str, Any]:
    """The ``config:`` mapping of a synthetic ``Pulumi.<stack>.yaml``. Raises ``ValueError`` (or gpucell's
    ``ConfigError``) when the size's workloads do not fit its nodes."""
    regions = {f"r{i}": region_config(i, size.nodes, size.workloads) for i in range(size.regions)}
    StackSpec.model_validate({"regions": regions})  # the size must pass admission, or the benchmark is moot
    return {"gpucell:sshPrivateKey": dict(SECURE), "gpucell:regions": regions}


def write_stack(project_dir: Path, stack: str, size: Size) -> Path:
    """Write ``Pulumi.yaml`` and ``Pulumi.<stack>.yaml`` for ``size`` into ``project_dir``; returns the stack file."""
    project_dir.mkdir(parents=True, exist_ok=True)
    (project_dir / "Pulumi.yaml").write_text("name: gpucell\nruntime: python\n")
    path = project_dir / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump({"config": stack_config(size)}, sort_keys=False, width=200))
    return path
