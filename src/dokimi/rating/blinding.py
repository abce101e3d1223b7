"""The blinding scrub (docs/rating.md, blinding leaks): find the markers that reveal a run's
condition in the text raters will read, and redact them.

The markers, by category (:class:`MarkerSet`; docs/rating.md lists them):

- ``arm``: every arm of the batch and its path slug (``guidance:raw``, ``guidance_raw``), and the built-in
  guidance arms (``guidance:none``, ``guidance:raw``, ``guidance:bridge``) whether the batch has them or not;
- ``model``: every model id of the batch and its slug, and the model family names (Claude, Sonnet, Opus,
  Haiku, GPT-n, Gemini, ...);
- ``harness``: every harness profile name of the batch and of the built-in profiles, their display names
  (Claude Code, Codex CLI, Gemini CLI, ...) and the harness versions of the batch;
- ``effort``: ``effort: high``, ``--effort high`` and the like (bare words such as "high" are too common);
- ``guidance``: the guidance file names every built-in harness loads (CLAUDE.md, AGENTS.md, GEMINI.md, ...)
  and the bridge files: a mention tells which guidance the agent saw;
- ``batch``: the batch name, the batch directory and every cell path;
- ``banner``: whole lines that harnesses leave behind ("Generated with Claude Code", ``Co-Authored-By:``
  trailers, tool-call traces such as ``⏺ Bash(...)``);
- ``phase``: workflow phase headings (``## Phase 2: Plan``);
- ``timestamp``: ISO 8601 date-times (they date the batch);
- ``marker``: literal prompt-template tokens given with ``--marker``.

Prose (the agent's report, logs, the task) is redacted in place: a marker becomes ``[redacted]``, a banner or
phase line becomes ``[redacted]`` as a whole. The diff is redacted inside its content lines, keeping the
``+``/``-``/space prefix so it stays a patch; a marker in a diff HEADER (a file path the agent created or
changed, such as ``CLAUDE.md``) cannot be redacted without changing what the change is, so it is reported as a
leak (:attr:`Finding.redacted` false) and the artifact is withheld from raters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from dokimi.batch import slug
from dokimi.harness.profile import builtin_profiles, load_profile

#: What a redacted marker is replaced with: the same token for every category, so the token itself tells
#: the rater nothing about what was there.
REDACTED = "[redacted]"


class Category(StrEnum):
    """What a marker reveals."""

    ARM = "arm"
    MODEL = "model"
    HARNESS = "harness"
    EFFORT = "effort"
    GUIDANCE = "guidance"
    BATCH = "batch"
    BANNER = "banner"
    PHASE = "phase"
    TIMESTAMP = "timestamp"
    MARKER = "marker"


#: Arms the framework makes, redacted whether or not the batch ran them.
BUILTIN_ARMS: tuple[str, ...] = (
    "guidance:none",
    "guidance:raw",
    "guidance:bridge",
    "guidance:tree",
    "guidance:generated",
)

#: Harness display names and vendor names (banners, "I am Claude Code", ...).
HARNESS_NAMES: tuple[str, ...] = (
    "Claude Code",
    "claude-code",
    "Codex CLI",
    "OpenAI Codex",
    "Gemini CLI",
    "gemini-cli",
    "GitHub Copilot",
    "Copilot",
    "Aider",
    "Cursor",
    "Anthropic",
    "OpenAI",
)

#: Model family names, as regular expressions matched as whole words, case-insensitively.
MODEL_FAMILY_PATTERNS: tuple[str, ...] = (
    r"claude(?:[-_ ]?\d[\w.-]*)?",
    r"sonnet(?:[-_ ]?\d[\w.-]*)?",
    r"opus(?:[-_ ]?\d[\w.-]*)?",
    r"haiku(?:[-_ ]?\d[\w.-]*)?",
    r"chatgpt",
    r"gpt[-_ ]?\d[\w.-]*",
    r"codex",
    r"gemini(?:[-_ ]?\d[\w.-]*)?",
)

#: Guidance file names when no profile can be loaded (the built-in profiles add theirs).
GUIDANCE_NAMES: tuple[str, ...] = (
    "AGENTS.md",
    "AGENTS.override.md",
    "CLAUDE.md",
    "CLAUDE.local.md",
    "GEMINI.md",
    "copilot-instructions.md",
)

#: Lines a harness leaves behind: replaced as a whole.
BANNER_LINE_PATTERNS: tuple[str, ...] = (
    r"🤖",
    r"generated (?:with|by)\b.*\b(?:claude|codex|gemini|copilot|aider|cursor)",
    r"^\W*co-authored-by\s*:",
    r"noreply@anthropic\.com",
    r"^\s*[⏺●⎿✻]",
    r"^\s*(?:Bash|Read|Edit|MultiEdit|Write|Grep|Glob|LS|TodoWrite|Task|WebFetch|WebSearch|NotebookEdit)"
    r"\(.*\)\s*$",
)

#: Workflow phase headings: replaced as a whole line.
PHASE_LINE_PATTERNS: tuple[str, ...] = (
    r"^\s*(?:#{1,6}\s*|\*\*|__)?\s*(?:phase|stage)\s*(?:\d+|[ivx]+|one|two|three|four|five|six)\b",
)

#: Reasoning effort stated as a setting.
EFFORT_PATTERNS: tuple[str, ...] = (
    r"--effort[ =][\"']?[A-Za-z]+",
    r"(?:reasoning[_ -]?)?effort\s*(?:[:=]|level\s*(?:[:=]|of)?)\s*[\"']?[A-Za-z]+",
)

TIMESTAMP_PATTERN = r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"

_WORD = "A-Za-z0-9"


@dataclass(frozen=True)
class Finding:
    """A marker found in one line of one artifact file."""

    file: str
    line: int
    category: Category
    marker: str
    redacted: bool


@dataclass
class Rule:
    """One compiled marker rule: a regex, the category of what it finds, and whether it takes the line."""

    category: Category
    regex: re.Pattern[str]
    whole_line: bool = False
    by_text: dict[str, Category] | None = None
    """For the one rule of all literals: the category of each literal, by lower-cased text."""

    def category_of(self, text: str) -> Category:
        if self.by_text is None:
            return self.category
        return self.by_text.get(text.lower(), self.category)


def _word(pattern: str) -> str:
    return rf"(?<![{_WORD}])(?:{pattern})(?![{_WORD}])"


@dataclass
class MarkerSet:
    """Every marker to look for, by category. Build it with :func:`marker_set`."""

    literals: dict[Category, set[str]] = field(default_factory=dict)
    rules: list[Rule] = field(default_factory=list)

    def add(self, category: Category, *texts: str) -> None:
        for text in texts:
            if text and text.strip():
                self.literals.setdefault(category, set()).add(text)

    def compile(self) -> list[Rule]:
        """Line rules first, then literals longest first (so ``claude-sonnet-4-5`` goes before ``claude``),
        then patterns."""
        rules: list[Rule] = [
            Rule(Category.BANNER, re.compile(p, re.IGNORECASE), whole_line=True) for p in BANNER_LINE_PATTERNS
        ]
        rules += [
            Rule(Category.PHASE, re.compile(p, re.IGNORECASE), whole_line=True) for p in PHASE_LINE_PATTERNS
        ]
        rules += self.rules  # structural patterns (cell paths) before their parts are redacted one by one
        # All literals in one alternation (one pass per line however many cells the batch has), longest
        # first so that ``claude-sonnet-4-5`` is taken before ``claude``.
        by_text: dict[str, Category] = {}
        for category in sorted(self.literals):
            for text in sorted(self.literals[category]):
                by_text.setdefault(text.lower(), category)
        if by_text:
            alternation = "|".join(re.escape(t) for t in sorted(by_text, key=lambda t: (-len(t), t)))
            pattern = rf"(?<![{_WORD}])(?:{alternation})(?![{_WORD}])"
            rules.append(Rule(Category.MARKER, re.compile(pattern, re.IGNORECASE), by_text=by_text))
        rules += [Rule(Category.MODEL, re.compile(_word(p), re.IGNORECASE)) for p in MODEL_FAMILY_PATTERNS]
        rules += [Rule(Category.EFFORT, re.compile(p, re.IGNORECASE)) for p in EFFORT_PATTERNS]
        rules.append(Rule(Category.TIMESTAMP, re.compile(TIMESTAMP_PATTERN)))
        return rules


def marker_set(
    *,
    arms: Iterable[str] = (),
    models: Iterable[str] = (),
    harnesses: Iterable[str] = (),
    harness_versions: Iterable[str] = (),
    batch_names: Iterable[str] = (),
    guidance_names: Iterable[str] = (),
    extra: Iterable[str] = (),
) -> MarkerSet:
    """The markers of one batch plus the built-in ones."""
    markers = MarkerSet()
    arms, models = [*BUILTIN_ARMS, *arms], list(models)
    for arm in arms:
        markers.add(Category.ARM, arm, slug(arm))
    for model in models:
        markers.add(Category.MODEL, model, slug(model))
    if models:
        markers.rules.append(Rule(Category.BATCH, re.compile(cell_path_pattern(arms, models))))
    markers.add(Category.HARNESS, *HARNESS_NAMES)
    for harness in harnesses:
        markers.add(Category.HARNESS, harness, slug(harness))
    # A version is only a marker when it cannot be an ordinary number: at least two dots ("2.1.328").
    markers.add(Category.HARNESS, *(v for v in harness_versions if v.count(".") >= 2))
    markers.add(Category.BATCH, *batch_names)
    markers.add(Category.GUIDANCE, *GUIDANCE_NAMES, *guidance_names)
    markers.add(Category.MARKER, *extra)
    return markers


def cell_path_pattern(arms: Iterable[str], models: Iterable[str]) -> str:
    """A cell path ``<task>/<arm>/<model>/<effort>/rep<N>`` (dokimi.batch layout) with anything before it
    up to whitespace: one pattern, however many cells the batch has."""

    def alternation(values: Iterable[str]) -> str:
        return "|".join(re.escape(v) for v in sorted({slug(v) for v in values}, key=lambda v: (-len(v), v)))

    return rf"[^\s'\"]*[\w.-]+/(?:{alternation(arms)})/(?:{alternation(models)})/[\w.-]+/rep\d+\b"


def builtin_profile_markers() -> tuple[list[str], list[str]]:
    """(harness names, guidance file names) of every built-in harness profile."""
    names: list[str] = []
    guidance: list[str] = []
    for name in builtin_profiles():
        profile = load_profile(name)
        names.append(profile.name)
        if profile.guidance is not None:
            guidance += profile.guidance.names
        if profile.bridge is not None:
            guidance += [profile.bridge.for_, profile.bridge.write]
    return names, guidance


def _scrub_line(text: str, rules: Sequence[Rule]) -> tuple[str, list[tuple[Category, str]]]:
    """Redact every marker of one line; returns the new line and what was found."""
    found: list[tuple[Category, str]] = []
    for rule in rules:
        if rule.whole_line:
            match = rule.regex.search(text)
            if match:
                found.append((rule.category, text.strip()))
                return REDACTED, found
            continue

        def hit(match: re.Match[str], rule: Rule = rule) -> str:
            found.append((rule.category_of(match.group(0)), match.group(0)))
            return REDACTED

        text = rule.regex.sub(hit, text)
    return text, found


def find_markers(text: str, rules: Sequence[Rule]) -> list[tuple[Category, str]]:
    """The markers of ``text`` without redacting (for diff headers)."""
    _, found = _scrub_line(text, rules)
    return found


def scrub_text(text: str, rules: Sequence[Rule], *, file: str) -> tuple[str, list[Finding]]:
    """Redact every marker of a prose file (agent report, log, task); every finding is redacted."""
    out: list[str] = []
    findings: list[Finding] = []
    for number, line in enumerate(text.split("\n"), 1):
        new, found = _scrub_line(line, rules)
        out.append(new)
        findings += [Finding(file, number, cat, marker, True) for cat, marker in found]
    return "\n".join(out), findings


_CONTENT_PREFIXES = (" ", "+", "-", "\\")


def scrub_diff(text: str, rules: Sequence[Rule], *, file: str) -> tuple[str, list[Finding]]:
    """Redact markers inside the content lines of a unified diff, keeping each line's prefix; a marker in
    a header line (``diff --git``, ``---``/``+++``, mode lines) is a leak that is left in place."""
    out: list[str] = []
    findings: list[Finding] = []
    in_hunk = False
    for number, line in enumerate(text.split("\n"), 1):
        if line.startswith("diff --git "):
            in_hunk = False
        elif line.startswith("@@"):
            in_hunk = True
            head, sep, rest = line.partition(" @@")
            new_rest, found = _scrub_line(rest, rules) if sep else (rest, [])
            out.append(head + sep + new_rest if sep else line)
            findings += [Finding(file, number, cat, marker, True) for cat, marker in found]
            continue
        if in_hunk and line[:1] in _CONTENT_PREFIXES:
            new, found = _scrub_line(line[1:], rules)
            out.append(line[:1] + new)
            findings += [Finding(file, number, cat, marker, True) for cat, marker in found]
            continue
        in_hunk = False if not line else in_hunk
        found = find_markers(line, rules)
        out.append(line)
        findings += [Finding(file, number, cat, marker, False) for cat, marker in found]
    return "\n".join(out), findings
