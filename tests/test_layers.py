"""The layers of `mbb/`, checked honestly: every import counts — at module level, inside a
function, under `if TYPE_CHECKING:` — every module has a rank, a module imports only modules of
its rank or below, and the import graph has no cycle. An upward import is allowed only from
`ALLOWED_UPWARD`, each with its reason (it is empty). Tests of the test plant an upward import
inside a function and a cycle in a throwaway package and see both caught.

Ranks, bottom to top (ARCHITECTURE.md draws them): the core; the LLM layer and the execution
resource; test doubles and the task suite; the protocol's registries and pure rules; the
params schema; the engine (rule explanations, the run context, phases, mechanisms, the arena,
the workload); agents; analyses; figures; batch (the run builder, runners, reports); the CLI.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

import mbb

PACKAGE = Path(mbb.__file__).parent

# module prefix -> rank (the longest matching prefix wins); a module may import its rank or below
RANKS: dict[str, int] = {
    "mbb.core": 0,  # types, errors, events, board and scratch, registries' base, tables
    "mbb.llm": 1,  # endpoint configs, the provider and its wrappers, the request cache
    "mbb.resource": 1,  # the sandboxed execution resource
    "mbb.testing": 2,  # loopback OpenAI-compatible servers (test doubles that ship)
    "mbb.tasks": 2,  # the real-task suite, evaluator, harness, modeled catalogue
    "mbb.protocol.scheduling": 3,  # pure rules: aggregation, payment, schedulers, validation
    "mbb.protocol.rules": 3,  # the rule registry
    "mbb.protocol.history": 3,  # condensed histories of rounds and posts
    "mbb.params": 4,  # the schema of a condition (names registered things as strings)
    "mbb.protocol": 5,  # the engine: explanations, run context, phases, mechanisms, arena
    "mbb.tasks.workload": 5,  # who gets which task (reads the condition)
    "mbb.agents": 6,  # personas, modeled/oracle/LLM agents, their backend registry
    "mbb.analysis": 7,
    "mbb.viz": 8,
    "mbb.batch": 9,  # the run builder, runners, sweeps, studies, reports, viewer
    "mbb.cli": 10,
    "mbb": 10,  # the package's lazy public surface and __main__
}

# (importer, imported) pairs allowed to go upward, each with its reason. Empty on purpose.
ALLOWED_UPWARD: dict[tuple[str, str], str] = {}


def _modules(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package under `root`."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("")
        if "oracle" in rel.parts:  # the reference programs are standalone executables
            continue
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _kind(stack: list[ast.AST]) -> str:
    for node in stack:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return "TYPE_CHECKING"
    if any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) for n in stack):
        return "function"
    return "module"


def imports_of(root: Path, package: str) -> list[tuple[str, str, str, int]]:
    """Every import of a package module by a package module, wherever it stands: (importer,
    imported module, 'module' | 'function' | 'TYPE_CHECKING', line). `from a import b` names
    the submodule a.b when there is one, else the module a."""
    mods = _modules(root, package)
    edges = []
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"

        def visit(node: ast.AST, stack: list[ast.AST], mod: str = mod, is_pkg: bool = is_pkg):
            for child in ast.iter_child_nodes(node):
                targets: list[str] = []
                if isinstance(child, ast.Import):
                    targets = [a.name for a in child.names]
                elif isinstance(child, ast.ImportFrom):
                    base = child.module or ""
                    if child.level:  # relative: resolve against this module's package
                        pkg = mod.split(".") if is_pkg else mod.split(".")[:-1]
                        pkg = pkg[: len(pkg) - child.level + 1]
                        base = ".".join([*pkg, base] if base else pkg)
                    targets = [
                        f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                        for a in child.names
                    ]
                for t in targets:
                    if t == package or t.startswith(package + "."):
                        while t not in mods and "." in t:
                            t = t.rsplit(".", 1)[0]
                        edges.append((mod, t, _kind([*stack, child]), child.lineno))
                visit(child, [*stack, child])

        visit(ast.parse(path.read_text()), [])
    return edges


def rank_of(module: str, ranks: Mapping[str, int]) -> int:
    best = max((p for p in ranks if module == p or module.startswith(p + ".")), key=len)
    return ranks[best]


def upward(
    edges: Iterable[tuple[str, str, str, int]],
    ranks: Mapping[str, int],
    allowed: Mapping[tuple[str, str], str] = ALLOWED_UPWARD,
) -> list[str]:
    """Each import of a higher-ranked module that `allowed` does not list, as a line."""
    return [
        f"{a} (rank {rank_of(a, ranks)}) imports {b} (rank {rank_of(b, ranks)}) at line {n} "
        f"({kind})"
        for a, b, kind, n in edges
        if rank_of(b, ranks) > rank_of(a, ranks) and (a, b) not in allowed
    ]


def cycles(edges: Iterable[tuple[str, str, str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for a, b, _, _ in edges:
        if a != b:
            graph.setdefault(a, set()).add(b)
            graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for v in sorted(graph):
            if v not in index:
                connect(v)
    finally:
        sys.setrecursionlimit(limit)
    return found


EDGES = imports_of(PACKAGE, "mbb")


def test_every_module_has_a_rank() -> None:
    unranked = [
        m
        for m in _modules(PACKAGE, "mbb")
        if not any(m == p or m.startswith(p + ".") for p in RANKS)
    ]
    assert not unranked, unranked


def test_no_module_imports_above_its_rank_anywhere() -> None:
    problems = upward(EDGES, RANKS)
    assert not problems, "\n".join(problems)


def test_the_import_graph_has_no_cycle() -> None:
    assert not cycles(EDGES), cycles(EDGES)


def test_every_kind_of_import_is_read() -> None:
    kinds = {k for _, _, k, _ in EDGES}
    assert kinds == {"module", "function", "TYPE_CHECKING"}, kinds


# --- tests of the test: a throwaway package with a planted fault ----------------------------------
def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


PLANT_RANKS = {"pkg": 9, "pkg.low": 0, "pkg.high": 1}


def test_an_upward_import_inside_a_function_is_caught(tmp_path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "low/__init__.py": "",
            "low/a.py": "def f():\n    from pkg.high.b import g\n    return g\n",
            "high/__init__.py": "",
            "high/b.py": "from pkg.low import a\n\ndef g():\n    return a\n",
        },
    )
    found = upward(imports_of(root, "pkg"), PLANT_RANKS, allowed={})
    assert found == ["pkg.low.a (rank 0) imports pkg.high.b (rank 1) at line 2 (function)"]


def test_a_type_checking_import_upward_is_caught(tmp_path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "low/__init__.py": "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from pkg.high import b\n",
            "high/__init__.py": "",
            "high/b.py": "",
        },
    )
    found = upward(imports_of(root, "pkg"), PLANT_RANKS, allowed={})
    assert found == ["pkg.low (rank 0) imports pkg.high.b (rank 1) at line 3 (TYPE_CHECKING)"]


def test_a_cycle_within_one_rank_is_caught(tmp_path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "low/__init__.py": "",
            "low/a.py": "from . import b\n",
            "low/b.py": "def f():\n    from pkg.low.c import x\n    return x\n",
            "low/c.py": "from pkg.low.a import *  # noqa\nx = 1\n",
        },
    )
    edges = imports_of(root, "pkg")
    assert upward(edges, PLANT_RANKS, allowed={}) == []  # same rank: only the cycle shows it
    assert cycles(edges) == [["pkg.low.a", "pkg.low.b", "pkg.low.c"]]


@pytest.mark.parametrize("allowed", [{("pkg.low.a", "pkg.high.b"): "the reason"}])
def test_an_allowed_upward_import_needs_its_listed_reason(tmp_path, allowed) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "low/__init__.py": "",
            "low/a.py": "import pkg.high.b\n",
            "high/__init__.py": "",
            "high/b.py": "",
        },
    )
    edges = imports_of(root, "pkg")
    assert upward(edges, PLANT_RANKS, allowed=allowed) == []
    assert len(upward(edges, PLANT_RANKS, allowed={})) == 1
