"""Errors raised by calc. Every error carries the column it refers to."""


class CalcError(Exception):
    """Base class of every error calc raises."""

    def __init__(self, message: str, column: int | None = None) -> None:
        self.message = message
        self.column = column
        where = f" at column {column}" if column is not None else ""
        super().__init__(f"{message}{where}")


class ParseError(CalcError):
    """The text is not a well-formed expression."""


class EvalError(CalcError):
    """The expression is well-formed but has no value (unknown name, division by zero)."""
