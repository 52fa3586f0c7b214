"""cert-manager: issues the serving certificates of KServe's (and other operators') admission webhooks.

One Helm release (``cert-manager`` from https://charts.jetstack.io) in namespace ``cert-manager``, with the
CRDs installed by the chart. Key paths checked against the chart's default values at the pinned version
(``deploy/charts/cert-manager/values.yaml`` of cert-manager/cert-manager v1.21.1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi_kubernetes.helm.v3 import Release

from gpucell._component import CellComponent
from gpucell.components._chart import ChartSource, helm_release
from gpucell.spec.platform import ChartSpec
from gpucell.spec.versions import Versions

if TYPE_CHECKING:
    from gpucell.cluster import Cluster
    from gpucell.spec.cell import CellSpec

__all__ = ["CHART", "NAMESPACE", "CertManager", "CertManagerArgs", "cert_manager_values"]

CHART = ChartSource("cert-manager", "https://charts.jetstack.io")
"""Jetstack's Helm repository and chart name."""
NAMESPACE = "cert-manager"
"""Namespace of cert-manager (fixed: each cell is its own cluster)."""


@dataclass(frozen=True)
class CertManagerArgs:
    """Inputs of :class:`CertManager`: only what it uses."""

    cluster: Cluster
    """The cluster to install into (its provider and readiness)."""
    spec: ChartSpec = field(default_factory=ChartSpec)
    """The ``certManager`` section (chart ``values``). Defaults to none."""
    version: str = Versions().cert_manager
    """Chart version (``versions.certManager``); defaults to gpucell's pin."""
    gateway_api: bool = False
    """cert-manager solves ACME HTTP-01 challenges with Gateway API HTTPRoutes (``enableGatewayAPI``; the Gateway API
    CRDs must exist before it starts). Defaults to false."""

    @classmethod
    def from_cell(cls, cell: CellSpec, cluster: Cluster) -> CertManagerArgs:
        """cert-manager of ``cell`` on ``cluster``: ``certManager``, ``versions.certManager``, and the Gateway API
        when the ``gateway`` issues from ACME."""
        acme = cell.gateway is not None and cell.gateway.issuer.acme is not None
        return cls(cluster, cell.cert_manager, cell.versions.cert_manager, acme)


def cert_manager_values(*, gateway_api: bool = False) -> dict[str, Any]:
    """The chart values gpucell owns (``certManager.values`` is merged over them later).

    ``crds.enabled: true`` installs the CRDs with the release; ``crds.keep: true`` (the chart default,
    stated so an override is deliberate) keeps them, and so every Certificate, when the release is
    uninstalled. The top-level ``installCRDs`` is the deprecated spelling of ``crds.enabled`` and is left
    alone.

    With ``gateway_api`` (a cell's ACME ``gateway`` issuer): ``config`` (a ``ControllerConfiguration``,
    ``controller.config.cert-manager.io/v1alpha1``) with ``enableGatewayAPI: true``, which cert-manager needs to
    solve HTTP-01 challenges with ``gatewayHTTPRoute`` (cert-manager docs "Gateway API"; on a cell the Gateway API
    CRDs exist before cert-manager starts, since it comes after Cilium).
    """
    values: dict[str, Any] = {"crds": {"enabled": True, "keep": True}}
    if gateway_api:
        values["config"] = {
            "apiVersion": "controller.config.cert-manager.io/v1alpha1",
            "kind": "ControllerConfiguration",
            "enableGatewayAPI": True,
        }
    return values


class CertManager(CellComponent):
    """cert-manager for one cluster. Depend on this component to run after its webhook serves.

    Children: one ``kubernetes:helm.sh/v3:Release`` named ``f"{name}-cert-manager"`` (Helm release
    ``cert-manager``, chart version ``args.version``), on the provider of ``args.cluster`` and after its ``ready``.
    Helm waits for the controller, webhook and cainjector Deployments to be ready and for the chart's
    ``startupapicheck`` post-install Job, which succeeds only once the webhook admits a test Certificate; so the
    Release is done when Certificates can be created.
    """

    namespace: pulumi.Output[str]
    """Namespace cert-manager runs in (``cert-manager``)."""

    def __init__(self, name: str, args: CertManagerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("CertManager", name, opts, args.cluster)
        self.release: Release = helm_release(
            f"{name}-cert-manager",
            source=CHART,
            version=args.version,
            namespace=NAMESPACE,
            values=cert_manager_values(gateway_api=args.gateway_api),
            overrides=args.spec.values,
            opts=self.child(),
        )
        self.namespace = self.release.namespace.apply(lambda ns: ns or NAMESPACE)
        self.register_outputs({"namespace": self.namespace})
