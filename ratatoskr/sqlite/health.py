"""The health rules every plane store answers with (the memory pins, shared by affect).

``down`` when the file cannot be read or written (a write of this process failed for it:
the file damaged, unreadable or read-only, until a write succeeds again), is gone, was
replaced or overwritten under the open store (SQLite would go on serving from its cache;
see ``filecheck``), or carries another schema version;
``degraded`` while it serves but needs an operator: the last write of this process could not
be stored (disk full, until a write succeeds again), the file is over 95 % of its size cap
(``RATATOSKR_SQLITE_MAX_DB_BYTES``; every worker sees that one), the disk is over 95 % full,
expired idempotency entries pile up, or, while replication is on, the file's replica lags
more than ``RATATOSKR_REPLICA_MAX_LAG`` (or no supervisor reports it). Infallible: no
exception escapes, and a reason never holds a path or key. A file's ``ok`` and ``degraded``
answers name the durability mode in force (``RATATOSKR_SQLITE_SYNCHRONOUS``), so an
operator sees from the probe whether an acknowledged write survives a power loss.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from typing import Any

import apsw

from ratatoskr.sqlite.database import Database
from ratatoskr.sqlite.replica import read_state

IDEMPOTENCY_BACKLOG_BOUND = 100_000
DISK_DEGRADED_FRACTION = 0.95
DURABILITY = {
    "FULL": "durability FULL: every acknowledged write is on disk",
    "EXTRA": "durability EXTRA: every acknowledged write is on disk",
    "NORMAL": "durability NORMAL: a power loss may drop the last acknowledged writes",
}


READ_ONLY = (
    "database file's permissions no longer allow reading and writing it: served through "
    "the file already open, but a restart will refuse it"
)


def durability(db: Database) -> str | None:
    """What an acknowledged write of this store survives; None in memory (nothing does)."""
    return None if db.in_memory else DURABILITY[db.settings.synchronous]


def _with_mode(db: Database, status: str, reason: str | None) -> dict[str, Any]:
    mode = durability(db)
    if mode is not None:
        reason = mode if reason is None else f"{reason}; {mode}"
    return {"status": status, "reason": reason}


def check_health(
    db: Database,
    expired_backlog: Callable[[apsw.Connection], int],
    probe: Callable[[apsw.Connection], object] | None = None,
) -> dict[str, Any]:
    """``expired_backlog`` counts expired idempotency entries; ``probe`` is an optional extra
    statement the plane needs to work (an extension function, say)."""
    try:
        problem = db.file_problem()
        if problem is not None:
            return {"status": "down", "reason": problem}
        with db.read() as conn:
            if probe is not None:
                probe(conn)
            version = int(conn.execute("PRAGMA user_version").fetchall()[0][0])
            backlog = expired_backlog(conn)
            used = _pragma(conn, "page_count") - _pragma(conn, "freelist_count")
            cap = _pragma(conn, "max_page_count")
        if version != db.latest_version:
            return {"status": "down", "reason": "schema version is not the one this build knows"}
        failure = db.last_write_failure
        if failure is not None and failure.unusable:  # damaged, unreadable or read-only
            return {"status": "down", "reason": f"a write failed: {failure.reason}"}
        if failure is not None:
            return _with_mode(db, "degraded", f"a write failed: {failure.reason}")
        if db.settings.max_db_bytes and used > cap * DISK_DEGRADED_FRACTION:
            return _with_mode(db, "degraded", "database file is over 95% of its size cap")
        if not db.in_memory:
            if not os.access(db.path, os.R_OK | os.W_OK):
                # the open file still serves (a write that fails says down, above), but a
                # restart would refuse it: an operator must know before one happens
                return _with_mode(db, "degraded", READ_ONLY)
            usage = shutil.disk_usage(os.path.dirname(os.path.abspath(db.path)))
            if usage.total and usage.used / usage.total > DISK_DEGRADED_FRACTION:
                return _with_mode(db, "degraded", "disk holding the database is over 95% full")
        lagging = _replication_problem(db)
        if lagging is not None:
            return _with_mode(db, "degraded", lagging)
        if backlog > IDEMPOTENCY_BACKLOG_BOUND:
            return _with_mode(db, "degraded", "expired idempotency entries need pruning")
        return _with_mode(db, "ok", None)
    except Exception:  # health is infallible by contract
        return {"status": "down", "reason": "database cannot be read"}


def _replication_problem(db: Database) -> str | None:
    bound = db.settings.replica_max_lag
    if bound is None or db.in_memory:
        return None
    state = read_state(db.path)
    if state is None:
        return "replication is on but its supervisor has not reported"
    now = time.time()
    if not state.reporting(now):
        return f"replication's supervisor has not reported for {state.silent_for(now):.0f} s"
    if state.restorable is False:
        return "the replica holds nothing to restore from (litestream is writing a new snapshot)"
    lag = state.lag(now)
    if lag > bound:
        return f"replication lags {lag:.0f} s, over RATATOSKR_REPLICA_MAX_LAG ({bound:g} s)"
    return None


def _pragma(conn: apsw.Connection, name: str) -> int:
    return int(conn.execute(f"PRAGMA {name}").fetchall()[0][0])
