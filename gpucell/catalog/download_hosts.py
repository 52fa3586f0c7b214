"""The hosts a tenant's workloads download from, and whether a tenant's ``custom`` egress lets them through.

CDI's importer pods (``registry`` and ``http`` disk sources, ``pullMethod: pod``, the default) and KServe's storage
initializer (``storageUri``) run in the tenant's namespace under its Cilium policies, so with ``egress: custom`` every
host they contact must be in ``egressFqdns`` (or, for an address, in ``egressCidrs``); otherwise the import hangs
(kubevirt/containerized-data-importer#3497, "users are required to apply a NetworkPolicy in their namespace to make
the import work"). What each source contacts:

- a container registry (``docker://quay.io/...``): the registry, its token endpoint and the CDN its blob downloads
  redirect to. CDI v1.66.0 imports with containers/image (``pkg/importer/transport.go``), which follows those
  redirects. Known redirect hosts are listed in :data:`REGISTRY_HOSTS` (quay.io: OpenShift's firewall docs, "image
  downloads are denied when the initial download request redirects to a hostname such as cdn01.quay.io"; Docker Hub:
  docker/docs allow-list, plus its token service ``auth.docker.io``; ghcr.io: ``pkg-containers.githubusercontent.com``).
  Docker Hub may also redirect to a Cloudflare R2 host whose name gpucell cannot know; other registries are taken to
  serve blobs themselves: allow their CDN hosts too where they redirect;
- ``http(s)://host/...``: that host (an address: ``egressCidrs``);
- ``hf://``: the Hugging Face Hub and the LFS and Xet hosts its file downloads redirect to (:data:`HUGGING_FACE_HOSTS`,
  from ``https://huggingface.co/.well-known/meta.json``: ``lfsDomains``, ``cdnDomains``; plus the Xet bridge
  ``cas-bridge.xethub.hf.co`` and the legacy ``cdn-lfs.huggingface.co``);
- ``s3://bucket/...``: ``s3Endpoint`` when given, else AWS S3 in both addressing styles (``s3[.<region>].amazonaws.com``
  and ``<bucket>.s3[.<region>].amazonaws.com``);
- ``gs://``: ``storage.googleapis.com``;
- ``oci://``: nothing from the tenant's pods: KServe v0.20.0 runs OCI models as modelcars
  (``storageInitializer.enableModelcar: true`` in ``charts/kserve-resources/values.yaml``), images the node's
  container runtime pulls;
- ``pvc://``: nothing.

Cilium's ``toFQDNs`` patterns, as rendered for ``egressFqdns`` (:mod:`gpucell.tenancy.tenant`): a name matches itself;
``*.example.com`` matches one more label; ``**.example.com`` any number of them (Cilium ``matchPattern``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from ipaddress import IPv4Address, IPv4Network, ip_address
from urllib.parse import urlsplit

__all__ = [
    "DOCKER_HUB",
    "HUGGING_FACE_HOSTS",
    "REGISTRY_HOSTS",
    "disk_source_hosts",
    "fqdn_allows",
    "refused_host",
    "registry_of",
    "storage_uri_hosts",
]

DOCKER_HUB = "docker.io"
"""The registry of an image reference without a registry host."""
REGISTRY_HOSTS: dict[str, tuple[str, ...]] = {
    "quay.io": ("quay.io", "cdn.quay.io", "cdn01.quay.io", "cdn02.quay.io", "cdn03.quay.io"),
    DOCKER_HUB: ("registry-1.docker.io", "auth.docker.io", "production.cloudflare.docker.com"),
    "ghcr.io": ("ghcr.io", "pkg-containers.githubusercontent.com"),
}
"""Registry -> the hosts an image pull from it contacts (the registry API, token and blob CDN hosts)."""
HUGGING_FACE_HOSTS = (
    "huggingface.co",
    "cdn-lfs.huggingface.co",
    "cdn-lfs.hf.co",
    "cdn-lfs-us-1.hf.co",
    "cdn-lfs-eu-1.hf.co",
    "cas-bridge.xethub.hf.co",
    "transfer.xethub.hf.co",
    "us.aws.cdn.hf.co",
)
"""What an ``hf://`` download may contact: the Hub API and the LFS, Xet and CDN hosts file downloads redirect to."""


def registry_of(image: str) -> str:
    """The registry host of a CDI registry URL: ``docker://quay.io/containerdisks/ubuntu:24.04`` -> ``quay.io``;
    ``docker://ubuntu`` and ``docker://library/ubuntu`` -> ``docker.io`` (the Docker reference rule: a first path
    component is a registry when it holds a ``.`` or a ``:`` or is ``localhost``). The port is dropped."""
    reference = image.removeprefix("docker://")
    first, sep, _ = reference.partition("/")
    if not sep or not ("." in first or ":" in first or first == "localhost"):
        return DOCKER_HUB
    return first.rsplit(":", 1)[0] if first.count(":") == 1 else first


def disk_source_hosts(registry: str | None, http: str | None) -> tuple[str, ...]:
    """The hosts a CDI import of a ``registry`` or ``http`` disk source contacts (none for a PVC clone)."""
    if registry:
        host = registry_of(registry)
        return REGISTRY_HOSTS.get(host, (host,))
    if http:
        return (urlsplit(http).hostname or "",)
    return ()


def storage_uri_hosts(
    storage_uri: str, s3_endpoint: str | None = None, s3_region: str | None = None
) -> tuple[str, ...]:
    """The hosts KServe's storage initializer contacts for ``storage_uri`` (see the module doc)."""
    scheme, _, rest = storage_uri.partition("://")
    if scheme == "hf":
        return HUGGING_FACE_HOSTS
    if scheme == "s3":
        if s3_endpoint:
            endpoint = s3_endpoint if "://" in s3_endpoint else f"https://{s3_endpoint}"
            return (urlsplit(endpoint).hostname or s3_endpoint,)
        bucket = rest.split("/", 1)[0]
        service = f"s3.{s3_region}.amazonaws.com" if s3_region else "s3.amazonaws.com"
        return (service, f"{bucket}.{service}")
    if scheme == "gs":
        return ("storage.googleapis.com",)
    if scheme in ("http", "https"):
        return (urlsplit(storage_uri).hostname or "",)
    return ()


def fqdn_allows(pattern: str, host: str) -> bool:
    """Whether Cilium's ``toFQDNs`` entry ``pattern`` (as gpucell renders ``egressFqdns``) matches ``host``."""
    pattern, host = pattern.lower().rstrip("."), host.lower().rstrip(".")
    if pattern.startswith("**."):
        return host.endswith(pattern[2:]) and len(host) > len(pattern) - 2
    if pattern.startswith("*."):
        head, _, tail = host.partition(".")
        return bool(head) and tail == pattern[2:]
    return host == pattern


def _address(host: str) -> IPv4Address | None:
    try:
        address = ip_address(host)
    except ValueError:
        return None
    return address if isinstance(address, IPv4Address) else None


def refused_host(hosts: Iterable[str], fqdns: Sequence[str], cidrs: Sequence[IPv4Network]) -> str | None:
    """The first of ``hosts`` that neither an ``egressFqdns`` pattern nor (for an address) an ``egressCidrs`` network
    allows, or ``None`` when all are allowed."""
    for host in hosts:
        address = _address(host)
        allowed = (
            any(address in net for net in cidrs)
            if address is not None
            else any(fqdn_allows(pattern, host) for pattern in fqdns)
        )
        if not allowed:
            return host
    return None
