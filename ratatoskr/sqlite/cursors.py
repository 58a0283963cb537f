"""Where a SQLite store keeps its cursor secret: a row of its meta table, created once.

The cursors themselves (``core.cursors``) are the same on every backend.
"""

from __future__ import annotations

import secrets

import apsw

from ratatoskr.core.cursors import SECRET_BYTES, SECRET_META_KEY, CursorCodec
from ratatoskr.core.errors import Unavailable
from ratatoskr.sqlite.database import Database


def codec_for(db: Database, *, read_only_ok: bool = False) -> CursorCodec:
    """The codec of ``db``, creating its secret on first use (once, under the write lock).
    ``read_only_ok``: a file that holds no secret and cannot be written (read-only, for an
    operator's listing) gets one for this process: its cursors page on within it."""
    try:
        return CursorCodec(load_secret(db))
    except (Unavailable, apsw.ReadOnlyError):
        if not read_only_ok:
            raise
        return CursorCodec(secrets.token_bytes(SECRET_BYTES))


def store_secret(conn: apsw.Connection, table: str = "ratatoskr_meta") -> None:
    """Create the store's cursor secret unless it exists; call inside a write transaction
    (a migration, or ``codec_for``)."""
    conn.execute(
        f"INSERT OR IGNORE INTO {table} (key, value) VALUES (?, ?)",
        (SECRET_META_KEY, secrets.token_hex(SECRET_BYTES)),
    )


def load_secret(db: Database) -> bytes:
    """The cursor secret kept in ``db`` (created if missing). Other code needs it only to
    make a second codec that agrees with this file's (the parity oracle)."""
    with db.read() as conn:
        secret = _read_secret(conn)
    if secret is None:
        with db.write() as conn:
            store_secret(conn)
            secret = _read_secret(conn)
    assert secret is not None
    return secret


def _read_secret(conn: apsw.Connection, table: str = "ratatoskr_meta") -> bytes | None:
    rows = conn.execute(f"SELECT value FROM {table} WHERE key = ?", (SECRET_META_KEY,)).fetchall()
    return bytes.fromhex(rows[0][0]) if rows else None
