"""``AdminStore`` (``core.admin``) over a plane's PostgreSQL tables, shared by both planes.

A plane store inherits ``PgAdmin`` and names its tables (``TABLES``, in kind order), its
idempotency table, its meta table and how it deletes each kind; the SQL lives in
``record_sql``. Forget and erase run in one transaction each (retried whole on a
serialization failure, like every write); erase then ``VACUUM``s the plane's tables so the
dead row versions holding the erased content are reclaimed at once instead of at the next
autovacuum (docs/operations.md says what PostgreSQL may still hold: WAL, replicas, backups).
A backup is a SQLite file of the same plane (``_backup_file``), taken in one snapshot while
the servers write: openable as a store, by ``admin`` or a server, and migratable back.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from ratatoskr.core.admin import FacetCounts, RecordPage
from ratatoskr.core.cursors import SECRET_BYTES, SECRET_META_KEY, CursorCodec, filter_tag
from ratatoskr.core.filters import Filter, check_selection
from ratatoskr.core.scope import Scope
from ratatoskr.postgres import record_sql
from ratatoskr.postgres.database import Conn, PgDatabase
from ratatoskr.postgres.idempotency import PgIdempotency
from ratatoskr.postgres.migrations import current_version
from ratatoskr.sqlite.record_sql import Table


def meta_secret(conn: Conn, meta: str) -> bytes:
    """The plane's cursor secret in its meta table, made on first use."""
    conn.execute(
        f"INSERT INTO {meta} (key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING",
        (SECRET_META_KEY, secrets.token_hex(SECRET_BYTES)),
    )
    row = conn.execute(f"SELECT value FROM {meta} WHERE key = %s", (SECRET_META_KEY,)).fetchone()
    assert row is not None
    return bytes.fromhex(row[0])


class PgAdmin:
    """The operator methods of a plane store over one PostgreSQL database."""

    PLANE: ClassVar[str]
    TABLES: ClassVar[tuple[Table, ...]]
    IDEMPOTENCY: ClassVar[PgIdempotency]
    META: ClassVar[str]
    db: PgDatabase
    clock: Callable[[], float]

    # -- what each plane supplies --------------------------------------------------------

    def _delete(self, conn: Conn, table: Table, ids: Sequence[str]) -> None:
        """Delete ``ids`` of ``table``'s kind inside ``conn``'s write transaction."""
        raise NotImplementedError

    def _plane_problems(self, conn: Conn) -> list[str]:
        return []

    def _plane_stats(self) -> dict[str, Any]:
        return {}

    def _backup_file(self, dest: str) -> int:
        """Copy the store, in one snapshot, into a new SQLite file of the plane at ``dest``."""
        raise NotImplementedError

    # -- counts and listings -------------------------------------------------------------

    def count_by(self, flt: Filter, facet: str) -> FacetCounts:
        return self.db.read(lambda conn: record_sql.count_by(conn, self.TABLES, flt, facet))

    def list_records(self, flt: Filter, *, limit: int, cursor: str | None = None) -> RecordPage:
        codec = self._listing_codec()
        tag = filter_tag(f"admin.list.{self.PLANE}", flt.to_json())
        after = None if cursor is None else codec.open(cursor, tag, (str, str)).key
        key = None if after is None else (str(after[0]), str(after[1]))
        items = self.db.read(lambda conn: record_sql.listed(conn, self.TABLES, flt, key, limit + 1))
        page = items[:limit]
        more = len(items) > limit
        return RecordPage(
            page, codec.make(tag, (page[-1]["kind"], page[-1]["id"])) if more else None
        )

    def _listing_codec(self) -> CursorCodec:
        codec: CursorCodec | None = getattr(self, "_codec", None)
        if codec is None:
            codec = CursorCodec(self.db.write(lambda conn: meta_secret(conn, self.META)))
            self._codec = codec
        return codec

    def record_counts(self) -> dict[str, int]:
        return self.db.read(
            lambda conn: {t.kind: record_sql.count_rows(conn, t) for t in self.TABLES}
        )

    # -- removal ---------------------------------------------------------------------------

    def _selected(self, flt: Filter | None) -> tuple[Table, ...]:
        return self.TABLES if flt is None else record_sql.reached(self.TABLES, flt)

    def match(
        self, *, ids: Sequence[str] | None = None, flt: Filter | None = None
    ) -> dict[str, list[str]]:
        check_selection(ids, flt)
        return self.db.read(
            lambda conn: {
                t.kind: record_sql.matching_ids(conn, t, ids=ids, flt=flt)
                for t in self._selected(flt)
            }
        )

    def _remove(
        self, conn: Conn, table: Table, ids: Sequence[str] | None, flt: Filter | None
    ) -> list[str]:
        doomed = record_sql.matching_ids(conn, table, ids=ids, flt=flt)
        if doomed:
            self._delete(conn, table, doomed)
        return doomed

    def forget(
        self, *, ids: Sequence[str] | None = None, flt: Filter | None = None
    ) -> dict[str, int]:
        check_selection(ids, flt)
        return self.db.write(
            lambda conn: {t.kind: len(self._remove(conn, t, ids, flt)) for t in self._selected(flt)}
        )

    def erase(self, scope: Scope) -> dict[str, int | bool]:
        if not scope:
            raise ValueError("refusing an empty scope: erase would remove everything")
        flt = Filter(scope=dict(scope))

        def erase(conn: Conn) -> dict[str, int | bool]:
            counts: dict[str, int | bool] = {}
            erased: set[str] = set()
            for table in self.TABLES:
                gone = self._remove(conn, table, None, flt)
                counts[table.kind] = len(gone)
                erased.update(gone)
            counts["idempotency"] = self.IDEMPOTENCY.forget_ids(conn, erased)
            return counts

        counts = self.db.write(erase)
        tables = ", ".join([t.name for t in self.TABLES] + [self.IDEMPOTENCY.table])
        self.db.once(lambda conn: conn.execute(f"VACUUM {tables}"))
        counts["vacuumed"] = True
        return counts

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
                "records": {t.kind: record_sql.count_rows(conn, t) for t in self.TABLES},
                "idempotency_entries": self.IDEMPOTENCY.count(conn),
                "idempotency_expired": self.IDEMPOTENCY.count(conn, now),
                "schema_version": current_version(conn, self.db.component),
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
            problems: list[str] = []
            version = current_version(conn, self.db.component)
            if version != self.db.latest_version:
                problems.append(
                    f"schema version {version}, this build knows {self.db.latest_version}"
                )
            row = conn.execute(f"SELECT value FROM {self.META} WHERE key = 'plane'").fetchone()
            if row is None or row[0] != self.PLANE:
                problems.append(f"the plane marker is not {self.PLANE}")
            for table in self.TABLES:
                problems += record_sql.revision_problems(conn, table)
            return problems + self._plane_problems(conn)

        return self.db.read(look)

    def prune(self) -> int:
        now = self.clock()
        return self.db.write(lambda conn: self.IDEMPOTENCY.prune(conn, now))

    def backup(self, dest: str) -> int:
        return self._backup_file(dest)

    def pool_stats(self) -> dict[str, int]:
        """This process's connections to the database and its retried transactions."""
        return {**self.db.pool_stats(), "retries": self.db.counters.retries}
