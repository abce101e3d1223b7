"""``repo rubric draft`` and ``repo rubric approve``: the drafter's inputs (never an agent's output), its
answer read as a draft rubric, and the maintainer's approval recorded in the rubric.

The end-to-end test drafts a rubric of the toy repository through the real Claude Code CLI against the
scripted model server, with the oracle entry point run in its container.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dokimi.checks.merge.draft import DraftError, DraftInputs, parse_draft, render_draft
from dokimi.errors import DocumentError
from dokimi.repo.rubrics import approve_rubric
from dokimi.schemas.review_rules import RepoReviewRules
from dokimi.schemas.rubric import DraftRecord, RepoRubric, content_digest, provisional, rubric_problems
from dokimi.schemas.task import Task
from dokimi.support.mockmodel import MockModelServer
from tests.helpers.evalrepo import MANIFEST_PATH, ORACLE_PATCH, make_eval_repo
from tests.helpers.git import commit

RECORD = DraftRecord(
    model="m-1", harness="claude-code", at="2026-01-01T00:00:00+00:00", inputs=["task prompt"]
)
DRAFT: dict[str, Any] = {
    "intent": "add() returns the sum of its arguments for every input",
    "scope": {"allowed_globs": ["app/**"], "denied_globs": [".agent-eval/**"], "max_changed_lines": 20},
    "blockers": [
        {"id": "B1", "criterion": "add returns a + b for every input", "rationale": "the bug",
         "evidence": ["app/calc.py:2"]},
        {"id": "B2", "criterion": "no test is changed", "rationale": "the tests are the contract",
         "evidence": ["house:R2"]},
    ],
    "non_blockers": [
        {"id": "N1", "criterion": "no comment narrates the change", "weight": 1},
        {"id": "N2", "criterion": "the function keeps its name", "weight": 1},
        {"id": "N3", "criterion": "no stray whitespace", "weight": 1},
    ],
    "hack_report": {"lazy_solution": "special-case add(2, 3)", "alt_valid_solution": "return sum((a, b))"},
    "lazy_diff": "diff --git a/app/calc.py b/app/calc.py\n--- a/app/calc.py\n+++ b/app/calc.py\n"
    "@@ -1,2 +1,4 @@\n def add(a, b):\n+    if (a, b) == (2, 3):\n+        return 5\n     return a - b\n",
}  # fmt: skip
RULES = RepoReviewRules.model_validate(
    {"schema": "repo_review_rules.v1", "cut_date": "2026-01-01",
     "rules": [{"id": "R2", "rule": "never edit a test to make it pass", "paths": ["app/**"], "prs": 5,
                "reviewers": 3, "written_in": None, "status": "confirmed"}]}
)  # fmt: skip


def inputs() -> DraftInputs:
    task = Task.model_validate(
        {"id": "fix_add", "family": "fix", "base": "a" * 40, "prompt": "Fix add.", "grader": "calc"}
    )
    guidance = {"AGENTS.md": "# toy\nRun the tests with python3 -m pytest.\n"}
    return DraftInputs(task, ORACLE_PATCH, "oracle.patch", guidance, RULES.rules)


def test_the_drafter_reads_the_task_the_oracle_the_guidance_and_the_rules_each_fenced() -> None:
    prompt, nonce = render_draft(inputs())
    for name, text in (("TASK", "Fix add."), ("ORACLE", ORACLE_PATCH), ("GUIDANCE", "Run the tests with")):
        begin, end = f"<<<{name}-{nonce} BEGIN>>>\n", f"<<<{name}-{nonce} END>>>\n"
        assert begin in prompt and end in prompt
        assert text in prompt.split(begin, 1)[1].split(end, 1)[0]
    assert "- R2 (applies to app/**): never edit a test to make it pass" in prompt
    assert (
        f"<<<RUBRIC-{nonce}>>>" in prompt and "2 to 5 blockers" in prompt and "3 to 6 non-blockers" in prompt
    )
    assert inputs().record() == [
        "task prompt", "oracle diff (oracle.patch)", "guidance AGENTS.md", "review rule R2"
    ]  # fmt: skip


def test_the_drafters_answer_becomes_a_draft_rubric_with_its_record_and_lazy_diff() -> None:
    answer = f"Here it is.\n<<<RUBRIC-n1>>>\n```json\n{json.dumps(DRAFT)}\n```\n"
    rubric, lazy = parse_draft(answer, "n1", "fix_add", RECORD)
    assert rubric.status == "draft" and provisional(rubric) and rubric.task == "fix_add"
    assert [b.id for b in rubric.blockers] == ["B1", "B2"] and rubric.drafted == RECORD
    assert (
        lazy is not None and lazy.startswith("diff --git") and rubric.calibration.lazy == ["calib/lazy.diff"]
    )


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("no marker at all", "no rubric marker line"),
        ("<<<RUBRIC-n1>>>\n{}\n<<<RUBRIC-n1>>>\n{}", "2 times the rubric marker"),
        ("<<<RUBRIC-n1>>>\nnot json", "no JSON object follows"),
        ("<<<RUBRIC-n1>>>\n" + json.dumps({**DRAFT, "status": "approved"}), "keys a rubric does not: status"),
        ("<<<RUBRIC-n1>>>\n" + json.dumps({**DRAFT, "blockers": [{"id": "B1"}]}), "blockers.0.criterion"),
        ("<<<RUBRIC-n1>>>\n" + json.dumps({**DRAFT, "lazy_diff": "just do less"}), "is not a git diff"),
    ],
)
def test_an_answer_that_is_not_a_rubric_is_a_draft_error(answer: str, message: str) -> None:
    with pytest.raises(DraftError, match=message):
        parse_draft(answer, "n1", "fix_add", RECORD)


def _write_draft(path: Path) -> None:
    rubric, _ = parse_draft("<<<RUBRIC-n1>>>\n" + json.dumps(DRAFT), "n1", "fix_add", RECORD)
    path.write_text(json.dumps(rubric.model_dump(mode="json", by_alias=True, exclude_none=True), indent=2))


def test_approval_is_recorded_and_an_edit_after_it_makes_the_rubric_provisional_again(tmp_path: Path) -> None:
    path = tmp_path / "rubric.json"
    _write_draft(path)
    when = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    approved = approve_rubric(path, by="ada", note="B2 reworded", now=when)
    assert not approved.already and approved.rubric.status == "approved" and not provisional(approved.rubric)
    on_disk = json.loads(path.read_text())
    record = {"by": "ada", "at": "2026-03-01T12:00:00+00:00", "digest": content_digest(approved.rubric)}
    assert on_disk["approval"] == {**record, "note": "B2 reworded"}
    assert on_disk["drafted"]["model"] == "m-1"  # the draft's record stays
    assert approve_rubric(path, by="bob").already  # approved as it reads: nothing rewritten
    assert json.loads(path.read_text())["approval"]["by"] == "ada"

    on_disk["blockers"][0]["criterion"] = "add returns a + b"
    path.write_text(json.dumps(on_disk))
    edited = RepoRubric.model_validate(on_disk)
    assert edited.status == "approved" and provisional(edited)
    assert any("edited since ada approved it" in p for p in rubric_problems(edited, task_id="fix_add"))
    again = approve_rubric(path, by="bob")
    assert not again.already and again.rubric.approval is not None and again.rubric.approval.by == "bob"
    assert not provisional(again.rubric)


def test_approving_nothing_or_a_broken_rubric_is_refused(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="does not exist"):
        approve_rubric(tmp_path / "rubric.json", by="ada")
    (tmp_path / "rubric.json").write_text('{"schema": "repo_rubric.v1", "task": "t"}')
    with pytest.raises(DocumentError):
        approve_rubric(tmp_path / "rubric.json", by="ada")


@pytest.mark.docker
@pytest.mark.harness
def test_repo_rubric_draft_writes_a_draft_from_the_oracle_guidance_and_rules_and_approve_records_it(
    docker_available: bool, claude_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dokimi.cli.app import cli

    repo, _, _ = make_eval_repo(tmp_path / "toy")
    commit(repo, "rules", files={".agent-eval/review_rules.json": RULES.model_dump_json(by_alias=True)})
    answer = "{{match:<<<RUBRIC-[0-9a-f]+>>>}}\n" + json.dumps(DRAFT)
    runner = CliRunner()
    args = ["repo", "rubric", "draft", "fix_add", "--model", "claude-haiku-4-5", "--bin", str(claude_bin),
            "-C", str(repo), "--manifest", MANIFEST_PATH, "--json"]  # fmt: skip
    with MockModelServer([{"final": answer}]) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "dokimi-test")
        result = runner.invoke(cli, args, standalone_mode=False)
        (sent,) = [r.raw.decode("utf-8") for r in server.requests if r.main_loop]
    assert result.exception is None, result.output
    summary = json.loads(result.output)
    assert summary["status"] == "draft" and summary["blockers"] == ["B1", "B2"]
    assert summary["inputs"] == [
        "task prompt", "oracle diff (oracle entry point)", "guidance AGENTS.md", "guidance app/AGENTS.md",
        "review rule R2",
    ]  # fmt: skip
    assert "+    return a + b" in sent  # the oracle entry point's change, made in its container
    assert "Run the tests with python3 -m pytest." in sent and "never edit a test to make it pass" in sent
    path = repo / ".agent-eval" / "tasks" / "fix_add" / "rubric.json"
    written = RepoRubric.model_validate(json.loads(path.read_text()))
    assert (
        written.status == "draft" and written.drafted is not None and written.drafted.harness == "claude-code"
    )
    assert (path.parent / "calib" / "lazy.diff").read_text().startswith("diff --git a/app/calc.py")

    refused = runner.invoke(cli, args, standalone_mode=False)  # the draft is never overwritten
    assert refused.exception is not None and "never overwrites a rubric" in str(refused.exception)

    approve = [
        "repo",
        "rubric",
        "approve",
        "fix_add",
        "--by",
        "ada",
        "-C",
        str(repo),
        "--manifest",
        MANIFEST_PATH,
    ]
    done = runner.invoke(cli, approve, standalone_mode=False)
    assert done.exception is None, done.output
    assert done.output.startswith(f"approved {path} by ada on ")
    assert json.loads(path.read_text())["status"] == "approved"
