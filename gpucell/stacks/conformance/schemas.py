"""Where upstream schemas and chart values come from, which version each file is, and fetching them.

A schema directory holds files at fixed relative paths (``kubevirt/swagger.json``, ``cilium/values.yaml``...)
plus, to say which release each file belongs to, either a ``versions.json`` (``{"kubevirt/swagger.json":
"v1.9.0"}``, written by :func:`fetch`) or a ``SOURCES.md`` table whose ``tag`` column starts with the version
(the layout of this repository's ``shared/upstream``).
"""

from __future__ import annotations

import functools
import json
import os
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from gpucell.spec import CellSpec

__all__ = [
    "CLOUD_INIT_RELEASE",
    "DEFAULT_BASE_URL",
    "UPSTREAM_FILES",
    "VELERO_CRDS",
    "SchemaStore",
    "UpstreamFile",
    "default_cache_dir",
    "fetch",
    "same_version",
]

VELERO_CRDS = ("backups", "backupstoragelocations", "restores", "schedules")
"""The Velero CRDs gpucell's own objects (Schedules, the Restores ``gpucell restore`` renders) and the chart's
BackupStorageLocation are checked against."""
DEFAULT_BASE_URL = "https://raw.githubusercontent.com"
"""Where :func:`fetch` downloads from: ``<base>/<repo>/<tag>/<path>`` (GitHub's raw file host)."""


CLOUD_INIT_RELEASE = "26.2"
"""The canonical/cloud-init release (tag ``26.2``) whose JSON schemas VMs' own cloud-init is checked against
(:mod:`gpucell.stacks.conformance.cloud_init`)."""


@dataclass(frozen=True)
class UpstreamFile:
    """One upstream file: its repository, its path there, and the ``Versions`` field that picks the tag."""

    repo: str
    path: str
    component: str
    """Field of :class:`gpucell.spec.Versions` whose pinned value is the release (``kubevirt``, ``cilium``...)."""
    also: str | None = None
    """Where a directory laid out as this repository's ``shared/upstream`` keeps the file instead (a glob below the
    directory, e.g. inside an unpacked chart ``charts/cert-manager-v*/templates/...``)."""
    tag_prefix: str = "v"
    """What the project's release tags put before the bare version (``v``; prometheus-community/helm-charts tags
    charts ``<chart>-<version>``)."""
    release: str | None = None
    """The release gpucell pins itself, for a file no :class:`gpucell.spec.Versions` field pins (``component`` is
    then empty): cloud-init's schemas."""
    optional: bool = False
    """Not among every schema directory's files (CAAPH's CRD): a checker that needs it falls
    back on what gpucell knows and says so in a notice, instead of the directory counting as incomplete
    (:meth:`SchemaStore.missing`); :func:`fetch` downloads it all the same."""

    def tag(self, version: str) -> str:
        """The git tag of ``version``: ``vX.Y.Z`` for most projects here, ``<tag_prefix>X.Y.Z`` otherwise."""
        return f"{self.tag_prefix}{version.lstrip('v')}"

    def url(self, version: str, base_url: str = DEFAULT_BASE_URL) -> str:
        """Download address of this file at ``version``."""
        return f"{base_url.rstrip('/')}/{self.repo}/{self.tag(version)}/{self.path}"


UPSTREAM_FILES: dict[str, UpstreamFile] = {
    "kubevirt/swagger.json": UpstreamFile("kubevirt/kubevirt", "api/openapi-spec/swagger.json", "kubevirt"),
    "cdi/swagger.json": UpstreamFile("kubevirt/containerized-data-importer", "api/openapi-spec/swagger.json", "cdi"),
    **{
        f"kserve/serving.kserve.io_{plural}.yaml": UpstreamFile(
            "kserve/kserve", f"config/crd/full/serving.kserve.io_{plural}.yaml", "kserve"
        )
        for plural in ("inferenceservices", "servingruntimes", "clusterservingruntimes")
    },
    **{
        f"kserve/{chart}/values.yaml": UpstreamFile("kserve/kserve", f"charts/{chart}/values.yaml", "kserve")
        for chart in ("kserve-resources", "kserve-runtime-configs")
    },
    "cilium/values.yaml": UpstreamFile("cilium/cilium", "install/kubernetes/cilium/values.yaml", "cilium"),
    "cilium/values.schema.json": UpstreamFile(
        "cilium/cilium", "install/kubernetes/cilium/values.schema.json", "cilium"
    ),
    **{
        f"cilium/{plural}.yaml": UpstreamFile(
            "cilium/cilium", f"pkg/k8s/apis/cilium.io/client/crds/{version}/{plural}.yaml", "cilium"
        )
        for version, plural in (
            ("v2", "ciliumnetworkpolicies"),
            ("v2", "ciliumclusterwidenetworkpolicies"),
            # LB IPAM and its announcements (gpucell.components.lb_ipam)
            ("v2", "ciliumloadbalancerippools"),
            ("v2alpha1", "ciliuml2announcementpolicies"),
            ("v2", "ciliumbgpclusterconfigs"),
            ("v2", "ciliumbgppeerconfigs"),
            ("v2", "ciliumbgpadvertisements"),
        )
    },
    **{
        f"gateway-api/gateway.networking.k8s.io_{plural}.yaml": UpstreamFile(
            "kubernetes-sigs/gateway-api", f"config/crd/standard/gateway.networking.k8s.io_{plural}.yaml", "gateway_api"
        )
        for plural in ("gatewayclasses", "gateways", "httproutes")
    },
    # The chart's CRD templates (cert-manager ships no plain CRD files); Helm directives are dropped when loading.
    **{
        f"cert-manager/crd-cert-manager.io_{plural}.yaml": UpstreamFile(
            "cert-manager/cert-manager",
            f"deploy/charts/cert-manager/templates/crd-cert-manager.io_{plural}.yaml",
            "cert_manager",
            also=f"charts/cert-manager-v*/templates/crd-cert-manager.io_{plural}.yaml",
        )
        for plural in ("certificates", "clusterissuers")
    },
    "gpu-operator/values.yaml": UpstreamFile(
        "NVIDIA/gpu-operator", "deployments/gpu-operator/values.yaml", "gpu_operator"
    ),
    **{
        f"gpu-operator/nvidia.com_{plural}.yaml": UpstreamFile(
            "NVIDIA/gpu-operator", f"deployments/gpu-operator/crds/nvidia.com_{plural}.yaml", "gpu_operator"
        )
        for plural in ("clusterpolicies", "nvidiadrivers")
    },
    "gpu-operator/state-mig-manager/0400_configmap.yaml": UpstreamFile(
        "NVIDIA/gpu-operator", "assets/state-mig-manager/0400_configmap.yaml", "gpu_operator"
    ),
    # The GPU fabric (decision 0039): the Network Operator's NicClusterPolicy, its SR-IOV subchart's policies and
    # networks, and Multus' NetworkAttachmentDefinition, as the network-operator chart carries them.
    **{
        f"network-operator/{rel}": UpstreamFile(
            "Mellanox/network-operator", f"deployment/network-operator/{path}", "network_operator"
        )
        for rel, path in (
            ("mellanox.com_nicclusterpolicies.yaml", "crds/mellanox.com_nicclusterpolicies.yaml"),
            *(
                (
                    f"sriovnetwork.openshift.io_{plural}.yaml",
                    f"charts/sriov-network-operator/crds/sriovnetwork.openshift.io_{plural}.yaml",
                )
                for plural in ("sriovnetworknodepolicies", "sriovnetworks")
            ),
            (
                "k8s.cni.cncf.io_networkattachmentdefinitions_crd.yaml",
                "crds/k8s.cni.cncf.io_networkattachmentdefinitions_crd.yaml",
            ),
        )
    },
    "cert-manager/values.yaml": UpstreamFile(
        "cert-manager/cert-manager", "deploy/charts/cert-manager/values.yaml", "cert_manager"
    ),
    "longhorn/values.yaml": UpstreamFile("longhorn/longhorn", "chart/values.yaml", "longhorn"),
    # Only the values: the chart's DeviceClasses are templates (their CEL is gpucell.admission.dra.DEVICE_CLASSES), its
    # CRDs (ComputeDomain) are for a feature gpucell turns off, and claims are core kinds kubernetes-validate knows.
    "kube-prometheus-stack/values.yaml": UpstreamFile(
        "prometheus-community/helm-charts",
        "charts/kube-prometheus-stack/values.yaml",
        "kube_prometheus_stack",
        tag_prefix="kube-prometheus-stack-",
    ),
    # The Prometheus Operator CRDs the chart ships (its charts/crds subchart), as shared/upstream holds them.
    **{
        f"prometheus-operator/crd-{plural}.yaml": UpstreamFile(
            "prometheus-community/helm-charts",
            f"charts/kube-prometheus-stack/charts/crds/crds/crd-{plural}.yaml",
            "kube_prometheus_stack",
            tag_prefix="kube-prometheus-stack-",
        )
        for plural in ("servicemonitors", "podmonitors", "prometheusrules")
    },
    "dra-driver-nvidia-gpu/values.yaml": UpstreamFile(
        "kubernetes-sigs/dra-driver-nvidia-gpu", "deployments/helm/dra-driver-nvidia-gpu/values.yaml", "dra_driver"
    ),
    # cloud-init's own JSON schemas, for VMs' user and network data (gpucell.stacks.conformance.cloud_init); the
    # release is gpucell's choice (no cell installs cloud-init), its tags have no "v".
    **{
        f"cloud-init/{name}": UpstreamFile(
            "canonical/cloud-init",
            f"cloudinit/config/schemas/{name}",
            "",
            tag_prefix="",
            release=CLOUD_INIT_RELEASE,
        )
        for name in ("schema-cloud-config-v1.json", "schema-network-config-v1.json", "schema-network-config-v2.json")
    },
    # Tenant clusters (gpucell.workloads.tenant_cluster): Cluster API's CRDs moved to core/config/crd/bases in v1.14.
    **{
        f"cluster-api/{group}_{plural}.yaml": UpstreamFile(
            "kubernetes-sigs/cluster-api", f"{folder}/config/crd/bases/{group}_{plural}.yaml", "cluster_api"
        )
        for folder, group, plural in (
            ("core", "cluster.x-k8s.io", "clusters"),
            ("core", "cluster.x-k8s.io", "machinedeployments"),
            ("core", "cluster.x-k8s.io", "machinehealthchecks"),
            ("bootstrap/kubeadm", "bootstrap.cluster.x-k8s.io", "kubeadmconfigtemplates"),
            ("controlplane/kubeadm", "controlplane.cluster.x-k8s.io", "kubeadmcontrolplanes"),
        )
    },
    **{
        f"cluster-api-provider-kubevirt/infrastructure.cluster.x-k8s.io_{plural}.yaml": UpstreamFile(
            "kubernetes-sigs/cluster-api-provider-kubevirt",
            f"config/crd/bases/infrastructure.cluster.x-k8s.io_{plural}.yaml",
            "capk",
        )
        for plural in ("kubevirtclusters", "kubevirtmachinetemplates")
    },
    **{
        f"cluster-api-operator/operator.cluster.x-k8s.io_{plural}.yaml": UpstreamFile(
            "kubernetes-sigs/cluster-api-operator",
            f"config/crd/bases/operator.cluster.x-k8s.io_{plural}.yaml",
            "capi_operator",
        )
        for plural in (
            "coreproviders",
            "bootstrapproviders",
            "controlplaneproviders",
            "infrastructureproviders",
            "addonproviders",
        )
    },
    **{
        f"cluster-api-operator/{name}": UpstreamFile(
            "kubernetes-sigs/cluster-api-operator",
            f"hack/charts/cluster-api-operator/{name}",
            "capi_operator",
            also=f"charts/cluster-api-operator-*/{name}",
        )
        for name in ("values.yaml", "values.schema.json")
    },
    # Not in this repository's shared/upstream: without it HelmChartProxy is checked against gpucell's transcription
    # of CAAPH's Go types (gpucell.stacks.conformance.objects); gpucell schemas fetch downloads the real file.
    "cluster-api-addon-provider-helm/addons.cluster.x-k8s.io_helmchartproxies.yaml": UpstreamFile(
        "kubernetes-sigs/cluster-api-addon-provider-helm",
        "config/crd/bases/addons.cluster.x-k8s.io_helmchartproxies.yaml",
        "caaph",
        optional=True,
    ),
    # Velero's chart values and schema, and the CRDs its chart ships (crds/: Velero's own plus a label).
    **{
        f"velero/{name}": UpstreamFile(
            "vmware-tanzu/helm-charts",
            f"charts/velero/{name}",
            "velero",
            also=f"charts/velero-*/{name}",
            tag_prefix="velero-",
        )
        for name in ("values.yaml", "values.schema.json")
    },
    **{
        f"velero/crd-{plural}.yaml": UpstreamFile(
            "vmware-tanzu/helm-charts",
            f"charts/velero/crds/{plural}.yaml",
            "velero",
            also=f"charts/velero-*/crds/{plural}.yaml",
            tag_prefix="velero-",
        )
        for plural in VELERO_CRDS
    },
    **{
        f"external-snapshotter/snapshot.storage.k8s.io_{plural}.yaml": UpstreamFile(
            "kubernetes-csi/external-snapshotter",
            f"client/config/crd/snapshot.storage.k8s.io_{plural}.yaml",
            "external_snapshotter",
        )
        for plural in ("volumesnapshotclasses", "volumesnapshotcontents", "volumesnapshots")
    },
}
"""Relative path in a schema directory -> where it comes from upstream."""

_VERSION = re.compile(r"v?\d+\.\d+\.\d+|^v?\d+\.\d+\b")
"""A release in SOURCES.md's tag column: ``X.Y.Z`` anywhere (after a chart name), or a leading two-part ``X.Y``
(cloud-init tags ``26.2``)."""
_HELM_DIRECTIVE = re.compile(r"\s*\{\{.*\}\}\s*")


def same_version(a: str, b: str) -> bool:
    """``v1.9.0`` and ``1.9.0`` name the same release."""
    return a.lstrip("v") == b.lstrip("v")


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/gpucell/schemas``, or ``~/.cache/gpucell/schemas``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpucell" / "schemas"


_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: the KServe CRD is 2 MB of YAML


@functools.lru_cache(maxsize=64)
def _parsed(path: Path, mtime_ns: int) -> Any:
    """Parse a schema file once per process (keyed by modification time, so a re-fetch is seen)."""
    text = path.read_text()
    if "{{" in text:  # a chart's CRD template: drop the lines that are only Helm directives
        text = "\n".join(line for line in text.splitlines() if not _HELM_DIRECTIVE.fullmatch(line))
    if path.suffix == ".json":
        return json.loads(text)
    documents = [d for d in yaml.load_all(text, Loader=_YAML_LOADER) if d is not None]
    return documents[0] if len(documents) == 1 else documents


class SchemaStore:
    """Read-only access to a schema directory, with the release each file belongs to."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @cached_property
    def versions(self) -> dict[str, str | None]:
        """Relative path -> release (``v1.9.0``), or ``None`` where the directory does not say."""
        manifest = self.root / "versions.json"
        if manifest.is_file():
            recorded: dict[str, str | None] = json.loads(manifest.read_text())
            return recorded
        sources = self.root / "SOURCES.md"
        found: dict[str, str | None] = {}
        if sources.is_file():
            for line in sources.read_text().splitlines():
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                if len(cells) >= 5 and cells[1].startswith("`") and cells[1].endswith("`"):
                    match = _VERSION.search(cells[4])
                    found[cells[1].strip("`")] = match.group(0) if match and "NOT a release" not in cells[4] else None
        return found

    def path(self, rel: str) -> Path:
        """Where ``rel`` is: ``root/rel``, else the first match of its :attr:`UpstreamFile.also` glob (which may not
        exist either)."""
        direct = self.root / rel
        source = UPSTREAM_FILES.get(rel)
        if direct.is_file() or source is None or source.also is None:
            return direct
        matches = sorted(self.root.glob(source.also))
        return matches[0] if matches else direct

    def has(self, rel: str) -> bool:
        """True when the directory holds ``rel`` (at its own path or its ``also`` location)."""
        return self.path(rel).is_file()

    def missing(self) -> list[str]:
        """The files of :data:`UPSTREAM_FILES` the directory does not hold, in that order (``optional`` ones left
        out)."""
        return [rel for rel, source in UPSTREAM_FILES.items() if not source.optional and not self.has(rel)]

    def load(self, rel: str) -> Any:
        """Parsed content of ``rel`` (JSON, or YAML: a list when it holds several documents), cached per process.

        Raises ``FileNotFoundError`` when absent. Callers must not modify what it returns.
        """
        path = self.path(rel).resolve()
        return _parsed(path, path.stat().st_mtime_ns)

    def text(self, rel: str) -> str:
        """Raw text of ``rel``."""
        return self.path(rel).read_text()

    def version_of(self, rel: str) -> str | None:
        """The release of ``rel``: its own entry, else that of the nearest directory listed above it (a chart
        directory such as ``charts/keda-2.20.2``), else ``None``."""
        if self.versions.get(rel) is not None:
            return self.versions[rel]
        parents = [p for p in self.versions if rel.startswith(f"{p.rstrip('/')}/")]
        return self.versions[max(parents, key=len)] if parents else None

    def version_notice(self, rel: str, pinned: str) -> str | None:
        """A sentence when ``rel`` is not of the ``pinned`` release (or does not say), else ``None``."""
        have = self.version_of(rel)
        located = self.path(rel)
        if have is None and located != self.root / rel:  # inside a chart directory: that chart's release
            chart_dir = located.relative_to(self.root).parts[:2]
            have = self.versions.get("/".join(chart_dir))
        if have is None:
            return f"{rel} does not state its release; checked against it as if it were {pinned}"
        if not same_version(have, pinned):
            return f"{rel} is from {have} but {pinned} is pinned; checked against {have}"
        return None


def pinned_versions(cells: dict[str, CellSpec]) -> tuple[dict[str, str], list[str]]:
    """Component -> version to fetch (the first region's), and a sentence per region that pins another."""
    chosen: dict[str, str] = {}
    notes: list[str] = []
    for region, cell in cells.items():
        for component, version in cell.versions.model_dump().items():
            if component not in chosen:
                chosen[component] = version
            elif not same_version(chosen[component], version):
                notes.append(f"region {region} pins {component} {version}; fetched {chosen[component]}")
    return chosen, notes


def fetch(cells: dict[str, CellSpec], dest: Path, base_url: str = DEFAULT_BASE_URL, timeout: float = 60) -> list[str]:
    """Download every file of :data:`UPSTREAM_FILES` at the versions ``cells`` pin into ``dest``.

    Writes ``dest/versions.json``. Returns notes (regions that pin other versions). Raises ``OSError`` naming
    the URL when a download fails (HTTP error, no network).
    """
    versions, notes = pinned_versions(cells)
    manifest: dict[str, str] = {}
    for rel, source in UPSTREAM_FILES.items():
        version = source.release or versions[source.component]
        url = source.url(version, base_url)
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                body = response.read()
        except (urllib.error.URLError, TimeoutError) as exc:
            raise OSError(f"could not download {url}: {exc}") from None
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(body)
        manifest[rel] = source.tag(version) if source.tag_prefix == "v" else version.lstrip("v")
    (dest / "versions.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return notes
