"""A harness's output is the agent's to shape (a model's tool input, a process writing to the harness's
stdout): a stream-json trace holding a line nested 100,000 deep and a number of 5,000 digits, through
``repo run`` on the real daemon, then ``repo report --html`` and ``repo export``. The cell is graded as
usual, the hostile lines are dropped as garbage, and the batch's report and export are whole (issue 20: the
same line in events.jsonl made both exit 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dokimi.batch import cell_dir
from tests.attacks.conftest import Example, attacker, dokimi, run_args

pytestmark = pytest.mark.docker

HARNESS = r"""python3 - <<'PY'
import json
print(json.dumps({"type": "system", "subtype": "init", "cwd": "/eval/run/workspace", "session_id": "s"}))
print('{"type": "assistant", "message": ' * 100000 + "1" + "}" * 100000)
print('{"type": "assistant", "message": {"id": "m1", "usage": {"input_tokens": ' + "9" * 5000 + "}}}")
print(json.dumps({"type": "assistant", "message": {"id": "m2", "content": [
    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls", "x": [[[[[[[[1]]]]]]]]}}]}}))
print(json.dumps({"type": "result", "subtype": "success", "result": "real answer", "total_cost_usd": 0.01,
                  "num_turns": 1, "is_error": False}))
PY"""


def test_a_trace_nested_past_the_parser_leaves_the_cell_its_report_and_its_export_whole(
    docker_available: bool, example: Example, tmp_path: Path, batch_name: str
) -> None:
    who = attacker(tmp_path / "agent", HARNESS)
    who.profile.write_text(who.profile.read_text().replace("trace: text", "trace: claude-stream-json"))
    who.binary.write_text(who.binary.read_text().replace("\necho done\n", "\n"))
    out = tmp_path / "out"
    proc = dokimi(run_args(example, out, batch_name, who))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    run_dir = cell_dir(out / batch_name, "fix_power_assoc", "guidance:raw", "m", None, 0)
    result = json.loads((run_dir / "result.json").read_text())
    assert result["grader_failure"] is False and result["passed"] is False
    assert (run_dir / "answer.txt").read_text() == "real answer"
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert [(e["kind"], e["text"]) for e in events] == [("command", "ls")]

    report = dokimi(["repo", "report", str(out / batch_name), "--html", str(tmp_path / "site")])
    assert report.returncode == 0 and "Traceback" not in report.stderr, report.stderr
    assert len(list((tmp_path / "site" / "cells").iterdir())) == 1
    pytest.importorskip("inspect_ai")
    export = dokimi(
        ["repo", "export", str(out / batch_name), "--format", "inspect", "--out", str(tmp_path / "logs")]
    )
    assert export.returncode == 0 and "Traceback" not in export.stderr, export.stderr
