"""What each kind of container mounts and sees: the agent's, and the grader's.

Fixed paths: {run_dir} is /eval/run, {eval_dir} /eval/content, {source_dir} /eval/source, and the workspace is
/eval/run/workspace in every container.

The agent's container mounts only: the workspace, its per-run home (``HOME``) and config directories, each
scratch directory ``image.env`` places under {run_dir}, the caches (read-write), and when given the harness
executable (read-only at /eval/harness) and dokimi's helper scripts (read-only at /eval/support). Never
{eval_dir}, never {source_dir}, never the run directory itself (where grade.json and meta.json live).

The grade container (grade, oracle, static) mounts {run_dir} read-write, {eval_dir} and, when an entry point
uses it, {source_dir} read-only, dokimi's helper scripts read-only at /eval/support (the isolation helper a
grader runs the code under test with), and the caches. Over the writable run directory, each file dokimi
wrote there (task.json, meta.json, events.jsonl, answer.txt, the agent's output, what grading wrote so far)
is mounted read-only (:func:`evidence_mounts`), so code the grader runs cannot rewrite, remove or replace it.
Its ``HOME`` is {run_dir}/grade-home, made empty before each run; ``PYTHONNOUSERSITE=1``; git configuration
from the environment turns off hooks (``core.hooksPath=/dev/null``) and fsmonitor, and trusts the mounted
repositories (``safe.directory=*``: the source is owned by another uid).

A built-in grader's tests run in a container of their own (:func:`builtin_tests_spec`): the tree under test,
a fresh HOME, a report directory, the caches and the helper scripts; nothing of the reference or the run.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from dokimi import safefs
from dokimi.constants import (
    CONTAINER_EVAL_DIR,
    CONTAINER_PROBE,
    CONTAINER_RUN_DIR,
    CONTAINER_SOURCE_DIR,
    CONTAINER_SUPPORT,
    CONTAINER_TEST_OUT,
    CONTAINER_WORKSPACE,
)
from dokimi.errors import UsageError
from dokimi.harness.runtime import harness_mounts
from dokimi.home import path_component
from dokimi.rundir import (
    AGENT_CONFIG,
    AGENT_HOME,
    BUILTIN_OUT,
    RUN_DIR_ENTRIES,
    TESTS_HOME,
    TESTS_TREE,
    RunDir,
)
from dokimi.sandbox.container import ContainerSpec, Mount, give_to_container_user
from dokimi.schemas.manifest import Limits
from dokimi.source.fetch import default_directory
from dokimi.support import support_dir

if TYPE_CHECKING:
    from dokimi.schemas.manifest import Image

#: Git configuration of the grade container, passed as GIT_CONFIG_COUNT/KEY_n/VALUE_n (command-line scope, so
#: it outranks any file and is honoured for safe.directory).
GRADE_GIT_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("safe.directory", "*"),
)

#: The global git config of every grader (GIT_CONFIG_GLOBAL): an identity, and nothing that runs code.
NEUTRAL_GLOBAL_GIT_CONFIG = """\
# Written by dokimi: the global git configuration of the grade container.
[user]
\tname = dokimi
\temail = dokimi@localhost
[core]
\thooksPath = /dev/null
\tfsmonitor = false
"""

_PLACEHOLDER = re.compile(r"\{(eval_dir|source_dir|run_dir|out|task)\}")
PLACEHOLDER_HINT = "{source_dir} is for grade and oracle only, {out} for static only"
"""What a placeholder without a value here is told."""


def substitute(
    text: str,
    values: Mapping[str, str],
    *,
    where: str,
    placeholders: re.Pattern[str] = _PLACEHOLDER,
    hint: str = PLACEHOLDER_HINT,
) -> str:
    """Replace the manifest's placeholders in one pass (a substituted value is never substituted again).

    A placeholder without a value here (``{source_dir}`` outside grade/oracle, ``{out}`` outside static) is a
    UsageError naming ``where``. Any other ``{...}`` is left as it is.
    """

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise UsageError(f"{where}: placeholder {{{name}}} has no value here", hint=hint)
        return values[name]

    return placeholders.sub(one, text)


def command_argv(
    command: str,
    values: Mapping[str, str],
    *,
    where: str,
    placeholders: re.Pattern[str] = _PLACEHOLDER,
    hint: str = PLACEHOLDER_HINT,
) -> list[str]:
    """A manifest command (an entry point, ``tests.list``) as an argv: split like shell words (no shell runs
    it), then each word's placeholders substituted once. An unsplittable or empty command is a UsageError
    naming ``where``."""
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise UsageError(f"{where}: cannot split {command!r}: {exc}") from None
    if not words:
        raise UsageError(f"{where} is empty")
    return [substitute(word, values, where=where, placeholders=placeholders, hint=hint) for word in words]


def uses_placeholder(text: str, name: str) -> bool:
    return any(m.group(1) == name for m in _PLACEHOLDER.finditer(text))


def docker_network(image_network: str) -> str:
    """The docker network of ``image.network``: ``none`` -> no network, ``public`` -> docker's bridge."""
    return "none" if image_network == "none" else "bridge"


# --- caches -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CacheMount:
    name: str
    host: Path
    path: PurePosixPath


@dataclass(frozen=True)
class ContainerSettings:
    """What the containers of one batch share: the image, the manifest's ``image`` block (image.env, caches),
    the docker network, the cache mounts and the batch label. Built once per batch; a container that needs
    another network gets a copy (``dataclasses.replace``)."""

    image: str
    image_config: Image | None
    network: str = "none"
    caches: tuple[CacheMount, ...] = ()
    batch: str | None = None


def default_cache_root() -> Path:
    """``<DOKIMI_HOME or ~/.cache/dokimi>/caches``."""
    return default_directory() / "caches"


def resolve_caches(
    image: Image | None,
    manifest_id: str,
    *,
    overrides: Mapping[str, Path] | None = None,
    root: Path | None = None,
) -> list[CacheMount]:
    """The host directory of every declared cache (created, and the container user's): ``--cache NAME=PATH``,
    else ``<root>/<id>/<name>``. An override for a cache the manifest does not declare is a UsageError."""
    declared = list(image.caches) if image is not None else []
    names = {cache.name for cache in declared}
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise UsageError(
            f"--cache {unknown[0]}=...: the manifest declares no cache named {unknown[0]!r}",
            hint=f"declared caches: {', '.join(sorted(names)) or '(none)'}",
        )
    base = (root or default_cache_root()) / path_component(manifest_id)
    mounts = []
    for cache in declared:
        host = Path(overrides[cache.name]) if cache.name in overrides else base / path_component(cache.name)
        host.mkdir(parents=True, exist_ok=True)
        give_to_container_user(host)
        mounts.append(CacheMount(cache.name, host.resolve(), PurePosixPath(cache.path)))
    return mounts


# --- image.env ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImageEnv:
    env: dict[str, str]
    """image.env with placeholders substituted (container paths)."""
    scratch: tuple[str, ...]
    """Directories the values name under {run_dir}, relative to it (``ob``, ``ob/sub``)."""


def image_env(image: Image | None, *, task: str | None) -> ImageEnv:
    """image.env for a container: {run_dir}, {eval_dir}, {source_dir} become the fixed container paths and
    {task} the task id. A value under {run_dir}/ is a per-run scratch directory, which may not be a framework
    entry of the run directory (``agent-git``, ``workspace``, ...)."""
    values = {
        "run_dir": str(CONTAINER_RUN_DIR),
        "eval_dir": str(CONTAINER_EVAL_DIR),
        "source_dir": str(CONTAINER_SOURCE_DIR),
    }
    if task is not None:
        values["task"] = task
    env: dict[str, str] = {}
    scratch: list[str] = []
    for key, raw in sorted((image.env if image is not None else {}).items()):
        value = substitute(raw, values, where=f"image.env.{key}")
        env[key] = value
        prefix = f"{CONTAINER_RUN_DIR}/"
        if raw.startswith("{run_dir}/") and value.startswith(prefix):
            rel = value[len(prefix) :].strip("/")
            parts = rel.split("/")
            if not rel or any(p in ("", ".", "..") for p in parts) or parts[0] in RUN_DIR_ENTRIES:
                raise UsageError(
                    f"image.env.{key}: {raw!r} names a framework entry of the run directory",
                    hint="use a plain name of your own under {run_dir}/ (for example {run_dir}/ob)",
                )
            scratch.append(rel)
    return ImageEnv(env, tuple(dict.fromkeys(scratch)))


def make_scratch_dirs(run_dir: Path, scratch: Sequence[str]) -> list[Path]:
    made = []
    for rel in scratch:
        path = run_dir / rel
        path.mkdir(parents=True, exist_ok=True)
        made.append(path)
    return made


# --- the two kinds of containers ----------------------------------------------------------------------------


def _cache_mounts(caches: Sequence[CacheMount]) -> list[Mount]:
    return [Mount(cache.host, cache.path) for cache in caches]


def agent_mounts(
    run_dir: Path,
    *,
    scratch: Sequence[str] = (),
    caches: Sequence[CacheMount] = (),
    harness_bin: Path | None = None,
    support_dir: Path | None = None,
) -> list[Mount]:
    """The agent container's mounts (and nothing else; see the module docstring)."""
    rd = RunDir(run_dir)
    mounts = [
        Mount(rd.workspace, CONTAINER_WORKSPACE),
        Mount(rd.agent_home, RunDir(CONTAINER_RUN_DIR).agent_home),
        Mount(rd.agent_config, RunDir(CONTAINER_RUN_DIR).agent_config),
    ]
    mounts += [Mount(run_dir / rel, CONTAINER_RUN_DIR / rel) for rel in scratch]
    mounts += _cache_mounts(caches)
    if harness_bin is not None:  # a binary, or a Node program's npm prefix and the pinned Node
        mounts.extend(Mount(src, dst, read_only=True) for src, dst in harness_mounts(harness_bin))
    if support_dir is not None:
        mounts.append(Mount(support_dir, CONTAINER_SUPPORT, read_only=True))
    return mounts


def prepare_agent_dirs(run_dir: Path, scratch: Sequence[str] = ()) -> None:
    """Create the agent's per-run directories and hand the run directory to the container user."""
    for name in (AGENT_HOME, AGENT_CONFIG):
        (run_dir / name).mkdir(parents=True, exist_ok=True)
    make_scratch_dirs(run_dir, scratch)
    give_to_container_user(run_dir)


def agent_spec(
    settings: ContainerSettings,
    *,
    name: str,
    run_dir: Path,
    argv: Sequence[str],
    task: str | None,
    harness_bin: Path | None = None,
    support_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> ContainerSpec:
    """The agent's container: cwd the workspace, ``HOME`` its per-run home, image.env, then ``env``."""
    configured = image_env(settings.image_config, task=task)
    prepare_agent_dirs(run_dir, configured.scratch)
    full_env = {**configured.env, "HOME": str(RunDir(CONTAINER_RUN_DIR).agent_home), **(env or {})}
    return ContainerSpec(
        name=name,
        image=settings.image,
        argv=list(argv),
        mounts=agent_mounts(
            run_dir,
            scratch=configured.scratch,
            caches=settings.caches,
            harness_bin=harness_bin,
            support_dir=support_dir,
        ),
        env=full_env,
        workdir=CONTAINER_WORKSPACE,
        network=settings.network,
        batch=settings.batch,
        **limit_options(settings.image_config),
    )


def limit_options(image_config: Image | None) -> dict[str, Any]:
    """The ContainerSpec fields of ``image.limits`` (the defaults when the manifest sets none)."""
    limits = image_config.limits if image_config is not None else Limits()
    return {"memory": limits.memory, "pids_limit": limits.pids}


def workspace_cap_bytes(image_config: Image | None) -> int:
    """``image.limits.workspace_mb`` in bytes (the default when the manifest sets none)."""
    limits = image_config.limits if image_config is not None else Limits()
    return limits.workspace_mb * 1024 * 1024


def evidence_mounts(run_dir: Path, names: Sequence[str]) -> list[Mount]:
    """Read-only mounts of dokimi's files in the run directory (``names``, relative to it, each a regular file
    dokimi wrote) over the writable {run_dir}: a write, a rename over one, or its removal fails in the
    container."""
    return [Mount(run_dir / name, CONTAINER_RUN_DIR / PurePosixPath(name), read_only=True) for name in names]


def grade_git_env() -> dict[str, str]:
    """GIT_CONFIG_COUNT/KEY_n/VALUE_n for :data:`GRADE_GIT_CONFIG`; no system config or attributes file of
    the image, and as the global config the neutral one dokimi writes into the fresh grade-home
    (:func:`fresh_grade_home`), so nothing but the reduced ``.git`` and these values configures git."""
    env = {
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": str(RunDir(CONTAINER_RUN_DIR).grade_home / ".gitconfig"),
        "GIT_CONFIG_COUNT": str(len(GRADE_GIT_CONFIG)),
    }
    for i, (key, value) in enumerate(GRADE_GIT_CONFIG):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def fresh_grade_home(run_dir: Path) -> Path:
    """{run_dir}/grade-home, emptied (a link or file in its place is removed, never followed), with the
    neutral global git config in it."""
    home = RunDir(run_dir).grade_home
    safefs.remove(home, trusted=run_dir)
    home.mkdir()
    os.chmod(home, 0o755)
    (home / ".gitconfig").write_text(NEUTRAL_GLOBAL_GIT_CONFIG)
    return home


def tests_only_spec(
    settings: ContainerSettings,
    *,
    name: str,
    work: Path,
    scratch_root: Path,
    argv: Sequence[str],
    task: str,
    mounts: Sequence[Mount] = (),
    env: Mapping[str, str] | None = None,
) -> ContainerSpec:
    """A container that runs tests and holds nothing but their tree: ``<work>/tree`` at /eval/run/workspace
    (its cwd), a fresh HOME (``<work>/home``), image.env's scratch directories (under ``scratch_root``), the
    caches, and ``mounts``. No {eval_dir}, no {source_dir}, none of dokimi's files in the run directory, so
    the code under test reaches only its own tree and what ``mounts`` add."""
    configured = image_env(settings.image_config, task=task)
    make_scratch_dirs(scratch_root, configured.scratch)
    return ContainerSpec(
        name=name,
        image=settings.image,
        argv=list(argv),
        mounts=[
            Mount(work / TESTS_TREE, CONTAINER_WORKSPACE),
            Mount(work / TESTS_HOME, RunDir(CONTAINER_RUN_DIR).grade_home),
            *(Mount(scratch_root / rel, CONTAINER_RUN_DIR / rel) for rel in configured.scratch),
            *_cache_mounts(settings.caches),
            *mounts,
        ],
        env={
            **configured.env,
            "HOME": str(RunDir(CONTAINER_RUN_DIR).grade_home),
            "PYTHONNOUSERSITE": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            **(env or {}),
        },
        workdir=CONTAINER_WORKSPACE,
        network=settings.network,
        batch=settings.batch,
        **limit_options(settings.image_config),
    )


def builtin_tests_spec(
    settings: ContainerSettings,
    *,
    name: str,
    run_dir: Path,
    argv: Sequence[str],
    task: str,
    probe: Path | None = None,
    work: Path | None = None,
) -> ContainerSpec:
    """A built-in grader's test container (:func:`tests_only_spec`): the tree under test is
    ``<run_dir>/builtin-tests/tree``, and it also holds the report directory (``builtin-tests/out`` at
    /eval/out), dokimi's support scripts read-only, and with ``probe`` the grader isolation probe's directory.
    Plugin autoload of pytest is off (``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``). ``work`` is where tree/, home/
    and out/ are (default ``builtin-tests/``; a validation command's: ``validation/public/`` or
    ``validation/hidden/``)."""
    work = work or RunDir(run_dir).builtin_tests
    return tests_only_spec(
        settings,
        name=name,
        work=work,
        scratch_root=run_dir,
        argv=argv,
        task=task,
        mounts=[
            Mount(work / BUILTIN_OUT, CONTAINER_TEST_OUT),
            Mount(support_dir(), CONTAINER_SUPPORT, read_only=True),
            *([Mount(probe, CONTAINER_PROBE)] if probe is not None else []),
        ],
        env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )


@dataclass(frozen=True)
class GradeMounts:
    """The read-only mounts of a grade container besides the run directory."""

    eval_content: Path
    """{eval_dir} at /eval/content."""
    source_dir: Path | None = None
    """{source_dir} at /eval/source, when the entry point names it."""
    probe: Path | None = None
    """tasks check's grader isolation probe: its report directory, read-write at /eval/probe."""


def grade_spec(
    settings: ContainerSettings,
    mounts_: GradeMounts,
    *,
    name: str,
    run_dir: Path,
    argv: Sequence[str],
    task: str | None,
    env: Mapping[str, str] | None = None,
) -> ContainerSpec:
    """The grade/oracle/static/perf container (the caller has made grade-home fresh and moved the agent's git
    configuration aside: see dokimi.grading.entrypoints). dokimi's helper scripts are at /eval/support."""

    configured = image_env(settings.image_config, task=task)
    make_scratch_dirs(run_dir, configured.scratch)
    mounts = [
        Mount(run_dir, CONTAINER_RUN_DIR),
        Mount(mounts_.eval_content, CONTAINER_EVAL_DIR, read_only=True),
    ]
    if mounts_.source_dir is not None:
        mounts.append(Mount(mounts_.source_dir, CONTAINER_SOURCE_DIR, read_only=True))
    # dokimi's helper scripts: the built-in graders, and the isolation helper a repository's grader runs the
    # code under test with (support/isolated.py)
    mounts.append(Mount(support_dir(), CONTAINER_SUPPORT, read_only=True))
    if mounts_.probe is not None:
        mounts.append(Mount(mounts_.probe, CONTAINER_PROBE))
    mounts += _cache_mounts(settings.caches)
    full_env = {
        **configured.env,
        "HOME": str(RunDir(CONTAINER_RUN_DIR).grade_home),
        "PYTHONNOUSERSITE": "1",
        **grade_git_env(),
        **(env or {}),
    }
    return ContainerSpec(
        name=name,
        image=settings.image,
        argv=list(argv),
        mounts=mounts,
        env=full_env,
        workdir=CONTAINER_WORKSPACE,
        network=settings.network,
        batch=settings.batch,
        **limit_options(settings.image_config),
    )


def own_tests_spec(
    settings: ContainerSettings, *, name: str, work: Path, argv: Sequence[str], task: str
) -> ContainerSpec:
    """The container of one run of the agent's own tests (:func:`tests_only_spec`): ``<work>`` holds its tree
    and HOME and, so that the agent's tree and the base never share one, its scratch directories; git's
    configuration is the grade container's. The verdict is the command's exit status: the tests are the
    agent's own code, so nothing the run could forge about itself is worth more than what the tests already
    decide (pytest plugins load as the image has them; a repository that needs one names it in
    ``tests.run``)."""
    return tests_only_spec(
        settings, name=name, work=work, scratch_root=work, argv=argv, task=task, env=grade_git_env()
    )
