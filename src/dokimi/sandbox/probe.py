"""The isolation probe: a container with exactly the agent's mounts looks for what it must
not see.

It must see neither /eval/content ({eval_dir}) nor /eval/source ({source_dir}); no entry named like a task id
anywhere it can reach (``/`` searched, except /proc, /sys and /dev); no guidance file in any directory above
the workspace (a harness loads those from the ancestors of its cwd); no network interface but loopback when
the run has no network; and it must not run as root. The probe is a POSIX shell script, so any image with
``sh`` and ``find`` can run it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from dokimi.constants import CONTAINER_EVAL_DIR, CONTAINER_SOURCE_DIR, CONTAINER_WORKSPACE
from dokimi.sandbox.container import ContainerSpec, run_container

PROBE_TIMEOUT_S = 600.0
MAX_LISTED = 20

#: Guidance file names looked for above the workspace, besides the profile's and the globs' literal names.
DEFAULT_GUIDANCE_NAMES = ("AGENTS.md", "CLAUDE.md", "CLAUDE.local.md", "GEMINI.md", "AGENT.md")


@dataclass(frozen=True)
class ProbeResult:
    """What the probe container saw. ``problems`` is empty when the agent's container is isolated."""

    uid: int | None = None
    visible: tuple[str, ...] = ()
    """/eval/content or /eval/source, when the agent can see them."""
    task_entries: tuple[str, ...] = ()
    """Paths whose name is a task id."""
    guidance_above: tuple[str, ...] = ()
    """Guidance files in a directory above the workspace."""
    interfaces: tuple[str, ...] = ()
    """Network interfaces of the container (``lo`` only with no network)."""
    error: str | None = None
    """Why the probe could not run to its end."""
    problems: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not self.problems


def probe_script(*, guidance_names: Sequence[str], task_ids: Sequence[str]) -> str:
    """The shell script the probe container runs (names are passed quoted, never interpolated into code)."""
    lines = [
        "set -u",
        'echo "uid $(id -u)"',
        f'for p in {CONTAINER_EVAL_DIR} {CONTAINER_SOURCE_DIR}; do [ -e "$p" ] && echo "visible $p"; done',
        f'd=$(dirname "{CONTAINER_WORKSPACE}")',
        "while :; do",
        '  for n in "$@"; do { [ -e "$d/$n" ] || [ -L "$d/$n" ]; } && echo "guidance $d/$n"; done',
        '  [ "$d" = "/" ] && break',
        '  d=$(dirname "$d")',
        "done",
    ]
    if task_ids:
        tests = " -o ".join(f"-name {_sh_quote(task_id)}" for task_id in task_ids)
        lines.append(
            "find / \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o "
            f"\\( {tests} \\) -print 2>/dev/null | sed 's/^/task /'"
        )
    lines.append('for i in /sys/class/net/*; do [ -e "$i" ] && echo "iface ${i##*/}"; done')
    lines.append("echo probe-done")
    return "\n".join(lines) + "\n"


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def parse_probe_output(
    stdout: str, *, expect_no_network: bool, returncode: int | None, stderr: str = ""
) -> ProbeResult:
    """Turn the probe's lines into a ProbeResult with its problems named."""
    uid: int | None = None
    visible: list[str] = []
    tasks: list[str] = []
    guidance: list[str] = []
    interfaces: list[str] = []
    done = False
    for line in stdout.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "uid" and rest.strip().isdigit():
            uid = int(rest.strip())
        elif kind == "visible":
            visible.append(rest)
        elif kind == "task":
            tasks.append(rest)
        elif kind == "guidance":
            guidance.append(rest)
        elif kind == "iface":
            interfaces.append(rest)
        elif line.strip() == "probe-done":
            done = True
    problems: list[str] = []
    error = None
    if not done:
        tail = " ".join(stderr.strip().splitlines()[-3:])
        error = f"the probe did not finish (exit {returncode}){': ' + tail if tail else ''}"
        problems.append(error)
    for path in visible:
        what = "{eval_dir}" if path == str(CONTAINER_EVAL_DIR) else "{source_dir}"
        problems.append(f"the agent's container can see {path} ({what})")
    if tasks:
        shown = ", ".join(sorted(tasks)[:MAX_LISTED])
        more = f" and {len(tasks) - MAX_LISTED} more" if len(tasks) > MAX_LISTED else ""
        problems.append(f"the agent's container reaches entries named like a task: {shown}{more}")
    if guidance:
        problems.append(f"guidance files above the workspace: {', '.join(sorted(guidance))}")
    if uid == 0:
        problems.append("the agent's container runs as root")
    outside = [name for name in interfaces if name != "lo"]
    if expect_no_network and outside:
        problems.append(f"the run should have no network, but the container has {', '.join(sorted(outside))}")
    return ProbeResult(
        uid=uid,
        visible=tuple(visible),
        task_entries=tuple(sorted(tasks)),
        guidance_above=tuple(sorted(guidance)),
        interfaces=tuple(sorted(interfaces)),
        error=error,
        problems=tuple(problems),
    )


def isolation_probe(
    agent: ContainerSpec,
    *,
    task_ids: Sequence[str],
    guidance_names: Sequence[str] = DEFAULT_GUIDANCE_NAMES,
    expect_no_network: bool,
    timeout: float = PROBE_TIMEOUT_S,
) -> ProbeResult:
    """Run the probe in a container with ``agent``'s image, mounts, user, network and environment.

    ``agent`` is the spec the agent would run with (:func:`dokimi.sandbox.specs.agent_spec`); only its argv is
    replaced by the probe script. ``guidance_names`` are file names a harness loads from the ancestors of its
    cwd (the profile's ``guidance.names`` and the literal names of the guidance globs).
    """
    names = sorted(set(guidance_names))
    script = probe_script(guidance_names=names, task_ids=task_ids)
    spec = dataclasses.replace(agent, argv=["sh", "-c", script, "probe", *names])
    result = run_container(spec, timeout=timeout)
    return parse_probe_output(
        result.stdout,
        expect_no_network=expect_no_network,
        returncode=result.returncode,
        stderr=result.stderr,
    )
