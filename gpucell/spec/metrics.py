"""The metrics stack of a cell (kube-prometheus-stack): retention, storage, remote write."""

from __future__ import annotations

from typing import ClassVar
from urllib.parse import urlsplit

from pydantic import Field, StrictInt, field_validator, model_validator

from gpucell.errors import SpecError
from gpucell.spec._base import SpecModel
from gpucell.spec._values import check_config_key, check_endpoint_host, check_url

__all__ = ["HOST_HEALTH_TEXTFILE", "HOST_HEALTH_TEXTFILE_DIR", "MetricsSpec", "RemoteWriteSpec"]

HOST_HEALTH_TEXTFILE_DIR = "/var/lib/gpucell/node-exporter"
"""The host directory node-exporter's textfile collector reads (every ``*.prom`` file in it): the host-side GPU
health collector (:mod:`gpucell.k3s.gpu_host_health`) writes there, node-exporter reads it through its mount of the
host's ``/`` (:mod:`gpucell.components.metrics`)."""
HOST_HEALTH_TEXTFILE = f"{HOST_HEALTH_TEXTFILE_DIR}/gpucell-gpu-health.prom"
"""The file the host-side GPU health collector writes whole each pass."""


class RemoteWriteSpec(SpecModel):
    """Where the cell's Prometheus also sends every sample: a central long-term store (Thanos Receive, Mimir,
    Cortex, VictoriaMetrics...) so that a fleet of regions is queried in one place."""

    url: str
    """``https://`` push URL of the store's remote-write endpoint (``https://metrics.example.com/api/v1/push``); its
    host is neither a loopback, link-local or other non-routable address nor a node of the cell."""
    credentials_config_key: str | None = None
    """Secret stack config key holding ``<user>:<password>`` for HTTP basic auth; required: a store reachable
    without credentials would accept any cell's (or anyone's) samples as this one's."""

    @field_validator("url")
    @classmethod
    def _https(cls, value: str) -> str:
        try:
            check_url(value, ("https",))
        except ValueError:
            raise ValueError(
                "is not an https:// URL with a host (samples leave the cell; they travel over TLS)"
            ) from None
        check_endpoint_host(urlsplit(value).hostname or "", "the remote-write receiver")
        return value

    @field_validator("credentials_config_key")
    @classmethod
    def _key(cls, value: str | None) -> str | None:
        return None if value is None else check_config_key(value)

    @model_validator(mode="after")
    def _needs_credentials(self) -> RemoteWriteSpec:
        if self.credentials_config_key is None:
            raise SpecError(
                ("credentialsConfigKey",),
                f"is required with url {self.url}: name a secret config key "
                "holding '<user>:<password>' (pulumi config set --secret <key> -- 'user:password')",
            )
        return self


class MetricsSpec(SpecModel):
    """The cell's metrics stack: kube-prometheus-stack (Prometheus Operator, Prometheus, Alertmanager, Grafana,
    kube-state-metrics, node exporter) at ``versions.kubePrometheusStack``, with gpucell's scrape targets, the
    per-tenant GPU metering rules, the GPU health alerts and the cell's dashboards (``gpucell.components.metrics``).
    ``values`` is merged last into the chart's values."""

    owned_values: ClassVar[dict[tuple[str, ...], str]] = {
        ("prometheus", "prometheusSpec", "retention"): "metrics.retentionDays",
        ("prometheus", "prometheusSpec", "storageSpec"): "metrics.storageGib",
        ("prometheus", "prometheusSpec", "remoteWrite"): "metrics.remoteWrite",
    }

    enabled: bool = False
    """Install the metrics stack. Defaults to false, so that upgrading gpucell adds no volume or release to a
    running cell unasked; the ``gpucell:tenant_gpu_allocated:sum`` rules, GPU alerts, dashboards and LLM-metric
    autoscaling (``scaleMetric: vllm-*``) need it."""
    retention_days: StrictInt = Field(default=15, ge=1, le=3650)
    """How long Prometheus keeps samples locally (days; Prometheus ``--storage.tsdb.retention.time``). Defaults to
    15. Billing periods longer than this need ``remoteWrite`` (or ``gpucell usage`` run before they expire)."""
    storage_gib: StrictInt = Field(default=50, ge=5, le=100000)
    """Size of Prometheus's volume (GiB), from the cell's default StorageClass. Defaults to 50. Growing it
    converges with Longhorn (gpucell expands the live claim; ``local-path`` volumes cannot grow: the new size
    applies to a new volume only); shrinking it is disruptive (a claim cannot shrink; ``metricsStorage``) and
    must be acknowledged."""
    remote_write: RemoteWriteSpec | None = None
    """Send every sample to a central store too. Defaults to none."""
    values: dict[str, object] = {}
    """kube-prometheus-stack chart values merged over what gpucell renders (maps merge key by key)."""

    @model_validator(mode="after")
    def _needs_enabled(self) -> MetricsSpec:
        if not self.enabled:
            for key in ("retention_days", "storage_gib", "remote_write", "values"):
                if key in self.model_fields_set:
                    alias = {
                        "retention_days": "retentionDays",
                        "storage_gib": "storageGib",
                        "remote_write": "remoteWrite",
                    }.get(key, key)
                    raise SpecError(
                        (alias,),
                        "only applies with metrics.enabled: true (the metrics stack is not "
                        "installed); set enabled: true or remove it",
                    )
        return self

    @model_validator(mode="after")
    def _no_owned_values(self) -> MetricsSpec:
        for path, key in self.owned_values.items():
            node: object = self.values
            for part in path:
                node = node.get(part) if isinstance(node, dict) else None
            if node is not None:
                raise SpecError(("values", *path), f"is set by gpucell from {key}; set {key} instead")
        return self
