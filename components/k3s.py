"""K3sCluster: k3s with embedded etcd on a cell's hosts, installed over SSH with pulumi-command.

Order: the first server initialises etcd (``cluster-init``); the other servers join one after another, each
after the previous one answers; agents (GPU and CPU pools) join in parallel once the *last* server answers.
Pulumi orders updates along the same edges, so an upgrade (a new ``versions.k3s``) also goes server by server
and reaches the agents only after every server runs the new version: the Kubernetes version-skew policy
forbids a kubelet newer than any API server (https://kubernetes.io/releases/version-skew-policy/).
Each node's options live in ``/etc/rancher/k3s/config.yaml`` (see :mod:`gpucell._k3s_scripts`); the cluster
token reaches nodes only on the command's stdin.

Re-run semantics (checked against pulumi-command 1.2.1: the Python SDK adds
``replace_on_changes=["triggers[*]"]`` to every ``remote.Command``, and the provider's ``CommandInputs`` tag
only ``triggers`` with ``replaceOnChanges`` - ``connection`` lost that tag in the 1.x rewrite, see
pulumi/pulumi-command ``provider/pkg/provider/common/inputs.go`` and ``remote/command.go``):

- A *replacement* runs the new ``create`` and then the old ``delete``; for a node that would run
  ``k3s-uninstall.sh`` (wiping etcd or the node's state) right after the reinstall. So node commands have **no
  triggers**: nothing about a node forces replacement.
- Any other input change is an *update*, which runs ``update`` - the same idempotent script as ``create``. The
  k3s version and the node's whole config are literally in that script, so changing either changes ``create``/
  ``update`` and the script (re)installs and restarts k3s. A change of the SSH address, user, port or key
  alone is also an update; the script then finds the pinned version running the same config and exits 0
  without restarting. (An address change also changes ``node-ip`` in the config, so k3s restarts with the new
  IP; it is never uninstalled.)
- Deleting a node (removing the host from its pool, or destroying the cell) runs ``delete``: the k3s uninstall
  script. Pulumi deletes in reverse dependency order, so agents go before servers and later servers before the
  first one. A server first deletes its own Node object so that k3s removes its etcd member; that happens
  asynchronously, so remove servers one at a time (one ``pulumi up`` each) to keep the etcd quorum. A removed
  agent's Node object stays, ``NotReady``, until an administrator deletes it (see
  :func:`gpucell._k3s_scripts.uninstall_script` for why the agent cannot).
- Changing a pool's topology profile (its ``kubelet-arg`` set) makes the install script stop k3s and remove
  the kubelet's CPU/memory manager state files before restarting (see
  :func:`gpucell._k3s_scripts.install_script`); drain such a node first.

The kubeconfig command reads the file once, when it is created, and has no triggers either: its inputs do not
change when servers are reinstalled. Re-reading it would make its ``stdout`` unknown in the preview, and
pulumi-kubernetes conservatively plans a provider replacement - so a replacement of every Kubernetes resource
of the cell - for an unknown kubeconfig (``DiffConfig`` in pulumi/pulumi-kubernetes, added in PR #577). The
CA and admin client certificate survive k3s upgrades and restarts; should the stored one ever be stale (the
client certificate expires after a year), ``pulumi up --replace <urn of <name>-kubeconfig>`` reads it again.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import pulumi
from pulumi_random import RandomPassword

from gpucell import _k3s_scripts as scripts
from gpucell._component import CellComponent
from gpucell._host_setup import host_setup
from gpucell.k3s_hardening import node_files
from gpucell.spec import CellSpec, Host, NodeRole

with warnings.catch_warnings():
    # pulumi_command.remote's __init__ imports its deprecated CopyFile module, which warns at import time;
    # we do not use CopyFile, and the test suite turns warnings into errors.
    warnings.simplefilter("ignore", DeprecationWarning)
    from pulumi_command.remote import Command, ConnectionArgs, Logging

__all__ = ["K3sCluster", "K3sClusterArgs", "NodeFiles"]

TOKEN_LENGTH = 64
"""Characters of the generated cluster token (letters and digits)."""


@dataclass(frozen=True)
class K3sClusterArgs:
    """Inputs of :class:`K3sCluster`."""

    cell: CellSpec
    """The region: its server and agent pools, network, versions and SSH defaults."""
    ssh_private_key: pulumi.Input[str]
    """PEM/OpenSSH private key for every node's SSH user; pass a Pulumi secret (``config.require_secret``)."""


@dataclass(frozen=True)
class NodeFiles:
    """What one node receives, as text; none of it contains the cluster token."""

    config_yaml: str
    """Content of ``/etc/rancher/k3s/config.yaml``."""
    install_script: str
    """The bash script run over SSH on create and update."""
    files: dict[str, str] = field(default_factory=dict)
    """Path -> content of the other files the script writes (the CIS profile's and sign-in's, see
    :func:`gpucell.k3s_hardening.node_files`)."""


class K3sCluster(CellComponent):
    """A k3s cluster (embedded etcd, no flannel/kube-proxy/traefik/servicelb) on the hosts of ``args.cell``.

    Children: ``<name>-token`` (``random.RandomPassword``), ``<name>-<host>`` per node (``command.remote.
    Command``: install on create/update, uninstall on delete) and ``<name>-kubeconfig`` (reads the admin
    kubeconfig on the first server after every server is installed).

    Order: servers in a chain (each after the previous one), then every agent after the last server, so that
    no kubelet is ever newer than an API server, on first install and on upgrades. Scale servers down one at
    a time; removed agents leave their Node object behind (see the module docstring).

    The kubeconfig is checked when it is read (not in a preview, where it is unknown): an empty one, or one
    without ``server: https://127.0.0.1:<listen port>``, fails the update with ``ValueError``
    (:func:`gpucell._k3s_scripts.rewrite_kubeconfig`) rather than let pulumi-kubernetes fall back to the
    ambient ``~/.kube/config``.
    """

    kubeconfig: pulumi.Output[str]
    """Admin kubeconfig (secret), server rewritten to :attr:`api_server_url`; unknown in a preview."""
    api_server_url: pulumi.Output[str]
    """``https://<apiEndpoint>:<apiPort>``."""

    servers_ready: pulumi.Resource
    """Depend on this to run after every server's API answers (the kubeconfig read runs after them all)."""
    agents: list[pulumi.Resource]
    """The agent install commands (GPU and CPU pools), in pool and host order; each after the last server."""
    node_files: dict[str, NodeFiles]
    """Host name -> files rendered for it (for the offline plan's ``--out``)."""

    def __init__(self, name: str, args: K3sClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("K3sCluster", name, opts)
        cell = args.cell
        self._cell = cell
        self._connection_key = args.ssh_private_key
        self.node_files = {}

        token = RandomPassword(f"{name}-token", length=TOKEN_LENGTH, special=False, opts=self.child())
        # stdin is the token's only way to a node; secret so that state and plans never show it.
        self._stdin: pulumi.Output[str] = pulumi.Output.secret(token.result)

        servers: list[Command] = []
        for index, (pool_name, host) in enumerate(cell.servers):
            after = [servers[-1]] if servers else []
            servers.append(self._node(name, pool_name, host, first=index == 0, after=after))

        # After the last server, which is after all the others: agents never run a newer kubelet than any API
        # server (version-skew policy), neither when first installed nor on an upgrade.
        self.agents = [
            self._node(name, pool_name, host, first=False, after=[servers[-1]])
            for pool_name, pool in cell.node_pools.items()
            if pool.role is not NodeRole.SERVER
            for host in pool.hosts
        ]

        first_pool, first_host = cell.servers[0]
        read = Command(
            f"{name}-kubeconfig",
            connection=self._connection(first_pool, first_host),
            create=scripts.remote(scripts.kubeconfig_script()),
            # The kubeconfig holds the cluster's admin client key: never logged, stdout stored as a secret,
            # and not fed back into the next run's environment.
            logging=Logging.NONE,
            add_previous_output_in_env=False,
            opts=self.child(depends_on=servers, additional_secret_outputs=["stdout"]),
        )
        self.servers_ready = read

        self.api_server_url = pulumi.Output.from_input(scripts.api_server_url(cell))
        self.kubeconfig = pulumi.Output.secret(
            read.stdout.apply(lambda text: scripts.rewrite_kubeconfig(text, cell))
        )
        self.register_outputs({"kubeconfig": self.kubeconfig, "apiServerUrl": self.api_server_url})

    def _connection(self, pool_name: str, host: Host) -> ConnectionArgs:
        ssh = self._cell.ssh_for(pool_name)
        return ConnectionArgs(
            host=str(host.address),
            port=ssh.port,
            user=ssh.user,
            private_key=pulumi.Output.secret(self._connection_key),
        )

    def _node(self, name: str, pool_name: str, host: Host, *, first: bool, after: list[Command]) -> Command:
        """One node's install command; ``after`` are the commands it must wait for."""
        cell = self._cell
        pool = cell.node_pools[pool_name]
        config_yaml = scripts.render_config(
            scripts.node_config(cell, pool_name, pool, host, first_server=first)
        )
        files = node_files(cell, server=pool.role is NodeRole.SERVER)
        install = scripts.install_script(
            cell, pool.role, host, config_yaml, files, host_setup=host_setup(cell, pool_name, pool)
        )
        self.node_files[host.name] = NodeFiles(config_yaml=config_yaml, install_script=install,
                                               files={file.path: file.content for file in files})
        command = scripts.remote(install)
        return Command(
            f"{name}-{host.name}",
            connection=self._connection(pool_name, host),
            create=command,
            update=command,
            delete=scripts.remote(scripts.uninstall_script(pool.role, host.name)),
            stdin=self._stdin,
            # No triggers: they force replacement, i.e. an uninstall (see the module docstring).
            # The scripts never print the token (it goes stdin -> file), so the installer's output is logged
            # for the operator.
            logging=Logging.STDOUT_AND_STDERR,
            add_previous_output_in_env=False,
            opts=self.child(depends_on=after),
        )
