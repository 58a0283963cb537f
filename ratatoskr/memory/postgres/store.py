"""The memory plane's store on PostgreSQL + pgvector: the SQLite store's rules, shared data.

Validation and confinement are the plane's (``memory.calls``: parse, then confine), run
before any statement; this store writes only the halves that touch storage. A write is one
``REPEATABLE READ`` transaction (``PgDatabase.write``): the idempotency check, the
revisions and scopes of the batch's ids, the optimistic-locking check, the rows, the
idempotency entry; committed whole, or rolled back whole. Two servers writing one id at
once meet as a serialization failure, retried inside the store, so exactly one
``expected_revisions`` race wins. The rows go in through binary ``COPY`` (``copy.py``).

Search is exact SQL on every call (``search.py``): nothing is held per process, so a write
acknowledged by one server is seen at once by a search on any other.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson

from ratatoskr.core.context import CallContext
from ratatoskr.core.idempotency import CLASS_TTL_SECONDS, idempotency_id
from ratatoskr.core.overwrites import check_overwrites
from ratatoskr.core.scope import contains
from ratatoskr.memory import rules
from ratatoskr.memory.calls import MemoryCalls
from ratatoskr.memory.postgres.admin import PgMemoryAdmin
from ratatoskr.memory.postgres.copy import Existing, write_chunks
from ratatoskr.memory.postgres.locks import lock_keys
from ratatoskr.memory.postgres.schema import is_partitioned, memory_migrations
from ratatoskr.memory.postgres.search import search_hits
from ratatoskr.memory.search.hits import stored_record
from ratatoskr.postgres.database import Conn, PgDatabase, PgSettings
from ratatoskr.postgres.health import check_pg_health
from ratatoskr.postgres.idempotency import PgIdempotency
from ratatoskr.postgres.scope_sql import keys
from ratatoskr.postgres.vectors import parse_vector
from ratatoskr.sqlite.database import SchemaError

_idem = PgIdempotency("memory_idempotency")


def revisions_and_scopes(conn: Conn, ids: list[str], *, lock: bool = False) -> Existing:
    rows = conn.execute(
        "SELECT chunk_id, revision, scope_json FROM memory_chunks WHERE chunk_id = ANY(%s)"
        + (" FOR UPDATE" if lock else ""),
        (keys(ids),),
    ).fetchall()
    return {bytes(cid).decode("utf-8"): (rev, orjson.loads(scope)) for cid, rev, scope in rows}


class PgMemoryStore(MemoryCalls, PgMemoryAdmin):
    """The memory plane over one PostgreSQL database. Safe to call from many threads."""

    def __init__(
        self, db: PgDatabase, embedding_dim: int, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.db = db
        self.embedding_dim = embedding_dim
        self.clock = clock
        self.partitioned = db.once(is_partitioned)

    # -- descriptor and health -----------------------------------------------------------

    def describe_store(self) -> dict[str, Any]:
        return {**rules.CAPABILITIES, "filterable_metadata_fields": []}

    def health(self) -> dict[str, Any]:
        """Ok, degraded or down, with a reason that never holds a host or a secret."""
        now = self.clock()
        return check_pg_health(
            self.db,
            lambda conn: _idem.count(conn, now),
            lambda conn: conn.execute("SELECT '[1]'::vector").fetchone(),
        )

    # -- writes --------------------------------------------------------------------------

    def upsert_parsed(self, call: rules.UpsertCall, ctx: CallContext) -> dict[str, Any]:
        """The write half of ``upsert_many``, for callers (the plane) that validated already."""
        ids = [c.chunk_id for c in call.chunks]
        iid = idempotency_id("upsert_many", ctx.actor, call.idempotency_key)

        def write(conn: Conn) -> dict[str, Any]:
            if self.partitioned:
                lock_keys(conn, [iid, *ids])
            now = self.clock()
            if _idem.is_replay(conn, iid, call.digest.value, now, call.digest.matches):
                return {"upserted": len(ids), "replayed": True}
            existing = revisions_and_scopes(conn, ids, lock=True)
            check_overwrites(existing, ctx.scope, call.expected_revisions)
            write_chunks(conn, call.chunks, existing, now, partitioned=self.partitioned)
            ttl = CLASS_TTL_SECONDS[call.idempotency_class]
            _idem.remember(conn, iid, call.digest.value, ids, now + ttl)
            return {"upserted": len(ids), "replayed": False}

        return self.db.write(write, committed_reads=self.partitioned)

    def delete_many(self, ids: list[str], *, ctx: CallContext | None = None) -> dict[str, int]:
        wanted = rules.check_ids(ids)
        token_scope = ctx.scope if ctx else {}

        def delete(conn: Conn) -> dict[str, int]:
            if self.partitioned:
                lock_keys(conn, wanted)
            found = revisions_and_scopes(conn, wanted, lock=True)
            doomed = [cid for cid, (_, scope) in found.items() if contains(scope, token_scope)]
            if doomed:
                conn.execute("DELETE FROM memory_chunks WHERE chunk_id = ANY(%s)", (keys(doomed),))
            return {"deleted": len(doomed)}

        return self.db.write(delete, committed_reads=self.partitioned)

    # -- reads ---------------------------------------------------------------------------

    def get_many(self, ids: list[str], *, ctx: CallContext | None = None) -> list[dict[str, Any]]:
        wanted = rules.check_ids(ids)
        token_scope = ctx.scope if ctx else {}
        rows = self.db.once(
            lambda conn: conn.execute(
                "SELECT chunk_id, revision, scope_json, vector_key, embedding, vector_f64, "
                "record_json FROM memory_chunks WHERE chunk_id = ANY(%s)",
                (keys(wanted),),
                binary=True,
            ).fetchall()
        )
        by_id = {}
        for cid, revision, scope, key, embedding, f64, record_json in rows:
            if contains(orjson.loads(scope), token_scope):
                exact = bytes(f64) if f64 is not None else None
                vector = parse_vector(embedding).tobytes()
                record = stored_record(key, vector, exact, record_json, True)
                by_id[bytes(cid).decode("utf-8")] = rules.with_revision(record, revision)
        return [by_id[cid] for cid in wanted if cid in by_id]

    def search_parsed(self, call: rules.SearchCall) -> list[dict[str, Any]]:
        """The read half of ``search``: ``call`` is validated and already confined."""
        # one statement is its own snapshot: no transaction, unless the cut is crowded and
        # needs a second statement (then both run in one read-only snapshot)
        split = self.partitioned
        hits = self.db.once(lambda conn: search_hits(conn, call, snapshot=False, partitioned=split))
        if hits is None:
            hits = self.db.read(lambda conn: search_hits(conn, call, partitioned=split))
        assert hits is not None
        return hits

    def search_quick(self, call: rules.SearchCall) -> list[dict[str, Any]] | None:
        """Never on the event loop: every search here waits on the network."""
        return None

    def close(self) -> None:
        self.db.close()


def open_pg_memory_store(
    url: str,
    *,
    embedding_dim: int,
    settings: PgSettings | None = None,
    clock: Callable[[], float] = time.time,
) -> PgMemoryStore:
    """Open (creating its tables on first use) the memory store in the database at ``url``.

    ``SchemaError`` when the database was created for another embedding dimension."""
    if isinstance(embedding_dim, bool) or not isinstance(embedding_dim, int) or embedding_dim < 1:
        raise ValueError("embedding_dim must be a positive integer")
    settings = settings or PgSettings.from_env()
    db = PgDatabase(
        url, "memory", memory_migrations(embedding_dim, settings.tenant_partitions), settings
    )
    row = db.once(
        lambda conn: conn.execute(
            "SELECT value FROM memory_meta WHERE key = 'embedding_dim'"
        ).fetchone()
    )
    if row is None or int(row[0]) != embedding_dim:
        db.close()
        raise SchemaError(
            f"the memory database was created with embedding_dim={row[0] if row else '?'}, "
            f"not {embedding_dim}"
        )
    return PgMemoryStore(db, embedding_dim, clock=clock)
