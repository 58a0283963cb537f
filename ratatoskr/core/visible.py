"""How a stored value or id is written for a person, so that what they see names that value
and no other, and nothing in it drives their terminal.

A value is stored as a writer gave it: ``" bob"`` beside ``bob``, a lone blank, the empty
origin, an escape sequence (``ESC [2K`` erases the line it is printed on), a newline, or a
RIGHT-TO-LEFT OVERRIDE that would draw ``evil`` as ``live``. A plain value is written as it
is; any other is written quoted, as JSON writes a string, with every invisible character as
an escape (``"\\u202e"``). A value not in Unicode's composed form (NFC) is quoted too,
its combining marks escaped: ``zoe`` and a COMBINING ACUTE ACCENT draws as ``zoé`` does,
but is another value, which an erase typed from a request would miss. The console and the
CLI write values alike.
"""

from __future__ import annotations

import unicodedata

# control, format (the bidi overrides, zero-width characters), separators other than the
# plain space, private use, surrogates and unassigned: none of them draws as itself
_INVISIBLE = frozenset({"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp", "Zs"})
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t", '"': '\\"', "\\": "\\\\"}


def invisible(char: str) -> bool:
    """Whether ``char`` does not draw as itself (a control, a bidi override, a blank other
    than the plain space, ...)."""
    return char != " " and unicodedata.category(char) in _INVISIBLE


def is_plain(value: str) -> bool:
    """Whether ``value`` reads as itself: not empty, no blank at either end, no invisible
    character, and no quote at either end (so a quoted form is never taken for a value)."""
    return (
        value != ""
        and value == value.strip()
        and value[0] != '"'
        and value[-1] != '"'
        and not any(invisible(c) for c in value)
        and unicodedata.is_normalized("NFC", value)
    )


def _code(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _escaped(char: str, marks: bool) -> str:
    if char in _SHORT:
        return _SHORT[char]
    if invisible(char) or (marks and unicodedata.category(char).startswith("M")):
        return _code(char)
    return char


def shown(value: str) -> str:
    """The value as a person is shown it: as it is when plain, else quoted and escaped
    (and its combining marks too, when it is not in composed form)."""
    if is_plain(value):
        return value
    marks = not unicodedata.is_normalized("NFC", value)
    return '"' + "".join(_escaped(c, marks) for c in value) + '"'


def defanged(text: str) -> str:
    """``text`` (a message or a line that may hold a stored id) with each invisible
    character but the plain space written as its escape (``\\n``, ``\\u001b``) and the rest
    as it is: one line, and nothing in it a terminal acts on."""
    if not any(invisible(c) for c in text):
        return text
    return "".join((_SHORT.get(c) or _code(c)) if invisible(c) else c for c in text)


def _json_escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_visible(text: str) -> str:
    """JSON text holding the same values, with every invisible character but its own line
    ends written as a JSON escape: JSON lets DEL, the C1 controls and the bidi overrides
    through, and a terminal acts on them (one only ever stands inside a string there)."""
    if text.isascii() and "\x7f" not in text:
        return text  # JSON escaped every other ASCII control already
    return "".join(_json_escape(c) if c != "\n" and invisible(c) else c for c in text)
