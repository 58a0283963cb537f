"""How the console writes a stored value or id so that what the operator sees (and types to
confirm) names that value and no other.

A value is stored as a writer gave it: ``" bob"`` beside ``bob``, a lone blank, the empty
origin, or text holding a RIGHT-TO-LEFT OVERRIDE that would draw ``evil`` as ``live``. A
plain value is written as it is; any other is written quoted, as JSON writes a string, with
every invisible character as an escape (``"\\u202e"``). The same text is the confirmation
phrase, so a blank or empty value has a phrase that can be typed (``" "``, ``""``).
"""

from __future__ import annotations

import unicodedata

from markupsafe import Markup

# control, format (the bidi overrides, zero-width characters), separators other than the
# plain space, private use, surrogates and unassigned: none of them draws as itself
_INVISIBLE = frozenset({"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp", "Zs"})
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t", '"': '\\"', "\\": "\\\\"}


def _invisible(char: str) -> bool:
    return char != " " and unicodedata.category(char) in _INVISIBLE


def is_plain(value: str) -> bool:
    """Whether ``value`` reads as itself: not empty, no blank at either end, no invisible
    character, and no quote at either end (so a quoted form is never taken for a value)."""
    return (
        value != ""
        and value == value.strip()
        and value[0] != '"'
        and value[-1] != '"'
        and not any(_invisible(c) for c in value)
    )


def _escaped(char: str) -> str:
    if char in _SHORT:
        return _SHORT[char]
    if _invisible(char):
        code = ord(char)
        return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
    return char


def shown(value: str) -> str:
    """The value as the console writes it: as it is when plain, else quoted and escaped."""
    if is_plain(value):
        return value
    return '"' + "".join(_escaped(c) for c in value) + '"'


def html(value: str, css: str = "value") -> Markup:
    """``shown`` in a ``<bdi>``, so right-to-left text cannot reorder what is around it."""
    return Markup('<bdi class="{}">{}</bdi>').format(css, shown(value))


def pairs_html(pairs: list[tuple[str, str]]) -> Markup:
    """``facet=value`` pairs, each value written by ``html``; ``everything`` for none."""
    if not pairs:
        return Markup("everything")
    return Markup(" ").join(Markup("{}={}").format(f, html(v)) for f, v in pairs)
