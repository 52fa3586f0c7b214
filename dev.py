#!/usr/bin/env python3
"""Set up the project's environments on demand, then run gpucell or the tests. Needs only python3 (3.11+).

    python3 dev.py plan dev        # = gpucell plan dev, in .venv (created and installed when needed)
    python3 dev.py test [ARGS]     # = pytest ARGS, with the test extras and the checkov tool environment

Two environments, because checkov pins ``packaging<24`` while pulumi needs ``packaging>=26``:
``.venv`` (the project, pinned by constraints.txt) and ``.venv-checkov`` (checkov alone, pinned by
tools/checkov-requirements.txt). Each is reinstalled only when the files that pin it change.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
PROJECT_VENV = ROOT / ".venv"
CHECKOV_VENV = ROOT / ".venv-checkov"
CHECKOV_REQUIREMENTS = ROOT / "tools" / "checkov-requirements.txt"


def _bin(env: Path, name: str) -> Path:
    return env / ("Scripts" if os.name == "nt" else "bin") / name


def _ensure(env: Path, pip_args: list[str], pinned_by: list[Path]) -> None:
    """Create ``env`` if needed and ``pip install pip_args`` unless nothing that pins it changed since."""
    digest = hashlib.sha256(" ".join(pip_args).encode())
    for path in pinned_by:
        digest.update(path.read_bytes())
    stamp = env / ".installed"
    if stamp.is_file() and stamp.read_text() == digest.hexdigest():
        return
    if not _bin(env, "python").exists():
        venv.create(env, with_pip=True)
    subprocess.run([str(_bin(env, "python")), "-m", "pip", "install", "-q", *pip_args], cwd=ROOT, check=True)
    stamp.write_text(digest.hexdigest())


def _project(extras: str) -> None:
    _ensure(PROJECT_VENV, ["-c", "constraints.txt", "-e", f".{extras}"],
            [ROOT / "pyproject.toml", ROOT / "constraints.txt"])


def main(argv: list[str]) -> int:
    """``test [pytest args]`` runs the suite; anything else is handed to the ``gpucell`` command."""
    if argv[:1] == ["test"]:
        _project("[test]")
        _ensure(CHECKOV_VENV, ["-r", str(CHECKOV_REQUIREMENTS)], [CHECKOV_REQUIREMENTS])
        env = {**os.environ, "GPUCELL_CHECKOV": str(_bin(CHECKOV_VENV, "checkov"))}
        return subprocess.run([str(_bin(PROJECT_VENV, "pytest")), *argv[1:]], cwd=ROOT, env=env).returncode
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    _project("")
    return subprocess.run([str(_bin(PROJECT_VENV, "gpucell")), *argv], cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
