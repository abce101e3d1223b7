"""Per-request overhead of the model gateway: a streamed Messages request through the gateway against the
same request sent directly to the same scripted model server, in the same run.

The gateway does what it does in a sealed run: finds the cell's dummy key, swaps it, forwards, streams the
answer back, reads its usage, prices it and appends the request and the response to the cell's
gateway.jsonl. Requests alternate between the two paths (each on a new connection, as a harness's are), so
drift on a shared machine hits both. Target: gateway <= 1.2 x direct + 2 ms (median). Prints the figures;
asserts nothing.

    python bench/bench_gateway.py [--requests 300] [--kb 60]
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from dokimi.gateway import ModelGateway
from dokimi.support.mockmodel import MockModelServer


def request_body(kb: int) -> bytes:
    """A main-loop turn of about ``kb`` KB (Claude Code's carry its system prompt and tool schemas)."""
    filler = "You are a coding agent. Follow the repository's guidance. " * (kb * 1024 // 58)
    body = {
        "model": "claude-haiku-4-5",
        "max_tokens": 4096,
        "stream": True,
        "system": [{"type": "text", "text": "You are Claude Code. " + filler}],
        "tools": [{"name": "Bash", "description": "run a command", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "fix the failing test"}],
    }
    return json.dumps(body).encode()


def one(url: str, body: bytes, key: str) -> float:
    parts = urlsplit(url)
    start = time.perf_counter()
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.request("POST", "/v1/messages", body, {"content-type": "application/json", "x-api-key": key})
        resp = conn.getresponse()
        data = resp.read()
        assert resp.status == 200 and b"message_stop" in data, (resp.status, data[:200])
    finally:
        conn.close()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--kb", type=int, default=60)
    args = parser.parse_args()
    body = request_body(args.kb)
    with tempfile.TemporaryDirectory() as tmp, MockModelServer([]) as vendor:
        gateway = ModelGateway(
            vendor.url, credential_vars=["ANTHROPIC_API_KEY"], credentials={"ANTHROPIC_API_KEY": "sk-real"}
        )
        with gateway:
            cell = gateway.open_cell("bench", Path(tmp) / "gateway.jsonl")
            dummy = cell.env["ANTHROPIC_API_KEY"]
            for _ in range(20):  # warm up both paths
                one(vendor.url, body, "sk-real")
                one(gateway.url, body, dummy)
            direct: list[float] = []
            through: list[float] = []
            for i in range(args.requests):
                if i % 2:
                    direct.append(one(vendor.url, body, "sk-real"))
                    through.append(one(gateway.url, body, dummy))
                else:
                    through.append(one(gateway.url, body, dummy))
                    direct.append(one(vendor.url, body, "sk-real"))
            usage = gateway.close_cell(cell)
    d, g = statistics.median(direct), statistics.median(through)
    target = 1.2 * d + 0.002
    print(f"requests per path: {args.requests}, request body {len(body) / 1024:.0f} KB, streamed answer")
    print(f"direct   median {d * 1000:7.2f} ms   mean {statistics.mean(direct) * 1000:7.2f} ms")
    print(f"gateway  median {g * 1000:7.2f} ms   mean {statistics.mean(through) * 1000:7.2f} ms")
    print(f"ratio {g / d:.2f}x, overhead {(g - d) * 1000:.2f} ms per request")
    print(f"target 1.2 x direct + 2 ms = {target * 1000:.2f} ms: {'met' if g <= target else 'NOT met'}")
    print(f"gateway account: {usage.turns} model responses, ${usage.cost_usd:.4f} at the price table's rates")


if __name__ == "__main__":
    main()
