"""What every gpucell component shares: the fixed type token, how children get their options, the label every
object carries and how a rendered custom resource is registered."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi_kubernetes.apiextensions import CustomResource

if TYPE_CHECKING:
    from gpucell.cluster import Cluster

__all__ = ["MANAGED_BY", "CellComponent", "custom_resource", "resolved_or_failed", "resources_later"]

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


_LATER: list[list[asyncio.Future[list[pulumi.Resource]]]] = []
"""The futures :func:`resources_later` made inside each open :func:`resolved_or_failed` block, innermost last."""


def resources_later() -> tuple[pulumi.Output[list[pulumi.Resource]], Callable[[Sequence[pulumi.Resource]], None]]:
    """An Output of resources that are built *after* the resources that must wait for them, and the function that
    gives it its value: ``(after, resolve)``. Pass ``after`` as (part of) ``depends_on`` of the earlier resources and
    call ``resolve([...])`` once the later ones exist, before the program ends.

    Pulumi sends a resource's registration only once its ``depends_on`` Inputs resolve, so the earlier resources are
    registered after the later ones, with those as dependencies: an ordering edge against the construction order
    (the region's agents' ``-prepare`` wait for the GPU Operator, which needs the cluster they belong to). Must be
    called while the program's event loop runs (inside a Pulumi program or :func:`gpucell.testing.run_program`),
    inside :func:`resolved_or_failed`, which fails ``after`` when the code between fails, instead of leaving the
    program waiting for it forever.
    """
    future: asyncio.Future[list[pulumi.Resource]] = asyncio.get_running_loop().create_future()
    if _LATER:
        _LATER[-1].append(future)

    def resolve(resources: Sequence[pulumi.Resource]) -> None:
        future.set_result(list(resources))

    return pulumi.Output.from_input(future), resolve


@contextmanager
def resolved_or_failed(where: str) -> Iterator[None]:
    """Run a block that makes :func:`resources_later` Outputs and resolves them; when the block raises, or ends
    with one unresolved, fail those Outputs.

    Why: the Pulumi SDK waits for every registration the program started before it reports the program's error
    (``run_pulumi_func`` in pulumi 3.272 ``pulumi/runtime/stack.py``), and a registration waiting for a future
    nobody resolves would make ``pulumi up`` (and the offline plan) hang instead of failing. Failed with the
    block's own exception, the waiting registrations are never sent and the program fails with that error.
    ``where`` names the block in the error for an Output left unresolved (a defect of the block's code).
    """
    made: list[asyncio.Future[list[pulumi.Resource]]] = []
    _LATER.append(made)
    try:
        yield
    except BaseException as error:
        _fail(made, error)
        raise
    finally:
        _LATER.remove(made)
    _fail(made, RuntimeError(f"{where}: a resources_later() Output was never resolved"))


def _fail(futures: list[asyncio.Future[list[pulumi.Resource]]], error: BaseException) -> None:
    for future in futures:
        if not future.done():
            future.set_exception(error)


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

    def child(
        self, *, depends_on: Sequence[pulumi.Resource] | pulumi.Output[list[pulumi.Resource]] = (), **kwargs: object
    ) -> pulumi.ResourceOptions:
        """Options for a direct child: ``parent=self`` (so it inherits the providers) and the component's ordering.
        ``depends_on`` may be an Output of resources (:func:`resources_later`)."""
        after = self._after
        if isinstance(depends_on, pulumi.Output):
            waits: Any = depends_on.apply(lambda resources: [*after, *resources])
        else:
            waits = [*after, *depends_on]
        return pulumi.ResourceOptions(parent=self, depends_on=waits, **kwargs)  # type: ignore[arg-type]


def _as_list(value: object) -> list[pulumi.Resource]:
    """``ResourceOptions.depends_on`` as a list: ``None``, one resource, or a sequence of them."""
    if value is None:
        return []
    if isinstance(value, pulumi.Resource):
        return [value]
    if isinstance(value, Sequence):
        return [r for r in value if isinstance(r, pulumi.Resource)]
    raise TypeError(f"depends_on must be resources, not {type(value).__name__} (an Output is not supported here)")
