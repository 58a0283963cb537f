"""What the two planes' verb namespaces share: the call they send through, and the verbs
both planes serve alike (``get_many``, ``delete_many``, ``describe_store``, ``health``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, ClassVar

from ratatoskr.client.encoding import id_list


class PlaneAPI:
    """A plane's verbs on a ``Client``; ``PLANE`` names the plane."""

    PLANE: ClassVar[str]

    def __init__(self, call: Callable[[str, str, dict[str, Any]], Any]) -> None:
        self._call = call

    def get_many(self, ids: Iterable[str]) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self._call(self.PLANE, "get_many", {"ids": id_list(ids)})
        return found

    def delete_many(self, ids: Iterable[str]) -> dict[str, int]:
        result: dict[str, int] = self._call(self.PLANE, "delete_many", {"ids": id_list(ids)})
        return result

    def describe_store(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call(self.PLANE, "describe_store", {})
        return result

    def health(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call(self.PLANE, "health", {})
        return result


class AsyncPlaneAPI:
    """``PlaneAPI`` for an ``AsyncClient``: the same verbs, awaited."""

    PLANE: ClassVar[str]

    def __init__(self, call: Callable[[str, str, dict[str, Any]], Awaitable[Any]]) -> None:
        self._call = call

    async def get_many(self, ids: Iterable[str]) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = await self._call(
            self.PLANE, "get_many", {"ids": id_list(ids)}
        )
        return found

    async def delete_many(self, ids: Iterable[str]) -> dict[str, int]:
        result: dict[str, int] = await self._call(self.PLANE, "delete_many", {"ids": id_list(ids)})
        return result

    async def describe_store(self) -> dict[str, Any]:
        result: dict[str, Any] = await self._call(self.PLANE, "describe_store", {})
        return result

    async def health(self) -> dict[str, Any]:
        result: dict[str, Any] = await self._call(self.PLANE, "health", {})
        return result
