"""Planning a stack as it is at a git ref: the "before" of ``gpucell diff --base REF``.

By default the ref's stack files are planned **with the ref's own code**: the ref's tree is exported with
``git archive`` and its gpucell package run in a subprocess (imported from the tree's ``gpucell/`` ahead of the
installed one, with this environment's libraries; a ref from before decision 0019 has its package laid out from
its ``[tool.setuptools.package-dir]``). A pull
request that changes code (a default, a rendered value) then shows what that change does to every stack, which
planning the ref's config with the working tree's code would hide. ``--base-code worktree`` plans the ref's
``Pulumi.<stack>.yaml`` with the working tree's code instead (for a ref whose code no longer runs here).

A ref whose code predates fingerprints gets them computed from its stack file with the working tree's rules; the
review says so.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path
from typing import Any

from gpucell.day2.disruption import fingerprint
from gpucell.day2.gpu_serving import RECORD_SUFFIX
from gpucell.errors import ConfigError
from gpucell.spec import StackSpec
from gpucell.stacks.config import stack_spec_input
from gpucell.stacks.plan import make_plan, read_stack_files, to_json

__all__ = ["EMPTY_PLAN", "BaseTree", "plan_head", "stacks_in"]

EMPTY_PLAN: dict[str, Any] = {"stack": "", "resources": [], "outputs": {}, "acknowledge": []}
"""The plan of a stack that does not exist (a stack file added or removed by the change)."""
_BOOT = "import sys\nfrom gpucell.stacks.cli import main\nsys.exit(main(sys.argv[1:]))\n"


def stacks_in(project_dir: Path) -> list[str]:
    """The stacks with a ``Pulumi.<stack>.yaml`` in ``project_dir``, sorted."""
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in project_dir.glob("Pulumi.*.yaml"))


def plan_head(project_dir: Path, stack: str, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """The plan JSON of ``stack`` in the working tree (:data:`EMPTY_PLAN` when it has no stack file).

    With ``base`` (the base's plan JSON), the head is planned as ``pulumi up`` would run it after the base: the
    base's ``<region>GpuNodes`` outputs are the last deployment's, so the GPU pieces serve a pool's old and new
    configuration as that run will (:mod:`gpucell.day2.gpu_serving`). The base's fingerprints are not handed over: the
    review judges them itself rather than stop at the guard."""
    if not (project_dir / f"Pulumi.{stack}.yaml").is_file():
        return dict(EMPTY_PLAN, stack=stack)
    outputs = (base or {}).get("outputs") or {}
    records = {key: value for key, value in outputs.items() if key.endswith(RECORD_SUFFIX)}
    plan = make_plan(project_dir, stack, last_deployment=records or None)
    return to_json(plan, list(plan.cells))


class BaseTree:
    """The files of ``ref`` exported under ``work`` (``work/tree``), planned on demand."""

    def __init__(self, repo: Path, ref: str, work: Path, *, own_code: bool = True) -> None:
        self.ref = ref
        self.tree = work / "tree"
        self.work = work
        self.own_code = own_code
        self._export(repo)

    def _export(self, repo: Path) -> None:
        done = subprocess.run(
            ["git", "-C", str(repo), "archive", "--format=tar", self.ref], capture_output=True, check=False
        )
        if done.returncode != 0:
            why = done.stderr.decode(errors="replace").strip().splitlines()
            raise ConfigError.at(
                ("--base",), f"{self.ref!r} cannot be read from {repo}: {why[-1] if why else 'git archive failed'}"
            )
        self.tree.mkdir(parents=True)
        with tarfile.open(fileobj=io.BytesIO(done.stdout)) as archive:
            archive.extractall(self.tree, filter="data")

    def stacks(self) -> list[str]:
        """The stacks with a stack file at the ref."""
        return stacks_in(self.tree)

    def plan(self, stack: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]] | None, list[str]]:
        """(plan JSON, fingerprints to use instead of the plan's or ``None``, notes) of ``stack`` at the ref."""
        if not (self.tree / f"Pulumi.{stack}.yaml").is_file():
            return (
                dict(EMPTY_PLAN, stack=stack),
                {},
                [f"`Pulumi.{stack}.yaml` does not exist at `{self.ref}`: every resource is new"],
            )
        if not self.own_code:
            plan = make_plan(self.tree, stack)
            return (
                to_json(plan, list(plan.cells)),
                None,
                [f"base: `Pulumi.{stack}.yaml` at `{self.ref}` planned with the working tree's code"],
            )
        result = self._plan_with_ref_code(stack)
        notes = [f"base: stack files and code at `{self.ref}`"]
        outputs = result.get("outputs") or {}
        if not any(key.endswith("Fingerprint") for key in outputs):
            notes.append(
                f"the code at `{self.ref}` exports no fingerprints: disruptive changes were found from "
                f"`Pulumi.{stack}.yaml` at `{self.ref}` with the working tree's rules"
            )
            return result, self._fingerprints_from_config(stack), notes
        return result, None, notes

    def _import_root(self) -> Path:
        if (self.tree / "gpucell" / "__init__.py").is_file():
            return self.tree  # the folders carry the import names (decision 0019): the tree is the import root
        root = self.work / "import"
        if root.is_dir():
            return root
        try:
            setuptools = tomllib.loads((self.tree / "pyproject.toml").read_text())["tool"]["setuptools"]
        except (OSError, KeyError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError.at(
                ("--base",),
                f"{self.ref!r} has no [tool.setuptools] in pyproject.toml ({exc}); use --base-code worktree",
            ) from None
        package_dir: dict[str, str] | None = setuptools.get("package-dir")
        if package_dir is None:  # each package's folder is its import path (decision 0019): the tree is the root
            return self.tree
        for package, folder in sorted(package_dir.items(), key=lambda item: item[0].count(".")):
            shutil.copytree(
                self.tree / folder,
                root / package.replace(".", "/"),
                dirs_exist_ok=True,
                ignore=shutil.ignore_patterns("__pycache__"),
            )
        return root

    def _plan_with_ref_code(self, stack: str) -> dict[str, Any]:
        out = self.work / f"{stack}.json"
        done = subprocess.run(
            [sys.executable, "-c", _BOOT, "plan", stack, "--json", str(out), "--project-dir", str(self.tree)],
            env={**_environ(), "PYTHONPATH": str(self._import_root())},
            # `python -c` puts its working directory first on sys.path: run from a checkout's root, the working
            # tree's gpucell/ would shadow the ref's
            cwd=self.tree,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0 or not out.is_file():
            why = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise ConfigError.at(
                ("--base",),
                f"planning stack {stack} with the code at {self.ref!r} failed "
                f"(exit {done.returncode}): {why}; to plan its stack file with this code, "
                "pass --base-code worktree",
            )
        result: dict[str, Any] = json.loads(out.read_text())
        return result

    def _fingerprints_from_config(self, stack: str) -> dict[str, dict[str, Any]]:
        files = read_stack_files(self.tree, stack)
        spec = StackSpec.model_validate(stack_spec_input(files.config, files.project))
        return {region: fingerprint(cell) for region, cell in spec.regions.items()}


def _environ() -> dict[str, str]:
    """This process's environment without ``PYTHONPATH`` (the subprocess gets its own)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
