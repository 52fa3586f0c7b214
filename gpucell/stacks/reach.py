"""``gpucell reach STACK``: can this machine reach the stack's regions, before ``pulumi up`` tries?

``pulumi up`` reaches a region over SSH (pulumi-command, every node step) and through the cell's API endpoint
(pulumi-kubernetes). From a runner without a route to the region (a missing VPN or peering, a firewall, the wrong
runner label) its first SSH step only fails after pulumi-command's dial retries (:data:`gpucell.k3s.cluster.
DIAL_ERROR_LIMIT` tries of :data:`~gpucell.k3s.cluster.PER_DIAL_TIMEOUT_SECONDS` each), and with an address, not a
region. This check answers in seconds: for each region it probes, all at once, every server that is not
``removalPolicy: forget`` for an SSH banner (:func:`gpucell.stacks.control_server.ssh_banner_problem`, the probe
``pulumi up`` uses to choose the control server) and the API endpoint (``network.apiEndpoint``, or the single server,
at ``network.apiPort``) for a TCP connection, each within ``--timeout`` seconds (default
:data:`gpucell.stacks.control_server.PROBE_SECONDS`), so the whole check takes about that long.

A region is *unreachable* when no server answers over SSH: no step of it could run. Then one line names the region,
what each probe found and what to check, and the exit status is 1 (:data:`EXIT_UNREACHABLE`). A region whose servers
answer but whose API endpoint does not is reachable, with a note: a new cell has no API yet, and the maintenance
steps reach the API from the control server itself.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from gpucell.errors import ConfigError
from gpucell.spec import CellSpec, HostRemovalPolicy, StackSpec
from gpucell.stacks.config import stack_spec_input
from gpucell.stacks.control_server import PROBE_SECONDS, ssh_banner_problem
from gpucell.stacks.plan import read_stack_files

__all__ = [
    "EXIT_UNREACHABLE",
    "PROBE_SECONDS",
    "Reach",
    "SshProbe",
    "TcpProbe",
    "region_reach",
    "stack_reach",
    "stack_spec",
    "tcp_problem",
]

EXIT_UNREACHABLE = 1
"""``gpucell reach``: a region of the stack cannot be reached from this machine."""

SshProbe = Callable[[str, int, float], str | None]
"""``(address, port, timeout) -> None`` when an SSH server answers there within ``timeout`` seconds, else why not."""
TcpProbe = Callable[[str, int, float], str | None]
"""``(address, port, timeout) -> None`` when a TCP connection is accepted there within ``timeout`` seconds, else why
not (one phrase)."""


def tcp_problem(address: str, port: int, timeout: float = PROBE_SECONDS) -> str | None:
    """``None`` when ``address:port`` accepts a TCP connection within ``timeout`` seconds, else what happened:
    ``connection refused``, ``no answer within 5 s`` or the OS error. Sends nothing (the API server speaks TLS;
    being accepted is what this checks)."""
    try:
        with socket.create_connection((address, port), timeout=timeout):
            return None
    except ConnectionRefusedError:
        return "connection refused"
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    except OSError as exc:
        return exc.strerror or type(exc).__name__


@dataclass(frozen=True)
class Reach:
    """What the probes of one region found."""

    region: str
    """The region."""
    servers: tuple[tuple[str, str, str | None], ...]
    """(server, ``address:port``, problem or ``None``) of each server probed, in config order."""
    api: tuple[str, str | None]
    """(``address:port`` of the API endpoint, problem or ``None``)."""

    @property
    def reachable(self) -> bool:
        """Whether a server answers over SSH (so the region's steps can run)."""
        return any(problem is None for _, _, problem in self.servers)

    def lines(self, stack: str) -> list[str]:
        """The report: one line when reachable (plus a note when the API endpoint does not answer), else the error
        naming the region, every probe and what to check."""
        where, api_problem = self.api
        if self.reachable:
            answering = ", ".join(f"{name} ({at})" for name, at, problem in self.servers if problem is None)
            lines = [f"{self.region}: reachable: SSH answers on {answering}"]
            if api_problem is None:
                lines[0] += f"; the API endpoint {where} accepts connections"
            else:
                lines.append(
                    f"{self.region}: note: the API endpoint {where} does not answer ({api_problem}): a new cell has no "
                    "API yet; otherwise pulumi-kubernetes will fail on it (check the route and firewall to it)"
                )
            return lines
        tried = "; ".join(f"{name} at {at}: {problem}" for name, at, problem in self.servers)
        api = "accepts connections" if api_problem is None else f"does not answer either ({api_problem})"
        return [
            f"error: region {self.region} of stack {stack} cannot be reached from this machine: no server answers over "
            f"SSH ({tried}); its API endpoint {where} {api}. Nothing was deployed. Check the route from this runner "
            "to the region (the runner label in the variable PULUMI_RUNNER, its VPN or peering), firewalls to the "
            "servers' SSH port and the API port, and that the servers are up and run sshd"
        ]


def _at(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def region_reach(
    region: str,
    spec: CellSpec,
    *,
    timeout: float = PROBE_SECONDS,
    ssh: SshProbe | None = None,
    tcp: TcpProbe | None = None,
) -> Reach:
    """Probe ``region`` (``spec``): every server not ``removalPolicy: forget`` over SSH and the API endpoint over TCP,
    all at once, each within ``timeout`` seconds. ``ssh`` and ``tcp`` default to :func:`ssh_banner_problem` and
    :func:`tcp_problem` (tests pass their own)."""
    ssh_probe = ssh or ssh_banner_problem
    tcp_probe = tcp or tcp_problem
    servers = [
        (host.name, str(host.address), spec.ssh_for(pool).port)
        for pool, host in spec.servers
        if host.removal_policy is not HostRemovalPolicy.FORGET
    ]
    api_address, api_port = spec.api_endpoint, spec.network.api_port
    with ThreadPoolExecutor(max_workers=len(servers) + 1) as pool:
        answers = [pool.submit(ssh_probe, address, port, timeout) for _, address, port in servers]
        api = pool.submit(tcp_probe, api_address, api_port, timeout)
        found = tuple(
            (name, _at(address, port), answer.result())
            for (name, address, port), answer in zip(servers, answers, strict=True)
        )
        return Reach(region, found, (_at(api_address, api_port), api.result()))


def stack_spec(project_dir: Path, stack: str) -> StackSpec:
    """``stack``'s validated spec (project-level config applied, as ``pulumi up`` reads it); raises
    :class:`ConfigError` with each line prefixed by the stack file."""
    try:
        files = read_stack_files(project_dir, stack)
        return StackSpec.model_validate(stack_spec_input(files.config, files.project))
    except ConfigError as exc:
        file = f"Pulumi.{stack}.yaml"
        raise ConfigError([line if line.startswith(file) else f"{file}: {line}" for line in exc.lines]) from None


def stack_reach(
    regions: Mapping[str, CellSpec], region: str | None, stack: str, *, timeout: float = PROBE_SECONDS
) -> list[Reach]:
    """:func:`region_reach` of each region of the stack (``regions``), or of ``region`` only; raises
    :class:`ConfigError` naming the stack's regions for an unknown ``region``."""
    if region is not None and region not in regions:
        raise ConfigError([f"gpucell reach: stack {stack} has no region {region!r}; its regions: {', '.join(regions)}"])
    chosen = [region] if region is not None else list(regions)
    return [region_reach(name, regions[name], timeout=timeout) for name in chosen]
