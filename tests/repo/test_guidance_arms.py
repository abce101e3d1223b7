"""The framework-made guidance arms (guidance:tree, guidance:at=REV) on a repository whose task bases predate
its current AGENTS.md: preparation in-process, then a batch through real containers with a scripted agent that
passes only when it sees the guidance token.

History of the repository made here:

    A  code only: no guidance at all                   (base of task ``early``)
    B  an old AGENTS.md                                 (base of task ``late``)
    C  the new AGENTS.md with the token, and docs/AGENTS.md
    D  the eval dir (the eval tree)
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from dokimi.errors import UsageError
from dokimi.repo.arms import ARM_NONE, ARM_RAW, ARM_TREE, Arm
from dokimi.repo.workspace import (
    GuidanceFile,
    GuidanceOverlay,
    WorkspaceSource,
    blob_sha,
    overlay_from_snapshot,
    overlay_guidance,
    prepare_workspace,
)
from dokimi.schemas.meta import Meta
from dokimi.source import Repo, open_source
from tests.helpers.git import Symlink, commit, git, git_repo
from tests.helpers.runs import GRADE_PY, dokimi_cli

TOKEN = "GUIDE-TOKEN-5e2a"
OLD_GUIDANCE = "# old guidance\nNothing useful here.\n"
NEW_GUIDANCE = f"# guidance\nWhen asked, write after to f.txt. {TOKEN}\n"
DOCS_GUIDANCE = "# docs guidance\n"
GLOBS = ["**/AGENTS.md"]

MANIFEST = """\
schema: repo_manifest.v1
id: guidance-arms
eval_dir: .agent-eval
guidance:
  globs: ["**/AGENTS.md"]
image:
  dockerfile: .agent-eval/Dockerfile
  network: none
entry_points:
  grade: "python3 {eval_dir}/grade.py {run_dir}"
  oracle: "python3 {eval_dir}/grade.py {run_dir}"
tasks: .agent-eval/tasks
"""

#: The scripted agent: it writes the fix only when a guidance file it can see holds the token.
SEEING_HARNESS = f"""\
#!/bin/sh
if [ "$1" = "--version" ]; then echo "seeing-harness 1.0.0"; exit 0; fi
if grep -rqs --include=AGENTS.md --include=CLAUDE.md "{TOKEN}" .; then
  echo after > f.txt
  echo "the guidance told me what to do"
else
  echo "no guidance token"
fi
"""

SEEING_PROFILE = """\
schema: harness_profile.v1
name: seeing
bin: seeing-harness
version_cmd: ["{bin}", "--version"]
invoke: ["{bin}", "{prompt}", "{tools}"]
tools: {none: [], read: [], all: []}
trace: text
guidance: {names: [AGENTS.md, CLAUDE.md], resolution: ancestors-of-cwd}
"""


class History(SimpleNamespace):
    path: Path
    a: str
    b: str
    c: str
    d: str


def make_history(path: Path) -> History:
    git_repo(path, {"f.txt": "before\n", "README.md": "# r\n"}, msg="A")
    a = git(path, "rev-parse", "HEAD").strip()
    b = commit(path, "B", files={"AGENTS.md": OLD_GUIDANCE})
    c = commit(path, "C", files={"AGENTS.md": NEW_GUIDANCE, "docs/AGENTS.md": DOCS_GUIDANCE})
    tasks = {"early": a, "late": b}
    files: dict[str, str] = {
        ".agent-eval/repo-eval.yaml": MANIFEST,
        ".agent-eval/Dockerfile": "FROM dokimi-base:bookworm\n",
        ".agent-eval/grade.py": GRADE_PY,
        # guidance inside the eval dir is never copied into a workspace
        ".agent-eval/AGENTS.md": "# eval-only guidance\n",
    }
    for task_id, base in tasks.items():
        files[f".agent-eval/tasks/{task_id}/task.json"] = json.dumps(
            {"id": task_id, "family": "fix", "base": base, "prompt": "fix f.txt", "grader": "file"}
        )
    d = commit(path, "D", files=files)
    return History(path=path, a=a, b=b, c=c, d=d)


@pytest.fixture
def history(tmp_path: Path) -> History:
    return make_history(tmp_path / "repo")


@pytest.fixture
def repo(history: History) -> Iterator[Repo]:
    with open_source(f"{history.path}@{history.d}") as opened:
        yield opened


def blob(history: History, rev: str, path: str) -> str:
    return git(history.path, "rev-parse", f"{rev}:{path}").strip()


def prepare(repo: Repo, tmp_path: Path, base: str, arm: str, overlay: GuidanceOverlay | None = None) -> Path:
    dest = tmp_path / f"ws-{arm.replace(':', '_').replace('=', '_')}-{base[:7]}"
    prepared = prepare_workspace(
        WorkspaceSource(repo, ".agent-eval", GLOBS),
        SimpleNamespace(base=base, setup_patches=[], review_patch=None),
        arm=Arm(arm),
        dest=dest,
        patches_root=tmp_path,
        overlay=overlay,
        profile=SimpleNamespace(bridge=None, guidance=SimpleNamespace(names=["CLAUDE.md"])),
    )
    (dest / ".guidance.json").write_text(
        json.dumps({"files": prepared.meta_fields()["guidance_files"], "source": prepared.guidance_source})
    )
    return dest


def recorded(dest: Path) -> dict[str, str]:
    data = json.loads((dest / ".guidance.json").read_text())
    return {item["path"]: item["sha"] for item in data["files"]}


@pytest.mark.slow
def test_guidance_tree_puts_the_eval_trees_files_onto_every_base_with_their_blob_shas(
    history: History, repo: Repo, tmp_path: Path
) -> None:
    overlay = overlay_from_snapshot(repo.eval_snapshot(), GLOBS, origin="tree", eval_dir=".agent-eval")
    assert [f.path for f in overlay.files] == ["AGENTS.md", "docs/AGENTS.md"]
    want = {
        "AGENTS.md": blob(history, history.d, "AGENTS.md"),
        "docs/AGENTS.md": blob(history, history.d, "docs/AGENTS.md"),
    }
    for base in (history.a, history.b):
        dest = prepare(repo, tmp_path, base, ARM_TREE, overlay)
        assert (dest / "AGENTS.md").read_text() == NEW_GUIDANCE
        assert (dest / "docs" / "AGENTS.md").read_text() == DOCS_GUIDANCE
        assert not (dest / ".agent-eval").exists()
        assert recorded(dest) == want
        assert json.loads((dest / ".guidance.json").read_text())["source"] == f"tree {history.d}"
        # the files are part of the start commit: a clean status for the agent
        assert git(dest, "status", "--porcelain") == "?? .guidance.json\n"


@pytest.mark.slow
def test_guidance_at_rev_uses_that_revisions_files_and_none_and_raw_keep_their_meaning(
    history: History, repo: Repo, tmp_path: Path
) -> None:
    at_c = overlay_from_snapshot(repo.snapshot(history.c), GLOBS, origin="at", eval_dir=".agent-eval")
    at_b = overlay_from_snapshot(repo.snapshot(history.b), GLOBS, origin="at", eval_dir=".agent-eval")
    early_c = prepare(repo, tmp_path, history.a, f"guidance:at={history.c}", at_c)
    assert recorded(early_c) == {
        "AGENTS.md": blob(history, history.c, "AGENTS.md"),
        "docs/AGENTS.md": blob(history, history.c, "docs/AGENTS.md"),
    }
    # the old draft, onto a base that has the old one too and onto one that has none
    late_b = prepare(repo, tmp_path, history.c, f"guidance:at={history.b}", at_b)
    assert recorded(late_b) == {"AGENTS.md": blob(history, history.b, "AGENTS.md")}
    assert not (late_b / "docs" / "AGENTS.md").exists()  # replaced: what the base had is gone
    none = prepare(repo, tmp_path, history.b, ARM_NONE)
    assert recorded(none) == {} and not (none / "AGENTS.md").exists()
    raw_late = prepare(repo, tmp_path, history.b, ARM_RAW)
    assert recorded(raw_late) == {"AGENTS.md": blob(history, history.b, "AGENTS.md")}
    assert (raw_late / "AGENTS.md").read_text() == OLD_GUIDANCE
    raw_early = prepare(repo, tmp_path, history.a, ARM_RAW)
    assert recorded(raw_early) == {}


def test_an_overlay_never_writes_through_a_symlinked_directory_of_the_base(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    ws = tmp_path / "ws"
    ws.mkdir()
    os.symlink(outside, ws / "docs")
    (ws / "plain").write_text("a file where the overlay wants a directory\n")
    overlay = GuidanceOverlay(
        "tree",
        None,
        (
            GuidanceFile("docs/AGENTS.md", "100644", b"x\n"),
            GuidanceFile("plain/AGENTS.md", "100644", b"y\n"),
            GuidanceFile("new/dir/AGENTS.md", "100644", b"z\n"),
            GuidanceFile("CLAUDE.md", "120000", b"AGENTS.md"),
        ),
    )
    written, refused = overlay_guidance(ws, overlay)
    assert written == ("new/dir/AGENTS.md", "CLAUDE.md")
    assert [path for path, _ in refused] == ["docs/AGENTS.md", "plain/AGENTS.md"]
    assert list(outside.iterdir()) == []
    assert os.readlink(ws / "CLAUDE.md") == "AGENTS.md"
    assert blob_sha(b"z\n") == git(tmp_path, "hash-object", "--stdin", input="z\n").strip()


def test_unknown_arms_are_refused_and_at_needs_a_revision() -> None:
    assert Arm("guidance:tree").kind == "tree"
    assert (Arm("guidance:at=main").kind, Arm("guidance:at=main").revision) == ("at", "main")
    assert Arm("guidance:generated").overlays and not Arm("guidance:raw").overlays
    for bad in ("guidance:at=", "guidance:trees", "tree"):
        with pytest.raises(UsageError):
            Arm(bad)


# --- a batch through real containers ------------------------------------------------------------------------


def _cells(batch: Path) -> dict[tuple[str, str], list[tuple[Meta, dict[str, object]]]]:
    out: dict[tuple[str, str], list[tuple[Meta, dict[str, object]]]] = {}
    for meta_path in sorted(batch.glob("*/*/*/*/rep*/meta.json")):
        meta = Meta.model_validate_json(meta_path.read_text())
        result = json.loads((meta_path.parent / "result.json").read_text())
        out.setdefault((meta.task, meta.arm), []).append((meta, result))
    return out


@pytest.mark.docker
def test_a_batch_passes_only_in_the_arms_that_carry_the_guidance_token(
    docker_available: bool, history: History, tmp_path: Path
) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    harness = tools / "seeing-harness"
    harness.write_text(SEEING_HARNESS)
    os.chmod(harness, 0o755)
    profile = tools / "seeing.yaml"
    profile.write_text(SEEING_PROFILE)
    out = tmp_path / "runs"
    arms = [
        "guidance:none",
        "guidance:raw",
        "guidance:tree",
        f"guidance:at={history.c}",
        f"guidance:at={history.b}",
    ]
    run = dokimi_cli(
        [
            "repo",
            "run",
            f"{history.path}@{history.d}",
            "--manifest",
            ".agent-eval/repo-eval.yaml",
            "--arm",
            ",".join(arms),
            "--model",
            "m",
            "--reps",
            "1",
            "--batch",
            "arms",
            "--out",
            str(out),
            "--harness",
            str(profile),
            "--bin",
            str(harness),
            "-j",
            "2",
            "--allow-unchecked",  # the test is about the arms, not the tasks check a real run needs
            "--json",
        ]  # fmt: skip
    )
    assert run.returncode == 0, run.stderr
    cells = _cells(out / "arms")
    assert len(cells) == 2 * len(arms)
    token_blob = blob(history, history.d, "AGENTS.md")
    for (task, arm), [(meta, result)] in cells.items():
        files = {f.path: f.sha for f in meta.guidance_files or []}
        carries = arm in ("guidance:tree", f"guidance:at={history.c}")
        assert result["passed"] is carries, (task, arm, files)
        if carries:
            assert files == {
                "AGENTS.md": token_blob,
                "docs/AGENTS.md": blob(history, history.d, "docs/AGENTS.md"),
            }
        elif arm == "guidance:none":
            assert files == {}
        elif arm == "guidance:raw":
            assert files == ({} if task == "early" else {"AGENTS.md": blob(history, history.b, "AGENTS.md")})
        else:
            assert files == {"AGENTS.md": blob(history, history.b, "AGENTS.md")}
    report = dokimi_cli(["repo", "report", str(out / "arms"), "--json"])
    assert report.returncode == 0, report.stderr
    guidance = {row["arm"]: row for row in json.loads(report.stdout)["guidance"]}
    assert guidance["guidance:tree"]["tasks_with_guidance"] == 2
    assert guidance["guidance:none"]["tasks_with_guidance"] == 0
    assert guidance["guidance:raw"]["tasks_with_guidance"] == 1
    assert guidance["guidance:raw"]["tasks"] == 2


def test_a_symlinked_guidance_file_in_the_tree_stays_a_symlink(tmp_path: Path) -> None:
    path = tmp_path / "repo"
    git_repo(path, {"f.txt": "x\n"})
    base = git(path, "rev-parse", "HEAD").strip()
    head = commit(path, "guidance", files={"AGENTS.md": NEW_GUIDANCE, "CLAUDE.md": Symlink("AGENTS.md")})
    with open_source(f"{path}@{head}") as repo:
        overlay = overlay_from_snapshot(repo.eval_snapshot(), ["**/AGENTS.md", "**/CLAUDE.md"], origin="tree")
        dest = prepare(repo, tmp_path, base, ARM_TREE, overlay)
    assert os.readlink(dest / "CLAUDE.md") == "AGENTS.md"
    assert recorded(dest)["CLAUDE.md"] == git(path, "rev-parse", f"{head}:CLAUDE.md").strip()


def test_what_a_generator_leaves_is_read_without_following_links_or_blocking_on_a_fifo(
    tmp_path: Path,
) -> None:
    from dokimi.runner.guidance import MAX_GUIDANCE_BYTES, _changed_guidance

    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / ".git").mkdir()
    (ws / "AGENTS.md").write_text("unchanged\n")
    (ws / "CLAUDE.md").write_text("written by the generator\n")
    os.mkfifo(ws / "sub" / "CLAUDE.md")  # would block a plain open() forever
    os.symlink("/etc/passwd", ws / "GEMINI.md")
    (ws / "big").mkdir()
    (ws / "big" / "AGENTS.md").write_bytes(b"x" * (MAX_GUIDANCE_BYTES + 1))
    (ws / ".git" / "CLAUDE.md").write_text("never read\n")
    before = {"AGENTS.md": blob_sha(b"unchanged\n")}
    found = _changed_guidance(ws, ["**/AGENTS.md", "**/CLAUDE.md", "**/GEMINI.md"], before)
    assert found == [
        ("CLAUDE.md", "100644", b"written by the generator\n"),
        ("GEMINI.md", "120000", b"/etc/passwd"),
    ]


@pytest.mark.slow
def test_guidance_generated_is_refused_before_any_work_for_a_harness_without_a_generator(
    history: History, tmp_path: Path
) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    profile = tools / "seeing.yaml"
    profile.write_text(SEEING_PROFILE)
    run = dokimi_cli(
        [
            "repo",
            "run",
            f"{history.path}@{history.d}",
            "--manifest",
            ".agent-eval/repo-eval.yaml",
            "--arm",
            "guidance:none,guidance:generated",
            "--model",
            "m",
            "--reps",
            "1",
            "--batch",
            "gen",
            "--out",
            str(tmp_path / "runs"),
            "--harness",
            str(profile),
            "--bin",
            "/bin/true",
        ]  # fmt: skip
    )
    assert run.returncode == 2
    assert "guidance_init" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "runs" / "gen" / "_eval").exists()  # nothing exported, built or planned


@pytest.mark.slow
def test_an_at_arm_whose_revision_does_not_resolve_is_refused_with_its_name(
    history: History, tmp_path: Path
) -> None:
    run = dokimi_cli(
        [
            "repo",
            "run",
            f"{history.path}@{history.d}",
            "--manifest",
            ".agent-eval/repo-eval.yaml",
            "--arm",
            "guidance:none,guidance:at=no-such-branch",
            "--model",
            "m",
            "--reps",
            "1",
            "--batch",
            "at",
            "--out",
            str(tmp_path / "runs"),
            "--bin",
            "/bin/true",
            "--dry-run",
        ]  # fmt: skip
    )
    assert run.returncode == 2
    assert "guidance:at=no-such-branch" in run.stderr and "not a commit" in run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.slow
def test_a_study_file_whose_baseline_is_not_an_arm_is_refused(tmp_path: Path) -> None:
    study = tmp_path / "study.yaml"
    study.write_text(
        "schema: repo_study.v1\nquestion: q\nsource: .\nbaseline: guidance:raw\n"
        "arms: [guidance:none, guidance:tree]\nmodels: [m]\nreps: 1\nbatch: b\nanalysis: {effect: 0.04}\n"
    )
    run = dokimi_cli(["repo", "study", "report", str(study)])
    assert run.returncode == 2 and "baseline guidance:raw is not one of the arms" in run.stderr
    study.write_text(study.read_text().replace("baseline: guidance:raw", "baseline: guidance:none"))
    missing = dokimi_cli(["repo", "study", "report", str(study)])
    assert missing.returncode == 2 and "no batch b" in missing.stderr and "study run" in missing.stderr


def test_the_report_warns_when_two_arms_started_every_task_with_the_same_guidance(tmp_path: Path) -> None:
    from dokimi.analysis.report import build_report
    from dokimi.batch import load_batch
    from tests.helpers.batches import write_cell, write_pin

    batch = tmp_path / "b"
    write_pin(batch)
    tree_files = [{"path": "AGENTS.md", "mode": "100644", "sha": "c" * 40}]
    for task in ("t1", "t2"):
        for arm, files in (("guidance:none", []), ("guidance:raw", []), ("guidance:tree", tree_files)):
            write_cell(batch, task, arm, meta=True, meta_overrides={"guidance_files": files})
    write_cell(batch, "t1", "guidance:bridge", meta=True)  # written before the record existed: no claim
    report = build_report(load_batch(batch))
    same = [w.message for w in report.warnings if w.code == "same_guidance"]
    assert len(same) == 1 and same[0].startswith("guidance:none and guidance:raw started all 2")
    assert "no guidance at all" in same[0]
    applied = {g.arm: (g.tasks_with_guidance, g.tasks, g.cells_unrecorded) for g in report.guidance}
    assert applied == {
        "guidance:bridge": (0, 1, 1),
        "guidance:none": (0, 2, 0),
        "guidance:raw": (0, 2, 0),
        "guidance:tree": (2, 2, 0),
    }


def test_the_reports_guidance_table_counts_skills_apart(tmp_path: Path) -> None:
    from dokimi.analysis.report import build_report
    from dokimi.batch import load_batch
    from dokimi.cli.report import _guidance_lines
    from tests.helpers.batches import write_cell, write_pin

    batch = tmp_path / "b"
    write_pin(batch)
    raw = [
        {"path": "AGENTS.md", "mode": "100644", "sha": "c" * 40},
        {"path": ".agents/skills/release/SKILL.md", "mode": "100644", "sha": "d" * 40},
        {"path": ".claude/skills/fmt/SKILL.md", "mode": "100644", "sha": "e" * 40},
    ]
    write_cell(batch, "t1", "guidance:raw", meta=True, meta_overrides={"guidance_files": raw})
    write_cell(batch, "t2", "guidance:raw", meta=True, meta_overrides={"guidance_files": raw[:1]})
    for task in ("t1", "t2"):
        write_cell(batch, task, "guidance:none", meta=True, meta_overrides={"guidance_files": []})
    report = build_report(load_batch(batch))
    skills = {g.arm: (g.skills, g.tasks_with_skills, len(g.files)) for g in report.guidance}
    assert skills == {
        "guidance:none": ([], 0, 0),
        "guidance:raw": ([".agents/skills/release", ".claude/skills/fmt"], 1, 3),
    }
    table = _guidance_lines(report)
    first_row = next(i for i, line in enumerate(table) if line.startswith("guidance:"))
    header = " ".join(
        table[:first_row]
    ).split()  # two-line headers: "instruction / files", "tasks with / skills"
    assert "instruction" in header and header.count("skills") == 2
    rows = {line.split()[0]: line.split()[1:5] for line in table if line.startswith("guidance:")}
    assert rows == {"guidance:none": ["0/2", "0", "0", "0/2"], "guidance:raw": ["2/2", "1", "2", "1/2"]}
