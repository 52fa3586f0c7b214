"""KServe: model endpoints as InferenceServices, in raw Kubernetes Deployments (no Knative).

Three OCI Helm charts from ``oci://ghcr.io/kserve/charts`` at ``cell.versions.kserve``, in namespace
``kserve``, each after the previous one is ready:

1. ``kserve-crd``: the CRDs (InferenceService, ServingRuntime, ClusterServingRuntime...).
2. ``kserve-resources``: the controller, its admission webhooks and their cert-manager Certificate.
3. ``kserve-runtime-configs``: the built-in ClusterServingRuntimes (huggingface, vLLM, Triton...), which the
   controller's validating webhook must be serving to admit.

KServe v0.17.0 split the old all-in-one ``kserve`` chart this way (kserve/kserve#5089; the v0.17 upgrade
guide). Before v0.17 the published charts are ``kserve-crd`` and ``kserve``, whose ``kserve`` chart also
carries the runtimes; a cell pinned to such a release gets those two and no runtime-configs release.

Key paths are checked against the charts' default values at the pinned v0.20.0 (``charts/kserve-resources``
and ``charts/kserve-runtime-configs`` of kserve/kserve).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi_kubernetes.helm.v3 import Release

from gpucell._component import CellComponent
from gpucell.components._chart import ChartSource, helm_release
from gpucell.spec.platform import KServeSpec
from gpucell.spec.versions import DeploymentMode, Versions, kserve_deployment_modes, kserve_has_split_charts

if TYPE_CHECKING:
    from gpucell.cluster import Cluster
    from gpucell.spec.cell import CellSpec

__all__ = [
    "CHART_REGISTRY",
    "NAMESPACE",
    "KServe",
    "KServeArgs",
    "KServeCharts",
    "kserve_charts",
    "kserve_resources_values",
    "kserve_runtime_values",
]

CHART_REGISTRY = "oci://ghcr.io/kserve/charts"
"""OCI registry path of KServe's Helm charts."""
NAMESPACE = "kserve"
"""Namespace of the KServe controller (fixed: each cell is its own cluster)."""


@dataclass(frozen=True)
class KServeArgs:
    """Inputs of :class:`KServe`: only what it uses. Construct the component with ``depends_on`` cert-manager."""

    cluster: Cluster
    """The cluster to install into (its provider and readiness)."""
    spec: KServeSpec = field(default_factory=KServeSpec)
    """The ``kserve`` section: default ``deploymentMode`` and chart ``values``. Defaults to ``Standard`` (raw
    Deployments)."""
    version: str = Versions().kserve
    """KServe release (``versions.kserve``); defaults to gpucell's pin."""

    @classmethod
    def from_cell(cls, cell: CellSpec, cluster: Cluster) -> KServeArgs:
        """KServe of ``cell`` on ``cluster``: ``kserve`` and ``versions.kserve``."""
        return cls(cluster, cell.kserve, cell.versions.kserve)

    @property
    def deployment_mode(self) -> DeploymentMode:
        """The default deployment mode in force: ``spec.deployment_mode``, else the release's raw-Deployment mode."""
        return self.spec.deployment_mode or kserve_deployment_modes(self.version)[0]


@dataclass(frozen=True)
class KServeCharts:
    """The charts a KServe release is installed from."""

    crd: ChartSource
    """The CRD chart."""
    resources: ChartSource
    """The controller chart (``kserve-resources``, or ``kserve`` before v0.17)."""
    runtimes: ChartSource | None
    """The runtime-configs chart; ``None`` before v0.17, where the controller chart carries the runtimes."""


def kserve_charts(version: str) -> KServeCharts:
    """The OCI charts of KServe ``version`` (``v0.20.0``). Raises ``ValueError`` on a malformed version."""
    if kserve_has_split_charts(version):
        return KServeCharts(
            crd=ChartSource(f"{CHART_REGISTRY}/kserve-crd"),
            resources=ChartSource(f"{CHART_REGISTRY}/kserve-resources"),
            runtimes=ChartSource(f"{CHART_REGISTRY}/kserve-runtime-configs"),
        )
    return KServeCharts(
        crd=ChartSource(f"{CHART_REGISTRY}/kserve-crd"),
        resources=ChartSource(f"{CHART_REGISTRY}/kserve"),
        runtimes=None,
    )


def kserve_resources_values(version: str, mode: DeploymentMode) -> dict[str, Any]:
    """Values gpucell owns in the controller chart of KServe ``version`` (``kserve.values`` is merged over them
    later).

    - ``kserve.controller.deploymentMode``: ``mode`` (:attr:`KServeArgs.deployment_mode`: ``Standard`` since v0.16,
      ``RawDeployment`` before; the spec rejects the Knative modes, as gpucell installs no Knative).
    - ``gateway.ingressGateway.enableGatewayApi: false`` (a cell installs neither the Gateway API
      CRDs nor a gateway controller, so HTTPRoutes could not be created) and ``gateway.disableIngressCreation:
      true`` (a cell runs no ingress controller and no Istio: an ``istio``-class Ingress per InferenceService
      would never be served). Endpoints are the predictors' cluster Services.
    - ``kserve.certManager.enabled: true`` (v0.17+ charts): the webhook serving certificate comes from
      cert-manager, hence the ordering after :class:`~gpucell.components.cert_manager.CertManager`.
    """
    controller: dict[str, Any] = {
        "deploymentMode": mode.value,
        "gateway": {"disableIngressCreation": True, "ingressGateway": {"enableGatewayApi": False}},
    }
    kserve: dict[str, Any] = {"controller": controller}
    if kserve_has_split_charts(version):
        # The key appeared with the split charts; the older all-in-one chart always renders the Certificate.
        kserve["certManager"] = {"enabled": True}
    return {"kserve": kserve}


def kserve_runtime_values() -> dict[str, Any]:
    """Values of the ``kserve-runtime-configs`` chart: ``kserve.servingruntime.enabled: true``.

    The chart renders its ClusterServingRuntimes only when that flag is set (its default is ``false``);
    LLMInferenceServiceConfigs (``kserve.llmisvcConfigs``) stay off, as no LLMInferenceService controller is
    installed. ``kserve.values`` does not reach this chart.
    """
    return {"kserve": {"servingruntime": {"enabled": True}}}


class KServe(CellComponent):
    """KServe for one cluster: CRDs, then the controller, then the built-in serving runtimes.

    Children (``kubernetes:helm.sh/v3:Release``, on the provider of ``args.cluster`` and after its ``ready``):
    ``f"{name}-crd"``, ``f"{name}-resources"`` (depends on the
    CRDs) and ``f"{name}-runtimes"`` (depends on the controller; absent before v0.17). The controller's
    webhooks take their certificate from cert-manager, so construct this component with
    ``opts=pulumi.ResourceOptions(depends_on=[cert_manager])``: every child then waits for cert-manager's
    Release, which finishes only once its webhook serves.
    """

    namespace: pulumi.Output[str]
    """Namespace the KServe controller runs in (``kserve``)."""

    def __init__(self, name: str, args: KServeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("KServe", name, opts, args.cluster)
        version = args.version
        charts = kserve_charts(version)
        self.crds: Release = helm_release(
            f"{name}-crd",
            source=charts.crd,
            version=version,
            namespace=NAMESPACE,
            values={},
            overrides={},
            opts=self.child(),
        )
        self.resources: Release = helm_release(
            f"{name}-resources",
            source=charts.resources,
            version=version,
            namespace=NAMESPACE,
            values=kserve_resources_values(version, args.deployment_mode),
            overrides=args.spec.values,
            opts=self.child(depends_on=[self.crds]),
        )
        self.runtimes: Release | None = None
        if charts.runtimes is not None:
            self.runtimes = helm_release(
                f"{name}-runtimes",
                source=charts.runtimes,
                version=version,
                namespace=NAMESPACE,
                values=kserve_runtime_values(),
                overrides={},
                opts=self.child(depends_on=[self.resources]),
            )
        self.namespace = self.resources.namespace.apply(lambda ns: ns or NAMESPACE)
        self.register_outputs({"namespace": self.namespace})
