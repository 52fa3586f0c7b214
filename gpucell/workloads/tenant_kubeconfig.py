"""The kubeconfig gpucell exports of a tenant cluster: rebuilt from the server, the CA and the client certificate.

Cluster API writes a tenant cluster's admin kubeconfig into the Secret ``<c>-kubeconfig`` of the tenant's namespace,
key ``value`` (Cluster API v1.14.0 ``util/kubeconfig`` ``New``, written with client-go's ``clientcmd.Write``): one
cluster ``<c>`` (``server``, ``certificate-authority-data``), one user ``<c>-admin`` (``client-certificate-data``,
``client-key-data``: a client certificate in ``system:masters``; never a token) and one context ``<c>-admin@<c>``.

A tenant member may rewrite that Secret (the tenant's roles write its namespace's Secrets), and the operator runs
``kubectl`` with what the stack exports. So nothing of it is passed on as written: :func:`rebuilt_kubeconfig` builds
a new kubeconfig, in Cluster API's shape and names, from the four values above alone. Everything else is dropped and
named (by its place and client-go's key name, never its value): ``users[].user.exec`` and ``auth-provider`` (a
command or plugin run on the operator's machine), ``tokenFile``, ``client-certificate``/``client-key``/
``certificate-authority`` (files read there), ``token``, ``username``/``password`` and ``as*`` (impersonation),
``insecure-skip-tls-verify``, ``tls-server-name``, ``proxy-url`` (a redirect), ``extensions`` (further contexts
are replaced by the rebuilt one).
The server is the one gpucell knows: the exposed address when the API is a LoadBalancer (whatever the Secret says),
else Cluster API's own, which must be ``https://<ClusterIP>:6443`` with the ClusterIP in the cell's service range
(the ``<c>-lb`` Service CAPK creates; CAPK v0.11.2 sets it as the ``controlPlaneEndpoint``). A kubeconfig without a
client certificate and key, a CA, or such a server, or with more than one cluster or user, is not exported at all.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, ip_address
from typing import Any
from urllib.parse import urlsplit

import yaml

__all__ = ["KEPT", "RebuiltKubeconfig", "rebuilt_kubeconfig"]

KEPT = ("server", "certificate-authority-data", "client-certificate-data", "client-key-data")
"""The only values of a tenant's kubeconfig that reach the stack output."""

_WRITTEN = {
    "": {"apiVersion", "kind", "preferences", "clusters", "contexts", "users", "current-context"},
    "clusters": {"name", "cluster"},
    "cluster": {"server", "certificate-authority-data"},
    "contexts": {"name", "context"},
    "context": {"cluster", "user"},
    "users": {"name", "user"},
    "user": {"client-certificate-data", "client-key-data"},
}
"""Where -> the keys Cluster API writes there: the others are named when dropped."""
_CLIENT_GO_KEYS = frozenset(
    {
        *(key for keys in _WRITTEN.values() for key in keys),
        *("extensions", "namespace", "tls-server-name", "insecure-skip-tls-verify", "certificate-authority"),
        *("proxy-url", "disable-compression", "client-certificate", "client-key", "token", "tokenFile"),
        *("as", "as-uid", "as-groups", "as-user-extra", "username", "password", "auth-provider", "exec"),
    }
)
"""Every key of client-go's kubeconfig (``tools/clientcmd/api/v1/types.go``): a dropped key outside it is named
``<unknown key>`` (a tenant's text never reaches the operator's log)."""


@dataclass(frozen=True)
class RebuiltKubeconfig:
    """What :func:`rebuilt_kubeconfig` made of a tenant's kubeconfig."""

    text: str
    """The kubeconfig to export (YAML, keys sorted as ``clientcmd.Write`` writes them)."""
    dropped: tuple[str, ...]
    """Where the tenant's kubeconfig held something else, e.g. ``users[0].user.exec`` (in the order found)."""


def rebuilt_kubeconfig(
    kubeconfig: str, cluster: str, *, address: str | None, service_cidr: IPv4Network, port: int
) -> RebuiltKubeconfig:
    """The kubeconfig of tenant cluster ``cluster`` rebuilt from the :data:`KEPT` values of ``kubeconfig`` (the
    Secret's ``value``), its server ``https://<address>:<port>`` when the API is exposed at ``address``, else the
    Secret's own, which must be ``https://<IP in service_cidr>:<port>``.

    Raises ``ValueError`` when there is nothing safe to export: not YAML, not one cluster and one user, no CA data
    or client certificate and key (base64), or another server; its message quotes no byte of the text and names
    what was dropped.
    """
    try:
        loaded = yaml.safe_load(kubeconfig)
    except (yaml.YAMLError, RecursionError):
        # not the parser's message: it quotes the lines around the error, which hold keys
        raise ValueError("its 'value' is not YAML") from None
    entry = _only(loaded, "clusters", "cluster")
    if entry is None:
        raise ValueError("its 'value' is not a kubeconfig with one cluster")
    dropped = tuple(_dropped(loaded))
    user = _only(loaded, "users", "user")
    if user is None:
        raise ValueError(_unsafe("its 'value' is not a kubeconfig with one user", dropped))
    ca = entry.get("certificate-authority-data")
    if not _is_base64(ca):
        raise ValueError(_unsafe("it has no certificate-authority-data (Cluster API writes it)", dropped))
    cert, key = user.get("client-certificate-data"), user.get("client-key-data")
    if not (_is_base64(cert) and _is_base64(key)):
        raise ValueError(
            _unsafe(
                "it has no client-certificate-data and client-key-data, the only credentials gpucell exports "
                "(Cluster API writes them)",
                dropped,
            )
        )
    server = f"https://{address}:{port}" if address is not None else entry.get("server")
    if address is None and not _is_cluster_ip_server(server, service_cidr, port):
        raise ValueError(
            _unsafe(
                f"its server is not https://<a ClusterIP in {service_cidr}>:{port}, where Cluster API points it "
                f"(the {cluster}-lb Service)",
                dropped,
            )
        )
    user_name = f"{cluster}-admin"
    context = f"{user_name}@{cluster}"
    rebuilt = {
        "apiVersion": "v1",
        "clusters": [{"cluster": {"certificate-authority-data": ca, "server": server}, "name": cluster}],
        "contexts": [{"context": {"cluster": cluster, "user": user_name}, "name": context}],
        "current-context": context,
        "kind": "Config",
        "preferences": {},
        "users": [{"name": user_name, "user": {"client-certificate-data": cert, "client-key-data": key}}],
    }
    return RebuiltKubeconfig(str(yaml.safe_dump(rebuilt, sort_keys=True)), dropped)


def _only(loaded: Any, entries: str, inner: str) -> dict[str, Any] | None:
    """``loaded[entries][0][inner]`` when ``entries`` lists exactly one entry with a mapping there, else ``None``."""
    listed = loaded.get(entries) if isinstance(loaded, dict) else None
    entry = listed[0] if isinstance(listed, list) and len(listed) == 1 else None
    found = entry.get(inner) if isinstance(entry, dict) else None
    return found if isinstance(found, dict) else None


def _dropped(loaded: Mapping[str, Any]) -> Iterator[str]:
    """Where ``loaded`` holds a non-empty value Cluster API does not write (``clusters[0].cluster.proxy-url``)."""
    yield from _extra(loaded, "", "")
    for entries, inner in (("clusters", "cluster"), ("contexts", "context"), ("users", "user")):
        listed = loaded.get(entries)
        for index, entry in enumerate(listed if isinstance(listed, list) else []):
            if index > 0 and entries != "contexts":  # a second context is harmless: the rebuilt one replaces them all
                yield f"{entries}[{index}]"
                continue
            where = f"{entries}[{index}]"
            if not isinstance(entry, dict):
                continue
            yield from _extra(entry, entries, f"{where}.")
            if isinstance(entry.get(inner), dict):
                yield from _extra(entry[inner], inner, f"{where}.{inner}.")


def _extra(mapping: Mapping[Any, Any], kind: str, prefix: str) -> Iterator[str]:
    for key, value in mapping.items():
        if key not in _WRITTEN[kind] and value not in (None, False, "", [], {}):
            yield prefix + (key if key in _CLIENT_GO_KEYS else "<unknown key>")


def _unsafe(problem: str, dropped: tuple[str, ...]) -> str:
    return f"{problem}; it held {', '.join(dropped)}" if dropped else problem


def _is_base64(value: Any) -> bool:
    if not isinstance(value, str) or not value:
        return False
    try:
        base64.b64decode(value, validate=True)
    except binascii.Error:
        return False
    return True


def _is_cluster_ip_server(server: Any, service_cidr: IPv4Network, port: int) -> bool:
    """Whether ``server`` is exactly ``https://<IPv4 in service_cidr>:<port>`` (no user, path, query or fragment)."""
    if not isinstance(server, str):
        return False
    try:
        address = ip_address(urlsplit(server).hostname or "")
    except ValueError:
        return False
    return isinstance(address, IPv4Address) and address in service_cidr and server == f"https://{address}:{port}"
