"""The syntax of the strings a stack config holds: names, users, image references, URLs, addresses.

Every check matches the *whole* value (``re.fullmatch``, never ``re.match`` with ``$``, which lets a trailing
newline through): a value that ends up in a shell script, a YAML file or a Kubernetes object must be exactly
what was validated. Each function returns the value or raises ``ValueError`` with what is accepted; the spec
models call them from their field validators, so the message follows the key path and the shown value.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from ipaddress import IPv4Address, IPv4Network, IPv6Address, ip_address
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import BeforeValidator

from gpucell.errors import SpecError, shown

__all__ = [
    "CONFIG_KEY",
    "Ipv4Address",
    "Ipv4Cidr",
    "check_config_key",
    "check_each",
    "check_endpoint_host",
    "check_image_reference",
    "check_login_name",
    "check_routable_cidr",
    "check_single_line",
    "check_url",
    "endpoint_host_problem",
    "unicast_problem",
]

_LOGIN_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
"""A login name as ``useradd`` (shadow-utils ``is_valid_user_name``) and cloud-init accept it, without the trailing
``$`` of machine accounts: lower-case letters, digits, ``_`` and ``-``, starting with a letter or ``_``."""
CONFIG_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,127}")
"""A Pulumi config key gpucell reads (``sshPrivateKey``, ``hfTokenAcme``); no ``.`` or ``:``, which
``pulumi config set`` would read as a path or a namespace."""
_REGISTRY = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?/)"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
IMAGE_REFERENCE = re.compile(rf"{_REGISTRY}?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*(?::{_TAG})?(?:@{_DIGEST})?")
"""A container image reference, as the distribution ``reference`` grammar (distribution/reference
``regexp.go``) defines it: ``[registry[:port]/]path[:tag][@digest]``."""
IMAGE_REPOSITORY = re.compile(rf"{_REGISTRY}?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*")
"""A reference without tag or digest (``registry.example.com/nvidia``)."""
IMAGE_TAG = re.compile(_TAG)
"""A tag of the ``reference`` grammar: word characters, ``.`` and ``-``, at most 128, not starting with either."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u0085\u2028\u2029]")


def check_each(values: list[str], check: Callable[[str], object]) -> list[str]:
    """``values`` when ``check`` accepts each; else :class:`SpecError` at the first refused item's index,
    ``'<value>' <check's ValueError message>``."""
    for index, value in enumerate(values):
        try:
            check(value)
        except ValueError as exc:
            raise SpecError((index,), f"{shown(value)} {exc}") from None
    return values


def check_single_line(value: str, what: str = "text") -> str:
    """``value`` unless it is empty, padded with spaces, or holds a newline or other control character."""
    if not value or value != value.strip() or _CONTROL.search(value):
        raise ValueError(
            f"is not a single line of {what} (empty, padded with spaces, or holding a newline or control character)"
        )
    return value


def check_login_name(value: str) -> str:
    """A Linux login name (the SSH user, a VM's cloud-init user): lower-case letters, digits, ``_``, ``-``."""
    if not _LOGIN_NAME.fullmatch(value):
        raise ValueError(
            "is not a login name; use lower-case letters, digits, '_' and '-', starting with a letter "
            "or '_', at most 32 characters (e.g. ubuntu)"
        )
    return value


def check_config_key(value: str) -> str:
    """The name of a Pulumi config key in the project's namespace."""
    if not CONFIG_KEY.fullmatch(value):
        raise ValueError(
            "is not a config key name; use letters, digits, '_' and '-', starting with a letter (e.g. hfTokenAcme)"
        )
    return value


def check_image_reference(value: str) -> str:
    """A container image reference (``quay.io/jupyter/pytorch-notebook:cuda12-2025-11-24``)."""
    if len(value) > 255 or not IMAGE_REFERENCE.fullmatch(value):
        raise ValueError(
            "is not a container image reference; use [registry[:port]/]path[:tag][@sha256:digest] "
            "with a lower-case path (e.g. quay.io/jupyter/pytorch-notebook:cuda12-2025-11-24)"
        )
    return value


def check_url(value: str, schemes: tuple[str, ...]) -> str:
    """An absolute URL with one of ``schemes`` and a host, no credentials, spaces or control characters."""
    check_single_line(value, "URL")
    parts = urlsplit(value)
    if parts.scheme not in schemes or not parts.hostname or parts.username or parts.password or " " in value:
        accepted = " or ".join(f"{s}://" for s in schemes)
        raise ValueError(f"is not an {accepted} URL with a host (and no user:password@)")
    try:
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError:
        raise ValueError("has a port out of range") from None
    return value


def unicast_problem(address: IPv4Address) -> str | None:
    """What makes ``address`` unusable as a node or API address, or ``None`` (a unicast host address)."""
    if address.is_unspecified:
        return "is the unspecified address"
    if address == IPv4Address("255.255.255.255"):
        return "is the limited broadcast address"
    if address.is_loopback:
        return "is a loopback address (every node would reach itself)"
    if address.is_multicast:
        return "is a multicast address"
    if address.is_reserved:
        return "is in the reserved range 240.0.0.0/4"
    if address.is_link_local:
        return "is a link-local address"
    return None


def endpoint_host_problem(host: str) -> str | None:
    """What makes ``host`` (a name or an IPv4/IPv6 address, no port) unusable as the host of a service the cell talks
    to (an S3 store, a remote-write receiver, an identity provider), or ``None``. An address the cell cannot route to
    a store (unspecified, loopback, link-local, multicast, broadcast, reserved) is refused, link-local above all:
    169.254.169.254 is where a cloud serves instance metadata and credentials. ``localhost`` names loopback."""
    if host.rstrip(".").lower() == "localhost" or host.rstrip(".").lower().endswith(".localhost"):
        return "names loopback (every node would reach itself)"
    try:
        address = ip_address(host)
    except ValueError:
        return None
    if isinstance(address, IPv6Address):
        mapped = address.ipv4_mapped
        if mapped is None:
            v6 = (
                ("is_unspecified", "is the unspecified address"),
                ("is_loopback", "is a loopback address (every node would reach itself)"),
                ("is_link_local", "is a link-local address"),
                ("is_multicast", "is a multicast address"),
            )
            return next((what for attribute, what in v6 if getattr(address, attribute)), None)
        address = mapped
    return unicast_problem(address)


def check_endpoint_host(host: str, what: str) -> None:
    """Raise ``ValueError`` when :func:`endpoint_host_problem` finds a problem with ``host``, the host of ``what``
    (``the S3 endpoint``): the message names the host and asks for the service's own address or name."""
    problem = endpoint_host_problem(host)
    if problem is not None:
        if "link-local" in problem:
            problem += " (where clouds serve instance metadata and credentials)"
        raise ValueError(f"has the host {host}, which {problem}; give {what}'s own routable address or DNS name")


SPECIAL_RANGES = (
    (IPv4Network("0.0.0.0/8"), "'this network' (0.0.0.0/8, never a destination)"),
    (IPv4Network("127.0.0.0/8"), "loopback (127.0.0.0/8: every host would reach itself)"),
    (IPv4Network("169.254.0.0/16"), "link-local (169.254.0.0/16, where clouds serve instance metadata)"),
    (IPv4Network("224.0.0.0/4"), "multicast (224.0.0.0/4)"),
    (IPv4Network("240.0.0.0/4"), "reserved (240.0.0.0/4 and the broadcast address)"),
)
"""IPv4 ranges (RFC 6890) no node, pod, Service or cluster network may take a part of."""


def check_routable_cidr(value: IPv4Network) -> IPv4Network:
    """``value`` when it overlaps none of :data:`SPECIAL_RANGES`; raises ``ValueError`` naming the range otherwise.
    The whole default route ``0.0.0.0/0`` overlaps them all and is refused too."""
    for special, what in SPECIAL_RANGES:
        if value.overlaps(special):
            raise ValueError(f"overlaps {what}; give a range outside it (e.g. of 10.0.0.0/8)")
    return value


def _dotted(kind: str) -> BeforeValidator:
    """Refuse non-strings before pydantic's IP parsing, which would read the YAML number 167772161 as 10.0.0.1."""

    example = "10.0.0.1" if kind == "address" else "10.0.0.0/24"

    def check(value: object) -> object:
        if not isinstance(value, str | IPv4Address | IPv4Network):
            raise ValueError(f"is not an IPv4 {kind} written as a string (e.g. {example})")
        return value

    return BeforeValidator(check)


Ipv4Address = Annotated[IPv4Address, _dotted("address")]
"""An IPv4 address given as dotted text."""
Ipv4Cidr = Annotated[IPv4Network, _dotted("network")]
"""An IPv4 network given as ``address/prefix`` text (host bits zero)."""
