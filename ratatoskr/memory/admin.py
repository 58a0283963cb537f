"""The memory store's operator half: ``SqliteAdmin`` with memory's table, its deletes (the
store's own, which keep the vector rows and the change log right), its consistency check
and the vec0 rebuild after an erase."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw

from ratatoskr.core.admin import FoundRecord
from ratatoskr.core.context import CallContext
from ratatoskr.memory import admin_sql, rules
from ratatoskr.sqlite.admin import SqliteAdmin
from ratatoskr.sqlite.record_sql import Table


class MemoryAdmin(SqliteAdmin):
    """Mixed into ``RatatoskrMemoryStore``, which supplies the methods declared here."""

    PLANE = "memory"
    TABLES = admin_sql.TABLES
    embedding_dim: int

    def _delete_chunks(self, conn: apsw.Connection, ids: Sequence[str]) -> None:
        raise NotImplementedError

    def get_many(self, ids: list[str], *, ctx: CallContext | None = None) -> list[dict[str, Any]]:
        raise NotImplementedError

    def get_records(self, ids: Sequence[str]) -> list[FoundRecord]:
        return [
            {"id": rules.record_id(record, "stored record"), "kind": "chunk", "record": record}
            for record in self.get_many(list(ids))
        ]

    def _delete(self, conn: apsw.Connection, table: Table, ids: Sequence[str]) -> None:
        self._delete_chunks(conn, ids)

    def _plane_problems(self, conn: apsw.Connection) -> list[str]:
        return admin_sql.vector_problems(conn)

    def _after_erase(self) -> None:
        with self.db.write() as conn:
            admin_sql.rebuild_vector_index(conn)

    def _plane_stats(self) -> dict[str, Any]:
        return {"embedding_dim": self.embedding_dim}
