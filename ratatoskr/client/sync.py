"""``Client``: the Bifrost wire from blocking code, on one httpx connection pool."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol, Unpack

import httpx

from ratatoskr.client.affect import AffectAPI
from ratatoskr.client.base import ClientBase, ClientSettings
from ratatoskr.client.errors import (
    ClientClosed,
    RatatoskrError,
    TransportFailed,
    masked_url,
)
from ratatoskr.client.http11 import Http11Pool, was_sent
from ratatoskr.client.httpx_transport import HttpxTransport
from ratatoskr.client.memory import MemoryAPI
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


class Transport(Protocol):
    @property
    def closed(self) -> bool: ...
    def post(self, path: str, body: bytes, headers: Mapping[str, str]) -> tuple[int, bytes]: ...
    def close(self) -> None: ...


class Client(ClientBase):
    """A client of one ratatoskr server.

    Tokens: ``key=`` (the shared HS256 key, with ``scope=`` and ``actor=``) mints a fresh
    token per call, for development and tests; ``token_provider=f`` asks
    ``f(plane, verb, body_bytes)`` for each call's token (Heimdall, in production).

    ``retry``: how often a retryable error (503) is retried (a count, or a ``Retry``);
    ``timeout``: seconds per HTTP exchange. An ``http://`` server is spoken to over the
    client's own keep-alive connections (``http11``: a tenth of httpx's CPU per call),
    kept until ``close()``; ``http=`` an ``httpx.Client`` of the caller's (TLS, proxies,
    hooks; its own base URL is used) sends instead, as does an httpx client of its own
    for an ``https://`` URL.

    The first call fetches the handshake; a verb it does not list raises ``VerbNotListed``
    before anything is sent. Errors are raised as ``RatatoskrError`` subclasses.
    """

    def __init__(
        self,
        base_url: str,
        *,
        http: httpx.Client | None = None,
        **settings: Unpack[ClientSettings],
    ) -> None:
        super().__init__(base_url, **settings)
        timeout = self.timeout
        self.http = http
        self.transport: Transport = (
            HttpxTransport(http, self.base_url, timeout)
            if http is not None
            else Http11Pool(self.base_url, timeout)
            if self.base_url.startswith("http://")
            else HttpxTransport(httpx.Client(timeout=timeout), self.base_url, timeout, own=True)
        )
        self._owns_transport = http is None
        self._closed = False
        self.memory = MemoryAPI(self.call)
        self.affect = AffectAPI(self.call)

    def with_scope(self, scope: Mapping[str, str], actor: str | None = None) -> Client:
        """The same key for another scope (and actor), on the same connections."""
        child = Client(self.base_url, **self._scoped_settings(scope, actor))
        child.transport, child.http, child._owns_transport = self.transport, self.http, False
        child.catalog = self.catalog
        return child

    # -- calls -------------------------------------------------------------------------

    def handshake(self, planes: Sequence[str] | None = None) -> dict[str, Any]:
        """The server's handshake (and, for all planes, the verbs every call is checked
        against from now on)."""
        args = {} if planes is None else {"planes": list(planes)}
        result: dict[str, Any] = self._send(HANDSHAKE_PLANE, HANDSHAKE, args, None).result
        if planes is None:
            self.catalog = Catalog.of(result)
        return result

    def call(
        self,
        plane: str,
        verb: str,
        args: Mapping[str, Any] | None = None,
        *,
        request_id: str | None = None,
    ) -> Any:
        """Any verb by name: its result."""
        return self.send(plane, verb, args, request_id=request_id).result

    def send(
        self,
        plane: str,
        verb: str,
        args: Mapping[str, Any] | None = None,
        *,
        request_id: str | None = None,
    ) -> Answer:
        """Any verb by name: its result and the request id it was answered with."""
        if plane == HANDSHAKE_PLANE or verb == HANDSHAKE:
            return self._send(HANDSHAKE_PLANE, HANDSHAKE, args, request_id)
        if self.catalog is None:
            self.handshake()
        assert self.catalog is not None
        self.catalog.require(plane, verb)
        return self._send(plane, verb, args, request_id)

    def _send(
        self, plane: str, verb: str, args: Mapping[str, Any] | None, request_id: str | None
    ) -> Answer:
        if self._closed or self.transport.closed:
            raise ClientClosed
        prepared = prepare(plane, verb, args, request_id)
        retry = 0
        while True:
            try:
                status, content = self.transport.post(
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
            time.sleep(delay)
            retry += 1

    # -- lifetime ----------------------------------------------------------------------

    def close(self) -> None:
        """Close the client (its own connections; a client of ``with_scope`` or one given
        an httpx client leaves those open): a call after it raises ``ClientClosed``."""
        self._closed = True
        if self._owns_transport:
            self.transport.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({masked_url(self.base_url)!r})"
