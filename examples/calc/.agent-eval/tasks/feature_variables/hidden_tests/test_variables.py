import pytest

import calc
from calc import ParseError
from calc.evaluator import variables


def test_variables_is_exported_from_the_package():
    assert calc.variables is variables


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("x + y * x", ["x", "y"]),
        ("zeta - alpha", ["alpha", "zeta"]),
        ("1 + 2", []),
        ("-(a ^ b) % c", ["a", "b", "c"]),
    ],
)
def test_variables_are_sorted_without_duplicates(text, names):
    assert variables(text) == names


def test_function_names_are_not_variables_but_their_arguments_are():
    assert variables("sqrt(n) + abs(m)") == ["m", "n"]
    assert variables("f(g(k))") == ["k"]


def test_constants_are_not_variables():
    assert variables("2 * pi * r + e") == ["r"]


def test_variables_of_a_malformed_expression_is_a_parse_error():
    with pytest.raises(ParseError):
        variables("x +")
