"""The package type-checks under ``mypy --strict`` with the pydantic plugin (configured in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def test_mypy_strict_is_clean() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(REPO / "pyproject.toml"),
            "--cache-dir",
            str(REPO / ".mypy_cache"),
            "-p",
            "gpucell",
            "-p",
            "tools",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("Success: no issues found")
