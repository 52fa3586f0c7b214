"""What CDI needs to import a disk from a registry or an HTTP server: the ``source`` with its ``secretRef`` and
``certConfigMap``, the credentials Secret's data and the CA ConfigMap's key (CDI v1.66.0 ``api/openapi-spec/
swagger.json``: ``v1beta1.DataVolumeSourceRegistry``, ``v1beta1.DataVolumeSourceHTTP``). Shared by VM disks
(:mod:`gpucell.workloads.virtual_machine`) and image catalogs (:mod:`gpucell.components.images`)."""

from __future__ import annotations

from typing import Any

from gpucell.spec.images import ImportSource

__all__ = ["CA_BUNDLE_KEY", "IMPORT_SECRET_KEYS", "import_secret_data", "import_source"]

IMPORT_SECRET_KEYS = ("accessKeyId", "secretKey")
"""Keys of a CDI import ``secretRef`` Secret: the user and password of the registry or HTTP server (CDI v1.66.0
``v1beta1.DataVolumeSourceHTTP.secretRef``; ``doc/image-from-registry.md``)."""
CA_BUNDLE_KEY = "ca.pem"
"""Key of the CA bundle in a CDI ``certConfigMap`` (the importer reads every key of it as a PEM file)."""


def import_source(source: ImportSource, secret: str, ca: str) -> dict[str, Any]:
    """The CDI ``source`` of a registry or HTTP import: ``{registry: {url}}`` or ``{http: {url}}``, with
    ``secretRef: secret`` when the source has credentials and ``certConfigMap: ca`` when it has a CA bundle."""
    kind, url = ("registry", source.registry) if source.registry else ("http", source.http)
    rendered: dict[str, Any] = {"url": url}
    if source.credentials_config_key is not None:
        rendered["secretRef"] = secret
    if source.ca_bundle is not None:
        rendered["certConfigMap"] = ca
    return {kind: rendered}


def import_secret_data(credentials: str) -> dict[str, str]:
    """A CDI import Secret's data from ``<user>:<password>`` (split at the first ``:``): ``accessKeyId`` and
    ``secretKey``. Raises ``ValueError`` naming the format (never the value) otherwise."""
    user, sep, password = credentials.partition(":")
    if not (sep and user and password):
        raise ValueError("import credentials are not '<user>:<password>'")
    return dict(zip(IMPORT_SECRET_KEYS, (user, password), strict=True))
