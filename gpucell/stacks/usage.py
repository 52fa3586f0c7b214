"""``gpucell usage``: GPU-hours per tenant and resource for a period, read from a Prometheus HTTP API.

The metered series is ``gpucell:tenant_gpu_allocated:sum{tenant, resource, kind}`` (:mod:`gpucell.metering`), the
GPU units each tenant holds, evaluated every minute. GPU-hours over ``[start, end)`` are the sum of its samples at
``start, start + step, ... < end`` times ``step``, read with ``/api/v1/query_range`` one day (at most) per request,
so that no answer exceeds Prometheus's 11,000 points per series and a long period reports its progress. Each request
has a timeout and a size bound; any failure is one line naming the URL and what went wrong.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO

from gpucell.errors import ConfigError
from gpucell.metering import ALLOCATED

__all__ = [
    "MAX_RESPONSE_BYTES",
    "Usage",
    "UsageError",
    "check_arguments",
    "parse_time",
    "progress_line",
    "read_usage",
    "render",
]

MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""Largest answer read from Prometheus (bytes); a bigger one is refused rather than read into memory."""
CHUNK = timedelta(days=1)
"""Period of one request (one day at the default 1-minute step: 1,440 points per series)."""
FORMATS = ("table", "csv", "json")


class UsageError(Exception):
    """Prometheus could not answer; the message is the one line ``gpucell usage`` prints."""


@dataclass(frozen=True)
class Usage:
    """GPU-hours of one tenant, resource and kind over the period."""

    tenant: str
    resource: str
    kind: str
    gpu_hours: float


def parse_time(value: str, option: str) -> datetime:
    """An ISO 8601 date or date-time (``2026-11-01``, ``2026-11-01T12:00:00Z``), UTC unless it says otherwise.
    Raises :class:`ConfigError` naming ``option`` otherwise."""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(
            [
                f"gpucell usage: {option} {value!r} is not an ISO 8601 date or time (e.g. 2026-11-01 or "
                "2026-11-01T12:00:00Z)"
            ]
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def check_arguments(
    prometheus: str, start: datetime, end: datetime, *, step: int, timeout: float, tenant: str | None
) -> None:
    """Raise :class:`ConfigError` (one line per problem, exit 2) for arguments ``read_usage`` cannot use."""
    problems = []
    parts = urllib.parse.urlsplit(prometheus)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        problems.append(
            f"gpucell usage: --prometheus {prometheus!r} is not an http:// or https:// URL with a host "
            "(e.g. http://127.0.0.1:9090 after kubectl -n monitoring port-forward svc/prometheus-operated "
            "9090)"
        )
    if end <= start:
        problems.append(f"gpucell usage: --end {end.isoformat()} is not after --start {start.isoformat()}")
    if not 10 <= step <= 3600:
        problems.append(
            f"gpucell usage: --step {step} is not between 10 and 3600 seconds (the rules are evaluated every 60)"
        )
    if not 1 <= timeout <= 600:
        problems.append(f"gpucell usage: --timeout {timeout:g} is not between 1 and 600 seconds")
    if tenant is not None and not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", tenant):
        problems.append(f"gpucell usage: --tenant {tenant!r} is not a tenant name (a DNS-1123 label)")
    if problems:
        raise ConfigError(problems)


def _chunks(start: datetime, end: datetime) -> Iterator[tuple[datetime, datetime]]:
    at = start
    while at < end:
        yield at, min(at + CHUNK, end)
        at += CHUNK


def _get(url: str, timeout: float) -> Any:
    where = url.partition("?")[0]
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            body = response.read(MAX_RESPONSE_BYTES + 1)
    except urllib.error.HTTPError as exc:
        detail = exc.read(2000).decode(errors="replace")
        with contextlib.suppress(json.JSONDecodeError, AttributeError):
            detail = json.loads(detail).get("error", detail)
        raise UsageError(f"{where}: HTTP {exc.code}: {detail}".strip()) from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UsageError(f"{where}: {reason} (is the Prometheus URL right and reachable?)") from None
    if len(body) > MAX_RESPONSE_BYTES:
        raise UsageError(f"{where}: answer larger than {MAX_RESPONSE_BYTES} bytes; use a shorter period")
    try:
        answer = json.loads(body)
    except json.JSONDecodeError:
        raise UsageError(f"{where}: the answer is not JSON (is this a Prometheus API?)") from None
    if not isinstance(answer, dict) or answer.get("status") != "success":
        why = answer.get("error", "query failed") if isinstance(answer, dict) else "not a Prometheus answer"
        raise UsageError(f"{where}: {why}")
    return answer["data"]


def read_usage(
    prometheus: str,
    start: datetime,
    end: datetime,
    *,
    tenant: str | None = None,
    step_seconds: int = 60,
    timeout: float = 30,
    progress: Callable[[int, int], None] | None = None,
) -> list[Usage]:
    """GPU-hours per ``(tenant, resource, kind)`` over ``[start, end)``, sorted; ``tenant`` keeps one tenant.
    ``progress(done, total)`` is called after each request. Raises :class:`UsageError`."""
    selector = f'{{tenant="{tenant}"}}' if tenant else ""
    base = prometheus.rstrip("/") + "/api/v1/query_range"
    totals: dict[tuple[str, str, str], float] = {}
    chunks = list(_chunks(start, end))
    for index, (chunk_start, chunk_end) in enumerate(chunks):
        last = chunk_end.timestamp() - step_seconds  # [start, end): the sample at `end` belongs to the next chunk
        if last < chunk_start.timestamp():
            continue
        query = urllib.parse.urlencode(
            {
                "query": f"{ALLOCATED}{selector}",
                "start": f"{chunk_start.timestamp():.0f}",
                "end": f"{last:.0f}",
                "step": str(step_seconds),
            }
        )
        data = _get(f"{base}?{query}", timeout)
        for series in data.get("result", []):
            labels = series.get("metric", {})
            key = (labels.get("tenant", "?"), labels.get("resource", "?"), labels.get("kind", "?"))
            units = sum(float(value) for _, value in series.get("values", []))
            totals[key] = totals.get(key, 0.0) + units * step_seconds / 3600
        if progress is not None:
            progress(index + 1, len(chunks))
    return [Usage(*key, hours) for key, hours in sorted(totals.items())]


def render(rows: list[Usage], fmt: str, start: datetime, end: datetime) -> str:
    """``rows`` as an aligned ``table``, ``csv`` (header ``tenant,resource,kind,gpu_hours``) or ``json``."""
    if fmt == "json":
        return (
            json.dumps(
                {
                    "start": start.isoformat(),
                    "end": end.isoformat(),
                    "usage": [
                        {"tenant": r.tenant, "resource": r.resource, "kind": r.kind, "gpuHours": round(r.gpu_hours, 4)}
                        for r in rows
                    ],
                },
                indent=2,
            )
            + "\n"
        )
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["tenant", "resource", "kind", "gpu_hours"])
        writer.writerows([r.tenant, r.resource, r.kind, f"{r.gpu_hours:.2f}"] for r in rows)
        return out.getvalue()
    header = ("TENANT", "RESOURCE", "KIND", "GPU-HOURS")
    cells = [header, *((r.tenant, r.resource, r.kind, f"{r.gpu_hours:.2f}") for r in rows)]
    widths = [max(len(c[i]) for c in cells) for i in range(4)]
    lines = [
        "  ".join(c[i].ljust(widths[i]) if i < 3 else c[i].rjust(widths[i]) for i in range(4)).rstrip() for c in cells
    ]
    total = sum(r.gpu_hours for r in rows)
    lines.append(f"{len(rows)} row(s), {total:.2f} GPU-hours, {start.isoformat()} to {end.isoformat()}")
    return "\n".join(lines) + "\n"


def progress_line(stream: TextIO) -> Callable[[int, int], None]:
    """A progress reporter writing ``usage: read day N of M`` to ``stream`` (stderr) for periods over one day."""

    def report(done: int, total: int) -> None:
        if total > 1:
            print(f"usage: read day {done} of {total}", file=stream, flush=True)

    return report
