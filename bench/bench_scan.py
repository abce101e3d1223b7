"""L0 scan time against one ``git ls-tree -r`` of the same tree, measured in the same run.

Builds (once, reused from /tmp) repositories of 10k, 25k and 50k tracked files, each with 30 guidance files of
200 claims (links, paths, globs, identifiers, make targets, shell commands). Prints:

- the ratio scan / ls-tree at 50k files with 30 guidance files (target: at most 5x);
- time vs guidance size (10, 20, 30 files) at 50k files;
- time vs repository size (10k, 25k, 50k files) at 30 guidance files;

so one can see that the time grows with the guidance, not with the repository. The scan is timed as a library
call on a commit snapshot (``dir@sha``: ls-tree, cat-file, one git grep), best of several runs.

    python bench/bench_scan.py [--runs 5] [--root /tmp/dokimi-bench-scan]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import time
from pathlib import Path

from dokimi.scan import scan_snapshot
from dokimi.source import open_source

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
                f"See [{path}](/{path}) and `{path}` and `{path.rsplit('/', 1)[0]}/*.py` and `func_{n % 97}_x`."
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


def build_repo(root: Path, size: int) -> tuple[Path, str]:
    repo = root / f"repo-{size}"
    marker = repo / ".bench-done"
    if marker.exists():
        return repo, marker.read_text().strip()
    if repo.exists():
        subprocess.run(["rm", "-rf", str(repo)], check=True)
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    rng = random.Random(size)
    files = []
    for i in range(size - GUIDES - 1):
        path = f"pkg{i % 10}/mod{(i // 10) % 100}/sub{(i // 1000) % 50}/file_{i}.py"
        files.append(path)
    # blobs: few distinct contents (hash-object once each), so building 50k files stays fast
    contents = [
        f"def func_{k}_x():\n    return {k}\n\nclass ModuleName{k % 40}:\n    pass\n" for k in range(97)
    ]
    oids = [
        _git(repo, "hash-object", "-w", "--stdin", input=text.encode()).decode().strip() for text in contents
    ]
    index = [f"100644 {oids[i % len(oids)]}\t{path}" for i, path in enumerate(files)]
    makefile = "".join(f"target{k}:\n\ttrue\n" for k in range(50)).encode()
    index.append(
        f"100644 {_git(repo, 'hash-object', '-w', '--stdin', input=makefile).decode().strip()}\tMakefile"
    )
    for g in range(GUIDES):
        text = guide_text(g, files, rng).encode()
        oid = _git(repo, "hash-object", "-w", "--stdin", input=text).decode().strip()
        index.append(f"100644 {oid}\tdocs/g{g:02d}/AGENTS.md")
    _git(repo, "update-index", "--add", "--index-info", input=("\n".join(index) + "\n").encode())
    tree = _git(repo, "write-tree").decode().strip()
    sha = _git(repo, "commit-tree", tree, "-m", "bench", input=b"").decode().strip()
    _git(repo, "update-ref", "refs/heads/main", sha)
    _git(repo, "gc", "-q")
    marker.write_text(sha)
    return repo, sha


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
    globs = [f"docs/g{g:02d}/AGENTS.md" for g in range(guides)]
    best = float("inf")
    claims = 0
    from dokimi.scan.paths import scan_glob_regex
    from dokimi.scan.shell import _parse

    for _ in range(runs):
        _parse.cache_clear()  # every run starts cold: no parse or regex cached by an earlier run
        scan_glob_regex.cache_clear()
        start = time.perf_counter()
        with open_source(f"{repo}@{sha}") as source:
            snapshot = source.eval_snapshot()
            result = scan_snapshot(snapshot, globs=globs, also_scan=[], build_systems=["make"])
            snapshot.close()
        best = min(best, time.perf_counter() - start)
        claims = len(result.drafts)
    return best, claims


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--root", type=Path, default=Path("/tmp/dokimi-bench-scan"))
    args = parser.parse_args()
    repos = {size: build_repo(args.root, size) for size in SIZES}

    repo, sha = repos[50_000]
    baseline = time_ls_tree(repo, sha, args.runs)
    scan, claims = time_scan(repo, sha, GUIDES, args.runs)
    print(f"50000 files, {GUIDES} guidance files, {claims} claims")
    print(f"  git ls-tree -r: {baseline * 1000:8.1f} ms")
    print(f"  scan:           {scan * 1000:8.1f} ms")
    print(f"  ratio:          {scan / baseline:8.2f}x  (target <= 5x)")
    print("time vs guidance size (50000 files):")
    for guides in (10, 20, 30):
        t, n = time_scan(repo, sha, guides, args.runs)
        print(
            f"  {guides:2d} guidance files, {n:5d} claims: {t * 1000:8.1f} ms  ({t / baseline:5.2f}x ls-tree)"
        )
    print(f"time vs repository size ({GUIDES} guidance files):")
    for size in SIZES:
        r, s = repos[size]
        base = time_ls_tree(r, s, args.runs)
        t, n = time_scan(r, s, GUIDES, args.runs)
        print(
            f"  {size:6d} files: scan {t * 1000:8.1f} ms, ls-tree {base * 1000:7.1f} ms, ratio {t / base:5.2f}x"
        )


if __name__ == "__main__":
    main()
