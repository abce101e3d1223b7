"""``dokimi ci pull-request``: the GitHub Action's script (dokimi.ci.action, docs/ci.md). Every option falls
back on the variable GitHub sets (GITHUB_REPOSITORY, GITHUB_EVENT_PATH, ...) or the one action.yml passes an
input in (DOKIMI_CI_*); the token is read from the variable --token-env names, never from an argument.

Exit codes: 0 done; 1 the pull request adds failing claims (unless --no-fail-on-new); 2 a usage or
environment problem (no event, no base, a refused request, no pilot tasks).
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from dokimi.cli._common import note
from dokimi.cli.groups import SuggestingGroup
from dokimi.constants import EXIT_FOUND_PROBLEMS, EXIT_OK


@click.group("ci", cls=SuggestingGroup)
def ci() -> None:
    """dokimi in pull requests: the steps of the GitHub Action (action.yml, docs/ci.md)."""


@ci.command("pull-request")
@click.option(
    "-C",
    "--repo",
    "repo_dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    envvar="GITHUB_WORKSPACE",
    default=Path("."),
    show_default=True,
    help="The checkout of the pull request (default: GITHUB_WORKSPACE).",
)
@click.option(
    "--repository", envvar="GITHUB_REPOSITORY", required=True, metavar="OWNER/NAME", help="GITHUB_REPOSITORY."
)
@click.option(
    "--event",
    "event_path",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="GITHUB_EVENT_PATH",
    help="The event file (GITHUB_EVENT_PATH).",
)
@click.option(
    "--event-name", envvar="GITHUB_EVENT_NAME", default="workflow_dispatch", help="GITHUB_EVENT_NAME."
)
@click.option(
    "--pull-request",
    "pull_number",
    type=click.IntRange(min=1),
    envvar="DOKIMI_CI_PULL_REQUEST",
    help="The pull request of a dispatch (else the event's).",
)
@click.option("--api-url", envvar="GITHUB_API_URL", default="https://api.github.com", help="GITHUB_API_URL.")
@click.option(
    "--token-env",
    default="GITHUB_TOKEN",
    show_default=True,
    metavar="NAME",
    help="The variable holding the token (needs pull-requests: write and security-events: write).",
)
@click.option("--ref", envvar="GITHUB_REF", help="GITHUB_REF: the ref the SARIF belongs to.")
@click.option("--sha", envvar="GITHUB_SHA", help="GITHUB_SHA: the commit the workflow checked out.")
@click.option(
    "--mode",
    type=click.Choice(["auto", "scan", "pilot"]),
    envvar="DOKIMI_CI_MODE",
    default="auto",
    show_default=True,
    help="auto: the pilot on the pilot label or a dispatch, the scan otherwise.",
)
@click.option("--manifest", envvar="DOKIMI_CI_MANIFEST", metavar="PATH", help="repo-eval.yaml in the tree.")
@click.option(
    "--pilot-label",
    envvar="DOKIMI_CI_PILOT_LABEL",
    default="dokimi-pilot",
    show_default=True,
    metavar="LABEL",
)
@click.option(
    "--sarif/--no-sarif",
    "upload_sarif",
    envvar="DOKIMI_CI_UPLOAD_SARIF",
    default=True,
    help="Upload the head's SARIF to code scanning.",
)
@click.option(
    "--fail-on-new/--no-fail-on-new",
    envvar="DOKIMI_CI_FAIL_ON_NEW",
    default=True,
    help="Exit 1 when the pull request adds failing claims.",
)
@click.option("--comment/--no-comment", envvar="DOKIMI_CI_COMMENT", default=True, help="Comment on the PR.")
@click.option(
    "--comment-author",
    envvar="DOKIMI_CI_COMMENT_AUTHOR",
    default="github-actions[bot]",
    show_default=True,
    help="Whose earlier comment is edited in place (the token's login).",
)
@click.option("--model", envvar="DOKIMI_CI_MODEL", metavar="ID", help="The pilot's model.")
@click.option(
    "--dry-run", is_flag=True, envvar="DOKIMI_CI_DRY_RUN", help="The pilot against the scripted model."
)
@click.option("--bin", "bin_", envvar="DOKIMI_CI_BIN", metavar="PATH", help="The harness executable.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the pilot's batch goes (default: $DOKIMI_HOME/runs/<manifest id>).",
)
@click.option(
    "-j", "--jobs", type=click.IntRange(min=1), envvar="DOKIMI_CI_JOBS", help="Pilot cells side by side."
)
@click.option(
    "--action-path",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="GITHUB_ACTION_PATH",
    help="The action's checkout: its scripts/install-harness.sh installs the pinned harness.",
)
@click.option(
    "--output-file",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="GITHUB_OUTPUT",
    help="GITHUB_OUTPUT.",
)
@click.option(
    "--summary-file",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="GITHUB_STEP_SUMMARY",
    help="GITHUB_STEP_SUMMARY.",
)
def pull_request(
    repo_dir: Path,
    repository: str,
    event_path: Path | None,
    event_name: str,
    pull_number: int | None,
    api_url: str,
    token_env: str,
    ref: str | None,
    sha: str | None,
    mode: str,
    manifest: str | None,
    pilot_label: str,
    upload_sarif: bool,
    fail_on_new: bool,
    comment: bool,
    comment_author: str,
    model: str | None,
    dry_run: bool,
    bin_: str | None,
    out: Path | None,
    jobs: int | None,
    action_path: Path | None,
    output_file: Path | None,
    summary_file: Path | None,
) -> int:
    """Scan a pull request's guidance against its base (SARIF, a comment on new failing claims), or run the
    pilot A/B of its guidance against the base's on the manifest's pilot tasks (a comment with the compare
    table and its power verdict)."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.ci.action import ActionSettings, run_action
    from dokimi.ci.pilot import PilotSettings

    settings = ActionSettings(
        repo_dir=repo_dir.resolve(),
        repository=repository,
        event_name=event_name,
        event_path=event_path,
        token=os.environ.get(token_env) or None,
        api_url=api_url,
        pull_number=pull_number,
        ref=ref,
        sha=sha,
        mode="scan" if mode == "scan" else "pilot" if mode == "pilot" else "auto",
        manifest=manifest,
        pilot_label=pilot_label,
        upload_sarif=upload_sarif,
        fail_on_new=fail_on_new,
        comment=comment,
        comment_author=comment_author,
        output_file=output_file,
        summary_file=summary_file,
        pilot=PilotSettings(
            model=model, dry_run=dry_run, bin=bin_, out=out, jobs=jobs, action_path=action_path
        ),
    )
    if settings.token is None:
        note(f"no token in ${token_env}: nothing is posted (the comment goes to the step's summary)")
    outcome = run_action(settings, note)
    return EXIT_FOUND_PROBLEMS if outcome.failed else EXIT_OK
