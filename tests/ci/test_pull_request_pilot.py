"""The action's pilot A/B, end to end on the bundled example, as a dry run: the pull request changes
AGENTS.md and gets the pilot label; the action's ``dokimi`` step, run with the inputs GitHub passes, runs the
manifest's pilot tasks under the pull request's guidance (``guidance:tree`` at the head) and the base's
(``guidance:at=BASE``) with the real pinned Claude Code CLI against dokimi's scripted model
(docs/mock-model.md), compares them and comments the compare table with its power verdict on a local
stand-in for GitHub's API.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dokimi.ci.action import chosen_mode
from dokimi.ci.event import PullRequest
from dokimi.ci.pilot import PILOT_MARKER, PilotOutcome, pilot_comment
from dokimi.ci.scan import quote
from dokimi.repo.manifest import load_manifest
from dokimi.schemas.compare import CompareDoc, Comparison, Measure, Unpaired
from dokimi.schemas.report import ReportWarning
from dokimi.source import open_source
from tests.helpers.git import commit, git, git_repo
from tests.helpers.github_stand_in import ROOT, read_outputs, run_action_step, stand_in

REPO = "acme/calc"
TOKEN = "t0ken-for-the-stand-in"
NUMBER = 12


@pytest.mark.docker
@pytest.mark.harness
@pytest.mark.slow
def test_the_pilot_label_runs_the_dry_ab_and_comments_the_compare_table(
    docker_available: bool, claude_bin: Path, example: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_source(f"{example}@HEAD") as repo:
        loaded = load_manifest(repo.eval_snapshot(), manifest=None, manifest_file=None, required=True)
    assert loaded.manifest is not None and loaded.manifest.pilot is not None
    pilot_tasks = loaded.manifest.pilot.tasks
    base = git(example, "rev-parse", "HEAD").strip()
    agents = (example / "AGENTS.md").read_text()
    head = commit(example, "Guidance: say how to run one test", files={
        "AGENTS.md": agents + "\nRun one test file with `python -m pytest tests/test_parser.py`.\n"
    })  # fmt: skip
    event = tmp_path / "event.json"
    pull = {
        "number": NUMBER,
        "base": {"sha": base},
        "head": {"sha": head},
        "labels": [{"name": "dokimi-pilot"}],
    }
    event.write_text(
        json.dumps(
            {"action": "labeled", "label": {"name": "dokimi-pilot"}, "number": NUMBER, "pull_request": pull}
        )
    )
    home = tmp_path / "home"
    monkeypatch.setenv("DOKIMI_HOME", str(home))
    output = tmp_path / "output"
    output.write_text("")
    with stand_in(REPO, TOKEN) as github:
        done = run_action_step(
            {"token": TOKEN, "dry-run": "true", "harness-bin": str(claude_bin), "jobs": "2"},
            {
                "GITHUB_WORKSPACE": str(example),
                "GITHUB_REPOSITORY": REPO,
                "GITHUB_EVENT_NAME": "pull_request",
                "GITHUB_EVENT_PATH": str(event),
                "GITHUB_API_URL": github.url,
                "GITHUB_SHA": head,
                "GITHUB_OUTPUT": str(output),
                "GITHUB_ACTION_PATH": str(ROOT),
                "DOKIMI_HOME": str(home),
            },
        )
        assert done.returncode == 0, done.stderr
        (comment,) = github.comments
        assert not github.sarifs  # the pilot uploads no scan
    body = comment["body"]
    assert body.startswith(PILOT_MARKER) and f"#{NUMBER}" in body
    assert "**DRY RUN**" in body
    assert f"`guidance:at={base[:12]}` (the base's guidance)" in body
    for task in pilot_tasks:
        assert f"`{task}`" in body
    table = [line for line in body.splitlines() if line.startswith("| ")]
    assert table[0] == "| measure | base | PR | delta | 95% interval | up / down / tied | p |"
    gate = next(line for line in table if line.startswith("| gate |"))
    assert gate.startswith("| gate | 1.000 | 1.000 | +0.000 |"), gate  # both arms replay the oracle
    assert "- **gate**: " in body and "underpowered" in body  # two tasks cannot reach p < 0.05
    outputs = read_outputs(output)
    batch = Path(outputs["batch"])
    assert outputs["mode"] == "pilot" and batch == home / "runs" / "calc" / f"pr-{NUMBER}-{head[:12]}"
    results = sorted(batch.glob("*/*/*/*/rep0/result.json"))
    arms = {json.loads(p.read_text())["arm"] for p in results}
    assert arms == {f"guidance:at={base}", "guidance:tree"} and len(results) == 2 * len(pilot_tasks)


HOSTILE = "**x** @octocat <img src=x onerror=alert(1)> [l](http://e.invalid) |`a`|\n# h"


def test_the_pilot_comment_quotes_every_text_of_the_pull_request_or_an_agent(tmp_path: Path) -> None:
    gate = Measure(
        kind="gate", name="gate", tasks=2, baseline_mean=0.5, treatment_mean=1.0, delta=0.5, ci=(0.0, 1.0),
        interval="bootstrap", up=1, tied=1, p=0.5, mde=0.9, underpowered=True,
    )  # fmt: skip
    comparison = Comparison(
        treatment="guidance:tree", baseline="guidance:at=" + "b" * 40, model="m", effort=None, mode=None,
        measures=[gate], unpaired=[Unpaired(task="t" + HOSTILE, measure="gate", reason=HOSTILE)],
    )  # fmt: skip
    doc = CompareDoc(
        selectors=[],
        comparisons=[comparison],
        warnings=[ReportWarning(code="invalid_cells", message=HOSTILE)],
    )
    outcome = PilotOutcome(
        batch=tmp_path / "pr-1-abc", doc=doc, tasks=["fix" + HOSTILE], reps=1,
        baseline="guidance:at=" + "b" * 40, treatment="guidance:tree", dry_run=False, complete=False,
        model="m",
    )  # fmt: skip
    body = pilot_comment(outcome, 1)
    assert "| gate | 0.500 | 1.000 | +0.500 | [+0.000, +1.000] | 1 / 0 / 1 | 0.5 |" in body
    assert "underpowered" in body and "run the pilot again" in body
    outside_code = "".join(re.split(r"(`+).*?\1", body))  # what renders as Markdown
    for piece in ("**x**", "@octocat", "<img", "onerror", "](http", "# h"):
        assert piece not in outside_code, piece
    assert body.count(quote(HOSTILE)) == 2  # the reason and the warning, each on its line


def test_a_pilot_without_pilot_tasks_in_the_manifest_says_what_to_add(tmp_path: Path) -> None:
    manifest = "schema: repo_manifest.v1\nid: bare\n"
    repo = git_repo(tmp_path / "repo", {".agent-eval/repo-eval.yaml": manifest, "AGENTS.md": "Hi.\n"})
    base = git(repo, "rev-parse", "HEAD").strip()
    head = commit(repo, "more", files={"AGENTS.md": "Hello.\n"})
    event = tmp_path / "event.json"
    pull = {"number": 3, "base": {"sha": base}, "head": {"sha": head}, "labels": []}
    event.write_text(
        json.dumps({"action": "labeled", "label": {"name": "dokimi-pilot"}, "pull_request": pull})
    )
    done = run_action_step(
        {"token": "", "dry-run": "true"},
        {"GITHUB_WORKSPACE": str(repo), "GITHUB_REPOSITORY": REPO, "GITHUB_EVENT_NAME": "pull_request",
         "GITHUB_EVENT_PATH": str(event), "DOKIMI_HOME": str(tmp_path / "home")},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "names no pilot tasks" in done.stderr and "pilot: {tasks:" in done.stderr


def _pr(event_name: str, action: str | None = None, label: str | None = None) -> PullRequest:
    return PullRequest(3, "b" * 40, "a" * 40, (), event_name, action, label)


@pytest.mark.parametrize(
    ("pr", "mode"),
    [
        (_pr("pull_request", "opened"), "scan"),
        (_pr("pull_request", "synchronize"), "scan"),
        (_pr("pull_request", "labeled", "dokimi-pilot"), "pilot"),
        (_pr("pull_request", "labeled", "docs"), "scan"),
        (_pr("pull_request_target", "labeled", "dokimi-pilot"), "pilot"),
        (_pr("workflow_dispatch"), "pilot"),
    ],
)
def test_auto_pilots_on_the_label_or_a_dispatch_and_scans_otherwise(pr: PullRequest, mode: str) -> None:
    assert chosen_mode("auto", pr, "dokimi-pilot") == mode
    assert chosen_mode("scan", pr, "dokimi-pilot") == "scan"
