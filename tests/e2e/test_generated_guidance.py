"""guidance:generated end to end: the real Claude Code CLI runs its own generator (``/init``) against the
scripted model server in the sealed agent container, once per (task, model); the file it wrote is recorded
with its blob SHA and every rep starts from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dokimi.batch import cell_dir
from dokimi.repo.workspace import blob_sha
from dokimi.runner.guidance import DRY_RUN_GUIDANCE, DRY_RUN_GUIDANCE_TEXT
from dokimi.schemas.generated import Generated
from dokimi.schemas.meta import Meta
from tests.helpers.harness import pinned_version
from tests.helpers.runs import dokimi_cli

pytestmark = [pytest.mark.docker, pytest.mark.harness]

TASK = "fix_power_assoc"
MODEL = "claude-haiku-4-5"


def test_init_runs_once_per_task_and_model_and_every_rep_starts_from_its_file(
    docker_available: bool, claude_bin: Path, example: Path, tmp_path: Path
) -> None:
    out = tmp_path / "runs"
    args = [
        "repo", "run", f"{example}@HEAD", "--manifest", ".agent-eval/repo-eval.yaml",
        "--task", TASK, "--arm", "guidance:generated,guidance:none", "--model", MODEL, "--reps", "2",
        "--batch", "gen", "--out", str(out), "--bin", str(claude_bin), "--dry-run", "-j", "2", "--json",
    ]  # fmt: skip
    first = dokimi_cli(args)
    assert first.returncode == 0, first.stderr
    batch = out / "gen"
    (record_path,) = batch.glob("_eval/generated/*/*/generated.json")
    record = Generated.model_validate_json(record_path.read_text())
    want_sha = blob_sha(DRY_RUN_GUIDANCE_TEXT.encode())
    assert [(f.path, f.sha) for f in record.files] == [(DRY_RUN_GUIDANCE, want_sha)]
    assert (record.prompt, record.dry_run, record.agent_rc, record.harness_version) == (
        "/init",
        True,
        0,
        pinned_version("claude-code"),
    )
    # the CLI's own /init ran: its init prompt is what the harness sent the scripted model
    requests = (record_path.parent / "generator.requests.jsonl").read_text()
    assert "Please analyze this codebase and create a CLAUDE.md file" in requests
    # and its trace holds the Bash call that wrote the file
    trace = (record_path.parent / "generator.stdout").read_text()
    assert '"type":"system"' in trace.replace(" ", "") and "base64 -d > CLAUDE.md" in trace
    stamp = record_path.stat().st_mtime_ns
    for rep in (0, 1):
        gen_meta = Meta.model_validate_json(
            (cell_dir(batch, TASK, "guidance:generated", MODEL, None, rep) / "meta.json").read_text()
        )
        none_meta = Meta.model_validate_json(
            (cell_dir(batch, TASK, "guidance:none", MODEL, None, rep) / "meta.json").read_text()
        )
        assert [(f.path, f.sha) for f in gen_meta.guidance_files or []] == [(DRY_RUN_GUIDANCE, want_sha)]
        assert gen_meta.guidance_source == "generated"
        assert none_meta.guidance_files == []
        result = json.loads(
            (cell_dir(batch, TASK, "guidance:generated", MODEL, None, rep) / "result.json").read_text()
        )
        assert result["passed"] is True  # the oracle-derived script still fixes the bug

    report = dokimi_cli(["repo", "report", str(batch), "--json"])
    assert report.returncode == 0, report.stderr
    guidance = {g["arm"]: g for g in json.loads(report.stdout)["guidance"]}
    assert guidance["guidance:generated"]["tasks_with_guidance"] == 1
    assert guidance["guidance:generated"]["generated_pairs"] == 1
    assert guidance["guidance:none"]["tasks_with_guidance"] == 0

    again = dokimi_cli([*args[:-1], "--reps", "3", "--json"])
    assert again.returncode == 0, again.stderr
    assert record_path.stat().st_mtime_ns == stamp  # reused, not generated again
    rep2 = Meta.model_validate_json(
        (cell_dir(batch, TASK, "guidance:generated", MODEL, None, 2) / "meta.json").read_text()
    )
    assert [(f.path, f.sha) for f in rep2.guidance_files or []] == [(DRY_RUN_GUIDANCE, want_sha)]
