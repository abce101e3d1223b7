"""``repo scan --run`` (L1): every command line of the guidance, run in the repository's image as an agent
would run it, offline.

The image is the manifest's, built from the eval tree as for tasks check. The workspace is the scanned
snapshot without its eval directory, committed once (as an agent's workspace is a git repository). Each
command runs in a container of its own with the agent container's settings (dokimi.sandbox.specs.agent_spec:
the workspace at /eval/run/workspace, a fresh HOME, image.env, the manifest's limits, no capabilities) and no
network, as ``bash -c`` from the directory of the guidance file that names it, after the lines of the same
fence that change the shell's state (``cd``, ``export``, ...). The workspace is shared: a command sees what
the ones before it wrote, as an agent following the guide would.

Each command is one claim of kind ``run``: ok when it exits 0; fail when it exits non-zero (the exit code
and the last lines of its stderr, else of its stdout); unresolved when it does not finish within the timeout
(a server, a watch mode, a long build) or cannot be run as written (a heredoc, whose body the scan does not
keep).
"""

from __future__ import annotations

import posixpath
import secrets
import shlex
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from dokimi.checks.scan.engine import GuidanceCommand
from dokimi.checks.scan.shell import HEREDOC
from dokimi.checks.scan.verdict import Draft, Verdict, fail, ok, unresolved
from dokimi.errors import ContainerError, UsageError
from dokimi.repo.manifest import load_manifest
from dokimi.repo.workspace import init_and_commit
from dokimi.rundir import RunDir
from dokimi.sandbox.container import container_name, run_container
from dokimi.sandbox.docker import require_docker
from dokimi.sandbox.image import build_image
from dokimi.sandbox.specs import ContainerSettings, agent_spec, resolve_caches
from dokimi.source import open_source
from dokimi.source.export import export_tree_as_stored

if TYPE_CHECKING:
    from dokimi.sandbox.container import ContainerResult

#: Seconds each command may run (``--run-timeout``).
RUN_TIMEOUT_S = 120.0
#: Lines of a failed command's output shown in its claim.
TAIL_LINES = 3
KIND = "run"
#: docker run's own exit code when it could not start the container (no such image, a refused mount).
DOCKER_RUN_FAILED = 125


def run_guidance_commands(
    source: str,
    commands: Sequence[GuidanceCommand],
    *,
    manifest: str | None,
    manifest_file: Path | None,
    timeout_s: float = RUN_TIMEOUT_S,
    progress: Callable[[str], None] | None = None,
) -> list[Draft]:
    """Run ``commands`` in the image of ``source``'s manifest and return one claim each."""
    say = progress or (lambda _message: None)
    with open_source(source) as repo:
        snapshot = repo.eval_snapshot()
        try:
            loaded = load_manifest(snapshot, manifest=manifest, manifest_file=manifest_file, required=True)
            model = loaded.manifest
            if model is None or model.image is None or model.eval_dir is None:
                raise UsageError(
                    "--run needs a manifest with an image (eval_dir and image.dockerfile)",
                    hint="run `dokimi repo init` to write one, or scan without --run",
                )
            require_docker()
            runnable = [c for c in commands if not HEREDOC.search(c.text)]
            drafts = [
                Draft(
                    c.file, c.line, KIND, c.text, unresolved("a heredoc, whose body the scan does not keep")
                )
                for c in commands
                if HEREDOC.search(c.text)
            ]
            if not runnable:
                return drafts
            scratch = Path(tempfile.mkdtemp(prefix="dokimi-scan-run."))
            try:
                say(f"run: building the image of {model.id}")
                built = build_image(repo, model, work_dir=scratch, progress=say)
                run_dir = scratch / "run"
                workspace = RunDir(run_dir).workspace
                export_tree_as_stored(snapshot, workspace, exclude=[model.eval_dir])
                init_and_commit(workspace)
                settings = ContainerSettings(
                    image=built.ref,
                    image_config=model.image,
                    network="none",
                    caches=tuple(resolve_caches(model.image, model.id)),
                )
                batch = f"scanrun{secrets.token_hex(4)}"
                for i, command in enumerate(runnable, 1):
                    say(f"run {i}/{len(runnable)}: {command.file}:{command.line}: {command.text}")
                    spec = agent_spec(
                        settings,
                        name=container_name(batch, f"c{i}", "agent"),
                        run_dir=run_dir,
                        argv=["bash", "-c", script_of(command)],
                        task=None,
                    )
                    result = run_container(spec, timeout=timeout_s)
                    if result.returncode == DOCKER_RUN_FAILED and "docker:" in result.stderr:
                        raise ContainerError(
                            f"docker could not run the command's container: {tail(result.stderr)}"
                        )
                    drafts.append(
                        Draft(command.file, command.line, KIND, command.text, verdict_of(result, timeout_s))
                    )
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
        finally:
            snapshot.close()
    return sorted(drafts, key=lambda d: (d.file, d.line, d.claim))


def script_of(command: GuidanceCommand) -> str:
    """The bash script of one command: to its guidance file's directory, the fence's earlier state lines,
    then the command (stdin closed, as an agent's commands have none)."""
    directory = posixpath.dirname(command.file)
    lines = [f"cd {shlex.quote(directory)}"] if directory else []
    lines += list(command.setup)
    lines.append(command.text)
    return "\n".join(lines) + "\n"


def verdict_of(result: ContainerResult, timeout_s: float) -> Verdict:
    """ok on exit 0; unresolved at the timeout; fail otherwise, with the exit code and the output's end."""
    if result.timed_out:
        return unresolved(f"did not finish in {timeout_s:g} s (a server, a watch mode, a long build?)")
    if result.returncode == 0:
        return ok(f"exit 0 in {result.duration:.1f} s")
    return fail(
        f"exit {result.returncode} in the image, offline: {tail(result.stderr) or tail(result.stdout)}"
    )


def tail(text: str) -> str:
    """The last lines of a command's output, on one line."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-TAIL_LINES:])
