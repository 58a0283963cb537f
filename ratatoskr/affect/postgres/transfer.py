"""The affect plane's rows between its SQLite file and PostgreSQL, as they are stored:
states with their revisions, events, every idempotency entry and the cursor secret (so a
cursor handed out before a move pages on after it). ``admin migrate`` streams a file into
PostgreSQL in id order (resumable after the last id copied); a PostgreSQL store's backup is
a new SQLite file (``to_sqlite``)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import apsw

from ratatoskr.core.cursors import SECRET_META_KEY
from ratatoskr.postgres import copy_binary as cb
from ratatoskr.postgres import transfer_rows
from ratatoskr.postgres.database import Conn
from ratatoskr.postgres.transfer_rows import IDEMPOTENCY_COLUMNS

STATE_COLUMNS = (
    "id, revision, tenant, grp, end_user, agent_self, scope_json, updated_at, record_json"
)
EVENT_COLUMNS = "id, at_us, tenant, grp, end_user, agent_self, scope_json, appended_at, record_json"
TABLES = {"affect_states": STATE_COLUMNS, "affect_events": EVENT_COLUMNS}
BATCH = 2000


def _text(value: Any) -> str | None:
    return None if value is None else bytes(value).decode("utf-8")


def batches(
    lite: apsw.Connection, table: str, after: str | None, batch: int = BATCH
) -> Iterator[list[Any]]:
    """The rows of ``table`` in id order, strictly after ``after``, ``batch`` at a time."""
    last = after
    while True:
        where, args = ("WHERE id > ?", [last]) if last is not None else ("", [])
        rows = lite.execute(
            f"SELECT {TABLES[table]} FROM {table} {where} ORDER BY id LIMIT ?", (*args, batch)
        ).fetchall()
        if not rows:
            return
        yield rows
        last = rows[-1][0]


def copy_rows(pg: Conn, table: str, rows: list[Any]) -> None:
    second = cb.int4 if table == "affect_states" else cb.int8
    parts = [cb.HEADER]
    for rid, number, tenant, grp, user, agent, scope, at, record in rows:
        parts += [
            cb.row(9),
            cb.text(rid),
            second(number),
            cb.text(tenant),
            cb.text(grp),
            cb.text(user),
            cb.text(agent),
            cb.text(scope),
            cb.float8(at),
            cb.text(record),
        ]
    parts.append(cb.TRAILER)
    cb.copy_in(pg, table, TABLES[table], b"".join(parts))


# the tables ``admin migrate`` copies batch by batch, in order (then the idempotency
# entries whole): the names its progress marker records
COPIED_TABLES = ("affect_states", "affect_events")


def rows_held(pg: Conn) -> int:
    """The plane's records and idempotency entries in the database (0: nothing to clash
    with a migration into it)."""
    return transfer_rows.rows_in(pg, (*COPIED_TABLES, "affect_idempotency"))


def replace_idempotency(pg: Conn, lite: apsw.Connection) -> int:
    """The file's idempotency entries in place of any in the database."""
    return transfer_rows.replace_idempotency(pg, lite, "affect_idempotency")


def copy_secret(pg: Conn, lite: apsw.Connection) -> None:
    """The file's cursor secret replaces the database's (the target is empty)."""
    rows = lite.execute(
        "SELECT value FROM ratatoskr_meta WHERE key = ?", (SECRET_META_KEY,)
    ).fetchall()
    if rows:
        pg.execute(
            "UPDATE affect_meta SET value = %s WHERE key = %s", (rows[0][0], SECRET_META_KEY)
        )


def to_sqlite(pg: Conn, lite: apsw.Connection) -> int:
    """Every state, event, idempotency entry and the cursor secret of ``pg`` (read in its
    snapshot) into the empty tables of ``lite`` (inside its write transaction)."""
    copied = 0
    for table, columns in TABLES.items():
        with pg.cursor(name=f"ratatoskr_{table}_copy", binary=True) as cur:
            cur.execute(f"SELECT {columns} FROM {table} ORDER BY id")
            while rows := cur.fetchmany(BATCH):
                lite.executemany(
                    f"INSERT INTO {table} ({columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (_text(r[0]), r[1], *(_text(v) for v in r[2:6]), r[6], r[7], r[8])
                        for r in rows
                    ],
                )
                copied += len(rows)
    entries = pg.execute(f"SELECT {IDEMPOTENCY_COLUMNS} FROM affect_idempotency").fetchall()
    lite.executemany(
        f"INSERT INTO affect_idempotency ({IDEMPOTENCY_COLUMNS}) VALUES (?, ?, ?, ?)", entries
    )
    secret = pg.execute(
        "SELECT value FROM affect_meta WHERE key = %s", (SECRET_META_KEY,)
    ).fetchone()
    if secret is not None:
        lite.execute(
            "UPDATE ratatoskr_meta SET value = ? WHERE key = ?", (secret[0], SECRET_META_KEY)
        )
    return copied


# -- the check after a copy -------------------------------------------------------------


def _digest_row(h: Any, values: tuple[Any, ...]) -> None:
    for value in values:
        data = b"\x00" if value is None else str(value).encode()
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)


def sqlite_digest(lite: apsw.Connection) -> tuple[int, str]:
    """(rows, SHA-256 over every stored value) of the file's affect plane, secret included."""
    h = hashlib.sha256()
    count = 0
    for table, columns in TABLES.items():
        for row in lite.execute(f"SELECT {columns} FROM {table} ORDER BY id"):
            _digest_row(h, tuple(row))
            count += 1
    for row in lite.execute(
        f"SELECT {IDEMPOTENCY_COLUMNS} FROM affect_idempotency ORDER BY idempotency_id"
    ):
        _digest_row(h, tuple(row))
        count += 1
    secret = lite.execute(
        "SELECT value FROM ratatoskr_meta WHERE key = ?", (SECRET_META_KEY,)
    ).fetchall()
    _digest_row(h, (secret[0][0] if secret else None,))
    return count, h.hexdigest()


def pg_digest(pg: Conn) -> tuple[int, str]:
    h = hashlib.sha256()
    count = 0
    for table, columns in TABLES.items():
        with pg.cursor(name=f"ratatoskr_{table}_check", binary=True) as cur:
            cur.execute(f"SELECT {columns} FROM {table} ORDER BY id")
            while rows := cur.fetchmany(BATCH):
                for r in rows:
                    _digest_row(h, (_text(r[0]), r[1], *(_text(v) for v in r[2:6]), *r[6:]))
                    count += 1
    for row in pg.execute(
        f'SELECT {IDEMPOTENCY_COLUMNS} FROM affect_idempotency ORDER BY idempotency_id COLLATE "C"'
    ).fetchall():
        _digest_row(h, tuple(row))
        count += 1
    secret = pg.execute(
        "SELECT value FROM affect_meta WHERE key = %s", (SECRET_META_KEY,)
    ).fetchone()
    _digest_row(h, (secret[0] if secret else None,))
    return count, h.hexdigest()
