"""What K3sCluster runs on each node: the k3s config file and the bash scripts, rendered as plain text.

Nothing here touches Pulumi: every function is a pure ``spec -> str`` so the offline plan can write the files
(``node_files``) and the tests can shellcheck them. No function ever receives the cluster token: it reaches
nodes only on the command's stdin (see :mod:`gpucell.k3s`).

Upstream sources of the values:
- k3s options, as config-file keys: https://docs.k3s.io/cli/server and https://docs.k3s.io/cli/agent
  (``token-file``, ``cluster-init``, ``flannel-backend``, ``disable-kube-proxy``,
  ``disable-network-policy``...);
  config file location and list syntax: https://docs.k3s.io/installation/configuration#configuration-file
- the installer (https://get.k3s.io, k3s-io/k3s ``install.sh``): ``INSTALL_K3S_VERSION``, ``INSTALL_K3S_EXEC``
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

import re
import shlex
from typing import Any

import yaml

from gpucell import vgpu_sriov
from gpucell.gpu_catalog import VgpuFramework
from gpucell.spec import CellSpec, GpuMode, Host, NodePool, NodeRole, StorageBackend
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
    "K3S_LOCAL_PORT",
    "KUBECONFIG_PATH",
    "KUBELET_DIR",
    "TOKEN_PATH",
    "api_server_url",
    "install_script",
    "kubeconfig_script",
    "listen_port",
    "managed_labels",
    "node_config",
    "remote",
    "render_config",
    "rewrite_kubeconfig",
    "uninstall_script",
]

CONFIG_PATH = "/etc/rancher/k3s/config.yaml"
"""Where k3s reads its options from (the default ``--config``)."""
TOKEN_PATH = "/etc/rancher/k3s/token"
"""Root-only file holding the cluster token (``token-file``)."""
KUBECONFIG_PATH = "/etc/rancher/k3s/k3s.yaml"
"""The admin kubeconfig every k3s server writes (mode set by ``write-kubeconfig-mode``)."""
KUBELET_DIR = "/var/lib/kubelet"
"""The kubelet's ``root-dir`` under (rootful) k3s; holds ``cpu_manager_state`` and ``memory_manager_state``."""
KUBELET_STATE_FILES = ("cpu_manager_state", "memory_manager_state")
"""Checkpoints the kubelet validates against its CPU / memory manager policy at start (it refuses to start on a
mismatch)."""
K3S_LOCAL_PORT = 6443
"""k3s's default ``https-listen-port``; the admin kubeconfig points at ``https://127.0.0.1:<this>``."""
READY_TIMEOUT_SECONDS = 300
"""How long a server's script waits for the API server's ``/readyz`` after (re)starting k3s, seconds."""
_HEREDOC = "GPUCELL_K3S_CONFIG"

# -- addresses -------------------------------------------------------------------------------------
def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def api_server_url(cell: CellSpec) -> str:
    """``https://<api_endpoint>:<api_port>``: what agents, joining servers and the kubeconfig use."""
    return f"https://{_host_port(cell.api_endpoint, cell.network.api_port)}"


def listen_port(cell: CellSpec) -> int:
    """The port k3s servers listen on (``https-listen-port``).

    Without ``network.apiEndpoint`` the endpoint *is* the single server, so it listens on ``apiPort``. With
    an endpoint (VIP or load balancer) the servers keep k3s's default 6443 and the endpoint maps ``apiPort``
    to it.
    """
    return cell.network.api_port if cell.network.api_endpoint is None else K3S_LOCAL_PORT


# -- config.yaml -----------------------------------------------------------------------------------
def managed_labels(
    pool_name: str, pool: NodePool, vgpu_framework: VgpuFramework | None = None
) -> dict[str, str]:
    """The node labels gpucell sets on a pool's nodes, before the pool's own ``labels``.

    ``gpucell.io/pool`` and ``gpucell.io/role`` on every node (``node-role.kubernetes.io/*`` cannot be
    self-applied by a kubelet under the NodeRestriction admission plugin, so our own prefix is used);
    ``nvidia.com/gpu.workload.config=<gpuMode>`` on GPU nodes (GPU Operator sandbox workloads) and
    ``nvidia.com/mig.config=<migConfig>`` where a MIG layout is set (read by the GPU Operator's MIG manager)
    and ``nvidia.com/vgpu.config=<vgpuProfile>`` on vm-vgpu nodes (read by the GPU Operator's vGPU device
    manager, whose default config names one layout per vGPU type, e.g. ``L40S-12Q``). The spec rejects pool
    ``labels`` that use these keys (``MANAGED_LABELS``).

    A ``vm-vgpu`` pool whose boards expose SR-IOV vGPUs (``vgpu_framework`` ``sriov``, see
    :func:`gpucell.spec.hardware.pool_vgpu_framework`) gets no ``nvidia.com/vgpu.config`` but
    :func:`gpucell.vgpu_sriov.node_labels`: the GPU Operator's mdev-only operands off on those nodes.

    A ``dra`` pool runs the operator's ``container`` workload (``nvidia.com/gpu.workload.config=container``: driver,
    toolkit, GFD, validator) with :data:`gpucell.spec.pools.DRA_DISABLED_OPERANDS` ``=false`` (device plugin, DCGM,
    DCGM exporter; the operator keeps a non-empty state label it finds) and ``gpucell.io/dra-kubelet-plugin=true``
    (where :mod:`gpucell.dra_driver` runs its kubelet plugin). The sandbox device plugin and the vfio-manager need no
    label: the operator deploys them only on ``vm-passthrough``/``vm-vgpu`` nodes, and deletes their state labels
    elsewhere.
    """
    labels = {POOL_LABEL: pool_name, ROLE_LABEL: pool.role.value}
    if pool.role is NodeRole.GPU:
        labels[WORKLOAD_LABEL] = pool.mode.workload_config
        if pool.mode is GpuMode.DRA:
            labels.update(dict.fromkeys(DRA_DISABLED_OPERANDS, "false"))
            labels[DRA_KUBELET_PLUGIN_LABEL] = "true"
        if pool.mig_config is not None:
            labels[MIG_LABEL] = pool.mig_config
        if pool.vgpu_profile is not None and vgpu_framework is VgpuFramework.SRIOV:
            labels.update(vgpu_sriov.node_labels())
        elif pool.vgpu_profile is not None:
            labels[VGPU_LABEL] = pool.vgpu_profile
    return labels


def _node_labels(cell: CellSpec, pool_name: str, pool: NodePool) -> list[str]:
    framework = None
    if pool.role is NodeRole.GPU and pool.mode is GpuMode.VM_VGPU:
        framework = VgpuFramework.SRIOV if pool_name in cell.vgpu_pools(VgpuFramework.SRIOV) else VgpuFramework.MDEV
    labels = managed_labels(pool_name, pool, framework)
    return [f"{k}={v}" for k, v in labels.items()] + [f"{k}={pool.labels[k]}" for k in sorted(pool.labels)]


def node_config(
    cell: CellSpec, pool_name: str, pool: NodePool, host: Host, *, first_server: bool
) -> dict[str, Any]:
    """The k3s options of one node as an ordered mapping (rendered by :func:`render_config`).

    Every node: ``node-name``, ``node-ip``, ``token-file``, ``node-label`` (see :func:`managed_labels`, then
    the pool's ``labels`` sorted by key), ``node-taint`` (the pool's ``taints``, when any) and ``kubelet-arg``
    (``pool.topology.kubelet_args()``, when the pool has a topology profile).
    The first server gets ``cluster-init: true`` (it initialises embedded etcd); every other node gets
    ``server: <api_server_url>``. Servers also get the cluster-wide options: ``tls-san`` (apiEndpoint plus
    ``network.tlsSans``), pod/service CIDRs and cluster DNS, no flannel / network policy controller /
    kube-proxy (Cilium replaces all three), ``disable`` traefik and servicelb (plus local-storage with
    Longhorn), ``https-listen-port`` when it is not 6443 (see :func:`listen_port`) and
    ``write-kubeconfig-mode: "0600"``. ``first_server`` must be False for agents.
    """
    is_server = pool.role is NodeRole.SERVER
    if first_server and not is_server:
        raise ValueError("only a server can be the first server")
    config: dict[str, Any] = {"node-name": host.name, "node-ip": str(host.address)}
    if first_server:
        config["cluster-init"] = True
    else:
        config["server"] = api_server_url(cell)
    config["token-file"] = TOKEN_PATH
    config["node-label"] = _node_labels(cell, pool_name, pool)
    if pool.taints:
        config["node-taint"] = list(pool.taints)
    if pool.topology is not None:
        config["kubelet-arg"] = pool.topology.kubelet_args()
    if is_server:
        config.update(_server_options(cell))
    return config


def _server_options(cell: CellSpec) -> dict[str, Any]:
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
    if listen_port(cell) != K3S_LOCAL_PORT:
        options["https-listen-port"] = listen_port(cell)
    options["write-kubeconfig-mode"] = "0600"
    return options


def render_config(config: dict[str, Any]) -> str:
    """``config.yaml`` text: block-style YAML in the mapping's own (stable) key order."""
    text = yaml.safe_dump(config, sort_keys=False, default_flow_style=False, allow_unicode=True)
    if any(line.strip() == _HEREDOC for line in text.splitlines()):
        raise ValueError(f"a k3s config line equals the script's heredoc delimiter {_HEREDOC!r}")
    return text


# -- scripts ---------------------------------------------------------------------------------------
_PREAMBLE = """\
#!/usr/bin/env bash
# {title}
# Rendered by gpucell (components/_k3s_scripts.py); run over SSH by pulumi-command.
set -euo pipefail
umask 077

# Root, or password-less sudo for the SSH user (sudo -n fails instead of waiting for a password).
as_root() {{
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  else
    sudo -n "$@"
  fi
}}
"""

_INSTALL_BODY = """\
readonly K3S_VERSION={version}
readonly K3S_EXEC={role}
readonly K3S_SERVICE={service}
readonly K3S_BIN=/usr/local/bin/k3s
readonly CONFIG_DIR=/etc/rancher/k3s
readonly CONFIG_FILE={config_path}
readonly TOKEN_FILE={token_path}
readonly INSTALLER_URL=https://get.k3s.io
readonly KUBELET_DIR={kubelet_dir}

# The kubelet-arg entries of the k3s config on stdin, one a line and sorted; nothing when it has none.
kubelet_args() {{
  awk '/^kubelet-arg:/ {{ in_list = 1; next }} in_list && /^[- ]/ {{ print; next }} {{ in_list = 0 }}' \\
    | LC_ALL=C sort
}}

as_root install -d -m 0755 "$CONFIG_DIR"

# The cluster token arrives on stdin (a Pulumi secret) and goes straight into a root-only file: it is never
# in this script, an argument, the environment or the output. This must stay the first command reading stdin.
as_root install -m 0600 /dev/null "$TOKEN_FILE.new"
as_root tee "$TOKEN_FILE.new" >/dev/null
as_root mv -f "$TOKEN_FILE.new" "$TOKEN_FILE"
if ! as_root test -s "$TOKEN_FILE"; then
  echo "gpucell: no cluster token on stdin" >&2
  exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cat >"$work/config.yaml" <<'{heredoc}'
{config}{heredoc}

# Idempotence: the pinned version, running with this exact config, is left alone (no restart).
want_sum="$(sha256sum "$work/config.yaml" | cut -d ' ' -f 1)"
have_sum=""
if as_root test -f "$CONFIG_FILE"; then
  have_sum="$(as_root sha256sum "$CONFIG_FILE" | cut -d ' ' -f 1)"
fi
have_version=""
if [ -x "$K3S_BIN" ]; then
  # "k3s version v1.34.2+k3s1 (abcdef12)"; a binary that cannot run counts as not installed.
  have_version="$("$K3S_BIN" --version 2>/dev/null | awk 'NR == 1 {{ print $3 }}')" || have_version=""
fi
if [ "$have_version" = "$K3S_VERSION" ] && [ "$have_sum" = "$want_sum" ] \\
  && as_root systemctl is-active --quiet "$K3S_SERVICE"; then
  echo "gpucell: k3s $K3S_VERSION already runs this config; nothing to do"
  exit 0
fi

# Fetched before anything is stopped, so that a download failure leaves the node as it was.
curl -sfL --retry 3 "$INSTALLER_URL" -o "$work/install.sh"

# A different kubelet-arg set (a changed topology profile) must not meet the kubelet's old checkpoints: the
# kubelet refuses to start when its CPU or memory manager policy differs from the one in its state file. As the
# Kubernetes docs prescribe: stop the kubelet (the whole k3s service), remove the state files, and start it with
# the new options (the installer below restarts the service). Unchanged args leave the state files alone.
want_kubelet_args="$(kubelet_args <"$work/config.yaml")"
have_kubelet_args=""
if as_root test -f "$CONFIG_FILE"; then
  have_kubelet_args="$(as_root cat "$CONFIG_FILE" | kubelet_args)"
fi
if [ "$want_kubelet_args" != "$have_kubelet_args" ]; then
  # Stopped even when failed or restarting (systemd would restart it with the old config and old checkpoint).
  if as_root systemctl cat "$K3S_SERVICE" >/dev/null 2>&1; then
    as_root systemctl stop "$K3S_SERVICE"
  fi
  as_root rm -f {state_files}
  echo "gpucell: kubelet-arg changed; removed the kubelet's CPU and memory manager state"
fi

# (Re)install: the installer writes the systemd unit and restarts the service, which rereads the config.
as_root install -m 0600 "$work/config.yaml" "$CONFIG_FILE"
as_root env INSTALL_K3S_VERSION="$K3S_VERSION" INSTALL_K3S_EXEC="$K3S_EXEC" sh "$work/install.sh" </dev/null
echo "gpucell: k3s $K3S_VERSION ($K3S_EXEC) installed"
"""

_WAIT_READY = """\

# A server is done when its API server answers; the next server and the agents join through it.
for _ in $(seq 1 {attempts}); do
  if as_root "$K3S_BIN" kubectl get --raw=/readyz >/dev/null 2>&1; then
    echo "gpucell: API server ready"
    exit 0
  fi
  sleep 5
done
echo "gpucell: API server not ready after {timeout} s" >&2
exit 1
"""

_LEAVE_ETCD = """\
readonly K3S_BIN=/usr/local/bin/k3s
readonly NODE_NAME={node_name}

# Leave etcd before going away: deleting this server's Node object (with its own admin kubeconfig) makes k3s
# remove its etcd member, so the remaining servers keep their quorum. Never --force, which skips the finalizer
# that does it. Tolerated failure (API already down, node already gone): the uninstall below must still run.
if [ -x "$K3S_BIN" ]; then
  if as_root "$K3S_BIN" kubectl --kubeconfig {kubeconfig} --request-timeout=30s \\
    delete node "$NODE_NAME" --wait=false; then
    echo "gpucell: deleted node $NODE_NAME; k3s removes its etcd member"
  else
    echo "gpucell: could not delete node $NODE_NAME; check the etcd member list on the other servers" >&2
  fi
fi

"""

_UNINSTALL_BODY = """\
readonly UNINSTALL={path}
if [ -x "$UNINSTALL" ]; then
  as_root "$UNINSTALL"
else
  echo "gpucell: $UNINSTALL not found; k3s is not installed here"
fi
"""

_KUBECONFIG_BODY = """\
as_root cat {path}
"""


def _service(role: NodeRole) -> str:
    return "k3s" if role is NodeRole.SERVER else "k3s-agent"


def install_script(cell: CellSpec, role: NodeRole, host: Host, config_yaml: str, *, host_setup: str = "") -> str:
    """The bash script that installs or reconciles k3s on one node (create and update run the same one).

    Reads the cluster token from stdin into ``/etc/rancher/k3s/token`` (0600, root), writes ``config_yaml`` to
    ``/etc/rancher/k3s/config.yaml`` and runs the official installer with ``INSTALL_K3S_VERSION`` and
    ``INSTALL_K3S_EXEC=server|agent`` - unless the installed version is the pinned one, the config's sha256 is
    unchanged and the service is active, in which case it exits 0 without restarting. Token and config files
    are mode 0600, owned by root. A server's script then
    waits up to :data:`READY_TIMEOUT_SECONDS` for ``/readyz``. Raises nothing; the script exits non-zero on
    any failure.

    When the node's ``kubelet-arg`` entries (as a sorted set) differ from those of the installed config - a
    topology profile added, changed or removed - the script stops the k3s service and removes
    ``/var/lib/kubelet/cpu_manager_state`` and ``memory_manager_state`` before writing the new config and
    restarting, since the kubelet will not start with a policy other than its checkpoint's. It does not drain
    the node: drain it first (``kubectl drain``) when it runs pods with exclusive CPUs or pinned memory, as the
    Kubernetes docs ask.

    ``host_setup`` (:func:`gpucell._host_setup.host_setup` of the node's pool) runs first, before anything is
    written: checks of the host's memory, hugepages and kernel that stop the script with the reason, and host
    services such as the SR-IOV vGPU typing service.
    """
    server = role is NodeRole.SERVER
    title = f"gpucell: install k3s {cell.versions.k3s} ({'server' if server else 'agent'}) on {host.name}"
    body = _INSTALL_BODY.format(
        version=shlex.quote(cell.versions.k3s),
        role="server" if server else "agent",
        service=_service(role),
        config_path=CONFIG_PATH,
        token_path=TOKEN_PATH,
        heredoc=_HEREDOC,
        config=config_yaml,
        kubelet_dir=KUBELET_DIR,
        state_files=" ".join(f'"$KUBELET_DIR/{name}"' for name in KUBELET_STATE_FILES),
    )
    script = _PREAMBLE.format(title=title) + host_setup + "\n" + body
    if server:
        script += _WAIT_READY.format(attempts=READY_TIMEOUT_SECONDS // 5, timeout=READY_TIMEOUT_SECONDS)
    return script


def uninstall_script(role: NodeRole, node_name: str) -> str:
    """The bash script run on delete: k3s's own ``k3s-uninstall.sh`` (servers) or ``k3s-agent-uninstall.sh``.

    On a server it first runs ``k3s kubectl --kubeconfig /etc/rancher/k3s/k3s.yaml delete node <node_name>
    --wait=false`` so that k3s removes the server's etcd member (tolerating failure, e.g. an API that is
    already down). The member is removed asynchronously, by whichever server runs k3s's etcd controller, so
    remove servers **one at a time** (one ``pulumi up`` per removed server, checking that ``kubectl get nodes``
    no longer lists it) and keep an odd number of them: two servers removed in one run can leave a dead
    member in etcd and cost the quorum.

    An agent is only uninstalled: its Node object stays (``NotReady``) until an administrator deletes it
    (``kubectl drain`` and ``kubectl delete node <name>``). The agent cannot do it itself: it holds only the
    kubelet's credentials (``system:node:<name>``), and the Kubernetes node RBAC rules (``NodeRules`` in
    kubernetes ``plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go``) allow create/get/list/watch/
    update/patch on nodes, not delete.

    Succeeds when k3s is already gone, so a half-installed node can still be deleted.
    """
    service = _service(role)
    path = f"/usr/local/bin/{service}-uninstall.sh"
    body = _UNINSTALL_BODY.format(path=path)
    if role is NodeRole.SERVER:
        body = _LEAVE_ETCD.format(node_name=shlex.quote(node_name), kubeconfig=KUBECONFIG_PATH) + body
    return _PREAMBLE.format(title=f"gpucell: uninstall {service} from {node_name}") + "\n" + body


def kubeconfig_script() -> str:
    """The bash script that prints a server's admin kubeconfig (``/etc/rancher/k3s/k3s.yaml``, root-only)."""
    return (
        _PREAMBLE.format(title="gpucell: print the k3s admin kubeconfig")
        + "\n"
        + _KUBECONFIG_BODY.format(path=KUBECONFIG_PATH)
    )


def remote(script: str) -> str:
    """The command line pulumi-command sends: ``bash -c '<script>'``.

    The SSH server runs the command through the login shell, which may be a POSIX ``sh`` without
    ``pipefail``; handing the script to bash explicitly keeps one dialect. ``shlex.split`` reverses it.
    """
    return f"bash -c {shlex.quote(script)}"


def rewrite_kubeconfig(kubeconfig: str | None, cell: CellSpec) -> str:
    """``kubeconfig`` with each ``server: https://127.0.0.1:<listen port>`` line pointed at :func:`api_server_url`.

    ``kubeconfig`` is the admin kubeconfig k3s wrote on the first server (see :func:`kubeconfig_script`).
    Raises ``ValueError`` naming that server and the expected line when ``kubeconfig`` is ``None``, empty or
    blank, or when no such ``server:`` line was found: handing pulumi-kubernetes an empty or unrewritten
    kubeconfig would make it fall back to the ambient ``~/.kube/config`` (or talk to 127.0.0.1), i.e. deploy
    to whatever cluster the operator's machine points at.
    """
    local = f"https://127.0.0.1:{listen_port(cell)}"
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
