"""How the console writes a stored value or id so that what the operator sees (and types to
confirm) names that value and no other.

A value is stored as a writer gave it: ``" bob"`` beside ``bob``, a lone blank, the empty
origin, or text holding a RIGHT-TO-LEFT OVERRIDE that would draw ``evil`` as ``live``. A
plain value is written as it is; any other is written quoted, as JSON writes a string, with
every invisible character as an escape (``"\\u202e"``). The same text is the confirmation
phrase, so a blank or empty value has a phrase that can be typed (``" "``, ``""``). The
rules are ``core.visible``'s, which the CLI's tables share.
"""

from __future__ import annotations

from markupsafe import Markup

from ratatoskr.core.visible import is_plain, shown

__all__ = ["html", "is_plain", "pairs_html", "shown"]


def html(value: str, css: str = "value") -> Markup:
    """``shown`` in a ``<bdi>``, so right-to-left text cannot reorder what is around it."""
    return Markup('<bdi class="{}">{}</bdi>').format(css, shown(value))


def pairs_html(pairs: list[tuple[str, str]]) -> Markup:
    """``facet=value`` pairs, each value written by ``html``; ``everything`` for none."""
    if not pairs:
        return Markup("everything")
    return Markup(" ").join(Markup("{}={}").format(f, html(v)) for f, v in pairs)
