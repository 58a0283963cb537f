"""A plane's store opened by its location: a file path (SQLite) or a ``postgresql://`` URL.

The one place that chooses the backend: the server, the admin commands (``ops.stores``)
and the tests open stores through ``open_store``, and the jti ledger through
``open_ledger``, so a location means the same thing everywhere. A URL is named in messages
only through ``describe`` (password masked).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from ratatoskr.affect.postgres.store import PgAffectStore, open_pg_affect_store
from ratatoskr.affect.store import RatatoskrAffectStore, open_affect_store
from ratatoskr.memory.postgres.store import PgMemoryStore, open_pg_memory_store
from ratatoskr.memory.store import RatatoskrMemoryStore, open_memory_store
from ratatoskr.postgres.database import PgSettings
from ratatoskr.postgres.jti import PgJtiLedger
from ratatoskr.postgres.probe import component_version
from ratatoskr.postgres.url import check_location, is_postgres_url, masked
from ratatoskr.sqlite.database import DatabaseSettings
from ratatoskr.sqlite.jti import JtiLedger, ledger_beside

PLANES = ("memory", "affect")

# what ``open_memory`` and ``open_affect`` return: either backend, each with its plane's
# keyword API (``upsert_many``, ``search``, ...) and the operator surface
MemoryBackend = RatatoskrMemoryStore | PgMemoryStore
AffectBackend = RatatoskrAffectStore | PgAffectStore


def is_postgres(location: str) -> bool:
    return is_postgres_url(location)


def describe(location: str) -> str:
    """The location as a message may name it (a URL's password masked)."""
    return masked(location)


def open_memory(
    location: str,
    *,
    embedding_dim: int,
    database: DatabaseSettings | None = None,
    pool: PgSettings | None = None,
    clock: Callable[[], float] = time.time,
    mirror_bytes: int | None = None,
) -> MemoryBackend:
    """The memory store at ``location`` (``mirror_bytes`` concerns SQLite only: a
    PostgreSQL store holds nothing per process)."""
    if is_postgres_url(check_location(location)):
        return open_pg_memory_store(
            location, embedding_dim=embedding_dim, settings=pool, clock=clock
        )
    return open_memory_store(
        location,
        embedding_dim=embedding_dim,
        settings=database,
        clock=clock,
        mirror_bytes=mirror_bytes,
    )


def open_affect(
    location: str,
    *,
    database: DatabaseSettings | None = None,
    pool: PgSettings | None = None,
    clock: Callable[[], float] = time.time,
) -> AffectBackend:
    if is_postgres_url(check_location(location)):
        return open_pg_affect_store(location, settings=pool, clock=clock)
    return open_affect_store(location, settings=database, clock=clock)


def open_store(plane: str, location: str, **options: Any) -> Any:
    """The store of ``plane`` (``memory`` or ``affect``) at ``location``."""
    if plane == "memory":
        return open_memory(location, **options)
    if plane == "affect":
        options.pop("embedding_dim", None)
        options.pop("mirror_bytes", None)
        return open_affect(location, **options)
    raise ValueError(f"plane must be one of {', '.join(PLANES)}")


def ledger_location(location: str) -> str:
    """Where the jti ledger of a plane at ``location`` lives: the same database for a URL,
    the file beside it for SQLite."""
    return location if is_postgres_url(location) else ledger_beside(location)


def open_ledger(
    location: str,
    *,
    database: DatabaseSettings | None = None,
    pool: PgSettings | None = None,
) -> JtiLedger | PgJtiLedger:
    """The jti ledger (a ``wire.replay.ReplayGuard``) beside the plane at ``location``
    (``ledger_location``)."""
    if is_postgres_url(check_location(location)):
        return PgJtiLedger(location, settings=pool)
    return JtiLedger(ledger_beside(location), settings=database)


def existing_ledger(
    location: str, *, clock: Callable[[], float] = time.time
) -> JtiLedger | PgJtiLedger | None:
    """The jti ledger at ``location`` (a ledger file, or a database), None when there is
    none yet: an admin command never creates one."""
    if is_postgres_url(location):
        if component_version(location, "jti") is None:
            return None
        return PgJtiLedger(location, clock=clock)
    if not os.path.isfile(location):
        return None
    return JtiLedger(location, clock=clock)


def unexpired_tokens(
    locations: Iterable[str], *, clock: Callable[[], float] = time.time
) -> list[tuple[str, float]] | None:
    """The unexpired entries of the jti ledgers at ``locations`` (a move or a copy carries
    them, so a token used before stays used after); None when none of them exists."""
    found: list[tuple[str, float]] | None = None
    for location in locations:
        ledger = existing_ledger(location, clock=clock)
        if ledger is None:
            continue
        try:
            found = (found or []) + ledger.unexpired()
        finally:
            ledger.close()
    return found
