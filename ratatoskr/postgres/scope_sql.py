"""The scope filter as SQL over PostgreSQL's axis columns (the SQLite rule, ``%s`` params).

Ids and axis values are kept as ``bytea`` (their UTF-8 bytes): PostgreSQL's ``text`` cannot
hold U+0000, which a valid id or scope value may contain, and bytes compare as SQLite's
BINARY collation and Python's ``str`` do (UTF-8 byte order is code point order), so keyset
pages and ties go in the same order on both backends.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ratatoskr.core.scope import Scope
from ratatoskr.core.sql_dialect import AXIS_COLUMNS as COLUMNS
from ratatoskr.core.sql_dialect import SqlDialect


def key(value: str) -> bytes:
    """An id or axis value as it is stored (UTF-8 bytes)."""
    return value.encode("utf-8")


def keys(values: Sequence[str]) -> list[bytes]:
    return [v.encode("utf-8") for v in values]


def scope_condition(scope_all: Scope, scope_any: Sequence[Scope]) -> tuple[str, list[bytes]]:
    """The composed filter as SQL over the axis columns (``TRUE`` when it admits all)."""
    clauses: list[str] = []
    params: list[bytes] = []
    for axis, value in sorted(scope_all.items()):
        clauses.append(f"{COLUMNS[axis]} = %s")
        params.append(key(value))
    if scope_any and all(element for element in scope_any):
        branches = []
        for element in scope_any:
            branches.append("(" + " AND ".join(f"{COLUMNS[a]} = %s" for a in sorted(element)) + ")")
            params.extend(key(element[a]) for a in sorted(element))
        clauses.append("(" + " OR ".join(branches) + ")")
    return (" AND ".join(clauses) or "TRUE"), params


def text(raw: Any) -> str:
    """A stored id or axis value (``bytea``) back as text."""
    return bytes(raw).decode("utf-8")


def _value(raw: Any) -> str | None:
    """A facet value; the empty key (no tenant, in a partitioned table) is no value."""
    return None if raw is None or raw == b"" else text(raw)


def _among(column: str, ids: Sequence[str]) -> tuple[str, list[Any]]:
    return f"{column} = ANY(%s)", [keys(ids)]


POSTGRES = SqlDialect(
    param="%s", bind=key, text=text, value=_value, scope_condition=scope_condition, among=_among
)
