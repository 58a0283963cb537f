"""The client's own HTTP/1.1 for asyncio: ``http11``'s requests and answers over asyncio
streams, for ``AsyncClient`` and a plain ``http://`` server."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections import deque
from collections.abc import Mapping

from ratatoskr.client import http11
from ratatoskr.client.http11 import (
    CONTINUE_WAIT,
    Endpoint,
    Head,
    IncompleteAnswer,
    StaleConnection,
    interim,
    request_head,
    resent,
    unsent,
)


class AsyncConnection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, endpoint: Endpoint) -> AsyncConnection:
        reader, writer = await asyncio.open_connection(endpoint.host, endpoint.port)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(reader, writer)

    async def exchange(self, head: bytes, body: bytes) -> tuple[int, bytes, bool]:
        try:
            if len(body) < http11.EXPECT_BODY:  # (read here: a test lowers it)
                self.writer.writelines([head, body])
            else:
                early = await self._ask(head)
                if early is not None:  # answered without the body (a 413): never sent
                    return early.status, await self._body(early), False
                self.writer.write(body)
            await self.writer.drain()
            raw = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if not exc.partial:
                raise StaleConnection("closed before answering") from exc
            raise IncompleteAnswer("the connection ended inside the answer's head") from exc
        except (ConnectionError, BrokenPipeError) as exc:
            raise StaleConnection(str(exc)) from exc
        except asyncio.LimitOverrunError as exc:
            raise IncompleteAnswer("the answer's head is too long") from exc
        parsed = Head.parse(raw[:-4])
        try:
            while interim(parsed.status):  # a 103 Early Hints, ...: the final answer follows
                parsed = await self._head()
            content = await self._body(parsed)
        except asyncio.IncompleteReadError as exc:
            raise IncompleteAnswer("the connection ended inside the answer") from exc
        except asyncio.LimitOverrunError as exc:
            raise IncompleteAnswer("the answer's head is too long") from exc
        return parsed.status, content, not parsed.close

    async def _head(self) -> Head:
        return Head.parse((await self.reader.readuntil(b"\r\n\r\n"))[:-4])

    async def _continue_or_final(self) -> Head:
        """The server's word on an ``Expect``: a ``100``, or the final answer's head (other
        interim answers skipped)."""
        parsed = await self._head()
        while interim(parsed.status) and parsed.status != 100:
            parsed = await self._head()
        return parsed

    async def _ask(self, head: bytes) -> Head | None:
        """``Connection._ask`` for asyncio."""
        self.writer.write(head)
        await self.writer.drain()
        try:
            parsed = await asyncio.wait_for(self._continue_or_final(), CONTINUE_WAIT)
        except TimeoutError:
            return None  # a server that ignores Expect: the body goes out now
        return None if parsed.status == 100 else parsed

    async def _body(self, head: Head) -> bytes:
        if head.chunked:
            parts: list[bytes] = []
            while True:
                line = await self.reader.readuntil(b"\r\n")
                size = int(line[:-2].split(b";")[0], 16)
                if size == 0:
                    while await self.reader.readuntil(b"\r\n") != b"\r\n":
                        pass  # trailers
                    return b"".join(parts)
                parts.append(await self.reader.readexactly(size))
                await self.reader.readexactly(2)
        if head.length is not None:
            return await self.reader.readexactly(head.length)
        return await self.reader.read()

    def close(self) -> None:
        self.writer.close()

    def let_go(self) -> None:
        """Close a connection of an event loop that is not the running one: from the loop's
        own thread if it runs elsewhere; else at once (``asyncio.run`` has closed it, so it
        will never call back: its transport's close is finished here, socket included,
        rather than left to the garbage collector's ``ResourceWarning``s)."""
        transport = self.writer.transport
        loop = getattr(transport, "_loop", None)
        if loop is None:
            return  # closed already
        if loop.is_running():
            loop.call_soon_threadsafe(transport.abort)
            return
        with contextlib.suppress(RuntimeError):
            transport.abort()  # marked closed; a closed loop refuses the callback
        if loop.is_closed():
            lost = getattr(transport, "_call_connection_lost", None)  # that callback
            if lost is not None:
                with contextlib.suppress(Exception):
                    lost(None)


DEFAULT_MAX_CONNECTIONS = 100


def checked_max_connections(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("max_connections must be an integer")
    if value < 1:
        raise ValueError("max_connections must be 1 or more")
    return value


class AsyncHttp11Pool:
    """``Http11Pool`` for asyncio: calls in flight at once each hold a connection, at most
    ``max_connections`` of them; a call beyond waits for one to be free (that wait counts
    in its ``timeout``). A connection is opened only when none is idle, so no more than
    ``max_connections`` are ever open, idle ones included."""

    def __init__(
        self, base_url: str, timeout: float, max_connections: int = DEFAULT_MAX_CONNECTIONS
    ) -> None:
        self.endpoint = Endpoint.of(base_url)
        self.timeout = timeout
        self.max_connections = checked_max_connections(max_connections)
        self.idle: deque[AsyncConnection] = deque()
        self.closed = False
        self.loop: asyncio.AbstractEventLoop | None = None  # the idle connections' loop
        self.slots: asyncio.Semaphore | None = None  # of that loop (a semaphore is bound)

    def _in_this_loop(self) -> None:
        """Idle connections of another event loop (an earlier ``asyncio.run``) cannot be
        used from this one: they are closed (``AsyncConnection.let_go``)."""
        loop = asyncio.get_running_loop()
        if self.loop is not loop:
            while self.idle:
                self.idle.pop().let_go()
            self.loop = loop
            self.slots = asyncio.Semaphore(self.max_connections)

    async def post(self, path: str, body: bytes, headers: Mapping[str, str]) -> tuple[int, bytes]:
        head = request_head(self.endpoint, path, headers, len(body))
        self._in_this_loop()
        assert self.slots is not None
        sending = False  # until then a failure (a connect, the wait for a slot) sent nothing
        try:
            async with asyncio.timeout(self.timeout), self.slots:
                if self.idle:
                    sending = True
                    try:
                        return await self._exchange(self.idle.pop(), head, body)
                    except StaleConnection:
                        pass
                    fresh = await AsyncConnection.open(self.endpoint)
                    return resent(await self._exchange(fresh, head, body))
                fresh = await AsyncConnection.open(self.endpoint)
                sending = True
                return await self._exchange(fresh, head, body)
        except OSError as exc:  # TimeoutError included
            if not sending:
                unsent(exc)
            raise

    async def _exchange(self, conn: AsyncConnection, head: bytes, body: bytes) -> tuple[int, bytes]:
        try:
            status, content, reusable = await conn.exchange(head, body)
        except BaseException:
            conn.close()
            raise
        if reusable and not self.closed:
            self.idle.append(conn)
        else:
            conn.close()
        return status, content

    async def aclose(self) -> None:
        self.closed = True
        self._in_this_loop()
        while self.idle:
            conn = self.idle.pop()
            conn.close()
            with contextlib.suppress(OSError):
                await conn.writer.wait_closed()
