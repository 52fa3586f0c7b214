"""Golden VM images: a cell's image catalogs, and where a disk's content is imported from.

An image catalog (``imageCatalogs.<namespace>``) is a namespace of the cell holding golden images that the tenants it
lists clone VM disks from. Each image is imported once per StorageClass it is kept in, as a CDI ``DataSource``
``<image>-<class>``: from a registry by a ``DataImportCron`` that polls the image's digest on ``schedule`` and imports
again when it moves (CDI "Automated OS image import, poll and update", ``doc/os-image-poll-and-update.md`` at
kubevirt/containerized-data-importer v1.66.0); from an HTTP URL by one ``DataVolume`` (CDI's cron polls registries
and PVCs only: ``pkg/apiserver/webhooks/dataimportcron-validate.go``, "Missing source"), imported again when the URL
or size changes. A VM disk clones one (``source.image: <catalog>/<image>``, rendered as a ``dataVolumeTemplates``
``sourceRef`` to the DataSource of the disk's class).

Import credentials (``credentialsConfigKey``: a secret ``<user>:<password>``, CDI's ``secretRef`` Secret with
``accessKeyId``/``secretKey``) and a CA bundle (``caBundle``: PEM certificates, CDI's ``certConfigMap``) serve registry
and HTTP sources alike (``v1beta1.DataVolumeSourceRegistry``/``DataVolumeSourceHTTP`` in CDI v1.66.0's swagger).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from pydantic import Field, StrictInt, field_validator, model_validator

from gpucell.errors import SpecError, shown
from gpucell.spec._base import SpecModel
from gpucell.spec._values import check_config_key, check_each, check_endpoint_host, check_image_reference, check_url
from gpucell.spec.etcd import cron_problem
from gpucell.spec.network import DNS_LABEL, DNS_SUBDOMAIN

__all__ = [
    "DEFAULT_IMPORT_SCHEDULE",
    "MAX_CA_BUNDLE_BYTES",
    "CatalogImageSpec",
    "ImageCatalogSpec",
    "ImportSource",
    "check_catalog_namespaces",
    "data_source_name",
]

DEFAULT_IMPORT_SCHEDULE = "0 4 * * *"
"""When a registry image's ``DataImportCron`` polls its digest by default: daily at 04:00 (the controller's time,
UTC)."""
MAX_CA_BUNDLE_BYTES = 65536
"""The largest ``caBundle``: 64 KiB of PEM, dozens of certificates."""
_PEM_CERTIFICATE = re.compile(
    r"-----BEGIN CERTIFICATE-----\r?\n(?:[A-Za-z0-9+/=]{1,76}\r?\n)+-----END CERTIFICATE-----\r?\n?"
)


def _check_ca_bundle(value: str) -> str:
    if len(value.encode()) > MAX_CA_BUNDLE_BYTES:
        raise ValueError(f"is larger than {MAX_CA_BUNDLE_BYTES} bytes")
    blocks = _PEM_CERTIFICATE.findall(value)
    rest = _PEM_CERTIFICATE.sub("", value).strip()
    if not blocks or rest:
        raise ValueError(
            "is not PEM certificates: one or more -----BEGIN CERTIFICATE----- ... -----END CERTIFICATE----- blocks "
            "and nothing else (no private key)"
        )
    return value


def check_catalog_namespaces(catalogs: dict[str, ImageCatalogSpec]) -> dict[str, ImageCatalogSpec]:
    """``catalogs`` unchanged when each key is a namespace name (a DNS-1123 label); raises :class:`SpecError` (path:
    the key) otherwise. Tenant and system namespaces are refused by
    :func:`gpucell.admission.vm_rules.check_vm_platform`."""
    for name in catalogs:
        if not DNS_LABEL.fullmatch(name):
            raise SpecError(
                (name,),
                f"{shown(name)} is not a namespace name (a DNS-1123 label: lower-case letters, digits, '-')",
            )
    return catalogs


def data_source_name(image: str, storage_class: str) -> str:
    """``metadata.name`` of ``image``'s DataSource (and DataImportCron or DataVolume) in ``storage_class``:
    ``<image>-<class>``, the class's dots as ``-``."""
    return f"{image}-{storage_class.replace('.', '-')}"


class ImportSource(SpecModel):
    """Where imported content comes from: exactly one of ``registry`` or ``http`` (a CDI import source), with
    credentials and a CA bundle when the source needs them."""

    registry: str | None = None
    """Container disk image, ``docker://quay.io/containerdisks/ubuntu:24.04``."""
    http: str | None = None
    """``https://`` URL of a qcow2/raw image (``http://`` only with ``allowPlainHttp``); its host is not a loopback,
    link-local or other non-routable address (the importer pod would fetch from its own node or instance
    metadata)."""
    allow_plain_http: bool = False
    """Accept an ``http://`` source: the image travels unencrypted and unauthenticated, anyone on the path can
    replace it. Defaults to false."""
    credentials_config_key: str | None = None
    """Secret stack config key holding ``<user>:<password>`` for the registry or HTTP server (CDI ``secretRef``:
    ``accessKeyId``/``secretKey``). Owned by the tenant of the VM (or by the cell, for a catalog image)."""
    ca_bundle: str | None = None
    """PEM certificates of the CA that signed the registry's or server's certificate (CDI ``certConfigMap``), for a
    private CA."""

    @field_validator("registry")
    @classmethod
    def _registry(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith("docker://"):
            raise ValueError("must start with docker:// (CDI registry source)")
        reference = value.removeprefix("docker://")
        if not reference:
            raise ValueError("has nothing after docker://; e.g. docker://quay.io/containerdisks/ubuntu:24.04")
        try:
            check_image_reference(reference)
        except ValueError as exc:
            raise ValueError(f"names no image: after docker:// it {exc.args[0].removeprefix('is ')}") from None
        return value

    @field_validator("http")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is None:
            return None
        check_url(value, ("https", "http"))
        check_endpoint_host(urlsplit(value).hostname or "", "the image server")
        return value

    @field_validator("credentials_config_key")
    @classmethod
    def _key(cls, value: str | None) -> str | None:
        return None if value is None else check_config_key(value)

    @field_validator("ca_bundle")
    @classmethod
    def _ca(cls, value: str | None) -> str | None:
        return None if value is None else _check_ca_bundle(value)

    def _given(self) -> list[str]:
        """The source keys set, in this model's order."""
        return [k for k, v in (("registry", self.registry), ("http", self.http)) if v]

    def _check_import(self) -> None:
        """The rules every import source shares: plain HTTP said out loud; credentials and CA for imports only."""
        if self.http and self.http.startswith("http://") and not self.allow_plain_http:
            raise SpecError(
                ("http",),
                f"{shown(self.http)} is plain HTTP: anyone on the path can replace the "
                "image; use https:// or set allowPlainHttp: true",
            )
        if self.allow_plain_http and not (self.http or "").startswith("http://"):
            raise SpecError(("allowPlainHttp",), "only applies to an http:// source")
        for key, value in (("credentialsConfigKey", self.credentials_config_key), ("caBundle", self.ca_bundle)):
            if value is not None and not (self.registry or self.http):
                raise SpecError((key,), "only applies to a registry or http source (CDI imports with it)")


class CatalogImageSpec(SpecModel):
    """One golden image of a catalog, imported into each of ``storageClasses``."""

    source: ImportSource
    """Where the image comes from: ``registry`` (kept current by a DataImportCron) or ``http`` (imported once)."""
    size_gib: StrictInt = Field(ge=1, le=65536)
    """Size of each imported copy, GiB: at least the image's virtual size (a VM disk cloned from it is at least
    this large)."""
    schedule: str | None = None
    """Registry images: when CDI polls the image's digest and imports it again if it moved (five-field cron,
    ``DataImportCron.spec.schedule``). Defaults to ``0 4 * * *``. Not for ``http`` sources, which CDI cannot poll."""
    imports_to_keep: StrictInt = Field(default=3, ge=1, le=20)
    """Registry images: imported versions kept (``importsToKeep``; CDI deletes older ones). Defaults to 3, CDI's
    default."""
    storage_classes: list[str] = []
    """StorageClasses the image is imported into, one DataSource each: a disk clones from the copy in its own class
    (a same-class clone can be a CSI clone or snapshot; across classes CDI copies through a pod). Defaults to the
    cell's default class."""

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str | None) -> str | None:
        problem = None if value is None else cron_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("storage_classes")
    @classmethod
    def _classes(cls, names: list[str]) -> list[str]:
        def check(name: str) -> None:
            if not DNS_SUBDOMAIN.fullmatch(name):
                raise ValueError("is not a StorageClass name (a DNS-1123 subdomain)")

        check_each(names, check)
        seen: set[str] = set()
        for index, name in enumerate(names):
            if name.replace(".", "-") in seen:
                raise SpecError((index,), f"{shown(name)} is listed twice (or names the same DataSource as another)")
            seen.add(name.replace(".", "-"))
        return names

    @model_validator(mode="after")
    def _source(self) -> CatalogImageSpec:
        given = self.source._given()
        if len(given) != 1:
            raise SpecError(("source",), f"give exactly one of registry, http (got {', '.join(given) or 'none'})")
        self.source._check_import()
        if self.source.http and self.schedule is not None:
            raise SpecError(
                ("schedule",),
                "only applies to a registry source: CDI's DataImportCron polls registry digests; an http image is "
                "imported once, and again when its url or sizeGib changes",
            )
        return self

    @property
    def effective_schedule(self) -> str:
        """``schedule``, or :data:`DEFAULT_IMPORT_SCHEDULE`."""
        return self.schedule or DEFAULT_IMPORT_SCHEDULE


class ImageCatalogSpec(SpecModel):
    """A namespace of golden images (the ``imageCatalogs`` key) and the tenants that may clone them."""

    images: dict[str, CatalogImageSpec] = Field(min_length=1)
    """Image name (a DNS-1123 label, ``ubuntu-2404``) -> image."""
    tenants: list[str] | None = None
    """Tenants of the region that may clone the catalog's images (CDI's ``datavolumes/source`` in the namespace for
    their groups and service accounts). Defaults to every tenant of the region; ``[]`` is refused (no tenant could
    use the catalog)."""

    @field_validator("images")
    @classmethod
    def _names(cls, images: dict[str, CatalogImageSpec]) -> dict[str, CatalogImageSpec]:
        for name in images:
            if not DNS_LABEL.fullmatch(name) or len(name) > 40:
                raise SpecError(
                    (name,),
                    f"{shown(name)} is not an image name: a DNS-1123 label of at most 40 characters (lower-case "
                    "letters, digits, '-'), so that <image>-<class> names a DataSource",
                )
        return images

    @field_validator("tenants")
    @classmethod
    def _tenants(cls, tenants: list[str] | None) -> list[str] | None:
        if tenants is not None and not tenants:
            raise ValueError("lets no tenant clone the catalog's images; list tenants, or leave tenants out for all")
        return tenants
