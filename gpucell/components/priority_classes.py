"""PriorityClasses: the cell's ``priorityClasses``, which tenants' VMs, notebooks and endpoints name.

One cluster-scoped ``scheduling.k8s.io/v1`` ``PriorityClass`` per class (Kubernetes "Pod Priority and Preemption"),
never ``globalDefault``. Kubernetes refuses to change a class's ``value`` or ``preemptionPolicy`` in place
("may not be changed in an update", ``ValidatePriorityClassUpdate``), so a change of either replaces the class
(deleted, then created under its name): pods already running keep the priority they were admitted with, new pods
get the new one. Who may name which class is fenced per tenant by
:func:`gpucell.tenancy.tenant.priority_quota_manifest`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pulumi
from pulumi_kubernetes.scheduling.v1 import PriorityClass

from gpucell._component import MANAGED_BY, CellComponent
from gpucell.cluster import Cluster
from gpucell.spec.scheduling import PriorityClassSpec

if TYPE_CHECKING:
    from gpucell.spec import CellSpec

__all__ = ["PriorityClasses", "PriorityClassesArgs", "priority_class_manifest"]


def priority_class_manifest(name: str, spec: PriorityClassSpec) -> dict[str, Any]:
    """The ``PriorityClass`` ``name``: ``value``, ``preemptionPolicy``, ``globalDefault: false``, ``description``
    (with the tenants that may name it when it is not open to all)."""
    open_to = f"tenants {', '.join(spec.tenants)}" if spec.tenants else "every tenant"
    description = f"{spec.description} ({open_to})" if spec.description is not None else f"for {open_to}"
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name, "labels": dict(MANAGED_BY)},
        "value": spec.value,
        "preemptionPolicy": spec.preemption_policy.value,
        "globalDefault": False,
        "description": description,
    }


@dataclass(frozen=True)
class PriorityClassesArgs:
    """Inputs of :class:`PriorityClasses`."""

    cluster: Cluster
    """The cluster to install into."""
    classes: Mapping[str, PriorityClassSpec] = field(default_factory=dict)
    """``priorityClasses`` of the region."""

    @classmethod
    def from_cell(cls, cell: CellSpec, cluster: Cluster) -> PriorityClassesArgs:
        """The args of ``cell``: its ``priorityClasses``."""
        return cls(cluster, cell.priority_classes)


class PriorityClasses(CellComponent):
    """The cell's PriorityClasses (``gpucell:index:PriorityClasses``). Children: ``f"{name}-<class>"`` each, with
    ``replaceOnChanges`` on ``value`` and ``preemptionPolicy`` and ``deleteBeforeReplace`` (the name is kept).
    Workloads naming a class come after it."""

    def __init__(self, name: str, args: PriorityClassesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("PriorityClasses", name, opts)
        cluster = args.cluster
        self.classes: dict[str, PriorityClass] = {}
        for class_name, spec in args.classes.items():
            manifest = priority_class_manifest(class_name, spec)
            self.classes[class_name] = PriorityClass(
                f"{name}-{class_name}",
                metadata=manifest["metadata"],
                value=manifest["value"],
                preemption_policy=manifest["preemptionPolicy"],
                global_default=False,
                description=manifest["description"],
                opts=self.child(
                    depends_on=list(cluster.ready),
                    providers={"kubernetes": cluster.provider},
                    replace_on_changes=["value", "preemptionPolicy"],
                    delete_before_replace=True,
                ),
            )
        self.register_outputs({})
