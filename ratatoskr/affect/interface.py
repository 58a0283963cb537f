"""The affect store's interface, split as the memory one is (``memory.interface``).

``AffectVerbs``: states and the event log as the verb table calls them, on the SQLite store
and on the reference store alike. ``AffectStore``: those and the operator half
(``core.admin.AdminStore``), what a production backend implements. Calls arrive validated
and confined by ``affect.rules``.
"""

from __future__ import annotations

from typing import Any, Protocol

from ratatoskr.affect import rules
from ratatoskr.core.admin import AdminStore
from ratatoskr.core.context import CallContext


class AffectVerbs(Protocol):
    """The affect plane's verbs over a store."""

    def describe_store(self) -> dict[str, Any]:
        """The seed's capabilities descriptor of this store."""
        ...

    def health(self) -> dict[str, Any]:
        """``status`` (ok, degraded, down) and a ``reason`` without paths or secrets;
        never raises."""
        ...

    def put_parsed(self, call: rules.PutCall, ctx: CallContext) -> dict[str, Any]:
        """Write a validated, confined batch of states at once, or replay it (``written``,
        ``replayed``)."""
        ...

    def append_parsed(self, call: rules.AppendCall, ctx: CallContext) -> dict[str, Any]:
        """Append validated, confined events (an equal one already stored is skipped), or
        replay the call (``appended``, ``replayed``)."""
        ...

    def list_parsed(self, call: rules.ListCall) -> dict[str, Any]:
        """One page of the states a confined filter admits, by id, with a signed cursor."""
        ...

    def read_events_parsed(self, call: rules.ListCall) -> dict[str, Any]:
        """One page of the events a confined filter admits, by (at, id), with a cursor."""
        ...

    def get(self, id: str, *, ctx: CallContext | None = None) -> dict[str, Any] | None:
        """One state within the token scope, or None."""
        ...

    def get_many(self, ids: list[str], *, ctx: CallContext | None = None) -> list[dict[str, Any]]:
        """The states named within the token scope, in the order named."""
        ...

    def delete_many(self, ids: list[str], *, ctx: CallContext | None = None) -> dict[str, int]:
        """Delete the states named within the token scope (``deleted``); events stay."""
        ...


class AffectStore(AffectVerbs, AdminStore, Protocol):
    """An affect backend: the plane's verbs and the operator surface."""
