import math

import pytest

from calc import EvalError, evaluate


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("7 / 2", 3.5),
        ("8 / 2", 4),
        ("7 % 3", 1),
        ("2 ^ 10", 1024),
        ("-2 ^ 2", -4),
        ("abs(-3) + sqrt(16)", 7),
    ],
)
def test_arithmetic(text, value):
    assert evaluate(text) == value


def test_variables_shadow_constants():
    assert evaluate("x * pi", {"x": 2}) == 2 * math.pi
    assert evaluate("pi", {"pi": 3}) == 3


def test_an_unknown_name_is_an_eval_error():
    with pytest.raises(EvalError, match="unknown name 'y'"):
        evaluate("y + 1")


def test_an_unknown_function_is_an_eval_error():
    with pytest.raises(EvalError, match="unknown function"):
        evaluate("nope(1)")


def test_min_and_max_take_any_number_of_arguments():
    assert evaluate("min(3, 1, 2) + max(4, 5)") == 6
