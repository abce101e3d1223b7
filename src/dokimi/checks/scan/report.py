"""The readiness document: claims, counts, the --static merge, the gate; and its text and SARIF renderings.

The renderings read a :class:`ScanView`, made from the scan's own result (:func:`view_of_result`, no pydantic:
the text output of a scan in pre-commit) or from the repo_readiness.v1 document (:func:`view_of_document`,
after a --static merge or when the document is written anyway).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from typing import IO, TYPE_CHECKING, Any, NamedTuple

from dokimi import __version__
from dokimi.checks.scan.engine import ScanResult
from dokimi.constants import status_class
from dokimi.controls import escape_controls

if TYPE_CHECKING:
    from dokimi.schemas.readiness import Claim, RepoReadiness
    from dokimi.schemas.static import RepoStatic

STATUS_ORDER = ("fail", "unresolved", "ok")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def count_classes(claims: Iterable[Claim | ClaimRow]) -> dict[str, int]:
    """Claims per status class; a suppressed claim counts in none."""
    counts = {"ok": 0, "unresolved": 0, "fail": 0}
    for claim in claims:
        if claim.suppressed is None:
            counts[status_class(claim.status)] += 1
    return counts


def build_readiness(
    result: ScanResult,
    *,
    source: str,
    rev: str | None,
    manifest: str | None,
    globs: list[str],
    also_scan: list[str],
    defaulted: bool,
) -> RepoReadiness:
    # repo scan's lean start (tests/checks/scan/test_lean_cli.py)
    from dokimi.schemas.readiness import BuildSystems, Claim, Gate, GuidanceFile, RepoReadiness, Warning_

    claims = [
        Claim(
            file=d.file,
            line=d.line,
            kind=d.kind,
            claim=d.claim,
            status=d.verdict.status,
            why=d.verdict.why,
            fix=d.verdict.fix,
            suppressed=d.suppressed,
        )
        for d in result.drafts
    ]
    framework = count_classes(claims)
    document = RepoReadiness(
        schema="repo_readiness.v1",
        source=source,
        rev=rev,
        manifest=manifest,
        guidance_globs=globs,
        also_scan=also_scan,
        defaulted=defaulted,
        build_systems=BuildSystems(**dataclasses.asdict(result.build_systems)),
        files=[GuidanceFile(**f._asdict()) for f in result.files],
        claims=claims,
        counts=dict(framework),
        suppressed=sum(1 for c in claims if c.suppressed is not None),
        by_source={"framework": framework},
        warnings=[Warning_(**w._asdict()) for w in result.warnings],
        gate=Gate(passed=True),
    )
    return with_gate(document)


def merge_static(document: RepoReadiness, static: RepoStatic, *, path: str) -> RepoReadiness:
    """A repository claim replaces the framework claim on the same (file, line, claim text); by_source keeps
    both sides' counts from before the merge."""
    # repo scan's lean start (tests/checks/scan/test_lean_cli.py)
    from dokimi.schemas.readiness import Claim, StaticMerge

    repo_claims = []
    for item in static.claims:
        data = item.model_dump(mode="json", by_alias=True)
        extra = {
            k: v
            for k, v in data.items()
            if k not in ("file", "line", "status", "kind", "claim", "why", "fix")
        }
        repo_claims.append(
            Claim(
                file=item.file,
                line=item.line,
                kind=str(data.get("kind") or "repository"),
                claim=str(data.get("claim") or ""),
                status=item.status,
                why=str(data.get("why") or ""),
                fix=data.get("fix") if isinstance(data.get("fix"), str) else None,
                source="repository",
                extra=extra,
            )
        )
    keys = {(c.file, c.line, c.claim) for c in repo_claims}
    kept = [c for c in document.claims if (c.file, c.line, c.claim) not in keys or c.source != "framework"]
    replaced = len(document.claims) - len(kept)
    merged = sorted([*kept, *repo_claims], key=lambda c: (c.file, c.line, c.claim, c.kind, c.source))
    by_source = dict(document.by_source)
    by_source["repository"] = count_classes(repo_claims)
    top = {
        k: v
        for k, v in static.model_dump(mode="json", by_alias=True).items()
        if k not in ("schema", "claims")
    }
    updated = document.model_copy(
        update={
            "claims": merged,
            "counts": count_classes(merged),
            "suppressed": sum(1 for c in merged if c.suppressed is not None),
            "by_source": by_source,
            "static": StaticMerge(path=path, merged=True, replaced=replaced, top_level=top),
        }
    )
    return with_gate(updated)


def static_not_merged(document: RepoReadiness, *, path: str, error: str) -> RepoReadiness:
    # repo scan's lean start (tests/checks/scan/test_lean_cli.py)
    from dokimi.schemas.readiness import StaticMerge, Warning_

    warning = Warning_(
        kind="static", path=path, message=f"--static {path} was not merged: {error}", gate=True
    )
    updated = document.model_copy(
        update={
            "static": StaticMerge(path=path, merged=False, error=error),
            "warnings": [*document.warnings, warning],
        }
    )
    return with_gate(updated)


def with_gate(document: RepoReadiness) -> RepoReadiness:
    """--fail-on-fail: any fail claim, a missing also_scan file, an unreadable guidance file, no guidance
    matched (incomplete), or an invalid --static document. A glob with no match does not fail it."""
    # repo scan's lean start (tests/checks/scan/test_lean_cli.py)
    from dokimi.schemas.readiness import Gate

    reasons = gate_reasons(document.counts.get("fail", 0), document.warnings)
    return document.model_copy(update={"gate": Gate(passed=not reasons, reasons=reasons)})


def gate_reasons(fails: int, warnings: Iterable[Any]) -> list[str]:
    """Why --fail-on-fail fails: the fail claims, then each warning that counts against the gate."""
    reasons = [f"{fails} claim{'s' if fails != 1 else ''} fail"] if fails else []
    return reasons + [w.message for w in warnings if w.gate]


# --- renderings ---------------------------------------------------------------------------------------------


class ClaimRow(NamedTuple):
    file: str
    line: int
    kind: str
    claim: str
    status: str
    why: str
    fix: str | None
    source: str
    suppressed: str | None = None


@dataclasses.dataclass(frozen=True)
class ScanView:
    """What the text and SARIF renderings show, from the scan's result or from the document."""

    claims: list[ClaimRow]
    warnings: list[str]
    adapters: list[str]
    selected_by: str
    scanned: int
    counts: dict[str, int]
    gate_passed: bool
    suppressed: int = 0


def view_of_result(result: ScanResult) -> ScanView:
    claims = [
        ClaimRow(
            d.file,
            d.line,
            d.kind,
            d.claim,
            d.verdict.status,
            d.verdict.why,
            d.verdict.fix,
            "framework",
            d.suppressed,
        )
        for d in result.drafts
    ]
    counts = count_classes(claims)
    return ScanView(
        claims=claims,
        warnings=[w.message for w in result.warnings],
        adapters=list(result.build_systems.adapters),
        selected_by=result.build_systems.selected_by,
        scanned=sum(1 for f in result.files if f.state == "scanned"),
        counts=counts,
        gate_passed=not gate_reasons(counts["fail"], result.warnings),
        suppressed=sum(1 for c in claims if c.suppressed is not None),
    )


def view_of_document(document: RepoReadiness) -> ScanView:
    return ScanView(
        claims=[
            ClaimRow(c.file, c.line, c.kind, c.claim, c.status, c.why, c.fix, c.source, c.suppressed)
            for c in document.claims
        ],
        warnings=[w.message for w in document.warnings],
        adapters=list(document.build_systems.adapters),
        selected_by=document.build_systems.selected_by,
        scanned=sum(1 for f in document.files if f.state == "scanned"),
        counts=dict(document.counts),
        gate_passed=document.gate.passed,
        suppressed=document.suppressed,
    )


def summary_line(view: ScanView) -> str:
    counts = view.counts
    total = sum(counts.values()) + view.suppressed
    text = (
        f"scan: {view.scanned} guidance file{'s' if view.scanned != 1 else ''}, {total} claims: "
        f"{counts.get('ok', 0)} ok, "
        f"{counts.get('unresolved', 0)} unresolved, {counts.get('fail', 0)} fail"
    )
    if view.suppressed:
        text += f", {view.suppressed} suppressed"
    if view.warnings:
        text += f"; {len(view.warnings)} warning{'s' if len(view.warnings) != 1 else ''}"
    return text + ("" if view.gate_passed else " (gate: fail)")


#: ANSI colours of the status word on a terminal: fail red, unresolved yellow.
COLORS = {"fail": "\033[31m", "unresolved": "\033[33m"}
RESET = "\033[0m"


def use_color(stream: IO[str]) -> bool:
    """Colour on a terminal only, and never when NO_COLOR is set (no-color.org) or TERM is dumb."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def claim_line(claim: ClaimRow, *, color: bool = False) -> str:
    """``path:line: status kind claim: why; fix``: a form editors and CI logs turn into a link to the line.
    The repository's text (a path, a claim) is shown with its control characters as escapes."""
    status = claim.status
    klass = status_class(status)
    if color and klass in COLORS and claim.suppressed is None:
        status = f"{COLORS[klass]}{status}{RESET}"
    file, kind, what, why = (
        escape_controls(str(v)) for v in (claim.file, claim.kind, claim.claim, claim.why)
    )
    text = f"{file}:{claim.line}: {status} {kind} {what}: {why}"
    if claim.fix:
        text += f"; {escape_controls(claim.fix)}"
    if claim.source == "repository":
        text += " [repository]"
    if claim.suppressed is not None:
        text += f" [suppressed by the {claim.suppressed}]"
    return text


def render_text(view: ScanView, *, show_all: bool = False, color: bool = False) -> str:
    """One ``path:line: status kind claim: why`` line per fail and unresolved claim (every claim with
    ``show_all``), sorted by file and line; then the warnings, the adapters and one summary line."""
    shown = [c for c in view.claims if show_all or status_class(c.status) != "ok"]
    shown.sort(key=lambda c: (c.file, c.line, c.claim))
    lines = [claim_line(c, color=color) for c in shown]
    for message in view.warnings:
        lines.append(f"warning: {escape_controls(message)}")
    adapters = ", ".join(view.adapters) or "none"
    lines.append(f"adapters: {adapters} ({view.selected_by})")
    lines.append(summary_line(view))
    return "\n".join(lines) + "\n"


def to_sarif(view: ScanView) -> dict[str, Any]:
    """SARIF 2.1.0: one result per fail claim (level error) and per unresolved claim (level note), located at
    the repository-relative file and line, so GitHub code scanning shows them inline."""
    kinds = sorted({c.kind for c in view.claims if status_class(c.status) != "ok"})
    rules = [
        {
            "id": f"dokimi/{kind}",
            "name": kind,
            "shortDescription": {"text": f"L0 scan: a {kind.replace('_', ' ')} claim in agent guidance"},
            "helpUri": "https://github.com/dokimi/dokimi/blob/main/docs/scan.md",
        }
        for kind in kinds
    ]
    results: list[dict[str, Any]] = []
    for claim in view.claims:
        klass = status_class(claim.status)
        if klass == "ok":
            continue
        message = f"{claim.claim}: {claim.why}" + (f" ({claim.fix})" if claim.fix else "")
        results.append(
            {
                "ruleId": f"dokimi/{claim.kind}",
                "level": "error" if klass == "fail" else "note",
                "message": {"text": message},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {"uri": claim.file, "uriBaseId": "%SRCROOT%"},
                            "region": {"startLine": max(claim.line, 1)},
                        }
                    }
                ],
                "properties": {"status": claim.status, "source": claim.source},
            }
        )
        if claim.suppressed is not None:
            results[-1]["suppressions"] = [
                {
                    "kind": "inSource" if claim.suppressed.startswith("inline") else "external",
                    "justification": claim.suppressed,
                }
            ]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "dokimi-scan",
                        "version": __version__,
                        "informationUri": "https://github.com/dokimi/dokimi/blob/main/docs/scan.md",
                        "rules": rules,
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"description": {"text": "the repository root"}}},
                "results": results,
            }
        ],
    }
