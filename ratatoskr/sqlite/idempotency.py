"""The replay-or-conflict cache both planes share, as a table in each SQLite plane file.

An entry is keyed by ``idempotency_id = ("default", verb, actor, key)`` and holds the digest of
the call's payload, when it expires (by class) and the ids the call wrote, so an erase can
drop the entries whose payload held erased records.
"""

from __future__ import annotations

from collections.abc import Callable

import apsw
import orjson

from ratatoskr.core.errors import IdempotencyConflict
from ratatoskr.core.idempotency import CLASS_TTL_SECONDS as CLASS_TTL_SECONDS
from ratatoskr.core.idempotency import damaged_entries, names_any
from ratatoskr.core.idempotency import idempotency_id as idempotency_id


def create_table(conn: apsw.Connection, table: str) -> None:
    conn.execute(
        f"""CREATE TABLE IF NOT EXISTS {table} (
            idempotency_id TEXT PRIMARY KEY,
            digest TEXT NOT NULL,
            record_ids TEXT NOT NULL,
            expires_at REAL NOT NULL
        )"""
    )
    conn.execute(f"CREATE INDEX IF NOT EXISTS {table}_expires ON {table}(expires_at)")


class IdempotencyTable:
    """Plain functions over one plane's idempotency table, called inside its transactions."""

    def __init__(self, table: str) -> None:
        self.table = table

    def is_replay(
        self,
        conn: apsw.Connection,
        iid: str,
        digest: str,
        now: float,
        matches: Callable[[str], bool] | None = None,
    ) -> bool:
        """True for a replay; ``IdempotencyConflict`` for a reused key; False when new.

        ``matches`` judges a stored digest that differs from ``digest`` as text (one the
        call computes in another form: see ``ratatoskr.memory.digest``)."""
        rows = conn.execute(
            f"SELECT digest FROM {self.table} WHERE idempotency_id = ? AND expires_at > ?",
            (iid, now),
        ).fetchall()
        if not rows:
            return False
        stored = rows[0][0]
        if stored != digest and (matches is None or not matches(stored)):
            raise IdempotencyConflict("idempotency_key was already used with a different payload")
        return True

    def remember(
        self,
        conn: apsw.Connection,
        iid: str,
        digest: str,
        record_ids: list[str],
        expires_at: float,
    ) -> None:
        conn.execute(
            f"INSERT OR REPLACE INTO {self.table} VALUES (?, ?, ?, ?)",
            (iid, digest, orjson.dumps(record_ids).decode(), expires_at),
        )

    def prune(self, conn: apsw.Connection, now: float) -> int:
        conn.execute(f"DELETE FROM {self.table} WHERE expires_at <= ?", (now,))
        return int(conn.changes())

    def count(self, conn: apsw.Connection, now: float | None = None) -> int:
        if now is None:
            return int(conn.execute(f"SELECT count(*) FROM {self.table}").fetchall()[0][0])
        sql = f"SELECT count(*) FROM {self.table} WHERE expires_at <= ?"
        return int(conn.execute(sql, (now,)).fetchall()[0][0])

    def damaged(self, conn: apsw.Connection) -> int:
        """Entries whose ``record_ids`` is not a JSON list of ids (``admin check``)."""
        return damaged_entries(conn.execute(f"SELECT record_ids FROM {self.table}"))

    def forget_ids(self, conn: apsw.Connection, ids: set[str]) -> int:
        """Drop every entry whose call wrote one of ``ids`` (used by erase)."""
        if not ids:
            return 0
        doomed = [
            iid
            for iid, record_ids in conn.execute(
                f"SELECT idempotency_id, record_ids FROM {self.table}"
            ).fetchall()
            if names_any(record_ids, ids)
        ]
        conn.executemany(
            f"DELETE FROM {self.table} WHERE idempotency_id = ?", [(i,) for i in doomed]
        )
        return len(doomed)
