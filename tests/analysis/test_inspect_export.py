"""``repo export BATCH --format inspect``: the logs Inspect AI's own reader reads back, one per arm and model,
with a sample per cell (prompt, tool calls and outputs, answer, score), and that ``inspect view bundle`` (the
static build of Inspect's viewer) accepts."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from inspect_ai import log as inspect_log

from dokimi.cli.main import main
from tests.analysis.test_site import HOSTILE, NONE, RAW, fill_cell
from tests.helpers.batches import write_cell, write_pin
from tests.helpers.chromium import Browser


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


@pytest.mark.slow
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
    assert str(sample.input).startswith("Fix fix_parser: give Stack a __reversed__ method")
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
        ("bash", {"cmd": "echo " + HOSTILE}),
    ]
    outputs = [m.text for m in sample.messages if m.role == "tool"]
    assert outputs[0].startswith("1 failed") and "(exit code 1)" in outputs[0]
    assert sample.messages[-1].text.startswith("I fixed it.")
    assert sample.output.completion.startswith("I fixed it.")
    assert sample.metadata["cost_usd"] == 0.5 and sample.metadata["cell"].startswith(
        "fix_parser/guidance_raw/"
    )


@pytest.mark.slow
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


PROMPT = "Implement __reversed__ for Stack; *not* a <b>bold</b> claim."
USAGE = {
    "requests": 3, "turns": 3, "input_tokens": 1200, "output_tokens": 300, "cache_write_tokens": 50,
    "cache_read_tokens": 4000, "cost_usd": 0.01,
}  # fmt: skip
SIMULATED = {
    "cost_usd": 0.0015,
    "tokens": {"input_tokens": 1000, "output_tokens": 100, "cache_creation_input_tokens": 0,
               "cache_read_input_tokens": 7},
}  # fmt: skip


@pytest.fixture
def real_and_dry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Path]:
    """Two arms of one task exported from a real batch (gateway tokens) and from a dry one (simulated
    tokens); the prompt and answer hold Markdown and HTML."""
    real, dry = tmp_path / "real", tmp_path / "dry"
    write_pin(real)
    write_pin(dry, dry_run=True)
    for arm in (NONE, RAW):
        run_dir = write_cell(real, "stack", arm, model="m1", meta=True, usage=USAGE, cost_source="gateway")
        (run_dir / "task.json").write_text(json.dumps({"id": "stack", "prompt": PROMPT}))
        (run_dir / "answer.txt").write_text("Done: __reversed__ added. **bold?**")
        write_cell(
            dry,
            "stack",
            arm,
            model="m1",
            dry_run=True,
            cost_usd=0.0,
            cost_source="dry_run",
            simulated=SIMULATED,
        )
    out = {}
    for batch in (real, dry):
        out[batch.name] = tmp_path / f"{batch.name}-logs"
        assert main(["repo", "export", str(batch), "--format", "inspect", "--out", str(out[batch.name])]) == 0
    capsys.readouterr()
    return out


def test_the_arm_tokens_and_plain_text_prompts_reach_inspect(real_and_dry: dict[str, Path]) -> None:
    """Inspect's viewer shows a log by its task and display name: both carry the arm. Tokens are the gateway's
    (a real run) or the scripted ones of a dry run, labelled. Prompts are plain text: the log asks the viewer
    not to render Markdown, and the prompt reads back as written."""
    for kind, logs in real_and_dry.items():
        for path in sorted(logs.glob("*.eval")):
            log = inspect_log.read_eval_log(str(path))
            arm = log.eval.task_args["arm"]
            assert arm in (NONE, RAW) and log.eval.task == f"dokimi/calc/{arm}"
            assert log.eval.task_display_name is not None and arm in log.eval.task_display_name
            assert arm in (log.eval.tags or [])
            assert log.eval.viewer is not None and log.eval.viewer.trust_content is False
            assert log.samples is not None
            (sample,) = log.samples
            sample_usage = sample.model_usage["m1"]
            total = log.stats.model_usage["m1"]
            if kind == "real":
                assert str(sample.input) == PROMPT and sample.messages[0].text == PROMPT
                assert (sample_usage.input_tokens, sample_usage.output_tokens) == (1200, 300)
                assert (sample_usage.input_tokens_cache_write, sample_usage.input_tokens_cache_read) == (
                    50,
                    4000,
                )
                assert total.total_tokens == 5550 and "dry run" not in log.eval.task_display_name
            else:
                assert (sample_usage.input_tokens, sample_usage.output_tokens) == (1000, 100)
                assert sample_usage.input_tokens_cache_read == 7
                assert "dry run" in log.eval.task_display_name and "simulated" in log.eval.task_display_name
                assert "dry run" in (log.eval.tags or [])


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        return


@contextmanager
def serve(directory: Path) -> Iterator[str]:
    """A static HTTP server on loopback for ``directory`` (Inspect's viewer fetches its logs); its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietHandler, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
def test_inspect_s_own_viewer_names_the_arm_and_shows_the_prompt_as_plain_text(
    real_and_dry: dict[str, Path], tmp_path: Path, chromium_bin: Path
) -> None:
    """``inspect view bundle`` (the viewer of the installed inspect-ai) in headless Chromium: the log list
    names both arms, and a sample shows ``__reversed__`` and ``**bold?**`` as written, with no bold
    element."""
    inspect_cli = shutil.which("inspect")
    assert inspect_cli is not None, "the inspect command comes with inspect-ai"
    bundle = tmp_path / "bundle"
    done = subprocess.run(
        [inspect_cli, "view", "bundle", "--log-dir", str(real_and_dry["real"]), "--output-dir", str(bundle)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    log = next(p.name for p in (bundle / "logs").glob("*guidance-none*.eval"))
    with serve(bundle) as url, Browser(chromium_bin, tmp_path) as browser:
        listing = browser.open(f"{url}/index.html")
        text = listing.wait_until(
            "document.body.innerText.includes('dokimi/calc/guidance:raw') && document.body.innerText"
        )
        assert "dokimi/calc/guidance:none" in text
        listing.screenshot(tmp_path / "inspect-logs.png")
        sample = browser.open(f"{url}/index.html#/logs/{log}/samples/sample/stack/1/")
        text = sample.wait_until("document.body.innerText.includes('ASSISTANT') && document.body.innerText")
        assert PROMPT in text and "Done: __reversed__ added. **bold?**" in text
        assert sample.evaluate("document.querySelectorAll('strong, b, em').length") == 0
        sample.screenshot(tmp_path / "inspect-sample.png")
    print(f"\nInspect viewer screenshots: {tmp_path}", file=sys.__stderr__)
