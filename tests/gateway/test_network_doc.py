"""docs/network.md states the model gateway's and the egress proxy's bounds as the code enforces them: each
figure the doc gives is built here from the constant that enforces it, so a change of either fails here."""

from __future__ import annotations

import http.client
from pathlib import Path

from dokimi.gateway import capture_proxy, egress, model, usage
from dokimi.gateway.capture_proxy import (
    CLIENT_BODY_BYTES,
    CLIENT_TIMEOUT_S,
    HEADER_BYTES,
    HEADER_LINES_LIMIT,
    LINE_LIMIT,
    LOGGED_PATH_CHARS,
    MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_CLIENT,
    MAX_REQUEST_BYTES,
    MAX_TRAILERS,
    REFUSAL_LOG_BYTES,
    REQUEST_LINE_LIMIT,
    BoundedHTTPServer,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "network.md"


def test_the_network_doc_states_every_bound_of_the_gateway_and_the_proxy_as_enforced() -> None:
    text = " ".join(DOC.read_text().split())
    stated = [
        f"a request line of at most {REQUEST_LINE_LIMIT:,} bytes (414 beyond)",
        f"at most {HEADER_LINES_LIMIT} header lines, and {HEADER_BYTES:,} bytes of header lines in all (431",
        f"holds at most {MAX_CONNECTIONS_PER_CLIENT} connections at once, and the gateway (or the proxy) "
        f"{MAX_CONNECTIONS:,} in all; a connection past that is answered 503",
        f"up to {BoundedHTTPServer.request_queue_size} more wait in the listen backlog",
        f"a client silent for {CLIENT_TIMEOUT_S:.0f} seconds while its request is read",
        f"a `Content-Length` of at most {capture_proxy.LENGTH_DIGITS} digits",
        f"chunk sizes of at most {capture_proxy.CHUNK_SIZE_DIGITS} hexadecimal",
        f"each chunk-size and trailer line at most {LINE_LIMIT:,} bytes, at most {MAX_TRAILERS} trailer",
        f"up to {MAX_REQUEST_BYTES:,} bytes (32 MiB",
        f"decoded no further than {MAX_REQUEST_BYTES:,} bytes",
        f"at most {CLIENT_BODY_BYTES:,} bytes (64 MiB) of request bodies in memory at once",
        f"at most 64 levels deep, at most {usage.JSON_VALUES_LIMIT:,} values",
        f"an answer (not a stream) over {usage.JSON_BODY_LIMIT:,} bytes",
        f"each line of at most {usage.SSE_LINE_LIMIT:,} bytes",
        f"`path` and `reason` (their first {LOGGED_PATH_CHARS:,} characters",
        f"keep at most {REFUSAL_LOG_BYTES:,} bytes (64 MiB) of lines each",
        f"a connection past {MAX_CONNECTIONS_PER_CLIENT} of one address or {MAX_CONNECTIONS:,} in all",
        f"A body over 8 MiB ({model.RECORD_BODY_LIMIT:,} bytes)",
        f"first {model.HEAD_BYTES:,} bytes",
        f"A plain-HTTP body of at most {egress.MAX_BODY_BYTES:,} bytes (64 MiB; 413 beyond) is streamed "
        f"to the host {egress.CHUNK:,} bytes at a time",
        f"closed after {egress.IDLE_TIMEOUT_S:.0f} seconds in which neither side sent anything",
    ]
    missing = [figure for figure in stated if figure not in text]
    assert not missing, missing
    assert model.CELL_RECORD_LIMIT == 512 * 1024 * 1024 and "passed 512 MiB" in text
    assert capture_proxy.MAX_REQUEST_BYTES == 32 * 1024 * 1024
    assert CLIENT_BODY_BYTES == egress.MAX_BODY_BYTES == REFUSAL_LOG_BYTES == 64 * 1024 * 1024


def test_the_header_bounds_the_doc_takes_from_the_standard_library_hold() -> None:
    assert http.client._MAXHEADERS == HEADER_LINES_LIMIT  # type: ignore[attr-defined]
    assert http.client._MAXLINE == REQUEST_LINE_LIMIT  # type: ignore[attr-defined]
