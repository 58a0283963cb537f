"""A writer waits for another process's write lock in short steps, up to the busy timeout
(``storage/busy.py``); past it, the write fails as unavailable, with nothing written."""

from __future__ import annotations

import threading
from pathlib import Path

import apsw
import pytest

from ratatoskr.core.errors import Unavailable
from ratatoskr.sqlite.busy import BusyWait
from ratatoskr.sqlite.database import Database, DatabaseSettings, Migration
from tests.lock_holder import holding_the_lock


def table(conn: apsw.Connection) -> None:
    conn.execute("CREATE TABLE t (i INTEGER PRIMARY KEY)")


def test_the_handler_retries_until_the_timeout_then_gives_up() -> None:
    wait = BusyWait(timeout_ms=0)
    assert wait(0) is False
    patient = BusyWait(timeout_ms=60_000, step_seconds=0)
    assert all(patient(n) for n in range(1000))
    assert patient(0) is True  # a new wait starts its own clock


def test_a_write_waits_for_the_lock_and_lands_when_it_is_released(tmp_path: Path) -> None:
    db = Database(
        str(tmp_path / "x.db"), [Migration(1, table)], DatabaseSettings(busy_timeout_ms=60_000)
    )
    holder = holding_the_lock(tmp_path / "x.db")
    done = threading.Event()

    def write() -> None:
        with db.write() as conn:
            conn.execute("INSERT INTO t VALUES (1)")
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    assert not done.wait(0.2)  # still waiting for the other process
    assert holder.stdin is not None and holder.stdout is not None
    holder.stdin.write(b"release\n")
    holder.stdin.flush()
    assert holder.stdout.readline() == b"released\n"
    writer.join(timeout=30)
    assert done.is_set()
    with db.read() as conn:
        assert conn.execute("SELECT i FROM t").fetchall() == [(1,)]
    holder.communicate(b"", timeout=10)
    db.close()


def test_past_the_busy_timeout_the_write_is_unavailable(tmp_path: Path) -> None:
    db = Database(
        str(tmp_path / "x.db"), [Migration(1, table)], DatabaseSettings(busy_timeout_ms=100)
    )
    holder = holding_the_lock(tmp_path / "x.db")
    try:
        with pytest.raises(Unavailable, match="locked"), db.write() as conn:
            conn.execute("INSERT INTO t VALUES (1)")
    finally:
        holder.communicate(b"\n", timeout=10)
    with db.read() as conn:
        assert conn.execute("SELECT count(*) FROM t").fetchall() == [(0,)]
    db.close()
