import pytest

from calc import ParseError, tokenize
from calc.tokens import END, NAME, NUMBER, OP


def kinds(text):
    return [(t.kind, t.text) for t in tokenize(text)]


def test_numbers_names_and_operators_are_split_with_whitespace_ignored():
    assert kinds("12 + x1*3.5") == [
        (NUMBER, "12"),
        (OP, "+"),
        (NAME, "x1"),
        (OP, "*"),
        (NUMBER, "3.5"),
        (END, ""),
    ]


def test_columns_count_from_one():
    assert [t.column for t in tokenize(" a+b")] == [2, 3, 4, 5]


def test_number_values_are_int_or_float():
    first, second, _ = tokenize("7 .25")
    assert first.value == 7 and isinstance(first.value, int)
    assert second.value == 0.25


def test_an_unknown_character_is_a_parse_error_with_its_column():
    with pytest.raises(ParseError) as info:
        tokenize("1 + $")
    assert info.value.column == 5
