"""GatewayApiCrds: the standard-channel CRDs of Gateway API, installed before Cilium.

Cilium ships no Gateway API CRDs ("Prerequisites" of Cilium 1.20's Gateway API support; cilium/cilium#27139), and its
operator only starts the Gateway API controller for kinds that exist when it starts (otherwise it has to be restarted:
rancher/rke2#8839, cilium/cilium#29207). So this component applies the release's ``standard-install.yaml``
(GatewayClass, Gateway, HTTPRoute, GRPCRoute, ReferenceGrant and, since v1.5, TLSRoute; the files in
``shared/upstream/gateway-api/`` are those CRDs at v1.5.1) right after the API server answers, and the cell's Cilium
depends on it. Nothing here needs a CNI: CRDs are API objects only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pulumi
from pulumi_kubernetes.yaml.v2 import ConfigFile

from gpucell._component import CellComponent
from gpucell.spec.versions import Versions

if TYPE_CHECKING:
    from gpucell.cluster import Cluster

__all__ = ["GatewayApiCrds", "GatewayApiCrdsArgs", "standard_install_url"]


@dataclass(frozen=True)
class GatewayApiCrdsArgs:
    """Inputs of :class:`GatewayApiCrds`."""

    cluster: Cluster
    """The cluster to install into (its provider; ``ready``: the API server answering)."""
    version: str = Versions().gateway_api
    """Gateway API release (``versions.gatewayApi``, ``v1.5.1``); defaults to gpucell's pin."""


def standard_install_url(version: str) -> str:
    """The release asset holding the standard channel's CRDs:
    ``https://github.com/kubernetes-sigs/gateway-api/releases/download/<version>/standard-install.yaml``."""
    tag = version if version.startswith("v") else f"v{version}"
    return f"https://github.com/kubernetes-sigs/gateway-api/releases/download/{tag}/standard-install.yaml"


class GatewayApiCrds(CellComponent):
    """Gateway API CRDs for one cell (``gpucell:index:GatewayApiCrds``).

    Children: ``f"{name}-crds"``, a ``kubernetes:yaml/v2:ConfigFile`` of :func:`standard_install_url`, with
    ``retainOnDelete``: removing the cell's ``gateway`` must not delete the CRDs and with them every Gateway and
    route in the cluster, other controllers' included. A new ``versions.gatewayApi`` updates the CRDs in place.
    """

    url: pulumi.Output[str]
    """The manifest applied."""

    def __init__(self, name: str, args: GatewayApiCrdsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("GatewayApiCrds", name, opts, args.cluster)
        url = standard_install_url(args.version)
        self.crds = ConfigFile(f"{name}-crds", file=url, opts=self.child(retain_on_delete=True))
        self.url = self.crds.urn.apply(lambda _: url)
        self.register_outputs({"url": self.url})
