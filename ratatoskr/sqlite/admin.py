"""``AdminStore`` (``core.admin``) over a plane's SQLite file, shared by both plane stores.

A plane store inherits ``SqliteAdmin`` and names its tables (``TABLES``, in kind order), its
idempotency table and how it deletes each kind; the SQL lives in ``record_sql`` (filters,
counts, listings), ``upkeep`` (file health, backup, WAL) and the plane's ``admin_sql``.
Deletes go through the plane's own delete path (``_delete``), so the change log that keeps
every process's search mirror in step sees them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import apsw

from ratatoskr.core.admin import FacetCounts, RecordPage
from ratatoskr.core.cursors import filter_tag
from ratatoskr.core.filters import Filter, check_selection
from ratatoskr.core.scope import Scope
from ratatoskr.sqlite import record_sql, upkeep
from ratatoskr.sqlite.cursors import codec_for
from ratatoskr.sqlite.database import Database
from ratatoskr.sqlite.idempotency import IdempotencyTable
from ratatoskr.sqlite.record_sql import Table
from ratatoskr.sqlite.replica import replica_lag


class SqliteAdmin:
    """The operator methods of a plane store over one SQLite file."""

    PLANE: ClassVar[str]
    TABLES: ClassVar[tuple[Table, ...]]
    IDEMPOTENCY: ClassVar[IdempotencyTable]
    db: Database
    clock: Callable[[], float]

    # -- what each plane supplies --------------------------------------------------------

    def _delete(self, conn: apsw.Connection, table: Table, ids: Sequence[str]) -> None:
        """Delete ``ids`` of ``table``'s kind inside ``conn``'s write transaction."""
        raise NotImplementedError

    def _plane_problems(self, conn: apsw.Connection) -> list[str]:
        """The plane's own invariants that ``check`` verifies (none by default)."""
        return []

    def _after_erase(self) -> None:
        """Remove what the plane's indexes keep of erased records (nothing by default)."""

    def _plane_stats(self) -> dict[str, Any]:
        """Plane-specific keys of ``stats``."""
        return {}

    # -- counts and listings -------------------------------------------------------------

    def count_by(self, flt: Filter, facet: str) -> FacetCounts:
        with self.db.read() as conn:
            return record_sql.count_by(conn, self.TABLES, flt, facet)

    def list_records(self, flt: Filter, *, limit: int, cursor: str | None = None) -> RecordPage:
        codec = codec_for(self.db)
        tag = filter_tag(f"admin.list.{self.PLANE}", flt.to_json())
        after = None if cursor is None else codec.open(cursor, tag, (str, str)).key
        key = None if after is None else (str(after[0]), str(after[1]))
        with self.db.read() as conn:
            items = record_sql.listed(conn, self.TABLES, flt, key, limit + 1)
        page = items[:limit]
        more = len(items) > limit
        return RecordPage(
            page, codec.make(tag, (page[-1]["kind"], page[-1]["id"])) if more else None
        )

    def record_counts(self) -> dict[str, int]:
        with self.db.read() as conn:
            return {t.kind: record_sql.count_rows(conn, t) for t in self.TABLES}

    # -- removal ---------------------------------------------------------------------------

    def _selected(self, flt: Filter | None) -> tuple[Table, ...]:
        return self.TABLES if flt is None else record_sql.reached(self.TABLES, flt)

    def match(
        self, *, ids: Sequence[str] | None = None, flt: Filter | None = None
    ) -> dict[str, list[str]]:
        check_selection(ids, flt)
        with self.db.read() as conn:
            return {
                t.kind: record_sql.matching_ids(conn, t, ids=ids, flt=flt)
                for t in self._selected(flt)
            }

    def _remove(
        self, conn: apsw.Connection, table: Table, ids: Sequence[str] | None, flt: Filter | None
    ) -> list[str]:
        doomed = record_sql.matching_ids(conn, table, ids=ids, flt=flt)
        self._delete(conn, table, doomed)
        return doomed

    def forget(
        self, *, ids: Sequence[str] | None = None, flt: Filter | None = None
    ) -> dict[str, int]:
        check_selection(ids, flt)
        with self.db.write() as conn:
            return {t.kind: len(self._remove(conn, t, ids, flt)) for t in self._selected(flt)}

    def erase(self, scope: Scope) -> dict[str, int | bool]:
        if not scope:
            raise ValueError("refusing an empty scope: erase would remove everything")
        flt = Filter(scope=dict(scope))
        counts: dict[str, int | bool] = {}
        with self.db.write() as conn:
            erased: set[str] = set()
            for table in self.TABLES:
                gone = self._remove(conn, table, None, flt)
                counts[table.kind] = len(gone)
                erased.update(gone)
            counts["idempotency"] = self.IDEMPOTENCY.forget_ids(conn, erased)
        self._after_erase()
        counts["wal_truncated"] = upkeep.checkpoint_truncate(self.db)
        return counts

    # -- upkeep ----------------------------------------------------------------------------

    def storage_bytes(self) -> int | None:
        if self.db.in_memory:
            return None
        return sum(upkeep.sizes(self.db))

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
            records = {t.kind: record_sql.count_rows(conn, t) for t in self.TABLES}
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
            for table in self.TABLES:
                problems += record_sql.revision_problems(conn, table)
            return problems + self._plane_problems(conn)

    def prune(self) -> int:
        with self.db.write() as conn:
            return self.IDEMPOTENCY.prune(conn, self.clock())

    def backup(self, dest: str) -> int:
        return upkeep.backup_to(self.db, dest)
