"""How k3s itself is installed and hardened: the CIS profile, secrets encryption, and the pinned installer.

The ``cis`` profile follows the k3s "CIS Hardening Guide" (docs.k3s.io/security/hardening-guide, k3s-io/docs
``docs/security/hardening-guide.md``, the "v1.29 and newer" configuration) with the control numbers of the k3s
"CIS 2.0 Self-Assessment Guide" for the v1.34-v1.37 releases (``docs/security/self-assessment-2.0.md``); what it
renders is in :mod:`gpucell.k3s.hardening`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from enum import StrEnum
from urllib.parse import quote

from pydantic import field_validator

from gpucell.errors import SpecError, shown
from gpucell.spec._base import SpecModel

__all__ = ["EMPTY_SHA256", "INSTALLER_SHA256", "K3sProfile", "K3sSpec", "check_k3s", "installer_url"]

INSTALLER_SHA256: dict[str, str] = {
    # Value of install.sh.sha256sum in k3s-io/k3s at commit 019b0afdd830e36f5e4b7a5b237e6a4339e6a6be, the only
    # stored copy that could be read offline; that this commit's install.sh is the one tagged v1.34.2+k3s1 is NOT
    # confirmed. Confirm before a first real install with:
    #   curl -sfL https://raw.githubusercontent.com/k3s-io/k3s/v1.34.2%2Bk3s1/install.sh | sha256sum
    # A wrong value fails safe: the node script refuses to run an installer whose checksum differs.
    "v1.34.2+k3s1": "68ae766b4c4fd2c8032f712cdd346c8f9d1ae60eaeb4736a1155effda44ea23d",
}
"""k3s release -> sha256 of the ``install.sh`` at that release's tag, as reviewed for gpucell. A release not
listed needs ``k3s.installerSha256``."""
_SHA256 = re.compile(r"[0-9a-f]{64}")
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
"""sha256 of zero bytes: what ``curl -sfL <url> | sha256sum`` prints when the download fails."""


def installer_url(version: str) -> str:
    """Where the install script of k3s ``version`` is fetched from: the file at the release's tag in
    k3s-io/k3s (``+`` percent-encoded), not the moving ``https://get.k3s.io``."""
    return f"https://raw.githubusercontent.com/k3s-io/k3s/{quote(version, safe='')}/install.sh"


class K3sProfile(StrEnum):
    """The hardening profile of the cell's k3s servers and agents."""

    CIS = "cis"
    NONE = "none"


class K3sSpec(SpecModel):
    """k3s hardening and installation. Every node's config and files follow it (:mod:`gpucell.k3s.hardening`)."""

    profile: K3sProfile = K3sProfile.CIS
    """``cis`` (default): the k3s CIS Hardening Guide's settings (Pod Security admission defaults, audit log,
    kernel defaults protected, kubelet and controller-manager arguments; see docs/security.md). ``none`` is for
    labs only and must be chosen explicitly."""
    secrets_encryption: bool | None = None
    """Encrypt Secrets at rest in etcd (k3s ``secrets-encryption``, CIS 1.2.27/1.2.28). Defaults to true with the
    ``cis`` profile. k3s cannot switch it on or off on a running cluster: a server initialised with another
    setting refuses the change (set this to what the cell was created with)."""
    installer_sha256: str | None = None
    """sha256 of the k3s ``install.sh`` at the tag of ``versions.k3s``; required for a k3s release gpucell has no
    reviewed checksum for (``curl -sfL https://raw.githubusercontent.com/k3s-io/k3s/<tag with + as %2B>/install.sh
    | sha256sum``)."""

    @field_validator("installer_sha256")
    @classmethod
    def _sha256(cls, value: str | None) -> str | None:
        if value is not None and not _SHA256.fullmatch(value):
            raise ValueError("is not a sha256 checksum (64 lower-case hex digits, as sha256sum prints it)")
        if value == EMPTY_SHA256:
            raise ValueError(
                "is the sha256 of an empty file: the download failed (curl -f prints nothing on an HTTP error); "
                "check the tag in the URL (+ as %2B) and hash the installer again"
            )
        return value

    @property
    def cis(self) -> bool:
        """True with the ``cis`` profile."""
        return self.profile is K3sProfile.CIS

    @property
    def encrypts_secrets(self) -> bool:
        """``secretsEncryption``, defaulting to the profile."""
        return self.cis if self.secrets_encryption is None else self.secrets_encryption

    def installer_checksum(self, version: str) -> str:
        """The sha256 the node script checks ``install.sh`` of k3s ``version`` against. Raises ``KeyError``
        for a release without a known checksum and no ``installerSha256`` (:func:`check_k3s` refuses it)."""
        return self.installer_sha256 or INSTALLER_SHA256[version]


def check_k3s(spec: K3sSpec, version: str) -> Iterator[SpecError]:
    """A :class:`SpecError` (path ``k3s.installerSha256``) when nothing pins the installer of k3s ``version``."""
    if spec.installer_sha256 is None and version not in INSTALLER_SHA256:
        known = ", ".join(INSTALLER_SHA256)
        yield SpecError(
            ("k3s", "installerSha256"),
            f"is required for versions.k3s {shown(version)}: gpucell has reviewed the install.sh of {known} only; "
            f"read {installer_url(version)} and set its checksum (curl -sfL <that URL> | sha256sum)",
        )
