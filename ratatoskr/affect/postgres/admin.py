"""The affect store's operator half on PostgreSQL: ``PgAdmin`` with affect's two tables,
states deleted as the store deletes them and events (which no verb deletes) directly, and
the backup to a SQLite file."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw
import orjson

from ratatoskr.affect import admin_sql
from ratatoskr.affect.admin_records import StateAndEventRecords
from ratatoskr.affect.postgres import transfer
from ratatoskr.affect.store import RatatoskrAffectStore, open_affect_store
from ratatoskr.core.record_sql import Table
from ratatoskr.postgres.admin import PgAdmin
from ratatoskr.postgres.database import Conn
from ratatoskr.postgres.idempotency import PgIdempotency
from ratatoskr.postgres.scope_sql import keys, text


class PgAffectAdmin(StateAndEventRecords, PgAdmin):
    """Mixed into ``PgAffectStore``, which supplies the methods declared here."""

    PLANE = "affect"
    TABLES = admin_sql.TABLES
    IDEMPOTENCY = PgIdempotency("affect_idempotency")
    META = "affect_meta"

    def _events_by_id(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        rows = self.db.once(
            lambda conn: conn.execute(
                "SELECT id, record_json FROM affect_events WHERE id = ANY(%s)", (keys(ids),)
            ).fetchall()
        )
        return {text(i): orjson.loads(r) for i, r in rows}

    def _delete(self, conn: Conn, table: Table, ids: Sequence[str]) -> None:
        conn.execute(f"DELETE FROM {table.name} WHERE id = ANY(%s)", (keys(list(ids)),))

    def _sqlite_store(self, dest: str) -> RatatoskrAffectStore:
        return open_affect_store(dest)

    def _copy_to_sqlite(self, conn: Conn, lite: apsw.Connection) -> int:
        return transfer.to_sqlite(conn, lite)
