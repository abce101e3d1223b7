"""The bundled study (examples/study-agentbench.yaml) end to end in a dry run: the real Claude Code CLI
against the scripted model server, three arms (none, tree, generated) of the example, then the one report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dokimi.schemas.study import StudyReport
from tests.helpers.runs import dokimi_cli

pytestmark = [pytest.mark.docker, pytest.mark.harness]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
STUDY = EXAMPLES / "study-agentbench.yaml"


def test_the_bundled_study_completes_in_a_dry_run_and_reports_every_part(
    docker_available: bool, claude_bin: Path, example: Path, tmp_path: Path
) -> None:
    out = tmp_path / "runs"
    args = [
        "repo", "study", "run", str(STUDY), "--source", f"{example}@HEAD", "--bin", str(claude_bin),
        "--out", str(out), "--dry-run", "--json",
    ]  # fmt: skip
    run = dokimi_cli(args)
    assert run.returncode == 0, run.stderr
    report = StudyReport.model_validate_json(run.stdout)
    assert report.question.startswith("Does the repository's own AGENTS.md help")
    assert report.arms == ["guidance:none", "guidance:tree", "guidance:generated"]
    applied = {g.arm: g for g in report.applied}
    assert applied["guidance:none"].tasks_with_guidance == 0
    assert applied["guidance:tree"].tasks_with_guidance == 2
    assert applied["guidance:tree"].sources and applied["guidance:tree"].sources[0].startswith("tree ")
    assert applied["guidance:generated"].tasks_with_guidance == 2
    assert applied["guidance:generated"].generated_pairs == 2
    treatments = {c.treatment for c in report.comparisons}
    assert treatments == {"guidance:tree", "guidance:generated"}
    for comparison in report.comparisons:
        gate = next(m for m in comparison.measures if m.name == "gate")
        assert gate.tasks == 2 and gate.delta is not None
    assert {p.treatment for p in report.power} == treatments
    assert report.dry_run is True
    for power in report.power:  # a dry run is no pilot: its scripted agents have no variance to learn from
        assert power.plan is None and "dry run" in str(power.error)
    costs = {c.arm: c for c in report.cost}
    assert set(costs) == set(report.arms) and all(c.cells == 4 for c in costs.values())
    batch = out / "study-agentbench"
    assert json.loads((batch / "study-report.json").read_text())["schema"] == "repo_study_report.v1"
    markdown = (batch / "study-report.md").read_text()
    for heading in ("# Study:", "## Arms as applied", "## Result", "## Power", "## Cost per arm"):
        assert heading in markdown
    assert "> **DRY RUN:" in markdown

    again = dokimi_cli(["repo", "study", "report", str(STUDY), "--out", str(out)])
    assert again.returncode == 0, again.stderr
    assert again.stdout == markdown
