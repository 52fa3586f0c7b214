"""Conformance: what a plan registers, checked offline the way the API server, Helm and the nodes would.

:func:`check_region` runs every checker over one region's registrations and node files:

- ``kubernetes``: core kinds against kubernetes-validate's strict schemas at the cell's Kubernetes minor;
- ``custom-resource``: KubeVirt, CDI, KServe, Cilium and GPU Operator objects against the upstream schemas of the
  schema directory and the CEL rules of its CRDs (:mod:`gpucell.stacks.conformance.cel_rules`), plus the webhook
  rules of :mod:`gpucell.stacks.conformance.admission` (a VM's DRA GPUs against its ResourceClaimTemplate too);
- ``cloud-init``: VMs' own user data and network data against cloud-init's JSON schemas, when the schema directory
  holds them (:mod:`gpucell.stacks.conformance.cloud_init`);
- ``helm-values``: every value path against the pinned chart (:mod:`gpucell.stacks.conformance.helm_values`), of
  every Helm release and of every chart CAAPH installs into a tenant cluster (``HelmChartProxy``);
- ``script``: shellcheck over every command pulumi-command will run;
- ``node-config``: each node's k3s config file against the k3s options of its role;
- ``security``: checkov over the rendered objects;
- ``chart``: every Helm release rendered by ``helm template`` with its chart at the pinned version, each object it
  installs checked like gpucell's own and the facts gpucell relies on checked in them
  (:mod:`gpucell.stacks.conformance.charts`).
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

import yaml
from kubernetes_validate.utils import major_minor as kv_minor

from gpucell.engine.mock_engine import Registration
from gpucell.k3s import kube_vip
from gpucell.spec import CellSpec
from gpucell.stacks.conformance import charts
from gpucell.stacks.conformance.admission import admission_violations, claim_template_violations
from gpucell.stacks.conformance.cel_rules import CelTally
from gpucell.stacks.conformance.cloud_init import cloud_init_report
from gpucell.stacks.conformance.helm_values import CHART_FILES, values_problems
from gpucell.stacks.conformance.k3s_options import SUPPORTED_MINORS
from gpucell.stacks.conformance.node_files import config_problems, shellcheck
from gpucell.stacks.conformance.objects import FALLBACK_SCHEMAS, checker_for
from gpucell.stacks.conformance.problems import MissingToolError, Notice, Problem, Subject
from gpucell.stacks.conformance.schemas import UPSTREAM_FILES, SchemaStore
from gpucell.stacks.conformance.security import run_checkov

__all__ = ["CHECKERS", "RegionInput", "Report", "check_region", "check_regions"]

CHECKERS = (
    "kubernetes",
    "custom-resource",
    "cloud-init",
    "helm-values",
    "chart",
    "script",
    "node-config",
    "security",
)
_RELEASE = "kubernetes:helm.sh/v3:Release"
_COMMAND = "command:remote:Command"


@dataclass
class Report:
    """Problems (fail) and notices (inform) of one or more regions."""

    problems: list[Problem] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)
    checkov_skipped: int = 0
    not_run: dict[str, str] = field(default_factory=dict)
    """Checker -> why it could not run (its program is missing); the other checkers' verdicts still stand."""
    checked: Counter[str] = field(default_factory=Counter)
    """Checker -> how many things it checked: objects (``kubernetes``, ``custom-resource``, ``security``, and the
    objects the charts render for ``chart``), Helm releases and HelmChartProxies (``helm-values``), cloud-init
    documents (``cloud-init``), scripts (``script``) and k3s config files (``node-config``)."""
    selected: tuple[str, ...] = CHECKERS
    """The checkers that were asked to run."""
    cel: CelTally = field(default_factory=CelTally)
    """The CEL rules of the CRDs the ``custom-resource`` checker checked objects against, and what they did."""

    @property
    def failed(self) -> bool:
        """True when a checker found a problem or could not run."""
        return bool(self.problems or self.not_run)

    def summary(self) -> str:
        """``N problem(s) (kubernetes 0 of 812, ...)``: per checker its problems of what it checked
        (:attr:`checked`); ``nothing checked`` for a checker that had nothing to check, so a 0 is never silence;
        ``not run`` for one whose program is missing and ``not selected`` for one not asked for. ``custom-resource``
        adds what the CEL rules did (:meth:`CelTally.summary`) when its objects' CRDs have any. checkov's skips are
        counted only when it ran."""
        counts = Counter(p.checker for p in self.problems)
        per = ", ".join(f"{c} {self._verdict(c, counts.get(c, 0))}" for c in CHECKERS)
        ran = "security" in self.selected and "security" not in self.not_run
        skipped = f"; {self.checkov_skipped} checkov check(s) skipped by annotation" if ran else ""
        return f"{len(self.problems)} problem(s) ({per}){skipped}"

    def _verdict(self, checker: str, problems: int) -> str:
        if checker in self.not_run:
            return "not run"
        if checker not in self.selected:
            return "not selected"
        if not problems and not self.checked[checker]:
            return "nothing checked"
        cel = f" ({self.cel.summary()})" if checker == "custom-resource" and self.cel.rules else ""
        return f"{problems} of {self.checked[checker]}{cel}"


def _object_subject(region: str, obj: dict[str, Any]) -> Subject:
    meta = obj.get("metadata") or {}
    return Subject(region, str(obj.get("kind", "?")), meta.get("namespace", ""), meta.get("name", "?"))


def _objects(registrations: list[Registration]) -> list[tuple[dict[str, Any], bool]]:
    """Rendered Kubernetes objects and whether each is a patch (partial by design)."""
    return [
        (r.masked_inputs(), r.type.endswith("Patch"))
        for r in registrations
        if r.type.startswith("kubernetes:") and "apiVersion" in r.inputs and "kind" in r.inputs
    ]


def _static_pods(cell: CellSpec) -> list[tuple[dict[str, Any], bool]]:
    """The static pods the servers' install scripts write (kube-vip's with ``network.apiVip``), checked as objects:
    the kubelet reads them as it reads any Pod."""
    return [] if cell.network.api_vip is None else [(kube_vip.static_pod(cell), False)]


def _check_objects(
    region: str, objects: list[tuple[dict[str, Any], bool]], cell: CellSpec, store: SchemaStore, report: Report
) -> None:
    checker = checker_for(store.root, cell.versions.kubernetes_minor)
    versions = cell.versions.model_dump()
    core = checker.core_schema_version
    if core is not None and kv_minor(core) != cell.versions.kubernetes_minor:
        notice = Notice(
            f"kubernetes-validate has no schemas for Kubernetes {cell.versions.kubernetes_minor}; core "
            f"kinds checked against {kv_minor(core)}"
        )
        if notice not in report.notices:
            report.notices.append(notice)
    for obj, partial in objects:
        subject = _object_subject(region, obj)
        source = checker.source_of(obj.get("apiVersion", ""), obj.get("kind", ""))
        kind = "kubernetes" if source == "kubernetes" else "custom-resource"
        report.checked[kind] += 1
        if source in UPSTREAM_FILES:
            sentence = store.version_notice(source, versions[UPSTREAM_FILES[source].component])
            if sentence and Notice(sentence) not in report.notices:
                report.notices.append(Notice(sentence))
        if source == "by hand" and (obj.get("apiVersion"), obj.get("kind")) in FALLBACK_SCHEMAS:
            notice = Notice(
                f"{store.root} has no CRD of {obj['apiVersion']} {obj['kind']}; checked against gpucell's "
                "transcription of its Go types (gpucell.stacks.conformance.objects)"
            )
            if notice not in report.notices:
                report.notices.append(notice)
        cel = [] if partial else list(checker.cel_check(obj, report.cel))
        for violation in [*checker.check(obj, partial=partial), *cel, *admission_violations(obj)]:
            report.problems.append(Problem(subject, violation.path, violation.message, kind))
    for vm, violation in claim_template_violations([obj for obj, partial in objects if not partial]):
        report.problems.append(
            Problem(_object_subject(region, vm), violation.path, violation.message, "custom-resource")
        )


def _cloud_init_documents(cell: CellSpec) -> int:
    """The VMs' own cloud-init documents (user data, network data) that :func:`cloud_init_report` checks when the
    schema directory holds cloud-init's schemas."""
    return sum(
        bool(vm.cloud_init.user_data) + bool(vm.cloud_init.network_data)
        for tenant in cell.tenants.values()
        for vm in tenant.virtual_machines.values()
        if vm.cloud_init is not None
    )


def _check_releases(
    region: str, registrations: list[Registration], cell: CellSpec, store: SchemaStore, report: Report
) -> None:
    versions = cell.versions.model_dump()
    for release in (r for r in registrations if r.type == _RELEASE):
        chart = str(release.inputs.get("chart", "")).rsplit("/", 1)[-1]
        subject = Subject(region, "HelmValues", release.inputs.get("namespace", ""), release.inputs.get("name", chart))
        values = release.inputs.get("values") or {}
        files = CHART_FILES.get(chart)
        if files is not None or values:
            report.checked["helm-values"] += 1
        if files is None:
            if values:
                report.problems.append(
                    Problem(
                        subject,
                        "-",
                        f"no default values of chart {chart} to check the values we set against",
                        "helm-values",
                    )
                )
            continue
        values_file = files.values.format(version=versions[files.component].lstrip("v"))
        if not store.has(values_file):
            report.problems.append(Problem(subject, "-", f"{values_file} is missing from {store.root}", "helm-values"))
            continue
        notice = store.version_notice(values_file, versions[files.component])
        if notice and Notice(notice) not in report.notices:
            report.notices.append(Notice(notice))
        # messages name the chart version actually checked against (the notice above says when it differs)
        version = store.version_of(values_file) or str(release.inputs.get("version", ""))
        for path, message in values_problems(store, chart, version, values):
            report.problems.append(Problem(subject, path, message, "helm-values"))


def _check_addon_values(
    region: str, objects: list[tuple[dict[str, Any], bool]], cell: CellSpec, store: SchemaStore, report: Report
) -> None:
    """The values of each ``HelmChartProxy`` (CAAPH installs the chart into a tenant cluster) against the chart's
    own files, as a Release's are: its ``valuesTemplate`` is read as YAML (gpucell renders no Go templating there)."""
    versions = cell.versions.model_dump()
    for obj, _ in objects:
        if obj.get("kind") != "HelmChartProxy":
            continue
        report.checked["helm-values"] += 1
        spec = obj.get("spec") or {}
        chart, version = str(spec.get("chartName", "")), str(spec.get("version", ""))
        subject = _object_subject(region, obj)
        files = CHART_FILES.get(chart)
        template = str(spec.get("valuesTemplate") or "")
        if files is None or "{{" in template:
            why = "templated values" if files is not None else f"chart {chart}"
            report.problems.append(
                Problem(subject, "spec.valuesTemplate", f"gpucell cannot check {why}", "helm-values")
            )
            continue
        values_file = files.values.format(version=version.lstrip("v"))
        pinned = versions[files.component]
        if not store.has(values_file):
            report.problems.append(Problem(subject, "-", f"{values_file} is missing from {store.root}", "helm-values"))
            continue
        notice = store.version_notice(values_file, pinned)
        if notice and Notice(notice) not in report.notices:
            report.notices.append(Notice(notice))
        values = yaml.safe_load(template) or {}
        for path, message in values_problems(store, chart, store.version_of(values_file) or version, values):
            report.problems.append(Problem(subject, f"spec.valuesTemplate.{path}", message, "helm-values"))


def _check_charts(regions: list[RegionInput], store: SchemaStore, report: Report) -> None:
    """Render every release of every region at once (in parallel), then check each region's objects."""
    wanted = [(item, r) for item in regions for r in item.registrations if r.type == _RELEASE]
    rendered = charts.render_releases(
        [(r.masked_inputs(), charts.kube_version(item.cell)) for item, r in wanted], store.root
    )
    by_region: dict[str, list[tuple[Registration, charts.RenderedRelease]]] = {}
    for (item, registration), result in zip(wanted, rendered, strict=True):
        by_region.setdefault(item.region, []).append((registration, result))
    for item in regions:
        pairs = by_region.get(item.region, [])
        crds = charts.rendered_crds([result for _, result in pairs])
        checker = checker_for(store.root, item.cell.versions.kubernetes_minor)
        for registration, result in pairs:
            release = Subject(item.region, "HelmRelease", result.namespace, result.release)
            if result.error is not None:
                report.problems.append(Problem(release, "-", result.error, "chart"))
                continue
            where = f"chart {result.chart} {result.version}"
            report.checked["chart"] += len(result.objects)
            for obj in result.objects:
                for violation in charts.validate_rendered(obj, checker, crds):
                    report.problems.append(
                        Problem(
                            _object_subject(item.region, obj), violation.path, f"{violation.message} ({where})", "chart"
                        )
                    )
            fact_check = charts.FACTS.get(result.chart)
            if fact_check is None:
                continue
            values = registration.masked_inputs().get("values") or {}
            for about, path, message in fact_check(list(result.objects), values, item.cell):
                subject = release if about is None else _object_subject(item.region, about)
                report.problems.append(Problem(subject, path, f"{message} ({where})", "chart"))


def _script_of(command_line: str) -> str:
    argv = shlex.split(command_line)
    return argv[2] if argv[:2] == ["bash", "-c"] and len(argv) == 3 else command_line


_EMBEDDED = re.compile(r"<<'(?P<end>GPUCELL_\w+)'\n(?P<body>#!/usr/bin/env bash\n.*?)^(?P=end)$", re.M | re.S)


def embedded_scripts(script: str) -> dict[str, str]:
    """Bash scripts a node script installs on the host from a quoted ``GPUCELL_*`` heredoc (the SR-IOV vGPU
    reconciler): heredoc delimiter -> script. shellcheck reads heredocs as data, so they are checked on their own."""
    return {match["end"]: match["body"] for match in _EMBEDDED.finditer(script)}


@dataclass(frozen=True)
class RegionInput:
    """One region to check: what its program registered, its spec, and each host's k3s config text."""

    region: str
    registrations: list[Registration]
    cell: CellSpec
    node_configs: dict[str, str] = field(default_factory=dict)


def _check_scripts(regions: list[RegionInput], report: Report) -> None:
    """shellcheck once over every create/update/delete command of every region."""
    scripts: dict[str, tuple[Subject, str, str]] = {}
    for item in regions:
        for command in (r for r in item.registrations if r.type == _COMMAND):
            for step in ("create", "update", "delete"):
                if isinstance(command.inputs.get(step), str):
                    subject = Subject(item.region, "NodeScript", "-", command.name)
                    text = _script_of(command.inputs[step])
                    scripts[f"{command.urn}:{step}"] = (subject, step, text)
                    for end, body in embedded_scripts(text).items():
                        scripts[f"{command.urn}:{step}:{end}"] = (subject, f"{step} {end}", body)
    report.checked["script"] += len(scripts)
    findings = shellcheck({key: text for key, (_, _, text) in scripts.items()})
    for key, problems in findings.items():
        subject, step, _ = scripts[key]
        for where, message in problems:
            report.problems.append(Problem(subject, f"{step} {where}", message, "script"))


def _check_node_configs(item: RegionInput, report: Report) -> None:
    cell = item.cell
    servers = {host.name for _, host in cell.servers}
    if cell.versions.kubernetes_minor not in SUPPORTED_MINORS:
        notice = Notice(
            f"k3s options are known for Kubernetes {', '.join(SUPPORTED_MINORS)}; "
            f"{cell.versions.k3s} checked against them"
        )
        if notice not in report.notices:
            report.notices.append(notice)
    report.checked["node-config"] += len(item.node_configs)
    for host, text in item.node_configs.items():
        for key, message in config_problems(text, server=host in servers):
            report.problems.append(Problem(Subject(item.region, "NodeConfig", "-", host), key, message, "node-config"))


def _check_security(objects: list[tuple[str, dict[str, Any]]], report: Report) -> None:
    """checkov once over every whole object of every region (``(region, object)`` pairs)."""
    findings, skipped = run_checkov([obj for _, obj in objects])
    report.checked["security"] += len(objects)
    report.checkov_skipped += skipped
    for finding in findings:
        region, obj = objects[finding.index]
        report.problems.append(Problem(_object_subject(region, obj), finding.check_id, finding.check_name, "security"))


def check_regions(regions: list[RegionInput], store: SchemaStore, checkers: Collection[str] = CHECKERS) -> Report:
    """Run ``checkers`` (default: all of :data:`CHECKERS`) over ``regions``; shellcheck and checkov run once.

    When shellcheck or checkov is missing, the other checkers still run and :attr:`Report.not_run` says how to
    get the missing program.
    """
    report = Report(selected=tuple(c for c in CHECKERS if c in checkers))
    whole: list[tuple[str, dict[str, Any]]] = []
    for item in regions:
        objects = _objects(item.registrations)
        if {"kubernetes", "custom-resource"} & set(checkers):
            _check_objects(item.region, [*objects, *_static_pods(item.cell)], item.cell, store, report)
        if "cloud-init" in checkers:
            problems, notices = cloud_init_report(item.region, item.cell, store)
            report.checked["cloud-init"] += 0 if notices else _cloud_init_documents(item.cell)
            report.problems += problems
            report.notices += [n for n in notices if n not in report.notices]
        if "helm-values" in checkers:
            _check_releases(item.region, item.registrations, item.cell, store, report)
            _check_addon_values(item.region, objects, item.cell, store, report)
        if "node-config" in checkers:
            _check_node_configs(item, report)
        whole += [(item.region, obj) for obj, partial in objects if not partial]
    report.notices += [Notice(line) for line in report.cel.notices()]
    if "chart" in checkers:
        _unless_missing("chart", report, lambda: _check_charts(regions, store, report))
    if "script" in checkers:
        _unless_missing("script", report, lambda: _check_scripts(regions, report))
    if "security" in checkers:
        _unless_missing("security", report, lambda: _check_security(whole, report))
    return report


def _unless_missing(checker: str, report: Report, run: Callable[[], None]) -> None:
    try:
        run()
    except MissingToolError as exc:
        report.not_run[checker] = str(exc)


def check_region(
    region: str,
    registrations: list[Registration],
    cell: CellSpec,
    store: SchemaStore,
    node_configs: dict[str, str] | None = None,
    *,
    checkers: Collection[str] = CHECKERS,
) -> Report:
    """:func:`check_regions` for one region. ``node_configs`` maps host -> k3s config text."""
    return check_regions([RegionInput(region, registrations, cell, node_configs or {})], store, checkers)
