"""``client.affect``: the affect plane's verbs, with the wire's argument names and results,
and iterators that follow ``next_cursor`` to the end (``iter_list``, ``iter_events``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from ratatoskr.client.encoding import batch_args, drop_none, sequence_arg
from ratatoskr.client.planes import AsyncPlaneAPI, PlaneAPI

PLANE = "affect"
Scope = Mapping[str, str]
LIST_PAGE = 500  # the server's max_list_limit
EVENTS_PAGE = 1000  # its max_read_limit


def append_args(
    events: Sequence[Mapping[str, Any]], idempotency_key: str, idempotency_class: str | None
) -> dict[str, Any]:
    return drop_none(
        events=sequence_arg(events, "events"),
        idempotency_key=idempotency_key,
        idempotency_class=idempotency_class,
    )


class AffectAPI(PlaneAPI):
    """The affect verbs of a ``Client``."""

    PLANE = PLANE

    def put_many(
        self,
        records: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str,
        expected_revisions: Mapping[str, int] | None = None,
        idempotency_class: str | None = None,
    ) -> dict[str, Any]:
        """Write states at once: ``{"written": n, "replayed": bool}``."""
        args = batch_args(records, idempotency_key, expected_revisions, idempotency_class)
        result: dict[str, Any] = self._call(PLANE, "put_many", args)
        return result

    def get(self, id: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self._call(PLANE, "get", {"id": id})
        return found

    def list(
        self,
        *,
        limit: int = 100,
        scope_all: Scope | None = None,
        scope_any: Sequence[Scope] | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """One page of states: ``{"records": [...], "next_cursor": str | None}``."""
        args = drop_none(limit=limit, scope_all=scope_all, scope_any=scope_any, cursor=cursor)
        page: dict[str, Any] = self._call(PLANE, "list", args)
        return page

    def iter_list(
        self,
        *,
        scope_all: Scope | None = None,
        scope_any: Sequence[Scope] | None = None,
        page_size: int = LIST_PAGE,
    ) -> Iterator[dict[str, Any]]:
        """Every state the filter admits, page after page until ``next_cursor`` is null."""
        cursor: str | None = None
        while True:
            page = self.list(
                limit=page_size, scope_all=scope_all, scope_any=scope_any, cursor=cursor
            )
            yield from page["records"]
            cursor = page.get("next_cursor")
            if cursor is None:
                return

    def append_events(
        self,
        events: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str,
        idempotency_class: str | None = None,
    ) -> dict[str, Any]:
        """Append to the event log: ``{"appended": n, "replayed": bool}``."""
        args = append_args(events, idempotency_key, idempotency_class)
        result: dict[str, Any] = self._call(PLANE, "append_events", args)
        return result

    def read_events(
        self,
        *,
        limit: int = 100,
        scope_all: Scope | None = None,
        scope_any: Sequence[Scope] | None = None,
        since: str | None = None,
        until: str | None = None,
        order: str | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """One page of events: ``{"events": [...], "next_cursor": str | None}``."""
        args = drop_none(
            limit=limit,
            scope_all=scope_all,
            scope_any=scope_any,
            since=since,
            until=until,
            order=order,
            cursor=cursor,
        )
        page: dict[str, Any] = self._call(PLANE, "read_events", args)
        return page

    def iter_events(
        self,
        *,
        scope_all: Scope | None = None,
        scope_any: Sequence[Scope] | None = None,
        since: str | None = None,
        until: str | None = None,
        order: str | None = None,
        page_size: int = EVENTS_PAGE,
    ) -> Iterator[dict[str, Any]]:
        """Every event the filter admits, in order, following ``next_cursor`` to the end."""
        cursor: str | None = None
        while True:
            page = self.read_events(
                limit=page_size,
                scope_all=scope_all,
                scope_any=scope_any,
                since=since,
                until=until,
                order=order,
                cursor=cursor,
            )
            yield from page["events"]
            cursor = page.get("next_cursor")
            if cursor is None:
                return


class AsyncAffectAPI(AsyncPlaneAPI):
    """The affect verbs of an ``AsyncClient``: the same as ``AffectAPI``, awaited."""

    PLANE = PLANE

    async def put_many(
        self,
        records: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str,
        expected_revisions: Mapping[str, int] | None = None,
        idempotency_class: str | None = None,
    ) -> dict[str, Any]:
        args = batch_args(records, idempotency_key, expected_revisions, idempotency_class)
        result: dict[str, Any] = await self._call(PLANE, "put_many", args)
        return result

    async def get(self, id: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = await self._call(PLANE, "get", {"id": id})
        return found

    async def list(
        self,
        *,
        limit: int = 100,
        scope_all: Scope | None = None,
        scope_any: Sequence[Scope] | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        args = drop_none(limit=limit, scope_all=scope_all, scope_any=scope_any, cursor=cursor)
        page: dict[str, Any] = await self._call(PLANE, "list", args)
        return page

    async def iter_list(
        self,
        *,
        scope_all: Scope | None = None,
        scope_any: Sequence[Scope] | None = None,
        page_size: int = LIST_PAGE,
    ) -> AsyncIterator[dict[str, Any]]:
        cursor: str | None = None
        while True:
            page = await self.list(
                limit=page_size, scope_all=scope_all, scope_any=scope_any, cursor=cursor
            )
            for record in page["records"]:
                yield record
            cursor = page.get("next_cursor")
            if cursor is None:
                return

    async def append_events(
        self,
        events: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str,
        idempotency_class: str | None = None,
    ) -> dict[str, Any]:
        args = append_args(events, idempotency_key, idempotency_class)
        result: dict[str, Any] = await self._call(PLANE, "append_events", args)
        return result

    async def read_events(
        self,
        *,
        limit: int = 100,
        scope_all: Scope | None = None,
        scope_any: Sequence[Scope] | None = None,
        since: str | None = None,
        until: str | None = None,
        order: str | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        args = drop_none(
            limit=limit,
            scope_all=scope_all,
            scope_any=scope_any,
            since=since,
            until=until,
            order=order,
            cursor=cursor,
        )
        page: dict[str, Any] = await self._call(PLANE, "read_events", args)
        return page

    async def iter_events(
        self,
        *,
        scope_all: Scope | None = None,
        scope_any: Sequence[Scope] | None = None,
        since: str | None = None,
        until: str | None = None,
        order: str | None = None,
        page_size: int = EVENTS_PAGE,
    ) -> AsyncIterator[dict[str, Any]]:
        cursor: str | None = None
        while True:
            page = await self.read_events(
                limit=page_size,
                scope_all=scope_all,
                scope_any=scope_any,
                since=since,
                until=until,
                order=order,
                cursor=cursor,
            )
            for event in page["events"]:
                yield event
            cursor = page.get("next_cursor")
            if cursor is None:
                return
