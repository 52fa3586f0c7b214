"""Reading a cell's Prometheus HTTP API within a deadline: what ``gpucell usage`` and ``gpucell health`` share.

Every request has a timeout and a size bound, the whole run a deadline (:class:`Deadline`); the answer must be JSON
with ``status: success`` (Prometheus' HTTP API, ``/api/v1/*``). A label holding a control character, a format
character (bidirectional overrides) or a line separator is refused (:func:`refused_character`): gpucell's own series
never carry one, and printed as is it would forge a line of the output. Every failure is a :class:`PrometheusError`
whose message is the one line the command prints (exit 1).
"""

from __future__ import annotations

import contextlib
import json
import time
import unicodedata
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_RESPONSE_BYTES",
    "Deadline",
    "PrometheusError",
    "get",
    "printable",
    "refused_character",
    "url_problem",
]

MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""Largest answer read from Prometheus (bytes) unless a command bounds it lower; a bigger one is refused rather
than read into memory."""
_REFUSED_CATEGORIES = ("Cc", "Cf", "Zl", "Zp")
"""Unicode categories of the characters refused in a label: controls (newline, escape), format characters
(bidirectional overrides) and line/paragraph separators."""


class PrometheusError(Exception):
    """Prometheus could not answer, or answered what cannot be used; the message is the one line the command
    prints (exit 1)."""


@dataclass(frozen=True)
class Deadline:
    """When the whole run must be done (``time.monotonic()`` seconds), the ``--deadline`` it came from and what to
    advise when it passes (``use a shorter period or a longer --deadline``)."""

    at: float
    seconds: float
    advice: str

    @classmethod
    def starting_now(cls, seconds: float, advice: str) -> Deadline:
        """A deadline ``seconds`` from now."""
        return cls(time.monotonic() + seconds, seconds, advice)

    def left(self) -> float:
        """Seconds left (negative once passed)."""
        return self.at - time.monotonic()

    def passed(self, where: str) -> PrometheusError:
        """The error of a run past its deadline, naming the URL ``where``."""
        return PrometheusError(f"{where}: no complete answer within --deadline {self.seconds:g} s; {self.advice}")


def url_problem(command: str, prometheus: str) -> str | None:
    """The one line saying ``--prometheus`` is not an ``http://`` or ``https://`` URL with a host, else ``None``."""
    parts = urllib.parse.urlsplit(prometheus)
    if parts.scheme in ("http", "https") and parts.hostname:
        return None
    return (
        f"{command}: --prometheus {prometheus!r} is not an http:// or https:// URL with a host "
        "(e.g. http://127.0.0.1:9090 after kubectl -n monitoring port-forward svc/prometheus-operated 9090)"
    )


def _read(response: Any, deadline: Deadline, where: str, max_bytes: int) -> bytes:
    """The body of ``response``, at most ``max_bytes`` + 1 bytes, read as it arrives (``read1``) so that an answer
    trickling in is cut at the deadline."""
    body = bytearray()
    while len(body) <= max_bytes:
        part = response.read1(min(1 << 16, max_bytes + 1 - len(body)))
        if not part:
            break
        body += part
        if deadline.left() <= 0:
            raise deadline.passed(where)
    return bytes(body)


def get(
    url: str,
    timeout: float,
    deadline: Deadline,
    *,
    max_bytes: int = MAX_RESPONSE_BYTES,
    too_large: str = "use a shorter period",
) -> Any:
    """The ``data`` of the Prometheus API answer at ``url``: at most ``timeout`` seconds per request (and what is
    left of ``deadline``), at most ``max_bytes`` bytes (``too_large`` advises what to do past it). Raises
    :class:`PrometheusError` naming the URL without its query: unreachable, an HTTP error (with Prometheus' own
    ``error``), not JSON, not ``status: success``."""
    where = url.partition("?")[0]
    if deadline.left() <= 0:
        raise deadline.passed(where)
    cut = deadline.left() < timeout  # the deadline, not the request's timeout, bounds this wait
    try:
        with urllib.request.urlopen(url, timeout=min(timeout, deadline.left())) as response:
            body = _read(response, deadline, where, max_bytes)
    except urllib.error.HTTPError as exc:
        detail = exc.read(2000).decode(errors="replace")
        with contextlib.suppress(json.JSONDecodeError, AttributeError):
            detail = json.loads(detail).get("error", detail)
        raise PrometheusError(f"{where}: HTTP {exc.code}: {printable(str(detail))}".strip()) from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        timed_out = isinstance(exc, TimeoutError) or isinstance(getattr(exc, "reason", None), TimeoutError)
        if deadline.left() <= 0 or (cut and timed_out):
            raise deadline.passed(where) from None
        reason = getattr(exc, "reason", exc)
        raise PrometheusError(f"{where}: {reason} (is the Prometheus URL right and reachable?)") from None
    if len(body) > max_bytes:
        raise PrometheusError(f"{where}: answer larger than {max_bytes} bytes; {too_large}")
    try:
        answer = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        raise PrometheusError(f"{where}: the answer is not JSON (is this a Prometheus API?)") from None
    if not isinstance(answer, dict) or answer.get("status") != "success":
        why = answer.get("error", "query failed") if isinstance(answer, dict) else "not a Prometheus answer"
        raise PrometheusError(f"{where}: {printable(str(why))}")
    return answer.get("data")


def printable(text: str, limit: int = 200) -> str:
    """``text`` on one line: as ``repr`` shows it when it holds a refused character, cut at ``limit``."""
    if any(unicodedata.category(c) in _REFUSED_CATEGORIES for c in text):
        text = repr(text)[1:-1]
    return text if len(text) <= limit else text[:limit] + "..."


def refused_character(value: str) -> str | None:
    """The first character of ``value`` a label must not hold (a control or format character, a line separator),
    else ``None``."""
    return next((c for c in value if unicodedata.category(c) in _REFUSED_CATEGORIES), None)
