"""dokimi repo rate end to end through the CLI: exit codes, --json, and the whole workflow."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dokimi.cli.main import main
from tests.rating.batchdata import make_batch

OUTCOMES = (
    "passed",
    "validation_passed",
    "human_accepted",
    "regression",
    "rework_required",
    "requirements_traceability",
)


def scored(run_id: str, rater: str, passed: bool) -> str:
    doc = {"schema": "repo_rating.v1", "run_id": run_id, "rater": rater, **{o: False for o in OUTCOMES}}
    doc["passed"] = passed
    return json.dumps(doc) + "\n"


def test_the_workflow_export_import_adjudicate_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = make_batch(tmp_path, with_git=False)
    out = tmp_path / "rating"
    assert main(["repo", "rate", "export", str(data.root), "--out", str(out), "--seed", "4", "--json"]) == 1
    exported = json.loads(capsys.readouterr().out)
    assert len(exported["blinded"]) == 4 and len(exported["withheld"]) == 1
    ids = exported["blinded"]
    key = str(out / "key.json")

    (tmp_path / "x.jsonl").write_text("".join(scored(i, "x", True) for i in ids))
    (tmp_path / "y.jsonl").write_text("".join(scored(i, "y", n != 0) for n, i in enumerate(ids)))
    assert (
        main(["repo", "rate", "import", str(tmp_path / "x.jsonl"), str(tmp_path / "y.jsonl"), "--key", key])
        == 0
    )
    capsys.readouterr()

    assert main(["repo", "rate", "adjudicate", "--key", key]) == 1  # one disagreement pending
    assert f"{ids[0]}: PENDING" in capsys.readouterr().out
    adjudication = {
        "schema": "repo_adjudication.v1",
        "run_id": ids[0],
        "adjudicator": "x",
        "adjudicated": True,
        "adjudication_notes": "n",
        **{o: False for o in OUTCOMES},
    }
    (tmp_path / "adj.jsonl").write_text(json.dumps(adjudication) + "\n")
    assert main(["repo", "rate", "adjudicate", str(tmp_path / "adj.jsonl"), "--key", key]) == 2
    assert "may not adjudicate" in capsys.readouterr().err
    adjudication["adjudicator"] = "z"
    (tmp_path / "adj.jsonl").write_text(json.dumps(adjudication) + "\n")
    assert main(["repo", "rate", "adjudicate", str(tmp_path / "adj.jsonl"), "--key", key]) == 0
    capsys.readouterr()

    assert main(["repo", "rate", "summary", "--key", key, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "repo_rating_summary.v1" and doc["final"] == 4 and doc["withheld"] == 1
    passed = {r["arm"]: (r["k"], r["n"]) for r in doc["rates"] if r["outcome"] == "passed"}
    assert sum(k for k, _ in passed.values()) == 3 and sum(n for _, n in passed.values()) == 4
    assert main(["repo", "rate", "summary", "--key", key]) == 0
    text = capsys.readouterr().out
    assert "rater agreement" in text and "withheld at export: 1" in text
    assert max(len(line) for line in text.splitlines()) <= 100  # fits 100 columns (stdout not a terminal)


@pytest.mark.slow
def test_import_of_a_bad_row_exits_2_with_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = make_batch(tmp_path, with_git=False, with_leak=False)
    out = tmp_path / "rating"
    assert main(["repo", "rate", "export", str(data.root), "--out", str(out), "--seed", "1"]) == 0
    capsys.readouterr()
    run_id = (out / "blinded" / "ids.txt").read_text().split()[0]
    bad = json.loads(scored(run_id, "x", True))
    del bad["human_accepted"]
    (tmp_path / "x.jsonl").write_text(scored(run_id, "y", True) + json.dumps(bad) + "\n")
    assert main(["repo", "rate", "import", str(tmp_path / "x.jsonl"), "--key", str(out / "key.json")]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'x.jsonl'}:2" in err and "human_accepted" in err


def test_import_of_a_leak_row_exits_1_and_names_the_reblind_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = make_batch(tmp_path, with_git=False, with_leak=False)
    out = tmp_path / "rating"
    main(["repo", "rate", "export", str(data.root), "--out", str(out), "--seed", "1"])
    run_id = (out / "blinded" / "ids.txt").read_text().split()[0]
    leak = {"schema": "repo_rating.v1", "run_id": run_id, "rater": "x", "blinding_leak": "a banner"}
    (tmp_path / "x.jsonl").write_text(json.dumps(leak) + "\n")
    capsys.readouterr()
    assert main(["repo", "rate", "import", str(tmp_path / "x.jsonl"), "--key", str(out / "key.json")]) == 1
    assert f"rate reblind {run_id}" in capsys.readouterr().out
