"""``repo tasks check`` of a task with ``egress`` (docs/network.md): its entry points reach the task's egress
hosts through the egress proxy, on a sealed network, and nothing else.

The task's grader fetches a file from its egress host (a server on loopback, known to the proxy under a test
name through ``--egress-resolve``) and decides on it; it also asks for a host the task does not name. The
task is sound, the grader's request was allowed and the other refused, both in the phase's egress.jsonl
with ``by: grade``; a grader cannot reach the host's services straight. ``repo run`` grades the task the
same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from dokimi.batch import cell_dir
from dokimi.cli.main import main
from tests.helpers.git import commit
from tests.helpers.http import serving
from tests.helpers.runs import MANIFEST, Tiny, dokimi_cli, fake_harness, run_args, task_json, tiny_repo

pytestmark = [pytest.mark.docker]

MIRROR = "mirror.dokimi-test.example"
OTHER = "other.dokimi-test.example"

GRADE_EGRESS_PY = r"""
import json, os, sys, urllib.request
run_dir = sys.argv[1]
task = json.load(open(os.path.join(run_dir, "task.json")))
def fetch(url, proxy=True):
    handlers = [] if proxy else [urllib.request.ProxyHandler({})]
    try:
        return urllib.request.build_opener(*handlers).open(url, timeout=60).read().decode()
    except Exception as e:
        return "refused: " + type(e).__name__ + " " + str(getattr(e, "code", ""))
wanted = fetch(task["mirror"])
other = fetch(task["other"])
straight = fetch(task["mirror_address"], proxy=False)
text = open(os.path.join(run_dir, "workspace", "f.txt")).read()
passed = text == "after\n" and wanted == "answer from the mirror\n"
doc = {"schema": "repo_grade.v1", "task": task["id"], "grader": "egress", "pass": passed,
       "metrics": {"mirror_ok": wanted == "answer from the mirror\n"},
       "details": {"other": other, "straight": straight}}
json.dump(doc, open(os.path.join(run_dir, "grade.json"), "w"))
"""


class _Mirror(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        body = b"answer from the mirror\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def mirror() -> Iterator[int]:
    with serving(_Mirror) as port:
        yield port


def _repo_with_egress(tmp_path: Path, mirror: int, image_id: str) -> tuple[Tiny, str]:
    """The tiny repository with task ``fetch``, whose egress is the mirror, graded by GRADE_EGRESS_PY; the
    commit that adds it."""
    tiny = tiny_repo(tmp_path / "tiny", {})
    keys = {
        "grader": "egress",
        "egress": [f"{MIRROR}:{mirror}"],
        "mirror": f"http://{MIRROR}:{mirror}/pkg.txt",
        "other": f"http://{OTHER}:{mirror}/pkg.txt",
        "mirror_address": f"http://127.0.0.1:{mirror}/pkg.txt",
    }
    # a manifest id (so an image) of its own: other sessions on the daemon remove the tiny repository's
    manifest = MANIFEST.replace("grade.py", "grade_egress.py").replace("id: runner-tiny", f"id: {image_id}")
    head = commit(
        tiny.path,
        "a task with egress",
        files={
            ".agent-eval/repo-eval.yaml": manifest,
            ".agent-eval/grade_egress.py": GRADE_EGRESS_PY,
            ".agent-eval/tasks/fetch/task.json": task_json("fetch", tiny.base, **keys),
        },
    )
    return tiny, head


def _logged(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "egress.jsonl").read_text().splitlines()]


def test_a_task_with_egress_is_sound_and_its_grader_reaches_only_its_hosts(
    docker_available: bool, tmp_path: Path, mirror: int, image_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    tiny, head = _repo_with_egress(tmp_path, mirror, image_id)
    out = tmp_path / "out"
    code = main([
        "repo", "tasks", "check", tiny.source(head), "--out", str(out), "--json",
        "--egress-resolve", f"{MIRROR}=127.0.0.1",
    ])  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    assert code == 0, json.dumps(report["tasks"], indent=1)[:4000]
    (task,) = report["tasks"]
    assert task["status"] == "ok", task
    checks = {c["name"]: c for c in task["checks"]}
    assert checks["oracle passes the gate"]["ok"] and checks["null fails the gate"]["ok"]
    assert "1 host(s) refused: other.dokimi-test.example" in checks["oracle: egress"]["detail"]

    for phase in ("null", "oracle"):
        run_dir = next(out.glob(f"**/fetch/{phase}"))
        grade = json.loads((run_dir / "grade.json").read_text())
        assert grade["metrics"]["mirror_ok"] is True
        assert grade["details"]["other"].startswith("refused: HTTPError 403")
        assert grade["details"]["straight"].startswith("refused:")  # no network but the proxy
        logged = _logged(run_dir)
        assert {(r["host"], r["allowed"], r["by"]) for r in logged} == {
            (MIRROR, True, "grade"),
            (OTHER, False, "grade"),
        }
        allowed = next(r for r in logged if r["allowed"])
        assert allowed["entry"] == f"{MIRROR}:{mirror}" and allowed["bytes_down"] > 0
    oracle_dir = next(out.glob("**/fetch/oracle"))
    assert "oracle.stdout" in {p.name for p in oracle_dir.iterdir()}


def test_repo_run_grades_a_task_with_egress_through_the_proxy_as_tasks_check_does(
    docker_available: bool, tmp_path: Path, mirror: int, image_id: str
) -> None:
    """A sealed ``repo run`` of the same task (the allow-list route: the fake harness with a vendor host of
    its own, which it never asks): its grade reaches the mirror through the proxy and nothing else, each
    attempt in the cell's egress.jsonl with ``by: grade``."""
    tiny, head = _repo_with_egress(tmp_path, mirror, image_id)
    profile, binary = fake_harness(tmp_path / "harness")
    profile.write_text(profile.read_text() + 'egress: ["vendor.dokimi-test.example:443"]\n')
    resolve = ("--egress-resolve", f"{MIRROR}=127.0.0.1")
    batch = f"egressrun-{image_id}"  # containers are named by their batch: one of the test's own
    done = dokimi_cli(run_args(tiny, tmp_path / "out", batch, profile, binary, "--json", *resolve, rev=head))
    assert done.returncode == 0, done.stderr
    cell = cell_dir(tmp_path / "out" / batch, "fetch", "guidance:raw", "m", None, 0)
    result = json.loads((cell / "result.json").read_text())
    assert result["passed"] is True and result["agent_network"] is None, result
    grade = json.loads((cell / "grade.json").read_text())
    assert grade["metrics"]["mirror_ok"] is True
    assert grade["details"]["other"].startswith("refused: HTTPError 403")
    assert grade["details"]["straight"].startswith("refused:")
    assert {(r["host"], r["allowed"], r["by"]) for r in _logged(cell)} == {
        (MIRROR, True, "grade"),
        (OTHER, False, "grade"),
    }
