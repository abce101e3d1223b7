"""The pure rules of a batch: planning, caps, pins, the batch budget, dry-run scripts. Literal data only."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dokimi.batch import CellKey
from dokimi.errors import UsageError
from dokimi.repo.arms import Arm
from dokimi.runner.dryrun import (
    CHUNK_CHARS,
    FIXED_ANSWER,
    FileChange,
    apply_patch_turns,
    oracle_changes,
    oracle_script,
    parse_script_options,
    script_for,
    search_replace_script,
)
from dokimi.runner.plan import (
    DEFAULT_BUDGET_USD,
    DEFAULT_MAX_TURNS,
    DEFAULT_TIMEOUT_S,
    SpendLedger,
    cell_limits,
    charge_of,
    check_batch_name,
    check_cell_paths,
    egress_refusal,
    parse_list,
    pin_conflicts,
    pin_refusal,
    plan_cells,
)
from dokimi.schemas.batch import BatchPin
from dokimi.schemas.task import Task
from dokimi.support.mockmodel import parse_script
from tests.helpers.git import git_repo

SHA = "b" * 40


def task(task_id: str, **extra: Any) -> Task:
    return Task.model_validate(
        {"id": task_id, "family": "fix", "base": SHA, "prompt": "p", "grader": "g", **extra}
    )


def pin(**overrides: Any) -> BatchPin:
    data: dict[str, Any] = {
        "schema": "repo_batch.v1",
        "manifest_id": "calc",
        "source": "/src/calc@HEAD",
        "tree": "a" * 40,
        "eval_dir_digest": "sha256:e1",
        "image": "dokimi/calc:" + "a" * 40,
        "image_pin": "tree",
        "image_context_digest": "sha256:c1",
        "created_by": "0.1.0",
    }
    data.update(overrides)
    return BatchPin.model_validate(data)


# --- planning ---------------------------------------------------------------------------------------------


def test_a_batch_plans_one_cell_per_task_arm_model_effort_and_rep() -> None:
    cells = plan_cells(
        [task("t2"), task("t1")], [Arm("guidance:raw"), Arm("guidance:none")], ["m"], ["low", "high"], 2
    )
    assert len(cells) == 2 * 2 * 1 * 2 * 2
    assert cells[0] == CellKey("t1", "guidance:none", "m", "high", 0)
    assert cells == sorted(cells, key=CellKey.sort_key)
    assert {c.rep for c in cells} == {0, 1}


def test_without_effort_options_a_task_runs_at_its_own_effort_or_the_default() -> None:
    cells = plan_cells([task("a", effort="max"), task("b")], [Arm("guidance:raw")], ["m"], [], 1)
    assert [(c.task, c.effort) for c in cells] == [("a", "max"), ("b", None)]


def test_two_values_that_share_a_cell_directory_are_refused_naming_both() -> None:
    # Paths hold slugs: "org/m:1" and "org_m_1" would run into one run directory, the second overwriting the
    # first and its result.json then naming the other cell.
    with pytest.raises(UsageError, match="'org/m:1' and 'org_m_1'"):
        plan_cells([task("a")], [Arm("guidance:raw")], ["org/m:1", "org_m_1"], [], 1)
    earlier = plan_cells([task("a")], [Arm("guidance:raw")], ["m"], [], 1)
    with pytest.raises(UsageError, match="effort"):
        check_cell_paths([*earlier, CellKey("a", "guidance:raw", "m", "default", 0)])


def test_prompt_variants_are_a_cell_dimension_and_each_task_must_carry_the_ones_asked_for() -> None:
    both = task("a", prompt="Edit calc/parser.py: ...", prompt_issue="2**3**2 gives 64")
    cells = plan_cells([both], [Arm("guidance:raw")], ["m"], [], 1, ["spec", "issue"])
    assert [c.prompt for c in cells] == ["issue", "spec"]
    assert len({c.path(Path("/b")) for c in cells}) == 2
    assert plan_cells([both], [Arm("guidance:raw")], ["m"], [], 1)[0].prompt is None  # the task's own prompt
    assert (
        both.with_prompt("issue").prompt == "2**3**2 gives 64"
        and both.with_prompt("issue").prompt_style == "issue"
    )
    assert (
        both.with_prompt("spec").prompt.startswith("Edit") and both.with_prompt("spec").prompt_style == "spec"
    )
    with pytest.raises(UsageError, match="task b has no issue-style prompt"):
        plan_cells([task("b")], [Arm("guidance:raw")], ["m"], [], 1, ["issue"])
    with pytest.raises(ValueError, match="prompt is the spec variant"):
        task("c", prompt_style="issue", prompt_issue="x")


def test_zero_reps_is_refused() -> None:
    with pytest.raises(UsageError, match="--reps 0"):
        plan_cells([task("a")], [Arm("guidance:raw")], ["m"], [], 0)


def test_comma_separated_and_repeated_options_are_one_list_in_order_without_duplicates() -> None:
    assert parse_list(["guidance:none,guidance:raw", "guidance:none", " m2 "]) == [
        "guidance:none",
        "guidance:raw",
        "m2",
    ]


@pytest.mark.parametrize("name", ["_eval", "a/b", "..", ".hidden", "", "a b"])
def test_a_batch_name_that_is_not_one_plain_directory_name_is_refused(name: str) -> None:
    with pytest.raises(UsageError):
        check_batch_name(name)


def test_task_caps_override_the_run_options_which_override_the_defaults() -> None:
    limits = cell_limits(task("a", timeout_s=5.0), timeout_s=60.0, max_turns=7, budget_usd=None)
    assert (limits.timeout_s, limits.max_turns, limits.budget_usd) == (5.0, 7, DEFAULT_BUDGET_USD)
    defaults = cell_limits(task("a"), timeout_s=None, max_turns=None, budget_usd=None)
    assert (defaults.timeout_s, defaults.max_turns) == (DEFAULT_TIMEOUT_S, DEFAULT_MAX_TURNS)


def test_a_task_with_egress_runs_sealed_or_with_an_agent_network_only() -> None:
    needs = task("a", egress=["pypi.org"])
    assert "--agent-network" in (egress_refusal(needs, None, sealed=False) or "")
    assert egress_refusal(needs, None, sealed=True) is None
    assert egress_refusal(needs, "host", sealed=False) is None
    assert egress_refusal(task("b"), None, sealed=False) is None


# --- pins -------------------------------------------------------------------------------------------------


def test_the_same_tree_joins_its_batch() -> None:
    assert pin_conflicts(pin(), pin(source="/elsewhere@" + "a" * 40)) == []


def test_another_revision_is_refused_even_with_the_same_digests() -> None:
    conflicts = pin_conflicts(pin(), pin(tree="c" * 40, image="dokimi/calc:" + "a" * 40))
    assert conflicts == [f"eval tree {'a' * 40} != {'c' * 40}"]


def test_a_working_tree_is_compared_by_its_eval_dir_and_context_digests() -> None:
    work = pin(tree=None, image="dokimi/calc:ctx-c1", image_pin="digest")
    assert pin_conflicts(work, work) == []
    changed = pin(tree=None, image="dokimi/calc:ctx-c1", image_pin="digest", eval_dir_digest="sha256:e2")
    assert pin_conflicts(work, changed) == ["eval_dir digest sha256:e1 != sha256:e2"]


def test_another_image_is_refused() -> None:
    assert pin_conflicts(pin(), pin(image="mine:latest", image_pin="image")) == [
        f"image dokimi/calc:{'a' * 40} != mine:latest"
    ]


def test_a_batch_never_mixes_dry_and_real_cells() -> None:
    """A dry run is pinned like the eval tree: a real run into a dry batch is refused, and the other way,
    naming the way out (a new batch)."""
    dry, real = pin(dry_run=True), pin()
    assert pin_conflicts(dry, dry) == [] and pin_conflicts(real, real) == []
    for old, new, words in ((dry, real, "is a dry run"), (real, dry, "is a real run")):
        error = pin_refusal(old, new, "pilot")
        assert error is not None and words in error.message and "another eval tree" not in error.message
        assert error.hint is not None and "never mixes dry and real" in error.hint


def test_an_arms_guidance_is_pinned_and_a_change_names_the_files() -> None:
    def files(**shas: str) -> list[dict[str, str]]:
        return [
            {"path": path.replace("_", "/") + ".md", "mode": "100644", "sha": sha * 40}
            for path, sha in shas.items()
        ]

    old = pin(guidance={"guidance:tree": files(AGENTS="a", docs_AGENTS="b")})
    assert pin_conflicts(old, pin(guidance={"guidance:at=v1": files(AGENTS="c")})) == []  # a new arm joins
    new = pin(guidance={"guidance:tree": files(AGENTS="c", CLAUDE="d")})
    assert pin_conflicts(old, new) == [
        f"guidance of guidance:tree: AGENTS.md changed (blob {'a' * 12} -> {'c' * 12}), CLAUDE.md added, "
        "docs/AGENTS.md removed"
    ]
    error = pin_refusal(old, new, "pilot")
    assert (
        error is not None
        and "pinned to the guidance" in error.message
        and "another eval tree" not in error.message
    )
    assert error.hint is not None and "start a new batch" in error.hint


def test_the_refusal_names_both_pins() -> None:
    error = pin_refusal(pin(), pin(tree="c" * 40), "pilot")
    assert error is not None
    assert "a" * 40 in str(error) and "c" * 40 in str(error) and "pilot" in str(error)
    assert pin_refusal(pin(), pin(), "pilot") is None


def test_a_refusal_before_the_image_is_built_does_not_show_the_batch_image_as_this_runs() -> None:
    # The early refusal (before a build) compares a provisional pin whose image is the batch's own copy.
    old = pin()
    error = pin_refusal(old, old.model_copy(update={"tree": "c" * 40}), "pilot", image_known=False)
    assert error is not None
    this_run = str(error).split("this run:")[1].splitlines()[0]
    assert "c" * 40 in this_run and "image not built yet" in this_run and old.image not in this_run


# --- budget -----------------------------------------------------------------------------------------------


def test_a_cell_with_unknown_cost_is_charged_its_cap() -> None:
    assert charge_of(None, 2.0) == 2.0
    assert charge_of(0.25, 2.0) == 0.25


def test_no_new_cell_starts_once_the_batch_cap_is_spent() -> None:
    ledger = SpendLedger(1.0, spent_usd=0.5)
    assert ledger.may_start()
    ledger.charge(0.4, 5.0)
    assert ledger.may_start()
    ledger.charge(None, 0.1)
    assert ledger.spent_usd == pytest.approx(1.0)
    assert not ledger.may_start()
    assert not ledger.reserve("cell", 0.01)


def test_a_cell_starts_only_when_its_cap_fits_beside_the_spend_and_the_running_caps() -> None:
    ledger = SpendLedger(1.5, spent_usd=0.2)
    assert ledger.reserve("a", 1.0)  # 0.2 + 1.0 <= 1.5
    assert not ledger.reserve("b", 1.0)  # 0.2 + 1.0 + 1.0 > 1.5
    assert ledger.reserve("c", 0.3)  # exactly 1.5
    ledger.release("a")
    ledger.charge(0.1, 1.0)  # a spent far less than its cap
    assert ledger.reserved_usd == pytest.approx(0.3)
    assert not ledger.reserve("b", 1.0)  # spent 0.3 + reserved 0.3 + 1.0 = 1.6 > 1.5
    ledger.release("c")
    ledger.charge(0.0, 0.3)
    assert ledger.reserve("b", 1.0)  # 0.3 + 1.0 <= 1.5


def test_without_a_cap_every_cell_may_start() -> None:
    ledger = SpendLedger(None)
    ledger.charge(None, 100.0)
    assert ledger.may_start()


# --- dry-run scripts --------------------------------------------------------------------------------------


def test_the_oracle_script_applies_the_diff_then_answers(tmp_path: Path) -> None:
    repo = tmp_path / "w"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "f.txt").write_text("before\n")
    diff = b"--- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n-before\n+after\n"
    turns = oracle_script(diff, "")
    parse_script(turns)
    assert turns[-1] == {"final": FIXED_ANSWER}
    home = tmp_path / "home"
    home.mkdir()
    for turn in turns[:-1]:
        command = turn["tool_use"]["input"]["command"]
        subprocess.run(
            ["bash", "-c", command], cwd=repo, env={"HOME": str(home), "PATH": "/usr/bin:/bin"}, check=True
        )
    assert (repo / "f.txt").read_text() == "after\n"
    assert list(home.iterdir()) == []


def test_a_large_diff_travels_in_several_commands_that_reassemble_it(tmp_path: Path) -> None:
    diff = bytes(range(256)) * 400
    turns = apply_patch_turns(diff)
    assert len(turns) == -(-len(base64.b64encode(diff)) // CHUNK_CHARS) > 1
    joined = "".join(t["tool_use"]["input"]["command"].split("'")[3] for t in turns)
    assert base64.b64decode(joined) == diff


@pytest.mark.parametrize("harness", ["claude-code", "codex", "gemini-cli"])
def test_the_derived_script_calls_each_harness_s_own_shell_tool(harness: str) -> None:
    from dokimi.harness.profile import load_profile

    tool = load_profile(harness).script_tools.command
    assert tool is not None
    (turn, final) = oracle_script(b"diff", "", tool)
    assert list(turn["tool_use"]["input"]) == [tool.arg] and turn["tool_use"]["name"] == tool.name
    assert final == {"final": FIXED_ANSWER}


def test_aider_gets_the_oracles_change_as_whole_file_search_replace_blocks_twice(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "w", {"f.txt": "before\n```\n", "gone.txt": "x\n", "same.txt": "s\n"})
    start = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()
    (repo / "f.txt").write_text("after\n```\n")
    (repo / "sub").mkdir()
    (repo / "sub" / "new.txt").write_text("new")  # no final newline: Aider writes one
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    changes = oracle_changes(repo, start)
    assert changes == [
        FileChange("f.txt", b"before\n```\n", b"after\n```\n"),
        FileChange("sub/new.txt", None, b"new"),
    ]
    turns = search_replace_script(changes, "Fixed it.\n")
    parse_script(turns)
    reply = (
        "Fixed it.\n\n"
        "f.txt\n```\n<<<<<<< SEARCH\nbefore\n```\n=======\nafter\n```\n>>>>>>> REPLACE\n```\n\n"
        "sub/new.txt\n```\n<<<<<<< SEARCH\n=======\nnew\n>>>>>>> REPLACE\n```\n"
    )
    assert turns == [{"text": reply}, {"final": reply}]
    nothing = "I made no change.\n"
    assert search_replace_script([], "") == [{"text": nothing}, {"final": nothing}]


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (FileChange("a.txt", b"x\n", None), "Aider cannot delete a file"),
        (FileChange("a.bin", None, b"\0\1"), "it is binary"),
        (FileChange("a.md", b"Title\n=======\n", b"T\n"), "reads as a SEARCH/REPLACE marker"),
        (FileChange("a.txt", None, b"\xff\n"), "not UTF-8"),
    ],
)
def test_a_change_aider_cannot_make_is_refused_with_the_way_out(change: FileChange, why: str) -> None:
    with pytest.raises(UsageError, match=why) as err:
        search_replace_script([change], "")
    assert err.value.hint is not None and "--dry-run-script" in err.value.hint


def test_the_oracle_answer_is_the_final_message_of_a_review_task() -> None:
    assert oracle_script(b"", "calc/cache.py:3: unbounded\n") == [{"final": "calc/cache.py:3: unbounded"}]


def test_a_script_option_names_an_arm_or_applies_to_every_arm(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps([{"final": "no"}]))
    other = tmp_path / "o=1.json"
    other.write_text(json.dumps([{"final": "yes"}]))
    chosen = parse_script_options([f"guidance:none={script}", str(other)], ["guidance:none", "guidance:raw"])
    assert script_for("guidance:none", chosen) == script.resolve()
    assert script_for("guidance:raw", chosen) == other.resolve()
    assert script_for("guidance:raw", {}) is None


def test_a_script_that_does_not_play_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"bash": "ls"}]))
    with pytest.raises(UsageError, match="turns\\[0\\]"):
        parse_script_options([str(bad)], ["guidance:raw"])


@pytest.mark.slow
def test_a_dry_run_script_without_dry_run_is_refused(tmp_path: Path) -> None:
    from tests.helpers.runs import dokimi_cli

    script = tmp_path / "s.json"
    script.write_text("[]")
    proc = dokimi_cli(
        ["repo", "run", str(tmp_path), "--arm", "guidance:raw", "--model", "m", "--reps", "1", "--batch", "b",
         "--dry-run-script", str(script)]
    )  # fmt: skip
    assert proc.returncode == 2 and "--dry-run-script needs --dry-run" in proc.stderr
