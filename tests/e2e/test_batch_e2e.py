"""The main job end to end: a batch of the bundled example through the real Claude Code CLI and the scripted
model server (``repo run --dry-run``), then ``repo report`` and ``repo compare``, then a rerun.

Two arms x two reps of fix_power_assoc. guidance:raw plays the script derived from the task's oracle (the
agent applies the fix with Bash and answers); guidance:none plays an explicit script whose agent only answers.
So the report must show raw passing 2/2 and none 0/2, and the comparison a gate delta of +1 with the task up.

The golden document pins what dokimi decides, and only that: the same batch with the harness seeing another
kernel (so every request it sends differs) must match it too.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest

from dokimi.analysis.report import build_report
from dokimi.batch import cell_dir, load_batch
from tests.helpers.harness import pinned_version
from tests.helpers.runs import dokimi_cli

pytestmark = [pytest.mark.docker, pytest.mark.harness]

TASK = "fix_power_assoc"
MODEL = "claude-haiku-4-5"


GOLDEN = Path(__file__).resolve().parents[1] / "resources" / "golden" / "dry_run_batch.json"
#: Values the host or the run decides, not dokimi, each replaced by ``<volatile>`` before comparing.
VOLATILE = {
    "duration_s": "wall time of a cell: the machine's speed and load decide it",
    "created_by": "the installed dokimi's version string: a checkout's install decides it, not the batch",
}
#: Relative tolerance for pinned floats: intervals and p-values come from numpy/scipy, whose installed
#: versions may differ in the last bits.
FLOAT_REL_TOL = 1e-9
#: Not volatile, on purpose: cost_usd and the means and deltas made from it. The scripted model reports fixed
#: usage (docs/mock-model.md), never one from the size of a request the host partly wrote, so the pinned
#: harness's cost is the same on every machine.


def normalised(value: object, tmp: str) -> object:
    """Volatile values replaced, and the test's temporary directory named ``<tmp>``."""
    if isinstance(value, dict):
        return {k: "<volatile>" if k in VOLATILE else normalised(v, tmp) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [normalised(v, tmp) for v in value]
    if isinstance(value, str):
        return value.replace(tmp, "<tmp>")
    return value


def missing_from(pinned: object, actual: object, where: str = "") -> list[str]:
    """Where ``actual`` differs from the pinned document. A key the pinned document lacks is a new field and
    is allowed; anything pinned must be there with the same value."""
    if isinstance(pinned, dict) and isinstance(actual, dict):
        return [
            p for k, v in pinned.items() for p in missing_from(v, actual.get(k, KeyError), f"{where}.{k}")
        ]
    if isinstance(pinned, list) and isinstance(actual, list) and len(pinned) == len(actual):
        return [
            p
            for i, (a, b) in enumerate(zip(pinned, actual, strict=True))
            for p in missing_from(a, b, f"{where}[{i}]")
        ]
    if type(pinned) is float and type(actual) is float:
        same = math.isclose(pinned, actual, rel_tol=FLOAT_REL_TOL, abs_tol=1e-12)
        return [] if same else [f"{where}: pinned {pinned!r}, now {actual!r}"]
    return [] if pinned == actual else [f"{where}: pinned {pinned!r}, now {actual!r}"]


def golden_document(batch: Path, report: object, compare: object) -> object:
    """The batch's result.json files, report --json and compare --json, normalised for comparing."""
    results = {
        p.relative_to(batch).as_posix(): json.loads(p.read_text())
        for p in sorted(batch.glob("*/*/*/*/rep*/result.json"))
    }
    return normalised({"results": results, "report": report, "compare": compare}, str(batch.parents[1]))


def check_golden(batch: Path, report: object, compare: object) -> None:
    """The batch's result.json files, report --json and compare --json against the pinned golden document:
    a refactoring of the runner or of grading must leave every pinned value as it was (new fields are
    fine). DOKIMI_UPDATE_GOLDEN=1 writes the document anew (review the diff before committing it)."""
    actual = golden_document(batch, report, compare)
    if os.environ.get("DOKIMI_UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(actual, indent=1, sort_keys=True) + "\n")
    pinned = json.loads(GOLDEN.read_text())
    assert missing_from(pinned, actual) == []


def test_the_golden_comparison_allows_new_fields_and_nothing_else() -> None:
    pinned = {"a": 1, "b": [{"c": True}]}
    assert missing_from(pinned, {"a": 1, "b": [{"c": True, "new": 0}], "extra": 2}) == []
    assert missing_from(pinned, {"a": 2, "b": [{"c": True}]}) == [".a: pinned 1, now 2"]
    assert missing_from(pinned, {"b": [{"c": False}]})[1] == ".b[0].c: pinned True, now False"
    assert missing_from({"x": 0.1 + 0.2}, {"x": 0.3}) == []
    assert missing_from({"x": 0.04515}, {"x": 0.045151}) == [".x: pinned 0.04515, now 0.045151"]
    assert missing_from({"n": 1}, {"n": 1.0000000001}) == [".n: pinned 1, now 1.0000000001"]


def golden_batch_args(example: Path, claude_bin: Path, tmp_path: Path) -> list[str]:
    """``repo run`` for the golden batch: guidance:none plays a script that changes nothing."""
    no_fix = tmp_path / "no-fix.json"
    no_fix.write_text(json.dumps([{"final": "I looked at the parser and changed nothing."}]))
    return [
        "repo", "run", f"{example}@HEAD", "--manifest", ".agent-eval/repo-eval.yaml",
        "--task", TASK, "--arm", "guidance:none,guidance:raw", "--model", MODEL, "--reps", "2",
        "--batch", "e2e", "--out", str(tmp_path / "runs"), "--bin", str(claude_bin), "--dry-run",
        "--dry-run-script", f"guidance:none={no_fix}", "-j", "2", "--json",
    ]  # fmt: skip


def report_and_compare(batch: Path) -> tuple[object, object]:
    """``repo report --json`` and ``repo compare --json`` (none as baseline) of a finished batch."""
    compared = dokimi_cli(["repo", "compare", str(batch), "--baseline", "guidance:none", "--json"])
    assert compared.returncode == 0, compared.stderr
    reported = dokimi_cli(["repo", "report", str(batch), "--json"])
    assert reported.returncode == 0, reported.stderr
    return json.loads(reported.stdout), json.loads(compared.stdout)


def test_a_dry_run_batch_fixes_the_bug_in_one_arm_only_and_a_rerun_skips_every_cell(
    docker_available: bool, claude_bin: Path, example: Path, tmp_path: Path
) -> None:
    args = golden_batch_args(example, claude_bin, tmp_path)
    first = dokimi_cli(args)
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    claude = pinned_version("claude-code")
    assert (summary["ran"], summary["skipped"], summary["harness_version"]) == (4, 0, claude)

    batch = tmp_path / "runs" / "e2e"
    for rep in (0, 1):
        raw = cell_dir(batch, TASK, "guidance:raw", MODEL, None, rep)
        none = cell_dir(batch, TASK, "guidance:none", MODEL, None, rep)
        raw_result = json.loads((raw / "result.json").read_text())
        none_result = json.loads((none / "result.json").read_text())
        assert raw_result["passed"] is True and none_result["passed"] is False
        assert raw_result["metrics"]["hidden_pass"] is True and none_result["metrics"]["hidden_pass"] is False
        assert not raw_result["grader_failure"] and not none_result["grader_failure"]
        assert raw_result["harness_version"] == claude and raw_result["turns"] == 2
        commands = [json.loads(line) for line in (raw / "events.jsonl").read_text().splitlines()]
        assert [e["kind"] for e in commands] == ["command"] and commands[0]["rc"] == 0
        assert "git apply" in commands[0]["text"]
        assert (none / "events.jsonl").read_text() == ""
        assert (none / "answer.txt").read_text() == "I looked at the parser and changed nothing."
        patches = json.loads((raw / "meta.json").read_text())["patches"]
        assert [(p["path"], p["kind"]) for p in patches] == [("bug.patch", "setup")]
        # a dry run is recorded in every document, and its made-up cost is kept apart from the cost
        assert json.loads((raw / "meta.json").read_text())["dry_run"] is True
        assert raw_result["dry_run"] is True and raw_result["cost_usd"] == 0
        assert raw_result["cost_source"] == "dry_run"
        assert raw_result["simulated"]["cost_usd"] > 0 and raw_result["simulated"]["tokens"]
    assert json.loads((batch / "_eval" / "batch.json").read_text())["dry_run"] is True
    assert summary["dry_run"] is True and summary["spent_usd"] == 0 and summary["simulated_usd"] > 0

    report = build_report(load_batch(batch))
    rates = {row.arm: (row.passes, row.gated, row.grader_failures) for row in report.rows}
    assert rates == {"guidance:raw": (2, 2, 0), "guidance:none": (0, 2, 0)}

    reported, compared = report_and_compare(batch)
    check_golden(batch, reported, compared)
    (comparison,) = compared["comparisons"]  # type: ignore[index]
    assert (comparison["treatment"], comparison["baseline"]) == ("guidance:raw", "guidance:none")
    gate = next(m for m in comparison["measures"] if m["kind"] == "gate")
    assert (gate["delta"], gate["up"], gate["down"], gate["tied"]) == (1.0, 1, 0, 0)
    cost = next(m for m in comparison["measures"] if m["kind"] == "cost")
    assert (cost["baseline_mean"], cost["treatment_mean"], cost["up"]) == (0.0, 0.0, 0)
    assert reported["dry_run"] is True and compared["dry_run"] is True  # type: ignore[index]

    # the banner, first, in the text report, the comparison, and every HTML page
    site, page = tmp_path / "site", tmp_path / "compare.html"
    text = dokimi_cli(["repo", "report", str(batch), "--html", str(site)])
    versus = dokimi_cli(["repo", "compare", str(batch), "--baseline", "guidance:none", "--html", str(page)])
    assert text.returncode == 0 and versus.returncode == 0, text.stderr + versus.stderr
    assert text.stdout.startswith("DRY RUN:") and versus.stdout.startswith("DRY RUN:")
    for html in [site / "index.html", page, *(site / "cells").glob("*.html")]:
        assert 'class="dryrun"' in html.read_text(), html

    stamps = {p: p.stat().st_mtime_ns for p in batch.glob("*/*/*/*/rep*/result.json")}
    again = dokimi_cli(args)
    assert again.returncode == 0, again.stderr
    assert (json.loads(again.stdout)["ran"], json.loads(again.stdout)["skipped"]) == (0, 4)
    assert {p: p.stat().st_mtime_ns for p in batch.glob("*/*/*/*/rep*/result.json")} == stamps


#: A Python launcher (dokimi runs ``python3.11 -I LAUNCHER`` in the agent container, with the launcher's
#: directory mounted) that starts the real Claude Code beside it as if on another machine: under ``setarch
#: --uname-2.6`` (the kernel release it reads is 2.6.N, not the host's) with login shell sh. Claude Code
#: writes both into every request ("OS Version: Linux 2.6.N", "Shell: bash (login shell: sh)"): 17 bytes more
#: in each here.
OTHER_MACHINE_LAUNCHER = """\
import os, sys
here = os.path.dirname(os.path.abspath(__file__))
report = 'echo "harness kernel: $(uname -r)" >&2; exec "$0" "$@"'
os.execve("/usr/bin/setarch", ["setarch", os.uname().machine, "--uname-2.6", "/bin/sh", "-c", report,
          os.path.join(here, "claude"), *sys.argv[1:]], {**os.environ, "SHELL": "/bin/sh"})
"""


def as_on_another_machine(claude_bin: Path, where: Path) -> Path:
    """The pinned CLI (hard-linked, or copied across file systems) beside :data:`OTHER_MACHINE_LAUNCHER`."""
    where.mkdir()
    real = claude_bin.resolve()
    try:
        os.link(real, where / "claude")
    except OSError:
        shutil.copy2(real, where / "claude")
    launcher = where / "claude.py"
    launcher.write_text(OTHER_MACHINE_LAUNCHER)
    launcher.chmod(0o755)
    return launcher


def test_the_golden_batch_matches_when_the_harness_runs_as_on_another_machine(
    docker_available: bool, claude_bin: Path, example: Path, tmp_path: Path
) -> None:
    """Claude Code writes the kernel release and the login shell into every request, so its requests differ
    between machines; the golden batch must not (the scripted model's usage, and so the cost, is fixed)."""
    host = os.uname().release
    launcher = as_on_another_machine(claude_bin, tmp_path / "other-machine")
    args = golden_batch_args(example, claude_bin, tmp_path)
    args[args.index("--bin") + 1] = str(launcher)
    done = dokimi_cli(args)
    assert done.returncode == 0, done.stderr
    batch = tmp_path / "runs" / "e2e"
    kernels = {
        line.removeprefix("harness kernel: ")
        for stderr in batch.glob("*/*/*/*/rep*/agent.stderr")
        for line in stderr.read_text().splitlines()
        if line.startswith("harness kernel: ")
    }
    assert len(kernels) == 1 and kernels.pop().startswith("2.6.") and not host.startswith("2.6.")
    reported, compared = report_and_compare(batch)
    assert missing_from(json.loads(GOLDEN.read_text()), golden_document(batch, reported, compared)) == []
