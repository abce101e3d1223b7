"""A harness that fits the existing shapes is a profile (its pin in ``verification``) and a converter: here a
throwaway one, written from outside the package into a temporary directory, is loaded, invoked, located and
its trace converted, and runs a real batch end to end (``repo run --harness`` in the agent container, its
trace turned into events.jsonl by the outside converter, graded), with no file of dokimi touched."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from dokimi.batch import cell_dir
from dokimi.errors import UsageError
from dokimi.harness.locate import locate_harness
from dokimi.harness.profile import AgentRequest, Placement, build_invocation, load_profile, profile_problems
from dokimi.harness.traces import convert_file, trace_problem
from tests.helpers.runs import dokimi_cli, remove_tiny_images, run_args, tiny_repo

PROFILE = """\
schema: harness_profile.v1
name: throwaway-cli
bin: throwaway
version_cmd: ["{bin}", "--version"]
invoke: ["{bin}", "--model", "{model}", "--json", "{tools}", "--", "{prompt}"]
tools:
  none: ["--no-tools"]
  read: ["--read-only"]
  all: []
env_allow: [PATH, HOME]
trace: throwaway_pkg.trace
guidance:
  names: [AGENTS.md]
  resolution: AGENTS.md of the working directory
verification:
  version: 0.0.1
  package: npm throwaway-cli
  verified: false
  note: a test's throwaway harness
"""

CONVERTER = '''\
"""The throwaway CLI's trace: one JSON object per line, {"ran": CMD, "rc": N} or {"answer": TEXT}."""
from dokimi.harness.traces import Conversion, json_objects


def convert(lines):
    objects, garbage = json_objects(lines)
    out = Conversion(garbage_lines=garbage)
    for index, obj in objects:
        if "ran" in obj:
            out.events.append({"t": float(index), "kind": "command", "text": obj["ran"], "rc": obj.get("rc")})
        elif "answer" in obj:
            out.answer, out.complete = obj["answer"], True
    out.is_error = not out.complete
    return out
'''


@pytest.fixture
def outside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The two files of a new harness, outside dokimi: the profile and a converter module (importable)."""
    (tmp_path / "throwaway_pkg").mkdir()
    (tmp_path / "throwaway_pkg" / "trace.py").write_text(CONVERTER)
    (tmp_path / "throwaway.yaml").write_text(PROFILE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_a_new_harness_is_a_profile_and_a_converter_outside_the_package(outside: Path) -> None:
    written = sorted(str(p.relative_to(outside)) for p in outside.rglob("*") if p.is_file())
    assert written == ["throwaway.yaml", "throwaway_pkg/trace.py"]

    profile = load_profile(outside / "throwaway.yaml")
    assert profile_problems(profile) == []
    assert profile.verification is not None and profile.verification.version == "0.0.1"

    invocation = build_invocation(
        profile,
        AgentRequest(prompt="fix it", model="m-1", max_turns=5, budget=1.0, tools="read"),
        Placement(bin="/opt/throwaway", config_dir=outside / "config", support_dir="/eval/support"),
    )
    assert invocation.argv == ["/opt/throwaway", "--model", "m-1", "--json", "--read-only", "--", "fix it"]

    stdout = outside / "stdout.txt"
    stdout.write_text(
        json.dumps({"ran": "make test", "rc": 2}) + "\nnot json\n" + json.dumps({"answer": "done"}) + "\n"
    )
    conversion = convert_file(stdout, profile.trace)
    assert conversion.events == [{"t": 0.0, "kind": "command", "text": "make test", "rc": 2}]
    assert (conversion.answer, conversion.complete, conversion.garbage_lines) == ("done", True, 1)


def test_a_new_harness_executable_is_found_by_its_own_variable(
    outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    executable = outside / "throwaway"
    executable.write_text("#!/bin/sh\necho 0.0.1\n")
    os.chmod(executable, 0o755)
    monkeypatch.setenv("DOKIMI_THROWAWAY_CLI_BIN", str(executable))
    located = locate_harness(load_profile(outside / "throwaway.yaml"))
    assert (located.path, located.origin) == (executable.resolve(), "environment")


def test_a_trace_that_names_no_converter_is_refused_with_the_built_in_ones(outside: Path) -> None:
    assert trace_problem("throwaway_pkg.trace") is None
    assert trace_problem("claude-stream-json") is None
    assert trace_problem("no-such-trace") == "unknown trace converter 'no-such-trace'"
    assert (
        trace_problem("no_such_pkg.trace") == "trace converter module 'no_such_pkg.trace' cannot be imported"
    )
    with pytest.raises(UsageError, match="claude-stream-json"):
        convert_file(outside / "throwaway.yaml", "no-such-trace")


THROWAWAY_CLI = """\
#!/bin/sh
if [ "$1" = "--version" ]; then echo "throwaway-cli 0.0.1"; exit 0; fi
echo after > f.txt
echo '{"ran": "echo after > f.txt", "rc": 0}'
echo 'a line the converter skips'
echo '{"answer": "f.txt says after now."}'
"""
"""The throwaway harness itself: it makes the tiny task's change and prints its trace in its own format."""


@pytest.fixture
def manifest_id() -> Iterator[str]:
    """The tiny repository's manifest id (its images' label) of this test only; its images go afterwards."""
    name = f"throwaway-{uuid.uuid4().hex[:10]}"
    yield name
    remove_tiny_images(name)


@pytest.mark.docker
def test_a_batch_runs_through_a_profile_and_converter_from_outside_the_package(
    docker_available: bool, outside: Path, monkeypatch: pytest.MonkeyPatch, manifest_id: str
) -> None:
    executable = outside / "throwaway"
    executable.write_text(THROWAWAY_CLI)
    os.chmod(executable, 0o755)
    paths = [str(outside), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))  # the converter is importable where dokimi runs
    tiny = tiny_repo(outside / "tiny", manifest_id=manifest_id)
    out, batch = outside / "runs", manifest_id
    done = dokimi_cli(run_args(tiny, out, batch, outside / "throwaway.yaml", executable, "--json"))
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["ran"], summary["harness"]) == (1, "throwaway-cli")
    run_dir = cell_dir(out / batch, "fix_f", "guidance:raw", "m", None, 0)
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert events == [{"t": 0.0, "kind": "command", "text": "echo after > f.txt", "rc": 0}]
    assert (run_dir / "answer.txt").read_text() == "f.txt says after now."
    result = json.loads((run_dir / "result.json").read_text())
    assert result["passed"] is True and result["harness_version"] == "0.0.1"
