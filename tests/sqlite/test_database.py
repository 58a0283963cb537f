"""The shared SQLite layer: pragmas, extension, transactions, schema versions."""

from __future__ import annotations

import threading
from pathlib import Path

import apsw
import pytest

from ratatoskr.core.context import CallContext
from ratatoskr.core.errors import Unavailable
from ratatoskr.memory.store import open_memory_store
from ratatoskr.sqlite.database import Database, DatabaseSettings, Migration, SchemaError


def table_v1(conn: apsw.Connection) -> None:
    conn.execute("CREATE TABLE t (x INTEGER)")


def table_v2(conn: apsw.Connection) -> None:
    conn.execute("ALTER TABLE t ADD COLUMN y TEXT")


def test_a_new_file_is_owner_only_and_so_are_its_wal_files(tmp_path: Path) -> None:
    """Every record is in the file verbatim: made under the usual umask (022) it would be
    readable by every local user, and SQLite gives the WAL and shared-memory files its mode."""
    path = tmp_path / "new.db"
    db = Database(str(path), [Migration(1, table_v1)])
    with db.write() as conn:
        conn.execute("INSERT INTO t VALUES (1)")
    modes = {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()}
    db.close()
    assert modes["new.db"] == 0o600
    assert modes.get("new.db-wal", 0o600) == 0o600 and modes.get("new.db-shm", 0o600) == 0o600
    # a file that exists keeps the mode its operator gave it
    path.chmod(0o640)
    Database(str(path), [Migration(1, table_v1)]).close()
    assert path.stat().st_mode & 0o777 == 0o640


def test_pragmas_on_a_file(tmp_path: Path) -> None:
    db = Database(str(tmp_path / "a.db"), [Migration(1, table_v1)])
    with db.read() as conn:
        assert conn.execute("PRAGMA journal_mode").fetchall() == [("wal",)]
        # the busy timeout is BusyWait's (a busy handler, so PRAGMA busy_timeout reads 0):
        # tests/sqlite/test_busy.py
        assert db.settings.busy_timeout_ms == 5000
        assert conn.execute("PRAGMA synchronous").fetchall() == [(2,)]  # FULL by default
        assert conn.execute("SELECT vec_version()").fetchall()[0][0].startswith("v")
    db.close()


def test_synchronous_normal_is_an_explicit_choice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RATATOSKR_SQLITE_SYNCHRONOUS", "normal")
    db = Database(str(tmp_path / "a.db"), [Migration(1, table_v1)], DatabaseSettings())
    with db.read() as conn:
        assert conn.execute("PRAGMA synchronous").fetchall() == [(1,)]  # NORMAL
    db.close()
    monkeypatch.setenv("RATATOSKR_SQLITE_SYNCHRONOUS", "")
    assert DatabaseSettings().synchronous == "FULL"
    monkeypatch.setenv("RATATOSKR_SQLITE_SYNCHRONOUS", "sometimes")
    with pytest.raises(ValueError, match="RATATOSKR_SQLITE_SYNCHRONOUS"):
        DatabaseSettings()


def test_memory_database_is_not_wal() -> None:
    db = Database(":memory:", [Migration(1, table_v1)])
    with db.read() as conn:
        assert conn.execute("PRAGMA journal_mode").fetchall() == [("memory",)]
    db.close()


def test_migrations_run_forward_once(tmp_path: Path) -> None:
    path = str(tmp_path / "a.db")
    Database(path, [Migration(1, table_v1)]).close()
    db = Database(path, [Migration(1, table_v1), Migration(2, table_v2)])
    assert db.schema_version() == 2
    with db.write() as conn:
        conn.execute("INSERT INTO t (x, y) VALUES (1, 'a')")
    db.close()
    again = Database(path, [Migration(1, table_v1), Migration(2, table_v2)])
    with again.read() as conn:
        assert conn.execute("SELECT x, y FROM t").fetchall() == [(1, "a")]
    again.close()


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "a.db")
    Database(path, [Migration(1, table_v1), Migration(2, table_v2)]).close()
    with pytest.raises(SchemaError, match="newer than this ratatoskr knows"):
        Database(path, [Migration(1, table_v1)])


def test_other_dimension_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "m.db")
    open_memory_store(path, embedding_dim=8).close()
    with pytest.raises(SchemaError, match="embedding_dim=8"):
        open_memory_store(path, embedding_dim=16)


def test_write_rolls_back_whole_on_error(tmp_path: Path) -> None:
    db = Database(str(tmp_path / "a.db"), [Migration(1, table_v1)])
    with pytest.raises(RuntimeError), db.write() as conn:
        conn.execute("INSERT INTO t VALUES (1)")
        raise RuntimeError("boom")
    with db.read() as conn:
        assert conn.execute("SELECT count(*) FROM t").fetchall() == [(0,)]
    db.close()


def test_locked_past_timeout_is_unavailable(tmp_path: Path) -> None:
    path = str(tmp_path / "a.db")
    holder = Database(path, [Migration(1, table_v1)])
    impatient = Database(path, [Migration(1, table_v1)], DatabaseSettings(busy_timeout_ms=50))
    with holder.write() as conn:
        conn.execute("INSERT INTO t VALUES (1)")
        with pytest.raises(Unavailable) as err, impatient.write() as other:
            other.execute("INSERT INTO t VALUES (2)")
        assert err.value.retryable and "locked" in err.value.message
    with impatient.read() as conn:
        assert conn.execute("SELECT x FROM t").fetchall() == [(1,)]
    holder.close()
    impatient.close()


def test_threads_get_their_own_connections(tmp_path: Path) -> None:
    db = Database(str(tmp_path / "a.db"), [Migration(1, table_v1)])
    seen: list[int] = []

    def work(n: int) -> None:
        for i in range(50):
            with db.write() as conn:
                conn.execute("INSERT INTO t VALUES (?)", (n * 1000 + i,))
        seen.append(id(db.connection()))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(seen)) == 4
    with db.read() as conn:
        assert conn.execute("SELECT count(*) FROM t").fetchall() == [(200,)]
    db.close()


def test_a_read_answers_again_as_soon_as_the_file_is_back(tmp_path: Path) -> None:
    """A file problem is never served from the read path's check cache: once the original
    file is back, the very next read answers (no waiting out the check interval), whichever
    worker saw the problem last."""
    path = tmp_path / "m.db"
    store = open_memory_store(str(path), embedding_dim=4)
    ctx = CallContext(actor="a")
    store.upsert_many([{"id": "a", "embedding": [1.0, 0, 0, 0]}], idempotency_key="k", ctx=ctx)
    aside = tmp_path / "m.db.aside"
    path.rename(aside)
    path.write_bytes(b"not the database " * 512)
    assert store.db.file_problem() == "database file was replaced while serving"
    with pytest.raises(Unavailable):
        store.get("a")
    aside.replace(path)
    found = store.get("a")  # at once: the standing problem is looked at again
    assert found is not None and found["revision"] == 1
    store.close()


def test_a_connection_opened_read_only_is_opened_again_for_a_write(tmp_path: Path) -> None:
    """SQLite opens a file it cannot write read-only without a word (a ``chmod`` or
    ``chattr +i`` at that moment); once the file takes writes again, a write succeeds
    rather than failing on that thread for the process's life."""
    path = str(tmp_path / "a.db")
    db = Database(path, [Migration(1, table_v1)])
    stuck = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)  # as the fallback leaves it
    db._local.conn = stuck
    assert db.connection().readonly("main")
    with db.write() as conn:
        conn.execute("INSERT INTO t VALUES (1)")
    with db.read() as conn:
        assert conn.execute("SELECT count(*) FROM t").fetchall() == [(1,)]
    assert not db.connection().readonly("main")
    db.close()
