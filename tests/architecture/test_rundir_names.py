"""Every file and directory name of a run directory, a batch and an eval dir is spelled in dokimi.rundir only.

A literal such as ``"grade.json"`` or ``"_eval"`` anywhere else in the package is a second spelling that can
drift from the first; use the constant (``rundir.GRADE_JSON``) or a path helper (``RunDir``, ``BatchLayout``,
``task_dir``). Not checked: docstrings, f-strings (a message that names a file), the document registry of
dokimi.schemas (document names, not paths) and dokimi/support (scripts that run inside containers with the
standard library only).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import dokimi
from dokimi import rundir

PACKAGE = Path(dokimi.__file__).resolve().parent
EXEMPT = ("rundir.py", "schemas/", "support/")


def layout_names() -> set[str]:
    """The distinctive names of the layout (a word such as ``home`` or ``out`` is too common to police)."""
    values = {v for k, v in vars(rundir).items() if k.isupper() and isinstance(v, str)}
    return {v for v in values if any(c in v for c in "._-")} | {rundir.WORKSPACE}


def literals(path: Path, names: set[str], root: Path = PACKAGE) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            skip.update(id(child) for child in ast.walk(node))
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant):
                skip.add(id(body[0].value))
    return [
        f"{path.relative_to(root)}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in names and id(node) not in skip
    ]


@pytest.mark.slow
def test_every_run_directory_name_is_spelled_in_rundir_only() -> None:
    names = layout_names()
    assert {"grade.json", "result.json", "_eval", "merge.json", "workspace"} <= names
    found = [
        hit
        for path in sorted(PACKAGE.rglob("*.py"))
        if not path.relative_to(PACKAGE).as_posix().startswith(EXEMPT)
        for hit in literals(path, names)
    ]
    assert found == [], "use the constants of dokimi.rundir:\n" + "\n".join(found)


def test_the_check_sees_a_second_spelling(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text('RESULT = "result.json"\nDOC = f"{RESULT} and grade.json"\n', encoding="utf-8")
    assert literals(planted, layout_names(), tmp_path) == ["planted.py:1: 'result.json'"]


#: Names of the eval dir's task directories too (tasks/<id>/task.json) or of a scratch directory
#: (static.json), joined there by hand; every other run-directory name is reached through RunDir only.
SHARED = ("TASK_JSON", "STATIC_JSON")


def run_dir_names() -> set[str]:
    """The constants RunDir has a property for: ``RunDir.grade_json`` is ``GRADE_JSON``."""
    return {
        name
        for name in dir(rundir.RunDir)
        if isinstance(getattr(rundir.RunDir, name), property) and hasattr(rundir, name.upper())
    }


def hand_joins(path: Path, names: set[str], root: Path = PACKAGE) -> list[str]:
    """``something / GRADE_JSON``: a run directory's path joined by hand instead of through RunDir."""
    source = path.read_text(encoding="utf-8")
    return [
        f"{path.relative_to(root)}:{node.lineno}: {ast.get_source_segment(source, node)}"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Div)
        and isinstance(node.right, ast.Name)
        and node.right.id.lower() in names
        and node.right.id not in SHARED
    ]


def test_every_run_directory_path_goes_through_rundir() -> None:
    names = run_dir_names()
    assert {"grade_json", "result_json", "workspace", "merge_json", "agent_home"} <= names
    found = [
        hit
        for path in sorted(PACKAGE.rglob("*.py"))
        if not path.relative_to(PACKAGE).as_posix().startswith(EXEMPT)
        for hit in hand_joins(path, names)
    ]
    assert found == [], "use RunDir(run_dir).<name> (dokimi.rundir):\n" + "\n".join(found)


def test_a_hand_join_is_seen(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("a = run_dir / GRADE_JSON\nb = RunDir(run_dir).grade_json\nc = task / TASK_JSON\n")
    assert hand_joins(planted, run_dir_names(), tmp_path) == ["planted.py:1: run_dir / GRADE_JSON"]
