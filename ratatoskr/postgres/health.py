"""The health rules of a plane on PostgreSQL (the SQLite store's, for this backend).

``ok`` names the durability in force (PostgreSQL's ``fsync`` and ``synchronous_commit``), as
the SQLite stores name theirs. ``down`` when PostgreSQL cannot be reached, pgvector or the plane's
tables are missing, or the plane's schema version is not the one this build knows;
``degraded`` while it serves but needs an operator: the database takes no writes (a
standby), the last write of this process failed for a reason other than a conflict or a
lock held elsewhere, expired idempotency entries pile up. Infallible, and a
reason never holds a host, a user or a password.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from psycopg_pool import PoolTimeout

from ratatoskr.core.errors import Unavailable
from ratatoskr.postgres.database import PgDatabase
from ratatoskr.postgres.migrations import current_version
from ratatoskr.sqlite.health import IDEMPOTENCY_BACKLOG_BOUND

Conn = psycopg.Connection[Any]
# Health waits this long for a pooled connection (a readiness probe's timeout is often 1 s),
# and as long again for a connection of its own when the pool has none free: taken, the
# database is up and this worker's connections are all busy (it serves, slower).
HEALTH_WAIT = 1.0
BUSY = "every PostgreSQL connection of this worker is in use: calls wait for one"
READ_ONLY = (
    "the database is read-only (a standby, or default_transaction_read_only): reads are "
    "served, every write answers unavailable"
)
# health reads in a READ ONLY transaction, so it asks what a write's transaction would be
_MODES = (
    "SELECT current_setting('synchronous_commit'), current_setting('fsync'), "
    "pg_is_in_recovery() OR current_setting('default_transaction_read_only') = 'on'"
)


def check_pg_health(
    db: PgDatabase,
    expired_backlog: Callable[[Conn], int],
    probe: Callable[[Conn], object] | None = None,
) -> dict[str, Any]:
    def look(conn: Conn) -> tuple[int, int, str, str, bool]:
        if probe is not None:
            probe(conn)
        row = conn.execute(_MODES).fetchone()
        mode, fsync, read_only = (
            (str(row[0]), str(row[1]), bool(row[2])) if row else ("on", "on", False)
        )
        version = current_version(conn, db.component)
        return version, expired_backlog(conn), mode, fsync, read_only

    wait = min(HEALTH_WAIT, db.settings.timeout)
    try:
        version, backlog, mode, fsync, read_only = db.read(look, wait=wait)
    except Unavailable as exc:
        if isinstance(exc.__context__, PoolTimeout) and db.reachable(HEALTH_WAIT):
            return {"status": "degraded", "reason": BUSY}
        return {"status": "down", "reason": exc.message.removeprefix("store unavailable: ")}
    except Exception:  # health is infallible by contract
        return {"status": "down", "reason": "the plane's tables cannot be read"}
    if version != db.latest_version:
        return {"status": "down", "reason": "schema version is not the one this build knows"}
    if read_only:
        return {"status": "degraded", "reason": READ_ONLY}
    failure = db.last_write_failure
    if failure is not None:
        return {"status": "degraded", "reason": f"a write failed: {failure.reason}"}
    if backlog > IDEMPOTENCY_BACKLOG_BOUND:
        return {"status": "degraded", "reason": "expired idempotency entries need pruning"}
    return {"status": "ok", "reason": durability(mode, fsync)}


def durability(synchronous_commit: str, fsync: str = "on") -> str:
    """What an acknowledged write survives, by the two settings that decide it: without
    ``fsync`` nothing is sure to reach the disk, whatever ``synchronous_commit`` says."""
    if fsync == "off":
        return (
            "durability fsync=off: a crash of the machine may lose acknowledged writes and "
            "damage the database"
        )
    if synchronous_commit == "off":
        return (
            "durability synchronous_commit=off: a crash of PostgreSQL may drop the last "
            "acknowledged writes"
        )
    if synchronous_commit == "local":
        return "durability synchronous_commit=local: every acknowledged write is on disk"
    return (
        f"durability synchronous_commit={synchronous_commit}: every acknowledged write is "
        "on disk (and on the synchronous standbys PostgreSQL is configured to wait for)"
    )
