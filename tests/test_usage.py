"""``gpucell usage`` against a real Prometheus on loopback (blocks built by ``promtool tsdb create-blocks-from
openmetrics`` from synthetic series) and against a small local HTTP server for the failure answers."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator

import pytest

from gpucell.stacks.cli import main

PROMETHEUS, PROMTOOL = shutil.which("prometheus"), shutil.which("promtool")
if (PROMETHEUS is None or PROMTOOL is None) and os.environ.get("CI") == "true":
    raise RuntimeError(
        "prometheus/promtool are missing under CI=true: .ci/run installs them (apt-get install prometheus)"
    )
START = 1761955200  # 2025-11-01T00:00:00Z
SERIES = [
    ("acme", "nvidia.com/GH100_H100_SXM5_80GB", "vm", 8, 3 * 86400),
    ("acme", "nvidia.com/mig-1g.18gb", "container", 1, 3 * 86400),
    ("globex", "nvidia.com/gpu", "container", 4, 36 * 3600),
]
"""(tenant, resource, kind, units held, for how many seconds from START)."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if PROMETHEUS is None or PROMTOOL is None:
        pytest.skip("prometheus/promtool not found: apt-get install prometheus (Debian/Ubuntu)")
    work = tmp_path_factory.mktemp("prometheus")
    lines = ["# TYPE gpucell:tenant_gpu_allocated:sum gauge"]
    for at in range(START, START + 3 * 86400, 60):
        lines += [
            f'gpucell:tenant_gpu_allocated:sum{{tenant="{t}",resource="{r}",kind="{k}"}} {units} {at}'
            for t, r, k, units, held in SERIES
            if at < START + held
        ]
    (work / "series.om").write_text("\n".join([*lines, "# EOF"]) + "\n")
    subprocess.run(
        [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", "series.om", "data"],
        cwd=work,
        check=True,
        capture_output=True,
        timeout=120,
    )
    (work / "prometheus.yml").write_text("global: {}\n")
    port = _free_port()
    # Imported blocks carry no staleness markers (the rule engine writes them when a series ends), so the lookback
    # is kept under one step: a series that ended is not carried forward.
    server = subprocess.Popen(
        [
            PROMETHEUS,
            "--config.file=prometheus.yml",
            "--storage.tsdb.path=data",
            f"--web.listen-address=127.0.0.1:{port}",
            "--storage.tsdb.retention.time=100y",
            "--query.lookback-delta=59s",
        ],
        cwd=work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
                if response.status == 200:
                    break
            assert time.monotonic() < deadline, "prometheus did not become ready in 60 s"
            time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_usage_table_from_a_real_prometheus(prometheus: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["usage", "--prometheus", prometheus, "--start", "2025-11-01", "--end", "2025-11-04"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        "TENANT  RESOURCE                         KIND       GPU-HOURS",
        "acme    nvidia.com/GH100_H100_SXM5_80GB  vm            576.00",
        "acme    nvidia.com/mig-1g.18gb           container      72.00",
        "globex  nvidia.com/gpu                   container     144.00",
        "3 row(s), 792.00 GPU-hours, 2025-11-01T00:00:00+00:00 to 2025-11-04T00:00:00+00:00",
    ]
    assert err.splitlines() == ["usage: read day 1 of 3", "usage: read day 2 of 3", "usage: read day 3 of 3"]


def test_usage_csv_and_json_for_one_tenant(prometheus: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["usage", "--prometheus", prometheus, "--start", "2025-11-02T12:00:00Z", "--end", "2025-11-03"]
    assert main([*args, "--format", "csv", "--tenant", "globex"]) == 0
    assert capsys.readouterr().out == "tenant,resource,kind,gpu_hours\n"  # globex let go at 2025-11-02T12:00
    assert main([*args, "--format", "json", "--tenant", "acme"]) == 0
    assert json.loads(capsys.readouterr().out)["usage"] == [
        {"tenant": "acme", "resource": "nvidia.com/GH100_H100_SXM5_80GB", "kind": "vm", "gpuHours": 96.0},
        {"tenant": "acme", "resource": "nvidia.com/mig-1g.18gb", "kind": "container", "gpuHours": 12.0},
    ]


class _Answers(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if "slow" in self.server.mode:  # type: ignore[attr-defined]
            time.sleep(3)
        status, body = {
            "error": (400, b'{"status":"error","error":"parse error at char 5"}'),
            "html": (200, b"<html>not prometheus</html>"),
            "slow": (200, b"{}"),
        }[self.server.mode]  # type: ignore[attr-defined]
        with contextlib.suppress(OSError):  # the slow answer finds the client gone (it timed out)
            self.send_response(status)
            self.end_headers()
            self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("error", "error: http://127.0.0.1:{port}/api/v1/query_range: HTTP 400: parse error at char 5"),
        (
            "html",
            "error: http://127.0.0.1:{port}/api/v1/query_range: the answer is not JSON (is this a Prometheus API?)",
        ),
        (
            "slow",
            "error: http://127.0.0.1:{port}/api/v1/query_range: timed out (is the Prometheus URL right and reachable?)",
        ),
    ],
)
def test_failing_prometheus_is_one_line(mode: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    server.daemon_threads = False  # server_close() waits for the slow answer: nothing is left running after the test
    server.mode = mode  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.server_address[1]
    try:
        code = main(
            [
                "usage",
                "--prometheus",
                f"http://127.0.0.1:{port}",
                "--start",
                "2025-11-01",
                "--end",
                "2025-11-01T06:00:00",
                "--timeout",
                "1",
            ]
        )
    finally:
        server.shutdown()
        server.server_close()
    assert code == 1
    assert capsys.readouterr().err.splitlines() == [message.format(port=port)]


def test_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["usage", "--prometheus", "127.0.0.1:9090", "--start", "2025-11", "--end", "2025-12-01"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "gpucell usage: --start '2025-11' is not an ISO 8601 date or time (e.g. 2026-11-01 or 2026-11-01T12:00:00Z)"
    ]
    assert (
        main(
            [
                "usage",
                "--prometheus",
                "127.0.0.1:9090",
                "--start",
                "2025-12-01",
                "--end",
                "2025-11-01",
                "--tenant",
                "Acme",
            ]
        )
        == 2
    )
    assert capsys.readouterr().err.splitlines() == [
        "gpucell usage: --prometheus '127.0.0.1:9090' is not an http:// or https:// URL with a host (e.g. "
        "http://127.0.0.1:9090 after kubectl -n monitoring port-forward svc/prometheus-operated 9090)",
        "gpucell usage: --end 2025-11-01T00:00:00+00:00 is not after --start 2025-12-01T00:00:00+00:00",
        "gpucell usage: --tenant 'Acme' is not a tenant name (a DNS-1123 label)",
    ]
