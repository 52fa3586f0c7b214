"""A handle on a Kubernetes cluster gpucell can deploy onto: its provider, its version, its container runtime's
paths and what "ready" depends on.

:class:`gpucell.k3s.K3sCluster` returns one (:attr:`~gpucell.k3s.K3sCluster.cluster`); for a cluster gpucell did not
build (kubeadm, RKE2, EKS, another k3s), :meth:`Cluster.from_kubeconfig` makes one from its kubeconfig and facts the
API cannot tell a plan (the Kubernetes minor, where containerd keeps its config). Decision 0019.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
from pulumi_kubernetes.provider import Provider

from gpucell.gpu_operator import K3S_CONTAINERD_CONFIG, K3S_CONTAINERD_SOCKET, k3s_containerd_template

__all__ = ["CONTAINERD_CONFIG", "CONTAINERD_SOCKET", "Cluster", "ContainerRuntime"]

CONTAINERD_CONFIG = "/etc/containerd/config.toml"
"""containerd's default config file (host path; containerd ``defaults/defaults_unix.go``)."""
CONTAINERD_SOCKET = "/run/containerd/containerd.sock"
"""containerd's default socket (host path; containerd ``defaults/defaults_unix.go``)."""


@dataclass(frozen=True)
class ContainerRuntime:
    """Host paths of the nodes' containerd, as the GPU Operator's container toolkit needs them (``toolkit.env``:
    :func:`gpucell.gpu_operator.toolkit_env` documents each variable, NVIDIA/nvidia-container-toolkit v1.20.0)."""

    config: str
    """The file the toolkit writes its ``nvidia`` runtime into (``CONTAINERD_CONFIG``)."""
    socket: str
    """containerd's socket, signalled to reload (``CONTAINERD_SOCKET``)."""
    config_source: str | None = None
    """``file=<path>`` where the current config is read from (``RUNTIME_CONFIG_SOURCE``); ``None``: the toolkit's
    default, ``containerd config dump``, which needs a ``containerd`` binary on the host's ``PATH``."""

    @classmethod
    def k3s(cls, kubernetes_minor: str) -> ContainerRuntime:
        """k3s's embedded containerd: the config *template* k3s renders at start
        (:func:`gpucell.gpu_operator.k3s_containerd_template`, ``config-v3.toml.tmpl`` from Kubernetes 1.31), its
        socket ``/run/k3s/containerd/containerd.sock`` and the rendered ``config.toml`` as source (k3s ships no
        ``containerd`` binary). Raises ``ValueError`` when ``kubernetes_minor`` is not ``MAJOR.MINOR``."""
        return cls(k3s_containerd_template(kubernetes_minor), K3S_CONTAINERD_SOCKET, f"file={K3S_CONTAINERD_CONFIG}")

    @classmethod
    def containerd(cls, config: str = CONTAINERD_CONFIG, socket: str = CONTAINERD_SOCKET) -> ContainerRuntime:
        """A packaged containerd (kubeadm, EKS AMIs): its defaults, or the paths given."""
        return cls(config, socket)

    def toolkit_env(self) -> list[dict[str, str]]:
        """``toolkit.env`` entries for these paths, in the order :func:`gpucell.gpu_operator.toolkit_env` renders
        them, with ``CONTAINERD_RUNTIME_CLASS=nvidia``."""
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
        provider. ``runtime`` defaults to :meth:`ContainerRuntime.containerd`. Raises ``ValueError`` when
        ``kubernetes_version`` is not ``MAJOR.MINOR``."""
        major, _, minor = kubernetes_version.partition(".")
        if not (major.isdigit() and minor.isdigit()):
            raise ValueError(f"kubernetes_version {kubernetes_version!r} is not MAJOR.MINOR, e.g. '1.34'")
        provider = Provider(
            f"{name}-k8s",
            kubeconfig=pulumi.Output.secret(kubeconfig),
            cluster_identifier=name,
            enable_server_side_apply=True,
            delete_unreachable=False,
            opts=opts,
        )
        return cls(provider, kubernetes_version, runtime or ContainerRuntime.containerd())
