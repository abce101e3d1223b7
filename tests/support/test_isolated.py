"""dokimi's isolation helper (support/isolated.py) in a real grade-like container: the confined command reads
none of /eval (but /eval/support) and nothing of /tmp, writes only its box, cannot read the grader's memory
or signal it, and the workspace it was copied from stays as it was; the box copy keeps links as links and
leaves .git out; and pytest_stream's report of a confined run is read back by the grader's side."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path, PurePosixPath

import pytest

from dokimi.sandbox.container import ContainerSpec, Mount, container_name, run_container
from dokimi.support import support_dir
from tests.conftest import BASE_IMAGE

pytestmark = pytest.mark.docker

PROBE = r"""
import json, os, signal, sys
def attempt(what, action):
    try:
        action()
        return "ok"
    except OSError as exc:
        return type(exc).__name__
grader = int(os.environ["GRADER_PID"])
print(json.dumps({
    "read oracle": attempt("", lambda: open("/eval/content/tasks/t1/oracle.patch").read()),
    "list content": attempt("", lambda: os.listdir("/eval/content")),
    "read task.json": attempt("", lambda: open("/eval/run/task.json").read()),
    "write run": attempt("", lambda: open("/eval/run/planted", "w").write("x")),
    "write workspace": attempt("", lambda: open("/eval/run/workspace/pkg/__init__.py", "a").write("#")),
    "read grader tmp": attempt("", lambda: open("/tmp/grader-secret").read()),
    "grader environ": attempt("", lambda: open(f"/proc/{grader}/environ").read()),
    "signal grader": attempt("", lambda: os.kill(grader, signal.SIGTERM)),
    "write tree": attempt("", lambda: open("pkg/new.py", "w").write("y")),
    "read support": attempt("", lambda: open("/eval/support/isolated.py").read()),
    "read system": attempt("", lambda: open("/etc/passwd").read()),
    "write tmpdir": attempt("", lambda: open(os.environ["TMPDIR"] + "/x", "w").write("1")),
}))
"""

GRADER = r"""
import json, os, sys
from pathlib import Path
sys.path.insert(0, "/eval/support")
import isolated
open("/tmp/grader-secret", "w").write("secret")
probe = Path("/eval/probe-src/probe.py")
box = isolated.Box.make(Path("/tmp/g"), Path("/eval/run/workspace"), add={"probe.py": probe})
ran = box.run(["python3", str(box.root / "probe.py")], cwd=box.tree, env={"GRADER_PID": str(os.getpid())})
tree = sorted(str(p.relative_to(box.tree)) for p in box.tree.rglob("*"))
links = {str(p.relative_to(box.tree)): os.readlink(p) for p in box.tree.rglob("*") if p.is_symlink()}
print(json.dumps({"rc": ran.returncode, "output": ran.output, "tree": tree, "links": links}))
"""


def _grade_like(tmp_path: Path, script: str) -> dict[str, object]:
    """Run ``script`` as a grader would run in a grade container; its last stdout line as JSON."""
    content, run, probe = tmp_path / "content", tmp_path / "run", tmp_path / "probe-src"
    (content / "tasks" / "t1").mkdir(parents=True)
    (content / "tasks" / "t1" / "oracle.patch").write_text("SECRET-ORACLE\n")
    (run / "workspace" / "pkg").mkdir(parents=True)
    (run / "workspace" / ".git").mkdir()
    (run / "workspace" / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (run / "workspace" / "pkg" / "__init__.py").write_text("x = 1\n")
    os.symlink("/etc/passwd", run / "workspace" / "pkg" / "link")
    (run / "task.json").write_text('{"id": "t1"}')
    probe.mkdir()
    (probe / "probe.py").write_text(PROBE)
    (tmp_path / "grader.py").write_text(script)
    for path in (tmp_path, *tmp_path.rglob("*")):
        os.lchown(path, 1000, 1000)
    spec = ContainerSpec(
        name=container_name(f"iso{secrets.token_hex(3)}", "t1", "grade"),
        image=BASE_IMAGE,
        argv=["python3", "-I", "/eval/grader.py"],
        mounts=[
            Mount(content, PurePosixPath("/eval/content"), read_only=True),
            Mount(run, PurePosixPath("/eval/run")),
            Mount(probe, PurePosixPath("/eval/probe-src"), read_only=True),
            Mount(tmp_path / "grader.py", PurePosixPath("/eval/grader.py"), read_only=True),
            Mount(support_dir(), PurePosixPath("/eval/support"), read_only=True),
        ],
        workdir=PurePosixPath("/eval/run/workspace"),
    )
    result = run_container(spec, timeout=120)
    assert result.returncode == 0, result.stderr
    data: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return data


def test_a_confined_command_reaches_nothing_but_its_box_and_the_system(
    docker_available: bool, tmp_path: Path
) -> None:
    found = _grade_like(tmp_path, GRADER)
    assert found["rc"] == 0, found
    attempts = json.loads(str(found["output"]).strip().splitlines()[-1])
    denied = [
        "read oracle", "list content", "read task.json", "write run", "write workspace", "read grader tmp",
        "grader environ", "signal grader",
    ]  # fmt: skip
    assert {k: v for k, v in attempts.items() if k in denied} == dict.fromkeys(denied, "PermissionError")
    assert {k: v for k, v in attempts.items() if k not in denied} == {
        "write tree": "ok", "read support": "ok", "read system": "ok", "write tmpdir": "ok",
    }  # fmt: skip
    assert (tmp_path / "run" / "workspace" / "pkg" / "__init__.py").read_text() == "x = 1\n"
    assert not (tmp_path / "run" / "planted").exists()
    assert ".git" not in found["tree"] and "pkg/new.py" in found["tree"]  # type: ignore[operator]
    assert found["links"] == {"pkg/link": "/etc/passwd"}  # copied as the link, never followed
