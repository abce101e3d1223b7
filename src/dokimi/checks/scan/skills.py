"""Skills as guidance: which files of a skill are guidance, which skills the tree defines, and the guidance's
references to them.

A skill is a directory holding a ``SKILL.md`` (the Agent Skills format every supported harness reads, from
``.claude/skills/``, ``.agents/skills/``, ``.github/skills/`` and the like: dokimi.constants.SKILL_DIRS).

- :func:`is_skill_support_file`: a skill's SKILL.md is guidance; its scripts, references and assets are not,
  even when a guidance glob matches them (they are searched for identifiers like any other file).
- :func:`skills_of`: the skills the tree defines, by name (the directory's name, and the ``name`` of its front
  matter when the SKILL.md was read).
- :func:`skill_references`: ``$name`` (how Codex mentions a skill) in prose or alone in a code span, a
  code span next to the word skill ("the `release-notes` skill", "skill `release-notes`"), and a hyphenated
  name before it in prose ("the release-notes skill", a claim only when it names or nearly names a skill).
- :func:`resolve_skill`: ok when the tree defines the skill; fail when the tree defines skills but none of
  that name (a renamed or deleted skill); unresolved for a skill the harness ships itself.
- :func:`check_skill_front_matter`: a SKILL.md whose front matter lacks ``name`` or ``description``, or names
  another skill than its directory.
"""

from __future__ import annotations

import difflib
import posixpath
import re
from collections.abc import Collection, Container, Iterator, Mapping
from typing import NamedTuple

from dokimi.checks.scan.markdown import CODE_SPAN
from dokimi.checks.scan.verdict import Verdict, fail, ok, unresolved
from dokimi.constants import SKILL_FILE

#: Skills the harnesses ship themselves (Codex's system skills): never in the tree, never wrong.
HARNESS_SKILLS = frozenset({"skill-creator", "skill-installer"})
#: A skill's name as the Agent Skills format allows it: lowercase letters and digits, single hyphens between.
SKILL_NAME = r"[a-z0-9]+(?:-[a-z0-9]+)*"
#: ``$name`` in prose: not part of a word, not an escaped dollar, not followed by what continues a shell
#: expansion (``$dir/x``, ``$x.y``, ``${x}``); a full stop that ends the sentence is fine.
DOLLAR_MENTION = rf"(?<![\w$\\]){re.escape('$')}({SKILL_NAME})(?![\w/\-{{(]|\.\w)"
SPAN_NEAR_SKILL = rf"`({SKILL_NAME})`\s+skill\b|\bskill\s+`({SKILL_NAME})`"
#: A hyphenated name before the word skill in prose, without backticks ("use the release-notes skill"): a
#: reference only when it names a skill of the tree or nearly does (prose says "a problem-solving skill" too).
PROSE_SKILL = r"\b([a-z0-9]+(?:-[a-z0-9]+)+)\s+skill\b"
#: How close a name in prose must be to a skill's to be read as a misspelt reference.
CLOSE_IN_PROSE = 0.8
FRONT_MATTER = r"\A---[ \t]*\n(.*?\n)---[ \t]*(?:\n|\Z)"  # (with re.S)
FRONT_KEY = r"^([A-Za-z_-]+):[ \t]*(.*?)[ \t]*$"  # (with re.M)


class SkillRef(NamedTuple):
    line: int
    claim: str
    """As written: ``$name`` or ``name``."""
    name: str
    prose: bool = False
    """Found in prose without backticks: a reference only when it names, or nearly names, a skill."""


def is_skill_support_file(path: str, entries: Container[str]) -> bool:
    """Whether ``path`` is a file of a skill other than its SKILL.md: some directory above it holds a
    SKILL.md."""
    if posixpath.basename(path) == SKILL_FILE:
        return False
    directory = posixpath.dirname(path)
    while directory:
        if f"{directory}/{SKILL_FILE}" in entries:
            return True
        directory = posixpath.dirname(directory)
    return False


def front_matter(text: str) -> dict[str, str]:
    """The top-level ``key: value`` lines of a YAML front matter (the scan needs ``name`` and
    ``description`` only; a folded or quoted value is kept as written, quotes stripped)."""
    match = re.match(FRONT_MATTER, text, re.S)
    if not match:
        return {}
    return {k: v.strip("'\"") for k, v in re.findall(FRONT_KEY, match.group(1), re.M)}


def skills_of(skill_files: list[str], texts: Mapping[str, str]) -> dict[str, str]:
    """Skill name -> its SKILL.md, for every SKILL.md of the tree: by its directory's name, and by the
    ``name`` of its front matter when its text was read (a guidance file)."""
    skills: dict[str, str] = {}
    for path in sorted(skill_files):
        directory = posixpath.dirname(path)
        if not directory:
            continue  # a SKILL.md at the root is no skill directory
        skills.setdefault(posixpath.basename(directory), path)
        text = texts.get(path)
        if text is not None:
            name = front_matter(text).get("name")
            if name:
                skills.setdefault(name, path)
    return skills


def skill_references(text: str, fence_lines: Collection[int]) -> Iterator[SkillRef]:
    """The skill references of a guidance text (1-based lines), outside fenced code (``fence_lines``)."""
    if "$" not in text and "skill" not in text.lower():
        return
    for number, line in enumerate(text.split("\n"), 1):
        if number in fence_lines:
            continue
        if "$" in line:
            prose = re.sub(CODE_SPAN, _span_or_blank, line)
            for match in re.finditer(DOLLAR_MENTION, prose):
                yield SkillRef(number, f"${match.group(1)}", match.group(1))
        if "skill" in line.lower():
            for match in re.finditer(SPAN_NEAR_SKILL, line, re.I):
                name = match.group(1) or match.group(2)
                yield SkillRef(number, name, name)
            for match in re.finditer(PROSE_SKILL, re.sub(CODE_SPAN, " ", line)):
                yield SkillRef(number, match.group(1), match.group(1), prose=True)


def _span_or_blank(match: re.Match[str]) -> str:
    """A code span holding only ``$name`` is a mention like one in prose; any other span is blanked (``$x``
    in a command is a shell variable)."""
    inner = match.group(0).strip("`").strip()
    return f" {inner} " if re.fullmatch(rf"\$({SKILL_NAME})", inner) else " "


def resolve_skill(name: str, skills: Mapping[str, str], *, prose: bool = False) -> Verdict | None:
    """ok when the tree defines the skill; unresolved for a skill a harness ships; fail otherwise (the
    caller asks only when the tree defines some skill), with the closest name. A name in prose is no claim
    (None) unless it is, or nearly is, a skill's."""
    found = skills.get(name)
    if found is not None:
        return ok(f"the skill {posixpath.dirname(found)}")
    if name in HARNESS_SKILLS:
        return unresolved("a skill the harness ships itself, not in the tree")
    close = difflib.get_close_matches(name, sorted(skills), n=1, cutoff=CLOSE_IN_PROSE if prose else 0.6)
    if prose and not close:
        return None
    listed = ", ".join(sorted(skills)[:5]) + (", ..." if len(skills) > 5 else "")
    return fail(
        f"no skill named {name} in the tree (it has {listed})", f"did you mean {close[0]}?" if close else None
    )


def check_skill_front_matter(path: str, text: str) -> Verdict:
    """A skill's SKILL.md: its front matter names the skill (as its directory) and says when to use it."""
    meta = front_matter(text)
    directory = posixpath.basename(posixpath.dirname(path))
    missing = [key for key in ("name", "description") if not meta.get(key)]
    if missing:
        return fail(
            f"the front matter has no {' or '.join(missing)}: harnesses list a skill by its name and "
            "description, and skip one without them"
        )
    if meta["name"] != directory:
        return fail(
            f"the front matter names the skill {meta['name']}, its directory {directory}: the Agent Skills "
            "format wants them equal (OpenCode skips such a skill)",
            f"name it {directory}",
        )
    return ok("the front matter names the skill and says when to use it")
