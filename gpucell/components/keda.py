"""KEDA: the autoscaler behind model endpoints that scale on a vLLM metric.

One Helm release of chart ``keda`` (https://kedacore.github.io/charts) at ``versions.keda`` in namespace ``keda``,
installed when an endpoint of the cell has a ``vllm-*`` ``scaleMetric``. KServe v0.20.0's own KEDA integration does
the rest: an InferenceService annotated ``serving.kserve.io/autoscalerClass: keda`` with ``autoScaling.metrics``
gets a ScaledObject from the KServe controller (Standard mode only; KServe's "Autoscale InferenceService with LLM
metrics"), whose ``prometheus`` trigger queries the cell's Prometheus
(:data:`gpucell.components.metrics.PROMETHEUS_URL`).
The chart's pods meet Pod Security ``restricted`` (its ``securityContext``/``podSecurityContext`` defaults at
2.20.2), so ``keda`` keeps the cell's default level.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi_kubernetes.helm.v3 import Release

from gpucell._component import CellComponent
from gpucell.components._chart import ChartSource, helm_release
from gpucell.spec.versions import Versions

if TYPE_CHECKING:
    from gpucell.cluster import Cluster

__all__ = ["CHART", "NAMESPACE", "RELEASE_NAME", "Keda", "KedaArgs"]

CHART = ChartSource("keda", "https://kedacore.github.io/charts")
"""The chart and its repository."""
NAMESPACE = "keda"
"""Namespace of KEDA's operator, metrics server and webhooks (KEDA's documented default)."""
RELEASE_NAME = "keda"
"""Helm release name."""


@dataclass(frozen=True)
class KedaArgs:
    """Inputs of :class:`Keda`."""

    cluster: Cluster
    """The cluster to install into (its provider and readiness)."""
    version: str = Versions().keda
    """Chart version (``versions.keda``); defaults to gpucell's pin."""
    values: dict[str, Any] = field(default_factory=dict)
    """Chart values; gpucell sets none of its own (the chart's defaults serve KServe's ScaledObjects)."""


class Keda(CellComponent):
    """KEDA in one cell (``gpucell:index:Keda``). Children: one ``kubernetes:helm.sh/v3:Release`` ``f"{name}-keda"``.
    Construct it after Cilium; endpoints scaled by KEDA wait for it (their ScaledObject needs its CRDs)."""

    namespace: pulumi.Output[str]
    """``keda``."""

    def __init__(self, name: str, args: KedaArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("Keda", name, opts, args.cluster)
        self.release: Release = helm_release(
            f"{name}-keda",
            source=CHART,
            version=args.version,
            namespace=NAMESPACE,
            values={},
            overrides=args.values,
            opts=self.child(),
            release_name=RELEASE_NAME,
        )
        self.namespace = self.release.namespace.apply(lambda ns: ns or NAMESPACE)
        self.register_outputs({"namespace": self.namespace})
