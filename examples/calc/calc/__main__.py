"""Command line: ``python -m calc "1 + 2" [name=value ...]`` prints the value."""

from __future__ import annotations

import sys

from calc.errors import CalcError
from calc.evaluator import Number, evaluate


def main(argv: list[str]) -> int:
    if not argv:
        print('usage: python -m calc "EXPRESSION" [name=value ...]', file=sys.stderr)
        return 2
    env: dict[str, Number] = {}
    for binding in argv[1:]:
        name, _, value = binding.partition("=")
        env[name] = float(value) if "." in value else int(value)
    try:
        print(evaluate(argv[0], env))
    except CalcError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
