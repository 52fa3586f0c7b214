"""Who signs in: the OpenID Connect identity provider the API server trusts, and the group names tenants bind.

The API server reads it as a structured authentication configuration (``AuthenticationConfiguration``, Kubernetes
"Authenticating" > "Using Authentication Configuration"; GA in v1.34, ``apiserver.config.k8s.io/v1``), which
gpucell renders per server (:mod:`gpucell.k3s.hardening`). Every username and group from a token gets a prefix,
so an identity-provider group named ``system:masters`` becomes ``oidc:system:masters``, which nothing is bound to:
a tenant's users cannot claim a Kubernetes or platform group.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from pydantic import field_validator

from gpucell.errors import SpecError, shown
from gpucell.spec._base import SpecModel
from gpucell.spec._values import check_endpoint_host, check_single_line, check_url

if TYPE_CHECKING:
    from gpucell.spec.tenancy import TenantSpec

__all__ = ["RESERVED_PREFIX", "OidcSpec", "check_tenant_groups"]

RESERVED_PREFIX = "system:"
"""Kubernetes' own users and groups (``system:masters``, ``system:authenticated``, ``system:node:<name>``...)."""


class OidcSpec(SpecModel):
    """An OpenID Connect issuer whose ID tokens the API server accepts (``jwt`` authenticator)."""

    issuer_url: str
    """``https://`` URL of the issuer, exactly the tokens' ``iss`` claim; discovery is read from
    ``<issuerUrl>/.well-known/openid-configuration``. Its host is not a loopback, link-local or other non-routable
    address."""
    client_id: str
    """The OIDC client the tokens are issued to: the ``aud`` the API server requires."""
    username_claim: str = "sub"
    """Claim that names the user (``sub``, ``email``...). Defaults to ``sub``."""
    username_prefix: str = "oidc:"
    """Prefix of every username (non-empty, not ``system:``). Defaults to ``oidc:``."""
    groups_claim: str = "groups"
    """Claim that lists the user's groups. Defaults to ``groups``."""
    groups_prefix: str = "oidc:"
    """Prefix of every group from a token (non-empty, not ``system:``); tenant RoleBindings name
    ``<groupsPrefix><group>``. Defaults to ``oidc:``."""
    certificate_authority: str | None = None
    """PEM CA bundle that signs the issuer's TLS certificate, when the system's trust store does not."""

    @field_validator("issuer_url")
    @classmethod
    def _issuer(cls, value: str) -> str:
        check_url(value, ("https",))
        if "?" in value or "#" in value:
            raise ValueError("must not have a query or fragment (Kubernetes requires a bare https:// issuer URL)")
        check_endpoint_host(urlsplit(value).hostname or "", "the issuer")
        return value

    @field_validator("client_id", "username_claim", "groups_claim")
    @classmethod
    def _token(cls, value: str) -> str:
        check_single_line(value, "text")
        if any(c.isspace() or c in "\"'\\" for c in value):
            raise ValueError("must not contain spaces, quotes or backslashes")
        return value

    @field_validator("username_prefix", "groups_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        check_single_line(value, "text")
        if value.startswith(RESERVED_PREFIX) or any(c.isspace() for c in value):
            raise ValueError(f"must not start with {RESERVED_PREFIX!r} or contain spaces; use e.g. 'oidc:'")
        return value

    @field_validator("certificate_authority")
    @classmethod
    def _pem(cls, value: str | None) -> str | None:
        if value is not None and "-----BEGIN CERTIFICATE-----" not in value:
            raise ValueError("is not a PEM certificate bundle (-----BEGIN CERTIFICATE----- ...)")
        return value

    def group(self, name: str) -> str:
        """The group an API request carries for identity-provider group ``name``."""
        return f"{self.groups_prefix}{name}"


def check_tenant_groups(oidc: OidcSpec | None, tenants: Mapping[str, TenantSpec]) -> Iterator[SpecError]:
    """With OIDC, tenants' groups are the identity provider's names: one already carrying ``groupsPrefix`` would
    be prefixed twice and never match."""
    if oidc is None:
        return
    for tenant_name, tenant in tenants.items():
        for key in ("admins", "members", "viewers"):
            for index, group in enumerate(getattr(tenant.groups, key)):
                if group.startswith(oidc.groups_prefix):
                    yield SpecError(
                        ("tenants", tenant_name, "groups", key, index),
                        f"{shown(group)} already starts with oidc.groupsPrefix {shown(oidc.groups_prefix)}; give "
                        "the identity provider's group name, gpucell adds the prefix",
                    )
