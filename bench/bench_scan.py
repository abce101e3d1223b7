"""L0 scan time against one ``git ls-tree -r`` of the same tree, measured in the same run.

Builds (once, reused from /tmp) repositories of 10k, 25k and 50k tracked files, each with 30 guidance files of
200 claims (links, paths, globs, identifiers, make targets, shell commands). Prints, every figure the best of
``--runs``:

- the ratio scan / ls-tree at 50k files with 30 guidance files (target: at most 5x), in-process (a library
  call on a commit snapshot, ``dir@sha``, imports excluded) and once as the CLI (a subprocess, imports
  included);
- time vs guidance size (10, 20, 30 files) at 50k files;
- time vs repository size (10k, 25k, 50k files) at 30 guidance files, split into the identifier search alone
  (the one ``git grep``, which reads every file of the tree, and git's binary rule on the files it matched)
  and the scan without it (listing, guidance, every other claim), so one can see which part grows with the
  repository.

    python bench/bench_scan.py [--runs 3] [--root /tmp/dokimi-bench-scan]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from dokimi.checks.scan import identifiers, scan_snapshot
from dokimi.checks.scan.engine import ScanResult
from dokimi.source import git, open_source

SIZES = (10_000, 25_000, 50_000)
GUIDES = 30
CLAIMS_PER_GUIDE = 200


def _git(repo: Path, *args: str, input: bytes | None = None) -> bytes:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "b@b",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "b@b",
    }
    return subprocess.run(
        ["git", *args], cwd=repo, input=input, env=env, check=True, capture_output=True
    ).stdout


def guide_text(index: int, files: list[str], rng: random.Random) -> str:
    lines = [f"# Guide {index}", ""]
    for n in range(CLAIMS_PER_GUIDE // 4):
        path = rng.choice(files)
        kind = n % 5
        if kind == 0:
            lines.append(
                f"See [{path}](/{path}) and `{path}` and `{path.rsplit('/', 1)[0]}/*.py` "
                f"and `func_{n % 97}_x`."
            )
        elif kind == 1:
            lines.append(f"`{path}` `gone/{n}.py` `{path}.old` and `CONFIG_{n}_KEY`.")
        elif kind == 2:
            lines.append(f"`make target{n % 50}` and `python {path}` and [x](missing/{n}.md) `src/**/*.txt`.")
        elif kind == 3:
            lines.append(
                f"```bash\nmake target{n % 50} && python {path}\ncd pkg{n % 10} && ls\n```\n`a_{n}` `b_{n}`"
            )
        else:
            lines.append(f"`{path}` `{path}` [y]({path}) `ModuleName{n % 40}`")
    return "\n".join(lines) + "\n"


def build_repo(root: Path, size: int, guides: int = GUIDES) -> tuple[Path, str]:
    """A commit of ``size`` tracked files, ``guides`` of them guidance files (docs/gNN/AGENTS.md), kept for
    reuse."""
    repo = root / (f"repo-{size}" if guides == GUIDES else f"repo-{size}-g{guides}")
    marker = repo / ".bench-done"
    if marker.exists():
        return repo, marker.read_text().strip()
    if repo.exists():
        subprocess.run(["rm", "-rf", str(repo)], check=True)
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    rng = random.Random(size)
    files = []
    for i in range(size - guides - 1):
        path = f"pkg{i % 10}/mod{(i // 10) % 100}/sub{(i // 1000) % 50}/file_{i}.py"
        files.append(path)
    # blobs: few distinct contents, so building 50k files stays fast
    contents = [
        f"def func_{k}_x():\n    return {k}\n\nclass ModuleName{k % 40}:\n    pass\n" for k in range(97)
    ]
    makefile = "".join(f"target{k}:\n\ttrue\n" for k in range(50))
    guidance = [guide_text(g, files, rng) for g in range(guides)]
    blobs = [*contents, makefile, *guidance]  # mark k + 1 is blobs[k]
    tree = [(f":{i % len(contents) + 1}", path) for i, path in enumerate(files)]
    tree.append((f":{len(contents) + 1}", "Makefile"))
    tree += [(f":{len(contents) + 2 + g}", f"docs/g{g:02d}/AGENTS.md") for g in range(guides)]
    sha = fast_import(repo, blobs, tree)
    marker.write_text(sha)
    return repo, sha


def fast_import(repo: Path, blobs: list[str], tree: list[tuple[str, str]]) -> str:
    """One commit on main holding ``tree`` ((blob mark, path) pairs), written as one pack by
    ``git fast-import``: no loose object per blob or directory, so even 50k files build in seconds."""
    stream = [b"feature done\n"]
    for k, text in enumerate(blobs):
        data = text.encode()
        stream.append(b"blob\nmark :%d\ndata %d\n%s\n" % (k + 1, len(data), data))
    stream.append(b"commit refs/heads/main\ncommitter bench <b@b> 0 +0000\ndata 6\nbench\n")
    stream += [f"M 100644 {mark} {path}\n".encode() for mark, path in tree]
    stream.append(b"done\n")
    _git(repo, "fast-import", "--quiet", input=b"".join(stream))
    return _git(repo, "rev-parse", "refs/heads/main").decode().strip()


def scan_bench_repo(repo: Path, sha: str, guides: int) -> ScanResult:
    """The scan the bench times: a commit snapshot, the first ``guides`` guidance files, the make adapter;
    with Python's collector paused from the listing on, as ``scan_repo`` does."""
    with git.nogc():
        return _scan_bench_repo(repo, sha, guides)


def _scan_bench_repo(repo: Path, sha: str, guides: int) -> ScanResult:
    with open_source(f"{repo}@{sha}") as source:
        snapshot = source.eval_snapshot()
        try:
            return scan_snapshot(
                snapshot,
                globs=[f"docs/g{g:02d}/AGENTS.md" for g in range(guides)],
                also_scan=[],
                build_systems=["make"],
            )
        finally:
            snapshot.close()


def time_ls_tree(repo: Path, sha: str, runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(
            ["git", "ls-tree", "-r", "-z", "--full-tree", sha], cwd=repo, check=True, capture_output=True
        )
        best = min(best, time.perf_counter() - start)
    return best


def time_scan(repo: Path, sha: str, guides: int, runs: int) -> tuple[float, int]:
    from dokimi.checks.scan.paths import scan_glob_regex
    from dokimi.checks.scan.shell import _parse

    best = float("inf")
    claims = 0
    for _ in range(runs):
        _parse.cache_clear()  # every run starts cold: no parse or regex cached by an earlier run
        scan_glob_regex.cache_clear()
        start = time.perf_counter()
        result = scan_bench_repo(repo, sha, guides)
        best = min(best, time.perf_counter() - start)
        claims = len(result.drafts)
    return best, claims


@contextlib.contextmanager
def no_identifier_search() -> Iterator[None]:
    """Time the scan without its one git grep (identifiers then find nothing: for timing only)."""
    real = identifiers.search_words
    identifiers.search_words = lambda snapshot, words, *, exclude: {}
    try:
        yield
    finally:
        identifiers.search_words = real


def time_identifier_search(repo: Path, sha: str, guides: int, runs: int) -> float:
    """The identifier search alone (the same words and excludes the scan uses), best of ``runs``."""
    from dokimi.checks.scan.engine import identifier_words
    from dokimi.checks.scan.markdown import extract

    globs = [f"docs/g{g:02d}/AGENTS.md" for g in range(guides)]
    best = float("inf")
    with open_source(f"{repo}@{sha}") as source:
        snapshot = source.eval_snapshot()
        try:
            texts = {p: t.decode() for p, t in snapshot.read_many(globs).items()}
            words = identifier_words({p: extract(t) for p, t in texts.items()}, {"make"})
            for _ in range(runs):
                start = time.perf_counter()
                identifiers.search_words(snapshot, words, exclude=set(globs))
                best = min(best, time.perf_counter() - start)
        finally:
            snapshot.close()
    return best


def time_cli(repo: Path, sha: str) -> float:
    """One ``dokimi repo scan DIR@SHA --json`` subprocess: interpreter start and imports included, and an
    empty cache of Markdown items (every guidance file parsed, as on a first run)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="dokimi-bench-home-") as home:
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "dokimi", "repo", "scan", f"{repo}@{sha}", "--json"],
            check=True,
            capture_output=True,
            env={**os.environ, "DOKIMI_HOME": home},
        )
        return time.perf_counter() - start


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--root", type=Path, default=Path("/tmp/dokimi-bench-scan"))
    args = parser.parse_args()
    repos = {size: build_repo(args.root, size) for size in SIZES}
    scan_bench_repo(*repos[SIZES[0]], 1)  # warm the imports and markdown-it's parser once

    repo, sha = repos[50_000]
    baseline = time_ls_tree(repo, sha, args.runs)
    scan, claims = time_scan(repo, sha, GUIDES, args.runs)
    cli = time_cli(repo, sha)
    print(f"50000 files, {GUIDES} guidance files, {claims} claims (best of {args.runs})")
    print(f"  git ls-tree -r:        {ms(baseline)}")
    print(f"  scan (in-process):     {ms(scan)}  {scan / baseline:6.2f}x  (target <= 5x)")
    print(f"  scan (CLI, 1 run):     {ms(cli)}  {cli / baseline:6.2f}x  (with interpreter start and imports)")
    print("time vs guidance size (50000 files):")
    for guides in (10, 20, 30):
        t, n = time_scan(repo, sha, guides, args.runs)
        print(f"  {guides:2d} guidance files, {n:5d} claims: {ms(t)}  {t / baseline:6.2f}x ls-tree")
    print(f"time vs repository size ({GUIDES} guidance files):")
    print("    files   ls-tree      scan        ratio   git grep alone    ratio   scan without grep  ratio")
    for size in SIZES:
        r, s = repos[size]
        base = time_ls_tree(r, s, args.runs)
        t, _ = time_scan(r, s, GUIDES, args.runs)
        grep = time_identifier_search(r, s, GUIDES, args.runs)
        with no_identifier_search():
            rest, _ = time_scan(r, s, GUIDES, args.runs)
        print(
            f"  {size:7d} {ms(base)} {ms(t)} {t / base:6.2f}x   {ms(grep)} {grep / base:6.2f}x"
            f"   {ms(rest)}    {rest / base:6.2f}x"
        )


if __name__ == "__main__":
    main()
