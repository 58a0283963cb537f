"""The affect plane's store: states and an append-only event log, verbatim, in SQLite.

Layout (one file, ``RATATOSKR_AFFECT_DB``):

- ``affect_states``: the verbatim state (canonical JSON), its revision and the scope axes as
  indexed columns;
- ``affect_events``: the verbatim event, its time in UTC microseconds (``at_us``) and the
  scope axes; ``(at_us, id)`` is indexed because it is the read order and the cursor key;
- ``affect_idempotency``: the replay-or-conflict cache;
- ``ratatoskr_meta``: the plane name and the cursor secret every worker shares.

Scoped reads filter in SQL (``WHERE`` over the axis columns) before ``LIMIT``, never after,
and page by keyset so concurrent writes neither skip nor repeat an item.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import apsw
import orjson

from ratatoskr.affect import rules
from ratatoskr.affect.admin import AffectAdmin
from ratatoskr.affect.calls import AffectCalls
from ratatoskr.affect.writes import fresh_events
from ratatoskr.core.context import CallContext
from ratatoskr.core.overwrites import check_overwrites
from ratatoskr.core.scope import AXES, contains
from ratatoskr.sqlite.cursors import codec_for, store_secret
from ratatoskr.sqlite.database import Database, DatabaseSettings, Migration, SchemaError
from ratatoskr.sqlite.health import check_health
from ratatoskr.sqlite.idempotency import (
    CLASS_TTL_SECONDS,
    IdempotencyTable,
    create_table,
    idempotency_id,
)
from ratatoskr.sqlite.scope_sql import COLUMNS, placeholders, scope_condition

_idem = IdempotencyTable("affect_idempotency")
_AXIS_COLUMNS = ", ".join(COLUMNS[a] for a in AXES)


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


def _scope_json(scope: dict[str, str]) -> str:
    return orjson.dumps(scope, option=orjson.OPT_SORT_KEYS).decode()


class RatatoskrAffectStore(AffectCalls, AffectAdmin):
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
            conn.executemany(
                f"""INSERT INTO affect_states (id, revision, {_AXIS_COLUMNS}, scope_json,
                       updated_at, record_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT (id) DO UPDATE SET revision = excluded.revision,
                       tenant = excluded.tenant, grp = excluded.grp,
                       end_user = excluded.end_user, agent_self = excluded.agent_self,
                       scope_json = excluded.scope_json, updated_at = excluded.updated_at,
                       record_json = excluded.record_json""",
                [
                    (
                        s.id,
                        existing.get(s.id, (0, {}))[0] + 1,
                        *(s.scope.get(axis) for axis in AXES),
                        _scope_json(s.scope),
                        now,
                        s.record_json.decode(),
                    )
                    for s in call.states
                ],
            )
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

    def get_many(self, ids: list[str], *, ctx: CallContext | None = None) -> list[dict[str, Any]]:
        wanted = rules.check_ids(ids)
        token_scope = ctx.scope if ctx else {}
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT id, revision, scope_json, record_json FROM affect_states "
                f"WHERE id IN ({placeholders(len(wanted))})",
                wanted,
            ).fetchall()
        by_id = {
            i: rules.with_revision(orjson.loads(record), revision)
            for i, revision, scope, record in rows
            if contains(orjson.loads(scope), token_scope)
        }
        return [by_id[i] for i in wanted if i in by_id]

    def list_parsed(self, call: rules.ListCall) -> dict[str, Any]:
        """The read half of ``list``: ``call`` is validated and already confined."""
        tag = rules.cursor_tag("list", call)
        condition, params = scope_condition(call.scope_all, call.scope_any)
        args: list[Any] = list(params)
        if call.cursor is not None:
            condition += " AND id > ?"
            args.append(self.cursors.open(call.cursor, tag, (str,)).key[0])
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT id, revision, record_json FROM affect_states "
                f"WHERE {condition} ORDER BY id LIMIT ?",
                (*args, call.limit + 1),
            ).fetchall()
        page = rows[: call.limit]
        more = len(rows) > call.limit
        return {
            "records": [rules.with_revision(orjson.loads(r), rev) for _, rev, r in page],
            "next_cursor": self.cursors.make(tag, (page[-1][0],)) if more else None,
        }

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
            fresh = fresh_events(call.events, stored, ctx.scope)
            conn.executemany(
                f"INSERT INTO affect_events (id, at_us, {_AXIS_COLUMNS}, scope_json, "
                "appended_at, record_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        e.id,
                        e.at_us,
                        *(e.scope.get(axis) for axis in AXES),
                        _scope_json(e.scope),
                        now,
                        e.record_json.decode(),
                    )
                    for e in fresh
                ],
            )
            ttl = CLASS_TTL_SECONDS[call.idempotency_class]
            _idem.remember(conn, iid, call.digest, [e.id for e in fresh], now + ttl)
        return {"appended": len(fresh), "replayed": False}

    def read_events_parsed(self, call: rules.ListCall) -> dict[str, Any]:
        """The read half of ``read_events``: ``call`` is validated and already confined."""
        tag = rules.cursor_tag("read_events", call)
        condition, params = scope_condition(call.scope_all, call.scope_any)
        args: list[Any] = list(params)
        if call.since_us is not None:
            condition += " AND at_us >= ?"
            args.append(call.since_us)
        if call.until_us is not None:
            condition += " AND at_us < ?"
            args.append(call.until_us)
        if call.cursor is not None:
            after = self.cursors.open(call.cursor, tag, (int, str), descending=call.descending)
            condition += " AND (at_us, id) " + ("<" if call.descending else ">") + " (?, ?)"
            args.extend(after.key)
        direction = "DESC" if call.descending else "ASC"
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT at_us, id, record_json FROM affect_events WHERE {condition} "
                f"ORDER BY at_us {direction}, id {direction} LIMIT ?",
                (*args, call.limit + 1),
            ).fetchall()
        page = rows[: call.limit]
        more = len(rows) > call.limit
        last = page[-1] if page else None
        return {
            "events": [orjson.loads(r) for _, _, r in page],
            "next_cursor": (
                self.cursors.make(tag, (last[0], last[1]), descending=call.descending)
                if more and last is not None
                else None
            ),
        }

    # -- internals -------------------------------------------------------------------

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
    db = Database(db_path, AFFECT_MIGRATIONS, settings)
    try:
        with db.read() as conn:
            plane = conn.execute("SELECT value FROM ratatoskr_meta WHERE key = 'plane'").fetchall()
    except apsw.SQLError:
        plane = []
    if not plane or plane[0][0] != "affect":
        db.close()
        raise SchemaError("the file is not an affect database")
    return RatatoskrAffectStore(db, clock=clock)
