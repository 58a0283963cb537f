"""The memory provider's public names where the seed contract puts them.

The store lives in ``ratatoskr.memory``; this module only re-exports it and builds the
wire app on demand, so importing it loads no HTTP code (Starlette is imported by
``build_memory_provider_app`` when it is called).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ratatoskr.memory.store import RatatoskrMemoryStore, open_memory_store

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from ratatoskr.memory.verbs import MemoryStore


def build_memory_provider_app(
    store: MemoryStore, heimdall_key: bytes, consumer_id: str = "ratatoskr"
) -> Starlette:
    """The memory plane over ``store`` as a Bifrost wire app; the replay ledger lies beside
    the store's file (in memory for an in-memory or non-file store)."""
    describe = getattr(store, "describe_store", None)
    if describe is None or not isinstance(describe(), dict):
        raise ValueError("store.describe_store() must return a capability dict")
    if not isinstance(heimdall_key, bytes | bytearray) or not heimdall_key:
        raise ValueError("heimdall_key must be non-empty bytes")
    from ratatoskr.server.apps import build_memory_app
    from ratatoskr.sqlite.jti import ledger_beside

    path = store.db.path if isinstance(store, RatatoskrMemoryStore) else ":memory:"
    return build_memory_app(
        store, bytes(heimdall_key), consumer_id, ledger_path=ledger_beside(path)
    )


__all__ = ["RatatoskrMemoryStore", "build_memory_provider_app", "open_memory_store"]
