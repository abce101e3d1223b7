"""guidance_reach.v1: what the reach probe found (contract §7), written to ``<out>/reach.json``."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field

from dokimi.schemas._base import Document


class ReachClass(StrEnum):
    """How much of one guidance file reached the model in one scenario."""

    LOADED = "loaded"
    """Both tokens reported."""
    TRUNCATED = "truncated"
    """One token reported."""
    FETCHED = "fetched"
    """Reported only after the agent read the file itself with a tool."""
    NOT_LOADED = "not_loaded"
    """No token reported."""
    ERROR = "error"
    """The scenario produced no usable answer: none, a non-zero exit, an error result or a timeout."""


class AliasKind(StrEnum):
    SYMLINK = "symlink"
    COPY = "copy"
    """The OS refused a symlink and the link was written as a copy of its target."""


class Alias(Document):
    path: str
    """The link's path in the tree."""
    alias_kind: AliasKind
    """How the skeleton made it: a symlink, as in a checkout, or a copy where symlinks are refused."""


class SeededFile(Document):
    path: str
    """The guidance file (a link's target); its records are keyed by this path."""
    head: str
    """Token placed at the top (after YAML front matter)."""
    tail: str
    """Token placed at the end."""
    aliases: list[Alias] = Field(default_factory=list)
    """Links to this file: they share its tokens and its records."""


class Unresolved(Document):
    path: str
    reason: str
    """``dangles``, ``escapes the tree``, ``loops`` or ``names a directory``: the link was not seeded."""


class Scenario(Document):
    name: str
    """``cwd=.``, ``cwd=<dir>`` or ``read=<dir>``."""
    cwd: str
    """Where the harness started, relative to the workspace root ('.' for the root)."""
    tools: Literal["none", "read", "all"]
    read_target: str | None = None
    """The probe file the agent was told to read (read scenarios)."""
    returncode: int | None
    """The harness's exit code; null when it was killed at the timeout."""
    timed_out: bool
    error: str | None
    """Why the scenario gave no usable answer; null when it did."""
    reported: list[str]
    """Seeded tokens the model reported, in order."""
    unknown: list[str]
    """Tokens the model reported that were never seeded."""
    prose: int
    """Words in the answer besides tokens. A high count usually means an explanation or a refusal: read the
    trace before trusting the scenario's not_loaded cells."""
    payload_captured: bool
    """Whether the request bytes were captured (dry run against the scripted server)."""
    in_payload: list[str] | None = None
    """Seeded tokens found in the captured request bytes; null without capture."""
    trace_dir: str
    """Raw stdout and events.jsonl of this scenario, relative to the output directory."""


class PayloadSeen(Document):
    head: bool
    tail: bool


class Record(Document):
    """One (file, scenario) cell."""

    file: str
    scenario: str
    harness: str
    harness_version: str
    model: str
    head: bool
    """The head token was reported."""
    tail: bool
    """The tail token was reported."""
    read_by_tool: bool
    """The agent read the file (or a link to it) with a tool in this scenario."""
    class_: ReachClass = Field(alias="class")
    payload: PayloadSeen | None = None
    """Whether each token was in the request bytes; null without payload capture."""


class GuidanceReach(Document):
    """The reach probe's result for one (harness, version, model)."""

    schema_: Literal["guidance_reach.v1"] = Field(default="guidance_reach.v1", alias="schema")
    source: str
    """The source as given on the command line."""
    tree: str | None
    """Full SHA of the probed tree; null for a working tree."""
    harness: str
    harness_version: str
    model: str
    dry_run: bool
    """True when the model was the scripted server (zero cost): classes then reflect the request bytes."""
    salt: str
    """Salt of the tokens: the same salt reproduces the same tokens."""
    guidance_globs: list[str]
    declared: dict[str, str | list[str] | None]
    """The profile's declared guidance block, for comparison with what the probe found."""
    files: list[SeededFile]
    unresolved: list[Unresolved]
    scenarios: list[Scenario]
    records: list[Record]
