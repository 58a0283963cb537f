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


def chunk(chunk_id: str, vector: list[float], **fields: Any) -> dict[str, Any]:
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
