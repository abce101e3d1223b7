"""``dokimi ci pull-request``: what the GitHub Action does for one pull request (docs/ci.md).

Which step runs (``mode: auto``): the pilot A/B when the event added the pilot label (``labeled``) or is a
dispatch; the scan otherwise. The scan compares the head's failing claims with the base's, uploads the head's
SARIF to code scanning, and comments when the pull request changes guidance, adds a failing claim, or was
commented on before (the comment is then brought up to date). The pilot comments its compare table. Each kind
of comment is one comment, found again by its marker and its author (``github-actions[bot]`` for the
workflow's token) and edited in place on the next push: a comment someone else wrote with the marker is never
touched.

The head is what the workflow checked out (``git rev-parse HEAD``: the merge commit for a ``pull_request``
event, the pull request's head when the checkout asks for it); the base is the event's ``base.sha``, fetched
from ``origin`` when the checkout lacks it. The step's outputs (``GITHUB_OUTPUT``) and summary
(``GITHUB_STEP_SUMMARY``) are written when those files are named.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from dokimi.batch import CellKey
from dokimi.ci.event import PullRequest, read_pull_request
from dokimi.ci.pilot import PILOT_MARKER, PilotSettings, pilot_comment, run_pilot
from dokimi.ci.scan import SCAN_MARKER, sarif_upload, scan_comment, scan_pull_request
from dokimi.errors import DokimiError, UsageError
from dokimi.runner.cell import CellOutcome
from dokimi.source.forge import DEFAULT_API_BASE, ForgeError, GitHubApi
from dokimi.source.git import run_git

Mode = Literal["auto", "scan", "pilot"]
DEFAULT_PILOT_LABEL = "dokimi-pilot"
DEFAULT_COMMENT_AUTHOR = "github-actions[bot]"


@dataclass(frozen=True)
class ActionSettings:
    """The action's inputs and GitHub's variables, as plain values."""

    repo_dir: Path
    repository: str
    """``owner/name`` (GITHUB_REPOSITORY)."""
    event_name: str
    event_path: Path | None = None
    token: str | None = None
    api_url: str = DEFAULT_API_BASE
    pull_number: int | None = None
    ref: str | None = None
    """GITHUB_REF: the ref the SARIF belongs to (``refs/pull/N/merge``)."""
    sha: str | None = None
    """GITHUB_SHA: the commit the workflow checked out."""
    mode: Mode = "auto"
    manifest: str | None = None
    pilot_label: str = DEFAULT_PILOT_LABEL
    upload_sarif: bool = True
    fail_on_new: bool = True
    comment: bool = True
    comment_author: str = DEFAULT_COMMENT_AUTHOR
    output_file: Path | None = None
    summary_file: Path | None = None
    pilot: PilotSettings = field(default_factory=PilotSettings)


@dataclass
class ActionOutcome:
    mode: Literal["scan", "pilot"]
    number: int
    base: str
    head: str
    markdown: str = ""
    comment_url: str | None = None
    new_failures: int | None = None
    sarif_id: str | None = None
    batch: Path | None = None
    failed: bool = False
    """The step fails: new failing claims (with fail_on_new)."""


class _Notes:
    """The batch's progress as lines (:class:`dokimi.runner.run.Progress`)."""

    def __init__(self, note: Callable[[str], None]) -> None:
        self._note = note

    def note(self, text: str) -> None:
        self._note(text)

    def batch(self, root: Path, *, default_place: bool) -> None:
        self._note(f"batch {root}")

    def planned(self, total: int, done: int) -> None:
        self._note(f"{total} cell(s), {done} done already")

    def cell_started(self, key: CellKey) -> None:
        pass

    def cell_done(self, outcome: CellOutcome) -> None:
        self._note(f"cell {outcome.key.task} {outcome.key.arm} rep{outcome.key.rep}: {outcome.status}")


def chosen_mode(mode: Mode, pr: PullRequest, pilot_label: str) -> Literal["scan", "pilot"]:
    """``auto``: the pilot when the event added the pilot label or is not a pull request event (a dispatch);
    the scan otherwise."""
    if mode != "auto":
        return mode
    if pr.action == "labeled":
        return "pilot" if pr.label == pilot_label else "scan"
    return "scan" if pr.event_name in ("pull_request", "pull_request_target") else "pilot"


def _git(repo_dir: Path, *args: str) -> str:
    return run_git(list(args), cwd=repo_dir).decode("utf-8", "replace").strip()


def _has_commit(repo_dir: Path, sha: str) -> bool:
    try:
        _git(repo_dir, "cat-file", "-e", f"{sha}^{{commit}}")
    except DokimiError:
        return False
    return True


def head_and_base(repo_dir: Path, pr: PullRequest) -> tuple[str, str]:
    """The checked-out commit, and the base (fetched from ``origin`` when the checkout lacks it)."""
    try:
        head = _git(repo_dir, "rev-parse", "--verify", "HEAD^{commit}")
    except DokimiError as exc:
        raise UsageError(
            f"{repo_dir} has no checked-out commit: {exc.message.splitlines()[0]}",
            hint="check the repository out first (actions/checkout with fetch-depth: 0)",
        ) from None
    if not _has_commit(repo_dir, pr.base_sha):
        try:
            _git(repo_dir, "fetch", "--no-tags", "--quiet", "origin", pr.base_sha)
        except DokimiError as exc:
            raise UsageError(
                f"the base {pr.base_sha[:12]} is not in the checkout and cannot be fetched: "
                f"{exc.message.splitlines()[0]}",
                hint="use actions/checkout with fetch-depth: 0",
            ) from None
    return head, pr.base_sha


def _our_comment(item: object, marker: str, author: str) -> int | None:
    """The id of a comment of this kind that we wrote (its marker first, its author ours); None otherwise."""
    if not isinstance(item, dict):
        return None
    user, body, ident = item.get("user"), item.get("body"), item.get("id")
    login = user.get("login") if isinstance(user, dict) else None
    if isinstance(body, str) and body.startswith(marker) and login == author and isinstance(ident, int):
        return ident
    return None


def find_comment(api: GitHubApi, number: int, marker: str, author: str) -> int | None:
    for item in api.pages(f"/issues/{number}/comments?per_page=100"):
        found = _our_comment(item, marker, author)
        if found is not None:
            return found
    return None


def upsert_comment(api: GitHubApi, number: int, marker: str, body: str, author: str) -> str | None:
    """Edit the earlier comment of this kind (its marker, its author) or post a new one; its URL."""
    earlier = find_comment(api, number, marker, author)
    if earlier is not None:
        answer = api.patch(f"/issues/comments/{earlier}", {"body": body})
    else:
        answer = api.post(f"/issues/{number}/comments", {"body": body})
    return str(answer.get("html_url")) if isinstance(answer, dict) else None


def run_action(settings: ActionSettings, note: Callable[[str], None]) -> ActionOutcome:
    """Everything the action does for one pull request (see the module docstring)."""
    api = (
        GitHubApi(settings.repository, settings.token, api_base=settings.api_url) if settings.token else None
    )
    pr = read_pull_request(settings.event_path, settings.event_name, number=settings.pull_number, api=api)
    head, base = head_and_base(settings.repo_dir, pr)
    mode = chosen_mode(settings.mode, pr, settings.pilot_label)
    note(f"pull request #{pr.number}: {mode}, head {head[:12]} against base {base[:12]}")
    outcome = ActionOutcome(mode, pr.number, base, head)
    if mode == "scan":
        _scan(settings, api, pr, outcome, note)
    else:
        _pilot(settings, api, pr, outcome, note)
    write_outputs(settings, outcome)
    return outcome


def _scan(
    settings: ActionSettings,
    api: GitHubApi | None,
    pr: PullRequest,
    outcome: ActionOutcome,
    note: Callable[[str], None],
) -> None:
    git_dir = Path(_git(settings.repo_dir, "rev-parse", "--absolute-git-dir"))
    diff = scan_pull_request(settings.repo_dir, git_dir, outcome.base, outcome.head, settings.manifest)
    outcome.new_failures = len(diff.new)
    note(
        f"scan: {len(diff.new)} new failing claim(s), {len(diff.fixed)} fixed, {len(diff.still)} failing "
        f"before too; guidance changed: {', '.join(diff.guidance_changed) or 'none'}"
    )
    sarif_note = "SARIF not uploaded (no token or upload-sarif: false)."
    refused: ForgeError | None = None
    if api is not None and settings.upload_sarif:
        ref = settings.ref if settings.ref and settings.sha == outcome.head else f"refs/pull/{pr.number}/head"
        try:
            answer = api.post("/code-scanning/sarifs", sarif_upload(diff.sarif, outcome.head, ref))
        except ForgeError as exc:  # the comment matters more: post it, then fail the step on this
            refused = exc
            sarif_note = "The SARIF upload was refused: the job's log says why."
        else:
            outcome.sarif_id = str(answer.get("id")) if isinstance(answer, dict) else None
            sarif_note = "Each failing and unresolved claim is annotated on its line (code scanning)."
            note(f"SARIF uploaded for {outcome.head[:12]} on {ref}: {outcome.sarif_id}")
    outcome.markdown = scan_comment(diff, pr.number, sarif_note=sarif_note)
    worth = bool(diff.guidance_changed or diff.new)
    if api is not None and settings.comment:
        if worth or find_comment(api, pr.number, SCAN_MARKER, settings.comment_author) is not None:
            outcome.comment_url = upsert_comment(
                api, pr.number, SCAN_MARKER, outcome.markdown, settings.comment_author
            )
            note(f"comment: {outcome.comment_url}")
        else:
            note("no guidance changed and no new failing claim: no comment")
    if refused is not None:
        write_outputs(settings, outcome)
        raise refused
    outcome.failed = bool(diff.new) and settings.fail_on_new


def _pilot(
    settings: ActionSettings,
    api: GitHubApi | None,
    pr: PullRequest,
    outcome: ActionOutcome,
    note: Callable[[str], None],
) -> None:
    piloted = run_pilot(
        settings.repo_dir,
        outcome.base,
        outcome.head,
        pr.number,
        settings.manifest,
        settings.pilot,
        _Notes(note),
    )
    outcome.batch = piloted.batch
    outcome.markdown = pilot_comment(piloted, pr.number)
    if api is not None and settings.comment:
        outcome.comment_url = upsert_comment(
            api, pr.number, PILOT_MARKER, outcome.markdown, settings.comment_author
        )
        note(f"comment: {outcome.comment_url}")


def write_outputs(settings: ActionSettings, outcome: ActionOutcome) -> None:
    """The step's outputs (``name=value`` lines) and its summary (the comment's Markdown)."""
    values = {
        "mode": outcome.mode,
        "pull-request": str(outcome.number),
        "head": outcome.head,
        "base": outcome.base,
        "new-failures": "" if outcome.new_failures is None else str(outcome.new_failures),
        "comment-url": outcome.comment_url or "",
        "sarif-id": outcome.sarif_id or "",
        "batch": str(outcome.batch) if outcome.batch is not None else "",
    }
    if settings.output_file is not None:
        with open(settings.output_file, "a", encoding="utf-8") as out:
            for key, value in values.items():
                out.write(f"{key}={' '.join(value.split())}\n")
    if settings.summary_file is not None and outcome.markdown:
        with open(settings.summary_file, "a", encoding="utf-8") as out:
            out.write(outcome.markdown.split("\n", 1)[1] + "\n")
