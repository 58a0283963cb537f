"""``admin migrate --to postgresql://...``: both planes from their SQLite files into
PostgreSQL, every row as stored (revisions, times, float64 vectors, idempotency entries,
the affect cursor secret).

- It refuses a target that already holds records of a plane, unless they are this
  migration's own: each plane is marked before anything is copied, and each batch commits
  with its marker (``ratatoskr_migration``: the source file, the last id copied, done or
  not), so a run stopped anywhere (a crash, Ctrl-C, the database going away) resumes after
  the last batch it committed when run again, skipping a plane it finished. Until every
  plane is done, ``serve`` refuses the database and ``admin check`` fails it.
- The idempotency entries and the cursor secret go in with the marker's last step; the
  unexpired entries of the jti ledgers go in first, so a token used before the move is
  refused after it.
- At the end each plane is checked: the count and a SHA-256 over every stored value, read
  from the file and from PostgreSQL, must be equal; a difference is an error (exit 1), and
  the plane stays marked unfinished.

Stop the servers writing the files first (a write during the copy would be missed); the
copy reads each file in one snapshot per run.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import apsw

from ratatoskr.affect.postgres import transfer as affect_transfer
from ratatoskr.core.filters import AFFECT, MEMORY, PLANES
from ratatoskr.memory.postgres import transfer as memory_transfer
from ratatoskr.ops.locations import (
    describe,
    is_postgres,
    open_affect,
    open_memory,
    unexpired_tokens,
)
from ratatoskr.ops.stores import Stores
from ratatoskr.postgres.database import Conn, PgDatabase
from ratatoskr.postgres.jti import PgJtiLedger
from ratatoskr.postgres.probe import MIGRATION_MARKER as MARKER

Progress = Callable[[str, int], None]
# the tables each plane copies, in order, as its own package names them
_TABLES = {MEMORY: memory_transfer.COPIED_TABLES, AFFECT: affect_transfer.COPIED_TABLES}


class MigrationRefused(ValueError):
    """The target cannot take this migration (it holds other records)."""


NEW, RESUME, DONE = "new", "resume", "done"


def _ensure_marker_table(conn: Conn) -> None:
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {MARKER} (plane text PRIMARY KEY, source text NOT NULL, "
        "tbl text NOT NULL, last_id bytea, done boolean NOT NULL DEFAULT false)"
    )


def _marker(db: PgDatabase, plane: str) -> tuple[str, str, str | None, bool] | None:
    """(source, table, last id, done) of this database's migration of ``plane``, if any."""

    def read(conn: Conn) -> tuple[str, str, str | None, bool] | None:
        _ensure_marker_table(conn)
        row = conn.execute(
            f"SELECT source, tbl, last_id, done FROM {MARKER} WHERE plane = %s", (plane,)
        ).fetchone()
        if row is None:
            return None
        last = None if row[2] is None else bytes(row[2]).decode("utf-8")
        return str(row[0]), str(row[1]), last, bool(row[3])

    return db.write(read)


def _rows_in(db: PgDatabase, plane: str) -> int:
    held = memory_transfer.rows_held if plane == MEMORY else affect_transfer.rows_held
    return db.read(held)


def _set_marker(conn: Conn, plane: str, source: str, table: str, last: str | None) -> None:
    conn.execute(
        f"INSERT INTO {MARKER} (plane, source, tbl, last_id) VALUES (%s, %s, %s, %s) "
        "ON CONFLICT (plane) DO UPDATE SET source = excluded.source, tbl = excluded.tbl, "
        "last_id = excluded.last_id, done = false",
        (plane, source, table, None if last is None else last.encode("utf-8")),
    )


def _begin(db: PgDatabase, plane: str, source: str) -> str:
    """Whether ``plane`` is copied from the start (``new``), resumed, or already copied by
    an earlier run of this migration (``done``); refused when the target holds records of
    the plane from anywhere else. A new plane gets its marker at once, before any plane is
    copied: a run stopped anywhere leaves the target marked unfinished."""
    found = _marker(db, plane)
    if found is None:
        if _rows_in(db, plane):
            raise MigrationRefused(
                f"the target already holds {plane} records: migrate into an empty database"
            )
        db.write(lambda conn: _set_marker(conn, plane, source, _TABLES[plane][0], None))
        return NEW
    if found[0] != source:
        what = "a migration" if found[3] else "an unfinished migration"
        raise MigrationRefused(
            f"the target already holds {plane} records ({what} from another source file)"
        )
    return DONE if found[3] else RESUME


def _copy_plane(
    lite: apsw.Connection, pg: Any, plane: str, source: str, progress: Progress | None
) -> int:
    """Copy the rows of ``plane`` batch by batch after the marker; then the entries."""
    db: PgDatabase = pg.db
    partitioned = bool(getattr(pg, "partitioned", False))
    resume = _marker(db, plane)
    assert resume is not None and not resume[3], "_begin marks the plane first"
    tables = _TABLES[plane]
    copied = 0
    for table in tables[tables.index(resume[1]) :]:
        after = resume[2] if table == resume[1] else None
        if plane == MEMORY:
            batches = memory_transfer.chunk_batches(lite, after)
        else:
            batches = affect_transfer.batches(lite, table, after)
        for rows in batches:

            def write(conn: Conn, rows: list[Any] = rows, table: str = table) -> None:
                if plane == MEMORY:
                    memory_transfer.copy_chunks(conn, rows, partitioned)
                else:
                    affect_transfer.copy_rows(conn, table, rows)
                _set_marker(conn, plane, source, table, str(rows[-1][0]))

            db.write(write)
            copied += len(rows)
            if progress is not None:
                progress(plane, len(rows))

    def finish(conn: Conn) -> None:
        # the file's entries replace any there: those of a run that finished before, whose
        # end check failed, so that this one is run again
        if plane == MEMORY:
            memory_transfer.replace_idempotency(conn, lite)
        else:
            affect_transfer.replace_idempotency(conn, lite)
            affect_transfer.copy_secret(conn, lite)
        conn.execute(f"UPDATE {MARKER} SET done = true WHERE plane = %s", (plane,))

    db.write(finish)
    return copied


def _copy_ledgers(tokens: list[Any], target: str, stores: Stores) -> int:
    """``tokens``, the unexpired entries of the jti ledgers beside the files (or named by
    ``--jti-db``), into the database's ledger: a token used before the move stays used
    after it."""
    pg = PgJtiLedger(target, clock=stores.clock)
    try:
        return pg.adopt(tokens)
    finally:
        pg.close()


def _digests(lite: apsw.Connection, db: PgDatabase, plane: str) -> tuple[Any, Any]:
    if plane == MEMORY:
        return memory_transfer.sqlite_digest(lite), db.read(memory_transfer.pg_digest)
    return affect_transfer.sqlite_digest(lite), db.read(affect_transfer.pg_digest)


def source_rows(stores: Stores, plane: str) -> int:
    """How many rows ``plane``'s file holds (for a progress bar)."""
    counts = stores.get(plane).record_counts()
    return sum(counts.values())


def migrate(stores: Stores, target: str, *, progress: Progress | None = None) -> dict[str, Any]:
    """Copy every present plane file into the database at ``target``, then check."""
    if not is_postgres(target):
        raise ValueError("--to must be a postgresql:// URL")
    present = [p for p in stores.present() if not is_postgres(stores.paths.of(p))]
    if not present:
        raise ValueError("no SQLite plane file to migrate (see --memory-db, --affect-db)")
    # read before the target is touched: a missing ledger named by --jti-db is refused
    # with the database still empty, not claimed for these files
    tokens = unexpired_tokens(stores.paths.jti_files(), clock=stores.clock) or []
    out: dict[str, Any] = {"target": describe(target), "planes": {}, "ok": True}
    # a plane with no file at its default location is left out, and said so
    out["not_migrated"] = {
        p: (
            f"{stores.paths.shown(p)} is already a PostgreSQL database"
            if is_postgres(stores.paths.of(p))
            else f"no file at {stores.paths.shown(p)}"
        )
        for p in PLANES
        if p not in present
    }
    targets: dict[str, Any] = {}
    try:
        for plane in present:
            store: Any = stores.get(plane)
            if plane == MEMORY:
                targets[plane] = open_memory(target, embedding_dim=store.embedding_dim)
            else:
                targets[plane] = open_affect(target)
        sources = {plane: os.path.abspath(stores.paths.of(plane)) for plane in present}
        states = {plane: _begin(targets[plane].db, plane, sources[plane]) for plane in present}
        if all(state == DONE for state in states.values()):
            raise MigrationRefused(
                f"the target already holds {' and '.join(present)} records: this migration "
                "finished earlier (ratatoskr admin check tells whether they are sound)"
            )
        out["jti"] = _copy_ledgers(tokens, target, stores)
        for plane in present:
            pg = targets[plane]
            source: Any = stores.get(plane)
            with source.db.read() as lite:
                copied = 0
                if states[plane] != DONE:
                    copied = _copy_plane(lite, pg, plane, sources[plane], progress)
                (count, want), (got_count, got) = _digests(lite, pg.db, plane)
            same = count == got_count and want == got
            if not same:  # a copy that differs stays unfinished: serve and check refuse it
                pg.db.write(
                    lambda conn, plane=plane: conn.execute(
                        f"UPDATE {MARKER} SET done = false WHERE plane = %s", (plane,)
                    )
                )
            out["planes"][plane] = {
                "source": sources[plane],
                "copied": copied,
                "rows": count,
                "checked": same,
            }
            out["ok"] = out["ok"] and same
    finally:
        for pg in targets.values():
            pg.close()
    return out
