"""``AdminStore`` (``core.admin``) over a plane's PostgreSQL tables, shared by both planes.

A plane store inherits ``PgAdmin`` and names its tables (``TABLES``, in kind order), its
idempotency table, its meta table and how it deletes each kind. Counts, listings, forget
and erase are ``core.record_admin``'s, run here in PostgreSQL transactions; the SQL lives
in ``core.record_sql`` and ``record_sql`` (the id lookup). Forget and erase run in one
transaction each (retried whole on a serialization failure, like every write); erase then
``VACUUM``s the plane's tables so the dead row versions holding the erased content are
reclaimed at once instead of at the next autovacuum (docs/operations.md says what
PostgreSQL may still hold: WAL, replicas, backups). A backup is a SQLite file of the same
plane (``_sqlite_store``, filled by the plane's ``_copy_to_sqlite``), taken in one snapshot
while the servers write: openable as a store, by ``admin`` or a server, and migratable back.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Protocol, TypeVar

import apsw

from ratatoskr.core.cursors import SECRET_BYTES, SECRET_META_KEY, CursorCodec
from ratatoskr.core.errors import Unavailable
from ratatoskr.core.filters import Filter
from ratatoskr.core.record_admin import RecordAdmin
from ratatoskr.core.record_sql import Table, idempotency_problems, json_problems
from ratatoskr.postgres import record_sql
from ratatoskr.postgres.database import Conn, PgDatabase
from ratatoskr.postgres.idempotency import PgIdempotency
from ratatoskr.postgres.migrations import current_version
from ratatoskr.postgres.probe import MIGRATION_MARKER
from ratatoskr.postgres.scope_sql import POSTGRES
from ratatoskr.sqlite.database import Database

T = TypeVar("T")
_NOT_OBJECT = (
    "CASE WHEN pg_input_is_valid({0}, 'json') THEN json_typeof({0}::json) <> 'object' ELSE true END"
)
JSON_CHECK_VERSION = 160000  # pg_input_is_valid came with PostgreSQL 16


def meta_secret(conn: Conn, meta: str) -> bytes:
    """The plane's cursor secret in its meta table, made on first use."""
    conn.execute(
        f"INSERT INTO {meta} (key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING",
        (SECRET_META_KEY, secrets.token_hex(SECRET_BYTES)),
    )
    row = conn.execute(f"SELECT value FROM {meta} WHERE key = %s", (SECRET_META_KEY,)).fetchone()
    assert row is not None
    return bytes.fromhex(row[0])


READ_ONLY = "SELECT current_setting('transaction_read_only') = 'on' OR pg_is_in_recovery()"


def _refuse_unfinished(conn: Conn, plane: str) -> None:
    """An operator's write into a plane an ``admin migrate`` began and has not finished is
    refused, as ``serve`` refuses the database: the copy's end check would then differ."""
    if conn.execute("SELECT to_regclass(%s)", (MIGRATION_MARKER,)).fetchone() == (None,):
        return
    row = conn.execute(
        f"SELECT NOT done FROM {MIGRATION_MARKER} WHERE plane = %s", (plane,)
    ).fetchone()
    if row is not None and row[0]:
        raise ValueError(
            f"the {plane} plane in this database is an unfinished admin migrate: run the "
            "same migrate again to finish it first (nothing was changed)"
        )


def _read_only(conn: Conn) -> bool:
    row = conn.execute(READ_ONLY).fetchone()
    return bool(row and row[0])


def read_meta_secret(conn: Conn, meta: str) -> bytes | None:
    row = conn.execute(f"SELECT value FROM {meta} WHERE key = %s", (SECRET_META_KEY,)).fetchone()
    return None if row is None else bytes.fromhex(row[0])


class SqliteStore(Protocol):
    """A plane store over a SQLite file, as the backup writes into one."""

    db: Database

    def close(self) -> None: ...


def _durability_setting(conn: Conn) -> str:
    """The setting that decides what an acknowledged write survives, as ``stats`` shows
    it beside SQLite's ``synchronous``: ``fsync=off`` when off (nothing is sure to reach
    the disk), else ``synchronous_commit=...``."""
    row = conn.execute(
        "SELECT current_setting('fsync'), current_setting('synchronous_commit')"
    ).fetchone()
    fsync, commit = (str(row[0]), str(row[1])) if row else ("on", "on")
    return "fsync=off" if fsync == "off" else f"synchronous_commit={commit}"


class PgAdmin(RecordAdmin):
    """The operator methods of a plane store over one PostgreSQL database."""

    IDEMPOTENCY: ClassVar[PgIdempotency]
    SQL = POSTGRES
    META: ClassVar[str]
    db: PgDatabase
    clock: Callable[[], float]

    # -- what each plane supplies --------------------------------------------------------

    def _plane_problems(self, conn: Conn) -> list[str]:
        return []

    def _plane_stats(self) -> dict[str, Any]:
        return {}

    def _sqlite_store(self, dest: str) -> SqliteStore:
        """A new, empty store of the plane in a SQLite file at ``dest`` (the backup's)."""
        raise NotImplementedError

    def _copy_to_sqlite(self, conn: Conn, lite: apsw.Connection) -> int:
        """Every row of the plane, read in ``conn``'s snapshot, into the empty tables of
        ``lite`` (inside its write transaction)."""
        raise NotImplementedError

    # -- the backend's half of RecordAdmin -----------------------------------------------

    def _read(self, work: Callable[[Conn], T]) -> T:
        return self.db.read(work)

    def _write(self, work: Callable[[Conn], T]) -> T:
        def guarded(conn: Conn) -> T:
            _refuse_unfinished(conn, self.PLANE)
            return work(conn)

        return self.db.write(guarded, turn=False)  # an erase can be long

    def _listing_codec(self) -> CursorCodec:
        codec: CursorCodec | None = getattr(self, "_codec", None)
        if codec is None:
            codec = self._codec = CursorCodec(self._listing_secret())
        return codec

    def _listing_secret(self) -> bytes:
        """The plane's cursor secret, read without a write when it exists; a database that
        holds none and takes no write (a standby) gets one for this process."""
        stored = self.db.read(lambda conn: read_meta_secret(conn, self.META))
        if stored is not None:
            return stored
        try:
            return self.db.write(lambda conn: meta_secret(conn, self.META))
        except Unavailable:
            if not self.db.read(_read_only):
                raise
            return secrets.token_bytes(SECRET_BYTES)

    def _claim_write(self, conn: Conn) -> None:
        conn.execute(f"UPDATE {self.META} SET value = value WHERE key = 'plane'")

    def _matching_ids(
        self, conn: Conn, table: Table, ids: Sequence[str] | None, flt: Filter | None
    ) -> list[str]:
        return record_sql.matching_ids(conn, table, ids=ids, flt=flt)

    def _reclaim_erased(self) -> dict[str, int | bool]:
        tables = ", ".join([t.name for t in self.TABLES] + [self.IDEMPOTENCY.table])
        self.db.once(lambda conn: conn.execute(f"VACUUM {tables}"))
        return {"vacuumed": True}

    # -- upkeep ----------------------------------------------------------------------------

    def _tables(self) -> list[str]:
        return [t.name for t in self.TABLES] + [self.IDEMPOTENCY.table, self.META]

    def storage_bytes(self) -> int | None:
        """Bytes of the plane's tables with their indexes and TOAST (``pg_total_relation_size``;
        the WAL and the rest of the database are the server's)."""
        sizes = " + ".join(f"pg_total_relation_size('{t}')" for t in self._tables())
        row = self.db.once(lambda conn: conn.execute(f"SELECT {sizes}").fetchone())
        return int(row[0]) if row else 0

    def stats(self) -> dict[str, Any]:
        now = self.clock()

        def read(conn: Conn) -> dict[str, Any]:
            return {
                "records": self._counts(conn),
                "idempotency_entries": self.IDEMPOTENCY.count(conn),
                "idempotency_expired": self.IDEMPOTENCY.count(conn, now),
                "schema_version": current_version(conn, self.db.component),
                "synchronous": _durability_setting(conn),
            }

        out = self.db.read(read)
        return {
            **out,
            "table_bytes": self.storage_bytes(),
            "schema_latest": self.db.latest_version,
            "location": self.db.path,
            **self._plane_stats(),
        }

    def check(self) -> list[str]:
        def look(conn: Conn) -> list[str]:
            problems = [
                f"schema: table {name} is missing"
                for name in self._tables()
                if conn.execute("SELECT to_regclass(%s)", (name,)).fetchone() == (None,)
            ]
            if problems:  # the checks below would read the missing table
                return problems
            version = current_version(conn, self.db.component)
            if version != self.db.latest_version:
                problems.append(
                    f"schema version {version}, this build knows {self.db.latest_version}"
                )
            row = conn.execute(f"SELECT value FROM {self.META} WHERE key = 'plane'").fetchone()
            if row is None or row[0] != self.PLANE:
                problems.append(f"the plane marker is not {self.PLANE}")
            problems += self._revision_problems(conn)
            if conn.info.server_version >= JSON_CHECK_VERSION:
                problems += [p for t in self.TABLES for p in json_problems(conn, t, _NOT_OBJECT)]
            problems += idempotency_problems(self.IDEMPOTENCY.damaged(conn))
            return problems + self._plane_problems(conn)

        return self.db.read(look)

    def prune(self) -> int:
        now = self.clock()
        return self.db.write(lambda conn: self.IDEMPOTENCY.prune(conn, now))

    def backup(self, dest: str) -> int:
        if os.path.exists(dest):
            raise ValueError(f"refusing to overwrite {dest}")
        target = self._sqlite_store(dest)
        try:

            def copy(conn: Conn) -> int:
                with target.db.write() as lite:
                    return self._copy_to_sqlite(conn, lite)

            self.db.read(copy)
        finally:
            target.close()
        os.chmod(dest, 0o600)
        return os.path.getsize(dest)

    def storage_cap(self) -> int | None:
        return None  # the server's disk and quotas are the server's

    def capped_bytes(self) -> int | None:
        return None

    def replication_lag(self) -> float | None:
        return None  # PostgreSQL's own replication is the operator's, outside this process

    def pool_stats(self) -> dict[str, int] | None:
        """This process's connections to the database and its retried transactions."""
        return {**self.db.pool_stats(), "retries": self.db.counters.retries}
