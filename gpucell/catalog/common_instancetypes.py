"""KubeVirt's common instancetypes and preferences: what virt-operator deploys cluster-wide, with the facts gpucell
needs to admit a VM that names one (its vCPUs, memory and CPU pinning; its firmware and minimum size).

virt-operator deploys the kubevirt/common-instancetypes bundles it was built with, by default since KubeVirt v1.4
(``spec.configuration.commonInstancetypesDeployment.enabled``, "defaults to True"; gate
``CommonInstancetypesDeploymentGate`` GA): KubeVirt v1.9.0 deploys common-instancetypes v1.7.0
(``hack/common-instancetypes/default.sh``), 65 ``VirtualMachineClusterInstancetype`` and 54
``VirtualMachineClusterPreference`` objects, read here from the bundles in kubevirt/kubevirt v1.9.0
``pkg/virt-operator/resource/generate/components/data/common-instancetypes/common-cluster{instancetypes,preferences}-
bundle.yaml``. So the names are pinned by the pinned KubeVirt; a release gpucell has no table for refuses them (see
:func:`common_instancetypes`), as the KServe runtimes do (:mod:`gpucell.catalog.kserve_runtimes`).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucell.catalog.releases import release

__all__ = [
    "COMMON_BUNDLE_VERSIONS",
    "CommonInstancetype",
    "CommonPreference",
    "common_instancetypes",
    "common_preferences",
]


@dataclass(frozen=True)
class CommonInstancetype:
    """One common instancetype's ``spec``, as far as admission reads it."""

    cpus: int
    """``cpu.guest``: vCPUs."""
    memory_mib: int
    """``memory.guest``, MiB (``u1.nano`` has 512Mi)."""
    dedicated_cpus: bool = False
    """``cpu.dedicatedCPUPlacement``."""
    isolate_emulator_thread: bool = False
    """``cpu.isolateEmulatorThread``: one more dedicated host CPU for QEMU's emulator thread."""
    hugepages: str | None = None
    """``memory.hugepages.pageSize``."""
    numa_passthrough: bool = False
    """``cpu.numa.guestMappingPassthrough``."""
    realtime: bool = False
    """``cpu.realtime``: needs hosts tuned for real time (isolated CPUs, a real-time kernel), which gpucell does
    not set up."""
    overcommit_percent: int = 0
    """``memory.overcommitPercent``: the launcher pod requests this much less than the guest memory."""


@dataclass(frozen=True)
class CommonPreference:
    """One common preference's ``spec``, as far as admission reads it."""

    efi: bool = False
    """``firmware.preferredEfi`` is set."""
    secure_boot: bool = False
    """... with ``secureBoot: true`` (and ``features.preferredSmm``)."""
    persistent_efi: bool = False
    """... with ``persistent: true``: NVRAM in the VM's backend storage."""
    tpm: bool = False
    """``devices.preferredTPM`` is set."""
    persistent_tpm: bool = False
    """... with ``persistent: true``: TPM state in the VM's backend storage."""
    architecture: str | None = None
    """``preferredArchitecture``/``requirements.architecture`` other than ``amd64`` (gpucell's hosts are amd64)."""
    min_cpus: int = 0
    """``requirements.cpu.guest``: the fewest vCPUs the instancetype must give."""
    min_memory_mib: int = 0
    """``requirements.memory.guest``, MiB."""


_INSTANCETYPES_V1_9 = {
    "cx1.2xlarge": CommonInstancetype(
        8, 16384, dedicated_cpus=True, isolate_emulator_thread=True, hugepages="2Mi", numa_passthrough=True
    ),
    "cx1.2xlarge1gi": CommonInstancetype(
        8, 16384, dedicated_cpus=True, isolate_emulator_thread=True, hugepages="1Gi", numa_passthrough=True
    ),
    "cx1.4xlarge": CommonInstancetype(
        16, 32768, dedicated_cpus=True, isolate_emulator_thread=True, hugepages="2Mi", numa_passthrough=True
    ),
    "cx1.4xlarge1gi": CommonInstancetype(
        16, 32768, dedicated_cpus=True, isolate_emulator_thread=True, hugepages="1Gi", numa_passthrough=True
    ),
    "cx1.8xlarge": CommonInstancetype(
        32, 65536, dedicated_cpus=True, isolate_emulator_thread=True, hugepages="2Mi", numa_passthrough=True
    ),
    "cx1.8xlarge1gi": CommonInstancetype(
        32, 65536, dedicated_cpus=True, isolate_emulator_thread=True, hugepages="1Gi", numa_passthrough=True
    ),
    "cx1.large": CommonInstancetype(
        2, 4096, dedicated_cpus=True, isolate_emulator_thread=True, hugepages="2Mi", numa_passthrough=True
    ),
    "cx1.large1gi": CommonInstancetype(
        2, 4096, dedicated_cpus=True, isolate_emulator_thread=True, hugepages="1Gi", numa_passthrough=True
    ),
    "cx1.medium": CommonInstancetype(
        1, 2048, dedicated_cpus=True, isolate_emulator_thread=True, hugepages="2Mi", numa_passthrough=True
    ),
    "cx1.medium1gi": CommonInstancetype(
        1, 2048, dedicated_cpus=True, isolate_emulator_thread=True, hugepages="1Gi", numa_passthrough=True
    ),
    "cx1.xlarge": CommonInstancetype(
        4, 8192, dedicated_cpus=True, isolate_emulator_thread=True, hugepages="2Mi", numa_passthrough=True
    ),
    "cx1.xlarge1gi": CommonInstancetype(
        4, 8192, dedicated_cpus=True, isolate_emulator_thread=True, hugepages="1Gi", numa_passthrough=True
    ),
    "d1.2xlarge": CommonInstancetype(8, 32768, dedicated_cpus=True, isolate_emulator_thread=True),
    "d1.2xmedium": CommonInstancetype(2, 4096, dedicated_cpus=True, isolate_emulator_thread=True),
    "d1.4xlarge": CommonInstancetype(16, 65536, dedicated_cpus=True, isolate_emulator_thread=True),
    "d1.8xlarge": CommonInstancetype(32, 131072, dedicated_cpus=True, isolate_emulator_thread=True),
    "d1.large": CommonInstancetype(2, 8192, dedicated_cpus=True, isolate_emulator_thread=True),
    "d1.medium": CommonInstancetype(1, 4096, dedicated_cpus=True, isolate_emulator_thread=True),
    "d1.micro": CommonInstancetype(1, 1024, dedicated_cpus=True, isolate_emulator_thread=True),
    "d1.nano": CommonInstancetype(1, 512, dedicated_cpus=True, isolate_emulator_thread=True),
    "d1.small": CommonInstancetype(1, 2048, dedicated_cpus=True, isolate_emulator_thread=True),
    "d1.xlarge": CommonInstancetype(4, 16384, dedicated_cpus=True, isolate_emulator_thread=True),
    "m1.2xlarge": CommonInstancetype(8, 65536, hugepages="2Mi"),
    "m1.2xlarge1gi": CommonInstancetype(8, 65536, hugepages="1Gi"),
    "m1.4xlarge": CommonInstancetype(16, 131072, hugepages="2Mi"),
    "m1.4xlarge1gi": CommonInstancetype(16, 131072, hugepages="1Gi"),
    "m1.8xlarge": CommonInstancetype(32, 262144, hugepages="2Mi"),
    "m1.8xlarge1gi": CommonInstancetype(32, 262144, hugepages="1Gi"),
    "m1.large": CommonInstancetype(2, 16384, hugepages="2Mi"),
    "m1.large1gi": CommonInstancetype(2, 16384, hugepages="1Gi"),
    "m1.xlarge": CommonInstancetype(4, 32768, hugepages="2Mi"),
    "m1.xlarge1gi": CommonInstancetype(4, 32768, hugepages="1Gi"),
    "n1.2xlarge": CommonInstancetype(16, 32768, dedicated_cpus=True, isolate_emulator_thread=True, hugepages="1Gi"),
    "n1.4xlarge": CommonInstancetype(32, 65536, dedicated_cpus=True, isolate_emulator_thread=True, hugepages="1Gi"),
    "n1.8xlarge": CommonInstancetype(64, 131072, dedicated_cpus=True, isolate_emulator_thread=True, hugepages="1Gi"),
    "n1.large": CommonInstancetype(4, 8192, dedicated_cpus=True, isolate_emulator_thread=True, hugepages="1Gi"),
    "n1.medium": CommonInstancetype(4, 4096, dedicated_cpus=True, isolate_emulator_thread=True, hugepages="1Gi"),
    "n1.xlarge": CommonInstancetype(8, 16384, dedicated_cpus=True, isolate_emulator_thread=True, hugepages="1Gi"),
    "o1.2xlarge": CommonInstancetype(8, 32768, overcommit_percent=50),
    "o1.4xlarge": CommonInstancetype(16, 65536, overcommit_percent=50),
    "o1.8xlarge": CommonInstancetype(32, 131072, overcommit_percent=50),
    "o1.large": CommonInstancetype(2, 8192, overcommit_percent=50),
    "o1.medium": CommonInstancetype(1, 4096, overcommit_percent=50),
    "o1.micro": CommonInstancetype(1, 1024, overcommit_percent=50),
    "o1.nano": CommonInstancetype(1, 512, overcommit_percent=50),
    "o1.small": CommonInstancetype(1, 2048, overcommit_percent=50),
    "o1.xlarge": CommonInstancetype(4, 16384, overcommit_percent=50),
    "rt1.2xlarge": CommonInstancetype(
        8,
        32768,
        dedicated_cpus=True,
        isolate_emulator_thread=True,
        hugepages="1Gi",
        numa_passthrough=True,
        realtime=True,
    ),
    "rt1.4xlarge": CommonInstancetype(
        16,
        65536,
        dedicated_cpus=True,
        isolate_emulator_thread=True,
        hugepages="1Gi",
        numa_passthrough=True,
        realtime=True,
    ),
    "rt1.8xlarge": CommonInstancetype(
        32,
        131072,
        dedicated_cpus=True,
        isolate_emulator_thread=True,
        hugepages="1Gi",
        numa_passthrough=True,
        realtime=True,
    ),
    "rt1.large": CommonInstancetype(
        2,
        8192,
        dedicated_cpus=True,
        isolate_emulator_thread=True,
        hugepages="1Gi",
        numa_passthrough=True,
        realtime=True,
    ),
    "rt1.medium": CommonInstancetype(
        1,
        4096,
        dedicated_cpus=True,
        isolate_emulator_thread=True,
        hugepages="1Gi",
        numa_passthrough=True,
        realtime=True,
    ),
    "rt1.micro": CommonInstancetype(
        1,
        1024,
        dedicated_cpus=True,
        isolate_emulator_thread=True,
        hugepages="1Gi",
        numa_passthrough=True,
        realtime=True,
    ),
    "rt1.small": CommonInstancetype(
        1,
        2048,
        dedicated_cpus=True,
        isolate_emulator_thread=True,
        hugepages="1Gi",
        numa_passthrough=True,
        realtime=True,
    ),
    "rt1.xlarge": CommonInstancetype(
        4,
        16384,
        dedicated_cpus=True,
        isolate_emulator_thread=True,
        hugepages="1Gi",
        numa_passthrough=True,
        realtime=True,
    ),
    "u1.2xlarge": CommonInstancetype(8, 32768),
    "u1.2xmedium": CommonInstancetype(2, 4096),
    "u1.4xlarge": CommonInstancetype(16, 65536),
    "u1.8xlarge": CommonInstancetype(32, 131072),
    "u1.large": CommonInstancetype(2, 8192),
    "u1.medium": CommonInstancetype(1, 4096),
    "u1.micro": CommonInstancetype(1, 1024),
    "u1.nano": CommonInstancetype(1, 512),
    "u1.small": CommonInstancetype(1, 2048),
    "u1.xlarge": CommonInstancetype(4, 16384),
}
"""KubeVirt v1.9 (common-instancetypes v1.7.0): ``VirtualMachineClusterInstancetype`` name -> spec."""

_PREFERENCES_V1_9 = {
    "alpine": CommonPreference(min_cpus=1, min_memory_mib=512),
    "centos.stream10": CommonPreference(min_cpus=1, min_memory_mib=1536),
    "centos.stream10.desktop": CommonPreference(min_cpus=1, min_memory_mib=1536),
    "centos.stream9": CommonPreference(min_cpus=1, min_memory_mib=1536),
    "centos.stream9.desktop": CommonPreference(min_cpus=1, min_memory_mib=1536),
    "centos.stream9.dpdk": CommonPreference(min_cpus=8, min_memory_mib=1536),
    "cirros": CommonPreference(min_cpus=1, min_memory_mib=256),
    "debian": CommonPreference(efi=True, min_cpus=1, min_memory_mib=512),
    "fedora": CommonPreference(efi=True, secure_boot=True, min_cpus=1, min_memory_mib=2048),
    "fedora.arm64": CommonPreference(architecture="arm64", min_cpus=1, min_memory_mib=2048),
    "fedora.s390x": CommonPreference(architecture="s390x", min_cpus=1, min_memory_mib=2048),
    "legacy": CommonPreference(),
    "linux": CommonPreference(),
    "linux.efi": CommonPreference(efi=True),
    "linux.virtiotransitional": CommonPreference(),
    "opensuse.leap": CommonPreference(min_cpus=1, min_memory_mib=2048),
    "opensuse.tumbleweed": CommonPreference(min_cpus=1, min_memory_mib=2048),
    "oraclelinux": CommonPreference(efi=True, min_cpus=2, min_memory_mib=4096),
    "rhel.10": CommonPreference(efi=True, secure_boot=True, min_cpus=1, min_memory_mib=1536),
    "rhel.10.arm64": CommonPreference(architecture="arm64", min_cpus=1, min_memory_mib=1536),
    "rhel.10.s390x": CommonPreference(architecture="s390x", min_cpus=1, min_memory_mib=1536),
    "rhel.7": CommonPreference(min_cpus=1, min_memory_mib=1024),
    "rhel.7.desktop": CommonPreference(min_cpus=1, min_memory_mib=1024),
    "rhel.8": CommonPreference(min_cpus=1, min_memory_mib=1536),
    "rhel.8.desktop": CommonPreference(min_cpus=1, min_memory_mib=1536),
    "rhel.8.dpdk": CommonPreference(min_cpus=8, min_memory_mib=1536),
    "rhel.9": CommonPreference(efi=True, secure_boot=True, min_cpus=1, min_memory_mib=1536),
    "rhel.9.arm64": CommonPreference(architecture="arm64", min_cpus=1, min_memory_mib=1536),
    "rhel.9.desktop": CommonPreference(efi=True, secure_boot=True, min_cpus=1, min_memory_mib=1536),
    "rhel.9.dpdk": CommonPreference(efi=True, secure_boot=True, min_cpus=8, min_memory_mib=1536),
    "rhel.9.realtime": CommonPreference(efi=True, secure_boot=True, min_cpus=4, min_memory_mib=4096),
    "rhel.9.s390x": CommonPreference(architecture="s390x", min_cpus=1, min_memory_mib=1536),
    "sles": CommonPreference(min_cpus=1, min_memory_mib=2048),
    "ubuntu": CommonPreference(min_cpus=1, min_memory_mib=2048),
    "windows.10": CommonPreference(efi=True, secure_boot=True, min_cpus=1, min_memory_mib=2048),
    "windows.10.virtio": CommonPreference(efi=True, secure_boot=True, min_cpus=1, min_memory_mib=2048),
    "windows.11": CommonPreference(
        efi=True, secure_boot=True, persistent_efi=True, tpm=True, persistent_tpm=True, min_cpus=2, min_memory_mib=4096
    ),
    "windows.11.virtio": CommonPreference(
        efi=True, secure_boot=True, persistent_efi=True, tpm=True, persistent_tpm=True, min_cpus=2, min_memory_mib=4096
    ),
    "windows.2k12": CommonPreference(min_cpus=1, min_memory_mib=512),
    "windows.2k12.virtio": CommonPreference(min_cpus=1, min_memory_mib=512),
    "windows.2k16": CommonPreference(efi=True, secure_boot=True, min_cpus=1, min_memory_mib=2048),
    "windows.2k16.virtio": CommonPreference(efi=True, secure_boot=True, min_cpus=1, min_memory_mib=2048),
    "windows.2k19": CommonPreference(efi=True, secure_boot=True, min_cpus=1, min_memory_mib=2048),
    "windows.2k19.virtio": CommonPreference(efi=True, secure_boot=True, min_cpus=1, min_memory_mib=2048),
    "windows.2k22": CommonPreference(
        efi=True, secure_boot=True, persistent_efi=True, tpm=True, persistent_tpm=True, min_cpus=1, min_memory_mib=2048
    ),
    "windows.2k22.virtio": CommonPreference(
        efi=True, secure_boot=True, persistent_efi=True, tpm=True, persistent_tpm=True, min_cpus=1, min_memory_mib=2048
    ),
    "windows.2k25": CommonPreference(
        efi=True, secure_boot=True, persistent_efi=True, tpm=True, persistent_tpm=True, min_cpus=1, min_memory_mib=2048
    ),
    "windows.2k25.virtio": CommonPreference(
        efi=True, secure_boot=True, persistent_efi=True, tpm=True, persistent_tpm=True, min_cpus=1, min_memory_mib=2048
    ),
    "windows.2k3": CommonPreference(min_cpus=1, min_memory_mib=256),
    "windows.2k8": CommonPreference(min_cpus=1, min_memory_mib=512),
    "windows.2k8.virtio": CommonPreference(min_cpus=1, min_memory_mib=512),
    "windows.7": CommonPreference(min_cpus=1, min_memory_mib=2048),
    "windows.7.virtio": CommonPreference(min_cpus=1, min_memory_mib=2048),
    "windows.xp": CommonPreference(min_cpus=1, min_memory_mib=128),
}
"""KubeVirt v1.9 (common-instancetypes v1.7.0): ``VirtualMachineClusterPreference`` name -> spec."""

COMMON_BUNDLE_VERSIONS: dict[tuple[int, int], str] = {(1, 9): "v1.7.0", (1, 10): "v1.7.0"}
"""KubeVirt ``(major, minor)`` -> the common-instancetypes release its virt-operator deploys.

v1.10 (issue 30: a minor upgrade v1.9 -> v1.10 refused every VM naming a common preference such as ``ubuntu``):
kubevirt/kubevirt's development line after ``release-1.9`` branched, at d923fdb815cd (2026-08-22, the newest commit
read; v1.10.0 is not tagged there), still pins common-instancetypes v1.7.0 in ``hack/common-instancetypes/default.sh``
(last bumped by "Automated update of common-instancetypes bundles to v1.7.0", 0e2758607c), and its two bundles under
``pkg/virt-operator/resource/generate/components/data/common-instancetypes/`` are byte for byte v1.9.0's (sha256 of
the preferences bundle ``40df8d62c699...``, the ``cluster_preferences_sha256`` both pin). So v1.10 serves the v1.9
tables; should v1.10.0 ship another bundle, this entry and its tables change with it."""
_INSTANCETYPES = {(1, 9): _INSTANCETYPES_V1_9, (1, 10): _INSTANCETYPES_V1_9}
_PREFERENCES = {(1, 9): _PREFERENCES_V1_9, (1, 10): _PREFERENCES_V1_9}


def common_instancetypes(kubevirt_version: str) -> dict[str, CommonInstancetype] | None:
    """The common instancetypes KubeVirt ``kubevirt_version`` deploys (name -> spec), or ``None`` when gpucell has no
    table for its minor."""
    return _INSTANCETYPES.get(release(kubevirt_version.lstrip("v")))


def common_preferences(kubevirt_version: str) -> dict[str, CommonPreference] | None:
    """The common preferences KubeVirt ``kubevirt_version`` deploys (name -> spec), or ``None`` when gpucell has no
    table for its minor."""
    return _PREFERENCES.get(release(kubevirt_version.lstrip("v")))
