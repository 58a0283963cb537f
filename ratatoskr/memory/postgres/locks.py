"""The id locks of writes to a chunks table partitioned by tenant.

No index can keep a chunk id unique across the partitions of a table partitioned by tenant,
so every write to one (upsert, delete, an operator's forget or erase) first takes a
transaction-scoped advisory lock per id it touches (and per idempotency id), in one sorted
order, so two writers never wait on each other in a cycle; the upserts then read in ``READ
COMMITTED``, after the locks, and see what the writer before them committed.
"""

from __future__ import annotations

import hashlib

from ratatoskr.postgres.database import Conn


def lock_keys(conn: Conn, names: list[str]) -> None:
    """Advisory locks on ``names`` until the transaction ends."""
    keys = sorted(
        {
            int.from_bytes(
                hashlib.blake2b(n.encode("utf-8"), digest_size=8).digest(), "big", signed=True
            )
            for n in names
        }
    )
    conn.execute("SELECT pg_advisory_xact_lock(k) FROM unnest(%s::bigint[]) AS k", (keys,))
