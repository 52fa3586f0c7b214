"""Isolated workloads: a notebook's or model endpoint's container image run inside a KubeVirt VM of its own.

An isolated workload (``isolation: vm``, docs/decisions/0040) renders, in the tenant's namespace, instead of its
pods:

- a ``kubevirt.io/v1`` ``VirtualMachine`` named after the workload: :func:`gpucell.workloads.virtual_machine.
  virtual_machine_manifest` of :func:`gpucell.admission.isolation.guest_vm` (root disk a clone of the tenant's
  ``isolation.guestImage``, a notebook's home a blank data disk, GPUs passed through), its pod template labelled as
  the workload's pods were (:func:`guest_manifest`), so the workload's Service, ingress and gateway policies select
  its ``virt-launcher`` pod unchanged; plus, when the workload has secrets, a KubeVirt ``secret`` volume, attached
  as a disk the guest mounts read-only by its label :data:`SECRET_VOLUME_LABEL`;
- a ``Secret`` ``<workload>-cloud-init`` (as every VM's): the ``#cloud-config`` of :func:`guest_user_data`, which
  writes a podman Quadlet unit (``/etc/containers/systemd/gpucell-workload.container``, podman 4.4+
  ``podman-systemd.unit(5)``) running the workload's image with its GPUs (``AddDevice=nvidia.com/gpu=all``, the
  NVIDIA Container Toolkit's CDI spec in the guest) and its port published on the guest's address, which KubeVirt's
  masquerade binding forwards from the pod's address.

Secrets never travel in user data: the notebook's token, the endpoint's storage credentials and secret ``env``
values reach the guest only through the secret volume (a Kubernetes ``Secret`` KubeVirt turns into an ISO disk,
KubeVirt v1.9.0 ``v1.SecretVolumeSource`` with ``volumeLabel``); the user data names the mount point alone.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpucell.spec.cloud_init import NVLINK_DISABLE_OPTION, NVLINK_MODPROBE_PATH, render_cloud_config
from gpucell.workloads.virtual_machine import virtual_machine_manifest

if TYPE_CHECKING:
    from gpucell.admission.placement import Placement
    from gpucell.admission.tenants import ClusterFacts
    from gpucell.spec.workloads import GpuVirtualMachineSpec

__all__ = [
    "GUEST_SECRETS",
    "GUEST_UNIT",
    "HOME_SERIAL",
    "SECRET_VOLUME_LABEL",
    "GuestContainer",
    "guest_manifest",
    "guest_user_data",
    "qualified_image",
]

SECRET_VOLUME_LABEL = "gpucellsecret"
"""Volume label of the secret disk (iso9660, KubeVirt ``secret.volumeLabel``): the guest mounts ``LABEL=`` it."""
GUEST_SECRETS = "/run/gpucell/secrets"
"""Where the guest mounts the secret disk (read-only, tmpfs-backed ``/run``: gone at shutdown)."""
HOME_SERIAL = "gpucell-home"
"""Serial of a notebook's home disk, so the guest finds it as ``/dev/disk/by-id/virtio-gpucell-home`` whatever the
order of its disks."""
GUEST_UNIT = "/etc/containers/systemd/gpucell-workload.container"
"""The Quadlet file cloud-init writes; systemd's generator turns it into ``gpucell-workload.service``."""
_GUEST_HOME = "/var/lib/gpucell/home"
_SECRET_DISK = "secrets"


@dataclass(frozen=True)
class GuestContainer:
    """What the guest runs: the workload's image, its port, GPUs, mounts, environment and arguments."""

    image: str
    """Fully qualified image reference (:func:`qualified_image`)."""
    port: int
    """Port the container serves, published on the same guest port."""
    gpus: bool
    """Hand the container every GPU of the guest (the VM's own; no other GPU exists there)."""
    volumes: tuple[str, ...] = ()
    """Quadlet ``Volume=`` values (``host:container[:options]``); each host directory outside the secret disk is
    created first."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Plain environment variables (never a secret)."""
    env_file: bool = False
    """Read ``KEY=value`` lines from ``<GUEST_SECRETS>/env`` (the secret disk)."""
    args: tuple[str, ...] = ()
    """Arguments after the image's entrypoint (``Exec=``)."""
    shm_gib: int = 0
    """``/dev/shm`` size, GiB; 0 keeps podman's default."""


def qualified_image(image: str) -> str:
    """``image`` with its registry: a short Docker Hub name (``kserve/huggingfaceserver:v0.20.0``) gets
    ``docker.io/``, since podman refuses to guess a short name's registry without a TTY
    (``short-name-mode = "enforcing"``, containers-registries.conf(5))."""
    first = image.split("/", 1)[0]
    if "/" in image and ("." in first or ":" in first or first == "localhost"):
        return image
    return f"docker.io/{image if '/' in image else 'library/' + image}"


def _unit_word(value: str) -> str:
    """``value`` as one word of a systemd unit line: double-quoted, ``\\`` and ``"`` escaped, ``%`` (a specifier)
    doubled and ``$`` (an environment expansion) doubled (systemd.service(5), "Command lines")."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return f'"{escaped}"'


def _quadlet(name: str, container: GuestContainer) -> str:
    """The Quadlet ``.container`` unit of ``container`` (podman-systemd.unit(5) keys)."""
    lines = [
        "[Unit]",
        f"Description=gpucell workload {name}",
        "Wants=network-online.target",
        "After=network-online.target",
        "",
        "[Container]",
        "ContainerName=workload",
        f"Image={container.image}",
        f"PublishPort={container.port}:{container.port}",
    ]
    if container.gpus:
        lines.append("AddDevice=nvidia.com/gpu=all")
    lines += [f"Volume={volume}" for volume in container.volumes]
    lines += [f"Environment={_unit_word(f'{key}={value}')}" for key, value in container.env.items()]
    if container.env_file:
        lines.append(f"EnvironmentFile={GUEST_SECRETS}/env")
    if container.shm_gib:
        lines.append(f"PodmanArgs=--shm-size={container.shm_gib}g")
    if container.args:
        lines.append("Exec=" + " ".join(_unit_word(arg) for arg in container.args))
    # Pulling a GPU image of several GB takes minutes; systemd's default start timeout is 90 s.
    lines += ["", "[Service]", "Restart=always", "TimeoutStartSec=1800", "", "[Install]", "WantedBy=multi-user.target"]
    return "\n".join(lines) + "\n"


def guest_user_data(
    name: str, container: GuestContainer, *, home: bool, secrets: bool, nvlink_disabled: bool = False
) -> str:
    """The guest's ``#cloud-config`` (no secret in it): with ``home``, the disk of serial :data:`HOME_SERIAL`
    formatted ext4 (once: ``fs_setup`` leaves a formatted disk alone) and mounted at ``/var/lib/gpucell/home``, owned
    by UID 1000 / GID 100 (docker-stacks' ``jovyan:users``); with ``secrets``, the secret disk mounted read-only at
    :data:`GUEST_SECRETS`; :data:`GUEST_UNIT` (:func:`_quadlet`), then ``systemctl daemon-reload`` and the unit
    started. cloud-init runs ``mounts`` before ``write_files`` and ``runcmd``; ``nofail`` keeps a boot going when a
    disk is late, and the unit starts again after a reboot (``WantedBy=multi-user.target``). With ``nvlink_disabled``
    (part of an HGX board, as for any VM: :func:`gpucell.workloads.virtual_machine.cloud_config`), the NVLink
    module option is written first; it holds when the guest image's initramfs does not load ``nvidia`` (a guest
    image requirement, decision 0040)."""
    config: dict[str, Any] = {}
    mounts: list[list[str]] = []
    if home:
        device = f"/dev/disk/by-id/virtio-{HOME_SERIAL}"
        config["fs_setup"] = [{"label": "home", "filesystem": "ext4", "device": device}]
        mounts.append(["LABEL=home", _GUEST_HOME, "ext4", "defaults,nofail"])
    if secrets:
        mounts.append([f"LABEL={SECRET_VOLUME_LABEL}", GUEST_SECRETS, "iso9660", "ro,nofail"])
    if mounts:
        config["mounts"] = mounts
    files = [{"path": GUEST_UNIT, "permissions": "0644", "content": _quadlet(name, container)}]
    if nvlink_disabled:
        files.insert(0, {"path": NVLINK_MODPROBE_PATH, "permissions": "0644", "content": NVLINK_DISABLE_OPTION + "\n"})
    config["write_files"] = files
    runcmd = [["mkdir", "-p", v.split(":", 1)[0]] for v in container.volumes if not v.startswith(GUEST_SECRETS)]
    if home:
        runcmd.append(["chown", "1000:100", _GUEST_HOME])
    runcmd += [["systemctl", "daemon-reload"], ["systemctl", "start", "gpucell-workload.service"]]
    config["runcmd"] = runcmd
    return render_cloud_config(config)


def guest_manifest(
    tenant: str,
    name: str,
    guest: GpuVirtualMachineSpec,
    cell: ClusterFacts,
    placement: Placement,
    *,
    pod_labels: Mapping[str, str],
    secret: str | None,
    home: bool,
) -> dict[str, Any]:
    """The ``VirtualMachine`` of an isolated workload: :func:`virtual_machine_manifest` of ``guest``, with

    - ``pod_labels`` added to its pod template (so to its ``virt-launcher`` pod): what the workload's Service and
      policies select (a notebook's ``app.kubernetes.io/name``/``component``, an endpoint's
      ``serving.kserve.io/inferenceservice``); the DataVolumes keep the VM's own labels, so CDI's importer pods never
      match;
    - with ``home``, serial :data:`HOME_SERIAL` on the first data disk;
    - with ``secret``, a volume ``secrets`` (``secret.secretName`` ``secret``, ``volumeLabel``
      :data:`SECRET_VOLUME_LABEL`) and its virtio disk.
    """
    manifest = copy.deepcopy(virtual_machine_manifest(tenant, name, guest, cell, placement))
    template = manifest["spec"]["template"]
    template["metadata"]["labels"].update(pod_labels)
    devices = template["spec"]["domain"]["devices"]
    if home:
        next(d for d in devices["disks"] if d["name"] == "data0")["serial"] = HOME_SERIAL
    if secret is not None:
        devices["disks"].append({"name": _SECRET_DISK, "disk": {"bus": "virtio"}})
        template["spec"]["volumes"].append(
            {"name": _SECRET_DISK, "secret": {"secretName": secret, "volumeLabel": SECRET_VOLUME_LABEL}}
        )
    return manifest
