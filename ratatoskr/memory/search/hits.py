"""A search's hits, and the proof that lets a search skip SQLite altogether.

Hits are built from what the mirror holds (``Gathered``, below: the revision, the
vector key, the record JSON when short, the embedding as a list); only a record the mirror does not
hold, or an embedding that was sent in float64, is read from the file.

A search normally opens a read transaction and reads the change log's head, to rank on the
mirror as of that snapshot (``engine.py``). ``CurrentMark`` skips that when nothing can have
changed: it notes per thread the connection, SQLite's data version of that snapshot, the
log's head and the changes past the mirror then (a ``ChangeView``, or none). A later search
on the same thread runs ``PRAGMA data_version`` (a statement is its own read transaction, so
the connection looks at the file's WAL header again). When the data version is the same (it
changes with every commit to the file, by this connection, another one, or another
process), the file is still at that head, and the search ranks on the mirror, under its
lock, whenever that proves the mirror holds the file at that head:

- the mirror is at the head (its ``seq``): the worker may have applied the view's changes
  since the mark was noted, or regrouped, or loaded again;
- or the mirror is where the view starts, and the view ends at the head: the view's
  chunks are left out of the mirror and ranked beside it, whatever the worker has already
  published of them.

Neither holds when the mirror may hold changes past the head (``VectorMirror.published``):
a commit after the check, read and partly published by the worker before the search took
the lock. Such a search takes the read transaction, as does any search the mark cannot
prove current: it sees every write acknowledged before it began.
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

import apsw
import numpy as np
import orjson

from ratatoskr.memory import rules
from ratatoskr.sqlite.scope_sql import placeholders


class Gathered(NamedTuple):
    """What the mirror holds of a search's hits, copied under its lock: per hit (in
    ``ranked`` order) the revision and the record JSON (``None``: not held); when the
    embedding is wanted, the hits' float32 rows as lists of floats (``vectors``: built
    under the lock, as the rows may change after it), the key each vector goes
    back under (``keys``) and whether it was sent as float64 (``wide``: then its exact
    values are only in the file). ``keys`` and ``wide`` are empty without ``vectors``. A
    named tuple: made once per search, it costs less than a frozen dataclass."""

    ranked: list[tuple[str, float]]
    revisions: list[int]
    keys: list[str]
    records: list[str | None]
    wide: list[bool]
    vectors: list[list[float]] | None

    def unheld(self) -> list[str]:
        """The hits to read from SQLite: a record not held, or an embedding stored in
        float64 (the mirror has only its float32 rounding)."""
        if None not in self.records and True not in self.wide:
            return []  # the common case, without a pass in Python
        wide = self.wide or [False] * len(self.records)
        return [
            cid
            for (cid, _), record, sent_wide in zip(self.ranked, self.records, wide, strict=True)
            if record is None or sent_wide
        ]


def stored_record(
    vector_key: str, blob: bytes, vector_f64: bytes | None, record_json: str, with_vector: bool
) -> Any:
    """Reassemble a stored record: its JSON plus its vector, as sent (float64 when the
    values were not float32-exact, else the float32 blob widened, which is the same)."""
    record = orjson.loads(record_json)
    if with_vector:
        exact = vector_f64 if vector_f64 is not None else blob
        dtype = np.float64 if vector_f64 is not None else np.float32
        record[vector_key] = np.frombuffer(exact, dtype=dtype).tolist()
    return record


Row = tuple[str, int, str, Any, Any, str]  # chunk_id, revision, key, f32, f64, record JSON


def fetch_rows(conn: apsw.Connection, ids: list[str], include_embedding: bool) -> dict[str, Row]:
    """The stored rows of ``ids`` (one statement: one snapshot), by id."""
    vectors = "embedding, vector_f64" if include_embedding else "NULL, NULL"
    rows = conn.execute(
        f"SELECT chunk_id, revision, vector_key, {vectors}, record_json "
        f"FROM memory_chunks WHERE chunk_id IN ({placeholders(len(ids))})",
        ids,
    ).fetchall()
    return {r[0]: r for r in rows}


def hit_from_row(row: Row, score: float, include_embedding: bool) -> dict[str, Any]:
    record = stored_record(row[2], row[3], row[4], row[5], include_embedding)
    return rules.search_hit(record, row[0], score, row[1], include_embedding)


def mirror_hits(
    gathered: Gathered, include_embedding: bool, fetched: dict[str, Row]
) -> list[dict[str, Any]]:
    """The hits of ``gathered``; ``fetched`` holds the rows of its ``unheld`` ids, read in
    a snapshot the mirror was current with."""
    vectors = gathered.vectors
    hits = []
    for i, (cid, score) in enumerate(gathered.ranked):
        row = fetched.get(cid) if fetched else None
        if row is not None:
            hits.append(hit_from_row(row, score, include_embedding))
            continue
        record = orjson.loads(gathered.records[i])  # type: ignore[arg-type]  # held: not None
        if vectors is not None:
            record[gathered.keys[i]] = vectors[i]
        hits.append(rules.search_hit(record, cid, score, gathered.revisions[i], include_embedding))
    return hits


class CurrentMark:
    """Per thread: the connection, its data version, the log's head and the changes past
    the mirror at the last snapshot a search ranked the mirror in (see the module's
    docstring)."""

    def __init__(self) -> None:
        self._local = threading.local()

    def note(self, conn: apsw.Connection, head: int, view: Any = None) -> None:
        """Call inside a read transaction whose log head is ``head``; ``view``: the changes
        past the mirror at that snapshot (``overlay.ChangeView``), ``None`` when the mirror
        was at the head."""
        # with a cursor of its own for ``check``: a fresh one per statement costs ~0.7 µs
        self._local.mark = (conn, conn.data_version(), head, conn.cursor(), view)

    def check(self, conn: apsw.Connection) -> tuple[int, int, Any] | None:
        """(data version, log head, view) of the mark when the file has not changed since
        it was noted, else ``None``. The caller compares the head with the mirror under
        its lock. Raises ``apsw.Error`` when the file cannot be read."""
        mark = getattr(self._local, "mark", None)
        if mark is None or mark[0] is not conn or not conn.get_autocommit():
            return None
        mark[3].execute("PRAGMA data_version").fetchall()  # a read: the WAL header is looked at
        version = conn.data_version()
        return (version, mark[2], mark[4]) if version == mark[1] else None
