"""The memory store's operator half on PostgreSQL: ``PgAdmin`` with memory's table, its
deletes (the store's own), the vector checks and the backup to a SQLite file."""

from __future__ import annotations

from collections.abc import Sequence

import apsw
import numpy as np

from ratatoskr.core.record_sql import Table
from ratatoskr.memory import admin_sql
from ratatoskr.memory.admin_records import ChunkRecords
from ratatoskr.memory.postgres import transfer
from ratatoskr.memory.postgres.locks import lock_keys
from ratatoskr.memory.store import RatatoskrMemoryStore, open_memory_store
from ratatoskr.memory.vector_check import value_problems
from ratatoskr.postgres.admin import PgAdmin
from ratatoskr.postgres.database import Conn
from ratatoskr.postgres.idempotency import PgIdempotency
from ratatoskr.postgres.scope_sql import keys


class PgMemoryAdmin(ChunkRecords, PgAdmin):
    """Mixed into ``PgMemoryStore``, which supplies the methods declared here."""

    PLANE = "memory"
    TABLES = admin_sql.TABLES
    IDEMPOTENCY = PgIdempotency("memory_idempotency")
    META = "memory_meta"

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
        # the float32 values as bytes, as SQLite keeps them (pgvector itself refuses NaN)
        dim = self.embedding_dim
        with conn.cursor(name="ratatoskr_check_vectors") as rows:  # streamed, not all held
            rows.itersize = 4096
            rows.execute("SELECT chunk_id, embedding::real[], vector_f64 FROM memory_chunks")
            as_bytes = (
                (
                    bytes(cid).decode("utf-8", "replace"),
                    np.asarray(vec, dtype=np.float32).tobytes(),
                    None if f64 is None else bytes(f64),
                    None,
                )
                for cid, vec, f64 in rows
                if len(vec) == dim
            )
            return problems + value_problems(as_bytes, dim)

    def _sqlite_store(self, dest: str) -> RatatoskrMemoryStore:
        return open_memory_store(dest, embedding_dim=self.embedding_dim, mirror_bytes=0)

    def _copy_to_sqlite(self, conn: Conn, lite: apsw.Connection) -> int:
        return transfer.to_sqlite(conn, lite)
