"""Real git repositories for tests: build a tree, commit it, get the SHA."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Symlink:
    """A file entry that is a symlink to ``target`` (relative, as written in the link)."""

    target: str


FileContent = str | bytes | Symlink | None
"""None deletes the path."""


def git(repo: Path, *args: str, input: str | None = None) -> str:
    """Run git in ``repo`` and return stdout; a failure shows git's stderr."""
    proc = subprocess.run(["git", *args], cwd=repo, input=input, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc.stdout


def write_files(root: Path, files: Mapping[str, FileContent]) -> None:
    for rel, content in files.items():
        path = root / rel
        if content is None:
            if path.is_symlink() or path.is_file():
                path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or path.exists():
            path.unlink()
        if isinstance(content, Symlink):
            os.symlink(content.target, path)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


def commit(repo: Path, msg: str = "commit", *, files: Mapping[str, FileContent] | None = None) -> str:
    """Write ``files`` (if any), stage everything, commit (empty allowed), return the full SHA."""
    if files:
        write_files(repo, files)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "--no-gpg-sign", "-m", msg)
    return git(repo, "rev-parse", "HEAD").strip()


def git_repo(path: Path, files: Mapping[str, FileContent] | None = None, *, msg: str = "initial") -> Path:
    """A fresh repository at ``path`` with one commit of ``files``."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    commit(path, msg, files=files or {})
    return path


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def bare_clone_for_serving(src: Path, dest: Path) -> Path:
    """A bare copy of ``src`` that allows partial clones (uploadpack.allowFilter), for file:// and git
    daemon."""
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(dest)], check=True, capture_output=True)
    git(dest, "config", "uploadpack.allowFilter", "true")
    git(dest, "config", "uploadpack.allowAnySHA1InWant", "true")
    return dest
