"""Many writers on the same chunks at once, through several stores on one location (as
several server processes), without ``expected_revisions``: each batch is stored whole, none
refused for the contention alone."""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.backends import Backend
from tests.memory.helpers import CTX, DIM, chunk, vec
from tests.writers import failures_of_writers

WRITERS = 8
WRITES = 6
STORES = 2  # each with its own connections, as the two workers of a server
IDS = ["c1", "c2", "c3"]


def test_concurrent_blind_upserts_of_the_same_chunks_all_succeed(
    backend: Backend, tmp_path: Path
) -> None:
    location = backend.fresh(tmp_path, "memory")
    stores = [backend.memory(location, embedding_dim=DIM) for _ in range(STORES)]
    try:

        def write(n: int, i: int) -> None:
            batch = [chunk(cid, vec(1.0, n, i), writer=n, write=i) for cid in IDS]
            if n % 2:
                batch.reverse()  # the other order too: a deadlock is contention
            stores[n % STORES].upsert_many(batch, idempotency_key=uuid.uuid4().hex, ctx=CTX)

        assert failures_of_writers(WRITERS, WRITES, write) == []
        found = stores[0].get_many(IDS, ctx=CTX)
        assert [r["revision"] for r in found] == [WRITERS * WRITES] * len(IDS)
        assert len({(r["writer"], r["write"]) for r in found}) == 1  # each batch whole
    finally:
        for store in stores:
            store.close()
