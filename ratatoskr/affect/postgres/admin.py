"""The affect store's operator half on PostgreSQL: ``PgAdmin`` with affect's two tables,
states deleted as the store deletes them and events (which no verb deletes) directly, and
the backup to a SQLite file."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import orjson

from ratatoskr.affect import admin_sql
from ratatoskr.affect.postgres import transfer
from ratatoskr.affect.store import open_affect_store
from ratatoskr.core.admin import FoundRecord
from ratatoskr.core.context import CallContext
from ratatoskr.postgres.admin import PgAdmin
from ratatoskr.postgres.database import Conn
from ratatoskr.postgres.idempotency import PgIdempotency
from ratatoskr.postgres.scope_sql import keys
from ratatoskr.sqlite.record_sql import Table


class PgAffectAdmin(PgAdmin):
    """Mixed into ``PgAffectStore``, which supplies the methods declared here."""

    PLANE = "affect"
    TABLES = admin_sql.TABLES
    IDEMPOTENCY = PgIdempotency("affect_idempotency")
    META = "affect_meta"

    def get_many(self, ids: list[str], *, ctx: CallContext | None = None) -> list[dict[str, Any]]:
        raise NotImplementedError

    def get_records(self, ids: Sequence[str]) -> list[FoundRecord]:
        wanted = list(ids)
        states = {state["id"]: state for state in self.get_many(wanted)}
        rows = self.db.once(
            lambda conn: conn.execute(
                "SELECT id, record_json FROM affect_events WHERE id = ANY(%s)", (keys(wanted),)
            ).fetchall()
        )
        events = {bytes(i).decode("utf-8"): orjson.loads(r) for i, r in rows}
        found: list[FoundRecord] = []
        for i in wanted:
            if i in states:
                found.append({"id": i, "kind": "state", "record": states[i]})
            if i in events:
                found.append({"id": i, "kind": "event", "record": events[i]})
        return found

    def _delete(self, conn: Conn, table: Table, ids: Sequence[str]) -> None:
        conn.execute(f"DELETE FROM {table.name} WHERE id = ANY(%s)", (keys(list(ids)),))

    def _backup_file(self, dest: str) -> int:
        if os.path.exists(dest):
            raise ValueError(f"refusing to overwrite {dest}")
        target = open_affect_store(dest)
        try:

            def copy(conn: Conn) -> int:
                with target.db.write() as lite:
                    return transfer.to_sqlite(conn, lite)

            self.db.read(copy)
        finally:
            target.close()
        os.chmod(dest, 0o600)
        return os.path.getsize(dest)
