"""The --json documents of repo run (repo_run.v1) and repo regrade (repo_regrade.v1): built by the library,
registered with `dokimi schema`, and valid against their models. Literal data, no docker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dokimi.batch import CellKey
from dokimi.grading.gate import GateVerdict, grader_failure
from dokimi.grading.grade import GradedCell
from dokimi.grading.regrade import Mismatch, RegradedCell, RegradeReport, regrade_document
from dokimi.runner.cell import AgentRun, CellOutcome, build_result
from dokimi.runner.run import BatchRun, run_summary
from dokimi.schemas import SCHEMAS, model_for
from dokimi.schemas.batch import BatchPin
from dokimi.schemas.task import Task

TASK = Task.model_validate({"id": "t1", "family": "fix", "base": "b" * 40, "prompt": "p", "grader": "g"})
PIN = BatchPin.model_validate(
    {
        "schema": "repo_batch.v1",
        "manifest_id": "calc",
        "source": "/src/calc@HEAD",
        "tree": "a" * 40,
        "eval_dir_digest": "sha256:e",
        "image": "dokimi/calc:" + "a" * 40,
        "image_pin": "tree",
        "image_context_digest": "sha256:c",
        "created_by": "0.1.0",
    }
)


def outcome(
    rep: int, status: Any, verdict: GateVerdict | None = None, error: str | None = None
) -> CellOutcome:
    key = CellKey("t1", "guidance:raw", "m", None, rep)
    result = None
    if verdict is not None:
        result = build_result(
            key, TASK, GradedCell(verdict, {}), AgentRun(0, False, 1.0),
            harness="claude-code", harness_version="2.1.328", agent_network=None, base_date=None,
        )  # fmt: skip
    return CellOutcome(key, status, result=result, error=error)


def test_run_json_is_a_registered_repo_run_document_with_one_group_per_cell_dimension() -> None:
    run = BatchRun(
        root=Path("/runs/b"), pin=PIN, harness="claude-code", harness_version="2.1.328", image=PIN.image,
        outcomes=[
            outcome(0, "finished", GateVerdict(True, True, None, {"pass": True})),
            outcome(1, "skipped", grader_failure(TASK, "grade exited 3")),
            outcome(2, "failed", error="patch does not apply"),
            outcome(3, "not_started"),
        ],
        spent_usd=1.5, stopped_by_budget=True,
    )  # fmt: skip
    doc = run_summary(run)
    data = doc.model_dump(mode="json", by_alias=True)
    assert data["schema"] == "repo_run.v1" and SCHEMAS["repo_run.v1"].endswith(":RunSummary")
    model_for("repo_run.v1").model_validate(data)
    assert (data["ran"], data["skipped"], data["failed"], data["not_started"]) == (1, 1, 1, 1)
    assert data["complete"] is False and data["stopped_by_budget"] is True
    (group,) = data["groups"]
    assert (group["effort"], group["passed"], group["graded"], group["grader_failures"]) == (
        "default",
        1,
        2,
        1,
    )
    assert data["failures"] == [{"cell": "t1/guidance_raw/m/default/rep2", "error": "patch does not apply"}]


def test_a_score_only_task_shows_its_mean_score_never_a_pass_count(capsys: Any) -> None:
    """A score-only cell has no gate verdict: the run's summary gives its score, never "pass 0/1"."""
    from dokimi.cli.run import _print_table

    review = Task.model_validate(
        {"id": "t1", "family": "review", "base": "b" * 40, "prompt": "p", "grader": "g",
         "score": {"metric": "recall", "max": 1.0}}
    )  # fmt: skip
    key = CellKey("t1", "guidance:raw", "m", None, 0)
    verdict = GateVerdict(False, None, 1.0, {})
    result = build_result(
        key, review, GradedCell(verdict, {"recall": 1.0}), AgentRun(0, False, 1.0),
        harness="claude-code", harness_version="2.1.328", agent_network=None, base_date=None,
    )  # fmt: skip
    run = BatchRun(
        Path("/runs/b"), PIN, "claude-code", "2.1.328", PIN.image, [CellOutcome(key, "finished", result)]
    )
    (group,) = run_summary(run).groups
    assert (group.passed, group.graded, group.scored, group.score_mean) == (0, 0, 1, 1.0)
    _print_table(run)
    printed = capsys.readouterr().out
    assert "score 1" in printed and "0/1" not in printed


def test_regrade_json_is_a_registered_repo_regrade_document_naming_what_moved() -> None:
    report = RegradeReport(Path("/runs/b"), 2, 7, 5)
    report.cells = [
        RegradedCell("t1/guidance_raw/m/default/rep0"),
        RegradedCell("t1/guidance_raw/m/default/rep1", mismatches=[Mismatch("metric:noise", 0.25, 0.5)]),
    ]
    data = regrade_document(report).model_dump(mode="json", by_alias=True)
    assert data["schema"] == "repo_regrade.v1" and SCHEMAS["repo_regrade.v1"].endswith(":RegradeDoc")
    model_for("repo_regrade.v1").model_validate(data)
    assert (data["sample"], data["seed"], data["finished"], data["regraded"], data["mismatched"]) == (
        2,
        7,
        5,
        2,
        1,
    )
    assert data["cells"][1]["mismatches"] == [{"what": "metric:noise", "original": 0.25, "regraded": 0.5}]
    assert [c["matches"] for c in data["cells"]] == [True, False]
