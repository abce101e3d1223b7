"""The floors of docs/architecture.md hold: no module imports from a floor above its own.

The table is read from docs/architecture.md itself, so the page and the code cannot drift apart. Imports under
``if TYPE_CHECKING:`` are not counted (they never run); imports inside functions are.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import dokimi

PACKAGE = Path(dokimi.__file__).resolve().parent
DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
ROW = re.compile(r"^\|\s*(\d+)\s*\|[^|]*\|([^|]*)\|")


def floors() -> dict[str, int]:
    """Top-level module (``grading``, ``report``, ...) -> its floor, from the page's table."""
    table: dict[str, int] = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        match = ROW.match(line)
        if match:
            for name in re.findall(r"`([\w.]+)`", match.group(2)):
                table[name] = int(match.group(1))
    return table


def top_level(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "dokimi":
        return None
    return parts[1] if len(parts) > 1 else "dokimi"


def runtime_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, imported module) of every import that runs, the TYPE_CHECKING blocks left out."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "dokimi":
                found += [(node.lineno, f"dokimi.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, node.module))
    return found


def module_of(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def violations(package: Path, table: dict[str, int]) -> list[str]:
    found: list[str] = []
    for path in sorted(package.rglob("*.py")):
        source = top_level(module_of(path, package))
        assert source is not None
        if source not in table:
            found.append(f"{path.relative_to(package)}: `{source}` has no floor in docs/architecture.md")
            continue
        for line, imported in runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
            target = top_level(imported)
            if target is None or target == source or target not in table:
                continue
            if table[target] > table[source]:
                found.append(
                    f"{path.relative_to(package)}:{line}: {source} (floor {table[source]}) imports "
                    f"{imported} (floor {table[target]})"
                )
    return found


def test_the_table_names_every_module_of_the_package_once() -> None:
    table = floors()
    assert {"rundir", "repo", "checks", "grading", "runner", "analysis", "cli"} <= set(table)
    assert (
        table["rundir"]
        < table["repo"]
        < table["checks"]
        < table["grading"]
        < table["runner"]
        < table["analysis"]
        < table["cli"]
    )
    modules = {p.stem for p in PACKAGE.glob("*.py")} | {
        p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()
    }
    modules = {m.replace("__init__", "dokimi") for m in modules} - {"__pycache__"}
    assert modules - set(table) == set(), "add each module to the table of docs/architecture.md"


@pytest.mark.slow
def test_no_module_imports_from_a_floor_above_its_own() -> None:
    assert violations(PACKAGE, floors()) == []


def test_an_import_from_a_higher_floor_is_caught(tmp_path: Path) -> None:
    """grading importing the runner (the cycle runner <-> perf once was) breaks the floors."""
    table = floors()
    fake = tmp_path / "dokimi"
    (fake / "grading").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "grading" / "__init__.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from dokimi.analysis.report import x\n"
        "def f():\n    from dokimi.runner.cell import run_cell\n"
    )
    assert violations(fake, table) == [
        "grading/__init__.py:5: grading (floor 4) imports dokimi.runner.cell (floor 5)"
    ]
