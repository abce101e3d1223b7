"""The build image of an eval tree.

The build context is what the image can need, and nothing that changes with guidance edits: the eval
directory (without its tasks directory, so no gold answer can be baked into an image), the Dockerfile, a
``.dockerignore`` at the root, and every path the Dockerfile's ``COPY`` and ``ADD`` instructions name (paths
relative to the repository root, as before; ``COPY --from`` names another stage, not the context). A
Dockerfile that copies ``.`` or names a path through a build variable gets the whole repository (still without
the tasks directory). Every file is exported as git stores it, without ``.git`` and untracked files. So
editing AGENTS.md or any file the Dockerfile does not name changes neither the context nor the image.

Tags: ``dokimi/<id>:<sha>`` for a commit (pin ``tree``). A working tree has no revision, so its image is
tagged with a digest of the exported context, ``dokimi/<id>:ctx-<digest>`` (pin ``digest``); the same files
give the same tag and the build is skipped. ``--image`` names an image of the caller's (pin ``image``). The
context digest is also recorded as the image label ``dokimi.context-digest``.

The build's output goes to a log that outlives the build, failed or not (under the dokimi cache,
``build-logs/``, and ``work_dir/build.log`` when the caller keeps a work directory); each ``Step N/M`` line
is passed to the caller's progress callback as it is printed. A build that runs past its limit (3 hours by
default) is a ContainerError, never a hung batch.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shlex
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from dokimi import process
from dokimi.constants import LABEL_MANAGED
from dokimi.errors import ContainerError, SourceError, UsageError
from dokimi.globs import is_glob, match_glob
from dokimi.sandbox.docker import DOCKER, buildkit_docker, image_inspect, image_labels
from dokimi.sandbox.hostconfig import SECRET_ID, HostBuildConfig, host_build_config
from dokimi.schemas._base import load_json
from dokimi.source.export import export_tree_as_stored
from dokimi.source.fetch import default_directory

if TYPE_CHECKING:
    from dokimi.schemas.manifest import RepoManifest
    from dokimi.source import Repo

BUILD_TIMEOUT_S = 3 * 3600.0
LABEL_CONTEXT_DIGEST = "dokimi.context-digest"
LABEL_MANIFEST_ID = "dokimi.repo.manifest-id"
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


_INSTRUCTION = re.compile(r"^\s*(COPY|ADD)\s+(.*)$", re.IGNORECASE)
WHOLE_TREE = None
"""What :func:`dockerfile_sources` returns when the Dockerfile needs the whole repository."""


def _logical_lines(text: str) -> list[str]:
    """Dockerfile lines with comments dropped and backslash continuations joined."""
    lines: list[str] = []
    current = ""
    for raw in text.splitlines():
        if not current and raw.lstrip().startswith("#"):
            continue
        if raw.rstrip().endswith("\\"):
            current += raw.rstrip()[:-1] + " "
            continue
        lines.append(current + raw)
        current = ""
    if current:
        lines.append(current)
    return lines


def dockerfile_sources(text: str) -> list[str] | None:
    """The context paths the Dockerfile's COPY and ADD instructions name (relative to the context root,
    without a leading ``./``), or None when it needs the whole context (``COPY . /src``, a ``$VARIABLE`` in
    a source, or an instruction that cannot be split). ``--from=`` copies from a stage, heredocs from the
    Dockerfile itself, and an ADD of a URL from the network: none of them names the context."""
    sources: list[str] = []
    for line in _logical_lines(text):
        match = _INSTRUCTION.match(line)
        if not match:
            continue
        kind, rest = match.group(1).upper(), match.group(2).strip()
        if rest.startswith("["):
            try:
                words = [str(w) for w in load_json(rest)]
            except ValueError:
                return WHOLE_TREE
        else:
            try:
                words = shlex.split(rest, posix=True)
            except ValueError:
                return WHOLE_TREE
        flags = [w for w in words if w.startswith("--")]
        if any(f.startswith("--from") for f in flags):
            continue
        args = [w for w in words if not w.startswith("--")]
        for source in args[:-1]:
            if source.startswith("<<") or (
                kind == "ADD" and re.match(r"^[a-z][a-z0-9+.-]*://|^git@", source)
            ):
                continue
            if "$" in source:
                return WHOLE_TREE
            normalized = source.lstrip("/")
            while normalized.startswith("./"):
                normalized = normalized[2:]
            normalized = normalized.rstrip("/")
            if normalized in ("", "."):
                return WHOLE_TREE
            sources.append(normalized)
    return sources


def _named_by(path: str, sources: list[str]) -> bool:
    """Whether a tree path is a source the Dockerfile names, or lies inside one (a glob matches per segment,
    as docker's does)."""
    for source in sources:
        if not is_glob(source):
            if path == source or path.startswith(source + "/"):
                return True
            continue
        parts = path.split("/")
        depth = source.count("/") + 1
        if len(parts) >= depth and match_glob(source, "/".join(parts[:depth])):
            return True
    return False


def context_selector(manifest: RepoManifest, dockerfile_text: str | None) -> Callable[[str], bool] | None:
    """Which tree paths go into the build context (None: all of them, the tasks directory aside)."""
    assert manifest.image is not None
    sources = dockerfile_sources(dockerfile_text) if dockerfile_text is not None else WHOLE_TREE
    if sources is WHOLE_TREE:
        return None
    dockerfile = manifest.image.dockerfile.strip("/")
    eval_dir = (manifest.eval_dir or "").strip("/")
    named = list(sources)

    def selected(path: str) -> bool:
        if path in (dockerfile, ".dockerignore"):
            return True
        if eval_dir and path.startswith(eval_dir + "/"):
            return True
        return _named_by(path, named)

    return selected


def export_build_context(repo: Repo, manifest: RepoManifest, dest: Path) -> str:
    """Export the build context (see the module docstring) into ``dest``; returns the context digest."""
    snapshot = repo.eval_snapshot()
    exclude = [manifest.tasks] if manifest.tasks else []
    text: str | None = None
    if manifest.image is not None:
        try:
            text = snapshot.read(manifest.image.dockerfile.strip("/")).decode("utf-8", "replace")
        except SourceError:
            text = None  # the build below says the Dockerfile is missing
    export_tree_as_stored(
        snapshot, dest, exclude=exclude, only=context_selector(manifest, text) if text else None
    )
    return context_digest(dest)


def build_log_path(manifest_id: str, tag: str) -> Path:
    """Where the log of a build of ``tag`` is kept (one file per build, newest name last)."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", tag)
    return default_directory() / "build-logs" / f"{stamp}-{name}.log"


class _StepWatcher:
    """Reads the build log while docker writes it and passes each ``Step N/M`` line to ``progress``."""

    def __init__(self, log: Path, progress: Callable[[str], None]) -> None:
        self.log = log
        self.progress = progress
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="dokimi-build-progress", daemon=True)

    def __enter__(self) -> _StepWatcher:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join(timeout=5)

    def _watch(self) -> None:
        offset = 0
        pending = b""
        while True:
            finished = self.done.wait(0.5)
            try:
                with open(self.log, "rb") as handle:
                    handle.seek(offset)
                    chunk = handle.read()
            except OSError:
                chunk = b""
            offset += len(chunk)
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                text = line.decode("utf-8", "replace").strip()
                if re.match(r"^(Step \d+/\d+|#\d+ \[)", text):
                    self.progress(text[:200])
            if finished:
                return


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
    progress: Callable[[str], None] | None = None,
) -> BuiltImage:
    """The image of ``repo``'s eval tree, built with ``image.dockerfile`` unless an image of its tag exists.

    ``network`` is passed to ``docker build --network`` (``--build-network``; default: docker's). The build
    log is kept under the dokimi cache (``build-logs/``) and copied to ``work_dir/build.log`` when
    ``work_dir`` is given; ``progress`` gets each build step as it starts. A failed build, or one that runs
    past ``timeout_s``, is a ContainerError with the log's last lines and the log's path.
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
        host = host_build_config(manifest.image.build.from_host, manifest.image.build.ca_files)
        network = build_network(host, network, progress)
        builder = _builder(host, dockerfile.read_text(encoding="utf-8", errors="replace"))
        if host.script is not None:
            secret = scratch / "secret" / SECRET_ID
            secret.parent.mkdir(mode=0o700)
            secret.write_text(host.script, encoding="utf-8")
            os.chmod(secret, 0o600)
        argv = [builder.docker, "build", *builder.flags, "--file", str(dockerfile), "--tag", tag]
        argv += ["--label", f"{LABEL_CONTEXT_DIGEST}={digest}", "--label", f"{LABEL_MANAGED}=1"]
        argv += ["--label", f"{LABEL_MANIFEST_ID}={manifest.id}"]
        for name, value in host.build_args.items():
            argv += ["--build-arg", f"{name}={value}"]
        if builder.buildkit:
            argv += ["--secret", f"id={SECRET_ID},src={scratch / 'secret' / SECRET_ID}"]
        if network:
            argv += ["--network", network]
        argv.append(str(context))
        log = build_log_path(manifest.id, tag)
        run = functools.partial(
            process.run,
            argv,
            timeout=timeout_s,
            output=process.Output(file=log, merge_stderr=builder.buildkit),
            env={**os.environ, "DOCKER_BUILDKIT": "1"} if builder.buildkit else None,
        )
        if progress is not None:
            progress(f"building image {tag} (log: {log})")
            for line in host.notes:
                progress(f"from this machine, for the build only: {line}")
            with _StepWatcher(log, progress):
                result = run()
        else:
            result = run()
        _keep_log(log, result.stderr, work_dir)
        if result.timed_out:
            raise ContainerError(
                f"image build of {tag} ran past {timeout_s:g} s and was stopped",
                path=str(log),
                hint="make the Dockerfile faster, or bake fewer things into the image",
            )
        if result.returncode != 0:
            text = (result.stdout + "\n" + result.stderr).strip().splitlines()
            tail = "\n    ".join(text[-BUILD_LOG_TAIL:])
            raise ContainerError(
                f"image build of {tag} failed (exit {result.returncode}; whole log: {log}):\n    {tail}",
                path=str(log),
                hint="fix the Dockerfile; it must build offline unless --build-network gives it a network",
            )
        pin: ImagePin = "tree" if repo.rev is not None else "digest"
        return BuiltImage(tag, pin, digest, _image_id(tag), built=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@dataclass(frozen=True)
class _Builder:
    docker: str
    buildkit: bool
    flags: tuple[str, ...]


def _builder(host: HostBuildConfig, dockerfile_text: str) -> _Builder:
    """BuildKit when the build gets the ``dokimi-host`` secret or the Dockerfile mounts anything (``RUN
    --mount``, which the legacy builder cannot parse); else the legacy builder, as docker's default. A
    BuildKit build without a docker CLI that has it is a usage error naming the fix."""
    if host.script is None and not re.search(
        r"^\s*RUN\s+(?:--\S+\s+)*--mount=", dockerfile_text, re.M | re.I
    ):
        # --force-rm: the container of a step that fails is removed too (docker keeps it by default).
        return _Builder(DOCKER, buildkit=False, flags=("--force-rm",))
    client = buildkit_docker()
    if client is None:
        raise UsageError(
            "this image build needs BuildKit (image.build.from_host names pip, apt or ca, or the Dockerfile "
            "has RUN --mount), and no docker CLI on PATH has it",
            hint="install docker's buildx plugin (docker-buildx-plugin), or put a docker CLI older than 23.0 "
            "on PATH; the legacy builder cannot pass a secret",
        )
    return _Builder(client, buildkit=True, flags=("--progress=plain",))


def build_network(
    host: HostBuildConfig, network: str | None, progress: Callable[[str], None] | None
) -> str | None:
    """The build's docker network: ``network`` (--build-network) when given; the host's when the proxy the
    build gets is on this machine's loopback, which no other network reaches."""
    if not host.loopback_proxy:
        return network
    if network is None:
        if progress is not None:
            progress("the proxy is on this machine's loopback: the build runs on the host's network")
        return "host"
    if network != "host" and progress is not None:
        progress(
            f"warning: the proxy is on this machine's loopback, which --build-network {network} cannot reach"
        )
    return network


def _image_id(ref: str) -> str | None:
    data = image_inspect(ref)
    return str(data["Id"]) if data and data.get("Id") else None


def _keep_log(log: Path, stderr: str, work_dir: Path | None) -> None:
    """docker's stderr (where the legacy builder prints why a step failed) goes after its stdout in the log,
    and a copy goes to ``work_dir/build.log``."""
    if stderr.strip():
        with open(log, "a", encoding="utf-8") as handle:
            handle.write("\n--- stderr ---\n" + stderr)
    if work_dir is not None:
        work_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log, work_dir / "build.log")
