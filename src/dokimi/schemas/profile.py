"""harness_profile.v1: how dokimi starts one harness CLI, and how a reasoning ``effort`` reaches it.

The model holds the shape only. The rules that tie fields together (``{tools}`` exactly once, the known
placeholders per field, ...) are named functions in :mod:`dokimi.harness.profile`, each reported with the
file:line of the offending key.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dokimi.schemas._base import Document

ToolsLevel = Literal["none", "read", "all"]


class Tools(Document):
    """What the ``"{tools}"`` element of ``invoke`` expands to, per tool level (literal, no placeholders)."""

    none: list[str]
    """No tools at all (the reach probe's cwd scenarios, a judge)."""
    read: list[str]
    """Reading files only (the reach probe's read scenarios)."""
    all: list[str]
    """Everything an agent run needs; web access stays off (the model must not fetch the upstream fix)."""
    web: list[str] | None = None
    """``all`` with the harness's web tools on, used instead of ``all`` for a task whose ``egress`` names
    hosts (the task allows the network, so its web tools may reach them). Null: web tools stay off then
    too."""


class Guidance(Document):
    """How the harness finds guidance files. DECLARED from the vendor's documentation; the reach probe
    verifies it and is the only thing to trust."""

    names: list[str]
    """File names the harness loads by itself (CLAUDE.md, AGENTS.md, GEMINI.md); the reach probe seeds every
    file so named, besides the manifest's guidance globs."""
    resolution: str
    """Free text: where the harness looks (``ancestors-of-cwd + lazy-on-subtree-access``)."""
    imports: str | None = None
    """The import syntax inside a guidance file (``@path``), or null when there is none."""


class Bridge(Document):
    """The guidance:bridge arm: a file written next to every matched ``for`` file."""

    for_: str = Field(alias="for")
    """Name of the file the bridge points at (AGENTS.md)."""
    write: str
    """Name of the file written beside it (CLAUDE.md)."""
    content: str
    """Its content (``@AGENTS.md``)."""


class Effort(Document):
    """How the reasoning effort reaches the harness (the profile carries the effort).

    With an effort set, ``argv`` is inserted right after the expansion of ``"{tools}"`` and ``env`` is added
    to the child's environment, both with ``{effort}`` replaced by the value. Without one, neither is used and
    the harness runs at its own default (the cell's effort is then ``null``/``default``).
    """

    argv: list[str] = Field(default_factory=list)
    """Arguments that pass the effort, e.g. ``["--effort", "{effort}"]``; each element stays one argument."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables that pass the effort, e.g. ``{MAX_THINKING_TOKENS: "{effort}"}``."""
    values: list[str] | None = None
    """The values the harness accepts; any other is refused before the run. Null accepts any string."""


class ScriptTool(Document):
    """One tool as the scripted model calls it: its name and the one input key that carries the argument."""

    name: str = Field(min_length=1)
    """The tool's name in the harness's tool list (``Bash``, ``exec_command``, ``run_shell_command``)."""
    arg: str = Field(min_length=1)
    """The input key of the command or path (``command``, ``cmd``, ``file_path``)."""


class ScriptTools(Document):
    """How a dry run's scripted model calls this harness's tools (derived scripts, ``reach --dry-run``)."""

    command: ScriptTool | None = None
    """The shell tool: the derived script applies the oracle's diff through it. Null for a harness without
    one, whose ``text_edits`` says how its model edits instead."""
    read: ScriptTool | None = None
    """The file-read tool; null when the harness has none (the probe then reads with ``cat`` through
    ``command``, or, for a harness with ``text_edits``, by naming the file in its answer)."""
    text_edits: Literal["search-replace"] | None = None
    """A harness whose model calls no tools (Aider) edits by answering in a text format: ``search-replace`` is
    Aider's ``diff`` edit format (a file's path, then ``<<<<<<< SEARCH`` / ``=======`` / ``>>>>>>> REPLACE``).
    Such a harness reads a file when its model names the file in an answer (Aider adds it to the chat and asks
    again). Null: the model calls tools."""


class Verification(Document):
    """Which version of the CLI the profile was checked against, and whether it was run end to end here."""

    version: str = Field(min_length=1)
    """The pinned version (scripts/install-harness.sh installs exactly this one)."""
    package: str = Field(min_length=1)
    """Where it comes from (``npm @openai/codex``, ``pypi aider-chat``)."""
    executable: str | None = Field(default=None, pattern=r"^[\w@+-][\w.@+-]*(/[\w@+-][\w.@+-]*)*$")
    """The file to run, relative to the directory scripts/install-harness.sh installs this version into
    (``node_modules/@openai/codex-linux-x64/.../codex``; no segment starts with a dot): where dokimi finds
    the pinned install. Null: not installed by the script."""
    verified: bool
    """True when this version ran a dry run of the bundled example and the reach tests here."""
    note: str = ""
    """Why not verified (or what is only partly verified)."""


class JudgeMode(Document):
    """How the harness runs as the rubric judge: one answer to one prompt, with no tools, no settings or
    guidance of the caller's, in a scratch directory (docs/mergeability.md)."""

    invoke: list[str] = Field(min_length=1)
    """argv of one judge call. Placeholders {bin}, {model}, {max_turns}, {config_dir}; the element
    ``"{tools}"`` exactly once, where the tool level ``none`` (then the effort's arguments) expands. No
    {prompt}: the prompt goes in on stdin, so a large diff is not limited by the size of one argument."""


class HarnessProfile(Document):
    """One harness CLI: how to start it, what it may see, where its trace goes, which guidance it loads."""

    schema_: Literal["harness_profile.v1"] = Field(alias="schema")
    """Always ``harness_profile.v1``."""
    name: str = Field(min_length=1)
    """The profile's name (``--harness NAME``); recorded with every run."""
    bin: str = Field(min_length=1)
    """The executable, looked up on PATH unless it holds a ``/``; ``--bin`` overrides it."""
    version_cmd: list[str] = Field(min_length=1)
    """argv that prints the harness version; only ``{bin}`` is substituted."""
    invoke: list[str] = Field(min_length=1)
    """argv of one run. Placeholders {bin}, {prompt}, {model}, {max_turns}, {budget}, {endpoint},
    {config_dir} (the per-run config directory, for a file the harness writes); the element
    ``"{tools}"`` exactly once. Each element becomes exactly one argument; nothing passes through a shell."""
    tools: Tools
    """What ``"{tools}"`` expands to, per tool level."""
    config_dir_env: str | None = None
    """Variable that points the harness at a fresh config directory per run (CLAUDE_CONFIG_DIR)."""
    env_allow: list[str] = Field(default_factory=list)
    """Names passed through from the caller's environment; nothing else is. In a container PATH and HOME are
    dropped even when listed: the image's PATH and the per-run HOME apply."""
    env_set: dict[str, str] = Field(default_factory=dict)
    """Variables set for every run, after env_allow."""
    egress: list[str] = Field(default_factory=list)
    """The only hosts the agent container reaches through the egress proxy."""
    endpoint_env: str | None = None
    """Variable holding the model endpoint's base URL, used by payload capture: the reach probe's dry run
    points it at the scripted model server, a real run at a capturing proxy in front of the real endpoint."""
    endpoint_default: str | None = None
    """The base URL the harness uses when endpoint_env is not set (``https://api.anthropic.com``): the
    capturing proxy's upstream when the caller's environment does not set endpoint_env. Null: no capture
    then."""
    endpoint_bypass_env: list[str] = Field(default_factory=list)
    """Variables that, set to a true value in the caller's environment (anything but empty, 0, false, no,
    off), make the harness ignore endpoint_env (CLAUDE_CODE_USE_BEDROCK, CLAUDE_CODE_USE_VERTEX): the
    request bytes cannot be captured through it then."""
    credential_env: list[str] = Field(default_factory=list)
    """Variables that hold the model API credential (ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN). In a sealed
    real run the agent's container gets a per-cell dummy in each one set on the host (in the first when none
    is), and the model gateway swaps the dummy for the host's value: the real credential never enters the
    container. A profile without them cannot run sealed."""
    api: list[Literal["anthropic", "openai-responses", "openai-chat", "gemini"]] = Field(default_factory=list)
    """The model APIs the harness speaks through endpoint_env (``anthropic``: Messages; ``openai-responses``;
    ``openai-chat``: Chat Completions; ``gemini``: generateContent). In a sealed run the model gateway
    forwards only these APIs' model-turn and token-count paths, and swaps the dummy key only in their
    credential headers (docs/network.md). A profile without it cannot run sealed."""
    dry_run_env: dict[str, str] = Field(default_factory=dict)
    """Variables set only for a dry run against the scripted server (a dummy API key), after env_set."""
    trace: str = "text"
    """Converter of the harness's stdout to events.jsonl: a built-in one's name (``claude-stream-json``, a
    module of dokimi.harness.traces), or the dotted name of an importable module with a ``convert(lines)``
    function."""
    guidance: Guidance
    """How the harness finds guidance (declared, verified by the reach probe)."""
    bridge: Bridge | None = None
    """The guidance:bridge arm exists only for a profile with a bridge."""
    guidance_init: str | None = None
    """The prompt that makes the harness write its own guidance file for the repository (Claude Code:
    ``/init``, which writes CLAUDE.md): the guidance:generated arm runs it once per (task, model) before the
    agent. Null: the harness has no generator, and that arm is refused."""
    prompt_suffix: str | None = None
    """Appended to every task prompt."""
    config_files: dict[str, str] = Field(default_factory=dict)
    """Files written into the per-run config directory (relative name -> content), with {config_dir} and
    {support_dir} replaced by those directories as the agent sees them."""
    effort: Effort | None = None
    """How the reasoning effort is passed; null when the harness has no effort setting."""
    script_tools: ScriptTools = Field(
        default_factory=lambda: ScriptTools(
            command=ScriptTool(name="Bash", arg="command"), read=ScriptTool(name="Read", arg="file_path")
        )
    )
    """The harness's shell and read tools as a scripted model calls them (default: Claude Code's)."""
    verification: Verification | None = None
    """The pinned version and whether it was verified end to end; null for a profile nobody checked."""
    judge: JudgeMode | None = None
    """How the harness runs as the rubric judge; null: it cannot be one (``--judge-harness`` refuses it)."""
