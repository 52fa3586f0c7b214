"""RegionalCell: one region's whole stack, from bare machines to KServe, with every ordering edge explicit."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from ipaddress import IPv4Network
from typing import Any

import pulumi
from pulumi_kubernetes.provider import Provider

from gpucell._component import CellComponent, resolved_or_failed, resources_later
from gpucell.admission.tenants import ClusterFacts
from gpucell.cluster import Cluster
from gpucell.components.backups import BackupCredentials, Backups, BackupsArgs
from gpucell.components.cdi import Cdi, CdiArgs
from gpucell.components.cert_manager import CertManager, CertManagerArgs
from gpucell.components.cilium import Cilium, CiliumArgs
from gpucell.components.cluster_api import ClusterApi, ClusterApiArgs
from gpucell.components.cluster_deny import ClusterDeny, ClusterDenyArgs
from gpucell.components.csi_snapshots import CsiSnapshots, CsiSnapshotsArgs
from gpucell.components.dra_driver import DraDriver, DraDriverArgs
from gpucell.components.gateway import EndpointGateway, EndpointGatewayArgs, exposed_endpoints
from gpucell.components.gateway_api import GatewayApiCrds, GatewayApiCrdsArgs
from gpucell.components.gpu_operator import GpuOperator, GpuOperatorArgs
from gpucell.components.images import ImageCatalog, ImageCatalogArgs
from gpucell.components.instancetypes import Instancetypes, InstancetypesArgs
from gpucell.components.keda import Keda, KedaArgs
from gpucell.components.kserve import KServe, KServeArgs
from gpucell.components.kubevirt import KubeVirt, KubeVirtArgs
from gpucell.components.lb_ipam import LoadBalancerAddresses, LoadBalancerAddressesArgs
from gpucell.components.metrics import Metrics, MetricsArgs
from gpucell.components.priority_classes import PriorityClasses, PriorityClassesArgs
from gpucell.components.storage import Storage, StorageArgs
from gpucell.day2.gpu_serving import GpuServing, gpu_serving, node_records
from gpucell.k3s.cluster import K3sCluster, K3sClusterArgs
from gpucell.platform import Platform
from gpucell.spec import CellSpec, GpuMode

__all__ = ["RegionalCell", "RegionalCellArgs", "cluster_identifier"]


def cluster_identifier(region: str) -> str:
    """The ``clusterIdentifier`` of a region's Kubernetes provider: ``gpucell-<region>``.

    pulumi-kubernetes (since 4.16.0, pulumi/pulumi-kubernetes#3068) replaces a provider - and so every resource it
    manages - only when this value changes; with it set and unchanged, a changed or unknown kubeconfig is an update
    (``DiffConfig`` in ``provider/pkg/provider/provider.go``). It names the region, never a connection detail, so
    it stays the same for the cell's whole life.
    """
    return f"gpucell-{region}"


@dataclass(frozen=True)
class RegionalCellArgs:
    """Spec and secrets of one region: the one ``*Args`` that takes a whole :class:`~gpucell.spec.cell.CellSpec`
    (each component the cell builds takes its own part, through its ``*Args.from_cell``)."""

    cell: CellSpec
    """The region, validated: ``gpucell:regions.<region>`` in a stack file."""
    ssh_private_key: pulumi.Input[str]
    """SSH private key for every node of the region (a Pulumi secret)."""
    etcd_s3_credentials: pulumi.Input[str] | None = None
    """``<access key id>:<secret access key>`` for ``etcd.snapshots.s3`` (a Pulumi secret); required with it."""
    registered_hosts: frozenset[str] | None = None
    """Hosts of the last deployment (:attr:`gpucell.k3s.cluster.K3sClusterArgs.registered_hosts`): the others join in
    waves. ``None``, the default, takes every host as registered."""
    remote_write_credentials: pulumi.Input[str] | None = None
    """``<user>:<password>`` for ``metrics.remoteWrite`` (a Pulumi secret); required with it."""
    backup_credentials: BackupCredentials | None = None
    """The bucket credentials and repository password of ``backups`` (Pulumi secrets); required with it."""
    control_server: str | None = None
    """The server the nodes' maintenance steps run on (:attr:`gpucell.k3s.cluster.K3sClusterArgs.control_server`).
    Defaults to the first server not ``removalPolicy: forget``."""
    deployed_gpu_nodes: Mapping[str, Mapping[str, Any]] | None = None
    """The hosts' GPU configurations at the last completed deployment (:func:`gpucell.day2.gpu_serving.node_records`,
    read back from the stack output ``<region>GpuNodes``): what the cell-wide GPU pieces keep serving while hosts change
    theirs. ``None``, the default, a region never deployed: nothing is kept."""
    image_credentials: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    """Config key -> ``<user>:<password>`` (a Pulumi secret) of every ``imageCatalogs`` image's
    ``credentialsConfigKey``; required for each."""
    other_cells: Sequence[IPv4Network] = ()
    """Networks of the stack's other cells, which this cell's tenants never reach
    (:func:`gpucell.components.cluster_deny.other_cells`). Defaults to none."""


def _check_secrets(args: RegionalCellArgs) -> None:
    """Raise ``ValueError``, before anything is registered, when a section needs a secret ``args`` lacks."""
    if args.cell.backups is not None and args.backup_credentials is None:
        raise ValueError("backups is set but no backup credentials were passed")


class RegionalCell(CellComponent):
    """One independent regional cell: k3s over SSH, then Cilium, storage, KubeVirt, CDI, GPU Operator (and the
    NVIDIA DRA driver with ``dra`` pools), KServe; with ``backups``, CSI snapshots and Velero; the cell's
    PriorityClasses; the cluster-wide deny rules fencing its tenants in
    (:class:`gpucell.components.cluster_deny.ClusterDeny`).

    The cell's Kubernetes provider is built from the k3s kubeconfig Output (no file, no ``~/.kube/config``), so
    nothing in a cell can touch another region's cluster; its ``clusterIdentifier`` (:func:`cluster_identifier`)
    keeps a new SSH key or a re-read kubeconfig from replacing anything. Edges:

    - Cilium after the servers answer (nodes cannot become Ready without a CNI);
    - everything in the cluster after Cilium;
    - CDI after storage; custom resources after their operator (inside each component);
    - the DRA driver after the GPU Operator (its kubelet plugin uses the operator's driver);
    - KServe after cert-manager's webhook is ready;
    - Cluster API (with tenant clusters) after cert-manager too;
    - a host whose GPU configuration changes (:mod:`gpucell.day2.gpu_serving`): its ``-prepare`` after the GPU Operator,
      the ``KubeVirt`` CR and the DRA driver, which serve both its old and new configuration until the first run after
      every node settled.

    What tenants and their workloads build on (:meth:`gpucell.tenancy.tenant.TenantArgs.from_cell`): :attr:`cluster`,
    :attr:`facts` and :attr:`platform`.
    """

    kubeconfig: pulumi.Output[str]
    """Admin kubeconfig of the cell (secret), pointing at the API endpoint."""
    api_server_url: pulumi.Output[str]
    """``https://<apiEndpoint>:<apiPort>``."""
    storage_class_name: pulumi.Output[str]
    """The cell's default StorageClass."""

    def __init__(self, name: str, args: RegionalCellArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        _check_secrets(args)
        super().__init__("RegionalCell", name, opts)
        with resolved_or_failed(f"RegionalCell {name}"):
            self._build(name, args)

    def _build(self, name: str, args: RegionalCellArgs) -> None:
        """Everything :meth:`__init__` builds; the hosts' ``-prepare`` that wait for the GPU pieces (built later)
        fail with this code's error rather than wait forever (:func:`gpucell._component.resolved_or_failed`)."""
        cell = args.cell
        self.spec = cell
        """The region's validated spec."""

        def provider(kubeconfig: pulumi.Output[str]) -> Provider:
            # Built by K3sCluster as soon as the first server's kubeconfig is read (the nodes' patches need it),
            # but a child of the cell, as it always was (its URN must not change).
            return Provider(
                f"{name}-k8s",
                kubeconfig=kubeconfig,
                cluster_identifier=cluster_identifier(name),
                enable_server_side_apply=True,
                delete_unreachable=False,
                opts=self.child(),
            )

        serving = gpu_serving(cell, args.deployed_gpu_nodes)
        self.serving = serving
        """The spec the cell-wide GPU pieces are rendered from (:class:`gpucell.day2.gpu_serving.GpuServing`)."""
        # Add before: a reconfigured host's -prepare waits for what serves both its configurations, built below. A
        # renamed SR-IOV vGPU resource cannot be served twice: those hosts wait for the GPU Operator (and the DRA
        # driver) only, and the KubeVirt CR renames it after the first of them cordoned its pool (decision 0018).
        everything, serve_everything = resources_later()
        but_kubevirt, serve_but_kubevirt = resources_later()
        waits = {host: but_kubevirt if host in serving.renamed else everything for host in sorted(serving.reconfigured)}
        self.k3s = K3sCluster(
            f"{name}-k3s",
            K3sClusterArgs.from_cell(
                cell,
                args.ssh_private_key,
                provider=provider,
                etcd_s3_credentials=args.etcd_s3_credentials,
                registered_hosts=args.registered_hosts,
                control_server=args.control_server,
                prepare_after=waits,
            ),
            opts=self.child(),
        )
        self.provider = self.k3s.provider
        # The cell orders its own components explicitly (each after what it needs): the handle they are given has no
        # readiness of its own, only the provider, the Kubernetes minor and k3s's containerd.
        on = dataclasses.replace(self.k3s.cluster, ready=())
        self.gateway_api: GatewayApiCrds | None = None
        """The Gateway API CRDs, with a ``gateway``: before Cilium, whose operator watches only kinds that exist."""
        before_cilium: list[pulumi.Resource] = []
        if cell.gateway is not None:
            self.gateway_api = GatewayApiCrds(
                f"{name}-gateway-api",
                GatewayApiCrdsArgs(on, cell.versions.gateway_api),
                opts=self._ordered(self.k3s.servers_ready),
            )
            before_cilium.append(self.gateway_api)
        self.cilium = Cilium(
            f"{name}-cilium",
            CiliumArgs.from_cell(cell, on),
            opts=self._ordered(self.k3s.servers_ready, *before_cilium),
        )
        self.cluster_deny = ClusterDeny(
            f"{name}-cluster-deny",
            ClusterDenyArgs.from_cell(cell, on, args.other_cells),
            opts=self._ordered(self.cilium),
        )
        """The cluster-wide deny rules fencing tenants in, after Cilium (their CRD)."""
        self.cluster: Cluster = self.k3s.cluster.after(self.cilium)
        """The cell's cluster handle, ready once the servers answer and Cilium is installed: what you build on this
        cell deploys onto it."""
        self.load_balancer: LoadBalancerAddresses | None = None
        """The LB IPAM pools and their announcement, with a ``loadBalancer``."""
        if cell.load_balancer is not None:
            gateway_pool = cell.gateway.pool if cell.gateway is not None else None
            self.load_balancer = LoadBalancerAddresses(
                f"{name}-load-balancer",
                LoadBalancerAddressesArgs(on, cell.load_balancer, gateway_pool),
                opts=self._ordered(self.cilium),
            )
        self.storage = Storage(f"{name}-storage", StorageArgs.from_cell(cell, on), opts=self._ordered(self.cilium))
        self._serve_gpus(name, on, serving, serve_everything, serve_but_kubevirt)
        self._vm_platform(name, on, args.image_credentials)
        self.cert_manager = CertManager(
            f"{name}-cert-manager", CertManagerArgs.from_cell(cell, on), opts=self._ordered(self.cilium)
        )
        self.kserve = KServe(f"{name}-kserve", KServeArgs.from_cell(cell, on), opts=self._ordered(self.cert_manager))
        self.cluster_api = self._cluster_api(name, cell, on)
        """Cluster API with CAPK and CAAPH, when a tenant has ``tenantClusters``."""
        self._traffic_and_metrics(name, args, on)
        self._optional_platform(name, cell, args)
        self.facts = ClusterFacts.from_cell(cell)
        """What tenants on this cell are admitted against and rendered from."""
        self.platform = Platform(
            cilium=self.cilium,
            cluster_deny=self.cluster_deny,
            kubevirt=self.kubevirt,
            cdi=self.cdi,
            gpu_operator=self.gpu_operator,
            dra_driver=self.dra_driver,
            kserve=self.kserve,
            keda=self.keda,
            metrics=self.metrics,
            image_catalogs=self.image_catalogs,
            priority_classes=self.priority_classes,
            backups=self.backups,
        )
        """The cell's platform components that tenants and their workloads wait for."""

        self.kubeconfig = self.k3s.kubeconfig
        self.api_server_url = self.k3s.api_server_url
        self.storage_class_name = self.storage.storage_class_name
        # An instance attribute, not a declared output: the records are the program's own bookkeeping (a stack
        # output for the next run), and their values mix strings, numbers and lists, which a component package's
        # schema cannot type (gpucell.package.component_package exports this class).
        self.gpu_nodes: pulumi.Output[dict[str, dict[str, Any]]] = self._recorded_once_settled()
        """:func:`gpucell.day2.gpu_serving.node_records` of this run, known once every node's ``-settle`` succeeded: the
        program exports it as ``<region>GpuNodes`` for the next run's :attr:`RegionalCellArgs.deployed_gpu_nodes`."""
        self.register_outputs(
            {
                "kubeconfig": self.kubeconfig,
                "apiServerUrl": self.api_server_url,
                "storageClassName": self.storage_class_name,
            }
        )

    def _cluster_api(self, name: str, cell: CellSpec, on: Cluster) -> ClusterApi | None:
        """Cluster API when a tenant of the cell has a tenant cluster, after cert-manager (which issues every
        provider's webhook certificate); else ``None``."""
        if not any(tenant.tenant_clusters for tenant in cell.tenants.values()):
            return None
        return ClusterApi(
            f"{name}-cluster-api", ClusterApiArgs.from_cell(cell, on), opts=self._ordered(self.cert_manager)
        )

    def _optional_platform(self, name: str, cell: CellSpec, args: RegionalCellArgs) -> None:
        """The cell's PriorityClasses, with ``priorityClasses``; CSI snapshots and Velero, with ``backups``."""
        self.priority_classes: PriorityClasses | None = None
        """The cell's PriorityClasses, with ``priorityClasses``."""
        if cell.priority_classes:
            self.priority_classes = PriorityClasses(
                f"{name}-priority-classes",
                PriorityClassesArgs.from_cell(cell, self.cluster),
                opts=self.child(),
            )
        self.csi_snapshots: CsiSnapshots | None = None
        """The CSI snapshot CRDs, controller and Longhorn's VolumeSnapshotClass, with ``backups``."""
        self.backups: Backups | None = None
        """Velero, with ``backups``."""
        if cell.backups is None:
            return
        assert args.backup_credentials is not None  # checked before anything was registered
        self.csi_snapshots = CsiSnapshots(
            f"{name}-csi-snapshots",
            CsiSnapshotsArgs.from_cell(cell, self.cluster, self.storage),
            opts=self.child(),
        )
        after = (self.csi_snapshots, self.kubevirt, self.cdi)
        self.backups = Backups(
            f"{name}-backups",
            BackupsArgs.from_cell(cell, self.cluster, args.backup_credentials, after),
            opts=self.child(),
        )

    def _serve_gpus(
        self,
        name: str,
        on: Cluster,
        serving: GpuServing,
        serve_everything: Callable[[Sequence[pulumi.Resource]], None],
        serve_but_kubevirt: Callable[[Sequence[pulumi.Resource]], None],
    ) -> None:
        """KubeVirt, CDI, the GPU Operator and the DRA driver, the GPU pieces rendered from ``serving.cell``; then
        what the reconfigured hosts' ``-prepare`` wait for is known (``serve_*``)."""
        cell = self.spec
        served = serving.cell
        renaming = [
            self.k3s.nodes[host].prepare
            for hosts in self.k3s.rollout_starts.values()
            for host in hosts
            if host in serving.renamed
        ]
        self.kubevirt = KubeVirt(
            f"{name}-kubevirt", KubeVirtArgs.from_cell(served, on), opts=self._ordered(self.cilium, *renaming)
        )
        self.cdi = Cdi(
            f"{name}-cdi", CdiArgs.from_cell(cell, on, self.storage), opts=self._ordered(self.cilium, self.storage)
        )
        self.gpu_operator = GpuOperator(
            f"{name}-gpu-operator", GpuOperatorArgs.from_cell(served, on), opts=self._ordered(self.cilium)
        )
        self.dra_driver: DraDriver | None = None
        """The NVIDIA DRA driver, while a pool has ``gpuMode: dra`` (or a host had it,
        :mod:`gpucell.day2.gpu_serving`)."""
        if served.gpu_pools(GpuMode.DRA):
            self.dra_driver = DraDriver(
                f"{name}-dra-driver",
                DraDriverArgs.from_cell(served, on),
                opts=self._ordered(self.cilium, self.gpu_operator),
            )
        dra = [self.dra_driver.release] if self.dra_driver is not None else []
        serve_everything([self.gpu_operator.release, self.kubevirt.cr, *dra])
        serve_but_kubevirt([self.gpu_operator.release, *dra])

    def _vm_platform(self, name: str, on: Cluster, credentials: Mapping[str, pulumi.Input[str]]) -> None:
        """The cell's instancetypes and preferences (after KubeVirt) and image catalogs (after CDI)."""
        cell = self.spec
        self.instancetypes: Instancetypes | None = None
        """The cell's ``VirtualMachineClusterInstancetype``/``Preference`` objects, with ``kubevirt.instancetypes`` or
        ``kubevirt.preferences``."""
        if cell.kubevirt.instancetypes or cell.kubevirt.preferences:
            self.instancetypes = Instancetypes(
                f"{name}-instancetypes", InstancetypesArgs.from_cell(cell, on), opts=self._ordered(self.kubevirt)
            )
        self.image_catalogs: dict[str, ImageCatalog] = {
            catalog: ImageCatalog(
                f"{name}-images-{catalog}",
                ImageCatalogArgs.from_cell(cell, on, catalog, credentials),
                opts=self._ordered(self.cdi),
            )
            for catalog in cell.image_catalogs
        }
        """The image catalogs, by namespace."""

    def _recorded_once_settled(self) -> pulumi.Output[dict[str, dict[str, Any]]]:
        """:func:`gpucell.day2.gpu_serving.node_records` of the region, as an Output of every node's ``-settle``: it
        never resolves in a run where a node fails, so that run records nothing (decision 0018)."""
        records = node_records(self.spec)
        settled = [node.settle.id for node in self.k3s.nodes.values()]
        return pulumi.Output.all(*settled).apply(lambda _: records)

    def _traffic_and_metrics(self, name: str, args: RegionalCellArgs, on: Cluster) -> None:
        """The Gateway (with a ``gateway``), the metrics stack (``metrics.enabled``) and KEDA (a ``vllm-*`` scale
        metric), in that order, after KServe."""
        cell = args.cell
        self.gateway: EndpointGateway | None = None
        """The Gateway(s) exposed model endpoints are served from, with a ``gateway``."""
        if cell.gateway is not None:
            addresses = [self.load_balancer] if self.load_balancer is not None else []
            self.gateway = EndpointGateway(
                f"{name}-gateway",
                EndpointGatewayArgs(on, cell.gateway, exposed_endpoints(cell)),
                opts=self._ordered(self.cilium, self.cert_manager, *addresses),
            )
        self.metrics: Metrics | None = None
        """The metrics stack, with ``metrics.enabled``."""
        if cell.metrics.enabled:
            self.metrics = Metrics(
                f"{name}-metrics",
                MetricsArgs.from_cell(cell, on, args.remote_write_credentials),
                opts=self._ordered(self.cilium, self.storage),
            )
        self.keda: Keda | None = None
        """KEDA, when an endpoint scales on a vLLM metric (``scaleMetric: vllm-*``)."""
        if any(e.scale_metric.is_vllm for t in cell.tenants.values() for e in t.model_endpoints.values()):
            self.keda = Keda(f"{name}-keda", KedaArgs(on, cell.versions.keda), opts=self._ordered(self.cilium))

    def _ordered(self, *after: pulumi.Resource) -> pulumi.ResourceOptions:
        """Options for a component of the cell that comes after ``after`` (its cluster gives the provider)."""
        return self.child(depends_on=list(after))
