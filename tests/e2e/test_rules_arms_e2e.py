"""Rules on and off as arms, through a real dry-run batch of the bundled example: the real Claude Code CLI in
the agent container, the scripted model server answering. The example ships review_rules.json (R1, R2, R4
confirmed, R3 a candidate) and its review task, review_cache, reviews a change to calc/evaluator.py and
tests/test_evaluator.py.

In ``guidance:raw+rules`` the reviewer's prompt must hold R1 and R2 (confirmed, their paths match the diff)
and nothing else: not R3 (a candidate, though its tests/** matches), not R4 (confirmed, for calc/__main__.py
only). The scripted model copies from the request it received whichever rule lines are there, so the answer
shows what reached the model through the CLI, not what dokimi meant to send.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dokimi.batch import cell_dir
from tests.helpers.runs import dokimi_cli

pytestmark = [pytest.mark.docker, pytest.mark.harness]

TASK = "review_cache"
MODEL = "claude-haiku-4-5"
GOLD = (Path(__file__).resolve().parents[2] / "examples" / "calc" / ".agent-eval" / "tasks" / TASK /
        "gold_answer.txt").read_text().splitlines()  # fmt: skip
#: One line per rule: the rule's line as the request held it, or nothing when it did not.
SEEN = "".join(f"\nseen: {{{{match:- R{n} \\(applies to [^)]*\\): [^\\\\]*}}}}" for n in (1, 2, 3, 4))


def test_a_reviewer_in_a_rules_arm_gets_only_the_confirmed_path_matching_rules(
    docker_available: bool, claude_bin: Path, example: Path, tmp_path: Path
) -> None:
    without = tmp_path / "without.json"  # the reviewer without the rules misses the env thread (a rule's)
    without.write_text(json.dumps([{"final": "\n".join(GOLD[1:]) + SEEN}]))
    with_rules = tmp_path / "with.json"
    with_rules.write_text(json.dumps([{"final": "\n".join(GOLD) + SEEN}]))
    out = tmp_path / "runs"
    args = [
        "repo", "run", f"{example}@HEAD", "--manifest", ".agent-eval/repo-eval.yaml", "--task", TASK,
        "--arm", "guidance:raw,guidance:raw+rules", "--model", MODEL, "--reps", "1", "--batch", "rules",
        "--out", str(out),
        "--bin", str(claude_bin), "--dry-run", "--dry-run-script", f"guidance:raw={without}",
        "--dry-run-script", f"guidance:raw+rules={with_rules}", "--json",
    ]  # fmt: skip
    done = dokimi_cli(args)
    assert done.returncode == 0, done.stderr
    batch = out / "rules"
    on = cell_dir(batch, TASK, "guidance:raw+rules", MODEL, None, 0)
    off = cell_dir(batch, TASK, "guidance:raw", MODEL, None, 0)

    seen_on = [line for line in (on / "answer.txt").read_text().splitlines() if line.startswith("seen:")]
    assert seen_on == [
        "seen: - R1 (applies to calc/**/*.py): Every public function in calc/ has a docstring.",
        "seen: - R2 (applies to calc/**/*.py): A cache keys on every input the cached value depends on.",
        "seen: ",
        "seen: ",
    ]
    assert [line for line in (off / "answer.txt").read_text().splitlines() if line.startswith("seen:")] == [
        "seen: "
    ] * 4
    assert json.loads((on / "meta.json").read_text())["review_rules"] == ["R1", "R2"]
    assert json.loads((off / "meta.json").read_text())["review_rules"] is None
    assert json.loads((on / "grade.json").read_text())["threads"] == {
        "cache_ignores_env": True, "cache_unbounded": True, "mutable_default_env": True,
    }  # fmt: skip

    effect = dokimi_cli(["repo", "rules", "effect", str(batch), "--json"])
    assert effect.returncode == 0, effect.stderr
    (pair,) = json.loads(effect.stdout)["pairs"]
    assert (pair["with_arm"], pair["without_arm"], pair["tasks"]) == (
        "guidance:raw+rules",
        "guidance:raw",
        [TASK],
    )
    assert (pair["covered"]["with_rules"]["k"], pair["covered"]["without_rules"]["k"]) == (1, 0)
    assert (pair["uncovered"]["with_rules"]["k"], pair["uncovered"]["without_rules"]["k"]) == (2, 2)
    assert pair["loss_on_uncovered"] == 0 and pair["underpowered"] is True
    assert json.loads(effect.stdout)["dry_run"] is True
