"""Per-tenant GPU metering: the Prometheus recording rules behind ``gpucell:tenant_gpu_allocated:sum``.

``gpucell:tenant_gpu_allocated:sum{tenant, resource, gpu_model, kind}`` is the number of GPU units each tenant
*holds* at each evaluation, whether it uses them or not (billing-grade: what was reserved for the tenant, not
utilisation):

- ``resource``: the extended resource name (``nvidia.com/gpu``, ``nvidia.com/mig-3g.71gb`` for a MIG profile,
  ``nvidia.com/NVIDIA_L40S-12Q`` for a vGPU type, ``nvidia.com/GH100_H100_SXM5_80GB`` for passthrough) or, for DRA
  claims, the DeviceClass (``gpu.nvidia.com``, ``vfio.gpu.nvidia.com``);
- ``gpu_model``: the gpucell catalog model of the node's pool (``H100-SXM5-80GB``, ``L4``; ``unknown`` on a node of
  no GPU pool), so that GPUs of different models behind one resource name (``nvidia.com/gpu``, or a MIG profile two
  models share) are billed apart: an H100 hour is not an L4 hour. The node's pool is its ``gpucell.io/pool`` label
  (set by gpucell at registration and kept by its node patches, allow-listed in kube-state-metrics); the pool's
  model is the stack's own, written into the rule (:func:`metering_group`'s ``pool_models``), not a node label a
  GPU Feature Discovery or a tenant could change. DRA claims are metered per namespace, not per node, so their
  ``gpu_model`` is the ``dra`` pools' one model, if they have one (below).
- ``kind``: ``vm`` for what a VM holds, ``container`` for pods (notebooks, endpoints, anything else).

Sources, all from kube-state-metrics' built-in collectors (KSM 2.20.0, the kube-prometheus-stack 88.5.3 subchart
8.4.0):

- ``kube_pod_container_resource_requests{resource="nvidia_com_gpu"}``: KSM writes an extended resource's name with
  every character outside ``[a-zA-Z0-9_]`` replaced by ``_`` (``sanitizeLabelName``); the rules put the real name
  back for every resource the cell's pools advertise (:func:`resource_names`), any other keeps KSM's spelling. Its
  ``node`` label (KSM ``docs/metrics/workload/pod-metrics.md``) gives the pod's node, hence its GPU model.
  Only pods in phase ``Running`` count (``kube_pod_status_phase``): a Pending pod holds nothing, a finished one
  has given its GPUs back. Init containers' requests are not counted (a GPU init container is not a pattern).
- A VM's GPUs are requested by its ``virt-launcher`` pod: pods labelled ``kubevirt.io=virt-launcher`` (KSM's
  ``kube_pod_labels`` with the label allow-listed, :data:`KSM_LABELS_ALLOWLIST`) are ``kind="vm"``. Only
  virt-controller sets that label in a tenant namespace: the tenant's admission policy refuses it on a pod of any
  other writer and in every pod template (:data:`gpucell.tenancy.tenant_admission.LAUNCHER_LABEL`). Nothing else about a
  pod tells a VM apart that a tenant could not write too (owner references to its own VMI, a
  ``devices.kubevirt.io/kvm`` request), so the label, guarded at admission, is the source.
- The tenant comes from the namespace's ``gpucell.io/tenant`` label (``kube_namespace_labels``), never from a
  pod label a tenant could set.
- DRA claims hold devices, not pods, and KSM 2.20.0 has no ResourceClaim collector; nor can its
  custom-resource-state metrics read one: they are built only for kinds a CRD serves
  (``internal/discovery/discovery.go`` line 274, ``pkg/customresourcestate/config.go`` line 195), and
  ResourceClaim is built in. The namespace's ResourceQuota counts them instead: with ``dra`` pools every tenant's
  quota lists ``<class>.deviceclass.resource.k8s.io/devices`` for each DeviceClass (:mod:`gpucell.tenancy.tenant`), and
  the API server keeps its ``used`` at the devices the namespace's ResourceClaims request per class (Kubernetes
  ``pkg/quota/v1/evaluator/core/resource_claims.go``, ``claimEvaluator.Usage``: ``count`` of an ``ExactCount``
  request). KSM exports it as ``kube_resourcequota{resource, type="used"}`` (``internal/store/resourcequota.go``),
  computed by the API server from the claims, so no tenant can understate it. A class of ``vfio.gpu.nvidia.com`` is
  a VM's (gpucell hands VFIO GPUs only to VMs), any other a container's. The quota knows no node, so no GPU model:
  a claim's devices are metered with ``gpu_model`` the one model of the cell's ``dra`` pools (``dra_model``), else
  :data:`UNKNOWN_MODEL` (the DRA driver's own ``nvidia_dra_prepared_devices`` counts per node, not per namespace, at
  v0.4.1).

Trusted sources only: every input is read with :data:`KSM_JOB` (the chart's kube-state-metrics, whose
ServiceMonitor takes its job from the Service's ``app.kubernetes.io/name``, as kube-prometheus-stack 88.5.3's own
rules select it, ``templates/prometheus/rules-1.14/*.yaml`` ``$kubeStateMetricsJob``), and every intermediate record
with ``job=""`` (a recorded series has no job; anything scraped has one). A series of the same name that a tenant
pod exports (the ``kserve-predictors`` PodMonitor scrapes every namespace) therefore changes nothing, even before
that PodMonitor drops it by name (:func:`gpucell.components.metrics.pod_monitor_manifests`).

Limits: an evaluation every ``interval`` seconds samples what is held then, so GPU-hours are exact to one
interval per allocation; Prometheus keeps ``metrics.retentionDays`` (bill from a ``remoteWrite`` store for longer
periods). A DRA claim counts from its creation to its deletion, allocated or not: a pod's claim (from its
ResourceClaimTemplate) is created with the pod, so a Pending pod's GPUs count, unlike its extended resources; an
``All`` request counts as 32 devices (the quota's worst case). The rules are tested with ``promtool test rules``
on series named as KSM names them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from gpucell.admission.dra import VFIO_CLASS

__all__ = [
    "ALLOCATED",
    "INTERVAL",
    "KSM_JOB",
    "KSM_LABELS_ALLOWLIST",
    "RECORDED",
    "UNKNOWN_MODEL",
    "ksm_sanitized",
    "metering_group",
    "node_models",
    "resource_names",
]

ALLOCATED = "gpucell:tenant_gpu_allocated:sum"
"""The metered series: GPU units held, by ``tenant``, ``resource``, ``gpu_model`` and ``kind``."""
KSM_JOB = 'job="kube-state-metrics"'
"""Matcher of kube-state-metrics' own series (the chart's ServiceMonitor: ``jobLabel: app.kubernetes.io/name``)."""
RECORDED = 'job=""'
"""Matcher of recorded series: a rule's output carries no ``job``, every scraped series does."""
UNKNOWN_MODEL = "unknown"
"""``gpu_model`` of GPUs on a node of no GPU pool (or of a pool the rules do not know)."""
INTERVAL = "1m"
"""Evaluation interval of the metering group: GPU-hours are ``sum_over_time(...[period:1m]) / 60``."""
KSM_LABELS_ALLOWLIST = ["namespaces=[gpucell.io/tenant]", "pods=[kubevirt.io]", "nodes=[gpucell.io/pool]"]
"""kube-state-metrics ``--metric-labels-allowlist``: the labels the rules read (KSM exports no label unless asked;
``gpucell.io/pool`` is for :mod:`gpucell.components.gpu_alerts`)."""
_NAMESPACE_TENANT = "gpucell:namespace_tenant:info"
_NODE_MODEL = "gpucell:node_gpu_model:info"
_POD_GPUS = "gpucell:pod_gpu_requests:sum"
_CLAIM_DEVICES = "gpucell:namespace_claim_devices:max"
_PER_CLASS = r"(.+)\\.deviceclass\\.resource\\.k8s\\.io/devices"
"""A DRA quota key (``<class>.deviceclass.resource.k8s.io/devices``, :func:`gpucell.admission.dra.quota_key`) as a regex
capturing the class, spelled for a double-quoted PromQL string (``\\\\.`` is a literal dot there)."""
_INVALID = re.compile(r"[^a-zA-Z0-9_]")


def ksm_sanitized(resource: str) -> str:
    """A resource name as kube-state-metrics labels it: ``nvidia.com/mig-1g.18gb`` -> ``nvidia_com_mig_1g_18gb``."""
    return _INVALID.sub("_", resource)


def resource_names(resources: Iterable[str]) -> str:
    """The PromQL that turns KSM's spelling of ``resources`` back into their names, applied to :data:`_POD_GPUS`'s
    source (nested ``label_replace``, one per resource, in sorted order)."""
    expr = (
        "sum by (namespace, pod, node, resource) (kube_pod_container_resource_requests"
        f'{{{KSM_JOB},resource=~"nvidia_com_.+"}})'
        " * on (namespace, pod) group_left () (max by (namespace, pod) "
        f'(kube_pod_status_phase{{{KSM_JOB},phase="Running"}}) == 1)'
    )
    for resource in sorted(set(resources)):
        expr = f'label_replace({expr}, "resource", "{resource}", "resource", "{ksm_sanitized(resource)}")'
    return expr


def node_models(pool_models: Mapping[str, str]) -> str:
    """The PromQL of :data:`_NODE_MODEL` (``{node, gpu_model}``): every node kube-state-metrics knows, with the model
    of its ``gpucell.io/pool`` in ``pool_models`` (pool name -> model name), else :data:`UNKNOWN_MODEL` (nested
    ``label_replace``, one per pool, in sorted order)."""
    expr = f'label_replace(kube_node_labels{{{KSM_JOB}}}, "gpu_model", "{UNKNOWN_MODEL}", "node", ".*")'
    for pool, model in sorted(pool_models.items()):
        expr = f'label_replace({expr}, "gpu_model", "{model}", "label_gpucell_io_pool", "{pool}")'
    return f"max by (node, gpu_model) ({expr})"


def _by_tenant(expr: str) -> str:
    return (
        f"sum by (tenant, resource, gpu_model) ({expr} * on (node) group_left (gpu_model) {_NODE_MODEL}{{{RECORDED}}}"
        f" * on (namespace) group_left (tenant) {_NAMESPACE_TENANT}{{{RECORDED}}})"
    )


def _namespace_by_tenant(expr: str) -> str:
    """:func:`_by_tenant` for what is known per namespace, not per node (DRA claims: their ``gpu_model`` is set)."""
    return (
        f"sum by (tenant, resource, gpu_model) ({expr} * on (namespace) group_left (tenant) "
        f"{_NAMESPACE_TENANT}{{{RECORDED}}})"
    )


def metering_group(
    resources: Iterable[str], pool_models: Mapping[str, str], dra_model: str = UNKNOWN_MODEL
) -> dict[str, Any]:
    """The PrometheusRule group ``gpucell-metering`` (evaluated every :data:`INTERVAL`) for a cell whose pools
    advertise ``resources`` (extended resource names) and whose GPU pools hold ``pool_models`` (pool name -> gpucell
    catalog model name, every GPU pool, ``dra`` ones included); DRA claims are metered as ``dra_model``. Record order
    matters: each rule reads those before
    it."""
    launcher = f'max by (namespace, pod) (kube_pod_labels{{{KSM_JOB},label_kubevirt_io="virt-launcher"}})'

    def claims(op: str) -> str:
        selected = f'{_CLAIM_DEVICES}{{{RECORDED},device_class{op}"{VFIO_CLASS}"}}'
        named = f'label_replace({selected}, "resource", "$1", "device_class", "(.+)")'
        return f'label_replace({named}, "gpu_model", "{dra_model}", "device_class", ".*")'

    return {
        "name": "gpucell-metering",
        "interval": INTERVAL,
        "rules": [
            {
                "record": _NAMESPACE_TENANT,
                "expr": "max by (namespace, tenant) (label_replace(kube_namespace_labels"
                f'{{{KSM_JOB},label_gpucell_io_tenant!=""}}, "tenant", "$1", "label_gpucell_io_tenant", "(.+)"))',
            },
            {"record": _NODE_MODEL, "expr": node_models(pool_models)},
            {"record": _POD_GPUS, "expr": resource_names(resources)},
            # max: every quota of a namespace that lists a class reports the same use of it
            {
                "record": _CLAIM_DEVICES,
                "expr": "max by (namespace, device_class) (label_replace(kube_resourcequota"
                f'{{{KSM_JOB},type="used",resource=~"{_PER_CLASS}"}}, "device_class", "$1", "resource", '
                f'"{_PER_CLASS}")) > 0',
            },
            # One rule per kind (promtool lints two rules of one name and labels as duplicates): pods' extended
            # resources `or` claims' device classes, which never share a resource name.
            {
                "record": ALLOCATED,
                "labels": {"kind": "container"},
                "expr": f"{_by_tenant(f'({_POD_GPUS}{{{RECORDED}}} unless on (namespace, pod) {launcher})')} or "
                f"{_namespace_by_tenant(claims('!='))}",
            },
            {
                "record": ALLOCATED,
                "labels": {"kind": "vm"},
                "expr": f"{_by_tenant(f'({_POD_GPUS}{{{RECORDED}}} * on (namespace, pod) group_left () {launcher})')}"
                " or "
                f"{_namespace_by_tenant(claims('='))}",
            },
        ],
    }
