"""The metrics stack: its Helm release and values, scrape targets, rules, dashboards, remote write, bad input."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from gpucell.components.dashboards import DASHBOARDS
from gpucell.components.metering import ALLOCATED
from gpucell.components.metrics import (
    PREDICTOR_METRICS,
    Metrics,
    MetricsArgs,
    pod_monitor_manifests,
    remote_write_secret_data,
    stack_values,
)
from gpucell.engine.mock_engine import PlanResult, run_program
from gpucell.errors import ConfigError
from gpucell.spec import CellSpec
from gpucell.spec.workloads import ScaleMetric
from gpucell.stacks.conformance.helm_values import values_problems
from gpucell.workloads.model_endpoint import vllm_query
from tests.conftest import (
    STORE,
    UPSTREAM,
    at,
    cell,
    cell_cilium_values,
    minimal_cell_config,
    offline_cluster,
    operator_values,
    program_cluster,
    shared_plan,
    violations,
)

REMOTE = {"url": "https://metrics.example.com/api/v1/push", "credentialsConfigKey": "remoteWriteLab"}


def _spec(**metrics: Any) -> CellSpec:
    config = minimal_cell_config()
    config["metrics"] = {"enabled": True, **metrics}
    return cell(config)


def _plan(spec: CellSpec, credentials: str | None = None) -> PlanResult:
    return run_program(lambda: Metrics("lab-metrics", MetricsArgs.from_cell(spec, program_cluster(spec), credentials)))


def test_release_values_from_config() -> None:
    plan = _plan(_spec(retentionDays=30, storageGib=200))
    release = plan.named("lab-metrics-stack")
    assert release.type == "kubernetes:helm.sh/v3:Release"
    assert release.inputs["chart"] == "kube-prometheus-stack"
    assert release.inputs["version"] == "88.5.3"
    assert release.inputs["repositoryOpts"] == {"repo": "https://prometheus-community.github.io/helm-charts"}
    assert release.inputs["namespace"] == "monitoring"
    values = release.inputs["values"]
    assert at(values, "prometheus.prometheusSpec.retention") == "30d"
    claim = at(values, "prometheus.prometheusSpec.storageSpec.volumeClaimTemplate.spec")
    assert claim == {
        "storageClassName": "local-path",
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "200Gi"}},
    }
    assert at(values, "prometheus.prometheusSpec.podMonitorSelectorNilUsesHelmValues") is False
    assert at(values, "kube-state-metrics.metricLabelsAllowlist") == [
        "namespaces=[gpucell.io/tenant]",
        "pods=[kubevirt.io]",
        "nodes=[gpucell.io/pool]",
    ]
    assert "remoteWrite" not in values["prometheus"]["prometheusSpec"]
    namespace = plan.named("lab-metrics-namespace")
    assert namespace.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert namespace.urn in release.dependencies


def test_kube_state_metrics_is_asked_for_no_built_in_kind_and_keeps_its_quota_collector() -> None:
    """KSM 2.20.0 builds custom-resource-state metrics only for kinds a CRD serves (internal/discovery/discovery.go
    line 274, pkg/customresourcestate/config.go line 195): a ResourceClaim config would yield nothing. DRA claims are
    metered from ``kube_resourcequota`` (gpucell.components.metering), whose collector the subchart 8.4.0 enables by
    default (``collectors`` in charts/kube-state-metrics/values.yaml) and gpucell leaves alone."""
    ksm = stack_values(_spec().metrics, "local-path")["kube-state-metrics"]
    assert set(ksm) == {"metricLabelsAllowlist"}
    chart = UPSTREAM / "charts" / "kube-prometheus-stack-88.5.3" / "charts" / "kube-state-metrics" / "values.yaml"
    assert "resourcequotas" in yaml.safe_load(chart.read_text())["collectors"]


def test_dra_claims_are_metered_as_the_dra_pools_one_model() -> None:
    """The quota counts claimed devices per namespace and class, not per node: their ``gpu_model`` is the model of
    the ``dra`` pools when they hold one (prod's fra1: one L4 ``dra`` pool), else ``unknown``."""
    from gpucell.components.metrics import MetricsArgs

    fra1 = shared_plan("prod-fra1").cells["fra1"].spec
    assert MetricsArgs.from_cell(fra1, program_cluster(fra1)).dra_model == "L4"
    assert MetricsArgs.from_cell(_spec(), program_cluster(_spec())).dra_model == "unknown"


def test_values_are_values_of_the_pinned_chart() -> None:
    values = stack_values(_spec(remoteWrite=REMOTE).metrics, "longhorn")
    assert values_problems(STORE, "kube-prometheus-stack", "88.5.3", values) == []


def test_the_prometheus_operator_crds_follow_every_chart_upgrade() -> None:
    """prometheus-community/helm-charts#3680, #5309: Helm never upgrades a chart's crds/, so a kube-prometheus-stack
    bump leaves the old CRDs behind. The pinned chart's own hook Job (crds.upgradeJob, off by default) applies them
    before every install, upgrade and rollback; its busybox is pinned instead of the chart's latest."""
    chart = yaml.safe_load((UPSTREAM / "charts" / "kube-prometheus-stack-88.5.3" / "values.yaml").read_text())
    assert chart["crds"]["upgradeJob"]["enabled"] is False
    assert chart["crds"]["upgradeJob"]["image"]["busybox"]["tag"] == "latest"
    job = (
        UPSTREAM / "charts" / "kube-prometheus-stack-88.5.3" / "charts" / "crds" / "templates" / "upgrade" / "job.yaml"
    )
    assert '"helm.sh/hook": pre-install,pre-upgrade,pre-rollback' in job.read_text()
    values = stack_values(_spec().metrics, "longhorn")
    assert values["crds"] == {
        "upgradeJob": {"enabled": True, "forceConflicts": True, "image": {"busybox": {"tag": "1.37.0"}}}
    }
    release = _plan(_spec()).named("lab-metrics-stack")
    assert release.inputs["values"]["crds"]["upgradeJob"]["enabled"] is True


def test_remote_write_is_a_secret_referenced_by_basic_auth() -> None:
    plan = _plan(_spec(remoteWrite=REMOTE), credentials="fra1:s3cret")
    secret = plan.named("lab-metrics-remote-write")
    assert secret.inputs["stringData"] == "[secret]"
    release = plan.named("lab-metrics-stack")
    assert secret.urn in release.dependencies
    assert at(release.inputs["values"], "prometheus.prometheusSpec.remoteWrite") == [
        {
            "url": "https://metrics.example.com/api/v1/push",
            "basicAuth": {
                "username": {"name": "remote-write-credentials", "key": "username"},
                "password": {"name": "remote-write-credentials", "key": "password"},
            },
        }
    ]
    assert remote_write_secret_data("fra1:s3:cret") == {"username": "fra1", "password": "s3:cret"}
    with pytest.raises(ValueError, match=r"must be '<user>:<password>'$"):
        remote_write_secret_data("no-colon")


def test_monitors_and_rules_fit_the_prometheus_operator_crds() -> None:
    plan = _plan(_spec())
    kinds = {r.name: r for r in plan.resources if r.type.startswith("kubernetes:monitoring.coreos.com")}
    assert sorted(kinds) == ["lab-metrics-hubble", "lab-metrics-kserve-predictors", "lab-metrics-rules"]
    for registration in kinds.values():
        assert violations(registration.masked_inputs()) == []
        assert plan.named("lab-metrics-stack").urn in registration.dependencies
    predictors = kinds["lab-metrics-kserve-predictors"].inputs["spec"]
    assert predictors["namespaceSelector"] == {"any": True}
    assert predictors["podMetricsEndpoints"][0]["relabelings"][1]["replacement"] == "$1:8080"
    groups = kinds["lab-metrics-rules"].inputs["spec"]["groups"]
    assert [g["name"] for g in groups] == ["gpucell-metering", "gpucell-gpu-health"]
    assert [r["labels"]["kind"] for r in groups[0]["rules"] if r.get("record") == ALLOCATED] == ["container", "vm"]
    count = [r for r in groups[1]["rules"] if r.get("alert") == "GpuCountDropped"]
    assert [r["labels"]["pool"] for r in count] == ["l40s"]
    assert 'kube_node_labels{job="kube-state-metrics",label_gpucell_io_pool="l40s"}' in count[0]["expr"]
    models = next(r for r in groups[0]["rules"] if r.get("record") == "gpucell:node_gpu_model:info")
    assert models["expr"] == (
        'max by (node, gpu_model) (label_replace(label_replace(kube_node_labels{job="kube-state-metrics"}, '
        '"gpu_model", "unknown", "node", ".*"), "gpu_model", "L40S", "label_gpucell_io_pool", "l40s"))'
    )
    assert ") < 2 unless" in count[0]["expr"]


def test_predictor_monitor_keeps_only_what_keda_and_the_dashboards_read() -> None:
    [predictors] = [m for m in pod_monitor_manifests(dra=False) if m["metadata"]["name"] == "kserve-predictors"]
    endpoint = predictors["spec"]["podMetricsEndpoints"][0]
    assert endpoint["honorLabels"] is False
    assert endpoint["metricRelabelings"] == [
        {
            "sourceLabels": ["__name__"],
            "regex": "(vllm:num_requests_waiting|vllm:num_requests_running|vllm:time_to_first_token_seconds_bucket"
            "|vllm:e2e_request_latency_seconds_bucket)",
            "action": "keep",
        },
        {"regex": "tenant|gpu_model|exported_.+", "action": "labeldrop"},
    ]
    # every vLLM name KEDA's queries and the dashboards read is kept, and nothing else
    queries = [expr for _, panels in DASHBOARDS.values() for _, expr, _ in panels]
    queries += [vllm_query("acme", "chat", metric) for metric in ScaleMetric if metric.is_vllm]
    read = {name for query in queries for name in re.findall(r"vllm:[a-z0-9_]+", query)}
    assert read == set(PREDICTOR_METRICS)
    keep = re.compile(endpoint["metricRelabelings"][0]["regex"])  # Prometheus anchors relabel regexes
    forged = [ALLOCATED, "kube_namespace_labels", "DCGM_FI_DEV_XID_ERRORS", "vllm:num_requests_waiting_total"]
    assert [name for name in [*PREDICTOR_METRICS, *forged] if keep.fullmatch(name)] == list(PREDICTOR_METRICS)
    drop = re.compile(endpoint["metricRelabelings"][1]["regex"])
    labels = ["tenant", "gpu_model", "exported_namespace", "exported_job", "model_name", "le", "namespace", "pod"]
    assert [label for label in labels if not drop.fullmatch(label)] == ["model_name", "le", "namespace", "pod"]


def test_dashboards_are_configmaps_for_the_sidecar() -> None:
    plan = _plan(_spec())
    # By name: the mock engine sees registrations in the order their inputs resolve, which varies under load.
    boards = {r.name: r for r in plan.resources if r.type == "kubernetes:core/v1:ConfigMap"}
    assert sorted(boards) == [
        "lab-metrics-dashboard-gpucell-endpoints",
        "lab-metrics-dashboard-gpucell-gpus",
        "lab-metrics-dashboard-gpucell-tenants",
        "lab-metrics-dashboard-gpucell-vms",
    ]
    assert all(b.inputs["metadata"]["labels"]["grafana_dashboard"] == "1" for b in boards.values())
    endpoints = json.loads(boards["lab-metrics-dashboard-gpucell-endpoints"].inputs["data"]["gpucell-endpoints.json"])
    assert endpoints["panels"][0]["targets"][0]["expr"] == "sum by (namespace, model_name) (vllm:num_requests_waiting)"


def test_gpu_operator_and_cilium_export_what_the_stack_scrapes() -> None:
    on, off = _spec(), cell(minimal_cell_config())
    dcgm = operator_values(on)["dcgmExporter"]
    assert dcgm["config"]["name"] == "gpucell-dcgm-metrics"
    assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, counter," in dcgm["config"]["data"]
    assert dcgm["serviceMonitor"]["relabelings"] == [
        {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node", "action": "replace"}
    ]
    assert operator_values(off)["dcgmExporter"] == {"enabled": True}
    assert cell_cilium_values(on)["hubble"]["metrics"]["enabled"][:2] == ["dns", "drop"]
    assert "metrics" not in cell_cilium_values(off)["hubble"]
    assert values_problems(STORE, "gpu-operator", "v26.7.0", operator_values(on)) == []


@pytest.mark.parametrize(
    ("metrics", "line"),
    [
        (
            {"enabled": True, "remoteWrite": {"url": "https://m.example.com/push"}},
            "metrics.remoteWrite.credentialsConfigKey: is required with url https://m.example.com/push: name a secret "
            "config key holding '<user>:<password>' (pulumi config set --secret <key> -- 'user:password')",
        ),
        (
            {"enabled": True, "remoteWrite": {"url": "http://m.example.com/push", "credentialsConfigKey": "k"}},
            "metrics.remoteWrite.url: 'http://m.example.com/push' is not an https:// URL with a host (samples leave "
            "the cell; they travel over TLS)",
        ),
        (
            {"storageGib": 100},
            "metrics.storageGib: only applies with metrics.enabled: true (the metrics stack is not installed); set "
            "enabled: true or remove it",
        ),
        (
            {"enabled": True, "values": {"prometheus": {"prometheusSpec": {"retention": "1y"}}}},
            "metrics.values.prometheus.prometheusSpec.retention: is set by gpucell from metrics.retentionDays; set "
            "metrics.retentionDays instead",
        ),
    ],
)
def test_bad_metrics_config_is_one_line(metrics: dict[str, Any], line: str) -> None:
    config = minimal_cell_config()
    config["metrics"] = metrics
    with pytest.raises(ConfigError) as caught:
        cell(config)
    assert caught.value.lines == [line]


def test_storage_grows_in_place_and_shrinking_is_disruptive() -> None:
    from gpucell.day2.disruption import Change, compare, fingerprint

    config = minimal_cell_config()
    config["storage"] = {"backend": "longhorn", "replicas": 1}
    config["metrics"] = {"enabled": True, "storageGib": 100}
    spec = cell(config)
    plan = run_program(lambda: Metrics("lab-metrics", MetricsArgs.from_cell(spec, program_cluster(spec))))
    patch = plan.named("lab-metrics-volume")
    assert patch.type == "kubernetes:core/v1:PersistentVolumeClaimPatch"
    assert patch.inputs["metadata"]["name"] == (
        "prometheus-kube-prometheus-stack-prometheus-db-prometheus-kube-prometheus-stack-prometheus-0"
    )
    assert patch.inputs["spec"] == {"resources": {"requests": {"storage": "100Gi"}}}
    assert plan.named("lab-metrics-stack").urn in patch.dependencies
    bigger = {**config, "metrics": {"enabled": True, "storageGib": 200}}
    smaller = {**config, "metrics": {"enabled": True, "storageGib": 50}}
    old = fingerprint(cell(config))
    assert compare(old, fingerprint(cell(bigger)), "lab") == []
    [change] = compare(old, fingerprint(cell(smaller)), "lab")
    assert (change.change, change.key, change.old, change.new) == (
        Change.METRICS_STORAGE,
        "regions.lab.metrics.storageGib",
        "100 GiB",
        "50 GiB",
    )
    assert "local-path" not in str(plan.named("lab-metrics-stack").inputs["values"])
    assert not [r for r in _plan(_spec()).resources if r.type.endswith("PersistentVolumeClaimPatch")]


def test_node_exporter_reads_the_host_side_gpu_health_with_the_node_label() -> None:
    """The textfile collector reads the host's /var/lib/gpucell/node-exporter through the chart's mount of the host's
    / at /host/root (no extra mount); the chart's own two extraArgs are kept (Helm replaces a list whole); the
    ServiceMonitor copies the pod's node into label ``node``, which the host-side alerts and gpucell health read."""
    from gpucell.components.gpu_alerts import NODE_RELABELING

    root = UPSTREAM / "charts" / "kube-prometheus-stack-88.5.3"
    chart = yaml.safe_load((root / "values.yaml").read_text())["prometheus-node-exporter"]
    values = stack_values(_spec().metrics, "local-path")["prometheus-node-exporter"]
    assert values["extraArgs"] == [
        *chart["extraArgs"],
        "--collector.textfile.directory=/host/root/var/lib/gpucell/node-exporter",
    ]
    subchart = root / "charts" / "prometheus-node-exporter"
    assert yaml.safe_load((subchart / "values.yaml").read_text())["hostRootFsMount"]["enabled"] is True
    assert "mountPath: /host/root\n" in (subchart / "templates" / "daemonset.yaml").read_text()
    assert values["prometheus"]["monitor"] == {"relabelings": [NODE_RELABELING]}
    # the job the alerts select: the Service's jobLabel label, as the ServiceMonitor's jobLabel names it
    assert (chart["service"]["labels"]["jobLabel"], chart["prometheus"]["monitor"]["jobLabel"]) == (
        "node-exporter",
        "jobLabel",
    )


def test_every_alert_is_documented() -> None:
    from gpucell.components.gpu_alerts import health_group
    from tests.conftest import REPO

    doc = (REPO / "docs" / "metrics.md").read_text()
    spec = _spec()
    alerts = {r["alert"] for r in health_group(MetricsArgs.from_cell(spec, offline_cluster(spec)).gpu_offers)["rules"]}
    assert {a for a in alerts if f"| `{a}` |" not in doc} == set()
    assert len(alerts) == 13


def test_node_exporter_stays_on_nodes_a_pool_taints_no_execute() -> None:
    """prometheus-community/helm-charts#1347: the chart tolerates every NoSchedule taint and no NoExecute one, so a pool
    tainted NoExecute (on a live cell too) evicts node-exporter: those nodes' metrics and host-side GPU health stop.
    The chart's default stays first; each pool's NoExecute taint is added; NoSchedule ones are covered already."""
    root = UPSTREAM / "charts" / "kube-prometheus-stack-88.5.3" / "charts" / "prometheus-node-exporter"
    chart = yaml.safe_load((root / "values.yaml").read_text())
    assert chart["tolerations"] == [{"effect": "NoSchedule", "operator": "Exists"}]
    daemonset = (root / "templates" / "daemonset.yaml").read_text()
    assert "{{- with .Values.tolerations }}\n      tolerations:\n" in daemonset
    config = minimal_cell_config()
    config["metrics"] = {"enabled": True}
    config["nodePools"]["l40s"]["taints"] = ["nvidia.com/gpu=present:NoSchedule", "gpucell.io/dedicated:NoExecute"]
    config["nodePools"]["servers"]["taints"] = ["CriticalAddonsOnly=true:NoExecute"]
    release = _plan(cell(config)).named("lab-metrics-stack")
    assert release.inputs["values"]["prometheus-node-exporter"]["tolerations"] == [
        {"effect": "NoSchedule", "operator": "Exists"},
        {"key": "CriticalAddonsOnly", "operator": "Equal", "value": "true", "effect": "NoExecute"},
        {"key": "gpucell.io/dedicated", "operator": "Exists", "effect": "NoExecute"},
    ]
    untainted = stack_values(_spec().metrics, "local-path")["prometheus-node-exporter"]["tolerations"]
    assert untainted == chart["tolerations"]
