"""What tenant objects render and register alike: labels and metadata, placement, scheduling, container
resources, the ``CiliumNetworkPolicy`` shape, and the Pulumi registration of rendered objects.

Used by the workload modules (:mod:`gpucell.workloads.virtual_machine`, ``notebook``, ``model_endpoint``)
and by :mod:`gpucell.tenancy.tenant` (labels, metadata, policy shape), so that every object of a tenant carries
the same labels and every policy has the same shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import pulumi
from pulumi_kubernetes.core.v1 import Secret

from gpucell._component import MANAGED_BY, custom_resource
from gpucell.admission.dra import container_claim_template, container_claims
from gpucell.admission.inventory import gpu_offers
from gpucell.admission.placement import Placement, place_container, place_vm
from gpucell.spec.pools import POOL_LABEL, WORKLOAD_LABEL, NodePool, taint_tolerations
from gpucell.spec.tenancy import DNS_SELECTOR, NAMESPACE_KEY, TENANT_LABEL, namespace_of

if TYPE_CHECKING:
    from pulumi_kubernetes.meta.v1 import ObjectMetaArgsDict

    from gpucell.admission.inventory import GpuOffer
    from gpucell.admission.tenants import ClusterFacts
    from gpucell.platform import Platform
    from gpucell.spec.workloads import GpuRequest, GpuVirtualMachineSpec

__all__ = [
    "DNS_SELECTOR",
    "MANAGED_BY",
    "NAMESPACE_KEY",
    "NVIDIA_RUNTIME_CLASS",
    "TENANT_LABEL",
    "cilium_network_policy",
    "common_labels",
    "container_claim_template_manifest",
    "container_placement",
    "container_resources",
    "custom_resource",
    "gpu_dependencies",
    "node_affinity",
    "object_meta",
    "opaque_secret",
    "scheduling",
    "tolerations",
    "vm_placement",
    "workload_labels",
]

NVIDIA_RUNTIME_CLASS = "nvidia"
"""RuntimeClass of GPU pods: the GPU Operator creates it (chart value ``operator.runtimeClass``, ``nvidia`` in
the pinned chart) and its toolkit registers the containerd handler of that name in k3s."""
_NAME_LABEL = "app.kubernetes.io/name"
_COMPONENT_LABEL = "app.kubernetes.io/component"


# -- labels and metadata -------------------------------------------------------------------------------------


def common_labels(tenant: str) -> dict[str, str]:
    """Labels on every object of ``tenant``: ``app.kubernetes.io/managed-by`` and ``gpucell.io/tenant``."""
    return {**MANAGED_BY, TENANT_LABEL: tenant}


def workload_labels(tenant: str, workload: str, component: str | None = None) -> dict[str, str]:
    """The labels every object of a workload carries: ``app.kubernetes.io/name`` (the workload name), then
    :func:`common_labels`, then ``app.kubernetes.io/component`` when ``component`` is given (``notebook``)."""
    labels = {_NAME_LABEL: workload, **common_labels(tenant)}
    if component is not None:
        labels[_COMPONENT_LABEL] = component
    return labels


def object_meta(tenant: str, name: str, *, workload: str | None = None, component: str | None = None) -> dict[str, Any]:
    """The ``metadata`` (``ObjectMeta``) of object ``name`` in ``tenant``'s namespace (``tenant-<tenant>``),
    labelled with :func:`workload_labels` of ``workload`` (and ``component``) for a workload's object, else
    with :func:`common_labels` (the tenant's own objects: quota, limits, RBAC, policies)."""
    labels = common_labels(tenant) if workload is None else workload_labels(tenant, workload, component)
    return {"name": name, "namespace": namespace_of(tenant), "labels": labels}


# -- placement and scheduling --------------------------------------------------------------------------------


def vm_placement(name: str, spec: GpuVirtualMachineSpec, facts: ClusterFacts) -> Placement:
    """Where VM ``name`` may run and the GPU resource it asks for: :func:`gpucell.admission.placement.place_vm` over
    the cluster's inventory (``facts``), the same call plan-time admission makes (so it never raises for an admitted
    spec).

    Raises :class:`gpucell.admission.placement.PlacementError` for a spec that admission would have refused.
    """
    return place_vm(name, spec, facts.node_pools, _offers(facts), catalog=facts.gpu_catalog)


def container_placement(gpu: GpuRequest | None, facts: ClusterFacts, what: str) -> Placement:
    """Pools and GPU resource of a notebook or endpoint pod (``gpu`` is its ``gpu`` request, ``None`` without
    GPUs): :func:`gpucell.admission.placement.place_container` over the cluster's inventory (``facts``), the call
    plan-time admission makes (so it never raises for an admitted spec). ``what`` names the workload kind in errors
    (``"a GPU notebook"``, ``"a GPU model endpoint"``).

    Raises :class:`gpucell.admission.placement.PlacementError` for a spec that admission would have refused.
    """
    return place_container(
        gpu, facts.node_pools, _offers(facts), facts.effective_mig_strategy.value, what, catalog=facts.gpu_catalog
    )


def _offers(facts: ClusterFacts) -> list[GpuOffer]:
    return gpu_offers(facts.node_pools, facts.effective_mig_strategy.value)


def node_affinity(placement: Placement, modes: Sequence[str] = ()) -> dict[str, Any] | None:
    """Required node affinity ``gpucell.io/pool In <placement.pools>``, plus
    ``nvidia.com/gpu.workload.config In <modes>`` when ``modes`` are given; ``None`` when any node will do
    (no pools)."""
    if not placement.pools:
        return None
    expressions: list[dict[str, Any]] = [{"key": POOL_LABEL, "operator": "In", "values": list(placement.pools)}]
    if modes:
        expressions.append({"key": WORKLOAD_LABEL, "operator": "In", "values": list(modes)})
    terms = [{"matchExpressions": expressions}]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


def tolerations(pools: Mapping[str, NodePool], names: Sequence[str]) -> list[dict[str, str]]:
    """Tolerations for every taint of the pools ``names`` (``key=value:Effect`` -> ``Equal``, ``key:Effect``
    -> ``Exists``; :func:`gpucell.spec.pools.taint_tolerations`), in pool order without duplicates; empty when the
    pools have no taints."""
    return taint_tolerations(taint for name in names for taint in pools[name].taints)


def scheduling(placement: Placement, pools: Mapping[str, NodePool], *, pin_gpu_mode: bool = False) -> dict[str, Any]:
    """The scheduling fields of a pod spec (or VM template spec) for ``placement``, to merge into it:
    ``affinity`` (:func:`node_affinity`; with ``pin_gpu_mode``, also the pools' GPU Operator modes) and
    ``tolerations`` (:func:`tolerations` of the placement's pools), each only when not empty. The pinned mode is
    the node's ``nvidia.com/gpu.workload.config`` (``container`` on ``dra`` pools)."""
    out: dict[str, Any] = {}
    modes = sorted({pools[p].mode.workload_config for p in placement.pools}) if pin_gpu_mode else []
    affinity = node_affinity(placement, modes)
    if affinity is not None:
        out["affinity"] = affinity
    tolerated = tolerations(pools, placement.pools)
    if tolerated:
        out["tolerations"] = tolerated
    return out


def container_resources(cpu_millicores: int, memory_gib: int, placement: Placement) -> dict[str, Any]:
    """A container's ``resources``: requests = limits of ``cpu`` ``"<cpuMillicores>m"``, ``memory``
    ``"<memoryGib>Gi"`` and the placement's GPU resource x count (``nvidia.com/gpu``, ``nvidia.com/mig-...``);
    with a DRA placement, ``claims`` naming the pod's GPU claim instead
    (:func:`gpucell.admission.dra.container_claims`). Limits are explicit because the tenant quota counts
    ``limits.*``."""
    amounts: dict[str, Any] = {"cpu": f"{cpu_millicores}m", "memory": f"{memory_gib}Gi"}
    if placement.resource is not None:
        amounts[placement.resource] = placement.count
    resources: dict[str, Any] = {"requests": dict(amounts), "limits": dict(amounts)}
    if placement.device_class is not None:
        resources["claims"] = container_claims()
    return resources


def container_claim_template_manifest(
    tenant: str, workload: str, gpu: GpuRequest | None, placement: Placement, component: str | None = None
) -> dict[str, Any] | None:
    """The ``ResourceClaimTemplate`` of a notebook's or endpoint's DRA GPUs (:func:`gpucell.admission.dra.
    container_claim_template`: ``placement.count`` ``gpu.nvidia.com`` devices, of ``gpu.model``'s architecture when a
    model is asked for), labelled as the workload's objects; ``None`` without a DRA placement."""
    if placement.device_class is None or gpu is None:
        return None
    meta = object_meta(tenant, workload, workload=workload, component=component)
    return container_claim_template(meta, workload, placement.model, placement.count)


def gpu_dependencies(platform: Platform, placement: Placement) -> list[pulumi.Resource]:
    """What a GPU workload's objects wait for on ``platform``: the GPU Operator's Release for extended resources
    (device plugin, the ``nvidia`` RuntimeClass), the DRA driver's Release for claims (its DeviceClasses and kubelet
    plugin); none without GPUs, or when the platform does not install them."""
    if placement.device_class is not None and platform.dra_driver is not None:
        return [platform.dra_driver.release]
    if placement.resource is not None and platform.gpu_operator is not None:
        return [platform.gpu_operator.release]
    return []


# -- manifests and their registration ------------------------------------------------------------------------


def cilium_network_policy(
    meta: dict[str, Any],
    rules: Mapping[str, Any],
    *,
    match_labels: Mapping[str, str] | None = None,
    description: str | None = None,
) -> dict[str, Any]:
    """A ``cilium.io/v2`` ``CiliumNetworkPolicy`` with metadata ``meta``. Its ``spec``: ``description`` when
    given, ``endpointSelector`` (``matchLabels`` ``match_labels``, or ``{}``: every endpoint of the
    namespace), then ``rules`` (``ingress``, ``egress``, ``enableDefaultDeny``...)."""
    spec: dict[str, Any] = {} if description is None else {"description": description}
    spec["endpointSelector"] = {} if match_labels is None else {"matchLabels": dict(match_labels)}
    spec.update(rules)
    return {"apiVersion": "cilium.io/v2", "kind": "CiliumNetworkPolicy", "metadata": meta, "spec": spec}


def opaque_secret(
    resource_name: str,
    meta: dict[str, Any],
    string_data: pulumi.Input[Mapping[str, pulumi.Input[str]]],
    opts: pulumi.ResourceOptions,
) -> Secret:
    """Register an ``Opaque`` ``Secret`` (metadata ``meta``) whose ``stringData`` is a Pulumi secret, so that
    its values are masked in the plan and encrypted in the state whatever the caller passed."""
    secret = cast("pulumi.Output[Mapping[str, str]]", pulumi.Output.secret(string_data))
    return Secret(
        resource_name, metadata=cast("ObjectMetaArgsDict", meta), type="Opaque", string_data=secret, opts=opts
    )
