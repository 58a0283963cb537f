"""WAL checkpoints run on their own thread, reach the database file, and stay bounded when
the thread cannot keep up (``storage/checkpointer.py``)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import apsw

from ratatoskr.sqlite.database import Database, DatabaseSettings, Migration


def table(conn: apsw.Connection) -> None:
    conn.execute("CREATE TABLE t (i INTEGER PRIMARY KEY, blob BLOB)")


def open_db(path: Path, **settings: object) -> Database:
    return Database(str(path), [Migration(1, table)], DatabaseSettings(**settings))  # type: ignore[arg-type]


def write_rows(db: Database, start: int, count: int) -> None:
    for i in range(start, start + count):
        with db.write() as conn:
            conn.execute("INSERT INTO t VALUES (?, zeroblob(8192))", (i,))


def rows_in_main_file(path: Path, scratch: Path) -> int:
    """The rows the database file holds by itself, without its WAL: what checkpoints wrote."""
    shutil.copyfile(path, scratch)
    conn = apsw.Connection(
        f"file:{scratch}?immutable=1", flags=apsw.SQLITE_OPEN_URI | apsw.SQLITE_OPEN_READONLY
    )
    try:
        return int(conn.execute("SELECT count(*) FROM t").fetchall()[0][0])
    finally:
        conn.close()


def test_commits_leave_the_checkpoint_to_the_thread(tmp_path: Path) -> None:
    db = open_db(tmp_path / "x.db")
    assert db.checkpointer is not None
    db.checkpointer.wake_pages = 4
    write_rows(db, 0, 40)
    assert db.checkpointer.drain(timeout=30)
    assert db.checkpointer.runs >= 1
    assert db.checkpointer.inline_runs == 0
    # the thread checkpointed in the background, not a commit: the rows are in the file
    assert rows_in_main_file(tmp_path / "x.db", tmp_path / "copy.db") >= 30
    thread = db.checkpointer.thread
    assert thread is not None and thread.is_alive()
    db.close()
    assert not thread.is_alive()


def test_sqlite_does_not_checkpoint_inside_a_commit(tmp_path: Path) -> None:
    """The WAL hook replaces SQLite's own automatic checkpoint on every connection."""
    db = open_db(tmp_path / "x.db")
    with db.read() as conn:
        assert conn.execute("PRAGMA wal_autocheckpoint").fetchall()[0][0] == 0
    db.close()


def test_a_commit_checkpoints_itself_when_the_wal_is_past_the_bound(tmp_path: Path) -> None:
    db = open_db(tmp_path / "x.db")
    assert db.checkpointer is not None
    db.checkpointer.wake_pages = 10**9  # the thread never wakes
    db.checkpointer.inline_pages = 8
    write_rows(db, 0, 60)
    assert db.checkpointer.inline_runs >= 1
    assert db.checkpointer.runs == 0
    # the WAL restarts from its beginning after a full checkpoint: it stays near the bound
    page = 4096
    assert os.path.getsize(str(tmp_path / "x.db") + "-wal") <= 16 * (page + 24)
    db.close()


def test_without_background_checkpoints_sqlite_checkpoints_as_usual(tmp_path: Path) -> None:
    db = open_db(tmp_path / "x.db", background_checkpoint=False)
    assert db.checkpointer is None
    with db.read() as conn:
        assert conn.execute("PRAGMA wal_autocheckpoint").fetchall()[0][0] == 1000
    db.close()


def test_a_memory_database_has_no_checkpointer() -> None:
    db = Database(":memory:", [Migration(1, table)])
    assert db.checkpointer is None
    db.close()
