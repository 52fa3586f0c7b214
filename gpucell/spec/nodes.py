"""A region's nodes: the part of its spec that k3s is installed from (:class:`K3sClusterSpec`), and the views and
rules over it that the cell spec shares (:class:`NodeViews`).

:class:`gpucell.k3s.cluster.K3sCluster` takes a :class:`K3sClusterSpec`, not the whole cell: its servers and agent
pools, the address plan, SSH, etcd, the k3s hardening and sign-in, and the two sections its node labels and removal
policies read (the GPU Operator's vGPU driver and MIG strategy, the storage backend). A
:class:`~gpucell.spec.cell.CellSpec` gives one with :meth:`K3sClusterSpec.from_cell`; built on its own it is
checked by the same rules, with the same messages and key paths (docs/decisions/0019-standalone-components.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from ipaddress import IPv4Address
from typing import TYPE_CHECKING, Any

from pydantic import Field, ValidatorFunctionWrapHandler, field_validator, model_validator

from gpucell.catalog.gpu_catalog import VgpuFramework
from gpucell.errors import SpecError, shown
from gpucell.spec._base import SpecModel
from gpucell.spec._rules import Rule, validate_with_rules
from gpucell.spec.etcd import EtcdSpec
from gpucell.spec.hardware import check_hardware, vgpu_pools
from gpucell.spec.identity import OidcSpec
from gpucell.spec.k3s import K3sSpec, check_k3s
from gpucell.spec.lifecycle import HostRemovalPolicy, RemovalPolicy
from gpucell.spec.network import Host, Network, Ssh, check_dns_label, check_names
from gpucell.spec.platform import (
    GpuOperatorSpec,
    MigStrategy,
    StorageBackend,
    StorageSpec,
    check_mig_strategy,
    effective_mig_strategy,
)
from gpucell.spec.pools import GpuMode, NodePool, NodeRole, gpu_pools, role_pools
from gpucell.spec.versions import Versions, release

__all__ = ["K3sClusterSpec", "NodeViews", "check_hosts"]


class NodeViews:
    """Views over a region's nodes and the rules they must pass, shared by :class:`~gpucell.spec.cell.CellSpec` and
    :class:`K3sClusterSpec` (a mixin: the fields are the spec model's)."""

    if TYPE_CHECKING:  # the spec model's fields
        versions: Versions
        k3s: K3sSpec
        oidc: OidcSpec | None
        network: Network
        ssh: Ssh
        node_pools: dict[str, NodePool]
        storage: StorageSpec
        gpu_operator: GpuOperatorSpec
        etcd: EtcdSpec
        removal_policy: RemovalPolicy

    # -- views ---------------------------------------------------------------------------------------------------
    def pools(self, role: NodeRole) -> dict[str, NodePool]:
        """Pools of one role, in config order."""
        return role_pools(self.node_pools, role)

    def gpu_pools(self, *modes: GpuMode) -> dict[str, NodePool]:
        """GPU pools, optionally only those in ``modes``."""
        return gpu_pools(self.node_pools, *modes)

    def vgpu_pools(self, framework: VgpuFramework) -> dict[str, NodePool]:
        """The ``vm-vgpu`` pools whose boards expose vGPUs through ``framework`` with the region's vGPU driver
        (:func:`gpucell.spec.hardware.pool_vgpu_framework`), in config order."""
        return vgpu_pools(self.node_pools, self.gpu_operator.vgpu_driver_image, framework)

    @property
    def servers(self) -> list[tuple[str, Host]]:
        """(pool name, host) of every server, in config order; the first initialises etcd."""
        return [(n, h) for n, p in self.pools(NodeRole.SERVER).items() for h in p.hosts]

    @property
    def control_server(self) -> tuple[str, Host]:
        """(pool name, host) of the server the nodes' maintenance steps run on over SSH: the first server in
        config order that is not ``removalPolicy: forget`` (a dead first server is marked so, and the steps move to
        the next; docs/operations.md, "The first server died"). Every server forgotten is refused by the spec."""
        alive = [(n, h) for n, h in self.servers if h.removal_policy is not HostRemovalPolicy.FORGET]
        return (alive or self.servers)[0]

    def ssh_for(self, pool_name: str) -> Ssh:
        """The SSH settings of a pool's hosts: the region's ``ssh`` with the pool's override applied."""
        override = self.node_pools[pool_name].ssh
        return override.over(self.ssh) if override else self.ssh

    @property
    def init_server(self) -> str | None:
        """The server given ``cluster-init``: ``etcd.initServer``, or the single server; ``None`` when that server
        is no longer in the config (every server then joins through the API endpoint)."""
        names = [host.name for _, host in self.servers]
        init = self.etcd.init_server if self.etcd.init_server is not None else names[0]
        return init if init in names else None

    def removal_policy_of(self, pool_name: str, host: Host) -> RemovalPolicy:
        """The effective ``removalPolicy`` of a host: its own, else the region's for servers and for agents of a
        ``local-path`` region (their disks hold volumes), else ``delete``."""
        if host.removal_policy is HostRemovalPolicy.FORGET:
            return RemovalPolicy.DELETE  # its control-server steps run on removal; its install command is retained
        if host.removal_policy is not None:
            return RemovalPolicy(host.removal_policy.value)
        stateful = (
            self.node_pools[pool_name].role is NodeRole.SERVER or self.storage.backend is StorageBackend.LOCAL_PATH
        )
        return self.removal_policy if stateful else RemovalPolicy.DELETE

    @property
    def api_endpoint(self) -> str:
        """Where the API server is reached: ``network.apiEndpoint`` or the single server's address."""
        if self.network.api_endpoint is not None:
            return self.network.api_endpoint
        return str(self.servers[0][1].address)

    @property
    def effective_mig_strategy(self) -> MigStrategy:
        """``gpuOperator.migStrategy``, or ``mixed`` when any pool uses MIG and ``single`` otherwise."""
        return effective_mig_strategy(self.gpu_operator.mig_strategy, self.node_pools)

    def _all_hosts(self) -> Iterator[tuple[str, int, Host]]:
        return _all_hosts(self.node_pools)

    # -- rules (each yields every problem it finds) --------------------------------------------------------------
    def _check_hardware(self) -> Iterator[SpecError]:
        """The first pool whose hardware setup cannot work (:func:`gpucell.spec.hardware.check_hardware`)."""
        try:
            check_hardware(self.node_pools, self.gpu_operator, self.storage)
        except SpecError as problem:
            yield problem

    def _check_server_count(self) -> Iterator[SpecError]:
        # An even count is accepted, as a step of scaling down one server per run (3 -> 2 -> 1); K3sCluster warns
        # that it tolerates no more failures than one server fewer.
        count = len(self.servers)
        if count == 0:
            yield SpecError(("nodePools",), "no pool has role server; a cell needs 1 or an odd number >= 3 of servers")
            return
        if all(p.role is NodeRole.SERVER and not p.allow_workloads for p in self.node_pools.values()):
            first = next(iter(self.node_pools))
            yield SpecError(
                ("nodePools", first, "allowWorkloads"),
                "is false on every server pool and the cell has no gpu or cpu pool, so no pod could be "
                "scheduled (servers carry node-role.kubernetes.io/control-plane:NoSchedule); add a "
                f"worker pool, or set nodePools.{first}.allowWorkloads: true for a lab",
            )
        if all(h.removal_policy is HostRemovalPolicy.FORGET for _, h in self.servers):
            pool, host = self.servers[0]
            where = ("nodePools", pool, "hosts", self.node_pools[pool].hosts.index(host), "removalPolicy")
            yield SpecError(
                where,
                "'forget' on every server leaves no server to run the nodes' maintenance on; "
                "keep at least one healthy server without it",
            )
        init = self.etcd.init_server
        if count > 1 and init is None:
            yield SpecError(
                ("etcd", "initServer"),
                f"is required with {count} servers: name the server that initialised etcd (usually the first, "
                f"{self.servers[0][1].name}) and keep it when that server is removed, so that no other server is "
                "ever given cluster-init",
            )
        pools = {h.name: n for n, p in self.node_pools.items() for h in p.hosts}
        if init is not None and init in pools and self.node_pools[pools[init]].role is not NodeRole.SERVER:
            yield SpecError(
                ("etcd", "initServer"),
                f"{shown(init)} is a {self.node_pools[pools[init]].role} node of pool {pools[init]}, not a server",
            )
        elif init is not None and init not in pools and not self.etcd.init_server_removed:
            yield SpecError(
                ("etcd", "initServer"),
                f"{shown(init)} is not a server of the region (servers: "
                f"{', '.join(h.name for _, h in self.servers)}); name the server that initialises etcd, or, when "
                "that server was removed from the running cell, keep its name and set etcd.initServerRemoved: true",
            )
        elif init is not None and init in pools and self.etcd.init_server_removed:
            yield SpecError(
                ("etcd", "initServerRemoved"),
                f"is true, but {shown(init)} is still a server of the region; drop initServerRemoved",
            )

    def _check_hosts(self) -> Iterator[SpecError]:
        for pool_name, index, host in self._all_hosts():
            try:
                check_dns_label(host.name)
            except ValueError as exc:
                yield SpecError(
                    ("nodePools", pool_name, "hosts", index, "name"),
                    f"{shown(host.name)} {exc}: k3s names the node after it (node-name), and gpucell its resources",
                )
        yield from check_hosts(self.network, self.node_pools)

    def _check_api_endpoint(self) -> Iterator[SpecError]:
        if self.network.api_endpoint is None and len(self.servers) > 1:
            yield SpecError(
                ("network", "apiEndpoint"),
                f"is required with {len(self.servers)} servers: a VIP or load-balanced name in front of all of them",
            )
        address = self.network.api_address
        for pool_name, index, host in self._all_hosts():
            if address == host.address and self.network.api_vip is not None:
                yield SpecError(
                    ("network", "apiEndpoint"),
                    f"{shown(str(address))} is the address of {host.name} (nodePools.{pool_name}.hosts[{index}]); "
                    "with apiVip it must be an unused address kube-vip can move between the servers",
                )
            elif address == host.address and self.node_pools[pool_name].role is not NodeRole.SERVER:
                yield SpecError(
                    ("network", "apiEndpoint"),
                    f"{shown(str(address))} is the address of agent {host.name} (nodePools.{pool_name}.hosts[{index}]),"
                    " which runs no API server; use a server's address or a VIP in front of the servers",
                )

    def _check_gpu_operator(self) -> Iterator[SpecError]:
        vgpu_pools = self.gpu_pools(GpuMode.VM_VGPU)
        if vgpu_pools and self.gpu_operator.vgpu_driver_image is None:
            yield SpecError(
                ("gpuOperator", "vgpuDriverImage"),
                f"is required because pool {next(iter(vgpu_pools))} runs vm-vgpu; "
                "give the repository and version of your NVIDIA vGPU Manager image",
            )
        yield from check_mig_strategy(self.gpu_operator.mig_strategy, self.node_pools, "gpuOperator.migStrategy")

    def _check_storage_replicas(self) -> Iterator[SpecError]:
        nodes = sum(len(p.hosts) for p in self.node_pools.values())
        if self.storage.backend is StorageBackend.LONGHORN and self.storage.replicas > nodes:
            yield SpecError(
                ("storage", "replicas"),
                f"{self.storage.replicas} replicas need as many nodes, the region has {nodes}; Longhorn keeps "
                "each replica of a volume on a different node",
            )

    def _check_k3s(self) -> Iterator[SpecError]:
        yield from check_k3s(self.k3s, self.versions.k3s)

    def _check_oidc_version(self) -> Iterator[SpecError]:
        if self.oidc is not None and release(self.versions.k3s.lstrip("v")) < (1, 30):
            yield SpecError(
                ("oidc",),
                f"needs Kubernetes 1.30 or later (structured authentication configuration); "
                f"versions.k3s is {self.versions.k3s}",
            )


class K3sClusterSpec(NodeViews, SpecModel):
    """The nodes of one region as k3s is installed on them: what :class:`gpucell.k3s.cluster.K3sCluster` takes.

    Each field is the cell spec's field of the same name (and key path). :meth:`from_cell` takes them from a validated
    :class:`~gpucell.spec.cell.CellSpec`; built on its own (``K3sClusterSpec.model_validate({...})``) it is checked
    by the cell's node rules (servers, hosts, API endpoint, GPU Operator, hardware, storage replicas, k3s, OIDC), and
    a mistake raises :class:`~gpucell.errors.ConfigError` with the same one-line messages.
    """

    versions: Versions = Versions()
    """Pinned releases: ``k3s`` (and so the Kubernetes minor), ``kubeVip``."""
    k3s: K3sSpec = Field(default=K3sSpec(), alias="k3s")
    """k3s hardening (the CIS profile by default) and its pinned installer."""
    oidc: OidcSpec | None = None
    """The OpenID Connect issuer the API server trusts (structured authentication configuration); none by default."""
    network: Network
    """Address plan and API endpoint."""
    ssh: Ssh = Ssh()
    """Default SSH settings for every pool."""
    node_pools: dict[str, NodePool] = Field(min_length=1)
    """Pool name (DNS-1123 label) -> pool."""
    storage: StorageSpec = StorageSpec()
    """The storage layer: its backend decides whether k3s keeps its local-path provisioner, and whether agents are
    stateful (their removal policy)."""
    gpu_operator: GpuOperatorSpec = GpuOperatorSpec()
    """The GPU Operator's settings the node labels follow: its vGPU driver (mdev or SR-IOV vGPU labels) and MIG
    strategy (what a MIG node advertises once reconfigured)."""
    etcd: EtcdSpec = EtcdSpec()
    """Embedded etcd: the server that initialised it, and scheduled snapshots."""
    removal_policy: RemovalPolicy = RemovalPolicy.PROTECT
    """What removing the region's servers (and, with ``local-path``, its agents) and the cluster token may do:
    ``protect`` (default), ``retain`` or ``delete``."""

    _pool_names = field_validator("node_pools")(check_names)

    @model_validator(mode="wrap")
    @classmethod
    def _cross_checks(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> K3sClusterSpec:
        return validate_with_rules(cls, data, handler, _K3S_RULES)

    @classmethod
    def from_cell(cls, cell: NodeViews) -> K3sClusterSpec:
        """The nodes of an already validated cell spec (its sections as they are, not validated again)."""
        return cls.model_construct(**{name: getattr(cell, name) for name in cls.model_fields})


_K3S_RULES = (
    Rule("servers", ("node_pools", "etcd"), NodeViews._check_server_count),
    Rule("hosts", ("node_pools", "network"), NodeViews._check_hosts),
    Rule("apiEndpoint", ("network", "node_pools"), NodeViews._check_api_endpoint, after=("servers",)),
    Rule("gpuOperator", ("node_pools", "gpu_operator"), NodeViews._check_gpu_operator),
    Rule("hardware", ("node_pools", "gpu_operator", "storage"), NodeViews._check_hardware, after=("gpuOperator",)),
    Rule("storage", ("storage", "node_pools"), NodeViews._check_storage_replicas),
    Rule("k3s", ("k3s", "versions"), NodeViews._check_k3s),
    Rule("oidc", ("oidc", "versions"), NodeViews._check_oidc_version),
)
"""K3sClusterSpec's cross-field rules, in the order the cell spec runs them."""


def _all_hosts(node_pools: Mapping[str, NodePool]) -> Iterator[tuple[str, int, Host]]:
    for pool_name, pool in node_pools.items():
        for index, host in enumerate(pool.hosts):
            yield pool_name, index, host


def check_hosts(network: Network, node_pools: Mapping[str, NodePool]) -> Iterator[SpecError]:
    """Every host of ``node_pools`` is one node: its name and address unique across the pools (a node listed in
    two pools would be counted twice), its address in ``network.nodeCidr`` and not the network's own or broadcast
    address; a node in two GPU pools is one line when their modes differ (a node runs one GPU mode).
    Key paths ``nodePools.<pool>.hosts[<i>]...``."""
    seen_name: dict[str, tuple[str, int]] = {}
    seen_address: dict[IPv4Address, tuple[str, int]] = {}
    node_cidr = network.node_cidr
    for pool_name, index, host in _all_hosts(node_pools):
        where = ("nodePools", pool_name, "hosts", index)
        other = seen_name.get(host.name) or seen_address.get(host.address)
        conflict = list(_check_one_mode(node_pools, pool_name, other[0], host, where)) if other else []
        if conflict:  # the one line about a host listed in two pools of different modes
            yield from conflict
            continue
        if host.name in seen_name:
            first = seen_name[host.name]
            yield SpecError(
                (*where, "name"), f"{shown(host.name)} is already used by nodePools.{first[0]}.hosts[{first[1]}]"
            )
        if host.address in seen_address and seen_address[host.address] != seen_name.get(host.name):
            first = seen_address[host.address]
            yield SpecError(
                (*where, "address"),
                f"{shown(str(host.address))} is already used by nodePools.{first[0]}.hosts[{first[1]}]",
            )
        if host.address not in node_cidr:
            yield SpecError((*where, "address"), f"{shown(str(host.address))} is outside network.nodeCidr {node_cidr}")
        elif node_cidr.prefixlen < 31 and host.address in (node_cidr.network_address, node_cidr.broadcast_address):
            yield SpecError(
                (*where, "address"),
                f"{shown(str(host.address))} is the network or broadcast address of network.nodeCidr {node_cidr}",
            )
        seen_name.setdefault(host.name, (pool_name, index))
        seen_address.setdefault(host.address, (pool_name, index))


def _check_one_mode(
    node_pools: Mapping[str, NodePool], pool_name: str, other_pool: str, host: Host, where: tuple[Any, ...]
) -> Iterator[SpecError]:
    mine, theirs = node_pools[pool_name], node_pools[other_pool]
    if mine.role is NodeRole.GPU and theirs.role is NodeRole.GPU and mine.gpu_mode != theirs.gpu_mode:
        yield SpecError(
            where,
            f"host {shown(host.name)} is in pools {other_pool} ({theirs.gpu_mode}) and {pool_name} "
            f"({mine.gpu_mode}); a node runs exactly one GPU mode",
        )
