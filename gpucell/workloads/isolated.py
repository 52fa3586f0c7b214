"""Isolated workloads: a notebook's or model endpoint's container image run inside a KubeVirt VM of its own.

An isolated workload (``isolation: vm``, docs/decisions/0040) renders, in the tenant's namespace, instead of its
pods:

- a ``kubevirt.io/v1`` ``VirtualMachine`` named after the workload: :func:`gpucell.workloads.virtual_machine.
  virtual_machine_manifest` of :func:`gpucell.admission.isolation.guest_vm` (root disk a clone of the tenant's
  ``isolation.guestImage``, a notebook's home a blank data disk, GPUs passed through), its pod template labelled as
  the workload's pods were (:func:`guest_manifest`), so the workload's Service, ingress and gateway policies select
  its ``virt-launcher`` pod unchanged; plus, when the workload has secrets, a KubeVirt ``secret`` volume, attached
  as a disk the guest mounts read-only by its label :data:`SECRET_VOLUME_LABEL`;
- a ``Secret`` ``<workload>-cloud-init`` (as every VM's): the ``#cloud-config`` of :func:`guest_user_data`, and,
  under :data:`UNIT_KEY`, the podman Quadlet unit of :func:`guest_unit` (``gpucell-workload.container``, podman 4.4+
  ``podman-systemd.unit(5)``) running the workload's image with its GPUs (``AddDevice=nvidia.com/gpu=all``, the
  NVIDIA Container Toolkit's CDI spec in the guest) and its port published on the guest's address, which KubeVirt's
  masquerade binding forwards from the pod's address. The same Secret is the VM's unit disk (a KubeVirt ``secret``
  volume, label :data:`UNIT_VOLUME_LABEL`), which the guest reads at every boot (cloud-init's ``bootcmd``) and
  installs as :data:`GUEST_UNIT`: an image, argument or environment change reaches a running guest at its next
  restart, which KubeVirt asks for (the unit disk's serial is the unit's digest, :func:`unit_serial`, so the VM's
  spec changes with it and KubeVirt marks the VM ``RestartRequired``). User data alone could not carry it: cloud-init
  applies ``write_files`` and ``runcmd`` once per instance, and a VM's NoCloud instance-id stays the VM's.

Secrets never travel in user data: the notebook's token, the endpoint's storage credentials and secret ``env``
values reach the guest only through the secret volume (a Kubernetes ``Secret`` KubeVirt turns into an ISO disk,
KubeVirt v1.9.0 ``v1.SecretVolumeSource`` with ``volumeLabel``); the user data names the mount point alone.
"""

from __future__ import annotations

import copy
import hashlib
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
    "UNIT_KEY",
    "UNIT_VOLUME_LABEL",
    "GuestContainer",
    "guest_manifest",
    "guest_unit",
    "guest_user_data",
    "qualified_image",
    "unit_serial",
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
UNIT_KEY = "gpucell-workload.container"
"""Key of the workload's Quadlet unit in the cloud-init Secret, hence its file name on the unit disk."""
UNIT_VOLUME_LABEL = "gpucellunit"
"""Volume label of the unit disk (the cloud-init Secret as a KubeVirt ``secret`` volume, iso9660)."""
_GUEST_HOME = "/var/lib/gpucell/home"
_SECRET_DISK = "secrets"
_UNIT_DISK = "workload-unit"
_UNIT_MOUNT = "/run/gpucell/unit"


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


def guest_unit(name: str, container: GuestContainer, *, home: bool) -> str:
    """The Quadlet ``.container`` unit of ``container`` (podman-systemd.unit(5) keys), stored under :data:`UNIT_KEY`
    of the cloud-init Secret: before each start it creates the host directories of its volumes (outside the secret
    disk) and, with ``home``, hands the home to UID 1000 / GID 100 (docker-stacks' ``jovyan:users``); the home and
    secret disks are mounted by then (cloud-init's ``mounts``, before ``network-online.target``, after which the unit
    starts)."""
    pre = [f"ExecStartPre=/usr/bin/mkdir -p {v.split(':', 1)[0]}" for v in container.volumes]
    pre = [line for line in pre if not line.endswith(GUEST_SECRETS)]
    if home:
        pre.append(f"ExecStartPre=/usr/bin/chown 1000:100 {_GUEST_HOME}")
    return _quadlet(name, container, pre)


def unit_serial(unit: str) -> str:
    """The unit disk's serial: ``unit-`` and the first 12 hex digits of the unit's SHA-256 (17 characters; virtio
    serials hold 20). It puts the unit's digest into the VM's spec, so a changed unit changes the VM's
    ``spec.template.spec.domain`` and KubeVirt marks the running VM ``RestartRequired`` (kubevirt v1.9.0
    ``pkg/virt-controller/watch/vm/vm.go``)."""
    return "unit-" + hashlib.sha256(unit.encode()).hexdigest()[:12]


def _quadlet(name: str, container: GuestContainer, pre: list[str]) -> str:
    """The Quadlet ``.container`` unit of ``container`` (podman-systemd.unit(5) keys), ``pre`` in ``[Service]``."""
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
    lines += ["", "[Service]", *pre, "Restart=always", "TimeoutStartSec=1800"]
    lines += ["", "[Install]", "WantedBy=multi-user.target"]
    return "\n".join(lines) + "\n"


def guest_user_data(*, home: bool, secrets: bool, nvlink_disabled: bool = False) -> str:
    """The guest's ``#cloud-config`` (no secret in it, nor the workload's unit): with ``home``, the disk of serial
    :data:`HOME_SERIAL` formatted ext4 (once: ``fs_setup`` leaves a formatted disk alone) and mounted at
    ``/var/lib/gpucell/home``; with ``secrets``, the secret disk mounted read-only at :data:`GUEST_SECRETS`; and at
    every boot (``bootcmd``, which cloud-init runs on each boot, before ``network-online.target``) the unit disk
    (:data:`UNIT_VOLUME_LABEL`) mounted read-only, its :data:`UNIT_KEY` installed as :data:`GUEST_UNIT`, systemd
    reloaded (Quadlet's generator makes ``gpucell-workload.service`` of it) and the service started, so the guest
    runs the unit of the VM's current start. ``nofail`` keeps a boot going when a disk is late. With
    ``nvlink_disabled`` (part of an HGX board, as for any VM: :func:`gpucell.workloads.virtual_machine.cloud_config`),
    the NVLink module option is written first; it holds when the guest image's initramfs does not load ``nvidia``
    (a guest image requirement, decision 0040)."""
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
    config["bootcmd"] = [
        ["mkdir", "-p", _UNIT_MOUNT],
        ["mount", "-o", "ro", f"LABEL={UNIT_VOLUME_LABEL}", _UNIT_MOUNT],
        ["install", "-D", "-m", "0644", f"{_UNIT_MOUNT}/{UNIT_KEY}", GUEST_UNIT],
        ["umount", _UNIT_MOUNT],
        ["systemctl", "daemon-reload"],
        ["systemctl", "start", "--no-block", "gpucell-workload.service"],
    ]
    if nvlink_disabled:
        config["write_files"] = [
            {"path": NVLINK_MODPROBE_PATH, "permissions": "0644", "content": NVLINK_DISABLE_OPTION + "\n"}
        ]
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
    unit_secret: str,
    unit: str,
) -> dict[str, Any]:
    """The ``VirtualMachine`` of an isolated workload: :func:`virtual_machine_manifest` of ``guest``, with

    - ``pod_labels`` added to its pod template (so to its ``virt-launcher`` pod): what the workload's Service and
      policies select (a notebook's ``app.kubernetes.io/name``/``component``, an endpoint's
      ``serving.kserve.io/inferenceservice``); the DataVolumes keep the VM's own labels, so CDI's importer pods never
      match;
    - with ``home``, serial :data:`HOME_SERIAL` on the first data disk;
    - with ``secret``, a volume ``secrets`` (``secret.secretName`` ``secret``, ``volumeLabel``
      :data:`SECRET_VOLUME_LABEL`) and its virtio disk;
    - the unit disk ``workload-unit``: the Secret ``unit_secret`` (the cloud-init Secret, holding ``unit`` under
      :data:`UNIT_KEY`), ``volumeLabel`` :data:`UNIT_VOLUME_LABEL`, serial :func:`unit_serial` of ``unit``.
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
    devices["disks"].append({"name": _UNIT_DISK, "disk": {"bus": "virtio"}, "serial": unit_serial(unit)})
    template["spec"]["volumes"].append(
        {"name": _UNIT_DISK, "secret": {"secretName": unit_secret, "volumeLabel": UNIT_VOLUME_LABEL}}
    )
    return manifest
