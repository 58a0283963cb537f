"""The memory store's operator half on PostgreSQL: ``PgAdmin`` with memory's table, its
deletes (the store's own), the vector checks and the backup to a SQLite file."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ratatoskr.core.admin import FoundRecord
from ratatoskr.core.context import CallContext
from ratatoskr.memory import admin_sql, rules
from ratatoskr.memory.postgres import transfer
from ratatoskr.memory.postgres.locks import lock_keys
from ratatoskr.memory.store import open_memory_store
from ratatoskr.postgres.admin import PgAdmin
from ratatoskr.postgres.database import Conn
from ratatoskr.postgres.idempotency import PgIdempotency
from ratatoskr.postgres.scope_sql import keys
from ratatoskr.sqlite.record_sql import Table


class PgMemoryAdmin(PgAdmin):
    """Mixed into ``PgMemoryStore``, which supplies the methods declared here."""

    PLANE = "memory"
    TABLES = admin_sql.TABLES
    IDEMPOTENCY = PgIdempotency("memory_idempotency")
    META = "memory_meta"
    embedding_dim: int

    def get_many(self, ids: list[str], *, ctx: CallContext | None = None) -> list[dict[str, Any]]:
        raise NotImplementedError

    def get_records(self, ids: Sequence[str]) -> list[FoundRecord]:
        return [
            {"id": rules.record_id(record, "stored record"), "kind": "chunk", "record": record}
            for record in self.get_many(list(ids))
        ]

    def _delete(self, conn: Conn, table: Table, ids: Sequence[str]) -> None:
        if getattr(self, "partitioned", False):  # the writers' id locks (store.lock_keys)
            lock_keys(conn, list(ids))
        conn.execute("DELETE FROM memory_chunks WHERE chunk_id = ANY(%s)", (keys(list(ids)),))

    def _plane_problems(self, conn: Conn) -> list[str]:
        """Every vector has the store's dimension, and float64 bytes hold as many values."""
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE vector_dims(embedding) <> %s), "
            "count(*) FILTER (WHERE vector_f64 IS NOT NULL AND length(vector_f64) <> %s) "
            "FROM memory_chunks",
            (self.embedding_dim, 8 * self.embedding_dim),
        ).fetchone()
        problems = []
        if row and row[0]:
            problems.append(
                f"{row[0]} chunk(s) whose vector is not of dimension {self.embedding_dim}"
            )
        if row and row[1]:
            problems.append(f"{row[1]} chunk(s) whose float64 vector has the wrong length")
        return problems

    def _plane_stats(self) -> dict[str, Any]:
        return {"embedding_dim": self.embedding_dim}

    def _backup_file(self, dest: str) -> int:
        if os.path.exists(dest):
            raise ValueError(f"refusing to overwrite {dest}")
        target = open_memory_store(dest, embedding_dim=self.embedding_dim, mirror_bytes=0)
        try:

            def copy(conn: Conn) -> int:
                with target.db.write() as lite:
                    return transfer.to_sqlite(conn, lite)

            self.db.read(copy)
        finally:
            target.close()
        os.chmod(dest, 0o600)
        return os.path.getsize(dest)
