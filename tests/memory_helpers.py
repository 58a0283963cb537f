"""Small builders shared by the memory tests: records, vectors and a caller context."""

from __future__ import annotations

from typing import Any

from ratatoskr.wire.context import CallContext

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
