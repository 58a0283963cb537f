"""The file identity check never drops SQLite's locks (regression: it lost commits).

Closing any descriptor of a file drops every POSIX lock the process holds on it. The check
used to open and close the database file to read its header; after that, another process
closing its connection took itself for the last one and deleted the WAL under the live
store, whose next commit went to the unlinked WAL and was never seen again.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ratatoskr.sqlite.database import Database

OTHER_PROCESS = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
print(conn.execute("SELECT count(*) FROM t").fetchone()[0])
conn.close()
"""


def _count_from_another_process(path: Path) -> int:
    done = subprocess.run(
        [sys.executable, "-c", OTHER_PROCESS, str(path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return int(done.stdout)


def test_checking_the_file_keeps_the_wal_and_every_commit(tmp_path: Path) -> None:
    path = tmp_path / "locks.db"
    db = Database(str(path), [])
    try:
        conn = db.connection()
        conn.execute("CREATE TABLE t (x)")
        conn.execute("INSERT INTO t VALUES (1)")
        for _ in range(3):
            assert db.file_problem() is None
        assert _count_from_another_process(path) == 1  # its close must not end the WAL
        assert (tmp_path / "locks.db-wal").exists()
        conn.execute("INSERT INTO t VALUES (2)")
        assert _count_from_another_process(path) == 2
    finally:
        db.close()


def test_the_check_still_sees_an_overwritten_header(tmp_path: Path) -> None:
    path = tmp_path / "header.db"
    db = Database(str(path), [])
    try:
        db.connection().execute("CREATE TABLE t (x)")
        assert db.file_problem() is None
        with open(path, "r+b") as handle:
            handle.write(b"not a database at all")
        assert db.file_problem() == "database file is not a SQLite database"
    finally:
        db.close()
