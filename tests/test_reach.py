"""`gpucell reach`: a runner that cannot reach a region fails in seconds, naming it (issue 30)."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from gpucell.k3s import cluster
from gpucell.spec import CellSpec, StackSpec
from gpucell.stacks import cli, reach
from gpucell.stacks.config import stack_spec_input
from tests.conftest import prod_lab_config, write_prod_lab

SERVERS = ("10.110.0.11", "10.110.0.12", "10.110.0.13")
"""fra1's servers in the prod lab config, in config order."""


def fra1() -> CellSpec:
    return StackSpec.model_validate(stack_spec_input(prod_lab_config())).regions["fra1"]


def test_a_region_where_no_server_answers_over_ssh_is_unreachable_and_named() -> None:
    found = reach.region_reach(
        "fra1",
        fra1(),
        timeout=5,
        ssh=lambda a, p, t: f"no answer within {t:g} s",
        tcp=lambda a, p, t: "No route to host",
    )
    assert not found.reachable
    assert found.lines("prod-fra1") == [
        "error: region fra1 of stack prod-fra1 cannot be reached from this machine: no server answers over SSH "
        "(fra1-srv-1 at 10.110.0.11:22: no answer within 5 s; fra1-srv-2 at 10.110.0.12:22: no answer within 5 s; "
        "fra1-srv-3 at 10.110.0.13:22: no answer within 5 s); its API endpoint 10.110.0.10:6443 does not answer "
        "either (No route to host). Nothing was deployed. Check the route from this runner to the region (the runner "
        "label in the variable PULUMI_RUNNER, its VPN or peering), firewalls to the servers' SSH port and the API "
        "port, and that the servers are up and run sshd"
    ]


def test_one_server_answering_is_enough_and_a_silent_api_is_a_note() -> None:
    found = reach.region_reach(
        "fra1",
        fra1(),
        ssh=lambda a, p, t: None if a == SERVERS[1] else "connection refused",
        tcp=lambda a, p, t: "connection refused",
    )
    assert found.reachable
    assert found.lines("prod-fra1") == [
        "fra1: reachable: SSH answers on fra1-srv-2 (10.110.0.12:22)",
        "fra1: note: the API endpoint 10.110.0.10:6443 does not answer (connection refused): a new cell has no API "
        "yet; otherwise pulumi-kubernetes will fail on it (check the route and firewall to it)",
    ]
    every = reach.region_reach("fra1", fra1(), ssh=lambda a, p, t: None, tcp=lambda a, p, t: None)
    assert every.lines("prod-fra1") == [
        "fra1: reachable: SSH answers on fra1-srv-1 (10.110.0.11:22), fra1-srv-2 (10.110.0.12:22), fra1-srv-3 "
        "(10.110.0.13:22); the API endpoint 10.110.0.10:6443 accepts connections"
    ]


def test_the_probes_run_at_once_so_the_check_takes_one_timeout() -> None:
    """Three servers and the API endpoint: the four probes must all be running together to pass the barrier."""
    barrier = threading.Barrier(4, timeout=10)
    seen: list[tuple[str, int, float]] = []

    def probe(address: str, port: int, timeout: float) -> str | None:
        seen.append((address, port, timeout))
        barrier.wait()
        return None

    assert reach.region_reach("fra1", fra1(), timeout=2.5, ssh=probe, tcp=probe).reachable
    assert sorted(seen) == sorted([*((a, 22, 2.5) for a in SERVERS), ("10.110.0.10", 6443, 2.5)])


def test_the_real_probes_tell_an_ssh_server_from_a_closed_port() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]

        def answer() -> None:
            connection, _ = server.accept()
            with connection:
                connection.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")

        thread = threading.Thread(target=answer)
        thread.start()
        assert reach.tcp_problem("127.0.0.1", port, 2) is None
        thread.join(5)
        thread = threading.Thread(target=answer)
        thread.start()
        assert reach.ssh_banner_problem("127.0.0.1", port, 2) is None
        thread.join(5)
    # The port is closed now.
    assert reach.tcp_problem("127.0.0.1", port, 2) == "connection refused"


def test_cli_exits_1_naming_each_unreachable_region(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = write_prod_lab(tmp_path / "project")
    monkeypatch.setattr(reach, "ssh_banner_problem", lambda a, p, t: None if a.startswith("10.110.") else "timed out")
    monkeypatch.setattr(reach, "tcp_problem", lambda a, p, t: None)
    assert cli.main(["reach", "prod", "--project-dir", str(folder)]) == reach.EXIT_UNREACHABLE
    out, err = capsys.readouterr()
    assert out.startswith("fra1: reachable: SSH answers on fra1-srv-1 (10.110.0.11:22)")
    assert err.startswith("error: region iad1 of stack prod cannot be reached from this machine: no server answers")
    assert len(err.splitlines()) == 1
    assert cli.main(["reach", "prod", "--region", "fra1", "--project-dir", str(folder)]) == 0


def test_cli_refuses_a_bad_timeout_or_region(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = write_prod_lab(tmp_path / "project")
    assert cli.main(["reach", "prod", "--timeout", "0", "--project-dir", str(folder)]) == 2
    assert capsys.readouterr().err == "gpucell reach: --timeout 0 is not a number of seconds from 0 to 60\n"
    assert cli.main(["reach", "prod", "--region", "ams1", "--project-dir", str(folder)]) == 2
    assert capsys.readouterr().err == "gpucell reach: stack prod has no region 'ams1'; its regions: fra1, iad1\n"


def test_ssh_dials_are_bounded_in_every_node_command() -> None:
    """An unreachable host fails its command (named after it) after at most 10 dials of 15 s each, never hangs."""
    assert (cluster.DIAL_ERROR_LIMIT, cluster.PER_DIAL_TIMEOUT_SECONDS) == (10, 15)
    assert 0 < cluster.DIAL_ERROR_LIMIT * cluster.PER_DIAL_TIMEOUT_SECONDS <= 300
