"""An offline ValidatingAdmissionPolicy evaluator: a policy's match, match conditions, variables and validations
evaluated with a CEL library (``common-expression-language``, the Rust ``cel`` crate, with cel-go's strings
extension that Kubernetes' CEL environment includes: ``split``, ``trim``), as the API server would for one request.

Covers what gpucell's policies use: ``matchConstraints`` (``namespaceSelector`` ``matchLabels`` against the
namespace's ``kubernetes.io/metadata.name``, ``resourceRules`` by group, resource and operation), ``matchConditions``,
``variables`` (evaluated in order, each seeing the ones before) and ``validations`` (``expression``, ``message``).
An expression that fails to evaluate refuses, as ``failurePolicy: Fail`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cel
from cel.stdlib import add_stdlib_to_context

RESOURCES = {
    "Pod": ("", "pods"),
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
}
"""Kind -> (API group, resource) of the kinds the tests send."""


@dataclass(frozen=True)
class Verdict:
    """One policy's answer: ``allowed``, else the ``message`` of the first failing validation."""

    policy: str
    allowed: bool
    message: str = ""


def _matches(policy: dict[str, Any], obj: dict[str, Any], namespace: str, operation: str) -> bool:
    constraints = policy["spec"]["matchConstraints"]
    wanted = (constraints.get("namespaceSelector") or {}).get("matchLabels") or {}
    labels = {"kubernetes.io/metadata.name": namespace}
    if any(labels.get(k) != v for k, v in wanted.items()):
        return False
    group, resource = RESOURCES[obj["kind"]]
    return any(
        group in rule["apiGroups"] and resource in rule["resources"] and operation in rule["operations"]
        for rule in constraints["resourceRules"]
    )


def _context(obj: dict[str, Any], variables: dict[str, Any]) -> cel.Context:
    context = cel.Context({"object": obj, "variables": variables})
    add_stdlib_to_context(context, ["strings"])
    return context


def evaluate(policy: dict[str, Any], obj: dict[str, Any], namespace: str, operation: str = "CREATE") -> Verdict | None:
    """The verdict of ``policy`` on ``operation`` of ``obj`` in ``namespace``; ``None`` when it does not apply."""
    name = policy["metadata"]["name"]
    if not _matches(policy, obj, namespace, operation):
        return None
    spec = policy["spec"]
    for condition in spec.get("matchConditions", []):
        if cel.evaluate(condition["expression"], _context(obj, {})) is not True:
            return None
    variables: dict[str, Any] = {}
    for variable in spec.get("variables", []):
        variables[variable["name"]] = cel.evaluate(variable["expression"], _context(obj, variables))
    for validation in spec["validations"]:
        try:
            result = cel.evaluate(validation["expression"], _context(obj, variables))
        except Exception as exc:  # failurePolicy Fail: an error refuses, and the verdict says so
            return Verdict(name, False, f"expression error: {exc}")
        if result is not True:
            return Verdict(name, False, validation["message"])
    return Verdict(name, True)


def refusals(
    policies: list[dict[str, Any]], obj: dict[str, Any], namespace: str, operation: str = "CREATE"
) -> list[Verdict]:
    """The refusing verdicts of every policy of ``policies`` (bindings are skipped) that applies."""
    verdicts = [evaluate(p, obj, namespace, operation) for p in policies if p["kind"] == "ValidatingAdmissionPolicy"]
    return [v for v in verdicts if v is not None and not v.allowed]
