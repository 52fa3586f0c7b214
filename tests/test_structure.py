"""The package's structure: no import cycles, layers that only look down, every public name imports alone.

The import graph is read from the source folder ``gpucell/`` (each file's path is its module name, decision 0019;
its folders are its layers, decision 0033), so it needs no installed package. An import of ``a.b.c`` from outside
``a.b`` also runs ``a.b``'s ``__init__`` first: that edge is in the graph, since it is how an eager package
``__init__`` turns two harmless imports into a cycle (``gpucell.catalog.kserve_runtimes`` -> ``gpucell.spec.versions``
ran ``gpucell/spec/__init__.py``, which imported the workload specs, which imported
``gpucell.catalog.kserve_runtimes`` back).
Decisions: docs/decisions/0019-standalone-components.md, docs/decisions/0033-the-tree-as-the-architecture.md.
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

Folder = tuple[str, tuple[str, ...]]
"""A concept folder (or a module at the top of ``gpucell/``): its name and the module patterns it holds."""

LAYERS: tuple[tuple[Folder, ...], ...] = (
    (("lazy inits", LAZY_INITS),),
    (("errors", ("gpucell.errors",)),),
    (("catalog", ("gpucell.catalog", "gpucell.catalog.*")),),
    (("part specs", ("gpucell.spec.*",)),),
    (("admission", ("gpucell.admission", "gpucell.admission.*")),),
    (("cell spec", ("gpucell.spec.cell",)),),
    (("cluster handle", ("gpucell.cluster", "gpucell._component")),),
    (("k3s", ("gpucell.k3s", "gpucell.k3s.*")), ("components", ("gpucell.components", "gpucell.components.*"))),
    (("platform", ("gpucell.platform",)),),
    (("day2", ("gpucell.day2", "gpucell.day2.*")),),
    (("cell", ("gpucell.cell",)),),
    (("tenancy", ("gpucell.tenancy", "gpucell.tenancy.*")),),
    (("workloads", ("gpucell.workloads.*",)),),
    (("package", ("gpucell.package", "gpucell.package.*")), ("engine", ("gpucell.engine", "gpucell.engine.*"))),
    (("test kit", ("gpucell.testing",)),),
    (("stacks", ("gpucell.stacks", "gpucell.stacks.*")),),
)
"""The folders of ``gpucell/`` in layer order, lowest first (docs/decisions/0033-the-tree-as-the-architecture.md).
A module belongs to the folder of its most specific matching pattern (a name without ``*`` first, then the longest),
so ``gpucell.spec.cell`` is the cell spec while the other ``gpucell.spec.*`` are part specs. A module may import its
own folder and the layers below; folders of one layer are siblings that never import each other (the platform
components do not know how k3s built the nodes; the component package and the plan engine are unrelated). Type-only
imports (under ``TYPE_CHECKING``) are not imports at run time and are counted apart. The lazy package inits come
first: they import nothing at run time, and their type-only imports are their public names."""


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


def _specificity(pattern: str) -> tuple[bool, int]:
    return "*" not in pattern, len(pattern)


@cache
def home(module: str) -> tuple[int, str]:
    """The layer (index in :data:`LAYERS`) and folder of ``module``: its most specific matching pattern's."""
    found = [
        (_specificity(pattern), rank, name)
        for rank, folders in enumerate(LAYERS)
        for name, patterns in folders
        for pattern in patterns
        if fnmatch.fnmatchcase(module, pattern)
    ]
    if not found:
        raise AssertionError(f"{module} is in no layer")
    _, rank, name = max(found)
    return rank, name


def upward(edges: dict[str, frozenset[str]]) -> list[str]:
    """``a (folder) -> b (folder)`` for every import of a higher layer's module or of a sibling folder's (a lazy init's
    re-exports aside)."""
    found = []
    for module, targets in edges.items():
        if module in LAZY_INITS:
            continue
        rank, folder = home(module)
        for target in targets:
            target_rank, target_folder = home(target)
            if target_rank > rank or (target_rank == rank and target_folder != folder):
                found.append(f"{module} ({folder}) -> {target} ({target_folder})")
    return sorted(found)


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
        "gpucell.errors (errors) -> gpucell.cell (cell)"
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
    parts = [m for m in MODULES if home(m)[1] == "part specs"]
    assert {"gpucell.spec.pools", "gpucell.spec.nodes", "gpucell.spec.platform"} <= set(parts)
    outside = {t for m in parts for t in graph(run_time=False)[m] if home(t)[0] > home(m)[0]}
    assert outside == set()  # not even for annotations


def test_every_folder_holds_a_module_and_every_module_a_folder() -> None:
    # A folder no module matches is a stale rule (a typo, a folder renamed): it would check nothing.
    homes = {module: home(module) for module in MODULES}  # home() fails on a module in no folder
    empty = [name for folders in LAYERS for name, _ in folders if name not in {folder for _, folder in homes.values()}]
    assert empty == []
    assert homes["gpucell.spec.cell"] == (5, "cell spec")
    assert homes["gpucell.spec.pools"][1] == "part specs"
    assert homes["gpucell.components.cilium"][1] == "components"
    assert homes["gpucell.engine.mock_engine"][1] == "engine"


def test_at_most_eight_modules_at_the_top() -> None:
    top = sorted(path.name for path in (REPO / "gpucell").glob("*.py"))
    assert top == ["__init__.py", "_component.py", "cell.py", "cluster.py", "errors.py", "platform.py", "testing.py"]


def test_the_concept_folders_inits_import_nothing() -> None:
    # Each is one paragraph (what lives here, what it may import), no re-exports: a module has one import path.
    inits = [m for m in MODULES if MODULES[m].name == "__init__.py" and m not in LAZY_INITS]
    assert "gpucell.components" in inits
    assert {init: graph(run_time=False)[init] for init in inits} == dict.fromkeys(inits, frozenset())
    assert all(ast.get_docstring(ast.parse(MODULES[init].read_text())) for init in inits)


def test_the_engine_imports_nothing_else_of_gpucell() -> None:
    engine = [m for m in MODULES if home(m)[1] == "engine"]
    assert {t for m in engine for t in graph(run_time=False)[m] if home(t)[1] != "engine"} == set()


def test_a_component_reaching_for_the_engine_or_k3s_fails_the_layers() -> None:
    # The probe of issue 28: KEDA importing the SDK adapter passed every structure test while one layer held the
    # components, the test kit and the stacks. A component importing k3s's scripts is a sibling import.
    probed = dict(graph(run_time=True))
    probed["gpucell.components.keda"] = probed["gpucell.components.keda"] | {
        "gpucell.engine._sdk_private",
        "gpucell.engine",
    }
    probed["gpucell.components.kubevirt"] = probed["gpucell.components.kubevirt"] | {"gpucell.k3s.vgpu_sriov"}
    assert upward(probed) == [
        "gpucell.components.keda (components) -> gpucell.engine (engine)",
        "gpucell.components.keda (components) -> gpucell.engine._sdk_private (engine)",
        "gpucell.components.kubevirt (components) -> gpucell.k3s.vgpu_sriov (k3s)",
    ]


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
