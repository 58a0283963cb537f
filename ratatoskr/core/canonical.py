"""Canonical JSON: the one serialisation used for digests and for storing records verbatim.

orjson with sorted keys and no whitespace. It refuses lone surrogates, integers beyond 64
bits and nesting deeper than 255; non-finite floats (which orjson would write as ``null``)
are refused by ``check_json_value`` so nothing is silently altered.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import orjson

from ratatoskr.core.errors import InvalidArguments

MAX_DEPTH = 64


def canonical_json(value: Any, field: str = "value") -> bytes:
    """Serialise ``value`` canonically; anything JSON cannot carry is ``InvalidArguments``."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise InvalidArguments(
            f"{field} is not representable as JSON ({json_failure(exc)})"
        ) from None


def digest(value: Any, field: str = "value") -> str:
    """Lowercase hex SHA-256 of the canonical JSON of ``value``."""
    return hashlib.sha256(canonical_json(value, field)).hexdigest()


_PLAIN = (str, int, bool, type(None))  # leaves that need no look: checked by type alone


def check_json_value(value: Any, field: str, skip_key: str | None = None, depth: int = 0) -> None:
    """Refuse what JSON cannot round-trip: non-finite floats, non-string keys, deep nesting.
    A message names ``field`` and how deep the value lies, never the keys on the way: a
    record's keys may be its content."""
    if depth > MAX_DEPTH:
        raise InvalidArguments(f"{field} nests deeper than {MAX_DEPTH} levels")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArguments(f"{field} holds a non-finite number{_at(depth)}")
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidArguments(f"{field} has a non-string key{_at(depth)}")
            if (key == skip_key and depth == 0) or type(item) in _PLAIN:
                continue
            check_json_value(item, field, None, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            if type(item) not in _PLAIN:
                check_json_value(item, field, None, depth + 1)
    elif value is not None and not isinstance(value, str | int | bool):
        raise InvalidArguments(f"{field} holds a value JSON cannot carry{_at(depth)}")


def _at(depth: int) -> str:
    return "" if depth == 0 else f" ({depth} level{'s' if depth > 1 else ''} down)"


def json_failure(exc: Exception) -> str:
    """What orjson could not write, in a few words that name no value."""
    text = str(exc)
    if "surrogates" in text:
        return "a string holds a lone surrogate"
    if "64-bit" in text or "Integer" in text:
        return "an integer exceeds 64 bits"
    if "recursion" in text.lower():
        return "nesting too deep"
    return "unsupported value"
