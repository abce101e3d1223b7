"""No function outside dokimi/cli takes more than 8 parameters.

A long parameter list is a value that has no name yet: group what travels together into a frozen dataclass
(GradeEnvironment, ContainerSettings, CellFacts, AgentRequest, Placement, WorkspaceSource, ...). cli/ is
exempt: click passes every option of a command as a parameter. ``self`` and ``cls`` do not count; ``*args``
and ``**kwargs`` count one each.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import dokimi

PACKAGE = Path(dokimi.__file__).resolve().parent
MAX_PARAMETERS = 8


def parameter_count(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    args = node.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    count = len(names) + (args.vararg is not None) + (args.kwarg is not None)
    return count - (1 if names and names[0] in ("self", "cls") else 0)


def long_signatures(package: Path) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        if rel.parts[0] == "cli":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                count = parameter_count(node)
                if count > MAX_PARAMETERS:
                    found.append(f"{rel}:{node.lineno}: {node.name} takes {count} parameters")
    return found


@pytest.mark.slow
def test_no_function_outside_cli_takes_more_than_eight_parameters() -> None:
    assert long_signatures(PACKAGE) == []


def test_a_long_signature_is_found_and_self_is_not_counted(tmp_path: Path) -> None:
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "run.py").write_text("def run(a, b, c, d, e, f, g, h, i, j): ...\n")
    (tmp_path / "mod.py").write_text(
        "class C:\n    def ok(self, a, b, c, d, e, f, g, h): ...\n"
        "def bad(a, b, c, d, e, f, g, *, h, i): ...\n"
        "def worse(a, *args, b, c, d, e, f, g, **kw): ...\n"
    )
    assert long_signatures(tmp_path) == [
        "mod.py:3: bad takes 9 parameters",
        "mod.py:4: worse takes 9 parameters",
    ]
