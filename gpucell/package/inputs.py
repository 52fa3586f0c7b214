"""The inputs of the component package's components, as spec models: one per component, validated whole.

What a TypeScript, Go or C# program passes to :mod:`gpucell.package.component_package` arrives as plain dicts; each
component validates them with its model here, so a mistake is one :class:`~gpucell.errors.ConfigError` line per
problem with its key path (``nodePools.h100.gpuMode: 'passthrough' is not one of ...``), as in stack config. The
``TypedDict`` classes the package schema is inferred from are generated from these models
(:mod:`tools.package_types`). Inputs that may be Pulumi outputs (secrets, a StorageClass name) are not
validated: a model names them in ``PASSED_THROUGH`` (:class:`PassedThrough`), the generator adds them to its
``TypedDict`` as ``pulumi.Input[str]`` with their docs, and the package's schema marks the secret ones ``secret``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import field_validator

from gpucell.admission.tenants import ClusterFacts
from gpucell.cluster import CONTAINERD_CONFIG, CONTAINERD_SOCKET, ContainerRuntime, check_kubernetes_minor
from gpucell.components.dra_driver import OPERATOR_DRIVER_ROOT
from gpucell.errors import SpecError, shown
from gpucell.spec import (
    CdiSpec,
    CellSpec,
    ChartSpec,
    DraDriverSpec,
    GpuOperatorSpec,
    GpuVirtualMachineSpec,
    ImageSpec,
    KServeSpec,
    ModelEndpointSpec,
    NodePool,
    NotebookSpec,
    StorageSpec,
    TenantSpec,
    Versions,
)
from gpucell.spec._base import SpecModel
from gpucell.spec.lifecycle import RemovalPolicy
from gpucell.spec.workloads import AccessMode, VolumeMode

__all__ = [
    "CdiInputs",
    "CertManagerInputs",
    "ClusterInputs",
    "ComponentInputs",
    "ContainerdInputs",
    "DraDriverInputs",
    "GpuOperatorInputs",
    "GpuVirtualMachineInputs",
    "KServeInputs",
    "KedaInputs",
    "KubeVirtInputs",
    "ModelEndpointInputs",
    "NotebookInputs",
    "PassedThrough",
    "RegionalCellInputs",
    "StorageInputs",
    "TenantInputs",
]

_PINS = Versions()


@dataclass(frozen=True)
class PassedThrough:
    """An input of a component that may be a Pulumi output (a secret, a StorageClass name from another resource):
    typed ``pulumi.Input[str]`` in the package (``Mapping[str, pulumi.Input[str]]`` when ``mapping``), used as
    given, never validated by the input model."""

    key: str
    """The schema's camelCase key (``sshPrivateKey``)."""
    doc: str
    """Its description in the schema."""
    required: bool = False
    """The component cannot be built without it."""
    secret: bool = False
    """A secret: the schema marks it ``secret`` (the SDKs wrap it as one), and the component makes it one."""
    mapping: bool = False
    """A map of such strings by key (``envSecrets``: one value per config key), not one string."""

    @property
    def annotation(self) -> str:
        """Its type in the generated ``TypedDict``."""
        return "Mapping[str, pulumi.Input[str]]" if self.mapping else "pulumi.Input[str]"


class ComponentInputs(SpecModel):
    """The inputs of one component of the package: validated whole, but for its ``PASSED_THROUGH`` inputs."""

    PASSED_THROUGH: ClassVar[tuple[PassedThrough, ...]] = ()
    """The inputs used as given (:class:`PassedThrough`). Defaults to none."""


class ContainerdInputs(SpecModel):
    """Host paths of the nodes' containerd (:class:`gpucell.cluster.ContainerRuntime`); default: containerd's own."""

    config: str = CONTAINERD_CONFIG
    """The file the GPU Operator's toolkit writes its ``nvidia`` runtime into. Defaults to
    ``/etc/containerd/config.toml``; on k3s, ``/var/lib/rancher/k3s/agent/etc/containerd/config-v3.toml.tmpl``."""
    socket: str = CONTAINERD_SOCKET
    """containerd's socket. Defaults to ``/run/containerd/containerd.sock``; on k3s and RKE2,
    ``/run/k3s/containerd/containerd.sock``."""
    config_source: str | None = None
    """``file=<path>`` the current config is read from; none: ``containerd config dump`` (which needs a
    ``containerd`` binary on the host). On k3s, ``file=/var/lib/rancher/k3s/agent/etc/containerd/config.toml``."""

    def runtime(self) -> ContainerRuntime:
        """These paths as a :class:`~gpucell.cluster.ContainerRuntime`."""
        return ContainerRuntime(self.config, self.socket, self.config_source)


class ClusterInputs(SpecModel):
    """The cluster a component deploys onto. Its provider is the ``kubernetes`` provider of the component's resource
    options (``providers``); gpucell never falls back to an ambient kubeconfig."""

    kubernetes_version: str
    """``MAJOR.MINOR`` of the cluster's API server (``1.33``): pins the tenant namespaces' Pod Security version."""
    containerd: ContainerdInputs = ContainerdInputs()
    """Where the nodes' containerd keeps its config and socket. Defaults to containerd's own paths."""

    _minor = field_validator("kubernetes_version")(check_kubernetes_minor)


class GpuOperatorInputs(ComponentInputs):
    """Inputs of the NVIDIA GPU Operator (:class:`gpucell.components.gpu_operator.GpuOperatorArgs`)."""

    cluster: ClusterInputs
    """The cluster to install into: its containerd paths reach the container toolkit."""
    spec: GpuOperatorSpec = GpuOperatorSpec()
    """MIG strategy, vGPU Manager image, DCGM exporter, chart ``values``."""
    node_pools: dict[str, NodePool] = {}
    """The cluster's node pools: the GPU pools decide which operands run; their taints are tolerated."""
    version: str = _PINS.gpu_operator
    """Chart version; defaults to gpucell's pin."""
    metrics: bool = False
    """The cluster runs gpucell's metrics stack (DCGM exporter fields, ServiceMonitors). Defaults to false."""


class KubeVirtInputs(ComponentInputs):
    """Inputs of KubeVirt (:class:`gpucell.components.kubevirt.KubeVirtArgs`)."""

    cluster: ClusterInputs
    """The cluster to install into."""
    node_pools: dict[str, NodePool] = {}
    """The cluster's node pools: the GPUs VMs may have, the CPU manager gate, the taints virt-handler tolerates."""
    vgpu_driver_image: ImageSpec | None = None
    """The GPU Operator's vGPU Manager image (tells mdev from SR-IOV vGPU pools); required with a ``vm-vgpu`` pool."""
    version: str = _PINS.kubevirt
    """KubeVirt release; defaults to gpucell's pin."""
    removal_policy: RemovalPolicy = RemovalPolicy.PROTECT
    """What removing it may do (deleting KubeVirt deletes every VM): ``protect`` (default), ``retain``, ``delete``."""
    common_instancetypes: bool = True
    """Whether virt-operator deploys KubeVirt's common instancetypes and preferences. Defaults to true."""
    vm_state_storage_class: str | None = None
    """The StorageClass of VMs' persistent EFI and TPM state (``vmStateStorageClass``); none: KubeVirt picks."""
    vm_persistent_state: bool = False
    """Some VM keeps persistent EFI or TPM state (lists ``VMPersistentState`` on a KubeVirt older than v1.6)."""


class CdiInputs(ComponentInputs):
    """Inputs of CDI (:class:`gpucell.components.cdi.CdiArgs`)."""

    PASSED_THROUGH: ClassVar[tuple[PassedThrough, ...]] = (
        PassedThrough(
            "storageClass",
            "The StorageClass VM disks live in (the cluster's default): CDI's scratch space, and the StorageProfile "
            "patched with ``volumeMode`` and ``accessModes``.",
            required=True,
        ),
    )

    cluster: ClusterInputs
    """The cluster to install into."""
    volume_mode: VolumeMode = VolumeMode.FILESYSTEM
    """``volumeMode`` of a VM disk's PVC in the StorageClass: ``Filesystem`` (default) or ``Block``."""
    access_modes: list[str] = [AccessMode.RWO.value]
    """``accessModes`` of a VM disk's PVC (``ReadWriteOnce``, ``ReadWriteMany``, ``ReadWriteOncePod``). Defaults to
    ``ReadWriteOnce``."""
    spec: CdiSpec = CdiSpec()
    """The ``cdi`` settings (``uploadProxyUrl``)."""
    node_pools: dict[str, NodePool] = {}
    """The cluster's node pools: CDI's importer pods tolerate the taints of the pools VMs run on."""
    version: str = _PINS.cdi
    """CDI release; defaults to gpucell's pin."""
    removal_policy: RemovalPolicy = RemovalPolicy.PROTECT
    """What removing it may do (deleting CDI deletes every DataVolume): ``protect`` (default), ``retain``,
    ``delete``."""

    @field_validator("access_modes")
    @classmethod
    def _access_modes(cls, values: list[str]) -> list[str]:
        # strings, not AccessMode: the SDK's ComponentProvider maps the items of a list of enums as objects
        # (tools/package_types.py refuses such a field)
        known = [mode.value for mode in AccessMode]
        for index, value in enumerate(values):
            if value not in known:
                raise SpecError((index,), f"{shown(value)} is not one of {', '.join(known)}")
        return values


class DraDriverInputs(ComponentInputs):
    """Inputs of the NVIDIA DRA driver (:class:`gpucell.components.dra_driver.DraDriverArgs`)."""

    cluster: ClusterInputs
    """The cluster to install into."""
    spec: DraDriverSpec = DraDriverSpec()
    """Chart ``values``."""
    node_pools: dict[str, NodePool] = {}
    """The cluster's node pools: the kubelet plugin tolerates the ``dra`` pools' taints."""
    version: str = _PINS.dra_driver
    """Chart version; defaults to gpucell's pin."""
    driver_root: str = OPERATOR_DRIVER_ROOT
    """Host path of the NVIDIA driver: the GPU Operator's (``/run/nvidia/driver``, default) or ``/``."""


class CertManagerInputs(ComponentInputs):
    """Inputs of cert-manager (:class:`gpucell.components.cert_manager.CertManagerArgs`)."""

    cluster: ClusterInputs
    """The cluster to install into."""
    spec: ChartSpec = ChartSpec()
    """Chart ``values``."""
    version: str = _PINS.cert_manager
    """Chart version; defaults to gpucell's pin."""
    gateway_api: bool = False
    """Solve ACME HTTP-01 challenges with Gateway API HTTPRoutes. Defaults to false."""


class KServeInputs(ComponentInputs):
    """Inputs of KServe (:class:`gpucell.components.kserve.KServeArgs`); give it ``dependsOn`` cert-manager."""

    cluster: ClusterInputs
    """The cluster to install into."""
    spec: KServeSpec = KServeSpec()
    """Default ``deploymentMode`` and chart ``values``."""
    version: str = _PINS.kserve
    """KServe release; defaults to gpucell's pin."""


class StorageInputs(ComponentInputs):
    """Inputs of the storage layer (:class:`gpucell.components.storage.StorageArgs`): Longhorn (``local-path`` is
    k3s's)."""

    cluster: ClusterInputs
    """The cluster to install into."""
    spec: StorageSpec = StorageSpec()
    """Backend, Longhorn replicas and chart ``values``."""
    node_pools: dict[str, NodePool] = {}
    """The cluster's node pools: Longhorn tolerates every gpu and cpu pool's taints."""
    version: str = _PINS.longhorn
    """Longhorn chart version; defaults to gpucell's pin."""
    removal_policy: RemovalPolicy = RemovalPolicy.PROTECT
    """What removing it may do (uninstalling Longhorn deletes every volume): ``protect`` (default), ``retain``,
    ``delete``."""


class KedaInputs(ComponentInputs):
    """Inputs of KEDA (:class:`gpucell.components.keda.KedaArgs`)."""

    cluster: ClusterInputs
    """The cluster to install into."""
    version: str = _PINS.keda
    """Chart version; defaults to gpucell's pin."""
    values: dict[str, Any] = {}
    """Chart values."""


class TenantInputs(ComponentInputs):
    """Inputs of a tenant (:class:`gpucell.tenancy.tenant.TenantArgs`); give it ``dependsOn`` KubeVirt (and Cilium when
    this program installs it)."""

    cluster: ClusterInputs
    """The cluster the tenant lives on."""
    name: str
    """Tenant key (``acme``): the namespace is ``tenant-<name>``."""
    spec: TenantSpec
    """The tenant: quota, limits, groups, egress, removal policy (and the workloads it declares, admitted with it)."""
    facts: ClusterFacts
    """What the tenant is admitted against and rendered from: the cluster's GPU pools, networks, other tenants..."""


class _WorkloadInputs(ComponentInputs):
    cluster: ClusterInputs
    """The cluster the workload's tenant lives on."""
    tenant: str
    """Its tenant's key (``acme``); the tenant's namespace must exist (give the workload ``dependsOn`` it)."""
    name: str
    """The workload name (DNS-1123 label, unique in the tenant)."""
    facts: ClusterFacts
    """The cluster's facts, the tenant among their ``tenants``: the workload is admitted with its tenant."""
    tenant_removal_policy: RemovalPolicy = RemovalPolicy.PROTECT
    """The tenant's ``removalPolicy``, the workload's default. Defaults to ``protect``."""


class GpuVirtualMachineInputs(_WorkloadInputs):
    """Inputs of a tenant's VM (:class:`gpucell.workloads.virtual_machine.GpuVirtualMachineArgs`)."""

    spec: GpuVirtualMachineSpec
    """What the tenant declared."""


class NotebookInputs(_WorkloadInputs):
    """Inputs of a tenant's notebook (:class:`gpucell.workloads.notebook.NotebookArgs`)."""

    spec: NotebookSpec
    """What the tenant declared."""


class ModelEndpointInputs(_WorkloadInputs):
    """Inputs of a tenant's model endpoint (:class:`gpucell.workloads.model_endpoint.ModelEndpointArgs`)."""

    PASSED_THROUGH: ClassVar[tuple[PassedThrough, ...]] = (
        PassedThrough(
            "credentials",
            "The secret ``spec.credentialsConfigKey`` stands for: a Hugging Face token for ``hf://``, or "
            "``<AWS_ACCESS_KEY_ID>:<AWS_SECRET_ACCESS_KEY>`` for ``s3://``.",
            secret=True,
        ),
        PassedThrough(
            "envSecrets",
            "The values of ``spec.env`` entries with ``secretConfigKey``, by that key; one for each such entry.",
            secret=True,
            mapping=True,
        ),
    )

    spec: ModelEndpointSpec
    """What the tenant declared."""


class RegionalCellInputs(ComponentInputs):
    """Inputs of a whole cell (:class:`gpucell.cell.RegionalCellArgs`)."""

    PASSED_THROUGH: ClassVar[tuple[PassedThrough, ...]] = (
        PassedThrough("sshPrivateKey", "SSH private key for every node of the region.", required=True, secret=True),
        PassedThrough(
            "etcdS3Credentials",
            "``<access key id>:<secret access key>`` for ``etcd.snapshots.s3``; required with it.",
            secret=True,
        ),
        PassedThrough(
            "remoteWriteCredentials",
            "``<user>:<password>`` for ``metrics.remoteWrite``; required with it.",
            secret=True,
        ),
        PassedThrough(
            "backupCredentials",
            "``<access key id>:<secret access key>`` of ``backups.storage``'s bucket; required with ``backups``.",
            secret=True,
        ),
        PassedThrough(
            "backupRepositoryPassword",
            "The password encrypting the backed-up volumes (``backups.repositoryPasswordConfigKey``); required with "
            "``backups``.",
            secret=True,
        ),
    )

    cell: CellSpec
    """The region, as ``gpucell:regions.<region>`` in a stack file."""
