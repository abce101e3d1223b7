"""Evaluate a syntax tree, with variables and a few built-in functions."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from calc.errors import EvalError
from calc.parser import Call, Name, Node, Num, Unary, parse

Number = int | float

CONSTANTS: dict[str, Number] = {"pi": math.pi, "e": math.e}

FUNCTIONS: dict[str, Callable[..., Number]] = {
    "abs": abs,
    "sqrt": math.sqrt,
    "min": min,
    "max": max,
}


def _divide(left: Number, right: Number, op: str, column: int) -> Number:
    if right == 0:
        raise EvalError("division by zero", column)
    if op == "%":
        return left % right
    if isinstance(left, int) and isinstance(right, int) and left % right == 0:
        return left // right
    return left / right


def evaluate_node(node: Node, env: Mapping[str, Number]) -> Number:
    """Return the value of ``node``; names are looked up in ``env``, then in CONSTANTS."""
    if isinstance(node, Num):
        return node.value
    if isinstance(node, Name):
        if node.name in env:
            return env[node.name]
        if node.name in CONSTANTS:
            return CONSTANTS[node.name]
        raise EvalError(f"unknown name {node.name!r}", node.column)
    if isinstance(node, Unary):
        return -evaluate_node(node.operand, env)
    if isinstance(node, Call):
        function = FUNCTIONS.get(node.name)
        if function is None:
            raise EvalError(f"unknown function {node.name!r}", node.column)
        args = [evaluate_node(arg, env) for arg in node.args]
        try:
            return function(*args)
        except (TypeError, ValueError) as exc:
            raise EvalError(f"{node.name}: {exc}", node.column) from None
    left = evaluate_node(node.left, env)
    right = evaluate_node(node.right, env)
    if node.op == "+":
        return left + right
    if node.op == "-":
        return left - right
    if node.op == "*":
        return left * right
    if node.op in "/%":
        return _divide(left, right, node.op, node.column)
    if node.op == "^":
        return left**right
    raise EvalError(f"unknown operator {node.op!r}", node.column)


def evaluate(text: str, env: Mapping[str, Number] | None = None) -> Number:
    """Parse and evaluate ``text``; ``env`` maps variable names to numbers."""
    return evaluate_node(parse(text), env or {})
