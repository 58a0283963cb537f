"""The affect plane's store on PostgreSQL: the SQLite store's rules over shared tables.

Validation and confinement are the plane's (``affect.calls``), run before any statement;
this store writes only the halves that touch storage.
Each write is one ``REPEATABLE READ`` transaction, retried whole on a serialization failure
(two servers writing one id), so optimistic locking has exactly one winner and a batch is
stored whole or not at all. Scoped reads filter in SQL before ``LIMIT`` and page by keyset,
ids compared as bytes (SQLite's order); cursors are signed with the secret in
``affect_meta``, so any server pages on from a cursor another one made.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson

from ratatoskr.affect import rules
from ratatoskr.affect.calls import AffectCalls
from ratatoskr.affect.postgres.admin import PgAffectAdmin
from ratatoskr.affect.postgres.schema import AFFECT_MIGRATIONS
from ratatoskr.affect.writes import fresh_events
from ratatoskr.core.context import CallContext
from ratatoskr.core.cursors import SECRET_META_KEY, CursorCodec
from ratatoskr.core.idempotency import CLASS_TTL_SECONDS, idempotency_id
from ratatoskr.core.overwrites import check_overwrites
from ratatoskr.core.scope import AXES, contains
from ratatoskr.postgres.database import Conn, PgDatabase, PgSettings
from ratatoskr.postgres.health import check_pg_health
from ratatoskr.postgres.idempotency import PgIdempotency
from ratatoskr.postgres.scope_sql import key, keys, scope_condition
from ratatoskr.sqlite.database import SchemaError
from ratatoskr.sqlite.scope_sql import COLUMNS

_idem = PgIdempotency("affect_idempotency")
_AXIS_COLUMNS = ", ".join(COLUMNS[a] for a in AXES)
_SORTED = orjson.OPT_SORT_KEYS


def _text(raw: bytes) -> str:
    return bytes(raw).decode("utf-8")


def _axes(scope: dict[str, str]) -> list[bytes | None]:
    return [key(scope[a]) if a in scope else None for a in AXES]


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


class PgAffectStore(AffectCalls, PgAffectAdmin):
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
            existing = {_text(i): (rev, orjson.loads(scope)) for i, rev, scope in rows}
            check_overwrites(existing, ctx.scope, call.expected_revisions)
            with conn.cursor() as cur:
                cur.executemany(
                    f"""INSERT INTO affect_states (id, revision, {_AXIS_COLUMNS}, scope_json,
                           updated_at, record_json) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
                       ON CONFLICT (id) DO UPDATE SET revision = excluded.revision,
                           tenant = excluded.tenant, grp = excluded.grp,
                           end_user = excluded.end_user, agent_self = excluded.agent_self,
                           scope_json = excluded.scope_json, updated_at = excluded.updated_at,
                           record_json = excluded.record_json""",
                    [
                        (
                            key(s.id),
                            existing.get(s.id, (0, {}))[0] + 1,
                            *_axes(s.scope),
                            orjson.dumps(s.scope, option=_SORTED).decode(),
                            now,
                            s.record_json.decode(),
                        )
                        for s in call.states
                    ],
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

    def get_many(self, ids: list[str], *, ctx: CallContext | None = None) -> list[dict[str, Any]]:
        wanted = rules.check_ids(ids)
        token_scope = ctx.scope if ctx else {}
        rows = self.db.once(
            lambda conn: conn.execute(
                "SELECT id, revision, scope_json, record_json FROM affect_states "
                "WHERE id = ANY(%s)",
                (keys(wanted),),
            ).fetchall()
        )
        by_id = {
            _text(i): rules.with_revision(orjson.loads(record), revision)
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
            condition += " AND id > %s"
            args.append(key(str(self.cursors.open(call.cursor, tag, (str,)).key[0])))
        rows = self.db.once(
            lambda conn: conn.execute(
                "SELECT id, revision, record_json FROM affect_states "
                f"WHERE {condition} ORDER BY id LIMIT %s",
                (*args, call.limit + 1),
            ).fetchall()
        )
        page = rows[: call.limit]
        more = len(rows) > call.limit
        return {
            "records": [rules.with_revision(orjson.loads(r), rev) for _, rev, r in page],
            "next_cursor": self.cursors.make(tag, (_text(page[-1][0]),)) if more else None,
        }

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
            stored = {_text(i): (orjson.loads(scope), record) for i, scope, record in rows}
            fresh = fresh_events(call.events, stored, ctx.scope)
            if fresh:
                with conn.cursor() as cur:
                    cur.executemany(
                        f"INSERT INTO affect_events (id, at_us, {_AXIS_COLUMNS}, scope_json, "
                        "appended_at, record_json) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                        [
                            (
                                key(e.id),
                                e.at_us,
                                *_axes(e.scope),
                                orjson.dumps(e.scope, option=_SORTED).decode(),
                                now,
                                e.record_json.decode(),
                            )
                            for e in fresh
                        ],
                    )
            ttl = CLASS_TTL_SECONDS[call.idempotency_class]
            _idem.remember(conn, iid, call.digest, [e.id for e in fresh], now + ttl)
            return {"appended": len(fresh), "replayed": False}

        return self.db.write(write)

    def read_events_parsed(self, call: rules.ListCall) -> dict[str, Any]:
        """The read half of ``read_events``: ``call`` is validated and already confined."""
        tag = rules.cursor_tag("read_events", call)
        condition, params = scope_condition(call.scope_all, call.scope_any)
        args: list[Any] = list(params)
        if call.since_us is not None:
            condition += " AND at_us >= %s"
            args.append(call.since_us)
        if call.until_us is not None:
            condition += " AND at_us < %s"
            args.append(call.until_us)
        if call.cursor is not None:
            after = self.cursors.open(call.cursor, tag, (int, str), descending=call.descending)
            condition += " AND (at_us, id) " + ("<" if call.descending else ">") + " (%s, %s)"
            args.extend([after.key[0], key(str(after.key[1]))])
        direction = "DESC" if call.descending else "ASC"
        rows = self.db.once(
            lambda conn: conn.execute(
                f"SELECT at_us, id, record_json FROM affect_events WHERE {condition} "
                f"ORDER BY at_us {direction}, id {direction} LIMIT %s",
                (*args, call.limit + 1),
            ).fetchall()
        )
        page = rows[: call.limit]
        more = len(rows) > call.limit
        last = page[-1] if page else None
        return {
            "events": [orjson.loads(r) for _, _, r in page],
            "next_cursor": (
                self.cursors.make(tag, (last[0], _text(last[1])), descending=call.descending)
                if more and last is not None
                else None
            ),
        }

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
