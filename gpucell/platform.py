"""The platform components on a cluster that tenants and their workloads wait for (decision 0019).

A tenant sits on a :class:`~gpucell.cluster.Cluster` (where), :class:`~gpucell.admission.tenants.ClusterFacts` (what the
plan knows of it) and a :class:`Platform` (what is installed there, so its objects are created after it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pulumi

    from gpucell.components.backups import Backups
    from gpucell.components.cdi import Cdi
    from gpucell.components.cilium import Cilium
    from gpucell.components.dra_driver import DraDriver
    from gpucell.components.gpu_operator import GpuOperator
    from gpucell.components.images import ImageCatalog
    from gpucell.components.keda import Keda
    from gpucell.components.kserve import KServe
    from gpucell.components.kubevirt import KubeVirt
    from gpucell.components.metrics import Metrics
    from gpucell.components.network_operator import NetworkOperator
    from gpucell.components.priority_classes import PriorityClasses

__all__ = ["Platform"]


@dataclass(frozen=True)
class Platform:
    """The platform components on a cluster that tenants and their workloads wait for; each is optional (``None``:
    not installed by this program, e.g. installed outside gpucell, so nothing waits for it).

    - a tenant's namespace waits for :attr:`kubevirt`'s ``KubeVirt`` CR (whose seccomp profile lets VM launchers
      pass Pod Security ``restricted``), its ``CiliumNetworkPolicy`` objects for :attr:`cilium` (their CRD) and
      :attr:`cluster_deny` (so that nothing of the tenant runs before the cluster-wide deny rules exist);
    - a VM waits for the ``KubeVirt`` CR, :attr:`cdi`'s ``CDI`` CR and StorageProfile patch, and for the
      :attr:`image_catalogs` its disks clone from (their clone RBAC);
    - a GPU workload for :attr:`gpu_operator`'s Release (device plugins, the ``nvidia`` RuntimeClass), or with DRA
      GPUs :attr:`dra_driver`'s (DeviceClasses, kubelet plugin);
    - a model endpoint for :attr:`kserve`'s runtimes Release, with a ``vllm-*`` scale metric for :attr:`keda`'s
      Release; with :attr:`metrics`, its pods admit the metrics stack's Prometheus;
    - a VM with ``rdmaNics`` for :attr:`network_operator`'s tenant networks (its NetworkAttachmentDefinitions);
    - a tenant's ``tenant-priority-classes`` quota for :attr:`priority_classes` (the classes it names);
    - a tenant's ``backup`` is the ``Schedule`` :attr:`backups` renders for it (``BackupsArgs.tenants``): a tenant
      with ``backup`` that no such component schedules is refused, never left without its backups.

    :attr:`gpucell.cell.RegionalCell.platform` is a cell's; on a cluster gpucell did not build, name the components
    this program installs there: ``Platform(kubevirt=kubevirt, cdi=cdi, gpu_operator=gpu_operator)``.
    """

    cilium: Cilium | None = None
    """Cilium, whose release installs the ``CiliumNetworkPolicy`` CRD."""
    cluster_deny: pulumi.Resource | None = None
    """The cluster-wide deny rules fencing tenants in (:class:`gpucell.components.cluster_deny.ClusterDeny`; typed as
    any resource so that this module names no component that imports the tenancy layer)."""
    kubevirt: KubeVirt | None = None
    """KubeVirt (its ``KubeVirt`` CR, Available)."""
    cdi: Cdi | None = None
    """CDI (its ``CDI`` CR, Available, and the StorageProfile patch)."""
    gpu_operator: GpuOperator | None = None
    """The NVIDIA GPU Operator."""
    dra_driver: DraDriver | None = None
    """The NVIDIA DRA driver."""
    kserve: KServe | None = None
    """KServe."""
    keda: Keda | None = None
    """KEDA, for endpoints scaled on a vLLM metric."""
    metrics: Metrics | None = None
    """The metrics stack (kube-prometheus-stack)."""
    image_catalogs: Mapping[str, ImageCatalog] = field(default_factory=dict)
    """The image catalogs, by namespace (:class:`gpucell.components.images.ImageCatalog`). Defaults to none."""
    priority_classes: PriorityClasses | None = None
    """The cell's PriorityClasses (``priorityClasses``)."""
    backups: Backups | None = None
    """Velero (:class:`gpucell.components.backups.Backups`), which renders the ``Schedule`` of each tenant with
    ``backup``."""
    network_operator: NetworkOperator | None = None
    """The NVIDIA Network Operator with the tenants' fabric networks, with a ``fabric`` pool: a VM with ``rdmaNics``
    waits for its ``SriovNetwork`` objects (decision 0039)."""
