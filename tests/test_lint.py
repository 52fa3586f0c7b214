"""The code passes the project's linter (ruff, configured in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def test_ruff_is_clean() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "components", "stacks", "tests", "bench", "docs/examples", "dev.py",
         "__main__.py"],
        cwd=REPO, capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
