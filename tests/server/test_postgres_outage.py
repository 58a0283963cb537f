"""PostgreSQL going away under a running server, and coming back.

While the database is down, every call that needs it is ``<plane>.unavailable`` (503,
retryable), ``/readyz`` answers 503 with a reason that names neither host nor credential,
and ``/healthz`` (the process) stays 200. When the database is back, the server serves
again by itself, no restart, and soon: after an outage of 40 s the pool's reconnection
attempts would otherwise be half a minute apart (``RECONNECT_WINDOW``).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.pgserver import PostgresServer, running
from tests.server.harness import KEY, Server, call, ok, poll, vec

OUTAGE_SECONDS = 40.0
# the pool's attempts are at most a few seconds apart (a series of 1, 2, 4 s, then a new
# one); with psycopg-pool's default the next came 20 s or more after this outage
BACK_WITHIN = 12.0


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL of this test's own, as the test stops it."""
    with running(database="outage") as server:
        yield server


def test_postgres_down_is_503_retryable_and_the_server_recovers(
    tmp_path: Path, own_postgres: PostgresServer
) -> None:
    url = own_postgres.url("outage", tcp=True).replace("postgres@", "postgres:hunter2@")
    server = Server(
        tmp_path,
        workers=1,
        env={
            "RATATOSKR_MEMORY_DB": url,
            "RATATOSKR_AFFECT_DB": url,
            "RATATOSKR_PG_POOL_TIMEOUT": "1",
        },
    )
    try:
        server.start()
        record = {"id": "c1", "embedding": vec(1), "scope": {"tenant": "acme"}}
        args = {"records": [record], "idempotency_key": "k1"}
        ok(call(server.url, "memory", "upsert_many", args))

        own_postgres.halt()
        down = call(server.url, "memory", "search", {"vector": vec(1), "top_k": 1})
        assert down.status_code == 503
        error = down.json()["error"]
        assert error["code"] == "memory.unavailable" and error["retryable"] is True
        state = {"id": "s1", "scope": {"tenant": "acme"}}
        write = call(server.url, "affect", "put_many", {"records": [state], "idempotency_key": "p"})
        assert write.status_code == 503
        assert write.json()["error"]["code"] == "affect.unavailable"
        ready = httpx.get(server.url + "/readyz", timeout=30)
        assert ready.status_code == 503
        assert ready.json()["planes"]["memory"]["status"] == "down"
        assert httpx.get(server.url + "/healthz", timeout=5).status_code == 200
        # the scrape still answers, carrying what the plane-down alert reads
        scraped = httpx.get(server.url + "/metrics", timeout=10).text
        assert 'ratatoskr_plane_health{plane="memory"} 0.0' in scraped
        outage_ends = time.monotonic() + OUTAGE_SECONDS
        while time.monotonic() < outage_ends:  # calls meanwhile, as clients retrying
            assert call(server.url, "memory", "get", {"chunk_id": "c1"}).status_code == 503

        own_postgres.start()

        def serving() -> bool | None:
            answer = call(server.url, "memory", "get", {"chunk_id": "c1"})
            return True if answer.status_code == 200 else None

        started = time.monotonic()
        poll(serving, 60, "the server to serve again")
        back_after = time.monotonic() - started
        assert back_after < BACK_WITHIN, f"served again only {back_after:.1f} s after"
        assert httpx.get(server.url + "/readyz", timeout=30).status_code == 200
        output = server.output()
        assert "hunter2" not in output and KEY not in output
    finally:
        server.kill()


def test_a_worker_replaced_during_the_outage_waits_for_the_database_not_the_server(
    tmp_path: Path, own_postgres: PostgresServer
) -> None:
    """A worker that dies while PostgreSQL is away cannot open its stores when gunicorn
    replaces it; it answers 503 and keeps trying, rather than failing its boot, which made
    gunicorn stop the whole server."""
    url = own_postgres.url("outage", tcp=True)
    env = {"RATATOSKR_MEMORY_DB": url, "RATATOSKR_AFFECT_DB": url, "RATATOSKR_PG_POOL_TIMEOUT": "1"}
    server = Server(tmp_path, workers=2, env=env)
    try:
        server.start()
        own_postgres.halt()
        first = server.worker_pids()
        os.kill(first[0], signal.SIGKILL)

        def replaced() -> bool | None:
            pids = server.worker_pids()
            return True if len(pids) == 2 and first[0] not in pids else None

        poll(replaced, 30, "gunicorn to replace the worker")
        poll(
            lambda: True if "stores cannot be opened" in server.output() else None,
            30,
            "the new worker to say it cannot open its stores",
        )
        assert server.process is not None and server.process.poll() is None  # still serving
        assert httpx.get(server.url + "/readyz", timeout=30).status_code == 503

        own_postgres.start()

        def all_ready() -> bool | None:
            answers = [httpx.get(server.url + "/readyz", timeout=30) for _ in range(6)]
            return True if all(a.status_code == 200 for a in answers) else None

        poll(all_ready, 60, "every worker to serve again")
        record = {"id": "c1", "embedding": vec(1), "scope": {"tenant": "acme"}}
        ok(call(server.url, "memory", "upsert_many", {"records": [record], "idempotency_key": "k"}))
        assert server.terminate() == 0
    finally:
        server.kill()
