"""A dry run is labelled wherever its numbers are shown: the report, compare and every HTML page open with a
banner, its costs are zero, and repo plan refuses it as a pilot. Literal batches, no runner (the runner's side
is in tests/e2e/test_batch_e2e.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from dokimi.analysis.report import DRY_RUN_BANNER
from dokimi.cli.main import main
from dokimi.schemas.result import Result
from tests.helpers.batches import write_cell, write_pin
from tests.helpers.runs import dokimi_cli

NONE, TREE = "guidance:none", "guidance:tree"
DRY = {
    "dry_run": True,
    "cost_usd": 0.0,
    "cost_source": "dry_run",
    "simulated": {"cost_usd": 0.37, "tokens": {}},
}


def dry_batch(root: Path, *, reps: int = 2) -> Path:
    write_pin(root, dry_run=True)
    for task in ("t1", "t2", "t3"):
        for rep in range(reps):
            write_cell(root, task, NONE, rep=rep, passed=False, meta=True, **DRY)
            write_cell(root, task, TREE, rep=rep, passed=True, meta=True, **DRY)
    return root


@pytest.mark.slow
def test_report_of_a_dry_batch_opens_with_the_banner_and_shows_zero_cost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    batch = dry_batch(tmp_path / "dry")
    monkeypatch.setenv("COLUMNS", "400")
    assert main(["repo", "report", str(batch), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["dry_run"] is True
    assert {row["cost_mean"] for row in doc["rows"]} == {0.0}
    assert main(["repo", "report", str(batch), "--html", str(tmp_path / "site")]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0].startswith("DRY RUN:") and DRY_RUN_BANNER in " ".join(text.split())
    index = (tmp_path / "site" / "index.html").read_text()
    assert 'data-dry-run="true"' in index
    cell_pages = list((tmp_path / "site" / "cells").glob("*.html"))
    assert cell_pages and all('data-dry-run="true"' in page.read_text() for page in cell_pages)
    assert "never paid" in cell_pages[0].read_text()


@pytest.mark.slow
def test_compare_of_a_dry_batch_shows_the_banner_and_no_cost_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    batch = dry_batch(tmp_path / "dry")
    monkeypatch.setenv("COLUMNS", "400")
    html = tmp_path / "compare.html"
    assert main(["repo", "compare", str(batch), "--baseline", NONE, "--html", str(html)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("DRY RUN:") and "DRY RUN, 6 cells" in text
    assert 'data-dry-run="true"' in html.read_text()
    assert main(["repo", "compare", str(batch), "--baseline", NONE, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["dry_run"] is True and doc["selectors"][0]["batches"][0]["dry_run"] is True
    (comparison,) = doc["comparisons"]
    cost = next(m for m in comparison["measures"] if m["kind"] == "cost")
    assert (cost["delta"], cost["up"], cost["down"]) == (0.0, 0, 0)


def test_a_real_batch_has_no_banner_and_compare_warns_when_a_dry_arm_meets_a_real_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dry = dry_batch(tmp_path / "dry")
    real = tmp_path / "real"
    write_pin(real)
    for task in ("t1", "t2", "t3"):
        write_cell(real, task, NONE, passed=False)
    assert main(["repo", "report", str(real)]) == 0
    assert "DRY RUN" not in capsys.readouterr().out
    assert main(["repo", "compare", f"{dry}/{TREE}", "--baseline", f"{real}/{NONE}", "--json"]) == 0
    warnings = {w["code"]: w["message"] for w in json.loads(capsys.readouterr().out)["warnings"]}
    assert "a dry run" in warnings["dry_and_real"] and "a real run" in warnings["dry_and_real"]


@pytest.mark.slow
def test_plan_refuses_a_dry_pilot_unless_the_user_says_they_know(tmp_path: Path) -> None:
    batch = dry_batch(tmp_path / "dry")
    args = ["repo", "plan", str(batch), "--baseline", NONE, "--effect", "0.1"]
    refused = dokimi_cli(args)
    assert refused.returncode == 2 and "dry run" in refused.stderr and "no variance" in refused.stderr
    assert "--allow-dry-pilot" in refused.stderr
    allowed = dokimi_cli([*args, "--allow-dry-pilot", "--json"])
    assert allowed.returncode == 0, allowed.stderr
    doc = json.loads(allowed.stdout)
    assert doc["dry_run_pilot"] is True and doc["notes"][0].startswith("DRY-RUN PILOT")


def test_a_dry_result_costs_nothing_and_only_a_dry_result_is_simulated() -> None:
    base = {
        "schema": "repo_result.v1", "task": "t", "arm": NONE, "model": "m", "rep": 0, "harness": "h",
        "family": "fix", "gated": True, "passed": False, "duration_s": 1.0,
    }  # fmt: skip
    Result.model_validate({**base, **DRY})
    with pytest.raises(ValidationError, match="a dry run costs nothing"):
        Result.model_validate({**base, **DRY, "cost_usd": 0.37})
    with pytest.raises(ValidationError, match="only a dry run"):
        Result.model_validate({**base, "simulated": {"cost_usd": 0.37}, "cost_usd": 0.37})
