"""The affect file's tables as the operator surface sees them, and the SQL on events that
only the operator runs (the plane's verbs never delete an event or read one by id)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw
import orjson

from ratatoskr.core.record_sql import Table
from ratatoskr.sqlite.scope_sql import placeholders

EVENTS = Table("event", "affect_events", "id", has_revision=False, has_time=True)
STATES = Table("state", "affect_states", "id", has_revision=True)
TABLES = (EVENTS, STATES)  # in kind order: the listing order


def events_by_id(conn: apsw.Connection, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The stored events among ``ids`` (at most ``MAX_IDS``), by id."""
    rows = conn.execute(
        f"SELECT id, record_json FROM affect_events WHERE id IN ({placeholders(len(ids))})",
        list(ids),
    ).fetchall()
    return {event_id: orjson.loads(record_json) for event_id, record_json in rows}


def delete_events(conn: apsw.Connection, ids: Sequence[str]) -> None:
    conn.executemany("DELETE FROM affect_events WHERE id = ?", [(i,) for i in ids])
