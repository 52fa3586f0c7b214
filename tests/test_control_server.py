"""The control server: the first server of a region that answers over SSH runs its maintenance steps."""

from __future__ import annotations

import functools
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from gpucell.engine.mock_engine import run_program
from gpucell.stacks.control_server import choose_control_server, ssh_banner_problem
from gpucell.stacks.program import build_cells
from tests.test_day2 import computed, prod_config


@contextmanager
def listener(banner: bytes | None) -> Iterator[int]:
    """A TCP server on 127.0.0.1 that sends ``banner`` to each connection (``None``: sends nothing); its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            with connection:
                if banner is not None:
                    connection.sendall(banner)
                stop.wait(1)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        server.close()


def test_an_ssh_server_answers_and_others_are_named() -> None:
    with listener(b"SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13\r\n") as port:
        assert ssh_banner_problem("127.0.0.1", port) is None
    with listener(b"HTTP/1.1 400 Bad Request\r\n") as port:
        assert ssh_banner_problem("127.0.0.1", port) == "no SSH banner ('HTTP/1.1 400 Bad Request')"
    with listener(None) as port:
        assert ssh_banner_problem("127.0.0.1", port, timeout=0.2) == "no answer within 0.2 s"
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        closed = unused.getsockname()[1]
    assert ssh_banner_problem("127.0.0.1", closed) == "connection refused"


def test_the_offline_plan_takes_the_first_server_and_a_dead_one_is_passed_over() -> None:
    from gpucell.spec import StackSpec

    config, _ = prod_config("prod-fra1")
    fra1 = StackSpec.model_validate({"regions": config["gpucell:regions"]}).regions["fra1"]
    assert choose_control_server(fra1, None).host == "fra1-srv-1"
    answers = {"10.110.0.11": "no answer within 5 s", "10.110.0.12": "connection refused"}
    chosen = choose_control_server(fra1, lambda address, port: answers.get(address))
    assert chosen.host == "fra1-srv-3"
    assert chosen.passed_over == (("fra1-srv-1", "no answer within 5 s"), ("fra1-srv-2", "connection refused"))
    nobody = choose_control_server(fra1, lambda address, port: "connection refused")
    assert nobody.host == "fra1-srv-1"  # its steps fail with pulumi-command's connection error, as before


def test_a_first_server_that_does_not_answer_moves_every_step_of_its_region() -> None:
    """Issue 18: a dead first server that is not yet marked forget must not block the region."""
    config, secret_keys = prod_config("prod-fra1")
    probed: list[tuple[str, int]] = []

    def probe(address: str, port: int) -> str | None:
        probed.append((address, port))
        return "no answer within 5 s" if address == "10.110.0.11" else None

    result = run_program(
        functools.partial(build_cells, probe=probe),
        project="gpucell",
        stack="prod-fra1",
        config=config,
        secret_keys=secret_keys,
        computed=computed,
    )
    assert probed == [("10.110.0.11", 22), ("10.110.0.12", 22)]
    assert result.warnings == [
        "fra1: server fra1-srv-1 does not answer over SSH (no answer within 5 s); this run's maintenance steps run "
        "on fra1-srv-2. If fra1-srv-1 is gone for good, set removalPolicy: forget on it (docs/operations.md, 'The "
        "first server died')"
    ]
    steps = [r for r in result.resources if r.name.endswith(("-prepare", "-settle"))]
    fra1 = [r for r in steps if r.name.startswith("fra1-")]
    assert len(fra1) == 2 * 18  # every node of the region: 18 hosts
    assert {r.raw_inputs["connection"]["host"] for r in fra1} == {"10.110.0.12"}
    assert len(steps) == len(fra1)  # iad1 is a stack of its own: its run probes its own servers
    # Read once, from the first server, when the cell was built: never read again.
    assert result.named("fra1-k3s-kubeconfig").options["ignoreChanges"] == ["connection"]
