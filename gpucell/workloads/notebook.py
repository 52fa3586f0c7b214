"""Notebook: a tenant's Jupyter server as a one-replica StatefulSet with a home PVC, a Service and a token.

What is rendered, in the tenant's namespace (``tenant-<tenant>``), every object named after the workload
unless said otherwise:

- a ``Secret`` ``<notebook>-token`` with the access token (key ``token``) from a ``random.RandomPassword``;
- an ``apps/v1`` ``StatefulSet`` (1 replica) running the Jupyter image, with the home directory on a PVC from
  ``volumeClaimTemplates`` (``home-<notebook>-0``, kept when the StatefulSet is deleted);
- a ``ClusterIP`` ``Service`` on port 8888;
- with ``gpu.allocation: dra``: a ``resource.k8s.io/v1`` ``ResourceClaimTemplate`` ``<notebook>-gpus-<hash>`` for
  its GPUs (:func:`gpucell.tenancy._common.container_claim_template_manifest`), from which Kubernetes makes the
  pod's claim;
- with ``expose``: a ``networking.k8s.io/v1`` ``Ingress`` for ``expose.host`` and a ``cilium.io/v2``
  ``CiliumNetworkPolicy`` ``<notebook>-ingress`` that lets the ingress controller (and ``allowFromCidrs``)
  reach port 8888, which the tenant's default-deny policies would drop.

The image follows the Jupyter Docker Stacks layout (jupyter/docker-stacks ``docker-stacks-foundation`` and
``base-notebook`` Dockerfiles): user ``jovyan`` with UID 1000 and primary group ``users`` (GID 100), home
``/home/jovyan``, ``/opt/conda`` group-writable by GID 100, entrypoint ``tini -g -- start.sh`` and command
``start-notebook.py`` (``jupyter lab``), listening on ``JUPYTER_PORT`` 8888 on all interfaces
(``/etc/jupyter/jupyter_server_config.py``). The image's own entrypoint and command are kept.

The token reaches Jupyter Server as a *file*: the Secret is mounted read-only and ``JUPYTER_TOKEN_FILE`` names
it (jupyter_server ``IdentityProvider.token``: "The token can be read from the file referenced by
JUPYTER_TOKEN_FILE or set directly with the JUPYTER_TOKEN environment variable"). A file keeps the token out
of the environment every kernel and terminal inherits (checkov CKV_K8S_35: secrets as files, not env vars).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_random
from pulumi_kubernetes.apiextensions import CustomResource
from pulumi_kubernetes.apps.v1 import StatefulSet
from pulumi_kubernetes.core.v1 import Service
from pulumi_kubernetes.networking.v1 import Ingress
from pulumi_kubernetes.resource.v1 import ResourceClaimTemplate

from gpucell._component import CellComponent
from gpucell.admission.dra import pod_resource_claims
from gpucell.admission.isolation import guest_vm, is_isolated
from gpucell.admission.placement import Placement
from gpucell.spec.lifecycle import removal_options
from gpucell.spec.tenancy import namespace_of
from gpucell.spec.workloads import NotebookSpec, multi_gpu_shm_gib
from gpucell.tenancy._common import (
    NVIDIA_RUNTIME_CLASS,
    cilium_network_policy,
    container_claim_template_manifest,
    container_placement,
    container_resources,
    custom_resource,
    gpu_dependencies,
    object_meta,
    opaque_secret,
    scheduling,
    vm_placement,
    workload_labels,
)
from gpucell.tenancy.tenant import admit_workload
from gpucell.workloads.isolated import (
    GUEST_SECRETS,
    UNIT_KEY,
    GuestContainer,
    guest_manifest,
    guest_unit,
    guest_user_data,
    qualified_image,
)
from gpucell.workloads.virtual_machine import CLOUD_INIT_KEY, cloud_init_secret_name, vm_platform_ready
from gpucell.workloads.virtual_machine import claim_template_manifest as vm_claim_template_manifest

if TYPE_CHECKING:
    from gpucell.admission.tenants import ClusterFacts
    from gpucell.spec.workloads import GpuVirtualMachineSpec
    from gpucell.tenancy.tenant import TenantView

__all__ = [
    "HOME",
    "INGRESS_CLASS_NAMESPACE_LABEL",
    "JUPYTER_GID",
    "JUPYTER_PORT",
    "JUPYTER_UID",
    "TOKEN_KEY",
    "TOKEN_MOUNT",
    "Notebook",
    "NotebookArgs",
    "claim_template_manifest",
    "guest_container",
    "guest_data",
    "ingress_manifest",
    "ingress_policy_manifest",
    "isolated_manifest",
    "service_manifest",
    "statefulset_manifest",
    "token_secret_name",
]

JUPYTER_PORT = 8888
"""Port Jupyter Server listens on (docker-stacks ``ENV JUPYTER_PORT=8888``) and the Service's port."""
JUPYTER_UID = 1000
"""UID of ``jovyan`` (docker-stacks ``NB_UID``)."""
JUPYTER_GID = 100
"""GID of ``users``, ``jovyan``'s primary group (docker-stacks ``NB_GID``); home and ``/opt/conda`` are
group-writable by it, and the home PVC gets it as ``fsGroup``."""
HOME = "/home/jovyan"
"""Home directory of ``jovyan``, where the home PVC is mounted."""
TOKEN_KEY = "token"
"""Key of the access token in the token Secret."""
TOKEN_MOUNT = "/etc/gpucell/jupyter"
"""Directory the token Secret is mounted at (read-only); ``JUPYTER_TOKEN_FILE`` is ``<this>/token``."""
INGRESS_CLASS_NAMESPACE_LABEL = "gpucell.io/ingress-class"
"""Namespace label naming the ingress class whose controller runs there (``gpucell.io/ingress-class: nginx``
on the controller's namespace): the notebook's policy admits pods of namespaces labelled with its
``expose.ingressClass``."""
_HOME_VOLUME = "home"
_CONTAINER = "notebook"
_COMPONENT = "notebook"
_TMP_LIMIT = "10Gi"
_STATEFULSET_TIMEOUT = "30m"


@dataclass(frozen=True)
class NotebookArgs:
    """Inputs of :class:`Notebook`."""

    name: str
    """The workload name: ``metadata.name`` of the StatefulSet and Service (a DNS-1123 label, unique in the
    tenant)."""
    spec: NotebookSpec
    """What the tenant declared."""
    tenant: TenantView
    """Wiring: the tenant's namespace and readiness, its cluster (provider), its cluster's facts (placement) and
    platform (the GPU Operator or DRA driver to wait for)."""


def token_secret_name(notebook: str) -> str:
    """Name of the token Secret: ``<notebook>-token``."""
    return f"{notebook}-token"


def _selector(notebook: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": notebook, "app.kubernetes.io/component": _COMPONENT}


def _checkov_skips(spec: NotebookSpec) -> dict[str, str]:
    """``checkov.io/skipN`` annotations: one per check that cannot hold here, with the reason."""
    reasons = [
        "CKV_K8S_40=docker-stacks images own /home/jovyan and /opt/conda as UID 1000 (NB_UID) and resolve "
        "only it in /etc/passwd, which a read-only root cannot extend for another UID",
        "CKV2_K8S_6=tenant isolation is CiliumNetworkPolicies (default deny per tenant namespace), not NetworkPolicies",
    ]
    if "@sha256:" not in spec.image:
        reasons.append(
            "CKV_K8S_43=notebook images are declared by tag (docker-stacks publishes dated tags); "
            "imagePullPolicy Always re-resolves it on every start"
        )
    if not spec.read_only_root:
        reasons.append("CKV_K8S_22=the notebook declares readOnlyRoot: false (writable /opt/conda for installs)")
    return {f"checkov.io/skip{i}": reason for i, reason in enumerate(reasons, start=1)}


def _container(spec: NotebookSpec, placement: Placement) -> dict[str, Any]:
    probe = {"httpGet": {"path": "/api", "port": "http"}}
    mounts = [
        {"name": _HOME_VOLUME, "mountPath": HOME},
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "shm", "mountPath": "/dev/shm"},
        {"name": "token", "mountPath": TOKEN_MOUNT, "readOnly": True},
    ]
    return {
        "name": _CONTAINER,
        "image": spec.image,
        "imagePullPolicy": "Always",
        "env": [{"name": "JUPYTER_TOKEN_FILE", "value": f"{TOKEN_MOUNT}/{TOKEN_KEY}"}],
        "ports": [{"name": "http", "containerPort": JUPYTER_PORT, "protocol": "TCP"}],
        "resources": container_resources(spec.cpu_millicores, spec.memory_gib + multi_gpu_shm_gib(spec.gpu), placement),
        # /api answers without a token ({"version": ...}); docker-stacks' own healthcheck polls it too.
        "startupProbe": {**probe, "periodSeconds": 5, "failureThreshold": 60},
        "readinessProbe": {**probe, "periodSeconds": 10, "failureThreshold": 3},
        "livenessProbe": {**probe, "periodSeconds": 30, "timeoutSeconds": 5, "failureThreshold": 5},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": spec.read_only_root,
            "runAsNonRoot": True,
            "runAsUser": JUPYTER_UID,
            "runAsGroup": JUPYTER_GID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": mounts,
    }


def _shm_gib(spec: NotebookSpec) -> int:
    """``/dev/shm`` of a notebook, GiB: half its ``memoryGib`` (at least 1), plus
    :func:`gpucell.spec.workloads.multi_gpu_shm_gib` with two or more GPUs (added to its memory limit too)."""
    return max(1, spec.memory_gib // 2) + multi_gpu_shm_gib(spec.gpu)


def claim_template_manifest(tenant: str, name: str, spec: NotebookSpec, placement: Placement) -> dict[str, Any] | None:
    """The notebook's ``ResourceClaimTemplate`` with ``gpu.allocation: dra``, else ``None``."""
    return container_claim_template_manifest(tenant, name, spec.gpu, placement, _COMPONENT)


def statefulset_manifest(
    tenant: str, name: str, spec: NotebookSpec, cell: ClusterFacts, placement: Placement
) -> dict[str, Any]:
    """The ``apps/v1`` ``StatefulSet`` of notebook ``name`` in ``tenant``'s namespace, as a dict.

    - One replica of container ``notebook``: ``spec.image`` (``imagePullPolicy: Always``), port ``http`` 8888,
      ``JUPYTER_TOKEN_FILE`` -> the token Secret mounted read-only at :data:`TOKEN_MOUNT` (mode 0440, readable
      through GID 100); requests = limits: ``cpu`` ``"<cpuMillicores>m"``, ``memory`` ``"<memoryGib>Gi"`` and
      the placement's GPU resource (``nvidia.com/gpu`` or ``nvidia.com/mig-<profile>``) x count.
    - Probes on ``GET /api`` (unauthenticated in Jupyter Server): startup (up to 5 min), readiness, liveness.
    - Restricted security context: pod ``runAsNonRoot``, ``runAsUser`` 1000, ``runAsGroup``/``fsGroup`` 100
      (``fsGroupChangePolicy: OnRootMismatch``), ``seccompProfile: RuntimeDefault``; container
      ``allowPrivilegeEscalation: false``, ``capabilities.drop: [ALL]``, ``readOnlyRootFilesystem:
      spec.readOnlyRoot``. Writable paths: the home PVC, ``/tmp`` (emptyDir, 10 GiB) and ``/dev/shm``
      (memory emptyDir, half the memory limit, counted against it: PyTorch DataLoader workers share tensors
      there and the runtime's default is 64 MiB; with two or more GPUs, NCCL's
      :func:`gpucell.spec.workloads.multi_gpu_shm_gib` more, added to the memory request and limit too). Jupyter
      writes nothing else: its runtime, data and config directories are under ``~/.local`` and ``~/.jupyter``,
      caches under ``~/.cache``.
    - ``automountServiceAccountToken: false``, ``enableServiceLinks: false``.
    - GPUs: ``runtimeClassName: nvidia``; with DRA instead ``resourceClaims`` ``gpus`` from
      :func:`claim_template_manifest` and the container's ``resources.claims``, and the default runtime (containerd
      injects the claim's GPUs from the DRA driver's CDI spec; the ``nvidia`` runtime would also honour an image's
      ``NVIDIA_VISIBLE_DEVICES=all``); required node affinity to the pools of ``placement``
      (:func:`gpucell.tenancy._common.container_placement` of ``spec.gpu`` in ``cell``; for a CPU
      notebook the region's cpu-role pools, or any node when there are none), tolerations for those pools'
      taints (from ``cell``).
    - Home: ``volumeClaimTemplates`` ``home`` (ReadWriteOnce, ``"<homeGib>Gi"``, ``storageClassName`` only
      when declared, else the cell's default class); ``persistentVolumeClaimRetentionPolicy`` Retain/Retain so
      deleting the notebook keeps the home.
    - Annotations ``checkov.io/skipN`` with the reason for each check that cannot hold (UID 1000 is the
      image's; tenant isolation is Cilium; a tag rather than a digest; a declared writable root).
    - ``priorityClassName`` when declared.
    """
    pod: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": JUPYTER_UID,
            "runAsGroup": JUPYTER_GID,
            "fsGroup": JUPYTER_GID,
            "fsGroupChangePolicy": "OnRootMismatch",
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [_container(spec, placement)],
        "volumes": [
            {"name": "tmp", "emptyDir": {"sizeLimit": _TMP_LIMIT}},
            {
                "name": "shm",
                "emptyDir": {"medium": "Memory", "sizeLimit": f"{_shm_gib(spec)}Gi"},
            },
            {
                "name": "token",
                "secret": {
                    "secretName": token_secret_name(name),
                    "defaultMode": 0o440,
                    "items": [{"key": TOKEN_KEY, "path": TOKEN_KEY}],
                },
            },
        ],
    }
    if placement.resource is not None:
        pod["runtimeClassName"] = NVIDIA_RUNTIME_CLASS
    if spec.priority_class_name is not None:
        pod["priorityClassName"] = spec.priority_class_name
    template = claim_template_manifest(tenant, name, spec, placement)
    if template is not None:
        pod["resourceClaims"] = pod_resource_claims(template)
    pod.update(scheduling(placement, cell.node_pools))
    claim: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": f"{spec.home_gib}Gi"}},
    }
    if spec.storage_class is not None:
        claim["storageClassName"] = spec.storage_class
    labels = workload_labels(tenant, name, _COMPONENT)
    metadata = object_meta(tenant, name, workload=name, component=_COMPONENT)
    metadata["annotations"] = _checkov_skips(spec)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": metadata,
        "spec": {
            "replicas": 1,
            "serviceName": name,
            "selector": {"matchLabels": _selector(name)},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
            "template": {"metadata": {"labels": labels}, "spec": pod},
            "volumeClaimTemplates": [
                {"metadata": {"name": _HOME_VOLUME, "labels": labels}, "spec": claim},
            ],
        },
    }


def service_manifest(tenant: str, name: str, *, isolated: bool = False) -> dict[str, Any]:
    """The ``ClusterIP`` ``Service`` named after the notebook: port ``http`` 8888 -> the pod's ``http``; for an
    ``isolated`` notebook the same Service, selecting its VM's ``virt-launcher`` pod by the same labels, to port 8888
    by number (a launcher pod names no port; KubeVirt's masquerade binding forwards it to the guest)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_meta(tenant, name, workload=name, component=_COMPONENT),
        "spec": {
            "type": "ClusterIP",
            "selector": _selector(name),
            "ports": [
                {
                    "name": "http",
                    "protocol": "TCP",
                    "port": JUPYTER_PORT,
                    "targetPort": JUPYTER_PORT if isolated else "http",
                }
            ],
        },
    }


def guest_container(spec: NotebookSpec) -> GuestContainer:
    """What an isolated notebook's guest runs: ``spec.image`` on port 8888 with the VM's GPUs, the home disk at
    :data:`HOME`, the token from the secret disk as ``JUPYTER_TOKEN_FILE`` (a file, as in the pod), ``/dev/shm`` half
    of ``memoryGib`` (as the pod's)."""
    return GuestContainer(
        qualified_image(spec.image),
        JUPYTER_PORT,
        gpus=spec.gpu is not None,
        volumes=(f"/var/lib/gpucell/home:{HOME}", f"{GUEST_SECRETS}:{TOKEN_MOUNT}:ro"),
        env={"JUPYTER_TOKEN_FILE": f"{TOKEN_MOUNT}/{TOKEN_KEY}"},
        shm_gib=_shm_gib(spec),
    )


def guest_data(name: str, spec: NotebookSpec, *, nvlink_disabled: bool = False) -> dict[str, str]:
    """The isolated notebook's cloud-init Secret data: the user data (:func:`gpucell.workloads.isolated.
    guest_user_data`: home disk, secret disk with the token Secret, the unit installed at every boot) and the
    notebook's unit (:func:`guest_unit_of`). The token itself is in neither."""
    user_data = guest_user_data(home=True, secrets=True, nvlink_disabled=nvlink_disabled)
    return {CLOUD_INIT_KEY: user_data, UNIT_KEY: guest_unit_of(name, spec)}


def guest_unit_of(name: str, spec: NotebookSpec) -> str:
    """The isolated notebook's Quadlet unit (:func:`gpucell.workloads.isolated.guest_unit` of
    :func:`guest_container`, with its home)."""
    return guest_unit(name, guest_container(spec), home=True)


def isolated_manifest(
    tenant: str,
    name: str,
    guest: GpuVirtualMachineSpec,
    cell: ClusterFacts,
    placement: Placement,
    *,
    spec: NotebookSpec,
) -> dict[str, Any]:
    """The ``VirtualMachine`` of an isolated notebook (:func:`gpucell.workloads.isolated.guest_manifest`): its
    launcher pod labelled as the notebook's pod was (so the Service and the ingress policy select it), the token
    Secret as its secret disk, the home on its data disk, the cloud-init Secret as its unit disk."""
    labels = {**workload_labels(tenant, name, _COMPONENT)}
    return guest_manifest(
        tenant,
        name,
        guest,
        cell,
        placement,
        pod_labels=labels,
        secret=token_secret_name(name),
        home=True,
        unit_secret=cloud_init_secret_name(name),
        unit=guest_unit_of(name, spec),
    )


def ingress_manifest(tenant: str, name: str, spec: NotebookSpec) -> dict[str, Any] | None:
    """The ``networking.k8s.io/v1`` ``Ingress`` named after the notebook, or ``None`` without ``expose``.

    ``ingressClassName`` ``expose.ingressClass``; one rule for ``expose.host``, path ``/`` (``Prefix``) to the
    Service's port 8888; ``tls`` for the host with ``expose.tlsSecret`` when given (plain HTTP otherwise).
    """
    expose = spec.expose
    if expose is None:
        return None
    backend = {"service": {"name": name, "port": {"number": JUPYTER_PORT}}}
    ingress_spec: dict[str, Any] = {
        "ingressClassName": expose.ingress_class,
        "rules": [
            {
                "host": expose.host,
                "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]},
            }
        ],
    }
    if expose.tls_secret is not None:
        ingress_spec["tls"] = [{"hosts": [expose.host], "secretName": expose.tls_secret}]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": object_meta(tenant, name, workload=name, component=_COMPONENT),
        "spec": ingress_spec,
    }


def ingress_policy_manifest(tenant: str, name: str, spec: NotebookSpec) -> dict[str, Any] | None:
    """The ``cilium.io/v2`` ``CiliumNetworkPolicy`` ``<notebook>-ingress`` of an exposed notebook, else None.

    It selects the notebook's pod and admits TCP 8888 from:

    - the ingress controller. Cilium's own Ingress and Gateway API implementation proxies with the reserved
      ``ingress`` identity (entity ``ingress``); any other controller runs as ordinary pods, which are
      selected by their namespace carrying :data:`INGRESS_CLASS_NAMESPACE_LABEL` ``= expose.ingressClass`` (a
      k3s cell runs no controller of its own: Traefik is disabled, so the platform engineer labels the
      namespace of the one they install);
    - ``expose.allowFromCidrs`` (``fromCIDRSet``): clients that reach the pod directly. Behind a proxying
      controller the pod sees the controller's address: those clients are for the controller to restrict.

    Everything else stays denied by the tenant's default-deny policies.
    """
    expose = spec.expose
    if expose is None:
        return None
    port = [{"ports": [{"port": str(JUPYTER_PORT), "protocol": "TCP"}]}]
    namespace_label = f"k8s:io.cilium.k8s.namespace.labels.{INGRESS_CLASS_NAMESPACE_LABEL}"
    rules: list[dict[str, Any]] = [
        {"fromEntities": ["ingress"], "toPorts": port},
        {"fromEndpoints": [{"matchLabels": {namespace_label: expose.ingress_class}}], "toPorts": port},
    ]
    if expose.allow_from_cidrs:
        cidrs = [{"cidr": str(cidr)} for cidr in expose.allow_from_cidrs]
        rules.append({"fromCIDRSet": cidrs, "toPorts": port})
    meta = object_meta(tenant, f"{name}-ingress", workload=name, component=_COMPONENT)
    return cilium_network_policy(meta, {"ingress": rules}, match_labels=_selector(name))


def _rendered(
    tenant: str, name: str, spec: NotebookSpec, facts: ClusterFacts
) -> tuple[GpuVirtualMachineSpec | None, Placement, dict[str, Any]]:
    """``(guest VM or None, placement, StatefulSet or VirtualMachine manifest)`` of notebook ``name``: isolated by its
    own ``isolation`` or its tenant's default (:func:`gpucell.admission.isolation.is_isolated`), or a container."""
    isolation = facts.tenants[tenant].isolation
    if not is_isolated(spec, isolation):
        placement = container_placement(spec.gpu, facts, "a GPU notebook")
        return None, placement, statefulset_manifest(tenant, name, spec, facts, placement)
    guest = guest_vm(spec, isolation)
    placement = vm_placement(name, guest, facts)
    return guest, placement, isolated_manifest(tenant, name, guest, facts, placement, spec=spec)


class Notebook(CellComponent):
    """A tenant's Jupyter notebook (``gpucell:index:Notebook``) in its cell, with the cell's provider.

    Children (``name`` is the component name, e.g. ``fra1-acme-nb-alice``):

    - ``f"{name}-token"``: ``random:RandomPassword`` (48 letters and digits: it goes into ``?token=`` URLs)
      and ``f"{name}-token-secret"``: the ``Secret`` holding it (a Pulumi secret);
    - ``f"{name}-statefulset"`` (:func:`statefulset_manifest`), after the Secret, and ``f"{name}-service"``;
    - with DRA GPUs: ``f"{name}-gpu-claim"``, the ``ResourceClaimTemplate`` (:func:`claim_template_manifest`), before
      the StatefulSet;
    - with ``expose``: ``f"{name}-ingress"`` and ``f"{name}-ingress-policy"``
      (:func:`ingress_policy_manifest`).

    An isolated notebook (``isolation: vm``, its own or its tenant's default; :mod:`gpucell.workloads.isolated`) has
    ``f"{name}-cloud-init"`` (its guest's user data) and ``f"{name}-vm"`` (:func:`isolated_manifest`, after the token
    Secret, the cloud-init Secret and the Service) instead of the StatefulSet; the token, Service, Ingress and policy
    are the same.

    Every child depends on ``tenant.ready`` (namespace, quota, policies); with GPUs, the StatefulSet also
    waits for the GPU Operator's Release (device plugin and the ``nvidia`` RuntimeClass), or with DRA GPUs for the
    DRA driver's (:func:`gpucell.tenancy._common.gpu_dependencies`). The StatefulSet takes the notebook's
    ``removalPolicy`` (by default the tenant's, ``protect``); its home PVC is kept in every case
    (``persistentVolumeClaimRetentionPolicy`` Retain) and goes only with the tenant's namespace. Pulumi waits up to
    30 minutes for the pod to become ready: GPU notebook images are several GB.
    """

    namespace: pulumi.Output[str]
    """The tenant namespace the notebook lives in (``tenant-<tenant>``)."""
    service_name: pulumi.Output[str]
    """Name of the notebook's ``ClusterIP`` Service (port 8888)."""
    url: pulumi.Output[str]
    """``https://<host>/`` (``http://`` without a TLS secret) when exposed, else the in-cluster
    ``http://<notebook>.<namespace>.svc:8888/``."""
    token: pulumi.Output[str]
    """The access token (secret)."""

    def __init__(self, name: str, args: NotebookArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        tenant = args.tenant
        notebook, spec = args.name, args.spec
        facts = admit_workload(tenant, "notebooks", notebook, spec)
        guest, placement, manifest = _rendered(tenant.name, notebook, spec, facts)
        super().__init__("Notebook", name, opts, tenant.cluster)
        after: list[pulumi.Resource] = list(tenant.ready)
        self.placement = placement
        """Pools the notebook may run on and the GPU resource it requests (its VM's, when isolated)."""
        gpu_after = gpu_dependencies(tenant.platform, placement)
        self.claim_template: ResourceClaimTemplate | None = None
        """The ``ResourceClaimTemplate`` of its DRA GPUs, when ``gpu.allocation`` is ``dra``."""
        template = (
            claim_template_manifest(tenant.name, notebook, spec, placement)
            if guest is None
            else vm_claim_template_manifest(tenant.name, notebook, guest, placement)
        )
        if template is not None:
            self.claim_template = ResourceClaimTemplate(
                f"{name}-gpu-claim",
                metadata=template["metadata"],
                spec=template["spec"],
                opts=self.child(depends_on=[*after, *gpu_after]),
            )
            gpu_after = [*gpu_after, self.claim_template]

        self.password = pulumi_random.RandomPassword(
            f"{name}-token", length=48, special=False, opts=self.child(depends_on=after)
        )
        """The random token."""
        self.token_secret = opaque_secret(
            f"{name}-token-secret",
            object_meta(tenant.name, token_secret_name(notebook), workload=notebook, component=_COMPONENT),
            {TOKEN_KEY: self.password.result},
            self.child(depends_on=after),
        )
        """The ``Secret`` with the token."""
        service = service_manifest(tenant.name, notebook, isolated=guest is not None)
        self.service = Service(
            f"{name}-service",
            metadata=service["metadata"],
            spec=service["spec"],
            opts=self.child(depends_on=after),
        )
        """The ``ClusterIP`` Service."""
        self.workload = self._run(name, args, guest, manifest, [*after, *gpu_after])
        """What is ready when the notebook is: its StatefulSet, or its VirtualMachine when isolated."""
        self.ingress: Ingress | None = None
        """The ``Ingress``, when exposed."""
        self.ingress_policy: CustomResource | None = None
        """The ``CiliumNetworkPolicy`` admitting the ingress controller, when exposed."""
        ingress = ingress_manifest(tenant.name, notebook, spec)
        policy = ingress_policy_manifest(tenant.name, notebook, spec)
        if ingress is not None and policy is not None:
            self.ingress = Ingress(
                f"{name}-ingress",
                metadata=ingress["metadata"],
                spec=ingress["spec"],
                opts=self.child(depends_on=[*after, self.service]),
            )
            self.ingress_policy = custom_resource(f"{name}-ingress-policy", policy, self.child(depends_on=after))

        namespace = namespace_of(tenant.name)
        if spec.expose is not None:
            scheme = "https" if spec.expose.tls_secret is not None else "http"
            address = f"{scheme}://{spec.expose.host}/"
        else:
            address = f"http://{notebook}.{namespace}.svc:{JUPYTER_PORT}/"
        self.namespace = self.workload.urn.apply(lambda _: namespace)
        self.service_name = self.service.metadata.apply(lambda _: notebook)
        self.url = self.workload.urn.apply(lambda _: address)
        self.token = pulumi.Output.secret(self.password.result)
        self.register_outputs(
            {
                "namespace": self.namespace,
                "serviceName": self.service_name,
                "url": self.url,
                "token": self.token,
            }
        )

    def _run(
        self,
        name: str,
        args: NotebookArgs,
        guest: GpuVirtualMachineSpec | None,
        manifest: dict[str, Any],
        after: list[pulumi.Resource],
    ) -> pulumi.Resource:
        """Register what runs the notebook, after ``after``, the token Secret and the Service: its StatefulSet, or
        when isolated its cloud-init Secret and VirtualMachine; returns the StatefulSet or the VirtualMachine."""
        tenant, notebook, spec = args.tenant, args.name, args.spec
        lifecycle = removal_options(spec.removal_policy or tenant.removal_policy)
        self.statefulset: StatefulSet | None = None
        """The ``StatefulSet``; none when isolated."""
        self.vm: pulumi.CustomResource | None = None
        """The ``VirtualMachine`` the notebook runs in, when isolated (:mod:`gpucell.workloads.isolated`)."""
        self.cloud_init: pulumi.Resource | None = None
        """The isolated notebook's cloud-init ``Secret`` (the guest's unit; no secret value in it)."""
        if guest is None:
            self.statefulset = StatefulSet(
                f"{name}-statefulset",
                metadata=manifest["metadata"],
                spec=manifest["spec"],
                opts=self.child(
                    depends_on=[*after, self.token_secret, self.service],
                    custom_timeouts=pulumi.CustomTimeouts(create=_STATEFULSET_TIMEOUT, update=_STATEFULSET_TIMEOUT),
                    **lifecycle,
                ),
            )
            return self.statefulset
        self.cloud_init = opaque_secret(
            f"{name}-cloud-init",
            object_meta(tenant.name, cloud_init_secret_name(notebook), workload=notebook),
            guest_data(notebook, spec, nvlink_disabled=self.placement.nvlink_disabled),
            self.child(depends_on=list(tenant.ready)),
        )
        self.vm = custom_resource(
            f"{name}-vm",
            manifest,
            self.child(
                depends_on=[
                    *after,
                    *vm_platform_ready(tenant.platform, guest),
                    self.token_secret,
                    self.cloud_init,
                    self.service,
                ],
                **lifecycle,
            ),
        )
        return self.vm
