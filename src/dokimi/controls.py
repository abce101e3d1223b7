"""Control characters in text dokimi did not write: a commit message, a file name, a grader's reason, an
agent's output. A terminal obeys what such text holds: OSC 0 sets its title, OSC 52 writes the clipboard, CSI
moves the cursor, clears the screen or hides what follows. Two rules, one function each:

* :func:`strip_controls`, for text dokimi keeps (a draft prompt in task.json): every escape sequence is
  dropped whole (CSI, OSC, DCS, SOS, PM and APC strings, two-character escapes, in their 7-bit and 8-bit
  forms), and then every other C0 control but new line and tab, DEL and every C1 control;
* :func:`escape_controls`, for text dokimi prints: the same characters (and a lone surrogate, what a name that
  is not UTF-8 decodes to) are shown as escapes (``\\x1b``, ``\\x9b``, ``\\xff``), so a reader sees that they
  were there and the terminal obeys none of them.
"""

from __future__ import annotations

import re

__all__ = ["CONTROL", "escape_controls", "json_safe", "strip_controls"]

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
"""What a terminal may act on, besides new line and tab: the C0 controls, DEL, the C1 controls; and lone
surrogates, which cannot be written as UTF-8 at all."""

_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]"  # CSI: parameters, intermediates, final byte
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"  # OSC, DCS, SOS, PM, APC
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]"  # a two-character escape (with intermediates)
)


def strip_controls(text: str) -> str:
    """``text`` without its escape sequences and control characters (new line and tab kept)."""
    return CONTROL.sub("", _SEQUENCE.sub("", text))


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, decoded with surrogateescape
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """``text`` with every control character but new line and tab (and every lone surrogate) shown as an
    escape."""
    return CONTROL.sub(_escaped, text)


_JSON_UNSAFE = re.compile(r"[\x7f-\x9f\ud800-\udfff]")


def json_safe(json_text: str) -> str:
    """JSON text (``json.dumps`` with ``ensure_ascii=False``) with DEL, the C1 controls and lone surrogates
    written as ``\\u`` escapes: the same JSON value, safe on a terminal and always encodable as UTF-8
    (``json.dumps`` escapes the C0 controls itself, and outside strings JSON is ASCII)."""
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", json_text)
