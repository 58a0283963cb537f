"""Writes to one PostgreSQL plane that meet on one row: a write that conflicts is tried
again alone (every other write of the plane waits for it), so it is stored by its second
attempt however many writers meet there, and none is starved past the lock timeout."""

from __future__ import annotations

import threading

from ratatoskr.postgres.database import Conn, PgDatabase
from ratatoskr.postgres.migrations import Migration
from tests.backends import postgres_schema
from tests.writers import failures_of_writers

WRITERS = 16
WRITES = 5


def _counter(conn: Conn) -> None:
    conn.execute("CREATE TABLE counter (id int PRIMARY KEY, n int NOT NULL)")
    conn.execute("INSERT INTO counter VALUES (1, 0)")


def test_a_write_that_conflicts_is_stored_by_its_second_attempt() -> None:
    url = postgres_schema("turns")
    dbs = [PgDatabase(url, "turns", [Migration(1, _counter)]) for _ in "ab"]  # two workers
    attempts: list[int] = []
    lock = threading.Lock()
    try:

        def write(n: int, i: int) -> None:
            tries = 0

            def increment(conn: Conn) -> None:
                nonlocal tries
                tries += 1
                conn.execute("SELECT n FROM counter WHERE id = 1").fetchone()  # the snapshot
                conn.execute("UPDATE counter SET n = n + 1 WHERE id = 1")

            dbs[n % 2].write(increment)
            with lock:
                attempts.append(tries)

        assert failures_of_writers(WRITERS, WRITES, write) == []
        row = dbs[0].read(lambda conn: conn.execute("SELECT n FROM counter").fetchone())
        assert row == (WRITERS * WRITES,)
        assert max(attempts) <= 2, sorted(attempts)[-5:]
        assert 2 in attempts  # they did meet: some write conflicted and was tried again
    finally:
        for db in dbs:
            db.close()
