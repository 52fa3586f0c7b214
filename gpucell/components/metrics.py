"""Metrics: one cell's kube-prometheus-stack, its scrape targets, the GPU metering and health rules, dashboards.

What is registered (namespace ``monitoring``; decision 0021):

- a ``Namespace`` ``monitoring`` enforcing Pod Security ``privileged``: the node exporter runs with the host's PID
  and network namespaces and mounts ``/`` (kube-prometheus-stack's ``prometheus-node-exporter`` subchart), which
  ``restricted`` (the cell's default, k3s CIS profile) refuses;
- with ``metrics.remoteWrite``: a ``Secret`` ``remote-write-credentials`` (keys ``username``, ``password``), a
  Pulumi secret, which Prometheus's ``remoteWrite[].basicAuth`` references;
- the Helm release ``kube-prometheus-stack`` at ``versions.kubePrometheusStack`` (:func:`stack_values`);
- after it (its CRDs): a ``PodMonitor`` per pod target the chart does not scrape (:func:`pod_monitor_manifests`:
  KServe predictors with vLLM's ``/metrics``, the NVIDIA DRA driver's kubelet plugin), a ``ServiceMonitor`` for
  Hubble (:func:`hubble_service_monitor`), and the ``PrometheusRule`` ``gpucell`` with the metering
  (:mod:`gpucell.components.metering`) and GPU health (:mod:`gpucell.components.gpu_alerts`) groups;
- a ``ConfigMap`` per dashboard (:mod:`gpucell.components.dashboards`).

Other targets are scraped through the ServiceMonitors their own projects create once the Prometheus Operator's
CRDs exist: the DCGM exporter's (GPU Operator ``dcgmExporter.serviceMonitor``, gpucell adds the node label and the
fields the alerts read), the GPU Operator's own (``operator.metrics.serviceMonitor``), KubeVirt's (virt-operator
creates ServiceMonitor ``kubevirt`` for virt-handler/virt-controller/virt-api, and its PrometheusRule, in the first
of ``openshift-monitoring``/``monitoring`` that exists: pkg/virt-operator ``monitorNamespaces``), and
kube-state-metrics, node exporter and the kubelet's (the chart). Prometheus selects every ServiceMonitor, PodMonitor
and PrometheusRule in the cluster (the ``*SelectorNilUsesHelmValues: false`` values).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import pulumi
from pulumi_kubernetes.apiextensions import CustomResource
from pulumi_kubernetes.core.v1 import ConfigMap, Namespace, PersistentVolumeClaimPatch, Secret
from pulumi_kubernetes.helm.v3 import Release

from gpucell.components._chart import ChartSource, helm_release

if TYPE_CHECKING:
    from pulumi_kubernetes.meta.v1 import ObjectMetaArgsDict
from gpucell._component import CellComponent
from gpucell.admission.inventory import GpuOffer, gpu_offers
from gpucell.components.dashboards import DASHBOARDS, dashboard_configmap
from gpucell.components.gpu_alerts import NODE_RELABELING, HostGpuPool, health_group
from gpucell.components.metering import KSM_LABELS_ALLOWLIST, UNKNOWN_MODEL, metering_group
from gpucell.components.platform_tolerations import no_execute_tolerations
from gpucell.components.storage import LOCAL_PATH_CLASS, LONGHORN_CLASS
from gpucell.spec.metrics import HOST_HEALTH_TEXTFILE_DIR, MetricsSpec
from gpucell.spec.platform import StorageBackend
from gpucell.spec.pools import GpuMode, NodePool, NodeRole, gpu_pools
from gpucell.spec.versions import Versions

if TYPE_CHECKING:
    from gpucell.cluster import Cluster
    from gpucell.spec.cell import CellSpec

__all__ = [
    "CHART",
    "CRD_UPGRADE_JOB",
    "NAMESPACE",
    "NODE_EXPORTER_ARGS",
    "PREDICTOR_DROPPED_LABELS",
    "PREDICTOR_METRICS",
    "PROMETHEUS_URL",
    "RELEASE_NAME",
    "REMOTE_WRITE_SECRET",
    "Metrics",
    "MetricsArgs",
    "host_gpu_pools",
    "hubble_service_monitor",
    "pod_monitor_manifests",
    "predictor_metric_relabelings",
    "prometheus_rule_manifest",
    "remote_write_secret_data",
    "stack_values",
]

CHART = ChartSource("kube-prometheus-stack", "https://prometheus-community.github.io/helm-charts")
"""The chart and its repository."""
NAMESPACE = "monitoring"
"""Namespace of the stack (fixed: each cell is its own cluster; also where virt-operator puts KubeVirt's
ServiceMonitor)."""
RELEASE_NAME = "kube-prometheus-stack"
"""Helm release name."""
PROMETHEUS_URL = f"http://prometheus-operated.{NAMESPACE}.svc:9090"
"""In-cluster address of Prometheus: the operator's governing Service ``prometheus-operated`` (KEDA queries it)."""
REMOTE_WRITE_SECRET = "remote-write-credentials"
"""Secret holding the remote-write basic-auth credentials (keys ``username`` and ``password``)."""
PROMETHEUS_CLAIM = "prometheus-kube-prometheus-stack-prometheus-db-prometheus-kube-prometheus-stack-prometheus-0"
"""Prometheus's volume claim: the operator's template ``prometheus-<Prometheus>-db`` of StatefulSet
``prometheus-<Prometheus>``, replica 0, for the chart's Prometheus ``kube-prometheus-stack-prometheus``."""
MONITOR_API = "monitoring.coreos.com/v1"
PREDICTOR_METRICS = (
    "vllm:num_requests_waiting",
    "vllm:num_requests_running",
    "vllm:time_to_first_token_seconds_bucket",
    "vllm:e2e_request_latency_seconds_bucket",
)
"""The only series kept from KServe predictors (PodMonitor ``kserve-predictors``): what KEDA's queries
(:func:`gpucell.workloads.model_endpoint.vllm_query`) and the endpoints dashboard (:mod:`gpucell.components.dashboards`)
read, vLLM's names (``docs/design/metrics.md``). A predictor is any pod labelled ``component: predictor`` in any
namespace, so a tenant controls what it exports: everything else it exports (``gpucell:*`` records, ``kube_*``,
``DCGM_*``) is dropped at the scrape."""
PREDICTOR_DROPPED_LABELS = "tenant|gpu_model|exported_.+"
"""Labels dropped from what predictors export: the metering's own (``tenant``, ``gpu_model``) and the ``exported_*``
copies Prometheus keeps of labels that clash with the target's (``namespace``, ``pod``, ``job``, ``node``, ...) under
``honorLabels: false``, so that no kept series carries a label a tenant chose in place of one Prometheus set."""
_MANAGED = {"app.kubernetes.io/managed-by": "gpucell"}


@dataclass(frozen=True)
class MetricsArgs:
    """Inputs of :class:`Metrics`: only what the stack uses."""

    cluster: Cluster
    """The cluster to install into (its provider and readiness)."""
    spec: MetricsSpec
    """``metrics`` of the region (retention, storage, remote write, chart values)."""
    storage_class: str
    """StorageClass of Prometheus's volume (the cell's default: ``longhorn`` or ``local-path``)."""
    version: str = Versions().kube_prometheus_stack
    """kube-prometheus-stack chart version (``versions.kubePrometheusStack``); defaults to gpucell's pin."""
    gpu_offers: Sequence[GpuOffer] = ()
    """What the device plugins advertise, per pool: the metered resources and the GPU-count alerts."""
    dra: bool = False
    """The cell runs the NVIDIA DRA driver (``dra`` pools): scrape its kubelet plugin."""
    host_pools: Sequence[HostGpuPool] = ()
    """The GPU pools whose hosts run the host-side GPU health collector (``vm-passthrough``, ``vm-vgpu``, ``dra``):
    the host-side GPU alerts (:func:`gpucell.components.gpu_alerts.host_alerts`)."""
    pool_models: Mapping[str, str] = field(default_factory=dict)
    """GPU pool name -> gpucell catalog model name (every GPU pool, ``dra`` ones included): the metered
    ``gpu_model``; a pool missing here is metered as ``unknown``."""
    dra_model: str = UNKNOWN_MODEL
    """The metered ``gpu_model`` of DRA claims: the model of the ``dra`` pools when they all hold one (the tenants'
    quotas count claimed devices per class, not per node), else ``unknown``."""
    remote_write_credentials: pulumi.Input[str] | None = None
    """``<user>:<password>`` named by ``metrics.remoteWrite.credentialsConfigKey`` (a Pulumi secret)."""
    node_tolerations: Sequence[Mapping[str, str]] = ()
    """The ``NoExecute`` taints of the cell's pools as tolerations
    (:func:`gpucell.components.platform_tolerations.no_execute_tolerations`): node-exporter must stay on those nodes."""

    @classmethod
    def from_cell(
        cls, cell: CellSpec, cluster: Cluster, remote_write_credentials: pulumi.Input[str] | None = None
    ) -> MetricsArgs:
        """The metrics stack of ``cell`` on ``cluster``: its ``metrics``, pinned chart, default StorageClass,
        device-plugin offers (``effective_mig_strategy``) and whether it has ``dra`` pools."""
        storage = LONGHORN_CLASS if cell.storage.backend is StorageBackend.LONGHORN else LOCAL_PATH_CLASS
        return cls(
            cluster,
            spec=cell.metrics,
            version=cell.versions.kube_prometheus_stack,
            storage_class=storage,
            gpu_offers=gpu_offers(cell.node_pools, cell.effective_mig_strategy.value),
            dra=bool(gpu_pools(cell.node_pools, GpuMode.DRA)),
            host_pools=host_gpu_pools(cell.node_pools),
            pool_models={name: pool.model.name for name, pool in cell.node_pools.items() if pool.role is NodeRole.GPU},
            dra_model=_one_model(gpu_pools(cell.node_pools, GpuMode.DRA).values()),
            remote_write_credentials=remote_write_credentials,
            node_tolerations=no_execute_tolerations(cell.node_pools),
        )


def host_gpu_pools(pools: Mapping[str, NodePool]) -> list[HostGpuPool]:
    """The GPU pools of ``pools`` whose hosts run the host-side GPU health collector
    (:attr:`gpucell.spec.pools.GpuMode.host_health`), with their ``gpusPerNode``."""
    found = []
    for name, pool in pools.items():
        if pool.role is NodeRole.GPU and pool.gpu_mode is not None and pool.gpu_mode.host_health:
            # A GPU pool's spec requires gpusPerNode.
            assert pool.gpus_per_node is not None
            found.append(HostGpuPool(name, pool.gpu_mode.value, pool.gpus_per_node))
    return found


def _one_model(pools: Iterable[NodePool]) -> str:
    """The one GPU model of ``pools``, or ``unknown`` with none or several."""
    models = {pool.model.name for pool in pools}
    return models.pop() if len(models) == 1 else UNKNOWN_MODEL


def remote_write_secret_data(credentials: str) -> dict[str, str]:
    """``{"username", "password"}`` of ``"<user>:<password>"`` (split at the first colon). Raises ``ValueError``
    without a colon or with an empty part; the message never includes the value."""
    user, sep, password = credentials.partition(":")
    if not (sep and user and password):
        raise ValueError("metrics.remoteWrite credentials must be '<user>:<password>'")
    return {"username": user, "password": password}


NODE_EXPORTER_ARGS = (
    "--collector.filesystem.mount-points-exclude=^/(dev|proc|sys|run/containerd/.+|var/lib/docker/.+|"
    "var/lib/kubelet/.+)($|/)",
    "--collector.filesystem.fs-types-exclude=^(autofs|binfmt_misc|bpf|cgroup2?|configfs|debugfs|devpts|devtmpfs|"
    "fusectl|hugetlbfs|iso9660|mqueue|nsfs|overlay|proc|procfs|pstore|rpc_pipefs|securityfs|selinuxfs|squashfs|"
    "sysfs|tracefs|erofs)$",
    f"--collector.textfile.directory=/host/root{HOST_HEALTH_TEXTFILE_DIR}",
)
"""``prometheus-node-exporter.extraArgs``: the chart's own two (kube-prometheus-stack 88.5.3 ``values.yaml``; Helm
replaces a list whole, so they are repeated) and the textfile collector's directory, the host's
:data:`gpucell.spec.metrics.HOST_HEALTH_TEXTFILE_DIR` under the chart's mount of the host's ``/`` at ``/host/root``
(``prometheus-node-exporter`` 4.56.1 ``hostRootFsMount``, ``templates/daemonset.yaml``), where the host-side GPU
health collector writes (:mod:`gpucell.k3s.gpu_host_health`)."""

CRD_UPGRADE_JOB: dict[str, Any] = {
    "enabled": True,
    "forceConflicts": True,
    "image": {"busybox": {"tag": "1.37.0"}},
}
"""``crds.upgradeJob``: the chart's pre-install/pre-upgrade/pre-rollback hook Job (88.5.3 ``charts/crds/templates/
upgrade/job.yaml``) that applies the Prometheus Operator CRDs of the chart's version (``kubectl apply --server-side
--force-conflicts``, taking them over from Helm). gpucell installs the chart as a Helm release, and Helm installs
``crds/`` once and never upgrades them: after a chart bump the new operator meets old CRDs
(prometheus-community/helm-charts#3680, #5309) and drops or refuses the new fields. Off by default ("in preview").
The busybox init container (``bzcat`` of the packed CRDs) is pinned to a release instead of the chart's ``latest``;
the kubectl image defaults to the cluster's Kubernetes version (``registry.k8s.io/kubectl``)."""


NODE_EXPORTER_TOLERATIONS: tuple[dict[str, str], ...] = ({"effect": "NoSchedule", "operator": "Exists"},)
"""The node-exporter chart's default ``tolerations`` (kube-prometheus-stack 88.5.3
``charts/prometheus-node-exporter/values.yaml``), kept first: a list replaces the whole. It tolerates no ``NoExecute``
taint, so a pool tainted ``NoExecute`` evicts node-exporter from its nodes (prometheus-community/helm-charts#1347):
their node metrics and their host-side GPU health (its textfile collector) would stop."""


def stack_values(
    spec: MetricsSpec, storage_class: str, node_tolerations: Sequence[Mapping[str, str]] = ()
) -> dict[str, Any]:
    """The chart values gpucell owns (``metrics.values`` is merged over them; the spec refuses the owned paths):

    - ``prometheus.prometheusSpec``: ``retention`` ``<retentionDays>d``; ``storageSpec.volumeClaimTemplate`` of
      ``storageGib`` Gi (``ReadWriteOnce``) from ``storage_class``; every ServiceMonitor, PodMonitor and
      PrometheusRule of the cluster selected (``*SelectorNilUsesHelmValues: false``); with ``remoteWrite``: one
      target with ``basicAuth`` from :data:`REMOTE_WRITE_SECRET`.
    - ``kube-state-metrics``: ``metricLabelsAllowlist`` :data:`gpucell.components.metering.KSM_LABELS_ALLOWLIST`; no
      custom-resource-state metrics: KSM 2.20.0 builds them only for kinds a CRD serves, and the metering reads DRA
      claims from the tenants' ResourceQuotas (:mod:`gpucell.components.metering`).
    - ``crds.upgradeJob``: :data:`CRD_UPGRADE_JOB`, so that the Prometheus Operator CRDs follow every chart upgrade.
    - ``prometheus-node-exporter``: ``tolerations`` :data:`NODE_EXPORTER_TOLERATIONS` then ``node_tolerations`` (the
      pools' ``NoExecute`` taints), ``extraArgs`` :data:`NODE_EXPORTER_ARGS` (the textfile collector reads the
      host-side GPU health) and its ServiceMonitor's ``relabelings`` copying the pod's node into label ``node``
      (:data:`gpucell.components.gpu_alerts.NODE_RELABELING`), which the host-side GPU alerts and ``gpucell health``
      name the host by.
    - ``kubeControllerManager``, ``kubeScheduler``, ``kubeEtcd``, ``kubeProxy`` off: k3s runs the first three inside
      its own process, listening on localhost only, and the cell runs no kube-proxy (Cilium replaces it); scraping
      them would only raise TargetDown.
    """
    prometheus: dict[str, Any] = {
        "retention": f"{spec.retention_days}d",
        "storageSpec": {
            "volumeClaimTemplate": {
                "spec": {
                    "storageClassName": storage_class,
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": f"{spec.storage_gib}Gi"}},
                }
            }
        },
        "serviceMonitorSelectorNilUsesHelmValues": False,
        "podMonitorSelectorNilUsesHelmValues": False,
        "ruleSelectorNilUsesHelmValues": False,
    }
    if spec.remote_write is not None:
        auth = {key: {"name": REMOTE_WRITE_SECRET, "key": key} for key in ("username", "password")}
        prometheus["remoteWrite"] = [{"url": spec.remote_write.url, "basicAuth": auth}]
    return {
        "crds": {"upgradeJob": {**CRD_UPGRADE_JOB, "image": {"busybox": dict(CRD_UPGRADE_JOB["image"]["busybox"])}}},
        "prometheus": {"prometheusSpec": prometheus},
        "kube-state-metrics": {
            "metricLabelsAllowlist": list(KSM_LABELS_ALLOWLIST),
        },
        "prometheus-node-exporter": {
            "tolerations": [dict(t) for t in (*NODE_EXPORTER_TOLERATIONS, *node_tolerations)],
            "extraArgs": list(NODE_EXPORTER_ARGS),
            "prometheus": {"monitor": {"relabelings": [dict(NODE_RELABELING)]}},
        },
        "kubeControllerManager": {"enabled": False},
        "kubeScheduler": {"enabled": False},
        "kubeEtcd": {"enabled": False},
        "kubeProxy": {"enabled": False},
    }


def predictor_metric_relabelings() -> list[dict[str, Any]]:
    """``metricRelabelings`` of ``kserve-predictors``: keep :data:`PREDICTOR_METRICS` by ``__name__`` (Prometheus
    anchors the regex), then drop :data:`PREDICTOR_DROPPED_LABELS`."""
    return [
        {"sourceLabels": ["__name__"], "regex": f"({'|'.join(PREDICTOR_METRICS)})", "action": "keep"},
        {"regex": PREDICTOR_DROPPED_LABELS, "action": "labeldrop"},
    ]


def _pod_monitor(
    name: str,
    namespaces: dict[str, Any],
    labels: dict[str, str],
    container: str,
    port: int,
    *,
    metric_relabelings: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A PodMonitor of ``container`` on ``port`` of the pods matching ``labels``. The target address is set from
    the pod IP, because neither container declares its metrics port (a ``portNumber`` match would find nothing).
    ``honorLabels: false`` (Prometheus's default, stated): the target's ``job``, ``namespace``, ``pod``, ``node`` win
    over labels the pod exports; ``metric_relabelings`` then filter what is kept."""
    endpoint: dict[str, Any] = {
        "path": "/metrics",
        "interval": "15s",
        "honorLabels": False,
        "relabelings": [
            {
                "sourceLabels": ["__meta_kubernetes_pod_container_name"],
                "regex": container,
                "action": "keep",
            },
            {
                "sourceLabels": ["__meta_kubernetes_pod_ip"],
                "targetLabel": "__address__",
                "replacement": f"$1:{port}",
                "action": "replace",
            },
            {
                "sourceLabels": ["__meta_kubernetes_pod_node_name"],
                "targetLabel": "node",
                "action": "replace",
            },
        ],
    }
    if metric_relabelings:
        endpoint["metricRelabelings"] = metric_relabelings
    return {
        "apiVersion": MONITOR_API,
        "kind": "PodMonitor",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": dict(_MANAGED)},
        "spec": {
            "namespaceSelector": namespaces,
            "selector": {"matchLabels": labels},
            "podMetricsEndpoints": [endpoint],
        },
    }


def pod_monitor_manifests(*, dra: bool) -> list[dict[str, Any]]:
    """``kserve-predictors``: KServe predictor pods (label ``component: predictor``) in every namespace, container
    ``kserve-container`` port 8080, where KServe's model servers and vLLM serve ``/metrics``, keeping only
    :data:`PREDICTOR_METRICS` (:func:`predictor_metric_relabelings`: any pod of a tenant can carry the label); with
    ``dra``:
    ``dra-kubelet-plugin``, container ``gpus`` of the DRA driver's kubelet plugin on ``:8080`` (chart 0.4.1
    ``kubeletPlugin.metrics.gpuHttpEndpoint``)."""
    monitors = [
        _pod_monitor(
            "kserve-predictors",
            {"any": True},
            {"component": "predictor"},
            "kserve-container",
            8080,
            metric_relabelings=predictor_metric_relabelings(),
        )
    ]
    if dra:
        monitors.append(
            _pod_monitor(
                "dra-kubelet-plugin",
                {"matchNames": ["dra-driver-nvidia-gpu"]},
                {"dra-driver-nvidia-gpu-component": "kubelet-plugin"},
                "gpus",
                8080,
            )
        )
    return monitors


def hubble_service_monitor() -> dict[str, Any]:
    """ServiceMonitor ``hubble``: Cilium's ``hubble-metrics`` Service in ``kube-system`` (label ``k8s-app: hubble``,
    port ``hubble-metrics``, 9965), which exists once ``hubble.metrics.enabled`` lists metrics
    (:mod:`gpucell.components.cilium` does with the metrics stack on)."""
    return {
        "apiVersion": MONITOR_API,
        "kind": "ServiceMonitor",
        "metadata": {"name": "hubble", "namespace": NAMESPACE, "labels": dict(_MANAGED)},
        "spec": {
            "namespaceSelector": {"matchNames": ["kube-system"]},
            "selector": {"matchLabels": {"k8s-app": "hubble"}},
            "endpoints": [
                {
                    "port": "hubble-metrics",
                    "interval": "15s",
                    "relabelings": [
                        {
                            "sourceLabels": ["__meta_kubernetes_pod_node_name"],
                            "targetLabel": "node",
                            "action": "replace",
                        },
                    ],
                }
            ],
        },
    }


def prometheus_rule_manifest(
    offers: Sequence[GpuOffer],
    pool_models: Mapping[str, str],
    dra_model: str = UNKNOWN_MODEL,
    host_pools: Sequence[HostGpuPool] = (),
) -> dict[str, Any]:
    """PrometheusRule ``gpucell``: :func:`gpucell.components.metering.metering_group` over ``offers``' resources, the
    GPU pools' models ``pool_models`` and the DRA claims' ``dra_model``, and
    :func:`gpucell.components.gpu_alerts.health_group` over ``offers`` and ``host_pools``."""
    return {
        "apiVersion": MONITOR_API,
        "kind": "PrometheusRule",
        "metadata": {"name": "gpucell", "namespace": NAMESPACE, "labels": dict(_MANAGED)},
        "spec": {
            "groups": [
                metering_group((o.resource for o in offers), pool_models, dra_model),
                health_group(offers, host_pools),
            ]
        },
    }


class Metrics(CellComponent):
    """The metrics stack of one cell (``gpucell:index:Metrics``), in the cell's cluster (construct it with the
    cell's Kubernetes provider and after Cilium and storage). Children: ``f"{name}-namespace"``, with remote write
    ``f"{name}-remote-write"`` (Secret), ``f"{name}-stack"`` (the Release), ``f"{name}-<monitor>"`` per
    PodMonitor/ServiceMonitor, ``f"{name}-rules"`` (PrometheusRule) and ``f"{name}-dashboard-<uid>"``.

    Raises ``ValueError`` when ``spec.remoteWrite`` is set but no credentials are given.
    """

    namespace: pulumi.Output[str]
    """``monitoring``."""
    prometheus_url: pulumi.Output[str]
    """:data:`PROMETHEUS_URL`."""

    def __init__(self, name: str, args: MetricsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        spec = args.spec
        if spec.remote_write is not None and args.remote_write_credentials is None:
            raise ValueError("metrics.remoteWrite is set but no credentials were passed")
        super().__init__("Metrics", name, opts, args.cluster)
        self.namespace_resource = Namespace(
            f"{name}-namespace",
            metadata={
                "name": NAMESPACE,
                "labels": {
                    **_MANAGED,
                    **{f"pod-security.kubernetes.io/{mode}": "privileged" for mode in ("enforce", "audit", "warn")},
                },
            },
            opts=self.child(),
        )
        after: list[pulumi.Resource] = [self.namespace_resource]
        if args.remote_write_credentials is not None:
            data = pulumi.Output.secret(args.remote_write_credentials).apply(remote_write_secret_data)
            meta = {"name": REMOTE_WRITE_SECRET, "namespace": NAMESPACE, "labels": dict(_MANAGED)}
            after.append(
                Secret(
                    f"{name}-remote-write",
                    metadata=cast("ObjectMetaArgsDict", meta),
                    type="Opaque",
                    string_data=cast("pulumi.Output[Mapping[str, str]]", data),
                    opts=self.child(depends_on=after),
                )
            )
        self.release: Release = helm_release(
            f"{name}-stack",
            source=CHART,
            version=args.version,
            namespace=NAMESPACE,
            values=stack_values(spec, args.storage_class, args.node_tolerations),
            overrides=spec.values,
            opts=self.child(depends_on=after),
            release_name=RELEASE_NAME,
        )
        self.volume_patch: PersistentVolumeClaimPatch | None = None
        """With Longhorn (``allowVolumeExpansion``): the claim's size, so a larger ``storageGib`` expands the live
        volume (the operator changes only its StatefulSet's template; ``Prometheus.spec.storage`` docs,
        "Resizing volumes")."""
        if args.storage_class == LONGHORN_CLASS:
            self.volume_patch = PersistentVolumeClaimPatch(
                f"{name}-volume",
                metadata={"name": PROMETHEUS_CLAIM, "namespace": NAMESPACE},
                spec={"resources": {"requests": {"storage": f"{spec.storage_gib}Gi"}}},
                opts=self.child(depends_on=[self.release]),
            )
        monitors = [*pod_monitor_manifests(dra=args.dra), hubble_service_monitor()]
        in_stack = self.child(depends_on=[self.release])
        for manifest in monitors:
            _custom(f"{name}-{manifest['metadata']['name']}", manifest, in_stack)
        self.rules = _custom(
            f"{name}-rules",
            prometheus_rule_manifest(args.gpu_offers, args.pool_models, args.dra_model, args.host_pools),
            in_stack,
        )
        for uid in DASHBOARDS:
            board = dashboard_configmap(uid, NAMESPACE)
            ConfigMap(
                f"{name}-dashboard-{uid}",
                metadata=board["metadata"],
                data=board["data"],
                opts=self.child(depends_on=[self.namespace_resource]),
            )
        self.namespace = self.release.namespace.apply(lambda ns: ns or NAMESPACE)
        self.prometheus_url = self.release.namespace.apply(lambda _: PROMETHEUS_URL)
        self.register_outputs({"namespace": self.namespace, "prometheusUrl": self.prometheus_url})


def _custom(resource_name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions) -> CustomResource:
    """Register a rendered ``monitoring.coreos.com`` manifest as it is."""
    return CustomResource(
        resource_name,
        api_version=manifest["apiVersion"],
        kind=manifest["kind"],
        metadata=manifest["metadata"],
        spec=manifest["spec"],
        opts=opts,
    )
