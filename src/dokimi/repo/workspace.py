"""Workspace preparation: the eight steps, in order, one named function each.

1. :func:`export_tree_as_stored`: the base's tree into the workspace exactly as git stores it. Blobs are read
   with one ``git cat-file --batch`` process and written by dokimi, so no git configuration of the host
   (core.autocrlf), no ``.gitattributes`` conversion (eol, filters, working-tree-encoding) and no
   export-ignore / export-subst (which ``git archive`` would apply) changes a byte.
2. :func:`delete_eval_dir`: the eval dir is removed (the base may predate it).
3. :func:`init_and_commit`: a fresh repository with one commit, so no fix can leak through history.
4. :func:`apply_setup_patches`: ``git apply`` of each setup patch (an injected bug, for example).
5. :func:`apply_arm`: ``guidance:none`` deletes every file the guidance globs match (a matched skill's
   SKILL.md takes its whole skill directory with it) and the directories left empty, ``guidance:raw`` keeps
   them, ``guidance:bridge`` writes the profile's bridge file next to every matched file of the bridged name;
   ``guidance:tree``, ``guidance:at=REV`` and ``guidance:generated`` replace the base's matched files with a
   :class:`GuidanceOverlay` (the guidance files of the eval tree, of another revision, or the ones the
   harness's own generator wrote), see :func:`overlay_guidance`.
6. :func:`amend_commit`: the commit of step 3 is amended to hold steps 4 and 5.
7. :func:`apply_review_patch`: ``git am`` of the review patch, then its author is reset to a neutral one.
8. :func:`expire_reflog_and_prune`: the commits that steps 6 and 7 replaced (unpatched code, removed guidance,
   the upstream author) become unreachable; the reflog is expired and loose unreachable objects are pruned. No
   git command of the preparation runs ``gc --auto`` (``gc.auto=0``), which could pack them out of reach.

What the agent starts with. :func:`guidance_at_start` lists, after step 8, every file of the start commit that
the guidance globs or the harness's own guidance names match, with its git blob SHA: meta.json records it, so
a reader sees what an arm really put in front of the agent (a guidance:tree blob equals the eval tree's).

No conversion. ``.git/info/attributes`` turns off every conversion attribute (:data:`PREP_ATTRIBUTES`) for
the preparation and is left in place, so the agent starts from a clean ``git status`` and a diff from
start_sha shows only what changed, whatever the tree's ``.gitattributes`` say.

Identity and dates. Every commit dokimi makes is by ``dokimi <dokimi@dokimi.invalid>`` at a fixed date
(:data:`NEUTRAL_DATE`), so two preparations of the same task give the same ``start_sha``. The same identity is
written to the workspace's ``.git/config`` (``user.name``, ``user.email``), so an agent's own ``git commit``
works in a container whose uid has no passwd entry.

Patch digests. ``meta.json``'s ``patches`` maps each applied patch, named as task.json names it (relative to
the task directory), to the **sha256** of the patch file's bytes (lowercase hex), the review patch included.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dokimi import globs, safefs
from dokimi.constants import SKILL_FILE
from dokimi.errors import SourceError, UsageError, WorkspaceError
from dokimi.repo.arms import ARM_RAW, Arm
from dokimi.source import git as gitcmd
from dokimi.source.export import check_tree_path, export_tree_as_stored, write_entry

if TYPE_CHECKING:
    from dokimi.source import Repo
    from dokimi.source.snapshot import Snapshot

__all__ = [
    "ArmResult",
    "BridgeSpec",
    "GuidanceFile",
    "GuidanceOverlay",
    "blob_sha",
    "guidance_at_start",
    "guidance_patterns",
    "overlay_from_snapshot",
    "overlay_guidance",
    "PreparedWorkspace",
    "amend_commit",
    "apply_arm",
    "apply_review_patch",
    "apply_setup_patches",
    "bridge_of",
    "delete_eval_dir",
    "expire_reflog_and_prune",
    "head_sha",
    "init_and_commit",
    "patch_digest",
    "prepare_workspace",
    "resolve_base",
]


NEUTRAL_NAME = "dokimi"
NEUTRAL_EMAIL = "dokimi@dokimi.invalid"
NEUTRAL_DATE = "2000-01-01T00:00:00+00:00"
WORKSPACE_MESSAGE = "workspace\n"

#: Written to .git/info/attributes (which outranks every .gitattributes), so that ``git add``, ``git apply``
#: and ``git am`` convert nothing while dokimi prepares the workspace. It stays: a file stored with CR LF
#: under an ``eol``/``text`` attribute would otherwise show as modified before the agent touched it, and
#: every diff from start_sha (the grader's) would list it.
PREP_ATTRIBUTES = "* -text -eol -filter -ident -working-tree-encoding\n"

#: Configuration of every git command of the preparation (on top of dokimi.source.git's hooks/fsmonitor off).
PREP_CONFIG: tuple[str, ...] = (
    "-c", "gc.auto=0",
    "-c", "maintenance.auto=false",
    "-c", "core.autocrlf=false",
    "-c", "core.safecrlf=false",
    "-c", "core.symlinks=true",
    "-c", "core.fileMode=true",
    "-c", "commit.gpgsign=false",
    "-c", "init.defaultBranch=main",
    "-c", "apply.whitespace=nowarn",
    "-c", "am.threeWay=false",
    "-c", "am.keepcr=true",
)  # fmt: skip

PREP_TIMEOUT_S = 1800.0


# --- results ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BridgeSpec:
    """The guidance:bridge arm: ``write`` (CLAUDE.md) holding ``content`` next to every matched ``for_``."""

    for_: str
    write: str
    content: str


@dataclass(frozen=True)
class ArmResult:
    arm: str
    removed: tuple[str, ...] = ()
    """Files guidance:none (and every overlay arm) deleted (repository paths)."""
    bridged: tuple[str, ...] = ()
    """Bridge files guidance:bridge wrote."""
    kept_existing: tuple[str, ...] = ()
    """Bridge files not written because a file of that name was already there (it is kept as it is)."""
    written: tuple[str, ...] = ()
    """Guidance files an overlay arm wrote."""
    refused: tuple[tuple[str, str], ...] = ()
    """Overlay files not written, with the reason (a parent that is a file or a symlink at this base)."""


@dataclass(frozen=True)
class GuidanceFile:
    """One guidance file an overlay arm writes: its repository path, git mode and bytes (a link's target)."""

    path: str
    mode: str
    """``100644``, ``100755`` or ``120000`` (a symlink, whose ``data`` is the link text)."""
    data: bytes

    @property
    def sha(self) -> str:
        """The git blob SHA of ``data``: what meta.json records."""
        return blob_sha(self.data)


@dataclass(frozen=True)
class GuidanceOverlay:
    """The guidance files an overlay arm puts onto every base, and where they come from."""

    origin: str
    """``tree``, ``at`` or ``generated``."""
    rev: str | None
    """The commit they were read from (full SHA); None for a working tree or generated files."""
    files: tuple[GuidanceFile, ...]


@dataclass(frozen=True)
class PreparedWorkspace:
    """A prepared workspace and the fields meta.json records about it."""

    path: Path
    base_rev: str
    """The base as task.json writes it (``<sha>`` or ``<sha>^``)."""
    base_sha: str
    """The resolved upstream commit (40 hex); not present in the workspace."""
    base_date: str | None
    """Committer date of base_sha, strict ISO 8601."""
    arm: str
    applied: tuple[tuple[str, str, str], ...]
    """Each applied patch in order: (path as task.json names it, sha256 of its bytes, setup or review)."""
    start_sha: str
    """The workspace HEAD after step 7: the commit the agent starts from."""
    arm_result: ArmResult = field(default_factory=lambda: ArmResult(ARM_RAW))
    guidance: tuple[tuple[str, str, str], ...] = ()
    """(path, mode, blob SHA) of every guidance file in the start commit (:func:`guidance_at_start`)."""
    guidance_source: str | None = None
    """Where an overlay arm's files came from: ``tree <sha>``, ``at <sha>``, ``generated``; None otherwise."""

    @property
    def patches(self) -> dict[str, str]:
        """path -> sha256 of every applied patch (setup patches first, the review patch last)."""
        return {path: sha for path, sha, _ in self.applied}

    def meta_fields(self) -> dict[str, Any]:
        """The meta.json keys this step owns (``patches`` in the list form, with each patch's kind)."""
        return {
            "base_rev": self.base_rev,
            "base_sha": self.base_sha,
            "base_date": self.base_date,
            "arm": self.arm,
            "patches": [{"path": path, "sha": sha, "kind": kind} for path, sha, kind in self.applied],
            "start_sha": self.start_sha,
            "guidance_files": [{"path": p, "mode": m, "sha": sha} for p, m, sha in self.guidance],
            "guidance_source": self.guidance_source,
        }


# --- git in the workspace -----------------------------------------------------------------------------------


def _prep_env() -> dict[str, str]:
    """No system or global configuration of the host; the neutral identity at the fixed date."""
    return {
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": NEUTRAL_NAME,
        "GIT_AUTHOR_EMAIL": NEUTRAL_EMAIL,
        "GIT_AUTHOR_DATE": NEUTRAL_DATE,
        "GIT_COMMITTER_NAME": NEUTRAL_NAME,
        "GIT_COMMITTER_EMAIL": NEUTRAL_EMAIL,
        "GIT_COMMITTER_DATE": NEUTRAL_DATE,
        "TZ": "UTC",
    }


def _ws_git(dest: Path, args: Sequence[str], *, what: str, input: bytes | None = None) -> bytes:
    """One git command in the workspace ``dest`` with the preparation's configuration."""
    argv = [*PREP_CONFIG, "--git-dir", str(dest / ".git"), "--work-tree", str(dest), *args]
    try:
        return gitcmd.run_git(argv, cwd=dest, env=_prep_env(), input=input, timeout=PREP_TIMEOUT_S, what=what)
    except SourceError as exc:
        raise WorkspaceError(exc.message, path=dest, hint=exc.hint) from None


def head_sha(dest: Path) -> str:
    """The full SHA of the workspace's HEAD."""
    return _ws_git(dest, ["rev-parse", "--verify", "HEAD"], what="git rev-parse HEAD").decode().strip()


def _list_files(dest: Path) -> list[str]:
    """Files of the workspace as they are on disk now: tracked ones still present, and new ones."""
    out = _ws_git(dest, ["ls-files", "-z", "--cached", "--others"], what="git ls-files")
    paths = sorted({p.decode("utf-8", "surrogateescape") for p in out.split(b"\0") if p})
    return [p for p in paths if os.path.lexists(dest / p)]


def blob_sha(data: bytes) -> str:
    """The git blob SHA (SHA-1 object name) of ``data``, as ``git hash-object`` gives it."""
    digest = hashlib.sha1(usedforsecurity=False)
    digest.update(b"blob %d\0" % len(data))
    digest.update(data)
    return digest.hexdigest()


def guidance_patterns(guidance_globs: Sequence[str], harness_names: Sequence[str] = ()) -> list[str]:
    """The manifest's guidance globs plus ``**/<name>`` for every file name the harness loads by itself
    (CLAUDE.md, GEMINI.md): what :func:`guidance_at_start` reports and a generator's output is kept by."""
    patterns = list(guidance_globs)
    for name in harness_names:
        pattern = f"**/{name}"
        if pattern not in patterns:
            patterns.append(pattern)
    return patterns


def _in_dir(path: str, directory: str) -> bool:
    directory = directory.strip("/")
    return bool(directory) and (path == directory or path.startswith(directory + "/"))


def overlay_from_snapshot(
    snapshot: Snapshot, guidance_globs: Sequence[str], *, origin: str, eval_dir: str = ""
) -> GuidanceOverlay:
    """The files ``guidance_globs`` match in ``snapshot`` (outside ``eval_dir``, which no workspace has), each
    matched skill whole (:func:`guidance_with_skills`), read in one batch: the overlay of guidance:tree (the
    eval tree) or guidance:at=REV (that revision)."""
    matched = [
        path
        for path in guidance_with_skills(guidance_globs, list(snapshot.entries))
        if not _in_dir(path, eval_dir) and snapshot.entries[path].mode in ("100644", "100755", "120000")
    ]
    for path in matched:
        check_tree_path(path)
    data: dict[str, bytes] = {}
    if snapshot.rev is None:
        assert snapshot.work_tree is not None
        for path in matched:
            source = snapshot.work_tree / path
            if snapshot.entries[path].mode == "120000":
                data[path] = os.fsencode(os.readlink(source))
            else:  # a regular file only: a FIFO in the working tree must not block the run
                data[path] = safefs.read_plain(source)
    else:
        oids = {path: snapshot.entries[path].oid for path in matched}
        blobs = snapshot.read_oids([oid for oid in oids.values() if oid])
        for path, oid in oids.items():
            content = blobs.get(oid) if oid else None
            if content is None:
                raise WorkspaceError(
                    f"{snapshot.label}: {path}: blob {oid} is missing from the repository",
                    hint="fetch the missing objects (a blob-less clone needs its remote)",
                )
            data[path] = content
    files = tuple(GuidanceFile(path, snapshot.entries[path].mode, data[path]) for path in matched)
    return GuidanceOverlay(origin, snapshot.rev, files)


# --- base ---------------------------------------------------------------------------------------------------


def resolve_base(repo: Repo, base_rev: str) -> tuple[str, str | None]:
    """(base_sha, base_date) of a task's base; WorkspaceError when it does not resolve."""
    if repo.git_dir is None:
        raise WorkspaceError(
            f"{repo.label} is not a git repository, so base {base_rev} cannot be read",
            hint="run from a git repository (a <dir> with .git, <dir>@<rev> or <url>@<rev>)",
        )
    sha = repo.resolve(base_rev)
    if sha is None:
        raise WorkspaceError(
            f"base {base_rev} does not resolve to a commit in {repo.label}",
            hint="fetch the full history of the source, or fix the task's base",
        )
    dates = gitcmd.commit_dates(repo.git_dir, [sha])
    return sha, dates.get(sha)


# --- step 1 -------------------------------------------------------------------------------------------------


# --- step 2 -------------------------------------------------------------------------------------------------


def _inside(dest: Path, rel: str) -> Path:
    rel = rel.strip("/")
    if not rel or any(part in ("", ".", "..") for part in rel.split("/")):
        raise UsageError(f"{rel!r} is not a proper relative path inside the repository")
    return dest / rel


def delete_eval_dir(dest: Path, eval_dir: str) -> bool:
    """Step 2: remove ``eval_dir`` from the workspace; False when the base has none (it predates it)."""
    target = _inside(dest, eval_dir)
    if target.is_symlink() or target.is_file():
        target.unlink()
        return True
    if target.is_dir():
        shutil.rmtree(target)
        return True
    return False


# --- step 3 -------------------------------------------------------------------------------------------------


def init_and_commit(dest: Path) -> str:
    """Step 3: ``git init`` (no template, so no sample hooks) and one commit of every file; returns it."""
    _ws_git(dest, ["init", "-q", "--template="], what="git init")
    info = dest / ".git" / "info"
    info.mkdir(exist_ok=True)
    (info / "attributes").write_text(PREP_ATTRIBUTES)
    _ws_git(dest, ["config", "user.name", NEUTRAL_NAME], what="git config")
    _ws_git(dest, ["config", "user.email", NEUTRAL_EMAIL], what="git config")
    _ws_git(dest, ["add", "-A", "-f"], what="git add")
    _ws_git(
        dest,
        ["commit", "-q", "--no-verify", "--allow-empty", "-m", WORKSPACE_MESSAGE],
        what="git commit",
    )
    return head_sha(dest)


# --- step 4 -------------------------------------------------------------------------------------------------


def patch_digest(path: Path) -> str:
    """sha256 (lowercase hex) of a patch file's bytes: what meta.json's ``patches`` records."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _patch_file(patches_root: Path, name: str) -> Path:
    if not name or name.startswith("/"):
        raise WorkspaceError(f"patch {name!r}: not a path relative to the task directory")
    path = patches_root / name
    if not path.is_file():
        raise WorkspaceError(
            f"patch {name} not found (looked at {path})", hint="fix the patch path in task.json"
        )
    return path


def apply_setup_patches(dest: Path, patches: Sequence[str], *, patches_root: Path) -> dict[str, str]:
    """Step 4: ``git apply`` each setup patch (relative to ``patches_root``, the task directory) in order.

    Returns name -> sha256. A patch that does not apply is a WorkspaceError naming the patch and git's reason.
    """
    applied: dict[str, str] = {}
    for name in patches:
        path = _patch_file(patches_root, name)
        try:
            _ws_git(dest, ["apply", "--", str(path.resolve())], what=f"git apply {name}")
        except WorkspaceError as exc:
            raise WorkspaceError(
                f"setup patch {name} does not apply: {exc.message}",
                hint="regenerate the patch against the task's base",
            ) from None
        applied[name] = patch_digest(path)
    return applied


# --- step 5 -------------------------------------------------------------------------------------------------


def bridge_of(profile: Any) -> BridgeSpec | None:
    """The bridge of a harness profile: a HarnessProfile, its ``bridge``, or a dict with for/write/content."""
    if profile is None:
        return None
    if isinstance(profile, BridgeSpec):
        return profile
    if isinstance(profile, Mapping):
        if "bridge" in profile:
            return bridge_of(profile["bridge"])
        return BridgeSpec(
            for_=str(profile.get("for", profile.get("for_", ""))),
            write=str(profile["write"]),
            content=str(profile["content"]),
        )
    bridge = getattr(profile, "bridge", profile)
    if bridge is None:
        return None
    return BridgeSpec(for_=str(bridge.for_), write=str(bridge.write), content=str(bridge.content))


def apply_arm(
    dest: Path,
    arm: Arm,
    guidance_globs: Sequence[str],
    *,
    bridge: BridgeSpec | None = None,
    overlay: GuidanceOverlay | None = None,
) -> ArmResult:
    """Step 5: the guidance arm, from the manifest's globs evaluated on the workspace's files.

    - ``guidance:none`` deletes every file a glob matches (a symlink is deleted, not its target), every file
      of a skill whose SKILL.md a glob matches, and every directory left empty (:func:`remove_guidance`);
    - ``guidance:raw`` keeps them;
    - ``guidance:bridge`` writes ``bridge.write`` with ``bridge.content`` next to every matched file named
      ``bridge.for_``, at any depth. An existing file of that name is kept untouched and listed in
      ``kept_existing``: it is the repository's own, and overwriting it would remove guidance;
    - ``guidance:tree``, ``guidance:at=REV`` and ``guidance:generated`` delete what ``none`` deletes and then
      write ``overlay``'s files (:func:`overlay_guidance`).
    """
    kind = arm.kind
    if kind == "raw":
        return ArmResult(arm)
    if kind == "bridge" and bridge is None:
        raise UsageError(
            "arm guidance:bridge needs a harness profile with a bridge key",
            hint="use a profile that declares bridge, or the arms guidance:none / guidance:raw",
        )
    if arm.overlays and overlay is None:
        raise UsageError(
            f"arm {arm} needs its guidance files", hint="a bug: the runner builds them per batch"
        )
    files = _list_files(dest)
    matched = guidance_with_skills(guidance_globs, files)
    if kind == "none":
        remove_guidance(dest, matched)
        return ArmResult(arm, removed=tuple(matched))
    if arm.overlays:
        assert overlay is not None
        remove_guidance(dest, matched)
        written, refused = overlay_guidance(dest, overlay)
        return ArmResult(arm, removed=tuple(matched), written=written, refused=refused)
    assert bridge is not None
    bridged: list[str] = []
    kept: list[str] = []
    content = bridge.content if bridge.content.endswith("\n") else bridge.content + "\n"
    for path in matched:
        if posixpath.basename(path) != bridge.for_:
            continue
        target = posixpath.join(posixpath.dirname(path), bridge.write)
        if os.path.lexists(dest / target):
            kept.append(target)
            continue
        (dest / target).write_text(content, encoding="utf-8")
        os.chmod(dest / target, 0o644)
        bridged.append(target)
    return ArmResult(arm, bridged=tuple(bridged), kept_existing=tuple(kept))


def skill_directory(path: str) -> str | None:
    """The skill a guidance file is the SKILL.md of: its directory, when that directory sits in a ``skills``
    directory (``.claude/skills/release/SKILL.md`` -> ``.claude/skills/release``, the Agent Skills layout
    every supported harness reads); None for any other file."""
    directory, name = posixpath.split(path)
    if name != SKILL_FILE or posixpath.basename(posixpath.dirname(directory)) != "skills":
        return None
    return directory


def guidance_with_skills(guidance_globs: Sequence[str], files: Sequence[str]) -> list[str]:
    """The files the guidance globs match, and every file of each skill whose SKILL.md they match (its
    scripts, references and assets go with it: an arm removes or replaces a skill whole), sorted."""
    matched = {path for pattern in guidance_globs for path in globs.filter_paths(pattern, files)}
    skills = [directory + "/" for directory in map(skill_directory, matched) if directory]
    if skills:
        matched.update(path for path in files if any(path.startswith(skill) for skill in skills))
    return sorted(matched)


def remove_guidance(dest: Path, paths: Sequence[str]) -> None:
    """Delete ``paths`` (a symlink is deleted, not its target), then every directory their removal left empty,
    up to the workspace's root: an empty ``.agents/skills/release/`` would still name the skill."""
    parents: set[str] = set()
    for path in paths:
        (dest / path).unlink()
        parents.add(posixpath.dirname(path))
    for directory in sorted(parents, key=lambda d: -d.count("/")):
        while directory:
            target = dest / directory
            if target.is_symlink() or not target.is_dir() or any(target.iterdir()):
                break
            target.rmdir()
            directory = posixpath.dirname(directory)


def _overlay_obstacle(dest: Path, path: str) -> str | None:
    """Why ``path`` cannot be written into the workspace, or None. Every directory on the way must be a real
    directory or absent: a symlink there (``docs -> /etc``) would carry the write outside the workspace, and a
    file there means the base has no such directory."""
    parts = path.split("/")
    for i in range(1, len(parts)):
        prefix = dest.joinpath(*parts[:i])
        if prefix.is_symlink():
            return f"{'/'.join(parts[:i])} is a symlink at this base"
        if os.path.lexists(prefix) and not prefix.is_dir():
            return f"{'/'.join(parts[:i])} is a file at this base"
    target = dest / path
    if target.is_dir() and not target.is_symlink():
        return "a directory of that name exists at this base"
    return None


def overlay_guidance(
    dest: Path, overlay: GuidanceOverlay
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """Write every file of ``overlay`` into the workspace (the base's matched files are already deleted):
    missing directories are made; a file whose way is blocked at this base (a symlinked or file parent, a
    directory of its name) is not written and is returned with the reason. Returns (written, refused)."""
    written: list[str] = []
    refused: list[tuple[str, str]] = []
    for item in overlay.files:
        check_tree_path(item.path)
        obstacle = _overlay_obstacle(dest, item.path)
        if obstacle is not None:
            refused.append((item.path, obstacle))
            continue
        parent = posixpath.dirname(item.path)
        if parent:
            (dest / parent).mkdir(parents=True, exist_ok=True)
        target = dest / item.path
        if os.path.lexists(target):
            target.unlink()
        write_entry(dest, item.path, item.mode, item.data)
        written.append(item.path)
    return tuple(written), tuple(refused)


def guidance_at_start(dest: Path, patterns: Sequence[str]) -> list[tuple[str, str, str]]:
    """(path, mode, blob SHA) of every file of the workspace's start commit that ``patterns`` match (see
    :func:`guidance_patterns`), sorted: one ``git ls-files -s`` after step 8, when every file is committed."""
    out = _ws_git(dest, ["ls-files", "-s", "-z"], what="git ls-files -s")
    entries: dict[str, tuple[str, str]] = {}
    for record in out.split(b"\0"):
        if not record:
            continue
        head, _, raw_path = record.partition(b"\t")
        mode, sha, _stage = head.decode("ascii").split(" ")
        entries[raw_path.decode("utf-8", "surrogateescape")] = (mode, sha)
    matched = {path for pattern in patterns for path in globs.filter_paths(pattern, entries)}
    return [(path, *entries[path]) for path in sorted(matched) if entries[path][0] != "160000"]


# --- step 6 -------------------------------------------------------------------------------------------------


def amend_commit(dest: Path) -> str:
    """Step 6: stage every change of steps 4 and 5 and amend the commit of step 3; returns the new SHA."""
    _ws_git(dest, ["add", "-A", "-f"], what="git add")
    _ws_git(
        dest,
        ["commit", "-q", "--amend", "--no-verify", "--allow-empty", "--no-edit"],
        what="git commit --amend",
    )
    return head_sha(dest)


# --- step 7 -------------------------------------------------------------------------------------------------


def apply_review_patch(dest: Path, patch: Path, *, name: str | None = None) -> str:
    """Step 7: ``git am`` the review patch (an mbox, as ``git format-patch`` writes it), then reset its author
    to the neutral one; the message is kept. Returns the new HEAD."""
    label = name or patch.name
    try:
        _ws_git(dest, ["am", "-q", "--keep-cr", "--", str(patch.resolve())], what=f"git am {label}")
    except WorkspaceError as exc:
        try:
            _ws_git(dest, ["am", "--abort"], what="git am --abort")
        except WorkspaceError:
            pass
        raise WorkspaceError(
            f"review patch {label} does not apply with git am: {exc.message}",
            hint="write it with git format-patch against the task's base (after its setup patches)",
        ) from None
    _ws_git(
        dest,
        ["commit", "-q", "--amend", "--no-verify", "--allow-empty", "--no-edit", "--reset-author"],
        what="git commit --amend --reset-author",
    )
    return head_sha(dest)


# --- step 8 -------------------------------------------------------------------------------------------------

#: Files under .git that name commits steps 6 and 7 replaced, or that only the preparation needed.
_PREP_LEFTOVERS = ("ORIG_HEAD", "COMMIT_EDITMSG", "FETCH_HEAD", "AUTO_MERGE")


def expire_reflog_and_prune(dest: Path) -> None:
    """Step 8: expire every reflog entry now, drop ORIG_HEAD (and the like), prune every unreachable loose
    object. Nothing was packed (gc.auto=0), so nothing unreachable survives."""
    _ws_git(
        dest,
        ["reflog", "expire", "--expire=now", "--expire-unreachable=now", "--all"],
        what="git reflog expire",
    )
    git_dir = dest / ".git"
    for rel in _PREP_LEFTOVERS:
        leftover = git_dir / rel
        if leftover.is_file() or leftover.is_symlink():
            leftover.unlink()
    shutil.rmtree(git_dir / "logs", ignore_errors=True)
    _ws_git(dest, ["prune", "--expire=now"], what="git prune")


# --- all eight ----------------------------------------------------------------------------------------------


def _setup_patches_of(task: Any) -> list[str]:
    patches = getattr(task, "setup_patches", None)
    if patches is None:
        single = getattr(task, "setup_patch", None)
        patches = [single] if single else []
    if isinstance(patches, str):
        patches = [patches]
    return [str(p) for p in patches]


@dataclass(frozen=True)
class WorkspaceSource:
    """Where every workspace of a batch comes from: the source, the eval dir its tree carries (removed from
    each workspace) and the manifest's guidance globs."""

    repo: Repo
    eval_dir: str
    guidance_globs: Sequence[str]


def prepare_workspace(
    origin: WorkspaceSource,
    task: Any,
    *,
    arm: Arm,
    profile: Any = None,
    dest: Path,
    patches_root: Path,
    overlay: GuidanceOverlay | None = None,
) -> PreparedWorkspace:
    """The eight preparation steps for one task into ``dest`` (which must not exist or be empty).

    ``task`` is a Task (base, setup_patches, review_patch are read); ``patches_root`` is the task's
    directory on the host (in the exported eval dir), against which patch paths resolve; ``profile`` is the
    harness profile (its ``bridge`` is read for guidance:bridge, its guidance names for what meta.json lists),
    or a plain bridge dict; ``overlay`` holds the files of guidance:tree, guidance:at=REV and
    guidance:generated. The profile's guidance names join the globs in what the start commit is listed for.
    """
    repo, eval_dir, guidance_globs = origin.repo, origin.eval_dir, origin.guidance_globs
    kind = arm.kind
    bridge = bridge_of(profile)
    harness_names: list[str] = []
    if profile is not None and hasattr(profile, "guidance"):
        harness_names = list(getattr(profile.guidance, "names", ()))
    if kind == "bridge" and bridge is None:
        raise UsageError(
            "arm guidance:bridge needs a harness profile with a bridge key",
            hint="use a profile that declares bridge, or the arms guidance:none / guidance:raw",
        )
    base_rev = str(task.base)
    base_sha, base_date = resolve_base(repo, base_rev)
    snapshot = repo.snapshot(base_sha)
    export_tree_as_stored(snapshot, dest)  # 1
    delete_eval_dir(dest, eval_dir)  # 2
    init_and_commit(dest)  # 3
    setup = apply_setup_patches(dest, _setup_patches_of(task), patches_root=patches_root)  # 4
    applied = [(path, sha, "setup") for path, sha in setup.items()]
    arm_result = apply_arm(dest, arm, guidance_globs, bridge=bridge, overlay=overlay)  # 5
    amend_commit(dest)  # 6
    review = getattr(task, "review_patch", None)
    if review:  # 7
        review_path = _patch_file(patches_root, str(review))
        apply_review_patch(dest, review_path, name=str(review))
        applied.append((str(review), patch_digest(review_path), "review"))
    expire_reflog_and_prune(dest)  # 8
    guidance = guidance_at_start(dest, guidance_patterns(guidance_globs, harness_names))
    source = None
    if overlay is not None and arm.overlays:
        source = overlay.origin + (f" {overlay.rev}" if overlay.rev else "")
    return PreparedWorkspace(
        path=dest,
        base_rev=base_rev,
        base_sha=base_sha,
        base_date=base_date,
        arm=arm,
        applied=tuple(applied),
        start_sha=head_sha(dest),
        arm_result=arm_result,
        guidance=tuple(guidance),
        guidance_source=source,
    )
