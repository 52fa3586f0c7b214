"""Effective RBAC rights, computed offline from every Role, ClusterRole and binding a plan renders, charts included.

The evaluator answers what the API server's RBAC authorizer would (kubernetes v1.34 ``plugin/pkg/auth/authorizer/
rbac/rbac.go``, ``pkg/apis/rbac/v1/evaluation_helpers.go``): may a subject (a user and its groups) do ``verb`` on
``resource`` of ``group`` (``name`` optional) in ``namespace``. A RoleBinding grants its role in its own namespace;
a ClusterRoleBinding grants its ClusterRole everywhere. A ClusterRole with an ``aggregationRule`` holds the rules of
every ClusterRole its selectors match, to a fixed point, as the aggregation controller makes it
(``pkg/controller/clusterroleaggregation``). Creating a RoleBinding passes RBAC's escalation check
(``pkg/registry/rbac/rolebinding/policybased/storage.go``): the creator may ``create`` rolebindings there, and either
holds ``bind`` on the referenced role or covers every rule of it in that namespace (``rbac/validation``
``ConfirmNoEscalation``, ``Covers``).

Objects: every Kubernetes object the plan registers, and every object each of its Helm releases renders with the
pinned chart (``gpucell.stacks.conformance.charts.render_releases``, a real ``helm template``), namespaced objects
without a namespace put in the release's. Added: Kubernetes' bootstrap roles that tenants could name
(:data:`BOOTSTRAP`, v1.34 ``plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go``): ``cluster-admin`` whole,
``admin``/``edit``/``view`` as the aggregated roles they are, and of ``system:aggregate-to-admin``/``-edit``/``-view``
the rules used here only. Those are a subset of the real rules, which keeps every refusal sound (a binder who lacks
part of the subset lacks part of the whole) but could not prove a binding to them allowed. Not seen: what operators
create at run time (KubeVirt's and CDI's ``kubevirt.io:*``/``cdi.kubevirt.io:*`` roles, aggregated into ``admin``/
``edit``/``view`` only, and their ``system:authenticated`` read bindings) and the objects of manifests applied from
a URL (``yaml/v2:ConfigFile``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gpucell.stacks.conformance.charts import kube_version, render_releases
from gpucell.stacks.plan import Plan

RBAC_KINDS = ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")
_RELEASE = "kubernetes:helm.sh/v3:Release"
_GROUP = "rbac.authorization.k8s.io"


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> dict[str, Any]:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


_CHANGE = ["create", "delete", "deletecollection", "patch", "update"]
BOOTSTRAP: tuple[dict[str, Any], ...] = (
    {
        "kind": "ClusterRole",
        "metadata": {"name": "cluster-admin"},
        "rules": [_rule(["*"], ["*"], ["*"]), {"nonResourceURLs": ["*"], "verbs": ["*"]}],
    },
    *(
        {
            "kind": "ClusterRole",
            "metadata": {"name": role, "labels": labels},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {f"{_GROUP}/aggregate-to-{role}": "true"}}]},
        }
        for role, labels in (
            ("admin", {}),
            ("edit", {f"{_GROUP}/aggregate-to-admin": "true"}),
            ("view", {f"{_GROUP}/aggregate-to-edit": "true"}),
        )
    ),
    {
        "kind": "ClusterRole",
        "metadata": {"name": "system:aggregate-to-admin", "labels": {f"{_GROUP}/aggregate-to-admin": "true"}},
        "rules": [_rule([_GROUP], ["rolebindings", "roles"], [*_CHANGE, "get", "list", "watch"])],
    },
    {
        "kind": "ClusterRole",
        "metadata": {"name": "system:aggregate-to-edit", "labels": {f"{_GROUP}/aggregate-to-edit": "true"}},
        "rules": [
            _rule(["networking.k8s.io"], ["ingresses", "networkpolicies"], _CHANGE),
            _rule([""], ["serviceaccounts"], ["impersonate"]),
            _rule([""], ["pods/eviction"], ["create"]),
            _rule(["policy"], ["poddisruptionbudgets"], _CHANGE),
            _rule(["apps"], ["daemonsets"], _CHANGE),
        ],
    },
    {
        "kind": "ClusterRole",
        "metadata": {"name": "system:aggregate-to-view", "labels": {f"{_GROUP}/aggregate-to-view": "true"}},
        "rules": [_rule(["networking.k8s.io"], ["ingresses", "networkpolicies"], ["get", "list", "watch"])],
    },
    *(
        {
            "kind": "ClusterRoleBinding",
            "metadata": {"name": role},
            "roleRef": {"apiGroup": _GROUP, "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "Group", "apiGroup": _GROUP, "name": "system:authenticated"}],
        }
        for role in ("system:basic-user", "system:discovery", "system:public-info-viewer")
    ),
    {
        "kind": "ClusterRole",
        "metadata": {"name": "system:basic-user"},
        "rules": [
            _rule(["authorization.k8s.io"], ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], ["create"]),
            _rule(["authentication.k8s.io"], ["selfsubjectreviews"], ["create"]),
        ],
    },
)
"""Kubernetes' bootstrap roles and bindings the evaluator adds to a plan's (see the module doc)."""


@dataclass(frozen=True)
class Subject:
    """Who asks: a user name and its groups (``system:authenticated`` is added, as the authenticator does)."""

    user: str
    groups: tuple[str, ...] = ()

    def matches(self, subject: Mapping[str, Any], binding_namespace: str | None) -> bool:
        """Whether a binding's ``subjects[]`` entry names this subject."""
        kind, name = subject.get("kind"), subject.get("name")
        if kind == "Group":
            return name in (*self.groups, "system:authenticated")
        if kind == "User":
            return name == self.user
        if kind == "ServiceAccount":
            namespace = subject.get("namespace") or binding_namespace
            return self.user == f"system:serviceaccount:{namespace}:{name}"
        return False


@dataclass(frozen=True)
class Request:
    """One API request as RBAC sees it (``resource`` may be ``resource/subresource``)."""

    verb: str
    group: str
    resource: str
    namespace: str | None
    name: str = ""


def _matches(values: Iterable[str], value: str) -> bool:
    values = list(values)
    return "*" in values or value in values


def _resource_matches(rule_resources: Iterable[str], resource: str) -> bool:
    for candidate in rule_resources:
        if candidate in ("*", resource):
            return True
        if candidate.startswith("*/") and "/" in resource and resource.split("/", 1)[1] == candidate[2:]:
            return True
    return False


def rule_allows(rule: Mapping[str, Any], request: Request) -> bool:
    """RBAC's ``RuleAllows`` for a resource request."""
    if "nonResourceURLs" in rule and not rule.get("resources"):
        return False
    names = rule.get("resourceNames") or []
    return (
        _matches(rule.get("verbs") or [], request.verb)
        and _matches(rule.get("apiGroups") or [], request.group)
        and _resource_matches(rule.get("resources") or [], request.resource)
        and (not names or request.name in names)
    )


class Rights:
    """The RBAC objects of a cluster and what they let a subject do (see the module doc)."""

    def __init__(self, objects: Iterable[Mapping[str, Any]]) -> None:
        self.roles: dict[tuple[str, str], list[dict[str, Any]]] = {}
        """(namespace, name) -> rules of each Role."""
        self.cluster_roles: dict[str, dict[str, Any]] = {}
        self.bindings: list[Mapping[str, Any]] = []
        """RoleBindings and ClusterRoleBindings."""
        for obj in objects:
            kind, meta = obj.get("kind"), obj.get("metadata") or {}
            if kind == "Role":
                self.roles[(meta.get("namespace", ""), meta["name"])] = list(obj.get("rules") or [])
            elif kind == "ClusterRole":
                self.cluster_roles[meta["name"]] = dict(obj)
            elif kind in ("RoleBinding", "ClusterRoleBinding"):
                self.bindings.append(obj)
        self.cluster_rules = _aggregate(self.cluster_roles)
        """ClusterRole name -> its rules, aggregation resolved."""

    def role_rules(self, ref: Mapping[str, Any], namespace: str | None) -> list[dict[str, Any]]:
        """Rules of a ``roleRef`` (a Role of ``namespace``, or a ClusterRole); ``[]`` when it does not exist."""
        if ref.get("kind") == "Role":
            return self.roles.get((namespace or "", ref["name"]), [])
        return self.cluster_rules.get(ref["name"], [])

    def rules_of(self, subject: Subject, namespace: str | None) -> Iterator[dict[str, Any]]:
        """Every rule ``subject`` holds in ``namespace`` (``None``: cluster-scoped requests)."""
        for binding in self.bindings:
            meta = binding.get("metadata") or {}
            bound_in = meta.get("namespace") if binding.get("kind") == "RoleBinding" else None
            if bound_in is not None and bound_in != namespace:
                continue
            if any(subject.matches(s, bound_in) for s in binding.get("subjects") or []):
                yield from self.role_rules(binding["roleRef"], bound_in)

    def allows(self, subject: Subject, request: Request) -> bool:
        """Whether RBAC authorizes ``request`` for ``subject``."""
        return any(rule_allows(rule, request) for rule in self.rules_of(subject, request.namespace))

    def may_bind(self, subject: Subject, namespace: str, role_ref: Mapping[str, Any]) -> bool:
        """Whether ``subject`` may create a RoleBinding in ``namespace`` to ``role_ref``: ``create`` on rolebindings,
        then ``bind`` on the role or every rule of it covered (RBAC's escalation check)."""
        if not self.allows(subject, Request("create", _GROUP, "rolebindings", namespace)):
            return False
        resource = "roles" if role_ref.get("kind") == "Role" else "clusterroles"
        if self.allows(subject, Request("bind", _GROUP, resource, namespace, role_ref["name"])):
            return True
        owned = list(self.rules_of(subject, namespace))
        return all(_covered(owned, rule) for rule in self.role_rules(role_ref, namespace)) and bool(
            self.role_rules(role_ref, namespace)
        )


def _selected(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A ``LabelSelector`` (``matchLabels``, ``matchExpressions`` In/NotIn/Exists/DoesNotExist) against labels."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[operator]
        if not ok:
            return False
    return True


def _aggregate(cluster_roles: Mapping[str, Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Rules of every ClusterRole, each aggregated one holding those its selectors match, to a fixed point."""
    rules = {name: list(role.get("rules") or []) for name, role in cluster_roles.items()}
    changed = True
    while changed:
        changed = False
        for name, role in cluster_roles.items():
            selectors = (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or []
            if not selectors:
                continue
            held = rules[name]
            for other, candidate in cluster_roles.items():
                labels = (candidate.get("metadata") or {}).get("labels") or {}
                if other == name or not any(_selected(s, labels) for s in selectors):
                    continue
                for rule in rules[other]:
                    if rule not in held:
                        held.append(rule)
                        changed = True
    return rules


def _atoms(rule: Mapping[str, Any]) -> Iterator[Request]:
    """A rule broken into single requests (``resourceNames`` each, or none), as ``Covers`` does."""
    for group in rule.get("apiGroups") or [""]:
        for resource in rule.get("resources") or []:
            for verb in rule.get("verbs") or []:
                for name in rule.get("resourceNames") or [""]:
                    yield Request(verb, group, resource, None, name)


def _covered(owned: list[dict[str, Any]], rule: Mapping[str, Any]) -> bool:
    """Whether ``owned`` rules cover ``rule`` (a wildcard is covered only by a wildcard)."""
    if rule.get("nonResourceURLs") and not rule.get("resources"):
        return all(
            any(_matches(o.get("nonResourceURLs") or [], url) and _matches(o.get("verbs") or [], v) for o in owned)
            for url in rule["nonResourceURLs"]
            for v in rule.get("verbs") or []
        )
    return all(any(rule_allows(o, atom) for o in owned) for atom in _atoms(rule))


def _with_namespace(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    if obj.get("kind") in ("Role", "RoleBinding") and not (obj.get("metadata") or {}).get("namespace"):
        return {**obj, "metadata": {**(obj.get("metadata") or {}), "namespace": namespace}}
    return obj


def region_objects(plan: Plan, region: str, upstream: Any) -> list[dict[str, Any]]:
    """Every RBAC object of ``region``: those the plan registers, and those its Helm releases render (helm)."""
    registrations = plan.region_resources(region)
    objects = [
        r.masked_inputs()
        for r in registrations
        if r.type.startswith("kubernetes:") and r.inputs.get("kind") in RBAC_KINDS
    ]
    releases = [r.masked_inputs() for r in registrations if r.type == _RELEASE]
    kube = kube_version(plan.cells[region].spec)
    for inputs, rendered in zip(releases, render_releases([(i, kube) for i in releases], upstream), strict=True):
        if rendered.error is not None:
            raise AssertionError(f"release {rendered.release} did not render: {rendered.error}")
        namespace = str(inputs.get("namespace") or "default")
        objects += [_with_namespace(o, namespace) for o in rendered.objects if o.get("kind") in RBAC_KINDS]
    return objects


_RIGHTS: dict[tuple[int, str], Rights] = {}


def plan_rights(plan: Plan, region: str, upstream: Any) -> Rights:
    """:class:`Rights` of a region of a plan, Kubernetes' :data:`BOOTSTRAP` objects added (once per plan object)."""
    key = (id(plan), region)
    if key not in _RIGHTS:
        _RIGHTS[key] = Rights([*BOOTSTRAP, *region_objects(plan, region, upstream)])
    return _RIGHTS[key]
