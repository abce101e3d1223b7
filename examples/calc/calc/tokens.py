"""Split expression text into tokens."""

from __future__ import annotations

from dataclasses import dataclass

from calc.errors import ParseError

OPERATORS = "+-*/%^(),"

NUMBER = "number"
NAME = "name"
OP = "op"
END = "end"


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    column: int

    @property
    def value(self) -> int | float:
        """The numeric value of a number token."""
        if "." in self.text:
            return float(self.text)
        return int(self.text)


def tokenize(text: str) -> list[Token]:
    """Return the tokens of ``text``, ending with one END token.

    Columns count from 1. Whitespace separates tokens and is otherwise ignored.
    """
    tokens: list[Token] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        start = i
        if ch.isdigit() or (ch == "." and i + 1 < len(text) and text[i + 1].isdigit()):
            seen_dot = False
            while i < len(text) and (text[i].isdigit() or (text[i] == "." and not seen_dot)):
                seen_dot = seen_dot or text[i] == "."
                i += 1
            tokens.append(Token(NUMBER, text[start:i], start + 1))
        elif ch.isalpha() or ch == "_":
            while i < len(text) and (text[i].isalnum() or text[i] == "_"):
                i += 1
            tokens.append(Token(NAME, text[start:i], start + 1))
        elif ch in OPERATORS:
            tokens.append(Token(OP, ch, start + 1))
            i += 1
        else:
            raise ParseError(f"unexpected character {ch!r}", start + 1)
    tokens.append(Token(END, "", len(text) + 1))
    return tokens
