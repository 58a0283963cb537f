"""Another process holding the write lock past the busy timeout is a 503 retryable.

The lock holder is a separate process in ``BEGIN IMMEDIATE`` on the memory file; it holds
the lock until the test closes its stdin, so the test never guesses how long it lasts.
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.lock_holder import holding_the_lock
from tests.reliability.common import chunk, error_of, put, revisions, running, state, upsert
from tests.server.harness import ok

BUSY_MS = 200


def test_a_lock_held_past_the_busy_timeout_is_503_and_never_a_partial_batch(
    tmp_path: Path,
) -> None:
    with running(tmp_path, {"RATATOSKR_SQLITE_BUSY_TIMEOUT_MS": str(BUSY_MS)}) as server:
        url = server.url
        ok(upsert(url, [chunk("before")], "before"))
        holder = holding_the_lock(tmp_path / "data" / "memory.db")
        try:
            batch = [chunk(f"locked-{i}") for i in range(5)]
            started = time.monotonic()
            response = upsert(url, batch, "locked-batch")
            waited = time.monotonic() - started
            assert response.status_code == 503, response.text
            error = error_of(response)
            assert error["code"] == "memory.unavailable" and error["retryable"] is True
            assert "locked" in error["message"]
            assert BUSY_MS / 1000 <= waited < 10
            # reads are not blocked (WAL), nothing of the batch is there, the other plane writes
            assert revisions(url, "memory", ["before"] + [r["id"] for r in batch]) == {"before": 1}
            ok(put(url, [state("s1")], "during-lock"))
        finally:
            holder.communicate(b"", timeout=10)
        # the retry is a new dispatch (new token), same idempotency key: the whole batch
        assert ok(upsert(url, batch, "locked-batch")) == {"upserted": 5, "replayed": False}
        assert revisions(url, "memory", [r["id"] for r in batch]) == {r["id"]: 1 for r in batch}
        assert "Traceback" not in server.output()
