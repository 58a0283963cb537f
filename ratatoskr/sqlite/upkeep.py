"""Keeping a plane file healthy, the same for every plane: its sizes, soundness, schema and
plane marks, an online backup, and truncating the WAL.

``backup_to`` uses SQLite's online backup API in a single step, so the copy is one consistent
snapshot even while the server commits.
"""

from __future__ import annotations

import os

import apsw
import sqlite_vec

from ratatoskr.sqlite.database import Database


def file_size(path: str) -> int:
    """The file's size, 0 when it is absent (a WAL between checkpoints may be)."""
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def sizes(db: Database) -> tuple[int, int]:
    """The bytes of the file and of its WAL (0 for a store in memory)."""
    if db.in_memory:
        return 0, 0
    return file_size(str(db.path)), file_size(str(db.path) + "-wal")


def schema_version(conn: apsw.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchall()[0][0])


def file_problems(conn: apsw.Connection, db: Database, plane: str) -> list[str]:
    """Integrity, the schema version this build knows, and the mark naming ``plane``."""
    problems: list[str] = []
    integrity = [r[0] for r in conn.execute("PRAGMA integrity_check").fetchall()]
    if integrity != ["ok"]:
        problems.append(f"integrity_check: {len(integrity)} finding(s), first: {integrity[0]}")
    version = schema_version(conn)
    if version != db.latest_version:
        problems.append(f"schema version {version}, this build knows {db.latest_version}")
    else:
        problems += schema_problems(conn, db)
    marked = conn.execute("SELECT value FROM ratatoskr_meta WHERE key = 'plane'").fetchall()
    if not marked or marked[0][0] != plane:
        problems.append(f"ratatoskr_meta does not name the {plane} plane")
    return problems


def _schema_objects(conn: apsw.Connection) -> dict[tuple[str, str], set[str]]:
    """Each table, index, trigger and view by (type, name), a table with its columns."""
    found: dict[tuple[str, str], set[str]] = {}
    rows = conn.execute(
        "SELECT type, name FROM sqlite_master "
        "WHERE type IN ('table', 'index', 'trigger', 'view') AND name NOT LIKE 'sqlite_%'"
    ).fetchall()
    for kind, name in rows:
        columns: set[str] = set()
        if kind == "table":
            info = conn.execute("SELECT name FROM pragma_table_info(?)", (name,)).fetchall()
            columns = {str(c[0]) for c in info}
        found[(str(kind), str(name))] = columns
    return found


def schema_problems(conn: apsw.Connection, db: Database) -> list[str]:
    """What the file lacks of the schema its version stands for: the tables, columns,
    indexes and triggers the same migrations make in an empty database. A dropped change
    log or index passes ``integrity_check`` and fails the first call that needs it."""
    fresh = Database(":memory:", db.migrations)
    try:
        with fresh.read() as model:
            expected = _schema_objects(model)
    finally:
        fresh.close()
    present = _schema_objects(conn)
    problems: list[str] = []
    for (kind, name), columns in sorted(expected.items()):
        if (kind, name) not in present:
            problems.append(f"schema: {kind} {name} is missing")
        elif missing := sorted(columns - present[(kind, name)]):
            problems.append(f"schema: table {name} lacks column(s) {', '.join(missing)}")
    return problems


def checkpoint_truncate(db: Database) -> bool:
    """Copy the WAL into the file and truncate it to zero bytes; False when a reader held
    it past the busy timeout (run again once the server is idle)."""
    busy, _, _ = db.connection().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()[0]
    return int(busy) == 0


def backup_to(db: Database, dest: str) -> int:
    """Copy ``db`` to the new file ``dest`` (owner-only permissions) in one step; its size."""
    if os.path.exists(dest):
        raise ValueError(f"refusing to overwrite {dest}")
    target = apsw.Connection(dest)
    try:
        with target.backup("main", db.connection(), "main") as job:
            while not job.done:
                job.step(-1)  # all pages in one step: one snapshot, never restarted
    finally:
        target.close()
    os.chmod(dest, 0o600)
    return file_size(dest)


def checkpoint_file(path: str, busy_timeout_ms: int) -> bool:
    """``PRAGMA wal_checkpoint(TRUNCATE)`` on a connection of its own to the file at
    ``path``, opened as ``Database`` opens one (sqlite-vec loaded; never creating the file):
    for a process that holds no store, as the replication supervisor bounding a WAL while
    Litestream is down. False when a reader or writer held the WAL past the busy timeout."""
    conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READWRITE)
    try:
        conn.set_busy_timeout(busy_timeout_ms)
        conn.enable_load_extension(True)
        conn.load_extension(sqlite_vec.loadable_path())
        conn.enable_load_extension(False)
        conn.execute("PRAGMA wal_autocheckpoint=0")
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()[0]
        return int(busy) == 0
    finally:
        conn.close()
