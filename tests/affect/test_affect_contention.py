"""Many writers on the same records at once, through several stores on one location (as
several server processes), without ``expected_revisions``: each write is stored, none is
refused for the contention alone (PostgreSQL meets it as serialization failures, which the
store retries; SQLite waits for its writer lock)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from tests.affect.helpers import ctx, state
from tests.backends import Backend
from tests.writers import failures_of_writers

WRITERS = 8
STORES = 2  # each with its own connections, as the two workers of a server
WRITES = 6
IDS = ["s1", "s2", "s3"]


def test_concurrent_blind_puts_on_the_same_records_all_succeed(
    backend: Backend, tmp_path: Path
) -> None:
    location = backend.fresh(tmp_path, "affect")
    stores = [backend.affect(location) for _ in range(STORES)]
    try:

        def write(n: int, i: int) -> None:
            records = [state(sid, writer=n, write=i) for sid in IDS]
            if n % 2:
                records.reverse()  # the other order too: a deadlock is contention
            stores[n % STORES].put_many(records, idempotency_key=uuid.uuid4().hex, ctx=ctx())

        assert failures_of_writers(WRITERS, WRITES, write) == []
        found: list[dict[str, Any]] = [stores[0].get(sid, ctx=ctx()) for sid in IDS]
        assert [r["revision"] for r in found] == [WRITERS * WRITES] * len(IDS)
        # the batches were stored whole: every record holds the last batch's writer and write
        assert len({(r["writer"], r["write"]) for r in found}) == 1
    finally:
        for store in stores:
            store.close()
