"""``repo scan --run`` (L1): the guidance's commands run in the repository's image, offline, as an agent's."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest

from dokimi.checks.scan.engine import GuidanceCommand, guidance_commands
from dokimi.checks.scan.markdown import extract
from dokimi.cli.main import main
from tests.helpers.git import git, git_repo

DOWNLOAD = "python3 -c \"import urllib.request; urllib.request.urlopen('http://example.com', timeout=3)\""

GUIDE = f"""\
# Working here

```sh
python3 -c "print('hello')"
cd sub
test -f marker.txt
{DOWNLOAD}
sleep 30
uv run pytest
cat <<END > notes.txt
a note
END
```

Build with `make build` once.

```sh
ls marker.txt  # the cd of the fence above does not carry over
```

<!-- dokimi: ignore run -->
```sh
false
```
"""

MANIFEST = """\
schema: repo_manifest.v1
id: {id}
eval_dir: .agent-eval
guidance:
  globs: ["AGENTS.md"]
image:
  dockerfile: .agent-eval/Dockerfile
  network: public
entry_points:
  grade: "true"
  oracle: "true"
tasks: .agent-eval/tasks
"""


def test_the_commands_of_the_guidance_in_order_with_their_fence_state() -> None:
    commands = guidance_commands({"docs/AGENTS.md": extract(GUIDE)})
    assert [(c.line, c.text, c.setup) for c in commands] == [
        (4, "python3 -c \"print('hello')\"", ()),
        (5, "cd sub", ()),
        (6, "test -f marker.txt", ("cd sub",)),
        (7, DOWNLOAD, ("cd sub",)),
        (8, "sleep 30", ("cd sub",)),
        (9, "uv run pytest", ("cd sub",)),
        (10, "cat <<END > notes.txt", ("cd sub",)),
        (15, "make build", ()),
        (18, "ls marker.txt  # the cd of the fence above does not carry over", ()),
        (23, "false", ()),
    ]
    assert commands[0] == GuidanceCommand("docs/AGENTS.md", 4, "python3 -c \"print('hello')\"")


@pytest.mark.docker
@pytest.mark.slow
def test_scan_run_reports_each_command_as_it_ran_in_the_image(
    tmp_path: Path, docker_available: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """Offline even where image.network is public: the download fails; uv is not in the image; sleep hits the
    timeout; the heredoc is not run; the suppressed `false` is reported as suppressed."""
    repo = git_repo(
        tmp_path / "repo",
        {
            "AGENTS.md": GUIDE,
            "sub/marker.txt": "",
            ".agent-eval/repo-eval.yaml": MANIFEST.format(id=f"scanrun{secrets.token_hex(3)}"),
            ".agent-eval/Dockerfile": "FROM dokimi-base:bookworm\n",
            ".agent-eval/tasks/.keep": "",
        },
    )
    rc = main(["repo", "scan", str(repo), "--run", "--run-timeout", "5", "--json"])
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    runs = [c for c in document["claims"] if c["kind"] == "run"]
    assert {(c["line"], c["status"], c["suppressed"] is not None) for c in runs} == {
        (4, "ok", False),
        (5, "ok", False),
        (6, "ok", False),
        (7, "fail", False),
        (8, "unresolved", False),
        (9, "fail", False),
        (10, "unresolved", False),
        (15, "fail", False),
        (18, "fail", False),
        (23, "fail", True),
    }
    why = {c["line"]: c["why"] for c in runs}
    assert why[9].startswith("exit 127 in the image, offline: ") and "uv: command not found" in why[9]
    assert why[7].startswith("exit 1 in the image, offline: ") and "urlopen error" in why[7]
    assert why[8] == "did not finish in 5 s (a server, a watch mode, a long build?)"
    assert why[10] == "a heredoc, whose body the scan does not keep"
    assert "run 1/9: AGENTS.md:4:" in captured.err
    assert rc == 0  # without --fail-on-fail


@pytest.mark.docker
@pytest.mark.slow
def test_scan_run_on_the_example_runs_every_command_and_says_where_one_fails(
    example: Path, docker_available: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """The example's guidance says `python`: its Dockerfile links python to python3, so every command runs.
    Without that line, an agent following the guidance word for word fails there, and --run says where."""
    assert main(["repo", "scan", str(example), "--run", "--fail-on-fail"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "scan: 4 guidance files, 35 claims: 35 ok, 0 unresolved, 0 fail"

    dockerfile = example / ".agent-eval" / "Dockerfile"
    link = "RUN ln -s /usr/bin/python3 /usr/local/bin/python\n"
    assert link in dockerfile.read_text()
    dockerfile.write_text(dockerfile.read_text().replace(link, ""))
    git(example, "commit", "-qam", "no python link")
    rc = main(["repo", "scan", str(example), "--run", "--fail-on-fail"])
    out = capsys.readouterr().out
    assert rc == 1
    assert (
        "AGENTS.md:19: fail run python -m pytest tests/: exit 127 in the image, offline: "
        "bash: line 1: python: command not found"
    ) in out.splitlines()
    failed = [line for line in out.splitlines() if ": fail " in line]
    assert len(failed) == 3 and all(" fail run python " in line for line in failed)
