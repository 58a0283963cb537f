"""The memory plane's PostgreSQL tables and their migrations (component ``memory``).

Every name starts with ``memory_``, so the affect plane and the jti ledger may share the
database. ``memory_chunks`` keeps what the SQLite table keeps: per chunk its revision, the
scope axes as indexed ``bytea`` columns (``postgres.scope_sql``), the vector as pgvector's
``vector(dim)`` (float32: what search ranks), its float64 bytes when float32 does not hold it
exactly, and the canonical JSON of the rest of the record as text.

With ``partitions`` (``RATATOSKR_PG_TENANT_PARTITIONS``) the chunks table is hash-partitioned
by tenant: a tenant's searches are pruned to one partition. PostgreSQL enforces uniqueness
on a partitioned table only on keys holding the partition key, so the primary key is
``(tenant, chunk_id)`` with a chunk without a tenant stored under the empty key (no valid
scope value is empty), and the store keeps a chunk id unique across tenants itself
(``store.py``: its writes lock the ids they touch).

The vector column is ``STORAGE PLAIN`` while a row fits a page (up to ``PLAIN_MAX_DIM``):
vectors moved out of line (TOAST) made exact scans 2.5-3x slower. No approximate index is
created; search never uses one even where an operator adds it (``search.py``). A partial
index holds the rows whose vector pgvector's float32 cosine cannot score (``FAR_NORM``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg

from ratatoskr.memory.search.ranking import FAR_NORM_HIGH, FAR_NORM_LOW
from ratatoskr.postgres.idempotency import create_table
from ratatoskr.postgres.migrations import Migration, ensure_vector
from ratatoskr.postgres.probe import meta_value
from ratatoskr.sqlite.scope_sql import COLUMNS

PLAIN_MAX_DIM = 2000  # 2,000 x 4 bytes + the row's other columns stay under a page (8 KiB)
Conn = psycopg.Connection[Any]


def _schema_v1(dim: int, partitions: int) -> Callable[[Conn], None]:
    def apply(conn: Conn) -> None:
        ensure_vector(conn)
        conn.execute("CREATE TABLE memory_meta (key text PRIMARY KEY, value text NOT NULL)")
        conn.execute(
            "INSERT INTO memory_meta VALUES ('plane', 'memory'), ('embedding_dim', %s), "
            "('tenant_partitions', %s)",
            (str(dim), str(partitions)),
        )
        key = "PRIMARY KEY (tenant, chunk_id)" if partitions else "PRIMARY KEY (chunk_id)"
        tenant = "tenant bytea NOT NULL" if partitions else "tenant bytea"
        split = " PARTITION BY HASH (tenant)" if partitions else ""
        conn.execute(
            f"""CREATE TABLE memory_chunks (
                chunk_id bytea NOT NULL,
                revision integer NOT NULL CHECK (revision >= 1),
                {tenant}, grp bytea, end_user bytea, agent_self bytea,
                origin bytea,
                scope_json text NOT NULL,
                updated_at double precision NOT NULL,
                embedding vector({int(dim)}) NOT NULL,
                vector_key text NOT NULL,
                vector_f64 bytea,
                record_json text NOT NULL,
                {key}
            ){split}"""
        )
        for remainder in range(partitions):
            conn.execute(
                f"CREATE TABLE memory_chunks_p{remainder} PARTITION OF memory_chunks "
                f"FOR VALUES WITH (MODULUS {partitions}, REMAINDER {remainder})"
            )
        if dim <= PLAIN_MAX_DIM:  # on a partitioned table: every partition too
            conn.execute("ALTER TABLE memory_chunks ALTER COLUMN embedding SET STORAGE PLAIN")
        if partitions:  # the primary key leads with the tenant; ids are looked up alone
            conn.execute("CREATE INDEX memory_chunks_chunk_id ON memory_chunks (chunk_id)")
        for column in COLUMNS.values():
            if not (partitions and column == "tenant"):
                conn.execute(f"CREATE INDEX memory_chunks_{column} ON memory_chunks ({column})")
        create_table(conn, "memory_idempotency")

    return apply


# the rows pgvector's float32 cosine cannot score (``ranking.FAR_NORM_LOW``); the norm in
# float64 (``vector_norm``); a query repeats this text verbatim to use the partial index
FAR_NORM = f"NOT (vector_norm(embedding) BETWEEN {FAR_NORM_LOW!r} AND {FAR_NORM_HIGH!r})"


def _schema_v2(conn: Conn) -> None:
    """The partial index of far-norm vectors: PostgreSQL keeps it on every write (a far row
    is rare, so it stays near empty), and a search finds them there without a scan."""
    conn.execute(
        f"CREATE INDEX memory_chunks_far_norm ON memory_chunks (chunk_id) WHERE {FAR_NORM}"
    )


def memory_migrations(dim: int, partitions: int = 0) -> list[Migration]:
    """The memory plane's migrations; ``dim`` and ``partitions`` shape the first one only
    (a database keeps the layout it was created with)."""
    return [Migration(1, _schema_v1(dim, partitions)), Migration(2, _schema_v2)]


def is_partitioned(conn: Conn) -> bool:
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_partitioned_table "
        "WHERE partrelid = 'memory_chunks'::regclass)"
    ).fetchone()
    return bool(row and row[0])


def stored_dim(url: str) -> int | None:
    """The embedding dimension the memory plane in the database at ``url`` was created
    with, read without opening a store; None when it holds no memory plane."""
    found = meta_value(url, "memory_meta", "embedding_dim")
    return None if found is None else int(found)
