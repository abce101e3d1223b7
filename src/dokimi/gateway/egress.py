"""The egress allow-list proxy: the only way from an agent's container to a host its task names.

One per batch, on the batch network's bridge address, beside the model gateway. Each cell is opened on it
with its allow-list (the task's ``egress`` hosts) and gets a proxy URL with a per-cell user and token
(``http://cell:TOKEN@ADDRESS:PORT``), which the container receives as ``HTTPS_PROXY``/``HTTP_PROXY`` (and
their lower-case forms): curl, pip, npm, git and Python's urllib all use it.

What it does, one function per rule:

* :func:`host_allowed`: a target ``host:port`` is allowed when an entry matches its name (``*`` is one whole
  label) and its port (an entry without a port allows 443, and 80 for plain HTTP);
* :func:`address_refusal`: an allowed name that resolves to a loopback, private, link-local or otherwise
  non-public address is still refused, unless the batch maps that name explicitly (``resolve``): a public
  name must not become a way into the host or its networks;
* ``CONNECT host:port`` (HTTPS and anything else tunnelled) is answered ``200`` and piped both ways when
  allowed; a plain ``GET http://host/...`` is forwarded when allowed; everything else is ``403``;
* a request without a known cell token is refused (``407``); it is logged to the batch's unattributed log;
* every attempt, allowed or refused, becomes one line of the cell's ``egress.jsonl``: the target, the
  verdict, the reason, and for a tunnel the bytes each way.

Why our own and not tinyproxy or squid (both maintained, both in Debian): the allow-list and the log are per
cell, while one proxy serves a whole batch. tinyproxy's filter and squid's ACLs are per process; per-cell
lists would mean one process (and one port, and one host firewall opening) per cell, and a log parsed back
out of their text formats. dokimi installs with pip, so a proxy that is Python's standard library keeps the
install as it is. What we give up (HTTP/2, caching, performance under load) a package download does not
need. The code is small enough to read in one sitting; see docs/network.md.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import re
import secrets
import select
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self
from urllib.parse import urlsplit

from dokimi.gateway.capture_proxy import (
    CLIENT_TIMEOUT_S,
    REFUSAL_LOG_BYTES,
    BoundedRequestHandler,
    ServedHTTP,
    parser_refusal,
    unlogged,
)
from dokimi.rundir import EGRESS_JSONL
from dokimi.schemas.gateway import EgressRecord

__all__ = [
    "EGRESS_LOG",
    "EgressCell",
    "EgressProxy",
    "address_refusal",
    "host_allowed",
    "body_length",
    "forward_body",
    "parse_target",
    "pipe",
    "split_absolute_url",
    "valid_host",
]

EGRESS_LOG = EGRESS_JSONL
ANY_HOST = "*"
"""The allow-list of a manifest with ``image.network: public``: any public host (still logged; a name that
resolves to a non-public address is still refused)."""
CONNECT_TIMEOUT_S = 15.0
IDLE_TIMEOUT_S = 300.0
CHUNK = 64 * 1024
MAX_BODY_BYTES = 64 * 1024 * 1024
"""The largest plain-HTTP request body forwarded (413 beyond). Bodies, like tunnels, are streamed a
:data:`CHUNK` at a time, never held whole."""
LOGGED_TARGET_CHARS = 2048
"""The most of a request's target that egress.jsonl keeps (a request line can be 64 KiB)."""
_TOKEN = re.compile(r"^[0-9a-f]{32}$")
_PORT = re.compile(r"[0-9]{1,5}")
_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)")


def parse_target(target: str, default_port: int) -> tuple[str, int] | None:
    """``host:port`` (or ``[v6]:port``, or ``host`` alone) -> (lower-case host, port); None when it is not
    one: a port that is not 1 to 65535 in ASCII digits, or a host that is not a valid name
    (:func:`valid_host`)."""
    host, port = target, str(default_port)
    if target.startswith("["):
        end = target.find("]")
        if end == -1:
            return None
        host, rest = target[1:end], target[end + 1 :]
        if rest:
            if not rest.startswith(":"):
                return None
            port = rest[1:]
        if not _is_ip(host, version=6):
            return None
    elif target.count(":") == 1:
        host, port = target.split(":")
    if not _PORT.fullmatch(port) or not 0 < int(port) < 65536:
        return None
    host = host.lower().rstrip(".")
    return (host, int(port)) if valid_host(host) else None


def valid_host(host: str) -> bool:
    """An IP address, or a DNS name in ASCII: labels of 1 to 63 letters, digits, ``-`` and ``_`` (never
    starting or ending with ``-``), 253 characters at most. Anything else (a NUL, a space, a raw non-ASCII
    name, a label too long for DNS) is refused before it reaches the resolver."""
    if _is_ip(host):
        return True
    return (
        0 < len(host) <= 253 and host.isascii() and all(_LABEL.fullmatch(label) for label in host.split("."))
    )


def _is_ip(text: str, *, version: int | None = None) -> bool:
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return False
    return version is None or ip.version == version


def split_absolute_url(url: str) -> tuple[str, int, str, str] | None:
    """``http://host[:port]/path?query`` -> (host, port, host as sent, path and query); None for anything
    else (another scheme, no host, a port that is not a port, a malformed IPv6 literal)."""
    try:
        parts = urlsplit(url)
    except ValueError:  # "http://[::1/": urlsplit refuses it
        return None
    if parts.scheme != "http":
        return None
    authority = parts.netloc.rpartition("@")[2]
    parsed = parse_target(authority, 80)
    if parsed is None:
        return None
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parsed[0], parsed[1], authority, target


def body_length(headers: Message) -> int | str:
    """The length of a plain-HTTP request's body, or why it is refused: a ``Content-Length`` that is not one
    number (absent is 0), more than :data:`MAX_BODY_BYTES`, or a ``Transfer-Encoding`` (a chunked body is not
    forwarded: the proxy forwards only what it can count)."""
    if headers.get("Transfer-Encoding") is not None:
        return "a request body with Transfer-Encoding is not forwarded; send it with Content-Length"
    values = {value.strip() for value in headers.get_all("Content-Length") or []}
    if not values:
        return 0
    if len(values) > 1:
        return "more than one Content-Length"
    (value,) = values
    if not re.fullmatch(r"[0-9]{1,20}", value):
        return f"Content-Length {value[:40]!r} is not a number of bytes"
    if int(value) > MAX_BODY_BYTES:
        return f"request body over {MAX_BODY_BYTES} bytes"
    return int(value)


def forward_body(client: Any, upstream: socket.socket, length: int) -> tuple[int, str] | None:
    """Copy a plain-HTTP request's body of ``length`` bytes from the client's reader to the upstream, one
    :data:`CHUNK` at a time (the proxy never holds a body whole); (400, why) when the client's body ends, or
    it stays silent past the client timeout, before ``length`` bytes. An OSError of the upstream is raised."""
    left = length
    while left > 0:
        try:
            data = client.read(min(CHUNK, left))
        except OSError:  # the client went silent (its timeout) or away
            data = b""
        if not data:
            return 400, f"the request body ended after {length - left} of its {length} bytes"
        upstream.sendall(data)
        left -= len(data)
    return None


def _entry_matches_name(entry_name: str, host: str) -> bool:
    want, got = entry_name.lower().split("."), host.split(".")
    return len(want) == len(got) and all(w == "*" or w == g for w, g in zip(want, got, strict=True))


def host_allowed(allow: Sequence[str], host: str, port: int, *, plain_http: bool = False) -> str | None:
    """The allow-list entry that admits ``host:port``, or None. An entry without a port admits 443 (and 80
    for a plain-HTTP request); ``*`` stands for one whole label."""
    for entry in allow:
        if entry == ANY_HOST:
            return entry
        name, sep, entry_port = entry.partition(":")
        ports = {int(entry_port)} if sep else ({443, 80} if plain_http else {443})
        if port in ports and _entry_matches_name(name, host):
            return entry
    return None


def address_refusal(address: str) -> str | None:
    """Why a resolved address may not be reached through the proxy (not a public unicast address)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return f"{address} is not an IP address"
    if not ip.is_global:
        return f"resolves to {address}, which is not a public address"
    return None


@dataclass
class EgressCell:
    """One cell on the proxy: its allow-list, its token and its log."""

    name: str
    allow: tuple[str, ...]
    log_path: Path
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    opened: float = field(default_factory=time.monotonic)
    attempts: int = 0
    refused: int = 0
    in_flight: int = 0
    """Connections of this cell still being served (their line is written when they end)."""
    logged_bytes: int = 0
    _file: IO[str] | None = None

    def write(self, record: Mapping[str, Any]) -> None:
        """One line of the cell's log, while it holds less than :data:`REFUSAL_LOG_BYTES` (an agent's loop of
        attempts must not fill the host's disk; past it, ``attempts`` and ``refused`` still count them)."""
        if self.logged_bytes >= REFUSAL_LOG_BYTES:
            return
        if self._file is None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.log_path.open("a", encoding="utf-8")
        line = json.dumps(record, sort_keys=True) + "\n"
        self._file.write(line)
        self._file.flush()
        self.logged_bytes += len(line)


@dataclass(frozen=True)
class _Verdict:
    allowed: bool
    reason: str
    entry: str | None = None
    address: str | None = None


class EgressProxy:
    """The batch's egress allow-list proxy (see the module docstring).

    ``resolve`` maps a host name to the address to use for it (like curl's ``--resolve``); a mapped name
    skips the public-address rule, because the batch's owner chose that address.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        resolve: Mapping[str, str] | None = None,
        unattributed_path: Path | None = None,
        connect_timeout: float = CONNECT_TIMEOUT_S,
        idle_timeout: float = IDLE_TIMEOUT_S,
        client_timeout: float = CLIENT_TIMEOUT_S,
    ) -> None:
        self._host = host
        self._port = port
        self.resolve = {k.lower(): v for k, v in (resolve or {}).items()}
        self.unattributed_path = unattributed_path
        self.connect_timeout = connect_timeout
        self.idle_timeout = idle_timeout
        self.client_timeout = client_timeout
        """The longest a client may stay silent while the proxy reads its request (line, headers, body): an
        idle connection holds a thread no longer."""
        self.unlogged = 0
        """Refused attempts not attributed to a cell that were counted, not logged (the log was full)."""
        self._unattributed_bytes = 0
        self._cells: dict[str, EgressCell] = {}
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self._server: ServedHTTP | None = None

    # lifecycle

    def start(self) -> Self:
        if self._server is None:
            self._server = ServedHTTP(self._host, self._port, _make_handler(self), "egress-proxy")
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            for reason in server.turned_away():
                record = {"method": "-", "target": "-", "allowed": False, "status": 503, "reason": reason}
                self._log(None, record)
            with self._lock:
                if self.unlogged:
                    line = {"method": "-", "target": "-", "allowed": False, "status": None}
                    self._log_unattributed({**line, "reason": unlogged(self.unlogged)}, last=True)
        with self._lock:
            for cell in self._cells.values():
                if cell._file is not None:
                    cell._file.close()
                    cell._file = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the egress proxy is not running")
        return self._server.port

    # cells

    def open_cell(self, name: str, allow: Sequence[str], log_path: Path) -> EgressCell:
        cell = EgressCell(name, tuple(allow), log_path)
        with self._lock:
            self._cells[cell.token] = cell
        return cell

    def close_cell(self, cell: EgressCell, *, settle: float = 5.0) -> EgressCell:
        """Stop serving the cell; wait up to ``settle`` seconds for its connections still open (a client
        has its last byte a moment before the proxy logs the attempt), then close its log."""
        with self._settled:
            self._settled.wait_for(lambda: cell.in_flight == 0, timeout=settle)
            self._cells.pop(cell.token, None)
            if cell._file is not None:
                cell._file.close()
                cell._file = None
        return cell

    def proxy_url(self, cell: EgressCell, address: str | None = None) -> str:
        return f"http://cell:{cell.token}@{address or self._host}:{self.port}"

    def cell_env(self, cell: EgressCell, address: str | None = None) -> dict[str, str]:
        """The variables that send a container's tools through the proxy (the gateway's address excepted:
        the model is reached directly)."""
        url = self.proxy_url(cell, address)
        no_proxy = address or self._host
        return {
            "HTTPS_PROXY": url,
            "https_proxy": url,
            "HTTP_PROXY": url,
            "http_proxy": url,
            "ALL_PROXY": url,
            "NO_PROXY": no_proxy,
            "no_proxy": no_proxy,
        }

    # called from handler threads

    def _begin(self, cell: EgressCell, record: dict[str, Any]) -> None:
        """An attempt of ``cell`` starts: it is in flight, and its ``t`` is its arrival."""
        with self._lock:
            cell.in_flight += 1
            record["t"] = round(time.monotonic() - cell.opened, 4)

    def _end(self, cell: EgressCell) -> None:
        with self._settled:
            cell.in_flight -= 1
            self._settled.notify_all()

    def _cell_for(self, authorization: str | None) -> EgressCell | None:
        if not authorization or not authorization.lower().startswith("basic "):
            return None
        try:
            decoded = base64.b64decode(authorization[6:].strip(), validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return None
        token = decoded.partition(":")[2]
        if not _TOKEN.match(token):
            return None
        with self._lock:
            return self._cells.get(token)

    def _judge(self, cell: EgressCell, host: str, port: int, *, plain_http: bool) -> _Verdict:
        entry = host_allowed(cell.allow, host, port, plain_http=plain_http)
        if entry is None:
            listed = ", ".join(cell.allow) or "nothing"
            return _Verdict(False, f"{host}:{port} is not on this container's egress list ({listed})")
        if host in self.resolve:
            return _Verdict(True, "allowed", entry, self.resolve[host])
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as e:
            return _Verdict(False, f"{host} does not resolve ({e.strerror})", entry)
        addresses = [str(info[4][0]) for info in infos]
        for address in addresses:
            if address_refusal(address) is None:
                return _Verdict(True, "allowed", entry, address)
        return _Verdict(False, f"{host} {address_refusal(addresses[0])}", entry)

    def _log_unattributed(self, record: Mapping[str, Any], *, last: bool = False) -> None:
        """One line of the batch's refused log (the lock held), while it holds less than
        :data:`REFUSAL_LOG_BYTES`; past it the line is counted, for the ``last`` line to say."""
        if self.unattributed_path is None:
            return
        if not last and self._unattributed_bytes >= REFUSAL_LOG_BYTES:
            self.unlogged += 1
            return
        line = json.dumps(record, sort_keys=True) + "\n"
        self.unattributed_path.parent.mkdir(parents=True, exist_ok=True)
        with self.unattributed_path.open("a", encoding="utf-8") as f:
            f.write(line)
        self._unattributed_bytes += len(line)

    def _log(self, cell: EgressCell | None, record: dict[str, Any]) -> None:
        with self._lock:
            if cell is None:
                self._log_unattributed(record)
                return
            cell.attempts += 1
            cell.refused += 0 if record["allowed"] else 1
            record.setdefault("t", round(time.monotonic() - cell.opened, 3))
            if self._cells.get(cell.token) is cell:
                cell.write(EgressRecord.model_validate(record).model_dump(mode="json", exclude_none=True))


def _shown_target(target: str) -> str:
    """A request's target as logged: at most :data:`LOGGED_TARGET_CHARS` characters."""
    if len(target) <= LOGGED_TARGET_CHARS:
        return target
    return target[:LOGGED_TARGET_CHARS] + f"... ({len(target)} characters)"


def pipe(a: socket.socket, b: socket.socket, idle: float) -> tuple[int, int]:
    """Copy bytes both ways until either side closes or both are idle for ``idle`` seconds; returns
    (bytes a->b, bytes b->a)."""
    sent = {a: 0, b: 0}
    other = {a: b, b: a}
    open_ = [a, b]
    while open_:
        readable, _, _ = select.select(open_, [], [], idle)
        if not readable:
            break
        for sock in readable:
            try:
                data = sock.recv(CHUNK)
            except OSError:
                data = b""
            if not data:
                open_.remove(sock)
                try:
                    other[sock].shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                continue
            try:
                other[sock].sendall(data)
            except OSError:
                return sent[a], sent[b]
            sent[sock] += len(data)
    return sent[a], sent[b]


def _make_handler(proxy: EgressProxy) -> type[BoundedRequestHandler]:
    class Handler(BoundedRequestHandler):
        server_version = "dokimi-egress-proxy"
        timeout = proxy.client_timeout  # a request's head and body; a tunnel's silence is ``idle_timeout``

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
            """What the standard library refuses before a ``do_`` method runs (a malformed request line,
            too many or too long headers, an unknown method) is logged too: to the cell whose token the
            request carries when its headers were read, else to the batch's unattributed log."""
            headers = getattr(self, "headers", None)
            cell = proxy._cell_for(headers.get("Proxy-Authorization")) if headers is not None else None
            record: dict[str, Any] = {
                "method": getattr(self, "command", None) or "-",
                "target": _shown_target(getattr(self, "path", None) or str(getattr(self, "requestline", ""))),
                "allowed": False,
                "status": code,
                "reason": parser_refusal(code, message, explain),
            }
            proxy._log(cell, record)
            try:
                super().send_error(code, message, explain)
            except OSError:
                pass

        def _refuse(self, status: int, reason: str, record: dict[str, Any], cell: EgressCell | None) -> None:
            record.update(allowed=False, status=status, reason=reason)
            proxy._log(cell, record)
            body = (f"dokimi egress proxy: refused: {reason}\n").encode()
            self.close_connection = True
            try:
                self.send_response(status)
                if status == 407:
                    self.send_header("Proxy-Authenticate", 'Basic realm="dokimi"')
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)
            except OSError:  # the client is gone; the attempt is logged all the same
                pass

        def _serve(self, method: str, serve: Callable[[EgressCell, dict[str, Any]], None]) -> None:
            """One attempt: the cell from its token (407 without one), then ``serve``. Whatever the request
            holds, the attempt ends in an answer and one log line: an error of the proxy itself is a logged
            500, never a traceback on the batch's stderr."""
            record: dict[str, Any] = {"method": method, "target": _shown_target(self.path)}
            cell = proxy._cell_for(self.headers.get("Proxy-Authorization"))
            if cell is None:
                self._refuse(407, "no cell token (the proxy serves dokimi's cells only)", record, None)
                return
            proxy._begin(cell, record)
            try:
                serve(cell, record)
            except Exception as exc:  # a bug of the proxy: logged for this attempt, the proxy serves on
                if "status" not in record or record.get("allowed"):
                    reason = f"the egress proxy failed: {type(exc).__name__}: {exc}"
                    self._refuse(500, reason[:500], record, cell)
            finally:
                proxy._end(cell)

        def do_CONNECT(self) -> None:
            self._serve("CONNECT", self._connect)

        def _connect(self, cell: EgressCell, record: dict[str, Any]) -> None:
            parsed = parse_target(self.path, 443)
            if parsed is None:
                self._refuse(400, f"{self.path[:200]!r} is not host:port", record, cell)
                return
            host, port = parsed
            record.update(host=host, port=port)
            verdict = proxy._judge(cell, host, port, plain_http=False)
            if not verdict.allowed:
                self._refuse(403, verdict.reason, record, cell)
                return
            assert verdict.address is not None
            start = time.monotonic()
            try:
                upstream = socket.create_connection((verdict.address, port), timeout=proxy.connect_timeout)
            except OSError as e:
                self._refuse(502, f"{host}:{port} allowed, but the connection failed: {e}", record, cell)
                return
            record.update(allowed=True, status=200, reason="allowed", entry=verdict.entry)
            with upstream:
                try:
                    self.send_response(200, "Connection Established")
                    self.end_headers()
                    self.wfile.flush()
                except OSError:
                    up = down = 0
                else:
                    upstream.settimeout(None)
                    self.connection.settimeout(None)
                    up, down = pipe(self.connection, upstream, proxy.idle_timeout)
            record.update(bytes_up=up, bytes_down=down, duration_s=round(time.monotonic() - start, 3))
            proxy._log(cell, record)
            self.close_connection = True

        def _forward(self) -> None:
            """A plain-HTTP request in absolute form (``GET http://host/path``)."""
            self._serve(self.command, self._forward_for)

        def _forward_for(self, cell: EgressCell, record: dict[str, Any]) -> None:
            split = split_absolute_url(self.path)
            if split is None:
                reason = (
                    f"{self.path[:200]!r} is not an absolute http://host[:port]/ URL (a host name or "
                    "address, a port from 1 to 65535); only those and CONNECT go through this proxy"
                )
                self._refuse(400, reason, record, cell)
                return
            host, port, authority, target = split
            record.update(host=host, port=port)
            verdict = proxy._judge(cell, host, port, plain_http=True)
            if not verdict.allowed:
                self._refuse(403, verdict.reason, record, cell)
                return
            assert verdict.address is not None
            length = body_length(self.headers)
            if isinstance(length, str):
                self._refuse(413 if "over" in length else 400, length, record, cell)
                return
            lines = [f"{self.command} {target} HTTP/1.1", f"Host: {authority}"]
            for name, value in self.headers.items():
                if name.lower() in (
                    "host",
                    "proxy-authorization",
                    "proxy-connection",
                    "connection",
                    "keep-alive",
                ):
                    continue
                lines.append(f"{name}: {value}")
            lines.append("Connection: close")
            start = time.monotonic()
            try:
                upstream = socket.create_connection((verdict.address, port), timeout=proxy.connect_timeout)
            except OSError as e:
                self._refuse(502, f"{host}:{port} allowed, but the connection failed: {e}", record, cell)
                return
            try:
                upstream.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
                problem = forward_body(self.rfile, upstream, length)
            except OSError as e:
                problem = (502, f"{host}:{port} allowed, but sending the request failed: {e}")
            if problem is not None:
                upstream.close()
                self._refuse(*problem, record, cell)
                return
            record.update(allowed=True, status=200, reason="allowed", entry=verdict.entry)
            down = 0
            with upstream:
                upstream.settimeout(proxy.idle_timeout)
                while True:
                    try:
                        data = upstream.recv(CHUNK)
                    except OSError:
                        break
                    if not data:
                        break
                    try:
                        self.wfile.write(data)
                    except OSError:  # the client went away
                        break
                    down += len(data)
            self.close_connection = True
            record.update(bytes_up=length, bytes_down=down, duration_s=round(time.monotonic() - start, 3))
            proxy._log(cell, record)

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _forward

    return Handler
