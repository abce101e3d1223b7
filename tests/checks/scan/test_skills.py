"""Skills as guidance: a skill's SKILL.md is guidance, its scripts are not; skill references are checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from dokimi.checks.scan.skills import skill_references
from dokimi.constants import DEFAULT_GUIDANCE_GLOBS
from tests.checks.scan._util import rows, scan_dir, scan_files

RELEASE_SKILL = """\
---
name: release-notes
description: Draft the release notes from the git log. Use before a release.
---
# Release notes

Run `python scripts/gen.py` and paste its output; it calls `make_notes_from_log`.
"""

AGENTS = """\
# Working here

Use $release-notes to draft the notes, never by hand.
Before a release, run $relase-notes again.
The `release-notes` skill knows the format; so does skill `deploy`.
Mentioning `$release-notes` alone in a code span counts; `echo $HOME $release` does not.
Codex's own $skill-creator writes new skills.
Use the release-notes skill, not the relese-notes skill; a problem-solving skill helps too.

```sh
echo $release-notes
```
"""

TREE = {
    "AGENTS.md": AGENTS,
    ".agents/skills/release-notes/SKILL.md": RELEASE_SKILL,
    ".agents/skills/release-notes/scripts/gen.py": "def make_notes_from_log():\n    return `not_a_claim`\n",
    ".agents/skills/release-notes/references/format.md": "`unknown_identifier_here`\n",
    ".claude/skills/bad-name/SKILL.md": "---\nname: other-name\ndescription: x\n---\n",
    ".claude/skills/nodesc/SKILL.md": "---\nname: nodesc\n---\nbody\n",
    "src/app.py": "",
}


def test_skill_files_and_references_with_the_default_globs(tmp_path: Path) -> None:
    result = scan_files(tmp_path, TREE, globs=list(DEFAULT_GUIDANCE_GLOBS))
    scanned = sorted(f.path for f in result.files if f.state == "scanned")
    assert scanned == [
        ".agents/skills/release-notes/SKILL.md",
        ".claude/skills/bad-name/SKILL.md",
        ".claude/skills/nodesc/SKILL.md",
        "AGENTS.md",
    ]
    assert rows(result, "AGENTS.md") == [
        (3, "skill", "$release-notes", "ok"),
        (4, "skill", "$relase-notes", "fail"),
        (5, "skill", "deploy", "fail"),
        (5, "skill", "release-notes", "ok"),
        (6, "skill", "$release-notes", "ok"),
        (7, "skill", "$skill-creator", "unresolved"),
        (8, "skill", "release-notes", "ok"),
        (8, "skill", "relese-notes", "fail"),
    ]
    fix = {d.claim: d.verdict.fix for d in result.drafts if d.file == "AGENTS.md"}
    assert fix["$relase-notes"] == "did you mean release-notes?"
    skill = ".agents/skills/release-notes/SKILL.md"
    assert rows(result, skill) == [
        (1, "skill_front_matter", "release-notes", "ok"),
        (7, "identifier", "make_notes_from_log", "ok"),
        (7, "python_script", "scripts/gen.py", "ok"),
    ]
    fronts = {
        d.claim: (d.verdict.status, d.verdict.fix) for d in result.drafts if d.kind == "skill_front_matter"
    }
    assert fronts["bad-name"] == ("fail", "name it bad-name")
    assert fronts["nodesc"][0] == "fail"
    # no warning for the default globs that match nothing (.github/skills, .qwen/skills, ...)
    assert result.warnings == []


def test_a_glob_over_a_skills_directory_chooses_only_skill_md(tmp_path: Path) -> None:
    """`.agents/**` matches the skill's script and reference files: they are not guidance, so their code spans
    make no claims and the identifiers they define count as the tree's."""
    result = scan_files(tmp_path, TREE, globs=["AGENTS.md", ".agents/**"])
    assert sorted(f.path for f in result.files) == [".agents/skills/release-notes/SKILL.md", "AGENTS.md"]
    assert not [d for d in result.drafts if d.verdict.status == "unresolved" and d.kind == "identifier"]


def test_a_tree_without_skills_makes_no_skill_claims(tmp_path: Path) -> None:
    result = scan_files(tmp_path, {"AGENTS.md": "Costs $5; use $release-notes.\n"})
    assert rows(result) == []


def test_skill_references_outside_fences_only() -> None:
    text = "a $one.\n```\n$two\n```\n`$three` `x $four` $five.six $dir/x\n the `five` skill\n"
    refs = [(r.line, r.claim) for r in skill_references(text, {2, 3, 4})]
    assert refs == [(1, "$one"), (5, "$three"), (6, "five")]


@pytest.mark.slow
def test_the_default_globs_scan_the_example_as_before(example: Path) -> None:
    """The example has no skills: the skill globs match nothing and add no warning."""
    result = scan_dir(str(example), globs=list(DEFAULT_GUIDANCE_GLOBS))
    assert result.warnings == []
    assert not [d for d in result.drafts if d.kind.startswith("skill")]
