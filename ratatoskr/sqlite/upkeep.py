"""Keeping a plane file healthy, the same for every plane: its sizes, soundness, schema and
plane marks, an online backup, and truncating the WAL.

``backup_to`` uses SQLite's online backup API in a single step, so the copy is one consistent
snapshot even while the server commits.
"""

from __future__ import annotations

import os

import apsw

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
    marked = conn.execute("SELECT value FROM ratatoskr_meta WHERE key = 'plane'").fetchall()
    if not marked or marked[0][0] != plane:
        problems.append(f"ratatoskr_meta does not name the {plane} plane")
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
