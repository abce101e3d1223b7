"""The review checks on literal answers: what a finding is, which block, which decoys they flag, and the
metrics of a review and of a clean diff."""

from __future__ import annotations

import pytest

from dokimi.checks.review import Finding, decoys_flagged, is_blocking, parse_findings, review_verdict
from dokimi.schemas.task import Decoy

DECOY = Decoy(id="ln_domain", path="calc/evaluator.py", lines=[16, 18], why="ValueError is caught")


@pytest.mark.parametrize(
    ("line", "found"),
    [
        (
            "calc/evaluator.py:77: the cache ignores env",
            ("calc/evaluator.py", 77, 77, "the cache ignores env"),
        ),
        ("- calc/evaluator.py:69: nit: unbounded", ("calc/evaluator.py", 69, 69, "nit: unbounded")),
        ("1. `calc/evaluator.py:72`: mutable default", ("calc/evaluator.py", 72, 72, "mutable default")),
        ("* **calc/a.py:14-12** - a range", ("calc/a.py", 12, 14, "a range")),
        ("evaluator.py:20 exp overflows", ("evaluator.py", 20, 20, "exp overflows")),
        ("Makefile:3: a target without a recipe", ("Makefile", 3, 3, "a target without a recipe")),
    ],
)
def test_a_line_that_starts_with_path_and_line_is_a_finding(
    line: str, found: tuple[str, int, int, str]
) -> None:
    (finding,) = parse_findings(line)
    assert (finding.path, finding.first, finding.last, finding.text) == found


@pytest.mark.parametrize(
    "line",
    [
        "No blocking problems.",
        "Note: the change is small",
        "See http://example.com:80/x for the spec",
        "At 10:30 the build broke",
        "  the cache in calc/evaluator.py:77 ignores env",  # a location inside prose is not a finding's
        "",
    ],
)
def test_prose_is_no_finding(line: str) -> None:
    assert parse_findings(line) == []


@pytest.mark.parametrize(
    ("text", "blocking"),
    [
        ("nit: a clearer name", False),
        ("[nit] a clearer name", False),
        ("(non-blocking) naming", False),
        ("Optional: extract a helper", False),
        ("suggestion: a docstring", False),
        ("the cache ignores env", True),
        ("nitpicking aside, this loses data", True),
    ],
)
def test_a_finding_blocks_unless_it_starts_with_a_non_blocking_marker(text: str, blocking: bool) -> None:
    assert is_blocking(text) is blocking


@pytest.mark.parametrize(
    ("path", "first", "last", "flagged"),
    [
        ("calc/evaluator.py", 17, 17, True),
        ("evaluator.py", 16, 16, True),  # a path suffix names the file
        ("./calc/evaluator.py", 18, 20, True),  # a range that meets the decoy's
        ("calc/evaluator.py", 19, 26, False),
        ("calc/other.py", 17, 17, False),
        ("tor.py", 17, 17, False),  # a suffix only at a / boundary
    ],
)
def test_a_finding_flags_a_decoy_it_cites(path: str, first: int, last: int, flagged: bool) -> None:
    finding = Finding(path, first, last, "nit: looks odd", blocking=False)  # a nit flags it too
    assert decoys_flagged([finding], [DECOY]) == (["ln_domain"] if flagged else [])


def test_a_review_that_flags_no_decoy_holds_and_counts_its_blocking_findings() -> None:
    answer = "calc/evaluator.py:26: exp overflows\ncalc/evaluator.py:27: nit: no test\nThanks!"
    verdict = review_verdict(answer, [DECOY], clean_diff=False)
    assert verdict.metrics == {
        "decoys_flagged": 0,
        "decoys_not_flagged": True,
        "blocking_findings": 1,
        "no_blocking_finding": None,
    }
    assert verdict.reasons() == []


def test_a_review_that_flags_a_decoy_fails_with_the_decoy_named() -> None:
    verdict = review_verdict("calc/evaluator.py:17: ln(0) crashes", [DECOY], clean_diff=False)
    assert verdict.metrics["decoys_not_flagged"] is False and verdict.flagged == ["ln_domain"]
    assert verdict.reasons() == ["flags decoy ln_domain"]


def test_without_decoys_the_decoy_metrics_are_not_measured() -> None:
    metrics = review_verdict("calc/evaluator.py:17: ln(0) crashes", [], clean_diff=False).metrics
    assert metrics["decoys_flagged"] is None and metrics["decoys_not_flagged"] is None


@pytest.mark.parametrize(
    ("answer", "holds", "reason"),
    [
        ("Nothing blocks the merge.\ncalc/evaluator.py:16: nit: fine", True, None),
        (
            "calc/evaluator.py:26: exp overflows",
            False,
            "blocking finding on a clean diff: calc/evaluator.py:26",
        ),
        ("   \n", False, "no answer: a clean diff still needs a review that says it can be merged"),
    ],
)
def test_a_clean_diff_asks_for_an_answer_without_a_blocking_finding(
    answer: str, holds: bool, reason: str | None
) -> None:
    verdict = review_verdict(answer, [], clean_diff=True)
    assert verdict.metrics["no_blocking_finding"] is holds
    assert verdict.reasons() == ([reason] if reason else [])
