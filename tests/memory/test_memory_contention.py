"""Many writers on the same chunks at once, through several stores on one location (as
several server processes), without ``expected_revisions``: each batch is stored whole, none
refused for the contention alone."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

from tests.backends import Backend
from tests.memory.helpers import CTX, DIM, chunk, vec

WRITERS = 16
WRITES = 8
STORES = 4  # each with its own connections, as the workers of a server
IDS = ["c1", "c2", "c3"]


def test_concurrent_blind_upserts_of_the_same_chunks_all_succeed(
    backend: Backend, tmp_path: Path
) -> None:
    location = backend.fresh(tmp_path, "memory")
    stores = [backend.memory(location, embedding_dim=DIM) for _ in range(STORES)]
    try:
        failures: list[BaseException] = []
        start = threading.Barrier(WRITERS)

        def write(n: int) -> None:
            start.wait()
            for i in range(WRITES):
                batch = [chunk(cid, vec(1.0, n, i), writer=n, write=i) for cid in IDS]
                if n % 2:
                    batch.reverse()  # the other order too: a deadlock is contention
                try:
                    stores[n % STORES].upsert_many(batch, idempotency_key=uuid.uuid4().hex, ctx=CTX)
                except Exception as exc:  # noqa: BLE001 - every failure is the finding
                    failures.append(exc)

        threads = [threading.Thread(target=write, args=(n,)) for n in range(WRITERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []
        found = stores[0].get_many(IDS, ctx=CTX)
        assert [r["revision"] for r in found] == [WRITERS * WRITES] * len(IDS)
        assert len({(r["writer"], r["write"]) for r in found}) == 1  # each batch whole
    finally:
        for store in stores:
            store.close()
