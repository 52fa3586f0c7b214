"""What gpucell knows about the Cluster API releases it installs, and where each fact comes from.

Tenant clusters (:mod:`gpucell.workloads.tenant_cluster`) are built by Cluster API in the cell: the core provider
and the kubeadm bootstrap and control-plane providers (kubernetes-sigs/cluster-api), the KubeVirt infrastructure
provider CAPK (kubernetes-sigs/cluster-api-provider-kubevirt) and the Helm add-on provider CAAPH
(kubernetes-sigs/cluster-api-addon-provider-helm), installed by the cluster-api-operator (docs/decisions/0024).

The facts below are the ones admission and the renderers rely on; each names the file and tag it was read from.
A release gpucell has no facts for is refused at plan time with the releases it knows, rather than guessed at.
"""

from __future__ import annotations

from gpucell.catalog.releases import release

__all__ = [
    "CAPK_DROPPED_VM_FIELDS",
    "CAPK_KUBEVIRT_API",
    "EMPTY_MAP_KEYS",
    "KNOWN_CAAPH",
    "KNOWN_CAPI_OPERATOR",
    "KNOWN_CAPK",
    "MANAGEMENT_KUBERNETES",
    "WORKLOAD_KUBERNETES",
    "capk_dropped_fields",
    "empty_structs",
    "workload_range",
]

WORKLOAD_KUBERNETES: dict[tuple[int, int], tuple[tuple[int, int], tuple[int, int]]] = {
    (1, 14): ((1, 31), (1, 36)),
}
"""Cluster API minor -> the (lowest, highest) Kubernetes minor of the workload clusters it supports, inclusive
(kubernetes-sigs/cluster-api v1.14.0 ``docs/book/src/reference/versions.md``: core provider v1.14.x, workload
clusters v1.31.x - v1.36.x; the kubeadm bootstrap and control-plane providers follow the same table)."""
MANAGEMENT_KUBERNETES: dict[tuple[int, int], tuple[tuple[int, int], tuple[int, int]]] = {
    (1, 14): ((1, 33), (1, 36)),
}
"""Cluster API minor -> the Kubernetes minors of the management cluster (here the cell) it supports, inclusive
(same page: v1.14.x runs on v1.33.x - v1.36.x)."""
KNOWN_CAPK = ((0, 11),)
"""CAPK minors whose ``KubevirtMachineTemplate`` schema gpucell checked (:data:`CAPK_DROPPED_VM_FIELDS`). v0.11.2
(2c2bb5be) is built against ``kubevirt.io/api`` v1.7.0 and CDI api v1.64.0 (``go.mod``), speaks the v1beta1
contract (``config/crd/kustomization.yaml`` labels end at ``cluster.x-k8s.io/v1beta1: v1alpha1``; CAPI v1.14 reads
it through its v1beta1 compatibility, ``internal/contract/version.go`` ``GetCompatibleVersions``, until v1beta1 is
dropped in v1.16) and reads Clusters and Machines as ``cluster.x-k8s.io/v1beta1``, which CAPI v1.14 still serves."""
KNOWN_CAAPH = ((0, 6),)
"""CAAPH minors gpucell renders ``HelmChartProxy`` objects for: v0.6.4 (82566296) declares the v1beta2 contract
(``metadata.yaml``) and is built against CAPI v1.13.0 and Helm v3.20.2 (``go.mod``)."""
KNOWN_CAPI_OPERATOR = ((0, 28),)
"""cluster-api-operator chart minors whose provider objects gpucell renders and checked: v0.28.0 (d32c1c2a) serves
``operator.cluster.x-k8s.io/v1alpha2`` with ``spec.patches`` (``config/crd/bases/``, the CRDs in
``shared/upstream/cluster-api-operator``), and is built against Cluster API v1.12.10 (``go.mod``): its clusterctl
library installs providers of the v1beta1 and v1beta2 contracts (``internal/controller/phase_load.go``), the
contract of Cluster API v1.14."""
CAPK_KUBEVIRT_API = "v1.7.0"
"""The ``kubevirt.io/api`` release CAPK v0.11.2 embeds as ``spec.virtualMachineTemplate`` of its CRDs."""

CAPK_DROPPED_VM_FIELDS: dict[str, str] = {
    "spec.template.spec.domain.devices.interfaces[].passtBinding": "v1.8",
    "spec.template.spec.domain.devices.interfaces[].portRanges": "v1.8",
    "spec.template.spec.domain.features.hyperv.tlbflush.direct": "v1.8",
    "spec.template.spec.domain.features.hyperv.tlbflush.extended": "v1.8",
    "spec.template.spec.domain.memory.reservedOverhead": "v1.8",
    "spec.template.spec.domain.rebootPolicy": "v1.9",
    "spec.template.spec.networks[].resourceClaim": "v1.9",
    "spec.template.spec.serviceAccountName": "v1.9",
    "spec.template.spec.utilityVolumes": "v1.9",
    "spec.template.spec.volumes[].containerPath": "v1.9",
}
"""Fields of a ``kubevirt.io/v1`` ``VirtualMachineSpec`` that KubeVirt v1.9.0 serves (``api/openapi-spec/
swagger.json``, ``v1.VirtualMachineSpec`` and what it references) and that the ``virtualMachineTemplate.spec`` of
CAPK v0.11.2's ``KubevirtMachineTemplate`` CRD does not declare (``config/crd/bases/infrastructure.cluster.x-k8s.io_
kubevirtmachinetemplates.yaml``, KubeVirt v1.7 API): the API server prunes them from a template, and CAPK's own Go
types would drop them on the copy into the VM. Path (``[]`` marks a list item) -> the KubeVirt minor that added it,
as far as gpucell can tell (v1.8 or later). ``tests/test_cluster_api.py`` recomputes the difference from the two
upstream files and fails when it changes."""


EMPTY_MAP_KEYS = frozenset(
    {
        "annotations",
        "bootstrap",
        "config",
        "controlPlane",
        "featureGates",
        "labels",
        "matchLabels",
        "selector",
        "valueFrom",
    }
)
"""Keys whose value may be an empty map in the ``spec`` of a Cluster API v1beta2 ``Cluster``,
``KubeadmControlPlane``, ``KubeadmConfigTemplate``, ``MachineDeployment`` or ``MachineHealthCheck``. Every other
object of their v1.14.0 CRDs (``core/config/crd/bases``, ``controlplane/kubeadm/config/crd/bases``,
``bootstrap/kubeadm/config/crd/bases``) is a struct with ``minProperties: 1`` (the v1beta2 rule for optional
structs: ``kubeadmConfigSpec``, ``initConfiguration``, ``nodeRegistration``...) or with required fields, so the API
server refuses ``{}`` there. These keys are maps (``labels``, ``annotations``, ``matchLabels``, ``featureGates``,
``config``) or structs with neither: ``joinConfiguration.controlPlane`` (join as a control-plane node), a label
``selector`` (selects everything), ``extraEnvs[].valueFrom`` and a MachineDeployment template's ``bootstrap``.
``tests/test_tenant_cluster.py`` recomputes them from the CRDs."""


def empty_structs(spec: object, prefix: str = "spec") -> list[str]:
    """The key paths (``spec.kubeadmConfigSpec``; ``[]`` marks a list item) of the empty maps in the ``spec`` of a
    rendered Cluster API v1beta2 object that the API server would refuse (every key but
    :data:`EMPTY_MAP_KEYS`), in document order. Empty for everything gpucell renders."""
    if isinstance(spec, dict):
        found: list[str] = []
        for key, value in spec.items():
            path = f"{prefix}.{key}"
            if value == {} and key not in EMPTY_MAP_KEYS:
                found.append(path)
            found += empty_structs(value, path)
        return found
    if isinstance(spec, list):
        return [path for item in spec for path in empty_structs(item, f"{prefix}[]")]
    return []


def workload_range(cluster_api: str) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """The (lowest, highest) workload-cluster Kubernetes minor of Cluster API ``cluster_api`` (``v1.14.0``), or
    ``None`` when gpucell has no facts for that minor (:data:`WORKLOAD_KUBERNETES`)."""
    return WORKLOAD_KUBERNETES.get(release(cluster_api))


def _paths(value: object, prefix: str) -> list[str]:
    """Every key path of ``value`` (lists as ``[]``), each map key once per path."""
    if isinstance(value, dict):
        found: list[str] = []
        for key, item in value.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            found += [path, *_paths(item, path)]
        return found
    if isinstance(value, list):
        return [path for item in value for path in _paths(item, f"{prefix}[]")]
    return []


def capk_dropped_fields(vm_spec: dict[str, object]) -> list[str]:
    """The paths of :data:`CAPK_DROPPED_VM_FIELDS` that the ``spec`` of a rendered ``virtualMachineTemplate`` sets,
    sorted: what CAPK v0.11 would silently lose. Empty for everything gpucell renders today."""
    return sorted({path for path in _paths(vm_spec, "spec") if path in CAPK_DROPPED_VM_FIELDS})
