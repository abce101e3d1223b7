"""Scope, test integrity and the merge outcome: one test per rule, on literal diffs."""

from __future__ import annotations

import pytest

from dokimi.checks.merge.diff import ChangedFile, WorkspaceDiff
from dokimi.checks.merge.integrity import TESTS_BLOCKER_ID, check_test_integrity
from dokimi.checks.merge.judge import ItemVerdict, JudgeVerdict
from dokimi.checks.merge.outcome import explain_merge, merge_outcome
from dokimi.checks.merge.scope import check_scope
from dokimi.schemas import manifest as manifest_schema
from dokimi.schemas.rubric import Scope
from dokimi.schemas.task import GateMin

SHA = "0" * 40


def change(status: str, path: str, added: int = 1, deleted: int = 0) -> ChangedFile:
    return ChangedFile(
        status=status,  # type: ignore[arg-type]
        old_path=None if status == "A" else path,
        new_path=None if status == "D" else path,
        added=added,
        deleted=deleted,
    )


def diff_of(*files: ChangedFile, ignored: tuple[str, ...] = ()) -> WorkspaceDiff:
    return WorkspaceDiff(SHA, tuple(files), "", ignored_created=ignored, ignored_measured=True)


SCOPE = Scope(
    allowed_globs=["src/**", "docs/*.md"], denied_globs=["src/vendor/**"], max_changed_lines=10, max_files=3
)
TESTS = manifest_schema.TestsBlock(globs=["tests/**"], config_globs=["**/conftest.py", "**/pytest.ini"])


# --- scope ------------------------------------------------------------------------------------------------


def test_a_path_outside_allowed_globs_fails_scope() -> None:
    verdict = check_scope(diff_of(change("M", "src/a.py"), change("A", "setup.py")), SCOPE)
    assert not verdict.passed and verdict.outside_allowed == ["setup.py"]


def test_star_does_not_cross_a_slash_in_allowed_globs() -> None:
    verdict = check_scope(diff_of(change("A", "docs/deep/x.md")), SCOPE)
    assert verdict.outside_allowed == ["docs/deep/x.md"]


def test_the_old_path_of_a_move_out_of_a_denied_directory_fails_scope() -> None:
    moved = diff_of(change("D", "src/vendor/lib.c"), change("A", "src/lib.c"))
    verdict = check_scope(moved, SCOPE)
    assert verdict.denied == ["src/vendor/lib.c"] and not verdict.passed


def test_an_ignored_file_created_under_a_denied_glob_fails_but_other_build_output_does_not() -> None:
    verdict = check_scope(diff_of(ignored=("build/out.o", "src/vendor/gen.h")), SCOPE)
    assert verdict.denied_ignored == ["src/vendor/gen.h"]
    assert verdict.outside_allowed == []


def test_more_changed_lines_than_the_limit_fails_scope() -> None:
    verdict = check_scope(diff_of(change("M", "src/a.py", added=8, deleted=3)), SCOPE)
    assert not verdict.passed and "11 changed lines" in verdict.problems[0]


def test_more_files_than_the_limit_fails_scope_and_a_move_counts_twice() -> None:
    files = [
        change("D", "src/a.py"),
        change("A", "src/b.py"),
        change("M", "src/c.py"),
        change("M", "src/d.py"),
    ]
    verdict = check_scope(diff_of(*files), SCOPE)
    assert verdict.files == 4 and not verdict.passed


def test_a_change_inside_scope_passes() -> None:
    assert check_scope(diff_of(change("M", "src/a.py")), SCOPE).passed


# --- test integrity ---------------------------------------------------------------------------------------


def test_deleting_a_test_file_fails_integrity() -> None:
    verdict = check_test_integrity(diff_of(change("D", "tests/test_a.py")), TESTS)
    assert not verdict.passed and verdict.deleted_tests == ["tests/test_a.py"]


def test_moving_a_test_config_file_is_a_deletion_and_fails() -> None:
    verdict = check_test_integrity(diff_of(change("D", "conftest.py"), change("A", "old/conftest.py")), TESTS)
    assert verdict.deleted_tests == ["conftest.py"]


def test_a_config_edit_is_not_failed_but_gives_the_judge_the_fixed_blocker() -> None:
    verdict = check_test_integrity(diff_of(change("A", "conftest.py"), change("M", "src/a.py")), TESTS)
    assert verdict.passed
    assert verdict.config_changed == ["conftest.py"]
    assert [b.id for b in verdict.judge_blockers] == [TESTS_BLOCKER_ID]
    assert "does not disable or narrow any test" in verdict.judge_blockers[0].criterion


def test_adding_a_new_test_file_needs_no_judge_blocker() -> None:
    verdict = check_test_integrity(diff_of(change("A", "tests/test_new.py")), TESTS)
    assert verdict.passed and verdict.judge_blockers == []


def test_more_tests_skipped_than_the_oracle_fails() -> None:
    verdict = check_test_integrity(diff_of(), TESTS, tests_skipped=3, oracle_tests_skipped=1)
    assert not verdict.passed and "oracle run skipped 1" in verdict.problems[0]
    same = check_test_integrity(diff_of(), TESTS, tests_skipped=1, oracle_tests_skipped=1)
    assert same.passed


def test_a_test_case_in_the_base_list_missing_from_the_agents_fails() -> None:
    verdict = check_test_integrity(
        diff_of(), TESTS, base_tests=["t::a", "t::b"], agent_tests=["t::a", "t::c"]
    )
    assert verdict.removed_cases == ["t::b"] and not verdict.passed


def test_tests_list_failing_on_the_agents_workspace_after_listing_the_base_fails() -> None:
    verdict = check_test_integrity(
        diff_of(), TESTS, base_tests=["t::a"], agent_tests=None, agent_tests_failure="tests.list exited 2"
    )
    assert not verdict.passed and verdict.measured["removed_cases"] is True
    assert verdict.problems == [
        "tests.list lists the base but failed on the agent's workspace: tests.list exited 2"
    ]
    unlisted_base = check_test_integrity(diff_of(), TESTS, agent_tests_failure="tests.list exited 2")
    assert unlisted_base.passed and unlisted_base.measured["removed_cases"] is False


def test_the_printed_test_ids_are_lines_stripped_sorted_and_unique() -> None:
    from dokimi.grading.testlist import parse_test_ids, tests_list_argv

    assert parse_test_ids("t::b\n\n  t::a  \nt::b\r\n") == ["t::a", "t::b"]
    assert tests_list_argv("python3 {eval_dir}/list.py --task {task} 'a b'", task="t1") == [
        "python3",
        "/eval/content/list.py",
        "--task",
        "t1",
        "a b",
    ]


def test_missing_inputs_are_not_measured_rather_than_failed() -> None:
    verdict = check_test_integrity(diff_of(change("D", "tests/x.py")), None, tests_skipped=5)
    assert verdict.passed
    assert verdict.measured == {"deleted_tests": False, "skipped": False, "removed_cases": False}


# --- merge outcome ----------------------------------------------------------------------------------------


def judged(*items: tuple[str, str, str, float]) -> JudgeVerdict:
    return JudgeVerdict(
        model="claude-sonnet-4-5",
        items=tuple(ItemVerdict(i, kind, verdict, "r", weight) for i, kind, verdict, weight in items),  # type: ignore[arg-type]
    )


GOOD = judged(
    ("B1", "blocker", "pass", 1), ("N1", "non_blocker", "pass", 3), ("N2", "non_blocker", "fail", 1)
)
IN_SCOPE = check_scope(diff_of(change("M", "src/a.py")), SCOPE)
INTACT = check_test_integrity(diff_of(), TESTS)


def test_mergeable_when_everything_holds_and_merge_score_is_the_weighted_share() -> None:
    out = merge_outcome(
        {"pass": True, "strict_pass": True}, ["strict_pass", "mergeable"], IN_SCOPE, INTACT, GOOD
    )
    assert out == {"mergeable": True, "merge_score": 0.75}


def test_a_failing_gate_entry_other_than_mergeable_makes_it_not_mergeable_with_score_0() -> None:
    out = merge_outcome(
        {"pass": True, "strict_pass": False}, ["strict_pass", "mergeable"], IN_SCOPE, INTACT, GOOD
    )
    assert out == {"mergeable": False, "merge_score": 0.0}


def test_a_numeric_gate_entry_below_its_min_makes_it_not_mergeable() -> None:
    gate = [GateMin(metric="speedup", min=1.1), "mergeable"]
    out = merge_outcome({"pass": True, "speedup": 1.0}, gate, IN_SCOPE, INTACT, GOOD)
    assert out["mergeable"] is False


def test_pass_false_is_not_mergeable() -> None:
    assert merge_outcome({"pass": False}, ["pass"], IN_SCOPE, INTACT, GOOD)["mergeable"] is False


def test_a_failing_blocker_is_not_mergeable() -> None:
    bad = judged(("B1", "blocker", "fail", 1), ("N1", "non_blocker", "pass", 1))
    outcome = explain_merge({"pass": True}, ["pass"], IN_SCOPE, INTACT, bad)
    assert outcome.mergeable is False and outcome.reasons == ["blocker B1 fails"]


def test_scope_or_integrity_failure_is_not_mergeable() -> None:
    out_of_scope = check_scope(diff_of(change("M", "setup.py")), SCOPE)
    assert merge_outcome({"pass": True}, ["pass"], out_of_scope, INTACT, GOOD)["mergeable"] is False
    broken = check_test_integrity(diff_of(change("D", "tests/t.py")), TESTS)
    assert merge_outcome({"pass": True}, ["pass"], IN_SCOPE, broken, GOOD)["mergeable"] is False


def test_a_task_without_a_rubric_reports_null_never_false() -> None:
    assert merge_outcome({"pass": True}, ["pass"], None, None, None, has_rubric=False) == {
        "mergeable": None,
        "merge_score": None,
    }


def test_a_judge_failure_is_not_measured_unless_something_deterministic_already_fails() -> None:
    failed = JudgeVerdict(model="claude-sonnet-4-5", failure="the reply does not cover B1")
    assert merge_outcome({"pass": True}, ["pass"], IN_SCOPE, INTACT, failed)["mergeable"] is None
    assert merge_outcome({"pass": False}, ["pass"], IN_SCOPE, INTACT, failed)["mergeable"] is False


def test_a_grade_claiming_framework_metrics_is_refused() -> None:
    with pytest.raises(ValueError, match="grader failure"):
        merge_outcome({"pass": True, "mergeable": True}, ["pass"], IN_SCOPE, INTACT, GOOD)
