"""No import circle in dokimi: among its modules, and among the packages at its root.

An import inside a function counts (it runs, just later), an import under ``if TYPE_CHECKING:`` does not (it
never runs). Importing ``dokimi.a.b`` also runs ``dokimi/a/__init__.py``, so it ties the importer to that
package's ``__init__`` too (except when the importer lives inside the package: the package is initialised
already). The floors of docs/architecture.md order the packages (tests/architecture/test_layers.py); this
test keeps each floor free of circles as well, down to the single module.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

import dokimi

PACKAGE = Path(dokimi.__file__).resolve().parent


def module_names(package: Path) -> dict[str, Path]:
    """Dotted name -> file, for every module of the package (a package's name is its ``__init__.py``)."""
    names: dict[str, Path] = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    return skipped


def imported_names(module: str, path: Path) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of every import that runs: ``from a import b`` gives ``a.b`` (b may be a name)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _type_checking_nodes(tree)
    here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here[: len(here) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


def _owner(name: str, modules: Mapping[str, Path]) -> str | None:
    """The longest module of the package that ``name`` names or lies in."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(package: Path) -> dict[str, dict[str, int]]:
    """Module -> {module it imports: first line}; the packages whose ``__init__`` the import runs included."""
    modules = module_names(package)
    graph: dict[str, dict[str, int]] = {name: {} for name in modules}
    for module, path in modules.items():
        for line, name in imported_names(module, path):
            target = _owner(name, modules)
            if target is None:
                continue
            parts = target.split(".")
            for depth in range(2, len(parts) + 1):
                step = ".".join(parts[:depth])
                if step != module and not module.startswith(step + "."):
                    graph[module].setdefault(step, line)
    return graph


def circles(graph: Mapping[str, Mapping[str, object]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def package_graph(graph: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    """The same imports between the packages and modules at the package's root (``dokimi.gateway``, ...)."""

    def root(name: str) -> str:
        return ".".join(name.split(".")[:2])

    rooms: dict[str, dict[str, int]] = {}
    for module, targets in graph.items():
        for target in targets:
            if root(target) != root(module):
                rooms.setdefault(root(module), {}).setdefault(root(target), 0)
    return rooms


def describe(circle: list[str], graph: Mapping[str, Mapping[str, int]], package: Path) -> str:
    modules = module_names(package)
    ties = [
        f"{modules[a].relative_to(package.parent)}:{graph[a][b]} imports {b}"
        for a in circle
        for b in circle
        if b in graph.get(a, {})
    ]
    return "circle " + " <-> ".join(circle) + ":\n  " + "\n  ".join(ties)


@pytest.mark.slow
def test_no_module_is_in_an_import_circle() -> None:
    graph = import_graph(PACKAGE)
    assert [describe(c, graph, PACKAGE) for c in circles(graph)] == []


@pytest.mark.slow
def test_no_package_at_the_root_is_in_an_import_circle() -> None:
    rooms = package_graph(import_graph(PACKAGE))
    assert circles(rooms) == []


def test_a_circle_through_a_function_level_import_or_a_package_init_is_found(tmp_path: Path) -> None:
    fake = tmp_path / "dokimi"
    (fake / "a").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "a" / "__init__.py").write_text("from dokimi.a.x import X\n")
    (fake / "a" / "x.py").write_text("X = 1\ndef f():\n    from dokimi.b import Y\n")
    (fake / "a" / "y.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from dokimi.b import Y\n"
    )
    (fake / "b.py").write_text("from dokimi.a.y import Z\n")
    graph = import_graph(fake)
    assert circles(graph) == [["dokimi.a", "dokimi.a.x", "dokimi.b"]]
    assert circles(package_graph(graph)) == [["dokimi.a", "dokimi.b"]]
    assert "dokimi.b" not in graph["dokimi.a.y"]


def _is_reason(line: str) -> bool:
    """A comment that says something (not a ``noqa``, ``type:`` or ``fmt:`` pragma)."""
    _, hash_, text = line.partition("#")
    text = text.strip()
    return bool(hash_ and text) and not text.startswith(("noqa", "type:", "fmt:", "pragma"))


def _import_runs(tree: ast.AST) -> Iterator[list[ast.Import | ast.ImportFrom]]:
    """Consecutive import statements inside a function body (or a block of it), TYPE_CHECKING left out."""
    skipped = _type_checking_nodes(tree)
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    blocks: dict[int, list[ast.stmt]] = {}
    for function in functions:
        for node in ast.walk(function):
            for field in ("body", "orelse", "finalbody"):
                block = getattr(node, field, None)
                if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                    blocks[id(block)] = block
            if isinstance(node, ast.ExceptHandler):
                blocks[id(node.body)] = node.body
    for block in blocks.values():
        run: list[ast.Import | ast.ImportFrom] = []
        for statement in [*block, None]:
            if isinstance(statement, ast.Import | ast.ImportFrom) and id(statement) not in skipped:
                run.append(statement)
                continue
            if run:
                yield run
            run = []


def unexplained_imports(package: Path) -> list[str]:
    """Function-level imports with no reason: a comment on the import's lines, on the line above a run of
    imports, or after the ``try:`` / ``except ...:`` that opens it."""
    found: list[str] = []
    for path in sorted(package.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for run in _import_runs(ast.parse("\n".join(lines))):
            above = lines[run[0].lineno - 2] if run[0].lineno > 1 else ""
            opener = above.strip().startswith("#") or above.partition("#")[0].rstrip().endswith(":")
            if opener and _is_reason(above):
                continue
            for statement in run:
                if not any(_is_reason(line) for line in lines[statement.lineno - 1 : statement.end_lineno]):
                    where = f"{path.relative_to(package.parent)}:{statement.lineno}"
                    found.append(f"{where}: {lines[statement.lineno - 1].strip()}")
                    break
    return found


@pytest.mark.slow
def test_every_function_level_import_says_why_it_is_not_at_the_top() -> None:
    """An import inside a function hides an arrow from a reader; it stays only for a start-up cost that
    bench/bench_cli_start.py or the lean scan shows (or an optional extra, or a platform), and says which."""
    assert unexplained_imports(PACKAGE) == []


def test_a_function_level_import_without_a_reason_is_found(tmp_path: Path) -> None:
    fake = tmp_path / "dokimi"
    fake.mkdir()
    (fake / "m.py").write_text(
        "def f():\n    import json\n    return json\n"
        "def g():\n    # numpy costs a start 0.1 s\n    import numpy\n    import scipy\n    return numpy\n"
        "def h():\n    import re  # noqa: F401\n"
        "def i():\n    try:  # POSIX only\n        import fcntl\n    except ImportError:\n        pass\n"
    )
    assert unexplained_imports(fake) == [
        "dokimi/m.py:2: import json",
        "dokimi/m.py:10: import re  # noqa: F401",
    ]
