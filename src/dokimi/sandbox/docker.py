"""The docker CLI, one named function per question: is it there, does an image exist, remove a container.

dokimi speaks to docker only through its CLI (no SDK, no socket): the semantics are the CLI's (signals to
``docker run``, kill by name), and podman's CLI is compatible. Every call goes through :mod:`dokimi.process`.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass

from dokimi import process
from dokimi.constants import LABEL_BATCH
from dokimi.errors import ContainerError, PrerequisiteError

DOCKER = "docker"
DOCKER_TIMEOUT_S = 120.0
SETUP_HINT = "install docker and start the daemon: `dokimi setup` does both (it is idempotent)"


def docker(
    args: Sequence[str], *, timeout: float = DOCKER_TIMEOUT_S, check: bool = True
) -> process.Completed:
    """Run ``docker ARGS``; with ``check`` a failure is a ContainerError showing docker's last lines."""
    result = process.run([DOCKER, *args], timeout=timeout)
    if check and not result.ok:
        raise ContainerError(_failure(args, result), hint=_hint(result.stderr))
    return result


#: The first docker CLI version whose ``docker build`` needs the buildx plugin for BuildKit.
BUILDX_ONLY_FROM = 23


@functools.cache
def buildkit_docker() -> str | None:
    """A docker CLI on PATH that builds with BuildKit (``DOCKER_BUILDKIT=1 docker build``): the first one
    with the buildx plugin, or one older than 23.0, which has BuildKit built in; None when there is none (a
    newer CLI without buildx only has the legacy builder, which knows no build secret)."""
    first = shutil.which(DOCKER)
    others = [os.path.join(d, DOCKER) for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    candidates = [
        c for c in dict.fromkeys([first, *others]) if c and os.access(c, os.X_OK) and os.path.isfile(c)
    ]
    for client in candidates:
        try:
            if process.run([client, "buildx", "version"], timeout=DOCKER_TIMEOUT_S).ok:
                return client
            version = process.run(
                [client, "version", "--format", "{{.Client.Version}}"], timeout=DOCKER_TIMEOUT_S
            )
        except PrerequisiteError:
            continue
        major = version.stdout.strip().split(".", 1)[0]
        if major.isdigit() and int(major) < BUILDX_ONLY_FROM:
            return client
    return None


def _failure(args: Sequence[str], result: process.Completed) -> str:
    what = f"`docker {' '.join(args[:2])}`"
    if result.timed_out:
        return f"{what} did not finish in time"
    tail = "\n".join(line for line in (result.stderr or result.stdout).strip().splitlines()[-8:])
    return f"{what} exited {result.returncode}" + (f":\n    {tail}" if tail else "")


def _hint(stderr: str) -> str | None:
    if "Cannot connect to the Docker daemon" in stderr or "docker daemon running" in stderr:
        return SETUP_HINT
    if "permission denied" in stderr and "docker.sock" in stderr:
        return "add your user to the docker group (then log in again), or run as root"
    return None


@dataclass(frozen=True)
class DockerStatus:
    """What ``docker version`` said: the client's and the daemon's versions, or why there is none."""

    client: str | None
    server: str | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.client is not None and self.server is not None


def docker_status() -> DockerStatus:
    """The docker client's and daemon's versions (never raises)."""
    try:
        result = process.run(
            [DOCKER, "version", "--format", "{{json .}}"],
            timeout=DOCKER_TIMEOUT_S,
        )
    except PrerequisiteError as exc:
        return DockerStatus(None, None, exc.message)
    client = server = None
    try:
        data = json.loads(result.stdout.strip().splitlines()[0]) if result.stdout.strip() else {}
    except (json.JSONDecodeError, IndexError):
        data = {}
    if isinstance(data, dict):
        client = (data.get("Client") or {}).get("Version")
        server = (data.get("Server") or {}).get("Version")
    if result.timed_out:
        return DockerStatus(client, None, "docker version did not answer in time")
    error = None
    if server is None:
        lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
        error = lines[-1] if lines else "the docker daemon did not answer"
    return DockerStatus(client, server, error)


def docker_ok() -> bool:
    """Whether the docker client is installed and its daemon answers."""
    return docker_status().ok


def require_docker() -> DockerStatus:
    """The status, or a PrerequisiteError that says how to get docker running."""
    status = docker_status()
    if status.client is None:
        raise PrerequisiteError(f"the docker CLI is not installed ({status.error})", hint=SETUP_HINT)
    if status.server is None:
        raise PrerequisiteError(f"the docker daemon does not answer: {status.error}", hint=SETUP_HINT)
    return status


def image_inspect(ref: str) -> dict[str, object] | None:
    """``docker image inspect`` of one image, or None when there is no such image locally."""
    result = docker(["image", "inspect", "--format", "{{json .}}", ref], check=False)
    if not result.ok:
        return None
    try:
        data = json.loads(result.stdout)
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def image_exists(ref: str) -> bool:
    return image_inspect(ref) is not None


def image_labels(ref: str) -> dict[str, str]:
    data = image_inspect(ref) or {}
    config = data.get("Config") or {}
    labels = config.get("Labels") if isinstance(config, dict) else None
    return {str(k): str(v) for k, v in (labels or {}).items()}


def container_names(*, name: str | None = None, label: str | None = None) -> list[str]:
    """Names of containers (running or not) whose name contains ``name`` / that carry ``label`` (k=v)."""
    args = ["ps", "-a", "--format", "{{.Names}}"]
    if name is not None:
        args += ["--filter", f"name={name}"]
    if label is not None:
        args += ["--filter", f"label={label}"]
    result = docker(args)
    return sorted(line.strip() for line in result.stdout.splitlines() if line.strip())


def container_exists(name: str) -> bool:
    """Whether a container of exactly this name exists (running or not)."""
    return name in container_names(name=f"^{name}$")


def kill_container(name: str) -> None:
    """``docker kill NAME``; a container that is gone already is fine."""
    docker(["kill", name], check=False)


#: What ``docker rm -f`` says when the container is gone already, or another ``rm`` is removing it (the
#: worker that ran it and a Ctrl-C cleanup can both remove one container).
_NO_SUCH_CONTAINER = "No such container"
_REMOVAL_IN_PROGRESS = "is already in progress"
#: How long a removal another caller started may take before this caller gives up waiting for it.
REMOVAL_WAIT_S = 60.0


def remove_container(name: str) -> None:
    """``docker rm -f NAME``; a container that is gone already is fine. When another caller is removing it
    already (a worker and a Ctrl-C cleanup at once), wait until it is gone: a caller that returns must be able
    to count on the container no longer existing."""
    result = docker(["rm", "-f", name], check=False)
    if result.ok or _NO_SUCH_CONTAINER in result.stderr:
        return
    if _REMOVAL_IN_PROGRESS not in result.stderr:
        raise ContainerError(_failure(["rm", "-f", name], result), hint=_hint(result.stderr))
    _wait_until_removed(name)


def _wait_until_removed(name: str) -> None:
    deadline = time.monotonic() + REMOVAL_WAIT_S
    while time.monotonic() < deadline:
        inspected = docker(["container", "inspect", "--format", "{{.Id}}", name], check=False)
        if not inspected.ok and _NO_SUCH_CONTAINER in inspected.stderr:
            return
        time.sleep(0.1)
    raise ContainerError(f"container {name} was still being removed after {REMOVAL_WAIT_S:.0f} s")


def remove_batch_containers(batch: str) -> list[str]:
    """Remove every container labelled with this batch; returns their names."""
    names = container_names(label=f"{LABEL_BATCH}={batch}")
    for name in names:
        remove_container(name)
    return names
