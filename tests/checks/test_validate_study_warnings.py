"""repo validate's warnings that protect a study, each on a crafted task of a real repository whose fix adds
a private helper: a prompt naming a file the fix changes, an identifier the fix adds, or a hidden test; a
prompt that is the fix's commit message; no PASS_TO_PASS test; hidden tests that need the fix's own private
name. A well-made task of the same fix gets none of them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dokimi.checks.validate import validate_repo
from dokimi.checks.weak_tasks import parse_patch, prompt_names_file, referenced_names
from dokimi.repo.mining import draft_prompt
from dokimi.source import open_source
from tests.helpers.git import commit, git, git_repo

EVAL = ".agent-eval"
MANIFEST = f"""\
schema: repo_manifest.v1
id: warn
eval_dir: {EVAL}
image: {{dockerfile: {EVAL}/Dockerfile}}
entry_points: {{grade: "builtin:pytest"}}
tasks: {EVAL}/tasks
"""
OPS = "def mean(values):\n    return sum(values) / len(values)\n"
FIXED = (
    "def _is_nan(value):\n    return value != value\n\n\n"
    "def _finite(values):\n    return [v for v in values if not _is_nan(v)]\n\n\n"
    "def mean(values):\n    values = _finite(values)\n    return sum(values) / len(values)\n"
)
TESTS = "from pkg.ops import mean\n\n\ndef test_mean():\n    assert mean([1, 3]) == 2\n"
NEW_TESTS = (
    "\n\ndef test_mean_skips_nan():\n    assert mean([1, float('nan'), 3]) == 2\n"
    "\n\ndef test_finite_helper():\n    from pkg import ops\n\n    assert ops._finite([1.0]) == [1.0]\n"
)
MESSAGE = "Fix mean: skip NaN values\n\nA NaN in the input made the mean NaN."
GOOD_PROMPT = "mean() returns nan when one of the values is NaN; it should ignore such values."
F2P = ["tests/test_ops.py::test_mean_skips_nan"]
P2P = ["tests/test_ops.py::test_mean"]

# task id -> (prompt, pass_to_pass, the warnings expected: (code, a fragment of the message))
CRAFTED: dict[str, tuple[str, list[str], set[tuple[str, str]]]] = {
    "good": (GOOD_PROMPT, P2P, set()),
    "names_file": (
        "The mean in pkg/ops.py is wrong for NaN input; see ops.py.",
        P2P,
        {("prompt_gives_no_fix_away", "'pkg/ops.py', a file the reference fix changes")},
    ),
    "names_identifier": (
        GOOD_PROMPT + " Test each value with a helper like _is_nan.",
        P2P,
        {("prompt_gives_no_fix_away", "names '_is_nan', which the reference fix adds")},
    ),
    "names_interface": (
        GOOD_PROMPT + " Filter them with a helper _finite(values) of pkg.ops.",
        P2P,
        set(),  # the hidden tests call _finite: naming it asks for that interface, it gives nothing away
    ),
    "names_test": (
        GOOD_PROMPT + " Make test_mean_skips_nan pass.",
        P2P,
        {("prompt_gives_no_fix_away", "names the hidden test 'test_mean_skips_nan'")},
    ),
    "draft": (
        draft_prompt(MESSAGE, ["pkg/ops.py", "tests/test_ops.py"]),
        P2P,
        {("prompt_is_edited", "draft")},
    ),
    "title": ("Fix mean: skip NaN values", P2P, {("prompt_is_edited", "its title")}),
    "no_p2p": (GOOD_PROMPT, [], {("task_has_pass_to_pass", "no PASS_TO_PASS test")}),
}
HIDDEN_NAME = ("hidden_tests_need_no_particular_fix", "the hidden tests use '_finite'")


@pytest.fixture(scope="module")
def findings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[tuple[str, str]]]:
    repo = git_repo(
        tmp_path_factory.mktemp("warn") / "repo",
        {"pkg/__init__.py": "", "pkg/ops.py": OPS, "tests/test_ops.py": TESTS},
    )
    base = git(repo, "rev-parse", "HEAD").strip()
    fix = commit(repo, MESSAGE, files={"pkg/ops.py": FIXED, "tests/test_ops.py": TESTS + NEW_TESTS})
    oracle = git(repo, "diff", base, fix, "--", "pkg")
    tests = git(repo, "diff", base, fix, "--", "tests")
    files: dict[str, str] = {f"{EVAL}/repo-eval.yaml": MANIFEST, f"{EVAL}/Dockerfile": "FROM scratch\n"}
    for task_id, (prompt, p2p, _) in CRAFTED.items():
        task: dict[str, Any] = {
            "id": task_id, "family": "fix", "base": f"{fix}^", "prompt": prompt, "grader": "builtin:pytest",
            "test_patch": "tests.patch", "oracle_patch": "oracle.patch", "fail_to_pass": F2P,
            "pass_to_pass": p2p,
        }  # fmt: skip
        files[f"{EVAL}/tasks/{task_id}/task.json"] = json.dumps(task, indent=2) + "\n"
        files[f"{EVAL}/tasks/{task_id}/tests.patch"] = tests
        files[f"{EVAL}/tasks/{task_id}/oracle.patch"] = oracle
    commit(repo, "eval", files=files)
    with open_source(str(repo)) as source:
        report = validate_repo(source)
    assert report.valid, [f.text() for f in report.errors]
    found: dict[str, set[tuple[str, str]]] = {task_id: set() for task_id in CRAFTED}
    for finding in report.warnings:
        assert finding.task is not None, finding.text()
        found[finding.task].add((finding.code, finding.message))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("task_id", sorted(CRAFTED))
def test_each_crafted_task_gets_its_warning_and_no_other(
    findings: dict[str, set[tuple[str, str]]], task_id: str
) -> None:
    expected = CRAFTED[task_id][2]
    got = findings[task_id]
    # every task's hidden tests call _finite, which the base lacks; only a prompt naming it is spared
    hidden = {f for f in got if f[0] == HIDDEN_NAME[0]}
    if task_id == "names_interface":
        assert hidden == set()
    else:
        assert len(hidden) == 1 and HIDDEN_NAME[1] in next(iter(hidden))[1]
    rest = got - hidden
    assert {code for code, _ in rest} == {code for code, _ in expected}, rest
    for code, fragment in expected:
        assert any(c == code and fragment in message for c, message in rest), (fragment, rest)


def test_a_prompt_naming_an_identifier_the_fix_adds_is_a_leak_unless_the_tests_use_it() -> None:
    from dokimi.checks.weak_tasks import defined_names

    patch = "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1 +1,2 @@\n-x = 1\n+def _clip(v):\n"
    added = parse_patch(patch)["m.py"].added
    assert defined_names(added) == {"_clip"}
    assert referenced_names(["    assert m._clip(2) == 2", "from pkg.m import a, b as c"]) == {
        "_clip", "a", "b", "c",
    }  # fmt: skip
    assert prompt_names_file("look at core.py please", "inventory/core.py") == "core.py"
    assert prompt_names_file("inventory.core.total is wrong", "inventory/core.py") is None
