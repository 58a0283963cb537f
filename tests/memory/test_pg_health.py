"""Health on PostgreSQL tells a busy pool from a database that is down, and answers within
about a second either way (a readiness probe's timeout is often 1 s), not after the pool's
timeout: every connection of the worker in use is ``degraded`` (it serves, slower);
PostgreSQL gone is ``down``."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any, cast

import pytest

from ratatoskr.core.errors import Unavailable
from ratatoskr.memory.postgres.store import PgMemoryStore
from ratatoskr.ops.locations import open_memory
from ratatoskr.postgres.database import PgSettings
from ratatoskr.postgres.health import BUSY, HEALTH_WAIT, durability
from tests.backends import postgres_schema
from tests.memory.helpers import DIM
from tests.pgserver import PostgresServer, running
from tests.server.harness import poll

SLOW_POOL = PgSettings(min_size=1, max_size=1, timeout=10 * HEALTH_WAIT)


def test_a_pool_with_every_connection_in_use_is_degraded_not_down() -> None:
    store = cast(
        PgMemoryStore, open_memory(postgres_schema("busy"), embedding_dim=DIM, pool=SLOW_POOL)
    )
    try:
        assert store.health()["status"] == "ok"
        with store.db.pool.connection():  # the worker's only connection, busy
            started = time.monotonic()
            health = store.health()
            took = time.monotonic() - started
        assert health == {"status": "degraded", "reason": BUSY}
        assert took < SLOW_POOL.timeout / 2  # not the pool's wait
        assert store.health()["status"] == "ok"
    finally:
        store.close()


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    with running(database="health") as server:
        yield server


def test_postgres_down_is_down_without_waiting_the_pools_timeout(
    own_postgres: PostgresServer,
) -> None:
    store: Any = open_memory(own_postgres.url("health"), embedding_dim=DIM, pool=SLOW_POOL)
    try:
        own_postgres.halt()
        started = time.monotonic()
        health = store.health()
        took = time.monotonic() - started
        assert health["status"] == "down" and "connection" in health["reason"]
        assert took < SLOW_POOL.timeout / 2, took  # about HEALTH_WAIT, not the pool's wait
    finally:
        store.close()


def test_the_waiting_gauge_counts_callers_waiting_now_not_those_that_gave_up() -> None:
    quick = PgSettings(min_size=1, max_size=1, timeout=0.5)
    store = cast(
        PgMemoryStore, open_memory(postgres_schema("waiting"), embedding_dim=DIM, pool=quick)
    )
    outcomes: list[str] = []

    def caller() -> None:
        try:
            store.db.once(lambda conn: conn.execute("SELECT 1").fetchone())
            outcomes.append("served")
        except Unavailable:
            outcomes.append("unavailable")

    try:
        with store.db.pool.connection():  # the worker's only connection, held
            waiter = threading.Thread(target=caller)
            waiter.start()
            poll(lambda: store.db.pool_stats()["waiting"] == 1 or None, 5, "a caller waiting")
            waiter.join(timeout=10)
            assert outcomes == ["unavailable"]  # it gave up after the pool's timeout
            assert store.db.pool_stats()["waiting"] == 0  # and is no longer counted
        assert store.db.pool_stats()["waiting"] == 0
    finally:
        store.close()


def test_the_durability_named_is_fsyncs_before_synchronous_commits() -> None:
    """Without ``fsync`` nothing reaches the disk for sure, whatever ``synchronous_commit``
    says (the test cluster runs with both off: its health says fsync)."""
    assert "fsync=off" in durability("on", "off")
    assert "may lose acknowledged writes" in durability("on", "off")
    assert durability("on", "on").startswith("durability synchronous_commit=on: every")
    assert "may drop" in durability("off", "on")
    store = cast(PgMemoryStore, open_memory(postgres_schema("durable"), embedding_dim=DIM))
    try:
        assert store.health() == {"status": "ok", "reason": durability("off", "off")}
    finally:
        store.close()
