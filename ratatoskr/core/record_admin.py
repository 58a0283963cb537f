"""The operator methods (``core.admin.AdminStore``) that every SQL backend answers alike.

``sqlite.admin.SqliteAdmin`` and ``postgres.admin.PgAdmin`` inherit ``RecordAdmin`` and
supply how a function runs in a read and in a write transaction (``_read``, ``_write``),
their ``SqlDialect``, the id lookup, the listing cursors' codec and what erase reclaims
after its transaction; the plane store names its tables and deletes each kind.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar, Protocol, TypeVar

from ratatoskr.core import record_sql
from ratatoskr.core.admin import FacetCounts, RecordPage
from ratatoskr.core.cursors import CursorCodec, filter_tag
from ratatoskr.core.filters import Filter, check_selection
from ratatoskr.core.record_sql import Table
from ratatoskr.core.scope import Scope
from ratatoskr.core.sql_dialect import Connection, SqlDialect

T = TypeVar("T")


class ForgetsIds(Protocol):
    """The part of a backend's idempotency table that erase uses."""

    table: str

    def forget_ids(self, conn: Connection, ids: set[str]) -> int: ...


class RecordAdmin:
    """Counts, listings, forget and erase over a plane's record tables."""

    PLANE: ClassVar[str]
    TABLES: ClassVar[tuple[Table, ...]]
    IDEMPOTENCY: ClassVar[ForgetsIds]
    SQL: ClassVar[SqlDialect]

    # -- what each backend supplies ------------------------------------------------------

    def _read(self, work: Callable[[Connection], T]) -> T:
        """``work`` in one read transaction (one snapshot)."""
        raise NotImplementedError

    def _write(self, work: Callable[[Connection], T]) -> T:
        """``work`` in one write transaction, committed whole or not at all."""
        raise NotImplementedError

    def _listing_codec(self) -> CursorCodec:
        raise NotImplementedError

    def _matching_ids(
        self, conn: Connection, table: Table, ids: Sequence[str] | None, flt: Filter | None
    ) -> list[str]:
        """The ids in ``table`` that ``ids`` names or ``flt`` admits (exactly one is given)."""
        raise NotImplementedError

    def _erase_traces(self, conn: Connection, ids: set[str], scope: Scope) -> None:
        """Inside erase's transaction: remove what else the plane keeps of the erased ids
        and of the erased subject ``scope`` (SQLite memory: the change log's entries with
        their scope values); none by default."""

    def _reclaim_erased(self) -> dict[str, int | bool]:
        """After erase's transaction: free the space that still holds the erased content;
        what was done, as keys of erase's answer."""
        raise NotImplementedError

    # -- what each plane supplies --------------------------------------------------------

    def _delete(self, conn: Connection, table: Table, ids: Sequence[str]) -> None:
        """Delete ``ids`` of ``table``'s kind inside ``conn``'s write transaction."""
        raise NotImplementedError

    # -- counts and listings -------------------------------------------------------------

    def count_by(self, flt: Filter, facet: str) -> FacetCounts:
        return self._read(lambda conn: record_sql.count_by(self.SQL, conn, self.TABLES, flt, facet))

    def list_records(self, flt: Filter, *, limit: int, cursor: str | None = None) -> RecordPage:
        codec = self._listing_codec()
        tag = filter_tag(f"admin.list.{self.PLANE}", flt.to_json())
        after = None if cursor is None else codec.open(cursor, tag, (str, str)).key
        key = None if after is None else (str(after[0]), str(after[1]))
        items = self._read(
            lambda conn: record_sql.listed(self.SQL, conn, self.TABLES, flt, key, limit + 1)
        )
        page = items[:limit]
        more = len(items) > limit
        return RecordPage(
            page, codec.make(tag, (page[-1]["kind"], page[-1]["id"])) if more else None
        )

    def record_counts(self) -> dict[str, int]:
        return self._read(self._counts)

    def _counts(self, conn: Connection) -> dict[str, int]:
        return {t.kind: record_sql.count_rows(self.SQL, conn, t) for t in self.TABLES}

    def _revision_problems(self, conn: Connection) -> list[str]:
        return [p for t in self.TABLES for p in record_sql.revision_problems(conn, t)]

    # -- removal ---------------------------------------------------------------------------

    def _selected(self, flt: Filter | None, kind: str | None = None) -> tuple[Table, ...]:
        if flt is not None:
            return record_sql.reached(self.TABLES, flt)
        kinds = [t.kind for t in self.TABLES]
        if kind is not None and kind not in kinds:
            raise ValueError(f"the {self.PLANE} plane's kinds are {', '.join(kinds)}")
        return tuple(t for t in self.TABLES if kind is None or t.kind == kind)

    def match(
        self,
        *,
        ids: Sequence[str] | None = None,
        flt: Filter | None = None,
        kind: str | None = None,
    ) -> dict[str, list[str]]:
        check_selection(ids, flt, kind)
        tables = self._selected(flt, kind)
        return self._read(
            lambda conn: {t.kind: self._matching_ids(conn, t, ids, flt) for t in tables}
        )

    def _remove(
        self, conn: Connection, table: Table, ids: Sequence[str] | None, flt: Filter | None
    ) -> list[str]:
        doomed = self._matching_ids(conn, table, ids, flt)
        if doomed:
            self._delete(conn, table, doomed)
        return doomed

    def forget(
        self,
        *,
        ids: Sequence[str] | None = None,
        flt: Filter | None = None,
        kind: str | None = None,
    ) -> dict[str, int]:
        check_selection(ids, flt, kind)
        tables = self._selected(flt, kind)
        return self._write(
            lambda conn: {t.kind: len(self._remove(conn, t, ids, flt)) for t in tables}
        )

    def ready_to_write(self) -> None:
        # a real write: an empty transaction passes on a read-only file or a standby
        self._write(self._claim_write)

    def _claim_write(self, conn: Connection) -> None:
        """Write something that changes nothing (the plane's own mark, rewritten)."""
        raise NotImplementedError

    def erase(self, scope: Scope) -> dict[str, int | bool]:
        if not scope:
            raise ValueError("refusing an empty scope: erase would remove everything")
        flt = Filter(scope=dict(scope))

        def erase(conn: Connection) -> dict[str, int | bool]:
            counts: dict[str, int | bool] = {}
            erased: set[str] = set()
            for table in self.TABLES:
                gone = self._remove(conn, table, None, flt)
                counts[table.kind] = len(gone)
                erased.update(gone)
            counts["idempotency"] = self.IDEMPOTENCY.forget_ids(conn, erased)
            self._erase_traces(conn, erased, scope)
            return counts

        counts = self._write(erase)
        return {**counts, **self._reclaim_erased()}
