"""The affect plane's PostgreSQL tables and their migrations (component ``affect``).

The SQLite file's tables under the same names, every one starting with ``affect_``, so the
memory plane and the jti ledger may share the database: ``affect_states``, ``affect_events``
(``(at_us, id)`` indexed: the read order and the cursor key), ``affect_idempotency`` and
``affect_meta`` (the plane name and the cursor secret every server shares, so a cursor made
by one server pages on another). Ids and axis values are ``bytea`` (``postgres.scope_sql``).
"""

from __future__ import annotations

import secrets
from typing import Any

import psycopg

from ratatoskr.core.cursors import SECRET_BYTES, SECRET_META_KEY
from ratatoskr.postgres.idempotency import create_table
from ratatoskr.postgres.migrations import Migration
from ratatoskr.sqlite.scope_sql import COLUMNS

Conn = psycopg.Connection[Any]
AXES_DDL = ", ".join(f"{column} bytea" for column in COLUMNS.values())


def _schema_v1(conn: Conn) -> None:
    conn.execute("CREATE TABLE affect_meta (key text PRIMARY KEY, value text NOT NULL)")
    conn.execute(
        "INSERT INTO affect_meta VALUES ('plane', 'affect'), (%s, %s)",
        (SECRET_META_KEY, secrets.token_hex(SECRET_BYTES)),
    )
    conn.execute(
        f"""CREATE TABLE affect_states (
            id bytea PRIMARY KEY,
            revision integer NOT NULL CHECK (revision >= 1),
            {AXES_DDL},
            scope_json text NOT NULL,
            updated_at double precision NOT NULL,
            record_json text NOT NULL
        )"""
    )
    conn.execute(
        f"""CREATE TABLE affect_events (
            id bytea PRIMARY KEY,
            at_us bigint NOT NULL,
            {AXES_DDL},
            scope_json text NOT NULL,
            appended_at double precision NOT NULL,
            record_json text NOT NULL
        )"""
    )
    for table in ("affect_states", "affect_events"):
        for column in COLUMNS.values():
            conn.execute(f"CREATE INDEX {table}_{column} ON {table} ({column})")
    conn.execute("CREATE INDEX affect_events_at ON affect_events (at_us, id)")
    create_table(conn, "affect_idempotency")


AFFECT_MIGRATIONS = [Migration(1, _schema_v1)]
