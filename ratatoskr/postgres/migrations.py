"""Versioned, forward-only schema migrations per component, as on SQLite.

SQLite keeps a file's version in ``PRAGMA user_version``; one PostgreSQL database may hold
both planes and the jti ledger, so each component (``memory``, ``affect``, ``jti``) keeps its
own row in ``ratatoskr_schema``. Migrations run under a transaction-scoped advisory lock, so
servers starting together apply each step once; a database newer than this build is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from ratatoskr.sqlite.database import SchemaError

Conn = psycopg.Connection[Any]
LOCK_KEY = 0x7261_7461  # one advisory lock for every ratatoskr migration in the database


@dataclass(frozen=True)
class Migration:
    """One forward-only step of a component's schema."""

    version: int
    apply: Callable[[Conn], None]


def ensure_vector(conn: Conn) -> None:
    """pgvector in the database: created when missing (needs the privilege to), refused
    with a message that says how otherwise."""
    found = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
    if found:
        return
    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.Error:
        raise SchemaError(
            "pgvector is not installed in the database and this role cannot install it: "
            "run CREATE EXTENSION vector as its owner"
        ) from None


def current_version(conn: Conn, component: str) -> int:
    row = conn.execute(
        "SELECT version FROM ratatoskr_schema WHERE component = %s", (component,)
    ).fetchone()
    return int(row[0]) if row else 0


def migrate(conn: Conn, component: str, migrations: Sequence[Migration]) -> None:
    """Bring ``component`` to the newest version (inside the caller's transaction). A
    database already at it is only read, so a server can open a read-only standby."""
    latest = migrations[-1].version if migrations else 0
    found = conn.execute("SELECT to_regclass('ratatoskr_schema')").fetchone()
    if found is not None and found[0] is not None and current_version(conn, component) == latest:
        return
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
    conn.execute(
        "CREATE TABLE IF NOT EXISTS ratatoskr_schema ("
        "component text PRIMARY KEY, version integer NOT NULL)"
    )
    version = current_version(conn, component)
    if version > latest:
        raise SchemaError(
            f"database schema version {version} of {component} is newer than this ratatoskr "
            f"knows ({latest}); upgrade ratatoskr or open another database"
        )
    for migration in migrations:
        if migration.version > version:
            migration.apply(conn)
            conn.execute(
                "INSERT INTO ratatoskr_schema (component, version) VALUES (%s, %s) "
                "ON CONFLICT (component) DO UPDATE SET version = excluded.version",
                (component, migration.version),
            )
