"""What K3sCluster runs on each node: the k3s config file and the bash scripts, rendered as plain text.

Nothing here touches Pulumi: every function is a pure ``spec -> str`` so the offline plan can write the files
(``node_files``) and the tests can shellcheck them. The bash is in ``scripts/preamble.sh`` and ``scripts/k3s/*.sh``
(:mod:`gpucell.k3s._script_files`). No function ever receives the cluster token: it reaches
nodes only on the command's stdin (see :mod:`gpucell.k3s.cluster`).

Upstream sources of the values:
- k3s options, as config-file keys: https://docs.k3s.io/cli/server and https://docs.k3s.io/cli/agent
  (``token-file``, ``cluster-init``, ``flannel-backend``, ``disable-kube-proxy``,
  ``disable-network-policy``...);
  config file location and list syntax: https://docs.k3s.io/installation/configuration#configuration-file
- the installer (k3s-io/k3s ``install.sh`` at the release's tag, checked against a pinned sha256, see
  :mod:`gpucell.spec.k3s`): ``INSTALL_K3S_VERSION``, ``INSTALL_K3S_EXEC``
  (``server``/``agent``; ``agent`` needs no ``K3S_URL`` when the config file names the server), the
  ``k3s``/``k3s-agent`` systemd units and ``/usr/local/bin/k3s-uninstall.sh`` / ``k3s-agent-uninstall.sh``.
- Cilium replacing flannel, kube-proxy and the network policy controller:
  https://docs.cilium.io/en/stable/installation/k3s/
- the kubelet's CPU and memory manager checkpoints (``/var/lib/kubelet/cpu_manager_state`` and
  ``memory_manager_state``; k3s leaves the kubelet's ``root-dir`` at its default unless rootless, see k3s-io/k3s
  ``pkg/agent/config/config.go``) and how to change a policy (drain, stop the kubelet, remove the state file,
  start it): https://kubernetes.io/docs/tasks/administer-cluster/cpu-management-policies/ ("Changing the CPU
  Manager Policy") and .../memory-manager/.
- k3s removes a server's etcd member when its Node object is deleted (the ``managed-etcd-controller``'s
  ``OnRemove`` handler in k3s-io/k3s ``pkg/etcd``); a *forced* delete skips that finalizer.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Sequence
from typing import Any

import yaml

from gpucell.catalog.gpu_catalog import VgpuFramework
from gpucell.cluster import K3S_LOCAL_PORT, listen_port
from gpucell.k3s import kube_vip, vgpu_sriov
from gpucell.k3s._script_files import render
from gpucell.k3s.hardening import AUDIT_LOG_DIR, SYSCTL_PATH, NodeFile
from gpucell.k3s.hardening import agent_options as hardening_options
from gpucell.k3s.hardening import server_options as hardening_server_options
from gpucell.spec import GpuMode, Host, NodePool, NodeRole, StorageBackend
from gpucell.spec.etcd import DEFAULT_SNAPSHOT_RETENTION, DEFAULT_SNAPSHOT_SCHEDULE
from gpucell.spec.k3s import installer_url
from gpucell.spec.nodes import NodeViews
from gpucell.spec.pools import (
    DRA_DISABLED_OPERANDS,
    DRA_KUBELET_PLUGIN_LABEL,
    MIG_LABEL,
    POOL_LABEL,
    ROLE_LABEL,
    VGPU_LABEL,
    WORKLOAD_LABEL,
)

__all__ = [
    "CONFIG_PATH",
    "ETCD_S3_SECRET",
    "K3S_LOCAL_PORT",
    "KUBECONFIG_PATH",
    "KUBELET_DIR",
    "KUBELET_KUBECONFIG_PATH",
    "TOKEN_PATH",
    "api_server_url",
    "etcd_snapshot_options",
    "install_script",
    "kubeconfig_script",
    "listen_port",
    "managed_labels",
    "node_config",
    "pool_managed_labels",
    "registration_only_options",
    "remote",
    "render_config",
    "restart_digest",
    "rewrite_kubeconfig",
    "uninstall_script",
]

CONFIG_PATH = "/etc/rancher/k3s/config.yaml"
"""Where k3s reads its options from (the default ``--config``)."""
TOKEN_PATH = "/etc/rancher/k3s/token"
"""Root-only file holding the cluster token (``token-file``)."""
KUBECONFIG_PATH = "/etc/rancher/k3s/k3s.yaml"
"""The admin kubeconfig every k3s server writes (mode set by ``write-kubeconfig-mode``)."""
KUBELET_KUBECONFIG_PATH = "/var/lib/rancher/k3s/agent/kubelet.kubeconfig"
"""The kubelet's kubeconfig on every k3s node (servers run an agent too): identity ``system:node:<name>``, which the
Node authorizer lets read its own Node."""
ETCD_DATA_DIR = "/var/lib/rancher/k3s/server/db/etcd"
"""Embedded etcd's data directory on a server; present once the server initialised or joined etcd."""
ETCD_S3_SECRET = "gpucell-etcd-s3"
"""Name of the ``kube-system`` Secret (type ``etcd.k3s.cattle.io/s3-config-secret``) holding the snapshots' S3
target and credentials."""
KUBELET_DIR = "/var/lib/kubelet"
"""The kubelet's ``root-dir`` under (rootful) k3s; holds ``cpu_manager_state`` and ``memory_manager_state``."""
KUBELET_STATE_FILES = ("cpu_manager_state", "memory_manager_state")
"""Checkpoints the kubelet validates against its CPU / memory manager policy at start (it refuses to start on a
mismatch)."""
MAX_CLOCK_SKEW_SECONDS = 10
"""The most a host's clock may differ from the cell's API server's (its HTTP ``Date``, 1 s resolution) before the
install script refuses to touch it (issue 30: a server with a skewed clock failed TLS, and nothing said why). etcd
already warns past 1 s (etcd ``rafthttp`` "clock difference against peer ... is too high"); 10 s leaves room for the
header's resolution and the request, and refuses a host off by minutes, as an unsynchronised one is."""
READY_TIMEOUT_SECONDS = 300
"""How long a server's script waits for the API server's ``/readyz`` after (re)starting k3s, seconds."""
_HEREDOC = "GPUCELL_K3S_CONFIG"
DATA_DIR = "/var/lib/rancher/k3s"
"""k3s's data directory (``data-dir`` default for a root install)."""
ENCRYPTION_CONFIG = f"{DATA_DIR}/server/cred/encryption-config.json"
"""Written by k3s at a server's first start with ``secrets-encryption`` (docs.k3s.io/cli/secrets-encrypt)."""
KUBELET_STATE_ARGS = (
    "cpu-manager-",
    "memory-manager-",
    "reserved-cpus=",
    "reserved-memory=",
    "kube-reserved=",
    "system-reserved=",
)
"""``kubelet-arg`` entries the CPU and memory manager checkpoints are validated against at kubelet start: a
change of any of them resets the checkpoints; other kubelet arguments (the CIS profile's) do not."""


# -- addresses -------------------------------------------------------------------------------------
def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def api_server_url(cell: NodeViews) -> str:
    """``https://<api_endpoint>:<api_port>``: what agents, joining servers and the kubeconfig use."""
    return f"https://{_host_port(cell.api_endpoint, cell.network.api_port)}"


# -- config.yaml -----------------------------------------------------------------------------------
def managed_labels(pool_name: str, pool: NodePool, vgpu_framework: VgpuFramework | None = None) -> dict[str, str]:
    """The node labels gpucell sets on a pool's nodes, before the pool's own ``labels``.

    ``gpucell.io/pool`` and ``gpucell.io/role`` on every node (``node-role.kubernetes.io/*`` cannot be
    self-applied by a kubelet under the NodeRestriction admission plugin, so our own prefix is used);
    ``nvidia.com/gpu.workload.config=<gpuMode>`` on GPU nodes (GPU Operator sandbox workloads),
    ``nvidia.com/mig.config`` on container-mode nodes whose GPUs support MIG (``NodePool.mig_label``: the
    ``migConfig`` layout, else ``all-disabled``; read by the GPU Operator's MIG manager) and
    ``nvidia.com/vgpu.config=<vgpuProfile>`` on vm-vgpu nodes (read by the GPU Operator's vGPU device
    manager, whose default config names one layout per vGPU type, e.g. ``L40S-12Q``). The spec rejects pool
    ``labels`` that use these keys (``MANAGED_LABELS``). Never ``nvidia.com/gpu.deploy.*``: the GPU Operator and
    its MIG and vGPU managers rewrite those to pause operands (the SR-IOV exception below sets them once, as
    node-labels at registration, to keep mdev-only operands off).

    A ``vm-vgpu`` pool whose boards expose SR-IOV vGPUs (``vgpu_framework`` ``sriov``, see
    :func:`gpucell.spec.hardware.pool_vgpu_framework`) gets no ``nvidia.com/vgpu.config`` but
    :func:`gpucell.k3s.vgpu_sriov.node_labels`: the GPU Operator's mdev-only operands off on those nodes.

    A ``dra`` pool runs the operator's ``container`` workload (``nvidia.com/gpu.workload.config=container``: driver,
    toolkit, GFD, validator) with :data:`gpucell.spec.pools.DRA_DISABLED_OPERANDS` ``=false`` (device plugin, DCGM,
    DCGM exporter; the operator keeps a non-empty state label it finds) and ``gpucell.io/dra-kubelet-plugin=true``
    (where :mod:`gpucell.components.dra_driver` runs its kubelet plugin). The sandbox device plugin and the vfio-manager
    need no label: the operator deploys them only on ``vm-passthrough``/``vm-vgpu`` nodes, and deletes their state
    labels elsewhere.
    """
    labels = {POOL_LABEL: pool_name, ROLE_LABEL: pool.role.value}
    if pool.role is NodeRole.GPU:
        labels[WORKLOAD_LABEL] = pool.mode.workload_config
        if pool.mode is GpuMode.DRA:
            labels.update(dict.fromkeys(DRA_DISABLED_OPERANDS, "false"))
            labels[DRA_KUBELET_PLUGIN_LABEL] = "true"
        if pool.mig_label is not None:
            labels[MIG_LABEL] = pool.mig_label
        if pool.vgpu_profile is not None and vgpu_framework is VgpuFramework.SRIOV:
            labels.update(vgpu_sriov.node_labels())
        elif pool.vgpu_profile is not None:
            labels[VGPU_LABEL] = pool.vgpu_profile
    return labels


def pool_managed_labels(cell: NodeViews, pool_name: str, pool: NodePool) -> dict[str, str]:
    """:func:`managed_labels` of a pool of ``cell``, with its vGPU framework taken from the cell (SR-IOV or mdev,
    :meth:`~gpucell.spec.nodes.NodeViews.vgpu_pools`)."""
    framework = None
    if pool.role is NodeRole.GPU and pool.mode is GpuMode.VM_VGPU:
        framework = VgpuFramework.SRIOV if pool_name in cell.vgpu_pools(VgpuFramework.SRIOV) else VgpuFramework.MDEV
    return managed_labels(pool_name, pool, framework)


def _node_labels(cell: NodeViews, pool_name: str, pool: NodePool) -> list[str]:
    labels = pool_managed_labels(cell, pool_name, pool)
    return [f"{k}={v}" for k, v in labels.items()] + [f"{k}={pool.labels[k]}" for k in sorted(pool.labels)]


def node_config(cell: NodeViews, pool_name: str, pool: NodePool, host: Host) -> dict[str, Any]:
    """The k3s options of one node as an ordered mapping (rendered by :func:`render_config`).

    Every node: ``node-name``, ``node-ip``, ``token-file``, ``node-label`` (see :func:`managed_labels`, then
    the pool's ``labels`` sorted by key), ``node-taint`` (the pool's ``node_taints``, when any: a server's
    control-plane taint, then ``taints``), ``kubelet-arg``
    (``pool.topology.kubelet_args()`` when the pool has a topology profile, then the CIS profile's) and
    ``protect-kernel-defaults`` (CIS profile; :func:`gpucell.k3s.hardening.agent_options`).
    The init server (``NodeViews.init_server``: ``etcd.initServer`` or the single server) gets ``cluster-init:
    true`` (it initialises embedded etcd); every other node gets ``server: <api_server_url>``, so removing any
    server never changes another server's config, and a server added later joins the existing cluster.
    Servers also get the cluster-wide options: ``tls-san`` (apiEndpoint plus ``network.tlsSans``), pod/service
    CIDRs and cluster DNS, no flannel / network policy controller / kube-proxy (Cilium replaces all three),
    ``disable`` traefik and servicelb (plus local-storage with Longhorn), ``https-listen-port`` when it is not
    6443 (see :func:`listen_port`), ``write-kubeconfig-mode: "0600"``, the etcd snapshot options that differ
    from k3s's defaults (:func:`etcd_snapshot_options`), then ``secrets-encryption`` and the CIS profile's and
    sign-in's API server and controller-manager arguments (:func:`gpucell.k3s.hardening.server_options`).
    """
    is_server = pool.role is NodeRole.SERVER
    config: dict[str, Any] = {"node-name": host.name, "node-ip": str(host.address)}
    if is_server and host.name == cell.init_server:
        config["cluster-init"] = True
    else:
        config["server"] = api_server_url(cell)
    config["token-file"] = TOKEN_PATH
    config["node-label"] = _node_labels(cell, pool_name, pool)
    if pool.node_taints:
        config["node-taint"] = pool.node_taints
    hardening = hardening_options(cell)
    kubelet_args = [
        *(pool.topology.kubelet_args() if pool.topology is not None else []),
        *hardening.pop("kubelet-arg", []),
    ]
    if kubelet_args:
        config["kubelet-arg"] = kubelet_args
    config.update(hardening)
    if is_server:
        config.update(_server_options(cell))
        config.update(hardening_server_options(cell))
    return config


def etcd_snapshot_options(cell: NodeViews) -> dict[str, Any]:
    """The k3s server options of ``etcd.snapshots`` that differ from k3s's defaults, in a stable order.

    ``etcd-snapshot-schedule-cron`` and ``etcd-snapshot-retention`` when not ``0 */12 * * *`` and 5,
    ``etcd-snapshot-compress: true`` when set; with ``s3``: ``etcd-s3: true`` and ``etcd-s3-config-secret:
    <ETCD_S3_SECRET>`` and nothing else, because k3s ignores the Secret as soon as any other ``etcd-s3-*`` option
    is set (k3s docs ``docs/cli/etcd-snapshot.md``, "S3 Configuration Secret Support"). The endpoint, bucket and
    credentials live in that Secret only.
    """
    snapshots = cell.etcd.snapshots
    options: dict[str, Any] = {}
    if snapshots.schedule != DEFAULT_SNAPSHOT_SCHEDULE:
        options["etcd-snapshot-schedule-cron"] = snapshots.schedule
    if snapshots.retention != DEFAULT_SNAPSHOT_RETENTION:
        options["etcd-snapshot-retention"] = snapshots.retention
    if snapshots.compress:
        options["etcd-snapshot-compress"] = True
    if snapshots.s3 is not None:
        options["etcd-s3"] = True
        options["etcd-s3-config-secret"] = ETCD_S3_SECRET
    return options


def registration_only_options(role: NodeRole) -> tuple[str, ...]:
    """Config keys whose change does not need a k3s restart on a running node of ``role``.

    ``node-label`` and ``node-taint`` are applied only when the node registers ("Node Labels and Taints" in the
    k3s advanced docs: they "only add labels and/or taints at registration time"); gpucell keeps them through
    the API instead (a NodePatch per node). On a server that holds etcd data, the datastore options
    ``cluster-init`` and ``server`` are ignored ("If an etcd datastore is found on disk ... the datastore
    arguments (--cluster-init, --server, --datastore-endpoint, etc) are ignored", k3s docs
    ``docs/datastore/ha-embedded.md``).
    """
    keys = ("node-label", "node-taint")
    return (*keys, "cluster-init", "server") if role is NodeRole.SERVER else keys


def restart_digest(cell: NodeViews, role: NodeRole, config: dict[str, Any], files: Sequence[NodeFile] = ()) -> str:
    """16 hex digits identifying what a k3s restart of a node would apply: the pinned version, the node's config
    without :func:`registration_only_options` and the other files k3s reads (``files``: the CIS profile's and
    sign-in's). Equal digests mean the install script leaves k3s running."""
    kept = {k: v for k, v in config.items() if k not in registration_only_options(role)}
    text = f"{cell.versions.k3s}\n{role.value}\n{render_config(kept)}"
    text += "".join(f"\n{file.path} {file.mode}\n{file.content}" for file in files)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _server_options(cell: NodeViews) -> dict[str, Any]:
    net = cell.network
    sans = list(dict.fromkeys([cell.api_endpoint, *net.tls_sans]))
    disable = ["traefik", "servicelb"]
    if cell.storage.backend is StorageBackend.LONGHORN:
        disable.append("local-storage")  # Longhorn's class is the one default StorageClass
    options: dict[str, Any] = {
        "tls-san": sans,
        "cluster-cidr": str(net.pod_cidr),
        "service-cidr": str(net.service_cidr),
        "cluster-dns": str(net.cluster_dns),
        "flannel-backend": "none",
        "disable-network-policy": True,
        "disable-kube-proxy": True,
        "disable": disable,
    }
    if listen_port(cell.network) != K3S_LOCAL_PORT:
        options["https-listen-port"] = listen_port(cell.network)
    options["write-kubeconfig-mode"] = "0600"
    options.update(etcd_snapshot_options(cell))
    return options


def render_config(config: dict[str, Any]) -> str:
    """``config.yaml`` text: block-style YAML in the mapping's own (stable) key order."""
    # libyaml's emitter writes the same text as PyYAML's pure-Python one, several times faster (a fleet has thousands)
    text = yaml.dump(config, Dumper=yaml.CSafeDumper, sort_keys=False, default_flow_style=False, allow_unicode=True)
    return _heredoc_safe(text)


def _heredoc_safe(text: str) -> str:
    """``text``, which the install script embeds in a quoted heredoc; raises ``ValueError`` when a line of it
    would end the heredoc early."""
    if any(line.strip() == _HEREDOC for line in text.splitlines()):
        raise ValueError(f"a line of a node file equals the script's heredoc delimiter {_HEREDOC!r}")
    return text


K3S_SCRIPTS_SOURCE = "gpucell/k3s/_scripts.py"
"""The source path the install, uninstall and kubeconfig scripts name in their header."""


def _service(role: NodeRole) -> str:
    return "k3s" if role is NodeRole.SERVER else "k3s-agent"


def install_script(
    cell: NodeViews,
    role: NodeRole,
    host: Host,
    config_yaml: str,
    files: Sequence[NodeFile] = (),
    *,
    host_setup: str = "",
) -> str:
    """The bash script that installs or reconciles k3s on one node (create and update run the same one).

    Reads the cluster token from stdin into ``/etc/rancher/k3s/token`` (0600, root), stages ``config_yaml`` (for
    ``/etc/rancher/k3s/config.yaml``) and ``files`` (the CIS profile's and sign-in's,
    :func:`gpucell.k3s.hardening.node_files`), and, unless the installed version is the pinned one, every staged
    file equals the node's (sha256) and the service is active (then it exits 0 without restarting), fetches the
    release's ``install.sh`` from its tag (:func:`gpucell.spec.k3s.installer_url`), refuses it when its sha256 is
    not the pinned one (``k3s.installerSha256`` or :data:`gpucell.spec.k3s.INSTALLER_SHA256`), writes the files
    (root-owned; config and token 0600), applies the sysctl file when there is one, and runs the installer with
    ``INSTALL_K3S_VERSION`` and ``INSTALL_K3S_EXEC=server|agent``. When the files differ from the node's only in
    options k3s reads at registration (:func:`registration_only_options`), the new config is written without a
    restart.

    After a (re)install a server waits up to :data:`READY_TIMEOUT_SECONDS` for ``/readyz``; then every node waits
    as long for its Node object, through its own kubelet's kubeconfig: Ready on the pinned version when it was
    Ready before the restart, registered when it is new (nodes become Ready only once Cilium runs, which is
    installed after the servers). A server told to initialise etcd (``cluster-init``) that has no etcd data of
    its own refuses to start when the API endpoint already answers (``/cacerts``): it would start a second
    cluster.

    On a server whose embedded etcd exists, a ``secrets-encryption`` setting other than the one the cluster was
    initialised with (told by ``server/cred/encryption-config.json``) is refused before anything changes: k3s
    cannot switch it on a running cluster.

    A host whose ``/etc/rancher/k3s/config.yaml`` names another node was renamed in config at the same address:
    an agent joins again under the new name (the old name's :func:`uninstall_script` then keeps k3s), a server
    refuses before anything changes, naming the two-step way out (remove it, then add it under the new name),
    since its etcd member cannot be renamed in place.

    When the node's ``kubelet-arg`` entries that the CPU and memory manager checkpoints depend on
    (:data:`KUBELET_STATE_ARGS`, compared as a sorted set) differ from the installed config's - a topology
    profile added, changed or removed - the script stops the k3s service and removes
    ``/var/lib/kubelet/cpu_manager_state`` and ``memory_manager_state`` before writing the new config and
    restarting, since the kubelet will not start with a policy other than its checkpoint's. Draining comes before
    (the node's ``-prepare`` command, see :mod:`gpucell.k3s._maintenance_scripts`), as the Kubernetes docs ask.
    Raises ``KeyError`` when ``versions.k3s`` has no pinned installer checksum (the spec
    refuses such a cell). The script exits non-zero on any failure.

    ``host_setup`` (:func:`gpucell.k3s._host_setup.host_setup` of the node's pool) runs first, before anything is
    written: checks of the host's memory, hugepages and kernel that stop the script with the reason, and host
    services such as the SR-IOV vGPU typing service. Then, before anything changes, the host's clock is compared
    with the cell's API server's (the ``Date`` of its ``/cacerts`` answer; skipped while none answers): more than
    :data:`MAX_CLOCK_SKEW_SECONDS` off, the script exits 1 with the measured skew and the way out (time sync). A
    node already on ``versions.k3s`` with this config whose kubelet still reports another version (an upgrade killed
    between the installer's binary swap and its restart) gets its service restarted, once a run, and is waited for.

    The installer runs in the background while k3s's journal is read every 5 s: a host the cell refuses the node
    password of (``Node password rejected``: the cell holds another machine's under this name, i.e. the host was
    re-imaged; k3s-io/k3s#6054) would keep k3s's ``Type=notify`` start, and so the installer, waiting for ever. The
    script then stops the service and exits 1 naming the way out (remove the node in one ``pulumi up``, add it back
    in the next: docs/operations.md, "A re-imaged host"). An installer that fails ends the script with its status.
    """
    server = role is NodeRole.SERVER
    title = f"gpucell: install k3s {cell.versions.k3s} ({'server' if server else 'agent'}) on {host.name}"
    staged = "".join(
        f"cat >\"$work/file-{index}\" <<'{_HEREDOC}'\n{_heredoc_safe(file.content)}{_HEREDOC}\n"
        for index, file in enumerate(files, start=1)
    )
    guard = ""
    if server:
        guard = render(
            "k3s/encryption-guard",
            want=str(cell.k3s.encrypts_secrets).lower(),
            etcd_dir=ETCD_DATA_DIR,
            encryption_config=ENCRYPTION_CONFIG,
        )
    after_files = ""
    if server and cell.k3s.cis:
        after_files += f"as_root install -d -m 0700 {AUDIT_LOG_DIR}  # the audit log's directory\n"
    if any(file.path == SYSCTL_PATH for file in files):
        after_files += f"as_root sysctl -p {SYSCTL_PATH} >/dev/null  # before the kubelet checks them\n"
    timing = {"attempts": READY_TIMEOUT_SECONDS // 5, "timeout": READY_TIMEOUT_SECONDS}
    waits = (render("k3s/wait-api", **timing) if server else "") + render("k3s/wait-node", **timing)
    vip = cell.network.api_vip
    init = server and host.name == cell.init_server
    static_pods = join_wait = ""
    tail = ("wait_api\n" if server else "") + 'wait_node "$was"\n'
    if vip is not None:
        waits += render("k3s/wait-vip", **timing, interface=shlex.quote(vip.interface))
        if init:
            tail = "wait_api\nwait_vip\n" + 'wait_node "$was"\n'
        else:
            join_wait = "wait_vip  # joins through the VIP: nothing changes before it answers\n\n"
    if server:
        path = shlex.quote(kube_vip.MANIFEST_PATH)
        static_pods = (
            render("k3s/write-vip", manifest=_heredoc_safe(kube_vip.manifest(cell)), path=path)
            if vip is not None
            else render("k3s/remove-vip", path=path)
        )
    body = render(
        "k3s/install",
        version=shlex.quote(cell.versions.k3s),
        role="server" if server else "agent",
        service=_service(role),
        node_name=shlex.quote(host.name),
        config_path=CONFIG_PATH,
        token_path=TOKEN_PATH,
        installer_url=shlex.quote(installer_url(cell.versions.k3s)),
        installer_sha256=cell.k3s.installer_checksum(cell.versions.k3s),
        config=config_yaml,
        kubelet_dir=KUBELET_DIR,
        node_kubeconfig=KUBELET_KUBECONFIG_PATH,
        etcd_data_dir=ETCD_DATA_DIR,
        api_url=shlex.quote(api_server_url(cell)),
        max_skew=MAX_CLOCK_SKEW_SECONDS,
        state_args="|".join(KUBELET_STATE_ARGS),
        state_files=" ".join(f'"$KUBELET_DIR/{name}"' for name in KUBELET_STATE_FILES),
        encryption_guard=guard,
        read_node_name=render("k3s/read-node-name", config_path='"$CONFIG_FILE"'),
        staged_files=staged,
        managed="".join(f" {shlex.quote(file.path)}" for file in files),
        staged="".join(f' "$work/file-{index}"' for index in range(1, len(files) + 1)),
        modes="".join(f" {file.mode}" for file in files),
        after_files=after_files,
        static_pods=static_pods,
        join_wait=join_wait,
        waits=waits,
        tail=tail,
    )
    return render("preamble", title=title, source=K3S_SCRIPTS_SOURCE) + host_setup + "\n" + body


def uninstall_script(role: NodeRole, node_name: str) -> str:
    """The bash script run when the node's install command is deleted: k3s's own ``k3s-uninstall.sh`` (servers)
    or ``k3s-agent-uninstall.sh``.

    By then the node is drained and cordoned (its ``-settle`` command's delete ran first, see
    :mod:`gpucell.k3s._maintenance_scripts`). On a server the script first runs ``k3s kubectl --kubeconfig
    /etc/rancher/k3s/k3s.yaml delete node <node_name> --wait=false`` so that k3s removes the server's etcd
    member, and waits up to :data:`READY_TIMEOUT_SECONDS` for the Node to be gone (tolerating failure, e.g. an
    API that is already down): servers leave etcd one after another, as their commands are chained. An agent is
    only uninstalled: it cannot delete its own Node (the kubelet's ``system:node:<name>`` identity may not delete
    nodes, ``NodeRules`` in kubernetes ``plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go``), so the
    node's ``-prepare`` command deletes it afterwards, from a server.

    Before k3s's uninstall script, every pod is stopped (``k3s-killall.sh``) and Cilium's host state removed (its
    links, iptables rules, attached BPF programs and pins, cgroup2 mount: k3s-io/k3s#8347), each step tolerated.
    Succeeds when k3s is already gone, so a half-installed node can still be deleted. Leaves k3s installed (exit
    0) when the host's ``/etc/rancher/k3s/config.yaml`` names another node: the host was renamed in config at the
    same address, and Pulumi ran the new name's install before this delete (an agent joins again under its new
    name; a server refuses the rename in :func:`install_script`). On a fresh host (re-imaged: no uninstaller) it
    exits 0 saying there is nothing to uninstall; the install command is ``deleteBeforeReplace``
    (:mod:`gpucell.k3s.cluster`), so a replacement's delete never meets the installation the replacement made.
    """
    service = _service(role)
    path = f"/usr/local/bin/{service}-uninstall.sh"
    body = render("k3s/cilium-cleanup", killall=shlex.quote("/usr/local/bin/k3s-killall.sh")) + render(
        "k3s/uninstall", path=path
    )
    if role is NodeRole.SERVER:
        leave = render(
            "k3s/leave-etcd",
            node_name=shlex.quote(node_name),
            kubeconfig=KUBECONFIG_PATH,
            attempts=READY_TIMEOUT_SECONDS // 5,
            timeout=READY_TIMEOUT_SECONDS,
        )
        body = leave + body
    body = (
        render(
            "k3s/renamed-guard",
            read_node_name=render("k3s/read-node-name", config_path=CONFIG_PATH),
            node_name=shlex.quote(node_name),
        )
        + body
    )
    return (
        render("preamble", title=f"gpucell: uninstall {service} from {node_name}", source=K3S_SCRIPTS_SOURCE)
        + "\n"
        + body
    )


def kubeconfig_script() -> str:
    """The bash script that prints a server's admin kubeconfig (``/etc/rancher/k3s/k3s.yaml``, root-only)."""
    return (
        render("preamble", title="gpucell: print the k3s admin kubeconfig", source=K3S_SCRIPTS_SOURCE)
        + "\n"
        + render("k3s/kubeconfig", path=KUBECONFIG_PATH)
    )


def remote(script: str) -> str:
    """The command line pulumi-command sends: ``bash -c '<script>'``.

    The SSH server runs the command through the login shell, which may be a POSIX ``sh`` without
    ``pipefail``; handing the script to bash explicitly keeps one dialect. ``shlex.split`` reverses it.
    """
    return f"bash -c {shlex.quote(script)}"


def rewrite_kubeconfig(kubeconfig: str | None, cell: NodeViews) -> str:
    """``kubeconfig`` with each ``server: https://127.0.0.1:<listen port>`` line pointed at :func:`api_server_url`.

    ``kubeconfig`` is the admin kubeconfig k3s wrote on the first server (see :func:`kubeconfig_script`).
    Raises ``ValueError`` naming that server and the expected line when ``kubeconfig`` is ``None``, empty or
    blank, or when no such ``server:`` line was found: handing pulumi-kubernetes an empty or unrewritten
    kubeconfig would make it fall back to the ambient ``~/.kube/config`` (or talk to 127.0.0.1), i.e. deploy
    to whatever cluster the operator's machine points at.
    """
    local = f"https://127.0.0.1:{listen_port(cell.network)}"
    url = api_server_url(cell)
    _, first = cell.servers[0]
    source = f"{KUBECONFIG_PATH} of the first server {first.name} ({first.address})"
    if kubeconfig is None or not kubeconfig.strip():
        raise ValueError(f"the admin kubeconfig read from {source} is empty; expected one with 'server: {local}'")
    line = re.compile(rf"^([ \t]*server:[ \t]*){re.escape(local)}[ \t]*$", re.MULTILINE)
    rewritten, count = line.subn(lambda match: match.group(1) + url, kubeconfig)
    if count == 0:
        servers = re.findall(r"^[ \t]*server:[ \t]*(\S*)", kubeconfig, re.MULTILINE)
        raise ValueError(
            f"the admin kubeconfig read from {source} has no 'server: {local}' line to point at {url}; "
            f"its servers are {servers}"
        )
    return rewritten
