"""The operator's filter as SQL over a plane's record tables, and the reads built on it.

Each plane describes its tables as ``Table`` (the plane package's ``admin_sql``); these
plain functions run inside the caller's transaction on either backend (spelled by its
``SqlDialect``) and read only structural columns (ids, scope axes, revision, origin, time),
never ``record_json``, so counts and listings hold no content.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ratatoskr.core.admin import FacetCounts, ListedRecord
from ratatoskr.core.civil_time import format_utc
from ratatoskr.core.filters import Filter
from ratatoskr.core.sql_dialect import AXIS_COLUMNS, Connection, SqlDialect


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
    """An event time (UTC microseconds) as RFC 3339 in UTC (a year an offset moved past
    0000..9999 with its sign: ``civil_time.format_utc``)."""
    return format_utc(at_us)


def condition(sql: SqlDialect, table: Table, flt: Filter) -> tuple[str, list[Any]]:
    """The filter as a ``WHERE`` over ``table`` (always true when it admits everything)."""
    where, params = sql.scope_condition(flt.scope, [])
    args: list[Any] = list(params)
    if flt.origin is not None:
        if not table.has_origin:
            return "FALSE", []
        where = f"{where} AND origin = {sql.param}"
        args.append(sql.bind(flt.origin))
    return where, args


def facet_column(table: Table, facet: str) -> str | None:
    """The column a facet reads in ``table`` (``None`` for ``kind``, which is the table)."""
    if facet in AXIS_COLUMNS:
        return AXIS_COLUMNS[facet]
    if facet == "origin":
        return "origin"
    return None


def reached(tables: Sequence[Table], flt: Filter) -> tuple[Table, ...]:
    """The tables a filter reaches: a ``kind`` filter keeps one."""
    return tuple(t for t in tables if flt.kind is None or flt.kind == t.kind)


def count_rows(sql: SqlDialect, conn: Connection, table: Table, flt: Filter | None = None) -> int:
    where, args = condition(sql, table, flt or Filter())
    rows = conn.execute(f"SELECT count(*) FROM {table.name} WHERE {where}", args).fetchall()
    return int(rows[0][0])


def count_by(
    sql: SqlDialect, conn: Connection, tables: Sequence[Table], flt: Filter, facet: str
) -> FacetCounts:
    """Total, missing and every (value, count) over the tables ``flt`` reaches, one
    ``GROUP BY`` each; ``kind`` counts each table."""
    reach = reached(tables, flt)
    if facet == "kind":
        counts = [(t.kind, count_rows(sql, conn, t, flt)) for t in reach]
        return FacetCounts(sum(n for _, n in counts), 0, [(k, n) for k, n in counts if n > 0])
    total = missing = 0
    merged: dict[str, int] = {}
    for table in reach:
        column = facet_column(table, facet)
        if column is None:
            continue
        where, args = condition(sql, table, flt)
        for raw, count in conn.execute(
            f"SELECT {column}, count(*) FROM {table.name} WHERE {where} GROUP BY {column}", args
        ).fetchall():
            total += count
            # an origin of "" is a value like any other; an axis stores no value as the
            # backend's own empty key (PostgreSQL's partitioned tenant)
            value = sql.value(raw) if facet != "origin" or raw is None else sql.text(raw)
            if value is None:
                missing += count
            else:
                merged[value] = merged.get(value, 0) + count
    return FacetCounts(total, missing, list(merged.items()))


def _select(table: Table) -> str:
    return ", ".join(
        [
            table.id_column,
            "revision" if table.has_revision else "CAST(NULL AS integer)",
            "scope_json",
            "origin" if table.has_origin else "CAST(NULL AS bytea)",
            "at_us" if table.has_time else "CAST(NULL AS bigint)",
        ]
    )


def _listed(sql: SqlDialect, table: Table, row: tuple[Any, ...]) -> ListedRecord:
    record_id, revision, scope_json, origin, at_us = row
    item: ListedRecord = {
        "kind": table.kind,
        "id": sql.text(record_id),
        "revision": revision,
        "scope": orjson.loads(scope_json),
    }
    if table.has_origin:
        item["origin"] = None if origin is None else sql.text(origin)
    if table.has_time:
        item["at"] = iso_time(at_us)
    return item


def listed(
    sql: SqlDialect,
    conn: Connection,
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
        where, args = condition(sql, table, flt)
        if after is not None and table.kind == after[0]:
            where += f" AND {table.id_column} > {sql.param}"
            args.append(sql.bind(after[1]))
        rows = conn.execute(
            f"SELECT {_select(table)} FROM {table.name} WHERE {where} "
            f"ORDER BY {table.id_column} LIMIT {sql.param}",
            (*args, count - len(items)),
        ).fetchall()
        items.extend(_listed(sql, table, row) for row in rows)
        if len(items) >= count:
            break
    return items


def revision_problems(conn: Connection, table: Table) -> list[str]:
    """A problem when some record of ``table`` carries a revision below 1."""
    if not table.has_revision:
        return []
    rows = conn.execute(f"SELECT count(*) FROM {table.name} WHERE revision < 1").fetchall()
    bad = int(rows[0][0])
    return [f"{bad} {table.kind}(s) with a revision below 1"] if bad else []


def json_problems(conn: Connection, table: Table, not_object: str) -> list[str]:
    """A problem when some record of ``table`` holds a record, or a scope, that is not a
    JSON object (``get`` or a scoped read of it could not answer); ``not_object`` is the
    backend's test of one column, with ``{}`` for the column."""
    problems = []
    for column, what in (("record_json", "record"), ("scope_json", "scope")):
        test = not_object.format(column)
        rows = conn.execute(f"SELECT count(*) FROM {table.name} WHERE {test}").fetchall()
        bad = int(rows[0][0])
        if bad:
            problems.append(f"{bad} {table.kind}(s) whose stored {what} is not a JSON object")
    return problems


def idempotency_problems(damaged: int) -> list[str]:
    """A problem when ``damaged`` idempotency entries hold record ids that are not a JSON
    list of ids (a replay of their call could not answer)."""
    return (
        [f"idempotency entries whose record ids are not a JSON list: {damaged}"] if damaged else []
    )
