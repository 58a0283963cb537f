"""``admin stats``, ``check``, ``backup`` and ``prune``: keeping the plane files healthy.

``check`` answers the question an operator asks after a crash, a restore or a copy: is each
file sound SQLite at the schema this build knows, does every chunk have exactly one vector
row (a chunk without one is invisible to unscoped search; an orphaned one is a result that
cannot be read), are revisions positive. ``backup`` uses SQLite's online backup API in a
single step, so the copy is one consistent snapshot even while the server commits.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from typing import Any

import apsw

from ratatoskr.core.errors import BifrostError
from ratatoskr.core.filters import AFFECT, MEMORY, PLANES
from ratatoskr.memory.store import RatatoskrMemoryStore
from ratatoskr.ops.filters import TABLES
from ratatoskr.ops.forget import IDEMPOTENCY
from ratatoskr.ops.stores import Paths, Stores
from ratatoskr.sqlite.database import SchemaError
from ratatoskr.sqlite.jti import JtiLedger

_SHOWN_IDS = 5


def _size(path: str) -> int:
    return os.path.getsize(path) if os.path.isfile(path) else 0


def _require_some(stores: Stores) -> list[str]:
    present = stores.present()
    if not present:
        paths = ", ".join(stores.paths.of(p) for p in PLANES)
        raise ValueError(f"no database found at {paths} (see --memory-db, --affect-db)")
    return present


def stats(stores: Stores) -> dict[str, Any]:
    """Records per plane and kind, file and WAL sizes, cache sizes, schema versions."""
    now = stores.clock()
    out: dict[str, Any] = {"planes": {}, "jti": []}
    for plane in _require_some(stores):
        store = stores.get(plane)
        path = stores.paths.of(plane)
        idem = IDEMPOTENCY[plane]
        with store.db.read() as conn:
            records = {
                t.kind: int(conn.execute(f"SELECT count(*) FROM {t.name}").fetchall()[0][0])
                for t in TABLES[plane]
            }
            entries, expired = idem.count(conn), idem.count(conn, now)
            version = int(conn.execute("PRAGMA user_version").fetchall()[0][0])
        info: dict[str, Any] = {
            "path": path,
            "records": records,
            "file_bytes": _size(path),
            "wal_bytes": _size(path + "-wal"),
            "idempotency_entries": entries,
            "idempotency_expired": expired,
            "schema_version": version,
            "schema_latest": store.db.latest_version,
        }
        if isinstance(store, RatatoskrMemoryStore):
            info["embedding_dim"] = store.embedding_dim
        out["planes"][plane] = info
    for path in stores.paths.jti_ledgers():
        if os.path.isfile(path):
            ledger = JtiLedger(path, clock=stores.clock)
            try:
                with ledger.db.read() as conn:
                    expired = conn.execute(
                        "SELECT count(*) FROM jti_ledger WHERE expires_at <= ?", (now,)
                    ).fetchall()[0][0]
                out["jti"].append(
                    {"path": path, "entries": ledger.count(), "expired": int(expired)}
                )
            finally:
                ledger.close()
    return out


def check(stores: Stores) -> dict[str, Any]:
    """Every problem found, per plane; ``ok`` only when there is none."""
    planes: dict[str, Any] = {}
    for plane in _require_some(stores):
        problems: list[str] = []
        try:
            _check_plane(stores, plane, problems)
        except (SchemaError, ValueError, BifrostError, apsw.Error) as exc:
            problems.append(f"cannot open: {exc}")
        planes[plane] = {"path": stores.paths.of(plane), "problems": problems}
    return {"ok": not any(p["problems"] for p in planes.values()), "planes": planes}


def _check_plane(stores: Stores, plane: str, problems: list[str]) -> None:
    store = stores.get(plane)
    with store.db.read() as conn:
        integrity = [r[0] for r in conn.execute("PRAGMA integrity_check").fetchall()]
        if integrity != ["ok"]:
            problems.append(f"integrity_check: {len(integrity)} finding(s), first: {integrity[0]}")
        version = int(conn.execute("PRAGMA user_version").fetchall()[0][0])
        if version != store.db.latest_version:
            problems.append(f"schema version {version}, this build knows {store.db.latest_version}")
        marked = conn.execute("SELECT value FROM ratatoskr_meta WHERE key = 'plane'").fetchall()
        if not marked or marked[0][0] != plane:
            problems.append(f"ratatoskr_meta does not name the {plane} plane")
        for table in TABLES[plane]:
            if table.has_revision:
                bad = conn.execute(
                    f"SELECT count(*) FROM {table.name} WHERE revision < 1"
                ).fetchall()[0][0]
                if bad:
                    problems.append(f"{bad} {table.kind}(s) with a revision below 1")
        if plane == MEMORY:
            _check_vectors(conn, problems)


def _check_vectors(conn: apsw.Connection, problems: list[str]) -> None:
    chunks = {r[0] for r in conn.execute("SELECT chunk_id FROM memory_chunks").fetchall()}
    vectors = Counter(r[0] for r in conn.execute("SELECT chunk_id FROM memory_vec").fetchall())
    for what, ids in (
        ("chunk(s) without a memory_vec row", sorted(chunks - vectors.keys())),
        ("orphaned memory_vec row(s) without a chunk", sorted(vectors.keys() - chunks)),
        (
            "chunk(s) with more than one memory_vec row",
            sorted(k for k, n in vectors.items() if n > 1),
        ),
    ):
        if ids:
            shown = ", ".join(ids[:_SHOWN_IDS]) + (", ..." if len(ids) > _SHOWN_IDS else "")
            problems.append(f"{len(ids)} {what}: {shown}")


def backup(
    stores: Stores,
    dest_dir: str,
    *,
    verify: bool = True,
    on_copied: Callable[[str, int], None] | None = None,
) -> dict[str, Any]:
    """Copy every present plane file to ``dest_dir/<plane>.db`` (owner-only permissions),
    then, with ``verify``, run ``check`` on the copies."""
    present = _require_some(stores)
    os.makedirs(dest_dir, exist_ok=True)
    targets = {plane: os.path.join(dest_dir, f"{plane}.db") for plane in present}
    for target in targets.values():
        if os.path.exists(target):
            raise ValueError(f"refusing to overwrite {target}")
    copied: dict[str, Any] = {}
    for plane, target in targets.items():
        source = stores.get(plane).db.connection()
        dest = apsw.Connection(target)
        try:
            with dest.backup("main", source, "main") as job:
                while not job.done:
                    job.step(-1)  # all pages in one step: one snapshot, never restarted
        finally:
            dest.close()
        os.chmod(target, 0o600)
        copied[plane] = {"path": target, "bytes": _size(target)}
        if on_copied is not None:
            on_copied(plane, _size(target))
    out: dict[str, Any] = {"planes": copied}
    if verify:
        copy_paths = Paths(
            targets.get(MEMORY, os.path.join(dest_dir, "memory.db")),
            targets.get(AFFECT, os.path.join(dest_dir, "affect.db")),
        )
        with Stores(copy_paths, clock=stores.clock) as copies:
            out["check"] = check(copies)
    return out


def prune(stores: Stores) -> dict[str, Any]:
    """Drop expired idempotency entries (both planes) and expired jti ledger entries."""
    now = stores.clock()
    out: dict[str, Any] = {"idempotency": {}, "jti": {}}
    for plane in _require_some(stores):
        with stores.get(plane).db.write() as conn:
            out["idempotency"][plane] = IDEMPOTENCY[plane].prune(conn, now)
    for path in stores.paths.jti_ledgers():
        if os.path.isfile(path):
            ledger = JtiLedger(path, clock=stores.clock)
            try:
                out["jti"][path] = ledger.prune()
            finally:
                ledger.close()
    return out
