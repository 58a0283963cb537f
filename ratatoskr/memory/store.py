"""The memory plane's store: chunks verbatim in SQLite, vectors in sqlite-vec, exact search.

One file, ``RATATOSKR_MEMORY_DB``; its tables are in ``schema.py``. Searches are answered
by ``search.engine`` (the mirror, else SQL), exactly as the reference store ranks.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

import apsw
import orjson

from ratatoskr.core.context import CallContext
from ratatoskr.core.errors import InvalidArguments
from ratatoskr.core.overwrites import check_overwrites
from ratatoskr.core.scope import contains
from ratatoskr.memory import rules
from ratatoskr.memory.admin import MemoryAdmin
from ratatoskr.memory.calls import MemoryCalls
from ratatoskr.memory.schema import memory_migrations
from ratatoskr.memory.search.engine import SearchEngine
from ratatoskr.memory.search.hits import stored_record
from ratatoskr.memory.search.mirror import VectorMirror, mirror_budget_from_env
from ratatoskr.sqlite.database import Database, DatabaseSettings, SchemaError
from ratatoskr.sqlite.health import check_health
from ratatoskr.sqlite.idempotency import (
    CLASS_TTL_SECONDS,
    IdempotencyTable,
    idempotency_id,
)
from ratatoskr.sqlite.scope_sql import COLUMNS, placeholders, scope_condition

CHANGES_KEPT = 200_000
PAGE_SIZE = 65536  # for new files; an existing file keeps the page size it was made with
# sqlite-vec's ``vec0`` stores vectors in blocks of this many slots, each allocated whole
# (its ``chunk_size``): the first chunk stored makes the file grow by one block
VEC_BLOCK_SLOTS = 1024
_idem = IdempotencyTable("memory_idempotency")


def _chunk_rows(
    chunks: list[rules.Chunk], existing: dict[str, tuple[int, dict[str, str]]], now: float
) -> Iterator[tuple[Any, ...]]:
    """``memory_chunks`` rows of a batch, made as SQLite asks for them. Vectors are bound as
    the float32 arrays themselves (apsw reads their buffer), not copied to bytes first."""
    sort_keys = orjson.OPT_SORT_KEYS
    for c in chunks:
        scope = c.scope
        known = existing.get(c.chunk_id)
        yield (
            c.chunk_id,
            known[0] + 1 if known else 1,
            scope.get("tenant"),
            scope.get("group"),
            scope.get("end_user"),
            scope.get("agent_self"),
            c.origin,
            orjson.dumps(scope, option=sort_keys).decode(),
            now,
            c.vector,
            c.vector_key,
            c.exact,
            c.rest_json.decode(),
        )


class RatatoskrMemoryStore(MemoryCalls, MemoryAdmin):
    """The memory plane over one SQLite file. Safe to call from many threads. Its operator
    methods (``core.admin.AdminStore``) come from ``MemoryAdmin``."""

    IDEMPOTENCY = _idem

    def __init__(
        self,
        db: Database,
        embedding_dim: int,
        *,
        clock: Callable[[], float] = time.time,
        mirror_bytes: int | None = None,
    ) -> None:
        self.db = db
        self.embedding_dim = embedding_dim
        self.clock = clock
        budget = mirror_budget_from_env() if mirror_bytes is None else mirror_bytes
        self.mirror = VectorMirror(embedding_dim, budget) if budget > 0 else None
        self.engine = SearchEngine(db, embedding_dim, self.mirror)

    # -- descriptor and health -----------------------------------------------------------

    def describe_store(self) -> dict[str, Any]:
        return {**rules.CAPABILITIES, "filterable_metadata_fields": []}

    def health(self) -> dict[str, Any]:
        """Ok, degraded or down, with a reason that never holds a path or a secret."""
        health = check_health(
            self.db,
            lambda conn: _idem.count(conn, self.clock()),
            lambda conn: conn.execute("SELECT vec_version()").fetchall(),
        )
        return self.engine.health(health)  # degraded while the search mirror loads

    def bytes_for_first_chunk(self) -> int | None:
        """The size the file reaches once its first chunk is stored (a ``vec0`` block of
        float32 vectors, a couple of pages for the rows), for a size cap checked at start;
        ``None`` when it holds chunks already."""
        with self.db.read() as conn:
            if conn.execute("SELECT EXISTS (SELECT 1 FROM memory_chunks)").fetchall()[0][0]:
                return None
            pages = int(conn.execute("PRAGMA page_count").fetchall()[0][0])
            page = int(conn.execute("PRAGMA page_size").fetchall()[0][0])
        return (pages + 2) * page + VEC_BLOCK_SLOTS * 4 * self.embedding_dim

    # -- writes ----------------------------------------------------------------------

    def upsert_parsed(self, call: rules.UpsertCall, ctx: CallContext) -> dict[str, Any]:
        """The write half of ``upsert_many``, for callers (the plane) that validated already."""
        ids = [c.chunk_id for c in call.chunks]
        iid = idempotency_id("upsert_many", ctx.actor, call.idempotency_key)
        with self.db.write() as conn:
            now = self.clock()
            if _idem.is_replay(conn, iid, call.digest.value, now, call.digest.matches):
                return {"upserted": len(ids), "replayed": True}
            existing = self._revisions_and_scopes(conn, ids)
            check_overwrites(existing, ctx.scope, call.expected_revisions)
            conn.executemany(
                """INSERT INTO memory_chunks (chunk_id, revision, tenant, grp, end_user,
                       agent_self, origin, scope_json, updated_at, embedding, vector_key,
                       vector_f64, record_json)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT (chunk_id) DO UPDATE SET revision = excluded.revision,
                       tenant = excluded.tenant, grp = excluded.grp,
                       end_user = excluded.end_user, agent_self = excluded.agent_self,
                       origin = excluded.origin, scope_json = excluded.scope_json,
                       updated_at = excluded.updated_at, embedding = excluded.embedding,
                       vector_key = excluded.vector_key, vector_f64 = excluded.vector_f64,
                       record_json = excluded.record_json""",
                _chunk_rows(call.chunks, existing, now),
            )
            # one statement for the batch's change log (500 executemany steps cost ~0.7 ms),
            # with the scope axes as just written (``schema.py``)
            conn.execute(
                "INSERT INTO memory_changes (chunk_id, tenant, grp, end_user, agent_self, "
                "stored) SELECT chunk_id, tenant, grp, end_user, agent_self, 1 "
                "FROM memory_chunks WHERE chunk_id IN (SELECT value FROM json_each(?))",
                (orjson.dumps(ids).decode(),),
            )
            # vec0 has no working INSERT OR REPLACE before 0.1.10. A rewrite is an UPDATE in
            # place: a delete then insert leaves a hole in one of vec0's 1,024-slot chunks and
            # fills another, and a chunk is freed only when all its slots are empty, so a
            # store that only rewrites its chunks would grow its file without end.
            conn.executemany(
                "UPDATE memory_vec SET embedding = ? WHERE chunk_id = ?",
                ((c.vector, c.chunk_id) for c in call.chunks if c.chunk_id in existing),
            )
            conn.executemany(
                "INSERT INTO memory_vec (chunk_id, embedding) VALUES (?, ?)",
                ((c.chunk_id, c.vector) for c in call.chunks if c.chunk_id not in existing),
            )
            ttl = CLASS_TTL_SECONDS[call.idempotency_class]
            _idem.remember(conn, iid, call.digest.value, ids, now + ttl)
            self._prune_changes(conn)
        return {"upserted": len(ids), "replayed": False}

    def delete_many(self, ids: list[str], *, ctx: CallContext | None = None) -> dict[str, int]:
        wanted = rules.check_ids(ids)
        token_scope = ctx.scope if ctx else {}
        with self.db.write() as conn:
            found = self._revisions_and_scopes(conn, wanted)
            doomed = [cid for cid, (_, scope) in found.items() if contains(scope, token_scope)]
            self._delete_chunks(conn, doomed)
        return {"deleted": len(doomed)}

    def _delete_chunks(self, conn: apsw.Connection, ids: Sequence[str]) -> None:
        """Every delete of chunks, the verb's and the operator's: the chunk rows, their
        vector rows; the DELETE trigger logs each in ``memory_changes`` for the mirrors."""
        rows = [(i,) for i in ids]
        conn.executemany("DELETE FROM memory_chunks WHERE chunk_id = ?", rows)
        conn.executemany("DELETE FROM memory_vec WHERE chunk_id = ?", rows)
        self._prune_changes(conn)

    # -- reads -----------------------------------------------------------------------

    def get_many(self, ids: list[str], *, ctx: CallContext | None = None) -> list[dict[str, Any]]:
        wanted = rules.check_ids(ids)
        token_scope = ctx.scope if ctx else {}
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT chunk_id, revision, scope_json, vector_key, embedding, vector_f64, "
                f"record_json FROM memory_chunks WHERE chunk_id IN ({placeholders(len(wanted))})",
                wanted,
            ).fetchall()
        by_id = {
            row[0]: rules.with_revision(stored_record(row[3], row[4], row[5], row[6], True), row[1])
            for row in rows
            if contains(orjson.loads(row[2]), token_scope)
        }
        return [by_id[cid] for cid in wanted if cid in by_id]

    def search_parsed(self, call: rules.SearchCall) -> list[dict[str, Any]]:
        """The read half of ``search``: ``call`` is validated and already confined."""
        hits = self.engine.search(call)
        assert hits is not None  # only the quick mode declines
        return hits

    def search_quick(self, call: rules.SearchCall) -> list[dict[str, Any]] | None:
        """``search_parsed`` when it is cheap for sure, else ``None`` with nothing done.

        The wire runs this on its event loop, which saves the threadpool hand-off (about a
        third of a small scoped search's cost); the bounds are in ``search.engine``."""
        return self.engine.search(call, quick=True)

    # -- internals -------------------------------------------------------------------

    def _revisions_and_scopes(
        self, conn: apsw.Connection, ids: list[str]
    ) -> dict[str, tuple[int, dict[str, str]]]:
        rows = conn.execute(
            "SELECT chunk_id, revision, scope_json FROM memory_chunks "
            f"WHERE chunk_id IN ({placeholders(len(ids))})",
            ids,
        ).fetchall()
        return {cid: (rev, orjson.loads(scope)) for cid, rev, scope in rows}

    @staticmethod
    def _prune_changes(conn: apsw.Connection) -> None:
        """Keep the change log bounded; a mirror that falls further behind reloads whole."""
        conn.execute(
            "DELETE FROM memory_changes WHERE seq <= (SELECT max(seq) FROM memory_changes) - ?",
            (CHANGES_KEPT,),
        )

    def close(self) -> None:
        self.engine.close()  # stops the mirror worker first (mid-load too)
        self.db.close()


def open_memory_store(
    db_path: str,
    *,
    embedding_dim: int,
    settings: DatabaseSettings | None = None,
    clock: Callable[[], float] = time.time,
    mirror_bytes: int | None = None,
) -> RatatoskrMemoryStore:
    """Open (creating on first use) the memory store at ``db_path`` or ``":memory:"``.

    ``mirror_bytes`` caps the per-process search mirror (default from
    ``RATATOSKR_MEMORY_MIRROR_BYTES``); ``0`` searches in SQL only.
    """
    if isinstance(embedding_dim, bool) or not isinstance(embedding_dim, int) or embedding_dim < 1:
        raise ValueError("embedding_dim must be a positive integer")
    if db_path != ":memory:":
        directory = os.path.dirname(os.path.abspath(db_path))
        if not os.path.isdir(directory) or not os.access(directory, os.W_OK):
            raise ValueError("the memory database directory does not exist or is not writable")
    settings = settings or DatabaseSettings()
    if settings.page_size is None:  # a new file's pages hold whole 768-d vectors
        settings = replace(settings, page_size=PAGE_SIZE)
    db = Database(db_path, memory_migrations(embedding_dim), settings, plane="memory")
    with db.read() as conn:
        stored = conn.execute(
            "SELECT value FROM ratatoskr_meta WHERE key = 'embedding_dim'"
        ).fetchall()
    if int(stored[0][0]) != embedding_dim:
        db.close()
        raise SchemaError(
            f"the memory database was created with embedding_dim={stored[0][0]}, "
            f"not {embedding_dim}"
        )
    return RatatoskrMemoryStore(db, embedding_dim, clock=clock, mirror_bytes=mirror_bytes)


__all__ = [
    "COLUMNS",
    "InvalidArguments",
    "RatatoskrMemoryStore",
    "open_memory_store",
    "scope_condition",
]
