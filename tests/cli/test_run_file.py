"""``repo run -c run.yaml``: the run file fills every option the command line does not give."""

from __future__ import annotations

from pathlib import Path

import pytest

from dokimi.cli.main import main
from dokimi.cli.run import apply_run_file, run

RUN_FILE = """\
schema: repo_run_file.v1
arms: [guidance:none, guidance:raw]
models: [claude-haiku-4-5]
reps: 3
batch: pilot
harness: claude-code
bin: tools/claude
out: runs
"""


def _merged(tmp_path: Path, *args: str, text: str = RUN_FILE) -> dict[str, object]:
    path = tmp_path / "study" / "run.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    ctx = run.make_context("run", [str(tmp_path), "-c", str(path), *args])
    return apply_run_file(ctx, path)


def test_the_run_file_fills_the_options_with_paths_relative_to_itself(tmp_path: Path) -> None:
    merged = _merged(tmp_path)
    assert merged["arms"] == ("guidance:none", "guidance:raw")
    assert merged["models"] == ("claude-haiku-4-5",)
    assert (merged["reps"], merged["batch"], merged["harness"]) == (3, "pilot", "claude-code")
    assert merged["bin_"] == str(tmp_path / "study" / "tools" / "claude")
    assert merged["out"] == tmp_path / "study" / "runs"


def test_an_option_on_the_command_line_wins_over_the_run_file(tmp_path: Path) -> None:
    merged = _merged(tmp_path, "--reps", "1", "--arm", "guidance:bridge", "--out", "elsewhere")
    assert (merged["reps"], merged["arms"], merged["out"]) == (1, ("guidance:bridge",), Path("elsewhere"))
    assert merged["batch"] == "pilot"


def test_a_misspelled_run_file_key_is_refused_with_the_key_it_resembles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(RUN_FILE.replace("reps: 3", "rep: 3"))
    assert main(["repo", "run", str(tmp_path), "-c", str(path)]) == 2
    err = capsys.readouterr().err
    assert "rep: unknown key" in err and "did you mean 'reps'?" in err


def test_without_a_run_file_the_missing_options_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["repo", "run", str(tmp_path), "--model", "m"]) == 2
    err = capsys.readouterr().err
    assert "missing --arm (or arms: in a run file), --reps" in err and "--batch" in err
