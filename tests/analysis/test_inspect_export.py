"""``repo export BATCH --format inspect``: the logs Inspect AI's own reader reads back, one per arm and model,
with a sample per cell (prompt, tool calls and outputs, answer, score), and that ``inspect view bundle`` (the
static build of Inspect's viewer) accepts."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from inspect_ai import log as inspect_log

from dokimi.cli.main import main
from tests.analysis.test_site import NONE, RAW, fill_cell
from tests.helpers.batches import write_pin


@pytest.fixture
def exported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    batch = tmp_path / "pilot"
    write_pin(batch)
    for task in ("fix_parser", "add_feature"):
        for rep in (0, 1):
            fill_cell(batch, task, NONE, rep, passed=rep == 0 and task == "fix_parser")
            fill_cell(batch, task, RAW, rep, passed=True)
    out = tmp_path / "logs"
    assert main(["repo", "export", str(batch), "--format", "inspect", "--out", str(out), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    return {"out": out, "logs": {log["arm"]: Path(log["path"]) for log in listed["logs"]}}


def test_one_log_per_arm_and_model_that_inspect_reads_back(exported: dict[str, object]) -> None:
    logs = exported["logs"]
    assert isinstance(logs, dict) and sorted(logs) == [NONE, RAW]
    for arm, path in logs.items():
        log = inspect_log.read_eval_log(str(path))
        assert log.status == "success" and log.eval.model == "m1"
        assert log.eval.metadata is not None and log.eval.metadata["dokimi"]["arm"] == arm
        assert log.samples is not None and len(log.samples) == 4
        assert sorted((s.id, s.epoch) for s in log.samples) == [
            ("add_feature", 1), ("add_feature", 2), ("fix_parser", 1), ("fix_parser", 2)
        ]  # fmt: skip
        values = {(s.id, s.epoch): s.scores["dokimi"].value for s in log.samples}
        expected = 1.0 if arm == RAW else 0.25
        assert log.results is not None and log.results.scores[0].metrics["accuracy"].value == expected
        if arm == NONE:
            assert values == {("fix_parser", 1): 1.0, ("fix_parser", 2): 0.0, ("add_feature", 1): 0.0,
                              ("add_feature", 2): 0.0}  # fmt: skip


def test_a_sample_carries_the_prompt_the_tool_calls_their_output_and_the_answer(
    exported: dict[str, object],
) -> None:
    logs = exported["logs"]
    assert isinstance(logs, dict)
    log = inspect_log.read_eval_log(str(logs[RAW]))
    assert log.samples is not None
    sample = next(s for s in log.samples if s.id == "fix_parser" and s.epoch == 1)
    assert str(sample.input).startswith("Fix fix_parser.")
    calls = [
        (c.function, c.arguments)
        for m in sample.messages
        if m.role == "assistant"
        for c in m.tool_calls or []
    ]
    assert calls == [
        ("bash", {"cmd": "pytest -q tests/"}),
        ("read", {"path": "calc/parser.py"}),
        ("edit", {"path": "calc/parser.py"}),
        ("WebSearch", {}),
    ]
    outputs = [m.text for m in sample.messages if m.role == "tool"]
    assert outputs[0].startswith("1 failed") and "(exit code 1)" in outputs[0]
    assert sample.messages[-1].text.startswith("I fixed it.")
    assert sample.output.completion.startswith("I fixed it.")
    assert sample.metadata["cost_usd"] == 0.5 and sample.metadata["cell"].startswith(
        "fix_parser/guidance_raw/"
    )


def test_inspect_view_bundle_accepts_the_logs(exported: dict[str, object], tmp_path: Path) -> None:
    inspect_cli = shutil.which("inspect")
    assert inspect_cli is not None, "the inspect command comes with inspect-ai"
    bundle = tmp_path / "bundle"
    done = subprocess.run(
        [inspect_cli, "view", "bundle", "--log-dir", str(exported["out"]), "--output-dir", str(bundle)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (bundle / "index.html").is_file()
    assert sorted(p.name for p in (bundle / "logs").glob("*.eval")) == sorted(
        p.name for p in Path(str(exported["out"])).glob("*.eval")
    )


def test_a_batch_with_no_finished_cell_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_pin(tmp_path / "empty")
    assert main(["repo", "export", str(tmp_path / "empty"), "--format", "inspect"]) == 2
    assert "no finished cell" in capsys.readouterr().err
