"""Every subprocess dokimi starts goes through here.

argv lists (never a shell), a required timeout, each child in its own process group (POSIX) that is killed as
a
whole on timeout, on SIGTERM/SIGHUP to dokimi (once :func:`install_signal_handlers` ran), and when the child
exits
leaving members behind. A non-zero exit is data (:class:`Completed`); ``check=True`` turns it into a
:class:`~dokimi.errors.ProcessError`. A missing executable is a :class:`~dokimi.errors.PrerequisiteError`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO

from dokimi import safefs
from dokimi.errors import PrerequisiteError, ProcessError

#: How to get the tools dokimi runs; shown when one is missing.
INSTALL_HINTS: dict[str, str] = {
    "git": "install git (Debian: apt-get install -y git)",
    "docker": "install docker and start the daemon: `dokimi setup` does both",
    "npm": "install Node.js and npm (Debian: apt-get install -y npm)",
    "claude": "install Claude Code: scripts/install-harness.sh, then pass --bin PATH",
}

DEFAULT_GRACE_S = 5.0
#: With ``Output.file``, ``Completed.stdout`` holds only the file's last this many bytes: the file is the
#: record, and the caller wants its end (an error, a summary line).
STDOUT_FILE_TAIL = 64 * 1024


def omitted_marker(count: int) -> bytes:
    """The line put where output was cut: the same words as a truncated command output in events.jsonl."""
    return f"\n[... {count} bytes omitted ...]\n".encode()


class CappedOutput:
    """One output stream kept within a cap: the first ``cap`` bytes and the last ``cap`` bytes, with the
    number of bytes between them counted (``omitted``). With ``fd`` the head goes to that file as it
    arrives (nothing already printed is lost if dokimi is killed) and the marker and the tail are appended
    when the stream ends; without it everything kept stays in memory. Memory use is about ``2 * cap`` at
    most, whatever the child prints."""

    def __init__(self, cap: int, fd: int | None = None) -> None:
        self.cap = cap
        self.fd = fd
        self.head = bytearray()
        self.head_len = 0
        self.tail: deque[bytes] = deque()
        self.tail_len = 0
        self.total = 0
        self.closed = False
        self.lock = threading.Lock()

    def write(self, chunk: bytes) -> None:
        with self.lock:
            if not self.closed:  # a reader left running by a process outside the group stops here
                self._add(chunk)

    def _add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.cap - self.head_len
        if room > 0:
            part = chunk[:room]
            if self.fd is not None:
                _write_all(self.fd, part)
            else:
                self.head += part
            self.head_len += len(part)
            chunk = chunk[room:]
        if chunk:
            self.tail.append(chunk)
            self.tail_len += len(chunk)
            while self.tail and self.tail_len - len(self.tail[0]) >= self.cap:
                self.tail_len -= len(self.tail.popleft())

    @property
    def omitted(self) -> int:
        return max(0, self.total - self.head_len - min(self.tail_len, self.cap))

    @property
    def truncated(self) -> bool:
        return self.omitted > 0

    def finish(self) -> bytes:
        """Write the rest to the file (if any); return what was kept (head, marker, tail)."""
        with self.lock:
            self.closed = True
        tail = b"".join(self.tail)
        if self.truncated:
            tail = omitted_marker(self.omitted) + tail[-self.cap :]
        if self.fd is not None:
            _write_all(self.fd, tail)
            return b""
        return bytes(self.head) + tail


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


@dataclass(frozen=True)
class Completed:
    """The result of one subprocess: a non-zero exit is a value, not an exception."""

    argv: tuple[str, ...]
    returncode: int | None
    """None when the process was killed at its timeout."""
    stdout: str
    stderr: str
    duration: float
    timed_out: bool = False
    stdout_omitted: int = 0
    """Bytes of stdout left out in the middle (kept: the first and last ``max_output``); 0 when all kept."""
    stderr_omitted: int = 0

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


# Process groups alive right now; killed when dokimi gets SIGTERM or SIGHUP.
_live_groups: set[int] = set()
_groups_lock = threading.Lock()


def _register(pgid: int) -> None:
    with _groups_lock:
        _live_groups.add(pgid)


def _unregister(pgid: int) -> None:
    with _groups_lock:
        _live_groups.discard(pgid)


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to a whole process group; a group that is already gone is fine."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill_all_groups(sig: int = signal.SIGKILL) -> None:
    with _groups_lock:
        groups = list(_live_groups)
    for pgid in groups:
        kill_group(pgid, sig)


class Terminated(BaseException):
    """dokimi got SIGTERM or SIGHUP. Raised in the main thread (like KeyboardInterrupt) after every child
    group
    was killed, so ``finally`` blocks and context managers clean up; :func:`exit_with_signal` then ends the
    process with the signal itself."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_shutting_down = threading.Event()


def shutting_down() -> bool:
    """True once dokimi got SIGTERM, SIGHUP or Ctrl-C: work in flight was killed, so a child that ends now
    ended because of the signal, and its outcome must not be recorded as a result (a cell stays missing)."""
    return _shutting_down.is_set()


def _kill_children() -> None:
    _shutting_down.set()
    kill_all_groups(signal.SIGTERM)
    time.sleep(0.2)
    kill_all_groups(signal.SIGKILL)


def _on_fatal_signal(signum: int, frame: FrameType | None) -> None:
    _kill_children()
    raise Terminated(signum)


def _on_interrupt(signum: int, frame: FrameType | None) -> None:
    _kill_children()
    raise KeyboardInterrupt


def exit_with_signal(signum: int) -> None:
    """End this process with ``signum`` (default action), as the contract asks of SIGTERM and SIGHUP."""
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def install_signal_handlers() -> None:
    """On SIGTERM or SIGHUP kill every child group, then raise :class:`Terminated` in the main thread; on
    Ctrl-C
    kill them and raise KeyboardInterrupt.

    The CLI calls this once and ends with the signal (:func:`exit_with_signal`) after cleanup. A library
    caller
    that does not call it keeps its children's groups alive when it is terminated.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_fatal_signal)
    signal.signal(signal.SIGINT, _on_interrupt)


def _missing(argv0: str) -> PrerequisiteError:
    name = Path(argv0).name
    return PrerequisiteError(
        f"`{argv0}` is not installed or not executable",
        hint=INSTALL_HINTS.get(name, f"install {name} or put it on PATH"),
    )


def _popen(
    argv: list[str],
    *,
    stdin: int,
    stdout: int | IO[bytes],
    stderr: int,
    env: Mapping[str, str] | None,
    cwd: str | Path | None,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a new session (its own process group), registered for the signal handlers. A missing
    or non-executable program is a PrerequisiteError with the fix."""
    try:
        proc = subprocess.Popen(
            argv,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            env=dict(env) if env is not None else None,
            cwd=str(cwd) if cwd is not None else None,
            start_new_session=True,
        )
    except (FileNotFoundError, PermissionError) as exc:
        raise _missing(argv[0]) from exc
    _register(proc.pid)
    return proc


def _drain(stream: IO[bytes], into: list[bytes] | CappedOutput) -> None:
    """Read ``stream`` to EOF in chunks (what arrived is kept even if EOF never comes), then close it."""
    read = getattr(stream, "read1", stream.read)
    add = into.append if isinstance(into, list) else into.write
    try:
        while True:
            chunk = read(65536)
            if not chunk:
                break
            add(chunk)
    finally:
        stream.close()


def _feed(stdin: IO[bytes], data: bytes) -> None:
    try:
        stdin.write(data)
        stdin.close()
    except BrokenPipeError:
        pass


@dataclass(frozen=True)
class Output:
    """Where :func:`run` puts the child's output; by default both streams are kept in memory, in
    :class:`Completed`."""

    file: Path | None = None
    """The child's stdout goes to this file as it is printed (nothing is lost when dokimi itself is killed),
    and ``Completed.stdout`` holds its last :data:`STDOUT_FILE_TAIL` bytes; a link already at that path is
    replaced, never written through."""
    merge_stderr: bool = False
    """The child's stderr goes where its stdout goes, in the order printed (``Completed.stderr`` is then
    empty)."""


@dataclass(frozen=True)
class Bounds:
    """How :func:`run` ends a child and how much of its output it keeps."""

    grace: float = DEFAULT_GRACE_S
    """Seconds between SIGTERM and SIGKILL at the timeout (and the wait for the pipes after the exit)."""
    max_output: int | None = None
    """Bytes of each of stdout and stderr kept at each end; None: everything."""


def run(
    argv: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    input: str | bytes | None = None,
    check: bool = False,
    output: Output = Output(),
    bounds: Bounds = Bounds(),
) -> Completed:
    """Run ``argv`` in a new session and wait at most ``timeout`` seconds.

    On timeout the group gets SIGTERM, ``bounds.grace`` seconds, then SIGKILL; what the child printed up to
    the kill is kept (``returncode`` None, ``timed_out`` True). ``output`` says where the child's output goes
    (:class:`Output`: a file for stdout, stderr merged into it). With ``bounds.max_output`` each of stdout and
    stderr keeps its first and last ``max_output`` bytes around an omitted-bytes line (:class:`CappedOutput`),
    so a child printing gigabytes costs dokimi a few times ``max_output`` of memory.
    Members of the group still alive after the child exits are killed too.
    """
    argv = [str(a) for a in argv]
    start = time.monotonic()
    grace, max_output = bounds.grace, bounds.max_output
    cap = max_output if max_output is not None else 1 << 62
    stdout_file = output.file
    out_fd: int | None = None
    if stdout_file is not None:
        stdout_file.parent.mkdir(parents=True, exist_ok=True)
        out_fd = safefs.open_new(stdout_file, trusted=stdout_file.parent)
    out_sink = CappedOutput(cap, out_fd)
    err_sink = CappedOutput(cap)
    try:
        proc = _popen(
            argv,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if output.merge_stderr else subprocess.PIPE,
            env=env,
            cwd=cwd,
        )
    except PrerequisiteError:
        if out_fd is not None:
            os.close(out_fd)
        raise
    pgid = proc.pid
    data = input.encode() if isinstance(input, str) else input
    timed_out = False
    pipes = [(s, into) for s, into in ((proc.stdout, out_sink), (proc.stderr, err_sink)) if s is not None]
    readers = [threading.Thread(target=_drain, args=(stream, into), daemon=True) for stream, into in pipes]
    try:
        for reader in readers:
            reader.start()
        if proc.stdin is not None:
            _feed(proc.stdin, data or b"")
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(pgid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        # The child is gone (or ignored TERM): kill what is left of its group, which may hold the pipes open.
        kill_group(pgid, signal.SIGKILL)
        proc.wait()
        # A process that left the group (setsid, a daemon) may hold the pipes open forever: it is not
        # contained, so stop waiting for EOF after the grace period and keep what arrived.
        deadline = time.monotonic() + grace
        for reader in readers:
            reader.join(max(0.0, deadline - time.monotonic()))
    except BaseException:
        kill_group(pgid, signal.SIGKILL)
        proc.wait()
        raise
    finally:
        _unregister(pgid)
        raw_out = b""
        if out_fd is not None:
            try:
                out_sink.finish()
                size = os.fstat(out_fd).st_size
                raw_out = os.pread(out_fd, STDOUT_FILE_TAIL, max(0, size - STDOUT_FILE_TAIL))
            finally:
                os.close(out_fd)
    raw_err = err_sink.finish()
    if out_fd is None:
        raw_out = out_sink.finish()
    stdout = raw_out.decode("utf-8", "replace")
    stderr = raw_err.decode("utf-8", "replace")
    result = Completed(
        argv=tuple(argv),
        returncode=None if timed_out else proc.returncode,
        stdout=stdout,
        stderr=stderr,
        duration=time.monotonic() - start,
        timed_out=timed_out,
        stdout_omitted=out_sink.omitted,
        stderr_omitted=err_sink.omitted,
    )
    if check and not result.ok:
        raise ProcessError(argv, result.returncode, result.stdout, result.stderr)
    return result


def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
) -> subprocess.Popen[bytes]:
    """Start a long-lived child (a ``git cat-file --batch`` server) with pipes on stdin and stdout, in its own
    process group, registered so SIGTERM/SIGHUP to dokimi kills it. Stop it with :func:`stop`."""
    return _popen(
        [str(a) for a in argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=cwd,
    )


def stop(proc: subprocess.Popen[bytes], *, timeout: float = 5.0) -> None:
    """Close a spawned child's stdin, wait for it, then kill its group."""
    if proc.stdin:
        try:
            proc.stdin.close()
        except BrokenPipeError:
            pass
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    kill_group(proc.pid, signal.SIGKILL)
    proc.wait()
    if proc.stdout:
        proc.stdout.close()
    _unregister(proc.pid)


def run_bytes(
    argv: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    input: bytes | None = None,
    check: bool = True,
) -> tuple[int, bytes, bytes]:
    """Like :func:`run` for binary output (git -z listings, blobs). Returns (returncode, stdout, stderr)."""
    argv = [str(a) for a in argv]
    proc = start_bytes(argv, env=env, cwd=cwd, input=input is not None)
    return collect_bytes(proc, argv, timeout=timeout, input=input, check=check)


def start_bytes(
    argv: Sequence[str], *, env: Mapping[str, str] | None, cwd: str | Path | None, input: bool = False
) -> subprocess.Popen[bytes]:
    """Start what :func:`run_bytes` runs, to be collected by :func:`collect_bytes` (maybe much later)."""
    return _popen(
        [str(a) for a in argv],
        stdin=subprocess.PIPE if input else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
    )


def collect_bytes(
    proc: subprocess.Popen[bytes],
    argv: Sequence[str],
    *,
    timeout: float,
    input: bytes | None = None,
    check: bool = True,
) -> tuple[int, bytes, bytes]:
    """The (returncode, stdout, stderr) of a process :func:`start_bytes` started, as :func:`run_bytes` gives
    them; the timeout counts from now."""
    argv = [str(a) for a in argv]
    try:
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            raise ProcessError(argv, None, "", err.decode("utf-8", "replace")) from None
    except BaseException:
        kill_group(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    finally:
        _unregister(proc.pid)
    if check and proc.returncode != 0:
        raise ProcessError(argv, proc.returncode, "", err.decode("utf-8", "replace"))
    return proc.returncode, out, err
