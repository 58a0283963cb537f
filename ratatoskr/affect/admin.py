"""The affect store's operator half: ``SqliteAdmin`` with affect's two tables, deleting
states through the store's own path and events (which no verb deletes) directly."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw

from ratatoskr.affect import admin_sql
from ratatoskr.core.admin import FoundRecord
from ratatoskr.core.context import CallContext
from ratatoskr.sqlite.admin import SqliteAdmin
from ratatoskr.sqlite.record_sql import Table


class AffectAdmin(SqliteAdmin):
    """Mixed into ``RatatoskrAffectStore``, which supplies the methods declared here."""

    PLANE = "affect"
    TABLES = admin_sql.TABLES

    def _delete_states(self, conn: apsw.Connection, ids: Sequence[str]) -> None:
        raise NotImplementedError

    def get_many(self, ids: list[str], *, ctx: CallContext | None = None) -> list[dict[str, Any]]:
        raise NotImplementedError

    def get_records(self, ids: Sequence[str]) -> list[FoundRecord]:
        wanted = list(ids)
        states = {state["id"]: state for state in self.get_many(wanted)}
        with self.db.read() as conn:
            events = admin_sql.events_by_id(conn, wanted)
        found: list[FoundRecord] = []
        for i in wanted:
            if i in states:
                found.append({"id": i, "kind": "state", "record": states[i]})
            if i in events:
                found.append({"id": i, "kind": "event", "record": events[i]})
        return found

    def _delete(self, conn: apsw.Connection, table: Table, ids: Sequence[str]) -> None:
        if table is admin_sql.STATES:
            self._delete_states(conn, ids)
        else:
            admin_sql.delete_events(conn, ids)
