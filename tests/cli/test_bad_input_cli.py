"""The bad inputs of issue 9's list, each through the command a user types: a clean error and its exit code,
never a traceback, never a hang."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dokimi.cli.main import main
from tests.helpers.batches import write_cell
from tests.helpers.git import commit, git_repo
from tests.helpers.runs import fake_harness, tiny_repo


def _run(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[int, str]:
    rc = main(args)
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert "Traceback" not in text
    return rc, text


@pytest.fixture
def run_base(tmp_path: Path) -> list[str]:
    tiny = tiny_repo(tmp_path / "tiny")
    profile, binary = fake_harness(tmp_path / "harness")
    return [
        "repo", "run", tiny.source(), "--manifest", ".agent-eval/repo-eval.yaml", "--reps", "1",
        "--batch", "b", "--out", str(tmp_path / "out"), "--harness", str(profile), "--bin", str(binary),
        "--agent-network", "none", "--allow-unchecked",
    ]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("option", ["--timeout", "--budget", "--max-batch-usd"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_limit_that_is_not_a_finite_number_is_refused(
    run_base: list[str], capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    rc, text = _run(capsys, [*run_base, "--arm", "guidance:raw", "--model", "m", option, value])
    assert rc == 2 and ("not a finite number" in text or "not in the range x>0" in text)


def test_tasks_check_refuses_a_nan_grade_timeout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tiny = tiny_repo(tmp_path / "tiny")
    args = ["repo", "tasks", "check", tiny.source(), "--manifest", ".agent-eval/repo-eval.yaml"]
    rc, text = _run(capsys, [*args, "--grade-timeout", "nan"])
    assert rc == 2 and "not a finite number" in text


@pytest.mark.slow
@pytest.mark.parametrize(("arms", "models"), [("", "m"), ("guidance:raw", ""), (",", "m"), (" ", "m")])
def test_an_empty_arm_or_model_exits_2_instead_of_running_nothing(
    run_base: list[str], capsys: pytest.CaptureFixture[str], arms: str, models: str
) -> None:
    rc, text = _run(capsys, [*run_base, "--arm", arms, "--model", models])
    assert rc == 2 and ("names nothing to run" in text or "missing --" in text or "is empty" in text)


def test_an_unknown_arm_exits_2(run_base: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    rc, text = _run(capsys, [*run_base, "--arm", "guidance:bogus", "--model", "m"])
    assert rc == 2 and "unknown arm" in text


def test_an_html_or_out_path_under_a_file_is_an_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    batch = tmp_path / "batch"
    write_cell(batch, "t1", "guidance:raw")
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    rc, text = _run(capsys, ["repo", "report", str(batch), "--html", str(blocker / "r.html")])
    assert rc == 2 and f"{blocker / 'r.html'}: cannot write here: a parent of it is a file" in text
    repo = git_repo(tmp_path / "r", {"AGENTS.md": "# hi\n"})
    rc, text = _run(capsys, ["repo", "scan", str(repo), "--out", str(blocker / "readiness.json")])
    assert rc == 2 and "cannot write here" in text


def test_a_fifo_as_a_cells_result_json_is_an_invalid_cell_not_a_hang(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    batch = tmp_path / "batch"
    write_cell(batch, "t1", "guidance:raw")
    run_dir = write_cell(batch, "t2", "guidance:raw")
    (run_dir / "result.json").unlink()
    os.mkfifo(run_dir / "result.json")
    rc, text = _run(capsys, ["repo", "report", str(batch), "--json"])
    assert rc in (0, 1)
    assert "FIFO" in text


def test_a_fifo_as_agents_md_in_a_working_tree_is_an_unreadable_guidance_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = git_repo(tmp_path / "r", {"AGENTS.md": "# hi\n"})
    (repo / "AGENTS.md").unlink()
    os.mkfifo(repo / "AGENTS.md")
    rc, text = _run(capsys, ["repo", "scan", str(repo)])
    assert "AGENTS.md cannot be read" in text and rc in (0, 1)


@pytest.mark.slow
def test_validate_finds_an_unbalanced_entry_point_and_an_oversize_prompt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tiny = tiny_repo(tmp_path / "tiny")
    manifest = (tiny.path / ".agent-eval" / "repo-eval.yaml").read_text()
    task = json.loads((tiny.path / ".agent-eval/tasks/fix_f/task.json").read_text())
    task["prompt"] = "x" * 200_000
    rev = commit(
        tiny.path,
        "bad inputs",
        files={
            ".agent-eval/repo-eval.yaml": manifest.replace(
                'grade: "python3 {eval_dir}/grade.py {run_dir}"', 'grade: "python3 \'unbalanced"'
            ),
            ".agent-eval/tasks/fix_f/task.json": json.dumps(task),
        },
    )
    rc, text = _run(
        capsys, ["repo", "validate", f"{tiny.path}@{rev}", "--manifest", ".agent-eval/repo-eval.yaml"]
    )
    assert rc == 1
    assert "No closing quotation" in text and "[entry_point_commands]" in text
    assert "is 200000 bytes, over the limit of 100000" in text and "[prompt_size]" in text


@pytest.mark.parametrize(
    "content", [b"schema: repo_manifest.v1\nid: a\nid: b\n", b"\x7fELF\x00\x01binary"], ids=["dup", "binary"]
)
def test_validate_calls_an_unparseable_manifest_invalid_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    repo = git_repo(tmp_path / "r", {".agent-eval/repo-eval.yaml": content})
    rc, text = _run(capsys, ["repo", "validate", str(repo)])
    assert rc == 1 and "[manifest_schema]" in text
