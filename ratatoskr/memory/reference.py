"""The reference memory store: the same verbs and rules in plain Python, held in memory.

It is the oracle of the parity suite (the contract's ``InMemoryMemoryStore`` is not
published). It shares the argument rules (``memory.rules``) and the scoring (``cosine``)
with the SQLite store and nothing else: no SQL, no candidate selection, a brute-force
filter-then-rank over every record.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ratatoskr.core import reference_records
from ratatoskr.core.context import CallContext
from ratatoskr.core.errors import IdempotencyConflict, RevisionMismatch, ScopeForbidden
from ratatoskr.core.idempotency import CLASS_TTL_SECONDS, idempotency_id
from ratatoskr.core.scope import contains, matches
from ratatoskr.memory import rules
from ratatoskr.memory.calls import MemoryCalls
from ratatoskr.memory.packed import plain_record
from ratatoskr.memory.search.cosine import F32, cosine_scores, rank


@dataclass
class _Stored:
    record: dict[str, Any]
    vector: F32
    scope: dict[str, str]
    revision: int


class ReferenceMemoryStore(MemoryCalls):
    """In-memory memory plane with exactly the rules of ``RatatoskrMemoryStore``."""

    def __init__(self, embedding_dim: int, *, clock: Callable[[], float] = time.time) -> None:
        self.embedding_dim = embedding_dim
        self.clock = clock
        self.chunks: dict[str, _Stored] = {}
        self.idempotency: dict[str, tuple[str, float]] = {}

    def describe_store(self) -> dict[str, Any]:
        return {**rules.CAPABILITIES, "filterable_metadata_fields": []}

    def health(self) -> dict[str, Any]:
        return {"status": "ok", "reason": None}

    def upsert_parsed(self, call: rules.UpsertCall, ctx: CallContext) -> dict[str, Any]:
        now = self.clock()
        iid = idempotency_id("upsert_many", ctx.actor, call.idempotency_key)
        entry = self.idempotency.get(iid)
        if entry is not None and entry[1] > now:
            if not call.digest.matches(entry[0]):
                raise IdempotencyConflict(
                    "idempotency_key was already used with a different payload"
                )
            return {"upserted": len(call.chunks), "replayed": True}
        for chunk in call.chunks:
            stored = self.chunks.get(chunk.chunk_id)
            if stored is not None and not contains(stored.scope, ctx.scope):
                raise ScopeForbidden(f"record {chunk.chunk_id} exists outside the token scope")
        if call.expected_revisions is not None:
            mismatches = [
                {"id": cid, "expected": rev, "actual": self._revision(cid)}
                for cid, rev in call.expected_revisions.items()
                if self._revision(cid) != rev
            ]
            if mismatches:
                raise RevisionMismatch(mismatches)
        for chunk in call.chunks:
            self.chunks[chunk.chunk_id] = _Stored(
                copy.deepcopy(plain_record(chunk.record)),
                chunk.vector,
                dict(chunk.scope),
                self._revision(chunk.chunk_id) + 1,
            )
        self.idempotency[iid] = (call.digest.value, now + CLASS_TTL_SECONDS[call.idempotency_class])
        return {"upserted": len(call.chunks), "replayed": False}

    def delete_many(self, ids: list[str], *, ctx: CallContext | None = None) -> dict[str, int]:
        return reference_records.delete_many(self.chunks, ids, ctx)

    def get_many(self, ids: list[str], *, ctx: CallContext | None = None) -> list[dict[str, Any]]:
        return reference_records.get_many(self.chunks, ids, ctx)

    def search_quick(self, call: rules.SearchCall) -> list[dict[str, Any]] | None:
        """Never: the oracle has no fast path, the wire runs it in the threadpool."""
        return None

    def search_parsed(self, call: rules.SearchCall) -> list[dict[str, Any]]:
        admitted = [
            (cid, s)
            for cid, s in self.chunks.items()
            if matches(s.scope, call.scope_all, call.scope_any)
        ]
        if not admitted:
            return []
        matrix = np.stack([s.vector for _, s in admitted])
        scores = cosine_scores(matrix, call.vector)
        ranked = rank([cid for cid, _ in admitted], scores, call.top_k)
        return [
            rules.search_hit(
                copy.deepcopy(self.chunks[cid].record),
                cid,
                score,
                self.chunks[cid].revision,
                call.include_embedding,
            )
            for cid, score in ranked
        ]

    def _revision(self, chunk_id: str) -> int:
        stored = self.chunks.get(chunk_id)
        return stored.revision if stored else 0

    def close(self) -> None:
        pass
