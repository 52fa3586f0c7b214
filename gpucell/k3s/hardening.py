"""The k3s CIS profile and sign-in: the config options and the files every node gets, as plain data.

Source of every setting: the k3s "CIS Hardening Guide" (k3s-io/docs ``docs/security/hardening-guide.md``,
configuration for v1.29 and newer), with the control numbers of the k3s "CIS 2.0 Self-Assessment Guide" for the
k3s v1.34-v1.37 releases (``docs/security/self-assessment-2.0.md``). Settings k3s already has by default
(``anonymous-auth=false`` for the API server and kubelets, 1.2.1/4.2.1; the API server's strong TLS ciphers,
1.2.29; kubelet ``read-only-port=0``, 4.2.4; ``make-iptables-util-chains``, 4.2.6; ``event-qps=0``, 4.2.8) are not
repeated. The table in docs/security.md lists each setting with its control.

Nothing here touches Pulumi or the network: :mod:`gpucell.k3s._scripts` puts the options into each node's
``config.yaml`` and the files into its install script, which writes them before (re)starting k3s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from gpucell.spec.nodes import NodeViews
from gpucell.spec.tenancy import CLUSTER_API_NAMESPACES, SYSTEM_NAMESPACES

__all__ = [
    "AUDIT_LOG_DIR",
    "AUDIT_LOG_PATH",
    "AUDIT_POLICY_PATH",
    "AUTHENTICATION_CONFIG_PATH",
    "KERNEL_DEFAULTS",
    "KUBELET_TLS_CIPHER_SUITES",
    "POD_SECURITY_CONFIG_PATH",
    "POD_SECURITY_EXEMPT_NAMESPACES",
    "SYSCTL_PATH",
    "NodeFile",
    "admission_configuration",
    "agent_options",
    "audit_policy",
    "authentication_configuration",
    "node_files",
    "server_options",
]

SERVER_DIR = "/var/lib/rancher/k3s/server"
POD_SECURITY_CONFIG_PATH = f"{SERVER_DIR}/psa.yaml"
"""The API server's ``AdmissionConfiguration`` (``admission-control-config-file``), on every server."""
AUDIT_POLICY_PATH = f"{SERVER_DIR}/audit.yaml"
"""The audit ``Policy`` (``audit-policy-file``), on every server."""
AUDIT_LOG_DIR = f"{SERVER_DIR}/logs"
"""Directory of the audit log, created mode 0700 (the guide's ``mkdir -p -m 700``)."""
AUDIT_LOG_PATH = f"{AUDIT_LOG_DIR}/audit.log"
"""The audit log (``audit-log-path``), rotated by the API server."""
AUTHENTICATION_CONFIG_PATH = f"{SERVER_DIR}/authentication-config.yaml"
"""The structured ``AuthenticationConfiguration`` (``authentication-config``), on every server, with OIDC."""
SYSCTL_PATH = "/etc/sysctl.d/90-kubelet.conf"
"""Kernel parameters the kubelet checks with ``protect-kernel-defaults`` (the guide's file name)."""
KERNEL_DEFAULTS = {
    "vm.panic_on_oom": "0",
    "vm.overcommit_memory": "1",
    "kernel.panic": "10",
    "kernel.panic_on_oops": "1",
}
"""The values the kubelet expects with ``protect-kernel-defaults`` (it exits when one differs); the guide's
``90-kubelet.conf``."""
KUBELET_TLS_CIPHER_SUITES = (
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
)
"""The kubelet's ``tls-cipher-suites`` from the guide (CIS 4.2.12)."""
POD_SECURITY_EXEMPT_NAMESPACES = tuple(
    sorted(
        SYSTEM_NAMESPACES
        - {"default", "kube-public", "kube-node-lease", "monitoring", "keda", "velero", *CLUSTER_API_NAMESPACES}
    )
)
"""Namespaces the cluster-wide ``restricted`` default does not apply to: where the cell's platform components
run privileged pods (Cilium and CoreDNS in ``kube-system``, virt-handler, the GPU Operator's driver and device
plugin DaemonSets, Longhorn's manager and CSI plugins) or operators gpucell installs from their charts.
The guide exempts ``kube-system`` for the same reason."""
EVENT_RATE_LIMITS = [
    {"type": "Namespace", "qps": 50, "burst": 100, "cacheSize": 2000},
    {"type": "User", "qps": 10, "burst": 50},
]
"""``EventRateLimit`` limits (CIS 1.2.9): the plugin refuses to start without a ``limits`` list."""
ADMISSION_PLUGINS = ("NodeRestriction", "EventRateLimit", "DenyServiceExternalIPs")
"""``enable-admission-plugins``: the value replaces k3s's own (``NodeRestriction``), so it is kept. CIS 1.2.9
(EventRateLimit) and 1.2.3 (DenyServiceExternalIPs: a tenant's Service with ``externalIPs`` could capture
traffic meant for any address, CVE-2020-8554). ``PodSecurity`` is on by default."""


@dataclass(frozen=True)
class NodeFile:
    """A file the install script writes (root-owned) before k3s (re)starts."""

    path: str
    content: str
    mode: str = "0600"


def _version(cell: NodeViews) -> str:
    return f"v{cell.versions.kubernetes_minor}"


def admission_configuration(cell: NodeViews) -> dict[str, Any]:
    """The ``apiserver.config.k8s.io/v1`` ``AdmissionConfiguration`` of the ``cis`` profile.

    ``PodSecurity`` (``pod-security.admission.config.k8s.io/v1``; the guide's example still says ``v1beta1``,
    both are served by v1.34): ``enforce``, ``audit`` and ``warn`` default to ``restricted`` at the cell's
    Kubernetes minor for every namespace without its own labels (CIS 5.2.1), with
    :data:`POD_SECURITY_EXEMPT_NAMESPACES` exempted. ``EventRateLimit``: :data:`EVENT_RATE_LIMITS`.
    """
    version = _version(cell)
    defaults = {
        f"{mode}{suffix}": value
        for mode in ("enforce", "audit", "warn")
        for suffix, value in (("", "restricted"), ("-version", version))
    }
    return {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "AdmissionConfiguration",
        "plugins": [
            {
                "name": "PodSecurity",
                "configuration": {
                    "apiVersion": "pod-security.admission.config.k8s.io/v1",
                    "kind": "PodSecurityConfiguration",
                    "defaults": defaults,
                    "exemptions": {
                        "usernames": [],
                        "runtimeClasses": [],
                        "namespaces": list(POD_SECURITY_EXEMPT_NAMESPACES),
                    },
                },
            },
            {
                "name": "EventRateLimit",
                "configuration": {
                    "apiVersion": "eventratelimit.admission.k8s.io/v1alpha1",
                    "kind": "Configuration",
                    "limits": [dict(limit) for limit in EVENT_RATE_LIMITS],
                },
            },
        ],
    }


def audit_policy() -> dict[str, Any]:
    """The ``audit.k8s.io/v1`` ``Policy``: every request at ``Metadata`` level (who did what to which object,
    never a request or response body, so no Secret value reaches the log), health and version probes left
    out, the ``RequestReceived`` stage omitted (each request is logged once it is answered). CIS 3.2.1."""
    return {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "omitStages": ["RequestReceived"],
        "rules": [
            {"level": "None", "nonResourceURLs": ["/healthz*", "/livez*", "/readyz*", "/version"]},
            {"level": "Metadata"},
        ],
    }


def authentication_configuration(cell: NodeViews) -> dict[str, Any] | None:
    """The structured ``AuthenticationConfiguration`` for ``cell.oidc``, or ``None`` without OIDC.

    ``apiserver.config.k8s.io/v1`` (StructuredAuthenticationConfiguration is GA and locked on in Kubernetes
    1.34; ``v1beta1`` before, from 1.30). One ``jwt`` authenticator: ``issuer.url``, ``audiences`` = the client
    id, ``certificateAuthority`` when given; ``claimMappings`` with the explicit prefixes (the file has no
    defaulting, unlike the ``--oidc-*`` flags); ``userValidationRules`` refusing ``system:`` usernames and
    groups, which the prefixes already rule out. No ``anonymous`` section: k3s passes ``--anonymous-auth=false``
    and the two may not be combined.
    """
    oidc = cell.oidc
    if oidc is None:
        return None
    issuer: dict[str, Any] = {"url": oidc.issuer_url, "audiences": [oidc.client_id]}
    if oidc.certificate_authority is not None:
        issuer["certificateAuthority"] = oidc.certificate_authority
    minor = int(cell.versions.kubernetes_minor.split(".")[1])
    return {
        "apiVersion": "apiserver.config.k8s.io/v1" if minor >= 34 else "apiserver.config.k8s.io/v1beta1",
        "kind": "AuthenticationConfiguration",
        "jwt": [
            {
                "issuer": issuer,
                "claimMappings": {
                    "username": {"claim": oidc.username_claim, "prefix": oidc.username_prefix},
                    "groups": {"claim": oidc.groups_claim, "prefix": oidc.groups_prefix},
                },
                "userValidationRules": [
                    {
                        "expression": "!user.username.startsWith('system:')",
                        "message": "username cannot use the reserved system: prefix",
                    },
                    {
                        "expression": "user.groups.all(group, !group.startsWith('system:'))",
                        "message": "groups cannot use the reserved system: prefix",
                    },
                ],
            }
        ],
    }


def _kubelet_args(cell: NodeViews) -> list[str]:
    if not cell.k3s.cis:
        return []
    return [
        "streaming-connection-idle-timeout=5m",  # CIS 4.2.5
        f"tls-cipher-suites={','.join(KUBELET_TLS_CIPHER_SUITES)}",  # CIS 4.2.12
    ]


def agent_options(cell: NodeViews) -> dict[str, Any]:
    """Options every node (servers run an agent too) gets from the profile: ``protect-kernel-defaults``
    (the guide's host-level requirement; CIS 1.x 4.2.6) and the ``kubelet-arg`` entries of
    :func:`_kubelet_args` (to append to a pool's own). Empty with ``profile: none``."""
    if not cell.k3s.cis:
        return {}
    return {"protect-kernel-defaults": True, "kubelet-arg": _kubelet_args(cell)}


def server_options(cell: NodeViews) -> dict[str, Any]:
    """Options only servers get: ``secrets-encryption`` (CIS 1.2.27/1.2.28), and with the ``cis`` profile the
    guide's ``kube-apiserver-arg`` (admission plugins and their config, audit log path/age 30/backups 10/size
    100 MB, CIS 1.2.16-1.2.19; ``service-account-extend-token-expiration=false``, 1.2.30) and
    ``kube-controller-manager-arg`` (``terminated-pod-gc-threshold=100``, 1.3.1); with OIDC, the API server's
    ``authentication-config``."""
    options: dict[str, Any] = {}
    if cell.k3s.encrypts_secrets:
        options["secrets-encryption"] = True
    apiserver: list[str] = []
    if cell.k3s.cis:
        apiserver += [
            f"enable-admission-plugins={','.join(ADMISSION_PLUGINS)}",
            f"admission-control-config-file={POD_SECURITY_CONFIG_PATH}",
            f"audit-log-path={AUDIT_LOG_PATH}",
            f"audit-policy-file={AUDIT_POLICY_PATH}",
            "audit-log-maxage=30",
            "audit-log-maxbackup=10",
            "audit-log-maxsize=100",
            "service-account-extend-token-expiration=false",
        ]
    if cell.oidc is not None:
        apiserver.append(f"authentication-config={AUTHENTICATION_CONFIG_PATH}")
    if apiserver:
        options["kube-apiserver-arg"] = apiserver
    if cell.k3s.cis:
        options["kube-controller-manager-arg"] = ["terminated-pod-gc-threshold=100"]
    return options


def _yaml(document: dict[str, Any]) -> str:
    return yaml.dump(document, Dumper=yaml.CSafeDumper, sort_keys=False, default_flow_style=False, width=4096)


def node_files(cell: NodeViews, *, server: bool) -> list[NodeFile]:
    """The files a node's install script writes, in order: the sysctl file with :data:`KERNEL_DEFAULTS` (``cis``,
    every node); on servers the admission configuration and audit policy (``cis``) and the authentication
    configuration (OIDC). Empty for an agent with ``profile: none``."""
    files: list[NodeFile] = []
    if cell.k3s.cis:
        sysctl = "".join(f"{key}={value}\n" for key, value in KERNEL_DEFAULTS.items())
        files.append(
            NodeFile(
                SYSCTL_PATH,
                "# gpucell: kernel defaults the kubelet's protect-kernel-defaults checks\n" + sysctl,
                mode="0644",
            )
        )
    if server and cell.k3s.cis:
        files.append(NodeFile(POD_SECURITY_CONFIG_PATH, _yaml(admission_configuration(cell))))
        files.append(NodeFile(AUDIT_POLICY_PATH, _yaml(audit_policy())))
    authn = authentication_configuration(cell)
    if server and authn is not None:
        files.append(NodeFile(AUTHENTICATION_CONFIG_PATH, _yaml(authn)))
    return files
