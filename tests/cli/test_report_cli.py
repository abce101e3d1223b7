"""`dokimi repo report` and `dokimi repo compare` on the command line: output, --json, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dokimi.cli.main import main
from tests.helpers.batches import start_cell, write_cell, write_pin, write_plan

NONE, RAW = "guidance:none", "guidance:raw"


@pytest.fixture
def batch(tmp_path: Path) -> Path:
    root = tmp_path / "pilot"
    write_pin(root)
    write_plan(root, [(t, a, "m1", None, r) for t in ("t1", "t2") for a in (NONE, RAW) for r in (0, 1)])
    for task in ("t1", "t2"):
        for rep in (0, 1):
            write_cell(root, task, NONE, rep=rep, passed=False, agent_network="host")
            if (task, rep) != ("t2", 1):
                write_cell(root, task, RAW, rep=rep, passed=True, agent_network="host")
    start_cell(root, "t2", RAW, rep=1)
    return root


def test_report_json_is_a_repo_report_document(batch: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["repo", "report", str(batch), "--json", "--cutoff", "m1=2025-01-01"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "repo_report.v1"
    assert doc["counts"] == {"finished": 7, "missing": 1, "invalid": 0, "infra_errors": 0}
    raw_t2 = next(r for r in doc["rows"] if r["task"] == "t2" and r["arm"] == RAW)
    assert (raw_t2["passes"], raw_t2["gated"], raw_t2["missing"], raw_t2["cutoff"]) == (1, 1, 1, "before")


def test_report_text_shows_the_rows_and_warns_on_stderr(
    batch: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["repo", "report", str(batch)]) == 0
    out, err = capsys.readouterr()
    assert "7 finished, 1 missing, 0 invalid" in out
    assert "2/2" in out and "0/2" in out
    assert "warning: agent_network" in err


def test_report_of_a_directory_that_is_no_batch_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["repo", "report", str(tmp_path)]) == 2
    assert "not a batch" in capsys.readouterr().err
    assert main(["repo", "report", str(tmp_path / "missing")]) == 2


def test_report_of_a_batch_whose_pin_is_corrupt_says_so_not_that_there_is_no_eval_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "b"
    write_pin(root)
    (root / "_eval" / "batch.json").write_text('{"schema": "repo_batch.v1", "manifest_id": ')
    assert main(["repo", "report", str(root)]) == 2
    err = capsys.readouterr().err
    assert "_eval/batch.json cannot be read" in err and "no _eval/ directory" not in err


def test_report_with_a_bad_cutoff_exits_2(batch: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["repo", "report", str(batch), "--cutoff", "m1"]) == 2
    assert "MODEL=DATE" in capsys.readouterr().err


def test_compare_json_is_a_repo_compare_document(batch: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["repo", "compare", str(batch), "--baseline", NONE, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "repo_compare.v1"
    gate = next(m for m in doc["comparisons"][0]["measures"] if m["name"] == "gate")
    assert (gate["tasks"], gate["delta"], gate["up"]) == (2, 1.0, 2)
    assert gate["ci"] == [1.0, 1.0]
    assert gate["p"] == pytest.approx(0.5)  # two tasks up: 2 of 4 sign assignments reach |2|
    assert gate["p_holm"] == pytest.approx(0.5)


def test_compare_text_names_batches_and_pins(batch: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["repo", "compare", str(batch), "--baseline", NONE]) == 0
    out = capsys.readouterr().out
    assert "baseline guidance:none" in out and "treatment guidance:raw" in out
    assert "eval_dir sha256:eval1" in out and "claude-code 2.1.328" in out
    assert "+1.000" in out


def test_compare_refusals_exit_2(batch: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["repo", "compare", str(batch), "--baseline", NONE, "--metric", "absent"]) == 2
    assert "--metric absent" in capsys.readouterr().err
    assert main(["repo", "compare", str(batch), f"{batch}/{RAW}", "--baseline", NONE]) == 2
    assert "select the same cells" in capsys.readouterr().err
    assert main(["repo", "compare", str(batch)]) == 2  # --baseline is required
