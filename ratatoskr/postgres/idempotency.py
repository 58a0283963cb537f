"""The replay-or-conflict cache of one plane, in PostgreSQL (the SQLite table's rules).

Entries are keyed by ``idempotency_id`` (``ratatoskr.core.idempotency``: JSON text, so an
actor or key holding U+0000 is escaped) and live in the plane's own database, so a retry
sent to another server replays or conflicts exactly as on the first. ``remember`` runs in
the write's transaction: the entry exists if and only if the batch was stored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import psycopg

from ratatoskr.core.errors import IdempotencyConflict
from ratatoskr.core.idempotency import damaged_entries, names_any

Conn = psycopg.Connection[Any]


def create_table(conn: Conn, table: str) -> None:
    conn.execute(
        f"""CREATE TABLE IF NOT EXISTS {table} (
            idempotency_id text PRIMARY KEY,
            digest text NOT NULL,
            record_ids text NOT NULL,
            expires_at double precision NOT NULL
        )"""
    )
    conn.execute(f"CREATE INDEX IF NOT EXISTS {table}_expires ON {table} (expires_at)")


class PgIdempotency:
    """Statements over one plane's idempotency table, run inside its transactions."""

    def __init__(self, table: str) -> None:
        self.table = table

    def is_replay(
        self,
        conn: Conn,
        iid: str,
        digest: str,
        now: float,
        matches: Callable[[str], bool] | None = None,
    ) -> bool:
        """True for a replay; ``IdempotencyConflict`` for a reused key; False when new."""
        row = conn.execute(
            f"SELECT digest FROM {self.table} WHERE idempotency_id = %s AND expires_at > %s",
            (iid, now),
        ).fetchone()
        if row is None:
            return False
        stored = row[0]
        if stored != digest and (matches is None or not matches(stored)):
            raise IdempotencyConflict("idempotency_key was already used with a different payload")
        return True

    def recorded_ids(self, conn: Conn, iid: str) -> list[str]:
        row = conn.execute(
            f"SELECT record_ids FROM {self.table} WHERE idempotency_id = %s", (iid,)
        ).fetchone()
        return list(orjson.loads(row[0])) if row else []

    def remember(
        self, conn: Conn, iid: str, digest: str, record_ids: list[str], expires_at: float
    ) -> None:
        """An expired entry under the same id is replaced; a live one cannot exist here (the
        transaction checked, and a concurrent one conflicts as a serialization failure)."""
        conn.execute(
            f"INSERT INTO {self.table} (idempotency_id, digest, record_ids, expires_at) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (idempotency_id) DO UPDATE SET "
            "digest = excluded.digest, record_ids = excluded.record_ids, "
            "expires_at = excluded.expires_at",
            (iid, digest, orjson.dumps(record_ids).decode(), expires_at),
        )

    def prune(self, conn: Conn, now: float) -> int:
        cur = conn.execute(f"DELETE FROM {self.table} WHERE expires_at <= %s", (now,))
        return int(cur.rowcount)

    def count(self, conn: Conn, now: float | None = None) -> int:
        if now is None:
            row = conn.execute(f"SELECT count(*) FROM {self.table}").fetchone()
        else:
            row = conn.execute(
                f"SELECT count(*) FROM {self.table} WHERE expires_at <= %s", (now,)
            ).fetchone()
        return int(row[0]) if row else 0

    def damaged(self, conn: Conn) -> int:
        """Entries whose ``record_ids`` is not a JSON list of ids (``admin check``)."""
        return damaged_entries(conn.execute(f"SELECT record_ids FROM {self.table}"))

    def forget_ids(self, conn: Conn, ids: set[str]) -> int:
        """Drop every entry whose call wrote one of ``ids`` (erase)."""
        if not ids:
            return 0
        rows = conn.execute(f"SELECT idempotency_id, record_ids FROM {self.table}").fetchall()
        doomed = [iid for iid, record_ids in rows if names_any(record_ids, ids)]
        if doomed:
            conn.execute(f"DELETE FROM {self.table} WHERE idempotency_id = ANY(%s)", (doomed,))
        return len(doomed)
