"""Pinned versions of everything a cell installs, and the facts that change with them.

The defaults are the versions this repository is tested against (the upstream schemas and chart values in
``shared/upstream/SOURCES.md``). A stack may pin others; every version must be an exact release, never a channel
such as ``latest`` or ``stable``, so a ``pulumi up`` next month installs what was reviewed today.
"""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import Field, ValidationInfo, field_validator

from gpucell.catalog.releases import release
from gpucell.spec._base import SpecModel

__all__ = [
    "KSERVE_SPLIT_CHARTS_SINCE",
    "DeploymentMode",
    "Versions",
    "kserve_deployment_modes",
    "kserve_has_split_charts",
    "release",
    "unpinned",
]

_SEMVER = re.compile(r"v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?")
_K3S = re.compile(r"v(?P<major>\d+)\.(?P<minor>\d+)\.\d+\+k3s\d+")


class DeploymentMode(StrEnum):
    """KServe deployment modes across releases (the names accepted depend on the KServe version)."""

    STANDARD = "Standard"
    KNATIVE = "Knative"
    RAW_DEPLOYMENT = "RawDeployment"
    SERVERLESS = "Serverless"


KSERVE_RENAMED_MODES_SINCE = (0, 16)
"""KServe v0.16 renamed ``RawDeployment`` to ``Standard`` and ``Serverless`` to ``Knative`` (kserve/kserve#4608)."""
KSERVE_SPLIT_CHARTS_SINCE = (0, 17)
"""KServe v0.17 split the all-in-one ``kserve`` chart into ``kserve-resources`` and ``kserve-runtime-configs``
(kserve/kserve#5089; the v0.17 upgrade guide)."""


def kserve_has_split_charts(kserve_version: str) -> bool:
    """True when KServe ``kserve_version`` ships ``kserve-resources`` + ``kserve-runtime-configs`` charts."""
    return release(kserve_version) >= KSERVE_SPLIT_CHARTS_SINCE


def kserve_deployment_modes(kserve_version: str) -> tuple[DeploymentMode, ...]:
    """The ``deploymentMode`` values the KServe controller at ``kserve_version`` accepts, raw mode first.

    KServe v0.16 renamed ``RawDeployment`` to ``Standard`` and ``Serverless`` to ``Knative`` (kserve/kserve#4608);
    the old names are only up-converted with a deprecation warning, so a new cell must use the new ones.
    """
    if release(kserve_version) >= KSERVE_RENAMED_MODES_SINCE:
        return (DeploymentMode.STANDARD, DeploymentMode.KNATIVE)
    return (DeploymentMode.RAW_DEPLOYMENT, DeploymentMode.SERVERLESS)


def _pinned(value: str) -> str:
    if not _SEMVER.fullmatch(value):
        raise ValueError("is not a pinned release; use an exact version such as v1.2.3 (no latest, stable or ranges)")
    return value


class Versions(SpecModel):
    """Exact releases installed in a cell. Each defaults to the version this repository is tested against."""

    k3s: str = Field(default="v1.34.2+k3s1", alias="k3s")
    """k3s release (``INSTALL_K3S_VERSION``), ``vMAJOR.MINOR.PATCH+k3sN``. Sets the cell's Kubernetes version."""
    cilium: str = "1.20.0"
    """Cilium Helm chart version (https://helm.cilium.io)."""
    kubevirt: str = "v1.9.0"
    """KubeVirt release; the operator manifest comes from that GitHub release."""
    cdi: str = "v1.66.0"
    """CDI (Containerized Data Importer) release; the operator manifest comes from that GitHub release."""
    gpu_operator: str = "v26.7.0"
    """NVIDIA GPU Operator Helm chart version (https://helm.ngc.nvidia.com/nvidia)."""
    kserve: str = "v0.20.0"
    """KServe release; charts ``kserve-crd``, ``kserve-resources``, ``kserve-runtime-configs`` at that version."""
    cert_manager: str = "v1.21.1"
    """cert-manager Helm chart version (https://charts.jetstack.io)."""
    longhorn: str = "1.12.1"
    """Longhorn Helm chart version (https://charts.longhorn.io); used when ``storage.backend`` is ``longhorn``."""
    dra_driver: str = "0.4.1"
    """NVIDIA DRA driver for GPUs Helm chart version (chart ``dra-driver-nvidia-gpu`` of
    kubernetes-sigs/dra-driver-nvidia-gpu at ``oci://registry.k8s.io/dra-driver-nvidia/charts``); installed when a
    pool has ``gpuMode: dra``."""
    network_operator: str = "26.4.1"
    """NVIDIA Network Operator Helm chart version (chart ``network-operator`` at https://helm.ngc.nvidia.com/nvidia,
    Mellanox/network-operator v26.4.1 with its SR-IOV Network Operator subchart); installed when a pool declares a
    ``fabric``."""
    gateway_api: str = "v1.5.1"
    """Gateway API release whose standard-channel CRDs the cell installs with a ``gateway`` (the release's
    ``standard-install.yaml``); v1.5.1 is the version Cilium 1.20 supports."""

    kube_vip: str = "v1.0.4"
    """kube-vip image tag (``ghcr.io/kube-vip/kube-vip``) of the API VIP's static pods, with ``network.apiVip``;
    pinned by digest in :data:`gpucell.k3s.kube_vip.IMAGE_DIGESTS`."""

    dcgm: str = "4.6.0-1-ubuntu24.04"
    """DCGM image tag (``nvcr.io/nvidia/cloud-native/dcgm``) whose ``dcgmi diag`` a GPU node's acceptance run
    runs: the one the GPU Operator v26.7.0 chart pins (``values.yaml`` ``dcgm.version``)."""
    nccl_tests: str = "12.9.1-devel-ubuntu24.04-nccl2.29.2-1-d73ec07"
    """nccl-tests image tag (``ghcr.io/coreweave/nccl-tests``: CUDA 12.9.1, NCCL 2.29.2) whose ``all_reduce_perf``
    a GPU node's acceptance run runs across its GPUs; CUDA 12.9 runs on every driver branch the GPU Operator
    installs (R580 and later)."""

    kube_prometheus_stack: str = "88.5.3"
    """kube-prometheus-stack Helm chart version (https://prometheus-community.github.io/helm-charts); installed with
    ``metrics.enabled``."""
    keda: str = "2.20.2"
    """KEDA Helm chart version (https://kedacore.github.io/charts); installed when an endpoint scales on a vLLM
    metric."""
    velero: str = "12.1.0"
    """Velero Helm chart version (https://vmware-tanzu.github.io/helm-charts, chart 12.1.0 = Velero v1.18.1);
    installed with ``backups``. gpucell knows the Velero release of each chart it supports
    (:data:`gpucell.spec.backups.VELERO_CHARTS`)."""
    velero_plugin_for_aws: str = "v1.14.2"
    """Velero's object store plugin for S3 (image ``velero/velero-plugin-for-aws``); its line must be the one
    Velero's release is tested with (v1.14 for Velero 1.18)."""
    kubevirt_velero_plugin: str = "v0.9.0"
    """KubeVirt's Velero plugin (image ``quay.io/kubevirt/kubevirt-velero-plugin``), which backs up a VM with its
    DataVolumes and skips its launcher pod on restore; v0.9 for Velero 1.18."""
    external_snapshotter: str = "v8.6.0"
    """kubernetes-csi/external-snapshotter release: the VolumeSnapshot CRDs and the snapshot-controller (image
    ``registry.k8s.io/sig-storage/snapshot-controller``), installed with ``backups`` since k3s ships neither;
    v8.6.0 is the release of Longhorn 1.12.1's csi-snapshotter sidecar."""

    cluster_api: str = "v1.14.0"
    """Cluster API release (kubernetes-sigs/cluster-api) of the core provider and the kubeadm bootstrap and
    control-plane providers; installed when a tenant has ``tenantClusters``."""
    capk: str = "v0.11.2"
    """Cluster API provider KubeVirt (CAPK) release: tenant-cluster nodes as KubeVirt VMs."""
    caaph: str = "v0.6.4"
    """Cluster API add-on provider for Helm (CAAPH) release: installs Cilium and the GPU Operator into tenant
    clusters."""
    capi_operator: str = "0.28.0"
    """cluster-api-operator Helm chart version (https://kubernetes-sigs.github.io/cluster-api-operator), which
    installs and upgrades the four providers above from their release manifests."""

    @field_validator(
        "cilium",
        "kubevirt",
        "cdi",
        "gpu_operator",
        "kserve",
        "cert_manager",
        "longhorn",
        "dra_driver",
        "network_operator",
        "gateway_api",
        "kube_prometheus_stack",
        "keda",
        "kube_vip",
        "dcgm",
        "nccl_tests",
        "cluster_api",
        "capk",
        "caaph",
        "capi_operator",
        "velero",
        "velero_plugin_for_aws",
        "kubevirt_velero_plugin",
        "external_snapshotter",
    )
    @classmethod
    def _exact(cls, value: str, info: ValidationInfo) -> str:
        pinned = _pinned(value)
        # Each project writes its releases one way (KubeVirt v1.9.0, Cilium 1.20.0). The other way names the same
        # release: written as the project writes it, so that the Helm release's version does not change and
        # `gpucell fleet` sees no skew where there is none.
        default = cls.model_fields[str(info.field_name)].default
        if pinned.startswith("v") != default.startswith("v"):
            return pinned.removeprefix("v") if pinned.startswith("v") else f"v{pinned}"
        return pinned

    @field_validator("k3s")
    @classmethod
    def _exact_k3s(cls, value: str) -> str:
        if not _K3S.fullmatch(value):
            raise ValueError("is not a pinned k3s release; use the form v1.34.2+k3s1 (no latest, stable or channels)")
        return value

    @property
    def kubernetes_minor(self) -> str:
        """Kubernetes ``MAJOR.MINOR`` of the pinned k3s (``1.34``)."""
        match = _K3S.fullmatch(self.k3s)
        assert match is not None  # validated above
        return f"{match['major']}.{match['minor']}"


def unpinned(versions: Versions) -> list[str]:
    """The config names (``gpuOperator``) of the components whose version ``versions`` takes from the package's
    defaults, not from the stack file, in field order (``[]``: every version is pinned)."""
    return [info.alias or name for name, info in Versions.model_fields.items() if name not in versions.model_fields_set]
