"""Typed tenant workloads: GPU virtual machines, notebooks and model endpoints, as a stack config declares them.

These are *specs*: plan-time values only. Placement and capacity rules that need the region's GPU inventory live
in :mod:`gpucell.admission.tenants`; the objects they render live in ``gpucell/workloads/``.
"""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import Field, StrictInt, field_validator, model_validator

from gpucell.catalog.kserve_runtimes import RUNTIMES
from gpucell.errors import SpecError, shown
from gpucell.spec._base import SpecModel
from gpucell.spec._values import (
    Ipv4Address,
    Ipv4Cidr,
    check_config_key,
    check_endpoint_host,
    check_image_reference,
    check_login_name,
    check_single_line,
)
from gpucell.spec.cloud_init import CloudInitSpec
from gpucell.spec.firmware import EfiSpec, TpmSpec
from gpucell.spec.images import ImportSource
from gpucell.spec.instancetypes import InstancetypeRef, PreferenceRef
from gpucell.spec.isolation import Isolation
from gpucell.spec.lifecycle import RemovalPolicy
from gpucell.spec.network import DNS_LABEL, DNS_SUBDOMAIN, check_host_name
from gpucell.spec.serving import EnvVar, ProtocolVersion, check_env, no_vllm_metrics

__all__ = [
    "BUILTIN_RUNTIME_FORMATS",
    "CREDENTIAL_SCHEMES",
    "SCALE_TARGET_RANGES",
    "VLLM_RUNTIMES",
    "AccessMode",
    "CpuTopology",
    "DiskSource",
    "EndpointExposure",
    "EvictionStrategy",
    "Exposure",
    "GpuAllocation",
    "GpuRequest",
    "GpuVirtualMachineSpec",
    "ModelEndpointSpec",
    "NotebookSpec",
    "Protocol",
    "RunStrategy",
    "ScaleMetric",
    "ServiceType",
    "SshService",
    "VmDisk",
    "VmPort",
    "VolumeMode",
    "multi_gpu_shm_gib",
]


BUILTIN_RUNTIME_FORMATS: dict[str, str] = {name: runtime.default_format for name, runtime in RUNTIMES[(0, 20)].items()}
"""ClusterServingRuntimes of KServe v0.20's ``kserve-runtime-configs`` chart -> a model format each supports
(:mod:`gpucell.catalog.kserve_runtimes`). KServe checks that a named runtime supports the InferenceService's
``modelFormat`` (``RuntimeSupportsModel``) and an empty format matches none, so a spec naming only ``runtime`` gets this
one."""
_IMAGE_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
"""The OCI distribution spec's tag grammar."""
CREDENTIAL_SCHEMES = ("hf", "s3")
"""Storage URI schemes whose credentials gpucell mounts (KServe storage-initializer: ``HF_TOKEN``, AWS keys)."""
MAX_POD_CPU_MILLICORES = 1_024_000
"""Upper bound of one pod's CPU, millicores: 1024 cores, more than any single host gpucell runs on has."""
MAX_POD_MEMORY_GIB = 65_536
"""Upper bound of one pod's memory or one volume, GiB (64 TiB, more than any single host has)."""
_MODEL_FORMAT = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")
"""A KServe ``modelFormat`` name: the runtimes' own names mix case (``vLLM`` in kserve-runtime-configs v0.20.0)."""
"""KServe model format names (``huggingface``, ``sklearn``, ``tensorflow``, ``onnx``...): ``supportedModelFormats``
names of the ServingRuntimes, lower-case."""
_SSH_PUBLIC_KEY = re.compile(
    r"(ssh-[a-z0-9-]+|ecdsa-sha2-nistp(256|384|521)|sk-[a-z0-9@.-]+) [A-Za-z0-9+/]+={0,3}( [^\x00-\x1f\x7f]*)?"
)
"""One OpenSSH ``authorized_keys`` key: ``type base64 [comment]``, on one line."""
_S3_REGION = re.compile(r"[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?")


def _priority_class(value: str | None) -> str | None:
    if value is not None and not DNS_SUBDOMAIN.fullmatch(value):
        raise ValueError("is not a PriorityClass name (a DNS-1123 subdomain)")
    return value


def _storage_class(value: str | None) -> str | None:
    if value is not None and not DNS_SUBDOMAIN.fullmatch(value):
        raise ValueError("is not a StorageClass name (a DNS-1123 subdomain: lower-case letters, digits, '-', '.')")
    return value


MULTI_GPU_SHM_GIB_PER_GPU = 1
"""``/dev/shm`` per GPU of a multi-GPU container, GiB (at least :data:`MULTI_GPU_SHM_MIN_GIB`, at most
:data:`MULTI_GPU_SHM_MAX_GIB`). Sized after upstream's own choices: vLLM's Kubernetes guide mounts a 2 GiB memory
``emptyDir`` at ``/dev/shm`` "for tensor parallel inference" (vllm-project/vllm ``docs/deployment/k8s.md``), KServe
v0.20.0 gives its multi-node Hugging Face runtime 3 GiB and its data-parallel LLM presets 8 GiB
(``charts/kserve-runtime-configs/values.yaml`` ``shm.sizeLimit``; ``files/llmisvcconfigs/resources.yaml``)."""
MULTI_GPU_SHM_MIN_GIB = 2
MULTI_GPU_SHM_MAX_GIB = 8


def multi_gpu_shm_gib(gpu: GpuRequest | None) -> int:
    """GiB of memory-backed ``/dev/shm`` a notebook or model endpoint container gets *on top of* its ``memoryGib``
    for ``gpu``: 0 below two GPUs (or MIG instances), else 1 GiB per GPU within 2..8 GiB.

    NCCL, which tensor parallelism across a pod's GPUs uses, keeps its intra-node buffers in ``/dev/shm``, and the
    container runtime's default is 64 MiB: kserve/kserve#3791, a Hugging Face endpoint with more than one GPU
    failing in NCCL ("Error while creating shared memory segment /dev/shm/nccl-..."). A memory ``emptyDir`` is
    charged to the pod's memory limit ("The maximum usage on memory medium EmptyDir would be the minimum value
    between the SizeLimit ... and the sum of memory limits of all containers", Kubernetes ``EmptyDirVolumeSource``),
    so the container's memory request and limit, and with them the tenant's memory quota, grow by the same amount.
    """
    count = gpu.count if gpu is not None else 0
    if count < 2:
        return 0
    return min(MULTI_GPU_SHM_MAX_GIB, max(MULTI_GPU_SHM_MIN_GIB, count * MULTI_GPU_SHM_GIB_PER_GPU))


class GpuAllocation(StrEnum):
    """How a workload gets its GPUs.

    - ``device-plugin`` (default): an extended resource a device plugin advertises (``nvidia.com/gpu``, a MIG
      profile, a passthrough GPU or a vGPU type), from a pool whose ``gpuMode`` serves that kind only.
    - ``dra``: a ResourceClaim, from a ``gpuMode: dra`` pool, where each GPU serves a container or a VM as claims
      ask (Kubernetes Dynamic Resource Allocation with the NVIDIA DRA driver; experimental upstream, see
      docs/decisions/0017). gpucell renders the ResourceClaimTemplate (:mod:`gpucell.admission.dra`).
    """

    DEVICE_PLUGIN = "device-plugin"
    DRA = "dra"


class RunStrategy(StrEnum):
    """KubeVirt ``spec.runStrategy`` (kubevirt.io/v1 VirtualMachineSpec)."""

    ALWAYS = "Always"
    RERUN_ON_FAILURE = "RerunOnFailure"
    MANUAL = "Manual"
    HALTED = "Halted"
    ONCE = "Once"


class EvictionStrategy(StrEnum):
    """KubeVirt ``evictionStrategy``: what a node drain does to the VM."""

    NONE = "None"
    LIVE_MIGRATE = "LiveMigrate"
    LIVE_MIGRATE_IF_POSSIBLE = "LiveMigrateIfPossible"
    EXTERNAL = "External"


class AccessMode(StrEnum):
    """PersistentVolumeClaim access modes."""

    RWO = "ReadWriteOnce"
    RWX = "ReadWriteMany"
    RWOP = "ReadWriteOncePod"


class VolumeMode(StrEnum):
    """PersistentVolumeClaim volume modes (``core/v1`` ``PersistentVolumeClaimSpec.volumeMode``)."""

    FILESYSTEM = "Filesystem"
    """A filesystem the CSI driver formats and mounts (every driver serves it)."""
    BLOCK = "Block"
    """A raw block device (Ceph RBD, Longhorn, most SAN drivers); KubeVirt attaches it to the VM as is."""


class ServiceType(StrEnum):
    """Kubernetes Service types a workload may be exposed through."""

    CLUSTER_IP = "ClusterIP"
    NODE_PORT = "NodePort"
    LOAD_BALANCER = "LoadBalancer"


class ScaleMetric(StrEnum):
    """What a model endpoint's autoscaler scales on: ``cpu``/``memory`` (utilization percent, a HorizontalPodAutoscaler
    KServe creates) or a vLLM metric from the cell's Prometheus (through KEDA, KServe's ``autoscalerClass: keda``):
    ``vllm-queue`` (``vllm:num_requests_waiting``, requests per replica), ``vllm-running``
    (``vllm:num_requests_running``, requests per replica) or ``vllm-ttft`` (90th percentile of
    ``vllm:time_to_first_token_seconds`` over 2 minutes, milliseconds)."""

    CPU = "cpu"
    MEMORY = "memory"
    VLLM_QUEUE = "vllm-queue"
    VLLM_RUNNING = "vllm-running"
    VLLM_TTFT = "vllm-ttft"

    @property
    def is_vllm(self) -> bool:
        """True for the metrics vLLM exports (scaled through KEDA)."""
        return self.value.startswith("vllm-")


SCALE_TARGET_RANGES: dict[ScaleMetric, tuple[int, int, str]] = {
    ScaleMetric.CPU: (1, 100, "percent utilization"),
    ScaleMetric.MEMORY: (1, 100, "percent utilization"),
    ScaleMetric.VLLM_QUEUE: (1, 1000, "waiting requests per replica"),
    ScaleMetric.VLLM_RUNNING: (1, 1000, "running requests per replica"),
    ScaleMetric.VLLM_TTFT: (10, 600000, "milliseconds to first token (p90)"),
}
"""``scaleMetric`` -> accepted ``scaleTarget`` range and its unit."""
VLLM_RUNTIMES = ("kserve-huggingfaceserver", "kserve-vllmserver")
"""Built-in KServe v0.20 runtimes that serve generative models with vLLM (and so export ``vllm:*`` metrics) on GPUs;
``modelFormat: huggingface`` on a GPU picks the first."""


class DiskSource(ImportSource):
    """Where a VM disk's content comes from: exactly one of ``registry``, ``http`` (CDI imports), ``pvc`` (a clone),
    ``image`` (a clone of a catalog image) or ``blank`` (an empty disk of the disk's size)."""

    pvc: str | None = None
    """``namespace/name`` of a PVC to clone (same tenant, or a shared image namespace)."""
    image: str | None = None
    """``<catalog>/<image>`` of the region's ``imageCatalogs``: the disk clones the image's DataSource in the disk's
    StorageClass (a ``dataVolumeTemplates`` ``sourceRef``)."""
    blank: bool = False
    """An empty disk of ``sizeGib`` (CDI ``blank`` source): for data, formatted by the guest. Defaults to false."""

    @model_validator(mode="after")
    def _exactly_one(self) -> DiskSource:
        sources = (("pvc", self.pvc), ("image", self.image), ("blank", self.blank))
        given = self._given() + [k for k, v in sources if v]
        if len(given) != 1:
            raise SpecError(
                (), f"give exactly one of registry, http, pvc, image, blank (got {', '.join(given) or 'none'})"
            )
        self._check_import()
        if self.pvc and (self.pvc.count("/") != 1 or not all(DNS_LABEL.fullmatch(p) for p in self.pvc.split("/"))):
            raise SpecError(("pvc",), f"{shown(self.pvc)} is not namespace/name (two DNS-1123 labels)")
        if self.image and (
            self.image.count("/") != 1 or not all(DNS_LABEL.fullmatch(p) for p in self.image.split("/"))
        ):
            raise SpecError(
                ("image",), f"{shown(self.image)} is not <catalog>/<image> (an imageCatalogs key and an image of it)"
            )
        return self


class VmDisk(SpecModel):
    """A VM disk as a CDI ``dataVolumeTemplates`` entry."""

    source: DiskSource
    """Content of the disk."""
    size_gib: StrictInt = Field(ge=1, le=MAX_POD_MEMORY_GIB)
    """Size, GiB."""
    storage_class: str | None = None
    """StorageClass; defaults to the cell's default class."""
    access_mode: AccessMode = AccessMode.RWO
    """PVC access mode. Defaults to ``ReadWriteOnce`` (a GPU VM cannot live-migrate anyway)."""

    _class = field_validator("storage_class")(_storage_class)


class CpuTopology(SpecModel):
    """Guest CPU topology (KubeVirt ``domain.cpu``): vCPUs = cores x sockets x threads."""

    cores: StrictInt = Field(default=2, ge=1, le=512)
    """Cores per socket. Defaults to 2, or the default of the key that holds it (a tenant cluster's workers: 4)."""
    sockets: StrictInt = Field(default=1, ge=1, le=16)
    """Sockets. Defaults to 1."""
    threads: StrictInt = Field(default=1, ge=1, le=2)
    """Threads per core. Defaults to 1."""

    @property
    def vcpus(self) -> int:
        """vCPUs the guest sees (count)."""
        return self.cores * self.sockets * self.threads


class Protocol(StrEnum):
    """Service port protocols a VM's Service may carry."""

    TCP = "TCP"
    UDP = "UDP"


class VmPort(SpecModel):
    """One more port of a VM its Service exposes, besides SSH (the same number on the Service and the VM)."""

    port: StrictInt = Field(ge=1, le=65535)
    """Port number on the Service and in the guest."""
    protocol: Protocol = Protocol.TCP
    """``TCP`` or ``UDP``. Defaults to ``TCP``."""


class SshService(SpecModel):
    """A Service in front of the VM's port 22 (and any ``ports`` listed)."""

    type: ServiceType = ServiceType.CLUSTER_IP
    """Service type. Defaults to ``ClusterIP``."""
    allow_from_cidrs: list[Ipv4Cidr] = []
    """``NodePort``/``LoadBalancer``: client networks allowed to reach the VM's ports (Cilium ingress rule on the VM's
    pod, and ``loadBalancerSourceRanges`` for a LoadBalancer), required; ``0.0.0.0/0`` opens them to the world
    explicitly. The Service keeps client addresses (``externalTrafficPolicy: Local``)."""
    ports: list[VmPort] = []
    """Further ports of the VM the Service exposes (a web UI, a game server), each to the same port of the guest.
    Defaults to none."""
    pool: str | None = None
    """``LoadBalancer``: the ``loadBalancer.pools`` entry the address comes from; one that lists the tenant.
    Defaults to the first pool that lists the tenant."""
    address: Ipv4Address | None = None
    """``LoadBalancer``: a fixed public address, inside ``pool`` (Cilium's ``lbipam.cilium.io/ips``); defaults to any
    free address of the pool, which the VM keeps as long as its Service exists."""

    @model_validator(mode="after")
    def _sources(self) -> SshService:
        if self.type is not ServiceType.CLUSTER_IP and not self.allow_from_cidrs:
            raise SpecError(
                ("allowFromCidrs",),
                f"is required with type {self.type.value}: list the client networks "
                "(VPN, office) that may reach SSH, or 0.0.0.0/0 to open it to the world",
            )
        if self.type is ServiceType.CLUSTER_IP and self.allow_from_cidrs:
            raise SpecError(
                ("allowFromCidrs",),
                "only applies to type NodePort or LoadBalancer (a ClusterIP "
                "Service is reachable from inside the tenant only)",
            )
        for key in ("pool", "address"):
            if getattr(self, key) is not None and self.type is not ServiceType.LOAD_BALANCER:
                raise SpecError((key,), f"only applies to type LoadBalancer (type is {self.type.value})")
        seen: set[tuple[int, Protocol]] = {(22, Protocol.TCP)}
        for index, port in enumerate(self.ports):
            if (port.port, port.protocol) in seen:
                raise SpecError(
                    ("ports", index, "port"), f"{port.port}/{port.protocol.value} is already exposed (SSH is 22/TCP)"
                )
            seen.add((port.port, port.protocol))
        return self


class GpuVirtualMachineSpec(SpecModel):
    """A tenant's VM: a KubeVirt VirtualMachine with CDI disks and, optionally, whole GPUs or vGPUs."""

    gpu_model: str | None = None
    """GPU catalog model for passthrough or vGPU (``H100-SXM5-80GB``); none for a CPU-only VM."""
    gpus: StrictInt = Field(default=0, ge=0, le=16)
    """Whole GPUs (passthrough) or vGPUs (with ``vgpuProfile``), count. Defaults to 0."""
    vgpu_profile: str | None = None
    """vGPU type (``L40S-12Q``): the VM gets ``gpus`` vGPUs of it from a vm-vgpu pool."""
    gpu_allocation: GpuAllocation = GpuAllocation.DEVICE_PLUGIN
    """``device-plugin`` (default: a vm-passthrough or vm-vgpu pool's extended resource) or ``dra``: whole GPUs
    from a ``gpuMode: dra`` pool through a ResourceClaim for the DRA driver's VFIO devices (``vfio.gpu.nvidia.com``),
    which KubeVirt attaches from ``gpus[].claimName``."""
    pool: str | None = None
    """Node pool to place the VM on; defaults to any pool of the right mode and model."""
    instancetype: InstancetypeRef | None = None
    """The instancetype the VM is sized by (``{name, kind}``: a ``kubevirt.instancetypes`` entry, one of KubeVirt's
    common ones such as ``u1.large``, or with ``kind: VirtualMachineInstancetype`` the tenant's own): its vCPUs,
    memory, dedicated CPUs, hugepages, guest NUMA and GPUs, instead of ``cpu``, ``memoryGib`` and those keys here."""
    preference: PreferenceRef | None = None
    """The preference the VM takes guest defaults from (``{name, kind}``: CPU layout, disk bus, NIC model, EFI, TPM),
    e.g. KubeVirt's common ``ubuntu`` or ``windows.11``."""
    cpu: CpuTopology = CpuTopology()
    """Guest CPU topology (without ``instancetype``)."""
    memory_gib: StrictInt | None = Field(default=None, ge=1, le=4096)
    """Guest memory, GiB; required without ``instancetype``, which gives it otherwise."""
    dedicated_cpus: bool = False
    """Pin vCPUs to dedicated host CPUs (``dedicatedCpuPlacement``); needs a pool with a topology profile."""
    hugepages: str | None = None
    """Back guest memory with hugepages of this size, ``1Gi`` or ``2Mi``; needs a pool with a topology profile."""
    numa_passthrough: bool = False
    """Mirror the host NUMA topology into the guest (``numa.guestMappingPassthrough``); needs dedicated CPUs and
    hugepages."""
    rdma_nics: list[StrictInt] = Field(default=[], max_length=16)
    """Rails of the pool's ``fabric`` whose RDMA NICs the VM gets, one SR-IOV VF each on the tenant's ``fabricVlan``
    (``[0, 1, 2, 3]``): one per GPU, exactly the rails of the NUMA nodes its GPUs come from, so that each GPU's NIC
    sits on its NUMA node and PCIe switch (docs/decisions/0039). Needs ``numaPassthrough``. Defaults to none."""
    root_disk: VmDisk
    """The boot disk."""
    data_disks: list[VmDisk] = []
    """Extra disks, attached in order."""
    ssh_keys: list[str] = []
    """SSH public keys for the default cloud user, put in cloud-init user data (a Secret); one key per entry, one
    line each (``ssh-ed25519 AAAA... comment``)."""
    no_login: bool = False
    """The VM is meant to have no SSH login from gpucell (its image brings its own way in, or nobody logs in):
    without it a VM needs ``sshKeys``, as cloud-init sets no password and so the serial console has no login
    either. Defaults to false."""
    user: str = "cloud-user"
    """Default cloud user name (a login name, not ``root``: cloud-init disables root logins). Defaults to
    ``cloud-user``."""
    run_strategy: RunStrategy = RunStrategy.ALWAYS
    """``spec.runStrategy``. Defaults to ``Always``."""
    eviction_strategy: EvictionStrategy | None = None
    """``evictionStrategy``; defaults to ``None`` with GPUs or ReadWriteOnce disks (cannot live-migrate), else
    ``LiveMigrateIfPossible``."""
    ssh_service: SshService | None = None
    """A Service for SSH (port 22); none by default."""
    cloud_init: CloudInitSpec | None = None
    """The VM's own cloud-init (user data, network data), merged with gpucell's user, SSH keys and NVLink setting;
    none: gpucell's parts only."""
    rng: bool = True
    """A virtio-rng device feeding the guest's entropy pool from the host (``domain.devices.rng``); without it a guest
    may stall at boot waiting for entropy. Defaults to true."""
    efi: EfiSpec | None = None
    """Boot with EFI (Secure Boot by default, NVRAM persistent if asked) instead of BIOS; none: BIOS, or what the
    ``preference`` prefers."""
    tpm: TpmSpec | None = None
    """A virtual TPM (persistent if asked); none: no TPM, or what the ``preference`` prefers."""
    removal_policy: RemovalPolicy | None = None
    """What removing the VM from the config may do to the VirtualMachine and so its disks (its
    ``dataVolumeTemplates``, owned by it): ``protect``, ``retain`` or ``delete``. Defaults to the tenant's."""
    priority_class_name: str | None = None
    """A PriorityClass of the cell (``priorityClasses``) open to the tenant, for the VM's launcher pod
    (``spec.template.spec.priorityClassName``); a change reaches the running VM at its next restart. Defaults to
    none (priority 0)."""

    _priority = field_validator("priority_class_name")(_priority_class)

    @field_validator("hugepages")
    @classmethod
    def _page_size(cls, value: str | None) -> str | None:
        if value is not None and value not in ("1Gi", "2Mi"):
            raise ValueError("is not a hugepage size; use 1Gi or 2Mi")
        return value

    @field_validator("ssh_keys")
    @classmethod
    def _public_keys(cls, keys: list[str]) -> list[str]:
        for index, key in enumerate(keys):
            if "PRIVATE KEY" in key or not _SSH_PUBLIC_KEY.fullmatch(key):
                raise SpecError(
                    (index,), "is not one SSH public key on one line (ssh-ed25519 AAAA... comment, ssh-rsa AAAA...)"
                )
        return keys

    @field_validator("user")
    @classmethod
    def _user(cls, value: str) -> str:
        check_login_name(value)
        if value == "root":
            raise ValueError("is root, whose SSH login cloud-init disables (disable_root); use e.g. ubuntu")
        return value

    @model_validator(mode="after")
    def _bootable(self) -> GpuVirtualMachineSpec:
        if self.root_disk.source.blank:
            raise SpecError(
                ("rootDisk", "source", "blank"),
                "is an empty root disk, which boots nothing (a VM gets no installer ISO and no network boot); clone an "
                "image (source.image) or import one (registry, http), and keep blank disks for dataDisks",
            )
        return self

    @model_validator(mode="after")
    def _sized_once(self) -> GpuVirtualMachineSpec:
        if self.instancetype is None:
            if self.memory_gib is None:
                raise SpecError(("memoryGib",), "is required without instancetype (guest memory, GiB)")
            return self
        sized = [
            key
            for key in ("cpu", "memory_gib", "dedicated_cpus", "hugepages", "numa_passthrough")
            if key in self.model_fields_set
        ]
        if sized:
            alias = type(self).model_fields[sized[0]].alias or sized[0]
            raise SpecError(
                (alias,),
                f"conflicts with instancetype {shown(self.instancetype.name)}, which sizes the VM (KubeVirt refuses a "
                "VM that sets what its instancetype sets); drop it, or name an instancetype with it",
            )
        return self

    @model_validator(mode="after")
    def _gpu_fields(self) -> GpuVirtualMachineSpec:
        if self.gpus and self.gpu_model is None:
            raise SpecError(("gpuModel",), f"is required with gpus: {self.gpus}")
        if self.gpu_model is not None and not self.gpus:
            raise SpecError(("gpus",), f"must be at least 1 with gpuModel {shown(self.gpu_model)}")
        if self.vgpu_profile is not None and not self.gpus:
            raise SpecError(("gpus",), f"must be at least 1 with vgpuProfile {shown(self.vgpu_profile)}")
        if self.gpu_allocation is GpuAllocation.DRA:
            if not self.gpus:
                raise SpecError(("gpus",), "must be at least 1 with gpuAllocation 'dra'")
            if self.vgpu_profile is not None:
                raise SpecError(
                    ("vgpuProfile",),
                    f"{shown(self.vgpu_profile)}: vGPU types come from the GPU "
                    "Operator's vGPU manager, the DRA driver hands VMs whole GPUs; use gpuAllocation "
                    "device-plugin on a vm-vgpu pool, or drop vgpuProfile",
                )
        if self.numa_passthrough and not (self.dedicated_cpus and self.hugepages):
            raise SpecError(("numaPassthrough",), "needs dedicatedCpus: true and hugepages (KubeVirt guest NUMA)")
        self._check_rdma_nics()
        if self.eviction_strategy in (EvictionStrategy.LIVE_MIGRATE, EvictionStrategy.LIVE_MIGRATE_IF_POSSIBLE):
            if self.gpus:
                raise SpecError(
                    ("evictionStrategy",),
                    f"{shown(self.eviction_strategy.value)}: a VM with GPUs cannot live-migrate; use None or External",
                )
            rwo = [i for i, d in enumerate(self.disks) if d.access_mode is not AccessMode.RWX]
            if rwo:
                raise SpecError(
                    ("evictionStrategy",),
                    f"{shown(self.eviction_strategy.value)}: live migration needs "
                    f"ReadWriteMany disks, disk {rwo[0]} is not; use None or External",
                )
        return self

    def _check_rdma_nics(self) -> None:
        if not self.rdma_nics:
            return
        if len(set(self.rdma_nics)) != len(self.rdma_nics):
            raise SpecError(("rdmaNics",), f"{self.rdma_nics} names a rail twice; a VM gets one NIC of each rail")
        if len(self.rdma_nics) != self.gpus or self.vgpu_profile is not None:
            raise SpecError(
                ("rdmaNics",),
                f"{len(self.rdma_nics)} NICs for {self.gpus} whole GPUs: a VM gets one RDMA NIC per passthrough GPU, "
                "the one beside it",
            )
        if not self.numa_passthrough:
            raise SpecError(
                ("numaPassthrough",),
                "is required with rdmaNics: the guest must see which NUMA node each GPU and NIC sits on to pair them",
            )

    @property
    def disks(self) -> list[VmDisk]:
        """Root disk, then data disks."""
        return [self.root_disk, *self.data_disks]

    @property
    def guest_memory_gib(self) -> int:
        """Guest memory, GiB: ``memoryGib``, which a VM sized by an instancetype has once resolved
        (:func:`gpucell.admission.vm_shape.resolve_vm`). Raises ``ValueError`` on an unresolved one."""
        if self.memory_gib is None:
            raise ValueError(
                "the VM is sized by its instancetype: resolve it first (gpucell.admission.vm_shape.resolve_vm)"
            )
        return self.memory_gib

    @property
    def effective_eviction_strategy(self) -> EvictionStrategy:
        """The strategy rendered: the declared one, or ``None`` for VMs that cannot live-migrate."""
        if self.eviction_strategy is not None:
            return self.eviction_strategy
        if self.gpus or any(d.access_mode is not AccessMode.RWX for d in self.disks):
            return EvictionStrategy.NONE
        return EvictionStrategy.LIVE_MIGRATE_IF_POSSIBLE


class GpuRequest(SpecModel):
    """GPUs for a container workload: whole GPUs (optionally of one model) or MIG slices of one profile."""

    count: StrictInt = Field(default=1, ge=1, le=16)
    """Whole GPUs, or MIG instances with ``migProfile`` (count). Defaults to 1."""
    model: str | None = None
    """GPU catalog model the pod must land on (``L40S``); defaults to any container-mode GPU (any ``dra`` pool's with
    ``allocation: dra``)."""
    mig_profile: str | None = None
    """MIG profile (``1g.18gb``): the pod gets ``count`` instances of it (``nvidia.com/mig-<profile>``)."""
    allocation: GpuAllocation = GpuAllocation.DEVICE_PLUGIN
    """``device-plugin`` (default: ``nvidia.com/gpu`` or a MIG resource from a container-mode pool) or ``dra``:
    ``count`` whole GPUs from a ``gpuMode: dra`` pool through a ResourceClaim for the DRA driver's container GPUs
    (``gpu.nvidia.com``)."""

    @model_validator(mode="after")
    def _dra_whole_gpus(self) -> GpuRequest:
        if self.allocation is GpuAllocation.DRA and self.mig_profile is not None:
            raise SpecError(
                ("migProfile",),
                f"{self.mig_profile!r}: dra pools hand out whole GPUs (a MIG-partitioned "
                "GPU gets no VFIO device from the DRA driver, so gpucell runs no MIG there); use "
                "allocation device-plugin on a MIG pool, or drop migProfile",
            )
        return self


class Exposure(SpecModel):
    """How a notebook is reachable from outside the tenant: an Ingress, and who may connect."""

    host: str
    """DNS name of the Ingress rule, ``nb-alice.acme.fra1.example.net``."""
    ingress_class: str
    """``ingressClassName`` of the cell's ingress controller (a DNS-1123 label)."""
    tls_secret: str | None = None
    """Secret holding the TLS certificate for ``host`` (a DNS-1123 label); none serves plain HTTP, which needs
    ``allowPlainHttp``."""
    allow_from_cidrs: list[Ipv4Cidr] = []
    """Client networks the notebook accepts (Cilium ingress rule), e.g. the VPN range. Empty: only the ingress
    controller's namespace."""
    allow_plain_http: bool = False
    """Serve the notebook without TLS: its token and every cell travel in clear text. Defaults to false."""

    @model_validator(mode="after")
    def _tls(self) -> Exposure:
        if self.tls_secret is None and not self.allow_plain_http:
            raise SpecError(
                ("tlsSecret",),
                "is required: without it the notebook's token and code travel in clear "
                "text; name the TLS Secret for host, or set allowPlainHttp: true",
            )
        if self.tls_secret is not None and self.allow_plain_http:
            raise SpecError(("allowPlainHttp",), "only applies without tlsSecret")
        return self

    @field_validator("host")
    @classmethod
    def _host(cls, value: str) -> str:
        check_host_name(value)
        if "." not in value or value.replace(".", "").isdigit():
            raise ValueError("is not a DNS name such as nb-alice.acme.example.net")
        return value

    @field_validator("ingress_class", "tls_secret")
    @classmethod
    def _label(cls, value: str | None) -> str | None:
        if value is not None and not DNS_LABEL.fullmatch(value):
            raise ValueError("is not a DNS-1123 label (lower-case letters, digits and '-')")
        return value


class NotebookSpec(SpecModel):
    """A Jupyter notebook server: a StatefulSet with a home PVC, a Service and an access token."""

    image: str = "quay.io/jupyter/pytorch-notebook:cuda12-2025-11-24"
    """Jupyter image (docker-stacks layout: UID 1000, home ``/home/jovyan``)."""
    gpu: GpuRequest | None = None
    """GPUs for the notebook; none for a CPU notebook."""
    cpu_millicores: StrictInt = Field(default=2000, ge=100, le=MAX_POD_CPU_MILLICORES)
    """CPU request and limit, millicores. Defaults to 2000."""
    memory_gib: StrictInt = Field(default=8, ge=1, le=MAX_POD_MEMORY_GIB)
    """Memory request and limit, GiB. Defaults to 8."""
    home_gib: StrictInt = Field(default=50, ge=1, le=MAX_POD_MEMORY_GIB)
    """Home directory PVC size, GiB. Defaults to 50."""
    storage_class: str | None = None
    """StorageClass of the home PVC; defaults to the cell's default class."""
    read_only_root: bool = True
    """Run with a read-only root filesystem (``/tmp`` and the home stay writable). Defaults to true."""
    expose: Exposure | None = None
    """An Ingress for the notebook; none keeps it cluster-internal (use ``kubectl port-forward``)."""
    removal_policy: RemovalPolicy | None = None
    """What removing the notebook from the config may do to its StatefulSet: ``protect``, ``retain`` or
    ``delete``. Defaults to the tenant's. The home PVC outlives the StatefulSet in every case (it goes with the
    tenant's namespace, or by hand)."""

    priority_class_name: str | None = None
    """A PriorityClass of the cell (``priorityClasses``) open to the tenant, for the notebook's pod; changing it
    restarts the notebook. Defaults to none (priority 0)."""
    isolation: Isolation | None = None
    """``container`` (a pod on the host's kernel) or ``vm`` (the notebook's image runs in a KubeVirt VM of its own,
    with its GPUs passed through; docs/decisions/0040). Changing it replaces the notebook, home included. Defaults to
    the tenant's ``isolation.default``."""

    _class = field_validator("storage_class")(_storage_class)
    _priority = field_validator("priority_class_name")(_priority_class)

    @field_validator("image")
    @classmethod
    def _image(cls, value: str) -> str:
        return check_image_reference(value)


class EndpointExposure(SpecModel):
    """How a model endpoint is served from outside the cell: an HTTPS host name on the region's Gateway."""

    host: str | None = None
    """Host name under ``gateway.domain``; defaults to ``<endpoint>.<tenant>.<domain>``."""

    @field_validator("host")
    @classmethod
    def _host(cls, value: str | None) -> str | None:
        if value is not None and (not DNS_SUBDOMAIN.fullmatch(value) or "." not in value):
            raise ValueError("is not a DNS name such as llama.acme.models.example.net (lower-case)")
        return value


class ModelEndpointSpec(SpecModel):
    """An autoscaled model endpoint: a KServe InferenceService (raw deployment mode)."""

    model_format: str | None = None
    """KServe model format (``huggingface``, ``sklearn``, ``onnx``...): KServe picks a matching runtime."""
    runtime: str | None = None
    """Runtime name: a ClusterServingRuntime the pinned KServe installs (``kserve-huggingfaceserver``,
    ``kserve-tritonserver``..., see ``gpucell.catalog.kserve_runtimes``) or one of the tenant's ``servingRuntimes``."""
    runtime_version: str | None = None
    """The runtime image's tag for this endpoint (``predictor.model.runtimeVersion``), e.g. a pinned vLLM release or
    a GPU build; defaults to the runtime's own tag, or its ``-gpu`` build for a GPU endpoint on TensorFlow Serving."""
    storage_uri: str
    """Where the model is: ``hf://meta-llama/Llama-3.1-8B-Instruct``, ``s3://bucket/path``, ``pvc://name/path``."""
    args: list[str] = []
    """Extra arguments for the model server (``--max-model-len=8192``)."""
    gpu: GpuRequest | None = None
    """GPUs per replica; none for a CPU endpoint."""
    cpu_millicores: StrictInt = Field(default=4000, ge=100, le=MAX_POD_CPU_MILLICORES)
    """CPU per replica, millicores. Defaults to 4000."""
    memory_gib: StrictInt = Field(default=32, ge=1, le=MAX_POD_MEMORY_GIB)
    """Memory per replica, GiB. Defaults to 32."""
    min_replicas: StrictInt = Field(default=1, ge=0, le=100)
    """Replicas kept running. Defaults to 1. 0 (scale to zero when idle) only with a ``vllm-*`` ``scaleMetric``
    (KEDA); see docs/workloads.md on the cold start."""
    max_replicas: StrictInt = Field(default=1, ge=1, le=100)
    """Upper bound for the autoscaler. Defaults to 1."""
    scale_metric: ScaleMetric = ScaleMetric.CPU
    """Autoscaler metric: ``cpu`` or ``memory`` (HPA), or ``vllm-queue``, ``vllm-running``, ``vllm-ttft`` (KEDA, on
    a vLLM runtime with GPUs, in a cell with ``metrics.enabled``). Defaults to ``cpu``."""
    scale_target: StrictInt | None = Field(default=None, ge=1, le=600000)
    """Target of ``scaleMetric``: percent for ``cpu``/``memory`` (1-100, default 70), requests per replica for
    ``vllm-queue``/``vllm-running`` (1-1000, default 70 is rarely right: set it), milliseconds for ``vllm-ttft``
    (10-600000)."""
    credentials_config_key: str | None = None
    """Secret stack config key holding the storage credentials (a Hugging Face token for ``hf://``, or
    ``AWS_ACCESS_KEY_ID:AWS_SECRET_ACCESS_KEY`` for ``s3://``); mounted through a Secret and ServiceAccount."""
    s3_endpoint: str | None = None
    """``s3://`` only: the S3 API host (``minio.storage.example.net``) for storage other than AWS S3; not a loopback,
    link-local or other non-routable address."""
    s3_region: str | None = None
    """``s3://`` only: the bucket's region (``eu-central-1``)."""
    expose: EndpointExposure | None = None
    """Serve the endpoint over HTTPS on the region's Gateway (a Certificate and an HTTPRoute); none keeps it
    cluster-internal."""
    env: list[EnvVar] = []
    """Environment variables of the model container (``predictor.model.env``), added to the runtime's; changing
    them rolls the endpoint's replicas. Defaults to none."""
    protocol_version: ProtocolVersion | None = None
    """Inference protocol (``predictor.model.protocolVersion``): ``v1``, ``v2``, ``grpc-v1`` or ``grpc-v2``; the
    runtime must speak it. Defaults to none: KServe's ``v1`` for choosing a runtime, the runtime's own way of
    serving."""
    priority_class_name: str | None = None
    """A PriorityClass of the cell (``priorityClasses``) open to the tenant, for the predictor's pods
    (``predictor.priorityClassName``); changing it rolls the replicas. Defaults to none (priority 0)."""
    isolation: Isolation | None = None
    """``container`` (KServe predictor pods on the host's kernel) or ``vm`` (one KubeVirt VM running
    ``kserve-huggingfaceserver`` on an ``hf://`` model behind the same Service ``<endpoint>-predictor``; no
    autoscaler; docs/decisions/0040). Changing it replaces the endpoint. Defaults to the tenant's
    ``isolation.default``."""

    _priority = field_validator("priority_class_name")(_priority_class)
    _env = field_validator("env")(check_env)

    @field_validator("runtime_version")
    @classmethod
    def _tag(cls, value: str | None) -> str | None:
        if value is not None and not _IMAGE_TAG.fullmatch(value):
            raise ValueError(
                "is not an image tag (letters, digits, '_', '.', '-'; at most 128; not starting with '.' or '-')"
            )
        return value

    @field_validator("model_format")
    @classmethod
    def _format(cls, value: str | None) -> str | None:
        if value is not None and not _MODEL_FORMAT.fullmatch(value):
            raise ValueError(
                "is not a KServe model format name (letters, digits, '.', '_', '-'; e.g. huggingface, vLLM, onnx)"
            )
        return value

    @field_validator("runtime")
    @classmethod
    def _runtime(cls, value: str | None) -> str | None:
        if value is not None and not DNS_SUBDOMAIN.fullmatch(value):
            raise ValueError("is not a ClusterServingRuntime name (a DNS-1123 subdomain)")
        return value

    @field_validator("storage_uri")
    @classmethod
    def _uri(cls, value: str) -> str:
        return check_single_line(value, "URI")

    @field_validator("args")
    @classmethod
    def _args(cls, args: list[str]) -> list[str]:
        for index, arg in enumerate(args):
            if any(ord(c) < 32 and c not in "\t" for c in arg):
                raise SpecError((index,), f"{shown(arg)} holds a newline or control character")
        return args

    @field_validator("credentials_config_key")
    @classmethod
    def _key(cls, value: str | None) -> str | None:
        return None if value is None else check_config_key(value)

    @field_validator("s3_endpoint")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is None:
            return None
        host, sep, port = value.rpartition(":") if value.count(":") == 1 else (value, "", "")
        try:
            check_host_name(host)
            if sep and not (port.isdigit() and 0 < int(port) < 65536):
                raise ValueError("port")
        except ValueError:
            raise ValueError(
                "is not a host name or address with an optional :port (no https://, no path; e.g. "
                "minio.storage.example.net:9000)"
            ) from None
        check_endpoint_host(host, "the S3 store")
        return value

    @field_validator("s3_region")
    @classmethod
    def _region(cls, value: str | None) -> str | None:
        if value is not None and not _S3_REGION.fullmatch(value):
            raise ValueError("is not an S3 region name (e.g. eu-central-1)")
        return value

    @property
    def effective_scale_target(self) -> int:
        """``scaleTarget``, or 70 for ``cpu``/``memory`` (the default; ``vllm-ttft`` requires one)."""
        return self.scale_target if self.scale_target is not None else 70

    def _exports_vllm_metrics(self) -> bool:
        """A GPU endpoint on a runtime that serves with vLLM (:data:`VLLM_RUNTIMES`, or ``huggingface`` picked). A
        runtime that is not built in is the tenant's: :class:`~gpucell.spec.tenancy.TenantSpec`, which sees its
        container, judges it."""
        if self.runtime is not None and self.runtime not in BUILTIN_RUNTIME_FORMATS:
            return True
        if self.gpu is None:
            return False
        if self.runtime is not None:
            return self.runtime in VLLM_RUNTIMES
        return self.model_format == "huggingface"

    @model_validator(mode="after")
    def _scaling(self) -> ModelEndpointSpec:
        low, high, unit = SCALE_TARGET_RANGES[self.scale_metric]
        if self.scale_target is not None and not low <= self.scale_target <= high:
            raise SpecError(
                ("scaleTarget",),
                f"{self.scale_target} is out of range for scaleMetric {self.scale_metric.value}: {low}-{high} ({unit})",
            )
        if self.scale_target is None and self.scale_metric is ScaleMetric.VLLM_TTFT:
            raise SpecError(
                ("scaleTarget",),
                "is required with scaleMetric vllm-ttft: the p90 time to first token "
                "to hold, in milliseconds (10-600000)",
            )
        if self.min_replicas == 0 and not self.scale_metric.is_vllm:
            raise SpecError(
                ("minReplicas",),
                f"0 needs KEDA, which scales only on a vLLM metric; set scaleMetric "
                f"to vllm-queue, vllm-running or vllm-ttft (not {self.scale_metric.value}), or use 1",
            )
        if self.scale_metric.is_vllm and not self._exports_vllm_metrics():
            runtime = self.runtime or f"modelFormat {self.model_format}"
            raise SpecError(
                ("scaleMetric",),
                f"{self.scale_metric.value} is a vLLM metric, which {runtime}"
                f"{'' if self.gpu is not None else ' without gpu'} does not export; use cpu or memory, "
                f"or a GPU endpoint on {' or '.join(VLLM_RUNTIMES)} (modelFormat huggingface)",
            )
        found = no_vllm_metrics(self.args) if self.scale_metric.is_vllm else None
        if found is not None:
            index, why = found
            raise SpecError(
                ("args", index),
                f"{shown(self.args[index])} {why}, so scaleMetric {self.scale_metric.value} finds no value and "
                f"the endpoint never scales{' (it stays at zero)' if self.min_replicas == 0 else ''}; drop the "
                "argument, or scale on cpu or memory",
            )
        return self

    @model_validator(mode="after")
    def _shape(self) -> ModelEndpointSpec:
        if self.model_format is None and self.runtime is None:
            raise SpecError(("modelFormat",), "give modelFormat, runtime or both")
        if self.max_replicas < self.min_replicas:
            raise SpecError(("maxReplicas",), f"{self.max_replicas} is below minReplicas {self.min_replicas}")
        scheme, _, path = self.storage_uri.partition("://")
        if not path.strip("/") or any(c.isspace() for c in path) or path.startswith("/"):
            raise SpecError(
                ("storageUri",),
                f"{shown(self.storage_uri)} has no location after {scheme}:// (or "
                "one with spaces); e.g. hf://org/model, s3://bucket/path",
            )
        if scheme not in ("hf", "s3", "gs", "pvc", "https", "oci"):
            raise SpecError(
                ("storageUri",),
                f"{shown(self.storage_uri)} is not a KServe storage URI "
                "(hf://, s3://, gs://, pvc://, https://, oci://)",
            )
        if self.credentials_config_key is not None and scheme not in CREDENTIAL_SCHEMES:
            raise SpecError(
                ("credentialsConfigKey",),
                f"{scheme}:// storage takes no credentials here (only "
                f"{', '.join(s + '://' for s in CREDENTIAL_SCHEMES)})",
            )
        for key, value in (("s3Endpoint", self.s3_endpoint), ("s3Region", self.s3_region)):
            if value is not None and scheme != "s3":
                raise SpecError((key,), f"only applies to s3:// storage (storageUri is {scheme}://)")
            if value is not None and self.credentials_config_key is None:
                raise SpecError((key,), "needs credentialsConfigKey: KServe reads it from the credentials Secret")
        for index, var in enumerate(self.env):
            if var.name == "HF_TOKEN" and scheme == "hf" and self.credentials_config_key is not None:
                raise SpecError(
                    ("env", index, "name"),
                    f"'HF_TOKEN' is set from credentialsConfigKey {self.credentials_config_key!r} (the Hugging Face "
                    "token of hf:// storage); drop one of the two",
                )
        return self
