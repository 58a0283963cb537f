"""The memory file's tables as the operator surface sees them, and the SQL only memory has:
the chunk/vector consistency ``check`` verifies and the vec0 rebuild that ``erase`` ends with.
"""

from __future__ import annotations

import re
from collections import Counter

import apsw

from ratatoskr.core.record_sql import Table
from ratatoskr.core.scope import Scope
from ratatoskr.sqlite.database import SchemaError, refuse_other_plane
from ratatoskr.sqlite.scope_sql import COLUMNS

CHUNKS = Table("chunk", "memory_chunks", "chunk_id", has_revision=True, has_origin=True)
TABLES = (CHUNKS,)
_SHOWN_IDS = 5
_ID_BATCH = 500  # ids per statement: SQLite's bound on parameters


_DECLARED_DIM = re.compile(r"float\[(\d+)\]")


def vector_problems(conn: apsw.Connection) -> list[str]:
    """Every chunk has exactly one ``memory_vec`` row: a chunk without one is invisible to
    unscoped search; an orphaned row is a result that cannot be read."""
    chunks = {r[0] for r in conn.execute("SELECT chunk_id FROM memory_chunks").fetchall()}
    vectors = Counter(r[0] for r in conn.execute("SELECT chunk_id FROM memory_vec").fetchall())
    problems: list[str] = []
    for what, ids in (
        ("chunk(s) without a memory_vec row", sorted(chunks - vectors.keys())),
        ("orphaned memory_vec row(s) without a chunk", sorted(vectors.keys() - chunks)),
        (
            "chunk(s) with more than one memory_vec row",
            sorted(k for k, n in vectors.items() if n > 1),
        ),
    ):
        if ids:
            shown = ", ".join(ids[:_SHOWN_IDS]) + (", ..." if len(ids) > _SHOWN_IDS else "")
            problems.append(f"{len(ids)} {what}: {shown}")
    return problems


def shape_problems(conn: apsw.Connection, dim: int) -> list[str]:
    """Every vector as long as the store's dimension says: the float32 bytes, the float64
    bytes, and the vector index's own declared dimension (a file whose recorded dimension
    was changed refuses every write)."""
    problems: list[str] = []
    made = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'memory_vec'").fetchall()
    declared = _DECLARED_DIM.search(str(made[0][0])) if made else None
    if declared is not None and int(declared.group(1)) != dim:
        problems.append(
            f"the vector index holds dimension {declared.group(1)}, the file records {dim}"
        )
    row = conn.execute(
        "SELECT coalesce(sum(length(embedding) <> ?), 0), "
        "coalesce(sum(vector_f64 IS NOT NULL AND length(vector_f64) <> ?), 0) "
        "FROM memory_chunks",
        (4 * dim, 8 * dim),
    ).fetchall()[0]
    if row[0]:
        problems.append(f"{row[0]} chunk(s) whose vector is not of dimension {dim}")
    if row[1]:
        problems.append(f"{row[1]} chunk(s) whose float64 vector has the wrong length")
    return problems


def rebuild_vector_index(conn: apsw.Connection) -> int:
    """Rebuild ``memory_vec`` from its own rows inside the caller's write transaction: drop
    and recreate the vec0 table with the statement it was made with, so its shadow tables
    hold no freed slot. Rows kept; their number."""
    made = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'memory_vec'").fetchall()
    conn.execute("DROP TABLE IF EXISTS temp.ratatoskr_vec_copy")
    conn.execute("CREATE TEMP TABLE ratatoskr_vec_copy (chunk_id TEXT PRIMARY KEY, v BLOB)")
    conn.execute("INSERT INTO temp.ratatoskr_vec_copy SELECT chunk_id, embedding FROM memory_vec")
    conn.execute("DROP TABLE memory_vec")
    conn.execute(made[0][0])
    conn.execute(
        "INSERT INTO memory_vec (chunk_id, embedding) "
        "SELECT chunk_id, v FROM temp.ratatoskr_vec_copy ORDER BY chunk_id"
    )
    conn.execute("DROP TABLE temp.ratatoskr_vec_copy")
    return int(conn.execute("SELECT count(*) FROM memory_vec").fetchall()[0][0])


def forget_logged_scopes(conn: apsw.Connection, ids: set[str], scope: Scope) -> int:
    """Remove the change log's entries that stored ``ids`` (each with the scope values it
    wrote), and every entry that stored a chunk in the erased subject's ``scope`` (a chunk
    deleted or moved out of it before the erase left such entries behind), inside erase's
    transaction. An entry that stored a chunk in ``scope`` is never one a mirror needs: the
    chunk's last entry is either a later one (it was moved or deleted) or one of ``ids``
    (it is erased now). The delete entries the erase itself logged stay, so every mirror
    still learns the chunks are gone. Entries removed."""
    removed = 0
    batch = sorted(ids)
    for lo in range(0, len(batch), _ID_BATCH):
        part = batch[lo : lo + _ID_BATCH]
        conn.execute(
            "DELETE FROM memory_changes WHERE (stored IS NULL OR stored <> 0) "
            f"AND chunk_id IN ({', '.join('?' * len(part))})",
            part,
        )
        removed += conn.changes()
    pairs = sorted(scope.items())
    if pairs:
        match = " AND ".join(f"{COLUMNS[axis]} = ?" for axis, _ in pairs)
        conn.execute(
            f"DELETE FROM memory_changes WHERE stored = 1 AND {match}",
            [value for _, value in pairs],
        )
        removed += conn.changes()
    return removed


def stored_dim(path: str) -> int:
    """The embedding dimension a memory file was created with, read without writing (so an
    operator rarely passes ``--dim``); ``ValueError`` when it cannot be opened."""
    try:
        conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error:
        raise ValueError("the memory database cannot be opened") from None
    try:
        rows = conn.execute("SELECT value FROM ratatoskr_meta WHERE key = 'embedding_dim'")
        found = rows.fetchall()
    except apsw.NotADBError:
        raise SchemaError("the file is not a SQLite database") from None
    except apsw.CorruptError:
        raise SchemaError(
            "the file is damaged (SQLite: database disk image is malformed); restore it from "
            "a backup or the replica"
        ) from None
    except apsw.Error:
        found = []
    finally:
        conn.close()
    if not found:
        refuse_other_plane(path, "memory")
        raise SchemaError("the file is not a memory database (no embedding_dim in ratatoskr_meta)")
    return int(found[0][0])
