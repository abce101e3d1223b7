"""docs/your-repo.md as a new user lives it: a fresh repository of one's own (a small Python package with
three fix commits), ``repo init``, three ``repo task new --from-commit``, ``repo validate`` and
``repo tasks check`` all sound with builtin:pytest, then a dry run (the real Claude Code CLI against the
scripted model server) in which every cell passes. No file is written by hand except the prompts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.inventory import FIXES, make_inventory
from tests.helpers.runs import dokimi_cli

pytestmark = [pytest.mark.docker, pytest.mark.harness]

MODEL = "claude-haiku-4-5"

PROMPTS = {
    "fix_total": "inventory.core.total returns the number of pieces in stock, but it should return "
    "their value (quantity times price, summed). Fix it; keep the existing tests passing.",
    "fix_find_case": "inventory.core.find('bolt') finds nothing although the stock has a 'Bolt'; the "
    "docstring says the lookup ignores case. Fix it.",
    "fix_discount": "inventory.core.discounted(80.0, 25) returns 55.0; a 25 per cent discount on 80.0 is "
    "60.0. Fix it.",
}


def _ok(args: list[str], timeout: float = 900) -> str:
    result = dokimi_cli(args, timeout=timeout)
    assert result.returncode == 0, f"dokimi {' '.join(args)}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def test_a_new_user_evaluates_their_own_repository_from_zero(
    docker_available: bool, claude_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "inventory"
    shas = make_inventory(repo)

    init = json.loads(_ok(["repo", "init", str(repo), "--json"]))
    assert init["grade"] == "builtin:pytest"

    for task_id, _, _, _ in FIXES:
        new = ["repo", "task", "new", task_id, "--from-commit", shas[task_id], "-C", str(repo), "--json"]
        mined = json.loads(_ok(new))
        assert mined["base"] == f"{shas[task_id]}^"
        assert len(mined["fail_to_pass"]) == 1 and mined["checked"] and mined["ok"], mined
        assert mined["test_files"] == ["tests/test_core.py"] and mined["code_files"] == ["inventory/core.py"]
    first = json.loads((repo / ".agent-eval/tasks/fix_total/task.json").read_text())
    assert first["fail_to_pass"] == ["tests/test_core.py::test_total_is_quantity_times_price"]
    assert first["pass_to_pass"] == [
        "tests/test_core.py::test_find_missing",
        "tests/test_core.py::test_no_discount",
        "tests/test_core.py::test_total_of_nothing",
    ]
    last = json.loads((repo / ".agent-eval/tasks/fix_discount/task.json").read_text())
    assert "tests/test_core.py::test_find_ignores_case" in last["pass_to_pass"]  # an earlier fix's test

    for task_id, prompt in PROMPTS.items():  # the one thing written by hand
        path = repo / ".agent-eval" / "tasks" / task_id / "task.json"
        task = json.loads(path.read_text())
        task["prompt"] = prompt
        path.write_text(json.dumps(task, indent=2) + "\n")

    validation = json.loads(_ok(["repo", "validate", str(repo), "--json"]))
    assert validation["valid"] and validation["tasks"] == 3, validation["errors"]

    check = json.loads(_ok(["repo", "tasks", "check", str(repo), "--json"]))
    assert check["ok"] and [t["status"] for t in check["tasks"]] == ["ok", "ok", "ok"]

    # the harness is found the way `dokimi doctor` finds it: no --bin
    monkeypatch.setenv("DOKIMI_CLAUDE_BIN", str(claude_bin))
    out = tmp_path / "runs"
    run_args = ["repo", "run", str(repo), "--arm", "guidance:raw", "--model", MODEL, "--reps", "1",
                "--batch", "first", "--out", str(out), "--dry-run", "--json"]  # fmt: skip
    run = json.loads(_ok(run_args))
    assert (run["ran"], run["harness_version"]) == (3, "2.1.328")
    results = [json.loads(p.read_text()) for p in sorted(out.glob("first/**/result.json"))]
    assert len(results) == 3 and all(r["passed"] and not r["grader_failure"] for r in results), results

    # editing the guidance changes neither the image nor the batch's pin: the same command joins the batch
    (repo / "AGENTS.md").write_text("# inventory\n\nRun `python3 -m pytest -q` before you answer.\n")
    again = json.loads(_ok(run_args))
    assert (again["ran"], again["skipped"], again["image"]) == (0, 3, run["image"])
