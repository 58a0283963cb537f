"""The affect plane's operator read of whole records by id, the same on every backend:
states through the store's own ``get_many``, events by id (which no verb reads), an id
naming both yielding the state first."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ratatoskr.core.admin import FoundRecord
from ratatoskr.core.context import CallContext


class StateAndEventRecords:
    """Mixed into each backend's operator half (before it), which supplies ``get_many`` and
    ``_events_by_id``."""

    def get_many(self, ids: list[str], *, ctx: CallContext | None = None) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _events_by_id(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        """The stored events among ``ids`` (at most ``MAX_IDS``), by id."""
        raise NotImplementedError

    def get_records(self, ids: Sequence[str]) -> list[FoundRecord]:
        wanted = list(ids)
        states = {state["id"]: state for state in self.get_many(wanted)}
        events = self._events_by_id(wanted)
        found: list[FoundRecord] = []
        for i in wanted:
            if i in states:
                found.append({"id": i, "kind": "state", "record": states[i]})
            if i in events:
                found.append({"id": i, "kind": "event", "record": events[i]})
        return found
