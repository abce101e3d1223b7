"""``dokimi repo rate export``: one blinded artifact per finished cell, and the private key.

The rating directory (``--out DIR``)::

    DIR/key.json              private: artifact id -> cell, and every marker found (repo_rating_key.v1)
    DIR/blinded/              the raters' directory: hand this, and only this, to the raters
        README.md             how to score, and the row format
        RUBRIC.md             the scoring rubric itself (dokimi/rating/RUBRIC.md)
        ids.txt               every artifact id to score, one per line
        <id>/diff.patch       the agent's change (workspace.diff, or git diff <start_sha> of the workspace)
        <id>/answer.txt       the agent's final report, sanitized
        <id>/task.txt         the task: its id, prompt, acceptance criteria and validation commands
        <id>/validation/...   each validation command's and locked check's output and exit code (N-public.log,
                              N-hidden.log), from the cell's validation/commands.json
        <id>/logs/...         the grader's logs: grade.json, grade.stdout, grade.stderr (static, perf)
    DIR/withheld/<id>/        artifacts with a marker that could not be redacted: never shown to raters
    DIR/raters.jsonl          written by import; DIR/adjudications.jsonl and DIR/results.jsonl by adjudicate

What an artifact leaves out, because it reveals the condition: meta.json and result.json (arm, model,
effort, harness, timestamps), agent.stdout, agent.stderr and events.jsonl (the harness's own trace format),
home/, config/ (harness configuration), merge.json (a judge's verdict and its model id) and the cell's path.
"""

from __future__ import annotations

import os
import random
import secrets
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from dokimi import safefs
from dokimi.batch import load_batch
from dokimi.checks.merge.diff import take_workspace_diff
from dokimi.errors import DokimiError, UsageError
from dokimi.grading.validation import read_validation
from dokimi.grading.verdict import read_cell
from dokimi.rating.blinding import (
    Finding,
    MarkerSet,
    Rule,
    builtin_profile_markers,
    marker_set,
    scrub_diff,
    scrub_text,
)
from dokimi.rating.scores import read_key
from dokimi.rundir import (
    ANSWER_TXT,
    GRADE_JSON,
    PERF_STDERR,
    PERF_STDOUT,
    WORKSPACE_DIFF,
    RunDir,
    entry_stderr,
    entry_stdout,
)
from dokimi.schemas._base import make_output_dir, read_document, write_document, write_text_atomic
from dokimi.schemas.rating import KeyEntry, MarkerFinding, RatingKey
from dokimi.schemas.task import Task

if TYPE_CHECKING:
    from dokimi.batch import Batch, Cell

BLINDED_DIR = "blinded"
WITHHELD_DIR = "withheld"
KEY_JSON = "key.json"
DIFF_FILE = "diff.patch"
ANSWER_FILE = ANSWER_TXT
TASK_FILE = "task.txt"
LOGS_DIR = "logs"
VALIDATION_LOGS_DIR = "validation"
RUBRIC_FILE = "RUBRIC.md"

#: The logs of validation a rater may read: what the grader (and static/perf checks) printed. Nothing the
#: harness wrote is here: its trace format alone names it.
VALIDATION_LOGS: tuple[str, ...] = (
    GRADE_JSON,
    entry_stdout("grade"),
    entry_stderr("grade"),
    entry_stdout("static"),
    entry_stderr("static"),
    PERF_STDOUT,
    PERF_STDERR,
)

#: Every file an artifact has its mtime set to this (2000-01-01): write order would otherwise show the order
#: of the cells, which groups them by arm.
FIXED_MTIME = 946684800

RATERS_README = """\
# Blinded artifacts

Read the scoring rubric, RUBRIC.md in this directory, before scoring. Score from the files of each artifact
only: task.txt (the task, its acceptance criteria and the validation commands it declares), diff.patch (the
change), answer.txt (the report it ended with), validation/ (the output and exit code of each validation
command and locked evaluator check, run on the change) and logs/ (the grader's logs). `[redacted]` marks
text removed for blinding.

Write one JSON object per line, per artifact you score:

{"schema": "repo_rating.v1", "run_id": "<id>", "rater": "<you>", "passed": false,
 "validation_passed": false, "human_accepted": false, "regression": false, "rework_required": false,
 "requirements_traceability": false, "notes": "why"}

Every outcome is required: true only when all its conditions hold; if unsure, false, and say why in notes.
If an artifact reveals the condition (a phase heading, a tool banner, a prompt-template token, a model or
harness name), stop scoring it and write instead:

{"schema": "repo_rating.v1", "run_id": "<id>", "rater": "<you>", "blinding_leak": "the marker you saw"}
"""


@dataclass
class Unexported:
    """A finished cell that got no artifact, and why."""

    cell: str
    reason: str


@dataclass
class ExportReport:
    """What an export wrote."""

    out: Path
    key: Path
    seed: int
    blinded: list[str] = field(default_factory=list)
    """Artifact ids in the raters' directory."""
    withheld: dict[str, list[Finding]] = field(default_factory=dict)
    """Artifact id -> the markers that could not be redacted."""
    redactions: int = 0
    """Markers redacted over all artifacts."""
    unexported: list[Unexported] = field(default_factory=list)
    finished: int = 0
    """Finished cells in the batch (before --sample)."""

    @property
    def problems(self) -> bool:
        return bool(self.withheld or self.unexported)

    def to_json(self) -> dict[str, object]:
        return {
            "out": str(self.out),
            "key": str(self.key),
            "seed": self.seed,
            "finished_cells": self.finished,
            "blinded": sorted(self.blinded),
            "redactions": self.redactions,
            "withheld": {
                run_id: [
                    {"file": f.file, "line": f.line, "category": str(f.category), "marker": f.marker}
                    for f in findings
                ]
                for run_id, findings in sorted(self.withheld.items())
            },
            "unexported": [{"cell": u.cell, "reason": u.reason} for u in self.unexported],
        }


# --- rules ------------------------------------------------------------------------------------------------


def key_outside_raters_dir(key: Path, out: Path) -> None:
    """The key maps ids to cells: it must never be inside the directory handed to raters."""
    raters = (out / BLINDED_DIR).resolve()
    resolved = key.resolve()
    if resolved == raters or raters in resolved.parents:
        raise UsageError(
            f"{key} is inside the raters' directory {raters}",
            hint="put the key outside it (the default is <out>/key.json)",
        )


def draw_ids(count: int, rng: random.Random) -> list[str]:
    """``count`` distinct random artifact ids (10 hex digits) from ``rng``: the same seed gives the same
    ids."""
    ids: list[str] = []
    seen: set[str] = set()
    while len(ids) < count:
        new = f"{rng.getrandbits(40):010x}"
        if new not in seen:
            seen.add(new)
            ids.append(new)
    return ids


def sample_cells(cells: Sequence[Cell], sample: int | None, rng: random.Random) -> list[Cell]:
    """A uniform random sample of ``sample`` cells without replacement (all cells when None or larger)."""
    ordered = sorted(cells, key=lambda c: c.rel)
    if sample is None or sample >= len(ordered):
        return ordered
    return sorted(rng.sample(ordered, sample), key=lambda c: c.rel)


def hidden_validation_passed(cell: Cell) -> bool | None:
    """The cell's locked evaluator checks: its gate verdict (a grader failure is a failure) and, when the task
    declares ``hidden_validation_commands``, every one of them exiting 0 (declared and not run is a failure);
    None for a score-only task without such commands, which declares no locked checks."""
    result = cell.result
    assert result is not None
    validation = read_validation(cell.dir)
    hidden = validation.passed("hidden") if validation is not None else None
    task = cell_task(cell)
    if hidden is None and task is not None and task.hidden_validation_commands:
        hidden = False
    if not result.gated:
        return hidden
    return bool(read_cell(result).passed) and hidden is not False


# --- the markers of a batch -------------------------------------------------------------------------------


def batch_markers(batch: Batch, extra: Sequence[str] = ()) -> MarkerSet:
    """Every condition marker of the batch (all its finished cells, not only the sampled ones)."""
    harnesses, guidance = builtin_profile_markers()
    results = list(batch.results())
    # Cell paths and run directories are matched by one pattern (blinding.cell_path_pattern), not listed.
    batch_names = [batch.name, str(batch.root), str(batch.root.resolve())]
    return marker_set(
        arms=sorted({r.arm for r in results}),
        models=sorted({r.model for r in results}),
        harnesses=[*harnesses, *sorted({r.harness for r in results})],
        harness_versions=sorted({r.harness_version for r in results if r.harness_version}),
        batch_names=batch_names,
        guidance_names=guidance,
        extra=extra,
    )


# --- one artifact -----------------------------------------------------------------------------------------


#: Largest cell file an export reads (a diff, an answer, a validation log).
MAX_CELL_FILE_BYTES = 64 * 1024 * 1024


def cell_text(cell: Cell, name: str) -> str | None:
    """A file of the cell's run directory as text, or None when it is absent or is not a regular file dokimi
    may read (a link a grader left, a FIFO, a device, over the size limit): a grader's ``answer.txt ->
    /root/secret`` is never read into an export."""
    try:
        return safefs.read_text(cell.dir / name, trusted=cell.dir, limit=MAX_CELL_FILE_BYTES)
    except (FileNotFoundError, safefs.UnsafePathError):
        return None


def cell_diff(cell: Cell) -> str:
    """The cell's workspace diff: ``workspace.diff`` when the runner stored it, else ``git diff
    <start_sha>`` of its workspace (through a scratch git dir: the workspace may belong to another uid)."""
    stored = cell_text(cell, WORKSPACE_DIFF)
    if stored is not None:
        return stored
    meta = cell.meta()
    if meta is None:
        raise DokimiError(
            "no workspace.diff and no valid meta.json (start_sha) to compute it from", path=str(cell.dir)
        )
    return take_workspace_diff(RunDir(cell.dir).workspace, meta.start_sha).text


def cell_task(cell: Cell) -> Task | None:
    """The cell's task.json, or None when it cannot be read."""
    path = RunDir(cell.dir).task_json
    if not os.path.lexists(path):
        return None
    try:
        return read_document(path, Task, trusted=cell.dir)
    except DokimiError:
        return None


def task_text(task_id: str, task: Task | None) -> str:
    """The task as raters need it: id, prompt, acceptance criteria, and the validation commands it declares
    (whose output is in validation/). Other keys of task.json (effort, mode, limits) are left out: some are
    cell dimensions."""
    lines = [f"task: {task_id}", "", (task.prompt.rstrip() if task is not None else "")]
    sections = (
        ("acceptance criteria", task.acceptance_criteria if task else []),
        ("validation commands (output in validation/N-public.log)", task.validation_commands if task else []),
        (
            "locked evaluator checks (output in validation/N-hidden.log)",
            task.hidden_validation_commands if task else [],
        ),
    )
    for title, items in sections:
        if items:
            lines += ["", f"{title}:", *(f"{n}. {item}" for n, item in enumerate(items, 1))]
    return "\n".join(lines) + "\n"


def validation_files(cell: Cell) -> dict[str, str]:
    """validation/N-public.log and N-hidden.log: each command of the cell's validation/commands.json, numbered
    as task.txt lists it, with its exit code and output."""
    document = read_validation(cell.dir)
    if document is None:
        return {}
    files: dict[str, str] = {}
    numbers = {"public": 0, "hidden": 0}
    for run in document.commands:
        numbers[run.kind] += 1
        if run.not_run is not None:
            ended = f"not run: {run.not_run}"
        elif run.timed_out:
            ended = "stopped at its timeout"
        else:
            ended = f"exit code {run.exit_code}"
        cut = "(its beginning was cut)\n" if run.truncated else ""
        body = f"$ {run.command}\n{ended}\n\n{cut}{run.output}"
        files[f"{VALIDATION_LOGS_DIR}/{numbers[run.kind]}-{run.kind}.log"] = body
    return files


@dataclass
class _Artifact:
    files: dict[str, str]
    findings: list[Finding]

    @property
    def leaks(self) -> list[Finding]:
        return [f for f in self.findings if not f.redacted]


def blind_cell(cell: Cell, compiled: Sequence[Rule]) -> _Artifact:
    """The sanitized files of one cell (name -> text) and every marker found."""
    files: dict[str, str] = {}
    findings: list[Finding] = []
    diff, found = scrub_diff(cell_diff(cell), compiled, file=DIFF_FILE)
    files[DIFF_FILE], findings = diff, findings + found
    answer = cell_text(cell, ANSWER_TXT) or ""
    files[ANSWER_FILE], found = scrub_text(answer, compiled, file=ANSWER_FILE)
    findings += found
    task_id = cell.result.task if cell.result is not None else ""
    files[TASK_FILE], found = scrub_text(task_text(task_id, cell_task(cell)), compiled, file=TASK_FILE)
    findings += found
    for rel, log in validation_files(cell).items():
        files[rel], found = scrub_text(log, compiled, file=rel)
        findings += found
    for name in VALIDATION_LOGS:
        text = cell_text(cell, name)
        if text is not None:
            rel = f"{LOGS_DIR}/{name}"
            files[rel], found = scrub_text(text, compiled, file=rel)
            findings += found
    return _Artifact(files, findings)


def _write_artifact(root: Path, files: dict[str, str]) -> None:
    for rel in sorted(files):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(files[rel], encoding="utf-8")
    for path in sorted(root.rglob("*"), reverse=True):
        os.utime(path, (FIXED_MTIME, FIXED_MTIME))
    os.utime(root, (FIXED_MTIME, FIXED_MTIME))


def key_entry(cell: Cell, status: str, findings: Sequence[Finding]) -> KeyEntry:
    result = cell.result
    assert result is not None
    return KeyEntry(
        cell=cell.rel,
        task=result.task,
        arm=result.arm,
        model=result.model,
        effort=result.effort,
        rep=result.rep,
        harness=result.harness,
        harness_version=result.harness_version,
        hidden_validation_passed=hidden_validation_passed(cell),
        status=status,  # type: ignore[arg-type]
        findings=[
            MarkerFinding(
                file=f.file, line=f.line, category=str(f.category), marker=f.marker, redacted=f.redacted
            )
            for f in findings
        ],
    )


def place_artifact(out: Path, run_id: str, cell: Cell, artifact: _Artifact) -> KeyEntry:
    """Write one artifact to the raters' directory, or to withheld/ when a marker could not be redacted."""
    status = "withheld" if artifact.leaks else "blinded"
    target = out / (WITHHELD_DIR if artifact.leaks else BLINDED_DIR) / run_id
    _write_artifact(target, artifact.files)
    return key_entry(cell, status, artifact.findings)


def write_ids(out: Path, key: RatingKey) -> None:
    """blinded/ids.txt and README.md: what raters score."""
    blinded = out / BLINDED_DIR
    ids = sorted(i for i, e in key.artifacts.items() if e.status == "blinded")
    write_text_atomic(blinded / "ids.txt", "".join(f"{i}\n" for i in ids))
    write_text_atomic(blinded / "README.md", RATERS_README)
    write_text_atomic(blinded / RUBRIC_FILE, scoring_rubric())
    for name in ("ids.txt", "README.md", RUBRIC_FILE):
        (blinded / name).chmod(0o644)
        os.utime(blinded / name, (FIXED_MTIME, FIXED_MTIME))


def scoring_rubric() -> str:
    """The scoring rubric raters read (package data: dokimi/rating/RUBRIC.md)."""
    return resources.files("dokimi.rating").joinpath(RUBRIC_FILE).read_text(encoding="utf-8")


# --- the export -------------------------------------------------------------------------------------------


def export_batch(
    batch_dir: Path,
    out: Path,
    *,
    seed: int | None = None,
    sample: int | None = None,
    markers: Sequence[str] = (),
    key_path: Path | None = None,
) -> ExportReport:
    """Blind every finished cell of ``batch_dir`` (or a seeded sample of ``sample``) into ``out``."""
    key_path = key_path or out / KEY_JSON
    key_outside_raters_dir(key_path, out)
    if sample is not None and sample < 1:
        raise UsageError("--sample must be at least 1")
    if key_path.exists() or (out / BLINDED_DIR).exists():
        raise UsageError(
            f"{out} already holds an export",
            hint="give a new --out: mixing two exports would mix their ids and keys",
        )
    batch = load_batch(batch_dir)
    finished = batch.finished()
    if not finished:
        raise UsageError(f"{batch_dir}: no finished cell to export", hint="give <out>/<batch> after repo run")
    seed = secrets.randbits(32) if seed is None else seed
    rng = random.Random(seed)
    chosen = sample_cells(finished, sample, rng)
    ids = draw_ids(len(chosen), rng)
    rules = batch_markers(batch, markers).compile()
    report = ExportReport(out=out, key=key_path, seed=seed, finished=len(finished))
    make_output_dir(out / BLINDED_DIR)
    entries: dict[str, KeyEntry] = {}
    # Artifacts are written in id order (random), never in cell order.
    for run_id, cell in sorted(zip(ids, chosen, strict=True)):
        try:
            artifact = blind_cell(cell, rules)
        except DokimiError as exc:
            report.unexported.append(Unexported(cell.rel, str(exc)))
            continue
        entries[run_id] = place_artifact(out, run_id, cell, artifact)
        report.redactions += sum(1 for f in artifact.findings if f.redacted)
        if artifact.leaks:
            report.withheld[run_id] = artifact.leaks
        else:
            report.blinded.append(run_id)
    key = RatingKey(
        schema="repo_rating_key.v1",
        batch=str(batch.root.resolve()),
        out=str(out.resolve()),
        seed=seed,
        markers=sorted(set(markers)),
        artifacts=entries,
    )
    write_document(key_path, key)
    write_ids(out, key)
    report.unexported.sort(key=lambda u: u.cell)
    return report


# --- re-blinding ------------------------------------------------------------------------------------------


@dataclass
class ReblindReport:
    """What ``rate reblind`` did: the new id, and whether it reached the raters."""

    old_id: str
    new_id: str
    status: str
    leaks: list[Finding]

    def to_json(self) -> dict[str, object]:
        return {
            "old_id": self.old_id,
            "new_id": self.new_id,
            "status": self.status,
            "unredactable": [
                {"file": f.file, "line": f.line, "category": str(f.category), "marker": f.marker}
                for f in self.leaks
            ],
        }


def _read_artifact(root: Path) -> dict[str, str]:
    if not root.is_dir():
        return {}
    return {
        p.relative_to(root).as_posix(): p.read_text(encoding="utf-8", errors="replace")
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def reblind(key_path: Path, run_id: str, *, markers: Sequence[str] = ()) -> ReblindReport:
    """Blind the cell behind ``run_id`` again with ``markers`` added, under a new id (the raters who saw the
    leaked artifact scored the old id; the old id is retired). Refused when it would change nothing."""

    key = read_key(key_path)
    entry = key.artifacts.get(run_id)
    if entry is None:
        raise UsageError(f"{run_id} is not an artifact of {key_path}")
    if entry.status == "retired":
        raise UsageError(f"{run_id} was already re-blinded as {entry.reblinded_as}")
    out = Path(key.out)
    batch = load_batch(key.batch)
    cell = next((c for c in batch.finished() if c.rel == entry.cell), None)
    if cell is None:
        raise UsageError(f"the cell of {run_id} is no longer a finished cell of {key.batch}")
    all_markers = sorted({*key.markers, *markers})
    artifact = blind_cell(cell, batch_markers(batch, all_markers).compile())
    old_dir = out / (BLINDED_DIR if entry.status == "blinded" else WITHHELD_DIR) / run_id
    if artifact.files == _read_artifact(old_dir):
        raise UsageError(
            f"re-blinding {run_id} changes nothing",
            hint="give the marker the rater reported with --marker TEXT; a marker that is not literal text "
            "cannot be re-blinded, and the run stays excluded",
        )
    rng = random.Random(f"{key.seed}:reblind:{run_id}")
    new_id = next(i for i in iter(lambda: draw_ids(1, rng)[0], None) if i not in key.artifacts)
    new_entry = place_artifact(out, new_id, cell, artifact).model_copy(update={"reblind_of": run_id})
    key.artifacts[run_id] = entry.model_copy(update={"status": "retired", "reblinded_as": new_id})
    key.artifacts[new_id] = new_entry
    key.markers = all_markers
    shutil.rmtree(old_dir, ignore_errors=True)
    write_document(key_path, key)
    write_ids(out, key)
    return ReblindReport(run_id, new_id, new_entry.status, artifact.leaks)
