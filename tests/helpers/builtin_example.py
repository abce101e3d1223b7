"""The bundled example (examples/calc) with fix_power_assoc graded by ``builtin:pytest``: the change to commit
on its eval tree. Used by the attack suite and the report-site test, which need a built-in grader's
FAIL_TO_PASS and PASS_TO_PASS ids on the example."""

from __future__ import annotations

import json
from pathlib import Path

HIDDEN_TEST = "tests/test_power_hidden.py"
EXAMPLE_GRADE = '  grade: "python3 {eval_dir}/grade.py grade --contract {run_dir}"'
EXAMPLE_ORACLE = '  oracle: "python3 {eval_dir}/grade.py oracle --contract {run_dir}"'
FAIL_TO_PASS = [
    f"{HIDDEN_TEST}::test_the_tree_of_a_chained_power_nests_to_the_right",
    f"{HIDDEN_TEST}::test_a_unary_minus_exponent_is_parsed",
]
PASS_TO_PASS = ["tests/test_evaluator.py::test_variables_shadow_constants"]


def manifest_with(repo: Path, *replacements: tuple[str, str]) -> str:
    """The example's manifest with each (old, new) line replaced (each old line must be there)."""
    text = (repo / ".agent-eval" / "repo-eval.yaml").read_text()
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new)
    return text


def builtin_change(repo: Path) -> dict[str, str | None]:
    """The files to commit (None: delete) so fix_power_assoc is graded by builtin:pytest: its hidden tests
    as a test patch (tests/test_power_hidden.py), the oracle as ``oracle_patch``, :data:`FAIL_TO_PASS` and
    :data:`PASS_TO_PASS`; the other tasks are removed (their graders are the example's own)."""
    tasks = repo / ".agent-eval" / "tasks"
    hidden = (tasks / "fix_power_assoc" / "hidden_tests" / "test_power.py").read_text().splitlines(True)
    patch = (
        f"diff --git a/{HIDDEN_TEST} b/{HIDDEN_TEST}\nnew file mode 100644\n--- /dev/null\n"
        f"+++ b/{HIDDEN_TEST}\n@@ -0,0 +1,{len(hidden)} @@\n" + "".join("+" + line for line in hidden)
    )
    task = json.loads((tasks / "fix_power_assoc" / "task.json").read_text())
    task.update(
        grader="builtin:pytest",
        test_patch="tests.patch",
        oracle_patch="oracle.patch",
        fail_to_pass=FAIL_TO_PASS,
        pass_to_pass=PASS_TO_PASS,
    )
    manifest = manifest_with(
        repo, (EXAMPLE_GRADE, "  grade: builtin:pytest"), (EXAMPLE_ORACLE, "  oracle: builtin:oracle")
    )
    change: dict[str, str | None] = {
        ".agent-eval/repo-eval.yaml": manifest,
        ".agent-eval/tasks/fix_power_assoc/task.json": json.dumps(task, indent=2) + "\n",
        ".agent-eval/tasks/fix_power_assoc/tests.patch": patch,
    }
    for other in ("feature_variables", "review_cache", "test_division_by_zero"):
        for path in sorted((tasks / other).rglob("*")):
            if path.is_file():
                change[path.relative_to(repo).as_posix()] = None
    return change
