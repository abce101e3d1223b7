"""One pydantic model per document of the four spec files. This table is the registry `dokimi schema` reads.

Each module in this package holds one document's model; import the module only when it is needed.
"""

from __future__ import annotations

import importlib

from pydantic import BaseModel

#: document name -> "module:Model"
SCHEMAS: dict[str, str] = {
    "repo_manifest.v1": "dokimi.schemas.manifest:RepoManifest",
    "task.json": "dokimi.schemas.task:Task",
    "meta.json": "dokimi.schemas.meta:Meta",
    "events.jsonl": "dokimi.schemas.events:Event",
    "gateway.jsonl": "dokimi.schemas.gateway:GatewayRecord",
    "egress.jsonl": "dokimi.schemas.gateway:EgressRecord",
    "repo_grade.v1": "dokimi.schemas.grade:RepoGrade",
    "result.json": "dokimi.schemas.result:Result",
    "repo_static.v1": "dokimi.schemas.static:RepoStatic",
    "repo_readiness.v1": "dokimi.schemas.readiness:RepoReadiness",
    "guidance_reach.v1": "dokimi.schemas.reach:GuidanceReach",
    "harness_profile.v1": "dokimi.schemas.profile:HarnessProfile",
    "repo_rubric.v1": "dokimi.schemas.rubric:RepoRubric",
    "repo_perf.v1": "dokimi.schemas.perf:RepoPerf",
    "repo_review_rules.v1": "dokimi.schemas.review_rules:RepoReviewRules",
    "review_comments.jsonl": "dokimi.schemas.review_comments:ReviewCommentLine",
    "rule_matches.jsonl": "dokimi.schemas.review_comments:RuleMatchLine",
    "repo_rules_mining.v1": "dokimi.schemas.rules_reports:RulesMining",
    "repo_rules_evaluation.v1": "dokimi.schemas.rules_reports:RulesEvaluation",
    "repo_rules_effect.v1": "dokimi.schemas.rules_reports:RulesEffect",
    "repo_batch.v1": "dokimi.schemas.batch:BatchPin",
    "repo_rating.v1": "dokimi.schemas.rating:RaterScore",
    "repo_adjudication.v1": "dokimi.schemas.rating:AdjudicatedRow",
    "repo_rating_key.v1": "dokimi.schemas.rating:RatingKey",
    "repo_rating_result.v1": "dokimi.schemas.rating:RatingResult",
    "repo_rating_summary.v1": "dokimi.schemas.rating:RatingSummary",
    "repo_plan.v1": "dokimi.schemas.plan:Plan",
    "repo_report.v1": "dokimi.schemas.report:ReportDoc",
    "repo_compare.v1": "dokimi.schemas.compare:CompareDoc",
    "repo_run.v1": "dokimi.schemas.run_summary:RunSummary",
    "repo_regrade.v1": "dokimi.schemas.regrade:RegradeDoc",
    "repo_validation.v1": "dokimi.schemas.validation:ValidationReport",
    "repo_tasks_check.v1": "dokimi.schemas.tasks_check:TasksCheck",
    "repo_rubric_check.v1": "dokimi.schemas.rubric_check:RubricCheckDoc",
    "dokimi_check_record.v1": "dokimi.schemas.check_record:CheckRecord",
    "repo_grade_run.v1": "dokimi.schemas.grading:GradeRun",
    "repo_workspace_diff.v1": "dokimi.schemas.grading:WorkspaceDiffDoc",
    "repo_merge.v1": "dokimi.schemas.grading:MergeDoc",
    "repo_perf_check.v1": "dokimi.schemas.grading:PerfCheckDoc",
    "repo_validation_commands.v1": "dokimi.schemas.grading:ValidationCommandsDoc",
    "repo_tests_list.v1": "dokimi.schemas.grading:TestsListDoc",
    "repo_review_check.v1": "dokimi.schemas.grading:ReviewCheckDoc",
    "repo_own_tests.v1": "dokimi.schemas.grading:OwnTestsDoc",
    "repo_task_reference.v1": "dokimi.schemas.grading:TaskReferenceDoc",
    "repo_generated.v1": "dokimi.schemas.generated:Generated",
    "repo_power.v1": "dokimi.schemas.power:RepoPower",
    "repo_study.v1": "dokimi.schemas.study:Study",
    "repo_study_report.v1": "dokimi.schemas.study:StudyReport",
    "repo_run_file.v1": "dokimi.schemas.run_file:RunFile",
    "repo_task_new.v1": "dokimi.schemas.task_new:TaskNew",
    "repo_task_mining.v1": "dokimi.schemas.task_new:TaskMining",
    "repo_init.v1": "dokimi.schemas.init:InitReport",
}


def model_for(name: str) -> type[BaseModel]:
    """The model class of a document name; KeyError for an unknown name."""
    module_name, attr = SCHEMAS[name].split(":")
    model = getattr(importlib.import_module(module_name), attr)
    assert isinstance(model, type) and issubclass(model, BaseModel)
    return model
