#!/usr/bin/env python3
"""Dry-run launcher, run INSIDE the agent's container: the scripted model server on the container's loopback,
then the real harness pointed at it.

    python3 /eval/support/dryrun_agent.py --script FILE --endpoint-env NAME [--port N] -- ARGV...

1. starts ``python3 <this dir>/mockmodel.py --script FILE --port N`` (default 0, any free port) and reads the
   URL it prints; a fixed port lets the host write the URL into a harness's config file beforehand (Codex);
2. runs the harness argv with ``<endpoint-env>=<url>`` added to its environment, stdout and stderr inherited
   (so the harness's trace is the container's stdout, exactly as in a paid run);
3. on SIGTERM/SIGINT passes the signal to the harness (which stops its own commands) and waits for it;
4. stops the server and exits with the harness's exit status (128+N when a signal N ended it).

The container keeps ``--network none``: the server listens on 127.0.0.1 of the container itself. Standard
library only, and no dokimi import: this file is copied into the read-only support directory.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import FrameType

SERVER_START_TIMEOUT_S = 30.0


def start_server(script: str, capture: str | None, port: int = 0) -> tuple[subprocess.Popen[bytes], str]:
    """The scripted server as a child; returns it and the base URL it printed on its first stdout line."""
    server_py = Path(__file__).resolve().parent / "mockmodel.py"
    argv = [sys.executable, str(server_py), "--script", script, "--port", str(port)]
    if capture:
        argv += ["--capture", capture]
    server = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    assert server.stdout is not None
    line = server.stdout.readline().decode("utf-8", "replace").strip()
    if not line.startswith("http"):
        server.kill()
        server.wait()
        raise SystemExit(f"dryrun_agent: the scripted model server did not start (printed {line!r})")
    return server, line


def main(argv: list[str]) -> int:
    if "--" not in argv:
        print("dryrun_agent: usage: --script FILE --endpoint-env NAME -- HARNESS ARGV...", file=sys.stderr)
        return 2
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="dryrun_agent.py")
    parser.add_argument("--script", required=True)
    parser.add_argument("--endpoint-env", required=True)
    parser.add_argument("--capture")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv[:split])
    harness = argv[split + 1 :]
    if not harness:
        print("dryrun_agent: no harness argv after --", file=sys.stderr)
        return 2
    server, url = start_server(args.script, args.capture, args.port)
    env = dict(os.environ)
    env[args.endpoint_env] = url
    try:
        child = subprocess.Popen(harness, env=env)
    except OSError as exc:
        server.terminate()
        server.wait()
        print(f"dryrun_agent: cannot start {harness[0]}: {exc}", file=sys.stderr)
        return 127

    def forward(signum: int, frame: FrameType | None) -> None:
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    rc = child.wait()
    server.terminate()
    try:
        server.wait(timeout=5)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    return 128 - rc if rc < 0 else rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
