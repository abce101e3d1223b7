"""One container run: the fixed options every dokimi container gets, and the timeout that leaves nothing
behind.

Every container:

- ``--init`` (an init process as PID 1) and ``--entrypoint ''`` (the command is the whole argv);
- ``--security-opt no-new-privileges``, ``--cap-drop ALL``, ``--pids-limit N``;
- the caller's uid:gid, or :data:`dokimi.harness.runas.DEFAULT_UID` (1000) when the caller is root, so no
  process in a container runs as root; the directories a container writes must be that user's
  (:func:`give_to_container_user`);
- ``--network NET`` (``none`` means no network at all: only a loopback interface);
- the name ``dokimi-<batch>-<cell>-<role>`` and the labels ``dokimi.managed=1``, ``dokimi.batch=<batch>`` and
  ``dokimi.owner_lock`` (the lock this dokimi process holds while it runs: :mod:`dokimi.sandbox.owner`, what
  ``dokimi doctor --clean-stale`` tells a left-behind container by);
- environment variables through an ``--env-file`` (mode 0600, in a 0700 directory under DOKIMI_HOME,
  removed afterwards, and by the next dokimi when this one was killed with SIGKILL), so that no value, a
  credential for instance, appears in the host's process list or stays on disk;
- ``--memory`` and ``--pids-limit`` from the manifest's ``image.limits``, and stdout and stderr kept within
  :data:`DEFAULT_OUTPUT_CAP` bytes at each end.

Timeout: the ``docker run`` CLI gets SIGTERM, which it passes to the container; after the grace
period (10 s) the CLI's process group is killed, then the container is killed by name, then removed
(``docker rm -f``). A container that ended on its own is removed by ``--rm``.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from dokimi import process, safefs
from dokimi.constants import CONTAINER_PREFIX, LABEL_BATCH, LABEL_MANAGED, LABEL_OWNER_LOCK
from dokimi.errors import ContainerError
from dokimi.harness.runas import RunAs, give_to, harness_identity
from dokimi.sandbox.docker import DOCKER, kill_container, remove_container
from dokimi.sandbox.owner import owner_lock
from dokimi.source.fetch import default_directory

DEFAULT_PIDS_LIMIT = 4096
#: docker ``--memory`` of a container whose repository sets no ``image.limits.memory``.
DEFAULT_MEMORY = "8g"
#: Bytes of a container's stdout and of its stderr kept at each end (the middle is cut and counted), so a
#: grader printing a gigabyte costs dokimi a few tens of MB.
DEFAULT_OUTPUT_CAP = 8 * 1024 * 1024
#: Seconds between SIGTERM to ``docker run`` and killing its group.
KILL_GRACE_S = 10.0
#: ``docker run`` exits 125 when docker itself failed (no such image, a bad option, the daemon refused).
DOCKER_RUN_FAILED = 125

_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
MAX_NAME = 200


def container_name(batch: str, cell: str, role: str) -> str:
    """``dokimi-<batch>-<cell>-<role>`` with every character docker refuses replaced by ``_``.

    ``role`` is ``agent`` or ``grade`` (tasks check also uses ``oracle`` and ``probe``). A name longer than
    docker likes keeps its head and gets a hash of the whole, so it stays unique.
    """
    raw = f"{CONTAINER_PREFIX}{batch}-{cell}-{role}"
    name = _NAME_UNSAFE.sub("_", raw)
    if len(name) > MAX_NAME:
        digest = hashlib.sha256(raw.encode()).hexdigest()[:12]
        name = f"{name[: MAX_NAME - 14]}-{digest}-{_NAME_UNSAFE.sub('_', role)}"[-MAX_NAME:]
    return name


def container_identity() -> RunAs:
    """The uid:gid containers run as: the caller's, or the non-root harness user when the caller is root."""
    who = harness_identity()
    if who is not None:
        return who
    return RunAs(os.getuid(), os.getgid())


def container_user() -> str:
    who = container_identity()
    return f"{who.uid}:{who.gid}"


def give_to_container_user(*paths: Path) -> None:
    """Make ``paths`` (recursively) the container user's, when dokimi runs as root; otherwise they are
    ours."""
    who = harness_identity()
    if who is None:
        return
    for path in paths:
        if path.exists():
            give_to(path, who)


@dataclass(frozen=True)
class Mount:
    """A bind mount: host path -> container path, read-only or read-write."""

    source: Path
    target: PurePosixPath
    read_only: bool = False

    def argv(self) -> list[str]:
        source = str(self.source)
        target = str(self.target)
        for text in (source, target):
            if "," in text or "\n" in text or '"' in text:
                raise ContainerError(
                    f"cannot mount {text!r}: docker's --mount syntax cannot carry ',', '\"' or a newline",
                    hint="use a directory whose path has none of them",
                )
        spec = f"type=bind,source={source},target={target}"
        return ["--mount", spec + (",readonly" if self.read_only else "")]


@dataclass(frozen=True)
class ContainerSpec:
    """Everything about one container that varies; the options every container gets are not here."""

    name: str
    image: str
    argv: Sequence[str]
    mounts: Sequence[Mount] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    workdir: PurePosixPath | None = None
    network: str = "none"
    """A docker network (``none``, ``bridge``, ``host``, a user network)."""
    user: str | None = None
    """``uid:gid``; None means :func:`container_user`."""
    pids_limit: int = DEFAULT_PIDS_LIMIT
    memory: str = DEFAULT_MEMORY
    """docker ``--memory`` (swap is not added: ``--memory-swap`` is set to the same value)."""
    batch: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ContainerResult:
    name: str
    argv: tuple[str, ...]
    returncode: int | None
    """The command's exit code; None when it was stopped at its timeout."""
    stdout: str
    stderr: str
    duration: float
    timed_out: bool
    stdout_omitted: int = 0
    """Bytes cut from the middle of stdout (its first and last :data:`DEFAULT_OUTPUT_CAP` are kept)."""
    stderr_omitted: int = 0

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


def docker_run_argv(spec: ContainerSpec, *, env_file: Path | None) -> list[str]:
    """The ``docker run`` argv for ``spec`` (with the fixed options every dokimi container gets)."""
    argv = [DOCKER, "run", "--rm", "--init", "--entrypoint", "", "--name", spec.name]
    argv += ["--label", f"{LABEL_MANAGED}=1", "--label", f"{LABEL_OWNER_LOCK}={owner_lock()}"]
    if spec.batch is not None:
        argv += ["--label", f"{LABEL_BATCH}={spec.batch}"]
    for key, value in sorted(spec.labels.items()):
        argv += ["--label", f"{key}={value}"]
    argv += ["--security-opt", "no-new-privileges", "--cap-drop", "ALL", "--pids-limit", str(spec.pids_limit)]
    argv += ["--memory", spec.memory, "--memory-swap", spec.memory]
    argv += ["--user", spec.user or container_user(), "--network", spec.network]
    if spec.workdir is not None:
        argv += ["--workdir", str(spec.workdir)]
    if env_file is not None:
        argv += ["--env-file", str(env_file)]
    for mount in spec.mounts:
        argv += mount.argv()
    return [*argv, spec.image, *spec.argv]


def _kill_and_remove(name: str) -> None:
    """Kill and remove a container by name. Called from ``finally``: while an exception (Ctrl-C, SIGTERM) is
    on its way up, a failure here must not replace it, so it is swallowed then; otherwise it is raised."""
    unwinding = sys.exc_info()[1] is not None
    try:
        kill_container(name)
        remove_container(name)
    except ContainerError:
        if not unwinding:
            raise


def _write_env_file(env: Mapping[str, str], directory: Path) -> Path:
    lines = []
    for key, value in sorted(env.items()):
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise ContainerError(f"environment variable name {key!r} is not valid")
        if "\n" in value or "\r" in value or "\0" in value:
            raise ContainerError(f"environment variable {key} holds a newline, which docker cannot pass")
        lines.append(f"{key}={value}\n")
    fd, name = tempfile.mkstemp(prefix="env.", dir=directory)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.writelines(lines)
    return Path(name)


#: The directory of env files under DOKIMI_HOME: mode 0700, one subdirectory per dokimi process.
PRIVATE_ENV_DIR = "private-env"
_swept: set[Path] = set()
_sweep_lock = threading.Lock()


def private_env_root() -> Path:
    """``<DOKIMI_HOME>/private-env`` (mode 0700), where env files live while their container runs. A
    process's own directory is ``<pid>-<random>``; the first container dokimi starts removes those of
    processes that are gone (a dokimi killed with SIGKILL could not remove its own)."""
    root = default_directory() / PRIVATE_ENV_DIR
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o700)
    with _sweep_lock:
        if root not in _swept:
            sweep_stale_env_dirs(root)
            _swept.add(root)
    return root


def sweep_stale_env_dirs(root: Path) -> list[str]:
    """Remove the env directories of dokimi processes that no longer run; returns their names."""
    removed = []
    for entry in sorted(os.listdir(root)):
        pid_text = entry.split("-", 1)[0]
        if pid_text.isdigit() and int(pid_text) != os.getpid() and not _alive(int(pid_text)):
            safefs.remove(root / entry, trusted=root)
            removed.append(entry)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run_container(
    spec: ContainerSpec,
    *,
    timeout: float,
    stdout_file: Path | None = None,
    kill_grace_s: float = KILL_GRACE_S,
    max_output: int = DEFAULT_OUTPUT_CAP,
) -> ContainerResult:
    """Run one container to its end or its timeout; nothing of it is left afterwards.

    A non-zero exit of the command is data. docker failing to run it at all (exit 125: no such image, a mount
    source that does not exist, the daemon refused) is a ContainerError. A container of the same name left by
    an interrupted earlier run is removed first.

    Shutdown (Ctrl-C, SIGTERM, SIGHUP: :func:`dokimi.process.shutting_down`). dokimi's signal handler kills
    every child group, so the ``docker run`` CLI of a container running in a worker thread dies while its
    container may live on (one that ignores SIGTERM does): the container is then killed and removed by name
    here, in the thread that started it. Once dokimi is shutting down no new container is started: that is a
    ContainerError, so a worker does not go on to its next step (grade after the probe) while the main thread
    waits for it.
    """
    if process.shutting_down():
        raise ContainerError(f"container {spec.name} not started: dokimi is stopping")
    remove_container(spec.name)
    scratch = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=private_env_root()))
    env_file = _write_env_file(spec.env, scratch) if spec.env else None
    argv = docker_run_argv(spec, env_file=env_file)
    finished = False
    try:
        completed = process.run(
            argv,
            timeout=timeout,
            output=process.Output(file=stdout_file),
            bounds=process.Bounds(grace=kill_grace_s, max_output=max_output),
        )
        finished = not completed.timed_out and not process.shutting_down()
    finally:
        if env_file is not None:
            env_file.unlink(missing_ok=True)
        scratch.rmdir()  # empty: the env file is its only entry
        if not finished:  # timed out, or dokimi itself was interrupted: the container may outlive its CLI
            _kill_and_remove(spec.name)
    if completed.returncode == DOCKER_RUN_FAILED and completed.stderr.lstrip().startswith("docker:"):
        tail = "\n    ".join(completed.stderr.strip().splitlines()[-6:])
        raise ContainerError(f"docker could not run container {spec.name}:\n    {tail}")
    return ContainerResult(
        name=spec.name,
        argv=tuple(argv),
        returncode=completed.returncode,
        stdout=completed.stdout,
        stderr=completed.stderr,
        duration=completed.duration,
        timed_out=completed.timed_out,
        stdout_omitted=completed.stdout_omitted,
        stderr_omitted=completed.stderr_omitted,
    )
