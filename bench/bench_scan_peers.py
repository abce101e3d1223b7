"""The L0 scan's command-line wall time against agnix (a native guidance linter) on the same repository.

    python bench/bench_scan_peers.py [--repo DIR] [--runs 7] [--venv DIR] [-- extra `repo scan` options]

What pre-commit runs is measured: a new process per call, `dokimi repo scan DIR --fail-on-fail` against
`agnix DIR`, alternating, both started directly (no shell, no version-manager shim). agnix (PyPI, pinned) and
dokimi's dependencies live in the benchmark's own venv (``--venv``, kept between runs); dokimi's code is this
checkout's (PYTHONPATH), with its bytecode cached in the venv as an installed package would have it. The
machine's Python may carry start-up hooks of its own (.pth files); the venv does not see them, as a user's
venv would not.

dokimi keeps the Markdown items of the guidance files it parsed (dokimi.checks.scan.items_cache), as a
pre-commit hook on unchanged guidance would find them: the runs use a cache of the benchmark's own
(DOKIMI_HOME in the venv), warmed by the first run. A third row runs each time with an empty cache ("cold":
every file parsed, and the cache written).

The repository is any directory (``--repo``, default this checkout: its README and docs are the largest real
guidance available offline; give `-- --manifest-file .dokimi-selfscan.yaml` to scan them all). The scan's
claims are printed as counts and a digest, so a run that changed them shows it. The ratio printed is dokimi's
median wall time over agnix's, measured in the same run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AGNIX = "agnix==0.59.3"


def prepare_venv(where: Path) -> Path:
    """The bench venv with agnix and dokimi's runtime dependencies (installed once, reused)."""
    python = where / "bin" / "python"
    stamp = where / "dokimi-bench.json"
    wanted = {"agnix": AGNIX, "pyproject": hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()}
    if python.exists() and stamp.exists() and json.loads(stamp.read_text()) == wanted:
        return python
    print(f"bench: preparing {where} (agnix and dokimi's dependencies)", file=sys.stderr)
    venv.create(where, with_pip=True, clear=True)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, AGNIX, str(ROOT)], check=True)
    subprocess.run([str(python), "-m", "pip", "uninstall", "-q", "-y", "dokimi-eval"], check=True)
    stamp.write_text(json.dumps(wanted))
    return python


def timed(
    argv: list[str], env: dict[str, str], cwd: Path
) -> tuple[float, float, subprocess.CompletedProcess[bytes]]:
    """Wall time, CPU time (user + system of the process and its children) and the result of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--repo", type=Path, default=ROOT, help="the repository directory (default: this checkout)"
    )
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--venv", type=Path, default=Path(tempfile.gettempdir()) / "dokimi-bench-peers-venv")
    parser.add_argument("extra", nargs="*", help="more `dokimi repo scan` options (after --)")
    args = parser.parse_args()
    repo = args.repo.resolve()
    python = prepare_venv(args.venv.resolve())
    agnix = python.parent / "agnix"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH", "VIRTUAL_ENV")
    }
    env.update({"PYTHONPATH": str(ROOT / "src"), "PYTHONPYCACHEPREFIX": str(args.venv.resolve() / "pycache")})
    env["DOKIMI_HOME"] = str(args.venv.resolve() / "dokimi-home")
    env.pop("NO_COLOR", None)
    # what the `dokimi` console script runs (not `python -m`, which adds runpy's start-up)
    script = "import sys; from dokimi.cli.main import main; sys.argv[0] = 'dokimi'; sys.exit(main())"
    dokimi = [str(python), "-c", script, "repo", "scan", str(repo), *args.extra]

    # the claims (and a warm-up of both tools: bytecode written, files in the page cache)
    _, _, document = timed([*dokimi, "--json"], env, repo)
    if document.returncode not in (0, 1):
        print(document.stderr.decode(), file=sys.stderr)
        return 2
    readiness = json.loads(document.stdout)
    claims = sorted(
        "\t".join(str(c[k]) for k in ("file", "line", "kind", "claim", "status", "why"))
        for c in readiness["claims"]
    )
    digest = hashlib.sha256("\n".join(claims).encode()).hexdigest()[:16]
    timed([str(agnix), str(repo)], env, repo)

    ours: list[float] = []
    theirs: list[float] = []
    cold: list[float] = []
    ours_cpu: list[float] = []
    theirs_cpu: list[float] = []
    cold_cpu: list[float] = []
    for _ in range(args.runs):
        took, cpu, done = timed([*dokimi, "--fail-on-fail"], env, repo)
        assert done.returncode in (0, 1), done.stderr.decode()
        ours.append(took)
        ours_cpu.append(cpu)
        took, cpu, done = timed([str(agnix), str(repo)], env, repo)
        theirs.append(took)
        theirs_cpu.append(cpu)
        with tempfile.TemporaryDirectory(prefix="dokimi-bench-cold-") as empty:
            took, cpu, done = timed([*dokimi, "--fail-on-fail"], {**env, "DOKIMI_HOME": empty}, repo)
        assert done.returncode in (0, 1), done.stderr.decode()
        cold.append(took)
        cold_cpu.append(cpu)
    files = sum(1 for f in readiness["files"] if f["state"] == "scanned")
    counts = readiness["counts"]
    print(
        f"repository: {repo} ({files} guidance files, {len(claims)} claims: {counts}; claims digest {digest})"
    )
    print(f"runs: {args.runs}, alternating; load average {os.getloadavg()[0]:.2f}")
    rows = (
        ("dokimi repo scan", ours, ours_cpu),
        ("agnix", theirs, theirs_cpu),
        ("dokimi, cold", cold, cold_cpu),
    )
    for name, times, cpu in rows:
        median, best, worst = (statistics.median(times) * 1000, min(times) * 1000, max(times) * 1000)
        print(
            f"  {name:<17} wall median {median:5.0f} ms, best {best:5.0f}, worst {worst:5.0f}; "
            f"cpu median {statistics.median(cpu) * 1000:5.0f} ms"
        )
    ratio = statistics.median(ours) / statistics.median(theirs)
    print(f"ratio (median dokimi / median agnix): {ratio:.2f}x; best to best {min(ours) / min(theirs):.2f}x")
    print(f"cpu ratio (median): {statistics.median(ours_cpu) / statistics.median(theirs_cpu):.2f}x")
    cold_ratio = statistics.median(cold) / statistics.median(theirs)
    print(f"cold ratio (median dokimi with an empty cache / median agnix): {cold_ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
