"""The memory provider's public names where the seed contract puts them.

The store lives in ``ratatoskr.memory``; this module only re-exports it and builds the
wire app on demand, so importing it loads no HTTP code (Starlette is imported by
``build_memory_provider_app`` when it is called).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ratatoskr.memory.store import RatatoskrMemoryStore

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from ratatoskr.memory.interface import MemoryVerbs
    from ratatoskr.ops.locations import MemoryBackend
    from ratatoskr.postgres.database import PgSettings
    from ratatoskr.sqlite.database import DatabaseSettings


def open_memory_store(
    db_path: str,
    *,
    embedding_dim: int,
    settings: DatabaseSettings | None = None,
    pool: PgSettings | None = None,
    clock: Callable[[], float] = time.time,
    mirror_bytes: int | None = None,
) -> MemoryBackend:
    """The seed's opener: a SQLite file, or ``":memory:"``, as the seed names it, and the
    same store on PostgreSQL when ``db_path`` is a ``postgresql://`` URL (``pool`` then
    sizes its connection pool; ``settings`` and ``mirror_bytes`` concern SQLite only)."""
    from ratatoskr.ops.locations import open_memory

    return open_memory(
        db_path,
        embedding_dim=embedding_dim,
        database=settings,
        pool=pool,
        clock=clock,
        mirror_bytes=mirror_bytes,
    )


def build_memory_provider_app(
    store: MemoryVerbs, heimdall_key: bytes, consumer_id: str = "ratatoskr"
) -> Starlette:
    """The memory plane over ``store`` as a Bifrost wire app; the replay ledger lies beside
    the store's file or in its PostgreSQL database (in memory for an in-memory or other
    store)."""
    describe = getattr(store, "describe_store", None)
    if describe is None or not isinstance(describe(), dict):
        raise ValueError("store.describe_store() must return a capability dict")
    if not isinstance(heimdall_key, bytes | bytearray) or not heimdall_key:
        raise ValueError("heimdall_key must be non-empty bytes")
    from ratatoskr.memory.postgres.store import PgMemoryStore
    from ratatoskr.memory.verbs import memory_plane
    from ratatoskr.server.app import create_app
    from ratatoskr.server.settings import Settings
    from ratatoskr.sqlite.jti import ledger_beside
    from ratatoskr.wire.keys import Keyring

    path = store.db.path if isinstance(store, RatatoskrMemoryStore) else ":memory:"
    ledger = store.db.url if isinstance(store, PgMemoryStore) else ledger_beside(path)
    settings = Settings(
        keyring=Keyring(bytes(heimdall_key), setting="heimdall_key"), consumer_id=consumer_id
    )
    return create_app(settings, planes=[memory_plane(store)], ledger=ledger)


__all__ = ["RatatoskrMemoryStore", "build_memory_provider_app", "open_memory_store"]
