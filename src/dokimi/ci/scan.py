"""The scan of a pull request: the L0 scan (``repo scan``) of its head and of its base, and what the pull
request changed in it.

A claim is the same claim at the base and at the head when its kind, file and text are (its line may move):
``new`` are the claims that fail at the head and did not fail at the base, ``fixed`` the other way round. A
suppressed claim counts in neither. The head's SARIF (one result per fail and unresolved claim) goes to code
scanning, each result fingerprinted by the same identity so an alert follows its claim from push to push.

The comment (:func:`scan_comment`) quotes the guidance, which the pull request's author wrote: every quoted
text is in a code span (no Markdown, no mention, no link, no HTML of theirs renders), on one line, cut at
:data:`MAX_QUOTE` characters.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dokimi.checks.scan import ScanView, scan_result, to_sarif, view_of_result
from dokimi.checks.scan.report import ClaimRow
from dokimi.constants import status_class
from dokimi.controls import strip_controls
from dokimi.source.git import run_git

MAX_LISTED = 50
MAX_QUOTE = 160
SCAN_MARKER = "<!-- dokimi:scan -->"


@dataclass
class ScanDiff:
    """The scan of the head against the scan of the base."""

    base: str
    head: str
    new: list[ClaimRow]
    fixed: list[ClaimRow]
    still: list[ClaimRow]
    guidance_changed: list[str]
    """Guidance files (and the manifest) the pull request changes."""
    head_view: ScanView
    sarif: dict[str, Any] = field(default_factory=dict)
    head_counts: dict[str, int] = field(default_factory=dict)


def claim_key(claim: ClaimRow) -> tuple[str, str, str]:
    """What makes a claim the same claim at two revisions: its kind, file and text, not its line."""
    return (claim.kind, claim.file, claim.claim)


def failing(view: ScanView) -> dict[tuple[str, str, str], ClaimRow]:
    return {claim_key(c): c for c in view.claims if status_class(c.status) == "fail" and c.suppressed is None}


def _by_place(claims: Iterable[ClaimRow]) -> list[ClaimRow]:
    return sorted(claims, key=lambda c: (c.file, c.line, c.kind, c.claim))


def changed_paths(git_dir: Path, base: str, head: str) -> list[str]:
    """The paths the pull request changes (base to head, renames as a delete and an add)."""
    raw = run_git(
        ["diff", "--no-renames", "--no-ext-diff", "--name-only", "-z", base, head, "--"], git_dir=git_dir
    )
    return [p for p in raw.decode("utf-8", "surrogateescape").split("\0") if p]


def scan_pull_request(repo_dir: Path, git_dir: Path, base: str, head: str, manifest: str | None) -> ScanDiff:
    """Scan the head and the base (offline, from git), and compare their failing claims."""
    scanned_head = scan_result(f"{repo_dir}@{head}", manifest=manifest)
    scanned_base = scan_result(f"{repo_dir}@{base}", manifest=manifest)
    head_view, base_view = view_of_result(scanned_head.result), view_of_result(scanned_base.result)
    now, before = failing(head_view), failing(base_view)
    guidance = {f.path for s in (scanned_head, scanned_base) for f in s.result.files}
    guidance |= {m for m in (scanned_head.manifest, scanned_base.manifest) if m}
    sarif = to_sarif(head_view)
    for result in sarif["runs"][0]["results"]:  # see the module docstring
        location = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        text = result["message"]["text"]
        result.setdefault("partialFingerprints", {})["dokimiClaim/v1"] = _fingerprint(
            result["ruleId"], location, text
        )
    return ScanDiff(
        base=base,
        head=head,
        new=_by_place(c for k, c in now.items() if k not in before),
        fixed=_by_place(c for k, c in before.items() if k not in now),
        still=_by_place(c for k, c in now.items() if k in before),
        guidance_changed=sorted(p for p in changed_paths(git_dir, base, head) if p in guidance),
        head_view=head_view,
        sarif=sarif,
        head_counts=dict(head_view.counts),
    )


def _fingerprint(rule: str, path: str, message: str) -> str:
    return hashlib.sha256(f"{rule}\0{path}\0{message}".encode()).hexdigest()[:32]


def sarif_upload(sarif: dict[str, Any], commit: str, ref: str) -> dict[str, Any]:
    """The body of ``POST /repos/{owner}/{repo}/code-scanning/sarifs``: the SARIF gzipped, then base64."""
    packed = gzip.compress(json.dumps(sarif, sort_keys=True).encode("utf-8"), mtime=0)
    return {
        "commit_sha": commit,
        "ref": ref,
        "sarif": base64.b64encode(packed).decode("ascii"),
        "tool_name": "dokimi-scan",
    }


def quote(text: str, limit: int = MAX_QUOTE) -> str:
    """Text the pull request's author wrote, shown safely in a Markdown table: one line, control characters
    and new lines gone, cut at ``limit``, in a code span long enough for the backticks it holds, ``|``
    escaped for the table."""
    line = " ".join(strip_controls(text).split())
    if len(line) > limit:
        line = line[: limit - 1] + "…"
    line = line.replace("|", "\\|")
    longest = 0
    run = 0
    for char in line:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    ticks = "`" * (longest + 1)
    pad = " " if line.startswith("`") or line.endswith("`") or not line else ""
    return f"{ticks}{pad}{line}{pad}{ticks}"


def _claim_rows(claims: list[ClaimRow]) -> list[str]:
    rows = ["| where | kind | claim | why |", "|---|---|---|---|"]
    for c in claims[:MAX_LISTED]:
        rows.append(f"| {quote(f'{c.file}:{c.line}')} | {c.kind} | {quote(c.claim)} | {quote(c.why)} |")
    if len(claims) > MAX_LISTED:
        rows.append(
            f"| … | | {len(claims) - MAX_LISTED} more: the SARIF upload and the job's log list them all | |"
        )
    return rows


def scan_comment(diff: ScanDiff, number: int, *, sarif_note: str) -> str:
    """The pull request comment: new failures first, then what the pull request fixed, then the totals."""
    short_base, short_head = diff.base[:7], diff.head[:7]
    lines = [
        SCAN_MARKER,
        f"### dokimi: the guidance scan of #{number}",
        "",
        f"Head `{short_head}` against base `{short_base}` (`dokimi repo scan`: every mechanically checkable "
        "claim of the guidance, offline).",
        "",
    ]
    if diff.guidance_changed:
        shown = ", ".join(quote(p, 80) for p in diff.guidance_changed[:10])
        more = f" and {len(diff.guidance_changed) - 10} more" if len(diff.guidance_changed) > 10 else ""
        lines += [f"Guidance this pull request changes: {shown}{more}.", ""]
    if diff.new:
        lines += [
            f"**{len(diff.new)} new failing claim(s)**: they fail at the head and did not at the base.",
            "",
        ]
        lines += [*_claim_rows(diff.new), ""]
    else:
        lines += ["**No new failing claim.**", ""]
    if diff.fixed:
        lines += [
            f"{len(diff.fixed)} claim(s) that failed at the base pass now:",
            "",
            *_claim_rows(diff.fixed),
            "",
        ]
    counts = diff.head_counts
    lines.append(
        f"At the head: {counts.get('fail', 0)} fail ({len(diff.still)} of them failed at the base too), "
        f"{counts.get('unresolved', 0)} unresolved, {counts.get('ok', 0)} ok. {sarif_note}"
    )
    return "\n".join(lines) + "\n"
