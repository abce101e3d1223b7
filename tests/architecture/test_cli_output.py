"""Every command prints through the few helpers that show control characters as escapes
(dokimi.cli._common.echo, note, emit_json, print_above; dokimi.cli.tables.print_lines; dokimi.cli.main.say):
no other ``click.echo``, ``print``, ``sys.stdout.write`` or rich ``console.print`` in ``dokimi.cli``, so text
an agent or a repository wrote never reaches a terminal raw (tests/test_terminal_output.py shows it does not).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import dokimi

CLI = Path(dokimi.__file__).resolve().parent / "cli"

#: (file, function) -> why it may write to a stream itself
ALLOWED = {
    ("_common.py", "emit_json"): "JSON with every control character as an escape (json_safe)",
    ("_common.py", "echo"): "the helper: escape_controls, then click.echo",
    ("_common.py", "print_above"): "the helper over a progress bar: escaped, markup off",
    ("tables.py", "print_lines"): "the helper for tables: escape_controls, then dokimi's own colour marks",
    ("main.py", "say"): "errors: escape_controls",
    ("scan_lean.py", "run_scan"): "dump_document (json_safe), SARIF (ASCII), render_text (escaped fields)",
    ("scan_lean.py", "note"): "escape_controls (the lean scan does not import click)",
    ("schema.py", "schema"): "a JSON Schema dokimi generated from its own models",
}


def _writes(node: ast.Call) -> str | None:
    """What ``node`` writes with, when it writes to a stream."""
    func = node.func
    if isinstance(func, ast.Name) and func.id == "print":
        return "print"
    if isinstance(func, ast.Attribute):
        text = ast.unparse(func)
        if text in ("click.echo", "click.secho", "sys.stdout.write", "sys.stderr.write"):
            return text
        if func.attr == "print":
            return text
    return None


@pytest.mark.slow
def test_no_command_prints_except_through_the_escaping_helpers() -> None:
    found = []
    for path in sorted(CLI.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Call) and _writes(node) and (path.name, function.name) not in ALLOWED:
                    found.append(f"{path.name}:{node.lineno} {function.name}: {_writes(node)}")
    assert found == [], "print through dokimi.cli._common.echo (or note, emit_json, print_lines)"
    assert len({name for name, _ in ALLOWED}) == 5
