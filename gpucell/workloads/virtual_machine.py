"""GpuVirtualMachine: a tenant's KubeVirt VirtualMachine with CDI disks, whole GPUs or vGPUs, and cloud-init.

What is rendered, in the tenant's namespace (``tenant-<tenant>``):

- a ``kubevirt.io/v1`` ``VirtualMachine`` named after the workload (checked against ``v1.VirtualMachine`` of
  KubeVirt v1.9.0 ``api/openapi-spec/swagger.json``), with one CDI ``dataVolumeTemplates`` entry per disk;
- a ``v1`` ``Secret`` ``<vm>-cloud-init`` holding the NoCloud user data (key ``userdata``, the key KubeVirt
  reads from a ``cloudInitNoCloud.secretRef`` Secret, as in the KubeVirt user guide "Startup Scripts"): the VM's own
  cloud-config with gpucell's parts merged in (:func:`cloud_config`), and its network data (key ``networkdata``,
  ``networkDataSecretRef``);
- per disk imported with credentials or a CA bundle: a ``Secret`` ``<vm>-<disk>-import`` (``accessKeyId``/
  ``secretKey``) and a ``ConfigMap`` ``<vm>-<disk>-import-ca``, named in the DataVolume's ``secretRef``/
  ``certConfigMap``;
- with ``sshService``: a ``Service`` named after the VM (port 22 and any listed ``ports``), and for ``NodePort`` or
  ``LoadBalancer`` (an address from a ``loadBalancer`` pool of the tenant, fixed or not) a ``CiliumNetworkPolicy``
  ``<vm>-ssh`` letting the clients of ``sshService.allowFromCidrs`` reach those ports of this VM only: the tenant's
  default-deny policies would drop it otherwise. The tenant's ``quota.nodePorts`` and ``quota.loadBalancers`` cap
  such Services.

A VM sized by an instancetype names it (and its preference) in ``spec.instancetype``/``spec.preference`` and renders
no CPU topology, memory or resources of its own, nor the GPUs its instancetype gives
(:mod:`gpucell.admission.vm_shape`); every VM has a virtio-rng device unless ``rng: false``; ``efi`` and ``tpm`` render
``firmware.bootloader.efi`` (with SMM for Secure Boot) and ``devices.tpm``.

GPUs go into ``spec.domain.devices.gpus`` with ``deviceName`` the extended resource the ``KubeVirt`` CR permits
(:func:`gpucell.components.kubevirt.permitted_host_devices`), for passthrough, mdev and SR-IOV vGPUs alike: that is what
the GPU Operator's "GPU Operator with KubeVirt" page ("Create a virtual machine with GPU") shows, and KubeVirt v1.9
builds host devices for ``gpus`` from both its PCI and its mdev pools
(``pkg/virt-launcher/virtwrap/device/hostdevice/gpu/ hostdev.go``), so an SR-IOV VF advertised by virt-handler's PCI
plugin works the same way.

With ``gpuAllocation: dra`` (a ``dra`` pool), the GPUs come from a ``resource.k8s.io/v1`` ``ResourceClaimTemplate``
``<vm>-gpus-<hash>`` (:func:`claim_template_manifest`: one ``vfio.gpu.nvidia.com`` request per GPU with the VFIO
config KubeVirt needs), named in the VM template's ``resourceClaims``; ``gpus[i]`` is ``{name: gpu<i>, claimName:
gpus, requestName: gpu<i>}``, without ``deviceName`` (kubevirt/user-guide ``docs/compute/dra_gpu.md``; KubeVirt v1.9.0
``v1.GPU``). virt-launcher attaches the PCI device the DRA driver's metadata file names (``pkg/virt-launcher/virtwrap/
device/hostdevice/dra/gpu_hostdev.go``).

SXM GPUs on HGX boards (:class:`gpucell.catalog.gpu_catalog.HgxBoard`): a VM with the whole board also gets the board's
NVSwitches as ``devices.hostDevices`` (``nvswitch0``..), whose guest must run NVIDIA Fabric Manager before CUDA
works (NVIDIA Fabric Manager User Guide, "Full Passthrough Virtualization Model"); a VM with part of the board gets
no NVSwitch, so its cloud-init writes ``options nvidia NVreg_NvLinkDisable=1`` to
``/etc/modprobe.d/gpucell-nvlink.conf``: without it the guest driver waits forever for the NVLink fabric ("Fabric
State: In Progress", CUDA "system not yet initialized"; cozystack/cozystack ``packages/apps/kubernetes/templates/
helmreleases/gpu-operator.yaml`` does the same for per-GPU SXM passthrough).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import pulumi
from pulumi_kubernetes.apiextensions import CustomResource
from pulumi_kubernetes.core.v1 import ConfigMap, Service
from pulumi_kubernetes.resource.v1 import ResourceClaimTemplate

from gpucell._component import CellComponent
from gpucell.admission.dra import pod_resource_claims, vm_claim_template, vm_gpus
from gpucell.admission.fabric import tenant_network_name
from gpucell.admission.placement import Placement
from gpucell.admission.vm_shape import ShapeError, VmShape, resolve_vm
from gpucell.catalog.gpu_catalog import needs_host_cpu_model
from gpucell.components.disk_import import CA_BUNDLE_KEY, import_secret_data, import_source
from gpucell.spec.cloud_init import (
    NVLINK_DISABLE_OPTION,
    NVLINK_MODPROBE_PATH,
    GpucellUserData,
    merge_user_data,
    parse_cloud_config,
    render_cloud_config,
    secret_user_data,
)
from gpucell.spec.images import data_source_name
from gpucell.spec.lifecycle import removal_options
from gpucell.spec.tenancy import namespace_of
from gpucell.spec.traffic import ADDRESS_ANNOTATION, POOL_LABEL, vm_pool
from gpucell.spec.workloads import GpuVirtualMachineSpec, ServiceType, VmDisk
from gpucell.tenancy._common import (
    cilium_network_policy,
    custom_resource,
    gpu_dependencies,
    object_meta,
    opaque_secret,
    scheduling,
    vm_placement,
    workload_labels,
)
from gpucell.tenancy.tenant import admit_workload

HOST_PASSTHROUGH = "host-passthrough"
"""``domain.cpu.model`` for VMs of several large-BAR GPUs (KubeVirt v1.9.0 ``v1.CPU.model``: "host-passthrough" to
get the same CPU as the node; :func:`gpucell.catalog.gpu_catalog.needs_host_cpu_model`)."""

if TYPE_CHECKING:
    from pulumi_kubernetes.meta.v1 import ObjectMetaArgsDict

    from gpucell.admission.tenants import ClusterFacts
    from gpucell.platform import Platform
    from gpucell.tenancy.tenant import TenantView

__all__ = [
    "CLOUD_INIT_KEY",
    "NETWORK_DATA_KEY",
    "NVLINK_DISABLE_OPTION",
    "NVLINK_MODPROBE_PATH",
    "SSH_PORT",
    "WORKLOAD_SELECTOR_LABEL",
    "GpuVirtualMachine",
    "GpuVirtualMachineArgs",
    "claim_template_manifest",
    "cloud_config",
    "cloud_init_data",
    "cloud_init_secret_name",
    "data_volume_name",
    "data_volume_template",
    "import_ca_name",
    "import_secret_name",
    "ssh_policy_manifest",
    "ssh_service_manifest",
    "virtual_machine_manifest",
    "vm_platform_ready",
]

CLOUD_INIT_KEY = "userdata"
"""Key of the user data in the cloud-init Secret (KubeVirt reads ``userdata``, or ``userData``)."""
SSH_PORT = 22
"""Port of the SSH Service and of the VM's sshd."""
WORKLOAD_SELECTOR_LABEL = "gpucell.io/workload"
"""Label on the VM's pod template (so on its virt-launcher pod) that the SSH Service and policy select on.
Only the template carries it: CDI importer pods never match."""
NETWORK_DATA_KEY = "networkdata"
"""Key of the network data in the cloud-init Secret (KubeVirt v1.9.0 ``pkg/cloud-init/cloud-init.go`` reads
``networkdata`` or ``networkData`` from a ``networkDataSecretRef`` Secret)."""
_ROOT = "root"
_CLOUD_INIT_DISK = "cloudinitdisk"
_POD_NETWORK = "default"


@dataclass(frozen=True)
class GpuVirtualMachineArgs:
    """Inputs of :class:`GpuVirtualMachine`."""

    name: str
    """The workload name: ``metadata.name`` of the VirtualMachine (a DNS-1123 label, unique in the tenant)."""
    spec: GpuVirtualMachineSpec
    """What the tenant declared."""
    tenant: TenantView
    """Wiring: the tenant's namespace and readiness, its cluster (provider), its cluster's facts (placement) and
    platform (the KubeVirt and CDI operators to wait for)."""
    after: Sequence[pulumi.Resource] = ()
    """More resources the VM waits for: the program passes the container workloads that share its ``dra`` pools, so
    that their claims are prepared before the VM's is allocated (docs/decisions/0017)."""
    secrets: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    """Config key -> secret value of every key the spec names (``cloudInit.userDataConfigKey``, a disk's
    ``source.credentialsConfigKey``), each a Pulumi secret; checked before (:func:`gpucell.stacks.config.
    load_stack_config`)."""


def data_volume_name(vm: str, index: int) -> str:
    """Name of disk ``index``'s DataVolume (and PVC): ``<vm>-root``, then ``<vm>-data0``, ``<vm>-data1``..."""
    return f"{vm}-{_disk_name(index)}"


def cloud_init_secret_name(vm: str) -> str:
    """Name of ``vm``'s cloud-init Secret: ``<vm>-cloud-init``."""
    return f"{vm}-cloud-init"


def _disk_name(index: int) -> str:
    return _ROOT if index == 0 else f"data{index - 1}"


def import_secret_name(vm: str, index: int) -> str:
    """Name of disk ``index``'s import credentials Secret: ``<vm>-root-import``, ``<vm>-data0-import``..."""
    return f"{data_volume_name(vm, index)}-import"


def import_ca_name(vm: str, index: int) -> str:
    """Name of disk ``index``'s import CA ConfigMap: ``<vm>-root-import-ca``..."""
    return f"{data_volume_name(vm, index)}-import-ca"


def data_volume_template(
    vm: str, index: int, disk: VmDisk, labels: dict[str, str], *, image_class: str | None = None
) -> dict[str, Any]:
    """One ``spec.dataVolumeTemplates`` entry (a CDI ``DataVolume``) for disk ``index`` (0 is the root disk).

    Uses CDI's ``storage`` API rather than ``pvc``: ``resources.requests.storage`` is ``"<sizeGib>Gi"``,
    ``accessModes`` the disk's, ``storageClassName`` only when the disk names one; everything left out
    (class, ``volumeMode``) CDI fills in from the default StorageClass and its StorageProfile (CDI doc
    "DataVolumes", "StorageProfile"). Sources: ``registry.url``, ``http.url`` (with ``secretRef``
    :func:`import_secret_name` and ``certConfigMap`` :func:`import_ca_name` when the source has credentials or a CA
    bundle), ``pvc`` ``{namespace, name}`` (a clone) from ``source.pvc`` ``"namespace/name"``, ``blank: {}``, or for a
    catalog ``image`` a ``sourceRef`` ``{kind: DataSource, namespace: <catalog>, name: <image>-<image_class>}`` (the
    image's copy in the disk's class, :func:`gpucell.spec.images.data_source_name`).
    """
    source = disk.source
    spec: dict[str, Any] = {}
    if source.registry or source.http:
        spec["source"] = import_source(source, import_secret_name(vm, index), import_ca_name(vm, index))
    elif source.blank:
        spec["source"] = {"blank": {}}
    elif source.image:
        catalog, image = source.image.split("/", 1)
        assert image_class is not None  # the disk's class, or the cell's default class
        spec["sourceRef"] = {"kind": "DataSource", "namespace": catalog, "name": data_source_name(image, image_class)}
    else:
        assert source.pvc is not None  # DiskSource requires exactly one source
        namespace, claim = source.pvc.split("/", 1)
        spec["source"] = {"pvc": {"namespace": namespace, "name": claim}}
    storage: dict[str, Any] = {
        "accessModes": [disk.access_mode.value],
        "resources": {"requests": {"storage": f"{disk.size_gib}Gi"}},
    }
    if disk.storage_class is not None:
        storage["storageClassName"] = disk.storage_class
    spec["storage"] = storage
    return {"metadata": {"name": data_volume_name(vm, index), "labels": dict(labels)}, "spec": spec}


def cloud_config(spec: GpuVirtualMachineSpec, *, nvlink_disabled: bool = False, user_data: str | None = None) -> str:
    """The ``#cloud-config`` user data: the VM's own (``user_data``, else ``cloudInit.userData``; none: empty) with
    gpucell's parts merged in (:func:`gpucell.spec.cloud_init.merge_user_data`): one user (``spec.user``) with the
    SSH public keys, passwordless sudo and a locked password; password and root SSH logins off (cloud-init ``users``,
    ``ssh_authorized_keys``, ``ssh_pwauth``, ``disable_root``).

    With ``nvlink_disabled`` (a VM with part of an HGX board,
    :attr:`gpucell.admission.placement.Placement.nvlink_disabled`): ``write_files`` puts :data:`NVLINK_DISABLE_OPTION`
    into :data:`NVLINK_MODPROBE_PATH` before the NVIDIA driver first loads. A guest image whose initramfs already loads
    ``nvidia`` needs ``update-initramfs -u`` and a reboot; a guest running the GPU Operator's driver container reads
    module options from its ``driver.kernelModuleConfig`` ConfigMap (``nvidia.conf`` with ``NVreg_NvLinkDisable=1``)
    instead.

    Raises :class:`gpucell.spec.cloud_init.UserDataError` for user data that is not cloud-config or conflicts with
    gpucell's parts (checked at plan time already, :mod:`gpucell.admission.vm_rules` and :mod:`gpucell.stacks.config`).
    """
    own = spec.cloud_init.user_data if spec.cloud_init else None
    parsed = secret_user_data(user_data) if user_data is not None else parse_cloud_config(own) if own else {}
    ours = GpucellUserData(spec.user, spec.ssh_keys, nvlink_disabled=nvlink_disabled)
    return render_cloud_config(merge_user_data(parsed, ours, where="the VM"))


def _cpu(spec: GpuVirtualMachineSpec, placement: Placement, shape: VmShape) -> dict[str, Any]:
    """``domain.cpu``: the topology, dedicated CPUs and guest NUMA unless the instancetype sets them (KubeVirt refuses
    both, ``pkg/instancetype/apply/cpu.go``), and ``host-passthrough`` for several large-BAR GPUs."""
    cpu: dict[str, Any] = {}
    if spec.instancetype is None:
        cpu = {"cores": spec.cpu.cores, "sockets": spec.cpu.sockets, "threads": spec.cpu.threads}
        if spec.dedicated_cpus:
            # No isolateEmulatorThread: it pins one more pCPU than the tenant declared (and its quota counts).
            cpu["dedicatedCpuPlacement"] = True
        if spec.numa_passthrough:
            cpu["numa"] = {"guestMappingPassthrough": {}}
    model = placement.model
    if model is not None and shape.spec.vgpu_profile is None and needs_host_cpu_model(model, placement.count):
        cpu["model"] = HOST_PASSTHROUGH  # the guest firmware's MMIO window then fits the GPUs' BARs
    return cpu


def _disks(spec: GpuVirtualMachineSpec) -> list[dict[str, Any]]:
    """Root (``bootOrder: 1``), data disks, the cloud-init disk: virtio, or with a preference without a bus, so
    that its ``preferredDiskBus`` applies (KubeVirt applies a preference only where the VM says nothing)."""
    target: dict[str, Any] = {} if spec.preference is not None else {"bus": "virtio"}
    disks: list[dict[str, Any]] = []
    for index in range(len(spec.disks)):
        disk: dict[str, Any] = {"name": _disk_name(index), "disk": dict(target)}
        if index == 0:
            disk["bootOrder"] = 1
        disks.append(disk)
    disks.append({"name": _CLOUD_INIT_DISK, "disk": dict(target)})
    return disks


def _domain(spec: GpuVirtualMachineSpec, placement: Placement, shape: VmShape) -> dict[str, Any]:
    devices: dict[str, Any] = {
        "disks": _disks(spec),
        # Masquerade is KubeVirt's recommended binding on the pod network: the VM is reached at the pod IP.
        "interfaces": [{"name": _POD_NETWORK, "masquerade": {}}],
    }
    if placement.resource is not None and not shape.gpus_from_instancetype:
        resource = placement.resource
        devices["gpus"] = [{"name": f"gpu{i}", "deviceName": resource} for i in range(placement.count)]
    elif placement.device_class is not None:
        devices["gpus"] = vm_gpus(placement.count)
    if placement.nvswitch_resource is not None:
        switch = placement.nvswitch_resource
        devices["hostDevices"] = [
            {"name": f"nvswitch{i}", "deviceName": switch} for i in range(placement.nvswitch_count)
        ]
    if spec.rng:
        devices["rng"] = {}  # virtio-rng: the guest's entropy from the host's /dev/urandom
    if spec.tpm is not None:
        devices["tpm"] = {"persistent": True} if spec.tpm.persistent else {}
    domain: dict[str, Any] = {}
    cpu = _cpu(spec, placement, shape)
    if cpu:
        domain["cpu"] = cpu
    if spec.instancetype is None:
        memory: dict[str, Any] = {"guest": f"{spec.guest_memory_gib}Gi"}
        if spec.hugepages is not None:
            memory["hugepages"] = {"pageSize": spec.hugepages}
        domain["memory"] = memory
        # Explicit limits equal to the requests: the tenant quota sets limits.*, and without them KubeVirt would
        # fill in a memory limit of twice the request, charging the quota double. (A VM sized by an instancetype
        # may set none: its namespace's auto-memory-limits-ratio label makes KubeVirt's limit the request.)
        amounts = {"cpu": str(spec.cpu.vcpus), "memory": f"{spec.guest_memory_gib}Gi"}
        domain["resources"] = {"requests": dict(amounts), "limits": dict(amounts)}
    if spec.efi is not None:
        efi = {"secureBoot": spec.efi.secure_boot, "persistent": spec.efi.persistent}
        domain["firmware"] = {"bootloader": {"efi": efi}}
        if spec.efi.secure_boot:
            domain["features"] = {"smm": {"enabled": True}}  # KubeVirt refuses Secure Boot without SMM
    domain["devices"] = devices
    return domain


def _add_rails(template_spec: dict[str, Any], tenant: str, placement: Placement) -> None:
    """One SR-IOV interface ``rail<i>`` per rail of ``placement``, each on the tenant's network of that rail
    (``multus.networkName``: :func:`gpucell.admission.fabric.tenant_network_name`, the NetworkAttachmentDefinition the
    Network Operator renders in the tenant's namespace, whose resource KubeVirt requests for the launcher pod)."""
    pool = placement.pools[0]
    for rail in placement.rails:
        template_spec["domain"]["devices"]["interfaces"].append({"name": f"rail{rail}", "sriov": {}})
        network = tenant_network_name(tenant, pool, rail)
        template_spec["networks"].append({"name": f"rail{rail}", "multus": {"networkName": network}})


def claim_template_manifest(
    tenant: str, name: str, spec: GpuVirtualMachineSpec, placement: Placement
) -> dict[str, Any] | None:
    """The VM's ``ResourceClaimTemplate`` with ``gpuAllocation: dra`` (:func:`gpucell.admission.dra.vm_claim_template`:
    ``gpus`` VFIO devices of ``gpuModel``), labelled as the VM's objects; else ``None``."""
    if placement.device_class is None or placement.model is None:
        return None
    meta = object_meta(tenant, name, workload=name)
    return vm_claim_template(meta, name, placement.model, placement.count)


def virtual_machine_manifest(
    tenant: str,
    name: str,
    spec: GpuVirtualMachineSpec,
    cell: ClusterFacts,
    placement: Placement,
    *,
    shape: VmShape | None = None,
) -> dict[str, Any]:
    """The ``kubevirt.io/v1`` ``VirtualMachine`` of ``spec`` in ``tenant``'s namespace, as a dict.

    - ``runStrategy``: ``spec.runStrategy``; ``dataVolumeTemplates``: :func:`data_volume_template` per disk,
      root first; volumes ``root``, ``data0``... (``dataVolume``) and ``cloudinitdisk``
      (``cloudInitNoCloud.secretRef`` ``<vm>-cloud-init``), all virtio disks, root with ``bootOrder: 1``;
      one pod-network interface with masquerade binding; ``priorityClassName`` when declared.
    - ``domain.cpu``: cores/sockets/threads; ``dedicatedCpuPlacement`` with ``dedicatedCpus``;
      ``numa.guestMappingPassthrough: {}`` with ``numaPassthrough``. ``domain.memory.guest`` and
      ``resources`` requests = limits (vCPUs, ``"<memoryGib>Gi"``: the quota counts limits, and KubeVirt would
      otherwise default the memory limit to twice the request); ``memory.hugepages.pageSize`` with ``hugepages``.
    - GPUs: ``devices.gpus`` ``gpu0``..``gpuN-1``, each ``deviceName`` the placement's resource (passthrough:
      ``nvidia.com/<PCI device name>``; vGPU: ``nvidia.com/NVIDIA_<type>``), or with DRA ``claimName``/``requestName``
      and the template's ``resourceClaims`` (:func:`claim_template_manifest`); a whole HGX board also
      ``devices.hostDevices`` ``nvswitch0``.. with the board's NVSwitch resource (the ``HostDevices`` gate is on
      whenever a VM pool exists).
    - RDMA NICs (``rdmaNics``): an interface ``rail<i>`` with ``sriov`` binding per rail, on the tenant's network of
      that rail (:func:`_add_rails`); with ``numaPassthrough`` and the ``PCINUMAAwareTopology`` gate the guest sees
      each beside its GPU on the host's NUMA node.
    - ``evictionStrategy``: ``spec.effective_eviction_strategy`` (``None`` with GPUs or ReadWriteOnce disks),
      always explicit so a cluster-wide default cannot turn on live migration.
    - Placement (``placement``: :func:`gpucell.tenancy._common.vm_placement` of the VM on the cluster ``cell``
      describes, a cell spec or :class:`~gpucell.admission.tenants.ClusterFacts`): required node affinity
      ``gpucell.io/pool In <pools>`` (plus ``nvidia.com/gpu.workload.config In <mode>`` for GPU VMs), omitted when
      any node will do; tolerations for the pools' taints (from ``cell``).
    """
    shape = shape or VmShape(spec=spec, efi=spec.efi, tpm=spec.tpm)
    labels = workload_labels(tenant, name)
    volumes: list[dict[str, Any]] = [
        {"name": _disk_name(i), "dataVolume": {"name": data_volume_name(name, i)}} for i in range(len(spec.disks))
    ]
    cloud_init: dict[str, Any] = {"secretRef": {"name": cloud_init_secret_name(name)}}
    if spec.cloud_init is not None and spec.cloud_init.network_data is not None:
        cloud_init["networkDataSecretRef"] = {"name": cloud_init_secret_name(name)}
    volumes.append({"name": _CLOUD_INIT_DISK, "cloudInitNoCloud": cloud_init})
    template_spec: dict[str, Any] = {
        "domain": _domain(spec, placement, shape),
        "networks": [{"name": _POD_NETWORK, "pod": {}}],
        "volumes": volumes,
        "evictionStrategy": spec.effective_eviction_strategy.value,
        **scheduling(placement, cell.node_pools, pin_gpu_mode=bool(shape.spec.gpus)),
    }
    if placement.rails:
        _add_rails(template_spec, tenant, placement)
    if spec.priority_class_name is not None:
        template_spec["priorityClassName"] = spec.priority_class_name
    template = claim_template_manifest(tenant, name, spec, placement)
    if template is not None:
        template_spec["resourceClaims"] = pod_resource_claims(template)
    default_class = cell.storage.backend.value
    vm_spec: dict[str, Any] = {"runStrategy": spec.run_strategy.value}
    for key, ref in (("instancetype", spec.instancetype), ("preference", spec.preference)):
        if ref is not None:
            vm_spec[key] = {"kind": ref.kind.value, "name": ref.name}
    vm_spec["dataVolumeTemplates"] = [
        data_volume_template(name, i, disk, labels, image_class=disk.storage_class or default_class)
        for i, disk in enumerate(spec.disks)
    ]
    vm_spec["template"] = {"metadata": {"labels": {**labels, WORKLOAD_SELECTOR_LABEL: name}}, "spec": template_spec}
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": object_meta(tenant, name, workload=name),
        "spec": vm_spec,
    }


def _service_ports(spec: GpuVirtualMachineSpec) -> list[dict[str, Any]]:
    """Port 22 (``ssh``) and each listed port (``<protocol>-<port>``, lower-case), each to the same guest port."""
    assert spec.ssh_service is not None
    ports = [{"name": "ssh", "protocol": "TCP", "port": SSH_PORT, "targetPort": SSH_PORT}]
    for extra in spec.ssh_service.ports:
        protocol = extra.protocol.value
        ports.append(
            {
                "name": f"{protocol.lower()}-{extra.port}",
                "protocol": protocol,
                "port": extra.port,
                "targetPort": extra.port,
            }
        )
    return ports


def ssh_service_manifest(
    tenant: str, name: str, spec: GpuVirtualMachineSpec, *, pool: str | None = None
) -> dict[str, Any] | None:
    """The SSH ``Service`` (named after the VM; port 22, and each of ``sshService.ports``, to the same port of the
    VM, selecting its virt-launcher pod by :data:`WORKLOAD_SELECTOR_LABEL`), or ``None`` without ``sshService``.

    ``NodePort``/``LoadBalancer`` get ``externalTrafficPolicy: Local``: only the node running the VM answers,
    so Cilium never forwards (and SNATs) the connection from another node, and the client keeps its ``world``
    identity that :func:`ssh_policy_manifest` admits. With L2 announcements only a node with a local backend takes
    the address's lease, and with BGP only such nodes advertise it (Cilium 1.20 "L2 Announcements", "BGP Control
    Plane": ``externalTrafficPolicy: Local``).

    ``LoadBalancer`` also gets: label :data:`gpucell.components.lb_ipam.POOL_LABEL` = ``pool`` (the pool's
    ``serviceSelector`` requires it), annotation ``lbipam.cilium.io/ips`` with ``sshService.address``,
    ``loadBalancerSourceRanges`` = ``allowFromCidrs`` (what Cilium's load balancer drops before the policy is even
    consulted), and ``allocateLoadBalancerNodePorts: false``: Cilium's kube-proxy replacement serves the address
    without node ports, so no port opens on every node and ``services.nodeports`` is not charged.

    Raises ``ValueError`` when the VM name starts with a digit: a Service name must be a DNS-1035 label.
    """
    if spec.ssh_service is None:
        return None
    if not name[0].isalpha():
        raise ValueError(
            f"VM {name!r} has an sshService, so its name must start with a letter (a Service name is a DNS-1035 label)"
        )
    service = spec.ssh_service
    service_spec: dict[str, Any] = {
        "type": service.type.value,
        "selector": {WORKLOAD_SELECTOR_LABEL: name},
        "ports": _service_ports(spec),
    }
    metadata = object_meta(tenant, name, workload=name)
    if service.type is not ServiceType.CLUSTER_IP:
        service_spec["externalTrafficPolicy"] = "Local"
    if service.type is ServiceType.LOAD_BALANCER:
        if pool is None:
            raise ValueError(f"VM {name!r}: a LoadBalancer Service needs the pool its address comes from")
        metadata["labels"][POOL_LABEL] = pool
        if service.address is not None:
            metadata["annotations"] = {ADDRESS_ANNOTATION: str(service.address)}
        service_spec["allocateLoadBalancerNodePorts"] = False
        service_spec["loadBalancerSourceRanges"] = [str(net) for net in service.allow_from_cidrs]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": service_spec,
    }


def ssh_policy_manifest(tenant: str, name: str, spec: GpuVirtualMachineSpec) -> dict[str, Any] | None:
    """A ``cilium.io/v2`` ``CiliumNetworkPolicy`` ``<vm>-ssh`` admitting ingress from
    ``sshService.allowFromCidrs`` (``fromCIDRSet``) to the Service's ports (TCP 22 and each listed port) of this VM's
    pod only, for a ``NodePort`` or ``LoadBalancer`` SSH Service; ``None`` otherwise (a ``ClusterIP`` Service is
    reachable only from inside the tenant, which the tenant's policies allow).

    CIDR rules match the client's address because the Service has ``externalTrafficPolicy: Local``: the node
    that receives the connection runs the VM, so Cilium does not SNAT it to a node address (Cilium
    "Kubernetes Without kube-proxy", SNAT vs DSR modes). ``0.0.0.0/0`` in ``allowFromCidrs`` is the ``world``. The
    policy, not only ``loadBalancerSourceRanges``, is what holds: it is enforced at the VM's endpoint whatever path
    the packet took.
    """
    if spec.ssh_service is None or spec.ssh_service.type is ServiceType.CLUSTER_IP:
        return None
    sources = [{"cidr": str(net)} for net in spec.ssh_service.allow_from_cidrs]
    ports = [{"port": str(p["port"]), "protocol": p["protocol"]} for p in _service_ports(spec)]
    rule = {"fromCIDRSet": sources, "toPorts": [{"ports": ports}]}
    return cilium_network_policy(
        object_meta(tenant, f"{name}-ssh", workload=name),
        {"ingress": [rule]},
        match_labels={WORKLOAD_SELECTOR_LABEL: name},
    )


class GpuVirtualMachine(CellComponent):
    """A tenant's VM (``gpucell:index:GpuVirtualMachine``), on the tenant's cluster with its provider.

    Children (``name`` is the component name, e.g. ``fra1-acme-train``):

    - ``f"{name}-cloud-init"``: the ``Secret`` with the user data (:func:`cloud_config`, a Pulumi secret);
    - ``f"{name}-<disk>-import"`` (``Secret``, a Pulumi secret) and ``f"{name}-<disk>-import-ca"`` (``ConfigMap``)
      for disks imported with credentials or a CA bundle;
    - with DRA GPUs: ``f"{name}-gpu-claim"``, the ``ResourceClaimTemplate`` (:func:`claim_template_manifest`);
    - ``f"{name}-vm"``: the ``VirtualMachine`` (:func:`virtual_machine_manifest`), after the Secret (and the claim
      template);
    - ``f"{name}-ssh"`` (``Service``) and ``f"{name}-ssh-policy"`` (``CiliumNetworkPolicy``), when declared.

    Every child depends on ``tenant.ready`` (namespace, quota, policies) and, when the tenant's platform has them,
    on the ``KubeVirt`` CR (Available, and permitting the VM's GPUs) and on the ``CDI`` CR and its StorageProfile
    patch (so DataVolumes get the PVC shape the storage needs); with ``rdmaNics`` on the Network Operator's tenant
    networks; with DRA GPUs also on the DRA driver's Release and
    on ``args.after``; a VM cloning a catalog image also on that :class:`gpucell.components.images.ImageCatalog` of the
    platform (its clone RBAC).
    The ``VirtualMachine`` takes the VM's ``removalPolicy`` (by default the tenant's, ``protect``): it owns the
    VM's DataVolumes, so deleting it deletes the disks.
    """

    namespace: pulumi.Output[str]
    """The tenant namespace the VM lives in (``tenant-<tenant>``)."""
    vm_name: pulumi.Output[str]
    """``metadata.name`` of the VirtualMachine (the workload name)."""

    def __init__(self, name: str, args: GpuVirtualMachineArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        tenant = args.tenant
        vm, spec = args.name, args.spec
        facts, platform = admit_workload(tenant, "virtual_machines", vm, spec), tenant.platform
        super().__init__("GpuVirtualMachine", name, opts, tenant.cluster)
        after: list[pulumi.Resource] = [*tenant.ready, *vm_platform_ready(platform, spec)]
        if spec.rdma_nics and platform.network_operator is not None:
            after += platform.network_operator.networks  # the NetworkAttachmentDefinitions its interfaces name
        # Render everything first: a spec that cannot render raises before any resource is registered.
        try:
            shape = resolve_vm(facts.kubevirt, facts.versions.kubevirt, facts.tenants[tenant.name], spec)
        except ShapeError as exc:
            raise ValueError(f"VM {vm!r}: {'.'.join(exc.rel_path)}: {exc.message}") from None
        self.placement = vm_placement(vm, shape.spec, facts)
        """Pools the VM may run on and the GPU resource it requests."""
        manifest = virtual_machine_manifest(tenant.name, vm, spec, facts, self.placement, shape=shape)
        template = claim_template_manifest(tenant.name, vm, spec, self.placement)
        ssh = spec.ssh_service
        pool = None if ssh is None else vm_pool(facts.load_balancer, tenant.name, ssh.pool)
        service = ssh_service_manifest(tenant.name, vm, spec, pool=pool)
        policy = ssh_policy_manifest(tenant.name, vm, spec)
        self.cloud_init = opaque_secret(
            f"{name}-cloud-init",
            object_meta(tenant.name, cloud_init_secret_name(vm), workload=vm),
            cloud_init_data(spec, self.placement.nvlink_disabled, args.secrets),
            self.child(depends_on=after),
        )
        """The cloud-init Secret: user data (and network data)."""
        self.import_objects = self._import_objects(name, tenant.name, args, after)
        """The disks' import credentials Secrets and CA bundle ConfigMaps, where their sources have them."""
        self.claim_template: ResourceClaimTemplate | None = None
        """The ``ResourceClaimTemplate`` of its DRA GPUs, with ``gpuAllocation: dra``."""
        claim: list[pulumi.Resource] = []
        if template is not None:
            dra_after = [*after, *gpu_dependencies(platform, self.placement)]
            self.claim_template = ResourceClaimTemplate(
                f"{name}-gpu-claim",
                metadata=template["metadata"],
                spec=template["spec"],
                opts=self.child(depends_on=dra_after),
            )
            claim = [*dra_after, self.claim_template, *args.after]
        # The VirtualMachine owns its disks (dataVolumeTemplates): deleting it deletes them.
        lifecycle = removal_options(spec.removal_policy or tenant.removal_policy)
        self.vm = custom_resource(
            f"{name}-vm",
            manifest,
            self.child(depends_on=[*after, self.cloud_init, *self.import_objects, *claim], **lifecycle),
        )
        """The ``VirtualMachine``."""
        self.ssh_service: Service | None = None
        """The SSH ``Service``, when declared."""
        self.ssh_policy: CustomResource | None = None
        """The ``CiliumNetworkPolicy`` admitting outside SSH, for ``NodePort``/``LoadBalancer`` Services."""
        if service is not None:
            self.ssh_service = Service(
                f"{name}-ssh",
                metadata=service["metadata"],
                spec=service["spec"],
                opts=self.child(depends_on=after),
            )
        if policy is not None:
            self.ssh_policy = custom_resource(f"{name}-ssh-policy", policy, self.child(depends_on=after))
        self.namespace = self.vm.urn.apply(lambda _: namespace_of(tenant.name))
        self.vm_name = self.vm.urn.apply(lambda _: vm)
        self.register_outputs({"namespace": self.namespace, "vmName": self.vm_name})

    def _import_objects(
        self, name: str, tenant: str, args: GpuVirtualMachineArgs, after: list[pulumi.Resource]
    ) -> list[pulumi.Resource]:
        """Per disk with an import source: its credentials Secret (:func:`import_secret_data` of the secret its
        ``credentialsConfigKey`` names) and its CA ConfigMap (``caBundle``), named as :func:`data_volume_template`
        refers to them."""
        made: list[pulumi.Resource] = []
        vm, spec, secrets = args.name, args.spec, args.secrets
        for index, disk in enumerate(spec.disks):
            disk_name = _disk_name(index)
            key = disk.source.credentials_config_key
            if key is not None:
                if key not in secrets:
                    raise ValueError(f"VM {vm!r}: credentialsConfigKey {key!r} of disk {disk_name} has no secret value")
                meta = object_meta(tenant, import_secret_name(vm, index), workload=vm)
                data = pulumi.Output.from_input(secrets[key]).apply(import_secret_data)
                made.append(opaque_secret(f"{name}-{disk_name}-import", meta, data, self.child(depends_on=after)))
            if disk.source.ca_bundle is not None:
                made.append(
                    ConfigMap(
                        f"{name}-{disk_name}-import-ca",
                        metadata=cast(
                            "ObjectMetaArgsDict", object_meta(tenant, import_ca_name(vm, index), workload=vm)
                        ),
                        data={CA_BUNDLE_KEY: disk.source.ca_bundle},
                        opts=self.child(depends_on=after),
                    )
                )
        return made


def cloud_init_data(
    spec: GpuVirtualMachineSpec, nvlink_disabled: bool, secrets: Mapping[str, pulumi.Input[str]]
) -> pulumi.Input[Mapping[str, pulumi.Input[str]]]:
    """``stringData`` of the cloud-init Secret: :data:`CLOUD_INIT_KEY` -> :func:`cloud_config` (of the secret
    ``cloudInit.userDataConfigKey`` names, when it names one) and :data:`NETWORK_DATA_KEY` -> ``networkData``."""
    own = spec.cloud_init
    data: dict[str, pulumi.Input[str]] = {}
    key = own.user_data_config_key if own is not None else None
    if key is not None:
        if key not in secrets:
            raise ValueError(f"cloudInit.userDataConfigKey {key!r} has no secret value")
        data[CLOUD_INIT_KEY] = pulumi.Output.from_input(secrets[key]).apply(
            lambda text: cloud_config(spec, nvlink_disabled=nvlink_disabled, user_data=text)
        )
    else:
        data[CLOUD_INIT_KEY] = cloud_config(spec, nvlink_disabled=nvlink_disabled)
    if own is not None and own.network_data is not None:
        data[NETWORK_DATA_KEY] = own.network_data
    return data


def vm_platform_ready(platform: Platform, spec: GpuVirtualMachineSpec) -> list[pulumi.Resource]:
    """What a VM of ``spec`` waits for of ``platform``: the ``KubeVirt`` CR (Available, permitting its GPUs), the
    ``CDI`` CR and its StorageProfile patch, and the image catalogs its disks clone from; each only when the platform
    has it."""
    after: list[pulumi.Resource] = []
    if platform.kubevirt is not None:
        after.append(platform.kubevirt.cr)
    if platform.cdi is not None:
        after += [platform.cdi.cr, platform.cdi.storage_profile]
    return after + _catalogs_used(platform, spec)


def _catalogs_used(platform: Platform, spec: GpuVirtualMachineSpec) -> list[pulumi.Resource]:
    """The image catalogs (components) of the platform the VM's disks clone from: their clone RBAC must exist
    first."""
    names = {disk.source.image.split("/", 1)[0] for disk in spec.disks if disk.source.image}
    return [catalog for catalog_name, catalog in platform.image_catalogs.items() if catalog_name in names]
