"""The code passes the project's linter and formatter (ruff check and ruff format, configured in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

LINTED = ["gpucell", "tests", "bench", "tools", "docs/examples", "dev.py", "__main__.py"]
"""What ruff checks and formats: every Python file of the repository."""


def test_ruff_is_clean() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", *LINTED],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_is_clean() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", *LINTED],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
