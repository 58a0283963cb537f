"""PostgreSQL's binary ``COPY`` format, field by field: what the stores' batch writes, the
migration and the backups stream, without psycopg dumping each value in Python.

A stream is ``HEADER``, then per row ``row(n)`` and its ``n`` fields, then ``TRAILER``; a
field is its length (int32) and its bytes in the type's binary form, or length -1 (NULL).
"""

from __future__ import annotations

import struct
from typing import Any

from ratatoskr.postgres.vectors import F32, vector_field

HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
TRAILER = struct.pack(">h", -1)
NULL = struct.pack(">i", -1)


def row(fields: int) -> bytes:
    return struct.pack(">h", fields)


def raw(value: bytes | None) -> bytes:
    """``bytea`` (or any type whose binary form is the bytes themselves)."""
    return NULL if value is None else struct.pack(">i", len(value)) + value


def text(value: str | None) -> bytes:
    """``text`` (and ids kept as ``bytea``: both are their UTF-8 bytes)."""
    return NULL if value is None else raw(value.encode("utf-8"))


def int4(value: int) -> bytes:
    return struct.pack(">ii", 4, value)


def int8(value: int) -> bytes:
    return struct.pack(">iq", 8, value)


def float8(value: float) -> bytes:
    return struct.pack(">id", 8, value)


def vector(value: F32) -> bytes:
    return raw(vector_field(value))


def copy_in(conn: Any, table: str, columns: str, payload: bytes) -> None:
    """Stream ``payload`` (a whole binary COPY stream) into ``table (columns)``."""
    statement = f"COPY {table} ({columns}) FROM STDIN (FORMAT BINARY)"
    with conn.cursor() as cur, cur.copy(statement) as copy:
        copy.write(payload)
