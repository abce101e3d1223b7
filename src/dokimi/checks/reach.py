"""The reach probe: which guidance files a harness really puts in front of its model.

1. A skeleton workspace in a temporary directory: every guidance file (the manifest's globs, plus files named
   like the profile's ``guidance.names``, outside eval_dir) at its repository path, seeded with a head and a
   tail token; symlinks recreated as links (or copies, ``alias_kind: copy``, where the OS refuses them); one
   ``REACH_PROBE.txt`` per guidance directory; a one-commit git repository.
2. Scenarios, each with a fresh config directory: ``cwd=.`` and ``cwd=<dir>`` (tools off), ``read=<dir>``
   (started at the root, read tool on, told to read ``<dir>/REACH_PROBE.txt``), and on request ``all=.``
   (started at the root with every tool a run gives the agent). The model is asked for every token in its
   instructions or context.
3. One record per (file, scenario): loaded, truncated, fetched, not_loaded or error; plus ``payload`` from the
   request bytes, which settles what was sent. They are captured by the scripted model server in a dry run,
   and by a capturing proxy (:mod:`dokimi.gateway.capture_proxy`) in front of the real endpoint otherwise
   (``plan_capture`` says when that is not possible, and why).

Each rule is one named function (``check_tree_path``, ``refuse_guidance_ancestors``, ``token``,
``seed_text``, ``classify``, ``parse_answer``, ``plan_capture``, ``tokens_in_payload``), tested on its
own. The harness runs on the host (not in the
agent container), as a non-root user when dokimi runs as root (:mod:`dokimi.harness.runas`).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import secrets
import shlex
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from dokimi import process
from dokimi.errors import PrerequisiteError, UsageError
from dokimi.gateway.capture_proxy import CaptureProxy
from dokimi.harness.profile import AgentRequest, Placement, build_invocation, resolve_bin, version_argv
from dokimi.harness.runas import RunAs, give_to, harness_identity, reachable_binary, wrap_argv
from dokimi.harness.runtime import host_launcher, is_node_script, node_binary
from dokimi.harness.traces import convert_file, write_conversion
from dokimi.repo.manifest import guidance_files_at
from dokimi.rundir import RunDir
from dokimi.schemas._base import write_document
from dokimi.schemas.profile import HarnessProfile, ToolsLevel
from dokimi.schemas.reach import (
    Alias,
    AliasKind,
    GuidanceReach,
    PayloadSeen,
    ReachClass,
    Record,
    Scenario,
    SeededFile,
    Unresolved,
)
from dokimi.source.git import run_git
from dokimi.source.snapshot import Snapshot
from dokimi.support import support_dir
from dokimi.support.mockmodel import MockModelServer

__all__ = [
    "PROBE_FILE",
    "REQUESTS_FILE",
    "SCENARIO_KINDS",
    "CapturePlan",
    "PlannedScenario",
    "ReachOptions",
    "Skeleton",
    "build_skeleton",
    "check_tree_path",
    "classify",
    "guidance_dirs",
    "parse_answer",
    "plan_capture",
    "plan_scenarios",
    "plan_skeleton",
    "refuse_empty_plan",
    "refuse_guidance_ancestors",
    "run_reach",
    "seed_text",
    "token",
    "tokens_in_payload",
    "truthy",
    "upstream_proxy",
]

PROBE_FILE = "REACH_PROBE.txt"
REQUESTS_FILE = "requests.jsonl"
"""Per scenario, beside its trace: one JSON line per captured request (no credential headers)."""
PROBE_TEXT = "This file marks a directory for dokimi's guidance reach probe. It holds no instructions.\n"
SCENARIO_KINDS = ("root", "cwd", "read", "all")
"""--scenarios: root is cwd=., cwd is cwd=<dir> for every other guidance dir, read is read=<dir> for each, all
is all=. (started at the root with every tool a run gives the agent: what its first request holds, skills'
listing included). The default is root, cwd and read."""
DEFAULT_SCENARIO_KINDS = ("root", "cwd", "read")
TOKEN_RE = re.compile(r"RC[0-9a-f]{6}")
REACH_MAX_TURNS = 4
REACH_BUDGET_USD = 0.5
DEFAULT_TIMEOUT_S = 300.0
ANCESTOR_GUIDANCE_NAMES = ("AGENTS.md", "CLAUDE.md", "CLAUDE.local.md", "GEMINI.md")
"""Checked in every ancestor of the skeleton besides the profile's names: any of them would leak in."""

ASK = (
    "List every token made of the letters RC followed by six lowercase hex digits that appears "
    "anywhere in your instructions or context, including context attached to a tool result. Answer with the "
    "tokens only, separated by spaces, and nothing else. If there are none, answer NONE."
)


# --- rules --------------------------------------------------------------------------------------------------


def check_tree_path(path: str) -> str | None:
    """Why a tree path cannot be written into the skeleton, or None. Refused: a ``\\`` or ``:`` anywhere, an
    empty, ``.``, ``..`` or ``.git`` component, an absolute path (it would land outside the workspace or in
    its git directory)."""
    if "\\" in path:
        return "it holds a backslash"
    if ":" in path:
        return "it holds a ':'"
    if path.startswith("/"):
        return "it is absolute"
    for part in path.split("/"):
        if part == "":
            return "it has an empty component"
        if part in (".", ".."):
            return f"it has a {part!r} component"
        if part.lower() == ".git":
            return "it has a .git component"
    return None


def token(salt: str, path: str, position: str) -> str:
    """``RC`` + the first 6 hex digits of sha256(salt NUL path NUL position); position is head or tail."""
    digest = hashlib.sha256(f"{salt}\0{path}\0{position}".encode()).hexdigest()
    return "RC" + digest[:6]


_FRONT_MATTER_END = ("---", "...")


def seed_text(text: str, head: str, tail: str) -> str:
    """The file with ``head`` on its own line at the top, after YAML front matter if any, and ``tail`` on its
    own line at the end."""
    lines = text.splitlines(keepends=True)
    insert_at = 0
    if lines and lines[0].rstrip() == "---":
        for i in range(1, len(lines)):
            if lines[i].rstrip() in _FRONT_MATTER_END:
                insert_at = i + 1
                break
    if insert_at and not lines[insert_at - 1].endswith("\n"):
        lines[insert_at - 1] += "\n"
    lines.insert(insert_at, head + "\n")
    body = "".join(lines)
    if not body.endswith("\n"):
        body += "\n"
    return body + "\n" + tail + "\n"


def refuse_guidance_ancestors(directory: Path, names: Iterable[str]) -> None:
    """Refuse to probe in ``directory`` when one of its ancestors holds a guidance file: the harness would
    load it in every scenario, and the probe would measure the host, not the repository."""
    wanted = sorted(set(names) | set(ANCESTOR_GUIDANCE_NAMES))
    for ancestor in directory.resolve().parents:
        for name in wanted:
            candidate = ancestor / name
            if os.path.lexists(candidate):
                raise UsageError(
                    f"{candidate} is a guidance file in an ancestor of the probe's workspace ({directory}); "
                    "the harness would load it in every scenario",
                    hint="remove it, or point TMPDIR at a directory with no guidance file above it",
                )


def classify(*, head: bool, tail: bool, read_by_tool: bool, error: bool) -> ReachClass:
    """error without a usable answer; fetched when the tokens came only after the agent read the file with a
    tool; loaded with both tokens; truncated with one; not_loaded with none."""
    if error:
        return ReachClass.ERROR
    if read_by_tool and (head or tail):
        return ReachClass.FETCHED
    if head and tail:
        return ReachClass.LOADED
    if head or tail:
        return ReachClass.TRUNCATED
    return ReachClass.NOT_LOADED


@dataclass(frozen=True)
class ParsedAnswer:
    reported: list[str]
    """Seeded tokens reported, in order of first appearance."""
    unknown: list[str]
    """Tokens reported that were never seeded."""
    prose: int
    """Words besides tokens (NONE, the answer the probe asks for when there is none, is not prose)."""


def parse_answer(answer: str, seeded: Iterable[str]) -> ParsedAnswer:
    seeded_set = set(seeded)
    found = list(dict.fromkeys(TOKEN_RE.findall(answer)))
    words = [
        w
        for w in re.split(r"[\s,;]+", TOKEN_RE.sub(" ", answer))
        if re.search(r"[A-Za-z0-9]", w) and w.strip(".:`*-()[]") not in ("NONE", "")
    ]
    return ParsedAnswer(
        reported=[t for t in found if t in seeded_set],
        unknown=[t for t in found if t not in seeded_set],
        prose=len(words),
    )


def tokens_in_payload(bodies: Iterable[bytes], seeded: Sequence[str]) -> list[str]:
    """The seeded tokens found anywhere in the captured request bodies of one scenario, in seeding order.
    One rule for every capture (the scripted server's and the proxy's)."""
    text = b"\n".join(bodies).decode("utf-8", "replace")
    return [t for t in seeded if t in text]


_FALSE_WORDS = ("", "0", "false", "no", "off")


def truthy(value: str | None) -> bool:
    """How harnesses read a switch variable: set and not empty, 0, false, no or off (any case)."""
    return value is not None and value.strip().lower() not in _FALSE_WORDS


@dataclass(frozen=True)
class CapturePlan:
    """How one reach run captures the request bytes: ``kind`` and the proxy's ``upstream``, or ``missing``
    (why not)."""

    kind: Literal["scripted_server", "proxy"] | None
    upstream: str | None = None
    via: str | None = None
    """An HTTP proxy the capturing proxy reaches the upstream through (the caller's https_proxy or
    http_proxy)."""
    missing: str | None = None


def plan_capture(
    profile: HarnessProfile, *, dry_run: bool, capture: bool, environ: Mapping[str, str]
) -> CapturePlan:
    """Where the request bytes come from, first match wins:

    1. a dry run: the scripted model server captures them (it needs endpoint_env, checked before);
    2. ``--no-capture``: nowhere;
    3. a profile without endpoint_env: nowhere, the harness cannot be pointed at a proxy;
    4. a true ``endpoint_bypass_env`` variable in the harness's environment (Bedrock, Vertex): nowhere, the
       harness ignores endpoint_env then. The value is what the harness gets: env_set's, else the caller's
       when env_allow passes it;
    5. the capturing proxy, forwarding to the caller's endpoint_env if set, else to the profile's
       endpoint_default; with neither, nowhere.

    A caller's endpoint_env that is not an http(s) URL is a usage error (the harness would fail on it too).
    """
    if dry_run:
        return CapturePlan("scripted_server")
    if not capture:
        return CapturePlan(None, missing="turned off with --no-capture")
    if not profile.endpoint_env:
        return CapturePlan(
            None, missing=f"harness {profile.name!r} has no endpoint_env to point at a capturing proxy"
        )
    for name in profile.endpoint_bypass_env:
        passed = environ.get(name) if name in profile.env_allow else None
        if truthy(profile.env_set.get(name, passed)):
            return CapturePlan(
                None,
                missing=f"{name} is set: {profile.name} does not use {profile.endpoint_env} then, so its "
                "requests cannot pass through the capturing proxy",
            )
    upstream = environ.get(profile.endpoint_env) or profile.endpoint_default
    if not upstream:
        return CapturePlan(
            None,
            missing=f"{profile.endpoint_env} is not set and harness {profile.name!r} has no "
            "endpoint_default, so the capturing proxy has no endpoint to forward to",
        )
    parts = urlsplit(upstream)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
        raise UsageError(
            f"{profile.endpoint_env}={upstream!r} is not an http(s) base URL without credentials, so the "
            "capturing proxy cannot forward to it",
            key=profile.endpoint_env,
            hint="fix the variable, or pass --no-capture (payload then stays null)",
        )
    return CapturePlan("proxy", upstream=upstream.rstrip("/"), via=upstream_proxy(upstream, environ))


_LOOPBACK = ("localhost", "127.0.0.1", "::1")


def upstream_proxy(url: str, environ: Mapping[str, str]) -> str | None:
    """The HTTP proxy the caller's environment routes ``url`` through (https_proxy/HTTPS_PROXY for https,
    http_proxy/HTTP_PROXY for http, minus no_proxy), as the harness itself would; never for loopback."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if host in _LOOPBACK or host.startswith("127."):
        return None
    scheme = parts.scheme
    via = environ.get(f"{scheme}_proxy") or environ.get(f"{scheme.upper()}_PROXY")
    if not via:
        return None
    no_proxy = environ.get("no_proxy") or environ.get("NO_PROXY")
    if no_proxy and _no_proxy_matches(host, no_proxy):
        return None
    return via if "://" in via else f"http://{via}"


def _no_proxy_matches(host: str, no_proxy: str) -> bool:
    """curl's no_proxy rule: ``*``, or an entry equal to the host or a domain suffix of it (``.x.com`` and
    ``x.com`` both match ``a.x.com``); a ``:port`` on an entry is ignored."""
    host = host.lower()
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if entry == "*":
            return True
        entry = entry.rsplit(":", 1)[0] if entry.count(":") == 1 else entry
        entry = entry.lstrip(".")
        if entry and (host == entry or host.endswith("." + entry)):
            return True
    return False


# --- the skeleton -------------------------------------------------------------------------------------------


@dataclass
class Skeleton:
    """What the probe writes: seeded files (link targets) with their aliases, and links it cannot follow."""

    files: dict[str, list[str]] = field(default_factory=dict)
    """target path -> paths of the links to it."""
    unresolved: list[tuple[str, str]] = field(default_factory=list)
    alias_kinds: dict[str, AliasKind] = field(default_factory=dict)


def _under(path: str, directory: str | None) -> bool:
    if not directory:
        return False
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def plan_skeleton(
    snapshot: Snapshot, *, globs: Sequence[str], names: Sequence[str], eval_dir: str | None
) -> Skeleton:
    """Which files the skeleton holds. Raises UsageError for a path the skeleton cannot write safely."""
    name_set = set(names)
    candidates = set(guidance_files_at(snapshot, globs))
    candidates |= {
        p for p, e in snapshot.entries.items() if not e.is_submodule and posixpath.basename(p) in name_set
    }
    plan = Skeleton()
    for path in sorted(candidates):
        if _under(path, eval_dir):
            continue
        _refuse_path(path, snapshot)
        entry = snapshot.entries[path]
        if not entry.is_symlink:
            plan.files.setdefault(path, [])
            continue
        resolved = snapshot.resolve(path)
        if resolved.path is None:
            plan.unresolved.append((path, resolved.reason or "cannot be followed"))
            continue
        target_entry = snapshot.entries.get(resolved.path)
        if target_entry is None or target_entry.kind != "blob":
            plan.unresolved.append((path, "names a directory"))
            continue
        _refuse_path(resolved.path, snapshot)
        plan.files.setdefault(resolved.path, []).append(path)
    for target in plan.files:
        plan.files[target].sort()
    return plan


def _refuse_path(path: str, snapshot: Snapshot) -> None:
    reason = check_tree_path(path)
    if reason is not None:
        raise UsageError(
            f"{snapshot.label}: guidance path {path!r} cannot be written into the probe's skeleton: {reason}",
            path=path,
            hint="rename the file in the repository, or leave it out of guidance.globs",
        )


def refuse_empty_plan(plan: Skeleton, *, globs: Sequence[str], names: Sequence[str]) -> None:
    """A tree with no guidance file to seed has nothing to probe: say so instead of running the harness on an
    empty skeleton (whose commit would fail with nothing to commit)."""
    if plan.files:
        return
    links = f"; links not followed: {', '.join(p for p, _ in plan.unresolved)}" if plan.unresolved else ""
    raise UsageError(
        "no guidance file to probe: nothing outside eval_dir matches the guidance globs or the harness's "
        f"guidance names{links}",
        hint=f"globs: {', '.join(globs) or 'none'}; names: {', '.join(names) or 'none'}. "
        "Check guidance.globs in the manifest, or --manifest/--manifest-file",
    )


def guidance_dirs(plan: Skeleton) -> list[str]:
    """Directories holding a seeded file or a link to one ('.' for the root), root first, then sorted."""
    dirs = {posixpath.dirname(p) or "." for target, links in plan.files.items() for p in (target, *links)}
    return sorted(dirs, key=lambda d: (d != ".", d))


def build_skeleton(
    snapshot: Snapshot,
    plan: Skeleton,
    dest: Path,
    *,
    salt: str,
    symlink: Callable[[str, Path], None] | None = None,
) -> list[SeededFile]:
    """Write the seeded files, the links, the probe files, and commit them in a fresh repository at ``dest``.

    ``symlink(target_text, link_path)`` defaults to os.symlink; where it raises OSError (or
    NotImplementedError) the link becomes a copy and its alias says ``copy``.
    """
    make_link = symlink or (lambda target, link: os.symlink(target, link))
    dest.mkdir(parents=True, exist_ok=True)
    contents = snapshot.read_many(list(plan.files)) if plan.files else {}
    seeded: list[SeededFile] = []
    for target in sorted(plan.files):
        head, tail = token(salt, target, "head"), token(salt, target, "tail")
        text = contents[target].decode("utf-8", "surrogateescape")
        data = seed_text(text, head, tail).encode("utf-8", "surrogateescape")
        out = dest / target
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
        aliases: list[Alias] = []
        for link in plan.files[target]:
            link_path = dest / link
            link_path.parent.mkdir(parents=True, exist_ok=True)
            relative = posixpath.relpath(target, posixpath.dirname(link) or ".")
            try:
                make_link(relative, link_path)
                kind = AliasKind.SYMLINK
            except (OSError, NotImplementedError):
                link_path.write_bytes(data)
                kind = AliasKind.COPY
            plan.alias_kinds[link] = kind
            aliases.append(Alias(path=link, alias_kind=kind))
        seeded.append(SeededFile(path=target, head=head, tail=tail, aliases=aliases))
    for directory in guidance_dirs(plan):
        (dest / directory / PROBE_FILE).write_text(PROBE_TEXT, encoding="utf-8")
    _commit(dest)
    return seeded


def _commit(dest: Path) -> None:
    ident = {
        "GIT_AUTHOR_NAME": "dokimi reach",
        "GIT_AUTHOR_EMAIL": "reach@dokimi.invalid",
        "GIT_COMMITTER_NAME": "dokimi reach",
        "GIT_COMMITTER_EMAIL": "reach@dokimi.invalid",
        "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
    }
    run_git(["-c", "init.defaultBranch=main", "init", "-q"], cwd=dest, env=ident, what="git init")
    run_git(["add", "-A"], cwd=dest, env=ident, what="git add")
    run_git(
        ["-c", "commit.gpgsign=false", "commit", "-q", "--no-verify", "-m", "reach probe skeleton"],
        cwd=dest,
        env=ident,
        what="git commit",
    )


# --- scenarios ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedScenario:
    name: str
    cwd: str
    tools: ToolsLevel
    read_target: str | None = None

    def prompt(self) -> str:
        if self.read_target is None:
            return ASK
        return f"First read the file {self.read_target} with your Read tool. Then: {ASK}"


def plan_scenarios(
    dirs: Sequence[str], kinds: Iterable[str], only: str | None = None
) -> list[PlannedScenario]:
    """cwd=. (root), cwd=<dir> for every other guidance dir (cwd), read=<dir> for every one (read)."""
    kinds = set(kinds)
    if not kinds:
        raise UsageError(
            "--scenarios names no scenario kind, so nothing would be probed",
            hint=f"use some of {','.join(SCENARIO_KINDS)}",
        )
    unknown = kinds - set(SCENARIO_KINDS)
    if unknown:
        raise UsageError(
            f"unknown scenario kind(s): {', '.join(sorted(unknown))}", hint=f"use {','.join(SCENARIO_KINDS)}"
        )
    planned: list[PlannedScenario] = []
    if "root" in kinds:
        planned.append(PlannedScenario("cwd=.", ".", "none"))
    if "cwd" in kinds:
        planned += [PlannedScenario(f"cwd={d}", d, "none") for d in dirs if d != "."]
    if "all" in kinds:
        planned.append(PlannedScenario("all=.", ".", "all"))
    if "read" in kinds:
        planned += [
            PlannedScenario(
                f"read={d}", ".", "read", posixpath.join(d, PROBE_FILE) if d != "." else PROBE_FILE
            )
            for d in dirs
        ]
    if only is not None:
        chosen = [s for s in planned if s.name == only]
        if not chosen:
            names = ", ".join(s.name for s in planned) or "none"
            raise UsageError(f"no scenario named {only!r}", hint=f"the scenarios are: {names}")
        return chosen
    return planned


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def _trace_dirs(scenarios: Sequence[PlannedScenario]) -> dict[str, str]:
    out: dict[str, str] = {}
    used: set[str] = set()
    for s in scenarios:
        slug, n = _slug(s.name), 2
        candidate = slug
        while candidate in used:
            candidate, n = f"{slug}-{n}", n + 1
        used.add(candidate)
        out[s.name] = candidate
    return out


# --- running ------------------------------------------------------------------------------------------------


@dataclass
class ReachOptions:
    model: str
    scenarios: Sequence[str] = DEFAULT_SCENARIO_KINDS
    only: str | None = None
    dry_run: bool = False
    capture: bool = True
    """Capture the request bytes on a real run through a capturing proxy (``--no-capture`` turns it off)."""
    timeout: float = DEFAULT_TIMEOUT_S
    salt: str | None = None
    bin: str | Path | None = None
    max_turns: int = REACH_MAX_TURNS
    budget: float = REACH_BUDGET_USD
    environ: Mapping[str, str] | None = None
    """The caller's environment the profile's env_allow reads (default os.environ)."""
    workdir: Path | None = None
    """Where the temporary skeleton goes (default: the system temp dir)."""
    symlink: Callable[[str, Path], None] | None = None
    progress: Callable[[str], None] | None = None


def harness_version(profile: HarnessProfile, binary: Path, *, timeout: float = 60.0) -> str:
    """The version the harness reports: the first dotted number version_cmd prints, else its first line."""
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": os.environ.get("HOME", "/")}
    launcher = host_launcher(binary)
    done = process.run([*launcher[:-1], *version_argv(profile, launcher[-1])], timeout=timeout, env=env)
    text = (done.stdout or done.stderr).strip()
    if not done.ok or not text:
        raise PrerequisiteError(
            f"`{binary}` does not report a version ("
            + ("timed out" if done.timed_out else f"exit {done.returncode}")
            + ")"
            + (f": {done.stderr.strip().splitlines()[-1]}" if done.stderr.strip() else ""),
            hint=f"check that {binary} is a working {profile.name} CLI, or pass --bin",
        )
    match = re.search(r"\d+(?:\.\d+)+(?:[-+][0-9A-Za-z.]+)?", text)
    return match.group(0) if match else text.splitlines()[0]


@dataclass
class _Outcome:
    scenario: Scenario
    answer: str
    read_paths: set[str]


def _dry_run_script(s: PlannedScenario, workspace: Path, profile: HarnessProfile) -> list[dict[str, object]]:
    """Read the scenario's probe file with the harness's read tool (or ``cat`` through its shell tool when it
    has none), then answer with every token of the request. A harness whose model calls no tools (Aider) reads
    the file because the prompt names it: Aider adds a file the prompt names to the chat before the first
    request."""
    turns: list[dict[str, object]] = []
    if s.read_target is not None:
        path = str(workspace / s.read_target)
        read, command = profile.script_tools.read, profile.script_tools.command
        if read is not None:
            turns.append({"tool_use": {"name": read.name, "input": {read.arg: path}}})
        elif command is not None:
            turns.append(
                {"tool_use": {"name": command.name, "input": {command.arg: f"cat {shlex.quote(path)}"}}}
            )
    turns.append({"echo_tokens": True})
    return turns


def _read_paths(events: Iterable[Mapping[str, object]], cwd: str, workspace: Path) -> set[str]:
    """Workspace-relative paths the agent read with a tool."""
    out: set[str] = set()
    for event in events:
        if event.get("kind") != "read" or not isinstance(event.get("path"), str):
            continue
        raw = str(event["path"])
        if raw.startswith("/"):
            rel = os.path.relpath(raw, workspace)
            if rel.startswith(".."):
                continue
        else:
            rel = posixpath.normpath(posixpath.join(cwd, raw))
        out.add(posixpath.normpath(rel))
    return out


def _error_of(
    done: process.Completed, conv_error: bool, answer: str, subtype: str | None, timeout: float
) -> str | None:
    if done.timed_out:
        return f"timed out after {timeout:g} s"
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] if done.stderr.strip() else []
        return f"exited {done.returncode}" + (f": {tail[0][:200]}" if tail else "")
    if conv_error:
        return f"the harness reported an error ({subtype})" if subtype else "no final result in the trace"
    if not answer.strip():
        return "no answer"
    return None


@dataclass(frozen=True)
class _ProbeRun:
    """What every scenario of one reach probe shares."""

    profile: HarnessProfile
    launcher: list[str]
    who: RunAs | None
    workspace: Path
    out: Path
    options: ReachOptions
    capture: CapturePlan
    seeded_tokens: Sequence[str]


def _run_scenario(run: _ProbeRun, s: PlannedScenario, *, scratch: Path, trace_dir: str) -> _Outcome:
    profile, launcher, who, workspace = run.profile, run.launcher, run.who, run.workspace
    out, options, capture, seeded_tokens = run.out, run.options, run.capture, run.seeded_tokens
    home, config = scratch / "home", scratch / "config"
    home.mkdir(parents=True)
    config.mkdir(parents=True)
    target = out / "traces" / trace_dir
    target.mkdir(parents=True, exist_ok=True)
    environ: Mapping[str, str] | None = options.environ
    extra: dict[str, str] = {}
    recorder: MockModelServer | CaptureProxy | None = None
    if capture.kind == "scripted_server":
        assert profile.endpoint_env is not None
        recorder = MockModelServer(
            _dry_run_script(s, workspace, profile), capture_path=target / REQUESTS_FILE
        )
        environ = {"PATH": (options.environ or os.environ).get("PATH", os.defpath)}
        extra = {**profile.dry_run_env, profile.endpoint_env: recorder.start().url}
    elif capture.kind == "proxy":
        assert profile.endpoint_env is not None and capture.upstream is not None
        recorder = CaptureProxy(capture.upstream, capture_path=target / REQUESTS_FILE, via=capture.via)
        extra = {profile.endpoint_env: recorder.start().url}
    try:
        inv = build_invocation(
            profile,
            AgentRequest(
                prompt=s.prompt(),
                model=options.model,
                max_turns=options.max_turns,
                budget=options.budget,
                tools=s.tools,
            ),
            Placement(bin=launcher[-1], config_dir=config, support_dir=support_dir(), home=str(home)),
            environ=environ,
            extra_env=extra,
            endpoint=recorder.url if recorder is not None else None,
        )
        inv.write_config_files(config)
        give_to(scratch, who)
        stdout_path = target / "stdout"
        done = process.run(
            wrap_argv([*launcher[:-1], *inv.argv], who),
            timeout=options.timeout,
            env=inv.env,
            cwd=workspace / s.cwd,
            output=process.Output(file=stdout_path),
            bounds=process.Bounds(grace=2.0),
        )
    finally:
        if recorder is not None:
            recorder.stop()
    (target / "stderr").write_text(done.stderr, encoding="utf-8")
    conv = convert_file(stdout_path, profile.trace)
    write_conversion(conv, target)
    bodies = [r.raw for r in recorder.requests] if recorder is not None else None
    parsed = parse_answer(conv.answer, seeded_tokens)
    error = _error_of(done, conv.is_error, conv.answer, conv.result_subtype, options.timeout)
    in_payload = tokens_in_payload(bodies, seeded_tokens) if bodies is not None else None
    scenario = Scenario(
        name=s.name,
        cwd=s.cwd,
        tools=s.tools,
        read_target=s.read_target,
        returncode=done.returncode,
        timed_out=done.timed_out,
        error=error,
        reported=parsed.reported,
        unknown=parsed.unknown,
        prose=parsed.prose,
        payload_captured=bodies is not None,
        in_payload=in_payload,
        trace_dir=f"traces/{trace_dir}",
    )
    return _Outcome(scenario, conv.answer, _read_paths(conv.events, s.cwd, workspace))


def run_reach(
    snapshot: Snapshot,
    profile: HarnessProfile,
    *,
    globs: Sequence[str],
    eval_dir: str | None,
    out: Path,
    options: ReachOptions,
    source_label: str | None = None,
) -> GuidanceReach:
    """Run the probe and write ``<out>/reach.json`` and ``<out>/traces/<scenario>/``; return the document."""
    if options.dry_run and not options.capture:
        raise UsageError(
            "--no-capture cannot be combined with --dry-run: the scripted server always captures",
            hint="drop --no-capture",
        )
    if options.dry_run and not profile.endpoint_env:
        raise UsageError(
            f"harness {profile.name!r} has no endpoint_env: --dry-run cannot point it at the scripted server",
            hint="add endpoint_env to the profile, or run without --dry-run",
        )
    # Everything decided from the tree alone comes first: a refusal needs no harness binary.
    plan = plan_skeleton(snapshot, globs=globs, names=profile.guidance.names, eval_dir=eval_dir)
    refuse_empty_plan(plan, globs=globs, names=profile.guidance.names)
    dirs = guidance_dirs(plan)
    planned = plan_scenarios(dirs, options.scenarios, options.only)
    capture = plan_capture(
        profile,
        dry_run=options.dry_run,
        capture=options.capture,
        environ=os.environ if options.environ is None else options.environ,
    )
    binary = resolve_bin(profile, options.bin)
    version = harness_version(profile, binary)
    who = harness_identity()
    run_binary = reachable_binary(binary, who)
    node = reachable_binary(node_binary(), who) if is_node_script(binary) else None
    launcher = host_launcher(run_binary, node)
    salt = options.salt if options.salt is not None else secrets.token_hex(4)
    trace_dirs = _trace_dirs(planned)
    say = options.progress or (lambda _msg: None)

    base = Path(tempfile.mkdtemp(prefix="dokimi-reach-", dir=options.workdir))
    try:
        os.chmod(base, 0o755)
        workspace = RunDir(base).workspace
        refuse_guidance_ancestors(workspace, profile.guidance.names)
        seeded = build_skeleton(snapshot, plan, workspace, salt=salt, symlink=options.symlink)
        give_to(workspace, who)
        seeded_tokens = [t for f in seeded for t in (f.head, f.tail)]
        out.mkdir(parents=True, exist_ok=True)
        outcomes: list[_Outcome] = []
        run = _ProbeRun(profile, launcher, who, workspace, out, options, capture, seeded_tokens)
        for i, s in enumerate(planned, 1):
            say(f"[{i}/{len(planned)}] {s.name}")
            shutil.rmtree(out / "traces" / trace_dirs[s.name], ignore_errors=True)
            outcomes.append(
                _run_scenario(
                    run, s, scratch=base / "scenarios" / trace_dirs[s.name], trace_dir=trace_dirs[s.name]
                )
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)

    records: list[Record] = []
    for outcome in outcomes:
        sc = outcome.scenario
        reported = set(sc.reported)
        in_payload = set(sc.in_payload) if sc.in_payload is not None else None
        for f in seeded:
            names = {f.path, *(a.path for a in f.aliases)}
            head, tail = f.head in reported, f.tail in reported
            read = bool(names & outcome.read_paths)
            records.append(
                Record(
                    file=f.path,
                    scenario=sc.name,
                    harness=profile.name,
                    harness_version=version,
                    model=options.model,
                    head=head,
                    tail=tail,
                    read_by_tool=read,
                    **{
                        "class": classify(head=head, tail=tail, read_by_tool=read, error=sc.error is not None)
                    },
                    payload=(
                        PayloadSeen(head=f.head in in_payload, tail=f.tail in in_payload)
                        if in_payload is not None
                        else None
                    ),
                )
            )
    document = GuidanceReach(
        source=source_label or snapshot.label,
        tree=snapshot.rev,
        harness=profile.name,
        harness_version=version,
        model=options.model,
        dry_run=options.dry_run,
        capture=capture.kind,
        capture_upstream=capture.upstream if capture.kind == "proxy" else None,
        capture_missing=capture.missing,
        salt=salt,
        guidance_globs=list(globs),
        declared={
            "names": list(profile.guidance.names),
            "resolution": profile.guidance.resolution,
            "imports": profile.guidance.imports,
        },
        files=seeded,
        unresolved=[Unresolved(path=p, reason=r) for p, r in plan.unresolved],
        scenarios=[o.scenario for o in outcomes],
        records=records,
    )
    write_document(out / "reach.json", document)
    return document
