"""Which server runs a region's maintenance steps: the first in config order that answers over SSH.

Every node's ``-prepare`` and ``-settle`` run over SSH on one *control server*
(:mod:`gpucell.k3s._maintenance_scripts`). pulumi-command connects each step to one host, so a dead server named there
stops every step of the region. Before the cells are built, ``pulumi up`` (and ``pulumi preview``) therefore tries each
server of each region in turn, in config order and without those marked ``removalPolicy: forget``: a TCP connection to
its SSH port that must answer with an SSH banner (``SSH-``, RFC 4253 section 4.2) within :data:`PROBE_SECONDS`. The
first that does is the control server; each one passed over is named in a warning with why. When none answers, the first
stays (its steps then fail with pulumi-command's connection error, as before). A server that answers over SSH but whose
API is down is handled by the steps themselves: they try the cell's API endpoint next
(:func:`gpucell.k3s._maintenance_scripts.api_up`).

The offline plan never probes (it has no network to the nodes): it takes the first server, as config order says.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass

from gpucell.spec import CellSpec, HostRemovalPolicy

__all__ = ["PROBE_SECONDS", "ControlServer", "Probe", "choose_control_server", "ssh_banner_problem"]

PROBE_SECONDS = 5.0
"""How long one server may take to accept the connection and send its SSH banner, seconds."""

Probe = Callable[[str, int], str | None]
"""``(address, port) -> None`` when an SSH server answers there, else why not (one phrase)."""


def ssh_banner_problem(address: str, port: int, timeout: float = PROBE_SECONDS) -> str | None:
    """``None`` when ``address:port`` accepts a TCP connection and sends a line starting ``SSH-`` within ``timeout``
    seconds (in all), else what happened instead: ``connection refused``, ``no answer within 5 s``, ``no SSH banner
    ('...')`` or the OS error. Reads the banner only; sends nothing."""
    try:
        with socket.create_connection((address, port), timeout=timeout) as connection:
            connection.settimeout(timeout)
            banner = connection.recv(255)
    except ConnectionRefusedError:
        return "connection refused"
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    if not banner.startswith(b"SSH-"):
        return f"no SSH banner ({banner[:40].decode(errors='replace').strip()!r})"
    return None


@dataclass(frozen=True)
class ControlServer:
    """The server a region's maintenance steps run on, and the servers passed over to find it."""

    host: str
    """Its host name."""
    passed_over: tuple[tuple[str, str], ...] = ()
    """(server, why) of each server tried before it, in order."""

    def warnings(self, region: str) -> list[str]:
        """One line per server passed over, naming the one the steps run on instead and the way out."""
        return [
            f"{region}: server {server} does not answer over SSH ({why}); this run's maintenance steps run on "
            f"{self.host}. If {server} is gone for good, set removalPolicy: forget on it (docs/operations.md, "
            "'The first server died')"
            for server, why in self.passed_over
        ]


def choose_control_server(cell: CellSpec, probe: Probe | None) -> ControlServer:
    """The first server of ``cell`` (config order, ``removalPolicy: forget`` ones left out) for which ``probe`` says
    nothing is wrong; the first of them when ``probe`` is ``None`` (the offline plan) or none answers."""
    _, default = cell.control_server
    if probe is None:
        return ControlServer(default.name)
    passed: list[tuple[str, str]] = []
    for pool_name, host in cell.servers:
        if host.removal_policy is HostRemovalPolicy.FORGET:
            continue
        problem = probe(str(host.address), cell.ssh_for(pool_name).port)
        if problem is None:
            return ControlServer(host.name, tuple(passed))
        passed.append((host.name, problem))
    return ControlServer(default.name)
