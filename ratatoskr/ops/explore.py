"""``admin explore``: how many records hold each value of one facet, counted in SQL.

The seed's explore pages through ``list`` up to ``scan_limit`` and may come back truncated;
this store aggregates with ``GROUP BY`` inside one read transaction instead, so every count
is exact and ``truncated`` is always false (``scan_limit`` is validated, then not needed).
Buckets sort by count descending, ties by value ascending, and are cut to ``limit``.
"""

from __future__ import annotations

from typing import Any

import apsw

from ratatoskr.core.filters import Filter
from ratatoskr.ops.filters import Table, check_facet, condition, facet_column, tables_for
from ratatoskr.ops.listing import check_limit
from ratatoskr.ops.stores import PlaneStore

MAX_BUCKETS = 500
DEFAULT_BUCKETS = 20
MAX_SCAN_LIMIT = 50_000
DEFAULT_SCAN_LIMIT = 5_000


def explore(
    store: PlaneStore,
    plane: str,
    facet: str,
    flt: Filter,
    *,
    limit: int = DEFAULT_BUCKETS,
    scan_limit: int = DEFAULT_SCAN_LIMIT,
) -> dict[str, Any]:
    """Bucket counts of ``facet`` over the records ``flt`` admits (the seed's ExplorePage)."""
    check_facet(plane, facet)
    check_limit(limit, MAX_BUCKETS, "limit")
    check_limit(scan_limit, MAX_SCAN_LIMIT, "scan_limit")
    tables = tables_for(plane, flt)
    with store.db.read() as conn:
        if facet == "kind":
            counts = [(t.kind, _count(conn, t, flt)) for t in tables]
            total = sum(n for _, n in counts)
            present = [(kind, n) for kind, n in counts if n > 0]
            missing = 0
        else:
            total, missing, present = _group(conn, tables, facet, flt)
    ordered = sorted(present, key=lambda kv: (-kv[1], kv[0]))
    return {
        "plane": plane,
        "facet": facet,
        "filter": flt.to_json(),
        "buckets": [
            {"value": value, "count": count, "narrow": f"{facet}={value}"}
            for value, count in ordered[:limit]
        ],
        "total": total,
        "missing": missing,
        "more_buckets": max(0, len(ordered) - limit),
        "truncated": False,
        "scan_limit": scan_limit,
    }


def _count(conn: apsw.Connection, table: Table, flt: Filter) -> int:
    where, args = condition(table, flt)
    return int(
        conn.execute(f"SELECT count(*) FROM {table.name} WHERE {where}", args).fetchall()[0][0]
    )


def _group(
    conn: apsw.Connection, tables: tuple[Table, ...], facet: str, flt: Filter
) -> tuple[int, int, list[tuple[str, int]]]:
    """Total, missing and every (value, count) over the tables, one ``GROUP BY`` each."""
    total = missing = 0
    merged: dict[str, int] = {}
    for table in tables:
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
    return total, missing, list(merged.items())
