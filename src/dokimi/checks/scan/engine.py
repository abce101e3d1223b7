"""The L0 scan of one snapshot: guidance files -> claims -> verdicts, with batched I/O.

I/O: the tree is listed once (the Snapshot); the guidance files (and the root files that detect adapters) are
read in one ``read_many``; the files the claims need (makefiles, BUILD files, .bazelrc and imports, CMake
sources and presets, .pre-commit-config.yaml, .bzl files, test files of pytest node ids, modules of dotted
identifiers) in a second; identifiers are looked up in one ``git grep``. Nothing runs per file.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Container, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Literal, NamedTuple

from dokimi.checks.scan.adapters import ADAPTERS, ALIASES, Adapter, Check, Ctx, Inputs
from dokimi.checks.scan.adapters.bazel import BazelAdapter
from dokimi.checks.scan.fragments import is_markdown, resolve_fragment, resolve_line_anchor, split_fragment
from dokimi.checks.scan.identifiers import (
    identifier_shape,
    module_prefix,
    resolve_identifier,
    resolve_python_module,
    start_search,
    words_needed,
)
from dokimi.checks.scan.markdown import MarkdownItems, extract
from dokimi.checks.scan.paths import (
    DEFAULT_BRANCHES,
    RepoUrl,
    Tree,
    bases_of,
    is_absolute_link,
    is_github_action_ref,
    is_placeholder_path,
    link_path,
    parse_repo_url,
    resolve_glob_claim,
    resolve_link,
    resolve_path_claim,
)
from dokimi.checks.scan.shell import (
    Command,
    Item,
    ScopeClose,
    ScopeOpen,
    Word,
    is_shell_fence,
    logical_lines,
    split_commands,
    split_fence,
)
from dokimi.checks.scan.skills import (
    check_skill_front_matter,
    is_skill_support_file,
    resolve_skill,
    skill_references,
    skills_of,
)
from dokimi.checks.scan.verdict import AdapterChoice, Draft, FileRecord, Verdict, WarningRecord
from dokimi.constants import DEFAULT_GUIDANCE_GLOBS, MAX_GUIDANCE_BYTES, SKILL_FILE, status_class
from dokimi.errors import SourceError
from dokimi.globs import filter_paths, is_glob, literal_prefix
from dokimi.source import git
from dokimi.source.snapshot import Snapshot

if TYPE_CHECKING:
    from dokimi.checks.scan.items_cache import ItemsCache
    from dokimi.checks.scan.suppress import IgnoreEntry, Rule

#: The pre-commit config whose hooks the parity check compares with CI (dokimi.checks.scan.parity).
PRE_COMMIT_CONFIG = ".pre-commit-config.yaml"
WORKFLOWS = ".github/workflows/"

Origin = Literal["glob", "also_scan"]

ROOT_CONFIGS = ("pyproject.toml", "setup.cfg", "tox.ini")
STARLARK_FENCES = frozenset({"starlark", "bzl", "bazel", "skylark"})
KNOWN_EXTS = frozenset(
    """py pyi pyx md mdc rst txt toml yaml yml json jsonl cfg ini conf sh bash zsh fish ps1 bat c h cc cpp
    cxx hpp hh hxx cu cuh inl rs go java kt kts scala js ts tsx jsx mjs cjs vue rb php cs fs swift m mm r
    jl lua pl bzl bazel bazelrc cmake mk mak lock xml html htm css scss sql proto ipynb dockerfile tf
    gradle properties in patch diff csv tsv svg png jpg jpeg gif pdf whl tar gz zip""".split()
)
KNOWN_NAMES = frozenset(
    """Makefile makefile GNUmakefile Dockerfile Containerfile BUILD WORKSPACE MODULE Justfile justfile
    Vagrantfile Gemfile Rakefile Procfile CODEOWNERS Pipfile""".split()
)
PATHLIKE = re.compile(r"^[\w.@+~<>{}\-\[\]*?/]+$")
#: (compiled once: the classification runs for every code span of every guidance file)
LINE_SUFFIX = re.compile(r":\d+(:\d+)?(-\d+)?$")
A_LETTER = re.compile(r"[A-Za-z]")
BARE_EXTENSION_GLOB = re.compile(r"\*\.[A-Za-z0-9]+")
DOTFILE = re.compile(r"^\.[A-Za-z][\w.-]*$")
WRAPPERS = frozenset({"sudo", "time", "nohup", "exec", "command", "xvfb-run"})
RUNNERS = frozenset({"uv", "poetry", "pipenv", "hatch", "pdm", "rye"})
PYTHON = re.compile(r"^python(\d(\.\d+)?)?$")
#: ``python -m`` tools installed from a package index: no claim (they are never in the tree, and never wrong).
INSTALLED_TOOLS = frozenset({"pip", "pytest", "build", "twine", "mypy", "ruff"})
SCRIPT_SHELLS = frozenset({"bash", "sh", "zsh", "source", "."})
SPAN_COMMANDS = frozenset(
    {
        "cd",
        "pushd",
        "make",
        "gmake",
        "cmake",
        "ctest",
        "bazel",
        "bazelisk",
        "pytest",
        "py.test",
        "pre-commit",
        "prek",
        "python",
        "python3",
        "bash",
        "sh",
        "source",
        "uv",
        "poetry",
        "sudo",
        "env",
        "pipenv",
        "hatch",
        "pdm",
    }
)


@dataclass
class ScanResult:
    files: list[FileRecord]
    drafts: list[Draft]
    warnings: list[WarningRecord]
    build_systems: AdapterChoice
    items: dict[str, MarkdownItems] = field(default_factory=dict)
    """The Markdown items of each scanned guidance file (``repo scan --run`` runs their commands)."""
    rules: list[Rule] = field(default_factory=list)
    """The suppressions of the guidance and the manifest."""

    def add_claims(self, drafts: list[Draft]) -> None:
        """Add claims made after the scan (``repo scan --run``), the suppressions applied to all anew."""
        # repo scan's lean start (tests/checks/scan/test_lean_cli.py)
        from dokimi.checks.scan.suppress import apply_suppressions

        every = sorted(
            [d._replace(suppressed=None) for d in self.drafts] + drafts,
            key=lambda d: (d.file, d.line, d.claim, d.kind, d.verdict.status),
        )
        self.drafts, unused = apply_suppressions(every, self.rules)
        self.warnings = [w for w in self.warnings if w.kind != "suppression_unused"] + unused


@dataclass
class _Work:
    tree: Tree
    adapters: dict[str, Adapter]
    source: RepoUrl | None
    branches: frozenset[str]
    drafts: list[Draft] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    identifiers: list[tuple[str, int, str, str]] = field(default_factory=list)
    used_adapters: set[str] = field(default_factory=set)
    classified: dict[str, SpanClaim] = field(default_factory=dict)
    """What each code span's text claims (:func:`classify_span`), from the first pass over the spans."""
    skills: dict[str, str] = field(default_factory=dict)
    """The skills the tree defines, by name (:func:`dokimi.checks.scan.skills.skills_of`)."""
    parsed: dict[str, MarkdownItems] = field(default_factory=dict)
    """The Markdown items of the guidance files, by path (a link's fragment is checked against them)."""
    cache: ItemsCache | None = None

    def parse(self, text: str) -> MarkdownItems:
        """The items of a Markdown text that is no guidance file (a link's target): from the cache too."""
        return self.cache.items(text) if self.cache is not None else extract(text)


# --- guidance files -----------------------------------------------------------------------------------------


def select_guidance(
    snapshot: Snapshot, globs: list[str], also_scan: list[str]
) -> tuple[dict[str, Origin], list[WarningRecord]]:
    """Files the globs and also_scan name (path -> origin), and warnings for what matched nothing.

    A glob never chooses a skill's scripts or other files, only its SKILL.md (they are not guidance, and
    their identifiers count as the tree's). A glob that matches nothing is a warning, unless the globs are
    dokimi's defaults: they name the files of every supported harness, and a repository has few of them."""
    paths = sorted(snapshot.entries)
    chosen: dict[str, Origin] = {}
    warnings: list[WarningRecord] = []
    defaults = tuple(globs) == DEFAULT_GUIDANCE_GLOBS
    for glob in globs:
        matched = [
            p
            for p in glob_matches(snapshot, glob, paths)
            if not snapshot.entries[p].is_submodule and not is_skill_support_file(p, snapshot.entries)
        ]
        if not matched and not defaults:
            warnings.append(
                WarningRecord(
                    kind="glob_no_match",
                    path=glob,
                    message=f"the guidance glob {glob} matches no file",
                    gate=False,
                )
            )
        for path in matched:
            chosen.setdefault(path, "glob")
    for item in also_scan:
        matched = filter_paths(item, paths) if is_glob(item) else ([item] if item in snapshot.entries else [])
        if not matched:
            warnings.append(
                WarningRecord(
                    kind="also_scan_missing",
                    path=item,
                    message=f"also_scan names {item}, which the tree lacks",
                    gate=True,
                )
            )
        for path in matched:
            chosen.setdefault(path, "also_scan")
    return chosen, warnings


def glob_matches(snapshot: Snapshot, glob: str, paths: list[str]) -> list[str]:
    """The files a guidance glob matches (dokimi.globs), looking only at the candidates its literal parts
    allow."""
    if not is_glob(glob):
        return [glob] if glob in snapshot.entries else []
    last = glob.rsplit("/", 1)[-1]
    if not is_glob(last):
        return filter_paths(
            glob, sorted(p for p in snapshot.by_basename.get(last, []) if p in snapshot.entries)
        )
    prefix = literal_prefix(glob)
    if prefix:
        paths = [p for p in paths if p.startswith(prefix + "/")]
    return filter_paths(glob, paths)


def read_guidance(
    snapshot: Snapshot, chosen: dict[str, Origin]
) -> tuple[list[FileRecord], dict[str, str], dict[str, str], list[WarningRecord]]:
    """Resolve symlinks (a file linking to another is scanned once, as the file it names) and read every
    guidance file plus the root configs adapters detect from, in one batch."""
    files: list[FileRecord] = []
    warnings: list[WarningRecord] = []
    real_of: dict[str, str] = {}
    for path in sorted(chosen):
        resolved = snapshot.resolve(path)
        # (a listed file is never a directory: the index of directories is not built before the grep starts)
        if resolved.path is None or resolved.path not in snapshot.entries and resolved.path in snapshot.dirs:
            reason = resolved.reason or "a directory"
            reason = f"a link that {reason}" if resolved.reason in ("dangles", "loops") else reason
            files.append(
                FileRecord(path=path, origin=chosen[path], scanned_as=None, state="unreadable", reason=reason)
            )
            warnings.append(
                WarningRecord(
                    kind="unreadable", path=path, message=f"{path} cannot be read: {reason}", gate=True
                )
            )
            continue
        real_of[path] = resolved.path
    wanted = sorted(set(real_of.values()))
    roots = [p for p in ROOT_CONFIGS if snapshot.is_file(p)]
    blobs = _read_many_lenient(snapshot, [*wanted, *roots])
    texts: dict[str, str] = {}
    problems: dict[str, str] = {}
    for real in wanted:
        data = blobs.get(real)
        if data is None:
            problems[real] = "it could not be read"
        elif len(data) > MAX_GUIDANCE_BYTES:
            problems[real] = f"over 2 MB ({len(data)} bytes)"
        elif b"\0" in data[:8192]:
            problems[real] = "a binary file"
        else:
            texts[real] = data.decode("utf-8", "replace")
    scanned: set[str] = set()
    # a file that is itself a real guidance file is scanned as itself; an alias never is
    order = sorted(real_of, key=lambda p: (real_of[p] != p, p))
    for path in order:
        real = real_of[path]
        if real in problems:
            files.append(
                FileRecord(
                    path=path, origin=chosen[path], scanned_as=None, state="unreadable", reason=problems[real]
                )
            )
            warnings.append(
                WarningRecord(
                    kind="unreadable",
                    path=path,
                    message=f"{path} cannot be read: {problems[real]}",
                    gate=True,
                )
            )
            continue
        state: Literal["alias", "scanned"] = "alias" if real in scanned else "scanned"
        scanned.add(real)
        files.append(FileRecord(path=path, origin=chosen[path], scanned_as=real, state=state))
    root_texts = {p: blobs[p].decode("utf-8", "replace") for p in roots if p in blobs}
    files.sort(key=lambda f: f.path)
    return files, texts, root_texts, warnings


def _read_many_lenient(snapshot: Snapshot, paths: Iterable[str]) -> dict[str, bytes]:
    """One batch; a path that cannot be read is left out (then retried alone to find which)."""
    wanted = sorted(set(paths))
    if not wanted:
        return {}
    try:
        return snapshot.read_many(wanted)
    except SourceError:
        out: dict[str, bytes] = {}
        for path in wanted:
            try:
                out[path] = snapshot.read(path)
            except SourceError:
                pass
        return out


# --- adapters -----------------------------------------------------------------------------------------------


def select_adapters(tree: Tree, build_systems: list[str] | None, root_texts: dict[str, str]) -> AdapterChoice:
    """The manifest's build_systems, else the adapters whose files are at the root (any conftest.py or a
    pytest section also selects pytest)."""
    if build_systems:
        names = []
        why = {}
        for raw in build_systems:
            name = ALIASES.get(raw.lower(), raw.lower())
            if name in ADAPTERS and name not in names:
                names.append(name)
                why[name] = "build_systems in the manifest"
        return AdapterChoice(adapters=names, selected_by="manifest", why=why)
    why = {}
    for name, adapter in ADAPTERS.items():
        reason = adapter.detect(tree, root_texts)
        if reason:
            why[name] = f"detected: {reason}"
    return AdapterChoice(adapters=list(why), selected_by="detected", why=why)


# --- claims of one file -------------------------------------------------------------------------------------


def scan_file(path: str, text: str, items: MarkdownItems, work: _Work) -> None:
    for link in items.links:
        kind = "image" if link.image else "link"
        target = link.target.strip()
        if target.startswith("#"):
            if len(target) > 1:  # a fragment-only link: an anchor of this file
                own = resolve_fragment(target[1:], items.anchors, "this file")
                work.drafts.append(Draft(path, link.line, kind, link.target, own))
            continue
        verdict = resolve_link(target, path, work.tree, source=work.source, default_branches=work.branches)
        if verdict is None:
            continue
        fragment = split_fragment(target)[2]
        if fragment and status_class(verdict.status) == "ok" and not is_absolute_link(target):
            check = fragment_check(path, link.line, kind, link.target, verdict, work)
            if check is not None:
                work.checks.append(check)
                continue
        work.drafts.append(Draft(path, link.line, kind, link.target, verdict))
    lines = text.split("\n")
    for span in items.spans:
        scan_span(path, span.line, span.text, work, lines[span.line - 1] if span.line <= len(lines) else "")
    for fence in items.fences:
        lang = fence.info.split()[0].lower() if fence.info.split() else ""
        if is_shell_fence(fence.info):
            session = lang in ("console", "shell-session", "shellsession", "terminal")
            run_commands(split_fence(fence.lines, fence.line, session=session), path, work)
        elif lang in STARLARK_FENCES and "bazel" in work.adapters:
            adapter = work.adapters["bazel"]
            assert isinstance(adapter, BazelAdapter)
            checks = adapter.starlark_checks(fence.lines, fence.line, path, work.tree)
            if checks:
                work.used_adapters.add("bazel")
                work.checks.extend(checks)
        elif not lang and any(line.lstrip().startswith("$ ") for line in fence.lines):
            run_commands(split_fence(fence.lines, fence.line, session=True), path, work)
    scan_skills(path, text, items, work)


def scan_skills(path: str, text: str, items: MarkdownItems, work: _Work) -> None:
    """A skill's SKILL.md names itself in its front matter; the guidance's references to skills (``$name``,
    the `name` skill) name skills of the tree, checked only when the tree defines some skill."""
    directory = posixpath.dirname(path)
    if posixpath.basename(path) == SKILL_FILE and directory:
        claim = posixpath.basename(directory)
        work.drafts.append(Draft(path, 1, "skill_front_matter", claim, check_skill_front_matter(path, text)))
    if not work.skills:
        return
    for ref in skill_references(text, items.fenced_lines()):
        verdict = resolve_skill(ref.name, work.skills, prose=ref.prose)
        if verdict is not None:
            work.drafts.append(Draft(path, ref.line, "skill", ref.claim, verdict))


def fragment_check(file: str, line: int, kind: str, target: str, found: Verdict, work: _Work) -> Check | None:
    """The check of a link's ``#fragment`` once its target is read (the target's path is ``found``): a
    Markdown file's anchors, any other file's line anchors. None when the fragment is not checked (a
    directory)."""
    full = link_path(target, file)
    real = work.tree.resolve(full) if full is not None else None
    if real is None or not work.tree.is_file(real):
        return None
    _, query, fragment = split_fragment(target.strip())
    markdown = is_markdown(real) and "plain=1" not in query.split("&")
    return Check(
        file,
        line,
        kind,
        target,
        partial(check_fragment, real, fragment, markdown, found, work),
        needs=() if markdown and real in work.parsed else (real,),
    )


def check_fragment(
    real: str, fragment: str, markdown: bool, found: Verdict, work: _Work, inputs: Inputs
) -> Verdict:
    """The fragment of a link whose path is ``real`` (verdict ``found``), against what that file shows."""
    items = work.parsed.get(real) if markdown else None
    text = inputs.text(real) if items is None else None
    if items is None and text is None:
        return Verdict(found.status, f"{found.why}; #{fragment} not checked: {real} could not be read")
    if markdown:
        return resolve_fragment(fragment, (items or work.parse(text or "")).anchors, real)
    line = resolve_line_anchor(fragment, text or "", real)
    if line is not None:
        return line
    return Verdict(found.status, f"{found.why}; #{fragment} not checked (not a Markdown file, not a line)")


def workflow_files(tree: Tree) -> list[str]:
    """The GitHub workflow files of the tree (``.github/workflows/*.yml``, ``*.yaml``)."""
    return sorted(
        p
        for p in tree.files_ending((".yml", ".yaml"))
        if p.startswith(WORKFLOWS) and "/" not in p[len(WORKFLOWS) :]
    )


def not_a_path_(location: str, line: str, bases: list[str], tree: Tree) -> str | None:
    """:func:`dokimi.checks.scan.nonpaths.not_a_path`, its module imported on the first path not found."""
    # repo scan's lean start (tests/checks/scan/test_lean_cli.py)
    from dokimi.checks.scan.nonpaths import not_a_path

    return not_a_path(location, line, bases, tree)


#: The statuses of a path or glob the tree does not hold where the claim says.
NOT_FOUND = frozenset({"fail", "unresolved"})

SpanClaim = tuple[Literal["none", "commands", "label", "node", "path", "glob", "identifier"], str]
NO_CLAIM: SpanClaim = ("none", "")


def classify_span(text: str, adapters: Container[str]) -> SpanClaim:
    """What one code span (stripped) claims, from its text alone: ``commands`` (the command text), a bazel
    ``label``, a pytest ``node``, a ``path`` or ``glob`` (its location), an ``identifier`` (its shape), or
    nothing. The scan asks this twice: once to start the identifier search early, once to check the span."""
    if not text:
        return NO_CLAIM
    words = text.split()
    first = words[0]
    if len(words) > 1 or first in ("make",):
        if first == "$" and len(words) > 1:
            text, first = text[1:].strip(), words[1]
        if (
            first in SPAN_COMMANDS
            or PYTHON.match(first)
            or (first.startswith(("./", "../")) and len(words) > 1)
        ):
            return ("commands", text)
        return NO_CLAIM
    if "://" in text or text.startswith(("-", "/", "~", "$", "@", "#", "%")) or "=" in text or "$" in text:
        return NO_CLAIM
    if text.startswith("//") or (text.startswith(":") and "bazel" in adapters):
        return ("label", text) if "bazel" in adapters else NO_CLAIM
    if is_github_action_ref(text):
        return NO_CLAIM
    if "::" in text and ".py" in text:
        return ("node", text) if "pytest" in adapters else NO_CLAIM
    location = LINE_SUFFIX.sub("", text)  # src/x.py:12 names src/x.py
    if ":" in location or not PATHLIKE.match(location) or not A_LETTER.search(location):
        return _identifier_claim(text)
    if "/" in location.rstrip("/") or location.endswith("/"):
        return ("glob" if any(ch in location for ch in "*?[") else "path", location)
    if any(ch in location for ch in "*?"):
        if BARE_EXTENSION_GLOB.fullmatch(location) and location[2:].lower() in KNOWN_EXTS:
            return ("glob", location)
        return NO_CLAIM
    if looks_like_file_name(location):
        return ("path", location)
    return _identifier_claim(text)


def _identifier_claim(text: str) -> SpanClaim:
    shape = identifier_shape(text)
    return ("identifier", shape) if shape is not None else NO_CLAIM


def scan_span(path: str, line: int, text: str, work: _Work, line_text: str = "") -> None:
    """One code span: a command, a path, a glob, a label, a pytest node, an identifier, or nothing. A path or
    glob that the words of its line (``line_text``) or its shape show is something else (a branch name, a
    URL) is nothing (:func:`dokimi.checks.scan.nonpaths.not_a_path`)."""
    text = text.strip()
    claim = work.classified.get(text)
    what, detail = claim if claim is not None else classify_span(text, work.adapters)
    if what == "commands":
        run_commands(split_commands(detail, line), path, work)
    elif what == "label":
        words = [Word("bazel", True), Word("build", True), Word(detail, True)]
        run_commands([Command(line, words)], path, work)
    elif what == "node":
        run_commands([Command(line, [Word("pytest", True), Word(detail, True)])], path, work)
    elif what == "identifier":
        work.identifiers.append((path, line, text, detail))
    elif what in ("glob", "path"):
        bases = bases_of(path)
        resolve = resolve_glob_claim if what == "glob" else resolve_path_claim
        verdict = resolve(detail, bases, work.tree)
        # a path found is a path; one not found (or only as a pattern: `docs/<name>`) may be something else
        # with a slash (a branch name, a URL)
        literal = what == "path" and not is_placeholder_path(detail)
        if (
            (verdict.status in NOT_FOUND or not literal)
            and "/" in detail
            and not_a_path_(detail, line_text, bases, work.tree)
        ):
            return
        work.drafts.append(Draft(path, line, what, text, verdict))


def looks_like_file_name(name: str) -> bool:
    """A bare word read as a path: a known extension, a well-known file name, or a dotfile."""
    if name in KNOWN_NAMES:
        return True
    if name.startswith("."):  # a dotfile, but not an extension alone (`.json`)
        return bool(DOTFILE.match(name)) and name[1:].lower() not in KNOWN_EXTS
    stem, dot, ext = name.rpartition(".")
    return bool(dot and stem and ext.lower() in KNOWN_EXTS)


# --- commands -----------------------------------------------------------------------------------------------


@dataclass
class _Cwd:
    bases: list[str] | None
    why: str | None = None


class GuidanceCommand(NamedTuple):
    """A command line the guidance tells agents to run, as written (``repo scan --run`` runs it)."""

    file: str
    line: int
    text: str
    setup: tuple[str, ...] = ()
    """Earlier lines of the same fence that change the shell's state (cd, export, source, VAR=...): run
    before it, as they were before it in a terminal."""


#: First words of a line that changes the state of the shell it runs in.
STATE_WORDS = frozenset({"cd", "pushd", "popd", "export", "source", ".", "set", "unset", "alias"})


def guidance_commands(items: dict[str, MarkdownItems]) -> list[GuidanceCommand]:
    """Every command line of the guidance: each logical line of a shell fence (or of a fence of ``$``
    prompts), and each code span that is a command; in file and line order, each (file, text) once."""
    found: list[GuidanceCommand] = []
    for path in sorted(items):
        parsed = items[path]
        for fence in parsed.fences:
            lang = fence.info.split()[0].lower() if fence.info.split() else ""
            prompted = not lang and any(line.lstrip().startswith("$ ") for line in fence.lines)
            if not is_shell_fence(fence.info) and not prompted:
                continue
            session = prompted or lang in ("console", "shell-session", "shellsession", "terminal")
            setup: list[str] = []
            for number, text in logical_lines(fence.lines, fence.line, session=session):
                text = text.strip()
                found.append(GuidanceCommand(path, number, text, tuple(setup)))
                words = text.split()
                if words and (words[0] in STATE_WORDS or ("=" in words[0] and len(words) == 1)):
                    setup.append(text)
        for span in parsed.spans:
            what, detail = classify_span(span.text.strip(), ())
            if what == "commands":
                found.append(GuidanceCommand(path, span.line, detail))
    seen: set[tuple[str, str, tuple[str, ...]]] = set()
    unique = []
    for command in sorted(found, key=lambda c: (c.file, c.line)):
        key = (posixpath.dirname(command.file), command.text, command.setup)
        if key not in seen:
            seen.add(key)
            unique.append(command)
    return unique


def run_commands(items: list[Item], path: str, work: _Work) -> None:
    """Check each simple command, tracking literal ``cd`` (which moves later relative paths in the same fence
    or span), subshells (a cd inside ends at ``)``) and what makes the directory unknown."""
    state = _Cwd(bases_of(path))
    stack: list[_Cwd] = []
    for item in items:
        if isinstance(item, ScopeOpen):
            stack.append(_Cwd(list(state.bases) if state.bases is not None else None, state.why))
            continue
        if isinstance(item, ScopeClose):
            if stack:
                state = stack.pop()
            continue
        words = strip_wrappers(item.words)
        if not words or not words[0].literal:
            continue
        ctx = Ctx(path, item.line, work.tree, state.bases, state.why, item.note)
        name = words[0].text
        if name in ("cd", "pushd", "popd"):
            state = change_directory(name, words[1:], item, ctx, work, state)
            continue
        for check in command_checks(words, ctx, work):
            work.checks.append(check)


def change_directory(name: str, args: list[Word], item: Command, ctx: Ctx, work: _Work, state: _Cwd) -> _Cwd:
    """The cd rules: a literal cd to a directory in the tree moves later paths there; after a cd to a
    directory the tree lacks or to a non-literal one, after pushd/popd, and after a cd that follows || or |,
    relative paths are unresolved."""
    args = [a for a in args if a.text not in ("-P", "-L", "-e", "--")]
    target = args[0] if args else None
    located: str | None = None
    if target is not None and target.literal and not target.text.startswith(("/", "~", "-")):
        work.checks.append(ctx.check("cd", target.text, ctx.path_verdict(target.text)))
        found = ctx.located(target.text)
        located = found if found is not None and work.tree.is_dir(found) else None
    if name != "cd":
        return _Cwd(None, f"after {name}")
    if item.after in ("||", "|") or item.piped:
        return _Cwd(None, "after a cd that follows || or |")
    if target is None or not target.literal or target.text.startswith(("/", "~", "-")):
        return _Cwd(None, "after a cd to a non-literal directory")
    if located is None:
        return _Cwd(
            None,
            f"after cd {target.text}, a directory the tree lacks" if state.bases is not None else state.why,
        )
    return _Cwd([located], None)


def strip_wrappers(words: list[Word]) -> list[Word]:
    """``sudo``, ``time``, ``env VAR=x``, ``uv run`` and the like run the command after them."""
    i = 0
    while i < len(words):
        text = words[i].text
        if text in WRAPPERS:
            i += 1
        elif text == "env":
            i += 1
            while i < len(words) and ("=" in words[i].text or words[i].text.startswith("-")):
                i += 1
        elif text in RUNNERS and i + 1 < len(words) and words[i + 1].text in ("run", "exec"):
            i += 2
            while i < len(words) and words[i].text.startswith("-"):
                i += 1
        else:
            break
    return words[i:]


def command_checks(words: list[Word], ctx: Ctx, work: _Work) -> list[Check]:
    name = words[0].text
    out: list[Check] = []
    if PYTHON.match(name):
        return python_checks(words, ctx, work)
    if name in SCRIPT_SHELLS:
        if len(words) > 1 and words[1].text == "-c":
            return out
        script = next((w for w in words[1:] if not w.text.startswith("-")), None)
        if script is not None and script.literal:
            out.append(ctx.check("script", script.text, ctx.path_verdict(script.text)))
        return out
    if "/" in name:
        out.append(ctx.check("command", name, ctx.path_verdict(name)))
        name = posixpath.basename(name)
    for adapter_name in work.adapters:
        adapter = ADAPTERS[adapter_name]
        if name in adapter.commands:
            work.used_adapters.add(adapter_name)
            out.extend(adapter.checks([Word(name, True), *words[1:]], ctx))
    return out


def python_checks(words: list[Word], ctx: Ctx, work: _Work) -> list[Check]:
    """``python script.py`` (a path), ``python -m pytest ...`` (the pytest adapter), ``python -m pkg.mod``."""
    i = 1
    while i < len(words):
        text = words[i].text
        if text == "-m" and i + 1 < len(words):
            module = words[i + 1]
            if module.text == "pytest" and "pytest" in work.adapters:
                work.used_adapters.add("pytest")
                return ADAPTERS["pytest"].checks([Word("pytest", True), *words[i + 2 :]], ctx)
            if module.literal and module.text not in INSTALLED_TOOLS:
                verdict = resolve_python_module(module.text, ctx.bases, work.tree)
                return [ctx.check("python_module", module.text, verdict)]
            return []
        if text == "-c":
            return []
        if text in ("-W", "-X"):
            i += 2
            continue
        if text.startswith("-"):
            i += 1
            continue
        if not words[i].literal:
            return []
        return [ctx.check("python_script", text, ctx.path_verdict(text))]
    return []


def identifier_words(
    items: dict[str, MarkdownItems], adapters: Container[str], classified: dict[str, SpanClaim] | None = None
) -> list[str]:
    """The words the identifier claims of these files need searched (what :func:`scan_span` will record).
    ``classified`` keeps each span's class for :func:`scan_span`, which would otherwise work it out again."""
    classified = {} if classified is None else classified
    words: list[str] = []
    for found in items.values():
        for span in found.spans:
            text = span.text.strip()
            claim = classified.get(text)
            if claim is None:
                claim = classified[text] = classify_span(text, adapters)
            if claim[0] == "identifier":
                words.extend(words_needed(text))
    return words


# --- the scan -----------------------------------------------------------------------------------------------


def scan_snapshot(
    snapshot: Snapshot,
    *,
    globs: list[str],
    also_scan: list[str],
    build_systems: list[str] | None = None,
    source_url: str | None = None,
    default_branch: str | None = None,
    items_cache: ItemsCache | None = None,
    ignore: list[IgnoreEntry] | None = None,
) -> ScanResult:
    """Every claim of the guidance files of ``snapshot`` (``items_cache``: the Markdown items of texts parsed
    by earlier runs, :mod:`dokimi.checks.scan.items_cache`; ``ignore``: the manifest's ``scan.ignore``)."""
    with git.nogc():  # the scan builds many small objects and no cycles worth a collection
        return _scan(
            snapshot, globs, also_scan, build_systems, source_url, default_branch, items_cache, ignore or []
        )


def parse_guidance(texts: dict[str, str], cache: ItemsCache | None) -> dict[str, MarkdownItems]:
    """The Markdown items of each guidance text, by path: parsed, or from the cache of earlier runs."""
    if cache is None:
        return {path: extract(texts[path]) for path in sorted(texts)}
    return {path: cache.items(texts[path]) for path in sorted(texts)}


def _scan(
    snapshot: Snapshot,
    globs: list[str],
    also_scan: list[str],
    build_systems: list[str] | None,
    source_url: str | None,
    default_branch: str | None,
    items_cache: ItemsCache | None,
    ignore: list[IgnoreEntry],
) -> ScanResult:
    tree = Tree(snapshot)
    chosen, warnings = select_guidance(snapshot, globs, also_scan)
    files, texts, root_texts, unreadable = read_guidance(snapshot, chosen)
    warnings.extend(unreadable)
    if not any(f.state == "scanned" for f in files):
        warnings.append(
            WarningRecord(
                kind="no_guidance",
                message="no guidance file matched, so nothing was scanned (incomplete)",
                gate=True,
            )
        )
    systems = select_adapters(tree, build_systems, root_texts)
    branches = DEFAULT_BRANCHES | ({default_branch} if default_branch else set())
    work = _Work(
        tree, {n: ADAPTERS[n] for n in systems.adapters}, parse_repo_url(source_url), frozenset(branches)
    )
    items = parse_guidance(texts, items_cache)
    work.parsed, work.cache = items, items_cache
    # The identifier search reads every file of the tree, so it starts before the other claims are checked and
    # runs (git grep, another process) while they are.
    exclude = {f.path for f in files} | {f.scanned_as for f in files if f.scanned_as}
    search = start_search(snapshot, identifier_words(items, work.adapters, work.classified), exclude=exclude)
    work.skills = skills_of(tree.files_ending((f"/{SKILL_FILE}",)), texts)
    for path, parsed in items.items():
        scan_file(path, texts[path], parsed, work)
    # round two: the files the checks need, in one batch
    needs: set[str] = set()
    for check in work.checks:
        needs.update(n for n in check.needs if n)
    for name in sorted(work.used_adapters):
        needs.update(ADAPTERS[name].inputs(tree))
    workflows = (
        workflow_files(tree) if "pre-commit" in work.adapters and snapshot.is_file(PRE_COMMIT_CONFIG) else []
    )
    if workflows:
        needs.update([PRE_COMMIT_CONFIG, *workflows])
    modules: dict[str, tuple[str, str, list[str]] | None] = {}  # by the claim's text
    for _, _, text, shape in work.identifiers:
        if shape == "dotted" and text not in modules:
            found = module_prefix(text[:-2] if text.endswith("()") else text, tree)
            modules[text] = found
            if found is not None:
                needs.add(found[0])
    blobs = _read_many_lenient(snapshot, [n for n in needs if tree.is_file(n)])
    inputs = Inputs(
        tree, {p: b.decode("utf-8", "replace") for p, b in blobs.items() if b"\0" not in b[:8192]}
    )
    for check in work.checks:
        verdict = check.run(inputs)
        if verdict is None:
            continue
        if check.note:
            verdict = Verdict(verdict.status, f"{verdict.why}; {check.note}", verdict.fix)
        work.drafts.append(Draft(check.file, check.line, check.kind, check.claim, verdict))
    config_text = inputs.text(PRE_COMMIT_CONFIG) if workflows else None
    if config_text is not None:  # the pre-commit <-> CI parity of the tools both run
        from dokimi.checks.scan.parity import parity_claims

        texts_of = {w: t for w in workflows if (t := inputs.text(w)) is not None}
        work.drafts.extend(parity_claims(config_text, texts_of, tree))
    # identifiers: one content search for all of them
    hits = search.result()
    verdicts: dict[tuple[str, str], Verdict] = {}  # the verdict follows from the text: once per name
    for file, line, text, shape in work.identifiers:
        verdict = verdicts.get((text, shape))
        if verdict is None:
            module = modules.get(text) if shape == "dotted" else None
            module_text = inputs.text(module[0]) if module else None
            verdict = verdicts[(text, shape)] = resolve_identifier(text, shape, hits, module_text, module)
        work.drafts.append(Draft(file, line, "identifier", text, verdict))
    counts: dict[str, int] = {}
    for draft in work.drafts:
        counts[draft.file] = counts.get(draft.file, 0) + 1
    files = [
        f._replace(claims=counts.get(f.scanned_as or "", 0)) if f.state == "scanned" else f for f in files
    ]
    # the same claim twice (a span and a fence naming one path on one line) is one claim; keyed by plain
    # tuples, whose hashing is C, not by the dataclasses (and ties keep the order the claims were checked in)
    unique = {
        (d.file, d.line, d.kind, d.claim, d.verdict.status, d.verdict.why, d.verdict.fix): d
        for d in work.drafts
    }
    drafts = sorted(unique.values(), key=lambda d: (d.file, d.line, d.claim, d.kind, d.verdict.status))
    if items_cache is not None:
        items_cache.save()  # the guidance's items, and those of the Markdown files its links' fragments name
    rules: list[Rule] = []
    marked = [path for path in items if "dokimi:" in texts[path]]
    if marked or ignore:  # (the suppressions' module is imported only for a scan that has some)
        from dokimi.checks.scan.suppress import apply_suppressions, inline_rules, manifest_rules

        rules = [rule for p in marked for rule in inline_rules(p, texts[p], items[p].fenced_lines())]
        rules += manifest_rules(ignore)
        drafts, unused = apply_suppressions(drafts, rules)
        warnings.extend(unused)
    return ScanResult(files, drafts, warnings, systems, items, rules)
