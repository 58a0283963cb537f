"""The memory store's interface: what the plane, the operator surface, metrics and the
server call, whatever the backend.

``MemoryVerbs`` is what the verb table needs (the SQLite store and the reference store the
parity tests put behind the same app both have it); ``MemoryStore`` adds the operator half
(``core.admin.AdminStore``) that a production backend implements too. Calls arrive
validated and confined (``memory.rules``): a backend stores and reads, it does not judge.
"""

from __future__ import annotations

from typing import Any, Protocol

from ratatoskr.core.admin import AdminStore
from ratatoskr.core.context import CallContext
from ratatoskr.memory import rules


class MemoryVerbs(Protocol):
    """The memory plane's verbs over a store."""

    embedding_dim: int

    def describe_store(self) -> dict[str, Any]:
        """The seed's capabilities descriptor of this store."""
        ...

    def health(self) -> dict[str, Any]:
        """``status`` (ok, degraded, down) and a ``reason`` without paths or secrets;
        never raises."""
        ...

    def upsert_parsed(self, call: rules.UpsertCall, ctx: CallContext) -> dict[str, Any]:
        """Write a validated, confined batch at once, or replay it (``upserted``,
        ``replayed``)."""
        ...

    def search_parsed(self, call: rules.SearchCall) -> list[dict[str, Any]]:
        """The exact top ``call.top_k`` hits of a confined search, ordered as the
        reference store orders them."""
        ...

    def search_quick(self, call: rules.SearchCall) -> list[dict[str, Any]] | None:
        """``search_parsed`` when it is certainly cheap (run on the event loop), else None
        with nothing done. A backend without such a path answers None."""
        ...

    def get(self, chunk_id: str, *, ctx: CallContext | None = None) -> dict[str, Any] | None:
        """One chunk within the token scope, or None."""
        ...

    def get_many(self, ids: list[str], *, ctx: CallContext | None = None) -> list[dict[str, Any]]:
        """The chunks named within the token scope, in the order named."""
        ...

    def delete_many(self, ids: list[str], *, ctx: CallContext | None = None) -> dict[str, int]:
        """Delete the chunks named within the token scope (``deleted``)."""
        ...


class MemoryStore(MemoryVerbs, AdminStore, Protocol):
    """A memory backend: the plane's verbs and the operator surface."""
