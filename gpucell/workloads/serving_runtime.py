"""ServingRuntime: a tenant's own model server, which its endpoints name as they name KServe's built-in ones.

What is rendered, in the tenant's namespace: a ``serving.kserve.io/v1alpha1`` ``ServingRuntime`` named after the
runtime (checked against the KServe v0.20.0 CRD ``config/crd/full/serving.kserve.io_servingruntimes.yaml``), with
one container ``kserve-container`` (the name KServe merges an endpoint's ``predictor.model`` into), its
``supportedModelFormats`` and ``protocolVersions`` as declared. KServe's controller looks a runtime up in the
endpoint's namespace before the cluster's (``GetServingRuntime``), and a namespaced runtime serves only that
namespace: another tenant's endpoints cannot use it.

The container runs ``restricted`` as every pod of the tenant must (non-root, no privilege escalation, capabilities
dropped, seccomp ``RuntimeDefault``): an image that needs root does not start there.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pulumi

from gpucell._component import CellComponent, custom_resource
from gpucell.spec.serving import EnvVar, ServingRuntimeSpec
from gpucell.tenancy._common import object_meta

if TYPE_CHECKING:
    from gpucell.tenancy.tenant import TenantView

__all__ = ["CONTAINER", "ServingRuntime", "ServingRuntimeArgs", "env_entry", "serving_runtime_manifest"]

CONTAINER = "kserve-container"
"""The runtime container's name, which KServe merges the endpoint's model container into (``MergeRuntimeContainers``,
KServe v0.20.0 ``pkg/controller/v1beta1/inferenceservice/utils/utils.go``)."""
_COMPONENT = "serving-runtime"
RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "privileged": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}
"""The container ``securityContext`` of Pod Security ``restricted``."""


def env_entry(var: EnvVar, secret_name: str | None = None) -> dict[str, Any]:
    """One ``EnvVar`` as a container has it: ``value``, or ``valueFrom.secretKeyRef`` to the tenant's Secret, or
    (``secretConfigKey``) to key ``<name>`` of ``secret_name``, the endpoint's env Secret."""
    if var.value is not None:
        return {"name": var.name, "value": var.value}
    if var.secret_key_ref is not None:
        ref = {"name": var.secret_key_ref.name, "key": var.secret_key_ref.key}
    else:
        assert secret_name is not None  # a secretConfigKey entry is rendered with its endpoint's Secret
        ref = {"name": secret_name, "key": var.name}
    return {"name": var.name, "valueFrom": {"secretKeyRef": ref}}


def serving_runtime_manifest(tenant: str, name: str, spec: ServingRuntimeSpec) -> dict[str, Any]:
    """The ``ServingRuntime`` ``name`` of ``tenant`` (see the module doc): formats with their ``autoSelect`` (and
    ``version``/``priority`` when given), ``protocolVersions`` when given, the container's image, command, args,
    ports, env and restricted ``securityContext`` (with ``runAsUser`` when given)."""
    formats = []
    for model_format in spec.supported_model_formats:
        entry: dict[str, Any] = {"name": model_format.name, "autoSelect": model_format.auto_select}
        if model_format.version is not None:
            entry["version"] = model_format.version
        if model_format.priority is not None:
            entry["priority"] = model_format.priority
        formats.append(entry)
    container: dict[str, Any] = {"name": CONTAINER, "image": spec.image}
    if spec.command:
        container["command"] = list(spec.command)
    if spec.args:
        container["args"] = list(spec.args)
    if spec.ports:
        container["ports"] = [
            {"containerPort": p.container_port, "protocol": p.protocol, **({"name": p.name} if p.name else {})}
            for p in spec.ports
        ]
    if spec.env:
        container["env"] = [env_entry(var) for var in spec.env]
    container["securityContext"] = copy.deepcopy(RESTRICTED_CONTAINER)
    if spec.run_as_user is not None:
        container["securityContext"]["runAsUser"] = spec.run_as_user
    body: dict[str, Any] = {"supportedModelFormats": formats}
    if spec.protocol_versions:
        body["protocolVersions"] = [p.value for p in spec.protocol_versions]
    body["containers"] = [container]
    return {
        "apiVersion": "serving.kserve.io/v1alpha1",
        "kind": "ServingRuntime",
        "metadata": object_meta(tenant, name, workload=name, component=_COMPONENT),
        "spec": body,
    }


@dataclass(frozen=True)
class ServingRuntimeArgs:
    """Inputs of :class:`ServingRuntime`."""

    name: str
    """The runtime's name (``metadata.name``; what endpoints name in ``runtime``)."""
    spec: ServingRuntimeSpec
    """What the tenant declared."""
    tenant: TenantView
    """The tenant: its namespace, readiness, cluster and platform (whose KServe installs the CRD and webhook)."""


class ServingRuntime(CellComponent):
    """A tenant's ServingRuntime (``gpucell:index:ServingRuntime``). Child: ``f"{name}-runtime"``, after the
    tenant's objects and KServe's controller release; the tenant's endpoints that name it come after it."""

    def __init__(self, name: str, args: ServingRuntimeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        tenant = args.tenant
        manifest = serving_runtime_manifest(tenant.name, args.name, args.spec)
        super().__init__("ServingRuntime", name, opts, tenant.cluster)
        # After KServe's controller: its webhook validates ServingRuntimes (servingruntime_webhook.go).
        kserve = [tenant.platform.kserve.resources] if tenant.platform.kserve is not None else []
        self.runtime = custom_resource(f"{name}-runtime", manifest, self.child(depends_on=[*tenant.ready, *kserve]))
        """The ``ServingRuntime``."""
        self.register_outputs({})
