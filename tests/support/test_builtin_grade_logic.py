"""The built-in graders' pure parts, with literal data: the verdict, JUnit ids, which paths are tests, the
paths a patch names, and how the host turns ``builtin:...`` into the grade container's argv."""

from __future__ import annotations

from pathlib import Path

import pytest

from dokimi.errors import UsageError
from dokimi.repo.builtin_graders import (
    MAX_IDS_IN_DETAILS,
    builtin_argv,
    builtin_problem,
    builtin_tests_argv,
    junit_outcomes,
    named_test_outcomes,
    verdict,
)
from dokimi.support.builtin_grade import import_roots, is_test_path, patch_paths


def test_pass_needs_every_fail_to_pass_id_passing_and_no_pass_to_pass_id_broken() -> None:
    outcomes = {"t::a": "passed", "t::b": "passed", "t::c": "failed"}
    assert verdict(outcomes, ["t::a"], ["t::b"])[0] is True
    ok, metrics, details = verdict(outcomes, ["t::a"], ["t::b", "t::c", "t::gone"])
    assert not ok and metrics["pass_to_pass_broken"] == 2
    assert details["pass_to_pass_broken"] == {"t::c": "failed", "t::gone": "not run"}
    assert verdict(None, ["t::a"], [])[0] is False  # no report: nothing passed


def test_a_junit_case_answers_to_its_pytest_node_id_and_discovery_records_one_id() -> None:
    report = (
        b'<testsuites><testsuite><testcase classname="tests.test_ops" name="test_add"/>'
        b'<testcase classname="tests.test_ops.TestX" name="test_y"><failure/></testcase>'
        b'<testcase classname="tests.test_ops" name="test_z"><skipped/></testcase></testsuite></testsuites>'
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


def test_builtins_become_a_prepare_step_and_a_test_run_under_an_isolated_interpreter() -> None:
    command = "builtin:command make test OUT={run_dir}/x T={task} J={report}"
    argv = builtin_argv(command, "grade", task="t1")
    assert argv[:4] == ["python3", "-I", "/eval/support/builtin_grade.py", "prepare"]
    assert argv[-4:] == ["--out", "/eval/run/builtin-tests", "--uses-report", "command"]
    run = builtin_tests_argv(command, task="t1", targets=[])
    # the test container: {run_dir} and {task} substituted; {report} is replaced there by its report path
    assert run[:4] == ["python3", "-I", "/eval/support/builtin_grade.py", "command"]
    assert run[4:] == [
        "--report",
        "/eval/out/report.xml",
        "--",
        "make",
        "test",
        "OUT=/eval/run/x",
        "T=t1",
        "J={report}",
    ]
    pytest_run = builtin_tests_argv("builtin:pytest", task="t1", targets=["tests/t.py::a"])
    assert pytest_run[:4] == ["python3", "-I", "-B", "/eval/support/pytest_stream.py"]
    assert pytest_run[-2:] == ["--", "tests/t.py::a"]
    assert "takes only -p NAME" in (builtin_problem("builtin:pytest --x", "grade") or "")
    assert builtin_problem("builtin:pytest -p asyncio -p timeout", "grade") is None
    plugins = builtin_tests_argv("builtin:pytest -p asyncio", task="t1", targets=["t.py"], roots=["src", "."])
    assert plugins[-8:] == [
        "--path", "/eval/run/workspace/src", "--path", "/eval/run/workspace", "-p", "asyncio", "--", "t.py",
    ]  # fmt: skip
    problem = builtin_problem("builtin:command make -C {eval_dir}", "grade")
    assert (
        problem is not None and "{eval_dir} is not mounted where a built-in grader runs its tests" in problem
    )
    with pytest.raises(UsageError, match="did you mean builtin:pytest"):
        builtin_argv("builtin:pytset", "grade", task="t1")


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


def test_named_test_outcomes_read_back_every_listed_id_from_the_verdict() -> None:
    f2p, p2p = ["t::a", "t::b"], ["t::c", "t::d", "t::e"]
    task = {"fail_to_pass": f2p, "pass_to_pass": p2p}
    ok, metrics, details = verdict(
        {"t::a": "passed", "t::b": "failed", "t::c": "passed", "t::d": "passed"}, f2p, p2p
    )
    grade = {"pass": ok, "metrics": metrics, "details": details, "errors": []}
    assert named_test_outcomes(task, grade) == [
        ("FAIL_TO_PASS", "t::a", "passed"),
        ("FAIL_TO_PASS", "t::b", "failed"),
        ("PASS_TO_PASS", "t::c", "passed"),
        ("PASS_TO_PASS", "t::d", "passed"),
        ("PASS_TO_PASS", "t::e", "not run"),
    ]


def test_named_test_outcomes_never_guess_past_the_listed_ids_or_after_a_grader_failure() -> None:
    many = [f"t::x{i}" for i in range(MAX_IDS_IN_DETAILS + 5)]
    ok, metrics, details = verdict({}, many, [])
    grade = {"pass": ok, "metrics": metrics, "details": details, "errors": []}
    found = named_test_outcomes({"fail_to_pass": many}, grade)
    assert [o for _, _, o in found[:MAX_IDS_IN_DETAILS]] == ["not run"] * MAX_IDS_IN_DETAILS
    assert all(o.startswith("unknown") for _, _, o in found[MAX_IDS_IN_DETAILS:])
    failed = {"pass": None, "metrics": {}, "details": {}, "errors": ["no report"]}
    assert {o for _, _, o in named_test_outcomes({"fail_to_pass": many}, failed)} == {
        "not run (the grader failed)"
    }
    assert named_test_outcomes({"fail_to_pass": ["t::a"]}, None) == [
        ("FAIL_TO_PASS", "t::a", "not graded (no grade.json)")
    ]
