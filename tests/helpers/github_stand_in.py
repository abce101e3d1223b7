"""A local stand-in for the parts of GitHub's REST API the action uses, on loopback, and the action's own step
run as GitHub runs it (tests/ci/). Nothing here reaches a real host.

The server keeps one repository's pull request comments and SARIF uploads, answers:

- ``GET  /repos/{repo}/pulls/{n}``: the pull request given to it;
- ``GET  /repos/{repo}/issues/{n}/comments``: the comments, 2 per page with a ``Link: rel="next"`` header;
- ``POST /repos/{repo}/issues/{n}/comments`` and ``PATCH /repos/{repo}/issues/comments/{id}``;
- ``POST /repos/{repo}/code-scanning/sarifs``: 202 with an id, the SARIF decoded and kept;

and records every request (method, path, the Authorization header, the JSON body). A request without the
token is answered 401; ``faults`` queues answers (a method, a path, a status) served once before the real
one; ``next_origin`` points the comments' ``next`` links at another server.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
import subprocess
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parents[2]
ACTION = ROOT / "action.yml"
PAGE = 2
BOT = "github-actions[bot]"


@dataclass
class StandIn:
    repo: str
    token: str
    pull: dict[str, Any] = field(default_factory=dict)
    comments: list[dict[str, Any]] = field(default_factory=list)
    sarifs: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    faults: list[tuple[str, str, int]] = field(default_factory=list)
    next_origin: str | None = None
    url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def comment_by(self, login: str, body: str) -> dict[str, Any]:
        comment = {"id": 1000 + len(self.comments), "user": {"login": login}, "body": body}
        comment["html_url"] = f"https://github.invalid/{self.repo}/pull/1#issuecomment-{comment['id']}"
        self.comments.append(comment)
        return comment


def answer_json(
    handler: BaseHTTPRequestHandler, code: int, data: Any, headers: Mapping[str, str] | None = None
) -> None:
    """Answer a request with ``data`` as JSON (and ``headers``)."""
    body = json.dumps(data).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    for key, value in (headers or {}).items():
        handler.send_header(key, value)
    handler.end_headers()
    handler.wfile.write(body)


def _handler(state: StandIn) -> type[BaseHTTPRequestHandler]:
    prefix = f"/repos/{state.repo}"

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _answer(self, code: int, data: Any, headers: Mapping[str, str] | None = None) -> None:
            answer_json(self, code, data, headers)

        def _handle(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            payload = json.loads(raw) if raw else None
            path, _, query = self.path.partition("?")
            with state.lock:
                auth = self.headers.get("Authorization")
                state.requests.append(
                    {"method": method, "path": path, "query": query, "auth": auth, "json": payload}
                )
                if self.headers.get("Authorization") != f"Bearer {state.token}":
                    self._answer(401, {"message": "Bad credentials"})
                    return
                if not path.startswith(prefix):
                    self._answer(404, {"message": "Not Found"})
                    return
                fault = next((f for f in state.faults if f[:2] == (method, path[len(prefix) :])), None)
                if fault is not None:
                    state.faults.remove(fault)
                    self._answer(fault[2], {"message": "a fault of the stand-in"})
                    return
                self._route(method, path[len(prefix) :], query, payload)

        def _route(self, method: str, path: str, query: str, payload: Any) -> None:
            if method == "GET" and re.fullmatch(r"/pulls/\d+", path):
                self._answer(200, state.pull)
            elif method == "GET" and re.fullmatch(r"/issues/\d+/comments", path):
                page = int(dict(p.split("=", 1) for p in query.split("&") if "=" in p).get("page", "1"))
                items = state.comments[(page - 1) * PAGE : page * PAGE]
                more = page * PAGE < len(state.comments)
                target = f"{state.next_origin or state.url}{prefix}{path}?per_page=100&page={page + 1}"
                link = {"Link": f'<{target}>; rel="next"'}
                self._answer(200, items, link if more else None)
            elif method == "POST" and re.fullmatch(r"/issues/\d+/comments", path):
                self._answer(201, state.comment_by(BOT, payload["body"]))
            elif method == "PATCH" and (m := re.fullmatch(r"/issues/comments/(\d+)", path)):
                found = [c for c in state.comments if c["id"] == int(m.group(1))]
                if not found:
                    self._answer(404, {"message": "Not Found"})
                    return
                found[0]["body"] = payload["body"]
                self._answer(200, found[0])
            elif method == "POST" and path == "/code-scanning/sarifs":
                sarif = json.loads(gzip.decompress(base64.b64decode(payload["sarif"])))
                state.sarifs.append({**payload, "sarif": sarif})
                ident = f"sarif-{len(state.sarifs)}"
                self._answer(202, {"id": ident, "url": f"{state.url}{prefix}/code-scanning/sarifs/{ident}"})
            else:
                self._answer(404, {"message": "Not Found"})

        def do_GET(self) -> None:
            self._handle("GET")

        def do_POST(self) -> None:
            self._handle("POST")

        def do_PATCH(self) -> None:
            self._handle("PATCH")

    return Handler


@contextmanager
def stand_in(repo: str, token: str) -> Iterator[StandIn]:
    state = StandIn(repo, token)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def action() -> dict[str, Any]:
    return YAML(typ="safe").load(ACTION.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def action_step() -> dict[str, Any]:
    (step,) = [s for s in action()["runs"]["steps"] if s.get("id") == "dokimi"]
    return step  # type: ignore[no-any-return]


_INPUT = re.compile(r"\$\{\{\s*inputs\.([A-Za-z0-9_-]+)\s*\}\}")


def run_action_step(
    inputs: Mapping[str, str], github: Mapping[str, str], *, timeout: float = 1800
) -> subprocess.CompletedProcess[str]:
    """The action's ``dokimi`` step as GitHub runs it: its ``env`` with each ``${{ inputs.X }}`` replaced by
    ``inputs`` (else the input's default), GitHub's variables from ``github``, then its ``run`` line in bash.
    The steps before it (Python, installing dokimi) are this checkout: dokimi runs from its sources."""
    declared = action()["inputs"]
    unknown = sorted(set(inputs) - set(declared))
    assert not unknown, f"not inputs of action.yml: {unknown}"

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in inputs:
            return inputs[name]
        default = str(declared[name].get("default", ""))
        assert "${{" not in default, f"input {name} has no value in the test and a default from GitHub"
        return default

    step = action_step()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "DOKIMI_CI_"))}
    env |= {"PYTHONPATH": str(ROOT / "src"), **github}
    env |= {key: _INPUT.sub(value, str(raw)) for key, raw in step.get("env", {}).items()}
    return subprocess.run(
        ["bash", "-c", step["run"]], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def read_outputs(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
