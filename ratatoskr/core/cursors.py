"""Opaque, tamper-evident keyset cursors, shared by every paged read.

A cursor names the last item a page returned (its sort key), the walk's end (the last item
its filter admitted when the walk began: ``open_walk``) and the direction of travel,
bound to the filter it was made for, and signed with a secret each backend keeps in the
database itself (``sqlite.cursors``), so every worker process of one store accepts the
cursors of the others. Because the next
page starts strictly after the carried key, paging visits every item present throughout
exactly once while other calls write, never hands out the same cursor twice in one walk,
and ends. Nothing in a cursor is secret (ids are visible to its holder anyway); the HMAC
only makes it unforgeable.

Wire form: ``base64url(payload) "." base64url(mac)``, where ``payload`` is the compact JSON
``[version, filter_tag, direction, key + end]`` and ``mac`` is HMAC-SHA256 over the payload bytes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ratatoskr.core.canonical import canonical_json
from ratatoskr.core.errors import InvalidArguments

SortKey = tuple[str | int, ...]
VERSION = 1
SECRET_BYTES = 32
SECRET_META_KEY = "cursor_secret"
# the longest cursor a walk can make: its key and its end, each an id of 512 control
# characters, six JSON bytes each, in base64 (about 8,300 characters), with room to spare
MAX_CURSOR_CHARS = 12288
_TAG_BYTES = 12
_INVALID = "cursor is not one this store made for this filter"


@dataclass(frozen=True)
class Position:
    """Where the next page starts: strictly after ``key`` in ``direction``."""

    key: SortKey
    descending: bool


def filter_tag(kind: str, filter_value: Any) -> str:
    """A short digest of the canonical filter, so a cursor only pages the filter it came from.

    ``kind`` separates the reads (``"affect.list"``, ``"affect.read_events"``...) so a cursor
    of one is never accepted by another even under an equal filter.
    """
    raw = hashlib.sha256(canonical_json([kind, filter_value], "filter")).digest()
    return _b64(raw[:_TAG_BYTES])


class CursorCodec:
    """Makes and opens the cursors of one store; ``secret`` is that store's HMAC key."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < SECRET_BYTES:
            raise ValueError(f"the cursor secret must hold at least {SECRET_BYTES} bytes")
        self._secret = secret

    def make(self, tag: str, key: Sequence[str | int], *, descending: bool = False) -> str:
        """The cursor that resumes strictly after ``key``."""
        payload = orjson.dumps([VERSION, tag, "d" if descending else "a", list(key)])
        return f"{_b64(payload)}.{_b64(self._mac(payload))}"

    def open(
        self,
        cursor: Any,
        tag: str,
        shape: Sequence[type],
        *,
        descending: bool = False,
    ) -> Position:
        """Check and decode ``cursor``; anything forged, altered, truncated or made for another
        filter or direction is ``InvalidArguments`` (the message never echoes the cursor)."""
        if not isinstance(cursor, str) or not 1 <= len(cursor) <= MAX_CURSOR_CHARS:
            raise InvalidArguments(f"cursor must be a string of 1..{MAX_CURSOR_CHARS} characters")
        body, sep, mac = cursor.partition(".")
        if not sep:
            raise InvalidArguments(_INVALID)
        try:
            payload = _unb64(body)
            given = _unb64(mac)
        except ValueError:
            raise InvalidArguments(_INVALID) from None
        if not hmac.compare_digest(given, self._mac(payload)):
            raise InvalidArguments(_INVALID)
        try:
            version, made_for, direction, key = orjson.loads(payload)
        except (orjson.JSONDecodeError, TypeError, ValueError):
            raise InvalidArguments(_INVALID) from None
        if (
            version != VERSION
            or made_for != tag
            or direction != ("d" if descending else "a")
            or not isinstance(key, list)
            or len(key) != len(shape)
            or not all(_is(v, t) for v, t in zip(key, shape, strict=True))
        ):
            raise InvalidArguments(_INVALID)
        return Position(tuple(key), descending)

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._secret, payload, hashlib.sha256).digest()


def _is(value: Any, kind: type) -> bool:
    # bool is an int in Python; a key column is never a boolean.
    return isinstance(value, kind) and not isinstance(value, bool)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    if not text or not text.isascii():
        raise ValueError("empty or non-ASCII")
    padded = text + "=" * (-len(text) % 4)
    try:
        raw = base64.b64decode(padded, altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("not base64url") from None
    if _b64(raw) != text:  # refuse non-canonical encodings (stray bits, padding)
        raise ValueError("not canonical base64url")
    return raw


def open_walk(
    codec: CursorCodec,
    cursor: Any,
    tag: str,
    shape: Sequence[type],
    *,
    descending: bool = False,
) -> tuple[SortKey, SortKey | None]:
    """The key the next page starts after, and the walk's end: the last item the filter
    admitted when the walk began, so a walk ends even while writers add items past it
    faster than it pages. A cursor made before cursors carried an end has none (None)."""
    try:
        key = codec.open(cursor, tag, (*shape, *shape), descending=descending).key
    except InvalidArguments:
        return codec.open(cursor, tag, shape, descending=descending).key, None
    return key[: len(shape)], key[len(shape) :]


def make_walk(
    codec: CursorCodec, tag: str, key: SortKey, end: SortKey, *, descending: bool = False
) -> str:
    """The cursor resuming strictly after ``key`` and ending at ``end`` (``open_walk``)."""
    return codec.make(tag, (*key, *end), descending=descending)
