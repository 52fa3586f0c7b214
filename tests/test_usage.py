"""``gpucell usage`` against a real Prometheus on loopback (blocks built by ``promtool tsdb create-blocks-from
openmetrics`` from synthetic series) and against a small local HTTP server for the failure answers."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest

from gpucell.stacks.cli import main
from tests.prometheus_loopback import PROMETHEUS, running_prometheus

PROMTOOL = shutil.which("promtool")
if (PROMETHEUS is None or PROMTOOL is None) and os.environ.get("CI") == "true":
    raise RuntimeError(
        "prometheus/promtool are missing under CI=true: .ci/run installs them (apt-get install prometheus)"
    )
START = 1761955200  # 2025-11-01T00:00:00Z
DECEMBER = 1764547200  # 2025-12-01T00:00:00Z
SERIES = [
    ("acme", "nvidia.com/GH100_H100_SXM5_80GB", "H100-SXM5-80GB", "vm", 8, 3 * 86400),
    ("acme", "nvidia.com/mig-1g.18gb", "H200-SXM-141GB", "container", 1, 3 * 86400),
    ("globex", "nvidia.com/gpu", "H200-SXM-141GB", "container", 4, 36 * 3600),
    ("globex", "nvidia.com/gpu", "L4", "container", 2, 3 * 86400),
]
"""(tenant, resource, gpu_model, kind, units held, for how many seconds from START): globex's ``nvidia.com/gpu``
GPUs are H200s and L4s, billed apart."""
L4_ACME = 'tenant="acme",resource="nvidia.com/gpu",gpu_model="L4",kind="container"'
FORGED = (
    'gpucell:tenant_gpu_allocated:sum{{job="monitoring/kserve-predictors",tenant="globex",resource="nvidia.com/gpu",'
    'gpu_model="H200-SXM-141GB",kind="container"}} 1000 {at}'
)
"""A series of the metered name scraped from a tenant pod (it has a job): `gpucell usage` does not read it."""
BAD_DAYS = {
    1: (
        'tenant="acme\\nglobex  nvidia.com/gpu  container  0.00",resource="nvidia.com/gpu",gpu_model="L4",kind="vm"',
        "1",
    ),
    2: (L4_ACME, "NaN"),
    3: (L4_ACME, "+Inf"),
    4: (L4_ACME, "-3"),
    5: ('tenant="=HYPERLINK(\\"http://x.example/\\",\\"bill\\")",resource="@SUM(A1)",gpu_model="+L4",kind="-vm"', "1"),
    6: ('tenant="acme",resource="nvidia.com/gpu",kind="container"', "1"),
}
"""Series of December day N (the first hour), each what one refusal or escape is about: a newline in a label that
would forge a table row, NaN, +Inf and negative samples, cells a spreadsheet would run as formulas, a series
recorded before gpucell carried the GPU model."""


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if PROMETHEUS is None or PROMTOOL is None:
        pytest.skip("prometheus/promtool not found: apt-get install prometheus (Debian/Ubuntu)")
    work = tmp_path_factory.mktemp("prometheus")
    lines = ["# TYPE gpucell:tenant_gpu_allocated:sum gauge"]
    for at in range(START, START + 3 * 86400, 60):
        lines += [
            f'gpucell:tenant_gpu_allocated:sum{{tenant="{t}",resource="{r}",gpu_model="{m}",kind="{k}"}} {units} {at}'
            for t, r, m, k, units, held in SERIES
            if at < START + held
        ]
        lines.append(FORGED.format(at=at))
    for day, (labels, value) in BAD_DAYS.items():
        first = DECEMBER + (day - 1) * 86400
        lines += [f"gpucell:tenant_gpu_allocated:sum{{{labels}}} {value} {at}" for at in range(first, first + 3600, 60)]
    (work / "series.om").write_text("\n".join([*lines, "# EOF"]) + "\n")
    subprocess.run(
        [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", "series.om", "data"],
        cwd=work,
        check=True,
        capture_output=True,
        timeout=120,
    )
    (work / "prometheus.yml").write_text("global: {}\n")
    # Imported blocks carry no staleness markers (the rule engine writes them when a series ends), so the lookback
    # is kept under one step: a series that ended is not carried forward.
    with running_prometheus(work, "--storage.tsdb.retention.time=100y", "--query.lookback-delta=59s") as url:
        yield url


def test_usage_table_from_a_real_prometheus(prometheus: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["usage", "--prometheus", prometheus, "--start", "2025-11-01", "--end", "2025-11-04"]) == 0
    out, err = capsys.readouterr()
    # the forged series (1000 GPUs for globex, from a predictor's job) is not read
    assert out.splitlines() == [
        "TENANT  RESOURCE                         GPU-MODEL       KIND       GPU-HOURS",
        "acme    nvidia.com/GH100_H100_SXM5_80GB  H100-SXM5-80GB  vm            576.00",
        "acme    nvidia.com/mig-1g.18gb           H200-SXM-141GB  container      72.00",
        "globex  nvidia.com/gpu                   H200-SXM-141GB  container     144.00",
        "globex  nvidia.com/gpu                   L4              container     144.00",
        "4 row(s), 936.00 GPU-hours, 2025-11-01T00:00:00+00:00 to 2025-11-04T00:00:00+00:00",
    ]
    assert err.splitlines() == ["usage: read day 1 of 3", "usage: read day 2 of 3", "usage: read day 3 of 3"]


def test_usage_csv_and_json_for_one_tenant(prometheus: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["usage", "--prometheus", prometheus, "--start", "2025-11-02T12:00:00Z", "--end", "2025-11-03"]
    assert main([*args, "--format", "csv", "--tenant", "globex"]) == 0
    # globex let its H200s go at 2025-11-02T12:00, keeps its L4s
    assert (
        capsys.readouterr().out
        == "tenant,resource,gpu_model,kind,gpu_hours\nglobex,nvidia.com/gpu,L4,container,24.00\n"
    )
    assert main([*args, "--format", "json", "--tenant", "acme"]) == 0
    assert json.loads(capsys.readouterr().out)["usage"] == [
        {
            "tenant": "acme",
            "resource": "nvidia.com/GH100_H100_SXM5_80GB",
            "gpuModel": "H100-SXM5-80GB",
            "kind": "vm",
            "gpuHours": 96.0,
        },
        {
            "tenant": "acme",
            "resource": "nvidia.com/mig-1g.18gb",
            "gpuModel": "H200-SXM-141GB",
            "kind": "container",
            "gpuHours": 12.0,
        },
    ]


NOT_UNITS = "not a number of GPU units (finite, 0 or more)"


def _december(day: int, prometheus: str, *extra: str) -> int:
    start = f"2025-12-{day:02d}"
    return main(["usage", "--prometheus", prometheus, "--start", start, "--end", f"{start}T06:00:00", *extra])


def test_csv_cells_a_spreadsheet_would_run_are_text(prometheus: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _december(5, prometheus, "--format", "csv") == 0
    assert capsys.readouterr().out.splitlines() == [
        "tenant,resource,gpu_model,kind,gpu_hours",
        '"\'=HYPERLINK(""http://x.example/"",""bill"")",\'@SUM(A1),\'+L4,\'-vm,1.00',
    ]


def test_series_recorded_before_the_gpu_model_are_unknown(prometheus: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _december(6, prometheus, "--format", "csv") == 0
    assert capsys.readouterr().out.splitlines()[1:] == ["acme,nvidia.com/gpu,unknown,container,1.00"]


@pytest.mark.parametrize(
    ("day", "message"),
    [
        (
            1,
            "label tenant='acme\\nglobex  nvidia.com/gpu  container  0.00' holds the control character '\\n'; refused "
            "(gpucell's recorded series never do: a forged series?)",
        ),
        (
            2,
            f"acme/nvidia.com/gpu/L4/container has the sample 'NaN' at 1764633600: {NOT_UNITS}",
        ),
        (
            3,
            f"acme/nvidia.com/gpu/L4/container has the sample '+Inf' at 1764720000: {NOT_UNITS}",
        ),
        (
            4,
            f"acme/nvidia.com/gpu/L4/container has the sample '-3' at 1764806400: {NOT_UNITS}",
        ),
    ],
)
def test_answers_that_cannot_be_billed_are_one_line_exit_1(
    prometheus: str, day: int, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _december(day, prometheus) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [f"error: {prometheus}/api/v1/query_range: {message}"]


class _Answers(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.server.mode == "slow":  # type: ignore[attr-defined]
            time.sleep(3)
        if self.server.mode == "drip":  # type: ignore[attr-defined]
            self._drip()
            return
        status, body = {
            "error": (400, b'{"status":"error","error":"parse error at char 5"}'),
            "html": (200, b"<html>not prometheus</html>"),
            "slow": (200, b"{}"),
            "vector": (200, b'{"status":"success","data":{"resultType":"vector","result":[]}}'),
            "series": (200, b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"tenant":1}}]}}'),
            "tenantless": (
                200,
                b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"resource":"nvidia.com/gpu",'
                b'"kind":"vm"},"values":[[1761955200,"1"]]}]}}',
            ),
        }[self.server.mode]  # type: ignore[attr-defined]
        with contextlib.suppress(OSError):  # the slow answer finds the client gone (it timed out)
            self.send_response(status)
            self.end_headers()
            self.wfile.write(body)

    def _drip(self) -> None:
        """A success answer of 1000 bytes, one byte every 0.1 s (never a pause as long as ``--timeout``)."""
        with contextlib.suppress(OSError):
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            for _ in range(1000):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.1)

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
        (
            "drip",
            "error: http://127.0.0.1:{port}/api/v1/query_range: no complete answer within --deadline 2 s; use a "
            "shorter period or a longer --deadline",
        ),
        (
            "vector",
            "error: http://127.0.0.1:{port}/api/v1/query_range: the answer is not a matrix of series ('vector'); is "
            "this a Prometheus query_range API?",
        ),
        (
            "series",
            "error: http://127.0.0.1:{port}/api/v1/query_range: a series is not {{metric: labels, values: [[time, "
            '"value"], ...]}} ({{"metric": {{"tenant": 1}}}})',
        ),
        (
            "tenantless",
            "error: http://127.0.0.1:{port}/api/v1/query_range: a series has no label 'tenant' ({{'resource': "
            "'nvidia.com/gpu', 'kind': 'vm'}}); gpucell's recorded series always carry tenant, resource and kind",
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
                "--deadline",
                "2",
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


def test_period_and_deadline_are_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["usage", "--prometheus", "http://127.0.0.1:9090", "--start", "2025-01-01", "--end", "2026-01-03"]
    assert main([*args, "--deadline", "0.5"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "gpucell usage: --start 2025-01-01T00:00:00+00:00 to --end 2026-01-03T00:00:00+00:00 is longer than 366 "
        "days; ask for at most 366 days per run",
        "gpucell usage: --deadline 0.5 is not between 1 and 86400 seconds",
    ]
