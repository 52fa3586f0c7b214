"""The package type-checks under ``mypy --strict`` with the pydantic plugin (configured in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def package_tree(root: Path) -> Path:
    """``root/gpucell``: the installed layout (``components/`` as ``gpucell``, ``stacks/`` as ``gpucell.stacks``)
    built from symlinks, because mypy cannot follow the editable install's import hook."""
    package = root / "gpucell"
    package.mkdir()
    for entry in (REPO / "components").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    (package / "stacks").symlink_to(REPO / "stacks")
    return package


def test_mypy_strict_is_clean(tmp_path: Path) -> None:
    package_tree(tmp_path)
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
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("Success: no issues found")
