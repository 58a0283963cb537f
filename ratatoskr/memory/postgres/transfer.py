"""The memory plane's rows between its SQLite file and PostgreSQL, as they are stored.

Rows move whole: revision, scope, times, the float32 vector, its float64 bytes when sent so,
the record's canonical JSON, and every idempotency entry, so a copy answers every call
(a replay, a revision check) exactly as the original would. ``admin migrate``
(``ops.migrate``) streams a file into PostgreSQL with ``chunk_batches`` and ``copy_chunks``,
in id order, so it can resume after the last id copied; a PostgreSQL store's backup is a
new SQLite file (``to_sqlite``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import apsw
import numpy as np

from ratatoskr.postgres import copy_binary as cb
from ratatoskr.postgres import transfer_rows
from ratatoskr.postgres.database import Conn
from ratatoskr.postgres.transfer_rows import IDEMPOTENCY_COLUMNS
from ratatoskr.postgres.vectors import parse_vector

CHUNK_COLUMNS = (
    "chunk_id, revision, tenant, grp, end_user, agent_self, origin, scope_json, updated_at, "
    "embedding, vector_key, vector_f64, record_json"
)
BATCH = 1000


def _text(value: Any) -> str | None:
    """A ``bytea`` column as text (an origin may be the empty string, as sent)."""
    return None if value is None else bytes(value).decode("utf-8")


def _axis(value: Any) -> str | None:
    """An axis column as text; the empty key (no tenant, in a partitioned table) as NULL,
    as the file keeps it (no axis value is empty)."""
    return None if value == b"" else _text(value)


def _file_row(row: Any) -> tuple[Any, ...]:
    """A ``memory_chunks`` row read from PostgreSQL as the file stores it."""
    cid, rev, tenant, grp, user, agent, origin, scope, at, emb, key, f64, record = row
    return (
        _text(cid),
        rev,
        _axis(tenant),
        _axis(grp),
        _axis(user),
        _axis(agent),
        _text(origin),
        scope,
        at,
        parse_vector(emb).tobytes(),
        key,
        None if f64 is None else bytes(f64),
        record,
    )


# -- SQLite -> PostgreSQL -------------------------------------------------------------------


def chunk_batches(
    lite: apsw.Connection, after: str | None, batch: int = BATCH
) -> Iterator[list[Any]]:
    """The file's chunks in id order, strictly after ``after``, ``batch`` at a time."""
    last = after
    while True:
        where, args = ("WHERE chunk_id > ?", [last]) if last is not None else ("", [])
        rows = lite.execute(
            f"SELECT {CHUNK_COLUMNS} FROM memory_chunks {where} ORDER BY chunk_id LIMIT ?",
            (*args, batch),
        ).fetchall()
        if not rows:
            return
        yield rows
        last = rows[-1][0]


def chunks_payload(rows: list[Any], partitioned: bool = False) -> bytes:
    parts = [cb.HEADER]
    for cid, rev, tenant, grp, user, agent, origin, scope, at, emb, key, f64, record in rows:
        parts += [
            cb.row(13),
            cb.text(cid),
            cb.int4(rev),
            cb.text("" if tenant is None and partitioned else tenant),
            cb.text(grp),
            cb.text(user),
            cb.text(agent),
            cb.text(origin),
            cb.text(scope),
            cb.float8(at),
            cb.vector(np.frombuffer(emb, dtype=np.float32)),
            cb.text(key),
            cb.raw(None if f64 is None else bytes(f64)),
            cb.text(record),
        ]
    parts.append(cb.TRAILER)
    return b"".join(parts)


def copy_chunks(pg: Conn, rows: list[Any], partitioned: bool = False) -> None:
    cb.copy_in(pg, "memory_chunks", CHUNK_COLUMNS, chunks_payload(rows, partitioned))


# the tables ``admin migrate`` copies batch by batch, in order (then the idempotency
# entries whole): the names its progress marker records
COPIED_TABLES = ("memory_chunks",)


def rows_held(pg: Conn) -> int:
    """The plane's records and idempotency entries in the database (0: nothing to clash
    with a migration into it)."""
    return transfer_rows.rows_in(pg, (*COPIED_TABLES, "memory_idempotency"))


def replace_idempotency(pg: Conn, lite: apsw.Connection) -> int:
    """The file's idempotency entries in place of any in the database."""
    return transfer_rows.replace_idempotency(pg, lite, "memory_idempotency")


# -- PostgreSQL -> SQLite -------------------------------------------------------------------


def to_sqlite(pg: Conn, lite: apsw.Connection) -> int:
    """Every chunk, vector row and idempotency entry of ``pg`` (read in its snapshot) into
    the empty tables of ``lite`` (inside its write transaction); the chunks copied."""
    copied = 0
    with pg.cursor(name="ratatoskr_memory_copy", binary=True) as cur:
        cur.execute(f"SELECT {CHUNK_COLUMNS} FROM memory_chunks ORDER BY chunk_id")
        while rows := cur.fetchmany(BATCH):
            lite_rows = [_file_row(row) for row in rows]
            lite.executemany(
                f"INSERT INTO memory_chunks ({CHUNK_COLUMNS}) VALUES "
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                lite_rows,
            )
            lite.executemany(
                "INSERT INTO memory_vec (chunk_id, embedding) VALUES (?, ?)",
                [(r[0], r[9]) for r in lite_rows],
            )
            copied += len(lite_rows)
    entries = pg.execute(f"SELECT {IDEMPOTENCY_COLUMNS} FROM memory_idempotency").fetchall()
    lite.executemany(
        f"INSERT INTO memory_idempotency ({IDEMPOTENCY_COLUMNS}) VALUES (?, ?, ?, ?)", entries
    )
    return copied


# -- the check after a copy -------------------------------------------------------------


def _digest_row(h: Any, values: tuple[Any, ...]) -> None:
    for value in values:
        data = (
            b"\x00"
            if value is None
            else str(value).encode()
            if not isinstance(value, bytes)
            else value
        )
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)


def sqlite_digest(lite: apsw.Connection) -> tuple[int, str]:
    """(chunks + entries, SHA-256 over every stored value) of the file's memory plane."""
    h = hashlib.sha256()
    count = 0
    for row in lite.execute(f"SELECT {CHUNK_COLUMNS} FROM memory_chunks ORDER BY chunk_id"):
        _digest_row(h, tuple(bytes(v) if isinstance(v, memoryview) else v for v in row))
        count += 1
    for row in lite.execute(
        f"SELECT {IDEMPOTENCY_COLUMNS} FROM memory_idempotency ORDER BY idempotency_id"
    ):
        _digest_row(h, tuple(row))
        count += 1
    return count, h.hexdigest()


def pg_digest(pg: Conn) -> tuple[int, str]:
    """``sqlite_digest`` of the same plane in PostgreSQL (read in ``pg``'s snapshot)."""
    h = hashlib.sha256()
    count = 0
    with pg.cursor(name="ratatoskr_memory_check", binary=True) as cur:
        cur.execute(f"SELECT {CHUNK_COLUMNS} FROM memory_chunks ORDER BY chunk_id")
        while rows := cur.fetchmany(BATCH):
            for row in rows:
                _digest_row(h, _file_row(row))
                count += 1
    for row in pg.execute(
        f'SELECT {IDEMPOTENCY_COLUMNS} FROM memory_idempotency ORDER BY idempotency_id COLLATE "C"'
    ).fetchall():
        _digest_row(h, tuple(row))
        count += 1
    return count, h.hexdigest()
