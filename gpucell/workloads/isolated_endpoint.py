"""An isolated model endpoint: ``kserve-huggingfaceserver`` on an ``hf://`` model, in one KubeVirt VM behind the
endpoint's own Service (docs/decisions/0040).

What it renders instead of the InferenceService and its credentials ServiceAccount, in the tenant's namespace:

- a ``Service`` ``<endpoint>-predictor`` (port 80 ``http`` -> 8080): the name and port KServe's raw-mode Service
  has, so clients, the HTTPRoute of an exposed endpoint and the in-cluster URL stay the same; it selects the VM's
  ``virt-launcher`` pod by :data:`gpucell.workloads.model_endpoint.PREDICTOR_LABEL`, which the VM's pod template
  carries (so the gateway and metrics policies select it too);
- with credentials or secret ``env``: a ``Secret`` ``<endpoint>-guest`` (key ``env``: ``KEY=value`` lines, a Pulumi
  secret: ``HF_TOKEN`` from ``credentialsConfigKey``, then each secret ``env`` entry), the VM's secret disk, which the
  guest's unit reads as its ``EnvironmentFile``;
- the ``VirtualMachine`` and its cloud-init ``Secret`` (user data and the guest's unit,
  :mod:`gpucell.workloads.isolated`).

The guest runs the runtime's image (KServe v0.20.0's ``kserve/huggingfaceserver`` at the tag KServe would run,
:func:`gpucell.workloads.model_endpoint.endpoint_runtime`) with ``--model_name=<endpoint> --model_id=<org/model>
--http_port=8080`` and the endpoint's ``args``: the server downloads the model from the Hub itself (huggingfaceserver
``--model_id``), into ``/var/lib/gpucell/hf-cache`` on the root disk (``HF_HOME``), kept across restarts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gpucell.workloads.isolated import (
    UNIT_KEY,
    GuestContainer,
    guest_manifest,
    guest_unit,
    guest_user_data,
    qualified_image,
)
from gpucell.workloads.virtual_machine import CLOUD_INIT_KEY, cloud_init_secret_name

if TYPE_CHECKING:
    from gpucell.admission.placement import Placement
    from gpucell.admission.tenants import ClusterFacts
    from gpucell.catalog.kserve_runtimes import EndpointRuntime
    from gpucell.spec.workloads import GpuVirtualMachineSpec, ModelEndpointSpec

__all__ = [
    "ENV_FILE_KEY",
    "HF_CACHE",
    "guest_container",
    "guest_data",
    "guest_env_file",
    "guest_secret_name",
    "isolated_manifest",
    "predictor_service_manifest",
]

ENV_FILE_KEY = "env"
"""Key of the ``KEY=value`` lines in the guest Secret (the file ``env`` on the guest's secret disk)."""
HF_CACHE = "/var/cache/huggingface"
"""``HF_HOME`` of the guest's server (the Hub's cache), bind-mounted from ``/var/lib/gpucell/hf-cache``."""
_SERVER_PORT = 8080


def guest_secret_name(endpoint: str) -> str:
    """The guest Secret of an isolated endpoint: ``<endpoint>-guest``."""
    return f"{endpoint}-guest"


def guest_env_file(values: Mapping[str, str], *, where: str = "") -> str:
    """``KEY=value`` lines of ``values`` (systemd ``EnvironmentFile`` syntax, each value double-quoted with ``\\``
    and ``"`` escaped). Raises ``ValueError`` (starting with ``where``, never showing a value) for a value holding a
    newline or NUL, which one line cannot carry."""
    lines = []
    for key, value in values.items():
        if any(c in value for c in "\n\r\x00"):
            raise ValueError(f"{where}the value of {key} holds a line break, which an environment file cannot carry")
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        lines.append(f'{key}="{escaped}"')
    return "\n".join(lines) + "\n"


def guest_container(
    endpoint: str, spec: ModelEndpointSpec, runtime: EndpointRuntime | None, *, env_file: bool
) -> GuestContainer:
    """What an isolated endpoint's guest runs: the runtime's image at its tag (``runtimeVersion`` when KServe would
    set one), port 8080, the VM's GPUs, ``HF_HOME`` on the root disk, the plain ``env`` entries, with ``env_file``
    the secret ones; arguments ``--model_name``, ``--model_id`` (the ``hf://`` path), ``--http_port`` and ``args``."""
    if runtime is None:
        raise ValueError(f"model endpoint {endpoint!r}: the cell's KServe release has no runtime table")
    tag = runtime.runtime_version or runtime.runtime.tag
    model_id = spec.storage_uri.split("://", 1)[1].strip("/")
    env = {var.name: var.value for var in spec.env if var.secret_config_key is None and var.value is not None}
    return GuestContainer(
        qualified_image(f"{runtime.runtime.image}:{tag}"),
        _SERVER_PORT,
        gpus=spec.gpu is not None,
        volumes=(f"/var/lib/gpucell/hf-cache:{HF_CACHE}:U",),
        env={"HF_HOME": HF_CACHE, **env},
        env_file=env_file,
        args=(f"--model_name={endpoint}", f"--model_id={model_id}", f"--http_port={_SERVER_PORT}", *spec.args),
    )


def guest_data(
    endpoint: str,
    spec: ModelEndpointSpec,
    runtime: EndpointRuntime | None,
    *,
    secrets: bool,
    nvlink_disabled: bool = False,
) -> dict[str, str]:
    """The isolated endpoint's cloud-init Secret data: the user data (:func:`gpucell.workloads.isolated.
    guest_user_data`) and the endpoint's unit (:func:`guest_unit_of`); no secret in either."""
    user_data = guest_user_data(home=False, secrets=secrets, nvlink_disabled=nvlink_disabled)
    return {CLOUD_INIT_KEY: user_data, UNIT_KEY: guest_unit_of(endpoint, spec, runtime, secrets=secrets)}


def guest_unit_of(endpoint: str, spec: ModelEndpointSpec, runtime: EndpointRuntime | None, *, secrets: bool) -> str:
    """The isolated endpoint's Quadlet unit (:func:`gpucell.workloads.isolated.guest_unit` of
    :func:`guest_container`; with ``secrets``, the environment file of the secret disk)."""
    return guest_unit(endpoint, guest_container(endpoint, spec, runtime, env_file=secrets), home=False)


def isolated_manifest(
    tenant: str,
    name: str,
    guest: GpuVirtualMachineSpec,
    cell: ClusterFacts,
    placement: Placement,
    *,
    pod_labels: Mapping[str, str],
    secrets: bool,
    unit: str,
) -> dict[str, Any]:
    """The endpoint's ``VirtualMachine``: its launcher pod labelled ``pod_labels`` (the predictor label), the guest
    Secret as its secret disk with ``secrets``, the cloud-init Secret (holding ``unit``) as its unit disk."""
    secret = guest_secret_name(name) if secrets else None
    return guest_manifest(
        tenant,
        name,
        guest,
        cell,
        placement,
        pod_labels=pod_labels,
        secret=secret,
        home=False,
        unit_secret=cloud_init_secret_name(name),
        unit=unit,
    )


def predictor_service_manifest(meta: dict[str, Any], selector: Mapping[str, str]) -> dict[str, Any]:
    """The ``ClusterIP`` ``Service`` ``<endpoint>-predictor`` (``meta``): port 80 ``http`` -> 8080 of the pod
    ``selector`` selects (the VM's launcher pod; KubeVirt's masquerade binding forwards the port to the guest)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "type": "ClusterIP",
            "selector": dict(selector),
            "ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": _SERVER_PORT}],
        },
    }
