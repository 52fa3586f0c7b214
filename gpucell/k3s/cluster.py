"""K3sCluster: k3s with embedded etcd on a cell's hosts, installed over SSH with pulumi-command, and each node kept
converged through the API for the cell's whole life.

Every node is a group of four resources, in this order (each after the one before):

1. ``<name>-<host>-prepare`` (``remote.Command`` on the control server, the first server in config order): takes
   the node out of service when what it runs must change (see :mod:`gpucell.k3s._maintenance_scripts`);
2. ``<name>-<host>`` (``remote.Command`` on the node): installs or reconciles k3s, then waits for the node
   (:func:`gpucell.k3s._scripts.install_script`);
3. ``<name>-<host>-labels`` (``core/v1`` ``NodePatch``, server-side apply, field manager ``gpucell``): the node's
   labels (pool, role, GPU workload mode, MIG layout, vGPU type, the pool's own) and its whole taint list;
4. ``<name>-<host>-settle`` (``remote.Command`` on the control server): waits for the node (and on GPU nodes for
   the GPU Operator's report of the new state) and puts it back in service.

Order between nodes: servers one after another (each group after the previous server's ``-settle``); then each
agent pool in parallel, at most ``rollout.maxUnavailable`` of its *registered* nodes at a time (registered node *i*
after registered node *i - n*'s ``-settle``), every agent after the last server. Agents that are not registered yet
(not in the last deployment, :attr:`K3sClusterArgs.registered_hosts`) join in a window of ``ssh.joinConcurrency``
across pools instead: new node *k*'s ``-prepare`` after new node *k - j*'s ``-prepare``, its ``-settle`` after new
node *k - j*'s ``-settle``, its install (on its own host) right after its ``-prepare``; a new region's agents so join
in one wave (docs/decisions/0023-parallel-first-joins.md). So a k3s upgrade goes server by server and reaches the agents
only after every server runs the new version, as the Kubernetes version-skew policy requires (no kubelet newer
than an API server, https://kubernetes.io/releases/version-skew-policy/); a GPU reconfiguration goes node by node.
A host whose GPU configuration changes also waits, before its ``-prepare``, for what serves both its old and new
configuration (:attr:`K3sClusterArgs.prepare_after`, :mod:`gpucell.day2.gpu_serving`).

Removing a node runs the groups' deletes in reverse: ``-settle`` drains it, ``-labels`` is only forgotten
(``retainOnDelete``: relinquishing the labels first would make the GPU Operator redeploy operands on a leaving
node), ``<host>`` uninstalls k3s (a server first deletes its own Node so that k3s removes its etcd member, and
waits), ``-prepare`` deletes the Node object. Servers leave one at a time, since their groups are chained.

Re-run semantics (checked against pulumi-command 1.2.1: the Python SDK adds ``replace_on_changes=["triggers[*]"]``
to every ``remote.Command``, and the provider's ``CommandInputs`` tag only ``triggers`` with ``replaceOnChanges``;
see pulumi/pulumi-command ``provider/pkg/provider/common/inputs.go`` and ``remote/command.go``):

- A *replacement* runs the new ``create`` and then the old ``delete``; for a node that would run the uninstall right
  after the reinstall. So no command has triggers: nothing about a node forces replacement, and the install command
  is ``deleteBeforeReplace``: an operator's ``pulumi up --replace`` of it (a re-imaged host, docs/operations.md)
  runs the uninstall first (nothing to remove on a fresh host), then the install.
- Any other input change is an *update*, which runs ``update`` - the same idempotent script as ``create``. The
  scripts decide by looking at the node, so an update caused by a new SSH key, user or port (the ``connection``),
  or by a change of the control server, finds nothing to do.

The kubeconfig command reads the file once, when it is created, and ignores changes of its ``connection``: re-
reading would make its ``stdout`` unknown in the preview and every Kubernetes resource of the cell would show a
change. The cell's provider also has a ``clusterIdentifier``, with which pulumi-kubernetes never replaces it for a
changed kubeconfig. Should the stored kubeconfig ever be stale (the client certificate expires after a year),
``pulumi up --replace <urn of <name>-kubeconfig>`` reads it again.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi_kubernetes.core.v1 import NodePatch, NodeSpecPatchArgs, Secret, TaintPatchArgs
from pulumi_kubernetes.meta.v1 import ObjectMetaPatchArgs
from pulumi_kubernetes.provider import Provider
from pulumi_random import RandomPassword

from gpucell._component import CellComponent
from gpucell.cluster import Cluster, ContainerRuntime
from gpucell.k3s import _maintenance_scripts as maintenance
from gpucell.k3s import _scripts as scripts
from gpucell.k3s._acceptance import acceptance_plan
from gpucell.k3s._host_setup import host_setup
from gpucell.k3s._node_state import NodeState, node_state
from gpucell.k3s.hardening import node_files
from gpucell.spec import Host, HostRemovalPolicy, NodeRole, StorageBackend
from gpucell.spec.lifecycle import removal_options
from gpucell.spec.nodes import K3sClusterSpec, NodeViews

with warnings.catch_warnings():
    # pulumi_command.remote's __init__ imports its deprecated CopyFile module, which warns at import time;
    # we do not use CopyFile, and the test suite turns warnings into errors.
    warnings.simplefilter("ignore", DeprecationWarning)
    from pulumi_command.remote import Command, ConnectionArgs, Logging

__all__ = [
    "DIAL_ERROR_LIMIT",
    "FIELD_MANAGER",
    "PER_DIAL_TIMEOUT_SECONDS",
    "K3sCluster",
    "K3sClusterArgs",
    "NodeFiles",
    "NodeResources",
    "ProviderFactory",
    "etcd_s3_secret_data",
    "even_server_warning",
]

TOKEN_LENGTH = 64
"""Characters of the generated cluster token (letters and digits)."""
FIELD_MANAGER = "gpucell"
"""Server-side apply field manager of the nodes' labels and taints."""
NODE_PATCH_ANNOTATIONS = {"pulumi.com/patchFieldManager": FIELD_MANAGER, "pulumi.com/patchForce": "true"}
"""pulumi-kubernetes: the field manager name, and force (gpucell is the source of the fields it applies: a label
k3s set at registration, or a taint list a controller rewrote, is taken over instead of failing the update)."""

DIAL_ERROR_LIMIT = 10
"""How many times pulumi-command dials a node's SSH before its command fails (``dialErrorLimit``). With
:data:`PER_DIAL_TIMEOUT_SECONDS`, an unreachable host fails its command (named ``<name>-<host>``, or ``-prepare`` /
``-settle`` for the control server) after at most 10 x 15 s of dialling plus the provider's back-off between tries,
instead of never (``-1``). The SDK's defaults (pulumi-command 1.2.1 ``ConnectionArgs``), set here so that they are
a decision and a test, not a default that may move: changing them would update every node command. ``gpucell
reach`` (:mod:`gpucell.stacks.reach`) finds an unreachable region in seconds, before ``pulumi up``."""
PER_DIAL_TIMEOUT_SECONDS = 15
"""The most one SSH dial may take, seconds (pulumi-command's ``perDialTimeout``; ``0`` would be no bound)."""

_FORGOTTEN_IGNORED = ["connection", "create", "update", "delete", "stdin", "logging"]
"""The install command's inputs a ``removalPolicy: forget`` host ignores: Pulumi never runs it again."""

ProviderFactory = Callable[[pulumi.Output[str]], Provider]
"""Builds the cell's Kubernetes provider from the (secret) admin kubeconfig."""


@dataclass(frozen=True)
class K3sClusterArgs:
    """Inputs of :class:`K3sCluster`: only what it uses."""

    spec: K3sClusterSpec
    """The region's nodes: server and agent pools, network, versions, SSH defaults, etcd, hardening, sign-in and
    removal policies (:meth:`K3sClusterSpec.from_cell <gpucell.spec.nodes.K3sClusterSpec.from_cell>` of a cell)."""
    ssh_private_key: pulumi.Input[str]
    """PEM/OpenSSH private key for every node's SSH user; pass a Pulumi secret (``config.require_secret``)."""
    provider: ProviderFactory | None = None
    """Builds the Kubernetes provider the nodes' patches use, once the kubeconfig is read. Defaults to a provider
    child of the cluster, ``<name>-k8s``, with ``clusterIdentifier`` ``<name>``."""
    etcd_s3_credentials: pulumi.Input[str] | None = None
    """``<access key id>:<secret access key>`` of ``etcd.snapshots.s3`` (a Pulumi secret); required with it."""
    registered_hosts: frozenset[str] | None = None
    """Hosts the cluster already has (those of the last deployment); the other agents are first joins, which need
    no maintenance order and join ``ssh.joinConcurrency`` at a time. ``None`` (the default) takes every host as
    registered: each pool's first join then goes ``rollout.maxUnavailable`` at a time, which is always safe."""
    control_server: str | None = None
    """The server the nodes' maintenance steps run on (a server host name), as the program found it answering over
    SSH (:mod:`gpucell.stacks.control_server`). ``None`` (the default): the first server that is not
    ``removalPolicy: forget`` (:attr:`gpucell.spec.CellSpec.control_server`)."""
    prepare_after: Mapping[str, pulumi.Output[list[pulumi.Resource]]] = field(default_factory=dict)
    """Host -> what else its ``-prepare`` waits for: for a host whose GPU configuration changes against the last
    completed deployment, what serves both its old and new configuration (the GPU Operator release, the ``KubeVirt``
    CR, the DRA driver release; :mod:`gpucell.day2.gpu_serving`). Those are built after the cluster, so each is an
    Output (:func:`gpucell._component.resources_later`). Defaults to none."""

    @classmethod
    def from_cell(
        cls,
        cell: NodeViews,
        ssh_private_key: pulumi.Input[str],
        *,
        provider: ProviderFactory | None = None,
        etcd_s3_credentials: pulumi.Input[str] | None = None,
        registered_hosts: frozenset[str] | None = None,
        control_server: str | None = None,
        prepare_after: Mapping[str, pulumi.Output[list[pulumi.Resource]]] | None = None,
    ) -> K3sClusterArgs:
        """The k3s cluster of a cell spec (its nodes, :meth:`~gpucell.spec.nodes.K3sClusterSpec.from_cell`) and the
        rest as given."""
        return cls(
            K3sClusterSpec.from_cell(cell),
            ssh_private_key,
            provider,
            etcd_s3_credentials,
            registered_hosts,
            control_server,
            dict(prepare_after or {}),
        )


@dataclass(frozen=True)
class NodeFiles:
    """What one node receives, as text; none of it contains the cluster token."""

    config_yaml: str
    """Content of ``/etc/rancher/k3s/config.yaml``."""
    install_script: str
    """The bash script run over SSH on create and update."""
    files: dict[str, str] = field(default_factory=dict)
    """Path -> content of the other files the script writes (the CIS profile's and sign-in's, see
    :func:`gpucell.k3s.hardening.node_files`)."""


@dataclass
class NodeResources:
    """The resources of one node, in the order they run."""

    state: NodeState
    """What the node should look like."""
    prepare: Command
    """Takes the node out of service when needed (on the control server); its delete deletes the Node."""
    install: Command
    """Installs k3s on the node; its delete uninstalls it."""
    labels: NodePatch
    """The node's labels and taints, through the API."""
    settle: Command
    """Waits for the node and puts it back in service (on the control server); its delete drains it."""
    options: dict[str, Any] = field(default_factory=dict)
    """The removal options every resource of the node has (:func:`gpucell.spec.lifecycle.removal_options`)."""


class _JoinWindow:
    """First joins ``size`` at a time on the control server: the *k*-th new node's ``-prepare`` waits for the
    *(k - size)*-th's, its ``-settle`` for the *(k - size)*-th's ``-settle``; all after ``after`` (the servers)."""

    def __init__(self, size: int, after: pulumi.Resource) -> None:
        self.size = size
        self.after = after
        self.prepares: list[pulumi.Resource] = []
        self.settles: list[pulumi.Resource] = []

    def prepare_after(self) -> list[pulumi.Resource]:
        """What the next new node's ``-prepare`` waits for."""
        index = len(self.prepares)
        return [self.after, *([self.prepares[index - self.size]] if index >= self.size else [])]

    def settle_after(self) -> list[pulumi.Resource]:
        """What the next new node's ``-settle`` waits for besides its own labels."""
        index = len(self.settles)
        return [self.settles[index - self.size]] if index >= self.size else []

    def add(self, prepare: pulumi.Resource, settle: pulumi.Resource) -> None:
        """Record the new node just registered."""
        self.prepares.append(prepare)
        self.settles.append(settle)


def even_server_warning(count: int) -> str | None:
    """The warning for ``count`` servers when it is even (etcd quorum is ``count // 2 + 1``), else ``None``."""
    if count % 2:
        return None
    tolerated = (count - 1) // 2
    return (
        f"{count} servers: an even number of etcd members tolerates no more failures than {count - 1} "
        f"({tolerated}: quorum is {count // 2 + 1} of {count}); use it only as a step to {count - 1} or "
        f"{count + 1} servers"
    )


def etcd_s3_secret_data(cell: NodeViews, credentials: str) -> dict[str, str]:
    """``stringData`` of the ``etcd.k3s.cattle.io/s3-config-secret`` Secret for ``etcd.snapshots.s3``.

    Keys are the k3s flags without ``--`` (k3s docs ``docs/cli/etcd-snapshot.md``, "S3 Configuration Secret
    Support"), every value a string. ``credentials`` is ``<access key id>:<secret access key>``; raises
    ``ValueError`` (without the credential in the message) when it has no colon or an empty part.
    """
    s3 = cell.etcd.snapshots.s3
    if s3 is None:
        raise ValueError("etcd.snapshots.s3 is not set")
    key_id, sep, secret = credentials.partition(":")
    if not sep or not key_id or not secret:
        raise ValueError(
            f"etcd.snapshots.s3.credentialsConfigKey {s3.credentials_config_key!r}: the secret is not "
            "'<access key id>:<secret access key>'"
        )
    data = {
        "etcd-s3-endpoint": s3.endpoint,
        "etcd-s3-bucket": s3.bucket,
        "etcd-s3-region": s3.region,
        "etcd-s3-access-key": key_id,
        "etcd-s3-secret-key": secret,
        "etcd-s3-insecure": str(s3.insecure).lower(),
        "etcd-s3-skip-ssl-verify": str(s3.skip_ssl_verify).lower(),
    }
    if s3.folder is not None:
        data["etcd-s3-folder"] = s3.folder
    return data


class K3sCluster(CellComponent):
    """A k3s cluster (embedded etcd, no flannel/kube-proxy/traefik/servicelb) on the hosts of ``args.spec``.

    Children: ``<name>-token`` (``random.RandomPassword``), per node the four resources of :class:`NodeResources`
    (see the module docstring), ``<name>-kubeconfig`` (reads the admin kubeconfig on the first server once it is
    installed) and, with ``etcd.snapshots.s3``, ``<name>-etcd-s3`` (the ``kube-system`` Secret k3s reads the S3
    target from). Without a :attr:`K3sClusterArgs.provider` factory also ``<name>-k8s``.

    Removal policies: the token and every server take the region's ``removalPolicy`` unless a host sets its own;
    agents take theirs (see :meth:`gpucell.spec.nodes.NodeViews.removal_policy_of`). An even number of servers is
    accepted, with a warning (:func:`even_server_warning`).

    The kubeconfig is checked when it is read (not in a preview, where it is unknown): an empty one, or one
    without ``server: https://127.0.0.1:<listen port>``, fails the update with ``ValueError``
    (:func:`gpucell.k3s._scripts.rewrite_kubeconfig`) rather than let pulumi-kubernetes fall back to the
    ambient ``~/.kube/config``.
    """

    kubeconfig: pulumi.Output[str]
    """Admin kubeconfig (secret), server rewritten to :attr:`api_server_url`; unknown in a preview."""
    api_server_url: pulumi.Output[str]
    """``https://<apiEndpoint>:<apiPort>``."""

    provider: Provider
    """The Kubernetes provider the node patches use (the cell's)."""
    servers_ready: pulumi.Resource
    """Depend on this to run after every server is installed and back in service (the last server's settle)."""
    cluster: Cluster
    """The handle components deploy onto: :attr:`provider`, the pinned k3s's Kubernetes minor, k3s's containerd
    paths (:meth:`gpucell.cluster.ContainerRuntime.k3s`), ready after :attr:`servers_ready`."""
    agents: list[pulumi.Resource]
    """The agent install commands (GPU and CPU pools), in pool and host order."""
    nodes: dict[str, NodeResources]
    """Host name -> its resources, servers first."""
    node_files: dict[str, NodeFiles]
    """Host name -> files rendered for it (for the offline plan's ``--out``)."""

    def __init__(self, name: str, args: K3sClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("K3sCluster", name, opts)
        cell = args.spec
        self._cell = cell
        self._name = name
        self._connection_key = args.ssh_private_key
        self.node_files = {}
        self.nodes = {}
        self._states: dict[str, tuple[NodeState, str]] = {}
        self._prepare_waits = args.prepare_after
        self._renders: dict[str, tuple[str, list[Any], str]] = {}
        # The maintenance steps' second way to the API, when the control server's own does not answer.
        self._api_endpoint = scripts.api_server_url(cell) if cell.network.api_endpoint is not None else ""
        self.rollout_starts: dict[str, list[str]] = {}
        """Agent pool -> its registered hosts that start its rollout (the first ``rollout.maxUnavailable``, whose
        ``-prepare`` waits for no other node of the pool)."""
        self._warn_about_servers()

        token = RandomPassword(
            f"{name}-token", length=TOKEN_LENGTH, special=False, opts=self.child(**removal_options(cell.removal_policy))
        )
        # stdin is the token's only way to a node; secret so that state and plans never show it.
        self._stdin: pulumi.Output[str] = pulumi.Output.secret(token.result)
        control_pool, control_host = next(
            ((pool, host) for pool, host in cell.servers if host.name == args.control_server), cell.control_server
        )
        self._control = self._connection(control_pool, control_host)

        after: list[pulumi.Resource] = []
        for index, (pool_name, host) in enumerate(cell.servers):
            prepare, install = self._install(pool_name, host, after)
            if index == 0:
                self._read_kubeconfig(install, args.provider)
            after = [self._finish(pool_name, host, prepare, install).settle]
        self.servers_ready = after[0]
        minor = cell.versions.kubernetes_minor
        self.cluster = Cluster(self.provider, minor, ContainerRuntime.k3s(minor), (self.servers_ready,))

        self.agents = []
        joins = _JoinWindow(cell.ssh.join_concurrency, self.servers_ready)
        for pool_name, pool in cell.node_pools.items():
            if pool.role is NodeRole.SERVER:
                continue
            settles: list[pulumi.Resource] = []
            window = pool.rollout.max_unavailable
            # The rollout's order: registered node i after registered node i - window (a GPU node's -prepare holds
            # the next window of it, nodes i + 1 .. i + window).
            order = [h.name for h in pool.hosts if args.registered_hosts is None or h.name in args.registered_hosts]
            for host in pool.hosts:
                if args.registered_hosts is not None and host.name not in args.registered_hosts:
                    prepare, install = self._install(pool_name, host, joins.prepare_after())
                    joins.add(prepare, self._finish(pool_name, host, prepare, install, joins.settle_after()).settle)
                else:
                    index = len(settles)
                    previous = [settles[index - window]] if index >= window else [self.servers_ready]
                    next_in_line = tuple(order[index + 1 : index + 1 + window])
                    prepare, install = self._install(pool_name, host, previous, next_in_line)
                    if index < window:
                        self.rollout_starts.setdefault(pool_name, []).append(host.name)
                    settles.append(self._finish(pool_name, host, prepare, install).settle)
                self.agents.append(install)

        self._etcd_s3_secret(args.etcd_s3_credentials)
        self.api_server_url = pulumi.Output.from_input(scripts.api_server_url(cell))
        self.register_outputs({"kubeconfig": self.kubeconfig, "apiServerUrl": self.api_server_url})

    # -- the cluster ---------------------------------------------------------------------------------------------
    def _warn_about_servers(self) -> None:
        cell = self._cell
        message = even_server_warning(len(cell.servers))
        if message is not None:
            pulumi.log.warn(message, resource=self)
        init = cell.etcd.init_server
        if init is not None and cell.init_server is None:
            pulumi.log.warn(
                f"etcd.initServer {init!r} is not a server of the region: every server joins through the API "
                "endpoint (right after removing that server; a new cell needs it to name one of its servers)",
                resource=self,
            )

    def _read_kubeconfig(self, first_install: Command, factory: ProviderFactory | None) -> None:
        """Read the admin kubeconfig on the first server and build the provider from it."""
        cell = self._cell
        read = Command(
            f"{self._name}-kubeconfig",
            connection=self._control,
            create=scripts.remote(scripts.kubeconfig_script()),
            # The kubeconfig holds the cluster's admin client key: never logged, stdout stored as a secret,
            # and not fed back into the next run's environment.
            logging=Logging.NONE,
            add_previous_output_in_env=False,
            # A new SSH key, user, port or first server must not re-read it: see the module docstring.
            opts=self.child(
                depends_on=[first_install], additional_secret_outputs=["stdout"], ignore_changes=["connection"]
            ),
        )
        self.kubeconfig_read = read
        """The command that read the kubeconfig (its ``stdout`` is a secret)."""
        self.kubeconfig = pulumi.Output.secret(read.stdout.apply(lambda text: scripts.rewrite_kubeconfig(text, cell)))
        if factory is not None:
            self.provider = factory(self.kubeconfig)
        else:
            self.provider = Provider(
                f"{self._name}-k8s",
                kubeconfig=self.kubeconfig,
                cluster_identifier=self._name,
                enable_server_side_apply=True,
                delete_unreachable=False,
                opts=self.child(),
            )

    def _etcd_s3_secret(self, credentials: pulumi.Input[str] | None) -> None:
        """The Secret k3s reads the snapshots' S3 target from, when ``etcd.snapshots.s3`` is set."""
        cell = self._cell
        if cell.etcd.snapshots.s3 is None:
            return
        if credentials is None:
            raise ValueError(
                "etcd.snapshots.s3 is set but no credentials were given (K3sClusterArgs.etcd_s3_credentials)"
            )
        data: pulumi.Output[dict[str, str]] = pulumi.Output.from_input(credentials).apply(
            lambda value: etcd_s3_secret_data(cell, value)
        )
        secret_data: pulumi.Output[dict[str, str]] = pulumi.Output.secret(data)
        Secret(
            f"{self._name}-etcd-s3",
            metadata={
                "name": scripts.ETCD_S3_SECRET,
                "namespace": "kube-system",
                "labels": {"app.kubernetes.io/managed-by": "gpucell"},
            },
            type="etcd.k3s.cattle.io/s3-config-secret",
            string_data=secret_data,
            opts=self.child(depends_on=[self.servers_ready], provider=self.provider),
        )

    # -- one node ------------------------------------------------------------------------------------------------
    def _connection(self, pool_name: str, host: Host) -> ConnectionArgs:
        ssh = self._cell.ssh_for(pool_name)
        return ConnectionArgs(
            host=str(host.address),
            port=ssh.port,
            user=ssh.user,
            private_key=pulumi.Output.secret(self._connection_key),
            dial_error_limit=DIAL_ERROR_LIMIT,
            per_dial_timeout=PER_DIAL_TIMEOUT_SECONDS,
        )

    def _control_command(
        self,
        step: str,
        script: str,
        delete: str,
        after: list[pulumi.Resource] | pulumi.Output[list[pulumi.Resource]],
        options: dict[str, Any],
    ) -> Command:
        """``<name>-<step>``: a node's maintenance step, run over SSH on the control server; create and update
        run ``script``, delete runs ``delete`` (see :mod:`gpucell.k3s._maintenance_scripts`)."""
        text = scripts.remote(script)
        return Command(
            f"{self._name}-{step}",
            connection=self._control,
            create=text,
            update=text,
            delete=scripts.remote(delete),
            logging=Logging.STDOUT_AND_STDERR,
            add_previous_output_in_env=False,
            opts=self.child(depends_on=after, **options),
        )

    def _rendered(self, pool_name: str, host: Host) -> tuple[str, list[Any], str]:
        """(config.yaml, the other files k3s reads, restart digest) of one node, rendered once."""
        found = self._renders.get(host.name)
        if found is None:
            cell = self._cell
            pool = cell.node_pools[pool_name]
            config = scripts.node_config(cell, pool_name, pool, host)
            files = node_files(cell, server=pool.role is NodeRole.SERVER)
            found = (scripts.render_config(config), files, scripts.restart_digest(cell, pool.role, config, files))
            self._renders[host.name] = found
        return found

    def _install(
        self, pool_name: str, host: Host, after: list[pulumi.Resource], next_in_line: tuple[str, ...] = ()
    ) -> tuple[Command, Command]:
        """The node's ``-prepare`` (after ``after``; holding ``next_in_line`` on a GPU node) and install commands."""
        cell = self._cell
        pool = cell.node_pools[pool_name]
        config_yaml, files, digest = self._rendered(pool_name, host)
        install_text = scripts.install_script(
            cell, pool.role, host, config_yaml, files, host_setup=host_setup(cell, pool_name, pool)
        )
        self.node_files[host.name] = NodeFiles(
            config_yaml=config_yaml, install_script=install_text, files={file.path: file.content for file in files}
        )
        state = node_state(cell, pool_name, pool, host.name)
        self._states[host.name] = (state, digest)
        options = removal_options(cell.removal_policy_of(pool_name, host))
        forgotten = host.removal_policy is HostRemovalPolicy.FORGET
        prepare_text = (
            maintenance.forgotten_script(host.name)
            if forgotten
            else maintenance.prepare_script(
                state, cell.versions.k3s, digest, api_endpoint=self._api_endpoint, next_in_line=next_in_line
            )
        )

        prepare = self._control_command(
            f"{host.name}-prepare",
            prepare_text,
            maintenance.forget_script(host.name, forgotten=forgotten, api_endpoint=self._api_endpoint),
            self._prepare_after(host.name, after),
            options,
        )
        # A replacement (`pulumi up --replace` of this command: nothing else replaces it) uninstalls first, then
        # installs: created first, the new install would be removed at once by the old delete (decision 0036).
        install_options: dict[str, Any] = {**options, "delete_before_replace": True}
        if forgotten:
            # The machine is gone: nothing runs on it over SSH again, neither an update nor the uninstall.
            install_options.update(retain_on_delete=True, ignore_changes=_FORGOTTEN_IGNORED)
        install_command = scripts.remote(install_text)
        install = Command(
            f"{self._name}-{host.name}",
            connection=self._connection(pool_name, host),
            create=install_command,
            update=install_command,
            delete=scripts.remote(scripts.uninstall_script(pool.role, host.name)),
            stdin=self._stdin,
            # No triggers: they force replacement, i.e. an uninstall (see the module docstring).
            # The scripts never print the token (it goes stdin -> file), so the installer's output is logged
            # for the operator.
            logging=Logging.STDOUT_AND_STDERR,
            add_previous_output_in_env=False,
            opts=self.child(depends_on=[prepare], **install_options),
        )
        return prepare, install

    def _prepare_after(
        self, host: str, after: list[pulumi.Resource]
    ) -> list[pulumi.Resource] | pulumi.Output[list[pulumi.Resource]]:
        """What the host's ``-prepare`` waits for: ``after``, and for a reconfigured host also what serves both its
        configurations (add before: decision 0018)."""
        gate = self._prepare_waits.get(host)
        if gate is None:
            return after
        return gate.apply(lambda serving: [*after, *serving])

    def _finish(
        self,
        pool_name: str,
        host: Host,
        prepare: Command,
        install: Command,
        settle_after: list[pulumi.Resource] | None = None,
    ) -> NodeResources:
        """The node's NodePatch and ``-settle`` command, after its install command (the settle also after
        ``settle_after``)."""
        cell = self._cell
        state, digest = self._states[host.name]
        options = removal_options(cell.removal_policy_of(pool_name, host))
        labels = NodePatch(
            f"{self._name}-{host.name}-labels",
            metadata=ObjectMetaPatchArgs(
                name=host.name, labels=dict(state.labels), annotations=dict(NODE_PATCH_ANNOTATIONS)
            ),
            spec=NodeSpecPatchArgs(taints=[TaintPatchArgs(**t) for t in state.taints]),
            # Forgotten, not relinquished, when the node is removed (see the module docstring).
            opts=self.child(depends_on=[install], provider=self.provider, **{**options, "retain_on_delete": True}),
        )
        forgotten = host.removal_policy is HostRemovalPolicy.FORGET
        settle_text = (
            maintenance.forgotten_script(host.name)
            if forgotten
            else maintenance.settle_script(
                state,
                cell.versions.k3s,
                digest,
                api_endpoint=self._api_endpoint,
                acceptance=acceptance_plan(cell.node_pools[pool_name], cell.versions),
            )
        )
        settle = self._control_command(
            f"{host.name}-settle",
            settle_text,
            maintenance.removal_drain_script(
                state, api_endpoint=self._api_endpoint, longhorn=cell.storage.backend is StorageBackend.LONGHORN
            ),
            [labels, *(settle_after or [])],
            options,
        )
        resources = NodeResources(
            state=state, prepare=prepare, install=install, labels=labels, settle=settle, options=options
        )
        self.nodes[host.name] = resources
        return resources
