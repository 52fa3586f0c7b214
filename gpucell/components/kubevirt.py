"""KubeVirt: VMs as Kubernetes objects, configured for the cell's GPU pools.

The operator comes from the pinned release's manifest
(``https://github.com/kubevirt/kubevirt/releases/download/<version>/kubevirt-operator.yaml``; it creates the
``kubevirt`` namespace, the CRDs and the operator Deployment). All configuration lives in the ``KubeVirt``
custom resource; its shape is checked against ``v1.KubeVirt`` in KubeVirt v1.9.0
``api/openapi-spec/swagger.json``.

Feature gates at v1.9 (``pkg/virt-config/featuregate/active.go`` and ``inactive.go``; the ``legacy/`` files of
later KubeVirt do not exist at v1.9.0): ``GPU`` (GA since kubevirt/kubevirt#12943) and
``NUMA`` (GA since #12232) are deprecated and always on, so they are not set; ``HostDevices`` and
``CPUManager`` are still Alpha gates; ``GPUsWithDRA`` is Beta (on unless disabled) and set explicitly with ``dra``
pools; ``DisableMDEVConfiguration`` is deprecated since v1.8 (#16220) in favour
of ``spec.configuration.mediatedDevicesConfiguration.enabled``, which is what we set.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi_kubernetes.apiextensions import CustomResource
from pulumi_kubernetes.yaml.v2 import ConfigFile

from gpucell._component import CellComponent
from gpucell.admission.vm_rules import state_storage_class
from gpucell.admission.vm_shape import resolve_vm
from gpucell.catalog.gpu_catalog import GpuModel, VgpuFramework
from gpucell.catalog.releases import release
from gpucell.components.platform_tolerations import vm_pool_tolerations
from gpucell.spec.hardware import vgpu_pools
from gpucell.spec.lifecycle import RemovalPolicy, removal_options
from gpucell.spec.platform import ImageSpec
from gpucell.spec.pools import GpuMode, NodePool, gpu_pools
from gpucell.spec.versions import Versions

if TYPE_CHECKING:
    from gpucell.cluster import Cluster
    from gpucell.spec.cell import CellSpec

__all__ = [
    "CPU_ALLOCATION_RATIO",
    "CPU_MANAGER_GATE",
    "CR_NAME",
    "GPUS_WITH_DRA_GATE",
    "HOST_DEVICES_GATE",
    "NAMESPACE",
    "PCI_NUMA_AWARE_TOPOLOGY_GATE",
    "SECCOMP_CONFIGURATION",
    "VM_PERSISTENT_STATE_GATE",
    "WAIT_FOR_AVAILABLE",
    "KubeVirt",
    "KubeVirtArgs",
    "feature_gates",
    "kubevirt_spec",
    "operator_manifest_url",
    "permitted_host_devices",
    "permitted_vf_device",
    "release_tag",
    "vm_platform_configuration",
]

NAMESPACE = "kubevirt"
"""Namespace the operator manifest creates and the ``KubeVirt`` CR lives in."""
CR_NAME = "kubevirt"
"""Name of the ``KubeVirt`` CR (the operator manages exactly one)."""
PCI_NUMA_AWARE_TOPOLOGY_GATE = "PCINUMAAwareTopology"
"""Places passthrough devices (GPUs, host devices, SR-IOV VFs) behind a ``pxb-pcie`` expander bus of the guest NUMA
cell matching their host NUMA node, with ``guestMappingPassthrough`` (VEP 115). Alpha at v1.9.0, so off unless
listed (``pkg/virt-config/featuregate/active.go`` line 113, registered line 313; ../shared/upstream/kubevirt/
feature-gates-v1.9.0.md). It groups by NUMA node, not by PCIe switch (kubevirt/kubevirt#19103)."""
HOST_DEVICES_GATE = "HostDevices"
"""Alpha gate for PCI and mediated host devices in VMs (``pkg/virt-config/featuregate/active.go`` at v1.9.0: constant
``HostDevicesGate`` line 27, registered Alpha line 299)."""
GPUS_WITH_DRA_GATE = "GPUsWithDRA"
"""Gate for VM GPUs from ResourceClaims (``gpus[].claimName``/``requestName``): "Alpha: v1.6.0, Beta: v1.9.0"
(``pkg/virt-config/featuregate/active.go`` at v1.9.0). Without it virt-api refuses such a VM ("contains DRA enabled
GPUs but feature gate is not enabled", ``pkg/dra/admitter/dra_admitter.go``)."""
CPU_MANAGER_GATE = "CPUManager"
"""Alpha gate that lets virt-handler label nodes ``cpumanager=true`` when the kubelet runs the static CPU
manager; VMs with ``dedicatedCpuPlacement`` are scheduled only onto such nodes (``pkg/virt-config/featuregate/
active.go`` at v1.9.0: constant ``CPUManager`` line 23, registered Alpha line 295; the labels are set in
``pkg/virt-handler/heartbeat/heartbeat.go``)."""
WAIT_FOR_AVAILABLE = {"pulumi.com/waitFor": "condition=Available"}
"""Annotation making Pulumi wait until the operator reports the CR Available (pulumi-kubernetes v4.18+)."""


@dataclass(frozen=True)
class KubeVirtArgs:
    """Inputs of :class:`KubeVirt`: only what it uses."""

    cluster: Cluster
    """The cluster to install into (its provider and readiness)."""
    node_pools: Mapping[str, NodePool] = field(default_factory=dict)
    """The cluster's node pools: the GPUs VMs may have (``vm-passthrough``, ``vm-vgpu``, ``dra`` pools), the pools
    whose kubelet runs the static CPU manager (``topology``), and the taints of the pools VMs run on. Defaults to none
    (CPU-only VMs)."""
    vgpu_driver_image: ImageSpec | None = None
    """The vGPU Manager image of the GPU Operator (``gpuOperator.vgpuDriverImage``): its driver branch tells mdev
    from SR-IOV vGPU pools (:func:`gpucell.spec.hardware.pool_vgpu_framework`); required with a ``vm-vgpu`` pool."""
    version: str = Versions().kubevirt
    """KubeVirt release (``versions.kubevirt``); defaults to gpucell's pin."""
    removal_policy: RemovalPolicy = RemovalPolicy.PROTECT
    """What removing the component may do to the operator manifest and the CR (deleting them deletes every VM):
    ``protect`` (default), ``retain`` or ``delete``."""
    common_instancetypes: bool = True
    """Whether virt-operator deploys KubeVirt's common instancetypes and preferences (``commonInstancetypesDeployment.
    enabled``; a cell's ``kubevirt.commonInstancetypes``). Defaults to true, KubeVirt's own default."""
    vm_state_storage_class: str | None = None
    """The StorageClass of VMs' persistent EFI NVRAM and TPM state (``vmStateStorageClass``; a cell's
    ``kubevirt.vmStateStorageClass``, else its default class). None: left out, KubeVirt picks (a class annotated
    ``storageclass.kubevirt.io/is-default-virt-class``, else the cluster's default)."""
    vm_persistent_state: bool = False
    """Some VM keeps persistent EFI or TPM state: on a KubeVirt older than v1.6 the ``VMPersistentState`` gate is
    listed (:data:`VM_PERSISTENT_STATE_GATE`). Defaults to false."""

    @classmethod
    def from_cell(cls, cell: CellSpec, cluster: Cluster) -> KubeVirtArgs:
        """KubeVirt of ``cell`` on ``cluster``: ``nodePools``, ``gpuOperator.vgpuDriverImage``, ``versions.kubevirt``,
        the region's ``removalPolicy``, ``kubevirt.commonInstancetypes``, the VM state class
        (:func:`gpucell.admission.vm_rules.state_storage_class`) and whether a VM keeps persistent EFI or TPM state."""
        return cls(
            cluster,
            cell.node_pools,
            cell.gpu_operator.vgpu_driver_image,
            cell.versions.kubevirt,
            cell.removal_policy,
            common_instancetypes=cell.kubevirt.common_instancetypes,
            vm_state_storage_class=state_storage_class(cell.vm_platform),
            vm_persistent_state=_needs_state_storage(cell),
        )


def _needs_state_storage(cell: CellSpec) -> bool:
    """True when a VM of the cell keeps persistent EFI NVRAM or TPM state (its own ``efi``/``tpm`` or its
    preference's)."""
    return any(
        resolve_vm(cell.kubevirt, cell.versions.kubevirt, tenant, vm).needs_state_storage
        for tenant in cell.tenants.values()
        for vm in tenant.virtual_machines.values()
    )


def release_tag(version: str) -> str:
    """The GitHub release tag of a pinned version: ``1.9.0`` and ``v1.9.0`` both give ``v1.9.0``."""
    return version if version.startswith("v") else f"v{version}"


def operator_manifest_url(version: str) -> str:
    """URL of the operator manifest of KubeVirt ``version`` (``versions.kubevirt``)."""
    tag = release_tag(version)
    return f"https://github.com/kubevirt/kubevirt/releases/download/{tag}/kubevirt-operator.yaml"


def permitted_vf_device(model: GpuModel, profile: str) -> dict[str, Any]:
    """The ``permittedHostDevices.pciHostDevices`` entry for the VFs of ``model`` typed as ``profile``:
    ``pciVendorSelector`` the VF's id, ``resourceName`` :meth:`~gpucell.catalog.gpu_catalog.GpuModel.vgpu_resource`, and
    no ``externalResourceProvider`` (virt-handler must advertise them itself).

    KubeVirt keys its PCI device plugins by ``vendor:device``, so every typed VF of that id on any node lands in this
    one resource; the spec allows one vGPU type per SR-IOV model per region for that reason. Raises ``ValueError``
    for a model whose VF id is not catalogued.
    """
    if model.vf_pci_selector is None:
        raise ValueError(f"{model.name}: the PCI id of its SR-IOV virtual functions is not catalogued")
    return {"pciVendorSelector": model.vf_pci_selector, "resourceName": model.vgpu_resource(profile)}


def permitted_host_devices(
    node_pools: Mapping[str, NodePool], vgpu_driver_image: ImageSpec | None = None
) -> dict[str, list[dict[str, Any]]]:
    """``spec.configuration.permittedHostDevices``: the devices VMs may have on ``node_pools``, in pool order, empty
    lists omitted (``vgpu_driver_image`` tells mdev from SR-IOV ``vm-vgpu`` pools).

    - ``pciHostDevices``, per model of the ``vm-passthrough`` pools: the GPU (``pciVendorSelector`` ``10DE:<device>``,
      ``resourceName`` the sandbox device plugin's ``nvidia.com/<PCI_NAME>``, ``externalResourceProvider: true``)
      and, for SXM models on HGX boards with a catalogued NVSwitch, the board's NVSwitch
      (``10DE:22A3`` -> ``nvidia.com/GH100_H100_NVSWITCH``, also advertised by the sandbox device plugin once the
      vfio-manager binds NVSwitches, :func:`gpucell.components.gpu_operator.gpu_operator_values`).
    - ``pciHostDevices`` per SR-IOV vGPU model (:func:`permitted_vf_device`): the VFs'
      ``vendor:device`` and ``nvidia.com/NVIDIA_<type>``, *without* ``externalResourceProvider``: KubeVirt's own
      device plugin advertises typed VFs (kubevirt/kubevirt#16890), the sandbox device plugin does not.
    - ``mediatedDevices`` per vGPU type of the mdev ``vm-vgpu`` pools (``mdevNameSelector`` the mdev type name
      ``NVIDIA T4-8Q``, ``resourceName`` ``nvidia.com/NVIDIA_T4-8Q``, ``externalResourceProvider: true``: the
      sandbox device plugin advertises them, and KubeVirt must not delete the mdevs).

    Entries are unique by ``resourceName`` and ``pciVendorSelector``: KubeVirt keys its PCI device plugins by the
    ``vendor:device`` id, so a second resource for the same id could only shadow the first; the first pool in
    ``cell.node_pools`` order wins (a configured pool before one :mod:`gpucell.day2.gpu_serving` keeps for hosts still
    on their deployed SR-IOV vGPU type).
    """
    pci: dict[str, dict[str, Any]] = {}
    selectors: set[str] = set()

    def permit(entry: dict[str, Any]) -> None:
        if entry["resourceName"] not in pci and entry["pciVendorSelector"] not in selectors:
            pci[entry["resourceName"]] = entry
            selectors.add(entry["pciVendorSelector"])

    for pool in gpu_pools(node_pools, GpuMode.VM_PASSTHROUGH).values():
        model = pool.model
        functions = [(model.pci_selector, model.passthrough_resource)]
        if model.hgx is not None and model.hgx.nvswitch is not None:
            functions.append((model.hgx.nvswitch.pci_selector, model.hgx.nvswitch.passthrough_resource))
        for selector, resource in functions:
            permit({"pciVendorSelector": selector, "resourceName": resource, "externalResourceProvider": True})
    for pool in vgpu_pools(node_pools, vgpu_driver_image, VgpuFramework.SRIOV).values():
        assert pool.vgpu_profile is not None  # the spec requires a vGPU profile on vm-vgpu pools
        permit(permitted_vf_device(pool.model, pool.vgpu_profile))
    mdev: dict[str, dict[str, Any]] = {}
    for pool in vgpu_pools(node_pools, vgpu_driver_image, VgpuFramework.MDEV).values():
        model, profile = pool.model, pool.vgpu_profile
        assert profile is not None  # the spec requires a vGPU profile on vm-vgpu pools
        mdev.setdefault(
            model.vgpu_resource(profile),
            {
                "mdevNameSelector": model.vgpu_type_name(profile),
                "resourceName": model.vgpu_resource(profile),
                "externalResourceProvider": True,
            },
        )
    devices: dict[str, list[dict[str, Any]]] = {}
    if pci:
        devices["pciHostDevices"] = list(pci.values())
    if mdev:
        devices["mediatedDevices"] = list(mdev.values())
    return devices


def feature_gates(
    node_pools: Mapping[str, NodePool], *, version: str = Versions().kubevirt, vm_persistent_state: bool = False
) -> list[str]:
    """``developerConfiguration.featureGates`` for KubeVirt ``version`` (v1.9 by default) on ``node_pools``, in a
    stable order.

    - ``HostDevices`` when any pool hands GPUs to VMs (``vm-passthrough`` or ``vm-vgpu``).
    - ``GPUsWithDRA`` when any pool has ``gpuMode: dra``. It is Beta, so on by default in v1.9.0; it is listed
      anyway because the cell's DRA VMs depend on it: the CR then says what the cell uses, and a cluster-wide
      ``disabledFeatureGates`` or a KubeVirt whose default differs cannot turn it off unnoticed.
      ``HostDevicesWithDRA`` is not set: gpucell renders DRA GPUs as ``gpus``, never as ``hostDevices``.
    - ``CPUManager`` when any pool has a ``topology`` profile: those nodes run the kubelet's static CPU
      manager for VMs with dedicated CPUs, and only the gate makes virt-handler label them
      ``cpumanager=true``.
    - ``PCINUMAAwareTopology`` (:data:`PCI_NUMA_AWARE_TOPOLOGY_GATE`) when any pool declares a ``fabric``: a guest
      with ``guestMappingPassthrough`` then sees each GPU and NIC on its host NUMA node (docs/decisions/0039).
    - ``VMPersistentState`` when a VM keeps persistent EFI or TPM state (``vm_persistent_state``) on a KubeVirt older
      than v1.6 (:data:`VM_PERSISTENT_STATE_GATE`; GA, so not listed, from v1.6 on).

    Not set: ``GPU`` and ``NUMA`` (GA, deprecated gates), ``DisableMDEVConfiguration`` (deprecated; see
    :func:`kubevirt_spec`).
    """
    gates: list[str] = []
    if gpu_pools(node_pools, GpuMode.VM_PASSTHROUGH, GpuMode.VM_VGPU):
        gates.append(HOST_DEVICES_GATE)
    if gpu_pools(node_pools, GpuMode.DRA):
        gates.append(GPUS_WITH_DRA_GATE)
    if any(pool.topology is not None for pool in node_pools.values()):
        gates.append(CPU_MANAGER_GATE)
    if any(pool.fabric is not None for pool in node_pools.values()):
        gates.append(PCI_NUMA_AWARE_TOPOLOGY_GATE)
    if vm_persistent_state and release(version) < VM_PERSISTENT_STATE_GA_SINCE:
        gates.append(VM_PERSISTENT_STATE_GATE)
    return gates


SECCOMP_CONFIGURATION = {"virtualMachineInstanceProfile": {"customProfile": {"runtimeDefaultProfile": True}}}
"""``configuration.seccompConfiguration``: every virt-launcher pod gets pod-level ``seccompProfile:
RuntimeDefault`` (v1.9.0 ``pkg/virt-controller/services/template.go``), which Pod Security ``restricted``
requires; without it the launcher has no profile ("Defaults to none"). ``RuntimeDefault`` rather than KubeVirt's
own ``localhostProfile: kubevirt/kubevirt.json``: the runtime's profile needs no file on the node (virt-handler
writes KubeVirt's), and what KubeVirt's adds, ``userfaultfd``, serves only post-copy live migration, which gpucell
does not enable."""


CPU_ALLOCATION_RATIO = 1
"""``developerConfiguration.cpuAllocationRatio``: a VM that gives no CPU request of its own (one sized by an
instancetype, which may not) requests one host CPU per vCPU, as gpucell's other VMs do and as admission, quotas and
the capacity view count it. KubeVirt's default, 10, would request a tenth of a CPU per vCPU
(``WithoutDedicatedCPU`` in ``pkg/virt-controller/services/renderresources.go`` at v1.9.0; v1.DeveloperConfiguration
``cpuAllocationRatio``: "Defaults to 10"), packing ten times the vCPUs onto a node that admission believes full."""

VM_PERSISTENT_STATE_GATE = "VMPersistentState"
"""Gate for persistent EFI NVRAM and TPM state (backend storage): "Alpha" until v1.5, GA from v1.6.0 on
(``RegisterFeatureGate(... VMPersistentState, State: GA)``, ``pkg/virt-config/featuregate/inactive.go``), when
listing it only draws the "deprecated ... redundant" warning."""
VM_PERSISTENT_STATE_GA_SINCE = (1, 6)


def vm_platform_configuration(
    common_instancetypes: bool = True, vm_state_storage_class: str | None = None
) -> dict[str, Any]:
    """The ``configuration`` keys of the VM platform (instancetypes, firmware state), explicit so that nothing out of
    band can change what the cell's VMs rely on:

    - ``commonInstancetypesDeployment.enabled``: ``common_instancetypes`` (KubeVirt's default is true; gpucell admits
      VMs naming common ones only when it is, :mod:`gpucell.catalog.common_instancetypes`);
    - ``vmStateStorageClass``: where persistent EFI NVRAM and TPM state live (on a cell
      :func:`gpucell.admission.vm_rules.state_storage_class`: ``kubevirt.vmStateStorageClass``, else the cell's default
      class), left out when None. Without it KubeVirt takes a class annotated
      ``storageclass.kubevirt.io/is-default-virt-class`` first, which gpucell does not manage.
    """
    configuration: dict[str, Any] = {"commonInstancetypesDeployment": {"enabled": common_instancetypes}}
    if vm_state_storage_class is not None:
        configuration["vmStateStorageClass"] = vm_state_storage_class
    return configuration


def kubevirt_spec(
    node_pools: Mapping[str, NodePool],
    vgpu_driver_image: ImageSpec | None = None,
    *,
    version: str = Versions().kubevirt,
    common_instancetypes: bool = True,
    vm_state_storage_class: str | None = None,
    vm_persistent_state: bool = False,
) -> dict[str, Any]:
    """The ``spec`` of the ``KubeVirt`` CR for ``node_pools``; empty sections are omitted. The keyword arguments are
    :class:`KubeVirtArgs`' fields of the same names.

    ``configuration.seccompConfiguration`` (:data:`SECCOMP_CONFIGURATION`, always: tenant namespaces enforce
    ``restricted``), ``configuration.developerConfiguration.featureGates`` (:func:`feature_gates`) and
    ``cpuAllocationRatio`` (:data:`CPU_ALLOCATION_RATIO`, always), the VM platform's keys
    (:func:`vm_platform_configuration`),
    ``configuration.permittedHostDevices`` (:func:`permitted_host_devices`) and, when an mdev ``vm-vgpu`` pool
    exists, ``configuration.mediatedDevicesConfiguration.enabled: false``: the GPU Operator's vGPU device
    manager creates the mdevs on those nodes, so virt-handler must neither create nor remove any.

    ``workloads.nodePlacement.tolerations``: the taints of the pools VMs run on
    (:func:`gpucell.components.platform_tolerations.vm_pool_tolerations`), so virt-handler (a DaemonSet placed by
    ``spec.workloads``, ``pkg/virt-operator/resource/apply/apps.go`` at v1.9.0; "additional tolerations other than
    default ones", ``v1.NodePlacement`` in the swagger) runs on tainted VM nodes.

    Left at KubeVirt's defaults on purpose: ``workloadUpdateStrategy`` (no automatic VM updates on a KubeVirt
    upgrade; GPU VMs cannot live-migrate, so the only other method, ``Evict``, would stop tenants' VMs) and
    ``imagePullPolicy`` (``IfNotPresent`` for the release's pinned images).
    """
    configuration: dict[str, Any] = {"seccompConfiguration": copy.deepcopy(SECCOMP_CONFIGURATION)}
    gates = feature_gates(node_pools, version=version, vm_persistent_state=vm_persistent_state)
    developer: dict[str, Any] = {"featureGates": gates} if gates else {}
    configuration["developerConfiguration"] = {**developer, "cpuAllocationRatio": CPU_ALLOCATION_RATIO}
    devices = permitted_host_devices(node_pools, vgpu_driver_image)
    if devices:
        configuration["permittedHostDevices"] = devices
    if vgpu_pools(node_pools, vgpu_driver_image, VgpuFramework.MDEV):
        configuration["mediatedDevicesConfiguration"] = {"enabled": False}
    configuration.update(vm_platform_configuration(common_instancetypes, vm_state_storage_class))
    spec: dict[str, Any] = {"configuration": configuration}
    tolerations = vm_pool_tolerations(node_pools)
    if tolerations:
        spec["workloads"] = {"nodePlacement": {"tolerations": tolerations}}
    return spec


class KubeVirt(CellComponent):
    """KubeVirt for one cluster. Depend on :attr:`cr` (or this component) to run after KubeVirt is Available.

    Children: ``f"{name}-operator"`` (``kubernetes:yaml/v2:ConfigFile`` of the release's operator manifest)
    and ``f"{name}-kubevirt"`` (the ``kubevirt.io/v1`` ``KubeVirt`` CR ``kubevirt`` in namespace ``kubevirt``,
    depending on the operator and annotated ``pulumi.com/waitFor: condition=Available``), on the provider of
    ``args.cluster`` and after its ``ready``. Both take ``args.removal_policy`` (``protect`` by default); Pulumi
    children inherit ``protect`` from their parent, which covers the manifest's objects (the CRDs among them).
    """

    namespace: pulumi.Output[str]
    """Namespace of KubeVirt (``kubevirt``); resolves once the ``KubeVirt`` CR is registered."""

    def __init__(self, name: str, args: KubeVirtArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("KubeVirt", name, opts, args.cluster)
        # Deleting the operator manifest deletes KubeVirt's CRDs, and with them every VM; deleting the CR
        # uninstalls KubeVirt. Both take the removal policy (the manifest's objects inherit it).
        lifecycle = removal_options(args.removal_policy)
        self.operator = ConfigFile(
            f"{name}-operator", file=operator_manifest_url(args.version), opts=self.child(**lifecycle)
        )
        self.cr = CustomResource(
            f"{name}-kubevirt",
            api_version="kubevirt.io/v1",
            kind="KubeVirt",
            metadata={"name": CR_NAME, "namespace": NAMESPACE, "annotations": dict(WAIT_FOR_AVAILABLE)},
            spec=kubevirt_spec(
                args.node_pools,
                args.vgpu_driver_image,
                version=args.version,
                common_instancetypes=args.common_instancetypes,
                vm_state_storage_class=args.vm_state_storage_class,
                vm_persistent_state=args.vm_persistent_state,
            ),
            opts=self.child(depends_on=[self.operator], **lifecycle),
        )
        self.namespace = self.cr.urn.apply(lambda _: NAMESPACE)
        self.register_outputs({"namespace": self.namespace})
