"""The package's structure: no import cycles, layers that only look down, every public name imports alone.

The import graph is read from the source folder ``gpucell/`` (each file's path is its module name, decision 0019),
so it needs no installed package. An import of ``a.b.c`` from outside ``a.b`` also runs ``a.b``'s
``__init__`` first: that edge is in the graph, since it is how an eager package ``__init__`` turns two harmless
imports into a cycle (``gpucell.catalog.kserve_runtimes`` -> ``gpucell.spec.versions`` ran ``gpucell/spec/__init__.py``,
which imported the workload specs, which imported ``gpucell.catalog.kserve_runtimes`` back).
Decision: docs/decisions/0019-standalone-components.md.
"""

from __future__ import annotations

import ast
import fnmatch
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import gpucell
import gpucell.spec
import gpucell.testing
from tests.conftest import REPO

FOLDERS = {"gpucell": "gpucell"}

LAZY_INITS = ("gpucell", "gpucell.spec", "gpucell.workloads")
"""Package ``__init__`` files that import their public names on first use (PEP 562): nothing at run time."""

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("lazy inits", LAZY_INITS),
    (
        "facts",
        (
            "gpucell.errors",
            "gpucell.catalog",
            "gpucell.catalog.releases",
            "gpucell.catalog.gpu_catalog",
            "gpucell.catalog.download_hosts",
            "gpucell.catalog.kserve_runtimes",
            "gpucell.catalog.common_instancetypes",
            "gpucell.catalog.cluster_api_facts",
        ),
    ),
    (
        "part specs",
        (
            "gpucell.spec._*",
            "gpucell.spec.versions",
            "gpucell.spec.lifecycle",
            "gpucell.spec.network",
            "gpucell.spec.k3s",
            "gpucell.spec.etcd",
            "gpucell.spec.identity",
            "gpucell.spec.pools",
            "gpucell.spec.workloads",
            "gpucell.spec.tenancy",
            "gpucell.spec.hardware",
            "gpucell.spec.dra",
            "gpucell.spec.metrics",
            "gpucell.spec.traffic",
            "gpucell.spec.gpu_models",
            "gpucell.spec.backups",
            "gpucell.spec.scheduling",
            "gpucell.spec.serving",
            "gpucell.spec.platform",
            "gpucell.spec.nodes",
            "gpucell.spec.firmware",
            "gpucell.spec.cloud_init",
            "gpucell.spec.instancetypes",
            "gpucell.spec.images",
            "gpucell.spec.kubevirt",
            "gpucell.spec.tenant_clusters",
        ),
    ),
    (
        "admission",
        (
            "gpucell.admission",
            "gpucell.admission.dra",
            "gpucell.admission.inventory",
            "gpucell.admission.placement",
            "gpucell.admission.vm_shape",
            "gpucell.admission.vm_rules",
            "gpucell.admission.tenant_cluster_admission",
            "gpucell.admission.tenants",
        ),
    ),
    ("cell spec", ("gpucell.spec.cell",)),
    ("components", ("gpucell.*",)),
    ("test kit", ("gpucell.testing", "gpucell.engine.mock_engine", "gpucell.engine._sdk_private")),
    ("stacks", ("gpucell.stacks*",)),
)
"""Lowest first; a module belongs to the first layer one of whose patterns it matches. A module may import its own
layer and the layers below (type-only imports, under ``TYPE_CHECKING``, are not imports at run time and are
counted apart). The lazy package inits come first: they import nothing at run time, and their type-only imports
are their public names."""


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for folder, package in FOLDERS.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = list(path.relative_to(REPO / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The gpucell module ``name`` (a module or a name in one) lives in."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _is_type_only(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(module: str, *, run_time: bool) -> Iterator[str]:
    """Modules ``module`` imports: at run time (module level, not under ``TYPE_CHECKING``) or all of them."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def walk(node: ast.AST, counted: bool) -> Iterator[str]:
        for child in ast.iter_child_nodes(node):
            keep = counted
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) or (
                isinstance(child, ast.If) and _is_type_only(child)
            ):
                keep = counted and not run_time
            if keep and isinstance(child, ast.Import):
                yield from (alias.name for alias in child.names)
            elif keep and isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parent = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join([*parent, base] if base else parent)
                yield base
                yield from (f"{base}.{alias.name}" for alias in child.names)
            yield from walk(child, keep)

    yield from walk(ast.parse(path.read_text()), True)


@cache
def graph(*, run_time: bool) -> dict[str, frozenset[str]]:
    """Module -> the gpucell modules it imports, with the ``__init__`` of each package entered from outside; with
    ``run_time=False`` also the imports under ``TYPE_CHECKING`` and inside functions."""
    edges: dict[str, frozenset[str]] = {}
    for module in MODULES:
        targets: set[str] = set()
        # A lazy init's type-only imports are its public names for type checkers, not a dependency of the init.
        for name in _imports(module, run_time=run_time or module in LAZY_INITS):
            target = _resolve(name) if name.startswith("gpucell") else None
            if target is None or target == module:
                continue
            targets.add(target)
            ancestor = target.rpartition(".")[0]
            while ancestor and not (module == ancestor or module.startswith(f"{ancestor}.")):
                targets.add(ancestor)
                ancestor = ancestor.rpartition(".")[0]
        edges[module] = frozenset(targets - {module})
    return edges


def cycles(edges: dict[str, frozenset[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(edges[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while (top := stack.pop()) != node:
                group.append(top)
            if group:
                found.append(sorted([node, *group]))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)


def layer_of(module: str) -> int:
    """Index in :data:`LAYERS` of the first layer with a pattern matching ``module``."""
    for position, (_, patterns) in enumerate(LAYERS):
        if any(fnmatch.fnmatchcase(module, pattern) for pattern in patterns):
            return position
    raise AssertionError(f"{module} is in no layer")


def upward(edges: dict[str, frozenset[str]]) -> list[str]:
    """``a (layer) -> b (layer)`` for every import of a higher layer's module (a lazy init's re-exports aside)."""
    return sorted(
        f"{module} ({LAYERS[layer_of(module)][0]}) -> {target} ({LAYERS[layer_of(target)][0]})"
        for module, targets in edges.items()
        if module not in LAZY_INITS
        for target in targets
        if layer_of(target) > layer_of(module)
    )


def test_the_lazy_package_inits_import_nothing_at_run_time() -> None:
    assert {init: graph(run_time=True)[init] for init in LAZY_INITS} == dict.fromkeys(LAZY_INITS, frozenset())


def test_the_graph_sees_an_import_through_a_package_init() -> None:
    edges = graph(run_time=True)
    assert {"gpucell.catalog.releases"} <= edges["gpucell.catalog.kserve_runtimes"]
    assert {"gpucell.spec.workloads", "gpucell.spec"} <= edges["gpucell.admission.placement"]
    assert "gpucell.spec" not in edges["gpucell.spec.workloads"]  # inside its own package: the init already ran


def test_cycles_and_layers_are_found_in_a_made_up_graph() -> None:
    made_up = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}), "d": frozenset({"a"})}
    assert cycles(made_up) == [["a", "b", "c"]]
    assert upward({"gpucell.errors": frozenset({"gpucell.cell"}), "gpucell.cell": frozenset()}) == [
        "gpucell.errors (facts) -> gpucell.cell (components)"
    ]


def test_no_import_cycles_at_run_time() -> None:
    assert cycles(graph(run_time=True)) == []


def test_no_module_imports_a_layer_above_its_own_at_run_time() -> None:
    assert upward(graph(run_time=True)) == []


def test_type_only_imports_that_look_up_are_the_known_ones() -> None:
    # ClusterFacts.from_cell takes the whole cell spec (for its annotation only); the rules of CellSpec kept in part
    # specs take narrow parameters (hardware, dra) or a protocol (traffic). The list must not grow.
    assert upward(graph(run_time=False)) == [
        "gpucell.admission.tenants (admission) -> gpucell.spec.cell (cell spec)",
    ]


def test_type_only_cycles_are_the_known_ones() -> None:
    # Annotations only: harmless at run time and for mypy, but what a structure tool reports. The list must not grow.
    assert cycles(graph(run_time=False)) == [
        ["gpucell.admission.tenants", "gpucell.spec.cell"],
        ["gpucell.spec.identity", "gpucell.spec.tenancy"],
    ]


def test_the_part_specs_import_only_facts_and_each_other() -> None:
    parts = [m for m in MODULES if LAYERS[layer_of(m)][0] == "part specs"]
    assert {"gpucell.spec.pools", "gpucell.spec.nodes", "gpucell.spec.platform"} <= set(parts)
    outside = {t for m in parts for t in graph(run_time=False)[m] if layer_of(t) > layer_of(m)}
    assert outside == set()  # not even for annotations


PUBLIC = sorted(
    {f"gpucell:{name}" for name in gpucell.__all__}
    | {f"gpucell.spec:{name}" for name in gpucell.spec.__all__}
    | {f"gpucell.testing:{name}" for name in gpucell.testing.__all__}
)


def _import_alone(entry: str) -> tuple[str, int, str]:
    module, name = entry.split(":")
    done = subprocess.run(
        [sys.executable, "-c", f"from {module} import {name}"], capture_output=True, text=True, check=False
    )
    last_line = done.stderr.strip().rpartition("\n")[2]
    return entry, done.returncode, last_line


def test_every_public_name_imports_alone_in_a_fresh_interpreter() -> None:
    # One interpreter per name: importing them all in one process hides cycles (one import completes another's).
    with ThreadPoolExecutor(max_workers=4) as pool:
        failed = [(entry, error) for entry, code, error in pool.map(_import_alone, PUBLIC) if code != 0]
    assert failed == []
    assert len(PUBLIC) > 100
