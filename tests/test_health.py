"""``gpucell health`` against a real Prometheus on loopback: it scrapes synthetic DCGM exporter, kube-state-metrics
and node-exporter series (the host-side GPU health of a ``vm-passthrough`` host) from a small local server (jobs
``nvidia-dcgm-exporter``, ``kube-state-metrics`` and ``node-exporter``, as the cell's ServiceMonitors name them) and
evaluates gpucell's own rules, taken from the plan's PrometheusRule, so the alerts that fire are the ones a cell
raises. Each test sets a scenario and waits until Prometheus shows it. The failure answers come from a second small
server. The quarantine the command proposes is planned and reviewed by ``gpucell diff``."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import shutil
import socket
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from gpucell.errors import ConfigError
from gpucell.stacks.cli import main
from gpucell.stacks.health import quarantine_patch
from gpucell.stacks.plan import make_plan, to_json
from gpucell.stacks.review import render, review
from tests.conftest import REPO, write_prod_lab
from tests.prometheus_loopback import PROMETHEUS, running_prometheus

if PROMETHEUS is None and os.environ.get("CI") == "true":
    raise RuntimeError("prometheus is missing under CI=true: .ci/run installs it (apt-get install prometheus)")
STACK = "lab"
HOSTS = {
    "lab1-srv-1": "servers",
    "lab1-gpu-1": "l40s",
    "lab1-gpu-2": "l40s",
    "lab1-cpu-1": "cpu",
    "lab1-vm-1": "l40s-vm",
}
NS = "tenant-research"
VM_POOL = """\
        l40s-vm:
          role: gpu
          gpuModel: L40S
          gpusPerNode: 2
          gpuMode: vm-passthrough
          hosts:
          - {name: lab1-vm-1, address: 10.20.0.41}
"""
"""A pool of L40S bound to vfio-pci for VMs: no DCGM exporter sees its GPUs, the host-side collector does."""
RESOURCES = {"lab1-gpu-1": "nvidia_com_gpu", "lab1-gpu-2": "nvidia_com_gpu", "lab1-vm-1": "nvidia_com_AD102GL_L40S"}
"""The GPU resource each GPU host advertises, as kube-state-metrics names it."""


def lab_stack() -> str:
    """The dev stack with a second L40S host (so that one can be quarantined and the quota still fits), a
    ``vm-passthrough`` pool of one host and the metrics stack on."""
    text = (REPO / "Pulumi.dev.yaml").read_text()
    host = "          - {name: lab1-gpu-1, address: 10.20.0.21}\n"
    cpu = "          - {name: lab1-cpu-1, address: 10.20.0.31}\n"
    storage = "      storage: {backend: local-path}\n"
    assert text.count(host) == text.count(storage) == text.count(cpu) == 1
    text = text.replace(host, host + "          - {name: lab1-gpu-2, address: 10.20.0.22}\n")
    text = text.replace(cpu, cpu + VM_POOL)
    return text.replace(storage, storage + "      metrics: {enabled: true}\n")


def lab_project(folder: Path, text: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "Pulumi.yaml", folder)
    (folder / f"Pulumi.{STACK}.yaml").write_text(lab_stack() if text is None else text)
    return folder


def ksm(
    *, not_ready: str | None = None, allocatable: dict[str, int] | None = None, broken_workloads: bool = False
) -> str:
    """kube-state-metrics' series of the lab cell: every host Ready, 4 ``nvidia.com/gpu`` per L40S host, the
    tenant's endpoint, notebook and VM running, but for what the arguments break."""
    gpus = {"lab1-gpu-1": 4, "lab1-gpu-2": 4, "lab1-vm-1": 2, **(allocatable or {})}
    lines = [
        f'kube_node_status_condition{{node="{host}",condition="Ready",status="true"}} {0 if host == not_ready else 1}'
        for host in HOSTS
    ]
    for host, pool in HOSTS.items():
        lines.append(f'kube_node_labels{{node="{host}",label_gpucell_io_pool="{pool}"}} 1')
    for host, units in gpus.items():
        for metric in ("kube_node_status_allocatable", "kube_node_status_capacity"):
            lines.append(f'{metric}{{node="{host}",resource="{RESOURCES[host]}",unit="integer"}} {units}')
    available = 0 if broken_workloads else 1
    launcher = "virt-launcher-bastion-x7k2p"
    lines += [
        f'kube_namespace_labels{{namespace="{NS}",label_gpucell_io_tenant="research"}} 1',
        f'kube_deployment_spec_replicas{{namespace="{NS}",deployment="qwen-predictor"}} 1',
        f'kube_deployment_status_replicas_available{{namespace="{NS}",deployment="qwen-predictor"}} {available}',
        f'kube_statefulset_replicas{{namespace="{NS}",statefulset="alice"}} 1',
        f'kube_statefulset_status_replicas_ready{{namespace="{NS}",statefulset="alice"}} {available}',
        f'kube_pod_labels{{namespace="{NS}",pod="{launcher}",label_kubevirt_io="virt-launcher"}} 1',
    ]
    phase = "Pending" if broken_workloads else "Running"
    lines += [
        f'kube_pod_status_phase{{namespace="{NS}",pod="{launcher}",phase="{p}"}} {int(p == phase)}'
        for p in ("Pending", "Running", "Succeeded", "Failed", "Unknown")
    ]
    # a Deployment scaled to zero on purpose (an endpoint at minReplicas 0) is not a problem
    lines += [
        f'kube_deployment_spec_replicas{{namespace="{NS}",deployment="idle-predictor"}} 0',
        f'kube_deployment_status_replicas_available{{namespace="{NS}",deployment="idle-predictor"}} 0',
    ]
    return "\n".join(lines) + "\n"


def dcgm(xid: dict[tuple[str, int], int] | None = None) -> str:
    """The DCGM exporter's XID gauge of each GPU of the L40S hosts (0: none), with ``xid`` set."""
    return "".join(
        f'DCGM_FI_DEV_XID_ERRORS{{node="{host}",gpu="{gpu}",UUID="GPU-{host}-{gpu}"}} '
        f"{(xid or {}).get((host, gpu), 0)}\n"
        for host in ("lab1-gpu-1", "lab1-gpu-2")
        for gpu in range(4)
    )


def host(gpus: int = 2) -> str:
    """node-exporter's host-side GPU health of the VM host (the collector's textfile): ``gpus`` of its 2 GPUs
    answer on the PCI bus."""
    lines = [
        f'gpucell_host_gpu_pci_device_up{{node="lab1-vm-1",bdf="0000:{bus}:00.0",device="0x26b9",driver="vfio-pci"}} '
        f"{int(index < gpus)}"
        for index, bus in enumerate(("41", "42"))
    ]
    return "\n".join([*lines, f'gpucell_host_gpu_pci_devices{{node="lab1-vm-1"}} {gpus}']) + "\n"


FORGED = (
    'kube_node_status_condition{node="lab1-srv-1",condition="Ready",status="true"} 0\n'
    'kube_node_status_allocatable{node="lab1-gpu-1",resource="nvidia_com_gpu",unit="integer"} 0\n'
    'DCGM_FI_DEV_XID_ERRORS{node="lab1-gpu-1",gpu="0",UUID="GPU-forged"} 79\n'
    'gpucell_host_gpu_pci_devices{node="lab1-vm-1"} 0\n'
)
"""What a tenant pod could export under gpucell's input names (another job): neither the rules nor ``gpucell health``
read it."""


class _Targets(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = self.server.pages.get(self.path.lstrip("/"), "")  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


class _QuietServer(http.server.ThreadingHTTPServer):
    """A loopback server that never prints: a client that gave up (Prometheus between scrapes, ``gpucell health``
    past its deadline) makes the handler's write fail, and socketserver's default ``handle_error`` would print that
    traceback to the stderr the tests read (seen under load in the full suite)."""

    def handle_error(self, request: object, client_address: object) -> None:
        pass


def _serve(handler: type[http.server.BaseHTTPRequestHandler]) -> http.server.ThreadingHTTPServer:
    server = _QuietServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _query(url: str, promql: str) -> list[dict[str, str]]:
    with urllib.request.urlopen(f"{url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}", timeout=5) as r:
        return [s["metric"] for s in json.load(r)["data"]["result"]]


class Cell:
    """The Prometheus and the series it scrapes; :meth:`show` switches the scenario."""

    def __init__(self, url: str, targets: http.server.ThreadingHTTPServer, project: Path) -> None:
        self.url, self.targets, self.project = url, targets, project
        self.serial = 0

    def show(self, ksm_text: str, dcgm_text: str, critical: set[tuple[str, str]], host_text: str | None = None) -> None:
        """Serve these series (``host_text``: node-exporter's, default :func:`host`), then wait until Prometheus has
        scraped them and fires exactly the ``critical`` alerts ``(alertname, node)``."""
        self.serial += 1
        marker = f"gpucell_test_scenario {self.serial}\n"
        pages = {"ksm": ksm_text + marker, "dcgm": dcgm_text, "host": host() if host_text is None else host_text}
        self.targets.pages.update(pages)  # type: ignore[attr-defined]
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError, KeyError, ValueError):
                seen = _query(self.url, f'gpucell_test_scenario{{job="kube-state-metrics"}} == {self.serial}')
                firing = {
                    (a["alertname"], a.get("node", ""))
                    for a in _query(self.url, 'ALERTS{alertstate="firing",severity="critical"}')
                }
                if seen and firing == critical:
                    return
            assert time.monotonic() < deadline, f"scenario {self.serial} not shown in 60 s"
            time.sleep(0.3)

    def health(self, *extra: str) -> int:
        return main(["health", STACK, "--prometheus", self.url, "--project-dir", str(self.project), *extra])


@pytest.fixture(scope="module")
def cell(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cell]:
    if PROMETHEUS is None:
        pytest.skip("prometheus not found: apt-get install prometheus (Debian/Ubuntu)")
    work = tmp_path_factory.mktemp("prometheus")
    project = lab_project(work / "project")
    plan = make_plan(project, STACK)
    rule = next(r for r in plan.result.resources if r.type == "kubernetes:monitoring.coreos.com/v1:PrometheusRule")
    (work / "rules.yml").write_text(yaml.safe_dump({"groups": rule.inputs["spec"]["groups"]}))
    targets = _serve(_Targets)
    targets.pages = {"ksm": ksm(), "dcgm": dcgm(), "host": host(), "tenant": FORGED}  # type: ignore[attr-defined]
    target = f"127.0.0.1:{targets.server_address[1]}"
    jobs = [
        ("kube-state-metrics", "ksm"),
        ("nvidia-dcgm-exporter", "dcgm"),
        ("node-exporter", "host"),
        ("monitoring/kserve-predictors", "tenant"),
    ]
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": ["rules.yml"],
        "scrape_configs": [
            {
                "job_name": job,
                "metrics_path": f"/{path}",
                "honor_labels": True,
                "static_configs": [{"targets": [target]}],
            }
            for job, path in jobs
        ],
    }
    (work / "prometheus.yml").write_text(yaml.safe_dump(config))
    try:
        with running_prometheus(work) as url:
            yield Cell(url, targets, project)
    finally:
        targets.shutdown()
        targets.server_close()


FELL_OFF = {("GpuFellOffTheBus", "lab1-gpu-2"), ("GpuXidCritical", "lab1-gpu-2")}


def test_a_healthy_cell_exits_0(cell: Cell, capsys: pytest.CaptureFixture[str]) -> None:
    cell.show(ksm(), dcgm(), set())
    assert cell.health() == 0
    # the tenant's forged series (a NotReady server, no GPUs, XID 79) are neither alerted on nor read
    assert capsys.readouterr().out.splitlines() == ["health: stack lab region lab1: healthy"]
    assert cell.health("--propose-quarantine") == 0
    assert capsys.readouterr().out.splitlines()[-1] == "quarantine: nothing to do"


def test_a_gpu_fallen_off_the_bus_names_the_host_and_proposes_its_quarantine(
    cell: Cell, capsys: pytest.CaptureFixture[str]
) -> None:
    cell.show(ksm(), dcgm({("lab1-gpu-2", 3): 79}), FELL_OFF)
    assert cell.health() == 3
    assert capsys.readouterr().out.splitlines() == [
        "lab1: alert GpuFellOffTheBus firing on host lab1-gpu-2 (gpu 3)",
        "lab1: alert GpuXidCritical firing on host lab1-gpu-2 (gpu 3)",
        "health: stack lab region lab1: unhealthy, 2 problem(s), 1 host(s)",
    ]
    assert cell.health("--propose-quarantine") == 3
    out = capsys.readouterr().out.splitlines()
    assert out[2:] == [
        "health: stack lab region lab1: unhealthy, 2 problem(s), 1 host(s)",
        "quarantine: lab1-gpu-2: gpucell health: GpuFellOffTheBus gpu 3, GpuXidCritical gpu 3",
        f"--- a/Pulumi.{STACK}.yaml",
        f"+++ b/Pulumi.{STACK}.yaml",
        "@@ -28,7 +28,7 @@",
        "           gpuMode: container",
        "           hosts:",
        "           - {name: lab1-gpu-1, address: 10.20.0.21}",
        "-          - {name: lab1-gpu-2, address: 10.20.0.22}",
        '+          - {name: lab1-gpu-2, address: 10.20.0.22, quarantine: {reason: "gpucell health: GpuFellOffTheBus '
        'gpu 3, GpuXidCritical gpu 3"}}',
        "         cpu:",
        "           role: cpu",
        "           hosts:",
    ]
    # printed only: the stack file is as it was
    assert (cell.project / f"Pulumi.{STACK}.yaml").read_text() == lab_stack()


def test_write_quarantines_the_host_and_gpucell_diff_reviews_it(
    cell: Cell, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cell.show(ksm(), dcgm({("lab1-gpu-2", 3): 79}), FELL_OFF)
    project = lab_project(tmp_path / "head")
    assert main(["health", STACK, "--prometheus", cell.url, "--project-dir", str(project), "--write"]) == 3
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == f"wrote {project}/Pulumi.{STACK}.yaml; review it with: gpucell diff --base HEAD {STACK}"
    written = (project / f"Pulumi.{STACK}.yaml").read_text()
    reason = "gpucell health: GpuFellOffTheBus gpu 3, GpuXidCritical gpu 3"
    assert written == lab_stack().replace(
        "address: 10.20.0.22}", f'address: 10.20.0.22, quarantine: {{reason: "{reason}"}}}}'
    )
    # the patched file plans, and the review names the quarantine and the capacity it takes out
    assert main(["plan", STACK, "--project-dir", str(project)]) == 0
    capsys.readouterr()
    base = to_json(make_plan(lab_project(tmp_path / "base"), STACK), ["lab1"])
    head = to_json(make_plan(project, STACK), ["lab1"])
    lines = render([review(base, head)]).splitlines()
    assert (
        "- `lab1`: `lab1-gpu-2` quarantined (`gpucell-health-gpufelloffthebus-gpu-3-gpuxidcritical-gpu-3`): "
        "cordoned and drained (pods evicted through the Eviction API, GPU VMs stopped and started again on other "
        "nodes); it stays out of service until its `quarantine` is removed"
    ) in lines
    assert (
        "- `lab1`, no longer in service: `nvidia.com/gpu` 8 → 4 units; tenants' quotas reserve 3, declared workloads "
        "use 3"
    ) in lines
    # once quarantined, the host's alerts are notes: nothing more to do
    assert main(["health", STACK, "--prometheus", cell.url, "--project-dir", str(project), "--write"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"lab1: note: alert GpuFellOffTheBus firing on host lab1-gpu-2 (gpu 3) (quarantined: {reason}; not counted)",
        f"lab1: note: alert GpuXidCritical firing on host lab1-gpu-2 (gpu 3) (quarantined: {reason}; not counted)",
        "health: stack lab region lab1: healthy",
        "quarantine: nothing to do",
    ]


def test_a_vfio_bound_gpu_off_the_bus_names_the_host_exits_3_and_its_quarantine_is_reviewed(
    cell: Cell, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 31's end to end: one of the two vfio-bound GPUs of lab1-vm-1 stops answering on its PCI bus (no DCGM
    exporter sees it); the host-side GpuFellOffTheBus fires; gpucell health names the host, exits 3, proposes and
    writes its quarantine; the patched stack plans, and gpucell diff reviews the change."""
    cell.show(ksm(), dcgm(), {("GpuFellOffTheBus", "lab1-vm-1")}, host(gpus=1))
    assert cell.health() == 3
    assert capsys.readouterr().out.splitlines() == [
        "lab1: alert GpuFellOffTheBus firing on host lab1-vm-1",
        "health: stack lab region lab1: unhealthy, 1 problem(s), 1 host(s)",
    ]
    reason = "gpucell health: GpuFellOffTheBus"
    assert cell.health("--propose-quarantine") == 3
    out = capsys.readouterr().out.splitlines()
    assert out[2] == f"quarantine: lab1-vm-1: {reason}"
    assert [line for line in out[3:] if line.startswith(("-", "+")) and not line.startswith(("---", "+++"))] == [
        "-          - {name: lab1-vm-1, address: 10.20.0.41}",
        f'+          - {{name: lab1-vm-1, address: 10.20.0.41, quarantine: {{reason: "{reason}"}}}}',
    ]
    project = lab_project(tmp_path / "head")
    assert main(["health", STACK, "--prometheus", cell.url, "--project-dir", str(project), "--write"]) == 3
    capsys.readouterr()
    written = (project / f"Pulumi.{STACK}.yaml").read_text()
    assert written == lab_stack().replace(
        "address: 10.20.0.41}", f'address: 10.20.0.41, quarantine: {{reason: "{reason}"}}}}'
    )
    base = to_json(make_plan(lab_project(tmp_path / "base"), STACK), ["lab1"])
    head = to_json(make_plan(project, STACK), ["lab1"])
    lines = render([review(base, head)]).splitlines()
    assert (
        "- `lab1`: `lab1-vm-1` quarantined (`gpucell-health-gpufelloffthebus`): cordoned and drained (pods evicted "
        "through the Eviction API, GPU VMs stopped and started again on other nodes); it stays out of service until "
        "its `quarantine` is removed"
    ) in lines
    assert (
        "- `lab1`, no longer in service: `nvidia.com/AD102GL_L40S` 2 → 0 units; tenants' quotas reserve 0, "
        "declared workloads use 0"
    ) in lines


def test_a_node_not_ready_exits_3_and_is_not_quarantined(cell: Cell, capsys: pytest.CaptureFixture[str]) -> None:
    cell.show(ksm(not_ready="lab1-cpu-1"), dcgm(), set())
    assert cell.health() == 3
    assert capsys.readouterr().out.splitlines() == [
        "lab1: host lab1-cpu-1 (pool cpu) is NotReady",
        "health: stack lab region lab1: unhealthy, 1 problem(s), 1 host(s)",
    ]
    assert cell.health("--propose-quarantine") == 0
    assert capsys.readouterr().out.splitlines()[-1] == "quarantine: nothing to do"


def test_gpu_capacity_below_the_declared_exits_3(cell: Cell, capsys: pytest.CaptureFixture[str]) -> None:
    # lab1-gpu-2's Node is gone from kube-state-metrics, lab1-gpu-1 advertises 3 of its 4 L40S
    text = "\n".join(line for line in ksm(allocatable={"lab1-gpu-1": 3}).splitlines() if '"lab1-gpu-2"' not in line)
    cell.show(text + "\n", dcgm(), set())
    assert cell.health() == 3
    assert capsys.readouterr().out.splitlines() == [
        "lab1: host lab1-gpu-2 (pool l40s) has no Node: kube-state-metrics reports no Ready condition",
        "lab1: host lab1-gpu-1 (pool l40s) has 3 of 4 nvidia.com/gpu allocatable",
        "health: stack lab region lab1: unhealthy, 2 problem(s), 2 host(s)",
    ]


def test_workloads_not_ready_exit_3(cell: Cell, capsys: pytest.CaptureFixture[str]) -> None:
    cell.show(ksm(broken_workloads=True), dcgm(), set())
    assert cell.health("--region", "lab1") == 3
    assert capsys.readouterr().out.splitlines() == [
        "lab1: workload tenant-research/qwen-predictor (Deployment) has none of its 1 replica(s) available",
        "lab1: workload tenant-research/alice (StatefulSet) has none of its 1 replica(s) ready",
        "lab1: workload tenant-research/virt-launcher-bastion-x7k2p (VM launcher pod) is Pending",
        "health: stack lab region lab1: unhealthy, 3 problem(s), 0 host(s)",
    ]


# -- bad input, unreachable, slow and malformed answers ------------------------------------------------------------


def test_bad_input_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = lab_project(tmp_path)
    args = ["health", STACK, "--project-dir", str(project)]
    assert main([*args, "--prometheus", "127.0.0.1:9090"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "gpucell health: --prometheus '127.0.0.1:9090' is not an http:// or https:// URL with a host (e.g. "
        "http://127.0.0.1:9090 after kubectl -n monitoring port-forward svc/prometheus-operated 9090)"
    ]
    assert main([*args, "--prometheus", "http://127.0.0.1:9090", "--deadline", "0"]) == 2
    assert capsys.readouterr().err.splitlines() == ["gpucell health: --deadline 0 is not between 1 and 3600 seconds"]
    assert main([*args, "--prometheus", "http://127.0.0.1:9090", "--region", "fra1"]) == 2
    assert capsys.readouterr().err.splitlines() == ["--region: 'fra1' is not a region of stack lab; regions: lab1"]
    assert main(["health", "nope", "--project-dir", str(project), "--prometheus", "http://127.0.0.1:9090"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"Pulumi.nope.yaml: not found in {project}; run gpucell from the project directory"
    ]


def test_a_stack_of_two_regions_needs_region_and_metrics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = ["--prometheus", "http://127.0.0.1:9090", "--project-dir", str(write_prod_lab(tmp_path))]
    assert main(["health", "prod", *url]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "gpucell health: stack prod has regions fra1, iad1; each cell has its own Prometheus: give --region"
    ]
    url[-1] = str(REPO)
    assert main(["health", "dev", *url]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "regions.lab1.metrics.enabled: false in stack dev: the cell has no metrics stack, so no alerts of gpucell's "
        "to read; set metrics.enabled: true (docs/metrics.md)"
    ]


def test_an_unreachable_prometheus_is_one_line_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as sock:  # a loopback port nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    url = f"http://127.0.0.1:{port}"
    assert main(["health", STACK, "--prometheus", url, "--project-dir", str(lab_project(tmp_path))]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"error: region lab1: {url}/api/v1/query: [Errno 111] Connection refused (is the Prometheus URL right and "
        "reachable?)"
    ]


class _Answers(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.server.mode == "slow":  # type: ignore[attr-defined]
            time.sleep(3)
        body = {
            "slow": b"{}",
            "html": b"<html>not prometheus</html>",
            "matrix": b'{"status":"success","data":{"resultType":"matrix","result":[]}}',
            "nameless": b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{"node":"x"},'
            b'"value":[1,"1"]}]}}',
            "newline": b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{"alertname":'
            b'"GpuFellOffTheBus","node":"lab1-gpu-2\\nlab1: healthy"},"value":[1,"1"]}]}}',
        }[self.server.mode]  # type: ignore[attr-defined]
        with contextlib.suppress(OSError):  # the slow answer finds the client gone (past its deadline)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


QUERY = "error: region lab1: http://127.0.0.1:{port}/api/v1/query"


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        (
            "slow",
            f"{QUERY}: no complete answer within --deadline 1 s; give a longer --deadline or check the Prometheus URL",
        ),
        ("html", f"{QUERY}: the answer is not JSON (is this a Prometheus API?)"),
        ("matrix", f"{QUERY}: the answer is not a vector of series ('matrix'); is this a Prometheus query API?"),
        (
            "nameless",
            f"{QUERY}: a series has no label 'alertname' ({{{{'node': 'x'}}}}); the query's series always carry "
            "alertname",
        ),
        (
            "newline",
            f"{QUERY}: label node='lab1-gpu-2\\nlab1: healthy' holds the control character '\\n'; refused (a "
            "forged series?)",
        ),
    ],
)
def test_a_slow_or_malformed_answer_is_one_line_exit_1(
    mode: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = _QuietServer(("127.0.0.1", 0), _Answers)
    server.daemon_threads = False  # server_close() waits for the slow answer: nothing is left running
    server.mode = mode  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    project = lab_project(tmp_path)
    try:
        args = ["health", STACK, "--prometheus", f"http://127.0.0.1:{port}", "--project-dir", str(project)]
        code = main([*args, "--deadline", "1"])
    finally:
        server.shutdown()
        server.server_close()
    assert code == 1
    assert capsys.readouterr().err.splitlines() == [message.format(port=port)]


# -- the patch on other layouts of the stack file ------------------------------------------------------------------
BLOCK = """config:
  gpucell:regions:
    lab1:
      nodePools:
        l40s:
          hosts:
            - name: lab1-gpu-1   # the first
              address: 10.20.0.21
            - name: lab1-gpu-2
              address: 10.20.0.22
        cpu: {role: cpu, hosts: [{name: lab1-cpu-1, address: 10.20.0.31}]}
"""


def test_the_patch_keeps_a_block_entry_a_block() -> None:
    patched = quarantine_patch(BLOCK, "Pulumi.x.yaml", "lab1", {"lab1-gpu-1": "GPU 3 Xid 79", "lab1-cpu-1": "disk"})
    assert patched == BLOCK.replace(
        "address: 10.20.0.21\n", 'address: 10.20.0.21\n              quarantine: {reason: "GPU 3 Xid 79"}\n'
    ).replace("10.20.0.31}", '10.20.0.31, quarantine: {reason: "disk"}}')
    hosts = yaml.safe_load(patched)["config"]["gpucell:regions"]["lab1"]["nodePools"]["l40s"]["hosts"]
    assert hosts[0] == {"name": "lab1-gpu-1", "address": "10.20.0.21", "quarantine": {"reason": "GPU 3 Xid 79"}}


def test_a_host_reached_through_an_alias_is_left_to_a_person() -> None:
    # the cpu pool's hosts are the l40s pool's (an alias): quarantining lab1-gpu-1 would change both pools
    text = BLOCK.replace(
        "          hosts:\n            - name: lab1-gpu-1", "          hosts: &h\n            - name: lab1-gpu-1"
    )
    text = text.replace("{role: cpu, hosts: [{name: lab1-cpu-1, address: 10.20.0.31}]}", "{role: cpu, hosts: *h}")
    with pytest.raises(ConfigError) as caught:
        quarantine_patch(text, "Pulumi.x.yaml", "lab1", {"lab1-gpu-1": "GPU 3"})
    assert caught.value.lines == [
        "Pulumi.x.yaml: host lab1-gpu-1 of region lab1 is not written as an entry of its own (an alias or a merge "
        "key?); quarantine it by hand (docs/operations.md, Quarantine a host)"
    ]
