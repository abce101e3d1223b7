"""repo validate's checks of team review rules and perf objects (agent-modes §3, §4), on real git
repositories: review_rules.json validates, a house:R13 citation names a confirmed blocker-eligible rule, the
leak guard warns for a task based before cut_date, a task's perf object is well formed with an entry point."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dokimi.checks.validate import RULES, Finding, ValidationReport, validate_repo
from dokimi.source import open_source
from tests.helpers.git import commit, git_repo

EVAL = ".agent-eval"
EARLY = "2026-01-10T12:00:00+00:00"
LATE = "2026-04-10T12:00:00+00:00"
CUT = "2026-03-29"

MANIFEST = """\
schema: repo_manifest.v1
id: demo
eval_dir: .agent-eval
guidance:
  globs: ["**/AGENTS.md"]
entry_points:
  grade: "python3 {eval_dir}/run.py grade --contract {run_dir}"
  oracle: "python3 {eval_dir}/run.py oracle --contract {run_dir}"
tasks: .agent-eval/tasks
"""
PERF_LINE = '  perf: "python3 {eval_dir}/bench.py --variant {variant} --out {out}"\n'


def rule(rid: str, *, prs: int = 5, reviewers: int = 3, status: str = "confirmed") -> dict[str, Any]:
    return {
        "id": rid,
        "rule": f"rule {rid}",
        "paths": ["**"],
        "prs": prs,
        "reviewers": reviewers,
        "written_in": None,
        "status": status,
        "evidence": [],
    }


RULES_DOC = {
    "schema": "repo_review_rules.v1",
    "cut_date": CUT,
    "rules": [rule("R13"), rule("R2", status="candidate"), rule("R3", prs=2), rule("R4", reviewers=1)],
}


def rubric(task: str, *evidence: str | list[str]) -> dict[str, Any]:
    return {
        "schema": "repo_rubric.v1",
        "task": task,
        "intent": "fix it",
        "scope": {"allowed_globs": ["src/**"]},
        "blockers": [
            {"id": f"B{i + 1}", "criterion": "c", "rationale": "r", "evidence": e}
            for i, e in enumerate(evidence)
        ],
        "hack_report": {"lazy_solution": "l", "alt_valid_solution": "a"},
    }


class Repo:
    """Code committed before the cut (EARLY) and after it (LATE); the eval directory added last."""

    def __init__(self, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.monkeypatch = monkeypatch
        with self.dated(EARLY):
            self.path = git_repo(path, {"AGENTS.md": "guidance\n", "src/a.py": "a = 1\n"})
            self.early = commit(self.path, "early", files={"src/b.py": "b = 1\n"})
        with self.dated(LATE):
            self.late = commit(self.path, "late", files={"src/c.py": "c = 1\n"})

    def dated(self, when: str) -> Any:
        monkeypatch = self.monkeypatch

        class _Dated:
            def __enter__(self) -> None:
                monkeypatch.setenv("GIT_COMMITTER_DATE", when)
                monkeypatch.setenv("GIT_AUTHOR_DATE", when)

            def __exit__(self, *exc: object) -> None:
                monkeypatch.delenv("GIT_COMMITTER_DATE")
                monkeypatch.delenv("GIT_AUTHOR_DATE")

        return _Dated()

    def task(self, task_id: str, base: str | None = None, **extra: Any) -> dict[str, Any]:
        return {
            "id": task_id,
            "family": "fix",
            "base": base or self.late,
            "prompt": "p",
            "grader": "g",
            **extra,
        }

    def add_eval(
        self,
        tasks: dict[str, dict[str, Any]],
        *,
        rubrics: dict[str, dict[str, Any]] | None = None,
        rules: dict[str, Any] | str | None = None,
        manifest: str = MANIFEST,
    ) -> None:
        files: dict[str, str] = {f"{EVAL}/repo-eval.yaml": manifest, f"{EVAL}/run.py": "print()\n"}
        for tid, data in tasks.items():
            files[f"{EVAL}/tasks/{tid}/task.json"] = json.dumps(data, indent=2)
        for tid, data in (rubrics or {}).items():
            files[f"{EVAL}/tasks/{tid}/rubric.json"] = json.dumps(data, indent=2)
        if rules is not None:
            files[f"{EVAL}/review_rules.json"] = (
                rules if isinstance(rules, str) else json.dumps(rules, indent=2)
            )
        commit(self.path, "add eval", files=files)

    def validate(self) -> ValidationReport:
        with open_source(str(self.path)) as opened:
            return validate_repo(opened, manifest=f"{EVAL}/repo-eval.yaml")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Repo]:
    yield Repo(tmp_path / "repo", monkeypatch)


def found(report: ValidationReport, code: str, severity: str = "error") -> list[Finding]:
    return [f for f in (report.errors if severity == "error" else report.warnings) if f.code == code]


def test_the_new_checks_are_named_rules_that_run_after_the_others() -> None:
    names = [r.__name__ for r in RULES]
    assert names[-5:] == [
        "check_review_rules_file",
        "check_house_citations",
        "check_review_rules_cut_date",
        "check_review_threads",
        "check_perf_task_key",
    ]


def test_a_citation_of_a_confirmed_eligible_rule_after_the_cut_is_valid(repo: Repo) -> None:
    repo.add_eval(
        {"t1": repo.task("t1")}, rubrics={"t1": rubric("t1", "house:R13", ["https://x/1"])}, rules=RULES_DOC
    )
    report = repo.validate()
    assert report.valid, [f.text() for f in report.errors]
    assert [f.code for f in report.warnings] == ["review_rules_file"]  # R4, not cited, from one reviewer


@pytest.mark.slow
@pytest.mark.parametrize(
    ("cited", "fragment"),
    [
        ("house:R99", "which review_rules.json does not define"),
        ("house:R2", "whose status is candidate, not confirmed"),
        ("house:R3", "seen on 2 PRs from 3 reviewers; a blocker needs >= 3 PRs from >= 2 reviewers"),
        ("house:R4", "seen on 5 PRs from 1 reviewers"),
    ],
)
def test_a_citation_must_name_an_existing_confirmed_blocker_eligible_rule(
    repo: Repo, cited: str, fragment: str
) -> None:
    repo.add_eval(
        {"t1": repo.task("t1")},
        rubrics={"t1": rubric("t1", "https://x/1", ["a.py:3", cited])},
        rules=RULES_DOC,
    )
    (finding,) = found(repo.validate(), "house_citations")
    assert fragment in finding.message and finding.message.startswith("B2 cites")
    assert finding.file == f"{EVAL}/tasks/t1/rubric.json" and finding.task == "t1"
    assert finding.key == "blockers[1].evidence[1]" and finding.line is not None


@pytest.mark.slow
def test_a_citation_without_a_rules_file_is_an_error(repo: Repo) -> None:
    repo.add_eval({"t1": repo.task("t1")}, rubrics={"t1": rubric("t1", "house:R13")})
    (finding,) = found(repo.validate(), "house_citations")
    assert "no review_rules.json" in finding.message and finding.key == "blockers[0].evidence"


def test_a_malformed_rules_file_is_an_error_naming_its_key_and_citations_of_it_fail(repo: Repo) -> None:
    bad = json.loads(json.dumps(RULES_DOC))
    bad["rules"][0]["prs"] = -1
    repo.add_eval({"t1": repo.task("t1")}, rubrics={"t1": rubric("t1", "house:R13")}, rules=bad)
    report = repo.validate()
    (finding,) = found(report, "review_rules_file")
    assert finding.key == "rules[0].prs" and finding.file == f"{EVAL}/review_rules.json" and finding.line
    assert "does not validate" in found(report, "house_citations")[0].message


def test_a_rule_confirmed_from_one_reviewer_warns(repo: Repo) -> None:
    repo.add_eval({"t1": repo.task("t1")}, rules=RULES_DOC)
    (finding,) = found(repo.validate(), "review_rules_file", "warning")
    assert finding.message.startswith("R4: confirmed from 1 reviewer")
    assert finding.key == "rules[3].status" and finding.line is not None


def test_rules_scoring_a_task_based_before_the_cut_warn_with_the_leak(repo: Repo) -> None:
    repo.add_eval(
        {
            "early": repo.task("early", base=repo.early),
            "early_review": repo.task("early_review", base=repo.early, mode="review"),
            "early_plain": repo.task("early_plain", base=repo.early),
            "late": repo.task("late"),
        },
        rubrics={"early": rubric("early", "https://x/1"), "late": rubric("late", "https://x/1")},
        rules=RULES_DOC,
    )
    report = repo.validate()
    warned = found(report, "review_rules_cut_date", "warning")
    assert sorted(f.task or "" for f in warned) == ["early", "early_review"]  # early_plain gets no rules
    assert "committed on 2026-01-10, before the review rules' cut_date 2026-03-29" in warned[0].message
    assert warned[0].key == "base" and report.valid


def test_the_leak_guard_is_silent_without_a_rules_file(repo: Repo) -> None:
    repo.add_eval({"early": repo.task("early", base=repo.early)}, rubrics={"early": rubric("early", "u")})
    assert found(repo.validate(), "review_rules_cut_date", "warning") == []


@pytest.mark.slow
def test_a_well_formed_perf_object_with_an_entry_point_is_valid(repo: Repo) -> None:
    perf = {"metric": "time", "tolerance": 1.5, "sizes": [{"n": 10}, {"n": 100}]}
    repo.add_eval(
        {"t1": repo.task("t1", perf=perf)}, manifest=MANIFEST.replace("tasks: ", PERF_LINE + "tasks: ")
    )
    report = repo.validate()
    assert report.valid and found(report, "perf_task_key") == []


@pytest.mark.slow
def test_a_perf_object_needs_the_perf_entry_point_and_its_documented_keys(repo: Repo) -> None:
    perf = {"tolerance": 0.9, "rounds": 0}
    repo.add_eval({"t1": repo.task("t1", perf=perf)})
    keys = sorted(f.key or "" for f in found(repo.validate(), "perf_task_key"))
    assert keys == ["perf", "perf.metric", "perf.rounds", "perf.tolerance"]


@pytest.mark.slow
def test_a_review_threads_rules_are_rules_of_the_file(repo: Repo) -> None:
    threads = [{"id": "t1", "rules": ["R13"]}, {"id": "t2", "rules": ["R99"]}, {"id": "t3", "rules": []}]
    repo.add_eval({"r1": repo.task("r1", mode="review", threads=threads)}, rules=RULES_DOC)
    (finding,) = found(repo.validate(), "review_threads")
    assert (
        finding.key == "threads[1].rules[0]"
        and "R99, which review_rules.json does not define" in finding.message
    )


def test_a_thread_naming_a_rule_without_a_rules_file_is_an_error(repo: Repo) -> None:
    repo.add_eval({"r1": repo.task("r1", threads=[{"id": "t1", "rules": ["R1"]}])})
    (finding,) = found(repo.validate(), "review_threads")
    assert "no review_rules.json" in finding.message and finding.task == "r1"
