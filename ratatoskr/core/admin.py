"""What the operator surface needs of a plane store, whatever its backend.

``ratatoskr admin`` (``ratatoskr.ops``) and the server's metric gauges call only these
methods, so a second backend is a second class with them: it never sees a table name from
the outside. Every method works on the whole store (no token scope: the operator is on the
host) and never returns record content, except ``get_records``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, NotRequired, Protocol, TypedDict, runtime_checkable

from ratatoskr.core.filters import Filter
from ratatoskr.core.scope import Scope


class FacetCounts(NamedTuple):
    """Exact counts of one facet over the records a filter admits (explore's buckets)."""

    total: int  # records the filter admits
    missing: int  # of those, records without a value for the facet
    values: list[tuple[str, int]]  # (value, count) for every value present, in any order


class ListedRecord(TypedDict):
    """One record as ``admin list`` shows it: structure only, never content."""

    kind: str
    id: str
    revision: int | None  # None for a kind without revisions (events)
    scope: Scope
    origin: NotRequired[str | None]  # memory chunks only (None when the chunk has none)
    at: NotRequired[str]  # events only: their time, RFC 3339 in UTC with microseconds


class RecordPage(NamedTuple):
    """One page of a listing and the cursor to the next (None on the last page)."""

    records: list[ListedRecord]
    next_cursor: str | None


class FoundRecord(TypedDict):
    """One whole stored record, as the plane's ``get`` returns it, and what kind it is."""

    id: str
    kind: str
    record: dict[str, Any]


@runtime_checkable
class AdminStore(Protocol):
    """The operator half of a plane store (both planes have it; the reference stores do not)."""

    def count_by(self, flt: Filter, facet: str) -> FacetCounts:
        """Exact counts of ``facet`` (a scope axis, ``origin`` or ``kind``) over the records
        ``flt`` admits, read at one snapshot. For ``kind`` the values are the plane's kinds
        with at least one record and ``missing`` is 0. The caller validates ``facet``."""
        ...

    def list_records(self, flt: Filter, *, limit: int, cursor: str | None = None) -> RecordPage:
        """Up to ``limit`` records ``flt`` admits, ordered by kind then id, starting after
        ``cursor`` (the ``next_cursor`` of the previous page of the same filter). The cursor
        is opaque and signed by the store; one made for another filter is refused
        (``InvalidArguments``). A walk visits every record present throughout exactly once."""
        ...

    def get_records(self, ids: Sequence[str]) -> list[FoundRecord]:
        """Whole records by id, in the order named, missing ones left out. An id that names
        records of several kinds (affect: a state and an event) yields each, in kind order
        state before event. ``ids`` is non-empty, without repeats (the caller checks)."""
        ...

    def match(
        self,
        *,
        ids: Sequence[str] | None = None,
        flt: Filter | None = None,
        kind: str | None = None,
    ) -> dict[str, list[str]]:
        """Forget's dry run: per kind (every kind the selection reaches, even with no
        match), the ids of the records ``ids`` names or ``flt`` admits. Exactly one of the
        two is given and it is not empty (``core.filters.check_selection``); ``kind``
        narrows ids to that kind's records (an affect state and event may share an id)."""
        ...

    def forget(
        self,
        *,
        ids: Sequence[str] | None = None,
        flt: Filter | None = None,
        kind: str | None = None,
    ) -> dict[str, int]:
        """Remove what ``match`` would name, in one transaction, through the store's own
        delete path (so every process's view of the store follows); the count per kind."""
        ...

    def erase(self, scope: Scope) -> dict[str, int | bool]:
        """Remove every record ``scope`` admits (non-empty) and every trace of them: the
        idempotency entries of calls that wrote one, and whatever copy the backend keeps
        (SQLite: freed index slots, the WAL). Counts per kind, ``idempotency`` (entries
        removed) and backend-specific flags (SQLite: ``wal_truncated``, False when a reader
        held the WAL: run again once idle)."""
        ...

    def ready_to_write(self) -> None:
        """Take the store's write lock for an empty transaction, waiting as a write would:
        raises when a write could not go through now (erase asks every plane first)."""
        ...

    def record_counts(self) -> dict[str, int]:
        """Records per kind (the metric gauges); raises when the store cannot be read."""
        ...

    def storage_bytes(self) -> int | None:
        """Bytes the store holds on disk (SQLite: the file and its WAL); None for a store
        with no storage of its own to measure (in memory)."""
        ...

    def storage_cap(self) -> int | None:
        """The most bytes the store may grow to (SQLite: ``RATATOSKR_SQLITE_MAX_DB_BYTES``);
        None when uncapped or the backend sets no cap of its own."""
        ...

    def capped_bytes(self) -> int | None:
        """The bytes ``storage_cap`` limits (SQLite: the pages in use, not the WAL); None
        when the backend sets no cap of its own."""
        ...

    def replication_lag(self) -> float | None:
        """Seconds the store's replica lags behind it (SQLite under Litestream; inf when
        replication is on and nothing reports it); None when the store is not replicated."""
        ...

    def pool_stats(self) -> dict[str, int] | None:
        """This process's connections to a database server (``open``, ``idle``, ``waiting``)
        and its retried transactions (``retries``); None for a backend without a pool."""
        ...

    def stats(self) -> dict[str, Any]:
        """What ``admin stats`` shows: at least ``records`` (per kind),
        ``idempotency_entries``, ``idempotency_expired`` (at the store's clock),
        ``schema_version`` and ``schema_latest``; backend-specific keys besides (SQLite:
        ``file_bytes``, ``wal_bytes``, ``synchronous``; memory: ``embedding_dim``)."""
        ...

    def check(self) -> list[str]:
        """Every problem found (empty when sound): storage integrity, schema version, the
        plane marker, revisions below 1, and per plane its own invariants (memory: one
        vector row per chunk). Raises when the store cannot be read at all."""
        ...

    def prune(self) -> int:
        """Drop the idempotency entries expired at the store's clock; how many."""
        ...

    def backup(self, dest: str) -> int:
        """Write one consistent snapshot of the store, taken while it serves, to the new
        file ``dest`` (owner-only permissions), openable as a store; its size in bytes."""
        ...

    def close(self) -> None: ...
