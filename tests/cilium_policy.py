"""A small Cilium policy evaluator: is a connection allowed by every policy that selects its two ends?

What it implements, from Cilium 1.20's documentation ("Policy Enforcement Modes", "Layer 3 Examples", "Layer 4
Examples", "Deny Policies", the CRDs' field docs) and its Kubernetes NetworkPolicy translation:

- A policy selects endpoints by ``endpointSelector`` (``CiliumNetworkPolicy``: within its namespace; a
  ``CiliumClusterwideNetworkPolicy``: anywhere) or ``podSelector`` (``NetworkPolicy``: within its namespace).
- For one direction of one endpoint: a matching deny rule of any selecting policy refuses the connection, whatever
  allows it; else a matching allow rule of any selecting policy admits it (allows add up, across kinds); else the
  connection is refused when any selecting policy puts the endpoint into default deny for that direction
  (``enableDefaultDeny``, by default true for a direction the policy has rules in; a ``NetworkPolicy``: its
  ``policyTypes``), and admitted otherwise.
- Peers: ``to/fromEndpoints`` selectors over identity labels, scoped as Cilium scopes them (:func:`_peer_selector`:
  a namespaced policy's peers are in its namespace unless the selector names one or selects on namespace labels, a
  clusterwide policy's are pods); ``to/fromEntities``; ``to/fromCIDR(Set)`` with ``except``, which match only
  addresses outside the cluster (the default ``policyCIDRMatchMode``: never a pod or a node); ``toFQDNs`` against
  the name an outside address was looked up by. A rule with ports and no peer matches every peer on those ports; a
  rule with neither matches nothing.
- Ports: ``toPorts[].ports[]`` with ``port`` (``"0"``: any), ``endPort`` and ``protocol`` (``ANY`` or absent: TCP,
  UDP and SCTP); L7 ``rules`` (DNS, HTTP) are read as their L4 allow. No ``toPorts``: every port and protocol.
- A ``NetworkPolicy`` rule without peers (``to``/``from`` absent or empty) matches every peer, and without ports
  every port: ``egress: [{}]`` allows everything.

Anything else in a rule (``toServices``, ``toRequires``, ``toGroups``, ``toNodes``, ``icmps``, named ports) raises
``ValueError``: the evaluator never guesses.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network
from typing import Any

NAMESPACE_KEY = "k8s:io.kubernetes.pod.namespace"
NAMESPACE_LABELS = "k8s:io.cilium.k8s.namespace.labels."
SOURCES = ("k8s", "reserved", "any", "container", "unspec")
"""Cilium label sources a selector key may start with (``k8s:app``); a key without one matches any source."""
PORT_PROTOCOLS = ("TCP", "UDP", "SCTP")


@dataclass(frozen=True)
class Endpoint:
    """A pod (a VM's launcher pod included) of the cluster."""

    namespace: str
    labels: Mapping[str, str] = field(default_factory=dict)
    namespace_labels: Mapping[str, str] = field(default_factory=dict)

    def identity(self) -> dict[str, str]:
        """Cilium's identity labels of the pod."""
        return {
            NAMESPACE_KEY: self.namespace,
            **{f"k8s:{key}": value for key, value in self.labels.items()},
            **{f"{NAMESPACE_LABELS}{key}": value for key, value in self.namespace_labels.items()},
        }


@dataclass(frozen=True)
class Node:
    """A node of the cluster (its host network, host-network pods included), by its address."""

    address: str
    api_server: bool = False
    """It serves the Kubernetes API (a k3s server): Cilium adds ``reserved:kube-apiserver``."""
    local: bool = False
    """The node the connecting pod runs on (``host``), else another one (``remote-node``)."""

    def identity(self) -> dict[str, str]:
        """``reserved:host`` or ``reserved:remote-node``, and ``reserved:kube-apiserver`` for an API server."""
        labels = {"reserved:host" if self.local else "reserved:remote-node": ""}
        return labels | ({"reserved:kube-apiserver": ""} if self.api_server else {})


@dataclass(frozen=True)
class External:
    """An address outside the cluster (``reserved:world``), with the name it was looked up by, if any."""

    address: str
    name: str | None = None

    def identity(self) -> dict[str, str]:
        """``reserved:world``."""
        return {"reserved:world": ""}


@dataclass(frozen=True)
class Health:
    """A node's Cilium health endpoint (``reserved:health``)."""

    def identity(self) -> dict[str, str]:
        """``reserved:health``."""
        return {"reserved:health": ""}


Peer = Endpoint | Node | External | Health


@dataclass(frozen=True)
class Flow:
    """A new connection to ``to`` on ``port``/``protocol``."""

    to: Peer
    port: int
    protocol: str = "TCP"


@dataclass(frozen=True)
class Verdict:
    """Whether a connection passes, and what decided it: the denying policies (``kind/[namespace/]name``), the
    first allowing one, ``default deny`` or ``no policy``."""

    allowed: bool
    by: tuple[str, ...]


def _lookup(labels: Mapping[str, str], key: str) -> str | None:
    """The value of ``key`` in identity or object ``labels``: exactly, else (a key without a source, or ``any:``)
    under any source."""
    if key in labels:
        return labels[key]
    source, sep, bare = key.partition(":")
    if sep and source in SOURCES:
        if source != "any":
            return None
        key = bare
    for full, value in labels.items():
        prefix, has_source, rest = full.partition(":")
        if has_source and prefix in SOURCES and rest == key:
            return value
    return None


def selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether a label selector (``matchLabels``, ``matchExpressions`` In/NotIn/Exists/DoesNotExist) matches."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if _lookup(labels, key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        found = _lookup(labels, expression["key"])
        operator, values = expression["operator"], expression.get("values") or []
        ok = {
            "In": found is not None and found in values,
            "NotIn": found is None or found not in values,
            "Exists": found is not None,
            "DoesNotExist": found is None,
        }[operator]
        if not ok:
            return False
    return True


def _keys(selector: Mapping[str, Any]) -> list[str]:
    return [*(selector.get("matchLabels") or {}), *(e["key"] for e in selector.get("matchExpressions") or [])]


def _bare(key: str) -> str:
    source, sep, rest = key.partition(":")
    return rest if sep and source in SOURCES else key


def _peer_selector(selector: Mapping[str, Any], namespace: str | None) -> dict[str, Any]:
    """A peer selector as Cilium scopes it (``getEndpointSelector``, pkg/k8s/apis/cilium.io/utils): unchanged when it
    names a reserved label or the pod namespace; in a clusterwide policy (``namespace`` None) limited to pods
    (``Exists`` on the namespace label); in a namespaced one limited to the policy's namespace unless it selects on
    namespace labels."""
    keys = _keys(selector)
    if any(key.startswith("reserved:") for key in keys):
        return dict(selector)
    if any(_bare(key) == "io.kubernetes.pod.namespace" for key in keys):
        return dict(selector)
    if namespace is None:
        required = [*(selector.get("matchExpressions") or []), {"key": NAMESPACE_KEY, "operator": "Exists"}]
        return {**selector, "matchExpressions": required}
    if any(_bare(key).startswith("io.cilium.k8s.namespace.labels.") for key in keys):
        return dict(selector)
    return {**selector, "matchLabels": {**(selector.get("matchLabels") or {}), NAMESPACE_KEY: namespace}}


def _subject(selector: Mapping[str, Any], namespace: str | None) -> dict[str, Any]:
    """A policy's ``endpointSelector``: a namespaced policy selects in its namespace only."""
    if namespace is None:
        return dict(selector)
    return {**selector, "matchLabels": {**(selector.get("matchLabels") or {}), NAMESPACE_KEY: namespace}}


def _entity(name: str, identity: Mapping[str, str]) -> bool:
    if name == "all":
        return True
    if name == "none":
        return False
    if name == "cluster":
        return "reserved:world" not in identity
    return f"reserved:{name}" in identity


def _in_cidr(peer: Peer, cidr: str, excepts: Iterable[str] = ()) -> bool:
    if not isinstance(peer, External):
        return False
    address = IPv4Address(peer.address)
    return address in IPv4Network(cidr) and not any(address in IPv4Network(e) for e in excepts)


def _fqdn(peer: Peer, selector: Mapping[str, Any]) -> bool:
    if not isinstance(peer, External) or peer.name is None:
        return False
    if "matchName" in selector:
        return bool(peer.name == selector["matchName"])
    pattern = selector["matchPattern"]
    if pattern.startswith("**."):
        return peer.name.endswith(pattern[2:])
    return fnmatch.fnmatchcase(peer.name, pattern) and (
        "." not in pattern or pattern.count(".") == peer.name.count(".")
    )


def _ports_match(flow: Flow, ports: Sequence[Mapping[str, Any]]) -> bool:
    for entry in ports:
        protocol = entry.get("protocol") or "ANY"
        accepted = PORT_PROTOCOLS if protocol == "ANY" else (protocol,)
        if flow.protocol not in accepted:
            continue
        port = str(entry.get("port") or "0")
        if not port.isdigit():
            raise ValueError(f"named port {port!r}: not evaluated")
        first = int(port)
        last = int(entry.get("endPort") or first)
        if first == 0 or first <= flow.port <= last:
            return True
    return False


@dataclass(frozen=True)
class Rule:
    """One rule of one direction: which peers (``None``: every peer) on which ports (``None``: all)."""

    peers: Any
    ports: list[Mapping[str, Any]] | None
    empty: bool = False

    def matches(self, peer: Peer, flow: Flow) -> bool:
        """Whether a connection with ``peer`` on ``flow``'s port is matched."""
        if self.empty:
            return False
        if self.ports is not None and not _ports_match(flow, self.ports):
            return False
        return self.peers is None or bool(self.peers(peer))


_CILIUM_PEERS = {"toEndpoints", "toEntities", "toCIDR", "toCIDRSet", "toFQDNs"}
_CILIUM_KEYS = {*_CILIUM_PEERS, "toPorts"}


def _cilium_rule(rule: Mapping[str, Any], namespace: str | None, direction: str) -> Rule:
    keys = {key.replace("from", "to", 1) if key.startswith("from") else key for key in rule}
    unknown = keys - _CILIUM_KEYS
    if unknown:
        raise ValueError(f"rule fields not evaluated: {sorted(unknown)}")

    def pick(key: str) -> Any:
        return rule.get(key if direction == "egress" else key.replace("to", "from", 1))

    tests: list[Any] = []
    for selector in pick("toEndpoints") or []:
        scoped = _peer_selector(selector, namespace)
        tests.append(lambda p, s=scoped: not isinstance(p, External) and selects(s, p.identity()))
    for entity in pick("toEntities") or []:
        tests.append(lambda p, e=entity: _entity(e, p.identity()))
    for cidr in pick("toCIDR") or []:
        tests.append(lambda p, c=cidr: _in_cidr(p, c))
    for entry in pick("toCIDRSet") or []:
        tests.append(lambda p, e=entry: _in_cidr(p, e["cidr"], e.get("except") or []))
    for selector in rule.get("toFQDNs") or []:
        tests.append(lambda p, s=selector: _fqdn(p, s))
    ports: list[Mapping[str, Any]] | None = None
    if "toPorts" in rule:
        ports = [port for entry in rule["toPorts"] for port in entry.get("ports") or []]
    has_peers = any(pick(k) is not None for k in _CILIUM_PEERS)
    if not has_peers:
        return Rule(None, ports, empty=ports is None)
    return Rule(lambda p: any(test(p) for test in tests), ports)


def _np_peer(peer: Mapping[str, Any], namespace: str) -> Any:
    if "ipBlock" in peer:
        block = peer["ipBlock"]
        return lambda p: _in_cidr(p, block["cidr"], block.get("except") or [])
    pods = peer.get("podSelector") or {}
    if "namespaceSelector" not in peer:  # pods of the policy's namespace
        return lambda p: isinstance(p, Endpoint) and p.namespace == namespace and selects(pods, p.labels)
    spaces = peer["namespaceSelector"]
    return lambda p: isinstance(p, Endpoint) and selects(spaces, p.namespace_labels) and selects(pods, p.labels)


def _np_rule(rule: Mapping[str, Any], namespace: str, direction: str) -> Rule:
    peers_key = "to" if direction == "egress" else "from"
    unknown = set(rule) - {peers_key, "ports"}
    if unknown:
        raise ValueError(f"NetworkPolicy rule fields not evaluated: {sorted(unknown)}")
    peers = rule.get(peers_key) or []
    ports: list[Mapping[str, Any]] | None = [
        {**p, "protocol": p.get("protocol", "TCP")} for p in rule.get("ports") or []
    ] or None
    if not peers:
        return Rule(None, ports)
    tests = [_np_peer(peer, namespace) for peer in peers]
    return Rule(lambda p: any(test(p) for test in tests), ports)


@dataclass(frozen=True)
class Policy:
    """One policy object, read for evaluation."""

    name: str
    subject: Any
    default_deny: Mapping[str, bool]
    allow: Mapping[str, list[Rule]]
    deny: Mapping[str, list[Rule]]


def read(obj: Mapping[str, Any]) -> Policy:
    """A ``CiliumNetworkPolicy``, ``CiliumClusterwideNetworkPolicy`` or ``NetworkPolicy`` manifest as a
    :class:`Policy`. Raises ``ValueError`` on what it does not evaluate."""
    kind, meta, spec = obj["kind"], obj["metadata"], obj["spec"]
    namespace = meta.get("namespace")
    name = f"{kind}/{namespace}/{meta['name']}" if namespace else f"{kind}/{meta['name']}"
    if kind == "NetworkPolicy":
        types = spec.get("policyTypes") or ["Ingress", *(["Egress"] if "egress" in spec else [])]
        pods = spec.get("podSelector") or {}
        return Policy(
            name,
            lambda e: isinstance(e, Endpoint) and e.namespace == namespace and selects(pods, e.labels),
            {"egress": "Egress" in types, "ingress": "Ingress" in types},
            {d: [_np_rule(r, namespace, d) for r in spec.get(d) or []] for d in ("egress", "ingress")},
            {"egress": [], "ingress": []},
        )
    if kind not in ("CiliumNetworkPolicy", "CiliumClusterwideNetworkPolicy"):
        raise ValueError(f"{kind} is not a network policy")
    if "specs" in obj or "nodeSelector" in spec:
        raise ValueError(f"{name}: specs and nodeSelector are not evaluated")
    scope = namespace if kind == "CiliumNetworkPolicy" else None
    subject = _subject(spec["endpointSelector"], scope)
    defaults = spec.get("enableDefaultDeny") or {}
    return Policy(
        name,
        lambda e: isinstance(e, Endpoint) and selects(subject, e.identity()),
        {d: defaults.get(d, bool(spec.get(d) or spec.get(f"{d}Deny"))) for d in ("egress", "ingress")},
        {d: [_cilium_rule(r, scope, d) for r in spec.get(d) or []] for d in ("egress", "ingress")},
        {d: [_cilium_rule(r, scope, d) for r in spec.get(f"{d}Deny") or []] for d in ("egress", "ingress")},
    )


def _direction(endpoint: Endpoint, peer: Peer, flow: Flow, policies: Sequence[Policy], direction: str) -> Verdict:
    selecting = [p for p in policies if p.subject(endpoint)]
    denied = tuple(p.name for p in selecting if any(r.matches(peer, flow) for r in p.deny[direction]))
    if denied:
        return Verdict(False, denied)
    for policy in selecting:
        if any(rule.matches(peer, flow) for rule in policy.allow[direction]):
            return Verdict(True, (policy.name,))
    if any(p.default_deny[direction] for p in selecting):
        return Verdict(False, ("default deny",))
    return Verdict(True, ("no policy",))


def connect(source: Endpoint | Node, flow: Flow, objects: Iterable[Mapping[str, Any]]) -> Verdict:
    """Whether ``source`` may open ``flow``: its egress (for a pod), then the destination pod's ingress. An allowed
    connection names the policies that allowed each side (``no policy`` where none selects an end)."""
    policies = [read(obj) for obj in objects]
    out = Verdict(True, ("no policy",))
    if isinstance(source, Endpoint):
        out = _direction(source, flow.to, flow, policies, "egress")
        if not out.allowed:
            return out
    if not isinstance(flow.to, Endpoint):
        return out
    inward = _direction(flow.to, source, Flow(source, flow.port, flow.protocol), policies, "ingress")
    if not inward.allowed:
        return inward
    by = tuple(dict.fromkeys(name for name in (*out.by, *inward.by) if name != "no policy"))
    return Verdict(True, by or ("no policy",))
