"""The affect plane's writes as every SQL backend makes them: which events of an append
are written, and the statements and rows that write states and events.

A backend reads the scope and canonical JSON of each event the batch names that is already
stored (inside its write transaction), asks ``fresh_events`` and inserts only those; states
go through ``core.overwrites.check_overwrites`` first. The statements are spelled in the
backend's ``SqlDialect`` and bound with the rows made here, so both backends store the
same columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from ratatoskr.affect.rules import Item, events_equal
from ratatoskr.core.errors import EventConflict, ScopeForbidden
from ratatoskr.core.overwrites import Stored
from ratatoskr.core.scope import AXES, Scope, contains
from ratatoskr.core.sql_dialect import AXIS_COLUMNS, SqlDialect

AXIS_COLUMN_LIST = ", ".join(AXIS_COLUMNS[a] for a in AXES)

StoredEvents = Mapping[str, tuple[Scope, bytes | str]]  # id -> (scope, record_json) stored


def fresh_events(
    events: Sequence[Item], stored: StoredEvents, token_scope: Mapping[str, str]
) -> list[Item]:
    """The events not stored yet; an id stored with an equal event is skipped (the log is
    append-only, so a retried append is not counted twice). The whole batch is refused when
    a stored id lies outside the token scope or holds another event."""
    for event_id, (scope, _) in stored.items():
        if not contains(scope, token_scope):
            raise ScopeForbidden(f"event {event_id} exists outside the token scope")
    conflicts = [e.id for e in events if e.id in stored and not events_equal(stored[e.id][1], e)]
    if conflicts:
        raise EventConflict(
            f"{len(conflicts)} event id(s) already hold another event: "
            + ", ".join(conflicts[:10]),
            details={"ids": conflicts},
        )
    return [e for e in events if e.id not in stored]


def upsert_states(sql: SqlDialect) -> str:
    """The statement that writes one state row (``state_rows``), new or replacing."""
    return f"""INSERT INTO affect_states (id, revision, {AXIS_COLUMN_LIST}, scope_json,
            updated_at, record_json) VALUES ({sql.params(9)})
        ON CONFLICT (id) DO UPDATE SET revision = excluded.revision,
            tenant = excluded.tenant, grp = excluded.grp,
            end_user = excluded.end_user, agent_self = excluded.agent_self,
            scope_json = excluded.scope_json, updated_at = excluded.updated_at,
            record_json = excluded.record_json"""


def insert_events(sql: SqlDialect) -> str:
    """The statement that appends one event row (``event_rows``)."""
    return (
        f"INSERT INTO affect_events (id, at_us, {AXIS_COLUMN_LIST}, scope_json, "
        f"appended_at, record_json) VALUES ({sql.params(9)})"
    )


def _axes(sql: SqlDialect, scope: Scope) -> list[Any]:
    return [sql.bind(scope[a]) if a in scope else None for a in AXES]


def _scope_json(scope: Scope) -> str:
    return orjson.dumps(scope, option=orjson.OPT_SORT_KEYS).decode()


def state_rows(
    sql: SqlDialect, states: Sequence[Item], stored: Stored, now: float
) -> list[tuple[Any, ...]]:
    """The rows of ``upsert_states`` for a batch: each state one revision past the stored."""
    return [
        (
            sql.bind(s.id),
            stored.get(s.id, (0, {}))[0] + 1,
            *_axes(sql, s.scope),
            _scope_json(s.scope),
            now,
            s.record_json.decode(),
        )
        for s in states
    ]


def event_rows(sql: SqlDialect, events: Sequence[Item], now: float) -> list[tuple[Any, ...]]:
    """The rows of ``insert_events`` for the fresh events of a batch."""
    return [
        (
            sql.bind(e.id),
            e.at_us,
            *_axes(sql, e.scope),
            _scope_json(e.scope),
            now,
            e.record_json.decode(),
        )
        for e in events
    ]
