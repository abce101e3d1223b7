"""The blinding scrub, one rule per test (dokimi.rating.blinding)."""

from __future__ import annotations

from dokimi.rating.blinding import REDACTED, Category, marker_set, scrub_diff, scrub_text

RULES = marker_set(
    arms=["guidance:raw", "team:review"],
    models=["gpt-5.1-codex-max"],
    harnesses=["claude-code"],
    harness_versions=["2.1.328", "7"],
    batch_names=["pilot"],
    guidance_names=["AGENTS.md"],
    extra=["{{PHASE_TOKEN}}"],
).compile()


def scrub(text: str) -> tuple[str, set[Category]]:
    out, findings = scrub_text(text, RULES, file="answer.txt")
    return out, {f.category for f in findings}


def test_arms_and_their_slugs_are_redacted_but_the_bare_word_raw_is_not() -> None:
    assert scrub("arm guidance:raw / guidance_raw / team:review; raw data") == (
        f"arm {REDACTED} / {REDACTED} / {REDACTED}; raw data",
        {Category.ARM},
    )


def test_a_builtin_arm_is_redacted_even_when_the_batch_did_not_run_it() -> None:
    assert scrub("compare with guidance:bridge")[0] == f"compare with {REDACTED}"


def test_model_ids_and_model_family_names_are_redacted_whole() -> None:
    out, categories = scrub("ran gpt-5.1-codex-max, unlike Claude Opus 4.1 or sonnet")
    assert out == f"ran {REDACTED}, unlike {REDACTED} {REDACTED} or {REDACTED}"
    assert categories == {Category.MODEL}


def test_harness_names_and_dotted_versions_are_redacted_but_a_bare_number_is_not() -> None:
    assert scrub("Claude Code 2.1.328 ran 7 tests")[0] == f"{REDACTED} {REDACTED} ran 7 tests"


def test_a_banner_line_is_redacted_whole() -> None:
    for line in (
        "🤖 Generated with [Claude Code](https://claude.com/claude-code)",
        "Co-Authored-By: Someone <noreply@anthropic.com>",
        "⏺ Bash(pytest -q)",
        "Read(src/calc.py)",
    ):
        assert scrub(line) == (REDACTED, {Category.BANNER}), line


def test_a_phase_heading_is_redacted_whole_and_a_plain_step_is_kept() -> None:
    assert scrub("## Phase 2: Implement") == (REDACTED, {Category.PHASE})
    assert scrub("**Stage III** review")[0] == REDACTED
    assert scrub("Step 1: run the tests")[0] == "Step 1: run the tests"


def test_effort_as_a_setting_is_redacted_but_the_word_high_is_not() -> None:
    out, categories = scrub("effort: high, --effort=low; a high bar")
    assert out == f"{REDACTED}, {REDACTED}; a high bar" and categories == {Category.EFFORT}


def test_timestamps_guidance_names_batch_and_extra_markers_are_redacted() -> None:
    out, categories = scrub("at 2024-06-01T12:00:03Z read AGENTS.md in pilot via {{PHASE_TOKEN}}")
    assert out == f"at {REDACTED} read {REDACTED} in {REDACTED} via {REDACTED}"
    assert categories == {Category.TIMESTAMP, Category.GUIDANCE, Category.BATCH, Category.MARKER}


def test_a_marker_inside_a_longer_word_is_not_redacted() -> None:
    assert scrub("the pilots and prepilot run")[0] == "the pilots and prepilot run"


def test_diff_content_keeps_its_prefix_and_a_header_marker_is_reported_not_redacted() -> None:
    diff = (
        "diff --git a/AGENTS.md b/AGENTS.md\n--- a/AGENTS.md\n+++ b/AGENTS.md\n@@ -1 +1 @@ guidance:raw\n"
        "-old Claude\n+new Claude\n context Claude\n"
    )
    out, findings = scrub_diff(diff, RULES, file="diff.patch")
    assert out.splitlines()[3:] == [
        f"@@ -1 +1 @@ {REDACTED}",
        f"-old {REDACTED}",
        f"+new {REDACTED}",
        f" context {REDACTED}",
    ]
    assert out.splitlines()[:3] == diff.splitlines()[:3]
    assert sorted({(f.line, f.redacted) for f in findings}) == [
        (1, False),
        (2, False),
        (3, False),
        (4, True),
        (5, True),
        (6, True),
        (7, True),
    ]


def test_a_cell_path_is_redacted_whole_with_what_leads_to_it() -> None:
    line = "wrote /srv/runs/b9/any_task/guidance_raw/gpt-5.1-codex-max/xhigh/rep12/grade.json"
    assert scrub(line)[0] == f"wrote {REDACTED}/grade.json"
