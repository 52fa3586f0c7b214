"""checkov over the rendered manifests: tenant workloads must pass; privileged platform objects skip explicitly.

checkov runs as a separate program (its own pins clash with pulumi's, see ``dev.py``): the ``GPUCELL_CHECKOV``
environment variable names it, else ``checkov`` on ``PATH``. A skip is an annotation on the object itself,
``checkov.io/skip1: CKV_K8S_16=<one-line reason>``, never a global ``--skip-check``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpucell.stacks.conformance.problems import MissingToolError

__all__ = ["CheckovFinding", "checkov_binary", "run_checkov"]

CHECKOV_VERSION = "3.3.30"
"""The checkov release the tests run (tools/checkov-requirements.txt)."""


@dataclass(frozen=True)
class CheckovFinding:
    """One failed checkov check on one object (by its index in the list given to :func:`run_checkov`)."""

    index: int
    check_id: str
    check_name: str


def checkov_binary() -> str:
    """``$GPUCELL_CHECKOV`` or, when it is not set, ``checkov`` on ``PATH``.

    Raises :class:`~gpucell.stacks.conformance.problems.MissingToolError` naming the path when ``GPUCELL_CHECKOV``
    points at nothing (it is not ignored: a mistyped path must not quietly run another checkov), else saying how to
    get checkov.
    """
    configured = os.environ.get("GPUCELL_CHECKOV")
    if configured:
        if not Path(configured).exists():
            raise MissingToolError(
                f"GPUCELL_CHECKOV points at {configured}, which does not exist; point it at a checkov program "
                "(`python3 dev.py plan STACK --check` sets up .venv-checkov/bin/checkov) or unset it to use "
                "checkov from PATH"
            )
        return configured
    found = shutil.which("checkov")
    if found is None:
        raise MissingToolError(
            f"checkov not found on PATH: `pipx install checkov=={CHECKOV_VERSION}` or set GPUCELL_CHECKOV to its path "
            "(`python3 dev.py plan STACK --check` and `python3 dev.py test` set up .venv-checkov)"
        )
    return found


def run_checkov(objects: list[dict[str, Any]]) -> tuple[list[CheckovFinding], int]:
    """Run checkov's Kubernetes checks over ``objects``; returns the failures and how many checks were skipped.

    Offline: ``--skip-download`` keeps checkov from fetching policies or guidelines. Raises ``RuntimeError``
    when checkov itself fails (exit status other than 0 or 1, or output that is not JSON).
    """
    if not objects:
        return [], 0
    with tempfile.TemporaryDirectory(prefix="gpucell-checkov-") as tmp:
        for index, obj in enumerate(objects):
            (Path(tmp) / f"{index:05d}.yaml").write_text(yaml.safe_dump(obj, sort_keys=False))
        done = subprocess.run(
            [
                checkov_binary(),
                "--directory",
                tmp,
                "--framework",
                "kubernetes",
                "--output",
                "json",
                "--quiet",
                "--skip-download",
            ],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_NO_OUTPUT": "FALSE"},
        )
    if done.returncode not in (0, 1):
        raise RuntimeError(f"checkov failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    try:
        report = json.loads(done.stdout) if done.stdout.strip() else {}
    except json.JSONDecodeError:
        raise RuntimeError(f"checkov printed no JSON: {done.stdout[:300]}") from None
    reports = report if isinstance(report, list) else [report]
    findings: list[CheckovFinding] = []
    skipped = 0
    for part in reports:
        if not part or "results" not in part:
            continue
        skipped += int(part.get("summary", {}).get("skipped", 0))
        for failed in part["results"].get("failed_checks", []):
            index = int(Path(failed["file_path"]).stem)
            findings.append(CheckovFinding(index, failed["check_id"], failed["check_name"]))
    return sorted(findings, key=lambda f: (f.index, f.check_id)), skipped
