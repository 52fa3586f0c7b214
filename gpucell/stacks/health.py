"""``gpucell health``: a cell's health from its own metrics, and the quarantines it calls for as a stack-file patch.

Read from the cell's Prometheus (``/api/v1/query``, one instant query each, :data:`QUERIES`):

- **critical alerts firing**: ``ALERTS{alertstate="firing",severity="critical"}``, whatever rule raised them
  (gpucell's GPU alerts, :mod:`gpucell.components.gpu_alerts`: ``GpuXidCritical``, ``GpuFellOffTheBus``,
  ``GpuDoubleBitEcc``, ``GpuRetiredPagesHigh``, ``GpuRowRemapFailed``, ``GpuCountDropped``, and on the hosts of
  ``vm-passthrough``, ``vm-vgpu`` and ``dra`` pools the host-side ``GpuFellOffTheBus``, ``GpuHostXidCritical`` and
  ``GpuPcieAerFatal``; kube-prometheus-stack's and KubeVirt's). The host is the alert's ``node`` label (the DCGM
  exporter's and node-exporter's ServiceMonitors copy the pod's node into it, ``gpu_alerts.NODE_RELABELING``;
  kube-state-metrics' series carry it); the GPU is its ``gpu`` label (DCGM's index) or ``bdf`` (the host's PCI
  address);
- **nodes NotReady**: ``kube_node_status_condition{condition="Ready",status="true"}`` is 0, and declared hosts with
  no such series (no Node);
- **GPU capacity below what the stack declares**: per in-service host of each device-plugin pool,
  ``kube_node_status_allocatable`` of each resource the pool offers
  (:func:`gpucell.admission.inventory.gpu_offers`) against the units the pool gives a node. ``dra`` pools are not
  covered: their GPUs are in ResourceSlices, which kube-state-metrics does not export;
- **workloads not ready**, as kube-state-metrics sees them in tenant namespaces (label ``gpucell.io/tenant``):
  Deployments (model endpoints' ``<endpoint>-predictor``, KServe raw deployment) and StatefulSets (notebooks) that
  want replicas and have none available/ready, and VMs whose ``virt-launcher`` pod (pod label ``kubevirt.io``) is
  ``Pending``, ``Failed`` or ``Unknown``. A VM with no launcher pod at all (halted, or crash-looping between pods) is
  not seen: KubeVirt's own VM metrics are not read.

Every input is read with ``job="kube-state-metrics"`` (``gpucell.components.metering.KSM_JOB``), as gpucell's rules
read it, so a series of the same name a tenant pod exports changes nothing. Hosts already quarantined in the stack
file are left out (their alerts are notes: their fault is why they are out).

Each critical alert on an in-service host of the stack calls for its quarantine (docs/operations.md, "Quarantine a
host"): :func:`quarantine_patch` adds ``quarantine: {reason: ...}`` to the host's entry in ``Pulumi.<stack>.yaml``,
keeping every other byte of the file, and :func:`plan_problems` plans the patched file offline before it is shown
or written. Requests share one deadline (``--deadline``, :data:`DEFAULT_DEADLINE` seconds), answers are bounded
(:data:`MAX_RESPONSE_BYTES`) and checked (:mod:`gpucell.stacks.prometheus_api`: an instant vector, the labels each
query needs, no control character in a label, finite samples).
"""

from __future__ import annotations

import difflib
import json
import math
import re
import tempfile
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpucell.admission.inventory import gpu_offers
from gpucell.components.metering import KSM_JOB, ksm_sanitized
from gpucell.errors import ConfigError
from gpucell.spec import CellSpec
from gpucell.stacks.plan import make_plan
from gpucell.stacks.prometheus_api import Deadline, PrometheusError, get, printable, refused_character, url_problem

__all__ = [
    "DEFAULT_DEADLINE",
    "MAX_RESPONSE_BYTES",
    "QUERIES",
    "Finding",
    "Health",
    "cell_of",
    "check_arguments",
    "plan_problems",
    "quarantine_patch",
    "read_health",
    "unified_diff",
]

DEFAULT_DEADLINE = 60.0
"""Seconds all requests of one run may take by default (``--deadline``, 1 to 3600): past it, one line and exit 1."""
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
"""Largest answer read for one query (bytes): a cell's nodes, alerts and tenant workloads fit many times over."""
_TENANT_NAMESPACE = f'kube_namespace_labels{{{KSM_JOB},label_gpucell_io_tenant!=""}}'
QUERIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "alerts": ('ALERTS{alertstate="firing",severity="critical"}', ("alertname",)),
    "ready": (f'kube_node_status_condition{{{KSM_JOB},condition="Ready",status="true"}}', ("node",)),
    "allocatable": (f'kube_node_status_allocatable{{{KSM_JOB},resource=~"nvidia_com_.+"}}', ("node", "resource")),
    "deployments": (
        f"(kube_deployment_spec_replicas{{{KSM_JOB}}} > 0) unless on (namespace, deployment) "
        f"(kube_deployment_status_replicas_available{{{KSM_JOB}}} > 0) and on (namespace) {_TENANT_NAMESPACE}",
        ("namespace", "deployment"),
    ),
    "statefulsets": (
        f"(kube_statefulset_replicas{{{KSM_JOB}}} > 0) unless on (namespace, statefulset) "
        f"(kube_statefulset_status_replicas_ready{{{KSM_JOB}}} > 0) and on (namespace) {_TENANT_NAMESPACE}",
        ("namespace", "statefulset"),
    ),
    "vm-pods": (
        f'(kube_pod_status_phase{{{KSM_JOB},phase=~"Pending|Failed|Unknown"}} == 1) and on (namespace, pod) '
        f'kube_pod_labels{{{KSM_JOB},label_kubevirt_io="virt-launcher"}} and on (namespace) {_TENANT_NAMESPACE}',
        ("namespace", "pod", "phase"),
    ),
}
"""Name -> (PromQL instant query, labels every series of its answer must carry)."""
_REASON_CHARACTERS = re.compile(r"[^A-Za-z0-9 ._:,/#()+-]+")
_REASON_LIMIT = 120


@dataclass(frozen=True)
class Finding:
    """One problem of the cell, printed as one line."""

    line: str
    """What is wrong, naming the host, alert or workload (``alert GpuFellOffTheBus firing on host fra1-h100-2 (gpu
    3)``)."""
    host: str | None = None
    """The stack's host it is about, if any."""
    alert: str | None = None
    """The critical alert (with its GPU, ``GpuFellOffTheBus gpu 3``) that calls for the host's quarantine."""


@dataclass
class Health:
    """What one run found in a region: problems of in-service hosts and workloads, notes on quarantined hosts."""

    stack: str
    region: str
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Findings on hosts the stack file already quarantines: expected, not counted."""

    @property
    def healthy(self) -> bool:
        """No finding."""
        return not self.findings

    def to_quarantine(self) -> dict[str, str]:
        """Host -> quarantine reason, for each in-service host with a critical alert firing: ``gpucell health:``
        and its alerts (``GpuFellOffTheBus gpu 3``), as a :class:`gpucell.spec.network.Quarantine` reason accepts
        it (at most 120 characters of letters, digits, spaces and ``._:,/#()+-``)."""
        alerts: dict[str, list[str]] = {}
        for finding in self.findings:
            if finding.host is not None and finding.alert is not None:
                alerts.setdefault(finding.host, []).append(finding.alert)
        reasons = {}
        for host, names in sorted(alerts.items()):
            text = _REASON_CHARACTERS.sub("-", "gpucell health: " + ", ".join(sorted(set(names))))
            reasons[host] = text[:_REASON_LIMIT].rstrip(" ,")
        return reasons

    def summary(self) -> str:
        """The last line: ``health: stack S region R: healthy`` or ``unhealthy, N problem(s)``."""
        where = f"health: stack {self.stack} region {self.region}"
        if self.healthy:
            return f"{where}: healthy"
        hosts = {f.host for f in self.findings if f.host is not None}
        return f"{where}: unhealthy, {len(self.findings)} problem(s), {len(hosts)} host(s)"


def check_arguments(prometheus: str, deadline: float) -> None:
    """Raise :class:`ConfigError` (one line per problem, exit 2) for a ``--prometheus`` that is not an http(s)
    URL with a host, or a ``--deadline`` outside 1-3600 seconds."""
    problems = []
    if (problem := url_problem("gpucell health", prometheus)) is not None:
        problems.append(problem)
    if not (math.isfinite(deadline) and 1 <= deadline <= 3600):
        problems.append(f"gpucell health: --deadline {deadline:g} is not between 1 and 3600 seconds")
    if problems:
        raise ConfigError(problems)


def cell_of(project_dir: Path, stack: str, region: str | None) -> tuple[str, CellSpec]:
    """The region (``region``, or the stack's only one) and its validated spec, from the offline plan of ``stack``
    (:func:`gpucell.stacks.plan.make_plan`). Raises :class:`ConfigError` (exit 2): an unknown stack or region, a
    stack of several regions without ``region`` (each cell has its own Prometheus), a region without the metrics
    stack (no Prometheus of its own, no gpucell alerts)."""
    plan = make_plan(project_dir, stack, region=region)
    if region is None:
        if len(plan.cells) != 1:
            raise ConfigError(
                [
                    f"gpucell health: stack {stack} has regions {', '.join(plan.cells)}; each cell has its own "
                    "Prometheus: give --region"
                ]
            )
        region = next(iter(plan.cells))
    spec = plan.cells[region].spec
    if not spec.metrics.enabled:
        raise ConfigError(
            [
                f"regions.{region}.metrics.enabled: false in stack {stack}: the cell has no metrics stack, so no "
                "alerts of gpucell's to read; set metrics.enabled: true (docs/metrics.md)"
            ]
        )
    return region, spec


def _vector(data: Any, where: str, needs: tuple[str, ...]) -> Iterator[tuple[dict[str, str], float]]:
    """``(labels, sample)`` per series of an instant query's ``data``. Raises :class:`PrometheusError` for any other
    shape, a series without one of ``needs``, a label holding a refused character, a sample that is not a finite
    number."""
    if not isinstance(data, dict) or data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
        kind = data.get("resultType") if isinstance(data, dict) else type(data).__name__
        raise PrometheusError(
            f"{where}: the answer is not a vector of series ({printable(repr(kind))}); is this a Prometheus query API?"
        )
    for series in data["result"]:
        labels = series.get("metric") if isinstance(series, dict) else None
        value = series.get("value") if isinstance(series, dict) else None
        if (
            not isinstance(labels, dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items())
            or not isinstance(value, list)
            or len(value) != 2
            or not isinstance(value[1], str)
        ):
            raise PrometheusError(
                f'{where}: a series is not {{metric: labels, value: [time, "value"]}} ({printable(str(series))})'
            )
        for name, text in labels.items():
            if (bad := refused_character(text)) is not None:
                raise PrometheusError(
                    f"{where}: label {name}={printable(repr(text), 120)} holds the control character {bad!r}; "
                    "refused (a forged series?)"
                )
        missing = [name for name in needs if name not in labels]
        if missing:
            raise PrometheusError(
                f"{where}: a series has no label {missing[0]!r} ({printable(str(labels))}); the query's series "
                f"always carry {', '.join(needs)}"
            )
        try:
            sample = float(value[1])
        except ValueError:
            sample = math.nan
        if not math.isfinite(sample):
            raise PrometheusError(f"{where}: the sample {printable(repr(value[1]), 60)} is not a finite number")
        yield labels, sample


def _query(prometheus: str, name: str, deadline: Deadline) -> list[tuple[dict[str, str], float]]:
    query, needs = QUERIES[name]
    base = prometheus.rstrip("/") + "/api/v1/query"
    url = f"{base}?{urllib.parse.urlencode({'query': query})}"
    data = get(
        url, deadline.seconds, deadline, max_bytes=MAX_RESPONSE_BYTES, too_large="is this the cell's Prometheus?"
    )
    return list(_vector(data, base, needs))


def read_health(prometheus: str, stack: str, region: str, spec: CellSpec, *, deadline: float) -> Health:
    """The health of ``region`` (of ``stack``, validated as ``spec``) from its Prometheus at ``prometheus``: every
    :data:`QUERIES` within ``deadline`` seconds in all. Raises :class:`PrometheusError`."""
    clock = Deadline.starting_now(deadline, "give a longer --deadline or check the Prometheus URL")
    answers = {name: _query(prometheus, name, clock) for name in QUERIES}
    hosts = {host.name: (pool_name, host) for pool_name, pool in spec.node_pools.items() for host in pool.hosts}
    health = Health(stack, region)

    def add(finding: Finding) -> None:
        entry = hosts.get(finding.host) if finding.host else None
        if entry is not None and entry[1].quarantine is not None:
            health.notes.append(f"{finding.line} (quarantined: {entry[1].quarantine.reason}; not counted)")
        else:
            health.findings.append(finding)

    for labels, _ in sorted(answers["alerts"], key=lambda a: (a[0].get("node", ""), a[0]["alertname"])):
        add(_alert_finding(labels, hosts))
    ready = {labels["node"]: sample for labels, sample in answers["ready"]}
    for name, (pool_name, _) in hosts.items():
        if name not in ready:
            add(
                Finding(
                    f"host {name} (pool {pool_name}) has no Node: kube-state-metrics reports no Ready condition", name
                )
            )
        elif ready[name] == 0:
            add(Finding(f"host {name} (pool {pool_name}) is NotReady", name))
    allocatable = {(labels["node"], labels["resource"]): sample for labels, sample in answers["allocatable"]}
    for name, pool_name, resource, declared in _declared_units(spec):
        if name not in ready:
            continue  # no Node: said above
        have = allocatable.get((name, ksm_sanitized(resource)), 0.0)
        if have < declared:
            add(
                Finding(
                    f"host {name} (pool {pool_name}) has {have:g} of {declared} {resource} allocatable",
                    name,
                )
            )
    for labels, sample in answers["deployments"]:
        add(
            Finding(
                f"workload {labels['namespace']}/{labels['deployment']} (Deployment) has none of its {sample:g} "
                "replica(s) available"
            )
        )
    for labels, sample in answers["statefulsets"]:
        add(
            Finding(
                f"workload {labels['namespace']}/{labels['statefulset']} (StatefulSet) has none of its {sample:g} "
                "replica(s) ready"
            )
        )
    for labels, _ in answers["vm-pods"]:
        add(Finding(f"workload {labels['namespace']}/{labels['pod']} (VM launcher pod) is {labels['phase']}"))
    return health


def _alert_finding(labels: Mapping[str, str], hosts: Mapping[str, Any]) -> Finding:
    """The finding of one firing alert; its GPU is DCGM's index (label ``gpu``: ``gpu 3``) or, for the host-side
    alerts, the PCI address (label ``bdf``: ``pci 0000:41:00.0``)."""
    name, node = labels["alertname"], labels.get("node")
    gpu = f"gpu {labels['gpu']}" if "gpu" in labels else f"pci {labels['bdf']}" if "bdf" in labels else None
    detail = f" ({gpu})" if gpu is not None else ""
    if node is None:
        return Finding(f"alert {name} firing{detail} (no node label)")
    if node not in hosts:
        return Finding(f"alert {name} firing on node {node}{detail} (not a host of the region)")
    return Finding(f"alert {name} firing on host {node}{detail}", node, f"{name} {gpu}" if gpu is not None else name)


def _declared_units(spec: CellSpec) -> Iterator[tuple[str, str, str, int]]:
    """``(host, pool, resource, units)``: what each in-service host of a device-plugin pool must advertise."""
    per_node: dict[tuple[str, str], int] = {}
    for offer in gpu_offers(spec.node_pools, spec.effective_mig_strategy.value):
        per_node[(offer.pool, offer.resource)] = per_node.get((offer.pool, offer.resource), 0) + offer.per_node
    for (pool_name, resource), units in per_node.items():
        for host in spec.node_pools[pool_name].in_service_hosts:
            yield host.name, pool_name, resource, units


# -- the stack-file patch --------------------------------------------------------------------------------------------


def _entry(node: yaml.Node | None, key: str) -> yaml.Node | None:
    """The value of ``key`` written in the mapping ``node`` itself (merge keys are not followed)."""
    if not isinstance(node, yaml.MappingNode):
        return None
    return next((value for k, value in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None)


def _host_node(root: yaml.Node | None, region: str, host: str, file_name: str) -> yaml.MappingNode:
    """The mapping of ``host`` under ``config.gpucell:regions.<region>.nodePools.<pool>.hosts``, written there (not
    reached through an alias or a merge key, whose edit would change other entries). Raises :class:`ConfigError`."""
    pools: yaml.Node | None = _entry(root, "config")
    for keys in (("gpucell:regions", "regions"), (region,), ("nodePools",)):
        pools = next((found for key in keys if pools is not None and (found := _entry(pools, key))), None)
    if isinstance(pools, yaml.MappingNode):
        for _, pool in pools.value:
            hosts = _entry(pool, "hosts")
            if not isinstance(hosts, yaml.SequenceNode):
                continue
            for entry in hosts.value:
                name = _entry(entry, "name")
                if isinstance(name, yaml.ScalarNode) and name.value == host:
                    inside = pool.start_mark.index <= entry.start_mark.index < pool.end_mark.index
                    if isinstance(entry, yaml.MappingNode) and inside:
                        return entry
    raise ConfigError([_by_hand(file_name, region, host)])


def quarantine_patch(text: str, file_name: str, region: str, reasons: Mapping[str, str]) -> str:
    """``text`` (a ``Pulumi.<stack>.yaml``) with ``quarantine: {reason: "<reason>"}`` added to the entry of each host
    of ``reasons`` in ``region``: inside a flow mapping (``{name: h, address: a, quarantine: {...}}``) or as the
    block mapping's last key, at its indentation. Every other byte is kept. Raises :class:`ConfigError` when a host
    is not written as an entry of its own (reached through an alias or a merge key, or shared with another
    entry): the patched document must differ from the original by these quarantines alone."""
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    inserts: list[tuple[int, str]] = []
    for host, reason in reasons.items():
        entry = _host_node(root, region, host, file_name)
        value = f'quarantine: {{reason: "{reason}"}}'
        if entry.flow_style:
            end = entry.end_mark.index - 1  # the closing brace
            inserts.append((end, f", {value}"))
        else:
            column = entry.value[0][0].start_mark.column
            last = entry.value[-1][1].end_mark
            newline = text.find("\n", last.index) if last.column else last.index - 1
            at = len(text) if newline < 0 else newline
            inserts.append((at, "\n" + " " * column + value))
    patched = text
    for at, insert in sorted(inserts, reverse=True):
        patched = patched[:at] + insert + patched[at:]
    if _unshared(patched) != _quarantined(_unshared(text), region, reasons):
        raise ConfigError([_by_hand(file_name, region, ", ".join(reasons))])
    return patched


def _unshared(text: str) -> Any:
    """The document ``text`` holds, each alias and merge key expanded into a copy of its own."""
    return json.loads(json.dumps(yaml.safe_load(text), default=str))


def _quarantined(document: Any, region: str, reasons: Mapping[str, str]) -> Any:
    """``document`` with the quarantine of each host of ``reasons`` set on its first entry in the region, and nothing
    else changed."""
    config = document["config"]
    pools = (config.get("gpucell:regions") or config.get("regions"))[region]["nodePools"]
    entries = [host for pool in pools.values() for host in pool.get("hosts") or []]
    for name, reason in reasons.items():
        next(host for host in entries if host.get("name") == name)["quarantine"] = {"reason": reason}
    return document


def _by_hand(file_name: str, region: str, host: str) -> str:
    return (
        f"{file_name}: host {host} of region {region} is not written as an entry of its own (an alias or a merge "
        "key?); quarantine it by hand (docs/operations.md, Quarantine a host)"
    )


def unified_diff(before: str, after: str, file_name: str) -> str:
    """The change as a unified diff ``git apply`` takes (``a/<file>``, ``b/<file>``)."""
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"a/{file_name}",
            tofile=f"b/{file_name}",
        )
    )


def plan_problems(project_dir: Path, stack: str, region: str, text: str) -> list[str]:
    """The offline plan's problems with ``text`` as ``Pulumi.<stack>.yaml`` (``[]``: it plans), planned in a scratch
    directory holding links to the project's other files."""
    with tempfile.TemporaryDirectory(prefix="gpucell-health-") as scratch:
        work = Path(scratch)
        stack_file = f"Pulumi.{stack}.yaml"
        for entry in project_dir.iterdir():
            if entry.name != stack_file:
                (work / entry.name).symlink_to(entry.resolve())
        (work / stack_file).write_text(text)
        try:
            make_plan(work, stack, region=region)
        except ConfigError as exc:
            return list(exc.lines)
    return []
