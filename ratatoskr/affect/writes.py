"""Which events of an append are written, decided alike by every affect backend.

A backend reads the scope and canonical JSON of each event the batch names that is already
stored (inside its write transaction), asks ``fresh_events`` and inserts only those.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ratatoskr.affect.rules import Item, events_equal
from ratatoskr.core.errors import EventConflict, ScopeForbidden
from ratatoskr.core.scope import Scope, contains

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
