"""A handle on a Kubernetes cluster gpucell can deploy onto: its provider, its version, its container runtime's
paths and what "ready" depends on.

:class:`gpucell.k3s.cluster.K3sCluster` returns one (:attr:`~gpucell.k3s.cluster.K3sCluster.cluster`); for a cluster
gpucell did not build (kubeadm, RKE2, EKS, another k3s), :meth:`Cluster.from_kubeconfig` makes one from its kubeconfig
and facts the API cannot tell a plan (the Kubernetes minor, where containerd keeps its config). Every component that
deploys into a cluster takes one in its ``*Args`` (``cluster``). Decision 0019.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pulumi
from pulumi_kubernetes.provider import Provider

from gpucell.errors import ConfigError, shown

if TYPE_CHECKING:
    from gpucell.spec.network import Network

__all__ = [
    "CONTAINERD_CONFIG",
    "CONTAINERD_SOCKET",
    "K3S_CONTAINERD_CONFIG",
    "K3S_CONTAINERD_DIR",
    "K3S_CONTAINERD_SOCKET",
    "K3S_LOCAL_PORT",
    "Cluster",
    "ContainerRuntime",
    "check_kubernetes_minor",
    "k3s_containerd_template",
    "listen_port",
]

CONTAINERD_CONFIG = "/etc/containerd/config.toml"
"""containerd's default config file (host path; containerd ``defaults/defaults_unix.go``)."""
CONTAINERD_SOCKET = "/run/containerd/containerd.sock"
"""containerd's default socket (host path; containerd ``defaults/defaults_unix.go``)."""
K3S_CONTAINERD_DIR = "/var/lib/rancher/k3s/agent/etc/containerd"
"""Where k3s keeps its containerd config and the templates it renders that config from (host path)."""
K3S_CONTAINERD_CONFIG = f"{K3S_CONTAINERD_DIR}/config.toml"
"""The containerd config k3s renders at every start (host path). Edits to it are lost; it is only read."""
K3S_CONTAINERD_SOCKET = "/run/k3s/containerd/containerd.sock"
"""k3s's containerd socket (host path), not containerd's default ``/run/containerd/containerd.sock``."""
K3S_LOCAL_PORT = 6443
"""k3s's default ``https-listen-port``; the admin kubeconfig points at ``https://127.0.0.1:<this>``."""
K3S_CONTAINERD2_MINOR = (1, 31)
"""First Kubernetes minor whose k3s is taken to ship containerd 2.x (and so read ``config-v3.toml.tmpl``)."""


def k3s_containerd_template(kubernetes_minor: str) -> str:
    """The containerd config *template* k3s renders its containerd config from, as a host path.

    k3s never reads hand edits of ``config.toml``: it regenerates it at start from
    ``config-v3.toml.tmpl`` when containerd is 2.x (config schema version 3) and from ``config.toml.tmpl``
    with containerd 1.x (schema version 2); see "Configuring containerd" in the k3s advanced docs. gpucell
    takes k3s of Kubernetes >= 1.31 to ship containerd 2.x and earlier minors containerd 1.7, so the
    template follows the minor. A k3s with containerd 2.x that finds no ``config-v3.toml.tmpl`` falls back to
    ``config.toml.tmpl``, so the older name stays safe for an older minor whatever containerd its patch ships.

    ``k3s_containerd_template("1.34")`` -> ``/var/lib/rancher/k3s/agent/etc/containerd/config-v3.toml.tmpl``.
    Raises ``ValueError`` when ``kubernetes_minor`` is not ``MAJOR.MINOR``.
    """
    major, minor = (int(part) for part in kubernetes_minor.split("."))
    name = "config-v3.toml.tmpl" if (major, minor) >= K3S_CONTAINERD2_MINOR else "config.toml.tmpl"
    return f"{K3S_CONTAINERD_DIR}/{name}"


def check_kubernetes_minor(value: str) -> str:
    """``value`` when it is a Kubernetes ``MAJOR.MINOR`` (``1.34``: what Pod Security labels and gpucell's
    version-dependent choices read); raises ``ValueError`` otherwise (a patch release, a leading ``v``)."""
    major, _, minor = value.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        raise ValueError("is not MAJOR.MINOR, e.g. '1.34'")
    return value


@dataclass(frozen=True)
class ContainerRuntime:
    """Host paths of the nodes' containerd, as the GPU Operator's container toolkit needs them (``toolkit.env``,
    :meth:`toolkit_env`)."""

    config: str
    """The file the toolkit writes its ``nvidia`` runtime into (``CONTAINERD_CONFIG``)."""
    socket: str
    """containerd's socket, signalled to reload (``CONTAINERD_SOCKET``)."""
    config_source: str | None = None
    """``file=<path>`` where the current config is read from (``RUNTIME_CONFIG_SOURCE``); ``None``: the toolkit's
    default, ``containerd config dump``, which needs a ``containerd`` binary on the host's ``PATH``."""

    @classmethod
    def k3s(cls, kubernetes_minor: str) -> ContainerRuntime:
        """k3s's embedded containerd: the config *template* k3s renders at start (:func:`k3s_containerd_template`,
        ``config-v3.toml.tmpl`` from Kubernetes 1.31), so the ``nvidia`` runtime survives k3s restarts; its socket
        ``/run/k3s/containerd/containerd.sock``; and the rendered ``config.toml`` as the source (k3s ships no
        ``containerd`` binary). Raises ``ValueError`` when ``kubernetes_minor`` is not ``MAJOR.MINOR``."""
        return cls(k3s_containerd_template(kubernetes_minor), K3S_CONTAINERD_SOCKET, f"file={K3S_CONTAINERD_CONFIG}")

    @classmethod
    def containerd(cls, config: str = CONTAINERD_CONFIG, socket: str = CONTAINERD_SOCKET) -> ContainerRuntime:
        """A packaged containerd (kubeadm, EKS AMIs): its defaults, or the paths given."""
        return cls(config, socket)

    def toolkit_env(self) -> list[dict[str, str]]:
        """``toolkit.env`` of the GPU Operator chart for these paths: ``[{name, value}]``, every value a string (the
        ClusterPolicy CRD types it so).

        The container toolkit (``toolkit.version`` v1.20.0 in the pinned chart) is NVIDIA's
        ``nvidia-ctk-installer``. Names verified in NVIDIA/nvidia-container-toolkit
        ``cmd/nvidia-ctk-installer/container/runtime`` and in the operator's
        ``transformForRuntime``/``getRuntimeConfigFiles`` (NVIDIA/gpu-operator ``controllers/object_controls.go``),
        which rewrite these host paths into the toolkit pod's mounts:

        - ``CONTAINERD_CONFIG``: :attr:`config`, the file the toolkit *writes* (flag ``--config``, env
          ``RUNTIME_CONFIG`` or ``CONTAINERD_CONFIG``; the operator reads ``CONTAINERD_CONFIG`` first).
        - ``CONTAINERD_SOCKET``: :attr:`socket` (flag ``--socket``, env ``RUNTIME_SOCKET`` or ``CONTAINERD_SOCKET``),
          used to signal containerd to reload.
        - ``RUNTIME_CONFIG_SOURCE``: :attr:`config_source`, when set: where the *current* config is read from. The
          default source runs ``containerd config dump``. Added in NVIDIA/nvidia-container-toolkit#1251 (shipped in
          v1.18.0); the operator maps ``file=<host path>`` to ``/host<host path>`` (NVIDIA/gpu-operator#1758).
          NVIDIA's docs use the same variable for GKE.
        - ``CONTAINERD_RUNTIME_CLASS=nvidia``: the runtime handler name (flag ``--runtime-name``, env
          ``NVIDIA_RUNTIME_NAME`` or ``CONTAINERD_RUNTIME_CLASS``). The operator also sets it from
          ``operator.runtimeClass`` (``nvidia`` in the pinned chart), so the two agree.
        """
        env = [{"name": "CONTAINERD_CONFIG", "value": self.config}, {"name": "CONTAINERD_SOCKET", "value": self.socket}]
        if self.config_source is not None:
            env.append({"name": "RUNTIME_CONFIG_SOURCE", "value": self.config_source})
        return [*env, {"name": "CONTAINERD_RUNTIME_CLASS", "value": "nvidia"}]


@dataclass(frozen=True)
class Cluster:
    """A Kubernetes cluster to deploy onto: a small value, built once and handed to each component.

    Components put their children on :attr:`provider` and after :attr:`ready` (:meth:`options`); they read
    :attr:`kubernetes_version` for version-dependent choices and :attr:`runtime` for host paths.
    """

    provider: pulumi.ProviderResource
    """The Kubernetes provider every in-cluster resource uses."""
    kubernetes_version: str
    """``MAJOR.MINOR`` of the API server (``"1.34"``)."""
    runtime: ContainerRuntime
    """The nodes' container runtime paths."""
    ready: tuple[pulumi.Resource, ...] = field(default=())
    """What must exist before anything runs on the cluster (for a k3s cell: the servers answering, then the CNI);
    empty for a cluster that is already up."""

    def options(self, *after: pulumi.Resource, parent: pulumi.Resource | None = None) -> pulumi.ResourceOptions:
        """Options for a component on this cluster: the provider, ``depends_on`` :attr:`ready` then ``after``."""
        return pulumi.ResourceOptions(
            parent=parent, providers={"kubernetes": self.provider}, depends_on=[*self.ready, *after]
        )

    def after(self, *ready: pulumi.Resource) -> Cluster:
        """This cluster with ``ready`` added to what "ready" depends on (e.g. a CNI installed on it)."""
        return Cluster(self.provider, self.kubernetes_version, self.runtime, (*self.ready, *ready))

    def component_options(self, opts: pulumi.ResourceOptions | None = None) -> pulumi.ResourceOptions:
        """``opts`` of a component deployed onto this cluster, with the cluster's provider (which its children
        inherit) and :attr:`ready` first among its ``depends_on`` (gpucell's components hand their ``depends_on`` to
        every child, :class:`gpucell._component.CellComponent`)."""
        return pulumi.ResourceOptions.merge(self.options(), opts)

    @classmethod
    def from_kubeconfig(
        cls,
        name: str,
        kubeconfig: pulumi.Input[str],
        kubernetes_version: str,
        runtime: ContainerRuntime | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> Cluster:
        """A handle on an existing cluster: registers one Kubernetes provider ``<name>-k8s`` from ``kubeconfig``
        (made a secret) with server-side apply, ``clusterIdentifier`` ``name`` (so a rotated kubeconfig never
        replaces what it manages, pulumi/pulumi-kubernetes#3068) and ``deleteUnreachable`` off, as a gpucell cell's
        provider. ``runtime`` defaults to :meth:`ContainerRuntime.containerd`. Raises
        :class:`~gpucell.errors.ConfigError` (``kubernetes_version: 'v1.33' is not MAJOR.MINOR, e.g. '1.34'``) before
        registering anything when ``kubernetes_version`` is not ``MAJOR.MINOR``."""
        try:
            check_kubernetes_minor(kubernetes_version)
        except ValueError as exc:
            raise ConfigError.at(("kubernetes_version",), f"{shown(kubernetes_version)} {exc}") from None
        provider = Provider(
            f"{name}-k8s",
            kubeconfig=pulumi.Output.secret(kubeconfig),
            cluster_identifier=name,
            enable_server_side_apply=True,
            delete_unreachable=False,
            opts=opts,
        )
        return cls(provider, kubernetes_version, runtime or ContainerRuntime.containerd())


def listen_port(network: Network) -> int:
    """The port k3s servers listen on (``https-listen-port``), for the address plan ``network``.

    Without ``network.apiEndpoint`` the endpoint *is* the single server, so it listens on ``apiPort``. With
    an endpoint (VIP or load balancer) the servers keep k3s's default 6443 and the endpoint maps ``apiPort``
    to it.
    """
    return network.api_port if network.api_endpoint is None else K3S_LOCAL_PORT
