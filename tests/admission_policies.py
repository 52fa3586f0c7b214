"""An offline ValidatingAdmissionPolicy evaluator: a policy's match, match conditions, variables and validations
evaluated with a CEL library (``common-expression-language``, the Rust ``cel`` crate, with cel-go's strings
extension that Kubernetes' CEL environment includes: ``split``, ``trim``), as the API server would for one request.

Covers what gpucell's policies use: ``matchConstraints`` (``namespaceSelector`` ``matchLabels`` against the
namespace's ``kubernetes.io/metadata.name``, ``resourceRules`` by group, resource and operation), ``matchConditions``,
``variables`` (evaluated in order, each seeing the ones before) and ``validations`` (``expression``, ``message``),
with ``object`` (``null`` on DELETE), ``oldObject`` (``null`` on CREATE) and ``request`` (``operation``, ``userInfo``
``username`` and ``groups``) as the API server binds them. An expression that fails to evaluate refuses, as
``failurePolicy: Fail`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cel
from cel.stdlib import add_stdlib_to_context

RESOURCES = {
    "Pod": ("", "pods"),
    "PodExecOptions": ("", "pods"),
    "PodAttachOptions": ("", "pods"),
    "PodPortForwardOptions": ("", "pods"),
    "ReplicationController": ("", "replicationcontrollers"),
    "Service": ("", "services"),
    "Deployment": ("apps", "deployments"),
    "ReplicaSet": ("apps", "replicasets"),
    "StatefulSet": ("apps", "statefulsets"),
    "DaemonSet": ("apps", "daemonsets"),
    "Job": ("batch", "jobs"),
    "CronJob": ("batch", "cronjobs"),
    "VirtualMachine": ("kubevirt.io", "virtualmachines"),
    "VirtualMachineInstance": ("kubevirt.io", "virtualmachineinstances"),
    "VirtualMachineInstanceReplicaSet": ("kubevirt.io", "virtualmachineinstancereplicasets"),
    "Secret": ("", "secrets"),
    "RoleBinding": ("rbac.authorization.k8s.io", "rolebindings"),
}
"""Kind -> (API group, resource) of the kinds the tests send; a ``CONNECT``'s object is the subresource's options
(``PodExecOptions`` for ``pods/exec``), its resource the pod's."""


@dataclass(frozen=True)
class User:
    """``request.userInfo``: who writes."""

    username: str
    groups: tuple[str, ...] = ()


TENANT_MEMBER = User("oidc:alice@acme.example", ("oidc:acme-ml", "system:authenticated"))
"""A member of prod's tenant ``acme`` signed in with OIDC: the writer unless a test says otherwise."""
OPERATOR = User("system:admin", ("system:masters", "system:authenticated"))
"""k3s's admin, as Pulumi writes what gpucell renders."""


def controller(namespace: str, name: str) -> User:
    """The ServiceAccount ``name`` of ``namespace`` (a controller)."""
    return User(
        f"system:serviceaccount:{namespace}:{name}",
        ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"),
    )


@dataclass(frozen=True)
class Verdict:
    """One policy's answer: ``allowed``, else the ``message`` of the first failing validation."""

    policy: str
    allowed: bool
    message: str = ""


def _matches(
    policy: dict[str, Any], obj: dict[str, Any], namespace: str, operation: str, sub_resource: str = ""
) -> bool:
    constraints = policy["spec"]["matchConstraints"]
    wanted = (constraints.get("namespaceSelector") or {}).get("matchLabels") or {}
    labels = {"kubernetes.io/metadata.name": namespace}
    if any(labels.get(k) != v for k, v in wanted.items()):
        return False
    group, resource = RESOURCES[obj["kind"]]
    resource = f"{resource}/{sub_resource}" if sub_resource else resource
    return any(
        group in rule["apiGroups"] and resource in rule["resources"] and operation in rule["operations"]
        for rule in constraints["resourceRules"]
    )


@dataclass(frozen=True)
class _Request:
    obj: dict[str, Any] | None
    old: dict[str, Any] | None
    operation: str
    user: User
    sub_resource: str = ""

    def context(self, variables: dict[str, Any]) -> cel.Context:
        request = {
            "operation": self.operation,
            "subResource": self.sub_resource,
            "userInfo": {"username": self.user.username, "groups": list(self.user.groups)},
        }
        bound = {"object": self.obj, "oldObject": self.old, "request": request, "variables": variables}
        context = cel.Context(bound)
        add_stdlib_to_context(context, ["strings"])
        return context


def evaluate(
    policy: dict[str, Any],
    obj: dict[str, Any] | None,
    namespace: str,
    operation: str = "CREATE",
    *,
    old: dict[str, Any] | None = None,
    user: User = TENANT_MEMBER,
    sub_resource: str = "",
) -> Verdict | None:
    """The verdict of ``policy`` on ``operation`` by ``user`` of ``obj`` (``None`` on DELETE) replacing ``old``
    (``None`` on CREATE) in ``namespace``, through ``sub_resource`` (``ephemeralcontainers``; ``request.subResource``,
    empty for the object itself); ``None`` when it does not apply."""
    name = policy["metadata"]["name"]
    target = obj if obj is not None else old
    assert target is not None
    if not _matches(policy, target, namespace, operation, sub_resource):
        return None
    request = _Request(obj, old, operation, user, sub_resource)
    spec = policy["spec"]
    for condition in spec.get("matchConditions", []):
        if cel.evaluate(condition["expression"], request.context({})) is not True:
            return None
    variables: dict[str, Any] = {}
    for variable in spec.get("variables", []):
        variables[variable["name"]] = cel.evaluate(variable["expression"], request.context(variables))
    for validation in spec["validations"]:
        try:
            result = cel.evaluate(validation["expression"], request.context(variables))
        except Exception as exc:  # failurePolicy Fail: an error refuses, and the verdict says so
            return Verdict(name, False, f"expression error: {exc}")
        if result is not True:
            return Verdict(name, False, validation["message"])
    return Verdict(name, True)


def refusals(
    policies: list[dict[str, Any]],
    obj: dict[str, Any] | None,
    namespace: str,
    operation: str = "CREATE",
    *,
    old: dict[str, Any] | None = None,
    user: User = TENANT_MEMBER,
    sub_resource: str = "",
) -> list[Verdict]:
    """The refusing verdicts of every policy of ``policies`` (bindings are skipped) that applies."""
    verdicts = [
        evaluate(p, obj, namespace, operation, old=old, user=user, sub_resource=sub_resource)
        for p in policies
        if p["kind"] == "ValidatingAdmissionPolicy"
    ]
    return [v for v in verdicts if v is not None and not v.allowed]
