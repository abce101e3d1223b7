"""guidance_reach.v1: what the reach probe found, written to ``<out>/reach.json``."""

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
    """The link's path in the tree."""
    reason: str
    """``dangles``, ``escapes the tree``, ``loops`` or ``names a directory``: the link was not seeded."""


class Scenario(Document):
    name: str
    """``cwd=.``, ``cwd=<dir>`` or ``read=<dir>``."""
    cwd: str
    """Where the harness started, relative to the workspace root ('.' for the root)."""
    tools: Literal["none", "read", "all"]
    """The profile's tool level the harness ran with: none for cwd scenarios, read for read scenarios."""
    read_target: str | None = None
    """The probe file the agent was told to read (read scenarios)."""
    returncode: int | None
    """The harness's exit code; null when it was killed at the timeout."""
    timed_out: bool
    """The harness ran past --timeout and was killed with its process group."""
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
    """Whether the request bytes were captured (by the scripted server in a dry run, or by the capturing
    proxy in front of the real endpoint; see GuidanceReach.capture)."""
    in_payload: list[str] | None = None
    """Seeded tokens found in the captured request bytes; null without capture."""
    trace_dir: str
    """Raw stdout and events.jsonl of this scenario, relative to the output directory."""


class PayloadSeen(Document):
    head: bool
    """The head token was in the captured request bytes."""
    tail: bool
    """The tail token was in the captured request bytes."""


class Record(Document):
    """One (file, scenario) cell."""

    file: str
    """The seeded file (a link's target)."""
    scenario: str
    """The scenario's name (cwd=., cwd=<dir>, read=<dir>)."""
    harness: str
    """The harness profile's name."""
    harness_version: str
    """The version the harness reported: loading changes between versions."""
    model: str
    """The model id, as given."""
    head: bool
    """The head token was reported."""
    tail: bool
    """The tail token was reported."""
    read_by_tool: bool
    """The agent read the file (or a link to it) with a tool in this scenario."""
    class_: ReachClass = Field(alias="class")
    """loaded, truncated, fetched, not_loaded or error."""
    payload: PayloadSeen | None = None
    """Whether each token was in the request bytes; null without payload capture."""


class GuidanceReach(Document):
    """The reach probe's result for one (harness, version, model)."""

    schema_: Literal["guidance_reach.v1"] = Field(default="guidance_reach.v1", alias="schema")
    """Always ``guidance_reach.v1``."""
    source: str
    """The source as given on the command line."""
    tree: str | None
    """Full SHA of the probed tree; null for a working tree."""
    harness: str
    """The harness profile's name."""
    harness_version: str
    """The version the harness reported; reach results are keyed by it."""
    model: str
    """The model id, as given (opaque)."""
    dry_run: bool
    """True when the model was the scripted server (zero cost): classes then reflect the request bytes."""
    capture: Literal["scripted_server", "proxy"] | None = None
    """How the request bytes were captured: ``scripted_server`` (dry run), ``proxy`` (a capturing proxy
    between the harness and the real endpoint); null when they were not (see capture_missing)."""
    capture_upstream: str | None = None
    """The endpoint the capturing proxy forwarded to (the caller's endpoint_env, else the profile's
    endpoint_default); null without the proxy."""
    capture_missing: str | None = None
    """Why payload is null in every record: --no-capture, no endpoint_env in the profile, Bedrock or Vertex
    selected (the harness ignores endpoint_env), no endpoint to forward to. Null when captured."""
    salt: str
    """Salt of the tokens: the same salt reproduces the same tokens."""
    guidance_globs: list[str]
    """The globs the guidance files came from (the manifest's, or the defaults), besides guidance.names."""
    declared: dict[str, str | list[str] | None]
    """The profile's declared guidance block, for comparison with what the probe found."""
    files: list[SeededFile]
    """Every seeded guidance file, with its tokens and aliases."""
    unresolved: list[Unresolved]
    """Links to guidance that were not seeded, with the reason."""
    scenarios: list[Scenario]
    """Every scenario run, in order."""
    records: list[Record]
    """One per (file, scenario)."""
