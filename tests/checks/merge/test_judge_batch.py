"""The rubric judge inside a batch, a regrade and tasks check: the real Claude Code CLI as the judge against
the scripted model server on the host, real containers, the fake harness of tests/helpers/runs.py as the agent
(its EDIT prompt writes "after" to f.txt, which the rubric's one blocker asks for).

The server's captured requests are the proof that the judge was called: a verdict served from the cache makes
no request.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dokimi.batch import cell_dir
from dokimi.support.mockmodel import MockModelServer
from tests.helpers.git import commit
from tests.helpers.runs import dokimi_cli, fake_harness, remove_tiny_images, run_args, tiny_repo

pytestmark = [pytest.mark.docker, pytest.mark.harness]

MODEL = "claude-haiku-4-5"
#: The scripted judge copies the verdict marker (its nonce is drawn per call) from the request it answers.
MARKER = "{{match:<<<VERDICT-[0-9a-f]+>>>}}\n"


def rubric(task: str) -> str:
    doc: dict[str, Any] = {
        "schema": "repo_rubric.v1",
        "task": task,
        "intent": "f.txt says after",
        "scope": {"allowed_globs": ["*.txt"], "denied_globs": [".agent-eval/**"], "max_files": 2},
        "blockers": [{"id": "B1", "criterion": "f.txt holds exactly 'after'", "rationale": "the task",
                      "evidence": "f.txt:1"}],
        "non_blockers": [{"id": "N1", "criterion": "no stray whitespace", "weight": 1}],
        "hack_report": {"lazy_solution": "none", "alt_valid_solution": "none"},
    }  # fmt: skip
    return json.dumps(doc, indent=2) + "\n"


def answer(b1: str, n1: str = "pass") -> dict[str, str]:
    """A scripted judge's answer (its verdict marker copied from the request it answers)."""
    reasons = {"pass": "Meets the criterion.", "fail": "Does not meet the criterion."}
    verdicts = [{"id": i, "verdict": v, "reason": reasons[v]} for i, v in (("B1", b1), ("N1", n1))]
    return {"final": MARKER + json.dumps({"verdicts": verdicts})}


def judge_requests(server: MockModelServer) -> list[str]:
    return [r.raw.decode("utf-8", "replace") for r in server.requests if r.main_loop]


@pytest.fixture
def name() -> Iterator[str]:
    """The batch's name, and the manifest id of the test's own images (removed at its end)."""
    found = f"judge-{uuid.uuid4().hex[:10]}"
    yield found
    remove_tiny_images(found)


@pytest.fixture
def scripted_judge(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Starts a scripted model server and points the judge (through the environment dokimi passes to it)
    at it; yields a function that starts the server with a script."""
    servers: list[MockModelServer] = []

    def start(script: list[dict[str, str]]) -> MockModelServer:
        server = MockModelServer(script).__enter__()
        servers.append(server)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "dokimi-test")
        return server

    yield start
    for server in servers:
        server.__exit__(None, None, None)


def test_the_regrade_sample_calls_the_judge_again_with_its_cache_bypassed(
    docker_available: bool, claude_bin: Path, tmp_path: Path, name: str, scripted_judge: Any
) -> None:
    tiny = tiny_repo(tmp_path / "tiny", {"merge_gated": {"gate": ["pass", "mergeable"]}}, manifest_id=name)
    eval_sha = commit(
        tiny.path, "rubric", files={".agent-eval/tasks/merge_gated/rubric.json": rubric("merge_gated")}
    )
    profile, binary = fake_harness(tmp_path / "harness")
    judge = ["--judge-model", MODEL, "--judge-bin", str(claude_bin)]

    server = scripted_judge([answer("pass")])
    proc = dokimi_cli(run_args(tiny, tmp_path / "out", name, profile, binary, *judge, "--json", rev=eval_sha))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(judge_requests(server)) == 1
    batch = tmp_path / "out" / name
    run_dir = cell_dir(batch, "merge_gated", "guidance:raw", "m", None, 0)
    result = json.loads((run_dir / "result.json").read_text())
    assert result["gate_results"] == {"pass": True, "mergeable": True} and result["passed"] is True
    assert result["metrics"]["merge_score"] == 1.0
    assert json.loads((run_dir / "merge.json").read_text())["judge"]["model"] == MODEL
    assert list((batch / "_eval" / "judge-cache").rglob("*.json")), "the run's verdict is cached"

    # the same verdict again: the judge was really called (one request on the wire), and nothing moved
    again = scripted_judge([answer("pass")])
    regrade = dokimi_cli(["repo", "regrade", str(batch), "--judge-bin", str(claude_bin), "--json"])
    assert regrade.returncode == 0, regrade.stdout + regrade.stderr
    requests = judge_requests(again)
    assert len(requests) == 1 and "+after" in requests[0]  # the cell's stored diff, judged anew
    assert json.loads(regrade.stdout)["mismatched"] == 0

    # a judge that changes its mind on the same input is what the sample is there to find
    flipped = scripted_judge([answer("fail")])
    regrade = dokimi_cli(["repo", "regrade", str(batch), "--judge-bin", str(claude_bin), "--json"])
    assert regrade.returncode == 1, regrade.stdout + regrade.stderr
    assert len(judge_requests(flipped)) == 1
    (cell,) = json.loads(regrade.stdout)["cells"]
    moved = {m["what"]: (m["original"], m["regraded"]) for m in cell["mismatches"]}
    assert moved["metric:mergeable"] == (True, False) and moved["passed"] == (True, False)


def test_tasks_check_makes_no_model_call_and_has_no_judge_option(
    docker_available: bool, claude_bin: Path, tmp_path: Path, name: str, scripted_judge: Any
) -> None:
    """tasks check stays free of LLM calls: mergeable is decided on the deterministic checks there, and the
    judge's part is repo rubric check's (the paid step)."""
    tiny = tiny_repo(tmp_path / "tiny", {"merge_gated": {"gate": ["pass", "mergeable"]}}, manifest_id=name)
    eval_sha = commit(
        tiny.path, "rubric", files={".agent-eval/tasks/merge_gated/rubric.json": rubric("merge_gated")}
    )
    check = ["repo", "tasks", "check", tiny.source(eval_sha), "--manifest", ".agent-eval/repo-eval.yaml"]
    refused = dokimi_cli([*check, "--judge-model", MODEL, "--judge-bin", str(claude_bin)])
    assert refused.returncode == 2 and "tasks check makes no model call" in refused.stderr
    assert "repo rubric check" in refused.stderr
    image = None
    try:
        server = scripted_judge([answer("fail"), answer("fail")])
        proc = dokimi_cli([*check, "--json", "--out", str(tmp_path / "check")])
        image = json.loads(proc.stdout)["image"] if proc.stdout.startswith("{") else None
        assert proc.returncode == 0, proc.stdout + proc.stderr
        (report,) = json.loads(proc.stdout)["tasks"]
        assert report["status"] == "ok", report["problems"]
        assert report["oracle"]["gate_results"] == {"pass": True, "mergeable": True}
        assert report["null"]["metrics"]["mergeable"] is False
        assert server.requests == []  # not one request reached a model
        oracle_merge = json.loads((tmp_path / "check" / "merge_gated" / "oracle" / "merge.json").read_text())
        assert oracle_merge["judge"] is None
        assert oracle_merge["reasons"] == [
            "mergeable on the deterministic checks; the judge's part is repo rubric check's"
        ]
    finally:
        if image is not None:
            subprocess.run(["docker", "rmi", "-f", image], capture_output=True, check=False)


def report_of(batch: Path) -> tuple[dict[str, Any], str]:
    as_json = dokimi_cli(["repo", "report", str(batch), "--json"])
    as_text = dokimi_cli(["repo", "report", str(batch)])
    assert as_json.returncode == 0 and as_text.returncode == 0, as_json.stderr + as_text.stderr
    return json.loads(as_json.stdout), as_text.stdout


def test_a_batch_judged_under_a_draft_rubric_is_provisional_in_the_report_until_approved(
    docker_available: bool, claude_bin: Path, tmp_path: Path, name: str, scripted_judge: Any
) -> None:
    """Checked by issue 26: a draft rubric marked provisional in the report. A batch keeps the rubric it was
    judged under (its exported eval dir): approving the rubric later makes the next batch's results final,
    never the earlier batch's."""
    tiny = tiny_repo(tmp_path / "tiny", {"merge_gated": {"gate": ["pass", "mergeable"]}}, manifest_id=name)
    draft_sha = commit(
        tiny.path, "rubric", files={".agent-eval/tasks/merge_gated/rubric.json": rubric("merge_gated")}
    )
    profile, binary = fake_harness(tmp_path / "harness")
    judge = ["--judge-model", MODEL, "--judge-bin", str(claude_bin)]
    scripted_judge([answer("pass")])
    drafted = dokimi_cli(run_args(tiny, tmp_path / "out", name, profile, binary, *judge, rev=draft_sha))
    assert drafted.returncode == 0, drafted.stdout + drafted.stderr
    doc, text = report_of(tmp_path / "out" / name)
    (row,) = doc["rows"]
    assert row["rubric_provisional"] is True and row["mergeable_rate"] == 1.0
    assert (
        "* a draft rubric (not yet approved by a maintainer): its mergeable results are provisional" in text
    )
    assert "1/1*" in text  # mergeable 1 of 1, marked provisional

    approve = ["repo", "rubric", "approve", "merge_gated", "--by", "ada", "-C", str(tiny.path),
               "--manifest", ".agent-eval/repo-eval.yaml"]  # fmt: skip
    approved = dokimi_cli(approve)
    assert approved.returncode == 0, approved.stdout + approved.stderr
    approved_sha = commit(tiny.path, "approve the rubric")
    scripted_judge([answer("pass")])
    later = dokimi_cli(
        run_args(tiny, tmp_path / "out", f"{name}-b", profile, binary, *judge, rev=approved_sha)
    )
    assert later.returncode == 0, later.stdout + later.stderr
    doc, text = report_of(tmp_path / "out" / f"{name}-b")
    assert [r["rubric_provisional"] for r in doc["rows"]] == [False]
    assert "a draft rubric" not in text and "1/1*" not in text
    assert report_of(tmp_path / "out" / name)[0]["rows"][0]["rubric_provisional"] is True


def test_a_batch_judged_through_codex_with_a_gemini_second_judge(
    docker_available: bool,
    codex_bin: Path,
    gemini_bin: Path,
    node_bin: Path,
    tmp_path: Path,
    name: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """repo run --judge-harness codex --second-judge-harness gemini-cli: each judge speaks its own API (one
    scripted server answers both, the primary first), merge.json records each harness, result.json both
    judges, and the report the judges' agreement per blocker."""
    tiny = tiny_repo(tmp_path / "tiny", {"merge_gated": {"gate": ["pass", "mergeable"]}}, manifest_id=name)
    eval_sha = commit(
        tiny.path, "rubric", files={".agent-eval/tasks/merge_gated/rubric.json": rubric("merge_gated")}
    )
    profile, binary = fake_harness(tmp_path / "harness")
    judges = ["--judge-harness", "codex", "--judge-model", "gpt-5-mini", "--judge-bin", str(codex_bin),
              "--second-judge-harness", "gemini-cli", "--second-judge-model", "gemini-2.5-flash",
              "--second-judge-bin", str(gemini_bin.resolve())]  # fmt: skip
    with MockModelServer([answer("pass"), answer("fail")]) as server:
        for endpoint, key in (
            ("OPENAI_BASE_URL", "OPENAI_API_KEY"),
            ("GOOGLE_GEMINI_BASE_URL", "GEMINI_API_KEY"),
        ):
            monkeypatch.setenv(endpoint, server.url)
            monkeypatch.setenv(key, "dokimi-test")
        proc = dokimi_cli(run_args(tiny, tmp_path / "out", name, profile, binary, *judges, rev=eval_sha))
        paths = [r.path for r in server.requests if r.main_loop]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert paths[0] == "/responses" and "gemini-2.5-flash:streamGenerateContent" in paths[1]
    batch = tmp_path / "out" / name
    run_dir = cell_dir(batch, "merge_gated", "guidance:raw", "m", None, 0)
    merge = json.loads((run_dir / "merge.json").read_text())
    assert (merge["judge"]["harness"], merge["judge"]["model"], merge["mergeable"]) == (
        "codex",
        "gpt-5-mini",
        True,
    )
    second = merge["second_judge"]
    assert (second["harness"], second["model"], second["mergeable"]) == (
        "gemini-cli",
        "gemini-2.5-flash",
        False,
    )
    result = json.loads((run_dir / "result.json").read_text())
    assert result["judges"] == ["gpt-5-mini", "gemini-2.5-flash"] and result["passed"] is True
    agreement = report_of(batch)[0]["judge_agreement"]
    (b1,) = agreement["blockers"]
    assert (b1["task"], b1["blocker"], b1["cells"], b1["agreed"]) == ("merge_gated", "B1", 1, 0)
    assert b1["disagreements"] == [f"{run_dir.relative_to(batch).as_posix()}: pass vs fail"]


def test_a_held_out_rubric_from_a_private_path_judges_the_batch_and_is_pinned_with_it(
    docker_available: bool, claude_bin: Path, tmp_path: Path, name: str, scripted_judge: Any
) -> None:
    """repo run --rubrics DIR: the repository holds no rubric (its tasks come from public PRs), the private
    path does; the judge judges against it, the batch's exported eval dir keeps it (a regrade and the report
    read it there), and the pin's digest covers it. A DIR inside the repository is public: refused."""
    tiny = tiny_repo(tmp_path / "tiny", {"merge_gated": {"gate": ["pass", "mergeable"]}}, manifest_id=name)
    private = tmp_path / "private" / "merge_gated"
    private.mkdir(parents=True)
    (private / "rubric.json").write_text(rubric("merge_gated"), encoding="utf-8")
    profile, binary = fake_harness(tmp_path / "harness")
    judge = ["--judge-model", MODEL, "--judge-bin", str(claude_bin)]

    public = ["--rubrics", str(tiny.path / ".agent-eval")]
    inside = dokimi_cli(run_args(tiny, tmp_path / "out", name, profile, binary, *judge, *public))
    assert inside.returncode == 2 and "a held-out rubric there is public" in inside.stderr, inside.stderr

    server = scripted_judge([answer("fail")])
    args = run_args(tiny, tmp_path / "out", name, profile, binary, *judge, "--rubrics", str(private.parent))
    proc = dokimi_cli([*args, "--json"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (request,) = judge_requests(server)
    assert "f.txt holds exactly 'after'" in request  # the held-out rubric's blocker, judged
    batch = tmp_path / "out" / name
    run_dir = cell_dir(batch, "merge_gated", "guidance:raw", "m", None, 0)
    result = json.loads((run_dir / "result.json").read_text())
    assert result["gate_results"] == {"pass": True, "mergeable": False} and result["passed"] is False
    kept = batch / "_eval" / "content" / "tasks" / "merge_gated" / "rubric.json"
    assert kept.read_text() == rubric("merge_gated")
    assert not (tiny.path / ".agent-eval" / "tasks" / "merge_gated" / "rubric.json").exists()

    # the pin covers the rubric: the same batch without it is another eval dir, refused
    again = dokimi_cli(run_args(tiny, tmp_path / "out", name, profile, binary, *judge))
    assert again.returncode == 2 and "other held-out rubrics" in again.stderr, again.stderr


def test_tasks_check_and_rubric_check_with_the_same_rubrics_dir_admit_a_real_run_with_it(
    docker_available: bool, claude_bin: Path, tmp_path: Path, name: str, scripted_judge: Any
) -> None:
    """The checks a real run looks up are keyed by the eval dir with the held-out rubrics in it: tasks check
    and rubric check given --rubrics DIR admit a run given the same DIR, and a run without it is another eval
    dir, which no check proved sound."""
    tiny = tiny_repo(tmp_path / "tiny", {"merge_gated": {"gate": ["pass", "mergeable"]}}, manifest_id=name)
    private = tmp_path / "private"
    (private / "merge_gated").mkdir(parents=True)
    (private / "merge_gated" / "rubric.json").write_text(rubric("merge_gated"), encoding="utf-8")
    held_out = ["--rubrics", str(private)]
    source = [tiny.source(), "--manifest", ".agent-eval/repo-eval.yaml"]
    image = None
    try:
        tasks = dokimi_cli(["repo", "tasks", "check", *source, *held_out, "--json"])
        image = json.loads(tasks.stdout)["image"] if tasks.stdout.startswith("{") else None
        found = json.loads(tasks.stdout)["tasks"] if image is not None else tasks.stdout
        problems = [(t["task"], t["status"], t["problems"]) for t in found] if image is not None else found
        assert tasks.returncode == 0, f"{problems}\n{tasks.stderr}"
        server = scripted_judge([answer("fail"), answer("pass")])  # null, oracle
        judged = ["--model", MODEL, "--bin", str(claude_bin)]
        check = dokimi_cli(["repo", "rubric", "check", *source, *judged, *held_out, "--json"])
        assert check.returncode == 0, check.stdout + check.stderr
        assert json.loads(check.stdout)["admitted"] == ["merge_gated"] and len(judge_requests(server)) == 2

        profile, binary = fake_harness(tmp_path / "harness")
        judge = ["--judge-model", MODEL, "--judge-bin", str(claude_bin)]
        scripted_judge([answer("pass")])
        args = run_args(tiny, tmp_path / "out", name, profile, binary, *judge, *held_out, checked=True)
        admitted = dokimi_cli(args)
        assert admitted.returncode == 0, admitted.stdout + admitted.stderr
        assert json.loads((tmp_path / "out" / name / "_eval" / "batch.json").read_text())["unchecked"] == {}

        without = run_args(tiny, tmp_path / "out", f"{name}-b", profile, binary, *judge, checked=True)
        refused = dokimi_cli(without)
        assert refused.returncode == 2 and "merge_gated" in refused.stderr, refused.stderr
    finally:
        if image is not None:
            subprocess.run(["docker", "rmi", "-f", image], capture_output=True, check=False)
