"""repo_manifest.v1: the repository's ``repo-eval.yaml``.

The model fixes the *shape* (keys and their types; unknown keys are refused). The rules that relate keys to
each other or to the tree (eval_dir/tasks/entry_points together, placeholders, paths that must exist) are
named checks in :mod:`dokimi.checks.validate`, so that each one reports its own finding with its file:line and
fix.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from dokimi.constants import DEFAULT_GUIDANCE_GLOBS, MAX_REPS
from dokimi.schemas._base import Document

SCHEMA_NAME = "repo_manifest.v1"


class Source(Document):
    """Where the repository lives upstream; every task names its own commit in ``base``."""

    url: str | None = None
    """Clone URL of the repository. Needed when an entry point uses ``{source_dir}`` (a full-history clone of
    this URL, mounted read-only for graders only)."""


class Guidance(Document):
    """The guidance files the ``guidance:*`` arms add, remove or replace, and files L0 only checks."""

    globs: list[str] = Field(default_factory=lambda: list(DEFAULT_GUIDANCE_GLOBS))
    """Globs (``**`` crosses ``/``, ``*`` and ``?`` do not) of the guidance files, relative to the repository
    root. Evaluated at every task base. Default: dokimi's default globs (instruction files and skills)."""
    also_scan: list[str] = Field(default_factory=list)
    """Files (or globs) the L0 scan checks too, never changed by an arm (for example ``CONTRIBUTING.md``)."""


class ScanIgnore(Document):
    """A claim of the L0 scan the repository silences: it keeps its status in the report, marked as
    suppressed, and counts neither in the status counts nor in the gate."""

    claim: str
    """The claim's text as the report shows it (``docs/<name>``); ``*`` matches anything (``feature/*``)."""
    file: str | None = None
    """Only in these guidance files (a glob of dokimi's dialect); default: any."""
    kind: str | None = None
    """Only claims of this kind (``path``, ``make_target``, ...); default: any."""
    line: int | None = Field(default=None, ge=1)
    """Only on this line; default: any. A line number goes stale as the file changes: prefer the inline
    comment ``<!-- dokimi: ignore -->`` for one line."""
    why: str | None = None
    """Why the scan has it wrong, shown beside each claim it silences."""


class Scan(Document):
    """Settings of the L0 scan (``dokimi repo scan``)."""

    ignore: list[ScanIgnore] = Field(default_factory=list)
    """Claims the scan has wrong for this repository (a branch name read as a path, a file a tool makes):
    each is reported as suppressed, with its ``why``."""


class Cache(Document):
    """A named volume shared across runs, mounted read-write (for example Bazel's disk cache)."""

    name: str
    """Volume name (letters, digits, ``_``, ``.``, ``-``; starts with a letter or digit)."""
    path: str
    """Absolute mount path inside every container, for example ``/cache/bazel-disk``."""


class Limits(Document):
    """Resource caps of every container of this repository (agent, grade, oracle, static, perf). The defaults
    hold a runaway or hostile process without getting in the way of an ordinary build; raise them for a
    repository whose build needs more."""

    memory: str = Field(default="8g", pattern=r"^[1-9][0-9]*[kmg]?$")
    """Memory of one container (docker ``--memory``): a number of bytes with an optional k, m or g suffix."""
    pids: int = Field(default=4096, ge=64, le=1_000_000)
    """Most processes and threads one container may have at once (docker ``--pids-limit``)."""
    workspace_mb: int = Field(default=20480, ge=1)
    """Largest the workspace may grow to, in MiB. A run whose workspace is larger after the agent is a
    host-side failure of that cell: dokimi does not grade, diff or copy it."""


HostConfig = Literal["proxy", "pip", "apt", "ca"]


class Build(Document):
    """What of this machine's package configuration the image build gets, for the build only: never in a
    layer, in the image's history or in any container agents or graders run in."""

    from_host: list[HostConfig] = Field(default_factory=list)
    """``proxy``: dokimi's HTTP(S)_PROXY, NO_PROXY and ALL_PROXY, as docker's predefined build arguments
    (which history leaves out); ``pip``: pip's index, extra indexes and trusted hosts (its configuration
    files and PIP_* variables); ``apt``: apt's proxy; ``ca``: the CA certificates this machine trusts beyond
    the usual ones (``/usr/local/share/ca-certificates``, pip's ``cert``, SSL_CERT_FILE, ``ca_files``).
    ``pip``, ``apt`` and ``ca`` reach the build as the BuildKit secret ``dokimi-host``, a shell file a RUN
    sources: ``RUN --mount=type=secret,id=dokimi-host . /run/secrets/dokimi-host && pip install ...``."""
    ca_files: list[str] = Field(default_factory=list)
    """More CA certificates (PEM files) the build trusts, with ``ca``: paths on this machine (``~`` and
    ``$VAR`` expanded). Only the certificates in them are read."""


class Image(Document):
    """The build image of this repository: built once per eval revision, used by agents and entry points."""

    dockerfile: str
    """Path of the Dockerfile, relative to the repository root. The build context is the eval tree at the eval
    revision with the tasks directory removed."""
    caches: list[Cache] = Field(default_factory=list)
    """Volumes mounted read-write in every run. A run may depend on them for speed, never for correctness."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment of every container. A value under ``{run_dir}/`` names a plain entry of the run directory
    (``ob``, ``ob/sub``), never one the framework owns (``workspace``, ``agent-git``, ...)."""
    network: Literal["none", "public"] = "none"
    """``none``: entry points and the agent's commands have no network (a task opens hosts with ``egress``);
    ``public``: full network."""
    limits: Limits = Field(default_factory=Limits)
    """Memory, process and workspace-size caps of every container (safe defaults when left out)."""
    build: Build = Field(default_factory=Build)
    """This machine's proxy, package index and CA settings, given to the image build only."""


def _oracle_optional_in_schema(schema: dict[str, Any]) -> None:
    schema["required"] = [key for key in schema.get("required", []) if key != "oracle"]


class EntryPoints(Document):
    """Commands run inside the image with cwd ``{run_dir}/workspace``; the repository's own commands, or
    dokimi's built-in graders (``builtin:pytest``, ``builtin:command CMD``)."""

    model_config = ConfigDict(json_schema_extra=_oracle_optional_in_schema)

    grade: str
    """Writes ``{run_dir}/grade.json`` (repo_grade.v1) for the finished run. Or a built-in grader:
    ``builtin:pytest`` (runs the task's ``fail_to_pass`` and ``pass_to_pass`` pytest ids) or ``builtin:command
    CMD`` (passes when CMD exits 0; with ``{report}`` in CMD, when the JUnit XML it writes there shows every
    ``fail_to_pass`` id passing and no ``pass_to_pass`` id failing)."""
    oracle: str
    """Applies the reference solution to the workspace (used by ``tasks check``). Required unless grade is a
    built-in, whose default is ``builtin:oracle`` (applies the task's ``oracle_patch``)."""
    static: str | None = None
    """Optional: writes repo_static.v1 to ``{out}``; merged into ``repo scan`` by ``--static``."""
    perf: str | None = None
    """Optional: performance check, for example ``bench --variant {variant} --out {out}``."""

    @model_validator(mode="before")
    @classmethod
    def _builtin_oracle_default(cls, data: Any) -> Any:
        grade = data.get("grade") if isinstance(data, dict) else None
        if isinstance(grade, str) and grade.strip().startswith("builtin:") and "oracle" not in data:
            return {**data, "oracle": "builtin:oracle"}
        return data


class TestsBlock(Document):
    """Test files, how to list test cases (the test-integrity check), and how to run given test files (the
    agent's own tests, ``own_tests_fail_on_base``)."""

    globs: list[str] = Field(default_factory=list)
    """Globs of test files: none may be deleted by the agent."""
    config_globs: list[str] = Field(default_factory=list)
    """Globs of test configuration files (conftest.py, pytest.ini, BUILD): none deleted; edits go to the
    judge."""
    list_: str | None = Field(default=None, alias="list")
    """Command that prints one test id per line in the workspace; the base list is compared with the agent's.
    """
    run: str | None = None
    """Command that runs the test files named by ``{tests}`` (a word of its own, replaced by one word per
    file, relative to the workspace) and exits 0 when they pass, for example ``python3 -m pytest -q
    {tests}``. It runs in a container of its own, holding only the tree under test."""


class Pilot(Document):
    """The pilot A/B a pull request that changes the guidance gets on demand (the GitHub Action, docs/ci.md):
    its guidance (``guidance:tree`` at the pull request's head) against the base's (``guidance:at=BASE``), on
    a few tasks."""

    tasks: list[str] = Field(min_length=1, max_length=100)
    """The task ids of the pilot: a few tasks that exercise the guidance, each a directory under ``tasks``."""
    reps: int = Field(default=1, ge=1, le=MAX_REPS)
    """Repetitions per task and arm."""

    @model_validator(mode="after")
    def _tasks_once(self) -> Pilot:
        twice = sorted({t for t in self.tasks if self.tasks.count(t) > 1})
        if twice:
            raise ValueError(f"tasks: {', '.join(twice)} appear(s) twice")
        return self


class RepoManifest(Document):
    """repo_manifest.v1: what a repository provides to be evaluated.

    Without ``eval_dir``, ``tasks`` and ``entry_points`` the manifest is guidance-only: scan and reach run on
    it, validate checks its globs, and ``tasks check`` and ``run`` refuse it.
    """

    schema_: Literal["repo_manifest.v1"] = Field(alias="schema")
    """Document type and version: ``repo_manifest.v1``."""
    id: str
    """Short name of the repository's evaluation (used in batch pins and reports)."""
    source: Source | None = None
    """Upstream of the repository; the commit of each task comes from its ``base``."""
    eval_dir: str | None = None
    """The evaluation directory (tasks, graders, Dockerfile), relative to the root. A proper subdirectory; it
    is deleted from every agent workspace and mounted read-only for graders as ``{eval_dir}``."""
    guidance: Guidance = Field(default_factory=Guidance)
    """Guidance files the arms act on; default: dokimi's default globs (the instruction files and skills of
    the supported harnesses)."""
    image: Image | None = None
    """The build image; needs ``eval_dir``."""
    entry_points: EntryPoints | None = None
    """grade, oracle and the optional static and perf commands; placeholders ``{eval_dir}``, ``{source_dir}``
    (grade and oracle only), ``{run_dir}``, ``{out}`` and ``{task}``."""
    tasks: str | None = None
    """Directory holding ``<task-id>/task.json``, inside ``eval_dir``."""
    explore_tasks: str | None = None
    """Optional ExploreBench YAML directory, inside ``eval_dir``."""
    build_systems: list[str] = Field(default_factory=list)
    """Build systems whose L0 claim-check adapters apply (for example ``bazel``, ``make``)."""
    tests: TestsBlock | None = None
    """Test files, test configuration files and the test-listing command."""
    scan: Scan = Field(default_factory=Scan)
    """Settings of the L0 scan: the claims it silences."""
    pilot: Pilot | None = None
    """The tasks (and reps) of the pilot A/B of a pull request's guidance against its base's (docs/ci.md);
    needs ``tasks``."""

    @property
    def has_tasks(self) -> bool:
        """Whether this manifest carries tasks (not guidance-only)."""
        return self.eval_dir is not None and self.tasks is not None and self.entry_points is not None
