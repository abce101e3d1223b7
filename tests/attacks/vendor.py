"""A model API on host loopback that behaves like a vendor's where it matters to the model gateway's attacks.

- It answers ``POST /v1/messages`` (streamed or not) and ``POST /v1/messages/count_tokens`` for the real key
  only (``x-api-key`` or ``Authorization: Bearer``), and also serves the paths a vendor has besides them
  (``/v1/messages/batches``, ``/v1/files``, an admin path), so a gateway that forwards those is caught
  spending.
- Every error quotes every request header back in its message, the credential headers included, as an
  upstream that echoes what it was sent would.
- It compresses its answers with gzip when the request accepts gzip (``always_gzip``: whatever it accepts).
- It reports large usage: one input token per byte of the request body and every ``max_tokens`` as output,
  the most a vendor could bill for the request, and tallies what it billed (``billed_usd``) at the price
  table's rates (plus ``prices``, for a model the table lacks).
- A request whose text holds ``ECHO-KEY`` gets the real key back in a response header and in its answer,
  split across two writes of the stream.
- A request whose text holds ``DEEP-ANSWER-N`` gets an answer (each event of a stream) with a field nested
  N levels deep besides its usage, as an upstream echoing a hostile request would; one holding
  ``HUGE-USAGE-N`` gets an answer whose output token count has N digits (:func:`hostile`).
- ``delay_s``: seconds each answer waits, so concurrent requests overlap.
"""

from __future__ import annotations

import gzip
import json
import re
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from dokimi.gateway.prices import Price, Usage, price_for

KNOWN_BETAS = {"interleaved-thinking-2025-05-14", "context-management-2025-06-27"}
_HOSTILE = re.compile(rb"(DEEP-ANSWER|HUGE-USAGE)-([0-9]+)")


def hostile(raw: bytes, text: str) -> str:
    """``text`` (one JSON object: an answer, or an event of a stream) as the request ``raw`` asks it to be
    spoiled: a field nested N levels deep added (``DEEP-ANSWER-N``), or its output token count made N digits
    long (``HUGE-USAGE-N``); else as it is."""
    match = _HOSTILE.search(raw)
    if match is None:
        return text
    n = int(match.group(2))
    if match.group(1) == b"DEEP-ANSWER":
        return text[:-1] + ', "echo": ' + "[" * n + "]" * n + "}"
    return re.sub(r'"output_tokens": [0-9]+', '"output_tokens": ' + "9" * n, text)


class Vendor:
    def __init__(self, real_key: str, *, delay_s: float = 0.0, always_gzip: bool = False) -> None:
        self.real_key = real_key
        self.delay_s = delay_s
        self.always_gzip = always_gzip
        self.prices: dict[str, Price] = {}
        self.requests: list[dict[str, Any]] = []
        self.billed: list[float] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def billed_usd(self) -> float:
        with self._lock:
            return sum(self.billed)

    def __enter__(self) -> Vendor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def bill(self, model: str, usage: Usage) -> float:
        row = self.prices.get(model) or (price_for(model) or (None, None))[1]
        assert row is not None, f"the vendor has no price for {model}"
        cost = (usage.input * row.input + usage.output * row.output) / 1_000_000
        with self._lock:
            self.billed.append(cost)
        return cost

    def seen(self, request: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(request)


def _handler(vendor: Vendor) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _gzip(self) -> bool:
            return vendor.always_gzip or "gzip" in (self.headers.get("Accept-Encoding") or "")

        def _send(self, status: int, payload: Any, extra: dict[str, str] | None = None) -> None:
            data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            if self._gzip():
                data = gzip.compress(data)
                self.send_header("Content-Encoding", "gzip")
            for name, value in (extra or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, kind: str, message: str) -> None:
            quoted = json.dumps(dict(self.headers.items()))
            self._send(
                status, {"type": "error", "error": {"type": kind, "message": f"{message}; headers: {quoted}"}}
            )

        def _authorised(self) -> bool:
            key = self.headers.get("x-api-key") or ""
            bearer = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
            return vendor.real_key in (key, bearer)

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length > 0 else b""
            try:
                model = json.loads(raw).get("model") if raw else None
            except (ValueError, AttributeError):
                model = None
            vendor.seen(
                {
                    "method": self.command,
                    "path": self.path,
                    "headers": dict(self.headers.items()),
                    "model": model,
                }
            )
            if not self._authorised():
                self._error(401, "authentication_error", "invalid x-api-key")
                return
            betas = {b.strip() for b in (self.headers.get("anthropic-beta") or "").split(",") if b.strip()}
            if betas - KNOWN_BETAS:
                self._error(
                    400,
                    "invalid_request_error",
                    f"unexpected value(s) `{','.join(sorted(betas - KNOWN_BETAS))}` for the `anthropic-beta` "
                    "header",
                )
                return
            route = self.path.split("?")[0]
            if self.command == "POST" and route == "/v1/messages/count_tokens":
                self._send(200, {"input_tokens": len(raw)})
            elif self.command == "POST" and route == "/v1/messages/batches":
                self._send(
                    200, {"id": "msgbatch_1", "type": "message_batch", "processing_status": "in_progress"}
                )
            elif self.command == "GET" and route in ("/v1/files", "/v1/models", "/v1/organizations/api_keys"):
                self._send(200, {"data": [], "has_more": False})
            elif self.command == "POST" and route == "/v1/messages":
                self._message(raw)
            else:
                self._error(404, "not_found_error", f"no route {self.command} {route}")

        do_GET = do_POST = do_DELETE = _serve

        def _message(self, raw: bytes) -> None:
            try:
                body = json.loads(raw)
            except ValueError:
                self._error(400, "invalid_request_error", "body is not JSON")
                return
            model, max_tokens = str(body.get("model")), int(body.get("max_tokens") or 0)
            if vendor.prices.get(model) is None and price_for(model) is None:
                self._error(404, "not_found_error", f"model: {model}")
                return
            time.sleep(vendor.delay_s)
            usage = Usage(input=len(raw), output=max_tokens)
            vendor.bill(model, usage)
            echo = b"ECHO-KEY" in raw
            text = f"the key is {vendor.real_key}" if echo else "ok"
            extra = {"x-request-echo": vendor.real_key} if echo else {}
            if not body.get("stream"):
                self._send(200, hostile(raw, json.dumps({
                    "id": "msg_1", "type": "message", "role": "assistant", "model": model,
                    "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                    "usage": {"input_tokens": usage.input, "output_tokens": usage.output,
                              "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
                })), extra)  # fmt: skip
                return
            self._stream(raw, model, usage, text, extra)

        def _stream(self, raw: bytes, model: str, usage: Usage, text: str, extra: dict[str, str]) -> None:
            usage_start = {"input_tokens": usage.input, "output_tokens": 1, "cache_creation_input_tokens": 0,
                           "cache_read_input_tokens": 0}  # fmt: skip
            events = [
                ("message_start", {"type": "message_start", "message": {
                    "id": "msg_1", "type": "message", "role": "assistant", "model": model, "content": [],
                    "usage": usage_start}}),
                ("content_block_start", {"type": "content_block_start", "index": 0,
                                         "content_block": {"type": "text", "text": ""}}),
                ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                         "delta": {"type": "text_delta", "text": text}}),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                                   "usage": {"output_tokens": usage.output}}),
                ("message_stop", {"type": "message_stop"}),
            ]  # fmt: skip
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            compress = self._gzip()
            if compress:
                self.send_header("Content-Encoding", "gzip")
            for name, value in extra.items():
                self.send_header(name, value)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            packer = zlib.compressobj(wbits=16 + zlib.MAX_WBITS) if compress else None
            key = vendor.real_key.encode()
            for name, event in events:
                data = f"event: {name}\ndata: {hostile(raw, json.dumps(event))}\n\n".encode()
                pieces = [data]
                if key in data:  # the key split across two writes (two chunks on the wire)
                    cut = data.index(key) + len(key) // 2
                    pieces = [data[:cut], data[cut:]]
                for piece in pieces:
                    if packer is not None:
                        piece = packer.compress(piece) + packer.flush(zlib.Z_SYNC_FLUSH)
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.flush()
                    time.sleep(0.05)
            if packer is not None:
                tail = packer.flush()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(tail), tail))
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return Handler
