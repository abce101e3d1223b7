"""Run the real Claude Code CLI against the scripted model server, as a non-root user when tests run as root.

Claude Code refuses ``--permission-mode bypassPermissions`` as root. When the tests run as root (CI, the dev
machines here) the CLI is started through ``setpriv --reuid=1000 --regid=1000 --clear-groups`` with an
explicit env (``env -i`` semantics: nothing of ours leaks in), and every directory it touches (HOME,
CLAUDE_CONFIG_DIR, the workspace) lives under /tmp in a directory owned by that uid: pytest's own tmp_path is
mode 0700, root only. The binary installed under /root/.cache is not reachable by uid 1000 either (/root is
0700), so it is hard-linked (or copied, across filesystems) into a world-readable directory once per machine.

Claude Code's Bash tool starts every command in a new session (setsid), so killing the CLI's process group
leaves a running command behind: :func:`kill_strays` finds such leftovers by a marker in their command line.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from dokimi import process
from dokimi.harness.profile import load_profile

NONROOT_UID = 1000
NONROOT_GID = 1000
MODEL = "claude-haiku-4-5"


def running_as_root() -> bool:
    return os.geteuid() == 0


def _reachable_by_others(path: Path) -> bool:
    """Whether a uid that owns none of the path can execute it: every ancestor o+x, the file o+rx."""
    path = path.resolve()
    if (path.stat().st_mode & 0o005) != 0o005:
        return False
    return all(parent.stat().st_mode & 0o001 for parent in path.parents)


def nonroot_binary(claude_bin: Path) -> Path:
    """A path to claude_bin that uid 1000 can execute (the path itself, or a link/copy under /tmp)."""
    if not running_as_root() or _reachable_by_others(claude_bin):
        return claude_bin
    real = claude_bin.resolve()
    st = real.stat()
    key = hashlib.sha256(f"{real}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:12]
    shared = Path(tempfile.gettempdir()) / f"dokimi-claude-{key}"
    target = shared / "claude"
    if target.exists():
        return target
    shared.mkdir(mode=0o755, exist_ok=True)
    os.chmod(shared, 0o755)
    staging = shared / f".claude.{os.getpid()}"
    try:
        os.link(real, staging)
    except OSError:
        shutil.copy2(real, staging)
    os.chmod(staging, 0o755)
    os.replace(staging, target)
    return target


@contextmanager
def harness_dir(prefix: str = "dokimi-harness-") -> Iterator[Path]:
    """A scratch directory the harness user owns (removed afterwards)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        os.chmod(path, 0o755)
        if running_as_root():
            os.chown(path, NONROOT_UID, NONROOT_GID)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def give_to_harness_user(path: Path) -> None:
    """chown -R path to the harness user (a no-op when not root)."""
    if not running_as_root():
        return
    for root, dirs, files in os.walk(path):
        os.chown(root, NONROOT_UID, NONROOT_GID)
        for name in dirs + files:
            os.lchown(os.path.join(root, name), NONROOT_UID, NONROOT_GID)


def as_harness_user(argv: Sequence[str]) -> list[str]:
    """argv unchanged for a non-root caller; prefixed with setpriv to uid/gid 1000 for root."""
    if not running_as_root():
        return list(argv)
    return [
        "setpriv",
        f"--reuid={NONROOT_UID}",
        f"--regid={NONROOT_GID}",
        "--clear-groups",
        "--",
        *argv,
    ]


@dataclass(frozen=True)
class ClaudeRun:
    stdout: str
    stderr: str
    returncode: int | None
    timed_out: bool
    trace_path: Path


def run_claude(
    claude_bin: Path,
    prompt: str,
    *,
    cwd: Path,
    home: Path,
    base_url: str,
    trace_path: Path,
    timeout: float = 60.0,
    max_turns: int = 5,
    extra_args: Sequence[str] = (),
    hard_kill: bool = False,
) -> ClaudeRun:
    """One ``claude -p`` run against base_url with a fresh HOME and CLAUDE_CONFIG_DIR under ``home``.

    stdout goes to trace_path as it is printed, so a run killed at its timeout keeps what it printed. At the
    timeout the group gets SIGTERM then SIGKILL (dokimi.process, the runner's way); with hard_kill it gets
    SIGKILL at once, so the harness has no chance to report anything.
    """
    config_dir = home / ".claude"
    config_dir.mkdir(parents=True, exist_ok=True)
    give_to_harness_user(home)
    give_to_harness_user(cwd)
    argv = as_harness_user(
        [
            str(nonroot_binary(claude_bin)),
            "-p",
            prompt,
            "--output-format",
            "stream-json",
            "--verbose",
            "--permission-mode",
            "bypassPermissions",
            "--model",
            MODEL,
            "--max-turns",
            str(max_turns),
            *extra_args,
        ]
    )
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(config_dir),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "dummy",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    if hard_kill:
        return _run_hard_kill(argv, env=env, cwd=cwd, trace_path=trace_path, timeout=timeout)
    done = process.run(
        argv,
        timeout=timeout,
        env=env,
        cwd=cwd,
        output=process.Output(file=trace_path),
        bounds=process.Bounds(grace=2.0),
    )
    stdout = trace_path.read_text(encoding="utf-8", errors="replace")
    return ClaudeRun(stdout, done.stderr, done.returncode, done.timed_out, trace_path)


def _run_hard_kill(
    argv: Sequence[str], *, env: dict[str, str], cwd: Path, trace_path: Path, timeout: float
) -> ClaudeRun:
    with open(trace_path, "wb") as out:
        proc = subprocess.Popen(
            argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.PIPE, start_new_session=True
        )
        try:
            _, err = proc.communicate(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
            timed_out = True
    stdout = trace_path.read_text(encoding="utf-8", errors="replace")
    rc = None if timed_out else proc.returncode
    return ClaudeRun(stdout, err.decode("utf-8", "replace"), rc, timed_out, trace_path)


def kill_strays(marker: str) -> list[int]:
    """Kill (SIGKILL, with their process group) processes whose command line contains marker; return their
    pids."""
    killed: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if marker not in cmdline:
            continue
        pid = int(entry.name)
        try:
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
        killed.append(pid)
    return killed


def stray_pids(marker: str) -> list[int]:
    """Pids of live processes whose command line contains marker (zombies excluded)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker not in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace"):
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            found.append(int(entry.name))
    return found


def pinned_version(harness: str) -> str:
    """The version a built-in harness is pinned at: its profile's ``verification`` block, the one place it is
    spelled (scripts/install-harness.sh and dokimi.harness.locate read it there too)."""
    pin = load_profile(harness).verification
    assert pin is not None, f"{harness} has no pin"
    return pin.version
