"""The operator's filter as SQL over a plane's PostgreSQL tables, and the reads built on it.

The SQLite module's functions (``sqlite.record_sql``) for this backend: the same ``Table``
descriptions, ``%s`` parameters, ids, axes and origin as ``bytea`` (decoded here). They read
only structural columns, never ``record_json``, so counts and listings hold no content.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from ratatoskr.core.admin import FacetCounts, ListedRecord
from ratatoskr.core.filters import Filter
from ratatoskr.postgres.database import Conn
from ratatoskr.postgres.scope_sql import key, keys, scope_condition
from ratatoskr.sqlite.record_sql import Table, facet_column, iso_time
from ratatoskr.sqlite.record_sql import reached as reached


def _text(raw: Any) -> str:
    return bytes(raw).decode("utf-8")


def condition(table: Table, flt: Filter) -> tuple[str, list[Any]]:
    """The filter as a ``WHERE`` over ``table`` (``TRUE`` when it admits everything)."""
    sql, params = scope_condition(flt.scope, [])
    args: list[Any] = list(params)
    if flt.origin is not None:
        if not table.has_origin:
            return "FALSE", []
        sql = f"{sql} AND origin = %s"
        args.append(key(flt.origin))
    return sql, args


def count_rows(conn: Conn, table: Table, flt: Filter | None = None) -> int:
    where, args = condition(table, flt or Filter())
    row = conn.execute(f"SELECT count(*) FROM {table.name} WHERE {where}", args).fetchone()
    return int(row[0]) if row else 0


def count_by(conn: Conn, tables: Sequence[Table], flt: Filter, facet: str) -> FacetCounts:
    """Total, missing and every (value, count) over the tables ``flt`` reaches."""
    reach = reached(tables, flt)
    if facet == "kind":
        counts = [(t.kind, count_rows(conn, t, flt)) for t in reach]
        return FacetCounts(sum(n for _, n in counts), 0, [(k, n) for k, n in counts if n > 0])
    total = missing = 0
    merged: dict[str, int] = {}
    for table in reach:
        column = facet_column(table, facet)
        if column is None:
            continue
        where, args = condition(table, flt)
        rows = conn.execute(
            f"SELECT {column}, count(*) FROM {table.name} WHERE {where} GROUP BY {column}", args
        ).fetchall()
        for value, count in rows:
            total += count
            if value is None or value == b"":  # b"": no tenant, in a partitioned table
                missing += count
            else:
                name = _text(value)
                merged[name] = merged.get(name, 0) + count
    return FacetCounts(total, missing, list(merged.items()))


def matching_ids(
    conn: Conn, table: Table, *, ids: Sequence[str] | None, flt: Filter | None
) -> list[str]:
    """The ids in ``table`` that ``ids`` names or ``flt`` admits (exactly one is given)."""
    if ids is not None:
        rows = conn.execute(
            f"SELECT {table.id_column} FROM {table.name} WHERE {table.id_column} = ANY(%s)",
            (keys(list(dict.fromkeys(ids))),),
        ).fetchall()
        found = {_text(r[0]) for r in rows}
        return [i for i in dict.fromkeys(ids) if i in found]
    assert flt is not None
    where, args = condition(table, flt)
    admitted = conn.execute(f"SELECT {table.id_column} FROM {table.name} WHERE {where}", args)
    return [_text(r[0]) for r in admitted.fetchall()]


def _select(table: Table) -> str:
    return ", ".join(
        [
            table.id_column,
            "revision" if table.has_revision else "NULL::integer",
            "scope_json",
            "origin" if table.has_origin else "NULL::bytea",
            "at_us" if table.has_time else "NULL::bigint",
        ]
    )


def _listed(table: Table, row: tuple[Any, ...]) -> ListedRecord:
    record_id, revision, scope_json, origin, at_us = row
    item: ListedRecord = {
        "kind": table.kind,
        "id": _text(record_id),
        "revision": revision,
        "scope": orjson.loads(scope_json),
    }
    if table.has_origin:
        item["origin"] = None if origin is None else _text(origin)
    if table.has_time:
        item["at"] = iso_time(at_us)
    return item


def listed(
    conn: Conn,
    tables: Sequence[Table],
    flt: Filter,
    after: tuple[str, str] | None,
    count: int,
) -> list[ListedRecord]:
    """Up to ``count`` records ``flt`` admits, by (kind, id), strictly after ``after``."""
    items: list[ListedRecord] = []
    for table in reached(tables, flt):
        if after is not None and table.kind < after[0]:
            continue
        where, args = condition(table, flt)
        if after is not None and table.kind == after[0]:
            where += f" AND {table.id_column} > %s"
            args.append(key(after[1]))
        rows = conn.execute(
            f"SELECT {_select(table)} FROM {table.name} WHERE {where} "
            f"ORDER BY {table.id_column} LIMIT %s",
            (*args, count - len(items)),
        ).fetchall()
        items.extend(_listed(table, row) for row in rows)
        if len(items) >= count:
            break
    return items


def revision_problems(conn: Conn, table: Table) -> list[str]:
    if not table.has_revision:
        return []
    row = conn.execute(f"SELECT count(*) FROM {table.name} WHERE revision < 1").fetchone()
    bad = int(row[0]) if row else 0
    return [f"{bad} {table.kind}(s) with a revision below 1"] if bad else []
