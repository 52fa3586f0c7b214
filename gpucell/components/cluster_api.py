"""Cluster API in the cell: the engine that builds tenant clusters, installed only where a tenant has one.

What is rendered (decision docs/decisions/0024-tenant-clusters.md):

- a Helm release of the ``cluster-api-operator`` chart (https://kubernetes-sigs.github.io/cluster-api-operator, at
  ``versions.capiOperator``) in ``capi-operator-system``, after cert-manager: its webhook certificate and every
  provider's are cert-manager ``Certificate`` objects. The operator image is the release's own
  (``registry.k8s.io/capi-operator/cluster-api-operator:v<chart>``; the chart in git carries a staging image) and the
  manager container is made Pod Security ``restricted`` (the image runs as UID 65532, its ``Dockerfile``);
- one namespace per provider and one provider object in it (``operator.cluster.x-k8s.io/v1alpha2``, checked against
  the operator's CRDs): ``CoreProvider`` ``cluster-api``, ``BootstrapProvider`` and ``ControlPlaneProvider``
  ``kubeadm`` (all at ``versions.clusterApi``), ``InfrastructureProvider`` ``kubevirt`` (CAPK, ``versions.capk``)
  and ``AddonProvider`` ``helm`` (CAAPH, ``versions.caaph``). The operator fetches each provider's release
  manifest from its GitHub release (clusterctl's provider list, ``cmd/clusterctl/client/config/providers_client.go``)
  and does what ``clusterctl init``/``upgrade`` do: substitutes the manifests' ``${VAR:=default}`` variables, which
  is why the manifests are not applied as plain YAML the way KubeVirt's operator manifest is. Each object carries
  ``pulumi.com/waitFor: condition=Ready`` (the operator's health check sets ``Ready`` from the provider Deployment's
  ``Available``, ``internal/controller/healthcheck``), so tenant clusters are created only once their CRDs and
  webhooks serve.

CAPK v0.11.2's manager Deployment sets no ``securityContext`` (``config/manager/manager.yaml``) although its image
runs as UID 65532 (``Dockerfile``): a strategic-merge patch (``spec.patches``) makes it ``restricted``, the level
every namespace of the cell enforces unless exempted; the other providers' manifests already are.

Every object takes the region's ``removalPolicy`` (``protect`` by default): deleting a provider object makes the
operator delete that provider's controllers, and with them every tenant cluster stops being reconciled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pulumi
import yaml
from pulumi_kubernetes.apiextensions import CustomResource
from pulumi_kubernetes.core.v1 import Namespace
from pulumi_kubernetes.helm.v3 import Release

from gpucell._component import MANAGED_BY, CellComponent, custom_resource
from gpucell.cluster import Cluster
from gpucell.components._chart import ChartSource, helm_release
from gpucell.components.kubevirt import release_tag
from gpucell.spec.lifecycle import RemovalPolicy, removal_options
from gpucell.spec.versions import Versions

if TYPE_CHECKING:
    from gpucell.spec.cell import CellSpec

__all__ = [
    "CHART",
    "OPERATOR_API",
    "OPERATOR_IMAGE",
    "OPERATOR_NAMESPACE",
    "PROVIDERS",
    "PROVIDER_NAMESPACES",
    "WAIT_FOR_READY",
    "ClusterApi",
    "ClusterApiArgs",
    "Provider",
    "operator_values",
    "provider_manifest",
]

CHART = ChartSource("cluster-api-operator", "https://kubernetes-sigs.github.io/cluster-api-operator")
"""The operator's chart and its repository."""
OPERATOR_NAMESPACE = "capi-operator-system"
"""Namespace of the operator (the chart's documented one)."""
OPERATOR_IMAGE = "registry.k8s.io/capi-operator/cluster-api-operator"
"""The operator's released image; the tag is ``v<chart version>``."""
OPERATOR_API = "operator.cluster.x-k8s.io/v1alpha2"
"""API of the provider objects (the only version the v0.28.0 CRDs serve)."""
WAIT_FOR_READY = {"pulumi.com/waitFor": "condition=Ready"}
"""Pulumi waits for the provider's ``Ready`` condition (pulumi-kubernetes v4.18+)."""
_RESTRICTED_CONTAINER = {
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
}


@dataclass(frozen=True)
class Provider:
    """One Cluster API provider the operator installs."""

    kind: str
    """The operator's kind (``CoreProvider``...)."""
    name: str
    """clusterctl's provider name (``cluster-api``, ``kubeadm``, ``kubevirt``, ``helm``)."""
    namespace: str
    """Where its controllers run (and its provider object lives)."""
    version_key: str
    """Field of :class:`gpucell.spec.Versions` that pins it."""
    patches: tuple[dict[str, Any], ...] = ()
    """``spec.patches`` of its provider object."""


_CAPK_RESTRICTED = {
    "target": {"kind": "Deployment", "name": "capk-controller-manager"},
    "patch": yaml.safe_dump(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "capk-controller-manager"},
            "spec": {
                "template": {
                    "spec": {
                        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                        "containers": [
                            {
                                "name": "manager",
                                "securityContext": {
                                    "allowPrivilegeEscalation": False,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                            }
                        ],
                    }
                }
            },
        },
        sort_keys=False,
    ),
}
"""CAPK's manager made Pod Security ``restricted`` (see the module doc)."""

PROVIDERS = (
    Provider("CoreProvider", "cluster-api", "capi-system", "cluster_api"),
    Provider("BootstrapProvider", "kubeadm", "capi-kubeadm-bootstrap-system", "cluster_api"),
    Provider("ControlPlaneProvider", "kubeadm", "capi-kubeadm-control-plane-system", "cluster_api"),
    Provider("InfrastructureProvider", "kubevirt", "capk-system", "capk", patches=(_CAPK_RESTRICTED,)),
    Provider("AddonProvider", "helm", "caaph-system", "caaph"),
)
"""The providers, core first (the operator installs the others once it is Ready)."""
PROVIDER_NAMESPACES = tuple(p.namespace for p in PROVIDERS)
"""Namespaces of the provider controllers: what a tenant cluster's control plane admits on its API port."""


def provider_manifest(provider: Provider, version: str) -> dict[str, Any]:
    """The provider object of ``provider`` at ``version``: ``spec.version`` and its ``spec.patches``, annotated
    :data:`WAIT_FOR_READY`."""
    spec: dict[str, Any] = {"version": version}
    if provider.patches:
        spec["patches"] = [dict(p) for p in provider.patches]
    return {
        "apiVersion": OPERATOR_API,
        "kind": provider.kind,
        "metadata": {
            "name": provider.name,
            "namespace": provider.namespace,
            "labels": dict(MANAGED_BY),
            "annotations": dict(WAIT_FOR_READY),
        },
        "spec": spec,
    }


def operator_values(chart_version: str) -> dict[str, Any]:
    """The chart values gpucell sets: the released image ``v<chart_version>`` and a ``restricted`` manager
    container; no provider values (the provider objects are rendered by :func:`provider_manifest`)."""
    return {
        "image": {"manager": {"repository": OPERATOR_IMAGE, "tag": release_tag(chart_version)}},
        "containerSecurityContext": {"manager": dict(_RESTRICTED_CONTAINER)},
    }


@dataclass(frozen=True)
class ClusterApiArgs:
    """Inputs of :class:`ClusterApi`: only what it uses. Construct the component with ``depends_on`` cert-manager
    (its webhook issues every provider's certificate)."""

    cluster: Cluster
    """The cluster to install into (its provider and readiness): the management cluster of the tenant clusters."""
    cluster_api: str
    """Core and kubeadm providers' release (``versions.clusterApi``)."""
    capk: str
    """CAPK release (``versions.capk``)."""
    caaph: str
    """CAAPH release (``versions.caaph``)."""
    operator_chart: str
    """cluster-api-operator chart version (``versions.capiOperator``)."""
    removal_policy: RemovalPolicy = RemovalPolicy.PROTECT
    """The region's ``removalPolicy``."""
    values: Mapping[str, Any] = field(default_factory=dict)
    """Operator chart values merged last."""

    @classmethod
    def from_cell(cls, cell: CellSpec, cluster: Cluster) -> ClusterApiArgs:
        """Cluster API of ``cell`` on ``cluster``: ``versions.clusterApi``, ``versions.capk``, ``versions.caaph``,
        ``versions.capiOperator`` and ``removalPolicy``."""
        return cls.from_versions(cluster, cell.versions, removal_policy=cell.removal_policy)

    @classmethod
    def from_versions(
        cls, cluster: Cluster, versions: Versions, *, removal_policy: RemovalPolicy = RemovalPolicy.PROTECT
    ) -> ClusterApiArgs:
        """The args of a ``versions`` section (:class:`~gpucell.spec.versions.Versions`, gpucell's pins by default)."""
        return cls(
            cluster,
            versions.cluster_api,
            versions.capk,
            versions.caaph,
            versions.capi_operator,
            removal_policy=removal_policy,
        )

    def version_of(self, provider: Provider) -> str:
        """The pinned release of ``provider`` as its GitHub release tag (``1.14.0`` and ``v1.14.0`` give ``v1.14.0``):
        the operator fetches ``metadata.yaml`` and the components from the release named by ``spec.version``
        (cluster-api-operator v0.28.0 ``internal/controller/manifests_downloader.go``, ``repo.GetFile``), and
        Cluster API's providers tag their releases ``vX.Y.Z``."""
        pinned = {"cluster_api": self.cluster_api, "capk": self.capk, "caaph": self.caaph}[provider.version_key]
        return release_tag(pinned)


class ClusterApi(CellComponent):
    """Cluster API with CAPK and CAAPH in one cluster (``gpucell:index:ClusterApi``).

    Children: ``{name}-operator`` (the chart's Release), ``{name}-<namespace>`` (a Namespace per provider) and
    ``{name}-<kind>`` (each provider object, after the Release, its Namespace and the core provider). Dependents
    wait for :attr:`ready`: every provider object, each Ready.
    """

    namespace: pulumi.Output[str]
    """The operator's namespace (``capi-operator-system``)."""

    def __init__(self, name: str, args: ClusterApiArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("ClusterApi", name, opts, args.cluster)
        self.installed_on = args.cluster
        """The cluster it is installed into, where tenant clusters' objects go."""
        lifecycle = removal_options(args.removal_policy)
        self.release: Release = helm_release(
            f"{name}-operator",
            source=CHART,
            version=args.operator_chart,
            namespace=OPERATOR_NAMESPACE,
            values=operator_values(args.operator_chart),
            overrides=args.values,
            opts=self.child(**lifecycle),
        )
        self.namespaces: dict[str, Namespace] = {
            provider.namespace: Namespace(
                f"{name}-{provider.namespace}",
                metadata={"name": provider.namespace, "labels": dict(MANAGED_BY)},
                opts=self.child(**lifecycle),
            )
            for provider in PROVIDERS
        }
        self.providers: dict[str, CustomResource] = {}
        """Provider kind -> its object."""
        for provider in PROVIDERS:
            core = [self.providers["CoreProvider"]] if self.providers else []
            self.providers[provider.kind] = custom_resource(
                f"{name}-{provider.kind.lower()}",
                provider_manifest(provider, args.version_of(provider)),
                self.child(depends_on=[self.release, self.namespaces[provider.namespace], *core], **lifecycle),
            )
        self.ready: list[pulumi.Resource] = list(self.providers.values())
        """What a tenant cluster's objects come after: every provider Ready (their CRDs and webhooks serve)."""
        self.namespace = self.release.namespace.apply(lambda ns: ns or OPERATOR_NAMESPACE)
        self.register_outputs({"namespace": self.namespace})
