"""``dokimi repo rules``: the team's review rules (docs/review-rules.md). Thin: options -> dokimi.repo.rules_*
-> text or --json.

- ``fetch``: a GitHub repository's merged pull requests' review comments, as review_comments.jsonl;
- ``mine``: candidate rules from those comments (paid: the judge's model groups them);
- ``triage``: a maintainer accepts, rejects or edits a rule (recorded in the rule);
- ``evaluate``: predictive coverage, precision and stability of the rules;
- ``effect``: review recall with the rules and without, on threads rules cover and on those none covers.

Exit codes: 0 done, 1 ``evaluate --min-coverage`` not reached, 2 usage or environment (bad input, no
model credentials, a forge that refuses).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from pathlib import Path
from typing import Any

import click

from dokimi.cli._common import FiniteFloat, echo, emit_json, json_option, note, working_tree_options
from dokimi.cli.groups import SuggestingGroup
from dokimi.constants import EXIT_FOUND_PROBLEMS, EXIT_OK
from dokimi.errors import UsageError


class DateParam(click.ParamType[dt.date]):
    """A calendar day, ``YYYY-MM-DD``."""

    name = "YYYY-MM-DD"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> dt.date:
        if isinstance(value, dt.date):
            return value
        try:
            return dt.date.fromisoformat(str(value).strip())
        except ValueError:
            self.fail(f"{value!r} is not a date of the form YYYY-MM-DD", param, ctx)


DATE = DateParam()


@click.group("rules", cls=SuggestingGroup)
def rules() -> None:
    """Team review rules: fetch review comments, mine rules from them, triage, evaluate, measure."""


# --- fetch ------------------------------------------------------------------------------------------------


@rules.command("fetch")
@click.argument("repo", metavar="OWNER/NAME")
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The review_comments.jsonl to write.",
)
@click.option(
    "--token-env",
    "token_env",
    default="GITHUB_TOKEN",
    show_default=True,
    metavar="NAME",
    help="The environment variable holding the token (never give a token on the command line).",
)
@click.option(
    "--api-base",
    "api_base",
    default=None,
    metavar="URL",
    help="The REST API's base URL (default https://api.github.com; GitHub Enterprise: https://HOST/api/v3).",
)
@click.option("--since", type=DATE, help="Only PRs merged on or after this day.")
@click.option("--until", type=DATE, help="Only PRs merged before this day.")
@click.option(
    "--no-review-bodies",
    "no_review_bodies",
    is_flag=True,
    help="Leave out reviews' summary texts (kept by default, as comments on the whole PR).",
)
@click.option(
    "--max-wait",
    "max_wait",
    type=FiniteFloat(min=0),
    default=3600.0,
    show_default=True,
    help="Longest wait for a rate limit, in seconds; a longer one stops the fetch (it resumes).",
)
@json_option
def fetch(
    repo: str,
    out: Path,
    token_env: str,
    api_base: str | None,
    since: dt.date | None,
    until: dt.date | None,
    no_review_bodies: bool,
    max_wait: float,
    as_json: bool,
) -> int:
    """Fetch the review comments of OWNER/NAME's merged pull requests from the GitHub REST API into OUT, one
    comment per line (review_comments.jsonl). A stopped fetch (Ctrl-C, a rate limit) resumes where it
    stopped when run again."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.source.forge import DEFAULT_API_BASE, FetchRequest, FetchSummary, fetch_review_comments

    token = os.environ.get(token_env, "").strip()
    if not token:
        raise UsageError(
            f"no token in ${token_env}",
            hint=f"export {token_env}=<a token that may read the repository's pull requests>",
        )
    request = FetchRequest(
        repo=repo,
        token=token,
        api_base=api_base or DEFAULT_API_BASE,
        since=since,
        until=until,
        review_bodies=not no_review_bodies,
        max_wait_s=max_wait,
    )

    def progress(summary: FetchSummary) -> None:
        if summary.pull_requests % 25 == 0:
            note(f"{summary.pull_requests} merged PRs, {summary.comments} comments ...")

    summary = fetch_review_comments(request, out, progress=progress)
    if as_json:
        emit_json(dataclasses.asdict(summary))
        return EXIT_OK
    resumed = f" ({summary.resumed} from the stopped run)" if summary.resumed else ""
    echo(
        f"{summary.pull_requests} merged PRs{resumed}, {summary.comments} comments "
        f"({summary.bots} by bots left out)"
    )
    echo(f"{summary.requests} requests, {summary.waited_s:.0f} s waited for rate limits")
    echo(f"wrote {out}")
    return EXIT_OK


# --- mine -------------------------------------------------------------------------------------------------


@rules.command("mine")
@working_tree_options
@click.option(
    "--comments",
    "comments",
    required=True,
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="review_comments.jsonl: one review comment per line (repo rules fetch writes one).",
)
@click.option(
    "--cut-date", "cut_date", type=DATE, required=True, help="Mine only PRs merged before this day."
)
@click.option("--model", "model", required=True, metavar="FULL_ID", help="The judge's full model id.")
@click.option(
    "--bin", "bin_", type=click.Path(dir_okay=False, path_type=Path), help="The Claude Code binary to run."
)
@click.option(
    "--exclude-pr",
    "exclude_prs",
    multiple=True,
    type=click.IntRange(min=1),
    metavar="N",
    help="Leave this pull request out too, besides the tasks' source_pr (repeatable).",
)
@click.option(
    "--min-prs", type=click.IntRange(min=1), default=3, show_default=True, help="A new rule's fewest PRs."
)
@click.option(
    "--min-reviewers",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="A new rule's fewest reviewers.",
)
@click.option(
    "--batch-chars",
    type=click.IntRange(min=2_000),
    default=60_000,
    show_default=True,
    help="Most characters of comments per model call.",
)
@click.option("--timeout", type=FiniteFloat(min=1), default=900.0, show_default=True, help="Per model call.")
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The rules file to write (default: review_rules.json in the eval directory); its rules keep their "
    "ids.",
)
@json_option
def mine(
    repo_dir: Path,
    manifest: str | None,
    comments: Path,
    cut_date: dt.date,
    model: str,
    bin_: Path | None,
    exclude_prs: tuple[int, ...],
    min_prs: int,
    min_reviewers: int,
    batch_chars: int,
    timeout: float,
    out: Path | None,
    as_json: bool,
) -> int:
    """Mine candidate review rules from COMMENTS: only pull requests merged before --cut-date, never one a
    task was made from or replays (task.json's source_pr) or --exclude-pr; the judge's model groups the
    comments into rules, and a new rule is written when seen on at least --min-prs pull requests from
    --min-reviewers reviewers. An existing rules file keeps its ids, texts and triage; new rules are
    candidates until `repo rules triage`."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.checks.merge.judge import JudgeOptions, ask_model, require_full_model_id
    from dokimi.repo.rules_mining import MineRequest, MiningSettings, ModelAnswer, mine_repository
    from dokimi.source.git import toplevel

    require_full_model_id(model)
    options = JudgeOptions(bin=bin_, timeout=timeout)

    def ask(prompt: str) -> ModelAnswer:
        text, cost = ask_model(prompt, model=model, options=options)
        return ModelAnswer(text, cost)

    def progress(number: int, total: int) -> None:
        note(f"grouping comments: call {number} of {total} ...")

    settings = MiningSettings(
        cut_date=cut_date,
        min_prs=min_prs,
        min_reviewers=min_reviewers,
        batch_chars=batch_chars,
        model=model,
    )
    request = MineRequest(
        repo_dir=toplevel(repo_dir) or repo_dir,
        comments=comments,
        settings=settings,
        manifest=manifest,
        exclude_prs=frozenset(exclude_prs),
        out=out,
    )
    report = mine_repository(request, ask, progress=progress)
    if as_json:
        emit_json(report)
    else:
        _print_mining(report, request.repo_dir)
    return EXIT_OK


REASONS = {
    "task_source": "on task-source PRs",
    "excluded_pr": "on PRs excluded by --exclude-pr",
    "merged_on_or_after_cut": "on PRs merged on or after the cut",
    "not_merged": "on PRs never merged",
    "by_author": "by a PR's own author",
    "empty": "empty",
}


def _shown_path(path: str, root: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(root.resolve()))
    except ValueError:
        return path


def _print_mining(report: Any, root: Path) -> None:
    left = sum(report.excluded.values())
    echo(
        f"comments: {report.comments_read} read, {report.comments_mined} mined, {left} left out"
        + (":" if left else "")
    )
    sources = "; ".join(
        f"PR #{pr} is the source of {', '.join(tasks)}" for pr, tasks in report.task_source_prs.items()
    )
    for reason, words in REASONS.items():
        if report.excluded.get(reason):
            extra = f" ({sources})" if reason == "task_source" and sources else ""
            echo(f"  {report.excluded[reason]} {words}{extra}")
    cost = "" if report.cost_usd is None else f", {report.cost_usd:.4f} USD as the harness reported it"
    echo(f"grouped by {report.model}: {report.calls} call(s){cost}")
    counts: dict[str, int] = {}
    for row in report.rules:
        counts[row.outcome] = counts.get(row.outcome, 0) + 1
    order = ("added", "updated", "unchanged", "not_seen", "below_threshold")
    echo("rules: " + ", ".join(f"{counts.get(o, 0)} {o.replace('_', ' ')}" for o in order))
    for row in report.rules:
        if row.outcome == "below_threshold":
            continue
        echo(
            f"  {row.id:<5} {row.status:<9} {row.outcome:<9} {row.prs:>3} PRs {row.reviewers:>2} reviewers  "
            f"{row.rule}"
        )
    below = [row for row in report.rules if row.outcome == "below_threshold"]
    if below:
        echo(
            f"below the threshold ({report.min_prs} PRs from {report.min_reviewers} reviewers), not written:"
        )
        for row in below:
            echo(f"  {row.prs} PRs {row.reviewers} reviewer(s)  {row.rule}")
    echo(f"wrote {_shown_path(report.out, root)}")
    echo("next: dokimi repo rules triage (a maintainer accepts, rejects or edits each candidate)")


# --- triage -----------------------------------------------------------------------------------------------


def rules_file_option(func: Any) -> Any:
    return click.option(
        "--rules",
        "rules_file",
        type=click.Path(dir_okay=False, path_type=Path),
        help="The rules file (default: review_rules.json in the eval directory).",
    )(func)


@rules.command("triage")
@click.argument("rule_id", metavar="[ID]", required=False)
@working_tree_options
@rules_file_option
@click.option("--accept", "decision", flag_value="accept", help="Confirm the rule.")
@click.option(
    "--reject", "decision", flag_value="reject", help="Reject it (it keeps its id; never offered again)."
)
@click.option("--edit", "decision", flag_value="edit", help="Change its text, paths or written_in only.")
@click.option("--rule", "text", metavar="TEXT", help="The rule's new text.")
@click.option("--paths", "paths", multiple=True, metavar="GLOB", help="The files it applies to (repeatable).")
@click.option("--written-in", "written_in", metavar="PATH", help="The guidance file that states it now.")
@click.option("--by", "by", metavar="NAME", help="Who decides (recorded with the decision).")
@click.option("--note", "note_text", metavar="TEXT", help="Why (recorded with the decision).")
@json_option
def triage(
    rule_id: str | None,
    repo_dir: Path,
    manifest: str | None,
    rules_file: Path | None,
    decision: str | None,
    text: str | None,
    paths: tuple[str, ...],
    written_in: str | None,
    by: str | None,
    note_text: str | None,
    as_json: bool,
) -> int:
    """Without ID: list the rules awaiting a maintainer's decision. With ID: accept, reject or edit that rule;
    the decision (who, when, why, what the text and paths were) is recorded in the rule."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.repo.rules import eval_dir_of, load_rules_file
    from dokimi.repo.rules_triage import TriageRequest, apply_triage, pending
    from dokimi.schemas._base import write_document
    from dokimi.schemas.review_rules import TriageDecision

    path = rules_file or eval_dir_of(repo_dir, manifest).rules_file
    document = load_rules_file(path)
    if rule_id is None:
        if decision or text or paths or written_in:
            raise click.UsageError(
                "name the rule to decide on: repo rules triage ID --accept|--reject|--edit"
            )
        waiting = pending(document)
        if as_json:
            emit_json([rule.model_dump(mode="json", by_alias=True) for rule in waiting])
            return EXIT_OK
        _print_pending(waiting, _shown_path(str(path), repo_dir))
        return EXIT_OK
    if decision is None:
        raise click.UsageError("give --accept, --reject or --edit")
    if not by:
        raise click.UsageError("give --by NAME: the decision is recorded with who made it")
    request = TriageRequest(
        rule_id=rule_id,
        decision=TriageDecision(decision),
        by=by,
        date=dt.datetime.now(dt.UTC).date(),
        note=note_text,
        rule=text,
        paths=paths or None,
        written_in=written_in,
    )
    updated, rule, caveats = apply_triage(document, request)
    write_document(path, updated)
    if as_json:
        emit_json(rule.model_dump(mode="json", by_alias=True))
        return EXIT_OK
    echo(f"{rule.id}: {rule.status.value}  ({', '.join(rule.paths)})  {rule.rule}")
    for caveat in caveats:
        note(f"note: {caveat}")
    if rule.status.value == "confirmed" and rule.written_in is None:
        note(
            f"note: {rule.id} is in no guidance file yet: add it to AGENTS.md, then --edit --written-in FILE"
        )
    return EXIT_OK


def _print_pending(waiting: Any, path: str) -> None:
    if not waiting:
        echo(f"no rule awaits triage in {path}")
        return
    echo(f"{len(waiting)} rule(s) await triage in {path}:")
    for rule in waiting:
        echo(f"  {rule.id}  {rule.prs} PRs, {rule.reviewers} reviewer(s), paths {', '.join(rule.paths)}")
        echo(f"      {rule.rule}")
        if rule.evidence:
            echo(f"      e.g. {rule.evidence[0]}")
    echo("decide each: dokimi repo rules triage ID --accept --by NAME (or --reject, or --edit --rule TEXT)")


# --- evaluate ---------------------------------------------------------------------------------------------


@rules.command("evaluate")
@working_tree_options
@rules_file_option
@click.option(
    "--comments",
    "comments",
    required=True,
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="review_comments.jsonl of maintainer comments, each labelled with the rules it is an instance of.",
)
@click.option(
    "--matches",
    "matches",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="rule_matches.jsonl: rules matched on new PRs, each with a maintainer's agreement.",
)
@click.option(
    "--sample",
    "sample",
    multiple=True,
    metavar="ID",
    help="The rules sampled for the mining's precision (repeatable; default: every rule).",
)
@click.option(
    "--min-coverage",
    "min_coverage",
    type=FiniteFloat(min=0, max=1),
    help="Exit 1 when the predictive coverage is below this share (for CI).",
)
@json_option
def evaluate(
    repo_dir: Path,
    manifest: str | None,
    rules_file: Path | None,
    comments: Path,
    matches: Path | None,
    sample: tuple[str, ...],
    min_coverage: float | None,
    as_json: bool,
) -> int:
    """How well the rules do: predictive coverage (the share of maintainer comments made on or after
    cut_date that a confirmed rule covers), the precision of the mining (the confirmed share of the sampled
    rules) and in use (the share of rule matches a maintainer agrees with), and stability (rules raised by
    one reviewer only)."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.repo.rules import RuleMatch, eval_dir_of, evaluate_rules, load_rules_file
    from dokimi.schemas.review_comments import read_review_comments, read_rule_matches

    path = rules_file or eval_dir_of(repo_dir, manifest).rules_file
    document = load_rules_file(path)
    matched = [RuleMatch(m.rule, m.agreed) for m in read_rule_matches(matches)] if matches else None
    report = evaluate_rules(document, read_review_comments(comments), matched, list(sample) or None)
    if as_json:
        emit_json(report)
    else:
        _print_evaluation(report, document, _shown_path(str(path), repo_dir))
    low = min_coverage is not None and (report.coverage.value or 0.0) < min_coverage
    if low:
        note(f"predictive coverage is below --min-coverage {min_coverage:g}")
    return EXIT_FOUND_PROBLEMS if low else EXIT_OK


def _share(share: Any) -> str:
    if share.value is None:
        return f"{share.k} of {share.n} (no data)"
    low, high = share.interval
    return f"{share.k} of {share.n} ({share.value:.0%}; 95% CI {low:.0%} to {high:.0%})"


def _print_evaluation(report: Any, document: Any, path: str) -> None:
    statuses: dict[str, int] = {}
    for rule in document.rules:
        statuses[rule.status.value] = statuses.get(rule.status.value, 0) + 1
    count = ", ".join(f"{n} {status}" for status, n in sorted(statuses.items()))
    echo(f"rules: {path} (cut {report.cut_date}; {count})")
    echo(
        f"predictive coverage: {_share(report.coverage)} comments made on or after the cut"
        + (f"; {report.before_cut} made before it not counted" if report.before_cut else "")
    )
    echo(
        "  "
        + "  ".join(
            f"{r.id}{'' if r.status == 'confirmed' else f' ({r.status})'}: {r.covered}"
            for r in report.per_rule
        )
    )
    if report.uncovered:
        echo("  covered by no confirmed rule (what the next mining should look at):")
        for url in report.uncovered:
            echo(f"    {url}")
    if report.unknown_labels:
        echo(f"  labels naming no rule of the file: {', '.join(report.unknown_labels)}")
    echo(f"precision of the mining: {_share(report.precision_mined)} sampled rules confirmed")
    if report.precision_in_use is not None:
        echo(f"precision in use: {_share(report.precision_in_use)} rule matches judged were agreed with")
    for rid in report.single_reviewer:
        confirmed = " (confirmed all the same)" if rid in report.confirmed_single_reviewer else ""
        echo(
            f"stability: {rid} was raised by one reviewer only{confirmed}: "
            "a candidate until a second reviewer raises it"
        )


# --- effect -----------------------------------------------------------------------------------------------


@rules.command("effect")
@click.argument("batch", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--with", "with_arm", metavar="ARM", help="The arm with the rules (default: every ARM+rules).")
@click.option("--without", "without_arm", metavar="ARM", help="The arm without them (default: ARM).")
@json_option
def effect(batch: Path, with_arm: str | None, without_arm: str | None, as_json: bool) -> int:
    """Review recall with the team rules in the reviewer's prompt (ARM+rules) and without (ARM), on the
    threads a rule covers and on those none covers: the loss on uncovered threads is what the rules cost."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.analysis.rules_effect import MIN_THREAD_RUNS, rules_effect

    if without_arm is not None and with_arm is None:
        raise click.UsageError("--without needs --with")
    report = rules_effect(batch, with_arm=with_arm, without_arm=without_arm)
    if as_json:
        emit_json(report)
        return EXIT_OK
    if report.dry_run:
        echo("DRY RUN: the scripted model answered; these figures are the script's, not a model's")
    for pair in report.pairs:
        effort = f" (effort {pair.effort})" if pair.effort else ""
        echo(
            f"{pair.with_arm} against {pair.without_arm}, {pair.model}{effort}: "
            f"{len(pair.tasks)} review task(s)"
        )
        if pair.note:
            echo(f"  {pair.note}")
            continue
        echo(f"  recall: {_number(pair.recall_with)} with the rules, {_number(pair.recall_without)} without")
        for name, row in (("a rule covers", pair.covered), ("no rule covers", pair.uncovered)):
            echo(
                f"  threads {name} ({row.threads}): found {_count(row.with_rules)} with the rules, "
                f"{_count(row.without_rules)} without; change {_points(row.change, row.interval)}"
            )
        echo(f"  loss on threads no rule covers: {_points(pair.loss_on_uncovered, None)}")
        if pair.underpowered:
            echo(f"  UNDERPOWERED: under {MIN_THREAD_RUNS} thread-runs in a class; a hint, not a measurement")
    return EXIT_OK


def _count(share: Any) -> str:
    return f"{share.k} of {share.n}"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _points(value: float | None, interval: Any) -> str:
    if value is None:
        return "-"
    text = f"{value * 100:+.0f} pp"
    if interval is not None:
        text += f" (95% CI {interval[0] * 100:+.0f} to {interval[1] * 100:+.0f})"
    return text
