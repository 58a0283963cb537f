"""The operator's record SQL on PostgreSQL: ``core.record_sql`` in the PostgreSQL dialect,
and the id lookup, one ``= ANY`` over the ids' bytes, answered in the order named."""

from __future__ import annotations

from collections.abc import Sequence

from ratatoskr.core.filters import Filter
from ratatoskr.core.record_sql import Table, condition
from ratatoskr.postgres.database import Conn
from ratatoskr.postgres.scope_sql import POSTGRES, keys, text


def matching_ids(
    conn: Conn, table: Table, *, ids: Sequence[str] | None, flt: Filter | None
) -> list[str]:
    """The ids in ``table`` that ``ids`` names or ``flt`` admits (exactly one is given)."""
    if ids is not None:
        rows = conn.execute(
            f"SELECT {table.id_column} FROM {table.name} WHERE {table.id_column} = ANY(%s)",
            (keys(list(dict.fromkeys(ids))),),
        ).fetchall()
        found = {text(r[0]) for r in rows}
        return [i for i in dict.fromkeys(ids) if i in found]
    assert flt is not None
    where, args = condition(POSTGRES, table, flt)
    admitted = conn.execute(f"SELECT {table.id_column} FROM {table.name} WHERE {where}", args)
    return [text(r[0]) for r in admitted.fetchall()]
