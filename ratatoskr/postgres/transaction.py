"""One transaction of a PostgreSQL plane, and the turn its writes take.

Every write of a plane holds one session advisory lock (the plane's *turn*) for its
transaction: shared on a first attempt, so writes run side by side; exclusive when the
write is tried again after a conflict, so the retry waits for the writes in flight while
new ones queue behind it (PostgreSQL grants no lock past a waiting one it conflicts with).
The retry then runs alone, its snapshot taken after the lock, and cannot conflict again:
however many writers meet on one record, each is stored by its second attempt and none is
starved past the lock timeout. A first attempt takes its shared turn in the same round trip
as its ``BEGIN`` and gives it back in the same one as its ``COMMIT``, so the turn costs a
write no extra round trip. An operator's long transaction (an erase) takes no turn, so a
retry never queues every write of the plane behind it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import psycopg

Conn = psycopg.Connection[Any]


def _usable(conn: Conn) -> bool:
    return not conn.closed and not conn.broken


@contextlib.contextmanager
def transaction(conn: Conn, begin: str, turn: int | None, *, alone: bool) -> Iterator[None]:
    """``begin`` (a ``BEGIN`` statement) on ``conn``, then the block, then ``COMMIT``; a
    ``ROLLBACK`` on any exception. With ``turn`` (an advisory lock key) the block holds
    the plane's turn: exclusive when ``alone``, else shared. Raising before the block means
    the ``BEGIN`` did not go through."""
    if turn is None:
        lock = unlock = ""
    else:
        mode = "" if alone else "_shared"
        lock = f"SELECT pg_advisory_lock{mode}({int(turn)})"
        unlock = f"; SELECT pg_advisory_unlock{mode}({int(turn)})"
    released = turn is None
    try:
        if turn is None:
            conn.execute(begin)
        elif alone:
            conn.execute(lock)  # before the snapshot: it sees every write committed before it
            conn.execute(begin)
        else:
            conn.execute(f"{begin}; {lock}")  # simple protocol: one round trip
        try:
            yield
        except BaseException:
            if _usable(conn):
                conn.execute(f"ROLLBACK{unlock}")
                released = True
            raise
        conn.execute(f"COMMIT{unlock}")
        released = True
    finally:
        if not released and _usable(conn):
            # the BEGIN, the lock, the COMMIT or the ROLLBACK failed: the turn is not left
            # held on a connection going back to the pool (a closed one frees it itself)
            with contextlib.suppress(psycopg.Error):
                conn.execute("ROLLBACK; SELECT pg_advisory_unlock_all()")
