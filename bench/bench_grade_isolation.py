"""What isolating the code under test costs a cell's grading, measured in one run.

A built-in grade (``builtin:pytest``) is now two containers: the prepare step in the grade container, then the
tests in a container of their own; the verdict is decided on the host. A repository grader that uses dokimi's
isolation helper stays one container, and pays for copying the workspace into a box and for Landlock.

Figures (medians of ``--rounds`` rounds, the steps of one round interleaved so the machine's drift hits all):

- ``bare``: ``docker run --rm --init IMAGE true`` with dokimi's options: the least a container costs here;
- ``grade``: ``grade_run`` of a small builtin:pytest task's null workspace (evidence sealed, prepare, tests,
  verdict), whole;
- ``prepare``: the prepare step's container alone; ``grade - prepare`` is the tests' container and the host's
  verdict, the cost the separate test container adds;
- ``box``: inside one container, ``isolated.py`` making a box of a 200-file workspace and running ``true``
  confined, against running ``true`` directly (``direct``).

    python bench/bench_grade_isolation.py [--rounds 5]

Needs docker and the base image (scripts/setup.sh). Prints the figures and the ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import secrets
import shutil
import statistics
import tempfile
import time
from pathlib import Path, PurePosixPath

from bench_cell_overhead import git  # beside this file

from dokimi.grading.entrypoints import grade_run, run_entry_point
from dokimi.grading.environment import GradeEnvironment
from dokimi.repo.arms import ARM_RAW
from dokimi.repo.manifest import load_manifest, load_tasks
from dokimi.repo.workspace import WorkspaceSource, prepare_workspace
from dokimi.rundir import BUILTIN_TESTS
from dokimi.sandbox.container import ContainerSpec, Mount, container_name, run_container
from dokimi.sandbox.image import build_image
from dokimi.sandbox.specs import image_env, prepare_agent_dirs
from dokimi.schemas.meta import no_agent_meta
from dokimi.source import open_source
from dokimi.source.export import export_tree_as_stored
from dokimi.support import support_dir

IMAGE = "dokimi-base:bookworm"
EVAL = ".agent-eval"
MANIFEST = f"""\
schema: repo_manifest.v1
id: bench-isolation
eval_dir: {EVAL}
image: {{dockerfile: {EVAL}/Dockerfile, network: none}}
entry_points:
  grade: builtin:pytest
tasks: {EVAL}/tasks
"""
OPS = "def add(a, b):\n    return a - b\n"
TESTS = "from pkg.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
BOX_SCRIPT = """
import os, subprocess, sys, time
sys.path.insert(0, "/eval/support")
import isolated
from pathlib import Path
ws = Path("/tmp/ws")
for i in range(200):
    (ws / f"d{i % 10}").mkdir(parents=True, exist_ok=True)
    (ws / f"d{i % 10}" / f"m{i}.py").write_text("x = 1\\n" * 50)
start = time.monotonic()
subprocess.run(["true"], check=True)
direct = time.monotonic() - start
start = time.monotonic()
box = isolated.Box.make(Path("/tmp/box"), ws)
ran = box.run(["true"], cwd=box.tree)
assert ran.returncode == 0, ran.output
print(direct, time.monotonic() - start)
"""


def make_repo(root: Path) -> Path:
    """A package whose add subtracts, its test, and a builtin:pytest task whose hidden test is test_add."""
    repo = root / "repo"
    (repo / "pkg").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "pkg" / "ops.py").write_text(OPS)
    (repo / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    patch = (
        "diff --git a/tests/test_ops.py b/tests/test_ops.py\nnew file mode 100644\n--- /dev/null\n"
        f"+++ b/tests/test_ops.py\n@@ -0,0 +1,{len(TESTS.splitlines())} @@\n"
        + "".join(f"+{line}\n" for line in TESTS.splitlines())
    )
    task = {"id": "fix_add", "family": "fix", "base": base, "prompt": "fix add", "grader": "builtin:pytest",
            "test_patch": "tests.patch", "fail_to_pass": ["tests/test_ops.py::test_add"]}  # fmt: skip
    tasks = repo / EVAL / "tasks" / "fix_add"
    tasks.mkdir(parents=True)
    (repo / EVAL / "repo-eval.yaml").write_text(MANIFEST)
    (repo / EVAL / "Dockerfile").write_text(f"FROM {IMAGE}\n")
    (tasks / "task.json").write_text(json.dumps(task))
    (tasks / "tests.patch").write_text(patch)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "eval")
    return repo


def timed(action: object) -> float:
    start = time.monotonic()
    action()  # type: ignore[operator]
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="dokimi-bench-isolation."))
    figures: dict[str, list[float]] = {"bare": [], "grade": [], "prepare": [], "direct": [], "box": []}
    try:
        repo = make_repo(root)
        with open_source(f"{repo}@HEAD") as source:
            loaded = load_manifest(source.eval_snapshot(), manifest=None, manifest_file=None, required=True)
            manifest = loaded.manifest
            assert manifest is not None
            image = build_image(source, manifest, work_dir=root)
            content = root / "content"
            export_tree_as_stored(source.eval_snapshot(), content, under=EVAL)
            (parsed,) = load_tasks(source.eval_snapshot(), manifest)
            task = parsed.task
            assert task is not None
            environment = GradeEnvironment.for_manifest(manifest, image=image.ref, eval_content=content,
                                                        source_dir=None).with_network("none")  # fmt: skip
            (root / "script.py").write_text(BOX_SCRIPT)
            box_spec = ContainerSpec(
                name=container_name(f"bench{secrets.token_hex(3)}", "box", "grade"),
                image=image.ref,
                argv=["python3", "-I", "/eval/script.py"],
                mounts=[
                    Mount(root / "script.py", PurePosixPath("/eval/script.py"), read_only=True),
                    Mount(support_dir(), PurePosixPath("/eval/support"), read_only=True),
                ],  # fmt: skip
            )
            for round_ in range(args.rounds):
                bare = ContainerSpec(name=container_name(f"bench{round_}", "bare", "x"), image=image.ref,
                                     argv=["true"])  # fmt: skip
                figures["bare"].append(timed(lambda spec=bare: run_container(spec, timeout=120)))
                for what in ("grade", "prepare"):
                    run_dir = root / f"run-{what}-{round_}"
                    run_dir.mkdir()
                    prepared = prepare_workspace(
                        WorkspaceSource(source, EVAL, loaded.guidance_globs), task, arm=ARM_RAW,
                        dest=run_dir / "workspace", patches_root=content / "tasks" / "fix_add",
                    )  # fmt: skip
                    shutil.copyfile(content / "tasks" / "fix_add" / "task.json", run_dir / "task.json")
                    meta = no_agent_meta(prepared.meta_fields(), task="fix_add", mode=task.mode)
                    (run_dir / "meta.json").write_text(meta.model_dump_json(by_alias=True))
                    for name in ("events.jsonl", "answer.txt"):
                        (run_dir / name).write_text("")
                    prepare_agent_dirs(run_dir, image_env(manifest.image, task="fix_add").scratch)
                    name = container_name(f"bench{secrets.token_hex(3)}", what, "grade")
                    if what == "grade":
                        figures["grade"].append(
                            timed(lambda d=run_dir, n=name: grade_run(environment, d, task, name=n))
                        )
                    else:
                        (run_dir / BUILTIN_TESTS).mkdir()
                        figures["prepare"].append(
                            timed(
                                lambda d=run_dir, n=name: run_entry_point(
                                    environment, d, task, "grade", name=n
                                )
                            )
                        )
                ran = run_container(box_spec, timeout=120)
                direct, boxed = (float(v) for v in ran.stdout.split())
                figures["direct"].append(direct)
                figures["box"].append(boxed)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in figures.items()}
    print(f"rounds: {args.rounds}; medians in seconds")
    for key, value in med.items():
        print(f"  {key:8} {value:7.3f}  (min {min(figures[key]):.3f}, max {max(figures[key]):.3f})")
    tests = med["grade"] - med["prepare"]
    print(f"builtin grade / bare container: {med['grade'] / med['bare']:.2f}x")
    print(f"the tests' own container and the host verdict (grade - prepare): {tests:.3f} s "
          f"= {tests / med['bare']:.2f}x a bare container")  # fmt: skip
    print(
        f"isolation helper (box of 200 files + confined run) - direct run: {med['box'] - med['direct']:.3f} s"
    )


if __name__ == "__main__":
    main()
