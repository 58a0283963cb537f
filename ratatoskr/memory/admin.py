"""The memory store's operator half: ``SqliteAdmin`` with memory's table, its deletes (the
store's own, which keep the vector rows and the change log right), its consistency check,
and what an erase removes besides the chunks: the change log's scope values, and the vec0
index's freed slots."""

from __future__ import annotations

from collections.abc import Sequence

import apsw

from ratatoskr.core.record_sql import Table
from ratatoskr.core.scope import Scope
from ratatoskr.memory import admin_sql
from ratatoskr.memory.admin_records import ChunkRecords
from ratatoskr.memory.vector_check import value_problems
from ratatoskr.sqlite.admin import SqliteAdmin


class MemoryAdmin(ChunkRecords, SqliteAdmin):
    """Mixed into ``RatatoskrMemoryStore``, which supplies the methods declared here."""

    PLANE = "memory"
    TABLES = admin_sql.TABLES

    def _delete_chunks(self, conn: apsw.Connection, ids: Sequence[str]) -> None:
        raise NotImplementedError

    def _delete(self, conn: apsw.Connection, table: Table, ids: Sequence[str]) -> None:
        self._delete_chunks(conn, ids)

    def _erase_traces(self, conn: apsw.Connection, ids: set[str], scope: Scope) -> None:
        admin_sql.forget_logged_scopes(conn, ids, scope)

    embedding_dim: int

    def _plane_problems(self, conn: apsw.Connection) -> list[str]:
        problems = admin_sql.vector_problems(conn)
        problems += admin_sql.shape_problems(conn, self.embedding_dim)
        rows = conn.execute(
            "SELECT c.chunk_id, c.embedding, c.vector_f64, v.embedding "
            "FROM memory_chunks AS c LEFT JOIN memory_vec AS v ON v.chunk_id = c.chunk_id"
        )
        return problems + value_problems(rows, self.embedding_dim)

    def _after_erase(self) -> None:
        with self.db.write() as conn:
            admin_sql.rebuild_vector_index(conn)
