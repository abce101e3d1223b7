"""The built-in graders' pure parts, with literal data: the verdict, JUnit ids, which paths are tests, the
paths a patch names, and how the host turns ``builtin:...`` into the grade container's argv."""

from __future__ import annotations

from pathlib import Path

import pytest

from dokimi.errors import UsageError
from dokimi.repo.builtin_graders import builtin_argv, builtin_problem
from dokimi.support.builtin_grade import (
    GradeError,
    import_roots,
    is_test_path,
    junit_outcomes,
    patch_paths,
    run_process,
    verdict,
)


def test_pass_needs_every_fail_to_pass_id_passing_and_no_pass_to_pass_id_broken() -> None:
    outcomes = {"t::a": "passed", "t::b": "passed", "t::c": "failed"}
    assert verdict(outcomes, ["t::a"], ["t::b"])[0] is True
    ok, metrics, details = verdict(outcomes, ["t::a"], ["t::b", "t::c", "t::gone"])
    assert not ok and metrics["pass_to_pass_broken"] == 2
    assert details["pass_to_pass_broken"] == {"t::c": "failed", "t::gone": "not run"}
    assert verdict(None, ["t::a"], [])[0] is False  # no report: nothing passed


def test_a_junit_case_answers_to_its_pytest_node_id_and_discovery_records_one_id(tmp_path: Path) -> None:
    report = tmp_path / "r.xml"
    report.write_text(
        '<testsuites><testsuite><testcase classname="tests.test_ops" name="test_add"/>'
        '<testcase classname="tests.test_ops.TestX" name="test_y"><failure/></testcase>'
        '<testcase classname="tests.test_ops" name="test_z"><skipped/></testcase></testsuite></testsuites>'
    )
    outcomes = junit_outcomes(report)
    assert outcomes["tests/test_ops.py::test_add"] == "passed"
    assert outcomes["tests.test_ops::test_add"] == "passed"
    assert outcomes["tests/test_ops.py::TestX::test_y"] == "failed"
    assert outcomes["tests/test_ops.py::test_z"] == "skipped"
    assert junit_outcomes(report, aliases=False) == {
        "tests.test_ops::test_add": "passed",
        "tests.test_ops.TestX::test_y": "failed",
        "tests.test_ops::test_z": "skipped",
    }


@pytest.mark.parametrize(
    ("path", "test"),
    [
        ("tests/test_a.py", True), ("pkg/tests/helpers.py", True), ("a_test.py", True), ("conftest.py", True),
        ("src/pkg/conftest.py", True), ("pytest.ini", True), ("pkg/testing.py", False), ("pkg/mod.py", False),
        ("contest.py", False),
    ],
)  # fmt: skip
def test_which_paths_are_tests(path: str, test: bool) -> None:
    assert is_test_path(path) is test


def test_the_paths_a_patch_names() -> None:
    patch = (
        b"diff --git a/tests/t.py b/tests/t.py\n--- a/tests/t.py\n+++ b/tests/t.py\n@@ -1 +1 @@\n-x\n+y\n"
        b"diff --git a/new.py b/new.py\nnew file mode 100644\n--- /dev/null\n+++ b/new.py\n"
        b"@@ -0,0 +1 @@\n+z\n"
    )
    assert patch_paths(patch) == {"tests/t.py", "new.py"}


def test_builtins_become_the_support_script_under_an_isolated_interpreter() -> None:
    values = {"eval_dir": "/eval/content", "run_dir": "/eval/run", "task": "t1"}
    argv = builtin_argv(
        "builtin:command make test OUT={run_dir}/x J={report}", "grade", task="t1", values=values
    )
    assert argv[:3] == ["python3", "-I", "/eval/support/builtin_grade.py"]
    # {run_dir} is the container path; {report} is left to the script, which picks an unpredictable path
    assert argv[-6:] == ["command", "--", "make", "test", "OUT=/eval/run/x", "J={report}"]
    assert builtin_problem("builtin:pytest --x", "grade") == "builtin:pytest takes no arguments"
    with pytest.raises(UsageError, match="did you mean builtin:pytest"):
        builtin_argv("builtin:pytset", "grade", task="t1", values=values)


def test_the_import_roots_are_each_projects_src_and_directory_nearest_first_then_the_root(
    tmp_path: Path,
) -> None:
    for path in (
        "python/pyproject.toml",
        "python/src/pkg/__init__.py",
        "python/tests/test_a.py",
        "setup.cfg",
        "src/top/__init__.py",
        "lib/src/__init__.py",
        "lib/setup.py",
        "lib/t/test_b.py",
    ):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    roots = import_roots(tmp_path, ["python/tests/test_a.py::test_x", "lib/t/test_b.py", "../outside.py"])
    shown = [str(Path(r).relative_to(tmp_path)) for r in roots]
    # lib/src is a package (it has __init__.py), not a src layout: only lib itself
    assert shown == ["python/src", "python", "lib", "src", "."]


def test_a_command_the_image_lacks_is_a_grader_error_not_a_traceback(tmp_path: Path) -> None:
    with pytest.raises(GradeError, match="cannot run 'no-such-tool-here' in the image"):
        run_process(["no-such-tool-here", "test"], cwd=tmp_path, env={}, stdin="")
