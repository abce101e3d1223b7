"""dokimi's isolation helper for a repository's grader: run the code under test on a copy of the workspace, in
a process that can read none of the reference and write nothing the grader or dokimi reads. Standard library
only; it never imports dokimi. Mounted read-only at /eval/support in every grade container.

A grader that imports or runs workspace code runs the agent's code, with the grader's powers: in the grade
container it could read every task's oracle patch and hidden tests under /eval/content, the upstream history
under /eval/source, and write the workspace that a regrade reads again. This helper runs a command so that it
cannot:

- **a box of its own**: a private directory (mode 0700) holding ``tree/`` (a copy of the workspace, without
  ``.git`` unless asked, links copied as links, FIFOs and devices left out), the files you name (``--add
  SRC=NAME``: your hidden tests, a conftest.py of yours, a report directory), and a private ``tmp/`` and
  ``home/`` (``TMPDIR`` and ``HOME``). The command runs in the box; the workspace itself is never touched;
- **Landlock** (a Linux security module any process may use on itself, with no privilege; Linux 5.13 or
  later): before the command starts, its process gives up every file right but reading and running the
  system (``/usr``, ``/etc``, ``/opt``, ...), reading and writing the box, and the few devices a program
  needs. So ``/eval`` (the content, the source, the run directory with dokimi's files and the real workspace;
  only ``/eval/support`` stays readable) and ``/tmp`` (where the grader keeps its own files) can be neither
  read nor listed, and nothing outside the box can be written. The restriction is inherited by every child
  and cannot be undone. A confined process also cannot ptrace or read the memory of the grader, and on Linux
  6.12 or later cannot signal it or connect to its abstract unix sockets;
- **a clean environment**: ``PATH`` and ``LANG`` of the caller, ``HOME`` and ``TMPDIR`` in the box,
  ``PYTHONDONTWRITEBYTECODE=1``, ``PYTHONNOUSERSITE=1``, ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``, and what you
  pass with ``--env``; nothing else of the grader's environment.

The helper checks, inside the confined process and before the command runs, that /eval/content is out of
reach; when the kernel cannot isolate (no Landlock: an older kernel, a seccomp profile that refuses it) it
exits :data:`UNAVAILABLE` and says why, and runs nothing: it never runs the command unconfined.

What the command decides is still its own: its exit code, its output and any report it writes in the box are
the code under test's to forge. Decide the verdict in your grader, from data you check (the expected test ids
from your own files, each with its outcome in the report), never from an exit code alone.
``pytest_stream.py`` beside this file is a pytest runner whose report your grader reads with
``read_stream`` (plugin autoload off; a plugin registered by the code under test is reported).

Command line (each ``run`` exits with the command's code; ``box`` prints the box's path):

    python3 -I /eval/support/isolated.py box DIR [--workspace /eval/run/workspace] [--with-git] \\
        [--add SRC=NAME ...]
    python3 -I /eval/support/isolated.py run DIR [--cwd tree] [--timeout S] [--env K=V ...] \\
        [--writable PATH ...] [--readable PATH ...] -- CMD...
    python3 -I /eval/support/isolated.py check

From Python (the grader imports it from /eval/support):

    sys.path.insert(0, "/eval/support")
    import isolated
    box = isolated.Box.make(Path(tmp) / "box", workspace, add={"hidden_tests": task_dir / "hidden_tests"})
    ran = box.run(["python3", "-m", "pytest", "-q", "tests"], cwd=box.tree, timeout=300)
    ran, stream = box.pytest(["hidden_tests"], paths=[box.tree], timeout=300)   # stream: pytest_stream.Stream
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
UNAVAILABLE = 3
"""Exit code of ``run`` and ``check`` when this kernel cannot isolate: nothing was run."""
OUTPUT_TAIL = 8000
PROBE_DIR = "/eval/probe"
"""dokimi's grader isolation probe (``repo tasks check``) reports through this directory when it exists."""

# --- Landlock (linux/landlock.h) ----------------------------------------------------------------------------

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
READ = EXECUTE | READ_FILE | READ_DIR
#: Top-level directories whose files the confined process may read (everything but /eval and /tmp).
NOT_READABLE = ("eval", "tmp", "lost+found")
#: Devices a program needs to write (besides /dev/shm, where POSIX semaphores live).
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")


class IsolationUnavailable(Exception):
    """The kernel cannot confine a process here (no Landlock)."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]  # fmt: skip


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def landlock_abi() -> int:
    """The Landlock ABI version of this kernel; :class:`IsolationUnavailable` when there is none."""
    libc = _libc()
    version = libc.syscall(
        SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION)
    )
    if version < 0:
        code = ctypes.get_errno()
        raise IsolationUnavailable(
            f"Landlock is not available here ({os.strerror(code)}): Linux 5.13 or later with Landlock "
            "enabled is needed, and a container's seccomp profile must allow its system calls"
        )
    return int(version)


def handled_rights(abi: int) -> int:
    """Every file right this ABI knows (so none is left unrestricted)."""
    rights = (MAKE_SYM << 1) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def confine(readable: Sequence[str], writable: Sequence[str]) -> None:
    """Confine this process (and every child it starts) to reading ``readable`` and reading and writing
    ``writable`` (paths that do not exist are skipped); nothing else of the file system can be opened.
    Raises :class:`IsolationUnavailable` when the kernel cannot."""
    abi = landlock_abi()
    handled = handled_rights(abi)
    libc = _libc()
    attr = _RulesetAttr(handled, 0, (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else 8
    ruleset = libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise IsolationUnavailable(f"landlock_create_ruleset failed: {os.strerror(ctypes.get_errno())}")
    try:
        for path, rights in [*((p, READ) for p in readable), *((p, handled) for p in writable)]:
            _allow(libc, int(ruleset), path, rights & handled)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise IsolationUnavailable(f"no_new_privs could not be set: {os.strerror(ctypes.get_errno())}")
        if libc.syscall(SYS_RESTRICT_SELF, ctypes.c_int(int(ruleset)), ctypes.c_uint32(0)) != 0:
            raise IsolationUnavailable(f"landlock_restrict_self failed: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(int(ruleset))


def _allow(libc: Any, ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # nothing there: nothing to allow
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= FILE_RIGHTS
        rule = _PathBeneath(rights, fd)
        done = libc.syscall(SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH),
                            ctypes.byref(rule), ctypes.c_uint32(0))  # fmt: skip
        if done != 0:
            raise IsolationUnavailable(f"landlock_add_rule({path}) failed: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


def system_paths() -> list[str]:
    """What a confined process may read: every top-level directory but /eval and /tmp, and /eval/support."""
    paths = [f"/{name}" for name in sorted(os.listdir("/")) if name not in NOT_READABLE]
    return [*paths, str(HERE)]


def policy(box: Path, *, readable: Sequence[str] = (), writable: Sequence[str] = ()) -> dict[str, list[str]]:
    """What the confined process of ``box`` may read and write."""
    rw = [str(box), "/dev/shm", *DEVICES, *writable]
    if os.path.isdir(PROBE_DIR):
        rw.append(PROBE_DIR)
    return {"readable": [*system_paths(), *readable], "writable": rw}


def confined_exec(plan: Mapping[str, Any], argv: Sequence[str]) -> int:
    """In the child: confine, check that /eval/content is out of reach, then become ``argv``."""
    try:
        confine(plan["readable"], plan["writable"])
    except IsolationUnavailable as exc:
        print(f"isolated.py: {exc}; nothing was run", file=sys.stderr)
        return UNAVAILABLE
    for secret in ("/eval/content", "/eval/run"):
        if os.path.exists(secret):
            try:
                os.listdir(secret)
            except PermissionError:
                continue
            print(
                f"isolated.py: {secret} is still readable after confinement; nothing was run", file=sys.stderr
            )
            return UNAVAILABLE
    try:
        os.execvp(argv[0], list(argv))
    except OSError as exc:
        print(f"isolated.py: cannot run {argv[0]!r}: {exc.strerror}", file=sys.stderr)
        return 127


# --- the box ------------------------------------------------------------------------------------------------


def copy_tree(source: Path, target: Path, *, with_git: bool = False) -> None:
    """Copy ``source`` into the new directory ``target``: links as links (never followed), regular files and
    directories; FIFOs, sockets and devices left out; ``.git`` left out unless ``with_git``; bytecode
    (``__pycache__``, ``.pyc``) left out."""
    target.mkdir(mode=0o755)
    for dirpath, dirnames, filenames in os.walk(source):
        rel = os.path.relpath(dirpath, source)
        into = target if rel == "." else target / rel
        kept = []
        for name in dirnames:
            path = os.path.join(dirpath, name)
            if name == "__pycache__" or (rel == "." and name == ".git" and not with_git):
                continue
            if os.path.islink(path):
                os.symlink(os.readlink(path), into / name)
                continue
            (into / name).mkdir()
            kept.append(name)
        dirnames[:] = kept
        for name in filenames:
            path = os.path.join(dirpath, name)
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                os.symlink(os.readlink(path), into / name)
            elif stat.S_ISREG(info.st_mode) and not name.endswith((".pyc", ".pyo")):
                shutil.copyfile(path, into / name, follow_symlinks=False)
                os.chmod(into / name, 0o755 if info.st_mode & 0o111 else 0o644)


@dataclass(frozen=True)
class Run:
    """How a confined command ended: its exit code (None: stopped at its timeout) and the end of its output
    (stdout and stderr together)."""

    returncode: int | None
    output: str

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


@dataclass(frozen=True)
class Box:
    """A private directory: ``tree/`` (the workspace's copy), what was added, ``tmp/`` and ``home/``."""

    root: Path
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment for every command."""

    @property
    def tree(self) -> Path:
        return self.root / "tree"

    @classmethod
    def make(
        cls,
        root: Path,
        workspace: Path,
        *,
        add: Mapping[str, Path] | None = None,
        with_git: bool = False,
    ) -> Box:
        """A new box at ``root`` (which must not exist): the workspace copied to ``tree/``, each of ``add``
        (name -> a file or directory) copied to ``root/name``."""
        root.mkdir(mode=0o700)
        os.chmod(root, 0o700)
        copy_tree(workspace, root / "tree", with_git=with_git)
        for name, source in (add or {}).items():
            if "/" in name or name in ("", ".", "..", "tree", "tmp", "home"):
                raise ValueError(f"--add {name}: a plain name other than tree, tmp and home")
            if source.is_dir():
                copy_tree(source, root / name)
            else:
                shutil.copyfile(source, root / name)
        for private in ("tmp", "home"):
            (root / private).mkdir(mode=0o700)
        return cls(root)

    def environment(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL") if k in os.environ}
        env.update(
            HOME=str(self.root / "home"), TMPDIR=str(self.root / "tmp"), PYTHONDONTWRITEBYTECODE="1",
            PYTHONNOUSERSITE="1", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
        )  # fmt: skip
        env.update(self.env)
        env.update(extra or {})
        return env

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        timeout: float = 1800,
        env: Mapping[str, str] | None = None,
        writable: Sequence[str] = (),
        readable: Sequence[str] = (),
    ) -> Run:
        """Run ``argv`` confined to this box (module docstring), in ``cwd`` (default: the box), killed with
        its whole process group at the end or at ``timeout``. :class:`IsolationUnavailable` when the kernel
        cannot confine it (nothing ran)."""
        plan = policy(self.root, readable=readable, writable=writable)
        launcher = [sys.executable, "-I", "-B", str(Path(__file__).resolve()), "exec", json.dumps(plan), "--"]
        with tempfile.TemporaryFile() as output:  # unlinked: the command holds it only as its stdout
            proc = subprocess.Popen(
                [*launcher, *argv], cwd=cwd or self.root, env=self.environment(env), stdin=subprocess.DEVNULL,
                stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
            try:
                code: int | None = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                code = None
            finally:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                proc.wait()
            size = output.seek(0, os.SEEK_END)
            output.seek(max(0, size - OUTPUT_TAIL))
            text = output.read().decode("utf-8", "replace")
        if code == UNAVAILABLE and "isolated.py: " in text and "nothing was run" in text:
            raise IsolationUnavailable(text.strip().splitlines()[-1])
        return Run(code, text[-OUTPUT_TAIL:])

    def pytest(
        self,
        args: Sequence[str],
        *,
        paths: Sequence[Path] = (),
        root: Path | None = None,
        timeout: float = 1800,
    ) -> tuple[Run, Any]:
        """Run dokimi's pytest runner (pytest_stream.py: plugin autoload off, an isolated interpreter, each
        outcome streamed) on ``args`` in this box, with ``root`` as rootdir (default: the box) and ``paths``
        on sys.path; (the run, the stream read back: a ``Stream``, or why there is no report)."""
        read_stream = _sibling("pytest_stream").read_stream
        out = self.root / f"stream-{os.urandom(8).hex()}.jsonl"
        argv = [sys.executable, "-I", "-B", str(HERE / "pytest_stream.py"), "--stream", str(out)]
        argv += ["--root", str(root or self.root)]
        for path in paths:
            argv += ["--path", str(path)]
        ran = self.run([*argv, "--", *args], cwd=root or self.root, timeout=timeout)
        return ran, read_stream(str(out))


def _sibling(name: str) -> Any:
    """A module beside this file (in /eval/support), loaded by its path."""
    spec = importlib.util.spec_from_file_location(f"dokimi_support_{name}", HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# --- command line -------------------------------------------------------------------------------------------


def _pairs(values: Sequence[str], what: str) -> dict[str, str]:
    found = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key:
            raise SystemExit(f"isolated.py: {what} {value!r}: expected NAME=VALUE")
        found[key] = rest
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="isolated.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    make = sub.add_parser("box", help="make a box: the workspace copied, and the files you name")
    make.add_argument("dir", type=Path)
    make.add_argument("--workspace", type=Path, default=Path("/eval/run/workspace"))
    make.add_argument("--with-git", action="store_true", help="copy the workspace's .git too")
    make.add_argument("--add", action="append", default=[], metavar="SRC=NAME")
    run = sub.add_parser("run", help="run a command confined to a box")
    run.add_argument("dir", type=Path)
    run.add_argument("--cwd", default="tree", help="relative to the box (default: tree)")
    run.add_argument("--timeout", type=float, default=1800)
    run.add_argument("--env", action="append", default=[], metavar="K=V")
    run.add_argument("--writable", action="append", default=[], metavar="PATH")
    run.add_argument("--readable", action="append", default=[], metavar="PATH")
    sub.add_parser("check", help="exit 0 when this kernel can isolate, else 3 with the reason")
    launch = sub.add_parser("exec")  # internal: the confined child
    launch.add_argument("plan")
    given = list(sys.argv[1:] if argv is None else argv)
    cut = given.index("--") if "--" in given else len(given)
    args = parser.parse_args(given[:cut])
    command = given[cut + 1 :]
    if args.step == "check":
        try:
            print(f"Landlock ABI {landlock_abi()}: isolation available")
        except IsolationUnavailable as exc:
            print(f"isolated.py: {exc}", file=sys.stderr)
            return UNAVAILABLE
        return 0
    if args.step == "exec":
        return confined_exec(json.loads(args.plan), command)
    if args.step == "box":
        added = {
            name: Path(src) for name, src in ((v.partition("=")[2], v.partition("=")[0]) for v in args.add)
        }
        Box.make(args.dir, args.workspace, add=added, with_git=args.with_git)
        print(args.dir)
        return 0
    if not command:
        parser.error("run needs a command after --")
    box = Box(args.dir)
    try:
        ran = box.run(
            command, cwd=args.dir / args.cwd, timeout=args.timeout, env=_pairs(args.env, "--env"),
            writable=args.writable, readable=args.readable,
        )  # fmt: skip
    except IsolationUnavailable as exc:
        print(f"isolated.py: {exc}", file=sys.stderr)
        return UNAVAILABLE
    sys.stdout.write(ran.output)
    return 124 if ran.returncode is None else ran.returncode


if __name__ == "__main__":
    sys.exit(main())
