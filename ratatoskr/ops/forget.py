"""``admin forget`` (one plane, by ids or a non-empty filter) and ``admin erase`` (a subject
across both planes, leaving no trace in the files).

Deleting goes through plain functions over the store's ``db`` rather than the store's
methods: they take a filter, delete chunks and their vector rows together, and record the
deletes in ``memory_changes`` when that change log exists. Erase also drops the idempotency
entries whose call wrote an erased record, rebuilds the vec0 index and truncates the WAL, so
neither the database nor its WAL keeps a copy of the erased content (``secure_delete`` is on
for every connection, which zeroes freed cells and pages).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import apsw

from ratatoskr.core.filters import AFFECT, MEMORY, Filter
from ratatoskr.memory.store import RatatoskrMemoryStore
from ratatoskr.ops.filters import TABLES, Table, condition, tables_for
from ratatoskr.ops.stores import PlaneStore, Stores
from ratatoskr.sqlite.database import Database
from ratatoskr.sqlite.idempotency import IdempotencyTable

CHANGES_TABLE = "memory_changes"
IDEMPOTENCY = {
    MEMORY: IdempotencyTable("memory_idempotency"),
    AFFECT: IdempotencyTable("affect_idempotency"),
}
_BATCH = 500


def _batches(ids: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(ids), _BATCH):
        yield ids[start : start + _BATCH]


def matching_ids(
    conn: apsw.Connection, table: Table, *, ids: Sequence[str] | None, flt: Filter | None
) -> list[str]:
    """The ids in ``table`` that ``ids`` names or ``flt`` admits (exactly one is given)."""
    if ids is not None:
        found: list[str] = []
        for batch in _batches(list(dict.fromkeys(ids))):
            marks = ",".join("?" * len(batch))
            rows = conn.execute(
                f"SELECT {table.id_column} FROM {table.name} WHERE {table.id_column} IN ({marks})",
                list(batch),
            ).fetchall()
            found.extend(r[0] for r in rows)
        return found
    assert flt is not None
    where, args = condition(table, flt)
    rows = conn.execute(f"SELECT {table.id_column} FROM {table.name} WHERE {where}", args)
    return [r[0] for r in rows.fetchall()]


def delete_memory_chunks(conn: apsw.Connection, ids: Sequence[str]) -> int:
    """Delete chunks and their vector rows inside the caller's write transaction, noting each
    delete in the change log when the store keeps one."""
    rows = [(i,) for i in ids]
    conn.executemany("DELETE FROM memory_chunks WHERE chunk_id = ?", rows)
    conn.executemany("DELETE FROM memory_vec WHERE chunk_id = ?", rows)
    _log_deletes(conn, ids)
    return len(rows)


def _log_deletes(conn: apsw.Connection, ids: Sequence[str]) -> None:
    """Note deletes in the change log when it exists and no trigger on memory_chunks does."""
    columns = {r[1] for r in conn.execute(f"PRAGMA table_info({CHANGES_TABLE})").fetchall()}
    triggered = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'memory_chunks' "
        "AND sql LIKE ?",
        (f"%{CHANGES_TABLE}%",),
    ).fetchall()
    if not columns or triggered:
        return
    if "op" in columns:
        sql = f"INSERT INTO {CHANGES_TABLE} (chunk_id, op) VALUES (?, 'delete')"
    else:
        sql = f"INSERT INTO {CHANGES_TABLE} (chunk_id) VALUES (?)"
    conn.executemany(sql, [(i,) for i in ids])


def delete_memory_where(store: RatatoskrMemoryStore, flt: Filter) -> list[str]:
    """Delete every chunk ``flt`` admits (chunks, vector rows, change log); the deleted ids."""
    if flt.is_empty():
        raise ValueError("refusing an empty filter: it would remove everything")
    with store.db.write() as conn:
        doomed = matching_ids(conn, TABLES[MEMORY][0], ids=None, flt=flt)
        delete_memory_chunks(conn, doomed)
    return doomed


def rebuild_vector_index(store: RatatoskrMemoryStore) -> int:
    """Rebuild ``memory_vec`` from its own rows: drop and recreate the vec0 table with the
    statement it was made with, so its shadow tables hold no freed slot. Rows kept."""
    with store.db.write() as conn:
        made = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'memory_vec'").fetchall()
        conn.execute("DROP TABLE IF EXISTS temp.ratatoskr_vec_copy")
        conn.execute("CREATE TEMP TABLE ratatoskr_vec_copy (chunk_id TEXT PRIMARY KEY, v BLOB)")
        conn.execute(
            "INSERT INTO temp.ratatoskr_vec_copy SELECT chunk_id, embedding FROM memory_vec"
        )
        conn.execute("DROP TABLE memory_vec")
        conn.execute(made[0][0])
        conn.execute(
            "INSERT INTO memory_vec (chunk_id, embedding) "
            "SELECT chunk_id, v FROM temp.ratatoskr_vec_copy ORDER BY chunk_id"
        )
        conn.execute("DROP TABLE temp.ratatoskr_vec_copy")
        return int(conn.execute("SELECT count(*) FROM memory_vec").fetchall()[0][0])


def checkpoint_truncate(db: Database) -> bool:
    """Copy the WAL into the file and truncate it to zero bytes; False when a reader held
    it past the busy timeout (run again once the server is idle)."""
    busy, _, _ = db.connection().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()[0]
    return int(busy) == 0


def forget(
    store: PlaneStore,
    plane: str,
    *,
    ids: Sequence[str] | None = None,
    flt: Filter | None = None,
    dry_run: bool = False,
) -> dict[str, int]:
    """Remove the records ``ids`` names or ``flt`` admits; counts per kind of what was (or,
    with ``dry_run``, would be) removed. An empty id list or filter is refused (the seed)."""
    if (ids is None) == (flt is None):
        raise ValueError("forget takes ids or a filter, not both")
    if ids is not None and (not ids or any(not i for i in ids)):
        raise ValueError("forget needs at least one non-empty id")
    if flt is not None and flt.is_empty():
        raise ValueError("refusing an empty filter: it would remove everything")
    tables = TABLES[plane] if flt is None else tables_for(plane, flt)
    if dry_run:
        with store.db.read() as conn:
            return {t.kind: len(matching_ids(conn, t, ids=ids, flt=flt)) for t in tables}
    with store.db.write() as conn:
        return {t.kind: len(_remove(conn, store, t, ids=ids, flt=flt)) for t in tables}


def _remove(
    conn: apsw.Connection,
    store: PlaneStore,
    table: Table,
    *,
    ids: Sequence[str] | None,
    flt: Filter | None,
) -> list[str]:
    doomed = matching_ids(conn, table, ids=ids, flt=flt)
    if table.name == "memory_chunks":
        delete_memory_chunks(conn, doomed)
    else:
        conn.executemany(
            f"DELETE FROM {table.name} WHERE {table.id_column} = ?", [(i,) for i in doomed]
        )
    return doomed


def erase(stores: Stores, scope: dict[str, str], *, dry_run: bool = False) -> dict[str, Any]:
    """Remove everything ``scope`` admits from both planes, then the traces: idempotency
    entries that wrote it, freed vec0 slots, and the WAL."""
    if not scope:
        raise ValueError("refusing an empty scope: erase would remove everything")
    flt = Filter(scope=dict(scope))
    report: dict[str, Any] = {"scope": dict(sorted(scope.items())), "planes": {}}
    for plane in stores.present():
        store = stores.get(plane)
        if dry_run:
            counts: dict[str, Any] = forget(store, plane, flt=flt, dry_run=True)
            report["planes"][plane] = counts
            continue
        with store.db.write() as conn:
            erased: set[str] = set()
            counts = {}
            for table in TABLES[plane]:
                gone = _remove(conn, store, table, ids=None, flt=flt)
                counts[table.kind] = len(gone)
                erased.update(gone)
            counts["idempotency"] = IDEMPOTENCY[plane].forget_ids(conn, erased)
        if isinstance(store, RatatoskrMemoryStore):
            rebuild_vector_index(store)
        counts["wal_truncated"] = checkpoint_truncate(store.db)
        report["planes"][plane] = counts
    report["removed"] = not dry_run
    return report
