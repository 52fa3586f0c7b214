"""EndpointGateway: the HTTPS front door of a cell's model endpoints (Gateway API on Cilium, TLS from cert-manager).

What is rendered, in namespace ``gpucell-gateway`` (:data:`gpucell.components.lb_ipam.GATEWAY_NAMESPACE`) unless said
otherwise:

- the ``Namespace``;
- a ``cert-manager.io/v1`` ``ClusterIssuer`` ``gpucell-gateway`` (:func:`cluster_issuer_manifest`): ACME with
  cert-manager's ``gatewayHTTPRoute`` HTTP-01 solver attached to the Gateways' ``http`` listener, or the operator's
  CA Secret;
- one ``cert-manager.io/v1`` ``Certificate`` ``<tenant>-<endpoint>`` per exposed endpoint, for its host name only,
  into Secret ``<tenant>-<endpoint>-tls`` (:func:`certificate_manifest`);
- one ``gateway.networking.k8s.io/v1`` ``Gateway`` ``gpucell`` (or ``gpucell-<tenant>`` with ``perTenant``) of
  GatewayClass ``cilium`` (:func:`gateway_manifest`): one HTTPS listener per endpoint (its host name, its
  certificate, routes admitted only from that endpoint's tenant namespace), plus with ACME a plain-HTTP listener on
  port 80 that admits routes of this namespace only (the solver's). Its LoadBalancer Service (which Cilium creates)
  gets the pool's label and the fixed address through ``spec.infrastructure`` (Gateway API "GatewayInfrastructure":
  labels and annotations propagated to generated resources).

The HTTPRoute of each endpoint lives in its tenant's namespace and is rendered by :mod:`gpucell.workloads.
model_endpoint` from :class:`EndpointRoute`. Why gpucell's own HTTPRoutes rather than KServe's Gateway API
integration: ``docs/decisions/0020-traffic-in.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi_kubernetes.core.v1 import Namespace

from gpucell._component import MANAGED_BY, CellComponent, custom_resource
from gpucell.spec.tenancy import namespace_of
from gpucell.spec.traffic import ADDRESS_ANNOTATION, GATEWAY_NAMESPACE, POOL_LABEL, GatewaySpec, endpoint_host

if TYPE_CHECKING:
    from gpucell.cluster import Cluster
    from gpucell.spec.cell import CellSpec

__all__ = [
    "CLUSTER_ISSUER",
    "GATEWAY_CLASS",
    "HTTP_LISTENER",
    "EndpointGateway",
    "EndpointGatewayArgs",
    "EndpointRoute",
    "certificate_manifest",
    "cluster_issuer_manifest",
    "exposed_endpoints",
    "gateway_manifest",
    "gateway_name",
]

GATEWAY_CLASS = "cilium"
"""The GatewayClass Cilium creates with ``gatewayAPI.enabled`` (chart value ``gatewayAPI.gatewayClass.create``)."""
CLUSTER_ISSUER = "gpucell-gateway"
"""Name of the ClusterIssuer every endpoint certificate comes from."""
HTTP_LISTENER = "http"
"""The plain-HTTP listener ACME HTTP-01 challenges are answered on."""
GATEWAY_GROUP = "gateway.networking.k8s.io"


@dataclass(frozen=True)
class EndpointRoute:
    """Where one exposed endpoint is served: its tenant, name and host, and the Gateway listener it attaches to."""

    tenant: str
    endpoint: str
    host: str
    gateway: str
    """``metadata.name`` of the Gateway (in :data:`GATEWAY_NAMESPACE`)."""

    @property
    def listener(self) -> str:
        """Listener name (Gateway API ``SectionName``): ``<tenant>-<endpoint>``."""
        return f"{self.tenant}-{self.endpoint}"

    @property
    def secret_name(self) -> str:
        """The certificate's Secret: ``<tenant>-<endpoint>-tls``."""
        return f"{self.listener}-tls"


def gateway_name(spec: GatewaySpec, tenant: str) -> str:
    """The Gateway serving ``tenant``: ``gpucell``, or ``gpucell-<tenant>`` with ``perTenant``."""
    return f"gpucell-{tenant}" if spec.per_tenant else "gpucell"


def exposed_endpoints(cell: CellSpec) -> list[EndpointRoute]:
    """Every endpoint of ``cell`` with ``expose``, in config order (empty without ``gateway``)."""
    if cell.gateway is None:
        return []
    return [
        EndpointRoute(
            tenant,
            name,
            endpoint_host(name, tenant, cell.gateway.domain, endpoint.expose.host),
            gateway_name(cell.gateway, tenant),
        )
        for tenant, spec in cell.tenants.items()
        for name, endpoint in spec.model_endpoints.items()
        if endpoint.expose is not None
    ]


def _meta(name: str, namespace: str | None = GATEWAY_NAMESPACE) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(MANAGED_BY)}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def cluster_issuer_manifest(spec: GatewaySpec, gateways: Sequence[str]) -> dict[str, Any]:
    """The ``ClusterIssuer`` :data:`CLUSTER_ISSUER`. ACME: ``server``, ``email``, the account key in Secret
    ``gpucell-gateway-acme-account`` and one ``http01.gatewayHTTPRoute`` solver whose ``parentRefs`` are the
    ``http`` listeners of ``gateways`` (cert-manager v1.21 ``ACMEChallengeSolverHTTP01GatewayHTTPRoute``). CA:
    ``ca.secretName``."""
    issuer = spec.issuer
    if issuer.acme is not None:
        refs = [
            {
                "group": GATEWAY_GROUP,
                "kind": "Gateway",
                "name": name,
                "namespace": GATEWAY_NAMESPACE,
                "sectionName": HTTP_LISTENER,
            }
            for name in gateways
        ]
        body: dict[str, Any] = {
            "acme": {
                "server": issuer.acme.server,
                "email": issuer.acme.email,
                "privateKeySecretRef": {"name": f"{CLUSTER_ISSUER}-acme-account"},
                "solvers": [{"http01": {"gatewayHTTPRoute": {"parentRefs": refs}}}],
            }
        }
    else:
        assert issuer.ca is not None  # IssuerSpec requires one of the two
        body = {"ca": {"secretName": issuer.ca.secret_name}}
    return {
        "apiVersion": "cert-manager.io/v1",
        "kind": "ClusterIssuer",
        "metadata": _meta(CLUSTER_ISSUER, None),
        "spec": body,
    }


def certificate_manifest(route: EndpointRoute) -> dict[str, Any]:
    """The ``Certificate`` of one endpoint: ``dnsNames`` its host, ``secretName`` :attr:`EndpointRoute.secret_name`,
    issued by the ClusterIssuer :data:`CLUSTER_ISSUER`."""
    return {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": _meta(route.listener),
        "spec": {
            "secretName": route.secret_name,
            "dnsNames": [route.host],
            "issuerRef": {"group": "cert-manager.io", "kind": "ClusterIssuer", "name": CLUSTER_ISSUER},
        },
    }


def gateway_manifest(name: str, spec: GatewaySpec, routes: Sequence[EndpointRoute]) -> dict[str, Any]:
    """The ``Gateway`` ``name`` serving ``routes`` (see the module doc). ``spec.infrastructure.labels`` carries the
    pool label; ``annotations`` the fixed address (``lbipam.cilium.io/ips``) when ``gateway.address`` is set."""
    listeners: list[dict[str, Any]] = []
    if spec.issuer.acme is not None:
        listeners.append(
            {"name": HTTP_LISTENER, "port": 80, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "Same"}}}
        )
    for route in routes:
        listeners.append(
            {
                "name": route.listener,
                "hostname": route.host,
                "port": 443,
                "protocol": "HTTPS",
                "tls": {"mode": "Terminate", "certificateRefs": [{"kind": "Secret", "name": route.secret_name}]},
                "allowedRoutes": {
                    "namespaces": {
                        "from": "Selector",
                        "selector": {"matchLabels": {"kubernetes.io/metadata.name": namespace_of(route.tenant)}},
                    },
                    "kinds": [{"group": GATEWAY_GROUP, "kind": "HTTPRoute"}],
                },
            }
        )
    infrastructure: dict[str, Any] = {"labels": {POOL_LABEL: spec.pool}}
    if spec.address is not None:
        infrastructure["annotations"] = {ADDRESS_ANNOTATION: str(spec.address)}
    return {
        "apiVersion": f"{GATEWAY_GROUP}/v1",
        "kind": "Gateway",
        "metadata": _meta(name),
        "spec": {"gatewayClassName": GATEWAY_CLASS, "infrastructure": infrastructure, "listeners": listeners},
    }


@dataclass(frozen=True)
class EndpointGatewayArgs:
    """Inputs of :class:`EndpointGateway`."""

    cluster: Cluster
    """The cluster to install into (its provider and readiness)."""
    gateway: GatewaySpec
    """The region's ``gateway``."""
    routes: Sequence[EndpointRoute]
    """The exposed endpoints (:func:`exposed_endpoints`)."""


class EndpointGateway(CellComponent):
    """The cell's Gateway(s), their certificates and issuer (``gpucell:index:EndpointGateway``).

    Children: ``f"{name}-namespace"``, ``f"{name}-issuer"``, ``f"{name}-cert-<tenant>-<endpoint>"`` and
    ``f"{name}-gateway"`` (``f"{name}-gateway-<tenant>"`` with ``perTenant``). Give it the cell's provider and make it
    depend on Cilium (GatewayClass ``cilium``) and cert-manager (its CRDs and webhook). A Gateway exists for the cell
    even before any endpoint is exposed (with ACME, its HTTP listener); with ``perTenant``, one per tenant that
    exposes an endpoint. Changing the domain or a host re-issues that endpoint's certificate and moves its listener;
    clients must follow the new name (``gpucell diff`` lists the hosts).
    """

    gateway_names: pulumi.Output[list[str]]
    """``metadata.name`` of every Gateway."""

    def __init__(self, name: str, args: EndpointGatewayArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("EndpointGateway", name, opts, args.cluster)
        spec, routes = args.gateway, list(args.routes)
        namespace_meta: Any = _meta(GATEWAY_NAMESPACE, None)
        self.namespace = Namespace(f"{name}-namespace", metadata=namespace_meta, opts=self.child())
        inside = self.child(depends_on=[self.namespace])
        by_gateway: dict[str, list[EndpointRoute]] = {}
        if not spec.per_tenant:
            by_gateway["gpucell"] = []
        for route in routes:
            by_gateway.setdefault(route.gateway, []).append(route)
        self.issuer = custom_resource(f"{name}-issuer", cluster_issuer_manifest(spec, list(by_gateway)), self.child())
        self.certificates = [
            custom_resource(
                f"{name}-cert-{route.listener}",
                certificate_manifest(route),
                self.child(depends_on=[self.namespace, self.issuer]),
            )
            for route in routes
        ]
        self.gateways = {
            gateway: custom_resource(
                f"{name}-gateway{gateway.removeprefix('gpucell')}", gateway_manifest(gateway, spec, served), inside
            )
            for gateway, served in by_gateway.items()
        }
        """Gateway name -> its ``Gateway``; HTTPRoutes depend on theirs."""
        names = list(self.gateways)
        self.gateway_names = pulumi.Output.all(*[g.urn for g in self.gateways.values()]).apply(lambda _: names)
        self.register_outputs({"gatewayNames": self.gateway_names})
