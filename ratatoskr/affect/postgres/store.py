"""The affect plane's store on PostgreSQL: the SQLite store's rules over shared tables.

Validation and confinement are the plane's (``affect.calls``), run before any statement;
this store writes only the halves that touch storage.
Each write is one ``REPEATABLE READ`` transaction, retried whole on a serialization failure
(two servers writing one id), so optimistic locking has exactly one winner and a batch is
stored whole or not at all. The reads are ``affect.reads``'s and the write statements
``affect.writes``'s, in the PostgreSQL dialect: ids compared as bytes (SQLite's order), and
cursors signed with the secret in ``affect_meta``, so any server pages on from a cursor
another one made.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from ratatoskr.affect import rules, writes
from ratatoskr.affect.calls import AffectCalls
from ratatoskr.affect.postgres.admin import PgAffectAdmin
from ratatoskr.affect.postgres.schema import AFFECT_MIGRATIONS
from ratatoskr.affect.reads import AffectReads
from ratatoskr.core.context import CallContext
from ratatoskr.core.cursors import SECRET_META_KEY, CursorCodec
from ratatoskr.core.idempotency import CLASS_TTL_SECONDS, idempotency_id
from ratatoskr.core.overwrites import check_overwrites
from ratatoskr.core.scope import contains
from ratatoskr.postgres.database import Conn, PgDatabase, PgSettings
from ratatoskr.postgres.health import check_pg_health
from ratatoskr.postgres.idempotency import PgIdempotency
from ratatoskr.postgres.scope_sql import POSTGRES, keys, text
from ratatoskr.sqlite.database import SchemaError

_idem = PgIdempotency("affect_idempotency")
_UPSERT_STATES = writes.upsert_states(POSTGRES)
_INSERT_EVENTS = writes.insert_events(POSTGRES)


def read_secret(db: PgDatabase) -> bytes:
    """The cursor secret every server of this database signs with."""
    row = db.once(
        lambda conn: conn.execute(
            "SELECT value FROM affect_meta WHERE key = %s", (SECRET_META_KEY,)
        ).fetchone()
    )
    if row is None:
        raise SchemaError("the affect database has no cursor secret")
    return bytes.fromhex(row[0])


class PgAffectStore(AffectReads, AffectCalls, PgAffectAdmin):
    """The affect plane over one PostgreSQL database. Safe to call from many threads."""

    def __init__(self, db: PgDatabase, *, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.clock = clock
        self.cursors = CursorCodec(read_secret(db))

    # -- descriptor and health -----------------------------------------------------------

    def describe_store(self) -> dict[str, Any]:
        return {**rules.CAPABILITIES, "filterable_metadata_fields": []}

    def health(self) -> dict[str, Any]:
        now = self.clock()
        return check_pg_health(self.db, lambda conn: _idem.count(conn, now))

    # -- states --------------------------------------------------------------------------

    def put_parsed(self, call: rules.PutCall, ctx: CallContext) -> dict[str, Any]:
        """The write half of ``put_many``: ``call`` is validated and its scopes confined."""
        ids = [s.id for s in call.states]
        iid = idempotency_id("put_many", ctx.actor, call.idempotency_key)

        def write(conn: Conn) -> dict[str, Any]:
            now = self.clock()
            if _idem.is_replay(conn, iid, call.digest, now):
                return {"written": len(ids), "replayed": True}
            rows = conn.execute(
                "SELECT id, revision, scope_json FROM affect_states WHERE id = ANY(%s) FOR UPDATE",
                (keys(ids),),
            ).fetchall()
            existing = {text(i): (rev, orjson.loads(scope)) for i, rev, scope in rows}
            check_overwrites(existing, ctx.scope, call.expected_revisions)
            with conn.cursor() as cur:
                cur.executemany(
                    _UPSERT_STATES, writes.state_rows(POSTGRES, call.states, existing, now)
                )
            ttl = CLASS_TTL_SECONDS[call.idempotency_class]
            _idem.remember(conn, iid, call.digest, ids, now + ttl)
            return {"written": len(ids), "replayed": False}

        return self.db.write(write)

    def delete_many(self, ids: list[str], *, ctx: CallContext | None = None) -> dict[str, int]:
        """Deletes states only; ids outside the token scope are not counted."""
        wanted = rules.check_ids(ids)
        token_scope = ctx.scope if ctx else {}

        def delete(conn: Conn) -> dict[str, int]:
            rows = conn.execute(
                "SELECT id, scope_json FROM affect_states WHERE id = ANY(%s) FOR UPDATE",
                (keys(wanted),),
            ).fetchall()
            doomed = [bytes(i) for i, scope in rows if contains(orjson.loads(scope), token_scope)]
            if doomed:
                conn.execute("DELETE FROM affect_states WHERE id = ANY(%s)", (doomed,))
            return {"deleted": len(doomed)}

        return self.db.write(delete)

    # -- events --------------------------------------------------------------------------

    def append_parsed(self, call: rules.AppendCall, ctx: CallContext) -> dict[str, Any]:
        """The write half of ``append_events``: an id already stored with an equal event is
        skipped (not counted); with another event the whole batch is refused."""
        ids = [e.id for e in call.events]
        iid = idempotency_id("append_events", ctx.actor, call.idempotency_key)

        def write(conn: Conn) -> dict[str, Any]:
            now = self.clock()
            if _idem.is_replay(conn, iid, call.digest, now):
                return {"appended": len(_idem.recorded_ids(conn, iid)), "replayed": True}
            rows = conn.execute(
                "SELECT id, scope_json, record_json FROM affect_events WHERE id = ANY(%s)",
                (keys(ids),),
            ).fetchall()
            stored = {text(i): (orjson.loads(scope), record) for i, scope, record in rows}
            fresh = writes.fresh_events(call.events, stored, ctx.scope)
            if fresh:
                with conn.cursor() as cur:
                    cur.executemany(_INSERT_EVENTS, writes.event_rows(POSTGRES, fresh, now))
            ttl = CLASS_TTL_SECONDS[call.idempotency_class]
            _idem.remember(conn, iid, call.digest, [e.id for e in fresh], now + ttl)
            return {"appended": len(fresh), "replayed": False}

        return self.db.write(write)

    def _fetch(self, statement: str, args: Sequence[Any]) -> list[Any]:
        return self.db.once(lambda conn: conn.execute(statement, args).fetchall())

    def close(self) -> None:
        self.db.close()


def open_pg_affect_store(
    url: str,
    *,
    settings: PgSettings | None = None,
    clock: Callable[[], float] = time.time,
) -> PgAffectStore:
    """Open (creating its tables on first use) the affect store in the database at ``url``."""
    db = PgDatabase(url, "affect", AFFECT_MIGRATIONS, settings)
    try:
        return PgAffectStore(db, clock=clock)
    except BaseException:
        db.close()
        raise
