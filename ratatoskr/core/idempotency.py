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
