"""Recursive-descent parser from tokens to a small syntax tree.

Grammar, lowest precedence first:

    expr    := term (("+" | "-") term)*
    term    := unary (("*" | "/" | "%") unary)*
    unary   := "-" unary | power
    power   := atom ("^" unary)?          # right-associative: 2^3^2 == 2^(3^2)
    atom    := NUMBER | NAME | NAME "(" args ")" | "(" expr ")"
    args    := expr ("," expr)*
"""

from __future__ import annotations

from dataclasses import dataclass

from calc.errors import ParseError
from calc.tokens import END, NAME, NUMBER, OP, Token, tokenize


@dataclass(frozen=True)
class Num:
    value: int | float


@dataclass(frozen=True)
class Name:
    name: str
    column: int


@dataclass(frozen=True)
class Unary:
    op: str
    operand: Node


@dataclass(frozen=True)
class Binary:
    op: str
    left: Node
    right: Node
    column: int


@dataclass(frozen=True)
class Call:
    name: str
    args: tuple[Node, ...]
    column: int


Node = Num | Name | Unary | Binary | Call


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.pos = 0

    def peek(self) -> Token:
        return self.tokens[self.pos]

    def take(self) -> Token:
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def at_op(self, ops: str) -> bool:
        token = self.peek()
        return token.kind == OP and token.text in ops

    def expect(self, op: str) -> Token:
        token = self.take()
        if token.kind != OP or token.text != op:
            raise ParseError(f"expected {op!r}, found {token.text or 'end of input'!r}", token.column)
        return token

    def expr(self) -> Node:
        node = self.term()
        while self.at_op("+-"):
            op = self.take()
            node = Binary(op.text, node, self.term(), op.column)
        return node

    def term(self) -> Node:
        node = self.unary()
        while self.at_op("*/%"):
            op = self.take()
            node = Binary(op.text, node, self.unary(), op.column)
        return node

    def unary(self) -> Node:
        if self.at_op("-"):
            self.take()
            return Unary("-", self.unary())
        return self.power()

    def power(self) -> Node:
        base = self.atom()
        if self.at_op("^"):
            op = self.take()
            return Binary("^", base, self.unary(), op.column)
        return base

    def atom(self) -> Node:
        token = self.take()
        if token.kind == NUMBER:
            return Num(token.value)
        if token.kind == NAME:
            if self.at_op("("):
                self.take()
                args = [self.expr()]
                while self.at_op(","):
                    self.take()
                    args.append(self.expr())
                self.expect(")")
                return Call(token.text, tuple(args), token.column)
            return Name(token.text, token.column)
        if token.kind == OP and token.text == "(":
            node = self.expr()
            self.expect(")")
            return node
        found = "end of input" if token.kind == END else repr(token.text)
        raise ParseError(f"expected a number, a name or '(', found {found}", token.column)


def parse(text: str) -> Node:
    """Parse ``text`` into a syntax tree; raise ParseError if it is not one expression."""
    parser = _Parser(tokenize(text))
    node = parser.expr()
    token = parser.peek()
    if token.kind != END:
        raise ParseError(f"unexpected {token.text!r} after the expression", token.column)
    return node
