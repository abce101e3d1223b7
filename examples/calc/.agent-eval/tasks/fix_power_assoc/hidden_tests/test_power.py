import pytest

from calc import evaluate, parse
from calc.parser import Binary, Name, Num, Unary


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2 ^ 3 ^ 2", 512),
        ("2^2^3", 256),
        ("2 ^ -1", 0.5),
        ("-2 ^ 2", -4),
        ("(2 ^ 3) ^ 2", 64),
        ("3 * 2 ^ 2", 12),
    ],
)
def test_power_is_right_associative_and_binds_tightest(text, value):
    assert evaluate(text) == value


def test_the_tree_of_a_chained_power_nests_to_the_right():
    assert parse("2^3^2") == Binary("^", Num(2), Binary("^", Num(3), Num(2), 4), 2)


def test_a_unary_minus_exponent_is_parsed():
    assert parse("2^-x").right == Unary("-", Name("x", 4))
