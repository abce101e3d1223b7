"""``repo validate``: the manifest and every task.json checked against one snapshot.

Each rule of the spec that can be decided from the manifest, the tasks and the tree is one named function
``check_<rule>(ctx) -> Iterable[Finding]``; :data:`RULES` runs them in order. A finding is data (severity,
code, message, file:line or task and key, fix), never an exception: only a manifest that is missing raises
(:class:`~dokimi.errors.ManifestError`, exit 2); one that exists but is not a YAML mapping (binary, a
duplicate key, bad YAML) is a finding of ``manifest_schema`` (exit 1).

Git work is batched: every task base is resolved in one ``cat-file --batch-check`` call, the trees of all
bases come from one ``diff-tree --stdin`` against the eval tree's listing, and every task.json is read through
one ``cat-file --batch`` process.
"""

from __future__ import annotations

import math
import posixpath
import re
import shlex
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from dokimi.checks.own_tests import own_tests_argv
from dokimi.checks.perf.spec import PERF_KEY, perf_problems
from dokimi.checks.weak_tasks import (
    FileChange,
    code_shaped,
    defined_names,
    hidden_test_names,
    parse_patch,
    prompt_names_file,
    prompt_names_word,
    referenced_names,
)
from dokimi.constants import BUILD_SYSTEMS, PLACEHOLDERS
from dokimi.errors import DocumentError, SourceError, UsageError
from dokimi.repo.builtin_graders import ORACLE, REPORT_PLACEHOLDER, builtin_problem, is_builtin, uses_report
from dokimi.repo.manifest import (
    TASK_FILE,
    LoadedTask,
    ManifestUnreadable,
    load_manifest,
    load_tasks,
    manifest_model_errors,
    match_globs,
    read_manifest_marked,
    task_dirs,
)
from dokimi.repo.mining import draft_prompt
from dokimi.repo.rules import base_day
from dokimi.rundir import REVIEW_RULES_JSON, RUBRIC_JSON, RUN_DIR_ENTRIES
from dokimi.schemas._base import (
    Loc,
    Marked,
    decode_text,
    format_loc,
    parse_text,
    unknown_key_hint,
    validate_marked,
)
from dokimi.schemas.grade import FRAMEWORK_METRICS, OWN_TESTS_METRIC, REVIEW_METRICS
from dokimi.schemas.manifest import RepoManifest
from dokimi.schemas.review_rules import (
    MIN_PRS_FOR_BLOCKER,
    MIN_REVIEWERS_FOR_BLOCKER,
    RepoReviewRules,
    RuleStatus,
    may_back_a_blocker,
    one_reviewer_confirmed,
)
from dokimi.schemas.rubric import HOUSE_CITATION
from dokimi.schemas.task import (
    BUILTIN_GRADER_KEYS,
    REQUIRED_KEYS,
    Task,
    base_form,
    command_problem,
    criterion_problem,
    egress_host_problem,
    framework_task_keys,
    split_base,
)
from dokimi.schemas.validation import Finding, Severity, ValidationReport
from dokimi.source import Repo
from dokimi.source import git as gitcmd
from dokimi.source.snapshot import Snapshot, normalize

SCHEMA_NAME = "repo_validation.v1"

# --- context ----------------------------------------------------------------------------------------------


@dataclass
class Context:
    """Everything a rule reads. Expensive facts (resolved bases, trees of bases) are computed once, lazily."""

    repo: Repo | None
    snapshot: Snapshot
    manifest_path: str
    marked: Marked
    from_file: bool
    manifest: RepoManifest | None = None
    manifest_errors: list[DocumentError] = field(default_factory=list)
    tasks: list[LoadedTask] = field(default_factory=list)
    guidance_files: int = 0

    # findings ----------------------------------------------------------------------------------------------

    def at_manifest(
        self, code: str, loc: Loc, message: str, fix: str | None = None, *, severity: Severity = "error"
    ) -> Finding:
        return Finding(
            severity=severity,
            code=code,
            message=message,
            file=self.manifest_path,
            line=self.marked.line(loc),
            key=format_loc(loc) or None,
            fix=fix,
        )

    def at_task(
        self,
        lt: LoadedTask,
        code: str,
        loc: Loc,
        message: str,
        fix: str | None = None,
        *,
        severity: Severity = "error",
    ) -> Finding:
        line = lt.marked.line(loc) if lt.marked is not None else None
        return Finding(
            severity=severity,
            code=code,
            message=message,
            file=lt.path,
            line=line,
            task=lt.id,
            key=format_loc(loc) or None,
            fix=fix,
        )

    # facts -------------------------------------------------------------------------------------------------

    def task_data(self) -> Iterator[tuple[LoadedTask, dict[str, Any]]]:
        """Tasks whose task.json parsed to an object, with the raw data (rules read the raw keys)."""
        for lt in self.tasks:
            if lt.marked is not None and isinstance(lt.marked.data, dict):
                yield lt, lt.marked.data

    def valid_base_forms(self) -> dict[str, list[LoadedTask]]:
        """base value -> tasks, for bases of an acceptable form (full or short hex, optional ``^``)."""
        out: dict[str, list[LoadedTask]] = {}
        for lt, data in self.task_data():
            base = data.get("base")
            if isinstance(base, str) and base_form(base) != "invalid":
                out.setdefault(base, []).append(lt)
        return out

    @cached_property
    def resolved(self) -> dict[str, str | None]:
        """Every acceptable base value (and its SHA without ``^``) -> full SHA or None: ONE batch call."""
        bases = list(self.valid_base_forms())
        if not bases or self.repo is None or self.repo.git_dir is None:
            return {b: None for b in bases}
        revs = list(dict.fromkeys([*bases, *(split_base(b)[0] for b in bases)]))
        return gitcmd.rev_parse_many(self.repo.git_dir, revs)

    @cached_property
    def base_shas(self) -> list[str]:
        """Distinct resolved task bases, sorted."""
        return sorted({sha for base, sha in self.resolved.items() if sha and base in self.valid_base_forms()})

    def paths_at(self, sha: str) -> list[str]:
        """Paths of the tree of ``sha``: one ``git ls-tree -r --name-only`` (the eval tree's listing if
        equal)."""
        if sha == self.snapshot.rev:
            return list(self.snapshot.entries)
        assert self.repo is not None and self.repo.git_dir is not None
        out = gitcmd.run_git(
            ["ls-tree", "-r", "-z", "--name-only", "--full-tree", sha],
            git_dir=self.repo.git_dir,
            what=f"git ls-tree {sha}",
        )
        return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]

    def union_of_paths_at(self, shas: Sequence[str]) -> set[str]:
        """Every path that exists at one or more of ``shas``: the listing of one reference tree (the eval
        tree's, already read, when it is a commit) and ONE ``git diff-tree`` of the others against it."""
        assert self.repo is not None and self.repo.git_dir is not None
        if self.snapshot.rev is not None:
            reference, ref_paths = self.snapshot.rev, set(self.snapshot.entries)
            others = list(shas)
        else:
            reference, ref_paths = shas[0], set(self.paths_at(shas[0]))
            others = list(shas[1:])
        union = set(ref_paths) if len(others) < len(shas) else set()
        deletions: dict[str, int] = {}
        for added, deleted in gitcmd.tree_changes(self.repo.git_dir, reference, others).values():
            union.update(added)
            for path in deleted:
                deletions[path] = deletions.get(path, 0) + 1
        if others and len(others) == len(shas):  # the reference is not a base: keep what some base keeps
            union.update(p for p in ref_paths if deletions.get(p, 0) < len(others))
        return union

    @cached_property
    def mined_tasks(self) -> list[_MinedTask]:
        """The tasks of a built-in grade with their patches parsed, read once for every rule that needs
        them."""
        return _mined_tasks(self)

    @property
    def shallow(self) -> bool:
        return bool(self.repo and self.repo.git_dir and (self.repo.git_dir / "shallow").exists())


Rule = Callable[[Context], Iterable[Finding]]


def _code(func: Callable[..., Any]) -> str:
    return func.__name__.removeprefix("check_")


# --- manifest rules ---------------------------------------------------------------------------------------


def check_manifest_schema(ctx: Context) -> Iterator[Finding]:
    """The manifest has exactly the documented keys of repo_manifest.v1, with their types."""
    for err in ctx.manifest_errors:
        yield Finding(
            severity="error",
            code=_code(check_manifest_schema),
            message=err.message,
            file=ctx.manifest_path,
            line=err.line,
            key=err.key,
            fix=err.hint
            or "see docs/validate.md or `dokimi schema repo_manifest.v1` for the keys and their types",
        )


def check_eval_dir_tasks_entry_points_together(ctx: Context) -> Iterator[Finding]:
    """eval_dir, tasks and entry_points come together or not at all."""
    m = ctx.manifest
    if m is None:
        return
    present = {k: getattr(m, k) is not None for k in ("eval_dir", "tasks", "entry_points")}
    if any(present.values()) and not all(present.values()):
        missing = [k for k, v in present.items() if not v]
        given = [k for k, v in present.items() if v]
        yield ctx.at_manifest(
            _code(check_eval_dir_tasks_entry_points_together),
            (given[0],),
            f"{', '.join(given)} given without {', '.join(missing)}",
            f"add {' and '.join(missing)}, or remove {', '.join(given)} for a guidance-only manifest",
        )


def _bad_relative_path(path: str) -> str | None:
    if not path or not path.strip():
        return "is empty"
    if path.startswith("/"):
        return "is absolute; paths are relative to the repository root"
    if "\\" in path:
        return "uses '\\'; write POSIX paths with '/'"
    norm = normalize(path)
    if norm == "" or norm == ".":
        return "is the repository root"
    if norm == ".." or norm.startswith("../"):
        return "leaves the repository"
    return None


def check_eval_dir_is_proper_subdirectory(ctx: Context) -> Iterator[Finding]:
    """eval_dir is a proper subdirectory of the repository that exists in the eval tree."""
    m = ctx.manifest
    if m is None or m.eval_dir is None:
        return
    code = _code(check_eval_dir_is_proper_subdirectory)
    problem = _bad_relative_path(m.eval_dir)
    if problem:
        yield ctx.at_manifest(
            code,
            ("eval_dir",),
            f"{m.eval_dir!r} {problem}",
            "name a proper subdirectory (for example .agent-eval): it is deleted from every workspace",
        )
    elif not ctx.snapshot.is_dir(m.eval_dir):
        what = "is a file" if ctx.snapshot.is_file(m.eval_dir) else "does not exist"
        yield ctx.at_manifest(
            code,
            ("eval_dir",),
            f"{m.eval_dir!r} {what} in {ctx.snapshot.label}",
            "commit the eval directory, or fix the path",
        )


def _inside(path: str, directory: str) -> bool:
    return normalize(path).startswith(normalize(directory) + "/")


def check_tasks_inside_eval_dir(ctx: Context) -> Iterator[Finding]:
    """tasks and explore_tasks are directories inside eval_dir, present in the eval tree."""
    m = ctx.manifest
    if m is None or m.eval_dir is None or _bad_relative_path(m.eval_dir):
        return
    code = _code(check_tasks_inside_eval_dir)
    for key in ("tasks", "explore_tasks"):
        value = getattr(m, key)
        if value is None:
            continue
        problem = _bad_relative_path(value)
        if problem:
            yield ctx.at_manifest(code, (key,), f"{value!r} {problem}", f"put {key} inside {m.eval_dir}/")
        elif not _inside(value, m.eval_dir):
            yield ctx.at_manifest(
                code,
                (key,),
                f"{value!r} is not inside eval_dir {m.eval_dir!r}",
                f"move it under {m.eval_dir}/ (eval_dir is the one directory deleted from every workspace)",
            )
        elif not ctx.snapshot.is_dir(value):
            yield ctx.at_manifest(
                code,
                (key,),
                f"{value!r} is not a directory in {ctx.snapshot.label}",
                "commit it, or fix the path",
            )


def check_image_needs_eval_dir(ctx: Context) -> Iterator[Finding]:
    """image and explore_tasks need eval_dir."""
    m = ctx.manifest
    if m is None or m.eval_dir is not None:
        return
    for key in ("image", "explore_tasks"):
        if getattr(m, key) is not None:
            yield ctx.at_manifest(
                _code(check_image_needs_eval_dir),
                (key,),
                f"{key} given without eval_dir",
                "add eval_dir, tasks and entry_points, or remove " + key,
            )


def check_image_dockerfile(ctx: Context) -> Iterator[Finding]:
    """image.dockerfile is a file of the eval tree, outside the tasks directory (removed from the context)."""
    m = ctx.manifest
    if m is None or m.image is None:
        return
    code = _code(check_image_dockerfile)
    path = m.image.dockerfile
    problem = _bad_relative_path(path)
    if problem:
        yield ctx.at_manifest(code, ("image", "dockerfile"), f"{path!r} {problem}", "give a path in the tree")
    elif not ctx.snapshot.is_file(path):
        yield ctx.at_manifest(
            code,
            ("image", "dockerfile"),
            f"{path!r} is not a file in {ctx.snapshot.label}",
            "commit the Dockerfile, or fix the path",
        )
    elif m.tasks and not _bad_relative_path(m.tasks) and _inside(path, m.tasks):
        yield ctx.at_manifest(
            code,
            ("image", "dockerfile"),
            f"{path!r} is inside the tasks directory, which is removed from the build context",
            f"move it out of {m.tasks}/",
        )


_CACHE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def check_image_caches(ctx: Context) -> Iterator[Finding]:
    """Each cache has a volume name and an absolute path, both unique, outside the fixed /eval paths."""
    m = ctx.manifest
    if m is None or m.image is None:
        return
    code = _code(check_image_caches)
    names: set[str] = set()
    paths: set[str] = set()
    for i, cache in enumerate(m.image.caches):
        if not _CACHE_NAME.match(cache.name):
            yield ctx.at_manifest(
                code,
                ("image", "caches", i, "name"),
                f"{cache.name!r} is not a volume name",
                "use letters, digits, '_', '.', '-', starting with a letter or digit",
            )
        elif cache.name in names:
            yield ctx.at_manifest(code, ("image", "caches", i, "name"), f"{cache.name!r} appears twice")
        names.add(cache.name)
        norm = posixpath.normpath(cache.path) if cache.path else ""
        if not cache.path.startswith("/"):
            yield ctx.at_manifest(
                code,
                ("image", "caches", i, "path"),
                f"{cache.path!r} is not an absolute path",
                "give the mount point inside the container, for example /cache/bazel-disk",
            )
        elif norm == "/" or norm == "/eval" or norm.startswith("/eval/"):
            yield ctx.at_manifest(
                code,
                ("image", "caches", i, "path"),
                f"{cache.path!r} overlaps the framework's fixed paths (/ or /eval)",
                "mount caches elsewhere, for example under /cache",
            )
        elif norm in paths:
            yield ctx.at_manifest(code, ("image", "caches", i, "path"), f"{cache.path!r} appears twice")
        paths.add(norm)


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_image_env_names(ctx: Context) -> Iterator[Finding]:
    """image.env keys are environment variable names."""
    m = ctx.manifest
    if m is None or m.image is None:
        return
    for name in m.image.env:
        if not _ENV_NAME.match(name):
            yield ctx.at_manifest(
                _code(check_image_env_names),
                ("image", "env", name),
                f"{name!r} is not an environment variable name",
                "use letters, digits and '_', not starting with a digit",
            )


def check_entry_point_commands(ctx: Context) -> Iterator[Finding]:
    """Every entry point given is a non-empty command that splits into words (balanced quotes)."""
    m = ctx.manifest
    if m is None or m.entry_points is None:
        return
    for name in ("grade", "oracle", "static", "perf"):
        value = getattr(m.entry_points, name)
        if value is not None and not value.strip():
            yield ctx.at_manifest(
                _code(check_entry_point_commands),
                ("entry_points", name),
                "empty command",
                f"give the command that runs {name}, or remove the key",
            )
            continue
        if value is not None:
            try:
                shlex.split(value)
            except ValueError as exc:
                yield ctx.at_manifest(
                    _code(check_entry_point_commands),
                    ("entry_points", name),
                    f"cannot be split into words as a shell would: {exc}",
                    "close every quote (the command is split like shell words and run without a shell)",
                )


def check_builtin_graders(ctx: Context) -> Iterator[Finding]:
    """An entry point that starts with ``builtin:`` names one of dokimi's built-in graders, in its place:
    ``builtin:pytest`` or ``builtin:command CMD`` as grade, ``builtin:oracle`` as oracle."""
    m = ctx.manifest
    if m is None or m.entry_points is None:
        return
    for name in ("grade", "oracle", "static", "perf"):
        value = getattr(m.entry_points, name)
        if not is_builtin(value):
            continue
        problem: str | None = "built-ins serve grade and oracle only"
        if name in ("grade", "oracle"):
            problem = builtin_problem(value, name)
        if problem is not None:
            yield ctx.at_manifest(
                _code(check_builtin_graders),
                ("entry_points", name),
                problem,
                "see docs/your-repo.md for the built-in graders",
            )
    if is_builtin(m.entry_points.oracle) and not is_builtin(m.entry_points.grade):
        yield ctx.at_manifest(
            _code(check_builtin_graders),
            ("entry_points", "oracle"),
            "builtin:oracle works with a built-in grade only (it applies the task's oracle_patch)",
            "use builtin:pytest or builtin:command as grade, or give your own oracle command",
        )


def check_builtin_task_keys(ctx: Context) -> Iterator[Finding]:
    """With a built-in grade, every task.json key is known (the framework's plus ``test_patch``,
    ``oracle_patch``, ``fail_to_pass``, ``pass_to_pass``): there is no repository grader to pass others to.
    ``fail_to_pass`` lists the test ids that must pass (``repo task new`` finds them); with builtin:oracle
    every task needs its ``oracle_patch``."""
    m = ctx.manifest
    if m is None or m.entry_points is None or not is_builtin(m.entry_points.grade):
        return
    code = _code(check_builtin_task_keys)
    known = [*framework_task_keys(), *BUILTIN_GRADER_KEYS]
    # builtin:command without {report} passes on its exit code: it has no ids to list
    graded_by_ids = not m.entry_points.grade.strip().startswith("builtin:command") or uses_report(
        m.entry_points.grade
    )
    for lt, data in ctx.task_data():
        for key in data:
            if key not in known:
                yield ctx.at_task(
                    lt, code, (key,), "unknown key (a built-in grader reads no other keys)",
                    unknown_key_hint(key, known),
                )  # fmt: skip
        for key in ("fail_to_pass", "pass_to_pass"):
            value = data.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                yield ctx.at_task(lt, code, (key,), "must be a list of test ids (strings)")
        if not data.get("fail_to_pass") and graded_by_ids:
            yield ctx.at_task(
                lt, code, (), "no fail_to_pass ids: the null workspace cannot fail the gate",
                "list the tests the fix makes pass, or make the task with `dokimi repo task new`",
                severity="warning",
            )  # fmt: skip
        for key in ("test_patch", "oracle_patch"):
            if key in data and not isinstance(data[key], str):
                yield ctx.at_task(lt, code, (key,), "must be a path relative to the task directory")
        if m.entry_points.oracle == ORACLE and "oracle_patch" not in data:
            yield ctx.at_task(
                lt, code, (), "builtin:oracle needs the task's oracle_patch",
                'add "oracle_patch": "oracle.patch" (the reference fix, a git diff) next to task.json',
            )  # fmt: skip


_PLACEHOLDER = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: Extra placeholders of one command: perf takes {variant}.
_EXTRA_PLACEHOLDERS: dict[Loc, tuple[str, ...]] = {("entry_points", "perf"): ("variant",)}


def _templated_values(m: RepoManifest) -> Iterator[tuple[Loc, str]]:
    """Every manifest value that takes placeholders, with its location."""
    if m.entry_points is not None:
        for name in ("grade", "oracle", "static", "perf"):
            value = getattr(m.entry_points, name)
            if value is not None:
                yield ("entry_points", name), value
    if m.image is not None:
        for key, value in m.image.env.items():
            yield ("image", "env", key), value
    if m.tests is not None and m.tests.list_ is not None:
        yield ("tests", "list"), m.tests.list_
    if m.tests is not None and m.tests.run is not None:
        yield ("tests", "run"), m.tests.run


def placeholders_in(text: str) -> list[str]:
    """Placeholder names used in ``text`` (``{name}``; a shell ``${NAME}`` is not one)."""
    return _PLACEHOLDER.findall(text)


def check_placeholders(ctx: Context) -> Iterator[Finding]:
    """Only {eval_dir}, {source_dir}, {run_dir}, {out} and {task} (and {variant} in perf) are placeholders."""
    m = ctx.manifest
    if m is None:
        return
    for loc, value in _templated_values(m):
        allowed = (*PLACEHOLDERS, *_EXTRA_PLACEHOLDERS.get(loc, ()))
        if loc == ("tests", "run"):  # a container holding the tree alone: no eval dir, no run dir
            allowed = ("tests", "task")
        if loc == ("entry_points", "grade") and is_builtin(value):
            allowed = (*allowed, REPORT_PLACEHOLDER)  # builtin:command's JUnit report path
        for name in dict.fromkeys(placeholders_in(value)):
            if name not in allowed:
                yield ctx.at_manifest(
                    _code(check_placeholders),
                    loc,
                    f"unknown placeholder {{{name}}}",
                    "the placeholders are "
                    + ", ".join(f"{{{p}}}" for p in allowed)
                    + "; write ${NAME} for a shell variable",
                )


def check_source_dir_only_in_grade_and_oracle(ctx: Context) -> Iterator[Finding]:
    """{source_dir} (full upstream history) appears only in grade and oracle."""
    m = ctx.manifest
    if m is None:
        return
    for loc, value in _templated_values(m):
        if loc in (("entry_points", "grade"), ("entry_points", "oracle")):
            continue
        if "source_dir" in placeholders_in(value):
            yield ctx.at_manifest(
                _code(check_source_dir_only_in_grade_and_oracle),
                loc,
                "{source_dir} is allowed only in entry_points.grade and entry_points.oracle",
                "history holds every fix, so it is never given to the agent's container or other commands",
            )


def check_source_dir_needs_source_url(ctx: Context) -> Iterator[Finding]:
    """{source_dir} needs source.url: it is a clone of that URL."""
    m = ctx.manifest
    if m is None or (m.source is not None and m.source.url):
        return
    for loc, value in _templated_values(m):
        if "source_dir" in placeholders_in(value):
            yield ctx.at_manifest(
                _code(check_source_dir_needs_source_url),
                loc,
                "{source_dir} is used but source.url is not set",
                "add source: {url: <clone URL>}; {source_dir} is a full-history clone of it",
            )


_PLAIN_SEGMENT = re.compile(r"^[A-Za-z0-9._-]+$")
_RUN_DIR_USE = re.compile(r"\{run_dir\}(/[^:;\s]*)?")


def check_image_env_run_dir_values(ctx: Context) -> Iterator[Finding]:
    """A value under {run_dir}/ in image.env is a plain name (``ob``, ``ob/sub``), never a framework entry."""
    m = ctx.manifest
    if m is None or m.image is None:
        return
    code = _code(check_image_env_run_dir_values)
    entries = ", ".join(sorted(RUN_DIR_ENTRIES))
    for key, value in m.image.env.items():
        loc: Loc = ("image", "env", key)
        for match in _RUN_DIR_USE.finditer(value):
            rest = (match.group(1) or "").strip("/")
            if not rest:
                yield ctx.at_manifest(
                    code,
                    loc,
                    f"{value!r} names {{run_dir}} itself, which belongs to the framework",
                    "name a plain entry under it, for example {run_dir}/ob",
                )
                continue
            parts = rest.split("/")
            bad = [p for p in parts if p in (".", "..") or not _PLAIN_SEGMENT.match(p)]
            if bad:
                yield ctx.at_manifest(
                    code,
                    loc,
                    f"{value!r}: {bad[0]!r} is not a plain name under {{run_dir}}",
                    "use letters, digits, '.', '_' and '-' (for example {run_dir}/ob/sub)",
                )
            elif parts[0] in RUN_DIR_ENTRIES:
                yield ctx.at_manifest(
                    code,
                    loc,
                    f"{value!r}: {{run_dir}}/{parts[0]} is a framework entry of the run directory",
                    f"choose another name; the framework owns {entries}",
                )


_UNSUPPORTED_GLOB = re.compile(r"[{}]|[!@+]\(|^!")


def _glob_locs(m: RepoManifest) -> Iterator[tuple[Loc, str]]:
    for i, g in enumerate(m.guidance.globs):
        yield ("guidance", "globs", i), g
    for i, g in enumerate(m.guidance.also_scan):
        yield ("guidance", "also_scan", i), g
    if m.tests is not None:
        for i, g in enumerate(m.tests.globs):
            yield ("tests", "globs", i), g
        for i, g in enumerate(m.tests.config_globs):
            yield ("tests", "config_globs", i), g


def check_glob_syntax(ctx: Context) -> Iterator[Finding]:
    """Globs are relative, inside the tree, and in the dialect (no braces, extglob or
    negation)."""
    m = ctx.manifest
    if m is None:
        return
    code = _code(check_glob_syntax)
    for loc, pattern in _glob_locs(m):
        problem = _bad_relative_path(pattern)
        if problem and problem != "is the repository root":
            yield ctx.at_manifest(code, loc, f"{pattern!r} {problem}", "write a glob relative to the root")
        elif _UNSUPPORTED_GLOB.search(pattern):
            yield ctx.at_manifest(
                code,
                loc,
                f"{pattern!r} uses braces, extglob or negation, which the glob dialect does not have",
                "write one glob per alternative; `**` crosses '/', `*` and `?` do not",
            )


def check_build_systems_known(ctx: Context) -> Iterator[Finding]:
    """Every build_systems entry names a known L0 adapter."""
    m = ctx.manifest
    if m is None:
        return
    seen: set[str] = set()
    for i, name in enumerate(m.build_systems):
        if name not in BUILD_SYSTEMS:
            yield ctx.at_manifest(
                _code(check_build_systems_known),
                ("build_systems", i),
                f"unknown build system {name!r}",
                "known: " + ", ".join(sorted(BUILD_SYSTEMS)),
            )
        elif name in seen:
            yield ctx.at_manifest(
                _code(check_build_systems_known),
                ("build_systems", i),
                f"{name!r} appears twice",
                "remove one",
                severity="warning",
            )
        seen.add(name)


def check_tests_block(ctx: Context) -> Iterator[Finding]:
    """A ``tests`` block that checks nothing is a mistake worth a warning; ``tests.run`` names its files with
    ``{tests}``, and without ``tests.globs`` no file of a change is a test."""
    m = ctx.manifest
    if m is None or m.tests is None:
        return
    t = m.tests
    if not t.globs and not t.config_globs and not (t.list_ and t.list_.strip()) and t.run is None:
        yield ctx.at_manifest(
            _code(check_tests_block),
            ("tests",),
            "the tests block has no globs, config_globs or list, so test integrity checks nothing",
            "add tests.globs and tests.config_globs (and tests.list), or remove the block",
            severity="warning",
        )
    elif t.list_ is not None and not t.list_.strip():
        yield ctx.at_manifest(
            _code(check_tests_block), ("tests", "list"), "empty command", "give the command or remove the key"
        )
    if t.run is not None:
        try:
            own_tests_argv(t.run, ["tests/test_example.py"], task="task")
        except UsageError as exc:
            yield ctx.at_manifest(
                _code(check_tests_block),
                ("tests", "run"),
                exc.message,
                "write a command that runs the files of {tests}, for example: python3 -m pytest -q {tests}",
            )
        if not t.globs:
            yield ctx.at_manifest(
                _code(check_tests_block),
                ("tests", "run"),
                "tests.run without tests.globs: dokimi cannot tell which files of a change are its tests",
                "add tests.globs",
                severity="warning",
            )


# --- task rules -------------------------------------------------------------------------------------------


def check_task_dirs_have_task_json(ctx: Context) -> Iterator[Finding]:
    """Every directory under tasks holds a task.json (a directory without one is not a task)."""
    m = ctx.manifest
    if m is None or m.tasks is None or _bad_relative_path(m.tasks) or not ctx.snapshot.is_dir(m.tasks):
        return
    for directory in task_dirs(ctx.snapshot, m.tasks):
        if not ctx.snapshot.exists(f"{directory}/{TASK_FILE}"):
            yield Finding(
                severity="warning",
                code=_code(check_task_dirs_have_task_json),
                message=f"{directory}/ has no {TASK_FILE}, so it is not a task",
                file=directory,
                task=posixpath.basename(directory),
                fix=f"add {directory}/{TASK_FILE}, or move the directory out of {m.tasks}/",
            )
    if not ctx.tasks:
        yield ctx.at_manifest(
            _code(check_task_dirs_have_task_json),
            ("tasks",),
            f"{m.tasks!r} holds no task (no <task-id>/{TASK_FILE})",
            "add tasks, or remove eval_dir, tasks and entry_points for a guidance-only manifest",
            severity="warning",
        )


def check_pilot_tasks_exist(ctx: Context) -> Iterator[Finding]:
    """Every task the ``pilot`` block names is a task of the tasks directory."""
    m = ctx.manifest
    if m is None or m.pilot is None:
        return
    code = _code(check_pilot_tasks_exist)
    if m.tasks is None:
        yield ctx.at_manifest(code, ("pilot",), "pilot names tasks, but the manifest has none", "add tasks")
        return
    known = {lt.id for lt in ctx.tasks}
    for i, task_id in enumerate(m.pilot.tasks):
        if task_id not in known:
            yield ctx.at_manifest(
                code,
                ("pilot", "tasks", i),
                f"{task_id!r} is not a task of {m.tasks}",
                f"name one of: {', '.join(sorted(known)) or '(none)'}",
            )


def check_task_json_parses(ctx: Context) -> Iterator[Finding]:
    """task.json is UTF-8 JSON, an object, without duplicate keys."""
    for lt in ctx.tasks:
        if lt.marked is not None and isinstance(lt.marked.data, dict):
            continue
        for err in lt.errors:
            yield Finding(
                severity="error",
                code=_code(check_task_json_parses),
                message=err.message,
                file=err.path or lt.path,
                line=err.line,
                task=lt.id,
                fix=err.hint or "fix the JSON",
            )


def check_task_id_equals_directory(ctx: Context) -> Iterator[Finding]:
    """``id`` equals the name of the task's directory."""
    for lt, data in ctx.task_data():
        value = data.get("id")
        if isinstance(value, str) and value != lt.id:
            yield ctx.at_task(
                lt,
                _code(check_task_id_equals_directory),
                ("id",),
                f"{value!r} differs from its directory name {lt.id!r}",
                f'set "id": "{lt.id}", or rename the directory to {value}',
            )


def check_required_keys(ctx: Context) -> Iterator[Finding]:
    """id, family, base, prompt and grader are present, as non-empty strings."""
    code = _code(check_required_keys)
    for lt, data in ctx.task_data():
        for key in REQUIRED_KEYS:
            if key not in data:
                yield ctx.at_task(lt, code, (), f"required key {key!r} is missing", f'add "{key}"')
            elif not isinstance(data[key], str) or not data[key].strip():
                yield ctx.at_task(
                    lt,
                    code,
                    (key,),
                    f"must be a non-empty string, not {data[key]!r}",
                    f'give "{key}" a string',
                )


def check_base_form(ctx: Context) -> Iterator[Finding]:
    """base is a full 40-hex SHA, optionally followed by ``^``; a shorter SHA warns; refs are refused."""
    code = _code(check_base_form)
    for lt, data in ctx.task_data():
        base = data.get("base")
        if not isinstance(base, str) or not base.strip():
            continue  # check_required_keys reports it
        form = base_form(base)
        if form == "invalid":
            yield ctx.at_task(
                lt,
                code,
                ("base",),
                f"{base!r} is not a hex SHA (optionally followed by ^); branch names, tags and HEAD are "
                "refused "
                "even when they resolve, because repetitions of one task must get one snapshot",
                "write the full 40-character commit SHA (git rev-parse <ref>), keeping a trailing ^",
            )
        elif form == "short":
            yield ctx.at_task(
                lt,
                code,
                ("base",),
                f"{base!r} is a short SHA ({len(split_base(base)[0])} characters)",
                "expand it to the full 40-character SHA (git rev-parse); a short one may become ambiguous",
                severity="warning",
            )


def check_base_resolves(ctx: Context) -> Iterator[Finding]:
    """Every base resolves to a commit in the source (all bases in one batch call)."""
    code = _code(check_base_resolves)
    if ctx.repo is None or ctx.repo.git_dir is None:
        for base, tasks in ctx.valid_base_forms().items():
            for lt in tasks:
                yield ctx.at_task(
                    lt,
                    code,
                    ("base",),
                    f"{base!r} cannot be resolved: the source is not a git repository",
                    "validate a git checkout (<dir>, <dir>@<rev> or <url>@<rev>)",
                )
        return
    fetch = "fetch full history (git fetch --unshallow)" if ctx.shallow else "fetch full history"
    for base, tasks in ctx.valid_base_forms().items():
        if ctx.resolved.get(base):
            continue
        sha, parent = split_base(base)
        if parent and ctx.resolved.get(sha):
            message = f"{base!r} does not resolve: {sha[:12]} has no parent (a root commit)"
            fix = "use the commit itself, or fix the sha"
        else:
            message = f"{base!r} does not resolve to a commit in the source"
            fix = f"{fetch} or fix the sha"
            if base_form(base) == "short":
                fix = f"{fetch}, or write the full SHA (a short one may be ambiguous)"
        for lt in tasks:
            yield ctx.at_task(lt, code, ("base",), message, fix)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_gate_and_score_forms(ctx: Context) -> Iterator[Finding]:
    """gate is a list of metric names or {metric, min}; score is {metric, max}; something decides success."""
    code = _code(check_gate_and_score_forms)
    for lt, data in ctx.task_data():
        gate = data.get("gate", ["pass"])
        score = data.get("score")
        if not isinstance(gate, list):
            yield ctx.at_task(
                lt, code, ("gate",), f"must be a list, not {gate!r}", 'write for example "gate": ["pass"]'
            )
            gate = []
        for i, entry in enumerate(gate):
            if isinstance(entry, str):
                if not entry.strip():
                    yield ctx.at_task(lt, code, ("gate", i), "empty metric name", "name a boolean metric")
            elif isinstance(entry, dict):
                extra = sorted(set(entry) - {"metric", "min"})
                if extra:
                    yield ctx.at_task(
                        lt,
                        code,
                        ("gate", i, extra[0]),
                        "unknown key in a gate entry",
                        'use {"metric", "min"}',
                    )
                metric = entry.get("metric")
                if not isinstance(metric, str) or not metric.strip():
                    yield ctx.at_task(
                        lt,
                        code,
                        ("gate", i),
                        'needs a non-empty "metric"',
                        'write {"metric": name, "min": n}',
                    )
                if "min" not in entry or not _is_number(entry["min"]) or not math.isfinite(entry["min"]):
                    yield ctx.at_task(
                        lt,
                        code,
                        ("gate", i, "min") if "min" in entry else ("gate", i),
                        f'needs a finite number "min", not {entry.get("min")!r}',
                        'write {"metric": name, "min": <number>}',
                    )
            else:
                yield ctx.at_task(
                    lt,
                    code,
                    ("gate", i),
                    f"{entry!r} is neither a metric name nor {{metric, min}}",
                    'write "strict_pass" or {"metric": "recall", "min": 0.8}',
                )
        if score is not None:
            if not isinstance(score, dict):
                yield ctx.at_task(lt, code, ("score",), f"must be {{metric, max}}, not {score!r}")
            else:
                extra = sorted(set(score) - {"metric", "max"})
                if extra:
                    yield ctx.at_task(lt, code, ("score", extra[0]), "unknown key", 'use {"metric", "max"}')
                metric = score.get("metric")
                if not isinstance(metric, str) or not metric.strip():
                    yield ctx.at_task(
                        lt, code, ("score",), 'needs a non-empty "metric"', 'write {"metric": name, "max": n}'
                    )
                if "max" not in score or not _is_number(score["max"]) or not math.isfinite(score["max"]):
                    yield ctx.at_task(
                        lt,
                        code,
                        ("score", "max") if "max" in score else ("score",),
                        f'needs a finite number "max" (the value the oracle must reach), '
                        f"not {score.get('max')!r}",
                        'write {"metric": name, "max": <number>}',
                    )
        if isinstance(data.get("gate"), list) and not data["gate"] and score is None:
            yield ctx.at_task(
                lt,
                code,
                ("gate",),
                "an empty gate without score: nothing decides the result of this task",
                'remove "gate" (default ["pass"]), name metrics, or add "score" for a score-only task',
            )


def check_mergeable_gate_has_rubric(ctx: Context) -> Iterator[Finding]:
    """A gate naming ``mergeable`` (its own, or its mode's success rule) needs tasks/<id>/rubric.json, else
    mergeable is never measured."""
    for lt, data in ctx.task_data():
        gate = data.get("gate")
        from_mode = gate is None and lt.task is not None and lt.task.gate_from_mode
        if from_mode:
            assert lt.task is not None
            gate = lt.task.gate_names
        if not isinstance(gate, list):
            continue
        names = [e if isinstance(e, str) else e.get("metric") if isinstance(e, dict) else None for e in gate]
        for i, name in enumerate(names):
            if name in ("mergeable", "merge_score") and not ctx.snapshot.is_file(f"{lt.dir}/rubric.json"):
                whose = f"the {data.get('mode')} success rule" if from_mode else "the gate"
                yield ctx.at_task(
                    lt,
                    _code(check_mergeable_gate_has_rubric),
                    ("mode",) if from_mode else ("gate", i),
                    f"{whose} names {name} but {lt.dir}/rubric.json does not exist, so it is never measured",
                    "add the task's rubric.json (docs/mergeability.md), or drop the gate entry",
                    severity="warning",
                )


def check_caps_finite_positive(ctx: Context) -> Iterator[Finding]:
    """timeout_s, max_turns and budget_usd are finite numbers > 0 (max_turns a whole number)."""
    code = _code(check_caps_finite_positive)
    for lt, data in ctx.task_data():
        for key in ("timeout_s", "max_turns", "budget_usd"):
            if key not in data or data[key] is None:
                continue
            value = data[key]
            if not _is_number(value) or not math.isfinite(value) or value <= 0:
                yield ctx.at_task(
                    lt,
                    code,
                    (key,),
                    f"must be a finite number > 0, not {value!r}",
                    f"set {key} to a number > 0",
                )
            elif key == "max_turns" and not float(value).is_integer():
                yield ctx.at_task(lt, code, (key,), f"must be a whole number, not {value!r}", "round it")


#: Largest prompt a task may have, in UTF-8 bytes. A harness gets the prompt as one argv element, and Linux
#: refuses an element over 128 KiB (MAX_ARG_STRLEN): every paid cell of a larger prompt would fail to start.
MAX_PROMPT_BYTES = 100_000


def check_prompt_size(ctx: Context) -> Iterator[Finding]:
    """A task's prompt (and its ``prompt_issue`` variant) is text of at most :data:`MAX_PROMPT_BYTES` bytes,
    without NUL characters."""
    code = _code(check_prompt_size)
    for lt, data in ctx.task_data():
        for key in ("prompt", "prompt_issue"):
            prompt = data.get(key)
            if not isinstance(prompt, str):
                continue
            size = len(prompt.encode("utf-8", "surrogatepass"))
            if size > MAX_PROMPT_BYTES:
                yield ctx.at_task(
                    lt,
                    code,
                    (key,),
                    f"is {size} bytes, over the limit of {MAX_PROMPT_BYTES} (a harness takes it as one "
                    "argument)",
                    "shorten the prompt; put long material in a file of the task's base the prompt names",
                )
            elif "\0" in prompt:
                yield ctx.at_task(lt, code, (key,), "holds a NUL character", "remove it")


def check_setup_patch_synonym(ctx: Context) -> Iterator[Finding]:
    """setup_patch (one string) is a synonym of setup_patches (a list of strings), never both."""
    code = _code(check_setup_patch_synonym)
    for lt, data in ctx.task_data():
        if "setup_patch" in data and "setup_patches" in data:
            yield ctx.at_task(
                lt, code, ("setup_patch",), "setup_patch and setup_patches are both given", "keep one of them"
            )
        if "setup_patch" in data and not isinstance(data["setup_patch"], str):
            yield ctx.at_task(
                lt,
                code,
                ("setup_patch",),
                f"must be one path (a string), not {data['setup_patch']!r}",
                "use setup_patches for a list",
            )
        patches = data.get("setup_patches")
        if patches is not None and (
            not isinstance(patches, list) or not all(isinstance(p, str) for p in patches)
        ):
            yield ctx.at_task(lt, code, ("setup_patches",), "must be a list of paths", 'write ["fix.patch"]')
        review = data.get("review_patch")
        if review is not None and not isinstance(review, str):
            yield ctx.at_task(lt, code, ("review_patch",), "must be one path (a string)")


def _task_patches(data: dict[str, Any], *, builtin: bool = False) -> Iterator[tuple[Loc, str]]:
    if builtin:  # the built-in graders' hidden tests and reference solution
        for key in ("test_patch", "oracle_patch"):
            if isinstance(data.get(key), str):
                yield (key,), data[key]
    if isinstance(data.get("setup_patch"), str):
        yield ("setup_patch",), data["setup_patch"]
    patches = data.get("setup_patches")
    if isinstance(patches, list):
        for i, p in enumerate(patches):
            if isinstance(p, str):
                yield ("setup_patches", i), p
    if isinstance(data.get("review_patch"), str):
        yield ("review_patch",), data["review_patch"]


def check_patches_exist(ctx: Context) -> Iterator[Finding]:
    """setup_patches, setup_patch and review_patch are files (relative to the task directory) in the eval
    tree, inside eval_dir (only eval_dir is copied for the run)."""
    code = _code(check_patches_exist)
    eval_dir = ctx.manifest.eval_dir if ctx.manifest is not None else None
    entry_points = ctx.manifest.entry_points if ctx.manifest is not None else None
    builtin = entry_points is not None and is_builtin(entry_points.grade)
    for lt, data in ctx.task_data():
        for loc, rel in _task_patches(data, builtin=builtin):
            if not rel or rel.startswith("/"):
                yield ctx.at_task(lt, code, loc, f"{rel!r} must be a path relative to {lt.dir}/")
                continue
            path = posixpath.normpath(posixpath.join(lt.dir, rel))
            if eval_dir and not _bad_relative_path(eval_dir) and not _inside(path, eval_dir):
                yield ctx.at_task(
                    lt,
                    code,
                    loc,
                    f"{rel!r} leads to {path}, outside eval_dir {eval_dir!r}",
                    "keep patches inside the eval directory (next to task.json)",
                )
            elif not ctx.snapshot.is_file(path):
                yield ctx.at_task(
                    lt,
                    code,
                    loc,
                    f"{rel!r} does not exist: no file {path} in {ctx.snapshot.label}",
                    "commit the patch next to task.json, or fix the path (relative to the task directory)",
                )


def check_egress_hosts(ctx: Context) -> Iterator[Finding]:
    """egress holds DNS names with an optional :port; ``*`` is one whole label; the last two are literal."""
    code = _code(check_egress_hosts)
    for lt, data in ctx.task_data():
        if "egress" not in data:
            continue
        hosts = data["egress"]
        if not isinstance(hosts, list):
            yield ctx.at_task(lt, code, ("egress",), "must be a list of hosts", 'write ["pypi.org"]')
            continue
        for i, host in enumerate(hosts):
            problem = egress_host_problem(host) if isinstance(host, str) else "not a string"
            if problem:
                yield ctx.at_task(
                    lt,
                    code,
                    ("egress", i),
                    f"{host!r}: {problem}",
                    "write DNS names such as pypi.org or *.pythonhosted.org, with an optional :port",
                )


def _list_items(
    ctx: Context, code: str, key: str, problem_of: Callable[[object], str | None], hint: str
) -> Iterator[Finding]:
    for lt, data in ctx.task_data():
        if key not in data:
            continue
        items = data[key]
        if not isinstance(items, list):
            yield ctx.at_task(lt, code, (key,), "must be a list of strings", hint)
            continue
        for i, item in enumerate(items):
            problem = problem_of(item)
            if problem:
                yield ctx.at_task(lt, code, (key, i), f"{item!r}: {problem}", hint)


def check_acceptance_criteria(ctx: Context) -> Iterator[Finding]:
    """acceptance_criteria is a list of criteria, each saying something a rater checks."""
    yield from _list_items(
        ctx,
        _code(check_acceptance_criteria),
        "acceptance_criteria",
        criterion_problem,
        'write one checkable criterion per entry: ["logout survives a slow request"]',
    )


def check_validation_commands(ctx: Context) -> Iterator[Finding]:
    """validation_commands and hidden_validation_commands are commands that split into words."""
    for key in ("validation_commands", "hidden_validation_commands"):
        yield from _list_items(
            ctx,
            _code(check_validation_commands),
            key,
            command_problem,
            'write each command as you would type it, for example "pytest -q tests" (no shell unless you '
            "name one: \"sh -c '...'\")",
        )


_TASK_ENUMS: dict[str, tuple[str, ...]] = {
    "mode": ("interactive", "autonomous", "review"),
    "prompt_style": ("spec", "issue"),
}


def check_mode_values(ctx: Context) -> Iterator[Finding]:
    """mode is interactive, autonomous or review; prompt_style is spec or issue; effort a non-empty string."""
    code = _code(check_mode_values)
    for lt, data in ctx.task_data():
        for key, allowed in _TASK_ENUMS.items():
            if key in data and data[key] is not None and data[key] not in allowed:
                yield ctx.at_task(lt, code, (key,), f"{data[key]!r} is not one of {', '.join(allowed)}")
        effort = data.get("effort")
        if effort is not None and (not isinstance(effort, str) or not effort.strip()):
            yield ctx.at_task(lt, code, ("effort",), f"must be a non-empty string, not {effort!r}")


#: Metrics only one mode's success rule measures: a gate of another mode that names one measures a different
#: way of using the agent.
_MODE_METRICS: dict[str, frozenset[str]] = {
    "review": frozenset(REVIEW_METRICS),
    "change": frozenset({"mergeable", "merge_score", OWN_TESTS_METRIC}),
}


def _test_verdict_entries(names: Iterable[str]) -> list[str]:
    """Gate entries that are the repository's own test verdict (``pass``, ``strict_pass``, ...): every entry
    that is not a framework metric."""
    return [name for name in names if name not in FRAMEWORK_METRICS]


def check_gate_fits_mode(ctx: Context) -> Iterator[Finding]:
    """A task's own gate wins over its mode's success rule; a gate that leaves out what the rule holds, or
    names a metric of another mode, measures something else than the mode, and is warned about."""
    code = _code(check_gate_fits_mode)
    for lt, data in ctx.task_data():
        task = lt.task
        if task is None or task.mode is None or "gate" not in data:
            continue
        names = task.gate_names
        wanted = [e if isinstance(e, str) else e.metric for e in task.mode_rule() or ()]
        missing = [name for name in wanted if name not in names and name != "pass"]
        if "pass" in wanted and not _test_verdict_entries(names):
            missing.insert(0, "pass (or another test verdict of the grader)")
        own = _MODE_METRICS["review"] if task.mode == "review" else _MODE_METRICS["change"]
        foreign = [n for n in names if n not in own and any(n in m for m in _MODE_METRICS.values())]
        if missing:
            yield ctx.at_task(
                lt,
                code,
                ("gate",),
                f"the gate leaves out {', '.join(missing)}, which the {task.mode} success rule holds: this "
                f"task's verdicts are not {task.mode} verdicts",
                f"remove gate to use the {task.mode} rule ({', '.join(wanted)}), or add the entries",
                severity="warning",
            )
        if foreign:
            yield ctx.at_task(
                lt,
                code,
                ("gate",),
                f"the gate names {', '.join(foreign)}, which a {task.mode} task does not measure",
                "name the metrics of the task's own mode, or change its mode",
                severity="warning",
            )


def check_autonomous_prompt_is_an_issue(ctx: Context) -> Iterator[Finding]:
    """An autonomous task's prompt is an issue as filed (``prompt_style: issue``); ``spec`` contradicts it."""
    for lt, data in ctx.task_data():
        if data.get("mode") == "autonomous" and data.get("prompt_style") == "spec":
            yield ctx.at_task(
                lt,
                _code(check_autonomous_prompt_is_an_issue),
                ("prompt_style",),
                "an autonomous task gets an issue as filed, but prompt_style says spec",
                "rewrite the prompt as the issue a user would file and set prompt_style: issue (or drop the "
                "key), or make the task interactive",
                severity="warning",
            )


def check_own_tests_measurable(ctx: Context) -> Iterator[Finding]:
    """A gate naming ``own_tests_fail_on_base`` (an autonomous task's rule does) needs the manifest's
    ``tests.globs`` and ``tests.run``, else it is never measured and the task never passes."""
    tests = ctx.manifest.tests if ctx.manifest is not None else None
    if tests is not None and tests.globs and tests.run:
        return
    for lt, _data in ctx.task_data():
        task = lt.task
        if task is None or OWN_TESTS_METRIC not in task.gate_names:
            continue
        whose = f"the {task.mode} success rule" if task.gate_from_mode else "the gate"
        yield ctx.at_task(
            lt,
            _code(check_own_tests_measurable),
            ("mode",) if task.gate_from_mode else ("gate",),
            f"{whose} names {OWN_TESTS_METRIC}, but the manifest has no tests.globs and tests.run, so it "
            "is never measured and the task never passes",
            "add tests.globs and tests.run to the manifest (docs/agent-modes.md)",
            severity="warning",
        )


def check_review_task_keys(ctx: Context) -> Iterator[Finding]:
    """decoys and clean_diff_of belong to a review task with a review_patch; clean_diff_of names another
    review task of the same base and the same prompt (a different prompt would tell the agent which diff is
    the clean one); each decoy is in a file the diff under review changes."""
    code = _code(check_review_task_keys)
    by_id = {lt.id: lt.task for lt in ctx.tasks if lt.task is not None}
    for lt, _data in ctx.task_data():
        task = lt.task
        if task is None or not (task.decoys or task.clean_diff_of):
            continue
        key = "decoys" if task.decoys else "clean_diff_of"
        if task.mode != "review":
            yield ctx.at_task(
                lt, code, (key,), f"{key} belongs to a review task, and this task's mode is {task.mode}",
                'set "mode": "review"', severity="warning",
            )  # fmt: skip
        if task.review_patch is None:
            yield ctx.at_task(
                lt, code, (key,), f"{key} without review_patch: there is no diff under review",
                "add review_patch (the change the agent reviews)",
            )  # fmt: skip
        if task.clean_diff_of is not None:
            yield from _clean_diff_problems(ctx, lt, task, by_id.get(task.clean_diff_of))
        if task.decoys and task.review_patch is not None:
            yield from _decoys_outside_the_diff(ctx, lt, task)


def _clean_diff_problems(ctx: Context, lt: LoadedTask, task: Task, other: Task | None) -> Iterator[Finding]:
    code = _code(check_review_task_keys)
    loc = ("clean_diff_of",)
    if task.clean_diff_of == task.id:
        yield ctx.at_task(
            lt, code, loc, "names the task itself", "name the review task whose diff it cleans up"
        )
    elif other is None:
        known = ", ".join(sorted(t.id for t in ctx.tasks)) or "none"
        yield ctx.at_task(lt, code, loc, f"no task {task.clean_diff_of!r} (tasks: {known})")
    else:
        if other.mode != "review":
            yield ctx.at_task(
                lt, code, loc, f"{other.id} is not a review task (mode {other.mode})", severity="warning"
            )
        if other.base != task.base:
            yield ctx.at_task(
                lt, code, loc, f"{other.id} has base {other.base}, this task {task.base}: the clean diff "
                "is another change, not the same one cleaned up", "give both the same base",
                severity="warning",
            )  # fmt: skip
        if other.prompt != task.prompt:
            yield ctx.at_task(
                lt, code, ("prompt",), f"the prompt differs from {other.id}'s: an agent told something "
                "else on the clean diff can tell which diff is the clean one", "give both the same prompt",
                severity="warning",
            )  # fmt: skip


def _decoys_outside_the_diff(ctx: Context, lt: LoadedTask, task: Task) -> Iterator[Finding]:
    assert task.review_patch is not None
    path = posixpath.normpath(posixpath.join(lt.dir, task.review_patch))
    if not ctx.snapshot.is_file(path):
        return  # patches_exist reports it
    try:
        text = ctx.snapshot.read_many([path])[path].decode("utf-8", "replace")
    except (SourceError, KeyError):
        return
    changed = parse_patch(text)
    for i, decoy in enumerate(task.decoys):
        if decoy.path not in changed:
            yield ctx.at_task(
                lt, _code(check_review_task_keys), ("decoys", i, "path"),
                f"{decoy.path} is not a file {task.review_patch} changes: a reviewer of the diff never "
                "looks there", "point the decoy at a file of the diff under review", severity="warning",
            )  # fmt: skip


#: task.json keys a named rule checks; the schema rule reports problems only for other keys.
_OWNED_TASK_KEYS = frozenset(
    {
        *REQUIRED_KEYS,
        "gate",
        "score",
        "timeout_s",
        "max_turns",
        "budget_usd",
        "setup_patch",
        "setup_patches",
        "review_patch",
        "egress",
        *_TASK_ENUMS,
        "effort",
    }
)


def check_task_schema(ctx: Context) -> Iterator[Finding]:
    """Anything else the Task model refuses (a safety net behind the named rules)."""
    for lt, _data in ctx.task_data():
        for err in lt.errors:
            top = (err.key or "").split(".")[0].split("[")[0]
            if top in _OWNED_TASK_KEYS or (err.key is None and "setup_patch" in err.message):
                continue
            yield Finding(
                severity="error",
                code=_code(check_task_schema),
                message=err.message,
                file=lt.path,
                line=err.line,
                task=lt.id,
                key=err.key,
                fix=err.hint,
            )


def check_near_miss_task_keys(ctx: Context) -> Iterator[Finding]:
    """A task.json key that spells like a framework key is a warning naming the key it resembles: every key
    the framework does not read belongs to the repository's grader, so it is never an error (``--strict``
    makes every warning one). With a built-in grade there is no grader to read it, and
    :func:`check_builtin_task_keys` reports it as an unknown key."""
    m = ctx.manifest
    if m is not None and m.entry_points is not None and is_builtin(m.entry_points.grade):
        return
    for lt in ctx.tasks:
        for warning in lt.warnings:
            yield Finding(
                severity="warning",
                code=_code(check_near_miss_task_keys),
                message=warning.message,
                file=lt.path,
                line=warning.line,
                task=lt.id,
                key=warning.key,
                fix=warning.hint,
            )


# --- guidance rules ---------------------------------------------------------------------------------------


def check_guidance_globs_at_every_base(ctx: Context) -> Iterator[Finding]:
    """Guidance globs are evaluated at every task base (over the union of the bases' trees, from one
    ``diff-tree``); a glob warns only when it matches nothing at every base. A guidance-only manifest is
    evaluated at the eval tree."""
    m = ctx.manifest
    if m is None:
        return
    globs = [g for g in m.guidance.globs if not _bad_relative_path(g) and not _UNSUPPORTED_GLOB.search(g)]
    shas = ctx.base_shas
    # A glob matches something at some base exactly when it matches a path of the union of the bases' trees,
    # and the files it matches at any base are its matches in that union: one pass over the union, however
    # many bases share most of their paths.
    union: set[str] = set()
    if shas:
        union = ctx.union_of_paths_at(shas)
        where = (
            f"at any of the {len(shas)} task bases" if len(shas) > 1 else f"at the task base {shas[0][:12]}"
        )
    else:
        union.update(ctx.snapshot.entries)
        where = f"in {ctx.snapshot.label}"
    files: set[str] = set()
    matched: dict[str, bool] = {}
    for pattern, hits in match_globs(globs, sorted(union)).items():
        matched[pattern] = bool(hits)
        files.update(hits)
    ctx.guidance_files = len(files)
    if "globs" not in m.guidance.model_fields_set:
        return  # dokimi's defaults name the files of every supported harness: a repository has few of them
    for i, pattern in enumerate(m.guidance.globs):
        if pattern in matched and not matched[pattern]:
            yield ctx.at_manifest(
                _code(check_guidance_globs_at_every_base),
                ("guidance", "globs", i),
                f"{pattern!r} matches nothing {where}",
                "fix the glob, or drop it; a file deleted after a base still counts at that base",
                severity="warning",
            )


def check_also_scan_exists(ctx: Context) -> Iterator[Finding]:
    """Each guidance.also_scan entry matches a file of the eval tree (the tree L0 scans)."""
    m = ctx.manifest
    if m is None or not m.guidance.also_scan:
        return
    entries = [g for g in m.guidance.also_scan if not _bad_relative_path(g)]
    hits = match_globs(entries, list(ctx.snapshot.entries))
    for i, pattern in enumerate(m.guidance.also_scan):
        if pattern in hits and not hits[pattern]:
            yield ctx.at_manifest(
                _code(check_also_scan_exists),
                ("guidance", "also_scan", i),
                f"{pattern!r} matches no file in {ctx.snapshot.label}",
                "fix the path; L0 reports a missing also_scan file",
                severity="warning",
            )


# --- team review rules and performance checks ----------------------------------------
# Appended rules: each reads the eval tree through one batched read (review_rules.json and every rubric.json
# together) and the task bases' dates through one ``git log --no-walk``.


@dataclass
class _HouseInputs:
    """review_rules.json and the tasks' rubric.json files, read once per validation."""

    rules_path: str | None
    rules: Any = None
    """The RepoReviewRules, or None (no file, or a file that does not validate)."""
    rules_error: DocumentError | None = None
    rules_marked: Marked | None = None
    rubrics: dict[str, tuple[str, Marked | None, DocumentError | None]] = field(default_factory=dict)
    """task id -> (rubric path, parsed rubric, error) for the tasks that have a rubric.json."""


def _house_inputs(ctx: Context) -> _HouseInputs:
    cached = ctx.__dict__.get("_house_inputs")
    if isinstance(cached, _HouseInputs):
        return cached
    m = ctx.manifest
    eval_dir = m.eval_dir if m is not None and m.eval_dir and not _bad_relative_path(m.eval_dir) else None
    rules_path = f"{normalize(eval_dir)}/{REVIEW_RULES_JSON}" if eval_dir else None
    inputs = _HouseInputs(rules_path if rules_path and ctx.snapshot.is_file(rules_path) else None)
    rubric_paths = {lt.id: f"{lt.dir}/{RUBRIC_JSON}" for lt in ctx.tasks}
    rubric_paths = {tid: p for tid, p in rubric_paths.items() if ctx.snapshot.is_file(p)}
    wanted = [*([inputs.rules_path] if inputs.rules_path else []), *rubric_paths.values()]
    blobs = ctx.snapshot.read_many(wanted) if wanted else {}
    if inputs.rules_path is not None:
        try:
            text = decode_text(blobs[normalize(inputs.rules_path)], inputs.rules_path)
            inputs.rules_marked = parse_text(text, inputs.rules_path)
            inputs.rules = validate_marked(inputs.rules_marked, RepoReviewRules)
        except DocumentError as exc:
            inputs.rules_error = exc
    for tid, path in sorted(rubric_paths.items()):
        try:
            marked = parse_text(decode_text(blobs[normalize(path)], path), path)
            inputs.rubrics[tid] = (path, marked, None)
        except DocumentError as exc:
            inputs.rubrics[tid] = (path, None, exc)
    ctx.__dict__["_house_inputs"] = inputs
    return inputs


def check_review_rules_file(ctx: Context) -> Iterator[Finding]:
    """<eval_dir>/review_rules.json, when present, is a valid repo_review_rules.v1; a rule confirmed from one
    reviewer warns (it stays a candidate until a second reviewer confirms it)."""
    inputs = _house_inputs(ctx)
    code = _code(check_review_rules_file)
    if inputs.rules_error is not None:
        err = inputs.rules_error
        yield Finding(
            severity="error",
            code=code,
            message=err.message,
            file=inputs.rules_path,
            line=err.line,
            key=err.key,
            fix="see `dokimi schema repo_review_rules.v1` for the keys and their types",
        )
    elif inputs.rules is not None:
        for i, rule in enumerate(inputs.rules.rules):
            problem = one_reviewer_confirmed(rule)
            if problem is not None:
                yield Finding(
                    severity="warning",
                    code=code,
                    message=problem,
                    file=inputs.rules_path,
                    line=inputs.rules_marked.line(("rules", i, "status")) if inputs.rules_marked else None,
                    key=format_loc(("rules", i, "status")),
                    fix='set its status to "candidate", or record the second reviewer',
                )


def _house_citations(marked: Marked) -> Iterator[tuple[Loc, str, str]]:
    """(location, blocker id, rule id) of every ``house:<id>`` in a rubric's blockers' evidence, read from the
    raw data so a rubric that does not validate yet is still checked."""
    data = marked.data
    blockers = data.get("blockers") if isinstance(data, dict) else None
    if not isinstance(blockers, list):
        return
    for i, blocker in enumerate(blockers):
        if not isinstance(blocker, dict):
            continue
        evidence = blocker.get("evidence")
        items: list[tuple[Loc, Any]] = (
            [(("blockers", i, "evidence"), evidence)]
            if isinstance(evidence, str)
            else [(("blockers", i, "evidence", j), e) for j, e in enumerate(evidence)]
            if isinstance(evidence, list)
            else []
        )
        for loc, item in items:
            if isinstance(item, str) and (match := HOUSE_CITATION.match(item.strip())):
                yield loc, str(blocker.get("id", f"blockers[{i}]")), match.group("rule")


def check_house_citations(ctx: Context) -> Iterator[Finding]:
    """A rubric blocker citing ``house:R13`` names a rule of review_rules.json that exists, is confirmed, and
    was seen on at least 3 PRs from at least 2 reviewers."""
    inputs = _house_inputs(ctx)
    code = _code(check_house_citations)
    by_id = {lt.id: lt for lt in ctx.tasks}
    for tid, (path, marked, _error) in inputs.rubrics.items():
        if marked is None:
            continue
        for loc, blocker, rule_id in _house_citations(marked):
            problem, fix = None, None
            rule = inputs.rules.rule(rule_id) if inputs.rules is not None else None
            if inputs.rules_path is None:
                problem = f"{blocker} cites house:{rule_id} but there is no {REVIEW_RULES_JSON} in eval_dir"
                fix = f"add the rule to <eval_dir>/{REVIEW_RULES_JSON}, or cite other evidence"
            elif inputs.rules is None:
                problem = f"{blocker} cites house:{rule_id} but {REVIEW_RULES_JSON} does not validate"
                fix = f"fix {inputs.rules_path}"
            elif rule is None:
                problem = f"{blocker} cites house:{rule_id}, which {REVIEW_RULES_JSON} does not define"
                fix = "fix the id (ids are stable across re-mining), or cite other evidence"
            elif rule.status is not RuleStatus.CONFIRMED:
                problem = f"{blocker} cites house:{rule_id}, whose status is {rule.status}, not confirmed"
                fix = "have a maintainer confirm the rule, or cite other evidence"
            elif not may_back_a_blocker(rule):
                problem = (
                    f"{blocker} cites house:{rule_id}, seen on {rule.prs} PRs from {rule.reviewers} "
                    f"reviewers; a blocker needs >= {MIN_PRS_FOR_BLOCKER} PRs from "
                    f">= {MIN_REVIEWERS_FOR_BLOCKER} reviewers"
                )
                fix = "make it a non-blocker, or cite other evidence"
            if problem is not None:
                yield Finding(
                    severity="error",
                    code=code,
                    message=problem,
                    file=path,
                    line=marked.line(loc),
                    task=by_id[tid].id if tid in by_id else tid,
                    key=format_loc(loc),
                    fix=fix,
                )


def check_review_threads(ctx: Context) -> Iterator[Finding]:
    """A review thread's ``rules`` name rules of review_rules.json: ``repo rules effect`` splits the threads a
    rule covers from those none covers by these ids, so an unknown one would count a thread as covered by a
    rule that does not exist."""
    inputs = _house_inputs(ctx)
    code = _code(check_review_threads)
    for lt, data in ctx.task_data():
        threads = data.get("threads")
        if not isinstance(threads, list):
            continue
        for i, thread in enumerate(threads):
            named = thread.get("rules") if isinstance(thread, dict) else None
            for j, rule_id in enumerate(named if isinstance(named, list) else []):
                if not isinstance(rule_id, str):
                    continue
                if inputs.rules_path is None:
                    yield ctx.at_task(
                        lt, code, ("threads", i, "rules", j),
                        f"the thread names rule {rule_id}, and the eval dir has no {REVIEW_RULES_JSON}",
                        "mine the rules (repo rules mine), or leave the thread's rules empty",
                    )  # fmt: skip
                elif inputs.rules is not None and inputs.rules.rule(rule_id) is None:
                    known = ", ".join(r.id for r in inputs.rules.rules) or "none"
                    yield ctx.at_task(
                        lt, code, ("threads", i, "rules", j),
                        f"the thread names rule {rule_id}, which {REVIEW_RULES_JSON} does not define",
                        f"use one of its ids ({known})",
                    )  # fmt: skip


def _rules_score(lt: LoadedTask, data: dict[str, Any], inputs: _HouseInputs) -> bool:
    """Team rules reach a task's grading when it has a rubric (the judge gets the matching rules) or is a
    review task (the reviewer agent gets them)."""
    return lt.id in inputs.rubrics or data.get("mode") == "review"


def check_review_rules_cut_date(ctx: Context) -> Iterator[Finding]:
    """Leak guard: rules may score only tasks whose base is on or after ``cut_date``; a task
    graded with the rules whose base commit (committer date, UTC) is earlier warns. The dates of all bases
    come from one ``git log --no-walk``."""
    inputs = _house_inputs(ctx)
    rules = inputs.rules
    if rules is None or ctx.repo is None or ctx.repo.git_dir is None:
        return
    scored = [(lt, data) for lt, data in ctx.task_data() if _rules_score(lt, data, inputs)]
    shas = {lt.id: ctx.resolved.get(data["base"]) for lt, data in scored if isinstance(data.get("base"), str)}
    known = sorted({sha for sha in shas.values() if sha})
    dates = gitcmd.commit_dates(ctx.repo.git_dir, known) if known else {}
    for lt, _data in scored:
        sha = shas.get(lt.id)
        date = dates.get(sha) if sha else None
        if date is None:
            continue
        day = base_day(date)
        if day < rules.cut_date:
            yield ctx.at_task(
                lt,
                _code(check_review_rules_cut_date),
                ("base",),
                f"the base was committed on {day}, before the review rules' cut_date {rules.cut_date}: rules "
                "mined from PRs up to the cut may contain this task's own fix",
                "grade it without the team rules (the runner drops them for this base), or use a later base",
                severity="warning",
            )


def check_perf_task_key(ctx: Context) -> Iterator[Finding]:
    """A task's ``perf`` object has the documented keys (metric, tolerance >= 1, repeats, rounds, sizes) and
    needs ``entry_points.perf`` in the manifest."""
    code = _code(check_perf_task_key)
    m = ctx.manifest
    for lt, data in ctx.task_data():
        if data.get(PERF_KEY) is None:
            continue
        for loc, message in perf_problems(data[PERF_KEY]):
            yield ctx.at_task(lt, code, loc, message, "see docs/perf.md for the perf object")
        if m is not None and m.entry_points is not None and m.entry_points.perf is None:
            yield ctx.at_task(
                lt,
                code,
                (PERF_KEY,),
                "the task has a perf object but the manifest has no entry_points.perf",
                'add entry_points.perf: "<command> --variant {variant} --out {out}"',
            )


# --- warnings that protect a study ----------------------------------------------------------------------


@dataclass(frozen=True)
class _MinedTask:
    """A task of a built-in grade, with its patches parsed (dokimi.checks.weak_tasks)."""

    lt: LoadedTask
    prompt: str
    tests: dict[str, FileChange]
    oracle: dict[str, FileChange]
    fail_to_pass: list[str]
    pass_to_pass: list[str]

    @cached_property
    def oracle_adds(self) -> set[str]:
        """Names the reference fix defines anew, and code-shaped identifiers its added lines bring that its
        removed lines lack."""
        added = [line for change in self.oracle.values() for line in change.added]
        removed = [line for change in self.oracle.values() for line in change.removed]
        before = set(re.findall(r"[A-Za-z_]\w*", "\n".join(removed)))
        shaped = {w for w in re.findall(r"[A-Za-z_]\w*", "\n".join(added)) if code_shaped(w)}
        return (defined_names(added) | shaped) - defined_names(removed) - before

    @cached_property
    def tests_use(self) -> set[str]:
        """Names the hidden tests' added lines call, read or import."""
        return referenced_names([line for change in self.tests.values() for line in change.added])


def _mined_tasks(ctx: Context) -> list[_MinedTask]:
    """Every task of a built-in grade that names its patches, all patches read in one batch."""
    m = ctx.manifest
    if m is None or m.entry_points is None or not is_builtin(m.entry_points.grade):
        return []
    wanted: dict[str, str] = {}
    rows: list[tuple[LoadedTask, dict[str, Any]]] = []
    for lt, data in ctx.task_data():
        if not isinstance(data.get("prompt"), str):
            continue
        rows.append((lt, data))
        for key in ("test_patch", "oracle_patch"):
            if isinstance(data.get(key), str):
                wanted[f"{lt.id}/{key}"] = posixpath.normpath(posixpath.join(lt.dir, data[key]))
    present = [path for path in dict.fromkeys(wanted.values()) if ctx.snapshot.is_file(path)]
    try:
        texts = ctx.snapshot.read_many(present) if present else {}
    except SourceError:
        return []  # patches_exist reports what cannot be read

    def patch(task_id: str, key: str) -> dict[str, FileChange]:
        raw = texts.get(wanted.get(f"{task_id}/{key}", ""))
        return parse_patch(raw.decode("utf-8", "replace")) if raw is not None else {}

    def ids(data: dict[str, Any], key: str) -> list[str]:
        value = data.get(key)
        return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []

    return [
        _MinedTask(lt, data["prompt"], patch(lt.id, "test_patch"), patch(lt.id, "oracle_patch"),
                   ids(data, "fail_to_pass"), ids(data, "pass_to_pass"))
        for lt, data in rows
    ]  # fmt: skip


def check_prompt_gives_no_fix_away(ctx: Context) -> Iterator[Finding]:
    """A prompt describes the problem, never its fix: it does not name a file the reference fix changes, an
    identifier the reference fix adds (unless the hidden tests use it: that is the interface the task asks
    for), or a hidden test (its function or its file)."""
    code = _code(check_prompt_gives_no_fix_away)
    fix = "describe what goes wrong as a user would report it, not where or how to fix it"
    for task in ctx.mined_tasks:
        for path in sorted(task.oracle):
            named = prompt_names_file(task.prompt, path)
            if named is not None:
                yield ctx.at_task(
                    task.lt, code, ("prompt",),
                    f"names {named!r}, a file the reference fix changes: an agent told where to look is not "
                    "finding it", fix, severity="warning",
                )  # fmt: skip
        for name in sorted(task.oracle_adds - task.tests_use):
            if prompt_names_word(task.prompt, name):
                yield ctx.at_task(
                    task.lt, code, ("prompt",),
                    f"names {name!r}, which the reference fix adds: the prompt spells out the fix", fix,
                    severity="warning",
                )  # fmt: skip
        hidden = hidden_test_names(task.fail_to_pass + task.pass_to_pass)
        for name in sorted(n for n in hidden if prompt_names_word(task.prompt, n)):
            yield ctx.at_task(
                task.lt, code, ("prompt",), f"names the hidden test {name!r}", fix, severity="warning"
            )
        for path in sorted(task.tests):
            named = prompt_names_file(task.prompt, path)
            if named is not None:
                yield ctx.at_task(
                    task.lt, code, ("prompt",), f"names {named!r}, a file of the hidden tests", fix,
                    severity="warning",
                )  # fmt: skip


def _normalized(text: str) -> str:
    return " ".join(text.split()).casefold()


def check_prompt_is_edited(ctx: Context) -> Iterator[Finding]:
    """A mined task's prompt is not the draft ``repo task new`` wrote (the fix's commit message, minus what
    gives the fix away) nor the fix's title: a commit message is written for reviewers who know the fix.
    The messages of every fix (``base`` ``<fix>^``) come from one ``git log --no-walk``."""
    code = _code(check_prompt_is_edited)
    fixes: dict[str, tuple[LoadedTask, str]] = {}
    for lt, data in ctx.task_data():
        base, prompt = data.get("base"), data.get("prompt")
        if isinstance(base, str) and isinstance(prompt, str) and base.endswith("^"):
            sha = ctx.resolved.get(split_base(base)[0])
            if sha:
                fixes[lt.id] = (lt, sha)
    if not fixes or ctx.repo is None or ctx.repo.git_dir is None:
        return
    shas = sorted({sha for _, sha in fixes.values()})
    out = gitcmd.run_git(
        ["log", "--no-walk=unsorted", "-z", "--format=%H%n%B", *shas],
        git_dir=ctx.repo.git_dir, what="git log (fix messages)",
    ).decode("utf-8", "replace")  # fmt: skip
    messages = dict(record.split("\n", 1) for record in out.split("\0") if "\n" in record)
    changed = {task.lt.id: [*task.tests, *task.oracle] for task in ctx.mined_tasks}
    for task_id, (lt, sha) in fixes.items():
        message = messages.get(sha)
        prompt = lt.marked.data["prompt"] if lt.marked is not None else ""
        if message is None or not isinstance(prompt, str):
            continue
        title = message.strip().splitlines()[0] if message.strip() else ""
        draft = draft_prompt(message, changed.get(task_id, []))
        if _normalized(prompt) in {_normalized(draft), _normalized(title)}:
            what = (
                "the draft `repo task new` wrote"
                if _normalized(prompt) == _normalized(draft)
                else "its title"
            )
            yield ctx.at_task(
                lt, code, ("prompt",),
                f"is the fix's commit message ({what}): it was written for reviewers who know the fix",
                "rewrite it as the problem a user would report: what goes wrong, not what changed",
                severity="warning",
            )  # fmt: skip


def check_task_has_pass_to_pass(ctx: Context) -> Iterator[Finding]:
    """A task graded by test ids lists PASS_TO_PASS tests: without one, a run that breaks the rest of the
    code still passes (``repo task new`` finds none when the fix's test files are new)."""
    code = _code(check_task_has_pass_to_pass)
    m = ctx.manifest
    if m is None or m.entry_points is None or not is_builtin(m.entry_points.grade):
        return
    if m.entry_points.grade.strip().startswith("builtin:command") and not uses_report(m.entry_points.grade):
        return  # graded by its exit code: every test it runs must pass
    for task in ctx.mined_tasks:
        if task.fail_to_pass and not task.pass_to_pass:
            yield ctx.at_task(
                task.lt, code, ("pass_to_pass",),
                "no PASS_TO_PASS test: a run that breaks everything but the FAIL_TO_PASS tests passes",
                "list tests that pass before and after the fix in pass_to_pass (test ids of the files the "
                "fix leaves alone)", severity="warning",
            )  # fmt: skip


def _present_at(ctx: Context, sha: str, names: Sequence[str]) -> set[str]:
    """Which of ``names`` occur as a whole word in some file of commit ``sha``: one ``git grep``."""
    assert ctx.repo is not None and ctx.repo.git_dir is not None
    patterns = "".join(f"{name}\n" for name in names).encode()
    status, out = gitcmd.run_git_status(
        ["grep", "-I", "-h", "-o", "-w", "-F", "-f", "-", sha], git_dir=ctx.repo.git_dir, input=patterns
    )
    return set(out.decode("utf-8", "replace").split()) if status == 0 else set()


def check_hidden_tests_need_no_particular_fix(ctx: Context) -> Iterator[Finding]:
    """The hidden tests use no name that the base lacks and the reference fix adds, unless the prompt names
    it: a different correct fix need not add that name, and would fail them (a private helper the test calls,
    a new attribute it reads). One ``git grep`` per base."""
    code = _code(check_hidden_tests_need_no_particular_fix)
    if ctx.repo is None or ctx.repo.git_dir is None:
        return
    for task in ctx.mined_tasks:
        base = task.lt.marked.data.get("base") if task.lt.marked is not None else None
        sha = ctx.resolved.get(base) if isinstance(base, str) else None
        candidates = sorted(
            n for n in (task.tests_use & task.oracle_adds) if not prompt_names_word(task.prompt, n)
        )
        if not sha or not candidates:
            continue
        for name in sorted(set(candidates) - _present_at(ctx, sha, candidates)):
            yield ctx.at_task(
                task.lt, code, ("test_patch",),
                f"the hidden tests use {name!r}, which the base lacks and the reference fix adds: a "
                "correct fix that does not add it fails them",
                f"name {name!r} in the prompt (it is then the interface asked for), or test the behaviour "
                "the prompt describes", severity="warning",
            )  # fmt: skip


#: The rules, in the order they run (and report). Each returns findings; none raises for a bad manifest.
RULES: tuple[Rule, ...] = (
    check_manifest_schema,
    check_eval_dir_tasks_entry_points_together,
    check_eval_dir_is_proper_subdirectory,
    check_tasks_inside_eval_dir,
    check_image_needs_eval_dir,
    check_image_dockerfile,
    check_image_caches,
    check_image_env_names,
    check_entry_point_commands,
    check_builtin_graders,
    check_placeholders,
    check_source_dir_only_in_grade_and_oracle,
    check_source_dir_needs_source_url,
    check_image_env_run_dir_values,
    check_glob_syntax,
    check_build_systems_known,
    check_tests_block,
    check_task_dirs_have_task_json,
    check_pilot_tasks_exist,
    check_task_json_parses,
    check_task_id_equals_directory,
    check_required_keys,
    check_base_form,
    check_base_resolves,
    check_gate_and_score_forms,
    check_mergeable_gate_has_rubric,
    check_caps_finite_positive,
    check_prompt_size,
    check_setup_patch_synonym,
    check_patches_exist,
    check_egress_hosts,
    check_acceptance_criteria,
    check_validation_commands,
    check_mode_values,
    check_gate_fits_mode,
    check_autonomous_prompt_is_an_issue,
    check_own_tests_measurable,
    check_review_task_keys,
    check_task_schema,
    check_near_miss_task_keys,
    check_builtin_task_keys,
    check_guidance_globs_at_every_base,
    check_also_scan_exists,
    check_prompt_gives_no_fix_away,
    check_prompt_is_edited,
    check_task_has_pass_to_pass,
    check_hidden_tests_need_no_particular_fix,
    check_review_rules_file,
    check_house_citations,
    check_review_rules_cut_date,
    check_review_threads,
    check_perf_task_key,
)


def _sort_key(f: Finding) -> tuple[str, int, str, str, str, str]:
    return (f.file or "", f.line or 0, f.task or "", f.key or "", f.code, f.message)


def validate_loaded(ctx: Context, rules: Sequence[Rule] = RULES, *, strict: bool = False) -> ValidationReport:
    """Run ``rules`` over a prepared context and collect the report. ``strict`` (``--strict``): every warning
    is an error."""
    findings: list[Finding] = []
    for rule in rules:
        findings.extend(rule(ctx))
    if strict:
        findings = [f.model_copy(update={"severity": "error"}) for f in findings]
    errors = sorted((f for f in findings if f.severity == "error"), key=_sort_key)
    warnings = sorted((f for f in findings if f.severity == "warning"), key=_sort_key)
    m = ctx.manifest
    return ValidationReport(
        valid=not errors,
        source=ctx.repo.label if ctx.repo is not None else ctx.snapshot.label,
        eval_rev=ctx.snapshot.rev,
        manifest=ctx.manifest_path,
        guidance_only=m is not None and not m.has_tasks,
        tasks=len(ctx.tasks),
        bases=len(ctx.base_shas) if m is not None else 0,
        guidance_files=ctx.guidance_files,
        errors=errors,
        warnings=warnings,
        rules=[_code(r) for r in rules],
    )


def validate_repo(
    repo: Repo, *, manifest: str | None = None, manifest_file: Path | None = None, strict: bool = False
) -> ValidationReport:
    """Validate the manifest and every task of ``repo`` against its eval tree (``strict``: every warning is
    an error).

    Raises ManifestError (exit 2) when no manifest is found, and SourceError when the source cannot be read;
    a manifest that is not a YAML mapping (not UTF-8 text, not YAML, duplicate keys) and every rule violation
    is a finding in the report.
    """
    snapshot = repo.eval_snapshot()
    try:
        found = read_manifest_marked(snapshot, manifest=manifest, manifest_file=manifest_file)
    except ManifestUnreadable as exc:  # there is a manifest, and it is invalid: a finding, not a usage error
        name = exc.path or str(manifest_file or manifest)
        problem = DocumentError(exc.message, path=name, line=exc.line, key=exc.key, hint=exc.hint)
        ctx = Context(
            repo, snapshot, name, Marked({}, name), manifest_file is not None, manifest=None,
            manifest_errors=[problem],
        )  # fmt: skip
        return validate_loaded(ctx, strict=strict)
    if found is None:
        load_manifest(snapshot, manifest=None, manifest_file=None, required=True)  # raises "no manifest"
        raise AssertionError("unreachable")
    marked, path, from_file = found
    model, errors = manifest_model_errors(marked)
    ctx = Context(repo, snapshot, path, marked, from_file, manifest=model, manifest_errors=errors)
    if model is not None and model.tasks and not _bad_relative_path(model.tasks):
        ctx.tasks = load_tasks(snapshot, model)
    return validate_loaded(ctx, strict=strict)
