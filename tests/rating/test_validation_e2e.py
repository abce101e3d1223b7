"""A task's validation commands run after the agent, each in a container holding only its tree, and the rater
package carries their output with the scoring rubric itself: a real batch of the tiny repository (real
containers, the fake harness of tests/helpers/runs.py) exported with ``repo rate export``."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from dokimi.batch import cell_dir
from tests.helpers.runs import dokimi_cli, fake_harness, remove_tiny_images, run_args, tiny_repo

pytestmark = pytest.mark.docker

#: Each of these fails loudly when it can reach what a validation command must not: the eval dir (hidden
#: tests, the reference), dokimi's files in the run directory, the source clone.
ISOLATED = (
    "sh -c 'for p in /eval/content /eval/source /eval/run/task.json /eval/run/meta.json "
    "/eval/run/validation; do test -e $p && echo reached $p && exit 9; done; echo isolated'"
)
TASK = {
    "acceptance_criteria": ["f.txt says after", "nothing else changes"],
    "validation_commands": ["cat f.txt", "sh -c 'echo the linter found 2 problems; exit 3'"],
    "hidden_validation_commands": [ISOLATED],
}


@pytest.fixture
def name() -> Iterator[str]:
    """The batch's name, and the manifest id of the test's own images (removed at its end)."""
    found = f"validate-{uuid.uuid4().hex[:10]}"
    yield found
    remove_tiny_images(found)


def test_validation_commands_run_isolated_and_reach_the_raters_with_the_rubric(
    docker_available: bool, tmp_path: Path, name: str
) -> None:
    """Checked by issue 26: a rater package holding the rubric and the validation output."""
    tiny = tiny_repo(tmp_path / "tiny", {"fix_f": TASK}, manifest_id=name)
    profile, binary = fake_harness(tmp_path / "harness")
    proc = dokimi_cli(run_args(tiny, tmp_path / "out", name, profile, binary, "--json"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    batch = tmp_path / "out" / name
    run_dir = cell_dir(batch, "fix_f", "guidance:raw", "m", None, 0)
    commands = json.loads((run_dir / "validation" / "commands.json").read_text())
    assert commands["error"] is None
    ran = [(c["kind"], c["exit_code"], c["output"].strip()) for c in commands["commands"]]
    assert ran == [
        ("public", 0, "after"),  # the agent's tree as it left it
        ("public", 3, "the linter found 2 problems"),
        ("hidden", 0, "isolated"),
    ]
    assert sorted(p.name for p in (run_dir / "validation").iterdir()) == ["commands.json", "prepared.json"]
    assert json.loads((run_dir / "result.json").read_text())["passed"] is True  # the gate never reads them

    rating = tmp_path / "rating"
    exported = dokimi_cli(
        ["repo", "rate", "export", str(batch), "--out", str(rating), "--seed", "7", "--json"]
    )
    assert exported.returncode == 0, exported.stdout + exported.stderr
    (run_id,) = json.loads(exported.stdout)["blinded"]
    blinded = rating / "blinded"
    rubric = (blinded / "RUBRIC.md").read_text()
    for outcome in ("passed", "validation_passed", "human_accepted", "regression", "rework_required",
                    "requirements_traceability"):  # fmt: skip
        assert f"\n## {outcome}\n" in rubric
    assert "RUBRIC.md in this directory" in (blinded / "README.md").read_text()
    artifact = blinded / run_id
    task = (artifact / "task.txt").read_text()
    assert "acceptance criteria:\n1. f.txt says after\n2. nothing else changes\n" in task
    assert "validation commands (output in validation/N-public.log):\n1. cat f.txt\n" in task
    assert "locked evaluator checks (output in validation/N-hidden.log):\n1. sh -c" in task
    logs = {p.name: p.read_text() for p in (artifact / "validation").iterdir()}
    assert sorted(logs) == ["1-hidden.log", "1-public.log", "2-public.log"]
    assert logs["1-public.log"] == "$ cat f.txt\nexit code 0\n\nafter\n"
    assert logs["2-public.log"].startswith(
        "$ sh -c 'echo the linter found 2 problems; exit 3'\nexit code 3\n"
    )
    assert "isolated" in logs["1-hidden.log"]
    key = json.loads((rating / "key.json").read_text())
    assert key["artifacts"][run_id]["hidden_validation_passed"] is True  # the gate and the locked checks


def test_a_failing_locked_check_makes_the_run_fail_its_locked_checks_for_the_raters_key(
    docker_available: bool, tmp_path: Path, name: str
) -> None:
    tiny = tiny_repo(
        tmp_path / "tiny", {"fix_f": {"hidden_validation_commands": ["sh -c 'exit 1'"]}}, manifest_id=name
    )
    profile, binary = fake_harness(tmp_path / "harness")
    proc = dokimi_cli(run_args(tiny, tmp_path / "out", name, profile, binary))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rating = tmp_path / "rating"
    exported = dokimi_cli(
        ["repo", "rate", "export", str(tmp_path / "out" / name), "--out", str(rating), "--json"]
    )
    assert exported.returncode == 0, exported.stdout + exported.stderr
    (entry,) = json.loads((rating / "key.json").read_text())["artifacts"].values()
    assert entry["hidden_validation_passed"] is False  # the gate passed; the locked check did not
