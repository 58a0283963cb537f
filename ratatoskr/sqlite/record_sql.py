"""The operator's record SQL on SQLite: ``core.record_sql`` in the SQLite dialect, and the
id lookup, which SQLite runs in batches of bound ``IN`` lists."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import apsw

from ratatoskr.core.filters import Filter
from ratatoskr.core.record_sql import Table, condition
from ratatoskr.sqlite.scope_sql import SQLITE, placeholders

_BATCH = 500


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
    where, args = condition(SQLITE, table, flt)
    rows = conn.execute(f"SELECT {table.id_column} FROM {table.name} WHERE {where}", args)
    return [r[0] for r in rows.fetchall()]
