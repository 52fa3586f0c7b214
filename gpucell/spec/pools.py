"""Node pools: a role, its hosts and, for GPU pools, the GPU model and the one workload mode its nodes run."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from enum import StrEnum

from pydantic import Field, PrivateAttr, StrictInt, field_validator, model_validator
from pydantic.alias_generators import to_camel

from gpucell.catalog.acceptance_facts import acceptance_seconds, min_bus_bandwidth
from gpucell.catalog.gpu_catalog import PASSTHROUGH_ONLY, GpuModel
from gpucell.errors import SpecError, shown
from gpucell.spec._base import SpecModel
from gpucell.spec.acceptance import Acceptance
from gpucell.spec.fabric import FabricSpec
from gpucell.spec.gpu_models import catalog_in_force, unknown_model
from gpucell.spec.lifecycle import Rollout
from gpucell.spec.network import Host, SshOverride

__all__ = [
    "HUGEPAGE_SIZES",
    "GpuMode",
    "NodePool",
    "NodeRole",
    "TopologyManagerPolicy",
    "TopologyProfile",
    "gpu_pools",
    "role_pools",
    "taint_tolerations",
]

_CPUSET = re.compile(r"\d+(-\d+)?(,\d+(-\d+)?)*")
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = re.compile(rf"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_LABEL_NAME}")
_LABEL_VALUE = re.compile(rf"({_LABEL_NAME})?")
SERVER_TAINT = "node-role.kubernetes.io/control-plane:NoSchedule"
"""The taint of every server (k3s ``node-taint``, as the k3s docs suggest for dedicated servers, "Dedicated
control-plane nodes"): tenant pods and VMs stay off the etcd members. k3s's own add-ons (CoreDNS, local-path,
metrics-server) and Cilium's agent tolerate it."""
_TAINT = re.compile(r"(?P<key>[^=:]+)(=(?P<value>[^:]*))?:(?P<effect>NoSchedule|PreferNoSchedule|NoExecute)")
POOL_LABEL = "gpucell.io/pool"
ROLE_LABEL = "gpucell.io/role"
WORKLOAD_LABEL = "nvidia.com/gpu.workload.config"
"""GPU Operator sandbox workloads: the node's mode (``container``, ``vm-passthrough``, ``vm-vgpu``)."""
MIG_LABEL = "nvidia.com/mig.config"
"""GPU Operator MIG manager: the node's ``mig-parted`` layout name."""
MIG_DISABLED = "all-disabled"
"""The ``mig-parted`` layout with MIG off on every GPU (in the GPU Operator's ``default-mig-parted-config``)."""
VGPU_LABEL = "nvidia.com/vgpu.config"
"""GPU Operator vGPU device manager: the node's vGPU type."""
DRA_DISABLED_OPERANDS = (
    "nvidia.com/gpu.deploy.device-plugin",
    "nvidia.com/gpu.deploy.dcgm",
    "nvidia.com/gpu.deploy.dcgm-exporter",
)
"""GPU Operator state labels set to ``false`` on ``dra`` nodes (the operator honours a non-empty value,
``addGPUStateLabels`` in GPU Operator v26.7.0 ``controllers/state_manager.go``): the device plugin "must be disabled"
beside the DRA driver, DCGM and its exporter are "recommended to disable" because they hold the GPUs' device nodes
open, which stops the driver from rebinding a GPU to ``vfio-pci`` (kubernetes-sigs/dra-driver-nvidia-gpu
``site/content/docs/guides/gpu-allocation/kubevirt-vfio-gpu-passthrough.md``, "Limitations and considerations")."""
SRIOV_VGPU_DISABLED_OPERANDS = (
    "nvidia.com/gpu.deploy.vgpu-device-manager",
    "nvidia.com/gpu.deploy.sandbox-device-plugin",
    "nvidia.com/gpu.deploy.sandbox-validator",
)
"""GPU Operator state labels set to ``false`` on SR-IOV vGPU nodes: the mdev-only operands
(:mod:`gpucell.k3s.vgpu_sriov`, decision 0011)."""
DRA_KUBELET_PLUGIN_LABEL = "gpucell.io/dra-kubelet-plugin"
"""``true`` on ``dra`` nodes: the DRA driver's kubelet plugin runs where it is set (chart value
``kubeletPlugin.nodeSelector``), and the GPU Operator's driver manager pauses it across a driver reload (its
``NODE_LABEL_FOR_GPU_POD_EVICTION``). Controllers rewrite its value, so it is set at registration only, never owned
by an API patch."""
MANAGED_LABELS = (
    POOL_LABEL,
    ROLE_LABEL,
    WORKLOAD_LABEL,
    MIG_LABEL,
    VGPU_LABEL,
    DRA_KUBELET_PLUGIN_LABEL,
    *DRA_DISABLED_OPERANDS,
    *SRIOV_VGPU_DISABLED_OPERANDS,
)
"""Node labels gpucell sets from the pool spec; a pool's ``labels`` may not set them."""
MAX_CPU_ID = 8191
"""Highest CPU number a cpuset may name: Linux builds for x86_64 and arm64 cap ``NR_CPUS`` at 8192."""
EVICTION_HARD_MEMORY_MIB = 500
"""``eviction-hard`` ``memory.available`` threshold on topology-profile nodes, MiB."""
HUGEPAGE_SIZES = {"1Gi": 1024, "2Mi": 2}
"""The hugepage sizes a VM may ask for (KubeVirt ``memory.hugepages.pageSize`` on x86_64: "valid values are 1Gi and
2Mi", ``v1.Hugepages`` in the v1.9.0 swagger) -> MiB per page."""


def taint_tolerations(taints: Iterable[str]) -> list[dict[str, str]]:
    """Tolerations for node taints (``key=value:Effect`` -> ``Equal``, ``key:Effect`` -> ``Exists``), in order,
    without duplicates: ``[{"key": "gpu", "operator": "Equal", "value": "h100", "effect": "NoSchedule"}]``."""
    out: list[dict[str, str]] = []
    for taint in taints:
        key_value, effect = taint.rsplit(":", 1)
        key, sep, value = key_value.partition("=")
        toleration = (
            {"key": key, "operator": "Equal", "value": value, "effect": effect}
            if sep
            else {"key": key, "operator": "Exists", "effect": effect}
        )
        if toleration not in out:
            out.append(toleration)
    return out


class NodeRole(StrEnum):
    """What a pool's nodes do: k3s servers (control plane + embedded etcd), GPU workers or CPU workers."""

    SERVER = "server"
    GPU = "gpu"
    CPU = "cpu"


class GpuMode(StrEnum):
    """How a GPU pool's nodes hand out their GPUs.

    ``container``, ``vm-passthrough`` and ``vm-vgpu`` are the GPU Operator's sandbox workload modes (node label
    ``nvidia.com/gpu.workload.config``), whose device plugins advertise the GPUs as extended resources. ``dra``
    (opt-in, experimental upstream): the NVIDIA DRA driver for GPUs publishes each GPU both as a container GPU and as
    a VFIO device, and a workload's ResourceClaim decides per GPU, when it is scheduled, whether it serves a container
    or a VM (:mod:`gpucell.admission.dra`); the node runs the operator's ``container`` workload (driver and toolkit)
    without its device plugin.
    """

    CONTAINER = "container"
    VM_PASSTHROUGH = "vm-passthrough"
    VM_VGPU = "vm-vgpu"
    DRA = "dra"

    @property
    def runs_vms(self) -> bool:
        """True for the modes that hand GPUs to KubeVirt VMs (``dra`` pools serve VMs and containers)."""
        return self is not GpuMode.CONTAINER

    @property
    def host_health(self) -> bool:
        """True for the modes whose GPUs DCGM does not see, bound to ``vfio-pci`` or split by a host's vGPU Manager
        (``vm-passthrough``, ``vm-vgpu``, ``dra``): their hosts run the host-side GPU health collector
        (:mod:`gpucell.k3s.gpu_host_health`, decision 0038)."""
        return self is not GpuMode.CONTAINER

    @property
    def runs_containers(self) -> bool:
        """True for the modes whose GPUs serve containers (``container`` and ``dra``)."""
        return self in (GpuMode.CONTAINER, GpuMode.DRA)

    @property
    def workload_config(self) -> str:
        """The node's ``nvidia.com/gpu.workload.config``: the mode itself, ``container`` for ``dra`` (the GPU
        Operator keeps the driver loaded there; the DRA driver rebinds a GPU to ``vfio-pci`` only for a VM's claim)."""
        return GpuMode.CONTAINER.value if self is GpuMode.DRA else self.value


class TopologyManagerPolicy(StrEnum):
    """Kubelet ``topology-manager-policy`` values a topology profile may use."""

    RESTRICTED = "restricted"
    SINGLE_NUMA_NODE = "single-numa-node"
    BEST_EFFORT = "best-effort"


EVICTION_HARD_DEFAULTS = ("nodefs.available<10%", "imagefs.available<15%", "nodefs.inodesFree<5%")
"""The kubelet's other hard-eviction defaults: setting ``eviction-hard`` replaces the whole default set, so the
ones we do not change are repeated (Kubernetes "Node-pressure Eviction", default hard thresholds)."""


class TopologyProfile(SpecModel):
    """Kubelet settings for NUMA-aligned VMs (static CPU manager, Static memory manager, topology manager), and what
    the hosts have: memory and hugepages per NUMA node.

    The hugepages are reserved by the host's kernel, not by gpucell: on the kernel command line, per NUMA node
    (``hugepagesz=1G hugepages=0:960,1:960``, torvalds/linux ``Documentation/admin-guide/mm/hugetlbpage.rst``:
    boot-time reservation is "the most reliable method" for 1 GiB pages). The node's install script checks that
    the kernel reports exactly the declared memory and pages (:mod:`gpucell.k3s._host_setup`) and admission checks
    every VM's hugepage memory against them (kubelet advertises ``hugepages-1Gi``/``hugepages-2Mi`` only as
    reserved, "Kubernetes nodes must pre-allocate huge pages", Kubernetes "Manage HugePages").

    Source: Kubernetes "Control CPU/Memory/Topology Management Policies on the Node"; KubeVirt "Dedicated CPU
    resources" and "NUMA" user guide pages.
    """

    reserved_cpus: str
    """CPUs kept for the OS and kubelet (kubelet ``reserved-cpus``), a cpuset such as ``0-3,64-67``."""
    numa_nodes: StrictInt = Field(default=2, ge=1, le=16)
    """NUMA nodes per host; memory is reserved on each. Defaults to 2."""
    reserved_memory_per_numa_mib: StrictInt = Field(default=2048, ge=256, le=1_048_576)
    """MiB reserved on each NUMA node (kubelet ``reserved-memory``). Defaults to 2048."""
    topology_manager_policy: TopologyManagerPolicy = TopologyManagerPolicy.RESTRICTED
    """``restricted`` (default) admits a pod or VM only on its narrowest NUMA set, so a whole-node 8-GPU VM
    spanning both sockets still fits; ``single-numa-node`` admits only what fits one NUMA node."""
    cpus_per_numa: StrictInt = Field(ge=1, le=4096)
    """Logical CPUs of each NUMA node (hardware threads, as ``/sys/devices/system/node/node<N>/cpulist`` lists them);
    the install script checks it. Admission uses it to tell how many NUMA nodes a VM's dedicated vCPUs span."""
    memory_per_numa_gib: StrictInt = Field(ge=1, le=65536)
    """Memory of each NUMA node as the kernel reports it (``MemTotal`` of
    ``/sys/devices/system/node/node<N>/meminfo``), GiB rounded down; the install script checks it."""
    hugepages_1gi_per_numa: StrictInt = Field(default=0, ge=0, le=65536, alias="hugepages1GiPerNuma")
    """1 GiB hugepages the kernel reserves on each NUMA node (count); the install script checks the kernel's
    ``nr_hugepages``. Defaults to 0; at most 65536 (memoryPerNumaGib's bound)."""
    hugepages_2mi_per_numa: StrictInt = Field(default=0, ge=0, le=33554432, alias="hugepages2MiPerNuma")
    """2 MiB hugepages the kernel reserves on each NUMA node (count). Defaults to 0; at most 33554432 (64 TiB)."""

    @field_validator("reserved_cpus")
    @classmethod
    def _cpuset(cls, value: str) -> str:
        if not _CPUSET.fullmatch(value):
            raise ValueError("is not a cpuset; use a list of CPUs and ranges such as 0-3,64-67")
        for part in value.split(","):
            first, _, last = part.partition("-")
            if int(last or first) < int(first):
                raise ValueError(f"has the range {part} running backwards; write it as {last}-{first}")
            if int(last or first) > MAX_CPU_ID:
                raise ValueError(f"names CPU {int(last or first)}; Linux numbers CPUs 0-{MAX_CPU_ID}")
        return value

    @model_validator(mode="after")
    def _memory_covers_eviction(self) -> TopologyProfile:
        if self.reserved_memory_mib <= EVICTION_HARD_MEMORY_MIB:
            raise SpecError(
                ("reservedMemoryPerNumaMib",),
                f"{self.reserved_memory_per_numa_mib} MiB x {self.numa_nodes} NUMA nodes must exceed the "
                f"{EVICTION_HARD_MEMORY_MIB} MiB hard-eviction threshold",
            )
        highest = max(int(part) for part in re.split(r"[,-]", self.reserved_cpus))
        if highest >= self.cpus:
            raise SpecError(
                ("reservedCpus",),
                f"{self.reserved_cpus!r} names CPU {highest}, the host has "
                f"{self.cpus} ({self.numa_nodes} NUMA nodes x cpusPerNuma {self.cpus_per_numa})",
            )
        if self.regular_memory_per_numa_mib < 0:
            key = "hugepages1GiPerNuma" if self.hugepages_1gi_per_numa else "hugepages2MiPerNuma"
            raise SpecError(
                (key,),
                f"{self.hugepages_1gi_per_numa} x 1Gi and {self.hugepages_2mi_per_numa} x 2Mi hugepages plus "
                f"reservedMemoryPerNumaMib {self.reserved_memory_per_numa_mib} exceed memoryPerNumaGib "
                f"{self.memory_per_numa_gib} per NUMA node",
            )
        return self

    @property
    def cpus(self) -> int:
        """Logical CPUs of a host (count)."""
        return self.cpus_per_numa * self.numa_nodes

    @property
    def allocatable_cpus(self) -> int:
        """Logical CPUs of a host left for dedicated placement after ``reservedCpus`` (count)."""
        reserved = 0
        for part in self.reserved_cpus.split(","):
            first, _, last = part.partition("-")
            reserved += int(last or first) - int(first) + 1
        return self.cpus - reserved

    def hugepages_per_numa(self, size: str) -> int:
        """Hugepages of ``size`` (``1Gi`` or ``2Mi``) reserved on each NUMA node (count)."""
        return {"1Gi": self.hugepages_1gi_per_numa, "2Mi": self.hugepages_2mi_per_numa}[size]

    def hugepages_mib_per_numa(self, size: str) -> int:
        """MiB of ``size`` hugepages reserved on each NUMA node."""
        return self.hugepages_per_numa(size) * HUGEPAGE_SIZES[size]

    @property
    def regular_memory_per_numa_mib(self) -> int:
        """MiB of each NUMA node left for ordinary (non-hugepage) allocations after the hugepages and the kubelet's
        ``reserved-memory``; the kubelet subtracts reserved hugepages from allocatable ``memory``."""
        hugepages = sum(self.hugepages_mib_per_numa(size) for size in HUGEPAGE_SIZES)
        return self.memory_per_numa_gib * 1024 - hugepages - self.reserved_memory_per_numa_mib

    @property
    def reserved_memory_mib(self) -> int:
        """Total MiB reserved across NUMA nodes (= system-reserved + eviction-hard, as the memory manager requires)."""
        return self.reserved_memory_per_numa_mib * self.numa_nodes

    def kubelet_args(self) -> list[str]:
        """``kubelet-arg`` entries for the k3s config, in a stable order."""
        reserved = ";".join(f"{n}:memory={self.reserved_memory_per_numa_mib}Mi" for n in range(self.numa_nodes))
        return [
            "cpu-manager-policy=static",
            f"reserved-cpus={self.reserved_cpus}",
            "memory-manager-policy=Static",
            f"reserved-memory={reserved}",
            f"system-reserved=memory={self.reserved_memory_mib - EVICTION_HARD_MEMORY_MIB}Mi",
            f"eviction-hard={','.join((f'memory.available<{EVICTION_HARD_MEMORY_MIB}Mi', *EVICTION_HARD_DEFAULTS))}",
            f"topology-manager-policy={self.topology_manager_policy}",
            "topology-manager-scope=pod",
        ]


_GPU_KEYS = ("gpuModel", "gpusPerNode", "gpuMode", "migConfig", "vgpuProfile", "topology", "fabric", "acceptance")


class NodePool(SpecModel):
    """A set of identical hosts with one role. GPU pools name a catalog model and exactly one workload mode."""

    role: NodeRole
    """``server`` (control plane, embedded etcd), ``gpu`` or ``cpu``."""
    hosts: list[Host] = Field(min_length=1)
    """The machines, at least one."""
    ssh: SshOverride | None = None
    """Overrides the region's ``ssh`` user or port for this pool."""
    gpu_model: str | None = None
    """GPU pools: a GPU model of the catalog: a built-in one (``H100-SXM5-80GB``, ``L40S``...) or one of
    ``gpucell:gpuModels``."""
    gpus_per_node: StrictInt | None = Field(default=None, ge=1, le=16)
    """GPU pools: GPUs in each host (count)."""
    gpu_mode: GpuMode | None = None
    """GPU pools: ``container``, ``vm-passthrough``, ``vm-vgpu`` or ``dra`` (opt-in: each GPU serves a container or
    a VM per claim, see docs/decisions/0017); one mode per node."""
    mig_config: str | None = None
    """Container-mode pools: the ``nvidia.com/mig.config`` layout (``all-1g.10gb``, ``all-balanced``...)."""
    vgpu_profile: str | None = None
    """``vm-vgpu`` pools: the vGPU type every GPU is split into (``L40S-24Q``)."""
    topology: TopologyProfile | None = None
    """VM pools: kubelet CPU/memory/topology managers for NUMA-aligned VMs (dedicated CPUs, hugepages)."""
    fabric: FabricSpec | None = None
    """``vm-passthrough`` pools with a ``topology``: the hosts' PCIe topology (GPUs and ConnectX NICs per PCIe switch
    and NUMA node, NVSwitches) and the RDMA fabric their NICs serve as SR-IOV VFs (docs/decisions/0039); none: no
    RDMA NICs."""
    labels: dict[str, str] = {}
    """Extra node labels, set at registration and kept by gpucell through the API (field manager ``gpucell``)."""
    taints: list[str] = []
    """The pool's node taints, ``key[=value]:Effect``: set at registration and kept by gpucell through the API
    (gpucell owns each node's whole taint list, which Kubernetes applies as one value). Workloads placed on the pool
    and the platform components that must run there (GPU Operator operands, NFD, virt-handler, CDI importers,
    Longhorn) tolerate them. On a Longhorn cell, taint a pool before it holds volumes: Longhorn applies a changed
    toleration only once every volume is detached."""
    rollout: Rollout = Rollout()
    """How the pool's nodes go through maintenance (k3s upgrades and restarts, GPU reconfigurations)."""
    acceptance: Acceptance | None = None
    """GPU pools: the acceptance run (burn-in) a node must pass before tenants may use it, after it joins or comes
    back from a GPU reconfiguration, a quarantine or a re-image. Defaults to ``{}``: DCGM diagnostics at level 2 and
    an all-reduce on ``container`` and ``dra`` pools, host-side checks on VM pools (docs/decisions/0037);
    ``{skip: true}`` goes without."""
    allow_workloads: bool = False
    """Server pools: leave the servers untainted, so that any pod may land on the etcd members (a small lab
    whose servers are its only nodes). Without it every server carries
    ``node-role.kubernetes.io/control-plane:NoSchedule`` (:data:`SERVER_TAINT`). Defaults to false."""

    _model: GpuModel | None = PrivateAttr(default=None)
    """The catalog entry ``gpu_model`` named in the catalog in force when the pool was validated
    (:func:`gpucell.spec.gpu_models.catalog_in_force`): the pool keeps the model's facts it was checked against."""

    @field_validator("labels")
    @classmethod
    def _labels(cls, labels: dict[str, str]) -> dict[str, str]:
        for key, value in labels.items():
            if key in MANAGED_LABELS:
                raise SpecError((key,), "is set by gpucell from the pool spec; remove it from the pool's labels")
            _check_label(key, value)
        return labels

    @field_validator("taints")
    @classmethod
    def _taints(cls, taints: list[str]) -> list[str]:
        for index, taint in enumerate(taints):
            match = _TAINT.fullmatch(taint)
            if match is None:
                raise SpecError(
                    (index,), f"{shown(taint)} is not a taint; use key[=value]:NoSchedule|PreferNoSchedule|NoExecute"
                )
            _check_label(match["key"], match["value"] or "", where=(index,))
        return taints

    @model_validator(mode="after")
    def _gpu_fields_fit_role(self) -> NodePool:
        if self.allow_workloads and self.role is not NodeRole.SERVER:
            raise SpecError(
                ("allowWorkloads",),
                f"only applies to server pools (this pool's role is "
                f"{self.role.value}, whose nodes are untainted unless taints says otherwise)",
            )
        if self.role is NodeRole.SERVER and self.rollout.max_unavailable != 1:
            raise SpecError(
                ("rollout", "maxUnavailable"),
                f"{self.rollout.max_unavailable} on a server pool: servers "
                "(etcd members) go through maintenance one at a time; use 1",
            )
        if self.role is not NodeRole.GPU:
            self._no_gpu_fields()
            return self
        for key, value in (
            ("gpuModel", self.gpu_model),
            ("gpusPerNode", self.gpus_per_node),
            ("gpuMode", self.gpu_mode),
        ):
            if value is None:
                raise SpecError((key,), "is required on a gpu pool")
        assert self.gpu_model is not None  # required above
        self._model = model = catalog_in_force()[self.gpu_model]  # known: the field's own check
        self._check_driver(model)
        self._check_mig(model)
        self._check_vgpu(model)
        self._check_dra(model)
        self._check_acceptance(model)
        if self.topology is not None and not self.mode.runs_vms:
            raise SpecError(
                ("topology",), "is only valid on vm-passthrough, vm-vgpu and dra pools (this pool is container)"
            )
        self._check_fabric(model)
        return self

    def _check_fabric(self, model: GpuModel) -> None:
        """The declared PCIe topology holds the pool's GPUs, spread evenly over the topology profile's NUMA nodes."""
        fabric = self.fabric
        if fabric is None:
            return
        if self.mode is not GpuMode.VM_PASSTHROUGH or self.topology is None:
            why = f"this pool is {self.mode}" if self.mode is not GpuMode.VM_PASSTHROUGH else "this pool has none"
            raise SpecError(
                ("fabric",),
                "needs a vm-passthrough pool with a topology profile (its VMs get each GPU's NIC as an SR-IOV VF, "
                f"aligned by NUMA node; {why})",
            )
        if fabric.gpu_count != self.gpus_per_node:
            raise SpecError(
                ("fabric", "switches"),
                f"hold {fabric.gpu_count} GPUs, the pool declares gpusPerNode {self.gpus_per_node}; list every GPU "
                "of a host behind its PCIe switch",
            )
        numa = self.topology.numa_nodes
        for index, switch in enumerate(fabric.switches):
            if switch.numa_node >= numa:
                raise SpecError(
                    ("fabric", "switches", index, "numaNode"),
                    f"{switch.numa_node}: the pool's hosts have {numa} NUMA nodes (topology.numaNodes), 0-{numa - 1}",
                )
        per_numa = {node: len(fabric.rails_of(node)) for node in range(numa)}
        if len(set(per_numa.values())) > 1:
            counts = ", ".join(f"node {node}: {count}" for node, count in per_numa.items())
            raise SpecError(
                ("fabric", "switches"),
                f"spread the GPUs unevenly over the NUMA nodes ({counts}); gpucell hands VMs whole NUMA nodes of "
                "GPUs and NICs, so every NUMA node must hold as many",
            )
        board = model.hgx
        if fabric.nvswitches and board is not None and len(fabric.nvswitches) != board.nvswitches:
            raise SpecError(
                ("fabric", "nvswitches"),
                f"lists {len(fabric.nvswitches)} NVSwitches, a {model.name} HGX board has {board.nvswitches}",
            )

    @property
    def gpus_per_numa(self) -> int:
        """GPUs on each NUMA node of a host of a pool with a ``fabric`` (count). Raises ``ValueError`` without."""
        if self.fabric is None or self.topology is None:
            raise ValueError("not a pool with a fabric")
        return (self.gpus_per_node or 0) // self.topology.numa_nodes

    def _check_driver(self, model: GpuModel) -> None:
        if model.architecture in PASSTHROUGH_ONLY and self.mode is not GpuMode.VM_PASSTHROUGH:
            raise SpecError(
                ("gpuMode",),
                f"{self.mode} needs the host's NVIDIA driver, and {model.name!r} is a {model.architecture} GPU, "
                "which the GPU Operator's driver (595) no longer supports (R580 was the last branch); use "
                "vm-passthrough, where the guest brings its own driver",
            )

    def _check_dra(self, model: GpuModel) -> None:
        if self.mode is GpuMode.DRA and model.hgx is not None:
            raise SpecError(
                ("gpuModel",),
                f"{model.name!r} is an SXM GPU on an HGX board: its NVLinks run through NVSwitches the DRA driver does "
                "not hand to VMs, and a board shared by VMs and containers has no fabric mode; use a PCIe model "
                "(L40S, L4, T4) for dra pools, or vm-passthrough / container mode",
            )

    def _check_acceptance(self, model: GpuModel) -> None:
        given = self.acceptance
        if given is not None and given.skip and given.model_fields_set - {"skip"}:
            other = to_camel(sorted(given.model_fields_set - {"skip"})[0])
            raise SpecError(
                ("acceptance", other),
                "is set beside skip: true, which runs no acceptance; remove one of them",
            )
        acceptance = self.acceptance_run
        if acceptance is None:
            return
        self._check_acceptance_timeout(acceptance)
        if self.mig_config is not None and "all_reduce" in acceptance.model_fields_set and acceptance.all_reduce:
            raise SpecError(
                ("acceptance", "allReduce"),
                "true does not run on a MIG pool (NVLink is off in MIG mode, so its nodes run DCGM's diagnostics "
                "only; docs/decisions/0037); remove it",
            )
        if not self.mode.runs_containers:
            for key in ("dcgm_level", "all_reduce", "min_bus_bandwidth_gbps"):
                if key in acceptance.model_fields_set:
                    raise SpecError(
                        ("acceptance", to_camel(key)),
                        f"does not apply to {self.mode} pools: their GPUs are bound to vfio-pci or serve vGPUs, "
                        "so acceptance checks them from the host (PCI bus, link, AER; docs/decisions/0037); remove it",
                    )
            return
        if (
            acceptance.all_reduce
            and acceptance.min_bus_bandwidth_gbps is None
            and min_bus_bandwidth(model.name, model.hgx is not None) is None
        ):
            raise SpecError(
                ("acceptance", "minBusBandwidthGbps"),
                f"is required: gpucell has no all-reduce bus bandwidth for {model.name!r}, an HGX model; give the "
                "least GB/s all_reduce_perf must reach on a healthy node, or allReduce: false",
            )

    def _check_acceptance_timeout(self, acceptance: Acceptance) -> None:
        """``timeoutMinutes`` below the run's own estimate would fail every node's run and leave it out of service."""
        if acceptance.timeout_minutes is None:
            return
        minutes = -(-self.acceptance_estimate_seconds // 60)
        if acceptance.timeout_minutes < minutes:
            raise SpecError(
                ("acceptance", "timeoutMinutes"),
                f"{acceptance.timeout_minutes} is shorter than the run itself, about {minutes} min on this pool "
                "(image pulls, DCGM's level, the all-reduce; docs/decisions/0037): every node would fail "
                f"acceptance and stay out of service; give at least {minutes}, or leave it unset (twice the "
                "estimate)",
            )

    @property
    def acceptance_run(self) -> Acceptance | None:
        """The acceptance run of a GPU pool: its ``acceptance`` or the default; ``None`` on other pools and with
        ``skip``."""
        if self.role is not NodeRole.GPU:
            return None
        run = self.acceptance or Acceptance()
        return None if run.skip else run

    @property
    def acceptance_all_reduce(self) -> bool:
        """True when the pool's acceptance run includes the all-reduce: ``allReduce`` on a pool whose GPUs are on the
        ``nvidia`` driver (container, dra), more than one GPU per node and no MIG (NVLink is off in MIG mode)."""
        run = self.acceptance_run
        return (
            run is not None
            and run.all_reduce
            and self.mode.runs_containers
            and (self.gpus_per_node or 1) > 1
            and self.mig_config is None
        )

    @property
    def acceptance_estimate_seconds(self) -> int:
        """Estimated seconds of one node's acceptance run
        (:func:`gpucell.catalog.acceptance_facts.acceptance_seconds`); 0 without a run."""
        run = self.acceptance_run
        if run is None:
            return 0
        level = run.dcgm_level if self.mode.runs_containers else None
        return acceptance_seconds(level, all_reduce=self.acceptance_all_reduce)

    def _no_gpu_fields(self) -> None:
        if self.topology is not None:
            raise SpecError(
                ("topology",),
                f"is only valid on vm-passthrough, vm-vgpu and dra pools (this pool's role is {self.role}); a "
                "CPU-only VM with dedicatedCpus, hugepages or numaPassthrough runs on a gpu pool with a topology "
                "profile: name that pool in the VM's pool",
            )
        for key in _GPU_KEYS:
            value = getattr(self, _snake(key))
            if value is not None:
                shown = repr(value) if isinstance(value, str | int) else "set"
                raise SpecError((key,), f"{shown} is only valid on gpu pools (this pool's role is {self.role})")

    def _check_mig(self, model: GpuModel) -> None:
        if self.mig_config is None:
            return
        if self.mode is not GpuMode.CONTAINER:
            raise SpecError(
                ("migConfig",), f"{shown(self.mig_config)} needs a container-mode pool; this pool is {self.mode}"
            )
        if self.mig_config not in model.mig_configs:
            accepted = ", ".join(model.mig_configs) or "none: the model has no MIG"
            raise SpecError(
                ("migConfig",), f"{shown(self.mig_config)} is not a MIG config of {model.name}; accepted: {accepted}"
            )

    def _check_vgpu(self, model: GpuModel) -> None:
        if self.mode is GpuMode.VM_VGPU and self.vgpu_profile is None:
            raise SpecError(("vgpuProfile",), "is required on a vm-vgpu pool")
        if self.vgpu_profile is None:
            return
        if self.mode is not GpuMode.VM_VGPU:
            raise SpecError(("vgpuProfile",), f"is only valid on vm-vgpu pools (this pool is {self.mode})")
        if self.vgpu_profile not in model.vgpu_profiles:
            accepted = ", ".join(model.vgpu_profiles) or "none: no vGPU profiles catalogued for this model"
            raise SpecError(
                ("vgpuProfile",),
                f"{shown(self.vgpu_profile)} is not a vGPU profile of {model.name}; accepted: {accepted}",
            )

    @field_validator("gpu_model")
    @classmethod
    def _known_model(cls, value: str | None) -> str | None:
        catalog = catalog_in_force()
        if value is not None and value not in catalog:
            raise SpecError((), unknown_model(value, catalog))
        return value

    @property
    def model(self) -> GpuModel:
        """The catalog entry of a GPU pool, as the pool was validated with it (a copy whose ``gpu_model`` was
        changed without validation, ``model_copy(update=...)``, looks it up in the catalog in force). Raises
        ``ValueError`` on non-GPU pools."""
        if self.gpu_model is None:
            raise ValueError("not a gpu pool")
        if self._model is not None and self._model.name == self.gpu_model:
            return self._model
        return catalog_in_force()[self.gpu_model]

    @property
    def mode(self) -> GpuMode:
        """The workload mode of a GPU pool. Raises ``ValueError`` on non-GPU pools."""
        if self.gpu_mode is None:
            raise ValueError("not a gpu pool")
        return self.gpu_mode

    @property
    def mig_label(self) -> str | None:
        """The ``nvidia.com/mig.config`` value of the pool's nodes: ``migConfig`` on container-mode pools whose GPU
        supports MIG, ``all-disabled`` there without one (so that removing a layout turns MIG off again), else
        ``None`` (no MIG manager runs on VM nodes or on GPUs without MIG)."""
        if self.role is not NodeRole.GPU or self.mode is not GpuMode.CONTAINER or not self.model.supports_mig:
            return None
        return self.mig_config or MIG_DISABLED

    @property
    def node_taints(self) -> list[str]:
        """The taints the pool's nodes carry: :data:`SERVER_TAINT` first on a server pool (unless
        ``allowWorkloads``), then ``taints``."""
        own = [SERVER_TAINT] if self.role is NodeRole.SERVER and not self.allow_workloads else []
        return [*own, *(taint for taint in self.taints if taint not in own)]

    @property
    def in_service_hosts(self) -> list[Host]:
        """The hosts without a ``quarantine``, in order: what admission and the capacity view count."""
        return [host for host in self.hosts if host.quarantine is None]

    @property
    def taint_objects(self) -> list[dict[str, str]]:
        """:attr:`node_taints` as ``core/v1`` Taint objects: ``{"key", "value" (when given), "effect"}``, in
        order."""
        objects: list[dict[str, str]] = []
        for taint in self.node_taints:
            match = _TAINT.match(taint)
            assert match is not None  # validated above
            taint_object = {"key": match["key"]}
            if match["value"] is not None:
                taint_object["value"] = match["value"]
            objects.append({**taint_object, "effect": match["effect"]})
        return objects

    @property
    def mig_layout(self) -> dict[str, int]:
        """MIG profile -> instances per GPU under this pool's ``migConfig`` (empty without MIG)."""
        if self.mig_config is None:
            return {}
        return dict(self.model.mig_configs[self.mig_config])


def _check_label(key: str, value: str, where: tuple[str | int, ...] | None = None) -> None:
    """Kubernetes label syntax: ``[prefix/]name`` keys, values of at most 63 name characters."""
    path = where if where is not None else (key,)
    if not _LABEL_KEY.fullmatch(key) or len(key.rsplit("/", 1)[-1]) > 63:
        raise SpecError(
            path, f"{shown(key)} is not a label key; use [dns-prefix/]name, name at most 63 of [A-Za-z0-9-_.]"
        )
    if not _LABEL_VALUE.fullmatch(value):
        raise SpecError(
            path, f"{shown(value)} is not a label value; at most 63 of [A-Za-z0-9-_.], alphanumeric at both ends"
        )


def _snake(key: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), key)


def role_pools(pools: Mapping[str, NodePool], role: NodeRole) -> dict[str, NodePool]:
    """The pools of ``pools`` with ``role``, in order."""
    return {n: p for n, p in pools.items() if p.role is role}


def gpu_pools(pools: Mapping[str, NodePool], *modes: GpuMode) -> dict[str, NodePool]:
    """The GPU pools of ``pools``, in order; only those in ``modes`` when any are given."""
    return {n: p for n, p in role_pools(pools, NodeRole.GPU).items() if not modes or p.mode in modes}
