import pytest

from calc import ParseError, parse
from calc.parser import Binary, Call, Name, Num, Unary


def test_multiplication_binds_tighter_than_addition():
    assert parse("1 + 2 * 3") == Binary("+", Num(1), Binary("*", Num(2), Num(3), 7), 3)


def test_unary_minus_and_calls():
    assert parse("-f(x, 2)") == Unary("-", Call("f", (Name("x", 4), Num(2)), 2))


@pytest.mark.parametrize("text", ["", "1 +", "(1", "1 2", "f(1,)"])
def test_malformed_expressions_are_parse_errors(text):
    with pytest.raises(ParseError):
        parse(text)
