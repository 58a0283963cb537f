"""The jti ledger in PostgreSQL: a mutating token is used once across every server.

One row per claimed ``jti`` in ``ratatoskr_jti`` (in the database the memory plane names,
else the affect plane's). A claim is one ``INSERT ... ON CONFLICT`` statement: two servers
racing on one token serialise on the row and exactly one of them inserts it (or revives an
entry whose token has expired: such a token can no longer verify, so the row was only
waiting to be pruned). Expired rows are pruned as claims arrive.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg_pool import PoolTimeout

from ratatoskr.core.errors import Unavailable
from ratatoskr.postgres.database import PgDatabase, PgSettings
from ratatoskr.postgres.health import HEALTH_WAIT
from ratatoskr.postgres.migrations import Migration

PRUNE_EVERY = 256
Conn = psycopg.Connection[Any]


def _schema_v1(conn: Conn) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS ratatoskr_jti ("
        "jti bytea PRIMARY KEY, expires_at double precision NOT NULL)"
    )
    conn.execute("CREATE INDEX IF NOT EXISTS ratatoskr_jti_expires ON ratatoskr_jti (expires_at)")


MIGRATIONS = [Migration(1, _schema_v1)]
_CLAIM = (
    "INSERT INTO ratatoskr_jti (jti, expires_at) VALUES (%s, %s) "
    "ON CONFLICT (jti) DO UPDATE SET expires_at = excluded.expires_at "
    "WHERE ratatoskr_jti.expires_at <= %s RETURNING 1"
)


class PgJtiLedger:
    """A ``ReplayGuard`` over PostgreSQL, shared by every server using the database."""

    def __init__(
        self,
        url: str,
        *,
        settings: PgSettings | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.db = PgDatabase(url, "jti", MIGRATIONS, settings)
        self.clock = clock
        self._claims = 0

    def claim(self, jti: str, expires_at: float) -> bool:
        """True the first time ``jti`` is claimed (until it expires), False on a replay."""
        now = self.clock()
        self._claims += 1
        if self._claims % PRUNE_EVERY == 1:
            self.prune()
        raw = jti.encode("utf-8", "surrogatepass")
        return (
            self.db.once(lambda conn: conn.execute(_CLAIM, (raw, expires_at, now)).fetchone())
            is not None
        )

    def prune(self) -> int:
        now = self.clock()
        cur = self.db.once(
            lambda conn: conn.execute("DELETE FROM ratatoskr_jti WHERE expires_at <= %s", (now,))
        )
        return int(cur.rowcount)

    def expired(self) -> int:
        now = self.clock()
        row = self.db.once(
            lambda conn: conn.execute(
                "SELECT count(*) FROM ratatoskr_jti WHERE expires_at <= %s", (now,)
            ).fetchone()
        )
        return int(row[0]) if row else 0

    def count(self) -> int:
        row = self.db.once(
            lambda conn: conn.execute("SELECT count(*) FROM ratatoskr_jti").fetchone()
        )
        return int(row[0]) if row else 0

    def unexpired(self) -> list[tuple[str, float]]:
        """Every entry whose token can still verify (what a backup must carry along)."""
        now = self.clock()
        rows = self.db.once(
            lambda conn: conn.execute(
                "SELECT jti, expires_at FROM ratatoskr_jti WHERE expires_at > %s ORDER BY jti",
                (now,),
            ).fetchall()
        )
        return [(bytes(j).decode("utf-8", "surrogatepass"), float(e)) for j, e in rows]

    def adopt(self, entries: list[tuple[str, float]]) -> int:
        """Record tokens claimed elsewhere (another ledger being moved here), keeping the
        later expiry of an entry held twice: each stays used until it expires."""
        rows = [(jti.encode("utf-8", "surrogatepass"), float(e)) for jti, e in entries]

        def insert(conn: Conn) -> None:
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO ratatoskr_jti (jti, expires_at) VALUES (%s, %s) "
                    "ON CONFLICT (jti) DO UPDATE SET expires_at = "
                    "greatest(ratatoskr_jti.expires_at, excluded.expires_at)",
                    rows,
                )

        if rows:
            self.db.write(insert)
        return len(rows)

    def problem(self) -> str | None:
        """Why a claim would fail now (the table dropped, PostgreSQL away), None when it
        would not; every worker's connections busy is not a problem of the ledger."""
        wait = min(HEALTH_WAIT, self.db.settings.timeout)
        try:
            self.db.read(
                lambda conn: conn.execute("SELECT 1 FROM ratatoskr_jti LIMIT 1").fetchone(),
                wait=wait,
            )
        except Unavailable as exc:
            if isinstance(exc.__context__, PoolTimeout):
                return None
            return exc.message.removeprefix("store unavailable: ")
        except Exception:
            return "the ledger's table cannot be read"
        return None

    def close(self) -> None:
        self.db.close()
