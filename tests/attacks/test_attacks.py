"""Issue 9's attacks, each through ``repo run`` / ``repo regrade`` on the real docker daemon (conftest.py).

1. grade.stderr (and result.json, meta.json) made links to a host file by code the grader imports;
2. .git/commondir naming a git dir the agent made, with a filter.*.clean command;
3. answer.txt made a link to a root-only host file, then ``repo regrade`` copies the inputs (since issue 20
   dokimi's files are read-only in the grade container, so the link is never made);
4. (tests/attacks/test_trace_forgery.py) forged trace lines after the harness exits;
5. (tests/checks/merge/test_judge_harness.py) a planted verdict the judge quotes after its own;
6. two ``repo run`` on one batch;
7. three ways past the bundled example's grader: sitecustomize.py, pytest.py, os._exit(0) in the package.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dokimi.batch import cell_dir
from tests.attacks.conftest import Example, attacker, dokimi, run_args

pytestmark = pytest.mark.docker

TASK = "fix_power_assoc"


def _cell(out: Path, batch: str) -> Path:
    return cell_dir(out / batch, TASK, "guidance:raw", "m", None, 0)


def _result(out: Path, batch: str) -> dict[str, object]:
    path = _cell(out, batch) / "result.json"
    assert path.is_file() and not path.is_symlink()
    data: dict[str, object] = json.loads(path.read_text())
    return data


def _untouched(secret: Path, text: str) -> None:
    st = os.lstat(secret)
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.getuid()
    assert secret.read_text() == text


def _nowhere_under(root: Path, needle: str) -> None:
    """No regular file under ``root`` (links not followed) holds ``needle``."""
    for directory, _dirs, files in os.walk(root):
        for name in files:
            path = Path(directory) / name
            if path.is_symlink() or not path.is_file():
                continue
            assert needle.encode() not in path.read_bytes(), f"{needle!r} leaked into {path}"


LINK_PLANTER = """\
cat >> calc/__init__.py <<'PY'
import os as _os
for _name in ("grade.stderr", "result.json", "meta.json", "answer.txt"):
    _p = "/eval/run/" + _name
    try:
        _os.remove(_p)
    except OSError:
        pass
    try:
        _os.symlink("{secret}", _p)
    except OSError:
        pass
PY
"""


def test_attack_1_and_3_links_planted_by_graded_code_are_never_written_through_or_copied(
    docker_available: bool, example: Example, tmp_path: Path, batch_name: str, host_secret: Path
) -> None:
    text = host_secret.read_text()
    who = attacker(tmp_path / "agent", LINK_PLANTER.replace("{secret}", str(host_secret)))
    out = tmp_path / "out"
    proc = dokimi(run_args(example, out, batch_name, who))
    assert proc.returncode in (0, 1), proc.stderr
    _untouched(host_secret, text)  # attack 1: dokimi, as root, wrote grade.stderr through no link
    run_dir = _cell(out, batch_name)
    for name in ("answer.txt", "meta.json", "grade.stderr", "result.json"):  # none replaced by its link
        assert not (run_dir / name).is_symlink(), name
    result = _result(out, batch_name)
    assert result["passed"] is False  # unfixed code
    regrade = dokimi(["repo", "regrade", str(out / batch_name), "--json"])
    assert regrade.returncode in (0, 1), regrade.stderr
    assert "Traceback" not in regrade.stderr
    _untouched(host_secret, text)
    _nowhere_under(out, text.strip())  # attack 3: the secret was never copied into the batch


COMMONDIR = """\
cp -r .git .evil
cat >> .evil/config <<'CFG'
[filter "x"]
	clean = touch /eval/run/FILTER-RAN && cat
	smudge = touch /eval/run/FILTER-RAN && cat
[diff "x"]
	textconv = sh -c 'touch /eval/run/FILTER-RAN; cat "$1"' -
CFG
mkdir -p .evil/info
printf '* filter=x diff=x\\n' > .evil/info/attributes
printf '* filter=x diff=x\\n' > .gitattributes
printf '../.evil\\n' > .git/commondir
echo "touched" >> README.md
"""


def test_attack_2_a_commondir_with_a_filter_runs_nothing_in_the_grader(
    docker_available: bool, example: Example, tmp_path: Path, batch_name: str
) -> None:
    who = attacker(tmp_path / "agent", COMMONDIR)
    out = tmp_path / "out"
    proc = dokimi(run_args(example, out, batch_name, who))
    assert proc.returncode in (0, 1), proc.stderr
    run_dir = _cell(out, batch_name)
    assert (run_dir / "agent-git" / "commondir").is_file()  # moved aside before grade
    assert not os.path.lexists(run_dir / "FILTER-RAN")
    assert not os.path.lexists(run_dir / "workspace" / ".git" / "commondir")
    assert _result(out, batch_name)["passed"] is False


def test_attack_6_a_second_run_on_a_batch_being_written_exits_2_and_harms_nothing(
    docker_available: bool, example: Example, tmp_path: Path, batch_name: str
) -> None:
    who = attacker(tmp_path / "agent", "sleep 8")
    out = tmp_path / "out"
    first = subprocess.Popen(
        [sys.executable, "-m", "dokimi", *run_args(example, out, batch_name, who)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not (_cell(out, batch_name) / "workspace").is_dir():  # the first is in its cell
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        second = dokimi(run_args(example, out, batch_name, who), timeout=120)
        assert second.returncode == 2
        assert f"being written by pid {first.pid}" in second.stderr and "Traceback" not in second.stderr
        stdout, stderr = first.communicate(timeout=600)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert first.returncode in (0, 1), stderr
    result = _result(out, batch_name)
    assert result["agent_rc"] == 0 and result["grader_failure"] is False  # the first's agent ran, intact
    assert (_cell(out, batch_name) / "answer.txt").read_text().startswith("done")


TRICKS = {
    "sitecustomize": "printf 'import os\\nos._exit(0)\\n' > sitecustomize.py",
    "pytest-shadow": "printf 'import sys\\nsys.exit(0)\\n' > pytest.py",
    "os-exit-in-package": "printf '\\nimport os\\nos._exit(0)\\n' >> calc/__init__.py",
}


@pytest.mark.parametrize("trick", sorted(TRICKS))
def test_attack_7_the_example_grader_fails_unfixed_code_whatever_the_workspace_adds(
    docker_available: bool, example: Example, tmp_path: Path, batch_name: str, trick: str
) -> None:
    who = attacker(tmp_path / "agent", TRICKS[trick])
    out = tmp_path / "out"
    proc = dokimi(run_args(example, out, batch_name, who))
    assert proc.returncode in (0, 1), proc.stderr
    result = _result(out, batch_name)
    assert result["passed"] is False and result["grader_failure"] is False
    grade = json.loads((_cell(out, batch_name) / "grade.json").read_text())
    assert grade["metrics"]["hidden_pass"] is False and grade["details"]["hidden_problems"]
