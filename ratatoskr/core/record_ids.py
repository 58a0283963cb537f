"""Record ids and id lists, the same rules on both planes."""

from __future__ import annotations

from typing import Any

from ratatoskr.core.errors import InvalidArguments

MAX_IDS = 1000
MAX_ID_CHARS = 512


def check_id(value: Any, field: str) -> str:
    """A string of 1..512 characters that UTF-8 can carry (no lone surrogates)."""
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_ID_CHARS:
        raise InvalidArguments(f"{field} must be a string of 1..{MAX_ID_CHARS} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArguments(f"{field} holds a lone surrogate") from None
    return value


def check_ids(ids: Any) -> list[str]:
    """A list of 1..1000 ids, duplicates folded (first occurrence kept)."""
    if not isinstance(ids, list) or not 1 <= len(ids) <= MAX_IDS:
        raise InvalidArguments(f"ids must be a list of 1..{MAX_IDS} strings")
    seen: dict[str, None] = {}
    for i, value in enumerate(ids):
        seen.setdefault(check_id(value, f"ids[{i}]"), None)
    return list(seen)


def with_revision(record: dict[str, Any], revision: int) -> dict[str, Any]:
    """A stored record as a read returns it: its fields and its revision."""
    return {**record, "revision": revision}
