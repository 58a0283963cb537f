"""``AdminStore`` (``core.admin``) over a plane's SQLite file, shared by both plane stores.

A plane store inherits ``SqliteAdmin`` and names its tables (``TABLES``, in kind order), its
idempotency table and how it deletes each kind. Counts, listings, forget and erase are
``core.record_admin``'s, run here in SQLite transactions; the SQL lives in
``core.record_sql`` (filters, counts, listings), ``record_sql`` (the id lookup), ``upkeep``
(file health, backup, WAL) and the plane's ``admin_sql``.
Deletes go through the plane's own delete path (``_delete``), so the change log that keeps
every process's search mirror in step sees them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

import apsw

from ratatoskr.core.cursors import CursorCodec
from ratatoskr.core.filters import Filter
from ratatoskr.core.record_admin import RecordAdmin
from ratatoskr.core.record_sql import Table, idempotency_problems, json_problems
from ratatoskr.sqlite import record_sql, upkeep
from ratatoskr.sqlite.cursors import codec_for
from ratatoskr.sqlite.database import Database
from ratatoskr.sqlite.idempotency import IdempotencyTable
from ratatoskr.sqlite.replica import litestream_dir, replica_lag
from ratatoskr.sqlite.scope_sql import SQLITE

T = TypeVar("T")
# SQLite's own JSON parser (json_type of text that is not JSON is an error, not NULL)
_NOT_OBJECT = "CASE WHEN json_valid({0}) THEN json_type({0}) <> 'object' ELSE 1 END"


class SqliteAdmin(RecordAdmin):
    """The operator methods of a plane store over one SQLite file."""

    IDEMPOTENCY: ClassVar[IdempotencyTable]
    SQL = SQLITE
    db: Database
    clock: Callable[[], float]

    # -- what each plane supplies --------------------------------------------------------

    def _plane_problems(self, conn: apsw.Connection) -> list[str]:
        """The plane's own invariants that ``check`` verifies (none by default)."""
        return []

    def _after_erase(self) -> None:
        """Remove what the plane's indexes keep of erased records (nothing by default)."""

    def _plane_stats(self) -> dict[str, Any]:
        """Plane-specific keys of ``stats``."""
        return {}

    # -- the backend's half of RecordAdmin -----------------------------------------------

    def _read(self, work: Callable[[apsw.Connection], T]) -> T:
        with self.db.read() as conn:
            return work(conn)

    def _write(self, work: Callable[[apsw.Connection], T]) -> T:
        with self.db.write() as conn:
            return work(conn)

    def _claim_write(self, conn: apsw.Connection) -> None:
        conn.execute("UPDATE ratatoskr_meta SET value = value WHERE key = 'plane'")

    def _listing_codec(self) -> CursorCodec:
        codec: CursorCodec | None = getattr(self, "_codec", None)
        if codec is None:
            codec = self._codec = codec_for(self.db, read_only_ok=True)
        return codec

    def _matching_ids(
        self, conn: apsw.Connection, table: Table, ids: Sequence[str] | None, flt: Filter | None
    ) -> list[str]:
        return record_sql.matching_ids(conn, table, ids=ids, flt=flt)

    def _reclaim_erased(self) -> dict[str, int | bool]:
        self._after_erase()
        return {
            "wal_truncated": upkeep.checkpoint_truncate(self.db),
            # Litestream's local LTX files still hold the erased pages (the docs say what to do)
            "litestream_copies": os.path.isdir(litestream_dir(self.db.path)),
        }

    # -- upkeep ----------------------------------------------------------------------------

    def storage_bytes(self) -> int | None:
        if self.db.in_memory:
            return None
        return sum(upkeep.sizes(self.db))

    def storage_cap(self) -> int | None:
        cap = self.db.settings.max_db_bytes
        return cap if cap is not None and cap > 0 else None

    def capped_bytes(self) -> int | None:
        if self.db.in_memory:
            return None
        with self.db.read() as conn:
            pages, free, size = (
                int(conn.execute(f"PRAGMA {name}").fetchall()[0][0])
                for name in ("page_count", "freelist_count", "page_size")
            )
            return (pages - free) * size

    def pool_stats(self) -> dict[str, int] | None:
        return None  # an embedded file: no connections to a server

    def replication_lag(self) -> float | None:
        """Seconds the file's replica lags (``sqlite.replica``; inf when replication is on
        but no supervisor reports it); None when the file is not replicated."""
        if self.db.in_memory or self.db.settings.replica_max_lag is None:
            return None
        lag = replica_lag(self.db.path)
        return float("inf") if lag is None else lag

    def stats(self) -> dict[str, Any]:
        now = self.clock()
        with self.db.read() as conn:
            records = self._counts(conn)
            entries = self.IDEMPOTENCY.count(conn)
            expired = self.IDEMPOTENCY.count(conn, now)
            version = upkeep.schema_version(conn)
        file_bytes, wal_bytes = upkeep.sizes(self.db)
        return {
            "records": records,
            "file_bytes": file_bytes,
            "wal_bytes": wal_bytes,
            "idempotency_entries": entries,
            "idempotency_expired": expired,
            "schema_version": version,
            "schema_latest": self.db.latest_version,
            "synchronous": self.db.settings.synchronous,
            **self._plane_stats(),
        }

    def check(self) -> list[str]:
        with self.db.read() as conn:
            problems = upkeep.file_problems(conn, self.db, self.PLANE)
            problems += self._revision_problems(conn)
            problems += [p for t in self.TABLES for p in json_problems(conn, t, _NOT_OBJECT)]
            problems += idempotency_problems(self.IDEMPOTENCY.damaged(conn))
            return problems + self._plane_problems(conn)

    def prune(self) -> int:
        with self.db.write() as conn:
            return self.IDEMPOTENCY.prune(conn, self.clock())

    def backup(self, dest: str) -> int:
        return upkeep.backup_to(self.db, dest)
