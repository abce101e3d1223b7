"""The readiness document: claims, counts, the --static merge, the gate; and its text and SARIF renderings."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dokimi import __version__
from dokimi.scan.engine import ScanResult
from dokimi.schemas.readiness import Claim, Gate, RepoReadiness, StaticMerge, Warning_
from dokimi.schemas.static import RepoStatic, status_class

STATUS_ORDER = ("fail", "unresolved", "ok")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def count_classes(claims: Iterable[Claim]) -> dict[str, int]:
    counts = {"ok": 0, "unresolved": 0, "fail": 0}
    for claim in claims:
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
    claims = [
        Claim(
            file=d.file,
            line=d.line,
            kind=d.kind,
            claim=d.claim,
            status=d.verdict.status,
            why=d.verdict.why,
            fix=d.verdict.fix,
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
        build_systems=result.build_systems,
        files=result.files,
        claims=claims,
        counts=dict(framework),
        by_source={"framework": framework},
        warnings=result.warnings,
        gate=Gate(passed=True),
    )
    return with_gate(document)


def merge_static(document: RepoReadiness, static: RepoStatic, *, path: str) -> RepoReadiness:
    """A repository claim replaces the framework claim on the same (file, line, claim text); by_source keeps
    both sides' counts from before the merge."""
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
            "by_source": by_source,
            "static": StaticMerge(path=path, merged=True, replaced=replaced, top_level=top),
        }
    )
    return with_gate(updated)


def static_not_merged(document: RepoReadiness, *, path: str, error: str) -> RepoReadiness:
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
    reasons = []
    fails = document.counts.get("fail", 0)
    if fails:
        reasons.append(f"{fails} claim{'s' if fails != 1 else ''} fail")
    for warning in document.warnings:
        if warning.gate:
            reasons.append(warning.message)
    return document.model_copy(update={"gate": Gate(passed=not reasons, reasons=reasons)})


# --- renderings ---------------------------------------------------------------------------------------------


def summary_line(document: RepoReadiness) -> str:
    scanned = sum(1 for f in document.files if f.state == "scanned")
    counts = document.counts
    total = sum(counts.values())
    text = (
        f"scan: {scanned} guidance file{'s' if scanned != 1 else ''}, {total} claims: "
        f"{counts.get('ok', 0)} ok, "
        f"{counts.get('unresolved', 0)} unresolved, {counts.get('fail', 0)} fail"
    )
    if document.warnings:
        text += f"; {len(document.warnings)} warning{'s' if len(document.warnings) != 1 else ''}"
    return text + ("" if document.gate.passed else " (gate: fail)")


def render_text(document: RepoReadiness, *, show_all: bool = False) -> str:
    """Claims grouped by file: fail and unresolved (everything with ``show_all``), then warnings, then one
    summary line."""
    lines: list[str] = []
    by_file: dict[str, list[Claim]] = {}
    for claim in document.claims:
        if show_all or status_class(claim.status) != "ok":
            by_file.setdefault(claim.file, []).append(claim)
    for file in sorted(by_file):
        lines.append(file)
        for claim in sorted(by_file[file], key=lambda c: (c.line, c.claim)):
            text = f"  {claim.line:>5}  {claim.status:<11} {claim.kind:<14} {claim.claim}  {claim.why}"
            if claim.fix:
                text += f"; {claim.fix}"
            if claim.source == "repository":
                text += " [repository]"
            lines.append(text)
    for warning in document.warnings:
        lines.append(f"warning: {warning.message}")
    adapters = ", ".join(document.build_systems.adapters) or "none"
    lines.append(f"adapters: {adapters} ({document.build_systems.selected_by})")
    lines.append(summary_line(document))
    return "\n".join(lines) + "\n"


def to_sarif(document: RepoReadiness) -> dict[str, Any]:
    """SARIF 2.1.0: one result per fail claim (level error) and per unresolved claim (level note), located at
    the repository-relative file and line, so GitHub code scanning shows them inline."""
    kinds = sorted({c.kind for c in document.claims if status_class(c.status) != "ok"})
    rules = [
        {
            "id": f"dokimi/{kind}",
            "name": kind,
            "shortDescription": {"text": f"L0 scan: a {kind.replace('_', ' ')} claim in agent guidance"},
            "helpUri": "https://github.com/dokimi/dokimi/blob/main/docs/scan.md",
        }
        for kind in kinds
    ]
    results = []
    for claim in document.claims:
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
