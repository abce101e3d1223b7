"""The build image of an eval tree (contract §1.1, §9).

The build context is the eval tree's repository root at the eval revision: every tracked file as git stores
it, no ``.git``, no untracked file, and without the tasks directory (so no gold answer can be baked into an
image). One image serves every task of that eval revision.

Tags: ``dokimi/<id>:<sha>`` for a commit (pin ``tree``). A working tree has no revision, so its image is
tagged with a digest of the exported context, ``dokimi/<id>:ctx-<digest>`` (pin ``digest``); the same files
give the same tag and the build is skipped. ``--image`` names an image of the caller's (pin ``image``). The
context digest is also recorded as the image label ``dokimi.context-digest``.

A build that runs past its limit (3 hours by default) is a ContainerError, never a hung batch.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from dokimi import process
from dokimi.constants import LABEL_MANAGED
from dokimi.errors import ContainerError, UsageError
from dokimi.sandbox.docker import DOCKER, image_inspect, image_labels
from dokimi.workspace import export_tree_as_stored

if TYPE_CHECKING:
    from dokimi.schemas.manifest import RepoManifest
    from dokimi.source import Repo

BUILD_TIMEOUT_S = 3 * 3600.0
LABEL_CONTEXT_DIGEST = "dokimi.context-digest"
LABEL_MANIFEST_ID = "dokimi.manifest-id"
BUILD_LOG_TAIL = 25

ImagePin = Literal["tree", "digest", "image"]


@dataclass(frozen=True)
class BuiltImage:
    """The image every container of a run uses, and how it is pinned (batch.json's image / image_pin)."""

    ref: str
    """The tag (or the --image name) containers are started from."""
    pin: ImagePin
    context_digest: str | None
    """sha256 of the build context (None for an --image of the caller's)."""
    image_id: str | None
    built: bool
    """False when an image of this tag existed already and was reused."""


def _repository_name(manifest_id: str) -> str:
    """A docker repository component from the manifest id (lower case; runs of other characters -> '-')."""
    name = re.sub(r"[^a-z0-9]+", "-", manifest_id.lower()).strip("-")
    return name or "repo"


def image_tag(manifest_id: str, *, rev: str | None, context_digest: str | None) -> str:
    """``dokimi/<id>:<sha>`` for a commit, ``dokimi/<id>:ctx-<digest 24>`` for a working tree."""
    repo = f"dokimi/{_repository_name(manifest_id)}"
    if rev is not None:
        return f"{repo}:{rev}"
    if context_digest is None:
        raise ValueError("a working tree's image tag needs the context digest")
    return f"{repo}:ctx-{context_digest[:24]}"


def context_digest(root: Path) -> str:
    """sha256 over every entry of a directory: its path, its kind and mode, and its content or link target."""
    digest = hashlib.sha256()
    entries: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in [*filenames, *[d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]]:
            entries.append(os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/"))
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
    for rel in sorted(entries):
        path = root / rel
        if path.is_symlink():
            record = f"l {rel}\0{os.readlink(path)}"
        else:
            content = hashlib.sha256(path.read_bytes()).hexdigest()
            mode = "x" if os.access(path, os.X_OK) else "f"
            record = f"{mode} {rel}\0{content}"
        digest.update(record.encode("utf-8", "surrogateescape") + b"\n")
    return digest.hexdigest()


def export_build_context(repo: Repo, manifest: RepoManifest, dest: Path) -> str:
    """Export the eval tree without its tasks directory into ``dest``; returns the context digest."""
    snapshot = repo.eval_snapshot()
    exclude = [manifest.tasks] if manifest.tasks else []
    export_tree_as_stored(snapshot, dest, exclude=exclude)
    return context_digest(dest)


def use_image(ref: str) -> BuiltImage:
    """An image the caller names (--image): it must exist locally; no build, pin ``image``."""
    data = image_inspect(ref)
    if data is None:
        raise UsageError(
            f"--image {ref}: no such image on the docker daemon",
            hint="build or load it first (docker images lists what is there)",
        )
    return BuiltImage(ref, "image", None, str(data.get("Id")) if data.get("Id") else None, built=False)


def build_image(
    repo: Repo,
    manifest: RepoManifest,
    *,
    work_dir: Path | None = None,
    network: str | None = None,
    timeout_s: float = BUILD_TIMEOUT_S,
    force: bool = False,
) -> BuiltImage:
    """The image of ``repo``'s eval tree, built with ``image.dockerfile`` unless an image of its tag exists.

    ``network`` is passed to ``docker build --network`` (``--build-network``; default: docker's). The build
    log goes to ``work_dir/build.log`` when ``work_dir`` is given. A failed build, or one that runs past
    ``timeout_s``, is a ContainerError with the log's last lines.
    """
    if manifest.image is None:
        raise UsageError(
            f"manifest {manifest.id} has no image.dockerfile, so there is nothing to build",
            hint="add image: {dockerfile: <eval-dir>/Dockerfile} to the manifest, or pass --image IMAGE",
        )
    if repo.rev is not None:
        tag = image_tag(manifest.id, rev=repo.rev, context_digest=None)
        if not force and image_inspect(tag) is not None:
            labels = image_labels(tag)
            return BuiltImage(tag, "tree", labels.get(LABEL_CONTEXT_DIGEST), _image_id(tag), built=False)
    scratch = Path(tempfile.mkdtemp(prefix="dokimi-context."))
    try:
        context = scratch / "context"
        digest = export_build_context(repo, manifest, context)
        if repo.rev is None:
            tag = image_tag(manifest.id, rev=None, context_digest=digest)
            if not force and image_inspect(tag) is not None:
                return BuiltImage(tag, "digest", digest, _image_id(tag), built=False)
        dockerfile = context / manifest.image.dockerfile
        if not dockerfile.is_file():
            raise UsageError(
                f"image.dockerfile {manifest.image.dockerfile} is not a file of the eval tree",
                hint="commit the Dockerfile (the build context holds only tracked files), or fix the path",
            )
        # --force-rm: the container of a step that fails is removed too (docker keeps it by default).
        argv = [DOCKER, "build", "--force-rm", "--file", str(dockerfile), "--tag", tag]
        argv += ["--label", f"{LABEL_CONTEXT_DIGEST}={digest}", "--label", f"{LABEL_MANAGED}=1"]
        argv += ["--label", f"{LABEL_MANIFEST_ID}={manifest.id}"]
        if network:
            argv += ["--network", network]
        argv.append(str(context))
        log = (work_dir / "build.log") if work_dir is not None else scratch / "build.log"
        result = process.run(argv, timeout=timeout_s, stdout_file=log)
        if result.timed_out:
            raise ContainerError(
                f"image build of {tag} ran past {timeout_s:g} s and was stopped",
                path=str(log) if work_dir is not None else None,
                hint="make the Dockerfile faster, or bake fewer things into the image",
            )
        if result.returncode != 0:
            text = (result.stdout + "\n" + result.stderr).strip().splitlines()
            tail = "\n    ".join(text[-BUILD_LOG_TAIL:])
            raise ContainerError(
                f"image build of {tag} failed (exit {result.returncode}):\n    {tail}",
                path=str(log) if work_dir is not None else None,
                hint="fix the Dockerfile; it must build offline unless --build-network gives it a network",
            )
        pin: ImagePin = "tree" if repo.rev is not None else "digest"
        return BuiltImage(tag, pin, digest, _image_id(tag), built=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _image_id(ref: str) -> str | None:
    data = image_inspect(ref)
    return str(data["Id"]) if data and data.get("Id") else None
