"""TenantCluster: a tenant's own Kubernetes on KubeVirt VMs of its namespace, built by Cluster API in the cell.

What is rendered, in the tenant's namespace (``tenant-<tenant>``), for tenant cluster ``<c>`` (decision
docs/decisions/0024-tenant-clusters.md; every object checked against the CRDs of Cluster API v1.14.0, CAPK v0.11.2
and, by hand, CAAPH v0.6.4):

- ``Cluster`` ``<c>`` (``cluster.x-k8s.io/v1beta2``): the pod and service networks, refs to the control plane and
  the infrastructure; labelled ``gpucell.io/tenant-cluster: <c>``, which the add-ons select;
- ``KubevirtCluster`` ``<c>`` (``infrastructure.cluster.x-k8s.io/v1alpha1``): CAPK creates the control plane's
  Service ``<c>-lb`` (ClusterIP, port 6443, selecting the control-plane VMs) and the cluster's SSH key;
- ``KubeadmControlPlane`` ``<c>-control-plane`` with its ``KubevirtMachineTemplate`` ``<c>-control-plane-<hash>``:
  the control plane (and etcd) in VMs; ``version`` is the tenant cluster's Kubernetes release;
- per worker pool ``<p>``: ``KubevirtMachineTemplate`` ``<c>-<p>-<hash>``, ``KubeadmConfigTemplate``
  ``<c>-<p>-<hash>`` (the node label ``gpucell.io/worker-pool=<p>``), ``MachineDeployment`` ``<c>-<p>`` and
  ``MachineHealthCheck`` ``<c>-<p>``;
- ``HelmChartProxy`` ``<c>-cilium`` and (with GPU workers) ``<c>-gpu-operator`` (``addons.cluster.x-k8s.io/
  v1alpha1``): CAAPH installs Cilium and the NVIDIA GPU Operator into the tenant cluster once its control plane is
  up, at the cell's own chart versions;
- ``CiliumNetworkPolicy`` ``<c>-cluster-api``: the provider controllers reach the API server (6443) and CAPK the
  VMs' SSH (22, its bootstrap check) through the tenant's default deny; with ``apiServer.type: LoadBalancer`` the
  Service ``<c>-api`` and the policy ``<c>-api`` admitting ``allowFromCidrs`` to 6443.

Machine templates are immutable (CAPK's webhook refuses any change of ``spec``, ``pkg/webhookhandler/
validator.go``), so their names carry a hash of their content: a change is a new template, to which the
MachineDeployment (or KubeadmControlPlane) switches, and Cluster API rolls the machines over; the old template is
deleted after the switch (a MachineSet that is no longer current tolerates it, ``core/reconcilers/machineset``
``reconcileExternalTemplateReference``).

Each VM is rendered as the tenant's own VMs are (:mod:`gpucell.workloads.virtual_machine`: CPU, memory with
requests = limits for the quota, GPUs by the KubeVirt CR's resource names, NVSwitches of a whole HGX board, NUMA,
node affinity and tolerations of its pools), with CAPK's differences: the pod network through a ``bridge`` binding
(the guest takes the pod's address, so each node's InternalIP is unique; ``masquerade`` gives every guest
10.0.2.2), CAPK's own cloud-init volume (kubeadm's bootstrap data), ``runStrategy: Always`` and ``evictionStrategy:
External`` (a drain of the host marks the VM for evacuation and CAPK drains the tenant's node first, ``pkg/kubevirt/
machine.go`` ``DrainNodeIfNeeded``). A template that would set a field CAPK v0.11 drops is refused
(:func:`gpucell.catalog.cluster_api_facts.capk_dropped_fields`), as is a Cluster API object with an empty struct that
its v1beta2 schema refuses (:func:`gpucell.catalog.cluster_api_facts.empty_structs`), before anything is registered.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from ipaddress import IPv4Network
from typing import TYPE_CHECKING, Any

import pulumi
import yaml
from pulumi_kubernetes.apiextensions import CustomResource
from pulumi_kubernetes.core.v1 import Secret, Service

from gpucell._component import CellComponent
from gpucell.admission.inventory import gpu_offers
from gpucell.admission.placement import Placement
from gpucell.admission.tenant_cluster_admission import machine_placements
from gpucell.admission.vm_shape import VmShape
from gpucell.catalog.cluster_api_facts import CAPK_KUBEVIRT_API, capk_dropped_fields, empty_structs
from gpucell.cluster import Cluster, ContainerRuntime
from gpucell.components._chart import ChartSource
from gpucell.components.cilium import CHART as CILIUM_CHART
from gpucell.components.cluster_api import PROVIDER_NAMESPACES
from gpucell.components.gpu_operator import CHART as GPU_OPERATOR_CHART
from gpucell.errors import ConfigError
from gpucell.spec.lifecycle import RemovalPolicy, removal_options
from gpucell.spec.pools import NodePool
from gpucell.spec.tenancy import namespace_of
from gpucell.spec.tenant_clusters import CONTROL_PLANE, ApiServerType, TenantClusterSpec, WorkerPoolSpec
from gpucell.spec.traffic import ADDRESS_ANNOTATION, POOL_LABEL, vm_pool
from gpucell.spec.workloads import GpuVirtualMachineSpec
from gpucell.tenancy._common import cilium_network_policy, custom_resource, scheduling, workload_labels
from gpucell.tenancy.tenant import admit_workload
from gpucell.workloads.tenant_kubeconfig import rebuilt_kubeconfig
from gpucell.workloads.virtual_machine import _CLOUD_INIT_DISK, _add_rails, _domain, data_volume_template

if TYPE_CHECKING:
    from gpucell.components.cluster_api import ClusterApi
    from gpucell.tenancy.tenant import TenantView

__all__ = [
    "API_PORT",
    "CAPI_CLUSTER_LABEL",
    "CAPI_DEPLOYMENT_LABEL",
    "CAPI_ROLE_LABEL",
    "CONTROL_PLANE",
    "CRI_SOCKET",
    "KUBECONFIGS_SUFFIX",
    "NODE_DRAIN_TIMEOUT_SECONDS",
    "NODE_STARTUP_TIMEOUT_SECONDS",
    "NVLINK_CONFIG_MAP",
    "TENANT_CLUSTER_LABEL",
    "UNHEALTHY_NODE_SECONDS",
    "WORKER_POOL_LABEL",
    "KubeconfigRead",
    "TenantCluster",
    "TenantClusterArgs",
    "addon_manifests",
    "api_policy_manifest",
    "api_service_manifest",
    "bootstrap_template_manifest",
    "cluster_api_policy_manifest",
    "cluster_manifest",
    "control_plane_manifest",
    "health_check_manifest",
    "kubeconfig_secret_name",
    "kubevirt_cluster_manifest",
    "machine_deployment_manifest",
    "machine_template_manifest",
    "machine_vm_template",
]

KUBECONFIGS_SUFFIX = "TenantClusterKubeconfigs"
"""The stack output ``<region>TenantClusterKubeconfigs``: ``{"<tenant>/<cluster>": kubeconfig}``, a secret."""

TENANT_CLUSTER_LABEL = "gpucell.io/tenant-cluster"
"""Label naming the tenant cluster, on its ``Cluster`` (what its HelmChartProxies select) and on its VMs."""
WORKER_POOL_LABEL = "gpucell.io/worker-pool"
"""Node label of a worker in the tenant cluster (kubelet ``node-labels``), and label of its VMs."""
CAPI_CLUSTER_LABEL = "cluster.x-k8s.io/cluster-name"
"""Cluster API's label of a cluster's objects; CAPK puts it on every VM and virt-launcher pod (``pkg/kubevirt/
utils.go``)."""
CAPI_ROLE_LABEL = "cluster.x-k8s.io/role"
"""CAPK's label on each VM's pod: ``control-plane`` or ``worker``; the ``<c>-lb`` Service selects ``control-plane``."""
CAPI_DEPLOYMENT_LABEL = "cluster.x-k8s.io/deployment-name"
"""Cluster API's label of a MachineDeployment's Machines (its name)."""
API_PORT = 6443
"""The API server's port on the control-plane VMs and on ``<c>-lb`` (CAPK ``pkg/loadbalancer``)."""
NODE_DRAIN_TIMEOUT_SECONDS = 600
"""How long Cluster API drains a tenant node before it deletes the Machine anyway (``deletion.
nodeDrainTimeoutSeconds``; unset, a PodDisruptionBudget could block a scale-down or rollout forever)."""
NODE_STARTUP_TIMEOUT_SECONDS = 1800
"""A worker whose node has not joined after this long is replaced (``MachineHealthCheck`` ``nodeStartupTimeout
Seconds``): the node image is imported by CDI, booted and joined with kubeadm, then the GPU driver is built."""
UNHEALTHY_NODE_SECONDS = 300
"""A worker whose node is ``Ready`` ``False`` or ``Unknown`` this long is replaced by its MachineHealthCheck."""
NVLINK_CONFIG_MAP = "gpucell-nvidia-kernel-module-params"
"""ConfigMap (``gpu-operator`` namespace of the tenant cluster) with ``nvidia.conf``, the driver container's module
options, for workers holding part of an HGX board (GPU Operator ``driver.kernelModuleConfig.name``)."""
_CLUSTER_CREATE_TIMEOUT = "40m"
"""How long ``pulumi up`` waits for a new tenant cluster's control plane (``ControlPlaneInitialized``)."""
_CLUSTER_DELETE_TIMEOUT = "30m"
"""How long ``pulumi up`` waits for Cluster API to take a removed tenant cluster down: every worker drained (at most
:data:`NODE_DRAIN_TIMEOUT_SECONDS` each, in parallel), the VMs and their disks deleted, then the control plane."""
_ROOT = "root"
CRI_SOCKET = "unix:///var/run/containerd/containerd.sock"
"""The container runtime kubeadm registers the control-plane nodes with: containerd of CAPK's Ubuntu images, as
CAPK v0.11.2's templates set it (``templates/cluster-template.yaml`` ``criSocket: "${CRI_PATH}"``,
``CRI_PATH=/var/run/containerd/containerd.sock`` in ``hack/functest.sh``), and kubeadm's own default on Linux."""
_API_GROUPS = {
    "cluster": "cluster.x-k8s.io",
    "controlplane": "controlplane.cluster.x-k8s.io",
    "bootstrap": "bootstrap.cluster.x-k8s.io",
    "infrastructure": "infrastructure.cluster.x-k8s.io",
}


def kubeconfig_secret_name(cluster: str) -> str:
    """The Secret Cluster API writes the tenant cluster's admin kubeconfig into: ``<cluster>-kubeconfig`` (key
    ``value``; ``util/kubeconfig``)."""
    return f"{cluster}-kubeconfig"


def _digest(content: object) -> str:
    """Eight hex digits of the SHA-256 of ``content`` as sorted JSON: a template name's suffix."""
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:8]


def _labels(tenant: str, cluster: str, component: str, pool: str | None = None) -> dict[str, str]:
    labels = {**workload_labels(tenant, cluster, component), TENANT_CLUSTER_LABEL: cluster}
    if pool is not None:
        labels[WORKER_POOL_LABEL] = pool
    return labels


def _meta(tenant: str, cluster: str, name: str, component: str, pool: str | None = None) -> dict[str, Any]:
    return {"name": name, "namespace": namespace_of(tenant), "labels": _labels(tenant, cluster, component, pool)}


def cluster_manifest(tenant: str, name: str, spec: TenantClusterSpec) -> dict[str, Any]:
    """The ``Cluster``: ``clusterNetwork`` from ``network``, ``controlPlaneRef`` the KubeadmControlPlane,
    ``infrastructureRef`` the KubevirtCluster. ``pulumi.com/waitFor: condition=ControlPlaneInitialized``: the first
    ``pulumi up`` waits until kubeadm has initialised the first control-plane VM (and Cluster API has written
    ``<c>-kubeconfig``), so the kubeconfig can be read in the same run."""
    meta = _meta(tenant, name, name, "cluster")
    meta["annotations"] = {"pulumi.com/waitFor": "condition=ControlPlaneInitialized"}
    return {
        "apiVersion": f"{_API_GROUPS['cluster']}/v1beta2",
        "kind": "Cluster",
        "metadata": meta,
        "spec": {
            "clusterNetwork": {
                "pods": {"cidrBlocks": [str(spec.network.pod_cidr)]},
                "services": {"cidrBlocks": [str(spec.network.service_cidr)]},
            },
            "controlPlaneRef": {
                "apiGroup": _API_GROUPS["controlplane"],
                "kind": "KubeadmControlPlane",
                "name": f"{name}-{CONTROL_PLANE}",
            },
            "infrastructureRef": {"apiGroup": _API_GROUPS["infrastructure"], "kind": "KubevirtCluster", "name": name},
        },
    }


def kubevirt_cluster_manifest(tenant: str, name: str) -> dict[str, Any]:
    """The ``KubevirtCluster``: CAPK's control-plane Service stays ``ClusterIP`` (reached inside the cell; outside
    access is the separate ``<c>-api`` Service, :func:`api_service_manifest`): CAPK creates the Service once and
    never changes its type afterwards (``pkg/loadbalancer`` ``Create``), and the Cluster's endpoint is fixed once
    set."""
    return {
        "apiVersion": f"{_API_GROUPS['infrastructure']}/v1alpha1",
        "kind": "KubevirtCluster",
        "metadata": _meta(tenant, name, name, "cluster"),
        "spec": {"controlPlaneServiceTemplate": {"spec": {"type": "ClusterIP"}}},
    }


def machine_vm_template(
    tenant: str,
    cluster: str,
    vm: GpuVirtualMachineSpec,
    placement: Placement,
    node_pools: Mapping[str, NodePool],
    *,
    pool: str | None = None,
) -> dict[str, Any]:
    """The ``virtualMachineTemplate`` (``metadata`` and ``spec``) of one machine of ``cluster``: a worker of
    ``pool``, or a control-plane VM without one (see the module doc for what differs from a tenant's VM)."""
    component = "worker" if pool is not None else CONTROL_PLANE
    labels = _labels(tenant, cluster, component, pool)
    domain = _domain(vm, placement, VmShape(vm))  # sized by its own keys: no instancetype or preference
    devices = domain["devices"]
    devices["disks"] = [d for d in devices["disks"] if d["name"] != _CLOUD_INIT_DISK]
    devices["interfaces"] = [{"name": "default", "bridge": {}}]
    devices["networkInterfaceMultiqueue"] = True
    networks: list[dict[str, Any]] = [{"name": "default", "pod": {}}]
    if placement.rails:  # each GPU's NIC, on the tenant's fabric network of its rail (decision 0039)
        rails = {"domain": domain, "networks": networks}
        _add_rails(rails, tenant, placement)
    root = data_volume_template(cluster, 0, vm.root_disk, labels)
    root["metadata"]["name"] = _ROOT  # CAPK prefixes it with the machine's name (``prefixDataVolumeTemplates``)
    return {
        "metadata": {"namespace": namespace_of(tenant), "labels": labels},
        "spec": {
            "runStrategy": "Always",
            "dataVolumeTemplates": [root],
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "domain": domain,
                    "networks": networks,
                    "volumes": [{"name": _ROOT, "dataVolume": {"name": _ROOT}}],
                    "evictionStrategy": "External",
                    **scheduling(placement, node_pools, pin_gpu_mode=bool(vm.gpus)),
                },
            },
        },
    }


def machine_template_manifest(tenant: str, cluster: str, part: str, vm_template: dict[str, Any]) -> dict[str, Any]:
    """The ``KubevirtMachineTemplate`` ``<cluster>-<part>-<hash>`` of ``vm_template`` (the hash covers the whole
    spec), with CAPK's SSH bootstrap check (the sentinel file kubeadm's cloud-init writes)."""
    spec = {
        "template": {
            "spec": {"virtualMachineBootstrapCheck": {"checkStrategy": "ssh"}, "virtualMachineTemplate": vm_template}
        }
    }
    component = CONTROL_PLANE if part == CONTROL_PLANE else "worker"
    pool = None if part == CONTROL_PLANE else part
    return {
        "apiVersion": f"{_API_GROUPS['infrastructure']}/v1alpha1",
        "kind": "KubevirtMachineTemplate",
        "metadata": _meta(tenant, cluster, f"{cluster}-{part}-{_digest(spec)}", component, pool),
        "spec": spec,
    }


def _deletion() -> dict[str, int]:
    return {"nodeDrainTimeoutSeconds": NODE_DRAIN_TIMEOUT_SECONDS}


def control_plane_manifest(tenant: str, name: str, spec: TenantClusterSpec, template: str) -> dict[str, Any]:
    """The ``KubeadmControlPlane`` ``<c>-control-plane``: ``replicas``, ``version``, the machine template, and
    ``kubeadmConfigSpec``: with ``apiServer.type: LoadBalancer`` the address in the API server's ``certSANs``;
    with a ``ClusterIP`` API server, which needs nothing, the ``nodeRegistration.criSocket`` (:data:`CRI_SOCKET`) of
    ``kubeadm init`` (the first VM) and ``kubeadm join`` (the others), because Cluster API v1beta2 refuses an empty
    ``kubeadmConfigSpec`` (``minProperties: 1``, v1.14.0 ``controlplane.cluster.x-k8s.io_kubeadmcontrolplanes.yaml``).
    A LoadBalancer cluster's spec is as it was before, so no live control plane rolls for it. ``rollout``: one VM
    more at a time (``maxSurge: 1``, the only value a single-VM control plane accepts), so an upgrade keeps etcd's
    quorum; admission counts that extra VM against the tenant's quota."""
    if spec.api_server.type is ApiServerType.LOAD_BALANCER:
        sans = [str(spec.api_server.address)]
        kubeadm: dict[str, Any] = {"clusterConfiguration": {"apiServer": {"certSANs": sans}}}
    else:
        # Only where the spec would be empty: a changed kubeadmConfigSpec rolls every control-plane VM of a live
        # tenant cluster, and a LoadBalancer one (the only kind that could be deployed before) gains nothing by it.
        registration = {"nodeRegistration": {"criSocket": CRI_SOCKET}}
        kubeadm = {"initConfiguration": registration, "joinConfiguration": copy.deepcopy(registration)}
    return {
        "apiVersion": f"{_API_GROUPS['controlplane']}/v1beta2",
        "kind": "KubeadmControlPlane",
        "metadata": _meta(tenant, name, f"{name}-{CONTROL_PLANE}", CONTROL_PLANE),
        "spec": {
            "replicas": spec.control_plane.replicas,
            "version": spec.kubernetes_version,
            "machineTemplate": {
                "spec": {
                    "infrastructureRef": {
                        "apiGroup": _API_GROUPS["infrastructure"],
                        "kind": "KubevirtMachineTemplate",
                        "name": template,
                    },
                    "deletion": _deletion(),
                }
            },
            "kubeadmConfigSpec": kubeadm,
            "rollout": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}},
        },
    }


def bootstrap_template_manifest(tenant: str, cluster: str, pool: str) -> dict[str, Any]:
    """The ``KubeadmConfigTemplate`` ``<cluster>-<pool>-<hash>``: ``kubeadm join`` with the kubelet's
    ``node-labels`` ``gpucell.io/worker-pool=<pool>`` (a label the kubelet may set on itself: outside the
    ``kubernetes.io`` namespaces NodeRestriction guards)."""
    spec = {
        "template": {
            "spec": {
                "joinConfiguration": {
                    "nodeRegistration": {
                        "kubeletExtraArgs": [{"name": "node-labels", "value": f"{WORKER_POOL_LABEL}={pool}"}]
                    }
                }
            }
        }
    }
    return {
        "apiVersion": f"{_API_GROUPS['bootstrap']}/v1beta2",
        "kind": "KubeadmConfigTemplate",
        "metadata": _meta(tenant, cluster, f"{cluster}-{pool}-{_digest(spec)}", "worker", pool),
        "spec": spec,
    }


def machine_deployment_manifest(
    tenant: str,
    cluster: str,
    pool_name: str,
    pool: WorkerPoolSpec,
    spec: TenantClusterSpec,
    *,
    machine_template: str,
    bootstrap_template: str,
) -> dict[str, Any]:
    """The ``MachineDeployment`` ``<cluster>-<pool>``: ``replicas``, ``version``, the two templates.

    ``rollout``: GPU pools replace a machine before creating its successor (``maxSurge: 0``, ``maxUnavailable:
    1``): a surge VM would need one more set of the pool's GPUs, which the region has sold; CPU pools surge by one
    VM (``maxSurge: 1``, ``maxUnavailable: 0``), which admission counts against the tenant's quota."""
    gpu = bool(pool.gpus)
    rolling = {"maxSurge": 0, "maxUnavailable": 1} if gpu else {"maxSurge": 1, "maxUnavailable": 0}
    name = f"{cluster}-{pool_name}"
    selector = {CAPI_CLUSTER_LABEL: cluster, WORKER_POOL_LABEL: pool_name}
    return {
        "apiVersion": f"{_API_GROUPS['cluster']}/v1beta2",
        "kind": "MachineDeployment",
        "metadata": _meta(tenant, cluster, name, "worker", pool_name),
        "spec": {
            "clusterName": cluster,
            "replicas": pool.replicas,
            "selector": {"matchLabels": dict(selector)},
            "rollout": {"strategy": {"type": "RollingUpdate", "rollingUpdate": rolling}},
            "template": {
                "metadata": {"labels": dict(selector)},
                "spec": {
                    "clusterName": cluster,
                    "version": spec.kubernetes_version,
                    "bootstrap": {
                        "configRef": {
                            "apiGroup": _API_GROUPS["bootstrap"],
                            "kind": "KubeadmConfigTemplate",
                            "name": bootstrap_template,
                        }
                    },
                    "infrastructureRef": {
                        "apiGroup": _API_GROUPS["infrastructure"],
                        "kind": "KubevirtMachineTemplate",
                        "name": machine_template,
                    },
                    "deletion": _deletion(),
                },
            },
        },
    }


def health_check_manifest(tenant: str, cluster: str, pool: str) -> dict[str, Any]:
    """The ``MachineHealthCheck`` ``<cluster>-<pool>`` of a worker pool: a Machine whose node has not joined within
    :data:`NODE_STARTUP_TIMEOUT_SECONDS`, or whose node is ``Ready`` ``False``/``Unknown`` for
    :data:`UNHEALTHY_NODE_SECONDS` (its host died, its VM was stopped), is deleted and replaced by its MachineSet."""
    return {
        "apiVersion": f"{_API_GROUPS['cluster']}/v1beta2",
        "kind": "MachineHealthCheck",
        "metadata": _meta(tenant, cluster, f"{cluster}-{pool}", "worker", pool),
        "spec": {
            "clusterName": cluster,
            "selector": {"matchLabels": {CAPI_CLUSTER_LABEL: cluster, WORKER_POOL_LABEL: pool}},
            "checks": {
                "nodeStartupTimeoutSeconds": NODE_STARTUP_TIMEOUT_SECONDS,
                "unhealthyNodeConditions": [
                    {"type": "Ready", "status": status, "timeoutSeconds": UNHEALTHY_NODE_SECONDS}
                    for status in ("Unknown", "False")
                ],
            },
        },
    }


def _addon(
    tenant: str,
    cluster: str,
    addon: str,
    *,
    source: ChartSource,
    version: str,
    namespace: str,
    values: Mapping[str, Any],
) -> dict[str, Any]:
    return {
        "apiVersion": "addons.cluster.x-k8s.io/v1alpha1",
        "kind": "HelmChartProxy",
        "metadata": _meta(tenant, cluster, f"{cluster}-{addon}", "addon"),
        "spec": {
            "clusterSelector": {"matchLabels": {TENANT_CLUSTER_LABEL: cluster}},
            "repoURL": str(source.repo),
            "chartName": source.chart,
            "version": version,
            "releaseName": addon,
            "namespace": namespace,
            "reconcileStrategy": "Continuous",
            "valuesTemplate": yaml.safe_dump(dict(values), sort_keys=False),
        },
    }


def addon_manifests(
    tenant: str, cluster: str, *, cilium: str, gpu_operator: str | None, nvlink_disabled: bool = False
) -> list[dict[str, Any]]:
    """The ``HelmChartProxy`` objects: ``<cluster>-cilium`` (chart ``cilium`` at ``cilium`` into ``kube-system``,
    ``ipam.mode: kubernetes``: each node's pods from the /24 kubeadm's controller manager gives it; kube-proxy stays,
    as kubeadm installs it) and, when ``gpu_operator`` (a chart version) is given, ``<cluster>-gpu-operator`` into
    ``gpu-operator``: container mode on every GPU node, the driver installed by the operator's driver container
    (the node image carries none), the toolkit on kubeadm's containerd (:meth:`gpucell.cluster.ContainerRuntime.
    containerd`). With ``nvlink_disabled`` (workers holding part of an HGX board) the driver loads with
    ``NVreg_NvLinkDisable=1`` from :data:`NVLINK_CONFIG_MAP`, created by the chart's ``extraObjects``.

    ``valuesTemplate`` is plain YAML (no ``{{``: CAAPH reads it as a Go template first); ``reconcileStrategy:
    Continuous``: a changed value or version upgrades the release, a cluster that no longer matches uninstalls it.
    """
    out = [
        _addon(
            tenant,
            cluster,
            "cilium",
            source=CILIUM_CHART,
            version=cilium,
            namespace="kube-system",
            values={"ipam": {"mode": "kubernetes"}},
        )
    ]
    if gpu_operator is not None:
        values: dict[str, Any] = {"toolkit": {"env": ContainerRuntime.containerd().toolkit_env()}}
        if nvlink_disabled:
            values["driver"] = {"kernelModuleConfig": {"name": NVLINK_CONFIG_MAP}}
            values["extraObjects"] = [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": NVLINK_CONFIG_MAP, "namespace": "gpu-operator"},
                    "data": {"nvidia.conf": "NVreg_NvLinkDisable=1\n"},
                }
            ]
        out.append(
            _addon(
                tenant,
                cluster,
                "gpu-operator",
                source=GPU_OPERATOR_CHART,
                version=gpu_operator,
                namespace="gpu-operator",
                values=values,
            )
        )
    return out


def cluster_api_policy_manifest(tenant: str, cluster: str) -> dict[str, Any]:
    """``<cluster>-cluster-api``: ingress to the cluster's VMs (``cluster.x-k8s.io/cluster-name``) from the provider
    controllers' namespaces (:data:`gpucell.components.cluster_api.PROVIDER_NAMESPACES`) on the API port, and from
    CAPK's on SSH (its bootstrap check). Their controllers reach the API through ``<c>-lb``, which Cilium translates to
    a control-plane VM before the tenant's default deny is applied to it."""

    def from_namespaces(namespaces: Sequence[str], port: int) -> dict[str, Any]:
        peers = {
            "matchExpressions": [
                {"key": "k8s:io.kubernetes.pod.namespace", "operator": "In", "values": list(namespaces)}
            ]
        }
        return {"fromEndpoints": [peers], "toPorts": [{"ports": [{"port": str(port), "protocol": "TCP"}]}]}

    return cilium_network_policy(
        _meta(tenant, cluster, f"{cluster}-cluster-api", "cluster"),
        {"ingress": [from_namespaces(PROVIDER_NAMESPACES, API_PORT), from_namespaces(["capk-system"], 22)]},
        match_labels={CAPI_CLUSTER_LABEL: cluster},
        description="Cluster API's controllers reach the tenant cluster's API server and CAPK its VMs' SSH",
    )


def _control_plane_selector(cluster: str) -> dict[str, str]:
    return {CAPI_CLUSTER_LABEL: cluster, CAPI_ROLE_LABEL: CONTROL_PLANE}


def api_service_manifest(tenant: str, cluster: str, spec: TenantClusterSpec, pool: str | None) -> dict[str, Any] | None:
    """With ``apiServer.type: LoadBalancer``: the Service ``<cluster>-api`` (port 6443 of the control-plane VMs)
    with its address from ``pool`` (label ``gpucell.io/lb-pool``, annotation ``lbipam.cilium.io/ips``),
    ``externalTrafficPolicy: Local`` (the client keeps its address, which :func:`api_policy_manifest` admits),
    ``loadBalancerSourceRanges`` and no node ports, as a VM's LoadBalancer SSH Service; else ``None``."""
    api = spec.api_server
    if api.type is not ApiServerType.LOAD_BALANCER:
        return None
    if pool is None:
        raise ValueError(f"tenant cluster {cluster!r}: a LoadBalancer API needs the pool its address comes from")
    meta = _meta(tenant, cluster, f"{cluster}-api", CONTROL_PLANE)
    meta["labels"][POOL_LABEL] = pool
    meta["annotations"] = {ADDRESS_ANNOTATION: str(api.address)}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "type": "LoadBalancer",
            "selector": _control_plane_selector(cluster),
            "ports": [{"name": "https", "protocol": "TCP", "port": API_PORT, "targetPort": API_PORT}],
            "externalTrafficPolicy": "Local",
            "allocateLoadBalancerNodePorts": False,
            "loadBalancerSourceRanges": [str(net) for net in api.allow_from_cidrs],
        },
    }


def api_policy_manifest(tenant: str, cluster: str, spec: TenantClusterSpec) -> dict[str, Any] | None:
    """With ``apiServer.type: LoadBalancer``: ``<cluster>-api``, ingress from ``allowFromCidrs`` to the API port
    of the control-plane VMs; else ``None``."""
    api = spec.api_server
    if api.type is not ApiServerType.LOAD_BALANCER:
        return None
    rule = {
        "fromCIDRSet": [{"cidr": str(net)} for net in api.allow_from_cidrs],
        "toPorts": [{"ports": [{"port": str(API_PORT), "protocol": "TCP"}]}],
    }
    return cilium_network_policy(
        _meta(tenant, cluster, f"{cluster}-api", CONTROL_PLANE),
        {"ingress": [rule]},
        match_labels=_control_plane_selector(cluster),
        description="Clients of apiServer.allowFromCidrs reach the tenant cluster's API server",
    )


@dataclass(frozen=True)
class MachinePlacements:
    """Where the machines of one tenant cluster run (from :func:`gpucell.admission.placement.place_vm`, as admission
    found)."""

    control_plane: Placement
    """The control-plane VMs' pools."""
    workers: Mapping[str, Placement]
    """Worker pool -> its pools and GPU resource."""


@dataclass(frozen=True)
class TenantClusterArgs:
    """Inputs of :class:`TenantCluster`: the tenant cluster's own spec and what it is wired to, never the cell's.
    Build them with :meth:`from_tenant` (placed and admitted as stack config is)."""

    cluster: Cluster
    """The cluster Cluster API runs in (provider and readiness): the tenant's, where its namespace is."""
    name: str
    """The cluster's name (``metadata.name`` of the ``Cluster``; unique among the tenant's workloads)."""
    spec: TenantClusterSpec
    """What the tenant declared."""
    tenant: str
    """The tenant (its namespace is ``tenant-<tenant>``)."""
    placements: MachinePlacements
    """Where its machines run."""
    node_pools: Mapping[str, NodePool]
    """The region's node pools (``nodePools``): tolerations and GPU modes of the placements' pools."""
    addons: Mapping[str, str]
    """Chart versions installed into the tenant cluster: ``cilium`` and ``gpuOperator`` (the cell's own)."""
    service_cidr: IPv4Network
    """The cluster's service range (``network.serviceCidr``): the ``<c>-lb`` ClusterIP, the only server a ClusterIP
    API's exported kubeconfig may name, is in it."""
    api_pool: str | None = None
    """With ``apiServer.type: LoadBalancer``: the ``loadBalancer`` pool of its address."""
    after: Sequence[pulumi.Resource] = ()
    """What its objects come after: the tenant's namespace, quota and policies, the KubeVirt and CDI CRs and the
    Cluster API providers (:attr:`gpucell.components.cluster_api.ClusterApi.ready`)."""
    removal_policy: RemovalPolicy = RemovalPolicy.PROTECT
    """The policy when ``spec.removalPolicy`` is unset (the tenant's)."""

    @classmethod
    def from_tenant(
        cls, name: str, spec: TenantClusterSpec, tenant: TenantView, cluster_api: ClusterApi
    ) -> TenantClusterArgs:
        """The args of tenant cluster ``name`` of ``tenant`` (a :class:`gpucell.tenancy.tenant.Tenant`, or a
        :class:`gpucell.tenancy.tenant.TenantRef` to one built elsewhere), Cluster API being ``cluster_api``: placed
        with the tenant's facts as admission placed it
        (:func:`gpucell.admission.tenant_cluster_admission.machine_placements`). A cluster the tenant's spec does not
        declare is admitted first, as stack config is (quota, GPU pools, Cluster API versions:
        :func:`gpucell.tenancy.tenant.admit_workload`); the add-ons are the facts' ``versions.cilium`` and
        ``versions.gpuOperator``. On ``tenant.cluster``, else on the cluster Cluster API is installed into.

        Raises :class:`gpucell.errors.ConfigError` (``tenants.<tenant>.tenantClusters.<name>...`` key paths).
        """
        facts = admit_workload(tenant, "tenant_clusters", name, spec)
        offers = gpu_offers(facts.node_pools, facts.effective_mig_strategy.value)
        control_plane, workers = machine_placements(name, spec, facts.node_pools, offers, catalog=facts.gpu_catalog)
        pool = vm_pool(facts.load_balancer, tenant.name, spec.api_server.pool)
        platform = tenant.platform
        operators: list[pulumi.Resource] = [] if platform.kubevirt is None else [platform.kubevirt.cr]
        if platform.cdi is not None:
            operators += [platform.cdi.cr, platform.cdi.storage_profile]
        return cls(
            tenant.cluster if tenant.cluster is not None else cluster_api.installed_on,
            name,
            spec,
            tenant.name,
            MachinePlacements(control_plane, workers),
            facts.node_pools,
            {"cilium": facts.versions.cilium, "gpuOperator": facts.versions.gpu_operator},
            facts.network.service_cidr,
            api_pool=pool if spec.api_server.type is ApiServerType.LOAD_BALANCER else None,
            after=[*tenant.ready, *operators, *cluster_api.ready],
            removal_policy=tenant.removal_policy,
        )


def _refuse_dropped_fields(tenant: str, name: str, part: str, template: dict[str, Any]) -> None:
    dropped = capk_dropped_fields(template["spec"])
    if dropped:
        where = (
            "tenants",
            tenant,
            "tenantClusters",
            name,
            *(("controlPlane",) if part == CONTROL_PLANE else ("workerPools", part)),
        )
        raise ConfigError.at(
            where,
            f"its VMs would set {', '.join(dropped)}, which CAPK's KubevirtMachineTemplate (KubeVirt "
            f"{CAPK_KUBEVIRT_API} API) does not carry: the API server would drop it without a word; leave it out "
            "or pin a CAPK release built against a newer KubeVirt API",
        )


def _refuse_empty_structs(tenant: str, name: str, manifest: dict[str, Any]) -> None:
    """The plan refuses what Cluster API's v1beta2 schema would: an empty struct in ``manifest`` (a gpucell bug,
    found before anything is registered rather than by ``--check`` or the API server)."""
    empty = empty_structs(manifest["spec"])
    if empty:
        raise ConfigError.at(
            ("tenants", tenant, "tenantClusters", name),
            f"gpucell would render {manifest['kind']} {manifest['metadata']['name']} with {', '.join(empty)} empty, "
            "which Cluster API v1beta2 refuses (minProperties: 1); nothing was deployed: report it as a gpucell bug",
        )


class TenantCluster(CellComponent):
    """A tenant cluster (``gpucell:index:TenantCluster``): the objects of the module doc, in the tenant's namespace.

    Children (``name`` is the component name, e.g. ``iad1-globex-ml``): ``{name}-cluster``, ``{name}-infra``,
    ``{name}-control-plane`` and ``{name}-control-plane-machines``, per worker pool ``{name}-<pool>``,
    ``{name}-<pool>-machines``, ``{name}-<pool>-bootstrap`` and ``{name}-<pool>-health``, ``{name}-cilium``,
    ``{name}-gpu-operator``, ``{name}-cluster-api-policy``, and with a LoadBalancer API ``{name}-api`` and
    ``{name}-api-policy``. Every child comes after ``args.after``. The ``Cluster``, ``KubevirtCluster`` and
    ``KubeadmControlPlane`` take the cluster's ``removalPolicy`` (deleting one of them deletes the cluster's VMs,
    disks and etcd). Removing the whole cluster never deletes its parts one by one, which would drain and delete
    workers and uninstall Cilium from a cluster that stays protected or retained:

    - what Cluster API owns (the ``KubevirtCluster``, ``KubeadmControlPlane``, machine and bootstrap templates,
      MachineDeployments, MachineHealthChecks) is ``deletedWith`` the ``Cluster``: Cluster API deletes it in its
      own order when the ``Cluster`` goes, and it stays while the ``Cluster`` stays;
    - the add-ons and ``{name}-cluster-api-policy`` come before the ``Cluster``, which depends on them: Pulumi
      deletes the ``Cluster`` first (waiting up to 30 minutes while Cluster API drains and deletes every VM through
      the still admitted API) and a protected ``Cluster`` stops the run before them; ``retain`` keeps them;
    - the LoadBalancer API's Service and policy come after the ``Cluster`` (its endpoint is up by then) and are
      ``deletedWith`` it unless ``removalPolicy`` is ``delete``, which releases the address.

    Each part still converges on its own: a changed template is a new one and the old one goes, a removed pool's
    MachineDeployment is deleted (its workers drained and deleted), as is the GPU Operator's add-on with the last
    GPU pool.

    :attr:`kubeconfig` reads ``<c>-kubeconfig`` after the ``Cluster`` reports ``ControlPlaneInitialized``.
    """

    kubeconfig: pulumi.Output[str]
    """The tenant cluster's admin kubeconfig (secret), pointing at ``apiServer.address`` when exposed. Unknown in a
    ``pulumi preview`` of a new cluster; read from ``<c>-kubeconfig`` in every ``pulumi up``."""

    def __init__(self, name: str, args: TenantClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        after = pulumi.ResourceOptions(depends_on=list(args.after))
        super().__init__("TenantCluster", name, pulumi.ResourceOptions.merge(after, opts), args.cluster)
        tenant, cluster, spec = args.tenant, args.name, args.spec
        # Render everything first: a refusal happens before any resource is registered.
        templates = {
            CONTROL_PLANE: machine_vm_template(
                tenant, cluster, spec.control_plane_vm(), args.placements.control_plane, args.node_pools
            )
        }
        for pool_name in spec.worker_pools:
            placement = args.placements.workers[pool_name]
            templates[pool_name] = machine_vm_template(
                tenant, cluster, spec.worker_vm(pool_name), placement, args.node_pools, pool=pool_name
            )
        for part, template in templates.items():
            _refuse_dropped_fields(tenant, cluster, part, template)
        cp_template = machine_template_manifest(tenant, cluster, CONTROL_PLANE, templates[CONTROL_PLANE])
        control_plane = control_plane_manifest(tenant, cluster, spec, cp_template["metadata"]["name"])
        bootstraps = {
            pool_name: bootstrap_template_manifest(tenant, cluster, pool_name) for pool_name in spec.worker_pools
        }
        cluster_object = cluster_manifest(tenant, cluster, spec)
        for manifest in (cluster_object, control_plane, *bootstraps.values()):
            _refuse_empty_structs(tenant, cluster, manifest)

        policy = spec.removal_policy or args.removal_policy
        lifecycle = removal_options(policy)
        # What Cluster API does not own comes first and goes last: the Cluster depends on it, so a removal takes the
        # Cluster down first (its VMs drained through <c>-cluster-api, CAAPH then finds no cluster to uninstall
        # from), and a protected Cluster stops the run before any of it goes. A retained cluster keeps it all.
        unowned: dict[str, Any] = {"retain_on_delete": True} if policy is RemovalPolicy.RETAIN else {}
        outside = [
            *(
                custom_resource(f"{name}-{addon['spec']['releaseName']}", addon, self.child(**unowned))
                for addon in self._addons(args)
            ),
            custom_resource(
                f"{name}-cluster-api-policy", cluster_api_policy_manifest(tenant, cluster), self.child(**unowned)
            ),
        ]
        self.cluster = custom_resource(
            f"{name}-cluster",
            cluster_object,
            self.child(
                depends_on=outside,
                custom_timeouts=pulumi.CustomTimeouts(create=_CLUSTER_CREATE_TIMEOUT, delete=_CLUSTER_DELETE_TIMEOUT),
                **lifecycle,
            ),
        )
        """The ``Cluster``."""
        # What Cluster API owns (it sets the Cluster as their owner) goes with the Cluster: Cluster API deletes it, in
        # its own order, when the Cluster is deleted, and it stays while a retained or protected Cluster stays.
        owned: dict[str, Any] = {"deleted_with": self.cluster}
        self.infrastructure = custom_resource(
            f"{name}-infra", kubevirt_cluster_manifest(tenant, cluster), self.child(**lifecycle, **owned)
        )
        cp_machines = custom_resource(f"{name}-{CONTROL_PLANE}-machines", cp_template, self.child(**owned))
        self.control_plane = custom_resource(
            f"{name}-{CONTROL_PLANE}", control_plane, self.child(depends_on=[cp_machines], **lifecycle, **owned)
        )
        """The ``KubeadmControlPlane``."""
        self.machine_deployments: dict[str, CustomResource] = {}
        """Worker pool -> its ``MachineDeployment``."""
        for pool_name, pool in spec.worker_pools.items():
            machines = machine_template_manifest(tenant, cluster, pool_name, templates[pool_name])
            bootstrap = bootstraps[pool_name]
            made = [
                custom_resource(f"{name}-{pool_name}-machines", machines, self.child(**owned)),
                custom_resource(f"{name}-{pool_name}-bootstrap", bootstrap, self.child(**owned)),
            ]
            deployment = machine_deployment_manifest(
                tenant,
                cluster,
                pool_name,
                pool,
                spec,
                machine_template=machines["metadata"]["name"],
                bootstrap_template=bootstrap["metadata"]["name"],
            )
            self.machine_deployments[pool_name] = custom_resource(
                f"{name}-{pool_name}", deployment, self.child(depends_on=made, **owned)
            )
            custom_resource(
                f"{name}-{pool_name}-health", health_check_manifest(tenant, cluster, pool_name), self.child(**owned)
            )
        service = api_service_manifest(tenant, cluster, spec, args.api_pool)
        policy_manifest = api_policy_manifest(tenant, cluster, spec)
        if service is not None and policy_manifest is not None:
            # After the control plane is up (the Service's await wants a ready endpoint); its address is released
            # when the cluster is deleted, kept with a cluster that stays.
            exposed = self.child(depends_on=[self.cluster], **(owned if policy is not RemovalPolicy.DELETE else {}))
            Service(f"{name}-api", metadata=service["metadata"], spec=service["spec"], opts=exposed)
            custom_resource(f"{name}-api-policy", policy_manifest, exposed)

        address = str(spec.api_server.address) if spec.api_server.address is not None else None
        namespace = namespace_of(tenant)
        secret_id = self.cluster.id.apply(lambda _: f"{namespace}/{kubeconfig_secret_name(cluster)}")
        self.kubeconfig_secret = Secret.get(f"{name}-kubeconfig", secret_id, opts=self.child(depends_on=[self.cluster]))
        """``<c>-kubeconfig``, read (not managed) once the control plane is initialised."""
        read = KubeconfigRead(cluster, namespace, address, args.service_cidr)
        self.kubeconfig = pulumi.Output.secret(self.kubeconfig_secret.data.apply(read.exported))
        self.register_outputs({"kubeconfig": self.kubeconfig})

    @staticmethod
    def _addons(args: TenantClusterArgs) -> list[dict[str, Any]]:
        """The cluster's HelmChartProxies (:func:`addon_manifests`): Cilium, and the GPU Operator with GPU workers."""
        spec = args.spec
        return addon_manifests(
            args.tenant,
            args.name,
            cilium=args.addons["cilium"],
            gpu_operator=args.addons["gpuOperator"] if any(p.gpus for p in spec.worker_pools.values()) else None,
            nvlink_disabled=any(p.nvlink_disabled for p in args.placements.workers.values()),
        )


def _decoded(data: Mapping[str, str] | None) -> str:
    """The ``value`` key of a kubeconfig Secret's ``data``, base64-decoded. Raises ``ValueError`` when absent or not
    base64 of UTF-8 text."""
    value = (data or {}).get("value")
    if not value:
        raise ValueError("it has no 'value' key (Cluster API writes it there)")
    try:
        return base64.b64decode(value, validate=True).decode()
    except ValueError:  # binascii.Error, UnicodeDecodeError
        raise ValueError("its 'value' is not base64 of a text") from None


@dataclass(frozen=True)
class KubeconfigRead:
    """What the stack output makes of tenant cluster ``cluster``'s Secret ``<namespace>/<cluster>-kubeconfig``."""

    cluster: str
    """The tenant cluster's name."""
    namespace: str
    """The tenant's namespace."""
    address: str | None
    """``apiServer.address`` when the API is exposed (the exported server), else ``None``."""
    service_cidr: IPv4Network
    """The cell's service range (:attr:`TenantClusterArgs.service_cidr`)."""

    @property
    def secret(self) -> str:
        """``<namespace>/<cluster>-kubeconfig``."""
        return f"{self.namespace}/{kubeconfig_secret_name(self.cluster)}"

    def exported(self, data: Mapping[str, str] | None) -> str:
        """The kubeconfig the stack output shows for the Secret's ``data``: :func:`gpucell.workloads.
        tenant_kubeconfig.rebuilt_kubeconfig` of its ``value``, with one warning naming the Secret and what was
        dropped (never a byte of it) when the tenant's kubeconfig held more. Empty, with one warning, when there is
        nothing safe to export: the tenant's roles may write the Secret, and the cell's ``pulumi up`` must not stop
        at it. The KubeadmControlPlane writes a new one when the Secret is deleted (Cluster API v1.14.0
        ``controlplane/kubeadm/reconcilers/kubeadmcontrolplane/helpers.go`` ``reconcileKubeconfig``)."""
        try:
            rebuilt = rebuilt_kubeconfig(
                _decoded(data), self.cluster, address=self.address, service_cidr=self.service_cidr, port=API_PORT
            )
        except ValueError as problem:
            pulumi.log.warn(
                f"tenant cluster kubeconfig Secret {self.secret}: {problem}; the stack output leaves this cluster's "
                "kubeconfig empty until Cluster API writes one again (delete the Secret and its KubeadmControlPlane "
                "recreates it)"
            )
            return ""
        if rebuilt.dropped:
            pulumi.log.warn(
                f"tenant cluster kubeconfig Secret {self.secret}: dropped {', '.join(rebuilt.dropped)}; the stack "
                "output holds only its server, CA data and client certificate and key (Cluster API writes nothing "
                "else: a tenant member rewrote the Secret, or delete it and its KubeadmControlPlane recreates it)"
            )
        return rebuilt.text
