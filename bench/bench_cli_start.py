"""Benchmark: CLI start (`dokimi --version`, `dokimi repo --help`) against `python3 -c pass`, same run.

Target: at most 10x. Each command is a fresh subprocess; best of N. With --importtime, prints the ten slowest
imports of each command (python -X importtime), to find what to make lazy.

    python bench/bench_cli_start.py [--repeat 15] [--importtime]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

COMMANDS = {
    "python3 -c pass": [sys.executable, "-c", "pass"],
    "dokimi --version": [sys.executable, "-m", "dokimi", "--version"],
    "dokimi repo --help": [sys.executable, "-m", "dokimi", "repo", "--help"],
    "dokimi repo validate --help": [sys.executable, "-m", "dokimi", "repo", "validate", "--help"],
}


def best(argv: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return min(times)


def slowest_imports(argv: list[str], n: int = 10) -> list[tuple[int, str]]:
    proc = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]], capture_output=True, text=True, check=True
    )
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _self_us, cumulative, name = line.removeprefix("import time:").split("|", 2)
        rows.append((int(cumulative), name.strip()))
    return sorted(rows, reverse=True)[:n]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--importtime", action="store_true")
    args = parser.parse_args()
    for argv in COMMANDS.values():  # warm the page cache and .pyc files
        subprocess.run(argv, capture_output=True, check=True)
    results = {name: best(argv, args.repeat) for name, argv in COMMANDS.items()}
    results["python3 -c pass"] = min(
        results["python3 -c pass"], best(COMMANDS["python3 -c pass"], args.repeat)
    )
    base = results["python3 -c pass"]
    for name, seconds in results.items():
        print(f"{name:30s} {seconds * 1000:7.1f} ms   ratio {seconds / base:5.2f}x")
    print("target: ratio <= 10x")
    if args.importtime:
        for name, argv in COMMANDS.items():
            if name.startswith("dokimi"):
                print(f"\nslowest imports (cumulative) of {name}:")
                for micros, module in slowest_imports(argv):
                    print(f"  {micros / 1000:7.1f} ms  {module}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
