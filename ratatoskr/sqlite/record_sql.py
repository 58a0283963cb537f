"""The operator's filter as SQL over a plane's record tables, and the reads built on it.

Each plane describes its tables as ``Table`` (the plane package's ``admin_sql``); these plain
functions run inside the caller's transaction and read only structural columns (ids, scope
axes, revision, origin, time), never ``record_json``, so counts and listings hold no content.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import apsw
import orjson

from ratatoskr.core.admin import FacetCounts, ListedRecord
from ratatoskr.core.filters import Filter
from ratatoskr.sqlite.scope_sql import COLUMNS, placeholders, scope_condition

_BATCH = 500
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Table:
    """One kind of record: where it lives and which structural columns it has."""

    kind: str
    name: str
    id_column: str
    has_revision: bool
    has_origin: bool = False
    has_time: bool = False


def iso_time(at_us: int) -> str:
    """An event time (UTC microseconds) as RFC 3339, as the wire writes it."""
    return (_EPOCH + timedelta(microseconds=at_us)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def condition(table: Table, flt: Filter) -> tuple[str, list[Any]]:
    """The filter as a SQL ``WHERE`` over ``table`` (``1`` when it admits everything)."""
    sql, params = scope_condition(flt.scope, [])
    args: list[Any] = list(params)
    if flt.origin is not None:
        if not table.has_origin:
            return "0", []
        sql = f"{sql} AND origin = ?"
        args.append(flt.origin)
    return sql, args


def facet_column(table: Table, facet: str) -> str | None:
    """The column a facet reads in ``table`` (``None`` for ``kind``, which is the table)."""
    if facet in COLUMNS:
        return COLUMNS[facet]
    if facet == "origin":
        return "origin"
    return None


def reached(tables: Sequence[Table], flt: Filter) -> tuple[Table, ...]:
    """The tables a filter reaches: a ``kind`` filter keeps one."""
    return tuple(t for t in tables if flt.kind is None or flt.kind == t.kind)


def count_rows(conn: apsw.Connection, table: Table, flt: Filter | None = None) -> int:
    where, args = condition(table, flt or Filter())
    sql = f"SELECT count(*) FROM {table.name} WHERE {where}"
    return int(conn.execute(sql, args).fetchall()[0][0])


def count_by(
    conn: apsw.Connection, tables: Sequence[Table], flt: Filter, facet: str
) -> FacetCounts:
    """Total, missing and every (value, count) over the tables ``flt`` reaches, one
    ``GROUP BY`` each; ``kind`` counts each table."""
    reach = reached(tables, flt)
    if facet == "kind":
        counts = [(t.kind, count_rows(conn, t, flt)) for t in reach]
        return FacetCounts(sum(n for _, n in counts), 0, [(k, n) for k, n in counts if n > 0])
    total = missing = 0
    merged: dict[str, int] = {}
    for table in reach:
        column = facet_column(table, facet)
        where, args = condition(table, flt)
        if column is None:
            continue
        for value, count in conn.execute(
            f"SELECT {column}, count(*) FROM {table.name} WHERE {where} GROUP BY {column}", args
        ).fetchall():
            total += count
            if value is None:
                missing += count
            else:
                merged[value] = merged.get(value, 0) + count
    return FacetCounts(total, missing, list(merged.items()))


def _batches(ids: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(ids), _BATCH):
        yield ids[start : start + _BATCH]


def matching_ids(
    conn: apsw.Connection, table: Table, *, ids: Sequence[str] | None, flt: Filter | None
) -> list[str]:
    """The ids in ``table`` that ``ids`` names or ``flt`` admits (exactly one is given)."""
    if ids is not None:
        found: list[str] = []
        for batch in _batches(list(dict.fromkeys(ids))):
            rows = conn.execute(
                f"SELECT {table.id_column} FROM {table.name} "
                f"WHERE {table.id_column} IN ({placeholders(len(batch))})",
                list(batch),
            ).fetchall()
            found.extend(r[0] for r in rows)
        return found
    assert flt is not None
    where, args = condition(table, flt)
    rows = conn.execute(f"SELECT {table.id_column} FROM {table.name} WHERE {where}", args)
    return [r[0] for r in rows.fetchall()]


def _select(table: Table) -> str:
    return ", ".join(
        [
            table.id_column,
            "revision" if table.has_revision else "NULL",
            "scope_json",
            "origin" if table.has_origin else "NULL",
            "at_us" if table.has_time else "NULL",
        ]
    )


def _listed(table: Table, row: tuple[Any, ...]) -> ListedRecord:
    record_id, revision, scope_json, origin, at_us = row
    item: ListedRecord = {
        "kind": table.kind,
        "id": record_id,
        "revision": revision,
        "scope": orjson.loads(scope_json),
    }
    if table.has_origin:
        item["origin"] = origin
    if table.has_time:
        item["at"] = iso_time(at_us)
    return item


def listed(
    conn: apsw.Connection,
    tables: Sequence[Table],
    flt: Filter,
    after: tuple[str, str] | None,
    count: int,
) -> list[ListedRecord]:
    """Up to ``count`` records ``flt`` admits, by (kind, id), strictly after ``after``; the
    tables are given in kind order."""
    items: list[ListedRecord] = []
    for table in reached(tables, flt):
        if after is not None and table.kind < after[0]:
            continue
        where, args = condition(table, flt)
        if after is not None and table.kind == after[0]:
            where += f" AND {table.id_column} > ?"
            args.append(after[1])
        rows = conn.execute(
            f"SELECT {_select(table)} FROM {table.name} WHERE {where} "
            f"ORDER BY {table.id_column} LIMIT ?",
            (*args, count - len(items)),
        ).fetchall()
        items.extend(_listed(table, row) for row in rows)
        if len(items) >= count:
            break
    return items


def revision_problems(conn: apsw.Connection, table: Table) -> list[str]:
    """A problem when some record of ``table`` carries a revision below 1."""
    if not table.has_revision:
        return []
    sql = f"SELECT count(*) FROM {table.name} WHERE revision < 1"
    bad = int(conn.execute(sql).fetchall()[0][0])
    return [f"{bad} {table.kind}(s) with a revision below 1"] if bad else []
