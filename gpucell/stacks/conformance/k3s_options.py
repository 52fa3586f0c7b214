"""The k3s options a node's ``/etc/rancher/k3s/config.yaml`` may use, per role.

Config-file keys are the CLI flags without ``--`` (https://docs.k3s.io/installation/configuration). The lists
are the flags of ``k3s server --help`` and ``k3s agent --help`` as documented at https://docs.k3s.io/cli/server
and https://docs.k3s.io/cli/agent for the v1.28 to v1.35 releases (no flag used by gpucell was added or removed
in that range). A k3s release outside that range is checked all the same, with a notice.
"""

from __future__ import annotations

__all__ = ["AGENT_OPTIONS", "SERVER_OPTIONS", "SUPPORTED_MINORS"]

SUPPORTED_MINORS = ("1.28", "1.29", "1.30", "1.31", "1.32", "1.33", "1.34", "1.35")
"""Kubernetes minors whose k3s flags these lists were checked against."""

_COMMON = frozenset(
    {
        # logging and config
        "config",
        "debug",
        "v",
        "vmodule",
        "log",
        "alsologtostderr",
        # cluster / node
        "token",
        "token-file",
        "server",
        "data-dir",
        "node-name",
        "with-node-id",
        "node-label",
        "node-taint",
        "image-credential-provider-bin-dir",
        "image-credential-provider-config",
        "selinux",
        "lb-server-port",
        "protect-kernel-defaults",
        "resolv-conf",
        "kubelet-arg",
        "kube-proxy-arg",
        "rootless",
        "prefer-bundled-bin",
        "pause-image",
        "snapshotter",
        "private-registry",
        "system-default-registry",
        "disable-default-registry-endpoint",
        "embedded-registry",
        "nonroot-devices",
        "container-runtime-endpoint",
        "default-runtime",
        "image-service-endpoint",
        "docker",
        "airgap-extra-registry",
        # networking
        "node-ip",
        "node-external-ip",
        "node-internal-dns",
        "node-external-dns",
        "bind-address",
        "flannel-iface",
        "flannel-conf",
        "flannel-cni-conf",
        "vpn-auth",
        "vpn-auth-file",
    }
)

AGENT_OPTIONS: frozenset[str] = _COMMON
"""Keys valid in an agent's config file."""

SERVER_OPTIONS: frozenset[str] = _COMMON | frozenset(
    {
        # listener / TLS
        "advertise-address",
        "advertise-port",
        "tls-san",
        "tls-san-security",
        "https-listen-port",
        "supervisor-port",
        "apiserver-port",
        "apiserver-bind-address",
        # networking
        "cluster-cidr",
        "service-cidr",
        "service-node-port-range",
        "cluster-dns",
        "cluster-domain",
        "flannel-backend",
        "flannel-ipv6-masq",
        "flannel-external-ip",
        "egress-selector-mode",
        "servicelb-namespace",
        # kubeconfig
        "write-kubeconfig",
        "write-kubeconfig-mode",
        "write-kubeconfig-group",
        # datastore
        "cluster-init",
        "cluster-reset",
        "cluster-reset-restore-path",
        "datastore-endpoint",
        "datastore-cafile",
        "datastore-certfile",
        "datastore-keyfile",
        "etcd-expose-metrics",
        "etcd-disable-snapshots",
        "etcd-snapshot-name",
        "etcd-snapshot-schedule-cron",
        "etcd-snapshot-retention",
        "etcd-snapshot-dir",
        "etcd-snapshot-compress",
        "etcd-s3",
        "etcd-s3-endpoint",
        "etcd-s3-bucket",
        "etcd-s3-folder",
        "etcd-s3-region",
        "etcd-s3-access-key",
        "etcd-s3-secret-key",
        "etcd-arg",
        "etcd-s3-endpoint-ca",
        "etcd-s3-skip-ssl-verify",
        "etcd-s3-insecure",
        "etcd-s3-timeout",
        "etcd-s3-proxy",
        # since v1.30.4+k3s1, v1.29.8+k3s1 and v1.28.13+k3s1 (k3s docs docs/cli/etcd-snapshot.md)
        "etcd-s3-config-secret",
        # tokens
        "agent-token",
        "agent-token-file",
        # components
        "disable",
        "disable-scheduler",
        "disable-cloud-controller",
        "disable-kube-proxy",
        "disable-network-policy",
        "disable-helm-controller",
        "disable-apiserver",
        "disable-controller-manager",
        "disable-etcd",
        "disable-agent",
        "kube-apiserver-arg",
        "kube-scheduler-arg",
        "kube-controller-manager-arg",
        "kube-cloud-controller-manager-arg",
        "secrets-encryption",
        "secrets-encryption-provider",
        "enable-pprof",
        "default-local-storage-path",
        "embedded-registry",
        "supervisor-metrics",
        "kine-tls",
        "helm-job-image",
        "node-name",
    }
)
"""Keys valid in a server's config file."""
