"""``AsyncClient``: ``Client`` for asyncio, on one httpx connection pool."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol, Unpack

import httpx

from ratatoskr.client.affect import AsyncAffectAPI
from ratatoskr.client.base import ClientBase, ClientSettings
from ratatoskr.client.errors import (
    ClientClosed,
    RatatoskrError,
    TransportFailed,
    masked_url,
)
from ratatoskr.client.http11 import was_sent
from ratatoskr.client.http11_async import (
    DEFAULT_MAX_CONNECTIONS,
    AsyncHttp11Pool,
    checked_max_connections,
)
from ratatoskr.client.httpx_transport import AsyncHttpxTransport
from ratatoskr.client.memory import AsyncMemoryAPI
from ratatoskr.client.transport import (
    HANDSHAKE,
    HANDSHAKE_PLANE,
    Answer,
    Catalog,
    headers,
    prepare,
    read_answer,
    retry_delay,
)

DEFAULT_KEEPALIVE = 20  # httpx's own default: idle connections kept for https://


class AsyncTransport(Protocol):
    @property
    def closed(self) -> bool: ...
    async def post(
        self, path: str, body: bytes, headers: Mapping[str, str]
    ) -> tuple[int, bytes]: ...
    async def aclose(self) -> None: ...


class AsyncClient(ClientBase):
    """``Client``'s constructor, verbs and errors, each call awaited; ``http`` is an
    ``httpx.AsyncClient`` of the caller's, else its own connections (``await aclose()``, or
    ``async with``), used from one event loop. Calls may run concurrently; each gets its own
    connection from the pool, of at most ``max_connections`` (default 100; for an
    ``https://`` URL, the limit of its own httpx client, which keeps up to 20 idle): a call
    beyond waits for a connection to be free, within its ``timeout``.
    """

    def __init__(
        self,
        base_url: str,
        *,
        http: httpx.AsyncClient | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        **settings: Unpack[ClientSettings],
    ) -> None:
        super().__init__(base_url, **settings)
        timeout = self.timeout
        max_connections = checked_max_connections(max_connections)
        self.http = http
        self.transport: AsyncTransport
        if http is not None:
            self.transport = AsyncHttpxTransport(http, self.base_url, timeout)
        elif self.base_url.startswith("http://"):
            self.transport = AsyncHttp11Pool(self.base_url, timeout, max_connections)
        else:
            limits = httpx.Limits(
                max_connections=max_connections,
                max_keepalive_connections=min(max_connections, DEFAULT_KEEPALIVE),
            )
            own = httpx.AsyncClient(timeout=timeout, limits=limits)
            self.transport = AsyncHttpxTransport(own, self.base_url, timeout)
        self._owns_transport = http is None
        self._closed = False
        self.memory = AsyncMemoryAPI(self.call)
        self.affect = AsyncAffectAPI(self.call)
        self._handshaking = asyncio.Lock()  # concurrent first calls fetch it once

    def with_scope(self, scope: Mapping[str, str], actor: str | None = None) -> AsyncClient:
        """The same key for another scope (and actor), on the same connections."""
        child = AsyncClient(self.base_url, **self._scoped_settings(scope, actor))
        child.transport, child.http, child._owns_transport = self.transport, self.http, False
        child.catalog = self.catalog
        return child

    async def handshake(self, planes: Sequence[str] | None = None) -> dict[str, Any]:
        args = {} if planes is None else {"planes": list(planes)}
        result: dict[str, Any] = (await self._send(HANDSHAKE_PLANE, HANDSHAKE, args, None)).result
        if planes is None:
            self.catalog = Catalog.of(result)
        return result

    async def call(
        self,
        plane: str,
        verb: str,
        args: Mapping[str, Any] | None = None,
        *,
        request_id: str | None = None,
    ) -> Any:
        return (await self.send(plane, verb, args, request_id=request_id)).result

    async def send(
        self,
        plane: str,
        verb: str,
        args: Mapping[str, Any] | None = None,
        *,
        request_id: str | None = None,
    ) -> Answer:
        if plane == HANDSHAKE_PLANE or verb == HANDSHAKE:
            return await self._send(HANDSHAKE_PLANE, HANDSHAKE, args, request_id)
        if self.catalog is None:
            async with self._handshaking:
                if self.catalog is None:
                    await self.handshake()
        assert self.catalog is not None
        self.catalog.require(plane, verb)
        return await self._send(plane, verb, args, request_id)

    async def _send(
        self, plane: str, verb: str, args: Mapping[str, Any] | None, request_id: str | None
    ) -> Answer:
        if self._closed or self.transport.closed:
            raise ClientClosed
        prepared = prepare(plane, verb, args, request_id)
        retry = 0
        while True:
            try:
                status, content = await self.transport.post(
                    prepared.path, prepared.body, headers(prepared, self.tokens)
                )
            except OSError as exc:
                raise TransportFailed(
                    type(exc).__name__, self.base_url, sent=was_sent(exc)
                ) from exc
            try:
                return read_answer(status, content)
            except RatatoskrError as error:
                delay = retry_delay(error, retry, self.retry, self.rng, prepared)
                if delay is None:
                    raise
            await asyncio.sleep(delay)
            retry += 1

    async def aclose(self) -> None:
        """Close the client (its own connections; a client of ``with_scope`` or one given
        an httpx client leaves those open): a call after it raises ``ClientClosed``."""
        self._closed = True
        if self._owns_transport:
            await self.transport.aclose()

    async def close(self) -> None:
        """``aclose``, by the name the sync client's method has."""
        await self.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AsyncClient({masked_url(self.base_url)!r})"
