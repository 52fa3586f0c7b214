"""A real Prometheus on loopback for the tests of ``gpucell usage`` and ``gpucell health`` (Debian's ``prometheus``
package; ``.ci/run`` installs it with ``promtool``)."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

PROMETHEUS = shutil.which("prometheus")
"""The server binary, or ``None`` where the package is missing (the tests then skip, or fail under ``CI=true``)."""
READY_SECONDS = 60
"""How long a server may take to answer ``/-/ready`` before the test fails (a bound on the wait, not a timing)."""


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def running_prometheus(work: Path, *flags: str) -> Iterator[str]:
    """Prometheus with ``work/prometheus.yml`` and its TSDB in ``work/data``, on a free loopback port, plus ``flags``;
    yields its URL once ``/-/ready`` answers 200 and stops it on exit."""
    assert PROMETHEUS is not None, "prometheus is not installed (apt-get install prometheus)"
    port = free_port()
    server = subprocess.Popen(
        [
            PROMETHEUS,
            "--config.file=prometheus.yml",
            "--storage.tsdb.path=data",
            f"--web.listen-address=127.0.0.1:{port}",
            *flags,
        ],
        cwd=work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + READY_SECONDS
        while True:
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
                if response.status == 200:
                    break
            assert time.monotonic() < deadline, f"prometheus did not become ready in {READY_SECONDS} s"
            time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)
