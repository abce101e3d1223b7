"""dokimi's pytest runner: each test's outcome streamed to a file, for a process that is not the test process
to decide the verdict. Standard library only; it never imports dokimi.

The built-in ``builtin:pytest`` runs its tests with it in a container of their own, and a repository's grader
can run it through the isolation helper (``isolated.py``, beside this file in /eval/support):

    python3 -I -B /eval/support/pytest_stream.py --stream FILE --root DIR [--path P ...] [-p NAME ...] \
        -- PYTEST_ARGS...

- ``python3 -I``: no PYTHON* variable, no user site, and nothing of the current directory on ``sys.path`` at
  start-up (a ``sitecustomize.py`` or a ``pytest.py`` of the tree never runs); the import roots (``--path``,
  default ``DIR``, the tree under test) go on ``sys.path`` only after pytest itself is imported, after the
  standard library and before site-packages;
- plugin autoload off (``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``): no ``pytest11`` entry point of any installed
  distribution, nor of a ``*.dist-info`` the tree holds, is loaded; the plugins a run needs are named with
  ``-p``. ``PYTEST_ADDOPTS``, ``PYTEST_PLUGINS`` and the tree's ``addopts`` are ignored;
- the stream ``FILE`` is made fresh (a file already there is an error, never appended to): one JSON object
  per line, ``{"event": "start"}``, then one ``report`` per test phase (``id``, ``when``, ``outcome``), a
  ``collect_error`` per module that does not collect (with the first line of its error), a ``tampered``
  line when a plugin was registered during the run that is neither one of pytest's nor a ``conftest.py``
  the tree held before pytest started (code under test that finds pytest's Config and registers a plugin
  to rewrite outcomes), and ``end`` with pytest's exit status, written when the session finishes. A process
  that ends early (``os._exit`` in imported code) writes no ``end``: :func:`read_stream` then finds no
  report.

Reading it (the grader's side, another process): :func:`read_stream` gives each test's outcome (``failed`` if
any phase failed, ``skipped`` if a phase was skipped, else ``passed`` once its call passed), the collection
errors, what was tampered with, and pytest's exit status; or why there is no usable report.

What this does not stop: the test process runs the code under test, so that code can still forge the
outcomes of its own tests (patch pytest's internals, write lines to the stream itself, return objects that
compare equal to anything). What it cannot do from there is change which tests were expected, the verdict's
rules, or anything outside the process and the tree it was given.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from dataclasses import dataclass, field
from typing import Any

MAX_STREAM_BYTES = 64 * 1024 * 1024
AUTOLOAD_OFF = "PYTEST_DISABLE_PLUGIN_AUTOLOAD"
IGNORED_ENV = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")


# --- the runner (in the test process) -----------------------------------------------------------------------


def conftest_files(root: str, args: list[str]) -> set[str]:
    """The conftest.py files pytest may load for this run (real paths), listed before pytest imports anything
    of the tree: under ``root``, in a directory on the way to a test path the arguments name, or below one.
    A conftest.py elsewhere (in a tree the run only imports from) is not one of them."""
    root = os.path.realpath(root)
    targets = [os.path.realpath(a.split("::", 1)[0]) for a in args if not a.startswith("-")] or [root]
    found = set()
    for directory, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in (".git", "__pycache__")]
        if "conftest.py" not in filenames:
            continue
        here = os.path.realpath(directory)
        if any(t == here or t.startswith(here + os.sep) or here.startswith(t + os.sep) for t in targets):
            found.add(os.path.join(here, "conftest.py"))
    return found


def first_error_line(text: str) -> str:
    """The first ``E `` line of a pytest error text (else its first line), at most 300 characters."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line[1:].strip() for line in lines if line.startswith("E ")]
    return (errors or lines or ["(no message)"])[0][:300]


class Recorder:
    """The pytest plugin that writes the stream.

    Every plugin registered before this one (pytest's own, ``-p``) is trusted; this one is registered before
    pytest imports anything of the tree. A plugin registered later is checked when it is registered
    (``pytest_plugin_registered``) and again at each report (in case it was registered without telling
    pytest): pytest's own objects, modules from outside the tree and the conftest.py files the tree held
    before the run pass; anything else is reported as tampering.
    """

    def __init__(self, fd: int, root: str, conftests: set[str]) -> None:
        self.fd = fd
        self.root = os.path.realpath(root)
        self.conftests = conftests
        self.known: set[int] = set()
        self.manager: Any = None
        self.armed = False

    def write(self, record: dict[str, Any]) -> None:
        os.write(self.fd, (json.dumps(record, sort_keys=True) + "\n").encode("utf-8"))

    def _allowed(self, plugin: Any) -> bool:
        path = getattr(plugin, "__file__", None)
        if type(plugin).__name__ != "module" or not isinstance(path, str):
            defined = plugin.__module__ if isinstance(plugin, type) else type(plugin).__module__
            return str(defined).split(".")[0] in ("_pytest", "pytest", "pluggy")
        real = os.path.realpath(path)
        inside = real == self.root or real.startswith(self.root + os.sep)
        return real in self.conftests or not inside

    def _judge(self, plugin: Any) -> None:
        if id(plugin) in self.known:
            return
        self.known.add(id(plugin))
        if self.armed and not self._allowed(plugin):
            name = self.manager.get_name(plugin) if self.manager is not None else None
            self.write({"event": "tampered", "plugin": str(name or type(plugin).__name__)})

    def pytest_plugin_registered(self, plugin: Any, manager: Any) -> None:
        self.manager = manager
        if plugin is self:
            self.known.add(id(self))
            self.armed = True
            self.write({"event": "start"})
            return
        self._judge(plugin)

    def check(self) -> None:
        """Plugins registered without pytest being told."""
        if self.manager is not None:
            for plugin in self.manager.get_plugins():
                self._judge(plugin)

    def pytest_collectreport(self, report: Any) -> None:
        self.check()
        if report.failed:
            message = first_error_line(str(report.longreprtext))
            self.write({"event": "collect_error", "id": report.nodeid or "(collection)", "message": message})

    def pytest_runtest_logreport(self, report: Any) -> None:
        self.check()
        self.write({"event": "report", "id": report.nodeid, "when": report.when, "outcome": report.outcome})

    def pytest_sessionfinish(self, session: Any, exitstatus: Any) -> None:
        self.check()
        self.write({"event": "end", "exitstatus": int(exitstatus)})


def run(stream: str, root: str, paths: list[str], plugins: list[str], args: list[str]) -> int:
    """Run pytest on ``root`` with the recorder writing ``stream``; pytest's exit status. ``paths`` (default:
    ``root``) go on ``sys.path`` once pytest is imported, after the standard library and before
    site-packages: the tree cannot shadow a standard module, and its code wins over a copy of its package
    installed in the image (editable or not)."""
    for name in IGNORED_ENV:
        os.environ.pop(name, None)
    os.environ[AUTOLOAD_OFF] = "1"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(stream, flags, 0o600)
    os.dup2(2, 1)  # everything the run prints goes to stderr (grade.stderr), as the grader's own output
    conftests = conftest_files(root, args)
    import pytest  # the grade container's, imported once its environment is set (plugin autoload off)

    installed = [i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))]
    at = installed[0] if installed else len(sys.path)
    sys.path[at:at] = paths or [root]
    options = ["-p", "no:cacheprovider", "-o", "addopts=", "--rootdir", root, "-q", "-rN"]
    for name in plugins:
        options += ["-p", name]
    return int(pytest.main([*options, *args], plugins=[Recorder(fd, root, conftests)]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pytest_stream.py", description=__doc__.splitlines()[0])
    parser.add_argument("--stream", required=True, help="the stream file to make (must not exist)")
    parser.add_argument("--root", required=True, help="the tree under test (pytest's rootdir)")
    parser.add_argument(
        "--path", dest="paths", action="append", default=[], help="an import root (default: --root)"
    )
    parser.add_argument("-p", dest="plugins", action="append", default=[], help="a plugin to load")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="pytest's arguments, after --")
    args = parser.parse_args(argv)
    rest = args.args[1:] if args.args[:1] == ["--"] else args.args
    return run(args.stream, args.root, args.paths, args.plugins, rest)


# --- reading it (another process) -------------------------------------------------------------------------


@dataclass
class Stream:
    """What a stream says: each test's outcome, and how the session went."""

    outcomes: dict[str, str] = field(default_factory=dict)
    collect_errors: dict[str, str] = field(default_factory=dict)
    """Each test file pytest could not collect, with the first line of its error."""
    tampered: list[str] = field(default_factory=list)
    """Plugins registered during the run by code that is not pytest's or a conftest.py of the tree."""
    exitstatus: int | None = None


def _outcome(previous: str | None, when: str, outcome: str) -> str | None:
    if outcome == "failed" or previous == "failed":
        return "failed"
    if outcome == "skipped" or previous == "skipped":
        return "skipped"
    if when == "call" and outcome == "passed":
        return "passed"
    return previous


def read_stream(path: str, *, limit: int = MAX_STREAM_BYTES) -> Stream | str:
    """The stream at ``path`` (a regular file, never followed through a link; see :func:`parse_stream`), or
    why it is no report."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return f"the test process wrote no report ({exc.strerror})"
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return "the report is not a regular file"
        data = handle.read(limit + 1)
    if len(data) > limit:
        return f"the report is larger than {limit} bytes"
    return parse_stream(data)


def parse_stream(data: bytes) -> Stream | str:
    """What a stream says, or why it is no report: a line that is not a JSON object, or no ``end`` (the test
    process ended early). A line after the ``end`` counts as tampering."""
    stream = Stream()
    ended = False
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            return f"line {number} of the report is not JSON"
        if not isinstance(record, dict):
            return f"line {number} of the report is not a JSON object"
        event = record.get("event")
        if ended:
            stream.tampered.append(f"a line after the end of the session (line {number})")
            continue
        if event == "report":
            test_id, when, outcome = record.get("id"), record.get("when"), record.get("outcome")
            if isinstance(test_id, str) and isinstance(when, str) and isinstance(outcome, str):
                found = _outcome(stream.outcomes.get(test_id), when, outcome)
                if found is not None:
                    stream.outcomes[test_id] = found
        elif event == "collect_error":
            stream.collect_errors[str(record.get("id"))] = str(record.get("message", ""))[:300]
        elif event == "tampered":
            stream.tampered.append(str(record.get("plugin")))
        elif event == "end":
            status = record.get("exitstatus")
            stream.exitstatus = status if isinstance(status, int) and not isinstance(status, bool) else None
            ended = True
    if not ended:
        return "the test process ended before pytest finished (no end of session in its report)"
    return stream


if __name__ == "__main__":
    sys.exit(main())
