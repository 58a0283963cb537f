"""``client.memory``: the memory plane's verbs, with the wire's argument names and results.

Records and hits are the wire's own dicts. A vector (a record's ``embedding`` or
``vector``, a search's ``vector``) may be a list or a numpy array (see ``encoding``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ratatoskr.client.encoding import batch_args, drop_none, wire_vector
from ratatoskr.client.planes import AsyncPlaneAPI, PlaneAPI

PLANE = "memory"
Scope = Mapping[str, str]


def search_args(
    vector: Any,
    top_k: int,
    scope_all: Scope | None,
    scope_any: Sequence[Scope] | None,
    metadata_filter: Mapping[str, Any] | None,
    include: Mapping[str, Any] | None,
    fidelity_target: float | None,
) -> dict[str, Any]:
    return drop_none(
        vector=wire_vector(vector),
        top_k=top_k,
        scope_all=scope_all,
        scope_any=scope_any,
        metadata_filter=metadata_filter,
        include=include,
        fidelity_target=fidelity_target,
    )


class MemoryAPI(PlaneAPI):
    """The memory verbs of a ``Client``."""

    PLANE = PLANE

    def upsert_many(
        self,
        records: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str,
        expected_revisions: Mapping[str, int] | None = None,
        idempotency_class: str | None = None,
    ) -> dict[str, Any]:
        """Write ``records`` at once: ``{"upserted": n, "replayed": bool}``."""
        args = batch_args(records, idempotency_key, expected_revisions, idempotency_class)
        result: dict[str, Any] = self._call(PLANE, "upsert_many", args)
        return result

    def search(
        self,
        vector: Any,
        *,
        top_k: int = 10,
        scope_all: Scope | None = None,
        scope_any: Sequence[Scope] | None = None,
        metadata_filter: Mapping[str, Any] | None = None,
        include: Mapping[str, Any] | None = None,
        fidelity_target: float | None = None,
    ) -> list[dict[str, Any]]:
        """The ``top_k`` chunks nearest ``vector`` (cosine) inside the scope, best first."""
        args = search_args(
            vector, top_k, scope_all, scope_any, metadata_filter, include, fidelity_target
        )
        hits: list[dict[str, Any]] = self._call(PLANE, "search", args)
        return hits

    def get(self, chunk_id: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self._call(PLANE, "get", {"chunk_id": chunk_id})
        return found


class AsyncMemoryAPI(AsyncPlaneAPI):
    """The memory verbs of an ``AsyncClient``: the same as ``MemoryAPI``, awaited."""

    PLANE = PLANE

    async def upsert_many(
        self,
        records: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str,
        expected_revisions: Mapping[str, int] | None = None,
        idempotency_class: str | None = None,
    ) -> dict[str, Any]:
        args = batch_args(records, idempotency_key, expected_revisions, idempotency_class)
        result: dict[str, Any] = await self._call(PLANE, "upsert_many", args)
        return result

    async def search(
        self,
        vector: Any,
        *,
        top_k: int = 10,
        scope_all: Scope | None = None,
        scope_any: Sequence[Scope] | None = None,
        metadata_filter: Mapping[str, Any] | None = None,
        include: Mapping[str, Any] | None = None,
        fidelity_target: float | None = None,
    ) -> list[dict[str, Any]]:
        args = search_args(
            vector, top_k, scope_all, scope_any, metadata_filter, include, fidelity_target
        )
        hits: list[dict[str, Any]] = await self._call(PLANE, "search", args)
        return hits

    async def get(self, chunk_id: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = await self._call(PLANE, "get", {"chunk_id": chunk_id})
        return found
