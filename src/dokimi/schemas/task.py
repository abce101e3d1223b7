"""task.json: one task of a repository: the framework's keys (with mode, effort and prompt_style), and the
repository grader's.

The framework reads the core and workspace keys typed here. Every other key belongs to the repository's grader
and is kept unread (``Task.model_extra``), so a task written back to ``{run_dir}/task.json`` is the
repository's own. ``setup_patch`` (one string) is accepted as a synonym of a one-element ``setup_patches``.

The pure predicates :func:`base_form` and :func:`egress_host_problem` are shared with
:mod:`dokimi.checks.validate`, which turns them into findings with file:line and fix; the model uses them to
refuse what no runner may accept.
"""

from __future__ import annotations

import re
import shlex
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from dokimi.schemas._base import Document, OpenDocument, did_you_mean
from dokimi.schemas.grade import DECOYS_NOT_FLAGGED, NO_BLOCKING_FINDING, OWN_TESTS_METRIC, REVIEW_METRICS

FULL_SHA = re.compile(r"^[0-9a-f]{40}$")
SHORT_SHA = re.compile(r"^[0-9a-f]{4,39}$")
REQUIRED_KEYS = ("id", "family", "base", "prompt", "grader")

#: The keys the built-in graders (``builtin:pytest``, ``builtin:command``) read from task.json: the patch that
#: restores the hidden tests, the reference solution, and the test ids that must pass.
BUILTIN_GRADER_KEYS = ("test_patch", "oracle_patch", "fail_to_pass", "pass_to_pass")

#: How close (difflib ratio) an unknown key must be to a framework key to be taken for its misspelling.
MISSPELLING_CUTOFF = 0.75

BaseForm = Literal["full", "short", "invalid"]
Mode = Literal["interactive", "autonomous", "review"]
PromptStyle = Literal["spec", "issue"]

PositiveFinite = Annotated[float, Field(strict=True, gt=0, allow_inf_nan=False)]
FiniteNumber = Annotated[float, Field(strict=True, allow_inf_nan=False)]


def split_base(base: str) -> tuple[str, bool]:
    """``"abc^"`` -> ``("abc", True)``: the SHA and whether the task is at its parent."""
    if base.endswith("^"):
        return base[:-1], True
    return base, False


def base_form(base: str) -> BaseForm:
    """``full``: 40 lowercase hex digits, optionally followed by ``^``; ``short``: 4 to 39 hex digits
    (accepted with a warning); ``invalid``: anything else (a branch, a tag, HEAD, ``~1``, uppercase)."""
    sha, _ = split_base(base)
    if FULL_SHA.match(sha):
        return "full"
    if SHORT_SHA.match(sha):
        return "short"
    return "invalid"


def criterion_problem(criterion: object) -> str | None:
    """Why an acceptance criterion is not one (it must say something a rater checks), or None."""
    if not isinstance(criterion, str):
        return "not a string"
    if not criterion.strip():
        return "empty; write what a rater checks, or drop it"
    return None


def command_problem(command: object) -> str | None:
    """Why a validation command cannot run (it is split into words like an entry point), or None."""
    if not isinstance(command, str):
        return "not a string"
    try:
        words = shlex.split(command)
    except ValueError as exc:
        return f"cannot be split into words: {exc}"
    return None if words else "empty"


_LABEL = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")


def egress_host_problem(host: str) -> str | None:
    """Why ``host`` is not an egress entry, or None when it is one.

    A DNS name with an optional ``:port``; ``*`` stands for one whole label; the last two labels are literal,
    so ``*.pythonhosted.org`` passes and ``*``, ``*.org`` or ``pypi.*`` do not.
    """
    if not isinstance(host, str) or not host:
        return "empty host"
    if host != host.strip() or any(c.isspace() for c in host):
        return "contains whitespace"
    if "://" in host or "/" in host:
        return "a host, not a URL or path (drop the scheme and the path)"
    name, sep, port = host.partition(":")
    if sep:
        if not port.isdigit() or not 1 <= int(port) <= 65535:
            return f"port {port!r} is not a number from 1 to 65535"
    if len(name) > 253:
        return "longer than 253 characters"
    labels = name.lower().split(".")
    if len(labels) < 2:
        return "needs at least two labels, and the last two must be literal (for example pypi.org)"
    for label in labels:
        if label == "*":
            continue
        if "*" in label:
            return f"label {label!r}: '*' must be one whole label"
        if not _LABEL.match(label):
            return f"label {label!r} is not a DNS label (letters, digits, '-')"
    if "*" in labels[-2:]:
        return "the last two labels must be literal ('*.org' and '*' would open a whole domain)"
    if labels[-1].isdigit():
        return "an IP address is not a DNS name"
    return None


class ReviewThread(Document):
    """A human review thread of a review task's replayed pull request."""

    id: str = Field(min_length=1)
    """The thread's id, as the task's grader names it in grade.json's ``threads``."""
    rules: list[str] = Field(default_factory=list)
    """Ids of the team review rules (review_rules.json) that cover the thread; empty when none does."""


class GateMin(Document):
    """A numeric gate entry: the metric must be at least ``min``."""

    metric: str = Field(min_length=1)
    """Name of a numeric metric of grade.json (or a framework metric such as ``merge_score``)."""
    min: FiniteNumber
    """Smallest value that passes."""


class Score(Document):
    """The result of a score-only task (``pass: null``), and the value the oracle must reach."""

    metric: str = Field(min_length=1)
    """Name of the numeric metric that is the result."""
    max: FiniteNumber
    """The value the oracle must reach on ``metric`` in ``tasks check``."""


GateEntry = Annotated[str, Field(min_length=1)] | GateMin


def _default_gate() -> list[GateEntry]:
    return ["pass"]


class Decoy(Document):
    """A spot of a review task's diff that looks wrong and is not: a careful reviewer leaves it alone."""

    id: str = Field(min_length=1)
    """Decoy id, unique in the task."""
    path: str = Field(min_length=1)
    """The file, relative to the repository root."""
    lines: Annotated[list[Annotated[int, Field(strict=True, ge=1)]], Field(min_length=2, max_length=2)]
    """``[first, last]``: the lines (1-based, of the file as the change under review leaves it) a finding
    must cite to flag the decoy."""
    why: str = Field(min_length=1)
    """Why the code is right: for the people who read the task, never shown to the agent."""

    @model_validator(mode="after")
    def _ordered(self) -> Decoy:
        if self.lines[0] > self.lines[1]:
            raise ValueError(f"lines {self.lines}: the first line comes after the last")
        return self


def success_rule(
    mode: str | None, *, decoys: bool = False, clean_diff: bool = False, perf: bool = False
) -> list[GateEntry] | None:
    """The gate a task of ``mode`` gets when its task.json names none; None without a mode (the default gate,
    ``["pass"]``, applies). One rule per mode (docs/agent-modes.md):

    - interactive: the tests pass and the change is mergeable;
    - autonomous: the same, plus the agent's own tests fail on the base, and with a ``perf`` check its
      verdict (the scope and performance blockers hold);
    - review: decoys not flagged, and on a clean diff no blocking finding; recall of the human review threads
      is the task's ``score``. A review task with neither keeps the default gate.
    """
    if mode == "interactive":
        return ["pass", "mergeable"]
    if mode == "autonomous":
        return ["pass", "mergeable", OWN_TESTS_METRIC, *(["perf_pass"] if perf else [])]
    if mode == "review":
        review: list[GateEntry] = [NO_BLOCKING_FINDING] if clean_diff else []
        review += [DECOYS_NOT_FLAGGED] if decoys else []
        return review or None
    return None


def _builtin_keys_in_schema(schema: dict[str, Any]) -> None:
    """The keys the built-in graders read, described for editors (they stay grader keys: not typed here)."""
    schema.setdefault("properties", {}).update(
        {
            "test_patch": {
                "type": "string",
                "description": "Built-in graders: the hidden tests, a git diff relative to the task "
                "directory, applied over the agent's tree after every test file is put back as at the start.",
            },
            "oracle_patch": {
                "type": "string",
                "description": "Built-in graders: the reference solution (a git diff), which builtin:oracle "
                "applies.",
            },
            "fail_to_pass": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Built-in graders: test ids that fail before the fix and must pass.",
            },
            "pass_to_pass": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Built-in graders: test ids that pass before the fix and must not break.",
            },
        }
    )


class Task(OpenDocument):
    """task.json. Keys not listed here belong to the repository's grader and are kept unread."""

    model_config = ConfigDict(
        extra="allow",
        use_attribute_docstrings=True,
        populate_by_name=True,
        json_schema_extra=_builtin_keys_in_schema,
    )

    id: str
    """Task id; equals the name of the task's directory."""
    family: str
    """Free string for reporting; common values: build, fix, feature, test, review."""
    base: str
    """Commit to snapshot: a hex SHA, optionally followed by ``^`` (its parent). Use the full 40-character
    SHA; a shorter one is accepted with a warning. Branches, tags and HEAD are refused."""
    prompt: str
    """What the agent is told."""
    grader: str
    """Grader name, interpreted by the repository's ``grade`` entry point."""
    setup_patches: list[str] = Field(default_factory=list)
    """Patches (paths relative to the task directory) applied after the snapshot, before the arm, for example
    an injected bug. ``setup_patch`` (one string) is a synonym of a one-element list."""
    review_patch: str | None = None
    """Patch (relative to the task directory) applied with ``git am`` as the HEAD commit under review."""
    source_pr: int | None = Field(default=None, ge=1)
    """The pull request the task was made from: the fix it asks for, or the review it replays. Mining team
    review rules (``repo rules mine``) leaves its comments out, so no rule is learnt from a task's answer."""
    threads: list[ReviewThread] = Field(default_factory=list)
    """Review tasks: the human review threads the grader scores (its grade.json reports each one's id in
    ``threads``), each with the team review rules that cover it. ``repo rules effect`` reads them to report
    recall on the threads a rule covers and on those none covers."""
    gate: list[GateEntry] = Field(default_factory=_default_gate)
    """What counts as success; default ``["pass"]``. A string is a boolean metric that must be true;
    ``{"metric": name, "min": number}`` a numeric metric that must reach ``min``."""
    score: Score | None = None
    """For score-only tasks: the metric that is the result when ``pass`` is null, and the oracle's target."""
    timeout_s: PositiveFinite | None = None
    """Per-task wall-clock cap of the agent, in seconds (overrides ``--timeout``); finite and > 0."""
    max_turns: Annotated[int, Field(strict=True, gt=0)] | None = None
    """Per-task turn cap (overrides ``--max-turns``); a whole number > 0."""
    budget_usd: PositiveFinite | None = None
    """Per-task cost cap in US dollars (overrides ``--budget``); finite and > 0."""
    egress: list[str] = Field(default_factory=list)
    """Extra hosts this task's agent and entry points reach through the proxy: DNS names with an optional
    ``:port``; ``*`` is one whole label and the last two labels are literal."""
    mode: Mode | None = None
    """Which way of using an agent the task models: interactive, autonomous or review. A task that names no
    ``gate`` gets its mode's success rule as its gate (docs/agent-modes.md)."""
    prompt_style: PromptStyle | None = None
    """How the prompt reads: ``spec`` (names files and constraints) or ``issue`` (as filed). With
    ``prompt_issue`` beside it, ``prompt`` is the spec variant (``spec`` or unset). An autonomous task's
    prompt is an issue: ``issue`` unless the task says otherwise or carries ``prompt_issue``."""
    prompt_issue: str | None = None
    """The same task told as an issue is filed (short, leaving the conventions to the repository), beside the
    spec-style ``prompt``: ``repo run --prompt-style spec,issue`` runs either or both, and reports split
    them."""
    effort: str | None = None
    """Reasoning effort of the harness for this task, passed to the harness profile."""
    decoys: list[Decoy] = Field(default_factory=list)
    """Review tasks: spots of the diff under review that look wrong and are not. A finding that cites one
    flags it (``decoys_flagged``); the review rule asks that none is flagged."""
    clean_diff_of: str | None = Field(default=None, min_length=1)
    """Review tasks: the id of the review task whose change this task's ``review_patch`` is the clean version
    of. The review rule asks for no blocking finding on it (``no_blocking_finding``)."""
    acceptance_criteria: list[str] = Field(default_factory=list)
    """What a change must do to be accepted, one criterion per entry, as a human rater checks it: the blinded
    package raters score from (``repo rate export``) shows them with the prompt. The agent never sees them."""
    validation_commands: list[str] = Field(default_factory=list)
    """Public validation commands, split like an entry point (no shell unless one is named): run after the
    agent, each in a container holding only the agent's tree as it left it; their output and exit codes go to
    raters (``validation_passed``)."""
    hidden_validation_commands: list[str] = Field(default_factory=list)
    """Locked evaluator checks: run like ``validation_commands``, on the agent's tree with every test file put
    back as it was at the base and the hidden tests (``test_patch``) applied; their output goes to raters too,
    and a failing one makes the run not regression-free."""

    @model_validator(mode="before")
    @classmethod
    def _setup_patch_synonym(cls, data: Any) -> Any:
        if isinstance(data, dict) and "setup_patch" in data:
            if "setup_patches" in data:
                raise ValueError("give setup_patch or setup_patches, not both")
            data = dict(data)
            single = data.pop("setup_patch")
            data["setup_patches"] = [single] if isinstance(single, str) else single
        return data

    @model_validator(mode="after")
    def _one_prompt_per_style(self) -> Task:
        if self.prompt_issue is not None and self.prompt_style == "issue":
            raise ValueError(
                "prompt_style is issue and prompt_issue is set: with prompt_issue, prompt is the spec "
                "variant (set prompt_style to spec, or drop it)"
            )
        return self

    def prompt_styles(self) -> list[PromptStyle]:
        """The prompt variants the task carries: its ``prompt``'s style (spec when ``prompt_issue`` is set or
        none is declared) and ``issue`` when ``prompt_issue`` is set."""
        own: PromptStyle = self.prompt_style or "spec"
        return [own, "issue"] if self.prompt_issue is not None else [own]

    def with_prompt(self, style: PromptStyle | None) -> Task:
        """The task as a cell of prompt variant ``style`` runs it (None: its own prompt): ``prompt`` and
        ``prompt_style`` are that variant's. ValueError for a variant the task does not carry."""
        if style is None:
            return self
        if style not in self.prompt_styles():
            raise ValueError(
                f"task {self.id} has no {style}-style prompt (it carries {', '.join(self.prompt_styles())})"
            )
        if style == "issue" and self.prompt_issue is not None:
            return self.model_copy(update={"prompt": self.prompt_issue, "prompt_style": "issue"})
        return self.model_copy(update={"prompt_style": style})

    @model_validator(mode="after")
    def _mode_defaults(self) -> Task:
        """The mode's success rule when task.json names no gate, and an autonomous task's issue prompt. Set
        without marking the keys as given, so :attr:`gate_from_mode` can tell."""
        if "gate" not in self.model_fields_set:
            rule = self.mode_rule()
            if rule is not None:
                self.__dict__["gate"] = rule
        if (
            self.mode == "autonomous"
            and "prompt_style" not in self.model_fields_set
            and not self.prompt_issue
        ):
            self.__dict__["prompt_style"] = "issue"
        return self

    def mode_rule(self) -> list[GateEntry] | None:
        """The success rule of the task's mode for what the task declares (decoys, a clean diff, a perf
        check); None without a mode."""
        return success_rule(
            self.mode,
            decoys=bool(self.decoys),
            clean_diff=self.clean_diff_of is not None,
            perf=(self.model_extra or {}).get("perf") is not None,
        )

    @property
    def gate_from_mode(self) -> bool:
        """Whether the gate is the mode's success rule (task.json names no gate of its own)."""
        return "gate" not in self.model_fields_set and self.gate != _default_gate()

    @property
    def gate_names(self) -> list[str]:
        """The metric each gate entry names, in order."""
        return [entry if isinstance(entry, str) else entry.metric for entry in self.gate]

    @property
    def gated_without_pass(self) -> bool:
        """Whether the gate names only dokimi's review checks: such a task is gated even when its grader
        leaves ``pass`` null, and its ``score`` (recall) is reported beside the gate."""
        names = self.gate_names
        return bool(names) and all(name in REVIEW_METRICS for name in names)

    @field_validator("base")
    @classmethod
    def _base_is_hex(cls, value: str) -> str:
        if base_form(value) == "invalid":
            raise ValueError(
                "not a hex SHA (optionally followed by ^); branches, tags and HEAD are refused "
                "because repetitions of one task must get one snapshot"
            )
        return value

    @field_validator("threads", "decoys")
    @classmethod
    def _ids_unique(cls, value: list[ReviewThread] | list[Decoy], info: ValidationInfo) -> list[Any]:
        ids = [item.id for item in value]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            what = "thread" if info.field_name == "threads" else "decoy"
            raise ValueError(f"{what} ids must be unique: {', '.join(repeated)}")
        return value

    @field_validator("acceptance_criteria")
    @classmethod
    def _criteria_say_something(cls, value: list[str]) -> list[str]:
        for number, criterion in enumerate(value, 1):
            problem = criterion_problem(criterion)
            if problem:
                raise ValueError(f"criterion {number}: {problem}")
        return value

    @field_validator("validation_commands", "hidden_validation_commands")
    @classmethod
    def _commands_split(cls, value: list[str]) -> list[str]:
        for command in value:
            problem = command_problem(command)
            if problem:
                raise ValueError(f"{command!r}: {problem}")
        return value

    @field_validator("egress")
    @classmethod
    def _egress_hosts(cls, value: list[str]) -> list[str]:
        for host in value:
            problem = egress_host_problem(host)
            if problem:
                raise ValueError(f"{host!r}: {problem}")
        return value

    @property
    def score_only(self) -> bool:
        """Whether the task has ``score`` (its result is ``score.metric`` when ``pass`` is null)."""
        return self.score is not None

    @property
    def base_sha(self) -> str:
        """The SHA part of ``base`` (without a trailing ``^``)."""
        return split_base(self.base)[0]

    @property
    def at_parent(self) -> bool:
        """Whether ``base`` names the parent (``sha^``) of the SHA."""
        return split_base(self.base)[1]


def framework_task_keys() -> list[str]:
    """Every task.json key the framework reads (the synonym ``setup_patch`` included)."""
    return [info.alias or name for name, info in Task.model_fields.items()] + ["setup_patch"]


def misspelled_task_keys(data: dict[str, Any]) -> list[tuple[str, str]]:
    """``(key, framework key)`` for each key of a task.json that is not a framework key (or a built-in
    grader's) but spells like one (``gates``, ``setup_pathces``, ``Prompt``, ``fail_to_pas``): such a key
    would otherwise reach the grader unread while the framework silently uses the default (no gate, no setup
    patch). Other unknown keys belong to the grader."""
    known = framework_task_keys()
    found = []
    for key in data:
        if key in known or key in BUILTIN_GRADER_KEYS or not isinstance(key, str):
            continue
        close = did_you_mean(key, [*known, *BUILTIN_GRADER_KEYS], cutoff=MISSPELLING_CUTOFF)
        if close is not None:
            found.append((key, close))
    return found
