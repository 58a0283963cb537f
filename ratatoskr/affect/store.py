"""The affect plane's store: states and an append-only event log, verbatim, in SQLite.

Layout (one file, ``RATATOSKR_AFFECT_DB``):

- ``affect_states``: the verbatim state (canonical JSON), its revision and the scope axes as
  indexed columns;
- ``affect_events``: the verbatim event, its time in UTC microseconds (``at_us``) and the
  scope axes; ``(at_us, id)`` is indexed because it is the read order and the cursor key;
- ``affect_idempotency``: the replay-or-conflict cache;
- ``ratatoskr_meta``: the plane name and the cursor secret every worker shares.

The reads are ``affect.reads``'s and the write statements ``affect.writes``'s, in the
SQLite dialect; this module keeps the schema and the write transactions.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import apsw
import orjson

from ratatoskr.affect import rules, writes
from ratatoskr.affect.admin import AffectAdmin
from ratatoskr.affect.calls import AffectCalls
from ratatoskr.affect.reads import AffectReads
from ratatoskr.core.context import CallContext
from ratatoskr.core.overwrites import check_overwrites
from ratatoskr.core.scope import contains
from ratatoskr.sqlite.cursors import codec_for, store_secret
from ratatoskr.sqlite.database import (
    Database,
    DatabaseSettings,
    Migration,
    SchemaError,
)
from ratatoskr.sqlite.health import check_health
from ratatoskr.sqlite.idempotency import (
    CLASS_TTL_SECONDS,
    IdempotencyTable,
    create_table,
    idempotency_id,
)
from ratatoskr.sqlite.scope_sql import COLUMNS, SQLITE, placeholders

_idem = IdempotencyTable("affect_idempotency")
_AXIS_COLUMNS = writes.AXIS_COLUMN_LIST


def _schema_v1(conn: apsw.Connection) -> None:
    conn.execute("CREATE TABLE ratatoskr_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO ratatoskr_meta VALUES ('plane', 'affect')")
    store_secret(conn)
    conn.execute(
        f"""CREATE TABLE affect_states (
            id TEXT PRIMARY KEY,
            revision INTEGER NOT NULL CHECK (revision >= 1),
            {_AXIS_COLUMNS.replace(",", " TEXT,")} TEXT,
            scope_json TEXT NOT NULL,
            updated_at REAL NOT NULL,
            record_json TEXT NOT NULL
        )"""
    )
    conn.execute(
        f"""CREATE TABLE affect_events (
            id TEXT PRIMARY KEY,
            at_us INTEGER NOT NULL,
            {_AXIS_COLUMNS.replace(",", " TEXT,")} TEXT,
            scope_json TEXT NOT NULL,
            appended_at REAL NOT NULL,
            record_json TEXT NOT NULL
        )"""
    )
    for table in ("affect_states", "affect_events"):
        for column in COLUMNS.values():
            conn.execute(f"CREATE INDEX {table}_{column} ON {table}({column})")
    conn.execute("CREATE INDEX affect_events_at ON affect_events(at_us, id)")
    create_table(conn, "affect_idempotency")


AFFECT_MIGRATIONS = [Migration(1, _schema_v1)]
_UPSERT_STATES = writes.upsert_states(SQLITE)
_INSERT_EVENTS = writes.insert_events(SQLITE)


class RatatoskrAffectStore(AffectReads, AffectCalls, AffectAdmin):
    """The affect plane over one SQLite file. Safe to call from many threads. Its operator
    methods (``core.admin.AdminStore``) come from ``AffectAdmin``."""

    IDEMPOTENCY = _idem

    def __init__(self, db: Database, *, clock: Callable[[], float] = time.time) -> None:
        self.db = db
        self.clock = clock
        self.cursors = codec_for(db)

    # -- descriptor and health -----------------------------------------------------------

    def describe_store(self) -> dict[str, Any]:
        return {**rules.CAPABILITIES, "filterable_metadata_fields": []}

    def health(self) -> dict[str, Any]:
        return check_health(self.db, lambda conn: _idem.count(conn, self.clock()))

    # -- states ------------------------------------------------------------------------

    def put_parsed(self, call: rules.PutCall, ctx: CallContext) -> dict[str, Any]:
        """The write half of ``put_many``: ``call`` is validated and its scopes confined."""
        ids = [s.id for s in call.states]
        iid = idempotency_id("put_many", ctx.actor, call.idempotency_key)
        with self.db.write() as conn:
            now = self.clock()
            if _idem.is_replay(conn, iid, call.digest, now):
                return {"written": len(ids), "replayed": True}
            rows = conn.execute(
                "SELECT id, revision, scope_json FROM affect_states "
                f"WHERE id IN ({placeholders(len(ids))})",
                ids,
            ).fetchall()
            existing = {i: (rev, orjson.loads(scope)) for i, rev, scope in rows}
            check_overwrites(existing, ctx.scope, call.expected_revisions)
            conn.executemany(_UPSERT_STATES, writes.state_rows(SQLITE, call.states, existing, now))
            ttl = CLASS_TTL_SECONDS[call.idempotency_class]
            _idem.remember(conn, iid, call.digest, ids, now + ttl)
        return {"written": len(ids), "replayed": False}

    def delete_many(self, ids: list[str], *, ctx: CallContext | None = None) -> dict[str, int]:
        """Deletes states only; ids outside the token scope are not counted."""
        wanted = rules.check_ids(ids)
        token_scope = ctx.scope if ctx else {}
        with self.db.write() as conn:
            rows = conn.execute(
                "SELECT id, scope_json FROM affect_states "
                f"WHERE id IN ({placeholders(len(wanted))})",
                wanted,
            ).fetchall()
            doomed = [i for i, scope in rows if contains(orjson.loads(scope), token_scope)]
            self._delete_states(conn, doomed)
        return {"deleted": len(doomed)}

    def _delete_states(self, conn: apsw.Connection, ids: Sequence[str]) -> None:
        """Every delete of states, the verb's and the operator's."""
        conn.executemany("DELETE FROM affect_states WHERE id = ?", [(i,) for i in ids])

    # -- events ------------------------------------------------------------------------

    def append_parsed(self, call: rules.AppendCall, ctx: CallContext) -> dict[str, Any]:
        """The write half of ``append_events``: ``call`` is validated and confined.

        An id already stored with an equal event is skipped (not counted); with another event
        the whole batch is refused. A replay answers the count the first call answered.
        """
        ids = [e.id for e in call.events]
        iid = idempotency_id("append_events", ctx.actor, call.idempotency_key)
        with self.db.write() as conn:
            now = self.clock()
            if _idem.is_replay(conn, iid, call.digest, now):
                return {"appended": self._replayed_count(conn, iid), "replayed": True}
            rows = conn.execute(
                "SELECT id, scope_json, record_json FROM affect_events "
                f"WHERE id IN ({placeholders(len(ids))})",
                ids,
            ).fetchall()
            stored = {i: (orjson.loads(scope), record) for i, scope, record in rows}
            fresh = writes.fresh_events(call.events, stored, ctx.scope)
            conn.executemany(_INSERT_EVENTS, writes.event_rows(SQLITE, fresh, now))
            ttl = CLASS_TTL_SECONDS[call.idempotency_class]
            _idem.remember(conn, iid, call.digest, [e.id for e in fresh], now + ttl)
        return {"appended": len(fresh), "replayed": False}

    # -- internals -------------------------------------------------------------------

    def _fetch(self, statement: str, args: Sequence[Any]) -> list[Any]:
        with self.db.read() as conn:
            rows: list[Any] = conn.execute(statement, args).fetchall()
        return rows

    def _replayed_count(self, conn: apsw.Connection, iid: str) -> int:
        rows = conn.execute(
            f"SELECT record_ids FROM {_idem.table} WHERE idempotency_id = ?", (iid,)
        ).fetchall()
        return len(orjson.loads(rows[0][0]))

    def close(self) -> None:
        self.db.close()


def open_affect_store(
    db_path: str,
    *,
    settings: DatabaseSettings | None = None,
    clock: Callable[[], float] = time.time,
) -> RatatoskrAffectStore:
    """Open (creating on first use) the affect store at ``db_path`` or ``":memory:"``."""
    if db_path != ":memory:":
        directory = os.path.dirname(os.path.abspath(db_path))
        if not os.path.isdir(directory) or not os.access(directory, os.W_OK):
            raise ValueError("the affect database directory does not exist or is not writable")
    db = Database(db_path, AFFECT_MIGRATIONS, settings, plane="affect")
    try:
        with db.read() as conn:
            plane = conn.execute("SELECT value FROM ratatoskr_meta WHERE key = 'plane'").fetchall()
    except apsw.SQLError:
        plane = []
    if not plane or plane[0][0] != "affect":
        db.close()
        raise SchemaError("the file is not an affect database")
    return RatatoskrAffectStore(db, clock=clock)
