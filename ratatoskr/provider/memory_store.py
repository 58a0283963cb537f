"""The memory plane's store: chunks verbatim in SQLite, vectors in sqlite-vec, exact search.

Layout (one file, ``RATATOSKR_MEMORY_DB``):

- ``memory_chunks``: the verbatim record (canonical JSON), its revision, the scope axes as
  indexed columns and the float32 vector, placed before the record so a scan never walks
  the record's overflow pages;
- ``memory_vec``: the sqlite-vec ``vec0`` index (cosine) used for unscoped nearest-neighbour;
- ``memory_idempotency``: the replay-or-conflict cache.

Scoped search never post-filters a fixed-k result (sqlite-vec would come back short): the
scope is a SQL ``WHERE`` over B-tree indexed axis columns, ``scope_any`` an ``OR`` of
conjunctions, ranked by ``vec_distance_cosine`` inside the same query. The float32 ranking
picks candidates with a margin; final scores are recomputed in float64 (``cosine.py``) so
ties and near-ties order exactly as the reference store orders them.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import apsw
import numpy as np
import orjson

from ratatoskr.provider import memory_rules as rules
from ratatoskr.provider.cosine import cosine_scores, rank
from ratatoskr.storage.database import Database, DatabaseSettings, Migration, SchemaError
from ratatoskr.storage.idempotency import CLASS_TTL_SECONDS, IdempotencyTable, idempotency_id
from ratatoskr.wire.context import CallContext
from ratatoskr.wire.errors import InvalidArguments, RevisionMismatch, ScopeForbidden
from ratatoskr.wire.scope import AXES, Scope, contains

if TYPE_CHECKING:
    from starlette.applications import Starlette

COLUMNS = {"tenant": "tenant", "group": "grp", "end_user": "end_user", "agent_self": "agent_self"}
CANDIDATE_MARGIN = 8
DISTANCE_EPSILON = 2e-4
VEC_MAX_K = 4096
IDEMPOTENCY_BACKLOG_BOUND = 100_000
DISK_DEGRADED_FRACTION = 0.95
_idem = IdempotencyTable("memory_idempotency")


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
                record_json TEXT NOT NULL
            )"""
        )
        for column in COLUMNS.values():
            conn.execute(f"CREATE INDEX memory_chunks_{column} ON memory_chunks({column})")
        conn.execute(
            "CREATE VIRTUAL TABLE memory_vec USING vec0("
            f"chunk_id TEXT PRIMARY KEY, embedding float[{dim}] distance_metric=cosine)"
        )
        from ratatoskr.storage.idempotency import create_table

        create_table(conn, "memory_idempotency")

    return apply


def memory_migrations(dim: int) -> list[Migration]:
    return [Migration(1, _schema_v1(dim))]


def _placeholders(n: int) -> str:
    return ",".join("?" * n)


def scope_condition(scope_all: Scope, scope_any: Sequence[Scope]) -> tuple[str, list[str]]:
    """The composed filter as SQL over the axis columns (``1`` when it admits everything)."""
    clauses: list[str] = []
    params: list[str] = []
    for axis, value in sorted(scope_all.items()):
        clauses.append(f"{COLUMNS[axis]} = ?")
        params.append(value)
    if scope_any and all(element for element in scope_any):
        branches = []
        for element in scope_any:
            branches.append("(" + " AND ".join(f"{COLUMNS[a]} = ?" for a in sorted(element)) + ")")
            params.extend(element[a] for a in sorted(element))
        clauses.append("(" + " OR ".join(branches) + ")")
    return (" AND ".join(clauses) or "1"), params


class RatatoskrMemoryStore:
    """The memory plane over one SQLite file. Safe to call from many threads."""

    def __init__(
        self,
        db: Database,
        embedding_dim: int,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.db = db
        self.embedding_dim = embedding_dim
        self.clock = clock

    # -- descriptor and health -----------------------------------------------------------

    def describe_store(self) -> dict[str, Any]:
        return {**rules.CAPABILITIES, "filterable_metadata_fields": []}

    def health(self) -> dict[str, Any]:
        """Ok, degraded or down, with a reason that never holds a path or a secret."""
        try:
            with self.db.read() as conn:
                conn.execute("SELECT vec_version()").fetchall()
                version = int(conn.execute("PRAGMA user_version").fetchall()[0][0])
                backlog = _idem.count(conn, self.clock())
            if version != self.db.latest_version:
                return {
                    "status": "down",
                    "reason": "schema version is not the one this build knows",
                }
            if not self.db.in_memory:
                if not os.access(self.db.path, os.R_OK | os.W_OK):
                    return {
                        "status": "down",
                        "reason": "database file is not readable and writable",
                    }
                usage = shutil.disk_usage(os.path.dirname(os.path.abspath(self.db.path)))
                if usage.total and usage.used / usage.total > DISK_DEGRADED_FRACTION:
                    return {
                        "status": "degraded",
                        "reason": "disk holding the database is over 95% full",
                    }
            if backlog > IDEMPOTENCY_BACKLOG_BOUND:
                return {"status": "degraded", "reason": "expired idempotency entries need pruning"}
            return {"status": "ok", "reason": None}
        except Exception:  # health is infallible by contract
            return {"status": "down", "reason": "database cannot be read"}

    # -- writes ----------------------------------------------------------------------

    def upsert_many(
        self,
        records: list[dict[str, Any]],
        *,
        idempotency_key: str,
        ctx: CallContext,
        expected_revisions: dict[str, int] | None = None,
        idempotency_class: str | None = None,
    ) -> dict[str, Any]:
        call = rules.parse_upsert(
            records, idempotency_key, expected_revisions, idempotency_class, self.embedding_dim
        )
        rules.confine_writes(call.chunks, ctx.scope)
        return self.upsert_parsed(call, ctx)

    def upsert_parsed(self, call: rules.UpsertCall, ctx: CallContext) -> dict[str, Any]:
        """The write half of ``upsert_many``, for callers (the plane) that validated already."""
        ids = [c.chunk_id for c in call.chunks]
        iid = idempotency_id("upsert_many", ctx.actor, call.idempotency_key)
        with self.db.write() as conn:
            now = self.clock()
            if _idem.is_replay(conn, iid, call.digest, now):
                return {"upserted": len(ids), "replayed": True}
            existing = self._revisions_and_scopes(conn, ids)
            for chunk_id, (_, scope) in existing.items():
                if not contains(scope, ctx.scope):
                    raise ScopeForbidden(f"record {chunk_id} exists outside the token scope")
            if call.expected_revisions is not None:
                mismatches = [
                    {"id": cid, "expected": rev, "actual": existing.get(cid, (0, {}))[0]}
                    for cid, rev in call.expected_revisions.items()
                    if existing.get(cid, (0, {}))[0] != rev
                ]
                if mismatches:
                    raise RevisionMismatch(mismatches)
            conn.executemany(
                """INSERT INTO memory_chunks (chunk_id, revision, tenant, grp, end_user,
                       agent_self, origin, scope_json, updated_at, embedding, record_json)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT (chunk_id) DO UPDATE SET revision = excluded.revision,
                       tenant = excluded.tenant, grp = excluded.grp,
                       end_user = excluded.end_user, agent_self = excluded.agent_self,
                       origin = excluded.origin, scope_json = excluded.scope_json,
                       updated_at = excluded.updated_at, embedding = excluded.embedding,
                       record_json = excluded.record_json""",
                [
                    (
                        c.chunk_id,
                        existing.get(c.chunk_id, (0, {}))[0] + 1,
                        *(c.scope.get(axis) for axis in AXES),
                        c.origin,
                        orjson.dumps(c.scope, option=orjson.OPT_SORT_KEYS).decode(),
                        now,
                        c.vector.tobytes(),
                        c.record_json.decode(),
                    )
                    for c in call.chunks
                ],
            )
            # vec0 has no working INSERT OR REPLACE before 0.1.10: delete, then insert.
            conn.executemany(
                "DELETE FROM memory_vec WHERE chunk_id = ?", [(cid,) for cid in existing]
            )
            conn.executemany(
                "INSERT INTO memory_vec (chunk_id, embedding) VALUES (?, ?)",
                [(c.chunk_id, c.vector.tobytes()) for c in call.chunks],
            )
            ttl = CLASS_TTL_SECONDS[call.idempotency_class]
            _idem.remember(conn, iid, call.digest, ids, now + ttl)
        return {"upserted": len(ids), "replayed": False}

    def delete_many(self, ids: list[str], *, ctx: CallContext | None = None) -> dict[str, int]:
        wanted = rules.check_ids(ids)
        token_scope = ctx.scope if ctx else {}
        with self.db.write() as conn:
            found = self._revisions_and_scopes(conn, wanted)
            doomed = [(cid,) for cid, (_, scope) in found.items() if contains(scope, token_scope)]
            conn.executemany("DELETE FROM memory_chunks WHERE chunk_id = ?", doomed)
            conn.executemany("DELETE FROM memory_vec WHERE chunk_id = ?", doomed)
        return {"deleted": len(doomed)}

    # -- reads -----------------------------------------------------------------------

    def get(self, chunk_id: str, *, ctx: CallContext | None = None) -> dict[str, Any] | None:
        found = self.get_many([rules.check_id(chunk_id, "chunk_id")], ctx=ctx)
        return found[0] if found else None

    def get_many(self, ids: list[str], *, ctx: CallContext | None = None) -> list[dict[str, Any]]:
        wanted = rules.check_ids(ids)
        token_scope = ctx.scope if ctx else {}
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT chunk_id, revision, scope_json, record_json FROM memory_chunks "
                f"WHERE chunk_id IN ({_placeholders(len(wanted))})",
                wanted,
            ).fetchall()
        by_id = {
            cid: rules.with_revision(orjson.loads(record), revision)
            for cid, revision, scope, record in rows
            if contains(orjson.loads(scope), token_scope)
        }
        return [by_id[cid] for cid in wanted if cid in by_id]

    def search(
        self,
        vector: list[float],
        *,
        top_k: int,
        scope_all: dict[str, str] | None = None,
        scope_any: list[dict[str, str]] | None = None,
        metadata_filter: dict[str, Any] | None = None,
        include: dict[str, Any] | None = None,
        fidelity_target: float | None = None,
        ctx: CallContext | None = None,
    ) -> list[dict[str, Any]]:
        call = rules.parse_search(
            vector,
            top_k,
            scope_all,
            scope_any,
            metadata_filter,
            include,
            fidelity_target,
            self.embedding_dim,
        )
        if ctx is not None:
            call = rules.confine_search(call, ctx.scope)
        return self.search_parsed(call)

    def search_parsed(self, call: rules.SearchCall) -> list[dict[str, Any]]:
        """The read half of ``search``: ``call`` is validated and already confined."""
        with self.db.read() as conn:
            candidates = self._candidates(conn, call)
            if not candidates:
                return []
            rows = conn.execute(
                "SELECT chunk_id, revision, embedding, record_json FROM memory_chunks "
                f"WHERE chunk_id IN ({_placeholders(len(candidates))})",
                candidates,
            ).fetchall()
        ids = [r[0] for r in rows]
        matrix = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32)
        scores = cosine_scores(matrix.reshape(len(rows), self.embedding_dim), call.vector)
        by_id = {r[0]: r for r in rows}
        return [
            rules.search_hit(
                orjson.loads(by_id[cid][3]), cid, score, by_id[cid][1], call.include_embedding
            )
            for cid, score in rank(ids, scores, call.top_k)
        ]

    # -- internals -------------------------------------------------------------------

    def _revisions_and_scopes(
        self, conn: apsw.Connection, ids: list[str]
    ) -> dict[str, tuple[int, dict[str, str]]]:
        rows = conn.execute(
            "SELECT chunk_id, revision, scope_json FROM memory_chunks "
            f"WHERE chunk_id IN ({_placeholders(len(ids))})",
            ids,
        ).fetchall()
        return {cid: (rev, orjson.loads(scope)) for cid, rev, scope in rows}

    def _candidates(self, conn: apsw.Connection, call: rules.SearchCall) -> list[str]:
        """Every chunk that could be in the exact top_k: the float32 top_k plus all rows whose
        float32 distance lies within ``DISTANCE_EPSILON`` of the k-th."""
        query = call.vector.tobytes()
        want = call.top_k + CANDIDATE_MARGIN
        condition, params = scope_condition(call.scope_all, call.scope_any)
        if condition == "1" and want <= VEC_MAX_K:
            rows = conn.execute(
                "SELECT chunk_id, distance FROM memory_vec WHERE embedding MATCH ? AND k = ?",
                (query, want),
            ).fetchall()
        else:
            rows = conn.execute(
                f"SELECT chunk_id, vec_distance_cosine(embedding, ?) AS d FROM memory_chunks "
                f"WHERE {condition} ORDER BY d LIMIT ?",
                (query, *params, want),
            ).fetchall()
        if len(rows) < want or rows[-1][1] > rows[call.top_k - 1][1] + DISTANCE_EPSILON:
            return [r[0] for r in rows]
        bound = rows[call.top_k - 1][1] + DISTANCE_EPSILON
        wide = conn.execute(
            f"SELECT chunk_id FROM (SELECT chunk_id, vec_distance_cosine(embedding, ?) AS d "
            f"FROM memory_chunks WHERE {condition}) WHERE d <= ?",
            (query, *params, bound),
        ).fetchall()
        return [r[0] for r in wide]

    def close(self) -> None:
        self.db.close()


def open_memory_store(
    db_path: str,
    *,
    embedding_dim: int,
    settings: DatabaseSettings | None = None,
    clock: Callable[[], float] = time.time,
) -> RatatoskrMemoryStore:
    """Open (creating on first use) the memory store at ``db_path`` or ``":memory:"``."""
    if isinstance(embedding_dim, bool) or not isinstance(embedding_dim, int) or embedding_dim < 1:
        raise ValueError("embedding_dim must be a positive integer")
    if db_path != ":memory:":
        directory = os.path.dirname(os.path.abspath(db_path))
        if not os.path.isdir(directory) or not os.access(directory, os.W_OK):
            raise ValueError("the memory database directory does not exist or is not writable")
    settings = settings or DatabaseSettings(page_size=65536)
    db = Database(db_path, memory_migrations(embedding_dim), settings)
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
    return RatatoskrMemoryStore(db, embedding_dim, clock=clock)


def jti_ledger_path(store: RatatoskrMemoryStore) -> str:
    """Where the replay ledger of an app over ``store`` lives: beside its database file, so
    every worker process serving that file shares it (``:memory:`` for an in-memory store)."""
    if store.db.in_memory:
        return ":memory:"
    root, _ = os.path.splitext(store.db.path)
    return root + ".jti.db"


def build_memory_provider_app(
    store: RatatoskrMemoryStore, heimdall_key: bytes, consumer_id: str = "ratatoskr"
) -> Starlette:
    """The memory plane over ``store`` as a Bifrost wire app (the seed contract's entry).

    HTTP is imported here, not at module import, so the store stays usable without it.
    """
    describe = getattr(store, "describe_store", None)
    if describe is None or not isinstance(describe(), dict):
        raise ValueError("store.describe_store() must return a capability dict")
    if not isinstance(heimdall_key, bytes | bytearray) or not heimdall_key:
        raise ValueError("heimdall_key must be non-empty bytes")
    from ratatoskr.planes.apps import build_memory_app

    ledger = jti_ledger_path(store) if isinstance(store, RatatoskrMemoryStore) else ":memory:"
    return build_memory_app(store, bytes(heimdall_key), consumer_id, ledger_path=ledger)


__all__ = [
    "InvalidArguments",
    "RatatoskrMemoryStore",
    "build_memory_provider_app",
    "open_memory_store",
]
