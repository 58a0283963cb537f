"""The affect store's operator half: ``SqliteAdmin`` with affect's two tables, deleting
states through the store's own path and events (which no verb deletes) directly."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw

from ratatoskr.affect import admin_sql
from ratatoskr.affect.admin_records import StateAndEventRecords
from ratatoskr.core.record_sql import Table
from ratatoskr.sqlite.admin import SqliteAdmin


class AffectAdmin(StateAndEventRecords, SqliteAdmin):
    """Mixed into ``RatatoskrAffectStore``, which supplies the methods declared here."""

    PLANE = "affect"
    TABLES = admin_sql.TABLES

    def _delete_states(self, conn: apsw.Connection, ids: Sequence[str]) -> None:
        raise NotImplementedError

    def _events_by_id(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        with self.db.read() as conn:
            return admin_sql.events_by_id(conn, ids)

    def _delete(self, conn: apsw.Connection, table: Table, ids: Sequence[str]) -> None:
        if table is admin_sql.STATES:
            self._delete_states(conn, ids)
        else:
            admin_sql.delete_events(conn, ids)
