"""The API VIP served by the cell: kube-vip's static pod manifest for every server (``network.apiVip``).

Plain data, no Pulumi: :mod:`gpucell.k3s._scripts` writes the manifest into k3s's static pod directory
(:data:`MANIFEST_PATH`; the kubelet k3s embeds runs every manifest there and reloads one that changes, so a changed
manifest needs no k3s restart and stays out of the restart digest).

Upstream: the manifest ``kube-vip manifest pod --controlplane --arp|--bgp --leaderElection`` prints
(kube-vip.io/docs/installation/static/, "Generating a Manifest"; kube-vip v1.0 ``pkg/kubevip/config_envvar.go``
for the variable names): ``manager`` with ``vip_arp``/``bgp_enable``, ``vip_interface``, ``address``, ``port``,
``cp_enable``, ``vip_leaderelection`` and the lease timings, ``vip_subnet`` (the VIP's prefix length, ``32``
for the IPv4 ``apiEndpoint``; v1.0.4 reads ``vip_subnet``, ``pkg/kubevip/config_envvar.go`` line 46, and has no
``vip_cidr``), ``NET_ADMIN``/``NET_RAW``, ``hostNetwork`` and the admin kubeconfig mounted at
``/etc/kubernetes/admin.conf``. On k3s that kubeconfig is ``/etc/rancher/k3s/k3s.yaml`` (``https://127.0.0.1:6443``,
the local API server, so the first server's kube-vip elects itself before the VIP exists; the file appears once k3s
started, and the kubelet retries the pod until then). ``svc_enable`` stays ``false``: Cilium's LB IPAM serves
Services (decision 0020).
"""

from __future__ import annotations

from typing import Any

import yaml

from gpucell.spec.network import ApiVipMode
from gpucell.spec.nodes import NodeViews

__all__ = ["IMAGE", "IMAGE_DIGESTS", "KUBECONFIG_MOUNT", "MANIFEST_PATH", "image", "manifest", "static_pod"]

MANIFEST_PATH = "/var/lib/rancher/k3s/agent/pod-manifests/kube-vip.yaml"
"""k3s's static pod directory (``<data-dir>/agent/pod-manifests``, k3s-io/k3s ``pkg/agent/config``), kube-vip's
file in it."""
IMAGE = "ghcr.io/kube-vip/kube-vip"
"""kube-vip's image repository."""
IMAGE_DIGESTS = {
    "v1.0.4": "sha256:5e0d817bfa35f922e7ca5cf5fa88f30b71a88ab4837e550185b1c97bcef818c2",
}
"""Tag -> manifest digest of :data:`IMAGE`; a ``versions.kubeVip`` without one is refused (``KeyError`` here)."""
KUBECONFIG_MOUNT = "/etc/kubernetes/admin.conf"
"""Where kube-vip reads its kubeconfig by default (``k8s_config_file``)."""
_K3S_KUBECONFIG = "/etc/rancher/k3s/k3s.yaml"
_LEASE = {"vip_leaseduration": "5", "vip_renewdeadline": "3", "vip_retryperiod": "1"}
"""kube-vip's defaults as ``manifest pod`` writes them, seconds."""
_PRESERVE = {"vip_preserve_on_leadership_loss": "true"}
"""ARP: a server whose lease renewal times out (API server slow, etcd busy) keeps the VIP until another server is
leader, which removes it there (``onNewLeader``). Without it kube-vip deletes the VIP at once and the API is
unreachable until a new leader is elected (kube-vip/kube-vip#282, #1377; PR #1306). v1.0.4
``pkg/kubevip/config_envvar.go`` names the variable, ``pkg/cluster/clusterLeaderElection.go`` acts on it; the default
is ``false``."""


def image(version: str) -> str:
    """``ghcr.io/kube-vip/kube-vip:<version>@<digest>``; raises ``KeyError`` for a tag without a pinned digest."""
    return f"{IMAGE}:{version}@{IMAGE_DIGESTS[version]}"


def _env(cell: NodeViews) -> list[dict[str, Any]]:
    vip = cell.network.api_vip
    assert vip is not None
    arp = vip.mode is ApiVipMode.ARP
    env: dict[str, str] = {
        "vip_arp": str(arp).lower(),
        "port": str(cell.network.api_port),
        "vip_interface": vip.interface,
        "vip_subnet": "32",
        "cp_enable": "true",
        "cp_namespace": "kube-system",
        "svc_enable": "false",
        "vip_leaderelection": str(arp).lower(),
        **(_LEASE if arp else {}),
        **(_PRESERVE if arp else {}),
    }
    if vip.bgp is not None:
        env.update(
            {
                "bgp_enable": "true",
                "bgp_routerinterface": vip.interface,
                "bgp_as": str(vip.bgp.asn),
                "bgp_peers": ",".join(f"{peer.address}:{peer.asn}::false" for peer in vip.bgp.peers),
            }
        )
    env["address"] = str(cell.network.api_address)
    return [
        {"name": "vip_nodename", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        *({"name": key, "value": value} for key, value in env.items()),
    ]


def static_pod(cell: NodeViews) -> dict[str, Any]:
    """The ``v1`` Pod ``kube-vip`` in ``kube-system`` serving ``network.apiEndpoint`` from the servers.

    ARP: leader election (Lease ``plndr-cp-lock``) so that one server holds the VIP; BGP: every server advertises
    it (no election, as kube-vip's BGP mode does). Raises ``ValueError`` without ``network.apiVip``.
    """
    if cell.network.api_vip is None:
        raise ValueError("network.apiVip is not set")
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "kube-vip",
            "namespace": "kube-system",
            "labels": {"app.kubernetes.io/name": "kube-vip", "app.kubernetes.io/managed-by": "gpucell"},
        },
        "spec": {
            "containers": [
                {
                    "name": "kube-vip",
                    "image": image(cell.versions.kube_vip),
                    "imagePullPolicy": "IfNotPresent",
                    "args": ["manager"],
                    "env": _env(cell),
                    "securityContext": {"capabilities": {"drop": ["ALL"], "add": ["NET_ADMIN", "NET_RAW"]}},
                    "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
                    "volumeMounts": [{"name": "kubeconfig", "mountPath": KUBECONFIG_MOUNT, "readOnly": True}],
                }
            ],
            "hostNetwork": True,
            "priorityClassName": "system-node-critical",
            "hostAliases": [{"ip": "127.0.0.1", "hostnames": ["kubernetes"]}],
            "volumes": [{"name": "kubeconfig", "hostPath": {"path": _K3S_KUBECONFIG, "type": "File"}}],
        },
    }


def manifest(cell: NodeViews) -> str:
    """:func:`static_pod` as the YAML file the servers' install scripts write to :data:`MANIFEST_PATH`."""
    return yaml.safe_dump(static_pod(cell), sort_keys=False)
