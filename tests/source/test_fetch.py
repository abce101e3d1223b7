"""repo fetch: the cache, non-interactive git and its diagnosis, blobs fetched in one request."""

from __future__ import annotations

import http.server
import json
import os
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dokimi.cli.main import main
from dokimi.errors import SourceError
from dokimi.source import open_source
from dokimi.source.fetch import clone_path, ensure_clone, missing_blobs
from dokimi.source.git import diagnose
from tests.helpers.git import bare_clone_for_serving, commit, git, git_repo


@pytest.fixture
def served(tmp_path: Path) -> tuple[Path, str, str]:
    """A bare repository allowing partial clones, its file:// URL, and the SHA of its second commit."""
    src = git_repo(tmp_path / "src", {f"d/f{i}.txt": f"file {i}\n" for i in range(20)})
    second = commit(src, "second", files={"AGENTS.md": "guide\n"})
    bare = bare_clone_for_serving(src, tmp_path / "served.git")
    return bare, f"file://{bare}", second


@pytest.mark.slow
def test_fetch_makes_a_bare_blobless_clone_and_reuses_it(
    served: tuple[Path, str, str], tmp_path: Path
) -> None:
    _, url, sha = served
    cache = tmp_path / "cache"
    first = ensure_clone(url, sha, cache_dir=cache)
    assert first.sha == sha and first.fetched
    assert git(first.git_dir, "rev-parse", "--is-bare-repository").strip() == "true"
    assert git(first.git_dir, "config", "remote.origin.promisor").strip() == "true"
    assert (cache / "README").is_file()
    again = ensure_clone(url, sha, cache_dir=cache)
    assert again.git_dir == first.git_dir and not again.fetched  # a full SHA in the cache needs no network


@pytest.mark.slow
def test_a_branch_name_is_fetched_again_so_the_cache_is_updated(
    served: tuple[Path, str, str], tmp_path: Path
) -> None:
    bare, url, sha = served
    cache = tmp_path / "cache"
    assert ensure_clone(url, "main", cache_dir=cache).sha == sha
    work = tmp_path / "work"
    subprocess.run(["git", "clone", "-q", str(bare), str(work)], check=True)
    newer = commit(work, "third", files={"new.txt": "n\n"})
    git(work, "push", "-q", "origin", "main")
    assert ensure_clone(url, "main", cache_dir=cache).sha == newer


@pytest.mark.slow
def test_reading_blobs_of_a_blobless_clone_fetches_them_in_one_request(
    served: tuple[Path, str, str], tmp_path: Path
) -> None:
    _, url, sha = served
    cache = tmp_path / "cache"
    clone = ensure_clone(url, sha, cache_dir=cache)
    log = tmp_path / "upload-pack.log"
    wrapper = tmp_path / "upload-pack.sh"
    wrapper.write_text(f'#!/bin/sh\necho call >> "{log}"\nexec git-upload-pack "$@"\n')
    wrapper.chmod(0o755)
    git(clone.git_dir, "config", "remote.origin.uploadpack", str(wrapper))
    with open_source(f"{url}@{sha}", cache_dir=cache) as repo:
        snap = repo.eval_snapshot()
        paths = [p for p in snap.paths() if p.startswith("d/")]
        assert len(missing_blobs(clone.git_dir, sha, [snap.entries[p].oid or "" for p in paths])) == 20
        blobs = snap.read_many(paths)
    assert blobs["d/f7.txt"] == b"file 7\n"
    assert log.read_text().count("call") == 1
    assert missing_blobs(clone.git_dir, sha, [snap.entries[p].oid or "" for p in paths]) == []


@pytest.mark.slow
def test_a_revision_the_remote_lacks_is_a_clear_error(served: tuple[Path, str, str], tmp_path: Path) -> None:
    _, url, _ = served
    with pytest.raises(SourceError, match="is not in the repository"):
        ensure_clone(url, "no-such-branch", cache_dir=tmp_path / "cache")


@pytest.mark.slow
def test_cli_fetch_prints_sha_and_path(
    served: tuple[Path, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, url, sha = served
    assert main(["repo", "fetch", f"{url}@{sha}", "--cache-dir", str(tmp_path / "c"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["sha"] == sha and Path(doc["git_dir"]) == clone_path(url, tmp_path / "c")


def test_cli_fetch_refuses_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["repo", "fetch", str(tmp_path)]) == 2
    assert "takes <url>@<rev>" in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
def test_fetch_through_git_daemon_on_loopback(served: tuple[Path, str, str], tmp_path: Path) -> None:
    bare, _, sha = served
    port = _free_port()
    daemon = subprocess.Popen(
        [
            "git",
            "daemon",
            "--reuseaddr",
            "--export-all",
            "--listen=127.0.0.1",
            f"--port={port}",
            f"--base-path={bare.parent}",
            str(bare.parent),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        url = f"git://127.0.0.1:{port}/{bare.name}"
        for _ in range(50):
            if subprocess.run(["git", "ls-remote", url], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        clone = ensure_clone(url, sha, cache_dir=tmp_path / "cache")
        assert clone.sha == sha
        with open_source(f"{url}@{sha}", cache_dir=tmp_path / "cache") as repo:
            assert repo.eval_snapshot().read("AGENTS.md") == b"guide\n"
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)


class _Unauthorized(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="dokimi-test"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(params=["https", "http"])
def unauthorized_url(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """A loopback server that answers 401 to everything, over https (self-signed) or http."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Unauthorized)
    if request.param == "https":
        key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
        subprocess.run(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "1",
                "-subj",
                "/CN=127.0.0.1",
                "-keyout",
                str(key),
                "-out",
                str(cert),
            ],
            check=True,
            capture_output=True,
        )
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        monkeypatch.setenv("GIT_SSL_NO_VERIFY", "1")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"{request.param}://127.0.0.1:{server.server_address[1]}/private/repo.git"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
def test_a_url_that_would_prompt_fails_fast_with_the_line_and_the_fix(
    unauthorized_url: str, tmp_path: Path
) -> None:
    start = time.monotonic()
    with pytest.raises(SourceError) as caught:
        ensure_clone(unauthorized_url, "main", cache_dir=tmp_path / "cache")
    assert time.monotonic() - start < 30
    text = str(caught.value)
    assert "terminal prompts disabled" in text
    assert "credential helper" in text
    assert not any(
        p.name.startswith("repo") and p.suffix == ".git" for p in (tmp_path / "cache" / "repos").iterdir()
    )


@pytest.mark.slow
def test_an_askpass_program_is_still_honoured(
    unauthorized_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "askpass-called"
    askpass = tmp_path / "askpass.sh"
    askpass.write_text(f'#!/bin/sh\necho "$1" >> "{marker}"\necho token\n')
    askpass.chmod(0o755)
    monkeypatch.setenv("GIT_ASKPASS", str(askpass))
    with pytest.raises(SourceError, match="Authentication failed|could not read|401"):
        ensure_clone(unauthorized_url, "main", cache_dir=tmp_path / "cache")
    assert "Username" in marker.read_text()


@pytest.mark.parametrize(
    ("stderr", "line", "fix"),
    [
        (
            "Host key verification failed.\nfatal: Could not read from remote repository.",
            "Host key verification failed.",
            "known_hosts",
        ),
        (
            "git@example.invalid: Permission denied (publickey).\n"
            "fatal: Could not read from remote repository.",
            "Permission denied (publickey)",
            "ssh-agent",
        ),
        (
            "fatal: could not read Username for 'https://example.invalid': terminal prompts disabled",
            "terminal prompts disabled",
            "credential helper",
        ),
    ],
)
def test_a_prompt_git_would_have_shown_is_named_with_its_fix(stderr: str, line: str, fix: str) -> None:
    error = diagnose(stderr, what="git clone")
    assert line in error.message and error.hint and fix in error.hint


def test_other_failures_show_the_last_fatal_else_error_else_last_line() -> None:
    assert "fatal: second" in diagnose("fatal: first\nnoise\nfatal: second\nerror: e", what="x").message
    assert "error: only" in diagnose("warning: w\nerror: only\ntrailer", what="x").message
    assert "trailer" in diagnose("warning: w\ntrailer", what="x").message


def test_git_env_drops_foreign_git_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    from dokimi.source.git import git_env

    monkeypatch.setenv("GIT_DIR", "/somewhere")
    monkeypatch.setenv("GIT_ASKPASS", "/bin/true")
    env = git_env()
    assert "GIT_DIR" not in env and env["GIT_ASKPASS"] == "/bin/true" and env["GIT_TERMINAL_PROMPT"] == "0"
    assert os.environ["GIT_DIR"] == "/somewhere"
