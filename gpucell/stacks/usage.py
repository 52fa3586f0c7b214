"""``gpucell usage``: GPU-hours per tenant and resource for a period, read from a Prometheus HTTP API.

The metered series is ``gpucell:tenant_gpu_allocated:sum{tenant, resource, gpu_model, kind}``
(:mod:`gpucell.components.metering`), the GPU units each tenant holds, evaluated every minute; only the recorded series
are read (``job=""``: a scraped series of the same name has a job). GPU-hours over ``[start, end)`` are the sum of its
samples at ``start, start + step, ... < end`` times ``step``, read with ``/api/v1/query_range`` one day (at most)
per request, so that no answer exceeds Prometheus's 11,000 points per series and a long period reports its
progress. The period is at most :data:`MAX_PERIOD`; each request has a timeout and a size bound, the whole run a
deadline (``--deadline``, :data:`DEFAULT_DEADLINE` seconds).

The answer is checked before anything is printed: a matrix of series, each with the labels ``tenant``,
``resource`` and ``kind`` (``gpu_model`` is ``unknown`` on series recorded before gpucell carried it), no label
holding a control character (a newline would forge a table row), every sample a finite number of units, 0 or more.
Any failure is one line naming the URL and what went wrong (exit 1). In CSV, a cell starting with ``=``, ``+``,
``-``, ``@``, a tab or a carriage return is prefixed with ``'`` (OWASP "CSV Injection"), so a spreadsheet shows it
as text and never runs it as a formula.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO

from gpucell.components.metering import ALLOCATED, RECORDED, UNKNOWN_MODEL
from gpucell.errors import ConfigError
from gpucell.stacks.prometheus_api import (
    MAX_RESPONSE_BYTES,
    Deadline,
    PrometheusError,
    get,
    printable,
    refused_character,
    url_problem,
)

__all__ = [
    "DEFAULT_DEADLINE",
    "MAX_PERIOD",
    "MAX_RESPONSE_BYTES",
    "Usage",
    "UsageError",
    "check_arguments",
    "csv_cell",
    "parse_time",
    "progress_line",
    "read_usage",
    "render",
]

CHUNK = timedelta(days=1)
"""Period of one request (one day at the default 1-minute step: 1,440 points per series)."""
MAX_PERIOD = timedelta(days=366)
"""Longest period one run reads (a leap year; 366 requests): a longer one is refused (exit 2), not read for hours."""
DEFAULT_DEADLINE = 600.0
"""Seconds the whole run may take by default (``--deadline``, 1 to 86400): past it, one line and exit 1."""
FORMATS = ("table", "csv", "json")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


UsageError = PrometheusError
"""Prometheus could not answer; the message is the one line ``gpucell usage`` prints (the error
:mod:`gpucell.stacks.prometheus_api` raises)."""


@dataclass(frozen=True)
class Usage:
    """GPU-hours of one tenant, resource and kind over the period."""

    tenant: str
    resource: str
    gpu_model: str
    """The catalog model of the GPUs (``H100-SXM5-80GB``, ``L4``), ``unknown`` where the rules did not know it."""
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
    prometheus: str,
    start: datetime,
    end: datetime,
    *,
    step: int,
    timeout: float,
    tenant: str | None,
    deadline: float = DEFAULT_DEADLINE,
) -> None:
    """Raise :class:`ConfigError` (one line per problem, exit 2) for arguments ``read_usage`` cannot use."""
    problems = []
    if (problem := url_problem("gpucell usage", prometheus)) is not None:
        problems.append(problem)
    if end <= start:
        problems.append(f"gpucell usage: --end {end.isoformat()} is not after --start {start.isoformat()}")
    elif end - start > MAX_PERIOD:
        problems.append(
            f"gpucell usage: --start {start.isoformat()} to --end {end.isoformat()} is longer than "
            f"{MAX_PERIOD.days} days; ask for at most {MAX_PERIOD.days} days per run"
        )
    if not 10 <= step <= 3600:
        problems.append(
            f"gpucell usage: --step {step} is not between 10 and 3600 seconds (the rules are evaluated every 60)"
        )
    if not 1 <= timeout <= 600:
        problems.append(f"gpucell usage: --timeout {timeout:g} is not between 1 and 600 seconds")
    if not 1 <= deadline <= 86400:
        problems.append(f"gpucell usage: --deadline {deadline:g} is not between 1 and 86400 seconds")
    if tenant is not None and not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", tenant):
        problems.append(f"gpucell usage: --tenant {tenant!r} is not a tenant name (a DNS-1123 label)")
    if problems:
        raise ConfigError(problems)


def _chunks(start: datetime, end: datetime) -> Iterator[tuple[datetime, datetime]]:
    at = start
    while at < end:
        yield at, min(at + CHUNK, end)
        at += CHUNK


def _label(labels: dict[str, str], name: str, where: str) -> str:
    value = labels.get(name)
    if value is None:
        if name == "gpu_model":
            return UNKNOWN_MODEL  # recorded before gpucell carried the model
        raise UsageError(
            f"{where}: a series has no label {name!r} ({printable(str(labels))}); gpucell's recorded series always "
            "carry tenant, resource and kind"
        )
    return value


def _series(data: Any, where: str) -> Iterator[tuple[tuple[str, str, str, str], float]]:
    """``((tenant, resource, gpu_model, kind), units summed over the samples)`` per series of a ``query_range``
    answer's ``data``. Raises :class:`UsageError` for any other shape, a label holding a refused character, or a
    sample that is not a finite number, 0 or more."""
    if not isinstance(data, dict) or data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
        kind = data.get("resultType") if isinstance(data, dict) else type(data).__name__
        raise UsageError(
            f"{where}: the answer is not a matrix of series ({printable(repr(kind))}); is this a "
            "Prometheus query_range API?"
        )
    for series in data["result"]:
        labels = series.get("metric") if isinstance(series, dict) else None
        values = series.get("values") if isinstance(series, dict) else None
        if (
            not isinstance(labels, dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items())
            or not isinstance(values, list)
            or not all(isinstance(v, list) and len(v) == 2 and isinstance(v[1], str) for v in values)
        ):
            raise UsageError(
                f'{where}: a series is not {{metric: labels, values: [[time, "value"], ...]}} '
                f"({printable(json.dumps(series))})"
            )
        for name, value in labels.items():
            if (bad := refused_character(value)) is not None:
                raise UsageError(
                    f"{where}: label {name}={printable(repr(value), 120)} holds the control character "
                    f"{bad!r}; refused (gpucell's recorded series never do: a forged series?)"
                )
        tenant, resource, model, kind = (
            _label(labels, name, where) for name in ("tenant", "resource", "gpu_model", "kind")
        )
        key = (tenant, resource, model, kind)
        units = 0.0
        for at, raw in values:
            try:
                sample = float(raw)
            except ValueError:
                sample = math.nan
            if not math.isfinite(sample) or sample < 0:
                raise UsageError(
                    f"{where}: {'/'.join(key)} has the sample {printable(repr(raw), 60)} at "
                    f"{printable(str(at), 40)}: not a number of GPU units (finite, 0 or more)"
                )
            units += sample
        yield key, units


def read_usage(
    prometheus: str,
    start: datetime,
    end: datetime,
    *,
    tenant: str | None = None,
    step_seconds: int = 60,
    timeout: float = 30,
    deadline: float = DEFAULT_DEADLINE,
    progress: Callable[[int, int], None] | None = None,
) -> list[Usage]:
    """GPU-hours per ``(tenant, resource, gpu_model, kind)`` over ``[start, end)``, sorted; ``tenant`` keeps one
    tenant. Each request waits at most ``timeout`` seconds, the whole read ``deadline`` seconds.
    ``progress(done, total)`` is called after each request. Raises :class:`UsageError`."""
    selector = f'{{{RECORDED},tenant="{tenant}"}}' if tenant else f"{{{RECORDED}}}"
    base = prometheus.rstrip("/") + "/api/v1/query_range"
    clock = Deadline.starting_now(deadline, "use a shorter period or a longer --deadline")
    totals: dict[tuple[str, str, str, str], float] = {}
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
        for key, units in _series(get(f"{base}?{query}", timeout, clock), base):
            totals[key] = totals.get(key, 0.0) + units * step_seconds / 3600
        if progress is not None:
            progress(index + 1, len(chunks))
    return [Usage(*key, hours) for key, hours in sorted(totals.items())]


def csv_cell(value: str) -> str:
    """``value`` as a CSV cell a spreadsheet shows as text: prefixed with ``'`` when it starts with ``=``, ``+``,
    ``-``, ``@``, a tab or a carriage return (a formula otherwise)."""
    return f"'{value}" if value.startswith(_FORMULA_START) else value


def render(rows: list[Usage], fmt: str, start: datetime, end: datetime) -> str:
    """``rows`` as an aligned ``table``, ``csv`` (header ``tenant,resource,gpu_model,kind,gpu_hours``, text cells
    through :func:`csv_cell`) or ``json`` (``gpuModel``)."""
    if fmt == "json":
        return (
            json.dumps(
                {
                    "start": start.isoformat(),
                    "end": end.isoformat(),
                    "usage": [
                        {
                            "tenant": r.tenant,
                            "resource": r.resource,
                            "gpuModel": r.gpu_model,
                            "kind": r.kind,
                            "gpuHours": round(r.gpu_hours, 4),
                        }
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
        writer.writerow(["tenant", "resource", "gpu_model", "kind", "gpu_hours"])
        writer.writerows(
            [*(csv_cell(cell) for cell in (r.tenant, r.resource, r.gpu_model, r.kind)), f"{r.gpu_hours:.2f}"]
            for r in rows
        )
        return out.getvalue()
    header = ("TENANT", "RESOURCE", "GPU-MODEL", "KIND", "GPU-HOURS")
    cells = [header, *((r.tenant, r.resource, r.gpu_model, r.kind, f"{r.gpu_hours:.2f}") for r in rows)]
    widths = [max(len(c[i]) for c in cells) for i in range(5)]
    lines = [
        "  ".join(c[i].ljust(widths[i]) if i < 4 else c[i].rjust(widths[i]) for i in range(5)).rstrip() for c in cells
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
