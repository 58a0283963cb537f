"""A write the disk cannot hold answers 503 retryable, and nothing else changes.

The disk is simulated with ``RATATOSKR_SQLITE_MAX_DB_BYTES`` (``PRAGMA max_page_count``),
which SQLite enforces exactly as a full disk: ``SQLITE_FULL`` on the write that needs a page
more. Space comes back the way an operator makes it: records are deleted.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest

from ratatoskr.core.context import CallContext
from ratatoskr.core.errors import Unavailable
from ratatoskr.memory.store import open_memory_store
from ratatoskr.sqlite.database import DatabaseSettings
from tests.reliability.common import (
    chunk,
    error_of,
    no_traceback_or_content,
    ready,
    revisions,
    running,
    upsert,
)
from tests.server.harness import call, ok, poll

CAP_BYTES = 8 << 20  # 128 pages of the memory file's 64 KiB
FILLER = "f" * 120_000  # two pages per record
MARKER = "distillate-marker-7f3a"
CTX = CallContext(actor="cap-test")


def test_a_full_disk_answers_503_keeps_earlier_writes_and_recovers(tmp_path: Path) -> None:
    with running(tmp_path, {"RATATOSKR_SQLITE_MAX_DB_BYTES": str(CAP_BYTES)}) as server:
        url = server.url
        early = [chunk(f"early-{i}", MARKER) for i in range(5)]
        ok(upsert(url, early, "early"))

        stored: list[str] = []
        failed = None
        for i in range(200):  # 128 pages hold well under 100 two-page records
            response = upsert(url, [chunk(f"fill-{i}", FILLER)], f"fill-{i}")
            if response.status_code != 200:
                failed = (i, response)
                break
            stored.append(f"fill-{i}")
        assert failed is not None, "the cap never filled up"
        index, response = failed
        error = error_of(response)
        assert response.status_code == 503
        assert error["code"] == "memory.unavailable"
        assert error["retryable"] is True
        # the disk has room: the message names the cap an operator set, not the disk
        assert error["message"] == (
            "store unavailable: the database reached its size cap (RATATOSKR_SQLITE_MAX_DB_BYTES)"
        )

        # health says so, with a reason, on whichever worker answers; reads still work
        status, body = ready(url)
        assert status == 200, body  # degraded still serves
        assert body["planes"]["memory"]["status"] == "degraded"
        assert "size cap" in body["planes"]["memory"]["reason"]
        health = ok(call(url, "memory", "health", {}))
        assert health["status"] == "degraded" and health["reason"]
        assert body["planes"]["affect"]["status"] == "ok"

        # every earlier write is intact, the failed one left nothing
        found = revisions(url, "memory", [r["id"] for r in early] + stored + [f"fill-{index}"])
        assert found == {cid: 1 for cid in [r["id"] for r in early] + stored}

        # space comes back: delete half of the fillers; the same call then succeeds
        ok(call(url, "memory", "delete_many", {"ids": stored[: len(stored) // 2]}))
        retry = upsert(url, [chunk(f"fill-{index}", FILLER)], f"fill-{index}")
        assert ok(retry) == {"upserted": 1, "replayed": False}
        assert revisions(url, "memory", [f"fill-{index}"]) == {f"fill-{index}": 1}

        probes = itertools.count()

        def healthy_again() -> bool | None:
            # a worker forgets its failure once one of its own writes succeeds
            ok(upsert(url, [chunk("probe")], f"probe-{next(probes)}"))
            for _ in range(3):
                status, body = ready(url)
                if body["planes"]["memory"]["status"] != "ok":
                    return None
            return True

        poll(healthy_again, 20, "memory health to be ok again")
        no_traceback_or_content(server, MARKER, FILLER[:64])


def test_a_batch_whose_vectors_need_a_new_block_at_the_cap_is_unavailable(
    tmp_path: Path,
) -> None:
    """sqlite-vec grows its index a block of vectors at a time; a batch that needs a new
    block when the file cannot grow is refused as the cap (503, retryable), never as an
    internal error, and leaves nothing."""
    store = open_memory_store(
        str(tmp_path / "memory.db"),
        embedding_dim=64,
        settings=DatabaseSettings(max_db_bytes=6 << 20),
    )
    rng = random.Random(1)  # values float32 cannot hold: each row keeps float64 too
    try:
        written = 0
        with pytest.raises(Unavailable, match="RATATOSKR_SQLITE_MAX_DB_BYTES") as refused:
            for batch in range(1000):
                records = [
                    {
                        "id": f"b{batch}-{i}",
                        "embedding": [rng.random() for _ in range(64)],
                        "scope": {"tenant": "acme"},
                        "distillate": "x" * 320,
                    }
                    for i in range(200)
                ]
                store.upsert_many(records, idempotency_key=f"b{batch}", ctx=CTX)
                written = batch + 1
        assert refused.value.retryable
        assert store.get(f"b{written}-0") is None  # the refused batch left nothing
        assert written and store.get(f"b{written - 1}-199") is not None
        assert store.health()["status"] == "degraded"
    finally:
        store.close()
