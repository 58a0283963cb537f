"""The memory file's tables and their migrations (``PRAGMA user_version``).

- ``memory_chunks``: per chunk its revision, the scope axes as indexed columns, the vector
  as float32 (what search ranks; also what was sent when every value is float32-exact, the
  common case) and otherwise as float64 too, so the record reads back equal, and the
  canonical JSON of the rest of the record (the vector kept in binary rather than again as
  JSON text, which would triple the row);
- ``memory_vec``: the sqlite-vec ``vec0`` index (cosine), the contract's vector index;
- ``memory_changes``: a log of changed chunk ids that keeps every process's search mirror
  in step: upserts logged by the store in the same transaction, with the scope axes they
  wrote (``stored = 1``), deletes by a trigger (``stored = 0``), so a search that finds the
  log ahead of its mirror learns which changed chunks its filter admits from the log alone;
- ``memory_idempotency``: the replay-or-conflict cache;
- ``memory_chunks_far_norm``: a partial index of the chunks whose vector float32 cannot
  score (``far_norm_sql``), which the SQL route always takes as candidates.
"""

from __future__ import annotations

from collections.abc import Callable

import apsw

from ratatoskr.memory.search.ranking import FAR_NORM_HIGH, FAR_NORM_LOW
from ratatoskr.sqlite.database import Migration
from ratatoskr.sqlite.idempotency import create_table
from ratatoskr.sqlite.scope_sql import COLUMNS


def _schema_v1(dim: int) -> Callable[[apsw.Connection], None]:
    def apply(conn: apsw.Connection) -> None:
        conn.execute("CREATE TABLE ratatoskr_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute(
            "INSERT INTO ratatoskr_meta VALUES ('plane', 'memory'), ('embedding_dim', ?)",
            (str(dim),),
        )
        conn.execute(
            """CREATE TABLE memory_chunks (
                chunk_id TEXT PRIMARY KEY,
                revision INTEGER NOT NULL CHECK (revision >= 1),
                tenant TEXT, grp TEXT, end_user TEXT, agent_self TEXT,
                origin TEXT,
                scope_json TEXT NOT NULL,
                updated_at REAL NOT NULL,
                embedding BLOB NOT NULL,
                vector_key TEXT NOT NULL,
                vector_f64 BLOB,
                record_json TEXT NOT NULL
            )"""
        )
        for column in COLUMNS.values():
            conn.execute(f"CREATE INDEX memory_chunks_{column} ON memory_chunks({column})")
        conn.execute(
            "CREATE VIRTUAL TABLE memory_vec USING vec0("
            f"chunk_id TEXT PRIMARY KEY, embedding float[{dim}] distance_metric=cosine)"
        )
        conn.execute(
            "CREATE TABLE memory_changes ("
            "seq INTEGER PRIMARY KEY AUTOINCREMENT, chunk_id TEXT NOT NULL)"
        )
        for event, ref in (("INSERT", "new"), ("UPDATE", "new"), ("DELETE", "old")):
            conn.execute(
                f"CREATE TRIGGER memory_chunks_{event.lower()} AFTER {event} ON memory_chunks "
                f"BEGIN INSERT INTO memory_changes (chunk_id) VALUES ({ref}.chunk_id); END"
            )
        create_table(conn, "memory_idempotency")

    return apply


def _schema_v2(conn: apsw.Connection) -> None:
    """The store logs its own upserts (one statement per batch): an INSERT or UPDATE trigger
    on ``memory_chunks`` cost ~30 µs per row here, a third of a batch's write. The DELETE
    trigger stays, so a chunk deleted by hand still reaches every mirror."""
    conn.execute("DROP TRIGGER IF EXISTS memory_chunks_insert")
    conn.execute("DROP TRIGGER IF EXISTS memory_chunks_update")


def _schema_v3(conn: apsw.Connection) -> None:
    """Each entry says what the change left: the chunk stored, with its scope axes, or
    deleted. Reading those from the small log rows, a search ahead of its mirror skips
    joining every changed chunk's (large, recently written) row. Entries written before
    this migration say neither (``stored IS NULL``): a reader joins the table for them."""
    for column in (*COLUMNS.values(), "stored"):
        kind = "INTEGER" if column == "stored" else "TEXT"
        conn.execute(f"ALTER TABLE memory_changes ADD COLUMN {column} {kind}")
    conn.execute("DROP TRIGGER IF EXISTS memory_chunks_delete")
    conn.execute(
        "CREATE TRIGGER memory_chunks_delete AFTER DELETE ON memory_chunks "
        "BEGIN INSERT INTO memory_changes (chunk_id, stored) VALUES (old.chunk_id, 0); END"
    )


def far_norm_sql(dim: int) -> str:
    """The condition that holds for a chunk whose vector float32 cannot score
    (``ranking.FAR_NORM_LOW``): the text of the partial index's ``WHERE``, which a query
    repeats verbatim to use the index. Its float32 norm is sqlite-vec's L2 distance to the
    zero vector."""
    return (
        f"NOT (vec_distance_l2(embedding, zeroblob({4 * dim})) "
        f"BETWEEN {FAR_NORM_LOW!r} AND {FAR_NORM_HIGH!r})"
    )


def _schema_v4(dim: int) -> Callable[[apsw.Connection], None]:
    """The partial index of far-norm vectors: SQLite keeps it on every write (a far row is
    rare, so it stays near empty), and a search finds them there without a scan."""

    def apply(conn: apsw.Connection) -> None:
        conn.execute(
            "CREATE INDEX IF NOT EXISTS memory_chunks_far_norm ON memory_chunks (tenant) "
            f"WHERE {far_norm_sql(dim)}"
        )

    return apply


def memory_migrations(dim: int) -> list[Migration]:
    return [
        Migration(1, _schema_v1(dim)),
        Migration(2, _schema_v2),
        Migration(3, _schema_v3),
        Migration(4, _schema_v4(dim)),
    ]
