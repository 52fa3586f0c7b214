"""GpuVirtualMachine: a tenant's KubeVirt VirtualMachine with CDI disks, whole GPUs or vGPUs, and cloud-init.

What is rendered, in the tenant's namespace (``tenant-<tenant>``):

- a ``kubevirt.io/v1`` ``VirtualMachine`` named after the workload (checked against ``v1.VirtualMachine`` of
  KubeVirt v1.9.0 ``api/openapi-spec/swagger.json``), with one CDI ``dataVolumeTemplates`` entry per disk;
- a ``v1`` ``Secret`` ``<vm>-cloud-init`` holding the NoCloud user data (key ``userdata``, the key KubeVirt
  reads from a ``cloudInitNoCloud.secretRef`` Secret, as in the KubeVirt user guide "Startup Scripts");
- with ``sshService``: a ``Service`` named after the VM (port 22), and for ``NodePort``/``LoadBalancer`` a
  ``CiliumNetworkPolicy`` ``<vm>-ssh`` letting the outside world (Cilium entity ``world``) reach port 22 of
  this VM only: the tenant's default-deny policies would drop it otherwise.

GPUs go into ``spec.domain.devices.gpus`` with ``deviceName`` the extended resource the GPU Operator's sandbox
device plugin advertises, for passthrough and vGPU alike: that is what the GPU Operator's "GPU Operator with
KubeVirt" page ("Create a virtual machine with GPU") shows, and the resource is the one the ``KubeVirt`` CR
permits (:func:`components.kubevirt.permitted_host_devices`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pulumi
import yaml
from pulumi_kubernetes.apiextensions import CustomResource
from pulumi_kubernetes.core.v1 import Secret, Service

from components._component import CellComponent
from components.inventory import gpu_offers
from components.placement import Placement, place_vm
from components.spec.cell import CellSpec
from components.spec.pools import POOL_LABEL, WORKLOAD_LABEL, NodePool
from components.spec.tenancy import namespace_of
from components.spec.workloads import GpuVirtualMachineSpec, ServiceType, VmDisk

if TYPE_CHECKING:
    from components.tenancy import Tenant

__all__ = [
    "CLOUD_INIT_KEY",
    "SSH_PORT",
    "WORKLOAD_SELECTOR_LABEL",
    "GpuVirtualMachine",
    "GpuVirtualMachineArgs",
    "cloud_config",
    "cloud_init_secret_name",
    "data_volume_name",
    "data_volume_template",
    "ssh_policy_manifest",
    "ssh_service_manifest",
    "tolerations",
    "virtual_machine_manifest",
    "vm_placement",
    "workload_labels",
]

CLOUD_INIT_KEY = "userdata"
"""Key of the user data in the cloud-init Secret (KubeVirt reads ``userdata``, or ``userData``)."""
SSH_PORT = 22
"""Port of the SSH Service and of the VM's sshd."""
WORKLOAD_SELECTOR_LABEL = "gpucell.io/workload"
"""Label on the VM's pod template (so on its virt-launcher pod) that the SSH Service and policy select on.
Only the template carries it: CDI importer pods never match."""
_MANAGED_BY = "gpucell"
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
    tenant: Tenant
    """Wiring: the tenant's namespace and readiness, and through ``tenant.cell`` the provider, the region spec
    (placement) and the KubeVirt and CDI operators to wait for."""


def workload_labels(tenant: str, name: str) -> dict[str, str]:
    """The labels every object of a workload carries (``app.kubernetes.io/name``, ``managed-by``, tenant)."""
    return {
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/managed-by": _MANAGED_BY,
        "gpucell.io/tenant": tenant,
    }


def data_volume_name(vm: str, index: int) -> str:
    """Name of disk ``index``'s DataVolume (and PVC): ``<vm>-root``, then ``<vm>-data0``, ``<vm>-data1``..."""
    return f"{vm}-{_disk_name(index)}"


def cloud_init_secret_name(vm: str) -> str:
    """Name of ``vm``'s cloud-init Secret: ``<vm>-cloud-init``."""
    return f"{vm}-cloud-init"


def _disk_name(index: int) -> str:
    return _ROOT if index == 0 else f"data{index - 1}"


def vm_placement(name: str, spec: GpuVirtualMachineSpec, cell: CellSpec) -> Placement:
    """Where the VM may run and the GPU resource it asks for: :func:`components.placement.place_vm` over the
    region's inventory, the same call plan-time admission makes (so it never raises for an admitted spec)."""
    offers = gpu_offers(cell.node_pools, cell.effective_mig_strategy.value)
    return place_vm(name, spec, cell.node_pools, offers)


def data_volume_template(vm: str, index: int, disk: VmDisk, labels: dict[str, str]) -> dict[str, Any]:
    """One ``spec.dataVolumeTemplates`` entry (a CDI ``DataVolume``) for disk ``index`` (0 is the root disk).

    Uses CDI's ``storage`` API rather than ``pvc``: ``resources.requests.storage`` is ``"<sizeGib>Gi"``,
    ``accessModes`` the disk's, ``storageClassName`` only when the disk names one; everything left out
    (class, ``volumeMode``) CDI fills in from the default StorageClass and its StorageProfile (CDI doc
    "DataVolumes", "StorageProfile"). Sources: ``registry.url``, ``http.url``, or ``pvc`` ``{namespace,
    name}`` (a clone) from ``source.pvc`` ``"namespace/name"``.
    """
    source = disk.source
    if source.registry:
        rendered_source: dict[str, Any] = {"registry": {"url": source.registry}}
    elif source.http:
        rendered_source = {"http": {"url": source.http}}
    else:
        assert source.pvc is not None  # DiskSource requires exactly one of the three
        namespace, claim = source.pvc.split("/", 1)
        rendered_source = {"pvc": {"namespace": namespace, "name": claim}}
    storage: dict[str, Any] = {
        "accessModes": [disk.access_mode.value],
        "resources": {"requests": {"storage": f"{disk.size_gib}Gi"}},
    }
    if disk.storage_class is not None:
        storage["storageClassName"] = disk.storage_class
    return {
        "metadata": {"name": data_volume_name(vm, index), "labels": dict(labels)},
        "spec": {"source": rendered_source, "storage": storage},
    }


def cloud_config(spec: GpuVirtualMachineSpec) -> str:
    """The ``#cloud-config`` user data: one user (``spec.user``) with the SSH public keys, passwordless
    sudo and a locked password; password and root SSH logins off (cloud-init ``users``,
    ``ssh_authorized_keys``, ``ssh_pwauth``, ``disable_root``).
    """
    user = {
        "name": spec.user,
        "lock_passwd": True,
        "shell": "/bin/bash",
        "sudo": "ALL=(ALL) NOPASSWD:ALL",
        "ssh_authorized_keys": list(spec.ssh_keys),
    }
    config = {"users": [user], "ssh_pwauth": False, "disable_root": True}
    return "#cloud-config\n" + yaml.safe_dump(config, sort_keys=False, width=4096)


def tolerations(pools: dict[str, NodePool], names: tuple[str, ...]) -> list[dict[str, str]]:
    """Tolerations for every taint of the pools ``names`` (``key=value:Effect`` -> ``Equal``, ``key:Effect``
    -> ``Exists``), in pool order without duplicates; empty when the pools have no taints."""
    out: list[dict[str, str]] = []
    for name in names:
        for taint in pools[name].taints:
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


def _affinity(gpus: int, placement: Placement, pools: dict[str, NodePool]) -> dict[str, Any]:
    """Required node affinity: the placement's pools, and for GPU VMs the pools' GPU Operator mode too."""
    expressions: list[dict[str, Any]] = [
        {"key": POOL_LABEL, "operator": "In", "values": list(placement.pools)}
    ]
    if gpus:
        modes = sorted({pools[p].mode.value for p in placement.pools})
        expressions.append({"key": WORKLOAD_LABEL, "operator": "In", "values": modes})
    terms = [{"matchExpressions": expressions}]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


def _domain(spec: GpuVirtualMachineSpec, placement: Placement) -> dict[str, Any]:
    cpu: dict[str, Any] = {"cores": spec.cpu.cores, "sockets": spec.cpu.sockets, "threads": spec.cpu.threads}
    if spec.dedicated_cpus:
        # No isolateEmulatorThread: it pins one more pCPU than the tenant declared (and its quota counts).
        cpu["dedicatedCpuPlacement"] = True
    if spec.numa_passthrough:
        cpu["numa"] = {"guestMappingPassthrough": {}}
    memory: dict[str, Any] = {"guest": f"{spec.memory_gib}Gi"}
    if spec.hugepages is not None:
        memory["hugepages"] = {"pageSize": spec.hugepages}
    disks: list[dict[str, Any]] = []
    for index in range(len(spec.disks)):
        disk: dict[str, Any] = {"name": _disk_name(index), "disk": {"bus": "virtio"}}
        if index == 0:
            disk["bootOrder"] = 1
        disks.append(disk)
    disks.append({"name": _CLOUD_INIT_DISK, "disk": {"bus": "virtio"}})
    devices: dict[str, Any] = {
        "disks": disks,
        # Masquerade is KubeVirt's recommended binding on the pod network: the VM is reached at the pod IP.
        "interfaces": [{"name": _POD_NETWORK, "masquerade": {}}],
    }
    if placement.resource is not None:
        resource = placement.resource
        devices["gpus"] = [{"name": f"gpu{i}", "deviceName": resource} for i in range(placement.count)]
    return {
        "cpu": cpu,
        "memory": memory,
        # Explicit limits equal to the requests: the tenant quota sets limits.*, and without them KubeVirt would
        # fill in a memory limit of twice the request, charging the quota double.
        "resources": {
            "requests": {"cpu": str(spec.cpu.vcpus), "memory": f"{spec.memory_gib}Gi"},
            "limits": {"cpu": str(spec.cpu.vcpus), "memory": f"{spec.memory_gib}Gi"},
        },
        "devices": devices,
    }


def _metadata(tenant: str, workload: str, name: str) -> dict[str, Any]:
    return {"name": name, "namespace": namespace_of(tenant), "labels": workload_labels(tenant, workload)}


def virtual_machine_manifest(
    tenant: str, name: str, spec: GpuVirtualMachineSpec, cell: CellSpec
) -> dict[str, Any]:
    """The ``kubevirt.io/v1`` ``VirtualMachine`` of ``spec`` in ``tenant``'s namespace, as a dict.

    - ``runStrategy``: ``spec.runStrategy``; ``dataVolumeTemplates``: :func:`data_volume_template` per disk,
      root first; volumes ``root``, ``data0``... (``dataVolume``) and ``cloudinitdisk``
      (``cloudInitNoCloud.secretRef`` ``<vm>-cloud-init``), all virtio disks, root with ``bootOrder: 1``;
      one pod-network interface with masquerade binding.
    - ``domain.cpu``: cores/sockets/threads; ``dedicatedCpuPlacement`` with ``dedicatedCpus``;
      ``numa.guestMappingPassthrough: {}`` with ``numaPassthrough``. ``domain.memory.guest`` and
      ``resources`` requests = limits (vCPUs, ``"<memoryGib>Gi"``: the quota counts limits, and KubeVirt would
      otherwise default the memory limit to twice the request); ``memory.hugepages.pageSize`` with ``hugepages``.
    - GPUs: ``devices.gpus`` ``gpu0``..``gpuN-1``, each ``deviceName`` the placement's resource (passthrough:
      ``nvidia.com/<PCI device name>``; vGPU: ``nvidia.com/NVIDIA_<type>``).
    - ``evictionStrategy``: ``spec.effective_eviction_strategy`` (``None`` with GPUs or ReadWriteOnce disks),
      always explicit so a cluster-wide default cannot turn on live migration.
    - Placement (:func:`vm_placement`): required node affinity ``gpucell.io/pool In <pools>`` (plus
      ``nvidia.com/gpu.workload.config In <mode>`` for GPU VMs), omitted when any node will do; tolerations
      for the pools' taints.

    Raises :class:`components.placement.PlacementError` for a spec that admission would have refused.
    """
    placement = vm_placement(name, spec, cell)
    labels = workload_labels(tenant, name)
    volumes: list[dict[str, Any]] = [
        {"name": _disk_name(i), "dataVolume": {"name": data_volume_name(name, i)}}
        for i in range(len(spec.disks))
    ]
    cloud_init = {"secretRef": {"name": cloud_init_secret_name(name)}}
    volumes.append({"name": _CLOUD_INIT_DISK, "cloudInitNoCloud": cloud_init})
    template_spec: dict[str, Any] = {
        "domain": _domain(spec, placement),
        "networks": [{"name": _POD_NETWORK, "pod": {}}],
        "volumes": volumes,
        "evictionStrategy": spec.effective_eviction_strategy.value,
    }
    if placement.pools:
        template_spec["affinity"] = _affinity(spec.gpus, placement, cell.node_pools)
    tolerated = tolerations(cell.node_pools, placement.pools)
    if tolerated:
        template_spec["tolerations"] = tolerated
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": _metadata(tenant, name, name),
        "spec": {
            "runStrategy": spec.run_strategy.value,
            "dataVolumeTemplates": [
                data_volume_template(name, i, disk, labels) for i, disk in enumerate(spec.disks)
            ],
            "template": {
                "metadata": {"labels": {**labels, WORKLOAD_SELECTOR_LABEL: name}},
                "spec": template_spec,
            },
        },
    }


def ssh_service_manifest(tenant: str, name: str, spec: GpuVirtualMachineSpec) -> dict[str, Any] | None:
    """The SSH ``Service`` (named after the VM; port 22 to the VM's port 22, selecting its virt-launcher pod
    by :data:`WORKLOAD_SELECTOR_LABEL`), or ``None`` without ``sshService``.

    ``NodePort``/``LoadBalancer`` get ``externalTrafficPolicy: Local``: only the node running the VM answers,
    so Cilium never forwards (and SNATs) the connection from another node, and the client keeps its ``world``
    identity that :func:`ssh_policy_manifest` admits.

    Raises ``ValueError`` when the VM name starts with a digit: a Service name must be a DNS-1035 label.
    """
    if spec.ssh_service is None:
        return None
    if not name[0].isalpha():
        raise ValueError(f"VM {name!r} has an sshService, so its name must start with a letter (a Service "
                         "name is a DNS-1035 label)")
    service_spec: dict[str, Any] = {
        "type": spec.ssh_service.type.value,
        "selector": {WORKLOAD_SELECTOR_LABEL: name},
        "ports": [{"name": "ssh", "protocol": "TCP", "port": SSH_PORT, "targetPort": SSH_PORT}],
    }
    if spec.ssh_service.type is not ServiceType.CLUSTER_IP:
        service_spec["externalTrafficPolicy"] = "Local"
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(tenant, name, name),
        "spec": service_spec,
    }


def ssh_policy_manifest(tenant: str, name: str, spec: GpuVirtualMachineSpec) -> dict[str, Any] | None:
    """A ``cilium.io/v2`` ``CiliumNetworkPolicy`` ``<vm>-ssh`` admitting ingress from the ``world`` entity to
    TCP 22 of this VM's pod only, for a ``NodePort``/``LoadBalancer`` SSH Service; ``None`` otherwise (a
    ``ClusterIP`` Service is reachable only from inside the tenant, which the tenant's policies allow).
    """
    if spec.ssh_service is None or spec.ssh_service.type is ServiceType.CLUSTER_IP:
        return None
    return {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": _metadata(tenant, name, f"{name}-ssh"),
        "spec": {
            "endpointSelector": {"matchLabels": {WORKLOAD_SELECTOR_LABEL: name}},
            "ingress": [
                {
                    "fromEntities": ["world"],
                    "toPorts": [{"ports": [{"port": str(SSH_PORT), "protocol": "TCP"}]}],
                }
            ],
        },
    }


class GpuVirtualMachine(CellComponent):
    """A tenant's VM (``gpucell:index:GpuVirtualMachine``), in the tenant's cell with the cell's provider.

    Children (``name`` is the component name, e.g. ``fra1-acme-train``):

    - ``f"{name}-cloud-init"``: the ``Secret`` with the user data (:func:`cloud_config`, a Pulumi secret);
    - ``f"{name}-vm"``: the ``VirtualMachine`` (:func:`virtual_machine_manifest`), after the Secret;
    - ``f"{name}-ssh"`` (``Service``) and ``f"{name}-ssh-policy"`` (``CiliumNetworkPolicy``), when declared.

    Every child depends on ``tenant.ready`` (namespace, quota, policies), on the ``KubeVirt`` CR (Available,
    and permitting the VM's GPUs) and on the ``CDI`` CR and its StorageProfile patch (so DataVolumes get the
    PVC shape the cell's storage needs).
    """

    namespace: pulumi.Output[str]
    """The tenant namespace the VM lives in (``tenant-<tenant>``)."""
    vm_name: pulumi.Output[str]
    """``metadata.name`` of the VirtualMachine (the workload name)."""

    def __init__(
        self, name: str, args: GpuVirtualMachineArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        tenant = args.tenant
        cell = tenant.cell
        in_cell = pulumi.ResourceOptions(providers={"kubernetes": cell.provider})
        opts = pulumi.ResourceOptions.merge(in_cell, opts)
        super().__init__("GpuVirtualMachine", name, opts)
        vm, spec = args.name, args.spec
        after: list[pulumi.Resource] = [
            *tenant.ready, cell.kubevirt.cr, cell.cdi.cr, cell.cdi.storage_profile
        ]
        # Render everything first: a spec that cannot render raises before any resource is registered.
        manifest = virtual_machine_manifest(tenant.name, vm, spec, cell.spec)
        service = ssh_service_manifest(tenant.name, vm, spec)
        policy = ssh_policy_manifest(tenant.name, vm, spec)
        self.placement = vm_placement(vm, spec, cell.spec)
        """Pools the VM may run on and the GPU resource it requests."""
        self.cloud_init = Secret(
            f"{name}-cloud-init",
            metadata=_metadata(tenant.name, vm, cloud_init_secret_name(vm)),
            type="Opaque",
            string_data={CLOUD_INIT_KEY: pulumi.Output.secret(cloud_config(spec))},
            opts=self.child(depends_on=after),
        )
        """The cloud-init user data Secret."""
        self.vm = CustomResource(
            f"{name}-vm",
            api_version=manifest["apiVersion"],
            kind=manifest["kind"],
            metadata=manifest["metadata"],
            spec=manifest["spec"],
            opts=self.child(depends_on=[*after, self.cloud_init]),
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
            self.ssh_policy = CustomResource(
                f"{name}-ssh-policy",
                api_version=policy["apiVersion"],
                kind=policy["kind"],
                metadata=policy["metadata"],
                spec=policy["spec"],
                opts=self.child(depends_on=after),
            )
        self.namespace = self.vm.urn.apply(lambda _: namespace_of(tenant.name))
        self.vm_name = self.vm.urn.apply(lambda _: vm)
        self.register_outputs({"namespace": self.namespace, "vmName": self.vm_name})
