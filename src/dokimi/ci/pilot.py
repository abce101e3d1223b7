"""The pilot A/B of a pull request's guidance: ``guidance:tree`` at the pull request's head (the guidance it
proposes, on every task's base) against ``guidance:at=BASE`` (the base branch's guidance), on the tasks the
manifest's ``pilot`` block names, then ``repo compare`` with the base's arm as the baseline.

The batch is ``pr-<number>-<head>`` under ``$DOKIMI_HOME/runs/<manifest id>/`` (or ``out``): a rerun for the
same head fills only what is missing. A real run proves its tasks sound first (``repo tasks check`` on the two
arms, as ``repo run`` requires); a dry run (the real harness against dokimi's scripted model) needs no check
and costs nothing, and every number it gives is labelled so. The comment shows the gate measure and pass@k of
the comparison, each with its interval, its p and the power verdict: a pilot of a few tasks is usually
underpowered, and the comment says so rather than letting "not significant" read as "no effect". Every text
of the pull request's or an agent's (a task id, a reason, a warning) is quoted as :func:`dokimi.ci.scan.quote`
does: in a code span, on one line, cut short.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dokimi.analysis.compare import compare, power_verdict
from dokimi.ci.scan import quote
from dokimi.constants import BASE_IMAGE
from dokimi.errors import DokimiError, UsageError
from dokimi.harness.profile import load_profile, resolve_bin
from dokimi.process import Bounds, run
from dokimi.repo.arms import ARM_AT_PREFIX, ARM_TREE, Arm
from dokimi.repo.manifest import load_manifest
from dokimi.runner.run import Progress, RunOptions, run_batch
from dokimi.runner.taskcheck import CheckOptions, check_tasks
from dokimi.sandbox.docker import image_exists
from dokimi.schemas.compare import CompareDoc, Measure
from dokimi.setup import script_path
from dokimi.source import open_source

PILOT_MARKER = "<!-- dokimi:pilot -->"
DRY_RUN_MODEL = "claude-haiku-4-5"
"""The model a dry run names (the scripted model answers whatever the harness asks)."""
SHOWN_KINDS = ("gate", "pass_at_k", "pass_hat_k", "score", "cost")
INSTALL_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class PilotSettings:
    """The pilot's options (the action's inputs)."""

    model: str | None = None
    dry_run: bool = False
    bin: str | None = None
    out: Path | None = None
    jobs: int | None = None
    harness: str = "claude-code"
    action_path: Path | None = None
    """The action's own checkout (GITHUB_ACTION_PATH): its scripts/install-harness.sh installs the pinned
    harness when none is found."""


@dataclass
class PilotOutcome:
    batch: Path
    doc: CompareDoc
    tasks: list[str]
    reps: int
    baseline: str
    treatment: str
    dry_run: bool
    complete: bool
    model: str


def base_arm(base: str) -> str:
    return f"{ARM_AT_PREFIX}{base}"


def _pilot_tasks(repo_dir: Path, head: str, manifest: str | None) -> tuple[list[str], int]:
    with open_source(f"{repo_dir}@{head}") as repo:
        loaded = load_manifest(repo.eval_snapshot(), manifest=manifest, manifest_file=None, required=True)
    m = loaded.manifest
    if m is None or m.pilot is None:
        raise UsageError(
            f"the manifest at the head ({loaded.path}) names no pilot tasks",
            hint="add `pilot: {tasks: [TASK, ...], reps: 1}` to the manifest (docs/ci.md)",
        )
    return list(m.pilot.tasks), m.pilot.reps


def _harness_bin(settings: PilotSettings, note: Progress) -> str | None:
    """The harness executable: the one given, else the one dokimi finds, else the pinned one the action's
    scripts/install-harness.sh installs."""
    profile = load_profile(settings.harness)
    try:
        return str(resolve_bin(profile, settings.bin))
    except DokimiError:
        script = settings.action_path / "scripts" / "install-harness.sh" if settings.action_path else None
        if settings.bin is not None or script is None or not script.is_file():
            raise
    note.note(f"installing the pinned {settings.harness} ({script})")
    done = run(["bash", str(script), settings.harness], timeout=INSTALL_TIMEOUT_S, bounds=Bounds(1 << 20))
    if done.returncode != 0 or not done.stdout.strip():
        raise UsageError(f"{script} failed: {done.stderr.strip().splitlines()[-1:] or done.returncode}")
    return done.stdout.strip().splitlines()[-1]


def _base_image(note: Progress) -> None:
    """dokimi's base image, built offline by ``dokimi setup``'s script when the daemon lacks it."""
    if image_exists(BASE_IMAGE):
        return
    note.note(f"building {BASE_IMAGE} (dokimi setup)")
    done = run(["bash", str(script_path())], timeout=INSTALL_TIMEOUT_S, bounds=Bounds(max_output=1 << 20))
    if done.returncode != 0:
        raise UsageError(f"dokimi setup failed: {done.stderr.strip().splitlines()[-1:]}")


def run_pilot(
    repo_dir: Path,
    base: str,
    head: str,
    number: int,
    manifest: str | None,
    settings: PilotSettings,
    progress: Progress,
) -> PilotOutcome:
    """Run the pilot batch of the pull request and compare its two arms."""
    tasks, reps = _pilot_tasks(repo_dir, head, manifest)
    model = settings.model or (DRY_RUN_MODEL if settings.dry_run else None)
    if model is None:
        raise UsageError("a real pilot needs a model", hint="give the model input (or dry-run: true)")
    _base_image(progress)
    baseline, treatment = base_arm(base), ARM_TREE
    harness_bin = _harness_bin(settings, progress)
    source = f"{repo_dir}@{head}"
    if not settings.dry_run:  # a real run admits only tasks checked on what it runs
        progress.note(f"tasks check of the pilot tasks ({', '.join(tasks)}) under both arms")
        with open_source(source) as repo:
            loaded = load_manifest(repo.eval_snapshot(), manifest=manifest, manifest_file=None, required=True)
            report = check_tasks(repo, loaded, CheckOptions(task_ids=tasks, arms=[baseline, treatment]))
        broken = [f"{t.task}: {'; '.join(t.problems) or t.status}" for t in report.tasks if t.status != "ok"]
        if broken:
            raise UsageError("the pilot tasks are not sound: " + " | ".join(broken))
    options = RunOptions(
        source=source,
        arms=(Arm(baseline), Arm(treatment)),
        models=(model,),
        reps=reps,
        batch=f"pr-{number}-{head[:12]}",
        out=settings.out,
        manifest=manifest,
        tasks=tuple(tasks),
        harness=settings.harness,
        bin=harness_bin,
        jobs=settings.jobs,
        dry_run=settings.dry_run,
    )
    result = run_batch(options, progress=progress)
    doc = compare([str(result.root)], baseline)
    return PilotOutcome(
        batch=result.root,
        doc=doc,
        tasks=tasks,
        reps=reps,
        baseline=baseline,
        treatment=treatment,
        dry_run=settings.dry_run,
        complete=result.complete,
        model=model,
    )


def _number(value: float | None, digits: int = 3, *, sign: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def _interval(m: Measure) -> str:
    return "-" if m.ci is None else f"[{m.ci[0]:+.3f}, {m.ci[1]:+.3f}]"


def pilot_comment(outcome: PilotOutcome, number: int) -> str:
    """The pull request comment: the compare table of the two arms and the power verdict of each test."""
    doc = outcome.doc
    head_label = f"`{ARM_TREE}` (this pull request's guidance)"
    base_label = f"`guidance:at={outcome.baseline.rsplit('=', 1)[-1][:12]}` (the base's guidance)"
    lines = [PILOT_MARKER, f"### dokimi: the pilot A/B of #{number}'s guidance", ""]
    if outcome.dry_run:
        lines += [
            "> **DRY RUN**: every agent talked to dokimi's scripted model, which replays each task's "
            "reference solution: these numbers prove the path (image, harness, graders), not the guidance.",
            "",
        ]
    tasks = ", ".join(quote(t, 80) for t in outcome.tasks)
    lines += [
        f"{head_label} against {base_label}, model `{outcome.model}`, on {len(outcome.tasks)} pilot "
        f"task(s) ({tasks}) x {outcome.reps} rep(s). The task is the unit; the interval is 95% over tasks, "
        "the p a two-sided sign-flip test.",
        "",
    ]
    if not doc.comparisons:
        lines += ["No task finished in both arms: nothing to compare yet.", ""]
    for comparison in doc.comparisons:
        lines += [
            "| measure | base | PR | delta | 95% interval | up / down / tied | p |",
            "|---|---|---|---|---|---|---|",
        ]
        shown = [m for m in comparison.measures if m.kind in SHOWN_KINDS]
        for m in shown:
            lines.append(
                f"| {m.name} | {_number(m.baseline_mean)} | {_number(m.treatment_mean)} | "
                f"{_number(m.delta, sign=True)} | {_interval(m)} | {m.up} / {m.down} / {m.tied} | "
                f"{'-' if m.p is None else f'{m.p:.3g}'} |"
            )
        lines.append("")
        for m in shown:
            if m.kind in ("gate", "score"):
                lines.append(f"- **{m.name}**: {power_verdict(m)}.")
        for unpaired in comparison.unpaired[:10]:
            lines.append(
                f"- {quote(unpaired.task, 80)} left out of {unpaired.measure}: {quote(unpaired.reason)}"
            )
        lines.append("")
    if not outcome.complete:
        lines += ["Some cells did not finish: run the pilot again to fill them.", ""]
    for warning in doc.warnings[:5]:
        lines.append(f"- warning: {quote(warning.message)}")
    lines.append(
        f"Batch `{outcome.batch.name}` on the runner; `dokimi repo report {outcome.batch.name}` reads it."
    )
    return "\n".join(lines) + "\n"
