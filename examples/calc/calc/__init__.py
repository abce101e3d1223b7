"""A small arithmetic expression calculator.

>>> from calc import evaluate
>>> evaluate("2 * (3 + 4)")
14
"""

from calc.errors import CalcError, EvalError, ParseError
from calc.evaluator import evaluate, evaluate_node
from calc.parser import parse
from calc.tokens import Token, tokenize

__all__ = [
    "CalcError",
    "EvalError",
    "ParseError",
    "Token",
    "evaluate",
    "evaluate_node",
    "parse",
    "tokenize",
]
