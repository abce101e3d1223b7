"""Document models: the spec's own examples round-trip, bad values are refused with the key path, and the
rules the models carry (grade_problems, result consistency, rubric and review-rule warnings, rating) hold. The
committed schemas/ directory must equal a fresh export of the whole registry."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import BaseModel

from dokimi.errors import DocumentError
from dokimi.harness.traces import convert_file
from dokimi.schemas import SCHEMAS, model_for
from dokimi.schemas._base import JsonOverLimit, dump_document, load_json, read_document
from dokimi.schemas.events import CommandEvent, Event, ReadEvent, ToolEvent, parse_event, parse_events
from dokimi.schemas.export import export_all, schema_file_name, schema_text
from dokimi.schemas.grade import RepoGrade, grade_problems
from dokimi.schemas.meta import Meta
from dokimi.schemas.perf import RepoPerf
from dokimi.schemas.rating import (
    AdjudicatedRow,
    Outcome,
    RaterScore,
    adjudicator_rated_the_run,
    disagreements,
    leaked,
)
from dokimi.schemas.result import Result
from dokimi.schemas.review_rules import (
    RepoReviewRules,
    may_back_a_blocker,
    may_score_base,
    review_rules_problems,
    rules_for_diff,
)
from dokimi.schemas.rubric import RepoRubric, rubric_problems

ROOT = Path(__file__).resolve().parents[1]
TRACES = Path(__file__).parent / "resources" / "traces"

# ---- the spec's examples, copied verbatim ------------------------------------------------------------------

GRADE_EXAMPLE = """{
  "schema": "repo_grade.v1",
  "task": "fix_avx2_dispatch",
  "grader": "test_pass_files",
  "pass": true,
  "metrics": {"strict_pass": true, "regress_pass": true, "format_ok": false,
              "diff_lines": 14, "root_cause_fixed": true},
  "details": {"changed_files": ["cpp/daal/src/foo.cpp"]},
  "errors": []
}"""

EVENTS_EXAMPLE = """\
{"t": 12.4, "kind": "command", "text": "bazel test //cpp/...:x_host", "rc": 0}
{"t": 3.1,  "kind": "read",    "path": "AGENTS.md"}
{"t": 5.0,  "kind": "edit",    "path": "cpp/oneapi/dal/algo/kmeans/detail/foo.cpp"}
{"t": 20.2, "kind": "tool",    "name": "WebFetch", "denied": true}
{"t": 31.0, "kind": "command", "text": "bazel test :x", "rc": 1, "output": "ERROR: icpx is not found", "output_truncated": false}
"""  # noqa: E501  (verbatim from contract §4.1)

STATIC_EXAMPLE = """{"schema": "repo_static.v1",
 "claims": [{"file": "AGENTS.md", "line": 12, "status": "fail", "kind": "path",
             "claim": "cpp/daal/foo.h", "why": "no such file"}]}"""

REACH_RECORD = """{"file": "sub/AGENTS.md", "scenario": "cwd=.", "harness": "claude-code",
 "harness_version": "2.1.286", "model": "claude-haiku-4-5",
 "head": false, "tail": false, "read_by_tool": false, "class": "not_loaded"}"""

RUBRIC_EXAMPLE = """{
  "schema": "repo_rubric.v1",
  "task": "fix_df_fraction_gt1",
  "intent": "what the maintainer wants, including requirements the prompt only implies",
  "scope": {
    "allowed_globs": ["cpp/oneapi/dal/algo/decision_forest/**", "docs/**"],
    "denied_globs": [".ci/**", ".github/**"],
    "max_changed_lines": 200,
    "max_files": 8
  },
  "blockers": [
    {"id": "B1", "criterion": "binary and decidable from the diff and its context",
     "rationale": "why a reviewer would request changes", "evidence": "PR review URL or path:line"}
  ],
  "non_blockers": [
    {"id": "N1", "criterion": "...", "weight": 1, "rationale": "..."}
  ],
  "hack_report": {
    "lazy_solution": "how a weak change could pass the tests and still be unmergeable",
    "alt_valid_solution": "a different approach that is also mergeable; the rubric must not penalize it"
  },
  "calibration": {"lazy": ["calib/lazy.diff"], "alt": []}
}"""

REVIEW_RULES_EXAMPLE = """{"schema": "repo_review_rules.v1", "cut_date": "2026-03-29",
 "rules": [{"id": "R13", "rule": "revert incidental edits to unrelated files",
            "paths": ["**"], "prs": 21, "reviewers": 7, "written_in": null,
            "status": "confirmed", "evidence": ["<review comment URL>"]}]}"""

SHA_A = "a" * 40
SHA_B = "b" * 40


def read(text: str, model: type[BaseModel], name: str = "doc.json") -> Any:
    return read_document(name, model, text=text)


def round_trip(model: type[BaseModel], text: str) -> Any:
    """Read ``text``, write it, read the written text again: the two models are equal."""
    first = read(text, model)
    again = read(dump_document(first), model)
    assert again == first
    return first


def rejected(text: str, model: type[BaseModel]) -> DocumentError:
    with pytest.raises(DocumentError) as info:
        read(text, model)
    return info.value


def edited(text: str, **changes: Any) -> str:
    data = json.loads(text)
    data.update(changes)
    return json.dumps(data, indent=1)


# ---- registry and export ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_every_registry_name_imports_a_pydantic_model(name: str) -> None:
    model = model_for(name)
    assert issubclass(model, BaseModel)


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_every_field_of_every_document_has_a_description(name: str) -> None:
    """A docstring under every field (STYLE.md §7): editors show it from the JSON Schema."""
    model = model_for(name)
    schema = json.loads(schema_text(name))
    undocumented = []

    def walk(node: dict[str, Any], where: str) -> None:
        for key, prop in node.get("properties", {}).items():
            if not prop.get("description"):
                undocumented.append(f"{where}.{key}")
        for def_name, sub in node.get("$defs", {}).items():
            walk(sub, def_name)

    walk(schema, model.__name__)
    assert undocumented == []


def test_the_committed_schemas_equal_a_fresh_export_of_the_whole_registry() -> None:
    result = export_all(ROOT / "schemas", check=True)
    assert result.skipped == {}, "every registry module must exist"
    assert [p.name for p in result.stale] == [], "run: python -m dokimi.schemas.export"
    assert [p.name for p in result.extra] == []
    assert len(result.written) == len(SCHEMAS)


def test_the_example_manifest_points_editors_at_the_committed_manifest_schema() -> None:
    """The `# yaml-language-server: $schema=` line resolves, from the manifest's own directory, to the file
    `dokimi schema repo_manifest.v1` writes under schemas/."""
    manifest = ROOT / "examples" / "calc" / ".agent-eval" / "repo-eval.yaml"
    first = manifest.read_text().splitlines()[0]
    prefix = "# yaml-language-server: $schema="
    assert first.startswith(prefix)
    target = (manifest.parent / first.removeprefix(prefix)).resolve()
    assert target == (ROOT / "schemas" / schema_file_name("repo_manifest.v1")).resolve()
    assert target.is_file()


@pytest.mark.slow
def test_export_writes_one_file_per_name_under_the_stem_rule(tmp_path: Path) -> None:
    result = export_all(tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(schema_file_name(n) for n in SCHEMAS if n not in result.skipped)
    assert schema_file_name("task.json") == "task.schema.json"
    assert schema_file_name("events.jsonl") == "events.schema.json"
    assert schema_file_name("repo_grade.v1") == "repo_grade.v1.schema.json"
    assert export_all(tmp_path, check=True).stale == []


@pytest.mark.slow
def test_a_changed_schema_file_is_reported_stale(tmp_path: Path) -> None:
    export_all(tmp_path)
    (tmp_path / "repo_grade.v1.schema.json").write_text("{}\n")
    assert [p.name for p in export_all(tmp_path, check=True).stale] == ["repo_grade.v1.schema.json"]


def test_dokimi_schema_prints_sorted_json_lists_names_and_refuses_an_unknown_name() -> None:
    from dokimi.cli.app import cli

    runner = CliRunner()
    out = runner.invoke(cli, ["schema", "repo_grade.v1"], standalone_mode=False)
    assert out.return_value == 0
    assert out.output == schema_text("repo_grade.v1")
    assert json.loads(out.output)["properties"]["pass"]["anyOf"] == [{"type": "boolean"}, {"type": "null"}]
    by_stem = runner.invoke(cli, ["schema", "events"], standalone_mode=False)
    assert by_stem.output == schema_text("events.jsonl")
    listed = runner.invoke(cli, ["schema", "--list"], standalone_mode=False)
    assert listed.return_value == 0
    assert [line.split()[0] for line in listed.output.splitlines()] == list(SCHEMAS)
    unknown = runner.invoke(cli, ["schema", "repo_nothing.v9"], standalone_mode=False)
    assert unknown.return_value == 2
    assert "unknown document 'repo_nothing.v9'" in unknown.stderr
    assert "repo_grade.v1" in unknown.stderr and "task.json" in unknown.stderr


# ---- spec examples round-trip ----------------------------------------------------------------------------


def test_the_grade_example_of_contract_4_2_round_trips() -> None:
    grade = round_trip(RepoGrade, GRADE_EXAMPLE)
    assert isinstance(grade, RepoGrade)
    assert grade.pass_ is True
    assert grade.metrics["diff_lines"] == 14 and grade.metrics["format_ok"] is False
    assert json.loads(dump_document(grade))["pass"] is True


def test_the_events_example_of_contract_4_1_round_trips_line_by_line() -> None:
    events = parse_events(EVENTS_EXAMPLE.splitlines())
    assert [type(e) for e in events] == [CommandEvent, ReadEvent, type(events[2]), ToolEvent, CommandEvent]
    assert [e.kind for e in events] == ["command", "read", "edit", "tool", "command"]
    for event in events:
        assert parse_event(dump_document(event)) == event


def test_the_static_example_of_contract_4_4_round_trips_with_its_free_form_keys() -> None:
    static = round_trip(model_for("repo_static.v1"), STATIC_EXAMPLE)
    dumped = json.loads(dump_document(static))
    assert dumped["claims"][0]["why"] == "no such file"
    assert dumped["claims"][0]["kind"] == "path"


def _reach_record_model() -> type[BaseModel]:
    """The model in dokimi.schemas.reach whose keys are those of one (file, scenario) record."""
    import inspect

    import dokimi.schemas.reach as reach

    wanted = set(json.loads(REACH_RECORD))
    for _, obj in inspect.getmembers(reach, inspect.isclass):
        if issubclass(obj, BaseModel):
            keys = {f.alias or n for n, f in obj.model_fields.items()}
            if wanted <= keys:
                return obj
    raise AssertionError("no model in dokimi.schemas.reach holds a (file, scenario) record")


def test_the_reach_record_of_contract_7_round_trips() -> None:
    record = round_trip(_reach_record_model(), REACH_RECORD)
    assert json.loads(dump_document(record))["class"] == "not_loaded"


def test_the_rubric_example_of_mergeability_2_round_trips_as_a_draft_with_count_warnings() -> None:
    rubric = round_trip(RepoRubric, RUBRIC_EXAMPLE)
    assert isinstance(rubric, RepoRubric)
    assert rubric.status == "draft"
    assert rubric.blockers[0].evidence == ["PR review URL or path:line"]
    assert rubric_problems(rubric) == [
        "1 blockers; a task has 2-5",
        "1 non-blockers; a task has 3-6",
    ]


def test_the_review_rules_example_of_agent_modes_4_round_trips() -> None:
    rules = round_trip(RepoReviewRules, REVIEW_RULES_EXAMPLE)
    assert isinstance(rules, RepoReviewRules)
    assert json.loads(dump_document(rules))["cut_date"] == "2026-03-29"
    assert review_rules_problems(rules) == []


def test_every_event_converted_from_the_real_claude_traces_validates() -> None:
    total = 0
    for trace in sorted(TRACES.glob("*.jsonl")):
        for event in convert_file(trace, "claude-stream-json").events:
            Event.model_validate(event)
            total += 1
    assert total > 0


# ---- rejection with the key path -------------------------------------------------------------------------


def test_a_string_metric_is_refused_at_its_key() -> None:
    bad = GRADE_EXAMPLE.replace('"diff_lines": 14', '"diff_lines": "14"')
    error = rejected(bad, RepoGrade)
    assert error.key is not None and error.key.startswith("metrics.diff_lines")
    assert error.line == 7


def test_a_list_or_object_metric_is_refused_since_it_belongs_in_details() -> None:
    error = rejected(edited(GRADE_EXAMPLE, metrics={"changed": ["a.cpp"]}), RepoGrade)
    assert error.key is not None and error.key.startswith("metrics.changed")


def test_pass_must_be_a_boolean_or_null_and_is_required() -> None:
    for value in ("yes", "true", 1, 0):
        assert rejected(edited(GRADE_EXAMPLE, **{"pass": value}), RepoGrade).key == "pass"
    data = json.loads(GRADE_EXAMPLE)
    del data["pass"]
    error = rejected(json.dumps(data), RepoGrade)
    assert (error.key, error.message) == ("pass", "required key is missing")


def test_an_unknown_top_level_key_of_grade_json_is_refused() -> None:
    error = rejected(edited(GRADE_EXAMPLE, mergeable=True), RepoGrade)
    assert (error.key, error.message) == ("mergeable", "unknown key")


def test_a_wrong_schema_name_is_refused() -> None:
    assert rejected(edited(GRADE_EXAMPLE, schema="repo_grade.v2"), RepoGrade).key == "schema"


def test_an_event_is_shaped_by_its_kind() -> None:
    with pytest.raises(DocumentError) as info:
        parse_event('{"t": 1, "kind": "read", "path": "a", "text": "cat a"}', line_number=3)
    assert (info.value.key, info.value.message, info.value.line) == ("text", "unknown key", 3)
    with pytest.raises(DocumentError) as info:
        parse_event('{"t": 1, "kind": "command", "rc": 0}')
    assert info.value.key == "text"
    with pytest.raises(DocumentError) as info:
        parse_event('{"t": 1, "kind": "shell", "text": "ls"}')
    assert "kind" in info.value.message or info.value.key == "kind"


def test_a_command_whose_result_never_came_back_has_rc_null() -> None:
    event = parse_event('{"t": 2, "kind": "command", "text": "make", "rc": null}')
    assert isinstance(event, CommandEvent) and event.rc is None


@pytest.mark.parametrize("rc", ['"zero"', '"0"', "true", "0.5"])
def test_an_rc_that_is_not_an_integer_is_refused_at_rc(rc: str) -> None:
    with pytest.raises(DocumentError) as info:
        parse_event(f'{{"t": 2, "kind": "command", "text": "make", "rc": {rc}}}')
    assert info.value.key == "rc"


def test_a_rubric_blocker_without_evidence_is_refused_at_its_path() -> None:
    data = json.loads(RUBRIC_EXAMPLE)
    del data["blockers"][0]["evidence"]
    assert rejected(json.dumps(data), RepoRubric).key == "blockers[0].evidence"


def test_rubric_item_ids_are_unique_across_blockers_and_non_blockers() -> None:
    data = json.loads(RUBRIC_EXAMPLE)
    data["non_blockers"][0]["id"] = "B1"
    assert "appears twice" in rejected(json.dumps(data), RepoRubric).message


def test_a_scope_glob_outside_the_dialect_is_refused() -> None:
    data = json.loads(RUBRIC_EXAMPLE)
    data["scope"]["allowed_globs"] = ["!(tests)/**"]
    assert rejected(json.dumps(data), RepoRubric).key == "scope.allowed_globs"


def test_a_review_rule_with_an_unknown_status_is_refused() -> None:
    data = json.loads(REVIEW_RULES_EXAMPLE)
    data["rules"][0]["status"] = "maybe"
    assert rejected(json.dumps(data), RepoReviewRules).key == "rules[0].status"


def test_review_rule_ids_must_be_unique() -> None:
    data = json.loads(REVIEW_RULES_EXAMPLE)
    data["rules"].append(dict(data["rules"][0]))
    assert "appears twice" in rejected(json.dumps(data), RepoReviewRules).message


# ---- grade_problems ---------------------------------------------------------------------------------------


def _task(**extra: Any) -> Any:
    task_model = model_for("task.json")
    data = {"id": "fix_avx2_dispatch", "family": "fix", "base": SHA_A, "prompt": "fix it", "grader": "g"}
    return task_model.model_validate({**data, **extra})


def _grade(**changes: Any) -> RepoGrade:
    return RepoGrade.model_validate({**json.loads(GRADE_EXAMPLE), **changes})


def test_a_complete_grade_for_its_task_has_no_problems() -> None:
    assert grade_problems(_grade(), _task()) == []


def test_pass_null_with_errors_means_the_grader_failed() -> None:
    problems = grade_problems(_grade(**{"pass": None, "errors": ["bazel crashed"]}), _task())
    assert problems == ["the grader failed: bazel crashed"]


def test_pass_null_without_errors_fails_a_task_without_score() -> None:
    problems = grade_problems(_grade(**{"pass": None}), _task())
    assert len(problems) == 1 and "no score" in problems[0]


def test_pass_null_without_errors_is_score_only_for_a_task_with_score() -> None:
    task = _task(score={"metric": "recall", "max": 1.0})
    grade = _grade(**{"pass": None, "metrics": {"recall": 0.5}})
    assert grade_problems(grade, task) == []


def test_a_score_only_grade_without_its_score_metric_failed() -> None:
    task = _task(score={"metric": "recall", "max": 1.0})
    for metrics in ({}, {"recall": None}, {"recall": True}):
        problems = grade_problems(_grade(**{"pass": None, "metrics": metrics}), task)
        assert problems == ["score-only grade has no numeric metric 'recall' (the task's score.metric)"]


@pytest.mark.parametrize("key", ["mergeable", "merge_score"])
def test_a_grade_reporting_a_framework_metric_failed(key: str) -> None:
    problems = grade_problems(_grade(metrics={"strict_pass": True, key: True}), _task())
    assert problems == [f"metrics {key} belong to the framework; a grader may not report them"]


def test_a_grade_for_another_task_failed() -> None:
    problems = grade_problems(_grade(task="other_task"), _task())
    assert problems == ["grade.json is for task 'other_task', the run is task 'fix_avx2_dispatch'"]


# ---- meta.json and result.json ----------------------------------------------------------------------------


META = {
    "task": "fix_avx2_dispatch",
    "batch": "pilot",
    "arm": "guidance:raw",
    "harness": "claude-code",
    "harness_version": "2.1.328",
    "model": "claude-haiku-4-5",
    "rep": 1,
    "base_rev": SHA_A + "^",
    "base_sha": SHA_A,
    "base_date": "2025-01-02T03:04:05+00:00",
    "patches": [{"path": "inject.patch", "sha": "0" * 64}],
    "start_sha": SHA_B,
}


def test_meta_round_trips_and_carries_its_schema_name() -> None:
    meta = round_trip(Meta, json.dumps(META))
    assert json.loads(dump_document(meta))["schema"] == "repo_meta.v1"


def test_meta_accepts_patches_as_a_path_to_sha_object_in_order() -> None:
    meta = Meta.model_validate({**META, "patches": {"b.patch": "1", "a.patch": "2"}})
    assert [(p.path, p.sha, p.kind) for p in meta.patches] == [("b.patch", "1", None), ("a.patch", "2", None)]


def test_meta_refuses_a_short_base_sha() -> None:
    assert rejected(json.dumps({**META, "base_sha": "abc123"}), Meta).key == "base_sha"


RESULT = {
    "task": "fix_avx2_dispatch",
    "arm": "guidance:raw",
    "model": "claude-haiku-4-5",
    "rep": 1,
    "harness": "claude-code",
    "harness_version": "2.1.328",
    "family": "fix",
    "gated": True,
    "passed": True,
    "gate_results": {"strict_pass": True},
    "metrics": {"strict_pass": True, "diff_lines": 14, "mergeable": None},
    "cost_usd": 0.12,
    "turns": 9,
    "duration_s": 81.5,
}


def test_result_round_trips() -> None:
    result = round_trip(Result, json.dumps(RESULT))
    assert json.loads(dump_document(result))["schema"] == "repo_result.v1"


def test_a_score_only_result_has_no_verdict() -> None:
    score_only = {**RESULT, "gated": False, "passed": None, "score": 0.5, "gate_results": {}}
    assert Result.model_validate(score_only).score == 0.5
    assert "passed: null" in rejected(json.dumps({**score_only, "passed": False}), Result).message
    assert "true or false" in rejected(json.dumps({**RESULT, "passed": None}), Result).message


def test_a_grader_failure_never_passes_and_says_why() -> None:
    failed = {**RESULT, "passed": False, "gate_results": {"strict_pass": None}, "grader_failure": True}
    assert "grader_error must say why" in rejected(json.dumps(failed), Result).message
    assert Result.model_validate({**failed, "grader_error": "grade exited 1"}).grader_failure
    passing = {**failed, "passed": True, "grader_error": "grade exited 1"}
    assert "cannot pass" in rejected(json.dumps(passing), Result).message


def test_a_negative_cost_is_refused() -> None:
    assert rejected(json.dumps({**RESULT, "cost_usd": -1}), Result).key == "cost_usd"


# ---- rubric, review rules, perf ---------------------------------------------------------------------------


def _rubric(evidence: list[str], *, blockers: int = 2, non_blockers: int = 3) -> RepoRubric:
    data = json.loads(RUBRIC_EXAMPLE)
    data["blockers"] = [
        {"id": f"B{i}", "criterion": "c", "rationale": "r", "evidence": evidence}
        for i in range(1, blockers + 1)
    ]
    data["non_blockers"] = [{"id": f"N{i}", "criterion": "c"} for i in range(1, non_blockers + 1)]
    return RepoRubric.model_validate(data)


def test_a_rubric_with_2_to_5_blockers_and_3_to_6_non_blockers_has_no_count_warning() -> None:
    assert rubric_problems(_rubric(["url"], blockers=2, non_blockers=3)) == []
    assert rubric_problems(_rubric(["url"], blockers=5, non_blockers=6)) == []
    assert rubric_problems(_rubric(["url"], blockers=6, non_blockers=7)) == [
        "6 blockers; a task has 2-5",
        "7 non-blockers; a task has 3-6",
    ]


def test_a_rubric_in_another_tasks_directory_is_warned_about() -> None:
    problems = rubric_problems(_rubric(["url"]), task_id="other")
    assert problems == ["rubric names task 'fix_df_fraction_gt1' but sits in the directory of task 'other'"]


def test_a_house_citation_must_name_a_confirmed_rule_seen_on_3_prs_from_2_reviewers() -> None:
    rules = RepoReviewRules.model_validate(json.loads(REVIEW_RULES_EXAMPLE))
    rubric = _rubric(["house:R13"])
    assert rubric.blockers[0].house_rules == ["R13"]
    assert rubric_problems(rubric, rules=rules) == []
    assert "no review_rules.json" in rubric_problems(rubric)[0]
    assert "does not define" in rubric_problems(_rubric(["house:R99"]), rules=rules)[0]
    weak = rules.model_copy(deep=True)
    weak.rules[0].prs = 2
    assert "confirmed rule seen on >= 3 PRs" in rubric_problems(rubric, rules=weak)[0]


def test_a_needs_tree_blocker_is_marked_and_defaults_to_diff_only() -> None:
    data = json.loads(RUBRIC_EXAMPLE)
    data["blockers"][0]["needs_tree"] = True
    assert RepoRubric.model_validate(data).blockers[0].needs_tree
    assert not RepoRubric.model_validate(json.loads(RUBRIC_EXAMPLE)).blockers[0].needs_tree


def test_only_confirmed_rules_from_3_prs_and_2_reviewers_may_back_a_blocker() -> None:
    rules = RepoReviewRules.model_validate(json.loads(REVIEW_RULES_EXAMPLE))
    rule = rules.rules[0]
    assert may_back_a_blocker(rule)
    assert not may_back_a_blocker(rule.model_copy(update={"reviewers": 1}))
    assert not may_back_a_blocker(rule.model_copy(update={"status": "candidate"}))


def test_a_rule_confirmed_from_one_reviewer_is_warned_about() -> None:
    data = json.loads(REVIEW_RULES_EXAMPLE)
    data["rules"][0]["reviewers"] = 1
    problems = review_rules_problems(RepoReviewRules.model_validate(data))
    assert len(problems) == 1 and "stays a candidate" in problems[0]


def test_rules_score_only_bases_on_or_after_the_cut_date() -> None:
    import datetime as dt

    rules = RepoReviewRules.model_validate(json.loads(REVIEW_RULES_EXAMPLE))
    assert may_score_base(rules, dt.date(2026, 3, 29))
    assert not may_score_base(rules, dt.date(2026, 3, 28))


def test_the_judge_gets_cited_rules_and_those_matching_the_diff_only() -> None:
    data = json.loads(REVIEW_RULES_EXAMPLE)
    data["rules"] = [
        {**data["rules"][0], "id": "R1", "paths": ["cpp/**"]},
        {**data["rules"][0], "id": "R2", "paths": ["docs/*.md"]},
        {**data["rules"][0], "id": "R3", "paths": ["java/**"], "status": "candidate"},
    ]
    rules = RepoReviewRules.model_validate(data)
    assert [r.id for r in rules_for_diff(rules, ["cpp/a/b.cpp"])] == ["R1"]
    assert [r.id for r in rules_for_diff(rules, ["docs/sub/x.md"])] == []  # * does not cross /
    assert [r.id for r in rules_for_diff(rules, ["cpp/x.h"], cited=["R3"])] == ["R1", "R3"]


def test_a_perf_document_holds_one_value_per_repetition() -> None:
    text = json.dumps(
        {
            "schema": "repo_perf.v1",
            "metric": "objective_ratio",
            "unit": "ratio",
            "variant": "agent",
            "values": [1.02, 0.98, 1.01],
            "size": {"p": 20000},
        }
    )
    perf = round_trip(RepoPerf, text)
    assert isinstance(perf, RepoPerf) and len(perf.values) == 3
    assert rejected(edited(text, values=[]), RepoPerf).key == "values"
    assert rejected(edited(text, values=[1, "fast"]), RepoPerf).key == "values[1]"


# ---- rating ------------------------------------------------------------------------------------------------

SCORE = {
    "run_id": "run-7",
    "rater": "alice",
    "passed": True,
    "validation_passed": True,
    "human_accepted": False,
    "regression": False,
    "rework_required": True,
    "requirements_traceability": False,
    "notes": "missing test for the SSO path",
}


def test_a_rater_scores_all_six_outcomes() -> None:
    score = round_trip(RaterScore, json.dumps(SCORE))
    assert isinstance(score, RaterScore) and score.outcomes()[Outcome.REWORK_REQUIRED] is True
    partial = {k: v for k, v in SCORE.items() if k != "regression"}
    assert "outcomes not scored: regression" in rejected(json.dumps(partial), RaterScore).message


def test_a_blinding_leak_stops_scoring_and_excludes_the_run() -> None:
    leak = {"run_id": "run-8", "rater": "bob", "blinding_leak": "phase heading 'PLAN:' in the artifact"}
    score = RaterScore.model_validate(leak)
    assert score.passed is None
    assert leaked([score, RaterScore.model_validate(SCORE)]) == ["run-8"]


def test_raters_who_disagree_need_adjudication_by_someone_else() -> None:
    alice = RaterScore.model_validate(SCORE)
    bob = RaterScore.model_validate({**SCORE, "rater": "bob", "human_accepted": True, "notes": ""})
    assert disagreements([alice, bob]) == [Outcome.HUMAN_ACCEPTED]
    final = {k: v for k, v in SCORE.items() if k in set(Outcome)}
    row = AdjudicatedRow.model_validate(
        {"run_id": "run-7", "adjudicator": "carol", **final, "adjudication_notes": "the SSO gap blocks"}
    )
    assert row.adjudicated is True
    assert adjudicator_rated_the_run(row, [alice, bob]) is None
    own = row.model_copy(update={"adjudicator": "bob"})
    assert adjudicator_rated_the_run(own, [alice, bob]) == "bob rated run run-7 and may not adjudicate it"
    not_adjudicated = {**json.loads(dump_document(row)), "adjudicated": False}
    assert rejected(json.dumps(not_adjudicated), AdjudicatedRow).key == "adjudicated"


def test_a_valid_json_document_is_marked_only_when_a_line_is_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Line marks cost a second, YAML parse: a document that validates never pays it, one that does not
    still names the line of the bad value."""
    from dokimi.schemas import _base
    from dokimi.schemas.report import ReportWarning

    parses: list[str] = []
    real = _base.parse_yaml

    def counting(text: str, path: str) -> _base.Marked:
        parses.append(path)
        return real(text, path)

    monkeypatch.setattr(_base, "parse_yaml", counting)
    good = '{\n  "code": "no_pin",\n  "message": "no batch.json"\n}\n'
    assert _base.read_document("good.json", ReportWarning, text=good).code == "no_pin"
    assert parses == []
    bad = '{\n  "code": "no_pin",\n  "message": 7\n}\n'
    with pytest.raises(DocumentError) as caught:
        _base.read_document("bad.json", ReportWarning, text=bad)
    assert parses == ["bad.json"] and caught.value.line == 3


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested more than 64 levels deep"),
        ("[" * 900 + "]" * 900, "nested more than 64 levels deep"),
        ('{"n": ' + "9" * 5000 + "}", "holds an integer of 5000 digits (more than 20)"),
        ('{"n": -' + "9" * 21 + "}", "holds an integer of 21 digits (more than 20)"),
        ("[" + "{}," * 1_000 + "{}]", "holds more than 1000 values"),
    ],
    ids=["100000-deep", "900-deep", "5000-digits", "21-digits", "values"],
)
def test_the_bounded_json_reader_refuses_what_is_over_its_limits(text: str, why: str) -> None:
    with pytest.raises(JsonOverLimit, match=re.escape(why)):
        load_json(text, max_values=1_000 if "values" in why else 5_000_000)


def test_the_bounded_json_reader_reads_what_is_within_them() -> None:
    deep = "[" * 63 + "]" * 63  # 64 levels with the object around it
    within = load_json('{"a": "' + "[" * 1000 + '", "n": -' + "9" * 20 + "}")  # brackets in a string
    assert within == {"a": "[" * 1000, "n": -int("9" * 20)}
    assert load_json('{"s": "' + "9" * 5000 + '", "d": ' + deep + "}")["s"] == "9" * 5000
    assert load_json("[" + "1," * 999 + "1]", max_values=1_000) == [1] * 1000
