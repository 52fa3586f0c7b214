"""What every gpucell component shares: the fixed type token, how children get their options, the label every
object carries and how a rendered custom resource is registered."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi_kubernetes.apiextensions import CustomResource

if TYPE_CHECKING:
    from gpucell.cluster import Cluster

__all__ = ["MANAGED_BY", "CellComponent", "custom_resource"]

MANAGED_BY = {"app.kubernetes.io/managed-by": "gpucell"}
"""Label every gpucell object carries."""


def custom_resource(resource_name: str, manifest: Mapping[str, Any], opts: pulumi.ResourceOptions) -> CustomResource:
    """Register a rendered ``{apiVersion, kind, metadata, spec}`` manifest, exactly as rendered, as an
    ``apiextensions.CustomResource`` named ``resource_name``."""
    return CustomResource(
        resource_name,
        api_version=manifest["apiVersion"],
        kind=manifest["kind"],
        metadata=manifest["metadata"],
        spec=manifest["spec"],
        opts=opts,
    )


class CellComponent(pulumi.ComponentResource):
    """Base of gpucell components: type token ``gpucell:index:<ClassName>``, ``(name, args, opts)`` constructors.

    Pulumi does not hand a component's ``depends_on`` to its children, so a component that must come after
    something (Cilium after the servers answer, KServe after cert-manager) would start its children early.
    :meth:`child` adds the component's own ``depends_on`` to every child, making the ordering real.

    A component deployed into a cluster is given its :class:`~gpucell.cluster.Cluster`: the cluster's provider goes
    on the component (its children inherit it) and the cluster's ``ready`` comes first among its ``depends_on``
    (:meth:`gpucell.cluster.Cluster.component_options`).
    """

    def __init__(
        self, class_name: str, name: str, opts: pulumi.ResourceOptions | None, cluster: Cluster | None = None
    ) -> None:
        if cluster is not None:
            opts = cluster.component_options(opts)
        super().__init__(f"gpucell:index:{class_name}", name, None, opts)
        self._after: list[pulumi.Resource] = list(_as_list((opts or pulumi.ResourceOptions()).depends_on))

    def child(self, *, depends_on: Sequence[pulumi.Resource] = (), **kwargs: object) -> pulumi.ResourceOptions:
        """Options for a direct child: ``parent=self`` (so it inherits the providers) and the component's ordering."""
        return pulumi.ResourceOptions(parent=self, depends_on=[*self._after, *depends_on], **kwargs)  # type: ignore[arg-type]


def _as_list(value: object) -> list[pulumi.Resource]:
    """``ResourceOptions.depends_on`` as a list: ``None``, one resource, or a sequence of them."""
    if value is None:
        return []
    if isinstance(value, pulumi.Resource):
        return [value]
    if isinstance(value, Sequence):
        return [r for r in value if isinstance(r, pulumi.Resource)]
    raise TypeError(f"depends_on must be resources, not {type(value).__name__} (an Output is not supported here)")
