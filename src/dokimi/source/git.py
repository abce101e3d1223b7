"""Git as a set of small named functions: one question each, -z output, a scrubbed environment.

Every call runs with ``core.hooksPath=/dev/null`` and ``core.fsmonitor=false``, GIT_TERMINAL_PROMPT=0, stdin
closed
and no terminal (its own session), so git and ssh never prompt; an askpass program the environment names still
runs. Failures go through :func:`diagnose` into a SourceError that names the fix.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import re
import subprocess
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Literal, NamedTuple

from dokimi import process
from dokimi.errors import PrerequisiteError, ProcessError, SourceError

GIT_TIMEOUT_S = 600.0

#: GIT_* variables kept from the caller's environment: how a CI system or editor hands git a token or an ssh
#: command, and how tests isolate git from the host's configuration. Everything else GIT_* is dropped.
KEPT_GIT_VARS = frozenset(
    {
        "GIT_ASKPASS",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_SSH_VARIANT",
        "GIT_SSL_CAINFO",
        "GIT_SSL_CAPATH",
        "GIT_SSL_NO_VERIFY",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_NOSYSTEM",
        "GIT_TEMPLATE_DIR",
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "GIT_AUTHOR_DATE",
        "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL",
        "GIT_COMMITTER_DATE",
    }
)

SAFE_CONFIG = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.quotePath=false")

FULL_SHA = re.compile(r"^[0-9a-f]{40}$")
HEX = re.compile(r"^[0-9a-f]{4,40}$")


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The caller's environment without GIT_* (except KEPT_GIT_VARS), non-interactive, C locale."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in KEPT_GIT_VARS}
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["LC_ALL"] = "C"
    env["LANGUAGE"] = "C"
    env.pop("GIT_DIR", None)
    env.pop("GIT_WORK_TREE", None)
    if extra:
        env.update(extra)
    return env


def git_argv(args: Sequence[str], *, git_dir: Path | None = None, cwd: Path | None = None) -> list[str]:
    argv = ["git", *SAFE_CONFIG]
    if git_dir is not None:
        argv += ["--git-dir", str(git_dir)]
    return [*argv, *args]


#: Commands started before they are asked for (:func:`start_ahead`), by (argv, cwd): the process and the
#: environment it got.
_AHEAD: dict[tuple[tuple[str, ...], str | None], tuple[subprocess.Popen[bytes], dict[str, str]]] = {}


def start_ahead(args: Sequence[str], *, git_dir: Path | None = None, cwd: Path | None = None) -> None:
    """Start ``git ARGS`` now; the first :func:`run_git` of the same command (same arguments, git directory,
    directory and environment, no input) collects it instead of starting it again. The scan's entry point
    starts the working tree's listing this way before it imports the scan's modules, so git runs while
    Python imports. A command started ahead and never asked for is stopped when the process exits."""
    argv = git_argv(args, git_dir=git_dir)
    key = (tuple(argv), str(cwd) if cwd is not None else None)
    if key in _AHEAD:
        return
    env = git_env()
    try:
        proc = process.start_bytes(argv, env=env, cwd=cwd)
    except (OSError, PrerequisiteError):
        return  # asked for later, it fails the usual way
    if not _AHEAD:
        atexit.register(stop_ahead)
    _AHEAD[key] = (proc, env)


def stop_ahead() -> None:
    """Stop the commands started ahead that nothing asked for."""
    while _AHEAD:
        _, (proc, _) = _AHEAD.popitem()
        with contextlib.suppress(OSError, ProcessError):
            process.collect_bytes(proc, proc.args, timeout=GIT_TIMEOUT_S, check=False)  # type: ignore[arg-type]


def _started_ahead(
    argv: list[str], cwd: Path | None, env: Mapping[str, str] | None, input: bytes | None
) -> subprocess.Popen[bytes] | None:
    """The process :func:`start_ahead` started for this very command, if any (and taken out)."""
    if not _AHEAD or env is not None or input is not None:
        return None
    found = _AHEAD.pop((tuple(argv), str(cwd) if cwd is not None else None), None)
    if found is None:
        return None
    proc, env_then = found
    if env_then != git_env():  # the environment changed since: not the same command
        with contextlib.suppress(OSError, ProcessError):
            process.collect_bytes(proc, argv, timeout=GIT_TIMEOUT_S, check=False)
        return None
    return proc


def run_git(
    args: Sequence[str],
    *,
    git_dir: Path | None = None,
    cwd: Path | None = None,
    timeout: float = GIT_TIMEOUT_S,
    input: bytes | None = None,
    check: bool = True,
    env: Mapping[str, str] | None = None,
    what: str | None = None,
) -> bytes:
    """Run one git command and return its stdout bytes. A failure raises a diagnosed SourceError."""
    argv = git_argv(args, git_dir=git_dir)
    try:
        ahead = _started_ahead(argv, cwd, env, input)
        if ahead is not None:
            rc, out, err = process.collect_bytes(ahead, argv, timeout=timeout, check=False)
        else:
            rc, out, err = process.run_bytes(
                argv, timeout=timeout, env=git_env(env), cwd=cwd, input=input, check=False
            )
    except ProcessError as exc:  # timeout
        raise SourceError(
            f"git {' '.join(args[:2])} timed out after {timeout:.0f} s",
            hint="check the network and the URL, or raise the timeout",
        ) from exc
    if check and rc != 0:
        raise diagnose(err.decode("utf-8", "replace"), what=what or f"git {args[0]}")
    return out


def run_git_status(
    args: Sequence[str],
    *,
    git_dir: Path | None = None,
    cwd: Path | None = None,
    timeout: float = GIT_TIMEOUT_S,
    input: bytes | None = None,
) -> tuple[int, bytes]:
    """One git command whose exit status the caller reads itself (``git grep``: 1 is "no match"): returns
    (status, stdout); its stderr is not kept.

    Made for a command that prints megabytes while another thread of this process runs Python: the reading
    thread needs the GIL after each read, up to the 5 ms switch interval, and git stops whenever the pipe is
    full. So the pipe is widened (Linux: to the 1 MB an unprivileged process may ask for) and read to its end
    in one blocking call, and the exit is waited for without polling (:func:`subprocess.Popen.wait` with a
    timeout sleeps in growing steps, up to 50 ms past the exit). A timer stops a command past ``timeout``:
    that raises a SourceError, as in :func:`run_git`."""
    with _streaming(args, git_dir=git_dir, cwd=cwd, timeout=timeout) as (proc, timed_out):
        assert proc.stdin is not None and proc.stdout is not None
        _widen_pipe(proc.stdout)
        # git grep reads all its patterns before it prints anything: writing them first cannot deadlock
        _write_all(proc.stdin, input or b"")
        try:
            proc.stdin.close()
        except BrokenPipeError:  # git stopped before reading it all (a bad pattern): its status says why
            pass
        out = proc.stdout.read()
        proc.wait()
    if timed_out.is_set():
        raise SourceError(f"git {' '.join(args[:2])} timed out after {timeout:.0f} s")
    return proc.returncode, out


@contextlib.contextmanager
def _streaming(
    args: Sequence[str], *, git_dir: Path | None = None, cwd: Path | None = None, timeout: float
) -> Iterator[tuple[subprocess.Popen[bytes], threading.Event]]:
    """A git command read as it prints, in its own process group. A timer kills the group past ``timeout``
    (the event says whether it fired); on leaving, the command is reaped, and killed first when the body
    did not finish."""
    proc = process.spawn(git_argv(args, git_dir=git_dir), env=git_env(), cwd=cwd)
    timed_out = threading.Event()

    def stop_command() -> None:
        timed_out.set()
        process.kill_group(proc.pid)

    timer = threading.Timer(timeout, stop_command)
    timer.daemon = True
    timer.start()
    finished = False
    try:
        yield proc, timed_out
        finished = True
    finally:
        timer.cancel()
        if not finished:
            process.kill_group(proc.pid)
        process.stop(proc)


def _widen_pipe(stream: IO[bytes]) -> None:
    """Ask for a 1 MB pipe where the system allows it (Linux); otherwise keep the default."""
    try:
        import fcntl  # POSIX only

        fcntl.fcntl(stream.fileno(), fcntl.F_SETPIPE_SZ, 1 << 20)  # type: ignore[attr-defined,unused-ignore]
    except (ImportError, AttributeError, OSError):
        pass


def run_git_text(args: Sequence[str], **kwargs: object) -> str:
    return run_git(args, **kwargs).decode("utf-8", "replace")  # type: ignore[arg-type]


# --- diagnosis of a failed git call ---------------------------------------------------------

#: What git or ssh prints when it would have prompted, and the fix for it.
PROMPT_DIAGNOSES: tuple[tuple[str, str], ...] = (
    (
        "Host key verification failed.",
        "add the host to ~/.ssh/known_hosts before the run (ssh-keyscan HOST >> ~/.ssh/known_hosts)",
    ),
    (
        "Permission denied (publickey",
        "load a key with access into ssh-agent (ssh-add KEY) before the run",
    ),
    (
        "terminal prompts disabled",
        "set up a credential helper holding a token for this https URL before the run "
        "(for GitHub: gh auth setup-git); dokimi never prompts",
    ),
    (
        "Authentication failed",
        "the credentials git was given were refused: refresh the token in your credential helper",
    ),
    (
        "could not read Password",
        "set up a credential helper holding a token for this https URL before the run; dokimi never prompts",
    ),
    (
        "could not read Username",
        "set up a credential helper holding a token for this https URL before the run; dokimi never prompts",
    ),
    (
        "passphrase",
        "load the key into ssh-agent (ssh-add KEY) before the run; dokimi never prompts for a passphrase",
    ),
)


def diagnose(stderr: str, *, what: str) -> SourceError:
    """Turn git's stderr into a SourceError: a prompt it would have shown names that line and the fix; any
    other failure shows its last ``fatal:`` line, else its last ``error:`` line, else its last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for needle, fix in PROMPT_DIAGNOSES:
        for line in lines:
            if needle in line:
                return SourceError(f"{what} failed: {line}", hint=fix)
    for prefix in ("fatal:", "error:"):
        found = [line for line in lines if line.startswith(prefix)]
        if found:
            return SourceError(f"{what} failed: {found[-1]}")
    return SourceError(f"{what} failed: {lines[-1] if lines else '(git printed nothing)'}")


# --- named questions -------------------------------------------------------------------------------------


def git_dir_of(path: Path) -> Path | None:
    """The git directory of a work tree or bare repository at ``path``; None when it is not a repository."""
    try:
        out = run_git_text(["rev-parse", "--absolute-git-dir"], cwd=path, what="git rev-parse").strip()
    except SourceError:
        return None
    return Path(out) if out else None


REPO_DIRS_ARGS = ("rev-parse", "--absolute-git-dir", "--show-toplevel")
LS_FILES_WORKTREE_ARGS = ("ls-files", "-z", "-t", "--stage", "--cached", "--others", "--exclude-standard")


def start_worktree_listing(path: Path) -> None:
    """Start, ahead of need (:func:`start_ahead`), what opening the working tree ``path`` asks git: its
    directories, its listing and (for a ``.git`` directory inside it, the usual case) its configuration.
    What turns out not to be asked for (a subdirectory, a linked worktree) is stopped at exit."""
    start_ahead(REPO_DIRS_ARGS, cwd=path)
    start_ahead(LS_FILES_WORKTREE_ARGS, cwd=path)
    if (path / ".git").is_dir():
        start_ahead(("config", "-z", "--get-regexp", REPO_CONFIG), git_dir=path / ".git")


def repo_dirs(path: Path) -> tuple[Path | None, Path | None]:
    """(git directory, top of the work tree) of ``path`` in one ``git rev-parse`` where both exist; the top is
    None for a bare repository or a .git directory, both are None outside a repository."""
    try:
        out = run_git_text(REPO_DIRS_ARGS, cwd=path, what="git rev-parse").splitlines()
    except SourceError:
        return git_dir_of(path), None
    if len(out) != 2 or not out[0] or not out[1]:
        return git_dir_of(path), toplevel(path)
    return Path(out[0]), Path(out[1])


def toplevel(path: Path) -> Path | None:
    try:
        out = run_git_text(["rev-parse", "--show-toplevel"], cwd=path, what="git rev-parse").strip()
    except SourceError:
        return None
    return Path(out) if out else None


def rev_parse_commit(git_dir: Path, rev: str) -> str | None:
    """The full SHA of the commit ``rev`` names, or None when it does not resolve to a commit."""
    out = run_git(
        ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"],
        git_dir=git_dir,
        check=False,
    )
    sha = out.decode().strip()
    return sha if FULL_SHA.match(sha) else None


def rev_parse_many(git_dir: Path, revs: Sequence[str]) -> dict[str, str | None]:
    """Resolve many revisions in one batch (``cat-file --batch-check``), commits only; None when
    unresolved."""
    if not revs:
        return {}
    unique = list(dict.fromkeys(revs))
    request = "".join(f"{rev}^{{commit}}\n" for rev in unique).encode()
    out = run_git(["cat-file", "--batch-check=%(objectname) %(objecttype)"], git_dir=git_dir, input=request)
    answers = out.decode().splitlines()
    result: dict[str, str | None] = {}
    for rev, answer in zip(unique, answers, strict=False):
        parts = answer.split()
        result[rev] = (
            parts[0] if len(parts) == 2 and parts[1] == "commit" and FULL_SHA.match(parts[0]) else None
        )
    return result


def commit_dates(git_dir: Path, shas: Sequence[str]) -> dict[str, str]:
    """Committer date (strict ISO 8601) of each commit, in one ``git log --no-walk`` call."""
    if not shas:
        return {}
    out = run_git_text(
        ["log", "--no-walk=unsorted", "--format=%H %cI", *dict.fromkeys(shas)], git_dir=git_dir
    )
    dates = {}
    for line in out.splitlines():
        sha, _, date = line.partition(" ")
        dates[sha] = date
    return dates


EntryKind = Literal["blob", "tree", "commit"]


class TreeEntry(NamedTuple):
    """One entry of a tree listing: a file (mode 100644/100755), a symlink (120000) or a submodule (160000).

    A named tuple, not a dataclass: a listing builds one per file (50,000 in a large tree), and a tuple is
    made
    in a third of the time."""

    path: str
    mode: str
    kind: EntryKind
    oid: str | None
    """None for a working-tree file (read from disk)."""

    @property
    def is_symlink(self) -> bool:
        return self.mode == "120000"

    @property
    def is_submodule(self) -> bool:
        return self.kind == "commit"


@contextlib.contextmanager
def nogc() -> Iterator[None]:
    """Python's cyclic garbage collector paused for a block that builds many objects and frees few.

    A listing of 50,000 files, and a scan over it, allocate so many containers that the collector runs
    hundreds of times and finds nothing to free: in the scan's benchmark that is a quarter of its CPU time.
    Reference counting still frees everything as usual; a cycle made inside the block waits for the next
    collection after it. Nesting is fine: only the outermost block turns the collector back on."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def ls_tree(git_dir: Path, rev: str, *, parents: dict[str, None] | None = None) -> dict[str, TreeEntry]:
    """Every file, symlink and submodule of ``rev``'s tree: one ``git ls-tree -r -z`` call.

    The entries keep git's order, which is the byte order of the paths. The listing is parsed as git writes
    it, a chunk at a time, so the parse (most of a listing's cost in Python) runs while git is still listing:
    at 50,000 files that is one ls-tree's time instead of one and a half. A failure is diagnosed from a second
    run (the streaming run does not keep git's stderr); a listing that takes longer than GIT_TIMEOUT_S is
    stopped.

    With ``parents``, also fills it with the directory of every entry ('' for the root), in listing order,
    each once: worked out a chunk at a time while git is still listing, where it costs little."""
    args = ["ls-tree", "-r", "-z", "--full-tree", rev]
    with _streaming(args, git_dir=git_dir, timeout=GIT_TIMEOUT_S) as (proc, timed_out):
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.close()
        entries, torn = _parse_listing(proc.stdout, parents)
    if timed_out.is_set():
        raise SourceError(f"git ls-tree {rev} timed out after {GIT_TIMEOUT_S:.0f} s")
    if proc.returncode != 0:
        run_git(args, git_dir=git_dir, what=f"git ls-tree {rev}")  # raises the diagnosed error
        raise SourceError(f"git ls-tree {rev} failed (exit status {proc.returncode})")
    if torn:
        raise SourceError(f"git ls-tree {rev}: the listing does not end with NUL")
    return entries


def _parse_listing(
    stream: IO[bytes], parents: dict[str, None] | None = None
) -> tuple[dict[str, TreeEntry], bool]:
    """``git ls-tree -r -z`` records read from ``stream`` as they come: each chunk is cut after its last NUL
    and decoded whole records at a time, so no path is split. Also whether bytes were left after the last
    NUL (a listing cut short). ``parents`` (when given) gets the directory of each entry, as
    :func:`ls_tree` says."""
    make = tuple.__new__
    entries: dict[str, TreeEntry] = {}
    rest = b""
    read = stream.read1  # type: ignore[attr-defined]
    with nogc():
        while True:
            chunk = read(1 << 16)
            if not chunk:
                break
            data = rest + chunk if rest else chunk
            cut = data.rfind(b"\0") + 1
            rest = data[cut:]
            if not cut:
                continue
            records = data[:cut].decode("utf-8", "surrogateescape").split("\0")
            records.pop()  # the empty string after the last NUL
            for record in records:
                meta, path = record.split("\t", 1)
                mode, kind, oid = meta.split(" ")
                entries[path] = make(TreeEntry, (path, mode, kind, oid))
            if parents is not None:  # the path starts after the first tab, as split above reads it
                parents.update(dict.fromkeys([r[r.index("\t") + 1 :].rpartition("/")[0] for r in records]))
    return entries, bool(rest)


def check_attr(
    paths: Iterable[str],
    attr: str,
    *,
    git_dir: Path | None = None,
    work_tree: Path | None = None,
    attributes_files: Sequence[TreeEntry] | None = None,
) -> dict[str, str]:
    """The value of ``attr`` for each path as git gives it: ``set``, ``unset``, ``unspecified`` or the value
    (``diff=python`` -> ``python``). ONE ``git check-attr --stdin`` call for every path.

    With ``attributes_files`` (the ``.gitattributes`` entries of a commit's tree), the attributes are those of
    that commit: the entries go into a scratch index that ``check-attr --cached`` reads (git 2.39 has no
    ``check-attr --source``; that came in 2.40), so neither a working tree nor the repository's own index
    counts. Without, those of the working tree ``work_tree`` (its files, then its index), as any git command
    run there sees them. Either way the repository's info/attributes and the user's and the system's attribute
    files apply, as they do for every git command."""
    unique = sorted(set(paths))
    if not unique:
        return {}
    request = b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in unique)
    argv = ["check-attr", "-z", "--stdin", attr]
    if attributes_files is None:
        if work_tree is None:
            raise SourceError("check-attr needs a commit's attribute files or a working tree")
        out = run_git(argv, cwd=work_tree, input=request, what="git check-attr")
    else:
        if git_dir is None:
            raise SourceError("check-attr of a commit needs its repository")
        import tempfile  # here only: a scan of a working tree never needs a scratch index

        with tempfile.TemporaryDirectory(prefix="dokimi-attr-") as scratch:
            env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
            if attributes_files:
                info = b"".join(
                    f"{e.mode} {e.oid}\t".encode() + e.path.encode("utf-8", "surrogateescape") + b"\0"
                    for e in attributes_files
                )
                run_git(
                    ["update-index", "-z", "--index-info"],
                    git_dir=git_dir,
                    cwd=Path(scratch),
                    env=env,
                    input=info,
                    what="git update-index",
                )
            out = run_git(
                [*argv[:1], "--cached", *argv[1:]],
                git_dir=git_dir,
                cwd=Path(scratch),
                env=env,
                input=request,
                what="git check-attr",
            )
    fields = out.split(b"\0")
    values: dict[str, str] = {}
    for i in range(0, len(fields) - 2, 3):
        values[fields[i].decode("utf-8", "surrogateescape")] = fields[i + 2].decode(
            "utf-8", "surrogateescape"
        )
    return values


#: The configuration an opened repository reads, asked in ONE ``git config`` call when it is opened: the
#: origin's URL, whether a remote is a promisor (a blob-less clone), and for git's binary rule the user's
#: attributes file and the diff drivers' ``binary`` flags. Each reader filters it with its own regexp.
REPO_CONFIG = r"^remote\.origin\.url$|remote\..*\.promisor|^core\.attributesfile$|^diff\..+\.binary$"


def config_values(git_dir: Path | None, regexp: str, *, cwd: Path | None = None) -> dict[str, str | None]:
    """Configuration keys matching ``regexp`` (lower-case section and name), with their last value; None for a
    key written without ``=`` (a boolean true). One ``git config --get-regexp``; none set -> {}."""
    out = run_git(["config", "-z", "--get-regexp", regexp], git_dir=git_dir, cwd=cwd, check=False)
    values: dict[str, str | None] = {}
    for record in out.split(b"\0"):
        if not record:
            continue
        key, newline, value = record.decode("utf-8", "surrogateescape").partition("\n")
        values[key] = value if newline else None
    return values


def config_matching(config: dict[str, str | None], regexp: str) -> dict[str, str | None]:
    """The keys of ``config`` (as :func:`config_values` read it) that ``regexp`` matches, as ``git config
    --get-regexp`` would match them."""
    pattern = re.compile(regexp)
    return {key: value for key, value in config.items() if pattern.search(key)}


def config_bool(value: str | None) -> bool | None:
    """A configuration value read as git reads a boolean (None when it is not one)."""
    if value is None:
        return True
    lowered = value.strip().lower()
    if lowered in ("true", "yes", "on"):
        return True
    if lowered in ("false", "no", "off", ""):
        return False
    try:
        return int(lowered, 0) != 0
    except ValueError:
        return None


class WorktreeListing(NamedTuple):
    paths: list[str]
    """Tracked and untracked-but-not-ignored files, sorted."""
    submodules: set[str]
    """Paths of the index's gitlinks (mode 160000)."""
    indexed: list[str]
    """Every path of the index."""


def ls_files_worktree(work_tree: Path) -> WorktreeListing:
    """The files of a working tree, its submodules and its index, in ONE ``git ls-files`` call.

    ``-t`` tags each record, so the two kinds cannot be confused whatever the names: ``? PATH`` for an
    untracked file, ``H MODE OID STAGE<TAB>PATH`` (another letter than ``?`` for a skip-worktree or unmerged
    entry) for one of the index."""
    out = run_git(LS_FILES_WORKTREE_ARGS, cwd=work_tree)
    paths: set[str] = set()
    submodules: set[str] = set()
    indexed: dict[str, None] = {}
    for record in out.split(b"\0"):
        if not record:
            continue
        if record.startswith(b"? "):
            paths.add(record[2:].decode("utf-8", "surrogateescape"))
            continue
        info, _, raw = record[2:].partition(b"\t")
        path = raw.decode("utf-8", "surrogateescape")
        paths.add(path)
        indexed[path] = None
        if info.startswith(b"160000 "):
            submodules.add(path)
    return WorktreeListing(sorted(paths), submodules, list(indexed))


class CatFile:
    """One ``git cat-file --batch`` process for a snapshot: blobs are read by oid, many per round trip."""

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def _start(self) -> subprocess.Popen[bytes]:
        if self._proc is None:
            self._proc = process.spawn(git_argv(["cat-file", "--batch"], git_dir=self.git_dir), env=git_env())
        return self._proc

    def read_many(self, oids: Iterable[str]) -> dict[str, bytes | None]:
        """Contents of each oid (None when missing), in one pipelined exchange."""
        wanted = list(dict.fromkeys(oids))
        if not wanted:
            return {}
        with self._lock:
            proc = self._start()
            assert proc.stdin is not None and proc.stdout is not None
            request = "".join(f"{oid}\n" for oid in wanted).encode()
            writer = threading.Thread(target=_write_all, args=(proc.stdin, request), daemon=True)
            writer.start()
            result: dict[str, bytes | None] = {}
            for oid in wanted:
                header = proc.stdout.readline()
                if not header:
                    raise SourceError(f"git cat-file stopped while reading {oid}")
                parts = header.split()
                if len(parts) == 2 and parts[1] == b"missing":
                    result[oid] = None
                    continue
                size = int(parts[2])
                data = proc.stdout.read(size)
                proc.stdout.read(1)  # the newline after each object
                result[oid] = data
            writer.join()
            return result

    def read(self, oid: str) -> bytes | None:
        return self.read_many([oid])[oid]

    def close(self) -> None:
        if self._proc is not None:
            process.stop(self._proc)
            self._proc = None

    def __enter__(self) -> CatFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _write_all(stream: IO[bytes], data: bytes) -> None:
    try:
        stream.write(data)
        stream.flush()
    except BrokenPipeError:
        pass


def tree_changes(
    git_dir: Path, reference: str, revs: Sequence[str]
) -> dict[str, tuple[list[str], list[str]]]:
    """For each of ``revs``: the paths its tree has and ``reference``'s lacks, and the paths ``reference`` has
    and its tree lacks, as ``rev -> (added, deleted)``. ONE ``git diff-tree --stdin`` for every rev; its cost
    follows the differences, not the size of the trees. No rename detection: a rename is a delete and an add.
    """
    unique = list(dict.fromkeys(revs))
    if not unique:
        return {}
    out = run_git(
        ["diff-tree", "-r", "-z", "--always", "--no-renames", "--name-status", "--stdin"],
        git_dir=git_dir,
        input="".join(f"{rev} {reference}\n" for rev in unique).encode(),
        what="git diff-tree",
    )
    changes: dict[str, tuple[list[str], list[str]]] = {rev: ([], []) for rev in unique}
    current: tuple[list[str], list[str]] | None = None
    tokens = out.split(b"\0")
    i = 0
    while i < len(tokens):
        token = tokens[i].decode("utf-8", "surrogateescape").strip()
        i += 1
        if not token:
            continue
        if FULL_SHA.match(token):  # the header of one rev's diff: `<rev> <reference>` diffs reference -> rev
            current = changes.setdefault(token, ([], []))
            continue
        if current is None or i >= len(tokens):
            raise SourceError(f"git diff-tree: unexpected output {token!r}")
        path = tokens[i].decode("utf-8", "surrogateescape")
        i += 1
        if token == "A":
            current[0].append(path)
        elif token == "D":
            current[1].append(path)
    return changes
