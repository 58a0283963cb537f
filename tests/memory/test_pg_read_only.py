"""A store over a database that takes no writes (a hot standby, here a session whose every
transaction is read-only): it opens without writing, serves reads, and a write is
``Unavailable`` (503, retryable) saying the database is read-only, never a 500."""

from __future__ import annotations

from typing import cast

import pytest

from ratatoskr.core.errors import Unavailable
from ratatoskr.memory.postgres.store import PgMemoryStore
from ratatoskr.ops.locations import open_memory
from tests.backends import postgres_schema
from tests.memory.helpers import CTX, DIM, chunk, vec


def test_a_read_only_database_serves_reads_and_refuses_writes_as_unavailable() -> None:
    url = postgres_schema("standby")
    writer = cast(PgMemoryStore, open_memory(url, embedding_dim=DIM))  # a postgresql:// URL
    writer.upsert_many([chunk("c1", vec(1))], idempotency_key="k", ctx=CTX)
    writer.close()
    read_only = url.replace("options=", "options=-cdefault_transaction_read_only%3Don%20")
    store = cast(PgMemoryStore, open_memory(read_only, embedding_dim=DIM))
    try:
        health = store.health()  # before any write was tried: read-only is known
        assert health["status"] == "degraded" and "read-only" in health["reason"]
        assert [h["chunk_id"] for h in store.search(vec(1), top_k=1)] == ["c1"]
        record = store.get("c1")
        assert record is not None and record["revision"] == 1
        with pytest.raises(Unavailable, match="read-only"):
            store.upsert_many([chunk("c2", vec(0, 1))], idempotency_key="k2", ctx=CTX)
        assert store.health()["status"] == "degraded"
    finally:
        store.close()
