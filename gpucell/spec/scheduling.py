"""PriorityClasses of a cell (``priorityClasses``): which exist, who may name them, and what Kubernetes and the
platform reserve.

A PriorityClass is cluster-scoped (``scheduling.k8s.io/v1``): without a fence any tenant could name any class,
``system-node-critical`` included, and preempt other tenants' VMs or the platform's pods. gpucell fences each
tenant namespace with a ResourceQuota whose scope selector matches pods naming a class the tenant may not use
(:func:`gpucell.tenancy.tenant.priority_quota_manifest`), and refuses such a workload at plan time
(:func:`priority_class_problem`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING

from pydantic import Field, StrictInt, field_validator

from gpucell.errors import SpecError, shown
from gpucell.spec._base import SpecModel
from gpucell.spec._values import check_single_line
from gpucell.spec.network import DNS_LABEL, DNS_SUBDOMAIN

if TYPE_CHECKING:
    from gpucell.spec.tenancy import TenantSpec

__all__ = [
    "HIGHEST_TENANT_PRIORITY",
    "LOWEST_PRIORITY",
    "RESERVED_CLASSES",
    "PreemptionPolicy",
    "PriorityClassSpec",
    "allowed_classes",
    "check_class_name",
    "check_priority_classes",
    "priority_class_problem",
]

HIGHEST_TENANT_PRIORITY = 999_999_999
"""The highest ``value`` of a cell's class: below 1,000,000,000 (Kubernetes' ``HighestUserDefinablePriority``),
which the platform's own classes use (``longhorn-critical``, Longhorn chart 1.12.1 ``templates/priorityclass.yaml``;
``kubevirt-cluster-critical``, KubeVirt v1.9.0 ``pkg/virt-operator/resource/generate/components/crds.go``): a
tenant's workload never ties them, so it cannot keep Longhorn or virt-handler from a node."""
LOWEST_PRIORITY = -2_147_483_648
"""The lowest ``value`` Kubernetes takes (an int32)."""
RESERVED_CLASSES = frozenset(
    {"system-cluster-critical", "system-node-critical", "longhorn-critical", "kubevirt-cluster-critical"}
)
"""Classes Kubernetes and the platform components create; a cell's class may not take their names."""


class PreemptionPolicy(StrEnum):
    """``preemptionPolicy`` of a PriorityClass (Kubernetes "Pod Priority and Preemption")."""

    PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
    NEVER = "Never"


class PriorityClassSpec(SpecModel):
    """One PriorityClass of the cell (``scheduling.k8s.io/v1``, never ``globalDefault``: a default class applies to
    every pod of the cluster, the platform's too)."""

    value: StrictInt = Field(ge=LOWEST_PRIORITY, le=HIGHEST_TENANT_PRIORITY)
    """Priority of the pods naming the class: higher is scheduled first and, with ``PreemptLowerPriority``,
    preempts lower ones when a node is full (pods without a class have 0, as the platform's own deployments do).
    At most 999,999,999 (:data:`HIGHEST_TENANT_PRIORITY`)."""
    description: str | None = None
    """What the class is for, one line (the class's ``description``). Defaults to none."""
    preemption_policy: PreemptionPolicy = PreemptionPolicy.PREEMPT_LOWER_PRIORITY
    """``PreemptLowerPriority`` (Kubernetes' default: may evict lower-priority pods, other tenants' VMs included) or
    ``Never`` (only queued ahead of them)."""
    tenants: list[str] = []
    """Tenants whose workloads may name the class; empty: every tenant of the region. A class that preempts should
    name its tenants. A name the region has no tenant of is allowed (regions often share their classes)."""

    @field_validator("tenants")
    @classmethod
    def _tenant_names(cls, names: list[str]) -> list[str]:
        for index, name in enumerate(names):
            if not DNS_LABEL.fullmatch(name):
                raise SpecError((index,), f"{shown(name)} is not a tenant name (a DNS-1123 label)")
        return names

    @field_validator("description")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        if value is not None:
            check_single_line(value, "description")
            if len(value) > 1024:
                raise ValueError("is longer than 1024 characters")
        return value


def check_class_name(name: str) -> str | None:
    """What keeps ``name`` from being a cell's PriorityClass name, or ``None``: a DNS-1123 subdomain, not
    ``system-*`` (the API server refuses that prefix for user classes) and none of :data:`RESERVED_CLASSES`."""
    if not DNS_SUBDOMAIN.fullmatch(name):
        return f"{shown(name)} is not a PriorityClass name (a DNS-1123 subdomain)"
    if name.startswith("system-"):
        return f"{shown(name)}: the system- prefix is reserved for Kubernetes' own classes"
    if name in RESERVED_CLASSES:
        return f"{shown(name)} is a class the platform installs itself; choose another name"
    return None


def allowed_classes(classes: Mapping[str, PriorityClassSpec], tenant: str) -> list[str]:
    """The classes ``tenant``'s workloads may name, in config order."""
    return [name for name, spec in classes.items() if not spec.tenants or tenant in spec.tenants]


def priority_class_problem(classes: Mapping[str, PriorityClassSpec], tenant: str, name: str) -> str | None:
    """Why ``tenant``'s workload may not name class ``name``, or ``None``."""
    spec = classes.get(name)
    if spec is None and (name in RESERVED_CLASSES or name.startswith("system-")):
        return (
            f"{shown(name)} is a class of Kubernetes or the platform components, which tenants' workloads never "
            f"name; name one of the cell's: {', '.join(allowed_classes(classes, tenant)) or 'none'}"
        )
    if spec is None:
        defined = ", ".join(classes) or "none"
        return f"{shown(name)} is not a PriorityClass of the cell (priorityClasses: {defined})"
    if spec.tenants and tenant not in spec.tenants:
        return (
            f"{shown(name)} is not open to tenant {tenant} (priorityClasses.{name}.tenants: "
            f"{', '.join(spec.tenants)}); name one it may use: {', '.join(allowed_classes(classes, tenant)) or 'none'}"
        )
    return None


def check_priority_classes(
    classes: Mapping[str, PriorityClassSpec], tenants: Mapping[str, TenantSpec]
) -> Iterator[SpecError]:
    """``priorityClasses`` names are the cell's own, and every workload of ``tenants`` names a class open to its
    tenant (:func:`priority_class_problem`). A class may name tenants the region does not have (regions share their
    classes, not their tenants)."""
    for name in classes:
        problem = check_class_name(name)
        if problem is not None:
            yield SpecError(("priorityClasses", name), problem)
    for tenant_name, tenant in tenants.items():
        workloads = [
            *(("virtualMachines", n, w.priority_class_name) for n, w in tenant.virtual_machines.items()),
            *(("notebooks", n, w.priority_class_name) for n, w in tenant.notebooks.items()),
            *(("modelEndpoints", n, w.priority_class_name) for n, w in tenant.model_endpoints.items()),
        ]
        for kind, name, wanted in workloads:
            problem = None if wanted is None else priority_class_problem(classes, tenant_name, wanted)
            if problem is not None:
                yield SpecError(("tenants", tenant_name, kind, name, "priorityClassName"), problem)
