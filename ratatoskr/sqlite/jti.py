"""The jti ledger: each token that runs a mutating verb is used once, across all workers.

One row per claimed ``jti`` in a small SQLite file every worker process opens. The claim is
an INSERT inside a ``BEGIN IMMEDIATE`` transaction, so two workers racing on one token
serialise on SQLite's write lock and exactly one of them wins. Entries past their token's
expiry (a token that can no longer verify cannot be replayed) are pruned as claims arrive.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import apsw

from ratatoskr.core.errors import Unavailable
from ratatoskr.sqlite.database import (
    Database,
    DatabaseSettings,
    Migration,
    SchemaError,
    marked_plane,
)

PRUNE_EVERY = 256


def ledger_beside(db_path: str) -> str:
    """The ledger's file beside a plane file (``x.db`` -> ``x.jti.db``), so every worker
    serving that file shares it; ``:memory:`` stays in memory."""
    if db_path in (":memory:", ""):
        return ":memory:"
    return os.path.splitext(db_path)[0] + ".jti.db"


def _schema_v1(conn: apsw.Connection) -> None:
    conn.execute(
        "CREATE TABLE jti_ledger (jti TEXT PRIMARY KEY, expires_at REAL NOT NULL) WITHOUT ROWID"
    )
    conn.execute("CREATE INDEX jti_ledger_expires ON jti_ledger(expires_at)")


MIGRATIONS = [Migration(1, _schema_v1)]


class JtiLedger:
    """A ``ReplayGuard`` over SQLite; ``":memory:"`` serves a single process only."""

    def __init__(
        self,
        path: str,
        *,
        settings: DatabaseSettings | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        _refuse_plane_file(path)  # before the schema is read: a plane's is newer than a ledger's
        self.db = Database(path, MIGRATIONS, settings)
        self.clock = clock
        self._claims = 0
        try:
            _require_ledger(self.db)
        except BaseException:
            self.db.close()
            raise

    def claim(self, jti: str, expires_at: float) -> bool:
        """True the first time ``jti`` is claimed (until it expires), False on a replay."""
        now = self.clock()
        self._claims += 1
        with self.db.write() as conn:
            if self._claims % PRUNE_EVERY == 1:
                conn.execute("DELETE FROM jti_ledger WHERE expires_at <= ?", (now,))
            else:
                conn.execute("DELETE FROM jti_ledger WHERE jti = ? AND expires_at <= ?", (jti, now))
            conn.execute(
                "INSERT OR IGNORE INTO jti_ledger (jti, expires_at) VALUES (?, ?)",
                (jti, expires_at),
            )
            return bool(conn.changes() == 1)

    def prune(self) -> int:
        with self.db.write() as conn:
            conn.execute("DELETE FROM jti_ledger WHERE expires_at <= ?", (self.clock(),))
            return int(conn.changes())

    def count(self) -> int:
        with self.db.read() as conn:
            return int(conn.execute("SELECT count(*) FROM jti_ledger").fetchall()[0][0])

    def expired(self) -> int:
        """Entries past their token's expiry (what ``prune`` would drop now)."""
        with self.db.read() as conn:
            sql = "SELECT count(*) FROM jti_ledger WHERE expires_at <= ?"
            return int(conn.execute(sql, (self.clock(),)).fetchall()[0][0])

    def unexpired(self) -> list[tuple[str, float]]:
        """Every entry whose token can still verify (what a move must carry along)."""
        with self.db.read() as conn:
            sql = "SELECT jti, expires_at FROM jti_ledger WHERE expires_at > ? ORDER BY jti"
            return [(str(j), float(e)) for j, e in conn.execute(sql, (self.clock(),))]

    def adopt(self, entries: list[tuple[str, float]]) -> int:
        """Record tokens claimed elsewhere (a ledger being copied here), keeping the later
        expiry of an entry held twice: each stays used until it expires."""
        with self.db.write() as conn:
            for jti, expires_at in entries:
                conn.execute(
                    "INSERT INTO jti_ledger (jti, expires_at) VALUES (?, ?) ON CONFLICT (jti) "
                    "DO UPDATE SET expires_at = max(expires_at, excluded.expires_at)",
                    (jti, expires_at),
                )
        return len(entries)

    def check(self) -> list[str]:
        """What is wrong with the file (SQLite's ``quick_check``); empty when nothing is."""
        with self.db.read() as conn:
            found = [str(row[0]) for row in conn.execute("PRAGMA quick_check")]
        return [] if found == ["ok"] else [f"quick_check: {line}" for line in found[:20]]

    def problem(self) -> str | None:
        """Why a claim would fail now (the file gone, replaced, damaged, unreadable, or a
        write of this process failed for the file itself), None when it would not; for
        health and readiness: every mutating call needs the ledger."""
        problem = self.db.file_problem()
        if problem is not None:
            return problem
        failure = self.db.last_write_failure
        if failure is not None and failure.unusable:
            return f"a write failed: {failure.reason}"
        try:
            with self.db.read() as conn:
                conn.execute("SELECT 1 FROM jti_ledger LIMIT 1").fetchall()
        except Unavailable as exc:
            return exc.message.removeprefix("store unavailable: ")
        except apsw.Error:
            return "the ledger cannot be read"
        return None

    def close(self) -> None:
        self.db.close()


def _refuse_plane_file(path: str) -> None:
    """``SchemaError`` naming a plane file given as the ledger (``--jti-db data/memory.db``):
    its schema version is past the ledger's, which would otherwise be reported as a ledger
    too new for this ratatoskr ("upgrade ratatoskr"), the wrong advice."""
    if path in (":memory:", "") or not os.path.isfile(path):
        return
    marked = marked_plane(path)
    if marked is not None:
        raise SchemaError(_not_a_ledger(marked))


def _not_a_ledger(plane: str) -> str:
    return f"the file is the {plane} plane's database, not a jti ledger"


def _require_ledger(db: Database) -> None:
    """``SchemaError`` for a file that is not a ledger (a plane file put in its place, as a
    restore or a copy can): every mutating call would otherwise fail on it."""
    with db.read() as conn:
        tables = {str(row[0]) for row in conn.execute(_TABLES)}
        if "jti_ledger" in tables:
            return
        marked = []
        if "ratatoskr_meta" in tables:
            marked = conn.execute(_PLANE_MARK).fetchall()
    if marked:
        raise SchemaError(_not_a_ledger(str(marked[0][0])))
    raise SchemaError("the file is not a jti ledger (it has no jti_ledger table)")


_TABLES = "SELECT name FROM sqlite_master WHERE type = 'table'"
_PLANE_MARK = "SELECT value FROM ratatoskr_meta WHERE key = 'plane'"
