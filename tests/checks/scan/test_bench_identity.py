"""The scan of the benchmark's repository gives exactly the claims it gave before the scan was made faster.

tests/checks/scan/data/bench_scan_claims.txt was written by the scan as it was before the speed work (commit
d99ad3f), from the benchmark's own generator at 2,000 files and 2 guidance files: every claim's file, line,
kind, text, status, why and fix, plus the guidance files, warnings and adapters. Any change there is a change
of behaviour.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from dokimi.checks.scan.engine import ScanResult

ROOT = Path(__file__).resolve().parents[3]
EXPECTED = Path(__file__).parent / "data" / "bench_scan_claims.txt"
FILES = 2000
GUIDES = 2


def bench_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_scan", ROOT / "bench" / "bench_scan.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def render(result: ScanResult) -> str:
    """One line per claim (tab-separated), then the files, warnings and adapters as JSON lines."""
    lines = [
        "\t".join([d.file, str(d.line), d.kind, d.claim, d.verdict.status, d.verdict.why, fix])
        for d in result.drafts
        for fix in [d.verdict.fix or "-"]
    ]
    lines += [json.dumps(f._asdict(), sort_keys=True) for f in result.files]
    lines += [json.dumps(w._asdict(), sort_keys=True) for w in result.warnings]
    lines.append(json.dumps(dataclasses.asdict(result.build_systems), sort_keys=True))
    return "\n".join(lines) + "\n"


@pytest.mark.slow
def test_the_bench_repository_scans_to_the_same_claims_as_before_the_speed_work(tmp_path: Path) -> None:
    bench = bench_module()
    repo, sha = bench.build_repo(tmp_path, FILES, GUIDES)
    result = bench.scan_bench_repo(repo, sha, GUIDES)
    assert len(result.drafts) == GUIDES * bench.CLAIMS_PER_GUIDE
    assert render(result).splitlines() == EXPECTED.read_text().splitlines()
