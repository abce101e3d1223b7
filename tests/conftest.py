"""Session-wide isolation and the fixtures for prerequisites (docker, the Claude Code CLI).

- git never reads the host's configuration; author and committer are fixed; templates are empty.
- DOKIMI_HOME points into a temporary directory, so no test writes to the user's cache.
- Tests that need docker or a harness CLI use the fixtures below. Locally a missing prerequisite skips the
  test with the reason; under CI=true every skip is a failure (CI installs what the tests need: .ci/run).
"""

from __future__ import annotations

import os
import runpy
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dokimi.harness.locate import env_names, installed_path
from dokimi.harness.profile import load_profile
from dokimi.harness.runtime import NODE_VERSION, installed_node

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}

BASE_IMAGE = "dokimi-base:bookworm"


#: A test that uses one of these fixtures needs what its marker says, whether or not its module says so too.
MARKED_BY_FIXTURE = {
    "docker_available": "docker",
    "pinned_harness": "harness",
    "claude_bin": "harness",
    "codex_bin": "harness",
    "copilot_bin": "harness",
    "opencode_bin": "harness",
    "aider_bin": "harness",
    "node_bin": "harness",
    "gemini_bin": "harness",
    "qwen_bin": "harness",
    "chromium_bin": "slow",  # a headless browser per page: seconds each
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Markers from the fixtures a test uses (see MARKED_BY_FIXTURE), so ``-m "not docker and not harness and
    not slow"`` (``scripts/test.sh --fast``) leaves out every test that needs docker or a harness CLI."""
    for item in items:
        for fixture in getattr(item, "fixturenames", ()):
            marker = MARKED_BY_FIXTURE.get(fixture)
            if marker is not None and item.get_closest_marker(marker) is None:
                item.add_marker(marker)


@pytest.fixture(autouse=True, scope="session")
def _isolated_environment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    root = tmp_path_factory.mktemp("env")
    empty_config = root / "gitconfig"
    empty_config.write_text('[init]\n\tdefaultBranch = main\n[protocol "file"]\n\tallow = always\n')
    templates = root / "git-templates"
    templates.mkdir()
    for key in [k for k in os.environ if k.startswith("GIT_")]:
        del os.environ[key]
    # Tables are as wide as COLUMNS, else the terminal: both the host's. GNU readline, which pytest loads,
    # also exports COLUMNS=80 LINES=24 to subprocesses behind os.environ's back. Every test gets dokimi's
    # default width for output that is not a terminal (one that wants another sets COLUMNS itself).
    os.environ.update({"COLUMNS": "100", "LINES": "24"})
    os.environ.update(
        {
            "GIT_CONFIG_GLOBAL": str(empty_config),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TEMPLATE_DIR": str(templates),
            "GIT_AUTHOR_NAME": "dokimi tests",
            "GIT_AUTHOR_EMAIL": "tests@dokimi.invalid",
            "GIT_COMMITTER_NAME": "dokimi tests",
            "GIT_COMMITTER_EMAIL": "tests@dokimi.invalid",
            "DOKIMI_HOME": str(root / "dokimi-home"),
        }
    )
    yield


def _require(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"prerequisite missing in CI (CI=true): {reason}; .ci/run must install it")
    pytest.skip(reason)


#: Images the tests build (dokimi's own tags and the example's); those a session built are removed at its end.
TEST_IMAGE_REFERENCES = ("dokimi/*", "dokimi-example-*")


def _test_images() -> set[str]:
    ids: set[str] = set()
    for reference in TEST_IMAGE_REFERENCES:
        listed = subprocess.run(
            ["docker", "images", "--no-trunc", "-q", "--filter", f"reference={reference}"],
            capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip
        ids.update(listed.stdout.split())
    return ids


@pytest.fixture(scope="session")
def docker_available() -> Iterator[bool]:
    """A running docker daemon with the local base image (scripts/setup.sh provides both). The images the
    session's tests build are removed when it ends, so repeated runs do not pile them up
    (DOKIMI_TEST_KEEP_IMAGES=1 keeps them, for concurrent test sessions on one daemon)."""
    if shutil.which("docker") is None:
        _require("docker CLI not installed (scripts/setup.sh)")
    info = subprocess.run(["docker", "info"], capture_output=True, text=True, check=False, timeout=60)
    if info.returncode != 0:
        _require("docker daemon not running (scripts/setup.sh starts it)")
    image = subprocess.run(
        ["docker", "image", "inspect", BASE_IMAGE], capture_output=True, text=True, check=False, timeout=60
    )
    if image.returncode != 0:
        _require(f"base image {BASE_IMAGE} missing (scripts/setup.sh builds it)")
    before = _test_images()
    yield True
    if os.environ.get("DOKIMI_TEST_KEEP_IMAGES") == "1":
        return  # test sessions sharing this daemon: the one that ends must not remove the others' images
    built = sorted(_test_images() - before)
    if built:
        subprocess.run(["docker", "rmi", "-f", *built], capture_output=True, check=False, timeout=600)


def _pinned(name: str) -> Path:
    """A harness's executable the way dokimi finds it (dokimi.harness.locate): its variable
    (``DOKIMI_<NAME>_BIN``), else the pin of its built-in profile installed by scripts/install-harness.sh."""
    profile = load_profile(name)
    variables = env_names(name)
    configured = next((os.environ[v] for v in variables if os.environ.get(v)), None)
    path = Path(configured) if configured else installed_path(profile)
    if path is None or not path.is_file() or not os.access(path, os.X_OK):
        pin = profile.verification.version if profile.verification else "unpinned"
        _require(
            f"{name} {pin} not found at {path} (scripts/install-harness.sh {name}; or set {variables[0]})"
        )
    assert path is not None
    return path


@pytest.fixture(scope="session")
def pinned_harness() -> Callable[[str], Path]:
    """The executable of any built-in harness by its profile's name (``pinned_harness("codex")``): a test
    that runs every built-in harness needs no line of its own for a new one."""
    return _pinned


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    """The real Claude Code CLI (scripts/install-harness.sh), or DOKIMI_CLAUDE_BIN."""
    return _pinned("claude-code")


@pytest.fixture(scope="session")
def codex_bin() -> Path:
    """The real Codex CLI, pinned (scripts/install-harness.sh codex), or DOKIMI_CODEX_BIN."""
    return _pinned("codex")


@pytest.fixture(scope="session")
def copilot_bin() -> Path:
    """The real GitHub Copilot CLI, pinned (scripts/install-harness.sh copilot), or DOKIMI_COPILOT_BIN."""
    return _pinned("copilot")


@pytest.fixture(scope="session")
def opencode_bin() -> Path:
    """The real OpenCode CLI, pinned (scripts/install-harness.sh opencode), or DOKIMI_OPENCODE_BIN."""
    return _pinned("opencode")


@pytest.fixture(scope="session")
def aider_bin() -> Path:
    """Aider's launcher, pinned (scripts/install-harness.sh aider; run on python3.11), or DOKIMI_AIDER_BIN."""
    return _pinned("aider")


@pytest.fixture(scope="session")
def node_bin() -> Path:
    """The pinned Node runtime for Node-based CLIs (scripts/install-harness.sh node), never the host's."""
    configured = os.environ.get("DOKIMI_NODE_BIN")
    path = Path(configured) if configured else installed_node()
    if not path.is_file() or not os.access(path, os.X_OK):
        _require(f"Node {NODE_VERSION} not found at {path} (scripts/install-harness.sh node)")
    return path


@pytest.fixture(scope="session")
def gemini_bin() -> Path:
    """The real Gemini CLI, pinned (install-harness.sh gemini-cli), or DOKIMI_GEMINI_CLI_BIN."""
    return _pinned("gemini-cli")


@pytest.fixture(scope="session")
def qwen_bin() -> Path:
    """The real Qwen Code, pinned (install-harness.sh qwen-code), or DOKIMI_QWEN_CODE_BIN."""
    return _pinned("qwen-code")


@pytest.fixture(scope="session")
def chromium_bin() -> Path:
    """Headless Chromium for the HTML report tests (Debian package ``chromium``; .ci/run installs it)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        _require("chromium not installed (apt-get install -y chromium)")
    return Path(str(found))


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """The bundled example repository (examples/build_example.py), built in tmp_path/calc."""
    repo = tmp_path / "calc"
    examples = Path(__file__).resolve().parents[1] / "examples"
    runpy.run_path(str(examples / "build_example.py"))["build_example"](repo)
    return repo


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if IN_CI and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true, which is a failure: {report.longrepr}"
