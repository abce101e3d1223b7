"""pass@k and pass^k in report and compare, checked against brute-force enumeration on a synthetic batch.

The batch: four tasks x two arms x five reps with seeded outcomes, one grader failure, and one planned cell
that never finished (its task has four cells). Brute force reads each cell's result.json as plain JSON and
enumerates every k-subset of a task's attempts: pass@k is the share of subsets holding a pass, pass^k the
share passing whole.
"""

from __future__ import annotations

import itertools
import json
import random
from fractions import Fraction
from pathlib import Path

import pytest

from dokimi.analysis.report import build_report
from dokimi.batch import load_batch
from dokimi.cli.main import main
from dokimi.errors import UsageError
from tests.helpers.batches import write_cell, write_pin, write_plan

NONE, RAW = "guidance:none", "guidance:raw"
TASKS = ("t_alpha", "t_beta", "t_gamma", "t_delta")
REPS = 5


@pytest.fixture
def batch(tmp_path: Path) -> Path:
    root = tmp_path / "pilot"
    write_pin(root)
    write_plan(root, [(t, a, "m1", None, r) for t in TASKS for a in (NONE, RAW) for r in range(REPS)])
    rng = random.Random(27)
    for t, task in enumerate(TASKS):
        for arm, chance in ((NONE, 0.2 + 0.15 * t), (RAW, 0.5 + 0.1 * t)):
            for rep in range(REPS):
                if (task, arm, rep) == ("t_beta", RAW, 4):
                    continue  # planned, never finished: missing
                failure = (task, arm, rep) == ("t_gamma", NONE, 1)
                write_cell(root, task, arm, rep=rep, passed=rng.random() < chance, grader_failure=failure)
    return root


def attempts(batch: Path) -> dict[tuple[str, str], list[bool]]:
    """(task, arm) -> each finished cell's pass, read as plain JSON (a grader failure never passes)."""
    found: dict[tuple[str, str], list[bool]] = {}
    for path in sorted(batch.glob("*/*/*/*/rep*/result.json")):
        result = json.loads(path.read_text())
        passed = bool(result["passed"]) and not result["grader_failure"]
        found.setdefault((result["task"], result["arm"]), []).append(passed)
    return found


def brute_force(outcomes: list[bool], k: int) -> tuple[float, float] | None:
    """(pass@k, pass^k) over every k-subset of the attempts; None with fewer than k attempts."""
    if len(outcomes) < k:
        return None
    subsets = list(itertools.combinations(outcomes, k))
    return (
        float(Fraction(sum(1 for s in subsets if any(s)), len(subsets))),
        float(Fraction(sum(1 for s in subsets if all(s)), len(subsets))),
    )


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_report_rows_and_arms_equal_brute_force_enumeration(batch: Path, k: int) -> None:
    doc = build_report(load_batch(batch), k=k)
    truth = attempts(batch)
    assert doc.k == k
    assert len(doc.rows) == len(truth) == 8
    for row in doc.rows:
        expected = brute_force(truth[(row.task, row.arm)], k)
        if expected is None:
            assert (row.pass_at_k, row.pass_hat_k) == (None, None)
        else:
            assert (row.pass_at_k, row.pass_hat_k) == pytest.approx(expected, abs=1e-12)
    for arm in doc.arms:
        per_task = [v for (_, a), o in truth.items() if a == arm.arm if (v := brute_force(o, k)) is not None]
        assert arm.k_tasks == len(per_task)
        assert arm.pass_at_k == pytest.approx(sum(v[0] for v in per_task) / len(per_task), abs=1e-12)
        assert arm.pass_hat_k == pytest.approx(sum(v[1] for v in per_task) / len(per_task), abs=1e-12)


def test_k_defaults_to_the_batch_reps_and_a_task_short_of_k_cells_is_left_out(batch: Path) -> None:
    doc = build_report(load_batch(batch))
    assert doc.k == REPS
    short = next(r for r in doc.rows if (r.task, r.arm) == ("t_beta", RAW))
    assert short.gated == 4 and short.pass_at_k is None and short.pass_hat_k is None
    raw = next(a for a in doc.arms if a.arm == RAW)
    assert (raw.k_tasks, raw.tasks) == (3, 4)


def test_report_cli_prints_pass_k_in_text_and_json_and_refuses_k_0(
    batch: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["repo", "report", str(batch), "--k", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["k"] == 2 and all("pass_hat_k" in a for a in doc["arms"])
    assert main(["repo", "report", str(batch), "--k", "2"]) == 0
    out = capsys.readouterr().out
    assert "pass@2" in out and "pass^2" in out and "reliability over k=2 attempts" in out
    assert main(["repo", "report", str(batch), "--k", "0"]) == 2
    assert "at least 1" in capsys.readouterr().err
    with pytest.raises(UsageError):
        build_report(load_batch(batch), k=0)


@pytest.mark.parametrize("k", [2, 5])
def test_compare_pairs_each_task_s_pass_k_against_brute_force(batch: Path, k: int) -> None:
    from dokimi.analysis.compare import compare

    doc = compare([str(batch)], NONE, k=k)
    truth = attempts(batch)
    assert doc.k == k
    (comparison,) = doc.comparisons
    measures = {m.kind: m for m in comparison.measures}
    assert [m.name for m in comparison.measures][:3] == ["gate", f"pass@{k}", f"pass^{k}"]
    for index, kind in enumerate(("pass_at_k", "pass_hat_k")):
        measure = measures[kind]  # type: ignore[index]
        expected = {}
        for task in TASKS:
            base, treat = brute_force(truth[(task, NONE)], k), brute_force(truth[(task, RAW)], k)
            if base is not None and treat is not None:
                expected[task] = (base[index], treat[index])
        assert {v.task: (v.baseline, v.treatment) for v in measure.per_task} == pytest.approx(expected)
        assert measure.p_holm is None and measure.underpowered is None  # descriptive
        if k == 5:  # t_beta has four raw cells: fewer than k
            assert measure.tasks == 3
            (left_out,) = [u for u in comparison.unpaired if u.measure == measure.name]
            assert left_out.task == "t_beta" and "fewer gated cells than k in guidance:raw" in left_out.reason
    assert compare([str(batch)], NONE).k == REPS


def test_compare_cli_takes_k_and_names_the_measures(batch: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["repo", "compare", str(batch), "--baseline", NONE, "--k", "3"]) == 0
    out = capsys.readouterr().out
    assert "pass@3" in out and "pass^3" in out and "(k=3)" in out
    assert main(["repo", "compare", str(batch), "--baseline", NONE, "--k", "-1"]) == 2
