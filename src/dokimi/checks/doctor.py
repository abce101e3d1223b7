"""The checks of ``dokimi doctor``: is this machine ready to run dokimi, and what to do about each gap.

Required (``dokimi doctor`` exits 1 without them): git, the docker client, a docker daemon that answers, and
the harness CLI when ``--bin`` names one. Recommended: the local base image (the bundled example and the tests
build FROM it), the Claude Code CLI at its default install path, free disk, and no dokimi container left
behind by a dokimi process that has ended.

Cleaning removes only what the user asks for: ``--clean-stale`` the containers whose dokimi process has ended
(:mod:`dokimi.sandbox.owner`), ``--clean-batch`` those of one batch, refused while a run holds the batch. A
container of a running dokimi, another user's included, is never removed.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field

from dokimi import process
from dokimi.constants import BASE_IMAGE, LABEL_BATCH, LABEL_MANAGED, LABEL_OWNER_LOCK
from dokimi.errors import PrerequisiteError
from dokimi.gateway.network import firewall_problem, remove_batch_networks
from dokimi.harness.locate import locate_harness
from dokimi.harness.profile import builtin_profiles, load_profile, version_argv
from dokimi.harness.runtime import CONTAINER_PYTHON, host_launcher, is_python_script
from dokimi.sandbox.docker import SETUP_HINT, docker, docker_status, image_exists, remove_container
from dokimi.sandbox.owner import Owner, owner_of
from dokimi.schemas._base import Document
from dokimi.source.fetch import default_directory

MIN_GIT = (2, 30)
MIN_FREE_BYTES = 5 * 1024**3
CHECK_TIMEOUT_S = 30.0

Status = Literal["ok", "missing", "warn"]


class DoctorCheck(Document):
    """One thing dokimi needs or wants, and the fix when it is not there."""

    name: str
    status: Status
    """``ok``; ``missing`` (required and absent: exit 1); ``warn`` (recommended, or a limit is close)."""
    required: bool
    detail: str
    fix: str | None = None


class DoctorReport(Document):
    """dokimi_doctor.v1: what ``dokimi doctor --json`` prints."""

    schema_: Literal["dokimi_doctor.v1"] = Field(default="dokimi_doctor.v1", alias="schema")
    checks: list[DoctorCheck]
    ok: bool
    """False when a required check is missing."""


def _check(name: str, ok: bool, *, required: bool, detail: str, fix: str | None) -> DoctorCheck:
    status: Status = "ok" if ok else ("missing" if required else "warn")
    return DoctorCheck(name=name, status=status, required=required, detail=detail, fix=None if ok else fix)


def check_git() -> DoctorCheck:
    fix = "install git 2.30 or later (Debian: apt-get install -y git)"
    try:
        result = process.run(["git", "--version"], timeout=CHECK_TIMEOUT_S)
    except PrerequisiteError as exc:
        return _check("git", False, required=True, detail=exc.message, fix=fix)
    match = re.search(r"(\d+)\.(\d+)", result.stdout)
    version = tuple(int(x) for x in match.groups()) if match else (0, 0)
    text = result.stdout.strip() or "no version"
    if version < MIN_GIT:
        return _check("git", False, required=True, detail=f"{text} (2.30 or later needed)", fix=fix)
    return _check("git", True, required=True, detail=text, fix=None)


def check_docker() -> list[DoctorCheck]:
    status = docker_status()
    checks = [
        _check(
            "docker client",
            status.client is not None,
            required=True,
            detail=f"docker {status.client}" if status.client else (status.error or "not installed"),
            fix=SETUP_HINT,
        )
    ]
    daemon_detail = f"server {status.server}" if status.server else (status.error or "does not answer")
    checks.append(_check("docker daemon", status.ok, required=True, detail=daemon_detail, fix=SETUP_HINT))
    if not status.ok:
        return checks
    present = image_exists(BASE_IMAGE)
    checks.append(
        _check(
            "base image",
            present,
            required=False,
            detail=BASE_IMAGE if present else f"{BASE_IMAGE} is not on the daemon",
            fix="`dokimi setup` builds it offline from the Debian mirror (about a minute)",
        )
    )
    images = docker(
        ["images", "--filter", f"label={LABEL_MANAGED}=1", "--format", "{{.Repository}}:{{.Tag}}"]
    )
    tags = sorted({line for line in images.stdout.split() if line and "<none>" not in line})
    checks.append(
        _check("dokimi images", True, required=False, detail=f"{len(tags)} tagged image(s)", fix=None)
    )
    left = dokimi_containers()
    ended = [c.name for c in left if c.owner is Owner.ENDED]
    running = len(left) - len(ended)
    detail = "none" if not left else f"{running} of running dokimi processes (or of unknown owner)"
    if ended:
        detail += f"; {len(ended)} left behind by ended ones: {', '.join(ended[:5])}"
    checks.append(
        _check(
            "dokimi containers",
            not ended,
            required=False,
            detail=detail,
            fix="`dokimi doctor --clean-stale` removes the containers whose dokimi process has ended (never "
            "a running batch's, yours or another user's); `dokimi doctor --clean-batch <out>/<batch>` only "
            "one batch's",
        )
    )
    return checks


@dataclass(frozen=True)
class DokimiContainer:
    """A container dokimi started (label ``dokimi.managed=1``), and whether its dokimi process still runs."""

    name: str
    batch: str | None
    owner: Owner


def dokimi_containers() -> list[DokimiContainer]:
    """Every container dokimi started on this daemon, running or not, with its owner's state
    (:func:`dokimi.sandbox.owner.owner_of`)."""
    template = f'{{{{.Names}}}}\t{{{{.Label "{LABEL_BATCH}"}}}}\t{{{{.Label "{LABEL_OWNER_LOCK}"}}}}'
    listed = docker(["ps", "-a", "--filter", f"label={LABEL_MANAGED}=1", "--format", template])
    found = []
    for line in listed.stdout.splitlines():
        name, _, rest = line.partition("\t")
        batch, _, lock = rest.partition("\t")
        if name.strip():
            found.append(DokimiContainer(name.strip(), batch.strip() or None, owner_of(lock.strip() or None)))
    return sorted(found, key=lambda c: c.name)


class CleanReport(Document):
    """What ``dokimi doctor --clean-stale`` / ``--clean-batch`` removed and what it kept, and why."""

    removed: list[str] = Field(default_factory=list)
    """Containers whose dokimi process had ended."""
    kept: dict[str, str] = Field(default_factory=dict)
    """Container -> why it was kept (its dokimi process still runs, or nobody can tell)."""
    networks: list[str] = Field(default_factory=list)
    """``--clean-batch``: the batch's networks on this daemon removed with their firewall chains (what a run
    killed with SIGKILL, or a cluster node that died, left)."""


def clean_left_containers(*, batch: str | None = None) -> CleanReport:
    """Remove the containers whose dokimi process has ended (only ``batch``'s when given); a container of a
    process that still runs, or whose owner cannot be told (another user's lock, an older dokimi's
    container without the label), is kept and listed. With ``batch``, also its networks and their firewall
    chains (the caller holds the batch's lock, so no run of it uses them)."""
    report = CleanReport()
    for container in dokimi_containers():
        if batch is not None and container.batch != batch:
            continue
        if container.owner is Owner.ENDED:
            remove_container(container.name)
            report.removed.append(container.name)
        elif container.owner is Owner.LIVE:
            report.kept[container.name] = "its dokimi process still runs"
        else:
            report.kept[container.name] = (
                "its owner cannot be told (another user's, or started by an older dokimi): remove it with "
                f"`docker rm -f {container.name}` if you know it is left over"
            )
    if batch is not None:
        report.networks = remove_batch_networks(batch)
    return report


def check_claude(bin_path: Path | None) -> DoctorCheck:
    """The Claude Code CLI, found the way ``repo run`` finds it (dokimi.harness.locate): ``--bin`` (then
    required), else DOKIMI_CLAUDE_BIN, the pinned install, or ``claude`` on PATH (recommended)."""
    required = bin_path is not None
    try:
        located = locate_harness(load_profile("claude-code"), bin_path)
    except PrerequisiteError as exc:
        return _check("claude code", False, required=required, detail=exc.message, fix=exc.hint)
    path = located.path
    fix = "scripts/install-harness.sh installs the pinned version; or pass --bin, or set DOKIMI_CLAUDE_BIN"
    try:
        result = process.run([str(path), "--version"], timeout=CHECK_TIMEOUT_S)
    except PrerequisiteError as exc:
        return _check("claude code", False, required=required, detail=exc.message, fix=fix)
    if not result.ok:
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        return _check("claude code", False, required=required, detail=f"{path}: {tail[0]}", fix=fix)
    return _check(
        "claude code",
        True,
        required=required,
        detail=f"{result.stdout.strip()} at {path} (from {located.detail})",
        fix=None,
    )


def check_harnesses() -> list[DoctorCheck]:
    """Every built-in profile but claude-code (its own check above): where its executable is, the version it
    reports, and whether the profile is verified with that version, or why not (never required)."""
    checks = []
    for name in builtin_profiles():
        if name == "claude-code":
            continue
        profile = load_profile(name)
        pin = profile.verification
        label = f"harness {name}"
        if pin is not None and not pin.verified:
            checks.append(_check(label, False, required=False, detail=f"unverified: {pin.note}", fix=None))
            continue
        fix = f"scripts/install-harness.sh {name} installs {pin.version if pin else 'it'}; or pass --bin"
        try:
            located = locate_harness(profile)
            launcher = host_launcher(located.path)
            argv = [*launcher[:-1], *version_argv(profile, launcher[-1])]
            result = process.run(argv, timeout=CHECK_TIMEOUT_S)
        except PrerequisiteError as exc:
            checks.append(_check(label, False, required=False, detail=exc.message, fix=exc.hint or fix))
            continue
        reported = (result.stdout or result.stderr).strip().splitlines()[:1] or ["no output"]
        pinned = pin is not None and pin.version in reported[0]
        detail = f"{reported[0]} at {located.path} (from {located.detail})"
        if is_python_script(located.path):
            detail += f" on {launcher[0]}; in the agent container it runs on the image's {CONTAINER_PYTHON}"
        if pin is not None:
            detail += f"; verified with {pin.version}" + (
                "" if pinned else ": a different version is installed"
            )
        checks.append(_check(label, result.ok and pinned, required=False, detail=detail, fix=fix))
    return checks


def check_sealed_runs() -> DoctorCheck:
    """A real run is sealed: its batch network's host firewall chain needs iptables and root (recommended:
    without them a real run needs --agent-network, which is not sealed)."""
    problem = firewall_problem()
    return _check(
        "sealed real runs",
        problem is None,
        required=False,
        detail=problem or "iptables and root: the batch network's firewall chain can be set",
        fix="run as root with iptables installed (Debian: apt-get install -y iptables); otherwise a real run "
        "needs --agent-network NET, which is not sealed (docs/network.md)",
    )


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_disk(paths: Sequence[tuple[str, Path]]) -> list[DoctorCheck]:
    checks = []
    for label, path in paths:
        usage = shutil.disk_usage(_existing(path))
        free_gb = usage.free / 1024**3
        checks.append(
            _check(
                f"disk ({label})",
                usage.free >= MIN_FREE_BYTES,
                required=False,
                detail=f"{free_gb:.1f} GB free at {_existing(path)}",
                fix="free some space: docker image prune, or remove old batches and caches",
            )
        )
    return checks


def run_doctor(*, claude_bin: Path | None = None) -> DoctorReport:
    """Every check, in the order a person fixes them."""
    checks = [check_git(), *check_docker(), check_sealed_runs(), check_claude(claude_bin), *check_harnesses()]
    disks = [("dokimi cache", default_directory())]
    daemon = next((c for c in checks if c.name == "docker daemon"), None)
    if daemon is not None and daemon.status == "ok":
        root = docker(["info", "--format", "{{.DockerRootDir}}"], check=False).stdout.strip()
        if root and Path(root).is_absolute():
            disks.append(("docker", Path(root)))
    checks += check_disk(disks)
    return DoctorReport(checks=checks, ok=not any(c.status == "missing" for c in checks))
