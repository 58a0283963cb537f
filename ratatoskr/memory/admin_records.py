"""The memory plane's operator methods that are the same on every backend: whole chunks by
id, read through the store's own ``get_many`` (so they come back exactly as a call reads
them), and the plane's key of ``stats``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ratatoskr.core.admin import FoundRecord
from ratatoskr.core.context import CallContext
from ratatoskr.memory import rules


class ChunkRecords:
    """Mixed into each backend's operator half (before it), which supplies ``get_many``."""

    embedding_dim: int

    def get_many(self, ids: list[str], *, ctx: CallContext | None = None) -> list[dict[str, Any]]:
        raise NotImplementedError

    def get_records(self, ids: Sequence[str]) -> list[FoundRecord]:
        return [
            {"id": rules.record_id(record, "stored record"), "kind": "chunk", "record": record}
            for record in self.get_many(list(ids))
        ]

    def _plane_stats(self) -> dict[str, Any]:
        return {"embedding_dim": self.embedding_dim}
