"""repo validate on agent modes: a task's own gate that contradicts its mode, an autonomous task that is not
an issue, the agent's own tests that can never be measured, and the review keys (decoys, clean_diff_of)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dokimi.checks.validate import validate_repo
from dokimi.source import open_source
from tests.checks.test_validate import MANIFEST, Repo, one, only, run

WITH_TESTS = MANIFEST + 'tests:\n  globs: ["tests/**"]\n  run: "python3 -m pytest -q {tests}"\n'
REVIEW_PATCH = """\
diff --git a/src/a.py b/src/a.py
--- a/src/a.py
+++ b/src/a.py
@@ -1 +1,2 @@
 a = 1
+b = a / 0
"""


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo(tmp_path / "repo")


def review_task(repo: Repo, task_id: str, **extra: Any) -> dict[str, Any]:
    return repo.task(
        task_id, **{"mode": "review", "review_patch": "review.patch", "prompt": "review HEAD", **extra}
    )


def review_files(*task_ids: str) -> dict[str, str | bytes | None]:
    return {f".agent-eval/tasks/{t}/review.patch": REVIEW_PATCH for t in task_ids}


def test_a_task_with_its_modes_rule_and_what_the_rule_needs_is_valid(repo: Repo) -> None:
    decoy = {"id": "D1", "path": "src/a.py", "lines": [2, 2], "why": "the division is the point"}
    tasks = {
        "fix": repo.task("fix", mode="autonomous"),
        "rev": review_task(repo, "rev", decoys=[decoy], score={"metric": "recall", "max": 1.0}),
        "rev_clean": review_task(repo, "rev_clean", clean_diff_of="rev"),
    }
    rubric = json.dumps(
        {"schema": "repo_rubric.v1", "task": "fix", "intent": "fixed", "scope": {"allowed_globs": ["**"]},
         "blockers": [{"id": "B1", "criterion": "fixed", "rationale": "the task", "evidence": "src/a.py:1"}],
         "non_blockers": [], "hack_report": {"lazy_solution": "none", "alt_valid_solution": "none"}}
    )  # fmt: skip
    repo.add_eval(WITH_TESTS, tasks, files={**review_files("rev", "rev_clean"),
                                            ".agent-eval/tasks/fix/rubric.json": rubric})  # fmt: skip
    report = run(repo)
    assert [f.text() for f in [*report.errors, *report.warnings]] == []


@pytest.mark.parametrize(
    ("mode", "gate", "fragment"),
    [
        ("autonomous", ["pass", "mergeable"], "leaves out own_tests_fail_on_base, which the autonomous"),
        ("interactive", ["pass"], "leaves out mergeable, which the interactive success rule holds"),
        ("interactive", ["mergeable"], "leaves out pass (or another test verdict of the grader)"),
        ("review", ["pass", "mergeable"], "names mergeable, which a review task does not measure"),
        (
            "autonomous",
            ["pass", "mergeable", "own_tests_fail_on_base", "no_blocking_finding"],
            "names no_blocking",
        ),
    ],
)
def test_a_gate_that_contradicts_the_mode_is_a_warning(
    repo: Repo, mode: str, gate: list[str], fragment: str
) -> None:
    repo.add_eval(WITH_TESTS, {"t1": repo.task("t1", mode=mode, gate=gate)})
    report = run(repo)
    assert report.valid
    finding = one(report, "gate_fits_mode", "warning")
    assert finding.key == "gate" and fragment in finding.message, finding.message


def test_a_gate_naming_another_test_verdict_fits_the_interactive_rule(repo: Repo) -> None:
    repo.add_eval(WITH_TESTS, {"t1": repo.task("t1", mode="interactive", gate=["strict_pass", "mergeable"])})
    assert only(run(repo), "gate_fits_mode", "warning") == []


def test_an_autonomous_task_whose_prompt_is_a_spec_is_a_warning(repo: Repo) -> None:
    repo.add_eval(WITH_TESTS, {"t1": repo.task("t1", mode="autonomous", prompt_style="spec")})
    finding = one(run(repo), "autonomous_prompt_is_an_issue", "warning")
    assert finding.key == "prompt_style" and "issue as filed" in finding.message


def test_the_modes_rule_naming_mergeable_without_a_rubric_is_a_warning_at_mode(repo: Repo) -> None:
    repo.add_eval(WITH_TESTS, {"t1": repo.task("t1", mode="interactive")})
    finding = one(run(repo), "mergeable_gate_has_rubric", "warning")
    assert finding.key == "mode" and "the interactive success rule names mergeable" in finding.message


def test_own_tests_without_tests_run_are_never_measured(repo: Repo) -> None:
    repo.add_eval(MANIFEST, {"t1": repo.task("t1", mode="autonomous")})
    finding = one(run(repo), "own_tests_measurable", "warning")
    assert "never measured and the task never passes" in finding.message and finding.key == "mode"


@pytest.mark.parametrize(
    ("run_command", "fragment", "severity"),
    [
        ("python3 -m pytest --files={tests}", "does not name {tests} as a word of its own", "error"),
        ("python3 -m pytest {tests} --root {eval_dir}", "unknown placeholder {eval_dir}", "error"),
    ],
)
def test_tests_run_names_its_files_as_a_word_and_no_other_placeholder(
    repo: Repo, run_command: str, fragment: str, severity: str
) -> None:
    manifest = MANIFEST + f'tests:\n  globs: ["tests/**"]\n  run: "{run_command}"\n'
    repo.add_eval(manifest)
    report = run(repo)
    assert any(fragment in f.message and f.key == "tests.run" for f in report.errors), report.errors


def test_tests_run_without_globs_is_a_warning(repo: Repo) -> None:
    repo.add_eval(MANIFEST + 'tests:\n  run: "python3 -m pytest -q {tests}"\n')
    finding = one(run(repo), "tests_block", "warning")
    assert "cannot tell which files of a change are its tests" in finding.message


def test_review_keys_belong_to_a_review_task_with_a_review_patch(repo: Repo) -> None:
    decoy = {"id": "D1", "path": "src/a.py", "lines": [2, 2], "why": "fine"}
    repo.add_eval(WITH_TESTS, {"t1": repo.task("t1", decoys=[decoy])})
    report = run(repo)
    assert one(report, "review_task_keys", "warning").message.startswith("decoys belong")
    assert "without review_patch" in one(report, "review_task_keys").message


def test_a_decoy_outside_the_diff_under_review_is_a_warning(repo: Repo) -> None:
    decoy = {"id": "D1", "path": "src/b.py", "lines": [1, 1], "why": "fine"}
    repo.add_eval(WITH_TESTS, {"t1": review_task(repo, "t1", decoys=[decoy])}, files=review_files("t1"))
    finding = one(run(repo), "review_task_keys", "warning")
    assert (
        finding.key == "decoys[0].path" and "src/b.py is not a file review.patch changes" in finding.message
    )


def test_a_decoy_with_its_lines_reversed_is_refused(repo: Repo) -> None:
    decoy = {"id": "D1", "path": "src/a.py", "lines": [3, 2], "why": "fine"}
    repo.add_eval(WITH_TESTS, {"t1": review_task(repo, "t1", decoys=[decoy])}, files=review_files("t1"))
    assert any("first line comes after the last" in f.message for f in run(repo).errors)


def test_clean_diff_of_names_a_review_task_of_the_same_base_and_prompt(repo: Repo) -> None:
    tasks = {
        "rev": review_task(repo, "rev", score={"metric": "recall", "max": 1.0}),
        "clean": review_task(
            repo, "clean", clean_diff_of="rev", base=repo.c1, prompt="review HEAD, it is fine"
        ),
        "self": review_task(repo, "self", clean_diff_of="self"),
        "lost": review_task(repo, "lost", clean_diff_of="nowhere"),
    }
    repo.add_eval(WITH_TESTS, tasks, files=review_files(*tasks))
    report = run(repo)
    warnings = {f.task: f.message for f in only(report, "review_task_keys", "warning")}
    errors = {f.task: f.message for f in only(report, "review_task_keys")}
    assert errors["self"] == "names the task itself"
    assert errors["lost"].startswith("no task 'nowhere' (tasks: clean, lost, rev, self)")
    assert "the clean diff is another change" in warnings["clean"] or "prompt differs" in warnings["clean"]
    clean = [f.message for f in only(report, "review_task_keys", "warning") if f.task == "clean"]
    assert len(clean) == 2 and any("can tell which diff is the clean one" in m for m in clean)


def test_the_bundled_example_validates_clean(example: Path) -> None:
    with open_source(f"{example}@HEAD") as opened:
        report = validate_repo(opened, manifest=".agent-eval/repo-eval.yaml")
    assert report.valid and report.warnings == [], [f.text() for f in report.warnings]
    assert report.tasks == 7
