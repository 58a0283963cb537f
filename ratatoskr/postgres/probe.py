"""Looking into a PostgreSQL database without changing it: whether a plane's tables exist
there and what its meta table says (the embedding dimension), so an admin command never
creates a store it was only asked to read, and rarely needs ``--dim``."""

from __future__ import annotations

from typing import Any

import psycopg

from ratatoskr.core.errors import Unavailable
from ratatoskr.postgres.url import masked

CONNECT_TIMEOUT = 10


def _connect(url: str) -> psycopg.Connection[Any]:
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
    except psycopg.OperationalError as exc:
        raise unreachable(url, exc) from None


def unreachable(url: str, exc: BaseException | None = None) -> Unavailable:
    """The 503 for a database that cannot be used, with the server's reason when it gave
    one (a database that does not exist, a role refused: not an outage to wait out). The
    server's words name a database or a role, never a password; the URL is masked."""
    reason = _server_reason(str(exc)) if exc is not None else None
    if reason is None:
        return Unavailable(f"store unavailable: PostgreSQL cannot be reached at {masked(url)}")
    return Unavailable(f"store unavailable: PostgreSQL at {masked(url)} refused: {reason}")


def _server_reason(message: str) -> str | None:
    """The ``FATAL:`` line of a connection failure, if the server answered with one."""
    _, found, rest = message.rpartition("FATAL:")
    if not found:
        return None
    return rest.strip().splitlines()[0].strip() if rest.strip() else None


def component_version(url: str, component: str) -> int | None:
    """The schema version of ``component`` (``memory``, ``affect``, ``jti``) in the
    database at ``url``; None when it holds none."""
    with _connect(url) as conn:
        if conn.execute("SELECT to_regclass('ratatoskr_schema')").fetchone() == (None,):
            return None
        row = conn.execute(
            "SELECT version FROM ratatoskr_schema WHERE component = %s", (component,)
        ).fetchone()
        return int(row[0]) if row else None


def meta_value(url: str, table: str, key: str) -> str | None:
    with _connect(url) as conn:
        if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone() == (None,):
            return None
        row = conn.execute(f"SELECT value FROM {table} WHERE key = %s", (key,)).fetchone()
        return str(row[0]) if row else None


MIGRATION_MARKER = "ratatoskr_migration"


def unfinished_migrations(url: str) -> list[str]:
    """The planes an ``admin migrate`` into this database began and has not finished: a
    server must not serve them, nor a check pass them, until it is run again to the end."""
    with _connect(url) as conn:
        if conn.execute("SELECT to_regclass(%s)", (MIGRATION_MARKER,)).fetchone() == (None,):
            return []
        rows = conn.execute(
            f"SELECT plane FROM {MIGRATION_MARKER} WHERE NOT done ORDER BY plane"
        ).fetchall()
        return [str(r[0]) for r in rows]
