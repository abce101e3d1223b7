import pytest

from calc import EvalError, evaluate


@pytest.mark.parametrize(("text", "column"), [("2.0 ^ 2000", 5), ("1 + 10.0^400", 9)])
def test_a_power_too_large_is_an_eval_error_at_the_operator(text, column):
    with pytest.raises(EvalError) as caught:
        evaluate(text)
    assert caught.value.column == column


def test_zero_to_a_negative_power_is_an_eval_error_at_the_operator():
    with pytest.raises(EvalError) as caught:
        evaluate("0 ^ -1")
    assert caught.value.column == 3


@pytest.mark.parametrize(("text", "value"), [("10 ^ 40", 10**40), ("2 ^ -1", 0.5), ("2 ^ 0.5", 2**0.5)])
def test_powers_python_computes_keep_their_value(text, value):
    assert evaluate(text) == value
