"""What both planes' moves between a SQLite file and PostgreSQL share (``admin migrate``):
counting the rows a database holds, and carrying the idempotency entries, whose table has
the same columns on both planes. Each plane names its own tables."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw

from ratatoskr.postgres import copy_binary as cb

IDEMPOTENCY_COLUMNS = "idempotency_id, digest, record_ids, expires_at"


def rows_in(pg: Any, tables: Sequence[str]) -> int:
    """The rows of ``tables`` together (0: nothing there to clash with a migration)."""
    total = 0
    for table in tables:
        row = pg.execute(f"SELECT count(*) FROM {table}").fetchone()
        total += int(row[0]) if row else 0
    return total


def idempotency_payload(rows: list[Any]) -> bytes:
    """Idempotency entries as one binary ``COPY`` stream."""
    parts = [cb.HEADER]
    for iid, digest, record_ids, expires in rows:
        parts += [cb.row(4), cb.text(iid), cb.text(digest), cb.text(record_ids), cb.float8(expires)]
    parts.append(cb.TRAILER)
    return b"".join(parts)


def copy_idempotency(pg: Any, lite: apsw.Connection, table: str) -> int:
    """The file's entries of ``table`` into the database's table of the same name."""
    rows = lite.execute(f"SELECT {IDEMPOTENCY_COLUMNS} FROM {table}").fetchall()
    if rows:
        cb.copy_in(pg, table, IDEMPOTENCY_COLUMNS, idempotency_payload(rows))
    return len(rows)


def replace_idempotency(pg: Any, lite: apsw.Connection, table: str) -> int:
    """The file's entries in place of any the database holds (those of an earlier run
    whose end check failed)."""
    pg.execute(f"DELETE FROM {table}")
    return copy_idempotency(pg, lite, table)
