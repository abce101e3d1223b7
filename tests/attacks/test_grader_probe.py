"""The grader isolation probe of ``repo tasks check`` on the real daemon: the bundled example's grader
(dokimi's isolation helper) and builtin:pytest keep the reference away from the code under test; a grader that
imports the package in the grade container exposes it (a warning; broken under --strict), and the probe says
what it read and that dokimi's files stayed out of its reach."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.attacks.conftest import Example, dokimi

pytestmark = pytest.mark.docker

TASK = "fix_power_assoc"


def _checked(example: Example, tmp_path: Path, *extra: str) -> tuple[int, dict[str, object]]:
    proc = dokimi(
        [
            "repo",
            "tasks",
            "check",
            example.source(),
            "--manifest",
            ".agent-eval/repo-eval.yaml",
            "--task",
            TASK,
            "--arm",
            "guidance:raw",
            "--out",
            str(tmp_path / "check"),
            "--json",
            *extra,
        ]  # fmt: skip
    )
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr
    (task,) = json.loads(proc.stdout)["tasks"]
    return proc.returncode, task


@pytest.mark.parametrize("grader", ["example", "builtin"])
def test_an_isolating_grader_keeps_the_reference_from_the_probe(
    docker_available: bool, example: Example, builtin_example: Example, tmp_path: Path, grader: str
) -> None:
    code, task = _checked({"example": example, "builtin": builtin_example}[grader], tmp_path)
    assert code == 0 and task["status"] == "ok", task
    found = task["grader_isolation"]
    assert found["measured"] is True and found["reference_exposed"] is False, found
    assert found["readable"] == {} and found["writable"] == [] and found["planted"] == []
    assert found["modules"] >= 5  # calc's modules (tests left alone)
    assert not [w for w in task["warnings"] if "grader isolation" in w or "exposed" in w]


def test_a_grader_that_runs_the_package_unisolated_exposes_the_reference(
    docker_available: bool, naive_example: Example, tmp_path: Path
) -> None:
    code, task = _checked(naive_example, tmp_path)
    assert code == 0 and task["status"] == "ok"  # a warning only
    found = task["grader_isolation"]
    assert found["measured"] is True and found["reference_exposed"] is True, found
    assert found["readable"]["/eval/content"] >= 10 and "/eval/content" in found["listable"]
    assert f"/eval/content/tasks/{TASK}/oracle.patch" in found["examples"] or found["examples"]
    assert found["writable"] == []  # dokimi's files are read-only even there
    assert found["planted"] == ["/eval/run", "/eval/run/workspace"]  # but the run dir itself is writable
    (warning,) = [w for w in task["warnings"] if "reference is exposed" in w]
    assert "isolation helper" in warning
    strict, task = _checked(naive_example, tmp_path, "--strict")
    assert strict == 1 and task["status"] == "broken"
    assert any("reference is exposed" in p for p in task["problems"])
