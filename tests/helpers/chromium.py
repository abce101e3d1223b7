"""Headless Chromium driven over the DevTools protocol, for tests of the HTML pages dokimi writes.

The protocol runs over a pipe (``--remote-debugging-pipe``: Chromium reads commands on fd 3 and writes replies
on fd 4, each a JSON message ended by a NUL byte), so no port is opened and no WebSocket library is needed:
the standard library drives a real browser. A :class:`Page` records every console message, uncaught exception,
log entry and network request of the page it loaded, evaluates JavaScript in it (to click, sort, filter) and
takes screenshots.

    with Browser(chromium_bin, tmp_path) as browser:
        page = browser.open(path.as_uri())
        page.evaluate("document.title")
        page.screenshot(tmp_path / "page.png")
"""

from __future__ import annotations

import base64
import json
import os
import select
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

TIMEOUT_S = 60.0
#: Flags of every headless run: no sandbox (tests run as root), no GPU, no traffic of Chromium's own.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--no-first-run",
    "--no-default-browser-check",
    "--mute-audio",
    "--hide-scrollbars",
)


class DevToolsError(AssertionError):
    """A command the browser refused, or a reply that did not come in time."""


class Browser:
    """One headless Chromium process and its DevTools pipe."""

    def __init__(self, binary: Path, workdir: Path, *, width: int = 1280, height: int = 900) -> None:
        self.width, self.height = width, height
        to_child, self._to_browser = os.pipe()
        self._from_browser, from_child = os.pipe()

        def wire() -> None:  # in the child: the pipe ends on the fds the protocol names
            os.dup2(to_child, 3)
            os.dup2(from_child, 4)

        self.log = workdir / "chromium.log"
        self._log_file = self.log.open("wb")
        self._proc = subprocess.Popen(
            [
                str(binary),
                *FLAGS,
                "--remote-debugging-pipe",
                f"--user-data-dir={workdir / 'chromium-profile'}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            pass_fds=(3, 4),
            preexec_fn=wire,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._log_file,
        )
        os.close(to_child)
        os.close(from_child)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object | TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (DevToolsError, OSError):
            pass
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=30)
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        self._log_file.close()

    # --- the protocol ---------------------------------------------------------------------------------------

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DevToolsError("no reply from Chromium in time")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if ready:
                chunk = os.read(self._from_browser, 1 << 20)
                if not chunk:
                    raise DevToolsError(f"Chromium closed the pipe; see {self.log}")
                self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        decoded: dict[str, Any] = json.loads(message)
        return decoded

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> Any:
        """Send one command and wait for its reply; events that arrive meanwhile are kept."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise DevToolsError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self._events.append(reply)

    def wait_for(self, match: Callable[[dict[str, Any]], bool], timeout: float = TIMEOUT_S) -> dict[str, Any]:
        """The first event (kept or new) that ``match`` accepts."""
        for event in self._events:
            if match(event):
                return event
        deadline = time.monotonic() + timeout
        while True:
            event = self._read_message(deadline)
            if "method" in event:
                self._events.append(event)
                if match(event):
                    return event

    def events(self, session: str) -> list[dict[str, Any]]:
        return [e for e in self._events if e.get("sessionId") == session]

    # --- pages ----------------------------------------------------------------------------------------------

    def open(self, url: str, *, width: int | None = None, height: int | None = None) -> Page:
        """A new tab that loaded ``url`` (the load event fired), recording its console and requests."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=session)
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {
                "width": width or self.width,
                "height": height or self.height,
                "deviceScaleFactor": 1,
                "mobile": False,
            },
            session=session,
        )
        page = Page(self, session, url)
        page.navigate(url)
        return page


class Page:
    """One tab: what it logged and requested, JavaScript in it, screenshots of it."""

    def __init__(self, browser: Browser, session: str, url: str) -> None:
        self.browser, self.session, self.url = browser, session, url

    def navigate(self, url: str) -> None:
        before = len(self.browser.events(self.session))
        self.browser.send("Page.navigate", {"url": url}, session=self.session)
        self.url = url

        def loaded(event: dict[str, Any]) -> bool:
            if event.get("sessionId") != self.session or event.get("method") != "Page.loadEventFired":
                return False
            return self.browser.events(self.session).index(event) >= before

        self.browser.wait_for(loaded)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (a promise is awaited)."""
        reply = self.browser.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            session=self.session,
        )
        if "exceptionDetails" in reply:
            raise DevToolsError(f"{expression!r} threw: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def wait_until(self, condition: str, timeout: float = TIMEOUT_S) -> Any:
        """Poll a JavaScript expression until it is truthy (a page that renders after loading); its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(condition)
            if value:
                return value
            if time.monotonic() > deadline:
                raise DevToolsError(f"{condition!r} still false after {timeout:.0f} s")
            time.sleep(0.2)

    def console(self) -> list[str]:
        """Every console call, uncaught exception and browser log entry of the page so far (CSP violations
        and blocked requests are log entries)."""
        self.evaluate("0")  # a round trip: events sent before it are in
        found = []
        for event in self.browser.events(self.session):
            params = event.get("params", {})
            if event["method"] == "Runtime.consoleAPICalled":
                found.append(f"console.{params.get('type')}: {params.get('args')}")
            elif event["method"] == "Runtime.exceptionThrown":
                found.append(f"exception: {params.get('exceptionDetails')}")
            elif event["method"] == "Log.entryAdded":
                entry = params.get("entry", {})
                found.append(f"log {entry.get('level')}: {entry.get('text')}")
        return found

    def requests(self) -> list[str]:
        """The URL of every request the page made so far, its own document's included."""
        self.evaluate("0")
        return [
            e["params"]["request"]["url"]
            for e in self.browser.events(self.session)
            if e["method"] == "Network.requestWillBeSent"
        ]

    def screenshot(self, path: Path, *, full_page: bool = False) -> Path:
        """A PNG of the viewport (or the whole page) written to ``path``."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
            metrics = self.browser.send("Page.getLayoutMetrics", session=self.session)
            size = metrics["cssContentSize"]
            params["clip"] = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        data = self.browser.send("Page.captureScreenshot", params, session=self.session)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path
