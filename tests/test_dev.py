"""dev.py: what a developer sees when setting up an environment fails."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO


def load_dev() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dev_under_test", REPO / "dev.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_failed_pip_install_is_one_line_not_a_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    dev = load_dev()
    env = tmp_path / ".venv"

    def create(target: Path) -> None:  # an environment whose pip fails, as pip does offline
        (target / "bin").mkdir(parents=True)
        (target / "bin" / "python").write_text("#!/bin/sh\necho 'ERROR: No matching distribution found' >&2\n"
                                               "exit 1\n")
        (target / "bin" / "python").chmod(0o755)

    monkeypatch.setattr(dev, "PROJECT_VENV", env)
    monkeypatch.setattr(dev, "_create", create)
    assert dev.main(["plan", "dev"]) == 1
    assert capsys.readouterr().err == ("dev.py: installing .venv failed: `python -m pip install -q -c constraints.txt "
                                       "-e .` exited with 1; see the pip output above\n")
    assert not (env / dev.STAMP).exists()  # the next run tries again
