"""A lock another session holds on PostgreSQL bounds a call's wait: past the session's
``lock_timeout`` (``RATATOSKR_PG_LOCK_TIMEOUT``, as SQLite's busy timeout) the call is
``Unavailable`` (503, retryable) saying a lock is held, nothing of it written, and the store
serves again once the lock is gone. Without it a call waited as long as the lock was held:
a ``LOCK TABLE`` (or a plain ``CREATE INDEX``) by an operator hung every worker's pool."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from ratatoskr.core.errors import Unavailable
from ratatoskr.ops.locations import open_memory
from ratatoskr.postgres.database import PgSettings
from tests.backends import postgres_schema
from tests.memory.helpers import CTX, DIM, chunk, vec


@pytest.fixture
def locked_store() -> Iterator[tuple[Any, str]]:
    url = postgres_schema("locks")
    store = open_memory(url, embedding_dim=DIM, pool=PgSettings(lock_timeout=0.3))
    store.upsert_many([chunk("c1", vec(1))], idempotency_key="k1", ctx=CTX)
    yield store, url
    store.close()


def test_a_table_lock_held_elsewhere_is_unavailable_after_the_lock_timeout(
    locked_store: tuple[Any, str],
) -> None:
    store, url = locked_store
    with psycopg.connect(url) as other:  # one transaction, held until the block ends
        other.execute("LOCK TABLE memory_chunks IN ACCESS EXCLUSIVE MODE")
        with pytest.raises(Unavailable, match="lock") as raised:
            store.get("c1")
        assert raised.value.retryable
        with pytest.raises(Unavailable, match="lock"):
            store.search(vec(1), top_k=1)
    record = store.get("c1")
    assert record is not None and record["revision"] == 1


def test_a_row_lock_held_elsewhere_fails_the_write_whole(
    locked_store: tuple[Any, str],
) -> None:
    store, url = locked_store
    with psycopg.connect(url) as other:
        other.execute("SELECT 1 FROM memory_chunks WHERE chunk_id = 'c1' FOR UPDATE")
        batch = [chunk("c2", vec(0, 1)), chunk("c1", vec(0, 1))]
        with pytest.raises(Unavailable, match="lock"):
            store.upsert_many(batch, idempotency_key="k2", ctx=CTX)
    assert store.get("c2") is None  # the batch left nothing
    # contention, gone with its holder: health does not remember it as a failed write
    assert store.health()["status"] == "ok"
    assert store.upsert_many(batch, idempotency_key="k2", ctx=CTX)["upserted"] == 2
    record = store.get("c1")
    assert record is not None and record["revision"] == 2


def test_the_lock_timeout_setting_is_checked() -> None:
    assert PgSettings.from_env({"RATATOSKR_PG_LOCK_TIMEOUT": "2.5"}).lock_timeout == 2.5
    for bad in ("-1", "601", "soon"):
        with pytest.raises(ValueError, match="RATATOSKR_PG_LOCK_TIMEOUT"):
            PgSettings.from_env({"RATATOSKR_PG_LOCK_TIMEOUT": bad})
