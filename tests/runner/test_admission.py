"""Which tasks a real run admits: the check records kept in dokimi's cache, keyed by what they checked
(dokimi.runner.admission). Literal keys and records, no docker; the run's side is in
tests/runner/test_run_faults.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dokimi.runner.admission import admission_refusal, read_record, unadmitted, write_record
from dokimi.schemas.check_record import CheckedAgainst

BASE = "b" * 40


def key(task: str, **changes: Any) -> CheckedAgainst:
    fields = {"manifest_id": "calc", "task": task, "eval_dir_digest": "sha256:e1", "base_sha": BASE,
              "image": "dokimi/calc:" + "a" * 40, "image_context_digest": "sha256:c1", **changes}  # fmt: skip
    return CheckedAgainst(**fields)


def rubric_key(task: str, model: str = "judge-model-1") -> CheckedAgainst:
    return key(task, image=None, image_context_digest=None, judge_model=model)


def test_a_run_admits_a_task_its_tasks_check_found_sound_on_exactly_what_it_runs() -> None:
    write_record("tasks_check", key("good"), "ok", [], source="calc")
    write_record("tasks_check", key("bad"), "broken", ["oracle passes the gate: it fails"], source="calc")
    assert read_record("tasks_check", key("good")) is not None
    why = unadmitted({t: (key(t), None) for t in ("good", "bad", "never")})
    assert why == {
        "bad": "broken in repo tasks check: oracle passes the gate: it fails",
        "never": "unchecked: no repo tasks check of this eval_dir, base and image",
    }
    # a record speaks for what it checked only: another eval_dir, base or image is unchecked
    for changed in ({"eval_dir_digest": "sha256:e2"}, {"base_sha": "c" * 40}, {"image": "mine:latest"}):
        assert unadmitted({"good": (key("good", **changed), None)})["good"].startswith("unchecked")


def test_a_task_gated_on_mergeable_needs_its_rubric_admitted_with_the_runs_judge() -> None:
    for task in ("admitted", "refused", "other_judge"):
        write_record("tasks_check", key(task), "ok", [], source="calc")
    write_record("rubric_check", rubric_key("admitted"), "admitted", [], source="calc")
    write_record(
        "rubric_check", rubric_key("refused"), "not_admitted", ["lazy lazy.diff: mergeable"], source="calc"
    )
    write_record("rubric_check", rubric_key("other_judge", "judge-model-2"), "admitted", [], source="calc")
    why = unadmitted({t: (key(t), rubric_key(t)) for t in ("admitted", "refused", "other_judge")})
    assert why == {
        "refused": "its rubric was not admitted by repo rubric check: lazy lazy.diff: mergeable",
        "other_judge": "its rubric is unchecked: no repo rubric check of this eval_dir and base with judge "
        "judge-model-1",
    }


def test_the_refusal_names_every_task_and_the_commands_that_check_them() -> None:
    assert admission_refusal({}, "./calc", None) is None
    message = admission_refusal(
        {"a": "unchecked: no repo tasks check", "b": "its rubric is unchecked"}, "./calc@HEAD", "judge-1"
    )
    assert message is not None
    assert "  a: unchecked" in message and "  b: its rubric" in message
    assert "dokimi repo tasks check ./calc@HEAD --task a --task b" in message
    assert "dokimi repo rubric check ./calc@HEAD --model judge-1 --task a --task b" in message


def test_a_tasks_check_and_a_run_key_an_image_digest_alike_with_or_without_its_prefix(tmp_path: Path) -> None:
    from dokimi.runner.admission import checked_against
    from dokimi.schemas.task import Task
    from dokimi.source import open_source
    from tests.helpers.git import commit, git_repo

    git_repo(tmp_path / "r")
    head = commit(tmp_path / "r", "one", files={"f.txt": "x\n"})
    task = Task.model_validate({"id": "t", "family": "fix", "base": head, "prompt": "p", "grader": "g"})
    with open_source(str(tmp_path / "r")) as repo:
        bare = checked_against(repo, task, "calc", "sha256:e", image=("img", "abc"))
        prefixed = checked_against(repo, task, "calc", "sha256:e", image=("img", "sha256:abc"))
    assert bare == prefixed and bare.image_context_digest == "sha256:abc"
