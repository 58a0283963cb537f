"""``client.memory``: the memory plane's verbs, with the wire's argument names and results.

Records and hits are the wire's own dicts. A vector (a record's ``embedding`` or
``vector``, a search's ``vector``) may be a list or a numpy array (see ``encoding``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from ratatoskr.client.encoding import drop_none, wire_record, wire_vector

PLANE = "memory"
Scope = Mapping[str, str]


def upsert_args(
    records: Sequence[Mapping[str, Any]],
    idempotency_key: str,
    expected_revisions: Mapping[str, int] | None,
    idempotency_class: str | None,
) -> dict[str, Any]:
    if isinstance(records, Mapping) or not isinstance(records, Sequence):
        raise TypeError("records must be a sequence of records")
    return drop_none(
        records=[wire_record(r) for r in records],
        idempotency_key=idempotency_key,
        expected_revisions=expected_revisions,
        idempotency_class=idempotency_class,
    )


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


class MemoryAPI:
    """The memory verbs of a ``Client``."""

    def __init__(self, call: Callable[[str, str, dict[str, Any]], Any]) -> None:
        self._call = call

    def upsert_many(
        self,
        records: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str,
        expected_revisions: Mapping[str, int] | None = None,
        idempotency_class: str | None = None,
    ) -> dict[str, Any]:
        """Write ``records`` at once: ``{"upserted": n, "replayed": bool}``."""
        args = upsert_args(records, idempotency_key, expected_revisions, idempotency_class)
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

    def get_many(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self._call(PLANE, "get_many", {"ids": list(ids)})
        return found

    def delete_many(self, ids: Sequence[str]) -> dict[str, int]:
        result: dict[str, int] = self._call(PLANE, "delete_many", {"ids": list(ids)})
        return result

    def describe_store(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call(PLANE, "describe_store", {})
        return result

    def health(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call(PLANE, "health", {})
        return result


class AsyncMemoryAPI:
    """The memory verbs of an ``AsyncClient``: the same as ``MemoryAPI``, awaited."""

    def __init__(self, call: Callable[[str, str, dict[str, Any]], Awaitable[Any]]) -> None:
        self._call = call

    async def upsert_many(
        self,
        records: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str,
        expected_revisions: Mapping[str, int] | None = None,
        idempotency_class: str | None = None,
    ) -> dict[str, Any]:
        args = upsert_args(records, idempotency_key, expected_revisions, idempotency_class)
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

    async def get_many(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = await self._call(PLANE, "get_many", {"ids": list(ids)})
        return found

    async def delete_many(self, ids: Sequence[str]) -> dict[str, int]:
        result: dict[str, int] = await self._call(PLANE, "delete_many", {"ids": list(ids)})
        return result

    async def describe_store(self) -> dict[str, Any]:
        result: dict[str, Any] = await self._call(PLANE, "describe_store", {})
        return result

    async def health(self) -> dict[str, Any]:
        result: dict[str, Any] = await self._call(PLANE, "health", {})
        return result
