"""Small builders shared by the memory tests: records, vectors and a caller context."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ratatoskr.core.context import CallContext

DIM = 8
CTX = CallContext(actor="worldtree")


def vec(*head: float) -> list[float]:
    """A DIM-long vector starting with ``head`` and padded with zeros."""
    return [float(x) for x in head] + [0.0] * (DIM - len(head))


def chunk(chunk_id: str, vector: Sequence[object], **fields: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": chunk_id,
        "embedding": vector,
        "distillate": f"about {chunk_id}",
    }
    record.update(fields)
    return record


def random_chunks(
    rng: np.random.Generator, ids: Sequence[str], users: Sequence[str]
) -> list[dict[str, Any]]:
    """Chunks with random vectors, the i-th in the end_user ``users[i % len(users)]``."""
    return [
        chunk(cid, rng.standard_normal(DIM).tolist(), scope={"end_user": users[i % len(users)]})
        for i, cid in enumerate(ids)
    ]


def settled(store: Any, timeout: float = 60.0) -> None:
    """Wait (bounded) until ``store``'s mirror worker has loaded the mirror and applied the
    change log up to its head as of now, so the next search ranks on the mirror alone."""
    with store.db.read() as conn:
        head = int(
            conn.execute("SELECT coalesce(max(seq), 0) FROM memory_changes").fetchall()[0][0]
        )
    if store.engine.worker is not None:
        store.engine.worker.poke()  # as a search would: a worker nobody searches stays put
    done = store.engine.wait_until(lambda m: m.ready and m.seq >= head, timeout)
    assert done, "the search mirror did not load and catch up in time"


def loaded(store: Any, timeout: float = 60.0) -> None:
    """Wait (bounded) until ``store``'s first mirror load is over (a store without a
    mirror, or the reference store, has nothing to wait for)."""
    engine = getattr(store, "engine", None)
    if engine is not None:
        done = engine.wait_until(lambda m: m.ready or m.over_budget, timeout)
        assert done, "the search mirror did not load in time"
