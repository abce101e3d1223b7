"""The harness's version as the image runs it: the profile's version command, in a container with the
harness mounted at /eval/harness. A batch pins it (harness_version), and a node of a cluster checks its own
against the pin."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from dokimi.errors import PrerequisiteError
from dokimi.harness.profile import version_argv
from dokimi.harness.runtime import CONTAINER_PYTHON, container_launcher, is_python_script
from dokimi.rundir import EVAL_DIR_NAME, RunDir
from dokimi.sandbox.container import container_name, run_container
from dokimi.sandbox.specs import ContainerSettings, agent_spec

if TYPE_CHECKING:
    from dokimi.schemas.profile import HarnessProfile

__all__ = ["harness_version_in_image", "parse_version"]

VERSION_TIMEOUT_S = 120.0


def harness_version_in_image(
    profile: HarnessProfile,
    *,
    image: str,
    harness_bin: Path,
    batch: str,
    scratch: Path,
    where: str = EVAL_DIR_NAME,
) -> str:
    """version_cmd run inside the image with the harness at /eval/harness."""
    launcher = container_launcher(harness_bin)
    run_dir = scratch / "version"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    RunDir(run_dir).workspace.mkdir(parents=True)
    spec = agent_spec(
        ContainerSettings(image, None, "none", (), batch),
        name=container_name(batch, where, "version"),
        run_dir=run_dir,
        argv=[*launcher[:-1], *version_argv(profile, launcher[-1])],
        task=None,
        harness_bin=harness_bin,
    )
    result = run_container(spec, timeout=VERSION_TIMEOUT_S)
    shutil.rmtree(run_dir, ignore_errors=True)
    text = (result.stdout or result.stderr).strip()
    if not result.ok or not text:
        last = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else ""
        raise PrerequisiteError(
            f"the harness {harness_bin} does not report a version inside image {image} ("
            + ("timed out" if result.timed_out else f"exit {result.returncode}")
            + (f": {last}" if last else "")
            + ")",
            hint=f"{profile.name} runs on the image's own {CONTAINER_PYTHON}: use an image that has it "
            "(Debian bookworm: apt-get install -y python3)"
            if is_python_script(harness_bin)
            else "pass --bin with a harness executable that runs in the image (a self-contained binary), "
            "or use an image that has its runtime",
        )
    return parse_version(text)


def parse_version(text: str) -> str:
    """The first dotted number a version command printed, else its first line."""
    match = re.search(r"\d+(?:\.\d+)+(?:[-+][0-9A-Za-z.]+)?", text)
    return match.group(0) if match else text.splitlines()[0].strip()
