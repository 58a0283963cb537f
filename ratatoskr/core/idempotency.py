"""Idempotency keys and classes, the same on every backend: what a key may be, how long
an entry of each class lives, and the id an entry is stored under."""

from __future__ import annotations

from typing import Any

import orjson

from ratatoskr.core.errors import InvalidArguments

CLASS_TTL_SECONDS: dict[str, int] = {
    "default": 24 * 3600,
    "ephemeral": 10 * 60,
    "durable": 30 * 24 * 3600,
}
MAX_KEY_CHARS = 256


def parse_key(value: Any) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_KEY_CHARS:
        raise InvalidArguments(f"idempotency_key must be a string of 1..{MAX_KEY_CHARS} characters")
    return value


def parse_class(value: Any) -> str:
    """``None`` means ``default``; the class sets only the entry's lifetime."""
    if value is None:
        return "default"
    if not isinstance(value, str) or value not in CLASS_TTL_SECONDS:
        raise InvalidArguments(
            f"idempotency_class must be null or one of {', '.join(CLASS_TTL_SECONDS)}"
        )
    return value


def idempotency_id(verb: str, actor: str, key: str) -> str:
    return orjson.dumps(["default", verb, actor, key]).decode()


def stored_ids(raw: Any) -> list[str] | None:
    """The record ids an entry's ``record_ids`` column holds, or ``None`` when the column
    is damaged (not a JSON list of strings): what ``admin check`` reports."""
    try:
        ids = orjson.loads(raw) if isinstance(raw, str | bytes) else None
    except orjson.JSONDecodeError:
        return None
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        return None
    return ids


def names_any(raw: Any, ids: set[str]) -> bool:
    """Whether an entry's ``record_ids`` names one of ``ids``. A damaged one does when one
    of them appears in its text as the JSON string it was written as: an erase neither
    keeps an entry that may name its subject nor stops at one that cannot be read."""
    found = stored_ids(raw)
    if found is not None:
        return not ids.isdisjoint(found)
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    return any(orjson.dumps(i).decode() in text for i in ids)


def damaged_entries(rows: Any) -> int:
    """How many of ``rows`` (each a 1-tuple of ``record_ids``) are damaged."""
    return sum(1 for (raw,) in rows if stored_ids(raw) is None)
